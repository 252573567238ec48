//! The data plane at drafts 14, 15 and 16: byte vectors written by hand from the draft-14 and
//! draft-16 texts (§10.3-§10.5; draft-15 from NOTES.md B.2: draft-14 plus its data-plane
//! changes) and checked against aiomoqt 0.13.3's encoders (its d14 and d16 profiles give the
//! same bytes where noted), round trips through the writers and readers with input fed in
//! pieces, the types and values each version refuses, and Properties (Extension Headers)
//! across versions.
//!
//! Reminder of the QUIC varint used until draft-16 (RFC 9000 §16): values below 64 take one
//! byte; below 16384 two bytes `01xxxxxx xxxxxxxx`; below 2^30 four bytes `10...`; then eight
//! bytes `11...`, up to 2^62-1.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use moq_core::coding::QuicVarInt;
use moq_core::data::{
    DEFAULT_PUBLISHER_PRIORITY, Datagram, DatagramBody, FetchEvent, FetchHeader, FetchObject,
    FetchReader, FetchWriter, ObjectDatagram, ObjectStatus, PADDING_DATAGRAM_TYPE,
    PADDING_STREAM_TYPE, RangeEnd, StreamType, SubgroupEvent, SubgroupHeader, SubgroupId,
    SubgroupReader, SubgroupWriter,
};
use moq_core::{
    DecodeError, EncodeError, GroupOrder, KeyValuePair, Location, Properties, Version, property,
};

const D14: Version = Version::Draft14;
const D15: Version = Version::Draft15;
const D16: Version = Version::Draft16;
const D18: Version = Version::Draft18;
const D19: Version = Version::Draft19;
/// The versions this file is about.
const OLD: [Version; 3] = [D14, D15, D16];

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Splits `data` into pieces of the sizes in `sizes` (cycled); one piece if `sizes` is empty.
fn chunks<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = if sizes.is_empty() {
            rest.len()
        } else {
            sizes[i % sizes.len()].clamp(1, rest.len())
        };
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
        i += 1;
    }
    out
}

fn qvi(x: u64) -> Vec<u8> {
    let mut out = Vec::new();
    QuicVarInt::encode(x, &mut out).unwrap();
    out
}

// ---------------------------------------------------------------------------------------------
// Predicates

/// The lowest and highest supported draft for which `f` holds.
fn span(f: fn(Version) -> bool) -> (Option<u32>, Option<u32>) {
    let on = Version::ALL.iter().copied().filter(|v| f(*v));
    let drafts: Vec<u32> = on.map(Version::draft).collect();
    (drafts.iter().copied().min(), drafts.iter().copied().max())
}

#[test]
fn data_plane_predicates_are_ranges() {
    assert_eq!(span(Version::has_default_priority), (Some(15), Some(22)));
    assert_eq!(
        span(Version::status_datagram_zero_object_id),
        (Some(15), Some(22))
    );
    assert_eq!(span(Version::has_first_object_bit), (Some(18), Some(22)));
    assert_eq!(span(Version::has_padding), (Some(18), Some(22)));
    assert_eq!(
        span(Version::has_object_does_not_exist),
        (Some(14), Some(15))
    );
    assert_eq!(
        span(Version::properties_only_on_normal),
        (Some(15), Some(22))
    );
    assert_eq!(
        span(Version::fetch_serialization_flags),
        (Some(15), Some(22))
    );
    assert_eq!(span(Version::fetch_end_of_range), (Some(16), Some(22)));
    assert_eq!(span(Version::fetch_object_status), (Some(14), Some(15)));
    assert_eq!(span(Version::fetch_id_deltas), (Some(18), Some(22)));
    assert_eq!(
        span(Version::has_mandatory_track_properties),
        (Some(18), Some(22))
    );
    assert_eq!(
        span(Version::zero_delivery_timeout_invalid),
        (Some(16), Some(17))
    );
}

// ---------------------------------------------------------------------------------------------
// Subgroup streams

/// One object of a subgroup stream, payload included.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Obj {
    id: u64,
    properties: Properties,
    status: ObjectStatus,
    payload: Vec<u8>,
}

fn obj(id: u64, properties: Properties, status: ObjectStatus, payload: &[u8]) -> Obj {
    Obj {
        id,
        properties,
        status,
        payload: payload.to_vec(),
    }
}

/// Writes a subgroup stream.
fn write_subgroup(h: SubgroupHeader, objs: &[Obj], v: Version) -> Vec<u8> {
    let mut w = SubgroupWriter::new(h, v);
    let mut bytes = Vec::new();
    w.encode_header(&mut bytes).unwrap();
    for o in objs {
        w.encode_object(&mut bytes, o.id, &o.properties, o.status, &o.payload)
            .unwrap();
    }
    assert_eq!(w.last_object(), objs.last().map(|o| o.id));
    bytes
}

/// What reading a subgroup stream gave.
#[derive(Debug, PartialEq, Eq)]
struct ReadSubgroup {
    header: SubgroupHeader,
    objects: Vec<Obj>,
    subgroup_id: Option<u64>,
    last_object: Option<u64>,
}

/// Reads a subgroup stream fed in pieces of `sizes`, checking the events' order.
fn read_subgroup(bytes: &[u8], v: Version, sizes: &[usize]) -> Result<ReadSubgroup, DecodeError> {
    let mut pending = BytesMut::new();
    let mut reader: Option<SubgroupReader> = None;
    let mut got: Vec<(Obj, u64)> = Vec::new();
    let mut open = false;
    for chunk in chunks(bytes, sizes) {
        pending.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &pending[..];
            match SubgroupHeader::decode(&mut cur, v) {
                Ok(h) => {
                    let used = pending.len() - cur.len();
                    let _ = pending.split_to(used);
                    reader = Some(SubgroupReader::new(h, v));
                }
                Err(DecodeError::Short) => continue,
                Err(e) => return Err(e),
            }
        }
        let r = reader.as_mut().unwrap();
        while let Some(ev) = r.next(&mut pending)? {
            match ev {
                SubgroupEvent::Object(o) => {
                    assert!(!open, "object inside a payload");
                    open = o.payload_len > 0;
                    got.push((obj(o.id, o.properties, o.status, b""), o.payload_len));
                }
                SubgroupEvent::Payload { data, last } => {
                    assert!(open && !data.is_empty());
                    let (cur, len) = got.last_mut().unwrap();
                    cur.payload.extend_from_slice(&data);
                    assert_eq!(last, cur.payload.len() as u64 == *len);
                    open = !last;
                }
            }
        }
    }
    let r = reader.ok_or(DecodeError::Short)?;
    r.finish(&pending)?;
    Ok(ReadSubgroup {
        header: *r.header(),
        objects: got.into_iter().map(|(o, _)| o).collect(),
        subgroup_id: r.subgroup_id(),
        last_object: r.last_object(),
    })
}

