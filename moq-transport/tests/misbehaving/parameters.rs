//! A raw peer that sends bad parameters: not allowed in the message, unknown, a length that does
//! not match, bad property filters, authorization token aliases (draft-19 §10.2).

use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::{Message, Parameters, RequestUpdate, SubscribeNamespace, SubscribeTracks};
use moq_core::{Location, Properties};
use moq_transport::SessionConfig;
use moq_transport::track::SubscribeResponse;

use crate::common::raw::{encode, frame, frame_with_len, put_namespace, put_vi, vi};
use crate::common::timeout;
use crate::support::{
    PROTOCOL_VIOLATION, REQUEST_UPDATE, SUBSCRIBE_NAMESPACE, V19, expect_close, ns, our_client,
    property_filter_params, raw_client, raw_client_with, request_closes,
    subscribe_with_property_filter,
};

/// A hand-built SUBSCRIBE_NAMESPACE body: Request ID 0, prefix ("a"), then `params` as given
/// (starting with Number of Parameters).
fn subscribe_namespace_body(params: &[u8]) -> Vec<u8> {
    let mut body = vi(0);
    put_namespace(&mut body, &[b"a"]);
    body.extend_from_slice(params);
    body
}

/// draft-19 §10.2.1: a Message Parameter in a message not listed for it (FILL_TIMEOUT 0x0A in
/// SUBSCRIBE_NAMESPACE) closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn parameter_not_allowed_in_the_message() {
    timeout(async {
        // The hand-built body matches the encoder's output without parameters.
        let plain = SubscribeNamespace {
            request_id: 0,
            prefix: ns(&["a"]),
            params: Default::default(),
        };
        assert_eq!(
            frame(SUBSCRIBE_NAMESPACE, &subscribe_namespace_body(&vi(0))),
            encode(plain, V19)
        );
        let mut params = vi(1);
        put_vi(&mut params, 0x0A);
        put_vi(&mut params, 5);
        let bytes = frame(SUBSCRIBE_NAMESPACE, &subscribe_namespace_body(&params));
        request_closes(&bytes, PROTOCOL_VIOLATION, "0xa may not appear").await;
    })
    .await;
}

/// draft-19 §10.2: an unknown Message Parameter (0x0C) closes the session with
/// PROTOCOL_VIOLATION; parameters are never skipped.
#[tokio::test]
async fn unknown_parameter() {
    timeout(async {
        let mut params = vi(1);
        put_vi(&mut params, 0x0C);
        put_vi(&mut params, 5);
        let bytes = frame(SUBSCRIBE_NAMESPACE, &subscribe_namespace_body(&params));
        request_closes(&bytes, PROTOCOL_VIOLATION, "parameter 0xc").await;
    })
    .await;
}

/// draft-19 §10: a Message Length that does not match the body (one byte too long, or one byte
/// too short) closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn length_does_not_match_the_body() {
    timeout(async {
        let body = subscribe_namespace_body(&vi(0));
        let len = u16::try_from(body.len()).unwrap();
        let mut padded = body.clone();
        padded.push(0x00);
        for bytes in [
            frame_with_len(SUBSCRIBE_NAMESPACE, len + 1, &padded),
            frame_with_len(SUBSCRIBE_NAMESPACE, len - 1, &body),
        ] {
            request_closes(&bytes, PROTOCOL_VIOLATION, "SUBSCRIBE_NAMESPACE").await;
        }
    })
    .await;
}

/// draft-19 §10.2.13, §5.1.3: an OBJECT_PROPERTY_FILTER with an odd Property Type is rejected
/// with REQUEST_ERROR INVALID_FILTER, a request-level error: the session stays open.
#[tokio::test]
async fn odd_property_type_in_a_filter_is_invalid_filter() {
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        let answer = |bytes: Vec<u8>| {
            let raw = &raw;
            async move {
                let (_send, mut resp) = raw.open_request(&bytes).await;
                let m = resp.expect().await;
                assert!(resp.next().await.unwrap().is_none(), "FIN after the error");
                m
            }
        };
        // An even property type decodes: there is just no such track here.
        match answer(subscribe_with_property_filter(0, 2)).await {
            Message::RequestError(e) => assert_eq!(e.code, RequestErrorCode::DOES_NOT_EXIST),
            m => panic!("{m:?}"),
        }
        match answer(subscribe_with_property_filter(2, 3)).await {
            Message::RequestError(e) => assert_eq!(e.code, RequestErrorCode::INVALID_FILTER),
            m => panic!("{m:?}"),
        }
        // The session is still open and serves the next request.
        let next = SubscribeNamespace {
            request_id: 4,
            prefix: ns(&["a"]),
            params: Default::default(),
        };
        let (_send, mut resp) = raw.open_request(&encode(next, V19)).await;
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        assert!(session.close_reason().is_none());
        assert!(raw.is_open());
    })
    .await;
}

