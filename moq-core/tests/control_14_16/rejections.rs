//! What the envelope must say, and the rejections of drafts 14-16's control messages.

use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::message::{
    Address, Envelope, MaxRequestId, Message, MessageReader, Parameters, PublishDone,
    PublishNamespace, PublishNamespaceDone, RequestError, RequestOk, RequestType, RequestUpdate,
    Setup, Subscribe, TrackStatus, Unsubscribe,
};
use moq_core::{
    DecodeError, EncodeError, Location, LocationFilter, TrackNamespace, Version, property,
};

use crate::support::{D14, D15, D16, FAMILY, answer, hex, named, ns, props, subscribe, to, track};

// ---------------------------------------------------------------------------------------------
// What the envelope must say

#[test]
fn envelope_is_required_where_the_wire_needs_it() {
    let ok = Message::from(RequestOk::default());
    // draft-14 names the answer after its request.
    assert!(ok.encode_to_vec(D14).is_err());
    // No OK answers a draft-14 SUBSCRIBE_UPDATE.
    assert!(
        ok.encode_addressed_to_vec(&answer(1, RequestType::RequestUpdate), D14)
            .is_err()
    );
    // Answers need the Request ID they answer.
    let env = Envelope {
        address: None,
        answers: Some(RequestType::PublishNamespace),
    };
    assert!(ok.encode_addressed_to_vec(&env, D14).is_err());
    // The wrong kind of address.
    assert!(
        Message::from(Unsubscribe)
            .encode_addressed_to_vec(&named(ns(&["a"])), D16)
            .is_err()
    );
    assert!(
        Message::from(PublishNamespaceDone)
            .encode_addressed_to_vec(&to(1), D14)
            .is_err()
    );
    // REQUEST_UPDATE needs its Existing Request ID.
    let update = Message::from(RequestUpdate::default());
    assert!(update.encode_to_vec(D16).is_err());
    // draft-14's SUBSCRIBE_UPDATE restates the filter, priority and forward.
    assert!(update.encode_addressed_to_vec(&to(1), D14).is_err());
    // From draft-18 the envelope is not needed.
    assert!(ok.encode_to_vec(Version::Draft19).is_ok());
}

#[test]
fn values_the_version_cannot_carry() {
    let big = 1u64 << 62;
    for v in FAMILY {
        assert!(
            Message::from(MaxRequestId { request_id: big })
                .encode_to_vec(v)
                .is_err()
        );
        let mut s = subscribe();
        s.request_id = big;
        assert!(Message::from(s).encode_to_vec(v).is_err());
        let mut s = subscribe();
        s.params.location_filter = Some(LocationFilter::AbsoluteStart(Location::new(big, 0)));
        assert!(Message::from(s).encode_to_vec(v).is_err());
        assert!(
            Message::from(Unsubscribe)
                .encode_addressed_to_vec(&to(big), v)
                .is_err()
        );
        let done = PublishDone {
            status: PublishDoneCode::TRACK_ENDED,
            stream_count: big,
            reason: String::new(),
        };
        assert!(
            Message::from(done)
                .encode_addressed_to_vec(&to(1), v)
                .is_err()
        );
        // Parameters the version does not have.
        let mut s = subscribe();
        s.params.rendezvous_timeout = Some(1);
        assert!(Message::from(s).encode_to_vec(v).is_err());
        // A REDIRECT needs draft-18.
        let redirect = RequestError::new(RequestErrorCode::REDIRECT, "");
        assert_eq!(
            Message::from(redirect).encode_addressed_to_vec(&answer(1, RequestType::Subscribe), v),
            Err(EncodeError::NotInVersion("REDIRECT", v))
        );
        // SETUP does not exist before draft-17.
        assert!(matches!(
            Message::from(Setup::default()).encode_to_vec(v),
            Err(EncodeError::NotInVersion(..))
        ));
    }
    // NEW_GROUP_REQUEST needs draft-16, EXPIRES as a parameter draft-15.
    let mut s = subscribe();
    s.params.new_group_request = Some(1);
    assert!(Message::from(s.clone()).encode_to_vec(D15).is_err());
    assert!(Message::from(s).encode_to_vec(D16).is_ok());
    // Codes a version does not have go as INTERNAL_ERROR.
    let going = Message::from(RequestError::new(RequestErrorCode::GOING_AWAY, ""));
    assert_eq!(
        going.encode_addressed_to_vec(&to(1), D16).unwrap(),
        hex("05 0004 01 00 00 00")
    );
}

