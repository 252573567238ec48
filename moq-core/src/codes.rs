//! Wire codes as newtypes with named constants.
//!
//! Each registry of draft-19 §15.11 is its own type so a REQUEST_ERROR code can never be passed
//! where a session close code is expected. Any `u64` converts into a code: an unknown value is
//! kept as it is (it prints as `Name(0x..)`) and never causes a failure (draft-19 §14: unknown
//! codes are treated as INTERNAL_ERROR, never as a reason to close the session).

use std::fmt;

use crate::Version;

/// The kinds of request: draft-14 names an answer after its request (a *_OK and an *_ERROR
/// per kind) and gives each kind its own error code registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestType {
    /// SUBSCRIBE.
    Subscribe,
    /// PUBLISH.
    Publish,
    /// FETCH.
    Fetch,
    /// TRACK_STATUS.
    TrackStatus,
    /// PUBLISH_NAMESPACE.
    PublishNamespace,
    /// SUBSCRIBE_NAMESPACE.
    SubscribeNamespace,
    /// SUBSCRIBE_TRACKS (SUBSCRIBE_NAMESPACE with Subscribe Options PUBLISH in draft-16).
    SubscribeTracks,
    /// REQUEST_UPDATE (SUBSCRIBE_UPDATE in draft-14).
    RequestUpdate,
}

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
        /// A Required Request ID Delta that names no earlier request (draft-17 only; drafts
        /// 14-16 use 0x7 for TOO_MANY_REQUESTS, later drafts not at all).
        INVALID_REQUIRED_REQUEST_ID = 0x7,
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
        /// Draft-14 FETCH_ERROR 0x6: no Objects exist in the requested range (removed in
        /// draft-15). Not a wire value of any version: the draft-14 codec translates it.
        NO_OBJECTS = 0x8000_0000_0000_0006,
        /// Draft-14 FETCH_ERROR 0x8 and draft-15 REQUEST_ERROR 0x33: the requested range holds
        /// Objects of unknown status (removed in draft-16). Not a wire value of any version:
        /// the draft-14/15 codec translates it.
        UNKNOWN_STATUS_IN_RANGE = 0x8000_0000_0000_0008,
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

// ---------------------------------------------------------------------------------------------
// Drafts 14-17: their code registries, translated to and from the ones above.

/// Where a code of a draft-14..17 registry that has no counterpart above is kept, so that it is
/// sent back unchanged: `LEGACY | wire`. Such values are above 2^62-1 and so are never a wire
/// value of drafts 14-16 themselves (QUIC varints). Draft-17's vi64 can carry them: an unknown
/// draft-17 code of 2^62 or more keeps only its low 62 bits.
const LEGACY: u64 = 1 << 62;

/// The bits that mark a value as [`LEGACY`].
const LEGACY_MASK: u64 = 3 << 62;

/// One row of a translation table: in drafts `from..=until`, for requests of `kind` (`None`:
/// any), wire value `wire` means `code`.
struct Row {
    from: u32,
    until: u32,
    kind: Option<RequestType>,
    wire: u64,
    code: u64,
}

const fn row(from: u32, until: u32, kind: Option<RequestType>, wire: u64, code: u64) -> Row {
    Row {
        from,
        until,
        kind,
        wire,
        code,
    }
}

use RequestType as K;

const SUB: Option<RequestType> = Some(K::Subscribe);
const STATUS: Option<RequestType> = Some(K::TrackStatus);
const FETCH: Option<RequestType> = Some(K::Fetch);
const PUBLISH: Option<RequestType> = Some(K::Publish);
const PUB_NS: Option<RequestType> = Some(K::PublishNamespace);
const SUB_NS: Option<RequestType> = Some(K::SubscribeNamespace);

