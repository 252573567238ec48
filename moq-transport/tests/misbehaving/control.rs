//! A raw peer that misuses the control stream, SETUP and GOAWAY: unknown stream and datagram types,
//! a second control stream or SETUP, PATH / AUTHORITY, padding, GOAWAY's Request ID and what it
//! refuses (draft-19 §3.3, §3.4, §10.3, §10.4, §11.5).

use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::{
    Goaway, Message, Parameters, RequestOk, Setup, SetupOptions, SubscribeNamespace,
};
use moq_core::{Properties, Version};
use moq_transport::{Error, SessionConfig};

use crate::common::raw::{RawConn, RawServer, encode, frame, raw_setup, vi};
use crate::common::{TestServer, case, timeout};
use crate::support::{
    PROTOCOL_VIOLATION, V18, V19, assert_closed_with, expect_close, ns, our_client, quic_code,
    raw_client, raw_client_with,
};

/// draft-19 §3.4: a unidirectional stream of unknown type (0x01) MUST close the session; ours
/// closes it with PROTOCOL_VIOLATION.
#[tokio::test]
async fn unknown_unidirectional_stream_type() {
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        let _stream = raw.open_uni(&[0x01, 0x00, 0x00]).await;
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "stream type").await;
    })
    .await;
}

/// draft-19 §3.3: each peer opens one control stream; ours closes the session with
/// PROTOCOL_VIOLATION when the peer opens a second.
#[tokio::test]
async fn second_control_stream() {
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        let setup = encode(
            Setup {
                options: raw_setup(),
            },
            V19,
        );
        let _stream = raw.open_uni(&setup).await;
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "second control stream").await;
    })
    .await;
}

/// draft-19 §3.3: closing the control stream (FIN, or a reset) closes the session with
/// PROTOCOL_VIOLATION.
#[tokio::test]
async fn control_stream_closed() {
    timeout(async {
        for reset in [false, true] {
            let (mut raw, session, _srv) = raw_client(V19).await;
            let control = raw.control.as_mut().unwrap();
            let hint = if reset {
                control
                    .reset(quic_code(StreamResetCode::CANCELLED))
                    .unwrap();
                "reset its control stream"
            } else {
                control.finish().unwrap();
                "closed its control stream"
            };
            expect_close(&raw, &session, PROTOCOL_VIOLATION, hint).await;
        }
    })
    .await;
}

/// draft-19 §11: a datagram of unknown type (0x30: bit 0x10 set, so no OBJECT_DATAGRAM, and not
/// PADDING) MUST close the session; ours closes it with PROTOCOL_VIOLATION.
#[tokio::test]
async fn unknown_datagram_type() {
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        raw.send_datagram(&[0x30, 0x00, 0x00, 0x00]);
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "datagram type").await;
    })
    .await;
}

/// draft-19 §3.3, §10: the control stream begins with SETUP and otherwise carries only GOAWAY;
/// ours closes the session with PROTOCOL_VIOLATION on a second SETUP.
#[tokio::test]
async fn second_setup_on_the_control_stream() {
    timeout(async {
        let (mut raw, session, _srv) = raw_client(V19).await;
        let setup = encode(
            Setup {
                options: raw_setup(),
            },
            V19,
        );
        raw.write_control(&setup).await;
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "second SETUP").await;
    })
    .await;
}

/// draft-19 §10: an unknown control message type (0x11) MUST close the session; ours closes it
/// with PROTOCOL_VIOLATION (here on the control stream after SETUP).
#[tokio::test]
async fn unknown_message_type_on_the_control_stream() {
    timeout(async {
        let (mut raw, session, _srv) = raw_client(V19).await;
        raw.write_control(&frame(0x11, &[])).await;
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "message type 0x11").await;
    })
    .await;
}

/// draft-19 §10.4: a client's GOAWAY must carry an empty New Session URI; a server receiving a
/// non-empty one closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn client_goaway_with_a_uri() {
    timeout(async {
        let (mut raw, session, _srv) = raw_client(V19).await;
        let goaway = Goaway {
            new_session_uri: Bytes::from_static(b"moqt://elsewhere.example/moq"),
            timeout_ms: 0,
            request_id: None,
        };
        raw.write_control(&encode(goaway, V19)).await;
        expect_close(
            &raw,
            &session,
            PROTOCOL_VIOLATION,
            "GOAWAY with a New Session URI",
        )
        .await;
    })
    .await;
}