/// draft-19 §10.2.1: a response carrying a Message Parameter its message may not have (here
/// SUBSCRIBE_OK with GROUP_ORDER 0x22, as a pre-final draft-18 peer sends it) closes the session
/// on the requesting side too, and the request fails.
#[tokio::test]
async fn subscribe_ok_with_a_parameter_not_allowed() {
    use moq_core::FullTrackName;
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let name = FullTrackName::new(ns(&["p"]), "t").unwrap();
        let request = {
            let s = session.clone();
            tokio::spawn(async move { s.subscribe(name, Parameters::default()).await })
        };
        let (mut send, _reader, msg) = raw.accept_request().await;
        assert!(matches!(msg, Message::Subscribe(_)), "{msg:?}");
        // Track Alias 5, one parameter: GROUP_ORDER (uint8) = 1; no Track Properties.
        let mut body = vi(5);
        put_vi(&mut body, 1);
        put_vi(&mut body, 0x22);
        body.push(1);
        send.write_all(&frame(0x04, &body)).await.unwrap();
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "0x22 may not appear").await;
        assert!(request.await.unwrap().is_err());
    })
    .await;
}

/// Parameters carrying one AUTHORIZATION_TOKEN.
fn with_token(t: moq_core::AuthToken) -> Parameters {
    Parameters {
        authorization_tokens: vec![t],
        ..Default::default()
    }
}

fn register(alias: u64) -> moq_core::AuthToken {
    moq_core::AuthToken::Register {
        alias,
        token_type: 0,
        value: Bytes::from(format!("token-{alias}")),
    }
}

/// Expects REQUEST_OK (`ok`) or a REQUEST_ERROR with `code` next on `r`.
async fn expect_answer(r: &mut crate::common::raw::MsgReader, code: Option<RequestErrorCode>) {
    match (r.expect().await, code) {
        (Message::RequestOk(_), None) => {}
        (Message::RequestError(e), Some(c)) => assert_eq!(e.code, c),
        (m, c) => panic!("{} where {c:?} was expected", m.name()),
    }
}

/// draft-19 §10.2.2: an alias REGISTERed by a message that causes no session error is
/// registered "even if the message fails for other reasons": in a REQUEST_UPDATE of a FETCH
/// and of a SUBSCRIBE_TRACKS, and in a request refused with GOING_AWAY after our GOAWAY. A
/// later USE_ALIAS of each is valid.
#[tokio::test]
async fn token_aliases_are_never_lost() {
    use moq_core::FullTrackName;
    use moq_core::message::{Fetch, FetchType, TrackStatus};
    use moq_transport::track::{FetchEnd, Incoming};
    timeout(async {
        let (raw, session, _srv) =
            raw_client_with(SessionConfig::default().with_requests(), V19).await;
        let v = V19;
        let namespaces = SubscribeNamespace {
            request_id: 0,
            prefix: ns(&["a"]),
            params: Parameters::default(),
        };
        let (mut ns_send, mut ns_resp) = raw.open_request(&encode(namespaces, v)).await;
        expect_answer(&mut ns_resp, None).await;

        // A FETCH, answered; a REQUEST_UPDATE on it registers alias 1.
        let name = FullTrackName::new(ns(&["x"]), "t").unwrap();
        let fetch = Fetch {
            request_id: 2,
            fetch_type: FetchType::Standalone {
                track: name,
                start: Location::new(0, 0),
                end: Location::new(1, 0),
            },
            params: Parameters::default(),
        };
        let (mut f_send, mut f_resp) = raw.open_request(&encode(fetch, v)).await;
        let _writer = match session.incoming().next().await {
            Some(Incoming::Fetch(f)) => f
                .accept(FetchEnd {
                    end_of_track: false,
                    end: Location::new(1, 0),
                    track_properties: Properties::new(),
                })
                .await
                .unwrap(),
            other => panic!("{other:?}"),
        };
        assert!(matches!(f_resp.expect().await, Message::FetchOk(_)));
        let update = RequestUpdate {
            request_id: 4,
            params: with_token(register(1)),
        };
        f_send.write_all(&encode(update, v)).await.unwrap();
        expect_answer(&mut f_resp, None).await;

        // A SUBSCRIBE_TRACKS, answered; a REQUEST_UPDATE on it registers alias 2.
        let tracks = SubscribeTracks {
            request_id: 6,
            prefix: ns(&["p"]),
            params: Parameters::default(),
        };
        let (mut t_send, mut t_resp) = raw.open_request(&encode(tracks, v)).await;
        let _responder = match session.incoming().next().await {
            Some(Incoming::SubscribeTracks(r)) => r.accept().await.unwrap(),
            other => panic!("{other:?}"),
        };
        expect_answer(&mut t_resp, None).await;
        let update = RequestUpdate {
            request_id: 8,
            params: with_token(register(2)),
        };
        t_send.write_all(&encode(update, v)).await.unwrap();
        expect_answer(&mut t_resp, None).await;

        // After our GOAWAY a TRACK_STATUS is refused, but its REGISTER of alias 3 stands.
        session.goaway("", Duration::ZERO).await.unwrap();
        let status = TrackStatus {
            request_id: 10,
            track: FullTrackName::new(ns(&["x"]), "t").unwrap(),
            params: with_token(register(3)),
        };
        let (_s_send, mut s_resp) = raw.open_request(&encode(status, v)).await;
        expect_answer(&mut s_resp, Some(RequestErrorCode::GOING_AWAY)).await;

        // Every alias is known: using them does not close the session.
        let update = RequestUpdate {
            request_id: 12,
            params: Parameters {
                authorization_tokens: (1..=3)
                    .map(|alias| moq_core::AuthToken::UseAlias { alias })
                    .collect(),
                ..Default::default()
            },
        };
        ns_send.write_all(&encode(update, v)).await.unwrap();
        expect_answer(&mut ns_resp, None).await;
        assert!(raw.is_open() && session.close_reason().is_none());

        // An alias never registered closes the session with UNKNOWN_AUTH_TOKEN_ALIAS.
        let update = RequestUpdate {
            request_id: 14,
            params: with_token(moq_core::AuthToken::UseAlias { alias: 9 }),
        };
        ns_send.write_all(&encode(update, v)).await.unwrap();
        expect_close(
            &raw,
            &session,
            SessionErrorCode::UNKNOWN_AUTH_TOKEN_ALIAS,
            "alias 9",
        )
        .await;
    })
    .await;
}

