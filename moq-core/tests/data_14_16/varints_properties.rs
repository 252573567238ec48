//! The limits of QUIC varints and Properties (Extension Headers) across versions.

use moq_core::coding::QuicVarInt;
use moq_core::data::{
    FetchHeader, FetchObject, FetchWriter, ObjectStatus, SubgroupHeader, SubgroupId, SubgroupWriter,
};
use moq_core::{EncodeError, GroupOrder, KeyValuePair, Location, Properties, Version, property};

use crate::support::{D14, D15, D16, D18, D19, OLD, datagram, hi, imm};

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