/// draft-19 §10.4: at most one GOAWAY on the control stream; a second closes the session with
/// PROTOCOL_VIOLATION.
#[tokio::test]
async fn second_goaway_on_the_control_stream() {
    timeout(async {
        let (mut raw, session, _srv) = raw_client(V19).await;
        let goaway = encode(Goaway::default(), V19);
        raw.write_control(&goaway).await;
        let info = session.wait_goaway().await.expect("the first GOAWAY");
        assert!(info.new_session_uri.is_empty());
        assert!(session.close_reason().is_none());
        raw.write_control(&goaway).await;
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "second GOAWAY").await;
    })
    .await;
}

/// draft-19 §10.3.1.2: a PATH that is not `path-abempty [ "?" query ]` closes the session with
/// MALFORMED_PATH (a well-formed one is accepted).
#[tokio::test]
async fn malformed_path() {
    timeout(async {
        let srv = TestServer::start(SessionConfig::default());
        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), V19).await;
        let options = SetupOptions {
            path: Some(Bytes::from_static(b"/moq?room=1")),
            ..raw_setup()
        };
        let (_, session) = tokio::join!(raw.handshake(options), srv.server.accept());
        assert_eq!(session.unwrap().info().path.as_deref(), Some("/moq?room=1"));

        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), V19).await;
        raw.send_setup(SetupOptions {
            path: Some(Bytes::from_static(b"moq")),
            ..raw_setup()
        })
        .await;
        assert_eq!(raw.closed_code().await, SessionErrorCode::MALFORMED_PATH);
    })
    .await;
}

/// draft-19 §10.3.1.1: an AUTHORITY that is not an RFC 3986 authority with a host (":443")
/// closes the session with MALFORMED_AUTHORITY.
#[tokio::test]
async fn malformed_authority() {
    timeout(async {
        let srv = TestServer::start(SessionConfig::default());
        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), V19).await;
        raw.send_setup(SetupOptions {
            authority: Some(Bytes::from_static(b":443")),
            ..raw_setup()
        })
        .await;
        assert_eq!(
            raw.closed_code().await,
            SessionErrorCode::MALFORMED_AUTHORITY
        );
    })
    .await;
}

/// draft-19 §10.3.1.1-2: PATH and AUTHORITY are client-only; a server's SETUP carrying PATH
/// closes the session with INVALID_PATH, one carrying AUTHORITY with INVALID_AUTHORITY.
#[tokio::test]
async fn path_or_authority_from_the_server() {
    timeout(async {
        let cases = [
            (
                SetupOptions {
                    path: Some(Bytes::from_static(b"/x")),
                    ..raw_setup()
                },
                SessionErrorCode::INVALID_PATH,
            ),
            (
                SetupOptions {
                    authority: Some(Bytes::from_static(b"example.com")),
                    ..raw_setup()
                },
                SessionErrorCode::INVALID_AUTHORITY,
            ),
        ];
        for (options, code) in cases {
            let raw_srv = RawServer::start(&[V19]);
            let client = raw_srv.client(vec![V19]);
            let (res, raw) = raw_srv.connect(&client, options).await;
            assert_closed_with(&res.unwrap_err(), code);
            assert_eq!(raw.closed_code().await, code);
        }
    })
    .await;
}

/// draft-18 §10.4: the Request ID in a control-stream GOAWAY names one of the receiver's
/// requests; a server's GOAWAY to our client with an odd (server-parity) Request ID closes the
/// session with INVALID_REQUEST_ID (an even one is accepted).
#[tokio::test]
async fn draft18_goaway_request_id_of_the_wrong_parity() {
    timeout(async {
        for (request_id, valid) in [(2, true), (1, false)] {
            let (session, mut raw, _srv) = our_client(V18).await;
            assert_eq!(session.version(), V18);
            let goaway = Goaway {
                new_session_uri: Bytes::new(),
                timeout_ms: 0,
                request_id: Some(request_id),
            };
            raw.write_control(&encode(goaway, V18)).await;
            if valid {
                assert!(session.wait_goaway().await.is_some());
                assert!(session.close_reason().is_none());
            } else {
                expect_close(
                    &raw,
                    &session,
                    SessionErrorCode::INVALID_REQUEST_ID,
                    "GOAWAY Request ID",
                )
                .await;
            }
        }
    })
    .await;
}

