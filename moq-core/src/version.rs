//! Protocol versions and what differs between them.
//!
//! A [`Version`] is chosen before the first control byte is read (by ALPN on raw QUIC or by
//! `WT-Protocol` on WebTransport) and is passed to every encode and decode. Where two versions
//! differ, the codec asks the version a question (`has_range_filters`, `goaway_has_request_id`,
//! ...) instead of duplicating code: a new draft is a new variant plus answers to those questions.

use std::fmt;

/// A MOQT draft version this crate can speak.
///
/// Ordered by draft number, so `v >= Version::Draft19` reads as "draft-19 or later". Where
/// versions differ, a predicate below answers with a range ("from", "until"), never with one
/// version: a new draft is a variant, its rows in the tables, and the predicates it moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Version {
    /// draft-ietf-moq-transport-14, ALPN `moq-00`: the version is negotiated in
    /// CLIENT_SETUP / SERVER_SETUP (0xff00000E). One bidirectional control stream.
    Draft14,
    /// draft-ietf-moq-transport-15, ALPN `moqt-15`. One bidirectional control stream.
    Draft15,
    /// draft-ietf-moq-transport-16, ALPN `moqt-16`. One bidirectional control stream;
    /// SUBSCRIBE_NAMESPACE on a stream of its own.
    Draft16,
    /// draft-ietf-moq-transport-17, ALPN `moqt-17`: the first with a request per stream and
    /// vi64 integers; SUBSCRIBE_NAMESPACE (0x11) still carries Subscribe Options, and every
    /// request names a Required Request ID.
    Draft17,
    /// draft-ietf-moq-transport-18, ALPN `moqt-18`.
    Draft18,
    /// draft-ietf-moq-transport-19, ALPN `moqt-19`.
    Draft19,
    /// draft-ietf-moq-transport-20, ALPN `moqt-20`: the working group's interop target.
    Draft20,
    /// draft-ietf-moq-transport-21, ALPN `moqt-21`: wire-identical to draft-20.
    Draft21,
    /// draft-ietf-moq-transport-22, ALPN `moqt-22`: draft-21 with a typed LOCATION_FILTER.
    Draft22,
}

/// How LOCATION_FILTER (0x21) is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FilterEncoding {
    /// Drafts 18-19: Filter Type 0x1-0x4, then its fields.
    FilterType,
    /// Drafts 20-21: a Length, then 0 to 4 varints whose number says what they are.
    Length,
    /// Draft 22: a Location Filter Type 0x0-0x5 that names the fields.
    LocationType,
}