// ---------------------------------------------------------------------------------------------
// Rejections

fn rejects(bytes: &[u8], v: Version) -> DecodeError {
    match Message::decode_addressed(&mut &bytes[..], v) {
        Err(e) => e,
        Ok(m) => panic!("{v} accepted {m:?}"),
    }
}

#[test]
fn types_of_other_versions() {
    // SETUP under 16, CLIENT_SETUP under 19.
    assert_eq!(
        rejects(&hex("c0 00 00 00 00 00 2f 00 0000"), D16),
        DecodeError::UnknownMessageType(0x2F00)
    );
    let mut setup = vec![0x60, 0x00];
    setup.extend_from_slice(&[0x00, 0x00]);
    assert!(matches!(
        Message::decode(&mut &hex("20 0001 00")[..], Version::Draft19),
        Err(DecodeError::UnknownMessageType(0x20))
    ));
    // NAMESPACE 0x08 under 15 (under 14 it is PUBLISH_NAMESPACE_ERROR).
    assert_eq!(
        rejects(&hex("08 0003 01 01 61"), D15),
        DecodeError::UnknownMessageType(0x08)
    );
    let (m, addr) = Message::decode_addressed(&mut &hex("08 0003 01 04 00")[..], D14).unwrap();
    assert_eq!(
        m,
        RequestError::new(RequestErrorCode::UNINTERESTED, "").into()
    );
    assert_eq!(addr, Some(Address::Request(1)));
    // UNSUBSCRIBE_NAMESPACE under 16, SUBSCRIBE_NAMESPACE_OK under 15, TRACK_STATUS_ERROR
    // under 16.
    assert_eq!(
        rejects(&hex("14 0001 01"), D16),
        DecodeError::UnknownMessageType(0x14)
    );
    assert_eq!(
        rejects(&hex("12 0001 01"), D15),
        DecodeError::UnknownMessageType(0x12)
    );
    assert_eq!(
        rejects(&hex("0f 0003 01 00 00"), D16),
        DecodeError::UnknownMessageType(0x0F)
    );
    let mut r = MessageReader::new(D16);
    r.push(&hex("0f"));
    assert_eq!(r.next_message(), Err(DecodeError::UnknownMessageType(0x0F)));
}

#[test]
fn empty_namespaces() {
    // A 0-field namespace is a PROTOCOL_VIOLATION until draft-16 (draft-14 §2.4.1) ...
    for v in FAMILY {
        assert!(matches!(
            rejects(&hex("06 0003 04 00 00"), v),
            DecodeError::ProtocolViolation(_)
        ));
        assert!(matches!(
            rejects(&hex("03 0009 02 00 01 74 80 00 01 02 00"), v),
            DecodeError::ProtocolViolation(_)
        ));
        let empty = PublishNamespace {
            request_id: 1,
            namespace: TrackNamespace::empty(),
            params: Parameters::default(),
        };
        assert!(Message::from(empty).encode_to_vec(v).is_err());
    }
    // ... and so is a 0-field SUBSCRIBE_NAMESPACE prefix in 14 and 15, allowed from 16.
    assert!(matches!(
        rejects(&hex("11 0003 06 00 00"), D14),
        DecodeError::ProtocolViolation(_)
    ));
    assert!(matches!(
        rejects(&hex("11 0003 06 00 00"), D15),
        DecodeError::ProtocolViolation(_)
    ));
    assert!(Message::decode(&mut &hex("11 0004 06 00 01 00")[..], D16).is_ok());
    // draft-14 UNSUBSCRIBE_NAMESPACE and PUBLISH_NAMESPACE_DONE name 1..32 fields.
    assert!(matches!(
        rejects(&hex("14 0001 00"), D14),
        DecodeError::ProtocolViolation(_)
    ));
    assert!(matches!(
        rejects(&hex("09 0001 00"), D15),
        DecodeError::ProtocolViolation(_)
    ));
}

