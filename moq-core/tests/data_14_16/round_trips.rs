//! Round trips of subgroup, datagram and fetch data at drafts 14-16 through the writers and readers
//! with input fed in pieces, and peer input that never panics.

use bytes::Bytes;
use moq_core::coding::QuicVarInt;
use moq_core::data::{
    DEFAULT_PUBLISHER_PRIORITY, Datagram, DatagramBody, FetchObject, ObjectDatagram, ObjectStatus,
    RangeEnd, StreamType, SubgroupHeader, SubgroupId,
};
use moq_core::{GroupOrder, Location, Properties, Version, property};
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use crate::support::{
    D14, D15, D16, Entry, OLD, Obj, as_read, example_properties, fobj, imm, kvp, obj, properties,
    qvarint, read_fetch, read_subgroup, write_fetch, write_subgroup,
};

// ---------------------------------------------------------------------------------------------
// Round trips

fn old_version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(D14), Just(D15), Just(D16)]
}

fn subgroup_header() -> impl Strategy<Value = SubgroupHeader> {
    (
        qvarint(),
        qvarint(),
        prop_oneof![
            Just(SubgroupId::Zero),
            Just(SubgroupId::FirstObject),
            qvarint().prop_map(SubgroupId::Explicit),
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

/// Objects with increasing IDs below 2^62; only Normal objects carry payload or properties.
fn subgroup_objects(with_properties: bool) -> impl Strategy<Value = Vec<Obj>> {
    let first = prop_oneof![0u64..10, 0u64..(1 << 61)];
    let each = (
        prop_oneof![3 => 0u64..3, 1 => 0u64..100_000],
        object_status(),
        properties(),
        vec(any::<u8>(), 0..100),
    );
    (first, vec(each, 0..8)).prop_map(move |(first, specs)| {
        let mut out: Vec<Obj> = Vec::new();
        for (gap, status, props, payload) in specs {
            let id = out.last().map_or(first, |p| p.id + gap + 1);
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

fn object_datagram() -> impl Strategy<Value = ObjectDatagram> {
    (
        qvarint(),
        qvarint(),
        prop_oneof![Just(0u64), qvarint()],
        opt(any::<u8>()),
        prop_oneof![
            Just(Properties::new()),
            vec(kvp(), 1..4).prop_map(|p| Properties::from_pairs(p).unwrap())
        ],
        any::<bool>(),
        prop_oneof![
            vec(any::<u8>(), 0..60).prop_map(|b| DatagramBody::Payload(b.into())),
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
                    end_of_group: end_of_group && matches!(body, DatagramBody::Payload(_)),
                    body,
                }
            },
        )
}

/// Per group: distance from the previous group, an optional End of Range opening it, objects.
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
        qvarint().prop_map(Some),
    ];
    let object = (
        prop_oneof![3 => 0u64..2, 1 => 0u64..10_000],
        subgroup,
        prop_oneof![3 => 0u8..3, 1 => any::<u8>()],
        prop_oneof![3 => Just(Properties::new()), 1 => properties()],
        vec(any::<u8>(), 0..40),
    );
    (
        prop_oneof![3 => 0u64..3, 1 => 0u64..100_000],
        opt((any::<bool>(), 0u64..50)),
        vec(object, 0..5),
    )
}

/// Entries that respect `order`: groups strictly in order, objects ascending in a group, an End
/// of Range only as the first entry of a group.
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
            out.push(fobj(group, id, subgroup, priority, properties, &payload));
        }
    }
    out
}

fn fetch_stream() -> impl Strategy<Value = (GroupOrder, Vec<Entry>)> {
    (
        prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)],
        prop_oneof![0u64..5, 0u64..(1 << 60)],
        vec(group_spec(), 0..6),
    )
        .prop_map(|(order, base, specs)| (order, fetch_entries(order, base, specs)))
}

