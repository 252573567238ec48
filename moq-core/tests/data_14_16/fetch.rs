//! Fetch streams at drafts 14-16 (draft-14 §10.4.4, draft-16 §10.4.4): byte vectors and rejections.

use moq_core::data::{FetchObject, FetchWriter, RangeEnd, StreamType};
use moq_core::{DecodeError, EncodeError, GroupOrder, Location, Properties, Version, property};

use crate::support::{D14, D15, D16, D18, Entry, cat, fobj, qvi, read_fetch, write_fetch};

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