/// The header as a reader under `v` sees it after `h` was written: draft-14 writes an
/// inherited priority as 128, and no version before draft-18 has FIRST_OBJECT.
fn as_read(h: SubgroupHeader, v: Version) -> SubgroupHeader {
    SubgroupHeader {
        priority: match h.priority {
            None if !v.has_default_priority() => Some(DEFAULT_PUBLISHER_PRIORITY),
            p => p,
        },
        first_object: h.first_object && v.has_first_object_bit(),
        ..h
    }
}

/// `bytes` read under `v` give `header` and `objs`, and writing those gives `bytes`; read whole
/// and one byte at a time.
fn check_subgroup_vector(bytes: &[u8], header: SubgroupHeader, objs: &[Obj], v: Version) {
    for sizes in [&[][..], &[1][..]] {
        let read = read_subgroup(bytes, v, sizes).unwrap();
        assert_eq!(read.header, header, "header under {v}");
        assert_eq!(read.objects, objs, "objects under {v}");
    }
    assert_eq!(write_subgroup(header, objs, v), bytes, "encode under {v}");
    assert_eq!(
        StreamType::peek(bytes, v).unwrap(),
        Some(StreamType::Subgroup(bytes[0]))
    );
}

fn example_header(ty: u8) -> SubgroupHeader {
    SubgroupHeader {
        track_alias: 2,
        group: 0,
        subgroup: SubgroupId::Explicit(0),
        priority: (ty & 0x20 == 0).then_some(0),
        properties: ty & 0x01 != 0,
        end_of_group: false,
        first_object: false,
    }
}

/// The first example of draft-14 §10.5 (the same in draft-16 §10.5): type 0x14, "abcd" and
/// "efgh". aiomoqt's d14 and d16 encoders give these bytes.
#[test]
fn subgroup_example_1() {
    let bytes = cat(&[
        &[0x14, 0x02, 0x00, 0x00, 0x00], // type, alias 2, group 0, subgroup 0, priority 0
        &[0x00, 0x04],                   // Object ID Delta 0, Payload Length 4
        b"abcd",
        &[0x00, 0x04],
        b"efgh",
    ]);
    let objs = [
        obj(0, Properties::new(), ObjectStatus::Normal, b"abcd"),
        obj(1, Properties::new(), ObjectStatus::Normal, b"efgh"),
    ];
    for v in OLD {
        check_subgroup_vector(&bytes, example_header(0x14), &objs, v);
    }
}

/// The two extension headers of the second example of draft-14 §10.5 / draft-16 §10.5.
fn example_properties() -> Properties {
    Properties::new()
        .with_int(4, 2_186_796_243)
        .unwrap()
        .with_bytes(77, &b"traceID:123456"[..])
        .unwrap()
}

/// The second example, draft by draft: draft-14 has type 0x15 with a priority and absolute
/// extension types; draft-15 has the priority-less 0x35 and absolute types; draft-16 (its own
/// example) 0x35 with delta types. The "Extension Headers Length = 33" the texts print does not
/// match their own fields: 4 as a QUIC varint is 1 byte, 2186796243 is 8, 77 is 2, then 1 + 14:
/// 26 (0x1a), which aiomoqt's d14 and d16 encoders give too.
#[test]
fn subgroup_example_2() {
    let objects = |key_77: &[u8]| {
        cat(&[
            &[0x00, 0x1a], // Object ID Delta 0, Extension Headers Length 26
            &[0x04, 0xc0, 0x00, 0x00, 0x00, 0x82, 0x57, 0xdc, 0xd3], // type 4 = 2186796243
            key_77,        // type 77 (absolute) or delta 73
            &[0x0e],       // length 14
            b"traceID:123456",
            &[0x04],
            b"abcd",
            &[0x00, 0x00, 0x04], // Delta 0, Extension Headers Length 0, Payload Length 4
            b"efgh",
        ])
    };
    let objs = [
        obj(0, example_properties(), ObjectStatus::Normal, b"abcd"),
        obj(1, Properties::new(), ObjectStatus::Normal, b"efgh"),
    ];
    let d14 = cat(&[&[0x15, 0x02, 0x00, 0x00, 0x00], &objects(&[0x40, 0x4d])]);
    check_subgroup_vector(&d14, example_header(0x15), &objs, D14);
    let d15 = cat(&[&[0x35, 0x02, 0x00, 0x00], &objects(&[0x40, 0x4d])]);
    check_subgroup_vector(&d15, example_header(0x35), &objs, D15);
    let d16 = cat(&[&[0x35, 0x02, 0x00, 0x00], &objects(&[0x40, 0x49])]);
    check_subgroup_vector(&d16, example_header(0x35), &objs, D16);
    // Draft-14 has no 0x35; a priority-less header is written 0x15 with priority 128.
    let mut out = Vec::new();
    example_header(0x35).encode(&mut out, D14).unwrap();
    assert_eq!(out, [0x15, 0x02, 0x00, 0x00, 0x80]);
}

/// Type 0x1B (FirstObject subgroup, extensions, end of group) with a zero-length Normal object,
/// one with an extension header, and an End of Group: what aiomoqt's d14 and d16 encoders write
/// (alias 300 and group 70000 take 2 and 4 bytes).
#[test]
fn subgroup_status_objects() {
    let bytes = cat(&[
        &[0x1b, 0x41, 0x2c, 0x80, 0x01, 0x11, 0x70, 0x07],
        &[0x05, 0x00, 0x00, 0x00], // id 5, no extensions, length 0, Normal
        &[0x03, 0x02, 0x3c, 0x01, 0x03], // id 9, PRIOR_GROUP_ID_GAP 1, length 3
        b"xxx",
        &[0x00, 0x00, 0x00, 0x03], // id 10, End of Group
    ]);
    let header = SubgroupHeader {
        track_alias: 300,
        group: 70_000,
        subgroup: SubgroupId::FirstObject,
        priority: Some(7),
        properties: true,
        end_of_group: true,
        first_object: false,
    };
    let gap = Properties::new()
        .with_int(property::PRIOR_GROUP_ID_GAP, 1)
        .unwrap();
    let objs = [
        obj(5, Properties::new(), ObjectStatus::Normal, b""),
        obj(9, gap, ObjectStatus::Normal, b"xxx"),
        obj(10, Properties::new(), ObjectStatus::EndOfGroup, b""),
    ];
    for v in OLD {
        check_subgroup_vector(&bytes, header, &objs, v);
        assert_eq!(read_subgroup(&bytes, v, &[]).unwrap().subgroup_id, Some(5));
    }
}

