//! Misbehaving peers over loopback QUIC: one side is our `Session`, the other a raw quinn peer
//! (tests/common/raw.rs) that writes arbitrary bytes. Each test checks the session close code our
//! side chose, read on the raw side from the QUIC CONNECTION_CLOSE, and that our own handles end
//! with the same error; or, for request-level errors, that the session stays open.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::raw::{
    RawConn, RawServer, encode, frame, frame_with_len, put_namespace, put_vi, raw_setup, vi,
};
use common::{TestServer, case, timeout};
use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::{
    Goaway, Message, Namespace, NamespaceDone, Parameters, PublishNamespace, RequestError,
    RequestOk, RequestUpdate, Setup, SetupOptions, SubscribeNamespace, SubscribeTracks,
};
use moq_core::{Location, Properties, TrackNamespace, Version};
use moq_transport::namespace::{NamespaceEvent, NamespaceSubscription};
use moq_transport::track::{Incoming, SubscribeResponse};
use moq_transport::{Error, Session, SessionConfig};

const V19: Version = Version::Draft19;
const V18: Version = Version::Draft18;
const PROTOCOL_VIOLATION: SessionErrorCode = SessionErrorCode::PROTOCOL_VIOLATION;

/// SUBSCRIBE_NAMESPACE's message type.
const SUBSCRIBE_NAMESPACE: u64 = 0x50;
/// SUBSCRIBE's message type.
const SUBSCRIBE: u64 = 0x03;
/// REQUEST_UPDATE's message type.
const REQUEST_UPDATE: u64 = 0x02;

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

/// Asserts `err` is our side closing the session with `code` (not the peer, not the transport).
#[track_caller]
fn assert_closed_with(err: &Error, code: SessionErrorCode) {
    assert!(
        matches!(err, Error::Violation { .. } | Error::Decode(_)),
        "expected a violation detected by our side, got {err:?}"
    );
    assert_eq!(err.session_code(), code, "{err}");
}

/// True if `r` is our own refusal to send (`Error::Invalid`).
fn invalid<T>(r: Result<T, Error>) -> bool {
    matches!(r, Err(Error::Invalid(_)))
}

/// Waits until our `session` has closed the connection with `code`, checked on both ends. The
/// reason phrase must contain `hint`, so that a catch-all code such as PROTOCOL_VIOLATION is
/// known to come from the rule under test.
async fn expect_close(raw: &RawConn, session: &Session, code: SessionErrorCode, hint: &str) {
    let (got, reason) = raw.closed().await;
    assert_eq!(got, code, "close code seen by the raw peer ({reason})");
    assert!(reason.contains(hint), "{reason:?} should mention {hint:?}");
    assert_closed_with(&session.closed().await, code);
}

/// One of our servers with `config` and a raw client that finished SETUP with it.
async fn raw_client_with(
    config: SessionConfig,
    version: Version,
) -> (RawConn, Session, TestServer) {
    let mut srv = TestServer::start(config);
    let (raw, _, session) = RawConn::to_server(&mut srv, version).await;
    (raw, session, srv)
}

async fn raw_client(version: Version) -> (RawConn, Session, TestServer) {
    raw_client_with(SessionConfig::default(), version).await
}

/// One of our clients that finished SETUP with a raw server.
async fn our_client(version: Version) -> (Session, RawConn, RawServer) {
    let raw_srv = RawServer::start(&[version]);
    let client = raw_srv.client(vec![version]);
    let (session, raw) = raw_srv.connect(&client, raw_setup()).await;
    (session.unwrap(), raw, raw_srv)
}

/// A raw client opens one request stream carrying `first`; our server must close with `code`.
async fn request_closes(first: &[u8], code: SessionErrorCode, hint: &str) {
    let (raw, session, _srv) = raw_client(V19).await;
    let _request = raw.open_request(first).await;
    expect_close(&raw, &session, code, hint).await;
}

async fn next_event(sub: &mut NamespaceSubscription) -> NamespaceEvent {
    sub.next()
        .await
        .expect("subscription ended")
        .expect("subscription failed")
}

fn quic_code(code: StreamResetCode) -> quinn::VarInt {
    quinn::VarInt::from_u64(code.0).unwrap()
}

