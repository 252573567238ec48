//! Subgroup streams at drafts 14-16 (draft-14 §10.4.2, draft-16 §10.4.2): the header-type
//! predicates and byte vectors.

use moq_core::data::{ObjectStatus, PADDING_STREAM_TYPE, StreamType, SubgroupHeader, SubgroupId};
use moq_core::{DecodeError, Properties, Version, property};

use crate::support::{
    D14, D15, D16, D18, D19, OLD, Obj, as_read, cat, example_properties, obj, qvi, read_subgroup,
    span, write_subgroup,
};

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