/// REQUEST_ERROR codes of drafts 14-17 (draft-14 §13.1.2-13.1.7: one registry per *_ERROR
/// message; draft-16 §13.4.2; drafts 15 and 17 from the notes' B.2 and B.4). Codes not listed
/// keep their number in the [`LEGACY`] space.
const REQUEST_ERROR_ROWS: &[Row] = &[
    // draft-14: the codes every *_ERROR registry shares.
    row(14, 14, None, 0x0, 0x0),
    row(14, 14, None, 0x1, 0x1),
    row(14, 14, None, 0x2, 0x2),
    row(14, 14, None, 0x3, 0x3),
    row(14, 14, None, 0x10, 0x4), // MALFORMED_AUTH_TOKEN
    row(14, 14, None, 0x12, 0x5), // EXPIRED_AUTH_TOKEN
    // SUBSCRIBE_ERROR (and TRACK_STATUS_ERROR, draft-14 §9.22).
    row(14, 14, SUB, 0x4, 0x10), // TRACK_DOES_NOT_EXIST
    row(14, 14, SUB, 0x5, 0x11), // INVALID_RANGE
    row(14, 14, STATUS, 0x4, 0x10),
    row(14, 14, STATUS, 0x5, 0x11),
    // FETCH_ERROR.
    row(14, 14, FETCH, 0x4, 0x10),
    row(14, 14, FETCH, 0x5, 0x11),
    row(14, 14, FETCH, 0x6, RequestErrorCode::NO_OBJECTS.0),
    row(14, 14, FETCH, 0x7, 0x32), // INVALID_JOINING_REQUEST_ID
    row(
        14,
        14,
        FETCH,
        0x8,
        RequestErrorCode::UNKNOWN_STATUS_IN_RANGE.0,
    ),
    row(14, 14, FETCH, 0x9, 0x12), // MALFORMED_TRACK
    // PUBLISH_ERROR and PUBLISH_NAMESPACE_ERROR: UNINTERESTED.
    row(14, 14, PUBLISH, 0x4, 0x20),
    row(14, 14, PUB_NS, 0x4, 0x20),
    // SUBSCRIBE_NAMESPACE_ERROR: NAMESPACE_PREFIX_UNKNOWN is the unified DOES_NOT_EXIST
    // ("the track or namespace is not available"), NAMESPACE_PREFIX_OVERLAP is PREFIX_OVERLAP.
    row(14, 14, SUB_NS, 0x4, 0x10),
    row(14, 14, SUB_NS, 0x5, 0x30),
    // drafts 15-17: the unified registry, numbered as today.
    row(15, 17, None, 0x0, 0x0),
    row(15, 17, None, 0x1, 0x1),
    row(15, 17, None, 0x2, 0x2),
    row(15, 17, None, 0x3, 0x3),
    row(15, 17, None, 0x4, 0x4),
    row(15, 17, None, 0x5, 0x5),
    row(15, 17, None, 0x10, 0x10),
    row(15, 17, None, 0x11, 0x11),
    row(15, 17, None, 0x12, 0x12),
    row(15, 17, None, 0x20, 0x20),
    row(15, 17, None, 0x30, 0x30),
    row(15, 17, None, 0x32, 0x32),
    // draft-17 adds GOING_AWAY, EXCESSIVE_LOAD and NAMESPACE_TOO_LARGE (NOTES B.4).
    row(17, 17, None, 0x6, 0x6),
    row(17, 17, None, 0x9, 0x9),
    row(17, 17, None, 0x31, 0x31),
    // draft-15 only: UNKNOWN_STATUS_IN_RANGE 0x33 (0x33 is UNSUPPORTED_EXTENSION from 18,
    // NOTES B.5).
    row(
        15,
        15,
        None,
        0x33,
        RequestErrorCode::UNKNOWN_STATUS_IN_RANGE.0,
    ),
    // drafts 16-17: DUPLICATE_SUBSCRIPTION.
    row(16, 17, None, 0x19, 0x19),
];

/// PUBLISH_DONE status codes of drafts 14-17 (draft-14 §13.1.3, draft-16 §13.4.3, NOTES B.5):
/// EXPIRED and TOO_FAR_BEHIND are swapped relative to today's registry (until draft-17),
/// MALFORMED_TRACK is 0x7 until draft-15.
const PUBLISH_DONE_ROWS: &[Row] = &[
    row(14, 17, None, 0x0, 0x0),
    row(14, 17, None, 0x1, 0x1),
    row(14, 17, None, 0x2, 0x2),
    row(14, 17, None, 0x3, 0x3),
    row(14, 17, None, 0x4, 0x4),
    row(14, 17, None, 0x5, 0x6),  // EXPIRED
    row(14, 17, None, 0x6, 0x5),  // TOO_FAR_BEHIND
    row(14, 15, None, 0x7, 0x12), // MALFORMED_TRACK
    row(16, 17, None, 0x12, 0x12),
    row(15, 17, None, 0x8, 0x8), // UPDATE_FAILED
    row(17, 17, None, 0x9, 0x9), // EXCESSIVE_LOAD (draft-17)
];