#[test]
fn trailing_bytes_and_short_bodies() {
    for v in FAMILY {
        assert_eq!(
            rejects(&hex("0a 0002 02 00"), v),
            DecodeError::TrailingBytes {
                message: "UNSUBSCRIBE",
                extra: 1
            }
        );
        assert_eq!(
            rejects(&hex("15 0000"), v),
            DecodeError::BodyTooShort("MAX_REQUEST_ID")
        );
        // Cut in the address.
        assert_eq!(
            rejects(&hex("0b 0001 40"), v),
            DecodeError::BodyTooShort("PUBLISH_DONE")
        );
        assert_eq!(rejects(&hex("0b 00"), v), DecodeError::Short);
    }
    assert_eq!(
        rejects(&hex("07 0002 04 00"), D14),
        DecodeError::TrailingBytes {
            message: "PUBLISH_NAMESPACE_OK",
            extra: 1
        }
    );
    // CLIENT_SETUP whose Number of Parameters does not match.
    assert!(matches!(
        rejects(&hex("20 0005 02 01 01 61 00"), D16),
        DecodeError::ProtocolViolation(_) | DecodeError::KeyValueFormatting(_)
    ));
}

#[test]
fn parameters() {
    // Duplicate FORWARD (draft-14 §9.2: PROTOCOL_VIOLATION); draft-15 absolute types.
    let dup = hex("03 000c 02 01 01 61 00 03 10 01 10 01 20 05");
    assert_eq!(rejects(&dup, D15), DecodeError::DuplicateParameter(0x10));
    // draft-16: delta 0 repeats the type.
    let dup16 = hex("03 000a 02 01 01 61 00 02 10 01 00 01");
    assert_eq!(rejects(&dup16, D16), DecodeError::DuplicateParameter(0x10));
    // Duplicate DELIVERY_TIMEOUT in a draft-14 SUBSCRIBE.
    let dup14 = hex("03 000e 02 01 01 61 00 80 00 01 02 02 02 05 02 06");
    assert_eq!(rejects(&dup14, D14), DecodeError::DuplicateParameter(0x02));
    // AUTHORIZATION_TOKEN may repeat.
    let tokens = hex("06 000f 04 01 01 61 02 03 03 030061 03 03 030062");
    let (m, _) = Message::decode_addressed(&mut &tokens[..], D14).unwrap();
    let Message::PublishNamespace(p) = m else {
        panic!()
    };
    assert_eq!(p.params.authorization_tokens.len(), 2);

    // An unknown parameter: ignored until draft-15, PROTOCOL_VIOLATION from draft-16.
    let unknown = hex("06 0007 04 01 01 61 01 2a 05");
    for v in [D14, D15] {
        let (m, _) = Message::decode_addressed(&mut &unknown[..], v).unwrap();
        assert_eq!(
            m,
            PublishNamespace {
                request_id: 4,
                namespace: ns(&["a"]),
                params: Parameters::default(),
            }
            .into()
        );
    }
    assert_eq!(rejects(&unknown, D16), DecodeError::UnknownParameter(0x2a));
    // A known parameter in a message it is not for is ignored (draft-16 §9.2.2): FORWARD in
    // PUBLISH_NAMESPACE.
    let misplaced = hex("06 0007 04 01 01 61 01 10 01");
    let (m, _) = Message::decode_addressed(&mut &misplaced[..], D16).unwrap();
    assert_eq!(
        m,
        PublishNamespace {
            request_id: 4,
            namespace: ns(&["a"]),
            params: Parameters::default(),
        }
        .into()
    );
    // Parameters of drafts 15-16 are unknown (and ignored) in draft-14.
    let sub15 = hex("03 0008 02 01 01 61 00 01 10 00");
    let (m, _) = Message::decode_addressed(&mut &sub15[..], D15).unwrap();
    let Message::Subscribe(s) = m else { panic!() };
    assert_eq!(s.params.forward, Some(false));
    // Value ranges: FORWARD 2, SUBSCRIBER_PRIORITY 256, GROUP_ORDER 0, DELIVERY_TIMEOUT 0 at 16.
    for (bytes, v) in [
        (hex("03 0008 02 01 01 61 00 01 10 02"), D16),
        (hex("03 0009 02 01 01 61 00 01 20 4100"), D15),
        (hex("03 0008 02 01 01 61 00 01 22 00"), D16),
        (hex("03 0008 02 01 01 61 00 01 02 00"), D16),
    ] {
        assert!(
            matches!(rejects(&bytes, v), DecodeError::InvalidValue { .. }),
            "{bytes:x?}"
        );
    }
    // DELIVERY_TIMEOUT 0 is allowed before draft-16.
    assert!(Message::decode(&mut &hex("03 0008 02 01 01 61 00 01 02 00")[..], D15).is_ok());
    // A LARGEST_OBJECT whose length holds more than a Location.
    let largest = hex("04 0008 02 03 01 09 03 050600");
    assert!(matches!(
        rejects(&largest, D16),
        DecodeError::KeyValueFormatting(_)
    ));
    // draft-16: a DELIVERY_TIMEOUT Track Extension of 0.
    let ext0 = hex("04 0005 02 03 00 02 00");
    assert!(matches!(
        rejects(&ext0, D16),
        DecodeError::InvalidValue { .. }
    ));
}