/// A hand-built SUBSCRIBE_NAMESPACE body: Request ID 0, prefix ("a"), then `params` as given
/// (starting with Number of Parameters).
fn subscribe_namespace_body(params: &[u8]) -> Vec<u8> {
    let mut body = vi(0);
    put_namespace(&mut body, &[b"a"]);
    body.extend_from_slice(params);
    body
}

/// draft-19 §10.18: a NAMESPACE_DONE for a suffix the publisher never sent in NAMESPACE closes
/// the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn namespace_done_before_its_namespace() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let (sub, _streams) = tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
            let (mut send, recv, first) = raw.accept_request().await;
            assert!(
                matches!(&first, Message::SubscribeNamespace(m) if m.request_id == 0),
                "{first:?}"
            );
            let mut bytes = encode(RequestOk::default(), V19);
            bytes.extend(encode(
                NamespaceDone {
                    suffix: ns(&["never"]),
                },
                V19,
            ));
            send.write_all(&bytes).await.unwrap();
            (send, recv)
        });
        let mut sub = sub.unwrap();
        let err = sub.next().await.expect("an error item").unwrap_err();
        assert_closed_with(&err, PROTOCOL_VIOLATION);
        assert!(sub.next().await.is_none());
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "NAMESPACE_DONE").await;
    })
    .await;
}

/// draft-19 §10.18: the first message on a SUBSCRIBE_NAMESPACE response stream must be
/// REQUEST_OK or REQUEST_ERROR; a NAMESPACE first closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn namespace_before_request_ok() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let (res, _streams) = tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
            let (mut send, recv, _) = raw.accept_request().await;
            let bytes = encode(
                Namespace {
                    suffix: ns(&["x"]),
                    cluster: None,
                },
                V19,
            );
            send.write_all(&bytes).await.unwrap();
            (send, recv)
        });
        assert_closed_with(&res.unwrap_err(), PROTOCOL_VIOLATION);
        expect_close(
            &raw,
            &session,
            PROTOCOL_VIOLATION,
            "NAMESPACE before the response",
        )
        .await;
    })
    .await;
}

/// draft-19 §6.2: PUBLISH_NAMESPACE gets exactly one REQUEST_OK or REQUEST_ERROR and the
/// publisher SHOULD close the session on more; ours closes it with PROTOCOL_VIOLATION on a
/// second REQUEST_OK with no REQUEST_UPDATE outstanding.
#[tokio::test]
async fn second_request_ok_for_publish_namespace() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let (res, _streams) = tokio::join!(session.publish_namespace(ns(&["p"])), async {
            let (mut send, recv, first) = raw.accept_request().await;
            assert!(
                matches!(&first, Message::PublishNamespace(m) if m.namespace == ns(&["p"])),
                "{first:?}"
            );
            let mut bytes = encode(RequestOk::default(), V19);
            bytes.extend(encode(RequestOk::default(), V19));
            send.write_all(&bytes).await.unwrap();
            (send, recv)
        });
        let published = res.unwrap();
        assert_closed_with(&published.ended().await, PROTOCOL_VIOLATION);
        assert!(!published.is_active());
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "second REQUEST_OK").await;
    })
    .await;
}

