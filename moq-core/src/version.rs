//! Protocol versions and what differs between them.
//!
//! A [`Version`] is chosen before the first control byte is read (by ALPN on raw QUIC or by
//! `WT-Protocol` on WebTransport) and is passed to every encode and decode. Where two versions
//! differ, the codec asks the version a question (`has_range_filters`, `goaway_has_request_id`,
//! ...) instead of duplicating code: a new draft is a new variant plus answers to those questions.

use std::fmt;

/// A MOQT draft version this crate can speak.
///
/// Ordered by draft number, so `v >= Version::Draft19` reads as "draft-19 or later".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Version {
    /// draft-ietf-moq-transport-18, ALPN `moqt-18`.
    Draft18,
    /// draft-ietf-moq-transport-19, ALPN `moqt-19`. The primary version.
    Draft19,
}

impl Version {
    /// Every supported version, most preferred first.
    pub const ALL: &'static [Version] = &[Version::Draft19, Version::Draft18];

    /// The version we prefer when a peer offers several.
    pub const PREFERRED: Version = Version::Draft19;

    /// The ALPN token (raw QUIC) and WebTransport protocol token for this version.
    ///
    /// ```
    /// use moq_core::Version;
    /// assert_eq!(Version::Draft19.alpn(), "moqt-19");
    /// ```
    pub const fn alpn(self) -> &'static str {
        match self {
            Version::Draft18 => "moqt-18",
            Version::Draft19 => "moqt-19",
        }
    }

    /// The draft number, e.g. 19.
    pub const fn draft(self) -> u32 {
        match self {
            Version::Draft18 => 18,
            Version::Draft19 => 19,
        }
    }

    /// Looks a version up by its ALPN / WebTransport protocol token.
    ///
    /// ```
    /// use moq_core::Version;
    /// assert_eq!(Version::from_alpn(b"moqt-18"), Some(Version::Draft18));
    /// assert_eq!(Version::from_alpn(b"h3"), None);
    /// ```
    pub fn from_alpn(alpn: &[u8]) -> Option<Version> {
        Version::ALL
            .iter()
            .copied()
            .find(|v| v.alpn().as_bytes() == alpn)
    }

    /// Looks a version up by its draft number.
    pub fn from_draft(draft: u32) -> Option<Version> {
        Version::ALL.iter().copied().find(|v| v.draft() == draft)
    }

    /// Range Filter parameters (0x25-0x29), MAX_FILTER_RANGES, CONFLICTING_FILTERS and
    /// INVALID_FILTER exist (added in draft-19).
    pub const fn has_range_filters(self) -> bool {
        matches!(self, Version::Draft19)
    }

    /// The MAX_REQUEST_UPDATES setup option and TOO_MANY_REQUEST_UPDATES exist (draft-19).
    pub const fn has_max_request_updates(self) -> bool {
        matches!(self, Version::Draft19)
    }

    /// GOAWAY on the control stream carries a trailing Request ID (draft-18 only).
    pub const fn goaway_has_request_id(self) -> bool {
        matches!(self, Version::Draft18)
    }

    /// GROUP_ORDER may appear in PUBLISH_OK (draft-18); from draft-19 it moved to
    /// SUBSCRIBE_TRACKS.
    pub const fn group_order_in_publish_ok(self) -> bool {
        matches!(self, Version::Draft18)
    }

    /// A requester's FIN cancels its SUBSCRIBE_NAMESPACE or SUBSCRIBE_TRACKS (draft-18 §6.1);
    /// from draft-19 a FIN only says the requester sends nothing more (§3.3.2).
    pub const fn fin_cancels_discovery(self) -> bool {
        matches!(self, Version::Draft18)
    }

    /// Several concurrent subscriptions to one track are allowed (draft-19); draft-18 answers
    /// a second one with DUPLICATE_SUBSCRIPTION.
    pub const fn allows_duplicate_subscriptions(self) -> bool {
        matches!(self, Version::Draft19)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "draft-{}", self.draft())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_round_trip() {
        for v in Version::ALL {
            assert_eq!(Version::from_alpn(v.alpn().as_bytes()), Some(*v));
            assert_eq!(Version::from_draft(v.draft()), Some(*v));
        }
        assert!(Version::Draft19 > Version::Draft18);
        assert_eq!(Version::Draft19.to_string(), "draft-19");
    }
}
