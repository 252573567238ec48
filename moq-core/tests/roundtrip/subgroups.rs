//! Round trips of every SUBGROUP_HEADER type with its objects through `SubgroupWriter` /
//! `SubgroupReader`.

use bytes::BytesMut;
use moq_core::data::{
    ObjectStatus, StreamType, SubgroupEvent, SubgroupHeader, SubgroupId, SubgroupReader,
    SubgroupWriter,
};
use moq_core::{DecodeError, Properties, Version};
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use crate::common::*;
use crate::support::object_status;

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
