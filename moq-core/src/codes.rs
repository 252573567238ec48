//! Wire codes as newtypes with named constants.
//!
//! Each registry of draft-19 §15.11 is its own type so a REQUEST_ERROR code can never be passed
//! where a session close code is expected. Any `u64` converts into a code: an unknown value is
//! kept as it is (it prints as `Name(0x..)`) and never causes a failure (draft-19 §14: unknown
//! codes are treated as INTERNAL_ERROR, never as a reason to close the session).

use std::fmt;

/// True if `value` is a GREASE codepoint, `0x7f * N + 0x9D` (draft-19 §14).
///
/// ```
/// assert!(moq_core::codes::is_grease(0x9D));
/// assert!(moq_core::codes::is_grease(0x11C));
/// assert!(!moq_core::codes::is_grease(0x9E));
/// ```
pub const fn is_grease(value: u64) -> bool {
    value >= 0x9D && (value - 0x9D) % 0x7f == 0
}

macro_rules! wire_code {
    (
        $(#[$meta:meta])*
        $name:ident {
            $( $(#[$cmeta:meta])* $konst:ident = $val:expr, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub u64);

        impl $name {
            $( $(#[$cmeta])* pub const $konst: $name = $name($val); )*

            /// The registered name of this code, or `None` if it is unknown to this crate.
            pub const fn name(self) -> Option<&'static str> {
                match self.0 {
                    $( $val => Some(stringify!($konst)), )*
                    _ => None,
                }
            }

            /// The numeric value carried on the wire.
            pub const fn value(self) -> u64 {
                self.0
            }

            /// True if this crate knows the code's meaning.
            pub const fn is_known(self) -> bool {
                self.name().is_some()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({:#x})", stringify!($name), self.0),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{} ({:#x})", n, self.0),
                    None => write!(f, "unknown ({:#x})", self.0),
                }
            }
        }

        impl From<u64> for $name {
            fn from(v: u64) -> Self {
                $name(v)
            }
        }

        impl From<$name> for u64 {
            fn from(v: $name) -> u64 {
                v.0
            }
        }
    };
}

wire_code! {
    /// Session termination codes, sent in CONNECTION_CLOSE or CLOSE_WEBTRANSPORT_SESSION
    /// (draft-19 §3.5, §15.11.1).
    SessionErrorCode {
        /// The session is being terminated without an error.
        NO_ERROR = 0x0,
        /// An implementation specific error occurred.
        INTERNAL_ERROR = 0x1,
        /// The client is not authorized to establish a session.
        UNAUTHORIZED = 0x2,
        /// The remote endpoint performed an action that was disallowed by the specification.
        PROTOCOL_VIOLATION = 0x3,
        /// A Request ID with the wrong parity, or a duplicate.
        INVALID_REQUEST_ID = 0x4,
        /// A Track Alias that was already in use.
        DUPLICATE_TRACK_ALIAS = 0x5,
        /// A key-value pair has a formatting error.
        KEY_VALUE_FORMATTING_ERROR = 0x6,
        /// The PATH option was misused or names an unsupported path.
        INVALID_PATH = 0x8,
        /// The PATH option does not conform to its syntax.
        MALFORMED_PATH = 0x9,
        /// The peer did not close the session in time after a GOAWAY.
        GOAWAY_TIMEOUT = 0x10,
        /// The peer took too long to respond to a control message.
        CONTROL_MESSAGE_TIMEOUT = 0x11,
        /// The peer took too long to send data expected on an open data stream.
        DATA_STREAM_TIMEOUT = 0x12,
        /// MAX_AUTH_TOKEN_CACHE_SIZE was exceeded.
        AUTH_TOKEN_CACHE_OVERFLOW = 0x13,
        /// An authorization token alias was registered twice.
        DUPLICATE_AUTH_TOKEN_ALIAS = 0x14,
        /// No common version (kept for older drafts).
        VERSION_NEGOTIATION_FAILED = 0x15,
        /// Invalid token serialization during registration.
        MALFORMED_AUTH_TOKEN = 0x16,
        /// A token alias that is not registered.
        UNKNOWN_AUTH_TOKEN_ALIAS = 0x17,
        /// The authorization token has expired.
        EXPIRED_AUTH_TOKEN = 0x18,
        /// The AUTHORITY option was misused or names another server.
        INVALID_AUTHORITY = 0x19,
        /// The AUTHORITY option is syntactically invalid.
        MALFORMED_AUTHORITY = 0x1A,
        /// More outstanding REQUEST_UPDATEs than MAX_REQUEST_UPDATES (draft-19).
        TOO_MANY_REQUEST_UPDATES = 0x1B,
    }
}

wire_code! {
    /// REQUEST_ERROR codes (draft-19 §10.6, §15.11.2).
    RequestErrorCode {
        /// An implementation specific or generic error.
        INTERNAL_ERROR = 0x0,
        /// Not authorized for the requested action.
        UNAUTHORIZED = 0x1,
        /// Could not be completed in time.
        TIMEOUT = 0x2,
        /// The request type is not supported.
        NOT_SUPPORTED = 0x3,
        /// Invalid authorization token serialization.
        MALFORMED_AUTH_TOKEN = 0x4,
        /// The authorization token has expired.
        EXPIRED_AUTH_TOKEN = 0x5,
        /// The endpoint sent or received a GOAWAY.
        GOING_AWAY = 0x6,
        /// The responder is overloaded.
        EXCESSIVE_LOAD = 0x9,
        /// The track or namespace is not available.
        DOES_NOT_EXIST = 0x10,
        /// The requested filter or range cannot be satisfied.
        INVALID_RANGE = 0x11,
        /// A relay detected the track is malformed.
        MALFORMED_TRACK = 0x12,
        /// draft-18 only: a second subscription to the same track.
        DUPLICATE_SUBSCRIPTION = 0x19,
        /// The subscriber is not interested in the track or namespace.
        UNINTERESTED = 0x20,
        /// The namespace prefix overlaps another subscription of the same type.
        PREFIX_OVERLAP = 0x30,
        /// The prefix matches more publishers than the relay will enumerate.
        NAMESPACE_TOO_LARGE = 0x31,
        /// The Joining Request ID does not name a usable subscription.
        INVALID_JOINING_REQUEST_ID = 0x32,
        /// The track carries a Mandatory Track Property this endpoint does not understand.
        UNSUPPORTED_EXTENSION = 0x33,
        /// Retry elsewhere; a Redirect structure follows.
        REDIRECT = 0x34,
        /// Filters conflict across too many subscribers (draft-19).
        CONFLICTING_FILTERS = 0x35,
        /// A filter parameter is invalid (draft-19).
        INVALID_FILTER = 0x36,
    }
}

wire_code! {
    /// PUBLISH_DONE status codes (draft-19 §10.11, §15.11.3).
    PublishDoneCode {
        /// An implementation specific or generic error.
        INTERNAL_ERROR = 0x0,
        /// The subscriber is no longer authorized.
        UNAUTHORIZED = 0x1,
        /// The track is no longer being published.
        TRACK_ENDED = 0x2,
        /// The publisher reached the end of the location filter.
        SUBSCRIPTION_ENDED = 0x3,
        /// A GOAWAY was issued.
        GOING_AWAY = 0x4,
        /// The subscriber fell too far behind.
        TOO_FAR_BEHIND = 0x5,
        /// The EXPIRES time was reached.
        EXPIRED = 0x6,
        /// A REQUEST_UPDATE failed.
        UPDATE_FAILED = 0x8,
        /// The publisher is overloaded.
        EXCESSIVE_LOAD = 0x9,
        /// A relay detected the track is malformed.
        MALFORMED_TRACK = 0x12,
    }
}

wire_code! {
    /// RESET_STREAM and STOP_SENDING codes, for every MOQT stream (draft-19 §3.3.4, §15.11.4).
    StreamResetCode {
        /// An implementation specific error.
        INTERNAL_ERROR = 0x0,
        /// The stream was cancelled.
        CANCELLED = 0x1,
        /// A delivery timeout was exceeded.
        DELIVERY_TIMEOUT = 0x2,
        /// The session is being closed.
        SESSION_CLOSED = 0x3,
        /// Rejected because of a GOAWAY.
        GOING_AWAY = 0x4,
        /// The subscription exceeded the publisher's resource limits.
        TOO_FAR_BEHIND = 0x5,
        /// The status of the next object in a FETCH range is unknown.
        UNKNOWN_OBJECT_STATUS = 0x6,
        /// The authorization token expired.
        EXPIRED_AUTH_TOKEN = 0x7,
        /// The endpoint is overloaded.
        EXCESSIVE_LOAD = 0x9,
        /// A relay detected the track is malformed.
        MALFORMED_TRACK = 0x12,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_unknown() {
        assert_eq!(
            format!("{:?}", SessionErrorCode::PROTOCOL_VIOLATION),
            "PROTOCOL_VIOLATION"
        );
        assert_eq!(
            format!("{:?}", SessionErrorCode(0x7)),
            "SessionErrorCode(0x7)"
        );
        assert!(!RequestErrorCode::from(0x9D).is_known());
        assert_eq!(RequestErrorCode::PREFIX_OVERLAP.value(), 0x30);
        assert_eq!(PublishDoneCode::TOO_FAR_BEHIND.value(), 0x5);
        assert_eq!(StreamResetCode::UNKNOWN_OBJECT_STATUS.value(), 0x6);
        assert_eq!(
            RequestErrorCode::INVALID_FILTER.to_string(),
            "INVALID_FILTER (0x36)"
        );
    }

    #[test]
    fn grease() {
        for n in 0..100u64 {
            assert!(is_grease(0x7f * n + 0x9D));
            assert!(!is_grease(0x7f * n + 0x9E));
        }
        assert!(is_grease(0x3fffffffffffffde));
    }
}
