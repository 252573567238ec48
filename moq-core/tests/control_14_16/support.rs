//! Helpers shared by the draft-14/16 control message tests: encoding and decoding at a version,
//! parameters, the vectors' common fields.

use bytes::Bytes;
use moq_core::message::{
    Address, Envelope, Fetch, FetchType, Message, MessageReader, Parameters, RequestType,
    Subscribe, frame_len,
};
use moq_core::{
    FullTrackName, GroupOrder, KeyValuePair, Location, LocationFilter, Properties, TrackNamespace,
    Version,
};

pub(crate) const D14: Version = Version::Draft14;
pub(crate) const D15: Version = Version::Draft15;
pub(crate) const D16: Version = Version::Draft16;
pub(crate) const FAMILY: [Version; 3] = [D14, D15, D16];

pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub(crate) fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

pub(crate) fn track(fields: &[&str], name: &str) -> FullTrackName {
    FullTrackName::new(ns(fields), Bytes::copy_from_slice(name.as_bytes())).unwrap()
}

pub(crate) fn to(id: u64) -> Envelope {
    Envelope {
        address: Some(Address::Request(id)),
        answers: None,
    }
}

pub(crate) fn answer(id: u64, kind: RequestType) -> Envelope {
    Envelope {
        address: Some(Address::Request(id)),
        answers: Some(kind),
    }
}

pub(crate) fn named(n: TrackNamespace) -> Envelope {
    Envelope {
        address: Some(Address::Namespace(n)),
        answers: None,
    }
}

pub(crate) fn props(pairs: &[(u64, u64)]) -> Properties {
    Properties::from_pairs(
        pairs
            .iter()
            .map(|(k, x)| KeyValuePair::int(*k, *x).unwrap()),
    )
    .unwrap()
}

/// Decoding `bytes` gives `msg` and the envelope's address and consumes them all; encoding
/// `msg` with `env` gives `bytes`; the type is named `name` in `v`.
pub(crate) fn check(bytes: &[u8], msg: impl Into<Message>, env: &Envelope, v: Version, name: &str) {
    let msg = msg.into();
    let mut cur = bytes;
    let (got, address) = Message::decode_addressed(&mut cur, v)
        .unwrap_or_else(|e| panic!("decode {name} under {v}: {e}"));
    assert_eq!(got, msg, "decode {name} under {v}");
    assert_eq!(address, env.address, "address of {name} under {v}");
    assert!(cur.is_empty(), "bytes left over");
    assert_eq!(
        msg.encode_addressed_to_vec(env, v).unwrap(),
        bytes,
        "encode {name} under {v}"
    );
    assert_eq!(msg.type_code_in(env, v).unwrap().1, name);
    assert_eq!(frame_len(bytes, v).unwrap(), Some(bytes.len()));
}

/// Encodes with `env`, decodes, and compares; re-encoding gives the same bytes.
pub(crate) fn round_trip(msg: &Message, env: &Envelope, v: Version) {
    let bytes = msg
        .encode_addressed_to_vec(env, v)
        .unwrap_or_else(|e| panic!("encode {msg:?} under {v}: {e}"));
    let mut cur = &bytes[..];
    let (back, address) = Message::decode_addressed(&mut cur, v)
        .unwrap_or_else(|e| panic!("decode {msg:?} under {v}: {e}"));
    assert_eq!(&back, msg, "under {v}");
    assert_eq!(address, env.address, "address under {v}");
    assert!(cur.is_empty());
    assert_eq!(back.encode_addressed_to_vec(env, v).unwrap(), bytes);
    // The reader yields the same, byte by byte.
    let mut r = MessageReader::new(v);
    let mut got = None;
    for b in &bytes {
        r.push(&[*b]);
        if let Some(m) = r.next_addressed().unwrap() {
            got = Some(m);
        }
    }
    assert_eq!(got, Some((msg.clone(), env.address.clone())));
}

// ---------------------------------------------------------------------------------------------
// SUBSCRIBE, SUBSCRIBE_OK, SUBSCRIBE_ERROR, REQUEST_ERROR (draft-14 §9.7-§9.9, draft-16 §9.8-§9.10)

pub(crate) fn subscribe() -> Subscribe {
    Subscribe {
        request_id: 2,
        track: track(&["ns"], "t"),
        params: Parameters {
            object_delivery_timeout: Some(500),
            subscriber_priority: Some(7),
            group_order: Some(GroupOrder::Descending),
            forward: Some(true),
            location_filter: Some(LocationFilter::AbsoluteRange {
                start: Location::new(5, 1),
                end_group_delta: 4,
                end_object: None,
            }),
            ..Default::default()
        },
    }
}

// ---------------------------------------------------------------------------------------------
// FETCH, FETCH_OK (draft-14 §9.16-§9.17, draft-16 §9.16-§9.17)

pub(crate) fn standalone_fetch() -> Fetch {
    Fetch {
        request_id: 8,
        fetch_type: FetchType::Standalone {
            track: track(&["a", "bc"], "t"),
            start: Location::new(1, 0),
            end: Location::new(3, 0),
        },
        params: Parameters {
            subscriber_priority: Some(9),
            group_order: Some(GroupOrder::Ascending),
            ..Default::default()
        },
    }
}

/// The draft-14 request kind an answer type names, for re-encoding it.
pub(crate) fn answers(ty: u8) -> Option<RequestType> {
    Some(match ty {
        0x05 | 0x04 => RequestType::Subscribe,
        0x1E | 0x1F => RequestType::Publish,
        0x18 | 0x19 => RequestType::Fetch,
        0x0E | 0x0F => RequestType::TrackStatus,
        0x07 | 0x08 => RequestType::PublishNamespace,
        0x12 | 0x13 => RequestType::SubscribeNamespace,
        _ => return None,
    })
}