/// draft-14 §10.2.1.1: status 0x1, Object Does Not Exist (until draft-15). Such an object is
/// consumed without an event but counts for the next delta and a FirstObject Subgroup ID;
/// draft-16 has no such status (§10.2.1.1: PROTOCOL_VIOLATION).
#[test]
fn object_does_not_exist_on_a_subgroup_stream() {
    let bytes = cat(&[
        &[0x12, 0x01, 0x02, 0x03], // FirstObject subgroup, alias 1, group 2, priority 3
        &[0x04, 0x00, 0x01],       // id 4, length 0, Object Does Not Exist
        &[0x00, 0x01],             // id 5, length 1
        b"a",
    ]);
    for v in [D14, D15] {
        for sizes in [&[][..], &[1][..]] {
            let read = read_subgroup(&bytes, v, sizes).unwrap();
            assert_eq!(
                read.objects,
                [obj(5, Properties::new(), ObjectStatus::Normal, b"a")]
            );
            assert_eq!(read.subgroup_id, Some(4));
            assert_eq!(read.last_object, Some(5));
        }
    }
    assert_eq!(
        read_subgroup(&bytes, D16, &[]),
        Err(DecodeError::InvalidValue {
            field: "object status",
            value: 1
        })
    );
}

/// draft-14 §10.2.1.2: extension headers on an Object Does Not Exist MUST close the session
/// (PROTOCOL_VIOLATION), but End of Group and End of Track may have them; from draft-15 every
/// status but Normal may not (draft-16 §10.2.1.2). Draft-14's are read and dropped.
#[test]
fn extension_headers_on_status_objects() {
    let header = |status: u8| {
        cat(&[
            &[0x11, 0x01, 0x02, 0x03],       // extensions, subgroup 0
            &[0x00, 0x02, 0x3c, 0x01, 0x00], // id 0, PRIOR_GROUP_ID_GAP 1, length 0
            &[status],
        ])
    };
    let violation =
        DecodeError::ProtocolViolation("properties on an object whose status is not Normal");
    for status in [0x03, 0x04] {
        let read = read_subgroup(&header(status), D14, &[]).unwrap();
        assert_eq!(read.objects.len(), 1);
        assert!(read.objects[0].properties.is_empty());
        assert_ne!(read.objects[0].status, ObjectStatus::Normal);
        // The same bytes are vi64 too.
        for v in [D15, D16, D19] {
            assert_eq!(
                read_subgroup(&header(status), v, &[]),
                Err(violation.clone())
            );
        }
    }
    assert_eq!(
        read_subgroup(&header(0x01), D14, &[]),
        Err(violation.clone())
    );
    assert_eq!(read_subgroup(&header(0x01), D15, &[]), Err(violation));
    // Normal with extension headers is fine everywhere.
    assert!(read_subgroup(&header(0x00), D14, &[]).is_ok());
}

/// The stream types each version has: SUBGROUP_HEADER 0x10-0x15 / 0x18-0x1D (draft-14
/// §10.4.2), 0x30-0x3D from draft-15 (draft-16 §10.4.2), 0x50-0x7D from draft-18; FETCH_HEADER
/// 0x05 always; no unidirectional control stream and no padding before draft-18.
#[test]
fn stream_types_by_version() {
    let peek = |t: u64, v: Version| StreamType::peek(&qvi(t), v);
    let mut counts = Vec::new();
    for v in OLD {
        let mut n = 0;
        for t in 0u64..0x100 {
            let valid = SubgroupHeader::valid_type_in(t, v);
            let in_14 = (0x10..=0x15).contains(&t) || (0x18..=0x1D).contains(&t);
            let in_15 = in_14 || (0x30..=0x35).contains(&t) || (0x38..=0x3D).contains(&t);
            assert_eq!(
                valid,
                if v == D14 { in_14 } else { in_15 },
                "{t:#x} under {v}"
            );
            if valid {
                n += 1;
                assert_eq!(peek(t, v).unwrap(), Some(StreamType::Subgroup(t as u8)));
            } else if t != 0x05 {
                assert!(peek(t, v).is_err(), "{t:#x} under {v}");
            }
        }
        counts.push(n);
        assert_eq!(peek(0x05, v).unwrap(), Some(StreamType::Fetch));
        // Reserved SUBGROUP_ID_MODE 0b11 inside the version's type space.
        assert_eq!(peek(0x16, v), Err(DecodeError::InvalidSubgroupType(0x16)));
        // FIRST_OBJECT types are unknown before draft-18.
        for t in [0x50, 0x54, 0x5D, 0x70, 0x7D] {
            assert_eq!(peek(t, v), Err(DecodeError::UnknownStreamType(t)));
            assert_eq!(
                SubgroupHeader::decode(&mut &qvi(t)[..], v),
                Err(DecodeError::InvalidSubgroupType(t))
            );
        }
        // No unidirectional control stream (0x2F00) and no padding stream.
        assert_eq!(peek(0x2F00, v), Err(DecodeError::UnknownStreamType(0x2F00)));
        assert_eq!(
            peek(PADDING_STREAM_TYPE, v),
            Err(DecodeError::UnknownStreamType(PADDING_STREAM_TYPE))
        );
    }
    assert_eq!(counts, [12, 24, 24]);
    // Priority-less types are unknown in draft-14.
    assert_eq!(peek(0x30, D14), Err(DecodeError::UnknownStreamType(0x30)));
    assert_eq!(
        SubgroupHeader::decode(&mut &[0x35u8, 0x02, 0x00, 0x00][..], D14),
        Err(DecodeError::InvalidSubgroupType(0x35))
    );
    // An incomplete varint is "need more".
    assert_eq!(StreamType::peek(&[0x6f], D16).unwrap(), None);
    // The newest draft's classification is unchanged.
    assert_eq!(
        StreamType::from_code(0x50).unwrap(),
        StreamType::Subgroup(0x50)
    );
    assert_eq!(
        StreamType::from_code_in(0x2F00, D18).unwrap(),
        StreamType::Control
    );
}

