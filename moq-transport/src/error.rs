//! The one error type of this crate, and its mapping to wire codes.

use moq_core::codes::{SessionErrorCode, StreamResetCode};
use moq_core::message::RequestError;
use moq_core::{DecodeError, EncodeError};

use std::net::SocketAddr;
use std::time::Duration;

use crate::transport::TransportError;

/// Anything that can go wrong in a session or a request.
///
/// `Clone`, so one session failure can be handed to every handle that depended on it.
/// [`Error::session_code`] is the single place an error becomes a session close code.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The peer sent bytes that do not decode; the session closes with the code the draft names.
    #[error("malformed input: {0}")]
    Decode(#[from] DecodeError),
    /// The peer broke a protocol rule; the session closes with `code`.
    #[error("protocol violation ({code:?}): {reason}")]
    Violation {
        /// The session close code the draft names for it.
        code: SessionErrorCode,
        /// What happened.
        reason: String,
    },
    /// The peer closed the session.
    #[error("session closed by peer ({code:?}): {reason}")]
    ClosedByPeer {
        /// The code the peer closed with.
        code: SessionErrorCode,
        /// The peer's reason phrase.
        reason: String,
    },
    /// This side closed the session.
    #[error("session closed ({code:?}): {reason}")]
    Closed {
        /// The code we closed with.
        code: SessionErrorCode,
        /// Our reason.
        reason: String,
    },
    /// The connection failed underneath the session.
    #[error("transport: {0}")]
    Transport(TransportError),
    /// The peer answered the request with REQUEST_ERROR.
    #[error("request rejected ({:?}): {}", .0.code, .0.reason)]
    Rejected(Box<RequestError>),
    /// The request was cancelled, by the peer or locally, with this stream code.
    #[error("request cancelled ({0:?})")]
    Cancelled(StreamResetCode),
    /// The request stream ended before the response the draft requires.
    #[error("request stream ended before its response")]
    EndedEarly,
    /// A configured limit was reached.
    #[error("limit reached: {0}")]
    Limit(&'static str),
    /// A GOAWAY was received; new requests are not started (and, draft-18, a request the
    /// GOAWAY's Request ID says was not processed ended with this).
    #[error("the peer is going away")]
    GoingAway,
    /// The peer sent GOAWAY on this request's stream before answering it (draft-19 §10.4):
    /// re-issue the request on a session at `new_session_uri`, or on this session if it is
    /// empty.
    #[error("request moved by GOAWAY (to {new_session_uri:?})")]
    Moved {
        /// Where to re-issue the request; empty means the current session's URI.
        new_session_uri: String,
        /// How long the peer keeps the old request.
        timeout: std::time::Duration,
    },
    /// An argument could not be encoded on the wire.
    #[error("cannot encode: {0}")]
    Encode(#[from] EncodeError),
    /// A bad argument or configuration.
    #[error("invalid: {0}")]
    Invalid(String),
    /// Establishing the connection failed: [`ConnectError`] says why, and what to do.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Something took longer than allowed.
    #[error("timed out: {0}")]
    Timeout(&'static str),
}

/// Why a connection could not be established, each a variant to match on. The messages say
/// what was tried and, where there is one, what to do about it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The host name did not resolve to an address.
    #[error("cannot resolve {host}: {reason}")]
    Resolve {
        /// The host of the URL.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// No QUIC server completed a handshake in time: nothing listens there, or a firewall
    /// drops the packets.
    #[error(
        "no QUIC server answered at {addr} within {}; is a relay running there?",
        seconds(*timeout)
    )]
    Unreachable {
        /// The address tried.
        addr: SocketAddr,
        /// How long it was given.
        timeout: Duration,
    },
    /// The server's certificate is not signed by a trusted root (rustls `UnknownIssuer`), as
    /// a development server's self-signed certificate is not.
    #[error(
        "the certificate of {addr} is not signed by a trusted root (UnknownIssuer): for a \
         development server with a self-signed certificate, pin its SHA-256 fingerprint \
         (moq_client::ClientBuilder::fingerprint; the server prints it, and a moq-relay \
         serves it at http://host:port/certificate.sha256) or trust any server, for \
         development only (ClientBuilder::insecure)"
    )]
    UnknownIssuer {
        /// The address tried.
        addr: SocketAddr,
    },
    /// The server's certificate is not one of the pinned fingerprints.
    #[error(
        "the certificate of {addr} has SHA-256 fingerprint {received}, which is not pinned \
         (a server that generates its certificate gets a new one at each start: pin the new \
         one)"
    )]
    FingerprintMismatch {
        /// The address tried.
        addr: SocketAddr,
        /// The fingerprint of the certificate the server presented, lower-case hex.
        received: String,
    },
    /// Another TLS failure.
    #[error("TLS with {addr} failed: {reason}")]
    Tls {
        /// The address tried.
        addr: SocketAddr,
        /// What failed.
        reason: String,
    },
    /// The server and this side have no MOQT version in common (no common ALPN, or none
    /// named in the WebTransport CONNECT or SETUP).
    #[error("no MOQT version in common with {peer} (offered {offered})")]
    NoCommonVersion {
        /// The peer, as far as known.
        peer: String,
        /// What was offered or received.
        offered: String,
    },
    /// The server refused or closed the connection during the handshake.
    #[error("{addr} refused the connection: {reason}")]
    Refused {
        /// The address tried.
        addr: SocketAddr,
        /// What the server said.
        reason: String,
    },
    /// An `http://` URL's certificate hash could not be fetched (`GET /certificate.sha256` on
    /// the TCP port of the QUIC port's number).
    #[error(
        "cannot fetch the certificate hash from {url}: {reason} (an http:// URL is for a \
         development server that serves /certificate.sha256 on its QUIC port number over TCP, \
         as moq-relay does with --http on that port)"
    )]
    CertificateHash {
        /// The URL fetched.
        url: String,
        /// What failed.
        reason: String,
    },
    /// The WebTransport CONNECT failed.
    #[error("WebTransport: {0}")]
    WebTransport(String),
    /// The WebSocket connection or upgrade failed (`ws://`, `wss://`).
    #[error("WebSocket: {0}")]
    WebSocket(String),
    /// Neither the session over QUIC nor the one over its WebSocket fallback could be set up
    /// (see [`crate::endpoint::Client::with_websocket_fallback`]).
    #[error("over QUIC: {quic}; over the WebSocket fallback: {websocket}")]
    FallbackFailed {
        /// Why the session over QUIC (WebTransport, or `http://`'s raw QUIC) failed.
        quic: String,
        /// Why the session over the WebSocket failed.
        websocket: String,
    },
    /// A local UDP socket could not be bound.
    #[error("bind {addr}: {reason}")]
    Bind {
        /// The local address.
        addr: SocketAddr,
        /// What the system said.
        reason: String,
    },
    /// The connection failed otherwise.
    #[error("connection to {addr} failed: {reason}")]
    Failed {
        /// The address tried.
        addr: SocketAddr,
        /// What failed.
        reason: String,
    },
}

