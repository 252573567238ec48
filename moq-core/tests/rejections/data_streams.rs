//! Rejections on the data plane: datagrams (draft-19 §11.3.1), stream types and subgroup streams
//! (§3.4, §11.4.2), fetch streams (§11.4.4).

use bytes::{Bytes, BytesMut};
use moq_core::data::{
    Datagram, FetchHeader, FetchReader, PADDING_DATAGRAM_TYPE, PADDING_STREAM_TYPE, StreamType,
    SubgroupHeader, SubgroupId, SubgroupReader,
};
use moq_core::{DecodeError, GroupOrder, Version};

use crate::support::{BOTH, VIOLATION, vi};

// ---------------------------------------------------------------------------------------------
// Datagrams (§11.3.1)

fn datagram(bytes: &[u8], v: Version) -> DecodeError {
    Datagram::decode(Bytes::copy_from_slice(bytes), v).unwrap_err()
}

#[test]
fn invalid_datagram_types() {
    let status_and_end_of_group = [0x22u64, 0x23, 0x26, 0x27, 0x2A, 0x2B, 0x2E, 0x2F];
    let outside_form = [
        0x10u64,
        0x11,
        0x1F,
        0x30,
        0x3F,
        0x40,
        0x50,
        0x7F,
        0x80,
        0xC0,
        0x2F00,
        PADDING_STREAM_TYPE,
        u64::MAX,
    ];
    for v in BOTH {
        for t in status_and_end_of_group.into_iter().chain(outside_form) {
            let mut bytes = vi(t);
            bytes.extend_from_slice(&[0x01, 0x02, 0x03, 0x04, 0x00]);
            let err = datagram(&bytes, v);
            assert_eq!(err, DecodeError::InvalidDatagramType(t));
            assert_eq!(err.session_code(), VIOLATION);
        }
    }
}

#[test]
fn datagram_properties_bit_with_length_zero() {
    for v in BOTH {
        // Type 0x01 (payload) and 0x21 (status): Properties Length 0.
        for bytes in [
            &[0x01u8, 0x01, 0x02, 0x03, 0x04, 0x00, b'x'][..],
            &[0x21, 0x01, 0x02, 0x03, 0x04, 0x00, 0x00][..],
        ] {
            let err = datagram(bytes, v);
            assert_eq!(
                err,
                DecodeError::ProtocolViolation("datagram PROPERTIES bit with empty properties")
            );
            assert_eq!(err.session_code(), VIOLATION);
        }
    }
}