/// What a reader under `v` gives back for `entries` written under `v`: before draft-16 no End
/// of Unknown Range may be written (the caller leaves them out), End of Non-Existent Range is
/// left out, and a datagram object comes back with its Object ID as Subgroup ID.
fn fetch_as_read(entries: &[Entry], v: Version) -> Vec<Entry> {
    entries
        .iter()
        .filter(|e| v.fetch_end_of_range() || matches!(e, Entry::Object(..)))
        .map(|e| match e {
            Entry::Object(o, p) if o.subgroup.is_none() && !v.fetch_end_of_range() => {
                Entry::Object(
                    FetchObject {
                        subgroup: Some(o.location.object),
                        ..o.clone()
                    },
                    p.clone(),
                )
            }
            e => e.clone(),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn subgroup_streams_round_trip(
        v in old_version(),
        (h, objs) in subgroup_header().prop_flat_map(|h| (Just(h), subgroup_objects(h.properties))),
        sizes in vec(1usize..48, 0..6),
    ) {
        let bytes = write_subgroup(h, &objs, v);
        prop_assert_eq!(StreamType::peek(&bytes, v).unwrap(), Some(StreamType::Subgroup(h.type_code_in(v))));
        let read = read_subgroup(&bytes, v, &sizes).unwrap();
        prop_assert_eq!(read.header, as_read(h, v));
        prop_assert_eq!(&read.objects, &objs);
        prop_assert_eq!(read.last_object, objs.last().map(|o| o.id));
        let want_subgroup = match h.subgroup {
            SubgroupId::Zero => Some(0),
            SubgroupId::Explicit(id) => Some(id),
            SubgroupId::FirstObject => objs.first().map(|o| o.id),
        };
        prop_assert_eq!(read.subgroup_id, want_subgroup);
        // What was read writes the same bytes again.
        prop_assert_eq!(write_subgroup(read.header, &read.objects, v), bytes);
    }

    #[test]
    fn datagrams_round_trip(v in old_version(), d in object_datagram()) {
        let bytes = d.encode_to_bytes(v).unwrap();
        let t = QuicVarInt::decode(&mut &bytes[..]).unwrap();
        prop_assert_eq!(t, d.type_code_in(v));
        prop_assert!(ObjectDatagram::valid_type_in(t, v));
        let want = ObjectDatagram {
            priority: d.priority.or((!v.has_default_priority()).then_some(DEFAULT_PUBLISHER_PRIORITY)),
            ..d.clone()
        };
        prop_assert_eq!(Datagram::decode(bytes.clone(), v).unwrap(), Datagram::Object(want.clone()));
        prop_assert_eq!(want.encode_to_bytes(v).unwrap(), bytes);
    }

    #[test]
    fn fetch_streams_round_trip(
        v in old_version(),
        (order, entries) in fetch_stream(),
        request_id in qvarint(),
        sizes in vec(1usize..48, 0..6),
    ) {
        let entries: Vec<Entry> = entries
            .into_iter()
            .filter(|e| v.fetch_end_of_range() || !matches!(e, Entry::End(RangeEnd::Unknown, _)))
            .collect();
        let bytes = write_fetch(order, request_id, &entries, v).unwrap();
        prop_assert_eq!(StreamType::peek(&bytes, v).unwrap(), Some(StreamType::Fetch));
        let (id, got) = read_fetch(&bytes, order, v, &sizes).unwrap();
        prop_assert_eq!(id, request_id);
        let want = fetch_as_read(&entries, v);
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(write_fetch(order, request_id, &got, v).unwrap(), bytes);
    }

    /// Properties written under a version and read under it give the same properties.
    #[test]
    fn properties_round_trip(v in old_version(), p in properties(), nested in vec(kvp(), 0..4)) {
        let p = p.with_bytes(property::IMMUTABLE_PROPERTIES, imm(&nested, Version::PREFERRED)).unwrap();
        let mut out = Vec::new();
        p.encode_prefixed(&mut out, v).unwrap();
        let back = Properties::decode_prefixed(&mut &out[..], v).unwrap();
        prop_assert_eq!(&back, &p);
        let mut again = Vec::new();
        back.encode_prefixed(&mut again, v).unwrap();
        prop_assert_eq!(again, out);
    }
}

/// Each SUBGROUP_HEADER type of each version, with objects of every status, written and read
/// one byte at a time.
#[test]
fn every_subgroup_type_with_objects() {
    let mut count = 0;
    for v in OLD {
        for t in 0u8..0x80 {
            if !SubgroupHeader::valid_type_in(t.into(), v) {
                continue;
            }
            count += 1;
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
                first_object: false,
            };
            assert_eq!(h.type_code_in(v), t);
            let p = if h.properties {
                example_properties()
            } else {
                Properties::new()
            };
            let objs = [
                obj(5, p.clone(), ObjectStatus::Normal, b"abcd"),
                obj(6, Properties::new(), ObjectStatus::Normal, b""),
                obj(200, p, ObjectStatus::Normal, &[0xEE; 300]),
                obj(201, Properties::new(), ObjectStatus::EndOfGroup, b""),
                obj(
                    QuicVarInt::MAX,
                    Properties::new(),
                    ObjectStatus::EndOfTrack,
                    b"",
                ),
            ];
            let bytes = write_subgroup(h, &objs, v);
            for sizes in [&[][..], &[1][..]] {
                let read = read_subgroup(&bytes, v, sizes).unwrap();
                assert_eq!(read.header, h);
                assert_eq!(read.objects, objs);
            }
        }
    }
    assert_eq!(count, 12 + 24 + 24);
}

// ---------------------------------------------------------------------------------------------
// Peer input never panics

/// A data stream or datagram type of drafts 14-16 followed by random bytes, biased towards
/// small values so flags, deltas and lengths often make sense.
fn headed_garbage() -> impl Strategy<Value = Vec<u8>> {
    let body = vec(prop_oneof![4 => 0u8..8, 1 => any::<u8>()], 0..200);
    prop_oneof![
        (0x10u8..0x3E, vec(0u8..4, 2..4), body.clone())
            .prop_map(|(t, h, b)| [vec![t], h, b].concat()),
        body.clone().prop_map(|b| [vec![0x05, 0x00], b].concat()),
        (0u8..0x30, body).prop_map(|(t, b)| [vec![t], b].concat()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Every data-plane decoder over random input, fed in pieces: errors, never panics; a
    /// datagram that decodes encodes to one that decodes the same.
    #[test]
    fn decoders_do_not_panic(
        v in old_version(),
        data in prop_oneof![vec(any::<u8>(), 0..300), headed_garbage()],
        sizes in vec(1usize..40, 0..6),
    ) {
        if let Ok(Datagram::Object(d)) = Datagram::decode(Bytes::copy_from_slice(&data), v) {
            let again = d.encode_to_bytes(v).unwrap();
            prop_assert_eq!(Datagram::decode(again, v).unwrap(), Datagram::Object(d));
        }
        let _ = StreamType::peek(&data, v);
        let _ = read_subgroup(&data, v, &sizes);
        let _ = read_fetch(&data, GroupOrder::Ascending, v, &sizes);
        let _ = read_fetch(&data, GroupOrder::Descending, v, &sizes);
    }
}
