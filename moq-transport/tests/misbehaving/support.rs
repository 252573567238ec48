//! Helpers shared by the misbehaving-peer tests: raw peers facing our session, the close codes
//! expected of it, and bodies of the requests the raw side writes.

use moq_core::codes::{SessionErrorCode, StreamResetCode};
use moq_core::{TrackNamespace, Version};
use moq_transport::{Error, Session, SessionConfig};

use crate::common::TestServer;
use crate::common::raw::{RawConn, RawServer, frame, put_namespace, put_vi, raw_setup, vi};

pub(crate) const V19: Version = Version::Draft19;
pub(crate) const V18: Version = Version::Draft18;
pub(crate) const PROTOCOL_VIOLATION: SessionErrorCode = SessionErrorCode::PROTOCOL_VIOLATION;

/// SUBSCRIBE_NAMESPACE's message type.
pub(crate) const SUBSCRIBE_NAMESPACE: u64 = 0x50;
/// SUBSCRIBE's message type.
pub(crate) const SUBSCRIBE: u64 = 0x03;
/// REQUEST_UPDATE's message type.
pub(crate) const REQUEST_UPDATE: u64 = 0x02;

pub(crate) fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

/// Asserts `err` is our side closing the session with `code` (not the peer, not the transport).
#[track_caller]
pub(crate) fn assert_closed_with(err: &Error, code: SessionErrorCode) {
    assert!(
        matches!(err, Error::Violation { .. } | Error::Decode(_)),
        "expected a violation detected by our side, got {err:?}"
    );
    assert_eq!(err.session_code(), code, "{err}");
}

/// Waits until our `session` has closed the connection with `code`, checked on both ends. The
/// reason phrase must contain `hint`, so that a catch-all code such as PROTOCOL_VIOLATION is
/// known to come from the rule under test.
pub(crate) async fn expect_close(
    raw: &RawConn,
    session: &Session,
    code: SessionErrorCode,
    hint: &str,
) {
    let (got, reason) = raw.closed().await;
    assert_eq!(got, code, "close code seen by the raw peer ({reason})");
    assert!(reason.contains(hint), "{reason:?} should mention {hint:?}");
    assert_closed_with(&session.closed().await, code);
}

/// One of our servers with `config` and a raw client that finished SETUP with it.
pub(crate) async fn raw_client_with(
    config: SessionConfig,
    version: Version,
) -> (RawConn, Session, TestServer) {
    let mut srv = TestServer::start(config);
    let (raw, _, session) = RawConn::to_server(&mut srv, version).await;
    (raw, session, srv)
}

pub(crate) async fn raw_client(version: Version) -> (RawConn, Session, TestServer) {
    raw_client_with(SessionConfig::default(), version).await
}

/// One of our clients that finished SETUP with a raw server.
pub(crate) async fn our_client(version: Version) -> (Session, RawConn, RawServer) {
    let raw_srv = RawServer::start(&[version]);
    let client = raw_srv.client(vec![version]);
    let (session, raw) = raw_srv.connect(&client, raw_setup()).await;
    (session.unwrap(), raw, raw_srv)
}

/// A raw client opens one request stream carrying `first`; our server must close with `code`.
pub(crate) async fn request_closes(first: &[u8], code: SessionErrorCode, hint: &str) {
    let (raw, session, _srv) = raw_client(V19).await;
    let _request = raw.open_request(first).await;
    expect_close(&raw, &session, code, hint).await;
}

pub(crate) fn quic_code(code: StreamResetCode) -> quinn::VarInt {
    quinn::VarInt::from_u64(code.0).unwrap()
}

/// A parameter block (Number of Parameters included) with one OBJECT_PROPERTY_FILTER (0x28):
/// SetID 0, `property_type`, one range [0, 5].
pub(crate) fn property_filter_params(property_type: u64) -> Vec<u8> {
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
pub(crate) fn subscribe_with_property_filter(request_id: u64, property_type: u64) -> Vec<u8> {
    let mut body = vi(request_id);
    put_namespace(&mut body, &[b"a"]);
    put_vi(&mut body, 1);
    body.push(b't');
    body.extend(property_filter_params(property_type));
    frame(SUBSCRIBE, &body)
}