#[test]
fn datagram_status_and_properties_not_normal() {
    for v in BOTH {
        for status in [0x03u8, 0x04] {
            // Type 0x21: STATUS | PROPERTIES, properties {0x3C: 1}.
            let err = datagram(&[0x21, 0x01, 0x02, 0x03, 0x04, 0x02, 0x3C, 0x01, status], v);
            assert_eq!(
                err,
                DecodeError::ProtocolViolation(
                    "properties on a datagram whose status is not Normal"
                )
            );
            assert_eq!(err.session_code(), VIOLATION);
        }
        // Normal status with properties is allowed.
        assert!(
            Datagram::decode(
                Bytes::from_static(&[0x21, 0x01, 0x02, 0x03, 0x04, 0x02, 0x3C, 0x01, 0x00]),
                v
            )
            .is_ok()
        );
        // Unknown status in a datagram.
        assert_eq!(
            datagram(&[0x20, 0x01, 0x02, 0x03, 0x04, 0x01], v),
            DecodeError::InvalidValue {
                field: "object status",
                value: 1
            }
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Stream types and subgroup streams (§3.4, §11.4.2)

#[test]
fn invalid_subgroup_types() {
    let mode_11: Vec<u64> = (0u64..0x80)
        .filter(|t| t & 0x10 != 0 && t & 0x06 == 0x06)
        .collect();
    assert_eq!(mode_11.len(), 16);
    let outside_form = [
        0x00u64, 0x01, 0x04, 0x0F, 0x20, 0x40, 0x60, 0x6F, 0x80, 0x90, 0xFF, 0x2F00,
    ];
    for v in BOTH {
        for &t in mode_11.iter().chain(&outside_form) {
            let mut bytes = vi(t);
            bytes.extend_from_slice(&[0x01, 0x02, 0x03, 0x04]);
            let err = SubgroupHeader::decode(&mut &bytes[..], v).unwrap_err();
            assert_eq!(err, DecodeError::InvalidSubgroupType(t));
            assert_eq!(err.session_code(), VIOLATION);
        }
        // As a stream type: the reserved mode is an invalid subgroup type.
        for &t in &mode_11 {
            assert_eq!(
                StreamType::peek(&vi(t), v),
                Err(DecodeError::InvalidSubgroupType(t))
            );
        }
    }
}

#[test]
fn unknown_stream_type() {
    for v in BOTH {
        for t in [
            0x00u64,
            0x01,
            0x02,
            0x04,
            0x06,
            0x0F,
            0x80,
            0x90,
            0x2F01,
            PADDING_DATAGRAM_TYPE,
            u64::MAX,
        ] {
            let err = StreamType::peek(&vi(t), v).unwrap_err();
            assert_eq!(err, DecodeError::UnknownStreamType(t));
            assert_eq!(err.session_code(), VIOLATION);
        }
        // A fetch reader handed another stream type.
        assert_eq!(
            FetchHeader::decode(&mut &[0x06u8, 0x00][..], v),
            Err(DecodeError::UnknownStreamType(6))
        );
    }
}

fn header(properties: bool) -> SubgroupHeader {
    SubgroupHeader {
        track_alias: 1,
        group: 2,
        subgroup: SubgroupId::Zero,
        priority: Some(0),
        properties,
        end_of_group: false,
        first_object: false,
    }
}

/// Reads every event from `bytes`, returning the first error.
fn read_subgroup(h: SubgroupHeader, bytes: &[u8], v: Version) -> DecodeError {
    let mut r = SubgroupReader::new(h, v);
    let mut buf = BytesMut::from(bytes);
    loop {
        match r.next(&mut buf) {
            Ok(Some(_)) => {}
            Ok(None) => return r.finish(&buf).unwrap_err(),
            Err(e) => return e,
        }
    }
}

#[test]
fn object_status_one() {
    for v in BOTH {
        for status in [0x01u8, 0x02, 0x05] {
            // Object ID Delta 0, Payload Length 0, Status.
            let err = read_subgroup(header(false), &[0x00, 0x00, status], v);
            assert_eq!(
                err,
                DecodeError::InvalidValue {
                    field: "object status",
                    value: status.into(),
                }
            );
            assert_eq!(err.session_code(), VIOLATION);
        }
    }
}

#[test]
fn properties_on_non_normal_object() {
    for v in BOTH {
        for status in [0x03u8, 0x04] {
            // Delta 0, Properties {0x3C: 1}, Payload Length 0, Status.
            let err = read_subgroup(header(true), &[0x00, 0x02, 0x3C, 0x01, 0x00, status], v);
            assert_eq!(
                err,
                DecodeError::ProtocolViolation(
                    "properties on an object whose status is not Normal"
                )
            );
            assert_eq!(err.session_code(), VIOLATION);
        }
    }
}

#[test]
fn object_id_overflow() {
    for v in BOTH {
        // First object 2^64-1 (End of Track), then delta 0 would be 2^64.
        let mut bytes = vi(u64::MAX);
        bytes.extend_from_slice(&[0x00, 0x04, 0x00, 0x00, 0x00]);
        let err = read_subgroup(header(false), &bytes, v);
        assert_eq!(err, DecodeError::Overflow("object ID"));
        assert_eq!(err.session_code(), VIOLATION);
    }
}

#[test]
fn fin_in_the_middle_of_an_object() {
    let want = DecodeError::ProtocolViolation("stream ended in the middle of an object");
    for v in BOTH {
        // Inside the payload: 1 of 5 bytes.
        assert_eq!(read_subgroup(header(false), &[0x00, 0x05, b'a'], v), want);
        // Inside the object's fields: Properties Length says 4, 1 byte follows.
        assert_eq!(read_subgroup(header(true), &[0x00, 0x04, 0x3C], v), want);
        assert_eq!(want.session_code(), VIOLATION);
        // A complete object may end the stream.
        let mut r = SubgroupReader::new(header(false), v);
        let mut buf = BytesMut::from(&[0x00u8, 0x01, b'a'][..]);
        while r.next(&mut buf).unwrap().is_some() {}
        r.finish(&buf).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Fetch streams (§11.4.4)

fn read_fetch(bytes: &[u8], v: Version) -> DecodeError {
    let mut r = FetchReader::new(GroupOrder::Ascending, v);
    let mut buf = BytesMut::from(bytes);
    loop {
        match r.next(&mut buf) {
            Ok(Some(_)) => {}
            Ok(None) => return r.finish(&buf).unwrap_err(),
            Err(e) => return e,
        }
    }
}

#[test]
fn fetch_first_object_refers_to_prior() {
    let cases: [(&[u8], &str); 5] = [
        // Object Delta + Priority, no Group Delta.
        (
            &[0x14, 0x00, 0x01, 0x00],
            "first fetch object refers to a prior group",
        ),
        // Group Delta + Priority, no Object Delta.
        (
            &[0x18, 0x00, 0x01, 0x00],
            "first fetch object refers to a prior object",
        ),
        // Subgroup = prior subgroup.
        (
            &[0x1D, 0x00, 0x00, 0x01, 0x00],
            "no prior subgroup to refer to",
        ),
        // Subgroup = prior subgroup + 1.
        (
            &[0x1E, 0x00, 0x00, 0x01, 0x00],
            "no prior subgroup to refer to",
        ),
        // Priority = prior priority.
        (&[0x0C, 0x00, 0x00, 0x00], "no prior priority to refer to"),
    ];
    for v in BOTH {
        for (bytes, what) in cases {
            let err = read_fetch(bytes, v);
            assert_eq!(err, DecodeError::ProtocolViolation(what), "{bytes:x?}");
            assert_eq!(err.session_code(), VIOLATION);
        }
        // After an End of Range as the first entry there is still no prior object.
        let err = read_fetch(&[0x80, 0x8C, 0x00, 0x05, 0x00, 0x00], v);
        assert_eq!(
            err,
            DecodeError::ProtocolViolation("no prior priority to refer to")
        );
    }
}

#[test]
fn fetch_serialization_flags_128_and_above() {
    for v in BOTH {
        for flags in [
            0x80u64,
            0x8B,
            0x8D,
            0xFF,
            0x100,
            0x10B,
            0x10D,
            0x1000,
            u64::MAX,
        ] {
            let mut bytes = vi(flags);
            bytes.extend_from_slice(&[0x00, 0x00, 0x00]);
            let err = read_fetch(&bytes, v);
            assert_eq!(
                err,
                DecodeError::InvalidValue {
                    field: "fetch serialization flags",
                    value: flags,
                }
            );
            assert_eq!(err.session_code(), VIOLATION);
        }
    }
}

#[test]
fn fetch_group_below_zero_and_fin_mid_object() {
    for v in BOTH {
        // Descending: group 0, then a Group Delta of 0 means group -1.
        let mut r = FetchReader::new(GroupOrder::Descending, v);
        let mut buf = BytesMut::from(&[0x1C, 0x00, 0x00, 0x01, 0x00, 0x08, 0x00, 0x00][..]);
        assert!(r.next(&mut buf).unwrap().is_some());
        let err = r.next(&mut buf).unwrap_err();
        assert_eq!(err, DecodeError::Overflow("fetch group ID"));
        assert_eq!(err.session_code(), VIOLATION);
        // FIN inside a payload.
        assert_eq!(
            read_fetch(&[0x1C, 0x00, 0x00, 0x01, 0x03, b'a'], v),
            DecodeError::ProtocolViolation("fetch stream ended in the middle of an object")
        );
    }
}
