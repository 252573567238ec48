//! Reading the input: versions, names, parameters, and control or request messages for a place.

use super::*;

pub(crate) fn version(u: &mut Unstructured<'_>) -> Version {
    let i = u.choose_index(Version::ALL.len()).unwrap_or(0);
    Version::ALL.get(i).copied().unwrap_or(Version::PREFERRED)
}

pub(crate) fn small(u: &mut Unstructured<'_>, max: u64) -> u64 {
    u.int_in_range(0..=max).unwrap_or(0)
}

pub(crate) fn bytes(u: &mut Unstructured<'_>, max: usize) -> Vec<u8> {
    let n = u.int_in_range(0..=max).unwrap_or(0);
    u.bytes(n.min(u.len()))
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

pub(crate) fn flag(u: &mut Unstructured<'_>) -> bool {
    u.arbitrary().unwrap_or(false)
}

/// A namespace from a small pool, so both sides meet on the same names.
pub(crate) fn namespace(u: &mut Unstructured<'_>) -> TrackNamespace {
    let fields: &[&str] = match small(u, 4) {
        0 => &[],
        1 => &["live"],
        2 => &["live", "a"],
        3 => &["live", "b"],
        _ => &["other", "x", "y"],
    };
    TrackNamespace::from_strs(fields.iter().copied()).unwrap_or_default()
}

pub(crate) fn track(u: &mut Unstructured<'_>) -> FullTrackName {
    let mut ns = namespace(u);
    if ns.is_empty() {
        ns = TrackNamespace::from_strs(["live"]).unwrap_or_default();
    }
    let name = ["video", "audio", ""][small(u, 2) as usize % 3];
    FullTrackName::new(ns.clone(), name).unwrap_or_else(|_| FullTrackName {
        namespace: ns,
        name: Bytes::new(),
    })
}

pub(crate) fn location(u: &mut Unstructured<'_>) -> Location {
    Location {
        group: small(u, 8),
        object: small(u, 8),
    }
}

/// A few parameters, each maybe present.
pub(crate) fn params(u: &mut Unstructured<'_>) -> Parameters {
    let mut p = Parameters::default();
    if !flag(u) {
        return p;
    }
    if flag(u) {
        p.forward = Some(flag(u));
    }
    if flag(u) {
        p.subscriber_priority = Some(small(u, 255) as u8);
    }
    if flag(u) {
        p.group_order = Some(if flag(u) {
            GroupOrder::Ascending
        } else {
            GroupOrder::Descending
        });
    }
    if flag(u) {
        p.largest_object = Some(location(u));
    }
    if flag(u) {
        p.expires = Some(small(u, 100_000));
    }
    if flag(u) {
        p.location_filter = Some(match small(u, 3) {
            0 => LocationFilter::All,
            1 => LocationFilter::NextGroupStart,
            2 => LocationFilter::LargestObject,
            _ => LocationFilter::AbsoluteStart(location(u)),
        });
    }
    if flag(u) {
        p.object_delivery_timeout = Some(small(u, 10_000));
    }
    if flag(u) {
        p.new_group_request = Some(small(u, 8));
    }
    if flag(u) {
        p.track_namespace_prefix = Some(namespace(u));
    }
    p
}

pub(crate) fn request_id(u: &mut Unstructured<'_>, next: &mut u64) -> u64 {
    if u.ratio(15, 16).unwrap_or(true) {
        let id = *next;
        *next += 2;
        id
    } else {
        small(u, 64)
    }
}

pub(crate) fn request_type(u: &mut Unstructured<'_>) -> RequestType {
    match small(u, 7) {
        0 => RequestType::Subscribe,
        1 => RequestType::Publish,
        2 => RequestType::Fetch,
        3 => RequestType::TrackStatus,
        4 => RequestType::PublishNamespace,
        5 => RequestType::SubscribeNamespace,
        6 => RequestType::SubscribeTracks,
        _ => RequestType::RequestUpdate,
    }
}

pub(crate) fn setup_options(u: &mut Unstructured<'_>, v: Version, client: bool) -> SetupOptions {
    let mut o = SetupOptions {
        implementation: Some("fuzz-peer".into()),
        ..Default::default()
    };
    // A client on raw QUIC names its path; a server must not.
    if client && !u.ratio(1, 16).unwrap_or(false) {
        o.path = Some(Bytes::from_static(b"/moq"));
        o.authority = Some(Bytes::from_static(b"localhost"));
    }
    if v.has_max_request_updates() && flag(u) {
        o.max_request_updates = Some(small(u, 8));
    }
    if flag(u) {
        o.max_auth_token_cache_size = Some(small(u, 4096));
    }
    o
}

/// A control or request message, structurally valid (it may still break the protocol).
pub(crate) fn message(u: &mut Unstructured<'_>, kind: u64, next_id: &mut u64) -> Message {
    match kind {
        0 => Subscribe {
            request_id: request_id(u, next_id),
            track: track(u),
            params: params(u),
        }
        .into(),
        1 => Publish {
            request_id: request_id(u, next_id),
            track: track(u),
            track_alias: small(u, 4),
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        2 => Fetch {
            request_id: request_id(u, next_id),
            fetch_type: if flag(u) {
                FetchType::Standalone {
                    track: track(u),
                    start: location(u),
                    end: location(u),
                }
            } else if flag(u) {
                FetchType::Relative {
                    track: track(u),
                    filter: LocationFilter::AbsoluteStart(location(u)),
                }
            } else {
                FetchType::RelativeJoining {
                    joining_request_id: small(u, 16),
                    joining_start: small(u, 4),
                }
            },
            params: params(u),
        }
        .into(),
        3 => TrackStatus {
            request_id: request_id(u, next_id),
            track: track(u),
            params: params(u),
        }
        .into(),
        4 => PublishNamespace {
            request_id: request_id(u, next_id),
            namespace: namespace(u),
            params: params(u),
        }
        .into(),
        5 => SubscribeNamespace {
            request_id: request_id(u, next_id),
            prefix: namespace(u),
            params: params(u),
        }
        .into(),
        6 => SubscribeTracks {
            request_id: request_id(u, next_id),
            prefix: namespace(u),
            params: params(u),
        }
        .into(),
        7 => RequestUpdate {
            request_id: small(u, 16),
            params: params(u),
        }
        .into(),
        8 => RequestOk {
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        9 => RequestError::new(RequestErrorCode(small(u, 0x20)), "no").into(),
        10 => SubscribeOk {
            track_alias: small(u, 4),
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        11 => FetchOk {
            end_of_track: flag(u),
            end_location: location(u),
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        12 => PublishDone {
            status: PublishDoneCode(small(u, 8)),
            stream_count: small(u, 8),
            reason: String::new(),
        }
        .into(),
        13 => Namespace {
            suffix: namespace(u),
            cluster: None,
        }
        .into(),
        14 => NamespaceDone {
            suffix: namespace(u),
        }
        .into(),
        15 => PublishSkipped {
            suffix: namespace(u),
            name: Bytes::from_static(b"video"),
        }
        .into(),
        16 => Goaway {
            // A client's GOAWAY has no URI (draft-19 §10.4): a URI, now and then, is a
            // violation whichever side sends it.
            new_session_uri: if u.ratio(7, 8).unwrap_or(true) {
                Bytes::new()
            } else {
                Bytes::from_static(b"moqt://elsewhere/moq")
            },
            timeout_ms: small(u, 10_000),
            request_id: flag(u).then(|| small(u, 16)),
        }
        .into(),
        17 => Setup {
            options: setup_options(u, Version::PREFERRED, false),
        }
        .into(),
        18 => MaxRequestId {
            request_id: small(u, 128),
        }
        .into(),
        19 => RequestsBlocked {
            maximum_request_id: small(u, 128),
        }
        .into(),
        20 => Unsubscribe.into(),
        21 => FetchCancel.into(),
        22 => PublishNamespaceDone.into(),
        23 => PublishNamespaceCancel {
            code: RequestErrorCode(small(u, 0x20)),
            reason: String::new(),
        }
        .into(),
        24 => UnsubscribeNamespace.into(),
        _ => PublishStateNotify { params: params(u) }.into(),
    }
}

/// Encodes a message with an envelope the input picks (drafts 14-16 address answers by
/// Request ID); falls back to raw bytes if the message has no encoding in this version.
pub(crate) fn encode(u: &mut Unstructured<'_>, msg: &Message, v: Version) -> Vec<u8> {
    let env = if v.single_control_stream() && flag(u) {
        Envelope {
            address: Some(if u.ratio(1, 8).unwrap_or(false) {
                Address::Namespace(namespace(u))
            } else {
                Address::Request(small(u, 16))
            }),
            answers: Some(request_type(u)),
        }
    } else {
        Envelope::default()
    };
    msg.encode_addressed_to_vec(&env, v)
        .or_else(|_| msg.encode_to_vec(v))
        .unwrap_or_default()
}

/// Where a message goes, which decides the kinds a well-behaved peer would send there (with
/// any kind now and then).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// The control stream.
    Control,
    /// The first message of a request stream the peer opens.
    Opening,
    /// A later message on a request stream: answers, updates, NAMESPACE, ...
    Request,
}

/// Message bytes for `place`: mostly an encoded message of a kind that belongs there,
/// sometimes any kind, sometimes raw bytes.
pub(crate) fn message_bytes(
    u: &mut Unstructured<'_>,
    v: Version,
    place: Place,
    next_id: &mut u64,
) -> Vec<u8> {
    if u.ratio(1, 64).unwrap_or(false) {
        return bytes(u, 64);
    }
    let any = u.ratio(1, 16).unwrap_or(false);
    let kind = if any {
        small(u, 25)
    } else {
        match place {
            // Drafts 14-16 carry every request on the control stream; later ones only GOAWAY.
            Place::Control if v.single_control_stream() => small(u, 25),
            Place::Control => 16,
            Place::Opening => small(u, 6),
            Place::Request => 7 + small(u, 8),
        }
    };
    let m = message(u, kind, next_id);
    let b = encode(u, &m, v);
    if b.is_empty() && place == Place::Opening {
        // The kind has no encoding in this version (FETCH's forms differ): open with a
        // SUBSCRIBE rather than with nothing.
        let m = message(u, 0, next_id);
        return encode(u, &m, v);
    }
    b
}