/// draft-19 §10.2.1, §10.5: a REQUEST_OK answering SUBSCRIBE_NAMESPACE may carry only the
/// parameters listed for SUBSCRIBE_NAMESPACE_OK (not LARGEST_OBJECT) and no Track Properties
/// (those belong to TRACK_STATUS_OK); either closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn request_ok_with_contents_not_allowed_for_its_request() {
    timeout(async {
        let largest = RequestOk {
            params: Parameters {
                largest_object: Some(Location {
                    group: 1,
                    object: 0,
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let with_properties = RequestOk {
            track_properties: Properties::new().with_int(0x3e, 1).unwrap(),
            ..Default::default()
        };
        for (ok, hint) in [
            (largest, "0x9 may not appear"),
            (with_properties, "track properties"),
        ] {
            let (session, raw, _srv) = our_client(V19).await;
            let (res, _streams) = tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
                let (mut send, recv, _) = raw.accept_request().await;
                send.write_all(&encode(ok, V19)).await.unwrap();
                (send, recv)
            });
            assert_closed_with(&res.unwrap_err(), PROTOCOL_VIOLATION);
            expect_close(&raw, &session, PROTOCOL_VIOLATION, hint).await;
        }
    })
    .await;
}

/// draft-19 §10.18: a FIN or RESET_STREAM on the SUBSCRIBE_NAMESPACE response stream SHOULD count
/// as a NAMESPACE_DONE for every active namespace; the subscription then ends (after a reset,
/// with the reset code as its last item) and the session stays open.
#[tokio::test]
async fn response_stream_end_removes_every_namespace() {
    timeout(async {
        for reset in [true, false] {
            let (session, raw, _srv) = our_client(V19).await;
            let (sub, (mut send, _recv)) =
                tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
                    let (mut send, recv, _) = raw.accept_request().await;
                    let mut bytes = encode(RequestOk::default(), V19);
                    bytes.extend(encode(Namespace { suffix: ns(&["x"]), cluster: None }, V19));
                    bytes.extend(encode(Namespace { suffix: ns(&["y"]), cluster: None }, V19));
                    send.write_all(&bytes).await.unwrap();
                    (send, recv)
                });
            let mut sub = sub.unwrap();
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Added(ns(&["a", "x"]))
            );
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Added(ns(&["a", "y"]))
            );
            // Both NAMESPACEs have been read, so a reset cannot discard them in flight.
            if reset {
                send.reset(quic_code(StreamResetCode::EXPIRED_AUTH_TOKEN))
                    .unwrap();
            } else {
                send.finish().unwrap();
            }
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Removed(ns(&["a", "x"]))
            );
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Removed(ns(&["a", "y"]))
            );
            if reset {
                let err = sub.next().await.expect("the reset code").unwrap_err();
                assert!(
                    matches!(err, Error::Cancelled(StreamResetCode::EXPIRED_AUTH_TOKEN)),
                    "{err:?}"
                );
            }
            assert!(sub.next().await.is_none(), "reset={reset}");

            // The session is still open: a new request gets its answer.
            assert!(session.close_reason().is_none(), "reset={reset}");
            let (res, _streams) = tokio::join!(session.subscribe_namespace(ns(&["b"])), async {
                let (mut send, recv, _) = raw.accept_request().await;
                let refusal = RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "none");
                send.write_all(&encode(refusal, V19)).await.unwrap();
                send.finish().unwrap();
                (send, recv)
            });
            assert!(
                matches!(res, Err(Error::Rejected(ref e)) if e.code == RequestErrorCode::DOES_NOT_EXIST),
                "{res:?}"
            );
            assert!(raw.is_open());
        }
    })
    .await;
}

/// draft-19 §2.4.1, §10.18: a Track Namespace Prefix has at most 32 fields; 33 closes the
/// session with PROTOCOL_VIOLATION (32 is accepted).
#[tokio::test]
async fn prefix_of_33_fields() {
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        let prefix = |id: u64, n: usize| {
            let mut body = vi(id);
            put_namespace(&mut body, &vec![&b"f"[..]; n]);
            put_vi(&mut body, 0);
            frame(SUBSCRIBE_NAMESPACE, &body)
        };
        let (_send, mut resp) = raw.open_request(&prefix(0, 32)).await;
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        let _request = raw.open_request(&prefix(2, 33)).await;
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "33 fields").await;
    })
    .await;
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

/// A parameter block (Number of Parameters included) with one OBJECT_PROPERTY_FILTER (0x28):
/// SetID 0, `property_type`, one range [0, 5].
fn property_filter_params(property_type: u64) -> Vec<u8> {
    let mut params = vi(1); // Number of Parameters
    put_vi(&mut params, 0x28); // OBJECT_PROPERTY_FILTER
    let mut filter = vec![0u8]; // SetID
    put_vi(&mut filter, property_type);
    put_vi(&mut filter, 0); // Start
    put_vi(&mut filter, 5); // End - Start
    put_vi(&mut params, filter.len() as u64);
    params.extend(filter);
    params
}