#[test]
fn draft14_fields() {
    // SUBSCRIBE: Forward 2, Group Order 3, filter type 5.
    for (bytes, what) in [
        (hex("03 000a 02 01 01 61 00 80 00 02 02 00"), "forward"),
        (hex("03 000a 02 01 01 61 00 80 03 01 02 00"), "group order"),
        (hex("03 000a 02 01 01 61 00 80 00 01 05 00"), "filter"),
        // AbsoluteRange whose End Group is before its start.
        (hex("03 000d 02 01 01 61 00 80 00 01 04 05 00 04 00"), "end"),
    ] {
        assert!(
            matches!(rejects(&bytes, D14), DecodeError::InvalidValue { .. }),
            "{what}"
        );
    }
    // SUBSCRIBE_OK Group Order 0 and Content Exists 2.
    assert!(matches!(
        rejects(&hex("04 0006 02 03 00 00 00 00"), D14),
        DecodeError::InvalidValue { .. }
    ));
    assert!(matches!(
        rejects(&hex("04 0006 02 03 00 01 02 00"), D14),
        DecodeError::InvalidValue { .. }
    ));
    // SUBSCRIBE_UPDATE: End Group (plus one) 0 is open, 6 ends with group 5.
    let update = hex("02 0008 0a 02 05 00 06 80 01 00");
    let (m, addr) = Message::decode_addressed(&mut &update[..], D14).unwrap();
    assert_eq!(addr, Some(Address::Request(2)));
    let Message::RequestUpdate(u) = m else {
        panic!()
    };
    assert_eq!(u.request_id, 10);
    assert_eq!(
        u.params.location_filter,
        Some(LocationFilter::AbsoluteRange {
            start: Location::new(5, 0),
            end_group_delta: 0,
            end_object: None
        })
    );
    assert_eq!(u.params.subscriber_priority, Some(0x80));
    // End Group 5 (plus one) before the start's group 5.
    assert!(matches!(
        rejects(&hex("02 0008 0a 02 05 00 05 80 01 00"), D14),
        DecodeError::InvalidValue { .. }
    ));
    // TRACK_STATUS keeps none of SUBSCRIBE's fields; TRACK_STATUS_OK's Track Alias is ignored.
    let status = hex("0d 000a 10 01 01 61 00 07 02 00 02 00");
    let (m, _) = Message::decode_addressed(&mut &status[..], D14).unwrap();
    assert_eq!(
        m,
        TrackStatus {
            request_id: 0x10,
            track: track(&["a"], ""),
            params: Parameters::default(),
        }
        .into()
    );
    let status_ok = hex("0e 0006 10 05 00 01 00 00");
    let (m, _) = Message::decode_addressed(&mut &status_ok[..], D14).unwrap();
    assert_eq!(
        m,
        RequestOk {
            params: Parameters::default(),
            track_properties: props(&[(property::DEFAULT_PUBLISHER_GROUP_ORDER, 1)]),
        }
        .into()
    );
    // A SUBSCRIBE without parameters gets the defaults on the wire: priority 128, Group
    // Order 0 (the publisher's), Forward 1, AbsoluteStart {0, 0} (unfiltered).
    let bare = Subscribe {
        request_id: 0,
        track: track(&["a"], ""),
        params: Parameters::default(),
    };
    assert_eq!(
        Message::from(bare).encode_to_vec(D14).unwrap(),
        hex("03 000c 00 01 01 61 00 80 00 01 03 00 00 00")
    );
}
