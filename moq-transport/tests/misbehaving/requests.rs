//! A raw peer that misuses request streams and Request IDs: wrong parity, duplicates, streams that
//! start wrong, early streams, too many updates, FIN after a request, limits, a joining FETCH ahead
//! of its SUBSCRIBE (draft-19 §3.3, §10.1, §10.9).

use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::{
    Message, Namespace, Parameters, PublishNamespace, RequestOk, RequestUpdate, SetupOptions,
    SubscribeNamespace, SubscribeTracks,
};
use moq_core::{Location, Properties, Version};
use moq_transport::track::{Incoming, SubscribeResponse};
use moq_transport::{Error, SessionConfig};

use crate::common::raw::{RawConn, RawServer, encode, frame, raw_setup, vi};
use crate::common::{TestServer, timeout};
use crate::support::{
    PROTOCOL_VIOLATION, REQUEST_UPDATE, V18, V19, expect_close, ns, property_filter_params,
    quic_code, raw_client, raw_client_with, request_closes, subscribe_with_property_filter,
};

/// True if `r` is our own refusal to send (`Error::Invalid`).
fn invalid<T>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::Invalid(_)))
}

/// draft-19 §10.1: a client's Request IDs are even; an odd one from the client closes the
/// session with INVALID_REQUEST_ID.
#[tokio::test]
async fn request_id_of_the_wrong_parity() {
    timeout(async {
        let request = SubscribeNamespace {
            request_id: 1,
            prefix: ns(&["a"]),
            params: Default::default(),
        };
        request_closes(
            &encode(request, V19),
            SessionErrorCode::INVALID_REQUEST_ID,
            "wrong parity",
        )
        .await;
    })
    .await;
}

/// draft-17 (NOTES.md B.4): a Required Request ID Delta names the request Request ID - 2 x
/// Delta; one below 0 closes the session with INVALID_REQUIRED_REQUEST_ID.
#[tokio::test]
async fn required_request_id_below_zero_at_draft_17() {
    timeout(async {
        let v = Version::Draft17;
        let (raw, session, _srv) = raw_client(v).await;
        let request = SubscribeNamespace {
            request_id: 0,
            prefix: ns(&["a"]),
            params: Default::default(),
        };
        let mut frame = encode(request, v);
        // Type (1 byte), length (2), Request ID 0 (1), then the Delta: 0 - 2 x 1 < 0.
        assert_eq!(frame[4], 0, "the Delta we send");
        frame[4] = 1;
        let _request = raw.open_request(&frame).await;
        expect_close(
            &raw,
            &session,
            SessionErrorCode::INVALID_REQUIRED_REQUEST_ID,
            "Required Request ID",
        )
        .await;
    })
    .await;
}

/// draft-19 §10.1: Request IDs are never reused, across request types; a duplicate on a second
/// request stream closes the session with INVALID_REQUEST_ID.
#[tokio::test]
async fn duplicate_request_id() {
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        let first = PublishNamespace {
            request_id: 0,
            namespace: ns(&["p"]),
            params: Default::default(),
        };
        let (_send, mut resp) = raw.open_request(&encode(first, V19)).await;
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        let again = SubscribeNamespace {
            request_id: 0,
            prefix: ns(&["a"]),
            params: Default::default(),
        };
        let _request = raw.open_request(&encode(again, V19)).await;
        expect_close(
            &raw,
            &session,
            SessionErrorCode::INVALID_REQUEST_ID,
            "duplicate",
        )
        .await;
    })
    .await;
}

/// draft-19 §3.3: a request stream must begin with one of the seven request messages; one that
/// begins with NAMESPACE closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn request_stream_starting_with_a_response_message() {
    timeout(async {
        let bytes = encode(
            Namespace {
                suffix: ns(&["x"]),
                cluster: None,
            },
            V19,
        );
        request_closes(&bytes, PROTOCOL_VIOLATION, "starts with NAMESPACE").await;
    })
    .await;
}

/// draft-19 §3.3, §10.9: REQUEST_UPDATE is not one of the seven messages that may begin a
/// request stream, so a stream beginning with it closes the session with PROTOCOL_VIOLATION,
/// even when its parameters would otherwise only reject the request (an invalid Range Filter).
#[tokio::test]
async fn request_stream_starting_with_request_update() {
    timeout(async {
        // With an even property type the body decodes and the stream is refused for its first
        // message; with an odd one the body fails to decode first, which must not be mistaken
        // for a request-level INVALID_FILTER.
        for (property_type, hint) in [(2, "starts with REQUEST_UPDATE"), (3, "invalid filter")] {
            let mut body = vi(0);
            body.extend(property_filter_params(property_type));
            request_closes(&frame(REQUEST_UPDATE, &body), PROTOCOL_VIOLATION, hint).await;
        }
    })
    .await;
}