impl Version {
    /// Every supported version, most preferred first (the newest).
    pub const ALL: &'static [Version] = &[
        Version::Draft22,
        Version::Draft21,
        Version::Draft20,
        Version::Draft19,
        Version::Draft18,
        Version::Draft17,
        Version::Draft16,
        Version::Draft15,
        Version::Draft14,
    ];

    /// The version we prefer when a peer offers several.
    pub const PREFERRED: Version = Version::Draft22;

    /// The ALPN token (raw QUIC) and WebTransport protocol token for this version.
    ///
    /// ```
    /// use moq_core::Version;
    /// assert_eq!(Version::Draft19.alpn(), "moqt-19");
    /// assert_eq!(Version::Draft22.alpn(), "moqt-22");
    /// assert_eq!(Version::Draft14.alpn(), "moq-00");
    /// ```
    pub const fn alpn(self) -> &'static str {
        match self {
            // draft-14 §3.1: every draft up to 14 shares `moq-00`; CLIENT_SETUP picks one.
            Version::Draft14 => "moq-00",
            Version::Draft15 => "moqt-15",
            Version::Draft16 => "moqt-16",
            Version::Draft17 => "moqt-17",
            Version::Draft18 => "moqt-18",
            Version::Draft19 => "moqt-19",
            Version::Draft20 => "moqt-20",
            Version::Draft21 => "moqt-21",
            Version::Draft22 => "moqt-22",
        }
    }

    /// The draft number, e.g. 19.
    pub const fn draft(self) -> u32 {
        match self {
            Version::Draft14 => 14,
            Version::Draft15 => 15,
            Version::Draft16 => 16,
            Version::Draft17 => 17,
            Version::Draft18 => 18,
            Version::Draft19 => 19,
            Version::Draft20 => 20,
            Version::Draft21 => 21,
            Version::Draft22 => 22,
        }
    }

    /// Looks a version up by its ALPN / WebTransport protocol token.
    ///
    /// ```
    /// use moq_core::Version;
    /// assert_eq!(Version::from_alpn(b"moqt-18"), Some(Version::Draft18));
    /// assert_eq!(Version::from_alpn(b"moqt-21"), Some(Version::Draft21));
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

    /// True from draft `n` on.
    const fn from(self, n: u32) -> bool {
        self.draft() >= n
    }

    /// True up to and including draft `n`.
    const fn until(self, n: u32) -> bool {
        self.draft() <= n
    }

    /// The MoQ Cluster extension (draft-lcurley-moq-cluster) can be negotiated: its HOP_ID
    /// option needs the Key-Value-Pair SETUP of draft-17 on; earlier drafts keep its options
    /// as unknown ones and its parameters do not exist.
    pub const fn has_cluster_extension(self) -> bool {
        self.from(17)
    }

    /// Range Filter parameters (0x25-0x29), MAX_FILTER_RANGES, CONFLICTING_FILTERS and
    /// INVALID_FILTER exist (from draft-19).
    pub const fn has_range_filters(self) -> bool {
        self.from(19)
    }

    /// The MAX_REQUEST_UPDATES setup option and TOO_MANY_REQUEST_UPDATES exist (from draft-19).
    pub const fn has_max_request_updates(self) -> bool {
        self.from(19)
    }

    /// GOAWAY on the control stream carries a trailing Request ID (draft-18 only: added in 18,
    /// dropped in 19; drafts 14-16 have no such field).
    pub const fn goaway_has_request_id(self) -> bool {
        self.from(18) && self.until(18)
    }

    /// GROUP_ORDER may appear in PUBLISH_OK (until draft-18); from draft-19 it moved to
    /// SUBSCRIBE_TRACKS.
    pub const fn group_order_in_publish_ok(self) -> bool {
        self.until(18)
    }

    /// A requester's FIN cancels its SUBSCRIBE_NAMESPACE or SUBSCRIBE_TRACKS (until draft-18,
    /// §6.1); from draft-19 a FIN only says the requester sends nothing more (§3.3.2).
    pub const fn fin_cancels_discovery(self) -> bool {
        self.until(18)
    }

    /// Several concurrent subscriptions to one track are allowed: drafts 16 to 18 answer a
    /// second one with DUPLICATE_SUBSCRIPTION (added in 16, removed in 19); draft-14 and -15
    /// have no such rule or code.
    pub const fn allows_duplicate_subscriptions(self) -> bool {
        !(self.from(16) && self.until(18))
    }

    /// How LOCATION_FILTER is encoded.
    pub const fn filter_encoding(self) -> FilterEncoding {
        if self.until(19) {
            FilterEncoding::FilterType
        } else if self.until(21) {
            FilterEncoding::Length
        } else {
            FilterEncoding::LocationType
        }
    }

    /// FETCH carries a Fetch Type and Standalone / Joining fields, and Joining FETCH exists
    /// (until draft-19); from draft-20 FETCH names the track and its range travels in
    /// LOCATION_FILTER, and a subscription's past comes on fill fetch streams.
    pub const fn fetch_has_type(self) -> bool {
        self.until(19)
    }

    /// Draft-20 additions: PUBLISH_STATE_NOTIFY (0x22), FILL_PARAMETERS (0x23) and fill fetch
    /// streams, INCLUDE_PROPERTIES (0x35), the End of Timed-Out Range fetch entry; the
    /// subscription's parameters travel in PUBLISH and REQUEST_UPDATE, not in PUBLISH_OK.
    pub const fn has_fill(self) -> bool {
        self.from(20)
    }

    /// A subscription ends when the Largest Object passes its filter's end, with PUBLISH_DONE
    /// SUBSCRIPTION_ENDED (until draft-19; removed in draft-20).
    pub const fn has_subscription_ended(self) -> bool {
        self.until(19)
    }

    /// Every request carries a Required Request ID Delta after its Request ID, and
    /// INVALID_REQUIRED_REQUEST_ID (0x7) is a session error (draft-17 only: added in 17,
    /// removed in 18).
    pub const fn has_required_request_id(self) -> bool {
        self.from(17) && self.until(17)
    }

    /// Track Namespaces whose first field begins with "." are reserved: a first field of
    /// exactly "." is never used and ".session" names session-level tracks and namespaces
    /// (from draft-18: draft-19 §3.2.1-2, draft-22 §2.4.3 and §6.5). Before, they are
    /// ordinary names.
    pub const fn has_reserved_namespaces(self) -> bool {
        self.from(18)
    }

    /// DELIVERY_TIMEOUT is split into OBJECT_DELIVERY_TIMEOUT (0x02) and
    /// SUBGROUP_DELIVERY_TIMEOUT (0x06), and FILL_TIMEOUT (0x0A) and TRACK_NAMESPACE_PREFIX
    /// (0x34) exist (from draft-18); draft-17 has DELIVERY_TIMEOUT (0x02) alone.
    pub const fn has_draft18_parameters(self) -> bool {
        self.from(18)
    }

    /// REQUEST_OK ends with the track's Track Properties (from draft-18); draft-17's
    /// REQUEST_OK carries Parameters only.
    pub const fn request_ok_has_properties(self) -> bool {
        self.from(18)
    }

    /// The 7-byte form of a vi64 (first byte 0b1111110x) is valid (from draft-18); in draft-17
    /// it is an error.
    pub const fn vi64_has_seven_bytes(self) -> bool {
        self.from(18)
    }

    /// The VERSION_NEGOTIATION_FAILED session error exists (until draft-19).
    pub const fn has_version_negotiation_failed(self) -> bool {
        self.until(19)
    }

    // Drafts 14-16 (the "single control stream" family): the session's shape.

    /// The version number sent in CLIENT_SETUP / SERVER_SETUP (draft-14 §9.3.1: 0xff000000 +
    /// draft), for the versions that negotiate there.
    pub const fn setup_number(self) -> u64 {
        0xff00_0000 + self.draft() as u64
    }

    /// Looks a version up by its CLIENT_SETUP / SERVER_SETUP number.
    pub fn from_setup_number(n: u64) -> Option<Version> {
        Version::ALL.iter().copied().find(|v| v.setup_number() == n)
    }

    /// Integers are QUIC variable-length integers (RFC 9000 §16) until draft-16; vi64 from
    /// draft-17.
    pub const fn quic_varints(self) -> bool {
        self.until(16)
    }

    /// One bidirectional control stream, opened by the client, carries CLIENT_SETUP /
    /// SERVER_SETUP and every request's messages, addressed by Request ID (until draft-16).
    /// From draft-17 each side opens a unidirectional control stream and every request has a
    /// bidirectional stream of its own.
    pub const fn single_control_stream(self) -> bool {
        self.until(16)
    }

    /// CLIENT_SETUP lists versions and SERVER_SETUP selects one (until draft-14); from
    /// draft-15 ALPN or the WebTransport protocol selects the version.
    pub const fn setup_has_versions(self) -> bool {
        self.until(14)
    }

    /// SUBSCRIBE_NAMESPACE opens a bidirectional stream of its own, answered there and
    /// followed by NAMESPACE / NAMESPACE_DONE (from draft-16; draft-14/15 run it on the
    /// control stream and answer with PUBLISH_NAMESPACE / PUBLISH_NAMESPACE_DONE).
    pub const fn subscribe_namespace_stream(self) -> bool {
        self.from(16)
    }

    /// Key-Value-Pair types are deltas from the previous pair's type (from draft-16); until
    /// draft-15 each pair carries its type.
    pub const fn kvp_delta_types(self) -> bool {
        self.from(16)
    }

    // Drafts 14-16, control messages (filled in with the codec).

    /// REQUEST_OK (0x07) and REQUEST_ERROR (0x05) answer requests, with one registry of error
    /// codes (from draft-15); draft-14 has a *_OK and an *_ERROR message per request kind,
    /// each with its own codes.
    pub const fn has_request_ok(self) -> bool {
        self.from(15)
    }

    /// SUBSCRIBE, SUBSCRIBE_OK, SUBSCRIBE_UPDATE, PUBLISH, PUBLISH_OK, FETCH and FETCH_OK carry
    /// Subscriber Priority, Group Order, Forward, the filter, Expires and Largest Location as
    /// fields of their own (until draft-14); from draft-15 they are Message Parameters.
    pub const fn inline_request_fields(self) -> bool {
        self.until(14)
    }

    /// Message Parameters are Key-Value-Pairs whose type's parity gives the value's shape
    /// (until draft-16); from draft-17 each parameter has its own encoding.
    pub const fn params_are_kvps(self) -> bool {
        self.until(16)
    }

    /// An unknown Message Parameter is ignored (until draft-15); from draft-16 it closes the
    /// session with PROTOCOL_VIOLATION.
    pub const fn ignores_unknown_params(self) -> bool {
        self.until(15)
    }

    /// The publisher's track-level values (DELIVERY_TIMEOUT, MAX_CACHE_DURATION, the default
    /// publisher priority and group order) travel in trailing Track Extensions (Track
    /// Properties) of SUBSCRIBE_OK, PUBLISH and FETCH_OK (from draft-16); until draft-15 they
    /// are Message Parameters of those messages.
    pub const fn has_track_extensions(self) -> bool {
        self.from(16)
    }

    /// REQUEST_ERROR carries a Retry Interval (from draft-16).
    pub const fn request_error_has_retry(self) -> bool {
        self.from(16)
    }

    /// A REQUEST_UPDATE (SUBSCRIBE_UPDATE) is answered with REQUEST_OK or REQUEST_ERROR (from
    /// draft-15); draft-14's SUBSCRIBE_UPDATE has no answer.
    pub const fn update_is_answered(self) -> bool {
        self.from(15)
    }

    /// PUBLISH_OK (0x1E) answers PUBLISH (until draft-17); from draft-18 REQUEST_OK does.
    pub const fn has_publish_ok(self) -> bool {
        self.until(17)
    }

    /// PUBLISH_NAMESPACE_DONE and PUBLISH_NAMESPACE_CANCEL name the namespace instead of the
    /// PUBLISH_NAMESPACE's Request ID (until draft-15).
    pub const fn namespace_done_by_namespace(self) -> bool {
        self.until(15)
    }

    /// UNSUBSCRIBE_NAMESPACE names the prefix instead of the SUBSCRIBE_NAMESPACE's Request ID
    /// (until draft-14).
    pub const fn unsubscribe_namespace_by_prefix(self) -> bool {
        self.until(14)
    }

    /// SUBSCRIBE_NAMESPACE carries Subscribe Options (0 PUBLISH, 1 NAMESPACE, 2 both) after
    /// its prefix (drafts 16 and 17); SUBSCRIBE_TRACKS replaces option 0 from draft-18.
    pub const fn has_subscribe_options(self) -> bool {
        self.from(16) && self.until(17)
    }

    /// SUBSCRIBE_NAMESPACE is 0x11 (until draft-17); 0x50 from draft-18.
    pub const fn subscribe_namespace_is_0x11(self) -> bool {
        self.until(17)
    }

    /// A Track Namespace may have zero fields (from draft-17); until draft-16 zero fields is a
    /// PROTOCOL_VIOLATION (draft-14 §2.4.1, draft-16 §2.4.1).
    pub const fn allows_empty_namespace(self) -> bool {
        self.from(17)
    }

    /// The prefix of SUBSCRIBE_NAMESPACE may have zero fields (from draft-16, §9.25).
    pub const fn allows_empty_prefix(self) -> bool {
        self.from(16)
    }

    /// GOAWAY carries a Timeout after the New Session URI (from draft-17).
    pub const fn goaway_has_timeout(self) -> bool {
        self.from(17)
    }

    /// CLIENT_SETUP / SERVER_SETUP carry the MAX_REQUEST_ID setup parameter 0x02 (until
    /// draft-16).
    pub const fn has_max_request_id(self) -> bool {
        self.until(16)
    }

    /// The setup parameter type of MOQT_IMPLEMENTATION that the text gives: 0x05 in draft-14
    /// (§9.3.2.6, the same number as AUTHORITY), 0x07 from draft-15.
    pub const fn implementation_option_is_0x05(self) -> bool {
        self.until(14)
    }

    /// The NEW_GROUP_REQUEST parameter and the DYNAMIC_GROUPS track property exist (from
    /// draft-16).
    pub const fn has_new_group_request(self) -> bool {
        self.from(16)
    }

    /// DELIVERY_TIMEOUT of 0 is a PROTOCOL_VIOLATION (from draft-16, §9.2.2.2).
    pub const fn delivery_timeout_nonzero(self) -> bool {
        self.from(16)
    }

    /// A Subscription Filter's AbsoluteRange carries End Group Delta (from draft-17); until
    /// draft-16 it carries the End Group itself (draft-16 §5.1.2).
    pub const fn filter_end_group_is_delta(self) -> bool {
        self.from(17)
    }

    /// The REQUEST_ERROR and PUBLISH_DONE code registries differ from the newest drafts'
    /// (until draft-16): codes are translated on the wire (see [`crate::codes`]).
    pub const fn translates_error_codes(self) -> bool {
        self.until(17)
    }

    // Drafts 14-16, data plane (filled in with the codec).

    /// An object may leave out its Publisher Priority and inherit the subscription's: the
    /// DEFAULT_PRIORITY bit of SUBGROUP_HEADER (0x20, types 0x30-0x3D) and of OBJECT_DATAGRAM
    /// (0x08) (from draft-15). Draft-14 always carries the priority.
    pub const fn has_default_priority(self) -> bool {
        self.from(15)
    }

    /// A status OBJECT_DATAGRAM may set ZERO_OBJECT_ID (types 0x24-0x25, 0x2C-0x2D) (from
    /// draft-15); draft-14's status datagrams 0x20-0x21 always carry the Object ID.
    pub const fn status_datagram_zero_object_id(self) -> bool {
        self.from(15)
    }

    /// SUBGROUP_HEADER's FIRST_OBJECT bit (0x40) exists (from draft-18).
    pub const fn has_first_object_bit(self) -> bool {
        self.from(18)
    }

    /// PADDING streams (0x132B3E28) and datagrams (0x132B3E29) exist (from draft-18).
    pub const fn has_padding(self) -> bool {
        self.from(18)
    }

    /// Object Status 0x1, Object Does Not Exist, exists (until draft-15; draft-16 redid
    /// missing objects and removed it).
    pub const fn has_object_does_not_exist(self) -> bool {
        self.until(15)
    }

    /// Only a Normal object may carry extension headers / properties (from draft-15);
    /// draft-14 forbids them only on an Object Does Not Exist.
    pub const fn properties_only_on_normal(self) -> bool {
        self.from(15)
    }

    /// A fetch object starts with Serialization Flags and may refer to the prior object's
    /// fields (from draft-15); draft-14 writes Group, Subgroup and Object ID, priority and an
    /// Extension Headers Length on every object.
    pub const fn fetch_serialization_flags(self) -> bool {
        self.from(15)
    }

    /// The Serialization Flags are a varint with the DATAGRAM flag (0x40) and the End of Range
    /// values 0x8C and 0x10C (from draft-16); draft-15's are one byte without them.
    pub const fn fetch_end_of_range(self) -> bool {
        self.from(16)
    }

    /// A fetch object whose Payload Length is 0 carries an Object Status (until draft-15).
    pub const fn fetch_object_status(self) -> bool {
        self.until(15)
    }

    /// A fetch object's Group ID and Object ID fields are deltas from the prior entry (from
    /// draft-18); before, they are absolute.
    pub const fn fetch_id_deltas(self) -> bool {
        self.from(18)
    }

    /// Property types 0x4000-0x7FFF are Mandatory Track Properties, never on an object (from
    /// draft-18).
    pub const fn has_mandatory_track_properties(self) -> bool {
        self.from(18)
    }

    /// A DELIVERY_TIMEOUT track extension (0x02) of 0 is a PROTOCOL_VIOLATION (from draft-16,
    /// which has track extensions, until draft-17; draft-18 split it in two and dropped the
    /// rule).
    pub const fn zero_delivery_timeout_invalid(self) -> bool {
        self.from(16) && self.until(17)
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
        assert!(Version::Draft22 > Version::Draft20);
        assert_eq!(Version::Draft19.to_string(), "draft-19");
        assert_eq!(Version::ALL.first(), Some(&Version::PREFERRED));
    }

    #[test]
    fn predicates_are_ranges() {
        use Version::*;
        let from = |f: fn(Version) -> bool| {
            Version::ALL
                .iter()
                .copied()
                .filter(|v| f(*v))
                .min()
                .map(|v| v.draft())
        };
        assert_eq!(from(Version::has_range_filters), Some(19));
        assert_eq!(from(Version::has_fill), Some(20));
        assert!(Draft19.fetch_has_type() && !Draft20.fetch_has_type());
        assert_eq!(Draft21.filter_encoding(), FilterEncoding::Length);
        assert_eq!(Draft22.filter_encoding(), FilterEncoding::LocationType);
        assert_eq!(Draft18.filter_encoding(), FilterEncoding::FilterType);
        assert!(Draft16.single_control_stream() && !Draft18.single_control_stream());
        assert!(Draft14.setup_has_versions() && !Draft15.setup_has_versions());
        assert_eq!(Version::from_setup_number(0xff00000e), Some(Draft14));
    }
}