fn applies(r: &Row, kind: Option<RequestType>, v: Version) -> bool {
    let d = v.draft();
    d >= r.from && d <= r.until && (r.kind.is_none() || r.kind == kind)
}

/// Looks `code` up in `rows` for `v`: the wire value, a [`LEGACY`] value's own number, or
/// `None` when the version has no such code.
fn code_to_wire(rows: &[Row], code: u64, kind: Option<RequestType>, v: Version) -> Option<u64> {
    // A kind's own rows come before the shared ones.
    let specific = rows
        .iter()
        .find(|r| r.kind.is_some() && applies(r, kind, v) && r.code == code);
    let any = || rows.iter().find(|r| applies(r, kind, v) && r.code == code);
    if let Some(r) = specific.or_else(any) {
        return Some(r.wire);
    }
    (code & LEGACY_MASK == LEGACY).then_some(code & !LEGACY_MASK)
}

fn code_from_wire(rows: &[Row], wire: u64, kind: Option<RequestType>, v: Version) -> u64 {
    let specific = rows
        .iter()
        .find(|r| r.kind.is_some() && applies(r, kind, v) && r.wire == wire);
    let any = || rows.iter().find(|r| applies(r, kind, v) && r.wire == wire);
    match specific.or_else(any) {
        Some(r) => r.code,
        None => LEGACY | (wire & !LEGACY_MASK),
    }
}

impl RequestErrorCode {
    /// The value to send in `v` for an error answering a request of `kind` (drafts 14-16
    /// number their codes differently, and draft-14 per request kind; `kind` may be `None`
    /// from draft-15, where one registry serves every request).
    ///
    /// A code the version does not have is sent as INTERNAL_ERROR (0x0), except one decoded
    /// from that version's wire, which keeps its number. From draft-17 the value is the
    /// code itself.
    ///
    /// ```
    /// use moq_core::{Version, codes::RequestErrorCode, message::RequestType};
    /// let sub = Some(RequestType::Subscribe);
    /// assert_eq!(RequestErrorCode::DOES_NOT_EXIST.to_wire(sub, Version::Draft14), 0x4);
    /// assert_eq!(RequestErrorCode::DOES_NOT_EXIST.to_wire(sub, Version::Draft16), 0x10);
    /// assert_eq!(RequestErrorCode::from_wire(0x4, sub, Version::Draft14), RequestErrorCode::DOES_NOT_EXIST);
    /// // A draft-14 code without a counterpart survives a round trip.
    /// let odd = RequestErrorCode::from_wire(0x6, sub, Version::Draft14);
    /// assert_eq!(odd.to_wire(sub, Version::Draft14), 0x6);
    /// ```
    pub fn to_wire(self, kind: Option<RequestType>, v: Version) -> u64 {
        if !v.translates_error_codes() {
            return self.0;
        }
        code_to_wire(REQUEST_ERROR_ROWS, self.0, kind, v).unwrap_or(0)
    }

    /// The code a wire value of `v` means, for an error answering a request of `kind` (see
    /// [`RequestErrorCode::to_wire`]). A value the version's registry does not list is kept
    /// as it is, in a private space above 2^62 that [`RequestErrorCode::to_wire`] maps back.
    pub fn from_wire(wire: u64, kind: Option<RequestType>, v: Version) -> RequestErrorCode {
        if !v.translates_error_codes() {
            return RequestErrorCode(wire);
        }
        RequestErrorCode(code_from_wire(REQUEST_ERROR_ROWS, wire, kind, v))
    }

    /// The draft-14..16 wire value kept by [`RequestErrorCode::from_wire`] for a code it does
    /// not know, if this is one.
    pub const fn legacy_wire(self) -> Option<u64> {
        if self.0 & LEGACY_MASK == LEGACY {
            Some(self.0 & !LEGACY_MASK)
        } else {
            None
        }
    }
}