/// draft-19 §3.3: request streams that arrive before SETUP SHOULD be buffered; ours are held
/// and answered once the peer's SETUP arrives.
#[tokio::test]
async fn request_stream_before_setup_is_held() {
    timeout(async {
        let srv = TestServer::start(SessionConfig::default());
        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), V19).await;
        let request = PublishNamespace {
            request_id: 0,
            namespace: ns(&["early"]),
            params: Default::default(),
        };
        let (_send, mut resp) = raw.open_request(&encode(request, V19)).await;
        // Nothing tells the raw side that our server has taken the stream in, so give it a
        // moment (loopback: far more than enough); it must not answer before SETUP.
        let early = tokio::time::timeout(Duration::from_millis(200), resp.next()).await;
        assert!(early.is_err(), "answered before SETUP: {early:?}");
        let (_, session) = tokio::join!(raw.handshake(raw_setup()), srv.server.accept());
        let session = session.unwrap();
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        assert!(session.announced().contains(&ns(&["early"])));
        assert!(session.close_reason().is_none());
        assert!(raw.is_open());
    })
    .await;
}

/// draft-19 §3.3: a peer MAY reset request streams that arrive before SETUP instead of
/// buffering them; ours holds up to `max_pending_streams` and resets the rest with
/// EXCESSIVE_LOAD, then answers the ones it held once SETUP arrives.
#[tokio::test]
async fn early_streams_beyond_the_limit_are_reset() {
    timeout(async {
        let mut config = SessionConfig::default();
        config.limits.max_pending_streams = 1;
        let srv = TestServer::start(config);
        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), V19).await;
        let publish = |request_id, name| {
            let request = PublishNamespace {
                request_id,
                namespace: ns(&[name]),
                params: Default::default(),
            };
            encode(request, V19)
        };
        let (_a_send, mut a) = raw.open_request(&publish(0, "a")).await;
        let (_b_send, mut b) = raw.open_request(&publish(2, "b")).await;
        // Our server takes whichever stream it handles first; the other one is reset. The reset
        // also proves the held one arrived before SETUP.
        let (reset, mut held, held_ns) = tokio::select! {
            r = a.next() => (r, b, "b"),
            r = b.next() => (r, a, "a"),
        };
        let code = quic_code(StreamResetCode::EXCESSIVE_LOAD);
        assert!(
            matches!(reset, Err(quinn::ReadError::Reset(c)) if c == code),
            "{reset:?}"
        );
        let (_, session) = tokio::join!(raw.handshake(raw_setup()), srv.server.accept());
        let session = session.unwrap();
        assert!(matches!(held.expect().await, Message::RequestOk(_)));
        assert!(session.announced().contains(&ns(&[held_ns])));
        assert!(session.close_reason().is_none());
    })
    .await;
}

/// draft-19 §10.3.1.7: more REQUEST_UPDATEs outstanding on one request stream than the
/// MAX_REQUEST_UPDATES we announced closes the session with TOO_MANY_REQUEST_UPDATES.
#[tokio::test]
async fn too_many_request_updates() {
    timeout(async {
        let config = SessionConfig {
            max_request_updates: 1,
            ..Default::default()
        };
        let mut srv = TestServer::start(config);
        let (raw, options, session) = RawConn::to_server(&mut srv, V19).await;
        assert_eq!(options.max_request_updates, Some(1));
        let request = PublishNamespace {
            request_id: 0,
            namespace: ns(&["u"]),
            params: Default::default(),
        };
        let (mut send, mut resp) = raw.open_request(&encode(request, V19)).await;
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        let update = |request_id| {
            encode(
                RequestUpdate {
                    request_id,
                    params: Default::default(),
                },
                V19,
            )
        };
        // One at a time is within the limit.
        send.write_all(&update(2)).await.unwrap();
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        // Three without waiting for answers. One write, so they reach our server together and
        // it sees all three outstanding when it handles the first.
        let three: Vec<u8> = [4, 6, 8].into_iter().flat_map(update).collect();
        send.write_all(&three).await.unwrap();
        expect_close(
            &raw,
            &session,
            SessionErrorCode::TOO_MANY_REQUEST_UPDATES,
            "REQUEST_UPDATEs outstanding",
        )
        .await;
    })
    .await;
}