/// A hand-built SUBSCRIBE for track ("a")/"t" carrying [`property_filter_params`].
fn subscribe_with_property_filter(request_id: u64, property_type: u64) -> Vec<u8> {
    let mut body = vi(request_id);
    put_namespace(&mut body, &[b"a"]);
    put_vi(&mut body, 1);
    body.push(b't');
    body.extend(property_filter_params(property_type));
    frame(SUBSCRIBE, &body)
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
async fn expect_answer(r: &mut common::raw::MsgReader, code: Option<RequestErrorCode>) {
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

/// draft-19 §10.9.2: after a TRACK_NAMESPACE_PREFIX update is accepted, NAMESPACE_DONE
/// suffixes are relative to the new prefix; one for a namespace announced under the old
/// prefix and still under the new one is valid (it was active), not a PROTOCOL_VIOLATION.
/// Namespaces outside the new prefix are reported removed at the move.
#[tokio::test]
async fn namespace_done_after_a_prefix_update() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let pending = {
            let s = session.clone();
            tokio::spawn(async move { s.subscribe_namespace(ns(&["a"])).await })
        };
        let (mut send, mut reader, _first) = raw.accept_request().await;
        let ok = RequestOk {
            params: Parameters::default(),
            track_properties: Properties::new(),
        };
        send.write_all(&encode(ok.clone(), V19)).await.unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        for suffix in [ns(&["b", "c"]), ns(&["x"])] {
            send.write_all(&encode(
                Namespace {
                    suffix,
                    cluster: None,
                },
                V19,
            ))
            .await
            .unwrap();
        }
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Added(ns(&["a", "b", "c"]))
        );
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Added(ns(&["a", "x"]))
        );
        let update = {
            let new = ns(&["a", "b"]);
            let answer = async {
                assert!(matches!(reader.expect().await, Message::RequestUpdate(_)));
                send.write_all(&encode(ok.clone(), V19)).await.unwrap();
            };
            let (r, ()) = tokio::join!(sub.update_prefix(new), answer);
            r
        };
        update.unwrap();
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Removed(ns(&["a", "x"]))
        );
        let done = NamespaceDone { suffix: ns(&["c"]) };
        send.write_all(&encode(done, V19)).await.unwrap();
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Removed(ns(&["a", "b", "c"]))
        );
        assert!(session.close_reason().is_none() && raw.is_open());
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

/// draft-19 §3.3.3: a peer cancels its accepted PUBLISH_NAMESPACE by terminating the directions
/// still open: RESET_STREAM on its half (with STOP_SENDING on ours), or, after it finished its
/// half with a FIN, STOP_SENDING alone. Either way our side ends the request and the namespace
/// leaves the session's `announced` index. (Our side watches STOP_SENDING
/// only once the peer's half ended: while it is open, the reset is what it reads.)
#[tokio::test]
async fn publish_namespace_cancelled_by_reset_or_by_stop_after_fin() {
    for fin_first in [false, true] {
        case(format!("fin_first={fin_first}"), async {
            let (raw, session, _srv) = raw_client(V19).await;
            let name = ns(&["cancel"]);
            let (_, mut watch) = session.announced().watch(&name, 8);
            let first = PublishNamespace {
                request_id: 0,
                namespace: name.clone(),
                params: Default::default(),
            };
            let (mut send, mut resp) = raw.open_request(&encode(first, V19)).await;
            assert!(matches!(resp.expect().await, Message::RequestOk(_)));
            assert_eq!(
                watch.next().await,
                Some(NamespaceEvent::Added(name.clone()))
            );
            let code = StreamResetCode::CANCELLED;
            if fin_first {
                send.finish().unwrap();
                // Let the FIN be read before the STOP_SENDING (a FIN alone ends nothing).
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert!(
                    session.announced().contains(&name),
                    "a FIN alone ends nothing"
                );
            } else {
                send.reset(quic_code(code)).unwrap();
            }
            resp.recv.stop(quic_code(code)).unwrap();
            assert_eq!(
                watch.next().await,
                Some(NamespaceEvent::Removed(name.clone()))
            );
            assert!(raw.is_open(), "cancelling a request keeps the session");
        })
        .await;
    }
}