/// "N s" with at most one decimal.
fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 == 0 {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

impl Error {
    /// A violation with the given close code.
    pub fn violation(code: SessionErrorCode, reason: impl Into<String>) -> Self {
        Error::Violation {
            code,
            reason: reason.into(),
        }
    }

    /// A PROTOCOL_VIOLATION.
    pub fn protocol(reason: impl Into<String>) -> Self {
        Self::violation(SessionErrorCode::PROTOCOL_VIOLATION, reason)
    }

    /// The code to close the session with when this error ends it.
    ///
    /// ```
    /// use moq_transport::Error;
    /// use moq_core::{DecodeError, codes::SessionErrorCode};
    /// assert_eq!(Error::from(DecodeError::TypeOverflow).session_code(), SessionErrorCode::PROTOCOL_VIOLATION);
    /// assert_eq!(Error::Timeout("setup").session_code(), SessionErrorCode::CONTROL_MESSAGE_TIMEOUT);
    /// ```
    pub fn session_code(&self) -> SessionErrorCode {
        match self {
            Error::Decode(e) => e.session_code(),
            Error::Violation { code, .. }
            | Error::ClosedByPeer { code, .. }
            | Error::Closed { code, .. } => *code,
            Error::Timeout(_) => SessionErrorCode::CONTROL_MESSAGE_TIMEOUT,
            Error::Rejected(_)
            | Error::Cancelled(_)
            | Error::EndedEarly
            | Error::GoingAway
            | Error::Moved { .. } => SessionErrorCode::NO_ERROR,
            Error::Transport(_)
            | Error::Limit(_)
            | Error::Encode(_)
            | Error::Invalid(_)
            | Error::Connect(_) => SessionErrorCode::INTERNAL_ERROR,
        }
    }

    /// True if this error means the whole session is over.
    pub fn is_session_error(&self) -> bool {
        matches!(
            self,
            Error::Decode(_)
                | Error::Violation { .. }
                | Error::ClosedByPeer { .. }
                | Error::Closed { .. }
                | Error::Transport(_)
        )
    }
}

impl From<moq_core::NameError> for Error {
    fn from(e: moq_core::NameError) -> Self {
        Error::Invalid(e.to_string())
    }
}

impl From<TransportError> for Error {
    fn from(e: TransportError) -> Self {
        match e {
            TransportError::ClosedByPeer { code, reason } => Error::ClosedByPeer {
                code: SessionErrorCode(code),
                reason,
            },
            TransportError::Reset(code) | TransportError::Stopped(code) => {
                Error::Cancelled(StreamResetCode(code))
            }
            e => Error::Transport(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins the mapping from error to session close code.
    #[test]
    fn close_codes() {
        let cases: Vec<(Error, SessionErrorCode)> = vec![
            (
                DecodeError::EmptyNamespaceField(0).into(),
                SessionErrorCode::PROTOCOL_VIOLATION,
            ),
            (
                DecodeError::KeyValueFormatting("x").into(),
                SessionErrorCode::KEY_VALUE_FORMATTING_ERROR,
            ),
            (
                Error::violation(SessionErrorCode::INVALID_REQUEST_ID, "dup"),
                SessionErrorCode::INVALID_REQUEST_ID,
            ),
            (
                Error::Timeout("setup"),
                SessionErrorCode::CONTROL_MESSAGE_TIMEOUT,
            ),
            (Error::Limit("x"), SessionErrorCode::INTERNAL_ERROR),
        ];
        for (e, code) in cases {
            assert_eq!(e.session_code(), code, "{e}");
        }
        assert!(matches!(
            Error::from(TransportError::Reset(1)),
            Error::Cancelled(StreamResetCode::CANCELLED)
        ));
    }
}