/// draft-19 §10.12.2: a Joining FETCH names a SUBSCRIBE that travels on another stream, so it
/// may arrive first; it is answered once the SUBSCRIBE is there, not refused as an unknown
/// Joining Request ID.
#[tokio::test]
async fn joining_fetch_that_overtakes_its_subscribe() {
    use moq_core::FullTrackName;
    use moq_core::message::{Fetch, FetchType, Subscribe};
    use moq_transport::track::{FetchEnd, Incoming, SubscribeResponse};
    timeout(async {
        let config = SessionConfig {
            accept_requests: true,
            ..Default::default()
        };
        let (raw, session, _srv) = raw_client_with(config, V19).await;
        let name = FullTrackName::new(ns(&["join"]), "t").unwrap();
        let fetch = Fetch {
            request_id: 2,
            fetch_type: FetchType::RelativeJoining {
                joining_request_id: 0,
                joining_start: 1,
            },
            params: Default::default(),
        };
        let (_f, mut fetch_resp) = raw.open_request(&encode(fetch, V19)).await;
        // Not synchronisation: the gap makes the FETCH reach our server before the SUBSCRIBE.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let subscribe = Subscribe {
            request_id: 0,
            track: name.clone(),
            params: Default::default(),
        };
        let (_s, mut sub_resp) = raw.open_request(&encode(subscribe, V19)).await;
        let incoming = session.incoming();
        let _writer = match incoming.next().await.unwrap() {
            Incoming::Subscribe(s) => s
                .accept(SubscribeResponse {
                    largest: Some(Location::new(5, 2)),
                    ..Default::default()
                })
                .await
                .unwrap(),
            other => panic!("{other:?}"),
        };
        assert!(matches!(sub_resp.expect().await, Message::SubscribeOk(_)));
        match incoming.next().await.unwrap() {
            Incoming::Fetch(f) => {
                // Start {5 - 1, 0}, End {5, 2 + 1}.
                assert_eq!(
                    (f.start(), f.end()),
                    (Location::new(4, 0), Location::new(5, 3))
                );
                let end = FetchEnd {
                    end_of_track: false,
                    end: f.end(),
                    track_properties: Properties::new(),
                };
                f.accept(end).await.unwrap().finish();
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(fetch_resp.expect().await, Message::FetchOk(_)));
    })
    .await;
}

/// SUBSCRIBE_NAMESPACE or SUBSCRIBE_TRACKS for (a).
fn discovery_request(tracks: bool, request_id: u64, v: Version) -> Vec<u8> {
    let prefix = ns(&["a"]);
    let params = Parameters::default();
    if tracks {
        encode(
            SubscribeTracks {
                request_id,
                prefix,
                params,
            },
            v,
        )
    } else {
        encode(
            SubscribeNamespace {
                request_id,
                prefix,
                params,
            },
            v,
        )
    }
}

/// draft-18 §6.1: a requester's FIN cancels its SUBSCRIBE_NAMESPACE or SUBSCRIBE_TRACKS (the
/// responder ends its half and the prefix is free again); from draft-19 a FIN only ends the
/// requester's half (§3.3.2), so the prefix stays taken and a second request for it is
/// PREFIX_OVERLAP.
#[tokio::test]
async fn fin_after_a_discovery_request() {
    timeout(async {
        for tracks in [false, true] {
            for v in [V18, V19] {
                let (raw, session, _srv) =
                    raw_client_with(SessionConfig::default().with_requests(), v).await;
                // The application accepts every SUBSCRIBE_TRACKS.
                let responder = session.clone();
                let _answers = tokio::spawn(async move {
                    let mut held = Vec::new();
                    while let Some(Incoming::SubscribeTracks(r)) = responder.incoming().next().await
                    {
                        held.push(r.accept().await);
                    }
                });
                let (mut send, mut resp) = raw.open_request(&discovery_request(tracks, 0, v)).await;
                let what = format!("{v}, tracks: {tracks}");
                let first = resp.expect().await;
                assert!(matches!(first, Message::RequestOk(_)), "{what}: {first:?}");
                send.finish().unwrap();
                if v.fin_cancels_discovery() {
                    assert!(resp.next().await.unwrap().is_none(), "{what}: no FIN back");
                }
                let (_send, mut resp) = raw.open_request(&discovery_request(tracks, 2, v)).await;
                match (v.fin_cancels_discovery(), resp.expect().await) {
                    (true, Message::RequestOk(_)) => {}
                    (false, Message::RequestError(e)) => {
                        assert_eq!(e.code, RequestErrorCode::PREFIX_OVERLAP, "{what}")
                    }
                    (_, other) => panic!("{what}: {other:?}"),
                }
            }
        }
    })
    .await;
}

