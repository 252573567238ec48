//! Property-based round trips under draft-18 and draft-19: every control message (encode, decode,
//! re-encode to the same bytes, and byte-by-byte through `MessageReader`), every SUBGROUP_HEADER
//! type with its objects through `SubgroupWriter` / `SubgroupReader`, every OBJECT_DATAGRAM type,
//! and fetch streams in both group orders through `FetchWriter` / `FetchReader`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod common;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use common::*;
use moq_core::coding::Vi64;
use moq_core::data::{
    Datagram, DatagramBody, FetchEvent, FetchHeader, FetchObject, FetchReader, FetchWriter,
    ObjectDatagram, ObjectStatus, PADDING_DATAGRAM_TYPE, RangeEnd, StreamType, SubgroupEvent,
    SubgroupHeader, SubgroupId, SubgroupReader, SubgroupWriter,
};
use moq_core::message::{Message, MessageReader, Namespace, NamespaceDone, frame_len};
use moq_core::{DecodeError, GroupOrder, Location, Properties, Version};

/// Encodes, decodes, and checks the result equals the original, consumes every byte, and
/// re-encodes to the same bytes.
fn check_message(msg: &Message, v: Version) {
    let bytes = msg.encode_to_vec(v).unwrap();
    assert!(bytes.len() <= 9 + 2 + 65535);

    let mut cur = &bytes[..];
    assert_eq!(Vi64::decode(&mut cur).unwrap(), msg.type_code());
    let len = u16::from_be_bytes([cur[0], cur[1]]) as usize;
    assert_eq!(len, cur.len() - 2, "Length must cover exactly the body");
    assert_eq!(frame_len(&bytes, v).unwrap(), Some(bytes.len()));

    let mut cur = &bytes[..];
    let back = Message::decode(&mut cur, v).unwrap();
    assert_eq!(&back, msg);
    assert!(cur.is_empty());
    assert_eq!(
        back.encode_to_vec(v).unwrap(),
        bytes,
        "encoding is canonical"
    );
}

