//! The one error type of moq-client.

use moq_core::codes::RequestErrorCode;
use moq_core::{FullTrackName, NameError, TrackNamespace};
use moq_transport::ConnectError;

/// Anything that can go wrong: the session's and the peer's errors, and the application's own
/// mistakes, each a variant to match on.
///
/// `Clone`, so one session failure can reach every stream built on it.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Connecting failed: [`ConnectError`] says why (nothing answered, an untrusted or
    /// unpinned certificate, no common version, ...) and what to do about it.
    #[error(transparent)]
    Connect(ConnectError),
    /// The session or a request failed: the session ended, the connection failed, or the peer
    /// refused the request ([`Error::rejection`] gives its code).
    #[error(transparent)]
    Session(SessionError),
    /// Something was written to a track that has ended.
    #[error("the track has ended")]
    TrackEnded,
    /// A group older than what the track's cache still holds.
    #[error("group {0} is older than the cache")]
    GroupTooOld(u64),
    /// A group that was already started.
    #[error("group {0} exists already")]
    GroupExists(u64),
    /// A subgroup that was already started.
    #[error("subgroup {0} exists already")]
    SubgroupExists(u64),
    /// Object IDs must increase within a subgroup.
    #[error("object {0} is not after the previous object of its subgroup")]
    ObjectOrder(u64),
    /// A track of that name is already published.
    #[error("track {0} exists already")]
    TrackExists(FullTrackName),
    /// The namespace is reserved (draft-19 §3.2: "." and ".session").
    #[error("namespace {0} is reserved")]
    Reserved(TrackNamespace),
    /// A name that cannot be encoded.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The deadline passed before the peer acknowledged what was sent.
    #[error("not acknowledged before the deadline")]
    Timeout,
    /// The track showed itself malformed (draft-19 §2.4.2): the subscription or fetch that
    /// received it was cancelled.
    #[error(transparent)]
    Malformed(#[from] crate::malformed::Malformed),
    /// A bad argument or configuration.
    #[error("invalid: {0}")]
    Invalid(String),
}

/// How a session or one of its requests failed (see [`Error::Session`]): the session ended,
/// the connection failed, the peer refused or cancelled the request. Its `Display` says which.
#[derive(Clone, Debug, thiserror::Error)]
#[error(transparent)]
pub struct SessionError(moq_transport::Error);

impl SessionError {
    /// The REQUEST_ERROR code if the peer refused the request.
    pub fn rejection(&self) -> Option<RequestErrorCode> {
        match &self.0 {
            moq_transport::Error::Rejected(r) => Some(r.code),
            _ => None,
        }
    }

    /// True if the whole session is over (not only this request).
    pub fn is_session_error(&self) -> bool {
        self.0.is_session_error()
    }

    /// The error of the session layer underneath ([`moq_transport`]), for what this type
    /// does not tell.
    pub fn transport(&self) -> &moq_transport::Error {
        &self.0
    }
}

impl From<moq_transport::Error> for Error {
    fn from(e: moq_transport::Error) -> Self {
        match e {
            moq_transport::Error::Connect(c) => Error::Connect(c),
            e => Error::Session(SessionError(e)),
        }
    }
}

impl From<ConnectError> for Error {
    fn from(e: ConnectError) -> Self {
        Error::Connect(e)
    }
}

impl Error {
    /// The REQUEST_ERROR code if the peer refused the request.
    ///
    /// ```
    /// use moq_client::{Error, RequestErrorCode};
    /// let refused = moq_transport::Error::Rejected(Box::new(
    ///     moq_core::message::RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "no"),
    /// ));
    /// assert_eq!(Error::from(refused).rejection(), Some(RequestErrorCode::DOES_NOT_EXIST));
    /// ```
    pub fn rejection(&self) -> Option<RequestErrorCode> {
        match self {
            Error::Session(e) => e.rejection(),
            _ => None,
        }
    }

    /// True if the whole session is over (not only this request).
    pub fn is_session_error(&self) -> bool {
        matches!(self, Error::Session(e) if e.is_session_error())
    }
}