/// draft-19 §5.1.3, §10.9.1, §10.3.1.6: a REQUEST_UPDATE with an invalid Range Filter (an odd
/// property type), or one that takes the subscription's filters past MAX_FILTER_RANGES in
/// all, is refused with REQUEST_ERROR INVALID_FILTER and the subscription ends with
/// PUBLISH_DONE UPDATE_FAILED; the session stays open.
#[tokio::test]
async fn invalid_filter_in_an_update_fails_the_subscription() {
    use moq_transport::track::Incoming;
    timeout(async {
        // Each case: the update's parameter block.
        let two_more_ranges = {
            let mut p = vi(1);
            put_vi(&mut p, 0x26); // OBJECTID_FILTER: SetID 0, two ranges
            let mut f = vec![0u8];
            for x in [0, 1, 4, 1] {
                put_vi(&mut f, x);
            }
            put_vi(&mut p, f.len() as u64);
            p.extend(f);
            p
        };
        for update_params in [property_filter_params(3), two_more_ranges] {
            let config = SessionConfig {
                max_filter_ranges: 2,
                ..SessionConfig::default().with_requests()
            };
            let (raw, session, _srv) = raw_client_with(config, V19).await;
            // The SUBSCRIBE carries one range (property type 2, [0, 5]).
            let (mut send, mut resp) = raw
                .open_request(&subscribe_with_property_filter(0, 2))
                .await;
            let Some(Incoming::Subscribe(r)) = session.incoming().next().await else {
                panic!("no SUBSCRIBE");
            };
            let _writer = r.accept(SubscribeResponse::default()).await.unwrap();
            assert!(matches!(resp.expect().await, Message::SubscribeOk(_)));
            let mut body = vi(2);
            body.extend(&update_params);
            send.write_all(&frame(REQUEST_UPDATE, &body)).await.unwrap();
            match resp.expect().await {
                Message::RequestError(e) => assert_eq!(e.code, RequestErrorCode::INVALID_FILTER),
                m => panic!("{m:?}"),
            }
            match resp.expect().await {
                Message::PublishDone(d) => {
                    assert_eq!(d.status, moq_core::codes::PublishDoneCode::UPDATE_FAILED)
                }
                m => panic!("{m:?}"),
            }
            assert!(
                resp.next().await.unwrap().is_none(),
                "FIN after PUBLISH_DONE"
            );
            assert!(raw.is_open() && session.close_reason().is_none());
        }
    })
    .await;
}