/// FIRST_OBJECT (0x40) is not written before draft-18, and a type with it is refused.
#[test]
fn first_object_is_not_written_before_draft_18() {
    let h = SubgroupHeader {
        track_alias: 1,
        group: 2,
        subgroup: SubgroupId::Zero,
        priority: None,
        properties: false,
        end_of_group: true,
        first_object: true,
    };
    assert_eq!(h.type_code(), 0x78);
    assert_eq!(h.type_code_in(D18), 0x78);
    assert_eq!(h.type_code_in(D16), 0x38);
    assert_eq!(h.type_code_in(D15), 0x38);
    assert_eq!(h.type_code_in(D14), 0x18);
    for v in OLD {
        let mut out = Vec::new();
        h.encode(&mut out, v).unwrap();
        assert_eq!(
            SubgroupHeader::decode(&mut &out[..], v).unwrap(),
            as_read(h, v)
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Datagrams

fn datagram(
    object: u64,
    priority: Option<u8>,
    properties: Properties,
    end_of_group: bool,
    body: DatagramBody,
) -> ObjectDatagram {
    ObjectDatagram {
        track_alias: 1,
        group: 2,
        object,
        priority,
        properties,
        end_of_group,
        body,
    }
}

fn hi() -> DatagramBody {
    DatagramBody::Payload(Bytes::from_static(b"hi"))
}

/// `bytes` decode to `d` under `v` and `d` encodes to `bytes`.
fn check_datagram(bytes: &[u8], d: &ObjectDatagram, v: Version) {
    assert_eq!(
        Datagram::decode(Bytes::copy_from_slice(bytes), v).unwrap(),
        Datagram::Object(d.clone()),
        "decode under {v}"
    );
    assert_eq!(d.encode_to_bytes(v).unwrap(), bytes, "encode under {v}");
}

/// draft-14 §10.3.1 and draft-16 §10.3.1; aiomoqt's d14 and d16 encoders give these bytes.
#[test]
fn datagram_vectors() {
    let gap2 = Properties::new()
        .with_int(property::PRIOR_GROUP_ID_GAP, 2)
        .unwrap();
    for v in OLD {
        // Type 0x00: alias 1, group 2, object 3, priority 9, "hi".
        check_datagram(
            &cat(&[&[0x00, 0x01, 0x02, 0x03, 0x09], b"hi"]),
            &datagram(3, Some(9), Properties::new(), false, hi()),
            v,
        );
        // Type 0x07: extensions, end of group, object 0 left out.
        check_datagram(
            &cat(&[&[0x07, 0x01, 0x02, 0x09, 0x02, 0x3c, 0x02], b"hi"]),
            &datagram(0, Some(9), gap2.clone(), true, hi()),
            v,
        );
        // A status with object 5.
        check_datagram(
            &[0x20, 0x01, 0x02, 0x05, 0x09, 0x03],
            &datagram(
                5,
                Some(9),
                Properties::new(),
                false,
                DatagramBody::Status(ObjectStatus::EndOfGroup),
            ),
            v,
        );
    }
    // A status at object 0: draft-14's 0x20 always carries the Object ID; from draft-15 0x24
    // leaves it out. Draft-15 and 16 still read the long form.
    let end_of_track = datagram(
        0,
        Some(9),
        Properties::new(),
        false,
        DatagramBody::Status(ObjectStatus::EndOfTrack),
    );
    let long = [0x20, 0x01, 0x02, 0x00, 0x09, 0x04];
    check_datagram(&long, &end_of_track, D14);
    for v in [D15, D16] {
        check_datagram(&[0x24, 0x01, 0x02, 0x09, 0x04], &end_of_track, v);
        assert_eq!(
            Datagram::decode(Bytes::copy_from_slice(&long), v).unwrap(),
            Datagram::Object(end_of_track.clone())
        );
    }
    // An inherited priority: DEFAULT_PRIORITY (0x08) from draft-15; draft-14 writes 128.
    let inherit = datagram(3, None, Properties::new(), false, hi());
    for v in [D15, D16] {
        check_datagram(&cat(&[&[0x08, 0x01, 0x02, 0x03], b"hi"]), &inherit, v);
    }
    let d14 = cat(&[&[0x00, 0x01, 0x02, 0x03, 0x80], b"hi"]);
    assert_eq!(inherit.encode_to_bytes(D14).unwrap(), d14);
    assert_eq!(
        Datagram::decode(d14.into(), D14).unwrap(),
        Datagram::Object(datagram(3, Some(128), Properties::new(), false, hi()))
    );
    // A status datagram with the default priority and no Object ID: 0x2C (from draft-15).
    let inherit_status = datagram(
        0,
        None,
        Properties::new(),
        false,
        DatagramBody::Status(ObjectStatus::EndOfTrack),
    );
    check_datagram(&[0x2C, 0x01, 0x02, 0x04], &inherit_status, D16);
    assert_eq!(
        inherit_status.encode_to_bytes(D14).unwrap()[..],
        [0x20, 0x01, 0x02, 0x00, 0x80, 0x04]
    );
}

/// The datagram types each version has: draft-14 §10.3.1 lists 0x00-0x07 and 0x20-0x21;
/// draft-15 adds DEFAULT_PRIORITY (0x08-0x0F, 0x28-0x29, 0x2C-0x2D) and status without
/// Object ID (0x24-0x25); draft-16 §10.3.1 gives the same set as flags. Others close the
/// session (PROTOCOL_VIOLATION); padding is unknown before draft-18.
#[test]
fn datagram_types_by_version() {
    let d14: Vec<u64> = (0x00..=0x07).chain([0x20, 0x21]).collect();
    let d15: Vec<u64> = (0x00..=0x0F)
        .chain([0x20, 0x21, 0x24, 0x25, 0x28, 0x29, 0x2C, 0x2D])
        .collect();
    for v in OLD {
        let valid: Vec<u64> = (0u64..0x100)
            .filter(|t| ObjectDatagram::valid_type_in(*t, v))
            .collect();
        assert_eq!(&valid, if v == D14 { &d14 } else { &d15 }, "under {v}");
        for t in (0u64..0x100).filter(|t| !valid.contains(t)) {
            let bytes = cat(&[&qvi(t), &[0x01, 0x02, 0x03, 0x04, 0x00]]);
            assert_eq!(
                Datagram::decode(bytes.into(), v),
                Err(DecodeError::InvalidDatagramType(t)),
                "{t:#x} under {v}"
            );
        }
        assert_eq!(
            Datagram::decode(qvi(PADDING_DATAGRAM_TYPE).into(), v),
            Err(DecodeError::InvalidDatagramType(PADDING_DATAGRAM_TYPE))
        );
        assert!(Datagram::padding(20, v).is_empty());
    }
    assert_eq!(
        Datagram::decode(Datagram::padding(20, D18), D18),
        Ok(Datagram::Padding)
    );
    // The newest draft's list is unchanged.
    assert_eq!(
        (0u64..0x100)
            .filter(|t| ObjectDatagram::valid_type(*t))
            .count(),
        24
    );
}

/// Status datagrams: Object Does Not Exist (drafts 14-15) is discarded like padding, and may
/// not have extension headers (draft-14 §10.2.1.2); End of Group / End of Track may in
/// draft-14 (dropped), not from draft-15. Draft-16 has no status 0x1.
#[test]
fn status_datagrams_by_version() {
    let violation =
        DecodeError::ProtocolViolation("properties on a datagram whose status is not Normal");
    let plain = |status: u8| Bytes::from(vec![0x20, 0x01, 0x02, 0x03, 0x09, status]);
    let with_ext =
        |status: u8| Bytes::from(vec![0x21, 0x01, 0x02, 0x03, 0x09, 0x02, 0x3c, 0x01, status]);
    for v in [D14, D15] {
        assert_eq!(Datagram::decode(plain(0x01), v), Ok(Datagram::Padding));
        assert_eq!(Datagram::decode(with_ext(0x01), v), Err(violation.clone()));
    }
    assert_eq!(
        Datagram::decode(plain(0x01), D16),
        Err(DecodeError::InvalidValue {
            field: "object status",
            value: 1
        })
    );
    for status in [0x03, 0x04] {
        let Datagram::Object(d) = Datagram::decode(with_ext(status), D14).unwrap() else {
            panic!("an object");
        };
        assert!(d.properties.is_empty());
        assert_eq!(d.status().value(), u64::from(status));
        for v in [D15, D16] {
            assert_eq!(
                Datagram::decode(with_ext(status), v),
                Err(violation.clone())
            );
        }
    }
    // draft-14 §10.3.1: Extensions Present with a length of 0 MUST close the session.
    for v in OLD {
        assert!(matches!(
            Datagram::decode(Bytes::from_static(&[0x01, 0x01, 0x02, 0x03, 0x09, 0x00]), v),
            Err(DecodeError::ProtocolViolation(_))
        ));
        // Status 0x2 exists in no version.
        assert!(matches!(
            Datagram::decode(plain(0x02), v),
            Err(DecodeError::InvalidValue { .. })
        ));
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

fn fobj(
    g: u64,
    o: u64,
    subgroup: Option<u64>,
    priority: u8,
    properties: Properties,
    payload: &[u8],
) -> Entry {
    Entry::Object(
        FetchObject {
            location: Location::new(g, o),
            subgroup,
            priority,
            properties,
            payload_len: payload.len() as u64,
        },
        payload.to_vec(),
    )
}

fn write_fetch(
    order: GroupOrder,
    request_id: u64,
    entries: &[Entry],
    v: Version,
) -> Result<Vec<u8>, EncodeError> {
    let mut bytes = Vec::new();
    FetchHeader { request_id }.encode(&mut bytes, v)?;
    let mut w = FetchWriter::new(order, v);
    for e in entries {
        match e {
            Entry::Object(o, payload) => {
                w.encode_object(&mut bytes, o)?;
                bytes.extend_from_slice(payload);
            }
            Entry::End(kind, loc) => w.encode_end_of_range(&mut bytes, *kind, *loc)?,
        }
    }
    Ok(bytes)
}

/// Reads a fetch stream fed in pieces of `sizes`.
fn read_fetch(
    bytes: &[u8],
    order: GroupOrder,
    v: Version,
    sizes: &[usize],
) -> Result<(u64, Vec<Entry>), DecodeError> {
    let mut pending = BytesMut::new();
    let mut reader: Option<FetchReader> = None;
    let mut request_id = None;
    let mut got: Vec<Entry> = Vec::new();
    let mut open = false;
    for chunk in chunks(bytes, sizes) {
        pending.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &pending[..];
            match FetchHeader::decode(&mut cur, v) {
                Ok(h) => {
                    request_id = Some(h.request_id);
                    let used = pending.len() - cur.len();
                    let _ = pending.split_to(used);
                    reader = Some(FetchReader::new(order, v));
                }
                Err(DecodeError::Short) => continue,
                Err(e) => return Err(e),
            }
        }
        let r = reader.as_mut().unwrap();
        while let Some(ev) = r.next(&mut pending)? {
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
    let r = reader.ok_or(DecodeError::Short)?;
    r.finish(&pending)?;
    Ok((request_id.unwrap_or_default(), got))
}

/// `bytes` read under `v` (whole and byte by byte) give `entries`, and writing `entries`
/// gives `bytes`.
fn check_fetch_vector(bytes: &[u8], entries: &[Entry], v: Version) {
    for sizes in [&[][..], &[1][..]] {
        assert_eq!(
            read_fetch(bytes, GroupOrder::Ascending, v, sizes).unwrap(),
            (4, entries.to_vec()),
            "decode under {v}"
        );
    }
    assert_eq!(
        write_fetch(GroupOrder::Ascending, 4, entries, v).unwrap(),
        bytes,
        "encode under {v}"
    );
    assert_eq!(StreamType::peek(bytes, v).unwrap(), Some(StreamType::Fetch));
}

fn gap1() -> Properties {
    Properties::new()
        .with_int(property::PRIOR_OBJECT_ID_GAP, 1)
        .unwrap()
}

/// draft-14 §10.4.4: every field explicit, Extension Headers Length always, an Object Status
/// after a zero Payload Length, a datagram's Subgroup ID is its Object ID. The two objects are
/// what aiomoqt's d14 encoder writes.
#[test]
fn fetch_vectors_draft14() {
    let bytes = cat(&[
        &[0x05, 0x04],                         // FETCH_HEADER, Request ID 4
        &[0x03, 0x01, 0x07, 0x05, 0x00, 0x02], // (3, 7) subgroup 1, priority 5, 2 bytes
        b"ab",
        &[0x03, 0x01, 0x08, 0x05, 0x02, 0x3e, 0x01, 0x00, 0x00], // (3, 8) gap 1, empty, Normal
        &[0x03, 0x09, 0x09, 0x05, 0x00, 0x01],                   // (3, 9) a datagram: subgroup 9
        b"c",
    ]);
    let entries = [
        fobj(3, 7, Some(1), 5, Properties::new(), b"ab"),
        fobj(3, 8, Some(1), 5, gap1(), b""),
        fobj(3, 9, Some(9), 5, Properties::new(), b"c"),
    ];
    check_fetch_vector(&bytes, &entries, D14);
    // Written from a datagram object (no Subgroup ID), read back with its Object ID.
    let mut from_none = entries.to_vec();
    from_none[2] = fobj(3, 9, None, 5, Properties::new(), b"c");
    assert_eq!(
        write_fetch(GroupOrder::Ascending, 4, &from_none, D14).unwrap(),
        bytes
    );

    // Objects whose status is not Normal are consumed (aiomoqt's d14 End of Group at (3, 9)).
    let with_status = cat(&[
        &[0x05, 0x04],
        &[0x03, 0x00, 0x09, 0x05, 0x00, 0x00, 0x03], // End of Group
        &[0x03, 0x00, 0x0a, 0x05, 0x00, 0x00, 0x01], // Object Does Not Exist
        &[0x04, 0x00, 0x00, 0x05, 0x00, 0x01],
        b"z",
    ]);
    assert_eq!(
        read_fetch(&with_status, GroupOrder::Ascending, D14, &[1]).unwrap(),
        (4, vec![fobj(4, 0, Some(0), 5, Properties::new(), b"z")])
    );
    // draft-14 §10.2.1.2: extension headers on an Object Does Not Exist close the session.
    let bad = cat(&[
        &[0x05, 0x04],
        &[0x03, 0x00, 0x09, 0x05, 0x02, 0x3e, 0x01, 0x00, 0x01],
    ]);
    assert!(matches!(
        read_fetch(&bad, GroupOrder::Ascending, D14, &[]),
        Err(DecodeError::ProtocolViolation(_))
    ));
    // Status 0x2 is not defined.
    let bad = cat(&[&[0x05, 0x04], &[0x03, 0x00, 0x09, 0x05, 0x00, 0x00, 0x02]]);
    assert!(matches!(
        read_fetch(&bad, GroupOrder::Ascending, D14, &[]),
        Err(DecodeError::InvalidValue { .. })
    ));
}

/// Draft-15 (NOTES.md B.2): one byte of Serialization Flags with the prior-object compression,
/// absolute IDs, and draft-14's Object Status; a datagram's Subgroup ID is its Object ID.
#[test]
fn fetch_vectors_draft15() {
    let bytes = cat(&[
        &[0x05, 0x04],
        &[0x1f, 0x03, 0x01, 0x07, 0x05, 0x02], // all fields: group 3, subgroup 1, object 7, priority 5
        b"ab",
        &[0x21, 0x02, 0x3e, 0x01, 0x00, 0x00], // prior subgroup, object 8, gap 1, empty, Normal
        &[0x03, 0x09, 0x01],                   // subgroup 9 (a datagram), object 9
        b"c",
        &[0x0c, 0x05, 0x00, 0x00, 0x00], // group 5, object 0, subgroup 0, empty, Normal
    ]);
    let entries = [
        fobj(3, 7, Some(1), 5, Properties::new(), b"ab"),
        fobj(3, 8, Some(1), 5, gap1(), b""),
        fobj(3, 9, Some(9), 5, Properties::new(), b"c"),
        fobj(5, 0, Some(0), 5, Properties::new(), b""),
    ];
    check_fetch_vector(&bytes, &entries, D15);
    // A status object is consumed, but the next object may refer to it.
    let with_status = cat(&[
        &[0x05, 0x04],
        &[0x1f, 0x03, 0x01, 0x07, 0x05, 0x00, 0x03], // (3, 7) End of Group
        &[0x09, 0x04, 0x01],                         // prior subgroup 1, group 4, object 8
        b"d",
    ]);
    assert_eq!(
        read_fetch(&with_status, GroupOrder::Ascending, D15, &[1]).unwrap(),
        (4, vec![fobj(4, 8, Some(1), 5, Properties::new(), b"d")])
    );
    // No DATAGRAM flag and no End of Range in draft-15: a flags byte with 0x40 or 0x80 set.
    for flags in [0x40u8, 0x5c, 0x8c] {
        let bad = [0x05, 0x04, flags, 0x03, 0x09, 0x05, 0x00];
        assert_eq!(
            read_fetch(&bad, GroupOrder::Ascending, D15, &[]),
            Err(DecodeError::InvalidValue {
                field: "fetch serialization flags",
                value: u64::from(flags)
            })
        );
    }
}

/// draft-16 §10.4.4: varint flags, DATAGRAM (0x40), End of Range (0x8C, 0x10C), absolute IDs,
/// no Object Status. The first object and the datagram are what aiomoqt's d16 encoder writes;
/// its second object (written in full, `3f`) reads the same as ours (`21`).
#[test]
fn fetch_vectors_draft16() {
    let bytes = cat(&[
        &[0x05, 0x04],
        &[0x1f, 0x03, 0x01, 0x07, 0x05, 0x02],
        b"ab",
        &[0x21, 0x02, 0x3e, 0x01, 0x00], // prior subgroup and priority, object 8, gap 1, empty
    ]);
    let entries = [
        fobj(3, 7, Some(1), 5, Properties::new(), b"ab"),
        fobj(3, 8, Some(1), 5, gap1(), b""),
    ];
    check_fetch_vector(&bytes, &entries, D16);
    let aiomoqt = cat(&[
        &[0x05, 0x04],
        &[0x1f, 0x03, 0x01, 0x07, 0x05, 0x02],
        b"ab",
        &[0x3f, 0x03, 0x01, 0x08, 0x05, 0x02, 0x3e, 0x01, 0x00],
    ]);
    assert_eq!(
        read_fetch(&aiomoqt, GroupOrder::Ascending, D16, &[1]).unwrap(),
        (4, entries.to_vec())
    );

    // A datagram object (flags 0x5C take two bytes) and the End of Range markers.
    check_fetch_vector(
        &cat(&[&[0x05, 0x04], &[0x40, 0x5c, 0x03, 0x09, 0x05, 0x01], b"c"]),
        &[fobj(3, 9, None, 5, Properties::new(), b"c")],
        D16,
    );
    check_fetch_vector(
        &[0x05, 0x04, 0x40, 0x8c, 0x04, 0x02],
        &[Entry::End(RangeEnd::NonExistent, Location::new(4, 2))],
        D16,
    );
    // After a marker the next object is written in full; in its own group a marker can be
    // written (absolute IDs), unlike from draft-18.
    let entries = [
        Entry::End(RangeEnd::Unknown, Location::new(4, 2)),
        fobj(4, 3, Some(0), 5, Properties::new(), b""),
        Entry::End(RangeEnd::NonExistent, Location::new(4, 9)),
        fobj(4, 10, Some(0), 5, Properties::new(), b"e"),
    ];
    let bytes = cat(&[
        &[0x05, 0x04],
        &[0x41, 0x0c, 0x04, 0x02],
        &[0x1c, 0x04, 0x03, 0x05, 0x00],
        &[0x40, 0x8c, 0x04, 0x09],
        &[0x1c, 0x04, 0x0a, 0x05, 0x01],
        b"e",
    ]);
    check_fetch_vector(&bytes, &entries, D16);
    // A reader also takes an object after a marker that refers to the last actual object.
    let short = cat(&[
        &[0x05, 0x04],
        &[0x1c, 0x04, 0x03, 0x05, 0x00],
        &[0x40, 0x8c, 0x04, 0x09],
        &[0x00, 0x01], // group 4, object 10, subgroup 0, prior priority 5
        b"e",
    ]);
    assert_eq!(
        read_fetch(&short, GroupOrder::Ascending, D16, &[])
            .unwrap()
            .1,
        entries[1..].to_vec()
    );
    let mut w = FetchWriter::new(GroupOrder::Ascending, D18);
    let mut out = Vec::new();
    w.encode_object(
        &mut out,
        &FetchObject {
            location: Location::new(4, 3),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(
        w.encode_end_of_range(&mut out, RangeEnd::NonExistent, Location::new(4, 9))
            .is_err()
    );

    // No Object Status: a zero Payload Length is followed by the next entry.
    let two_empty = [0x05, 0x04, 0x1c, 0x03, 0x00, 0x05, 0x00, 0x00, 0x00];
    assert_eq!(
        read_fetch(&two_empty, GroupOrder::Ascending, D16, &[])
            .unwrap()
            .1,
        [
            fobj(3, 0, Some(0), 5, Properties::new(), b""),
            fobj(3, 1, Some(0), 5, Properties::new(), b"")
        ]
    );
    // End of Timed-Out Range (0x20C) exists from draft-20; 0x80 never.
    for flags in [0x20Cu64, 0x80, 0x8D] {
        let bad = cat(&[&[0x05, 0x04], &qvi(flags), &[0x00, 0x00]]);
        assert_eq!(
            read_fetch(&bad, GroupOrder::Ascending, D16, &[]),
            Err(DecodeError::InvalidValue {
                field: "fetch serialization flags",
                value: flags
            })
        );
    }
    // draft-16 §10.4.4.1: the first object may not refer to a prior one.
    for flags in [0x00u8, 0x04, 0x08, 0x0d, 0x1e] {
        let bad = [0x05, 0x04, flags, 0x01, 0x01, 0x01, 0x05, 0x00];
        assert!(
            matches!(
                read_fetch(&bad, GroupOrder::Ascending, D16, &[]),
                Err(DecodeError::ProtocolViolation(_))
            ),
            "{flags:#x}"
        );
    }
}

/// End of Range markers before draft-16: a Non-Existent range is left out (draft-14 §9.16.3:
/// a gap in the stream says its objects do not exist), an Unknown one cannot be said.
#[test]
fn end_of_range_before_draft16() {
    for v in [D14, D15] {
        assert_eq!(RangeEnd::NonExistent.flags(v), None);
        assert_eq!(RangeEnd::Unknown.flags(v), None);
        let mut w = FetchWriter::new(GroupOrder::Ascending, v);
        let mut out = Vec::new();
        w.encode_end_of_range(&mut out, RangeEnd::NonExistent, Location::new(2, 5))
            .unwrap();
        assert!(out.is_empty());
        assert_eq!(
            w.encode_end_of_range(&mut out, RangeEnd::Unknown, Location::new(3, 0)),
            Err(EncodeError::NotInVersion("End of Unknown Range", v))
        );
        assert_eq!(
            w.encode_end_of_range(&mut out, RangeEnd::TimedOut, Location::new(3, 0)),
            Err(EncodeError::NotInVersion("End of Timed-Out Range", v))
        );
        // The skipped range still orders what follows.
        let early = FetchObject {
            location: Location::new(2, 5),
            ..Default::default()
        };
        assert!(w.encode_object(&mut out, &early).is_err());
        assert!(out.is_empty());
    }
    assert_eq!(RangeEnd::NonExistent.flags(D16), Some(0x8C));
    assert_eq!(RangeEnd::Unknown.flags(D16), Some(0x10C));
    assert_eq!(RangeEnd::TimedOut.flags(D16), None);
    assert_eq!(RangeEnd::fill_timeout(D14), RangeEnd::Unknown);
}

// ---------------------------------------------------------------------------------------------
// Limits of QUIC varints

/// Until draft-16 an integer over 2^62-1 cannot be written: encoders refuse it, writing
/// nothing, where draft-18 on would write nine bytes.
#[test]
fn ids_over_2_62_are_refused() {
    let big = QuicVarInt::MAX + 1;
    let header = SubgroupHeader {
        track_alias: 1,
        group: big,
        subgroup: SubgroupId::Zero,
        priority: Some(1),
        properties: true,
        end_of_group: false,
        first_object: false,
    };
    let big_prop = Properties::new().with_int(2, big).unwrap();
    for v in OLD {
        let mut out = Vec::new();
        assert!(matches!(
            header.encode(&mut out, v),
            Err(EncodeError::Invalid { .. })
        ));
        let mut w = SubgroupWriter::new(SubgroupHeader { group: 0, ..header }, v);
        assert!(
            w.encode_object(&mut out, big, &Properties::new(), ObjectStatus::Normal, b"")
                .is_err()
        );
        assert!(
            w.encode_object(&mut out, 1, &big_prop, ObjectStatus::Normal, b"")
                .is_err()
        );
        assert!(out.is_empty());
        assert_eq!(w.last_object(), None);
        let d = datagram(big, Some(1), Properties::new(), false, hi());
        assert!(d.encode_to_bytes(v).is_err());
        assert!(FetchHeader { request_id: big }.encode(&mut out, v).is_err());
        let mut fw = FetchWriter::new(GroupOrder::Ascending, v);
        let o = FetchObject {
            location: Location::new(big, 0),
            ..Default::default()
        };
        assert!(fw.encode_object(&mut out, &o).is_err());
        assert!(out.is_empty());
        // The largest QUIC varint is fine.
        let ok = SubgroupHeader {
            group: QuicVarInt::MAX,
            ..header
        };
        ok.encode(&mut out, v).unwrap();
        assert_eq!(SubgroupHeader::decode(&mut &out[..], v).unwrap(), ok);
    }
    let mut out = Vec::new();
    header.encode(&mut out, D19).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Properties (Extension Headers)

fn imm(pairs: &[KeyValuePair], v: Version) -> Bytes {
    // The nested pairs as `v` writes them, built through a Properties of their own.
    let mut out = Vec::new();
    Properties::from_pairs(pairs.iter().cloned())
        .unwrap()
        .encode_all(&mut out, v)
        .unwrap();
    out.into()
}

/// Until draft-15 a pair carries its absolute type and pairs may come in any order; they are
/// read sorted. draft-16 writes delta types.
#[test]
fn extension_headers_absolute_and_delta_types() {
    // 0x3E = 200 (two-byte QUIC varint), then 0x3C = 1, out of order.
    let unsorted = [0x3e, 0x40, 0xc8, 0x3c, 0x01];
    let props = Properties::new()
        .with_int(0x3c, 1)
        .unwrap()
        .with_int(0x3e, 200)
        .unwrap();
    for v in [D14, D15] {
        assert_eq!(
            Properties::decode_all(&mut &unsorted[..], v).unwrap(),
            props
        );
        let mut out = Vec::new();
        props.encode_all(&mut out, v).unwrap();
        assert_eq!(out, [0x3c, 0x01, 0x3e, 0x40, 0xc8]);
    }
    let mut out = Vec::new();
    props.encode_all(&mut out, D16).unwrap();
    assert_eq!(out, [0x3c, 0x01, 0x02, 0x40, 0xc8]);
    assert_eq!(Properties::decode_all(&mut &out[..], D16).unwrap(), props);
}

/// IMMUTABLE_EXTENSIONS (0xB, draft-14 §11.2) nests pairs in the session's encoding; they are
/// held in the newest draft's and written in each version's, so a relay passes them on
/// whatever the versions on either side.
#[test]
fn immutable_extensions_across_versions() {
    let inner = [
        KeyValuePair::int(property::PRIOR_GROUP_ID_GAP, 100).unwrap(),
        KeyValuePair::int(property::PRIOR_OBJECT_ID_GAP, 5000).unwrap(),
    ];
    // Built locally: the nested pairs in the newest encoding (vi64, delta types).
    let props = Properties::new()
        .with_bytes(
            property::IMMUTABLE_PROPERTIES,
            imm(&inner, Version::PREFERRED),
        )
        .unwrap()
        .with_int(0x3c, 7)
        .unwrap();
    assert_eq!(props.immutable().unwrap(), inner);
    let nested_d14 = [0x3c, 0x40, 0x64, 0x3e, 0x53, 0x88];
    let nested_d16 = [0x3c, 0x40, 0x64, 0x02, 0x53, 0x88];
    assert_eq!(imm(&inner, D14)[..], nested_d14);
    assert_eq!(imm(&inner, D16)[..], nested_d16);
    for (v, nested) in [
        (D14, &nested_d14[..]),
        (D15, &nested_d14[..]),
        (D16, &nested_d16[..]),
    ] {
        let mut out = Vec::new();
        props.encode_all(&mut out, v).unwrap();
        let mut want = vec![0x0b, nested.len() as u8];
        want.extend_from_slice(nested);
        // 0x3C after 0x0B: absolute, or delta 0x31.
        want.extend_from_slice(if v.kvp_delta_types() {
            &[0x31, 0x07]
        } else {
            &[0x3c, 0x07]
        });
        assert_eq!(out, want, "under {v}");
        let back = Properties::decode_all(&mut &out[..], v).unwrap();
        assert_eq!(back, props);
        assert_eq!(back.immutable().unwrap(), inner);
        assert!(back.validate_object().is_ok());
        // Passed on to another version.
        let mut on = Vec::new();
        back.encode_all(&mut on, D19).unwrap();
        let mut local = Vec::new();
        props.encode_all(&mut local, D19).unwrap();
        assert_eq!(on, local);
    }
    // Nested pairs that do not parse in the version read (a truncated pair) are kept as they
    // came, written back unchanged, and make the object malformed.
    let raw = [0x0b, 0x02, 0x3d, 0x05];
    let bad = Properties::decode_all(&mut &raw[..], D14).unwrap();
    assert!(bad.immutable().is_none());
    assert!(bad.validate_object().is_err());
    let mut out = Vec::new();
    bad.encode_all(&mut out, D14).unwrap();
    assert_eq!(out, raw);
    // Nesting IMMUTABLE_EXTENSIONS is malformed (draft-14 §11.2).
    let nested = [0x0b, 0x03, 0x0b, 0x01, 0x00];
    let nested = Properties::decode_all(&mut &nested[..], D14).unwrap();
    assert!(nested.validate_object().is_err());
}

/// The validation rules follow the version the properties were read in: Mandatory Track
/// Properties (0x4000-0x7FFF) exist from draft-18; a DELIVERY_TIMEOUT track extension of 0 is a
/// PROTOCOL_VIOLATION in draft-16 (§11).
#[test]
fn property_rules_by_version() {
    let mandatory = Properties::new().with_int(0x4000, 1).unwrap();
    for v in [D14, D15, D16, D18, D19] {
        let mut out = Vec::new();
        mandatory.encode_all(&mut out, v).unwrap();
        let read = Properties::decode_all(&mut &out[..], v).unwrap();
        assert_eq!(read, mandatory);
        let rules = v.has_mandatory_track_properties();
        assert_eq!(read.validate_object().is_err(), rules, "under {v}");
        assert_eq!(read.unknown_mandatory(&[]).is_some(), rules, "under {v}");
    }
    // Built locally: the newest draft's rules.
    assert!(mandatory.validate_object().is_err());

    let zero_timeout = Properties::new()
        .with_int(property::OBJECT_DELIVERY_TIMEOUT, 0)
        .unwrap();
    for v in [D16, D18, D19] {
        let mut out = Vec::new();
        zero_timeout.encode_all(&mut out, v).unwrap();
        let read = Properties::decode_all(&mut &out[..], v).unwrap();
        assert_eq!(read.validate_track().is_err(), v == D16, "under {v}");
    }
    assert!(zero_timeout.validate_track().is_ok());
    // Repeated gaps are malformed in every version (draft-14 §11.1, §11.3).
    let twice = [0x3c, 0x01, 0x3c, 0x02];
    for v in [D14, D15] {
        assert!(
            Properties::decode_all(&mut &twice[..], v)
                .unwrap()
                .validate_object()
                .is_err()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Round trips

fn old_version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(D14), Just(D15), Just(D16)]
}

/// A `u64` that fits a QUIC varint, spread over its four lengths.
fn qvarint() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..0x40,
        2 => 0x40u64..0x4000,
        1 => 0x4000u64..0x4000_0000,
        1 => 0x4000_0000u64..=QuicVarInt::MAX,
        1 => Just(QuicVarInt::MAX),
    ]
}

fn kvp() -> impl Strategy<Value = KeyValuePair> {
    prop_oneof![
        (0u64..0x100, qvarint()).prop_map(|(k, x)| KeyValuePair::int(k & !1, x).unwrap()),
        // Not IMMUTABLE_PROPERTIES (0x0B), whose value must hold pairs.
        (0u64..0x4000, vec(any::<u8>(), 0..16)).prop_map(|(k, b)| {
            let k = if k | 1 == property::IMMUTABLE_PROPERTIES {
                0x0D
            } else {
                k | 1
            };
            KeyValuePair::bytes(k, b).unwrap()
        }),
    ]
}

fn properties() -> impl Strategy<Value = Properties> {
    vec(kvp(), 0..5).prop_map(|p| Properties::from_pairs(p).unwrap())
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