/// draft-19 §3.3.2: "A requester, with the exception of the sender of PUBLISH, MAY FIN
/// immediately after sending a message": a SUBSCRIBE followed at once by FIN is answered when
/// the application decides (a relay decides only once its upstream answered), not cancelled.
#[tokio::test]
async fn subscribe_then_fin_is_still_answered() {
    timeout(async {
        let (raw, session, _srv) =
            raw_client_with(SessionConfig::default().with_requests(), V19).await;
        let (mut send, mut resp) = raw
            .open_request(&subscribe_with_property_filter(0, 2))
            .await;
        send.finish().unwrap();
        let Some(Incoming::Subscribe(r)) = session.incoming().next().await else {
            panic!("no SUBSCRIBE");
        };
        let response = SubscribeResponse {
            track_alias: None,
            largest: None,
            expires: None,
            track_properties: Properties::new(),
        };
        let _writer = r.accept(response).await.unwrap();
        assert!(matches!(resp.expect().await, Message::SubscribeOk(_)));
    })
    .await;
}

/// draft-19 §10.2.2, §10.3.1.4, §10.3.1.6: the peer's limits bind what we send, so our own
/// requests never make it close the session: a REGISTER past its MAX_AUTH_TOKEN_CACHE_SIZE
/// (counting what we registered before), of an alias it holds, or a USE_ALIAS of one it does
/// not, and more Range Filter ranges than its MAX_FILTER_RANGES, in any request or
/// REQUEST_UPDATE, are refused locally with `Error::Invalid` and never sent.
#[tokio::test]
async fn the_peers_limits_bind_what_we_send() {
    use moq_core::AuthToken;
    use moq_core::message::{FetchType, SubscribeOk};
    timeout(async {
        let raw_srv = RawServer::start(&[V19]);
        let client = raw_srv.client(vec![V19]);
        let options = SetupOptions {
            max_auth_token_cache_size: Some(40),
            max_filter_ranges: Some(1),
            ..raw_setup()
        };
        let (session, raw) = raw_srv.connect(&client, options).await;
        let session = session.unwrap();
        let token = |t: AuthToken| Parameters {
            authorization_tokens: vec![t],
            ..Default::default()
        };
        let reg = |alias: u64, len: usize| AuthToken::Register {
            alias,
            token_type: 0,
            value: Bytes::from(vec![b'x'; len]),
        };
        // 16 + 30 bytes does not fit in 40.
        assert!(invalid(
            session
                .subscribe_namespace_with(ns(&["a"]), token(reg(1, 30)))
                .await
        ));
        assert!(invalid(
            session
                .subscribe_namespace_with(ns(&["a"]), token(AuthToken::UseAlias { alias: 1 }))
                .await
        ));
        // Two filter ranges where the peer allows one.
        let two_ranges = Parameters {
            range_filters: vec![moq_core::RangeFilterParam {
                kind: moq_core::RangeFilterKind::ObjectId,
                filter: Some(moq_core::RangeFilter {
                    set_id: 0,
                    property_type: None,
                    ranges: vec![
                        moq_core::FilterRange {
                            start: 0,
                            end: Some(1),
                        },
                        moq_core::FilterRange {
                            start: 4,
                            end: Some(5),
                        },
                    ],
                }),
            }],
            ..Default::default()
        };
        let fetch = FetchType::Standalone {
            track: moq_core::FullTrackName::new(ns(&["a"]), "t").unwrap(),
            start: Location::new(0, 0),
            end: Location::new(1, 0),
        };
        assert!(invalid(session.fetch(fetch, two_ranges.clone()).await));

        // A REGISTER that fits (16 + 10) goes out; the first request the raw peer sees.
        let name = moq_core::FullTrackName::new(ns(&["a"]), "t").unwrap();
        let pending = {
            let s = session.clone();
            let (name, params) = (name.clone(), token(reg(1, 10)));
            tokio::spawn(async move { s.subscribe(name, params).await })
        };
        let (mut send, mut reader, first) = raw.accept_request().await;
        assert!(matches!(first, Message::Subscribe(_)));
        let ok = SubscribeOk {
            track_alias: 0,
            params: Parameters::default(),
            track_properties: Properties::new(),
        };
        send.write_all(&encode(ok, V19)).await.unwrap();
        let sub = pending.await.unwrap().unwrap();
        // The same alias again, or 16 + 10 more bytes (52 > 40): refused before sending.
        assert!(invalid(sub.update(token(reg(1, 1))).await));
        assert!(invalid(sub.update(token(reg(2, 10))).await));
        assert!(invalid(sub.update(two_ranges).await));
        // USE_ALIAS of the registered one goes out.
        let update = {
            let sub = &sub;
            async move { sub.update(token(AuthToken::UseAlias { alias: 1 })).await }
        };
        let answer = async {
            assert!(matches!(reader.expect().await, Message::RequestUpdate(_)));
            let ok = RequestOk {
                params: Parameters::default(),
                track_properties: Properties::new(),
            };
            send.write_all(&encode(ok, V19)).await.unwrap();
        };
        let (r, ()) = tokio::join!(update, answer);
        r.unwrap();
        assert!(session.close_reason().is_none() && raw.is_open());
    })
    .await;
}
