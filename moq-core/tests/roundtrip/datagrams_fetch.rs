//! Round trips of every OBJECT_DATAGRAM type, and of fetch streams in both group orders through
//! `FetchWriter` / `FetchReader`.

use bytes::{Bytes, BytesMut};
use moq_core::coding::Vi64;
use moq_core::data::{
    Datagram, DatagramBody, FetchEvent, FetchHeader, FetchObject, FetchReader, FetchWriter,
    ObjectDatagram, ObjectStatus, PADDING_DATAGRAM_TYPE, RangeEnd, StreamType,
};
use moq_core::{DecodeError, GroupOrder, Location, Properties, Version};
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use crate::common::*;
use crate::support::object_status;

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