/// draft-19 §11.5: the receiver discards a padding stream's data (type 0x132B3E28, then zeros)
/// so it does not exhaust flow control: 8 MiB, far more than one stream's receive window, can
/// only be written if our side reads it away. A padding datagram (0x132B3E29) is discarded too;
/// the session stays open and answers the next request.
#[tokio::test]
async fn padding_streams_and_datagrams_are_discarded() {
    use moq_core::data::{Datagram, PADDING_STREAM_TYPE};
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        raw.send_datagram(&Datagram::padding(64, V19));
        let mut stream = raw.open_uni(&vi(PADDING_STREAM_TYPE)).await;
        let zeros = vec![0u8; 64 * 1024];
        for _ in 0..128 {
            stream.write_all(&zeros).await.unwrap();
        }
        stream.finish().unwrap();
        let request = SubscribeNamespace {
            request_id: 0,
            prefix: ns(&["after", "padding"]),
            params: Default::default(),
        };
        let (_send, mut resp) = raw.open_request(&encode(request, V19)).await;
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        assert!(session.close_reason().is_none());
        assert!(raw.is_open());
    })
    .await;
}

/// A SUBSCRIBE for `(goaway)/t{id}` with Request ID `id`.
fn plain_subscribe(id: u64, v: Version) -> Vec<u8> {
    let track = moq_core::FullTrackName::new(ns(&["goaway"]), format!("t{id}")).unwrap();
    encode(
        moq_core::message::Subscribe {
            request_id: id,
            track,
            params: Parameters::default(),
        },
        v,
    )
}

/// draft-18 §10.4: our control-stream GOAWAY carries the smallest peer Request ID not (or
/// maybe not) processed, here the hole at 2 left by requests 0 and 4; requests at or above it
/// that arrive later are refused with GOING_AWAY. Draft-19 carries no Request ID and refuses
/// every request after the GOAWAY.
#[tokio::test]
async fn goaway_request_id_and_what_it_refuses() {
    use moq_transport::track::Incoming;
    for v in [V18, V19] {
        case(format!("{v:?}"), async {
            let (mut raw, session, _srv) =
                raw_client_with(SessionConfig::default().with_requests(), v).await;
            // Requests 0 and 4 are seen (the application holds them unanswered).
            let _r0 = raw.open_request(&plain_subscribe(0, v)).await;
            let _r4 = raw.open_request(&plain_subscribe(4, v)).await;
            let mut held = Vec::new();
            for _ in 0..2 {
                match session.incoming().next().await {
                    Some(Incoming::Subscribe(s)) => held.push(s),
                    other => panic!("{other:?}"),
                }
            }
            session.goaway("", Duration::ZERO).await.unwrap();
            let control = raw.peer_control.as_mut().unwrap();
            match control.expect().await {
                Message::Goaway(g) => {
                    let want = (v == V18).then_some(2);
                    assert_eq!(g.request_id, want, "{v}");
                }
                m => panic!("{}", m.name()),
            }
            // Request 2 comes after the GOAWAY: refused with GOING_AWAY either way.
            let (_s2, mut r2) = raw.open_request(&plain_subscribe(2, v)).await;
            match r2.expect().await {
                Message::RequestError(e) => assert_eq!(e.code, RequestErrorCode::GOING_AWAY),
                m => panic!("{}", m.name()),
            }
            assert!(session.close_reason().is_none());
        })
        .await;
    }
}