fn with_version<S: Strategy>(f: fn(Version) -> S) -> impl Strategy<Value = (Version, S::Value)> {
    version().prop_flat_map(move |v| (Just(v), f(v)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn setup_round_trips((v, m) in with_version(setup)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn goaway_round_trips((v, m) in with_version(goaway)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn subscribe_round_trips((v, m) in with_version(subscribe)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn subscribe_ok_round_trips((v, m) in with_version(subscribe_ok)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn request_update_round_trips((v, m) in with_version(request_update)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_round_trips((v, m) in with_version(publish)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_done_round_trips(v in version(), m in publish_done()) {
        check_message(&m.into(), v);
    }

    #[test]
    fn fetch_round_trips((v, m) in with_version(fetch)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn fetch_ok_round_trips((v, m) in with_version(fetch_ok)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn track_status_round_trips((v, m) in with_version(track_status)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_namespace_round_trips((v, m) in with_version(publish_namespace)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn namespace_round_trips(v in version(), suffix in namespace()) {
        check_message(&Namespace { suffix, cluster: None }.into(), v);
    }

    #[test]
    fn namespace_done_round_trips(v in version(), suffix in namespace()) {
        check_message(&NamespaceDone { suffix }.into(), v);
    }

    #[test]
    fn subscribe_namespace_round_trips((v, m) in with_version(subscribe_namespace)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn subscribe_tracks_round_trips((v, m) in with_version(subscribe_tracks)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_skipped_round_trips(v in version(), m in publish_skipped()) {
        check_message(&m.into(), v);
    }

    #[test]
    fn request_ok_round_trips((v, m) in with_version(request_ok)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn request_error_round_trips(v in version(), m in request_error()) {
        check_message(&m.into(), v);
    }

    /// One byte at a time, the reader yields nothing until the last byte, then the message.
    #[test]
    fn message_reader_byte_by_byte((v, msg) in versioned_message()) {
        let bytes = msg.encode_to_vec(v).unwrap();
        let mut r = MessageReader::new(v);
        for (i, b) in bytes.iter().enumerate() {
            r.push(std::slice::from_ref(b));
            let got = r.next_message().unwrap();
            if i + 1 < bytes.len() {
                prop_assert_eq!(got, None);
            } else {
                prop_assert_eq!(got.as_ref(), Some(&msg));
            }
        }
        prop_assert_eq!(r.buffered(), 0);
    }

    /// Several messages back to back, in arbitrary chunks, come out in order.
    #[test]
    fn message_reader_chunked(
        (v, msgs) in version().prop_flat_map(|v| (Just(v), vec(any_message(v), 1..5))),
        sizes in vec(1usize..300, 0..8),
    ) {
        let mut bytes = Vec::new();
        for m in &msgs {
            m.encode(&mut bytes, v).unwrap();
        }
        let mut r = MessageReader::new(v);
        let mut got = Vec::new();
        for chunk in chunks(&bytes, &sizes) {
            r.push(chunk);
            while let Some(m) = r.next_message().unwrap() {
                got.push(m);
            }
        }
        prop_assert_eq!(got, msgs);
        prop_assert_eq!(r.buffered(), 0);
    }
}

// ---------------------------------------------------------------------------------------------
// Subgroup streams

/// One object as written: ID, properties, status, payload.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Obj {
    id: u64,
    properties: Properties,
    status: ObjectStatus,
    payload: Vec<u8>,
}

fn subgroup_header() -> impl Strategy<Value = SubgroupHeader> {
    (
        varint(),
        varint(),
        prop_oneof![
            Just(SubgroupId::Zero),
            Just(SubgroupId::FirstObject),
            varint().prop_map(SubgroupId::Explicit),
        ],
        opt(any::<u8>()),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(track_alias, group, subgroup, priority, properties, end_of_group, first_object)| {
                SubgroupHeader {
                    track_alias,
                    group,
                    subgroup,
                    priority,
                    properties,
                    end_of_group,
                    first_object,
                }
            },
        )
}

fn object_status() -> impl Strategy<Value = ObjectStatus> {
    prop_oneof![
        3 => Just(ObjectStatus::Normal),
        1 => Just(ObjectStatus::EndOfGroup),
        1 => Just(ObjectStatus::EndOfTrack),
    ]
}

/// Objects with increasing IDs; only Normal objects carry payload or properties, and only if
/// the header has the PROPERTIES bit.
fn subgroup_objects(with_properties: bool) -> impl Strategy<Value = Vec<Obj>> {
    let first = prop_oneof![0u64..10, 0u64..(1 << 62)];
    let each = (
        prop_oneof![3 => 0u64..3, 1 => 0u64..100_000],
        object_status(),
        properties(),
        vec(any::<u8>(), 0..200),
    );
    (first, vec(each, 0..8)).prop_map(move |(first, specs)| {
        let mut out: Vec<Obj> = Vec::new();
        for (gap, status, props, payload) in specs {
            let id = match out.last() {
                None => first,
                Some(p) => p.id + gap + 1,
            };
            let normal = status == ObjectStatus::Normal;
            out.push(Obj {
                id,
                properties: if normal && with_properties {
                    props
                } else {
                    Properties::new()
                },
                status,
                payload: if normal { payload } else { Vec::new() },
            });
        }
        out
    })
}

/// Writes a subgroup stream and reads it back in chunks of `sizes`.
fn check_subgroup(h: SubgroupHeader, objs: &[Obj], sizes: &[usize], v: Version) {
    let mut w = SubgroupWriter::new(h, v);
    let mut bytes = Vec::new();
    w.encode_header(&mut bytes).unwrap();
    for o in objs {
        w.encode_object(&mut bytes, o.id, &o.properties, o.status, &o.payload)
            .unwrap();
    }
    assert_eq!(w.last_object(), objs.last().map(|o| o.id));
    assert_eq!(
        StreamType::peek(&bytes, v).unwrap(),
        Some(StreamType::Subgroup(h.type_code()))
    );

    let mut pending = BytesMut::new();
    let mut reader: Option<SubgroupReader> = None;
    let mut got: Vec<Obj> = Vec::new();
    let mut open = false;
    for chunk in chunks(&bytes, sizes) {
        pending.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &pending[..];
            match SubgroupHeader::decode(&mut cur, v) {
                Ok(dh) => {
                    assert_eq!(dh, h);
                    let used = pending.len() - cur.len();
                    let _ = pending.split_to(used);
                    reader = Some(SubgroupReader::new(dh, v));
                }
                Err(DecodeError::Short) => continue,
                Err(e) => panic!("header: {e}"),
            }
        }
        let r = reader.as_mut().unwrap();
        while let Some(ev) = r.next(&mut pending).unwrap() {
            match ev {
                SubgroupEvent::Object(o) => {
                    assert!(!open, "object inside a payload");
                    assert_eq!(o.payload_len as usize, objs[got.len()].payload.len());
                    open = o.payload_len > 0;
                    got.push(Obj {
                        id: o.id,
                        properties: o.properties,
                        status: o.status,
                        payload: Vec::new(),
                    });
                }
                SubgroupEvent::Payload { data, last } => {
                    assert!(open && !data.is_empty());
                    let cur = got.last_mut().unwrap();
                    cur.payload.extend_from_slice(&data);
                    let want = objs[got.len() - 1].payload.len();
                    let cur = got.last().unwrap();
                    assert_eq!(last, cur.payload.len() == want);
                    open = !last;
                }
            }
        }
    }
    let r = reader.expect("header decoded");
    r.finish(&pending).unwrap();
    assert_eq!(got, objs);
    assert_eq!(r.last_object(), objs.last().map(|o| o.id));
    let want_subgroup = match h.subgroup {
        SubgroupId::Zero => Some(0),
        SubgroupId::Explicit(id) => Some(id),
        SubgroupId::FirstObject => objs.first().map(|o| o.id),
    };
    assert_eq!(r.subgroup_id(), want_subgroup);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn subgroup_streams_round_trip(
        v in version(),
        (h, objs) in subgroup_header().prop_flat_map(|h| (Just(h), subgroup_objects(h.properties))),
        sizes in vec(1usize..64, 0..6),
    ) {
        check_subgroup(h, &objs, &sizes, v);
    }
}

/// Every one of the 48 valid SUBGROUP_HEADER types, with objects of every status, under both
/// versions, written whole and read back one byte at a time.
#[test]
fn every_subgroup_type_with_objects() {
    let props = Properties::new()
        .with_int(4, 2_186_796_243)
        .unwrap()
        .with_bytes(77, &b"traceID:123456"[..])
        .unwrap();
    let mut types = Vec::new();
    for v in [Version::Draft18, Version::Draft19] {
        for t in 0u8..0x80 {
            if !SubgroupHeader::valid_type(t.into()) {
                continue;
            }
            let h = SubgroupHeader {
                track_alias: 300,
                group: 70_000,
                subgroup: match (t & 0x06) >> 1 {
                    0 => SubgroupId::Zero,
                    1 => SubgroupId::FirstObject,
                    _ => SubgroupId::Explicit(9),
                },
                priority: (t & 0x20 == 0).then_some(77),
                properties: t & 0x01 != 0,
                end_of_group: t & 0x08 != 0,
                first_object: t & 0x40 != 0,
            };
            assert_eq!(h.type_code(), t);
            types.push(t);
            let p = |o: &Properties| {
                if h.properties {
                    o.clone()
                } else {
                    Properties::new()
                }
            };
            let objs = [
                Obj {
                    id: 5,
                    properties: p(&props),
                    status: ObjectStatus::Normal,
                    payload: b"abcd".to_vec(),
                },
                Obj {
                    id: 6,
                    properties: Properties::new(),
                    status: ObjectStatus::Normal,
                    payload: Vec::new(),
                },
                Obj {
                    id: 200,
                    properties: p(&props),
                    status: ObjectStatus::Normal,
                    payload: vec![0xEE; 300],
                },
                Obj {
                    id: 201,
                    properties: Properties::new(),
                    status: ObjectStatus::EndOfGroup,
                    payload: Vec::new(),
                },
                Obj {
                    id: u64::MAX,
                    properties: Properties::new(),
                    status: ObjectStatus::EndOfTrack,
                    payload: Vec::new(),
                },
            ];
            check_subgroup(h, &objs, &[1], v);
            check_subgroup(h, &objs, &[], v);
        }
    }
    assert_eq!(types.len(), 2 * 48);
}

// ---------------------------------------------------------------------------------------------
// Datagrams

fn object_datagram() -> impl Strategy<Value = ObjectDatagram> {
    (
        varint(),
        varint(),
        prop_oneof![Just(0u64), varint()],
        opt(any::<u8>()),
        prop_oneof![Just(Properties::new()), nonempty_properties()],
        any::<bool>(),
        prop_oneof![
            bytes_up_to(100).prop_map(DatagramBody::Payload),
            object_status().prop_map(DatagramBody::Status),
        ],
    )
        .prop_map(
            |(track_alias, group, object, priority, properties, end_of_group, body)| {
                let status = match &body {
                    DatagramBody::Payload(_) => ObjectStatus::Normal,
                    DatagramBody::Status(s) => *s,
                };
                ObjectDatagram {
                    track_alias,
                    group,
                    object,
                    priority,
                    properties: if status == ObjectStatus::Normal {
                        properties
                    } else {
                        Properties::new()
                    },
                    // A status datagram cannot signal end of group.
                    end_of_group: end_of_group && matches!(body, DatagramBody::Payload(_)),
                    body,
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn datagrams_round_trip(v in version(), d in object_datagram()) {
        let bytes = d.encode_to_bytes(v).unwrap();
        let t = Vi64::decode(&mut &bytes[..]).unwrap();
        prop_assert_eq!(t, d.type_code());
        prop_assert!(ObjectDatagram::valid_type(t));
        prop_assert_eq!(Datagram::decode(bytes, v).unwrap(), Datagram::Object(d));
    }

    #[test]
    fn padding_datagrams(v in version(), len in 0usize..100) {
        let d = Datagram::padding(len, v);
        // The type alone takes 5 bytes: 0x132B3E29 is past the 4-byte vi64 range.
        prop_assert_eq!(d.len(), len.max(Vi64::len(PADDING_DATAGRAM_TYPE)));
        prop_assert_eq!(Vi64::len(PADDING_DATAGRAM_TYPE), 5);
        prop_assert_eq!(Datagram::decode(d, v).unwrap(), Datagram::Padding);
    }
}

/// Each of the 24 valid OBJECT_DATAGRAM types encodes with exactly that type and decodes back.
#[test]
fn every_datagram_type() {
    let valid: Vec<u64> = (0u64..0x100)
        .filter(|t| ObjectDatagram::valid_type(*t))
        .collect();
    assert_eq!(valid.len(), 24);
    for v in [Version::Draft18, Version::Draft19] {
        for &t in &valid {
            let body = if t & 0x20 != 0 {
                DatagramBody::Status(ObjectStatus::Normal)
            } else {
                DatagramBody::Payload(Bytes::from_static(b"payload"))
            };
            let d = ObjectDatagram {
                track_alias: 1,
                group: 1000,
                object: if t & 0x04 != 0 { 0 } else { 17 },
                priority: (t & 0x08 == 0).then_some(200),
                properties: if t & 0x01 != 0 {
                    Properties::new().with_int(0x3C, 1).unwrap()
                } else {
                    Properties::new()
                },
                end_of_group: t & 0x02 != 0,
                body,
            };
            assert_eq!(d.type_code(), t);
            let bytes = d.encode_to_bytes(v).unwrap();
            assert_eq!(u64::from(bytes[0]), t);
            assert_eq!(Datagram::decode(bytes, v).unwrap(), Datagram::Object(d));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Fetch streams

/// One entry of a fetch stream as written.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Entry {
    Object(FetchObject, Vec<u8>),
    End(RangeEnd, Location),
}

/// Per group: how far from the previous group, an optional End of Range opening it, and objects.
type GroupSpec = (
    u64,
    Option<(bool, u64)>,
    Vec<(u64, Option<u64>, u8, Properties, Vec<u8>)>,
);

fn group_spec() -> impl Strategy<Value = GroupSpec> {
    let subgroup = prop_oneof![
        Just(None),
        Just(Some(0)),
        (0u64..4).prop_map(Some),
        varint().prop_map(Some),
    ];
    let object = (
        prop_oneof![3 => 0u64..2, 1 => 0u64..10_000],
        subgroup,
        prop_oneof![3 => 0u8..3, 1 => any::<u8>()],
        prop_oneof![3 => Just(Properties::new()), 1 => properties()],
        vec(any::<u8>(), 0..64),
    );
    (
        prop_oneof![3 => 0u64..3, 1 => 0u64..100_000],
        opt((any::<bool>(), 0u64..50)),
        vec(object, 0..5),
    )
}

/// Turns group specs into entries that respect `order`: groups strictly in order, objects
/// ascending within a group, an End of Range only as the first entry of a group.
fn fetch_entries(order: GroupOrder, base: u64, specs: Vec<GroupSpec>) -> Vec<Entry> {
    let span: u64 = specs.iter().map(|s| s.0 + 1).sum();
    let mut group = match order {
        GroupOrder::Ascending => base,
        GroupOrder::Descending => base + span,
    };
    let mut out = Vec::new();
    for (i, (gap, end, objects)) in specs.into_iter().enumerate() {
        if i > 0 {
            group = match order {
                GroupOrder::Ascending => group + gap + 1,
                GroupOrder::Descending => group - gap - 1,
            };
        }
        let mut next_object = 0u64;
        if let Some((unknown, object)) = end {
            let kind = if unknown {
                RangeEnd::Unknown
            } else {
                RangeEnd::NonExistent
            };
            out.push(Entry::End(kind, Location::new(group, object)));
            next_object = object + 1;
        }
        for (gap, subgroup, priority, properties, payload) in objects {
            let id = next_object + gap;
            next_object = id + 1;
            out.push(Entry::Object(
                FetchObject {
                    location: Location::new(group, id),
                    subgroup,
                    priority,
                    properties,
                    payload_len: payload.len() as u64,
                },
                payload,
            ));
        }
    }
    out
}

fn fetch_stream() -> impl Strategy<Value = (GroupOrder, Vec<Entry>)> {
    (
        group_order(),
        prop_oneof![0u64..5, 0u64..(1 << 60)],
        vec(group_spec(), 0..6),
    )
        .prop_map(|(order, base, specs)| (order, fetch_entries(order, base, specs)))
}

fn check_fetch(order: GroupOrder, entries: &[Entry], request_id: u64, sizes: &[usize], v: Version) {
    let mut bytes = Vec::new();
    FetchHeader { request_id }.encode(&mut bytes, v).unwrap();
    let mut w = FetchWriter::new(order, v);
    for e in entries {
        match e {
            Entry::Object(o, payload) => {
                w.encode_object(&mut bytes, o).unwrap();
                bytes.extend_from_slice(payload);
            }
            Entry::End(kind, loc) => w.encode_end_of_range(&mut bytes, *kind, *loc).unwrap(),
        }
    }
    assert_eq!(
        StreamType::peek(&bytes, v).unwrap(),
        Some(StreamType::Fetch)
    );

    let mut pending = BytesMut::new();
    let mut reader: Option<FetchReader> = None;
    let mut got: Vec<Entry> = Vec::new();
    let mut open = false;
    for chunk in chunks(&bytes, sizes) {
        pending.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &pending[..];
            match FetchHeader::decode(&mut cur, v) {
                Ok(h) => {
                    assert_eq!(h.request_id, request_id);
                    let used = pending.len() - cur.len();
                    let _ = pending.split_to(used);
                    reader = Some(FetchReader::new(order, v));
                }
                Err(DecodeError::Short) => continue,
                Err(e) => panic!("header: {e}"),
            }
        }
        let r = reader.as_mut().unwrap();
        while let Some(ev) = r.next(&mut pending).unwrap() {
            match ev {
                FetchEvent::Object(o) => {
                    assert!(!open);
                    open = o.payload_len > 0;
                    got.push(Entry::Object(o, Vec::new()));
                }
                FetchEvent::Payload { data, last } => {
                    assert!(open && !data.is_empty());
                    let Some(Entry::Object(o, p)) = got.last_mut() else {
                        panic!("payload without an object");
                    };
                    p.extend_from_slice(&data);
                    assert_eq!(last, p.len() as u64 == o.payload_len);
                    open = !last;
                }
                FetchEvent::EndOfRange { kind, location } => {
                    assert!(!open);
                    got.push(Entry::End(kind, location));
                }
            }
        }
    }
    let r = reader.expect("header decoded");
    r.finish(&pending).unwrap();
    assert_eq!(got, entries);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn fetch_streams_round_trip(
        v in version(),
        (order, entries) in fetch_stream(),
        request_id in varint(),
        sizes in vec(1usize..64, 0..6),
    ) {
        check_fetch(order, &entries, request_id, &sizes, v);
    }
}

/// A hand-picked fetch stream per order that uses every serialization form: all four subgroup
/// modes, datagram objects, repeated and changed priorities, properties, both End of Range
/// markers (first entry and between objects), and Object IDs up to 2^64-1.
#[test]
fn fetch_stream_every_form() {
    let obj = |g, o, subgroup, priority, payload: &[u8]| {
        Entry::Object(
            FetchObject {
                location: Location::new(g, o),
                subgroup,
                priority,
                properties: if o % 2 == 1 {
                    Properties::new().with_int(0x3E, o).unwrap()
                } else {
                    Properties::new()
                },
                payload_len: payload.len() as u64,
            },
            payload.to_vec(),
        )
    };
    for v in [Version::Draft18, Version::Draft19] {
        for order in [GroupOrder::Ascending, GroupOrder::Descending] {
            let groups: [u64; 4] = match order {
                GroupOrder::Ascending => [3, 4, 10, u64::MAX],
                GroupOrder::Descending => [u64::MAX, 10, 4, 3],
            };
            let [a, b, c, d] = groups;
            let entries = vec![
                Entry::End(RangeEnd::NonExistent, Location::new(a, 2)),
                obj(a, 3, Some(0), 1, b"x"),
                obj(a, 4, Some(0), 1, b""),
                obj(a, 9, Some(1), 1, b"yy"),
                obj(a, 10, Some(2), 2, b"z"),
                obj(a, 11, Some(2), 2, b""),
                obj(a, 12, Some(1000), 2, b"w"),
                obj(a, 13, None, 2, b"datagram"),
                obj(a, 14, Some(1000), 2, b""),
                Entry::End(RangeEnd::Unknown, Location::new(b, 7)),
                obj(b, 8, Some(1001), 2, b"a"),
                obj(c, 0, None, 9, b""),
                obj(c, u64::MAX, Some(0), 9, b"last"),
                Entry::End(RangeEnd::NonExistent, Location::new(d, u64::MAX)),
            ];
            check_fetch(order, &entries, 7, &[1], v);
            check_fetch(order, &entries, 7, &[], v);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Text that is not UTF-8

/// A framed message of type `ty` with `body`.
fn frame(ty: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Vi64::encode(ty, &mut out);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Decodes `bytes`, then checks the value encodes again and decodes to itself.
fn decode_and_reencode(bytes: &[u8], v: Version) -> Message {
    let msg = Message::decode(&mut &bytes[..], v).unwrap();
    let again = msg.encode_to_vec(v).unwrap();
    assert_eq!(Message::decode(&mut &again[..], v).unwrap(), msg);
    msg
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Reason phrases and MOQT_IMPLEMENTATION need not be UTF-8 on the wire; they decode lossily
    /// into text within the field's limit, so the message always encodes again.
    #[test]
    fn non_utf8_text_reencodes(
        v in version(),
        reason in vec(prop_oneof![3 => any::<u8>(), 1 => 0x80u8..0xC0], 0..=1024),
        implementation in vec(any::<u8>(), 0..300),
    ) {
        let mut body = vec![0x00, 0x00];
        Vi64::encode(reason.len() as u64, &mut body);
        body.extend_from_slice(&reason);
        for ty in [0x05, 0x0B] {
            let text = match decode_and_reencode(&frame(ty, &body), v) {
                Message::RequestError(e) => e.reason,
                Message::PublishDone(d) => d.reason,
                other => panic!("unexpected {other:?}"),
            };
            prop_assert!(text.len() <= 1024);
            if let Ok(s) = std::str::from_utf8(&reason) {
                prop_assert_eq!(text.as_str(), s);
            }
        }

        let mut setup = vec![0x07];
        Vi64::encode(implementation.len() as u64, &mut setup);
        setup.extend_from_slice(&implementation);
        let Message::Setup(s) = decode_and_reencode(&frame(0x2F00, &setup), v) else {
            panic!("not SETUP");
        };
        prop_assert!(s.options.implementation.unwrap().len() <= implementation.len());
    }
}

/// A 1024-byte reason ending in a byte that is not UTF-8: the replacement character does not
/// fit, so the text is cut before it instead of growing past 1024 bytes.
#[test]
fn reason_at_limit_with_invalid_byte() {
    let mut reason = vec![b'a'; 1023];
    reason.push(0xFF);
    let mut body = vec![0x10, 0x00, 0x84, 0x00]; // DOES_NOT_EXIST, no retry, Length 1024
    body.extend_from_slice(&reason);
    for v in [Version::Draft18, Version::Draft19] {
        let Message::RequestError(e) = decode_and_reencode(&frame(0x05, &body), v) else {
            panic!("not REQUEST_ERROR");
        };
        assert_eq!(e.reason, "a".repeat(1023));
    }
    // Where it fits, the replacement character stays.
    let body = [0x10, 0x00, 0x02, b'a', 0xFF];
    let Message::RequestError(e) = decode_and_reencode(&frame(0x05, &body), Version::Draft19)
    else {
        panic!("not REQUEST_ERROR");
    };
    assert_eq!(e.reason, "a\u{FFFD}");
}

// ---------------------------------------------------------------------------------------------
// What differs between the versions

/// The encoder refuses what a version does not have, and accepts it in the version that does.
#[test]
fn version_differences() {
    use moq_core::EncodeError;
    use moq_core::message::{
        Goaway, Parameters, RequestOk, Setup, SetupOptions, Subscribe, SubscribeTracks,
    };
    use moq_core::{RangeFilterKind, RangeFilterParam};

    let (d18, d19) = (Version::Draft18, Version::Draft19);
    let roundtrips = |m: Message, v| {
        let bytes = m.encode_to_vec(v).unwrap();
        assert_eq!(Message::decode(&mut &bytes[..], v).unwrap(), m);
    };

    // GOAWAY's Request ID: draft-18 only.
    let goaway: Message = Goaway {
        request_id: Some(3),
        ..Default::default()
    }
    .into();
    roundtrips(goaway.clone(), d18);
    assert_eq!(
        goaway.encode_to_vec(d19),
        Err(EncodeError::NotInVersion("GOAWAY Request ID", d19))
    );

    // MAX_FILTER_RANGES and MAX_REQUEST_UPDATES: draft-19 only.
    for (options, name) in [
        (
            SetupOptions {
                max_filter_ranges: Some(4),
                ..Default::default()
            },
            "MAX_FILTER_RANGES",
        ),
        (
            SetupOptions {
                max_request_updates: Some(4),
                ..Default::default()
            },
            "MAX_REQUEST_UPDATES",
        ),
    ] {
        let setup: Message = Setup { options }.into();
        roundtrips(setup.clone(), d19);
        assert_eq!(
            setup.encode_to_vec(d18),
            Err(EncodeError::NotInVersion(name, d18))
        );
    }

    let not_allowed = Err(EncodeError::Invalid {
        field: "parameters",
        reason: "a parameter is not allowed in this message or version",
    });

    // Range filters: draft-19 only.
    let filtered: Message = Subscribe {
        params: Parameters {
            range_filters: vec![RangeFilterParam {
                kind: RangeFilterKind::Subgroup,
                filter: None,
            }],
            ..Default::default()
        },
        ..Default::default()
    }
    .into();
    roundtrips(filtered.clone(), d19);
    assert_eq!(filtered.encode_to_vec(d18), not_allowed);

    // GROUP_ORDER: in PUBLISH_OK (a REQUEST_OK) only in draft-18, in SUBSCRIBE_TRACKS only in
    // draft-19.
    let ordered = Parameters {
        group_order: Some(GroupOrder::Descending),
        ..Default::default()
    };
    let publish_ok: Message = RequestOk {
        params: ordered.clone(),
        ..Default::default()
    }
    .into();
    roundtrips(publish_ok.clone(), d18);
    assert_eq!(publish_ok.encode_to_vec(d19), not_allowed);
    let tracks: Message = SubscribeTracks {
        params: ordered,
        ..Default::default()
    }
    .into();
    roundtrips(tracks.clone(), d19);
    assert_eq!(tracks.encode_to_vec(d18), not_allowed);
}