impl PublishDoneCode {
    /// The value to send in `v` (drafts 14-16 swap EXPIRED and TOO_FAR_BEHIND, and draft-14/15
    /// number MALFORMED_TRACK 0x7). A code the version does not have is sent as
    /// INTERNAL_ERROR (0x0), except one decoded from that version's wire.
    ///
    /// ```
    /// use moq_core::{Version, codes::PublishDoneCode};
    /// assert_eq!(PublishDoneCode::EXPIRED.to_wire(Version::Draft14), 0x5);
    /// assert_eq!(PublishDoneCode::EXPIRED.to_wire(Version::Draft19), 0x6);
    /// assert_eq!(PublishDoneCode::from_wire(0x7, Version::Draft14), PublishDoneCode::MALFORMED_TRACK);
    /// ```
    pub fn to_wire(self, v: Version) -> u64 {
        if !v.translates_error_codes() {
            return self.0;
        }
        code_to_wire(PUBLISH_DONE_ROWS, self.0, None, v).unwrap_or(0)
    }

    /// The code a wire value of `v` means (see [`PublishDoneCode::to_wire`]).
    pub fn from_wire(wire: u64, v: Version) -> PublishDoneCode {
        if !v.translates_error_codes() {
            return PublishDoneCode(wire);
        }
        PublishDoneCode(code_from_wire(PUBLISH_DONE_ROWS, wire, None, v))
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
            format!("{:?}", SessionErrorCode(0x1C)),
            "SessionErrorCode(0x1c)"
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
    fn draft14_16_tables_are_lossless() {
        use RequestType::*;
        let kinds = [
            Subscribe,
            Publish,
            Fetch,
            TrackStatus,
            PublishNamespace,
            SubscribeNamespace,
        ];
        for v in [Version::Draft14, Version::Draft15, Version::Draft16] {
            for kind in kinds {
                for wire in 0..0x40u64 {
                    let code = RequestErrorCode::from_wire(wire, Some(kind), v);
                    assert_eq!(code.to_wire(Some(kind), v), wire, "{v} {kind:?} {wire:#x}");
                }
            }
            for wire in 0..0x40u64 {
                let code = PublishDoneCode::from_wire(wire, v);
                assert_eq!(code.to_wire(v), wire, "{v} {wire:#x}");
            }
        }
        // Today's codes go to the old numbers and back.
        let v = Version::Draft14;
        for (code, kind, wire) in [
            (RequestErrorCode::DOES_NOT_EXIST, Fetch, 0x4),
            (RequestErrorCode::MALFORMED_AUTH_TOKEN, Subscribe, 0x10),
            (RequestErrorCode::EXPIRED_AUTH_TOKEN, PublishNamespace, 0x12),
            (RequestErrorCode::UNINTERESTED, Publish, 0x4),
            (RequestErrorCode::PREFIX_OVERLAP, SubscribeNamespace, 0x5),
            (RequestErrorCode::INVALID_JOINING_REQUEST_ID, Fetch, 0x7),
            (RequestErrorCode::NO_OBJECTS, Fetch, 0x6),
        ] {
            assert_eq!(code.to_wire(Some(kind), v), wire);
            assert_eq!(RequestErrorCode::from_wire(wire, Some(kind), v), code);
        }
        // Codes a version does not have go as INTERNAL_ERROR.
        assert_eq!(
            RequestErrorCode::GOING_AWAY.to_wire(None, Version::Draft16),
            0
        );
        assert_eq!(
            RequestErrorCode::PREFIX_OVERLAP.to_wire(Some(Subscribe), v),
            0
        );
        assert_eq!(PublishDoneCode::EXCESSIVE_LOAD.to_wire(Version::Draft16), 0);
        assert_eq!(
            PublishDoneCode::MALFORMED_TRACK.to_wire(Version::Draft16),
            0x12
        );
        // Unknown wire codes keep their number.
        let kept = RequestErrorCode::from_wire(0x77, None, Version::Draft16);
        assert_eq!(kept.legacy_wire(), Some(0x77));
        assert_eq!(
            RequestErrorCode::from_wire(0x33, None, Version::Draft19).value(),
            0x33
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