/// draft-18 §10.4: a server's control-stream GOAWAY whose Request ID is at or below one of our
/// unanswered requests ends that request with GoingAway (not processed: re-issue it
/// elsewhere); a request below the ID still gets its answer. A Request ID on a request-stream
/// GOAWAY is a PROTOCOL_VIOLATION.
#[tokio::test]
async fn draft18_goaway_request_id_ends_unprocessed_requests() {
    timeout(async {
        let (session, mut raw, _srv) = our_client(V18).await;
        let first = {
            let s = session.clone();
            tokio::spawn(async move { s.subscribe_namespace(ns(&["a"])).await })
        };
        let (mut send0, _reader0, m0) = raw.accept_request().await;
        assert_eq!(m0.request().unwrap().0, 0);
        let second = {
            let s = session.clone();
            tokio::spawn(async move { s.subscribe_namespace(ns(&["b"])).await })
        };
        let (_send2, _reader2, m2) = raw.accept_request().await;
        assert_eq!(m2.request().unwrap().0, 2);
        let goaway = Goaway {
            new_session_uri: Bytes::new(),
            timeout_ms: 0,
            request_id: Some(2),
        };
        raw.write_control(&encode(goaway, V18)).await;
        assert!(matches!(
            second.await.unwrap().unwrap_err(),
            Error::GoingAway
        ));
        let ok = RequestOk {
            params: Parameters::default(),
            track_properties: Properties::new(),
        };
        send0.write_all(&encode(ok, V18)).await.unwrap();
        let _ = first.await.unwrap().unwrap();
        assert!(session.close_reason().is_none());
    })
    .await;
}

/// draft-19 §10.4: "A GOAWAY MAY also be sent on a request stream to initiate migration of
/// that individual request": one that comes before the response ends the request with
/// [`Error::Moved`] carrying the URI (the requester re-issues it there), the session stays
/// open; without a URI it is re-issued on the same session. A draft-18 request-stream GOAWAY
/// carrying a Request ID (only the control-stream form
/// has one) closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn goaway_on_a_request_stream_before_its_response() {
    for (v, request_id) in [(V19, None), (V18, None), (V18, Some(0))] {
        case(format!("{v:?} {request_id:?}"), async {
            let (session, raw, _srv) = our_client(v).await;
            let pending = {
                let s = session.clone();
                tokio::spawn(async move { s.subscribe_namespace(ns(&["a"])).await })
            };
            let (mut send, _reader, _first) = raw.accept_request().await;
            let goaway = Goaway {
                new_session_uri: Bytes::from_static(b"moqt://elsewhere:4443/x"),
                timeout_ms: 1500,
                request_id,
            };
            send.write_all(&encode(goaway, v)).await.unwrap();
            let err = pending.await.unwrap().unwrap_err();
            if request_id.is_some() {
                expect_close(&raw, &session, PROTOCOL_VIOLATION, "Request ID").await;
                return; // the next case
            }
            match err {
                Error::Moved {
                    new_session_uri,
                    timeout,
                } => {
                    assert_eq!(new_session_uri, "moqt://elsewhere:4443/x");
                    assert_eq!(timeout, Duration::from_millis(1500));
                }
                e => panic!("{v}: {e:?}"),
            }
            assert!(session.close_reason().is_none(), "{v}");
        })
        .await;
    }
    timeout(async {
        // Without a URI the request is re-issued on the same session, with a new Request ID.
        let (session, raw, _srv) = our_client(V19).await;
        let pending = {
            let s = session.clone();
            tokio::spawn(async move { s.subscribe_namespace(ns(&["a"])).await })
        };
        let (mut send, _reader, first) = raw.accept_request().await;
        let goaway = Goaway {
            new_session_uri: Bytes::new(),
            timeout_ms: 0,
            request_id: None,
        };
        send.write_all(&encode(goaway, V19)).await.unwrap();
        let (mut again, _reader, second) = raw.accept_request().await;
        assert_eq!(first.request().unwrap().0, 0);
        assert_eq!(second.request().unwrap().0, 2);
        assert!(matches!(second, Message::SubscribeNamespace(_)));
        let ok = RequestOk {
            params: Parameters::default(),
            track_properties: Properties::new(),
        };
        again.write_all(&encode(ok, V19)).await.unwrap();
        let _ = pending.await.unwrap().unwrap();
    })
    .await;
}
