//! Datagrams at drafts 14-16 (draft-14 §10.3, draft-16 §10.3): byte vectors and the types each
//! version refuses.

use bytes::Bytes;
use moq_core::data::{Datagram, DatagramBody, ObjectDatagram, ObjectStatus, PADDING_DATAGRAM_TYPE};
use moq_core::{DecodeError, Properties, Version, property};

use crate::support::{D14, D15, D16, D18, OLD, cat, datagram, hi, qvi};

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
