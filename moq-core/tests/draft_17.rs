//! Draft-17: what sets it apart from draft-18 on the wire (NOTES.md B.4 and B.5, and how
//! moq-dev's moq-net 0.3.18 reads it): the Required Request ID Delta of every request, no
//! 7-byte vi64, REQUEST_OK without Track Properties, draft-16's PUBLISH_DONE codes, and no
//! SUBGROUP_DELIVERY_TIMEOUT, FILL_TIMEOUT or TRACK_NAMESPACE_PREFIX.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use bytes::Bytes;

use moq_core::codes::{PublishDoneCode, SessionErrorCode};
use moq_core::message::{
    Fetch, FetchType, Message, ParamContext, Parameters, Publish, PublishNamespace, RequestOk,
    RequestUpdate, Subscribe, SubscribeNamespace, TrackStatus, param, param_allowed,
};
use moq_core::{
    DecodeError, FullTrackName, Location, Properties, TrackNamespace, Version, property,
};

const D17: Version = Version::Draft17;
const D18: Version = Version::Draft18;

fn track() -> FullTrackName {
    FullTrackName::new(
        TrackNamespace::from_strs(["ns"]).unwrap(),
        Bytes::from_static(b"t"),
    )
    .unwrap()
}

/// Every request with Request ID 4, one message of each kind.
fn requests() -> Vec<Message> {
    let ns = TrackNamespace::from_strs(["ns"]).unwrap();
    vec![
        Subscribe {
            request_id: 4,
            track: track(),
            params: Parameters::default(),
        }
        .into(),
        Publish {
            request_id: 4,
            track: track(),
            track_alias: 1,
            params: Parameters::default(),
            track_properties: Properties::default(),
        }
        .into(),
        Fetch {
            request_id: 4,
            fetch_type: FetchType::Standalone {
                track: track(),
                start: Location::new(0, 0),
                end: Location::new(1, 0),
            },
            params: Parameters::default(),
        }
        .into(),
        TrackStatus {
            request_id: 4,
            track: track(),
            params: Parameters::default(),
        }
        .into(),
        PublishNamespace {
            request_id: 4,
            namespace: ns.clone(),
            params: Parameters::default(),
        }
        .into(),
        SubscribeNamespace {
            request_id: 4,
            prefix: ns,
            params: Parameters::default(),
        }
        .into(),
        RequestUpdate {
            request_id: 4,
            params: Parameters::default(),
        }
        .into(),
    ]
}

/// Type (one byte here), 16-bit length, body.
fn body(frame: &[u8]) -> &[u8] {
    &frame[3..]
}

#[test]
fn every_request_carries_a_required_request_id_delta_of_zero() {
    for msg in requests() {
        let d17 = msg.encode_to_vec(D17).unwrap();
        let d18 = msg.encode_to_vec(D18).unwrap();
        // Request ID 4, then the Delta, 0 (nothing required).
        assert_eq!(&body(&d17)[..2], &[0x04, 0x00], "{}", msg.name());
        if !matches!(msg, Message::SubscribeNamespace(_)) {
            // Otherwise the body is draft-18's.
            assert_eq!(&body(&d17)[2..], &body(&d18)[1..], "{}", msg.name());
        }
        let back = Message::decode(&mut &d17[..], D17).unwrap();
        assert_eq!(back, msg, "{}", msg.name());
    }
}

#[test]
fn a_delta_naming_an_earlier_request_is_accepted_one_below_zero_closes_the_session() {
    for msg in requests() {
        let mut frame = msg.encode_to_vec(D17).unwrap();
        // Request ID 4 - 2 x 2 = 0: an earlier request.
        frame[4] = 2;
        let back = Message::decode(&mut &frame[..], D17).unwrap();
        assert_eq!(back, msg, "{}", msg.name());
        // 4 - 2 x 3 < 0.
        frame[4] = 3;
        let err = Message::decode(&mut &frame[..], D17).unwrap_err();
        assert_eq!(
            err,
            DecodeError::InvalidRequiredRequestId {
                request_id: 4,
                delta: 3
            },
            "{}",
            msg.name()
        );
        assert_eq!(
            err.session_code(),
            SessionErrorCode::INVALID_REQUIRED_REQUEST_ID
        );
    }
}

#[test]
fn draft_17_has_no_seven_byte_vi64() {
    // 2^45 takes 7 bytes in draft-18 and 8 (first byte 0xfe) in draft-17.
    let msg: Message = RequestUpdate {
        request_id: 1 << 45,
        params: Parameters::default(),
    }
    .into();
    let d18 = msg.encode_to_vec(D18).unwrap();
    let d17 = msg.encode_to_vec(D17).unwrap();
    assert_eq!(body(&d18)[0] & 0xfe, 0xfc);
    assert_eq!(body(&d17)[0], 0xfe);
    assert_eq!(Message::decode(&mut &d17[..], D17).unwrap(), msg);
    // Draft-18's 7-byte form is a protocol violation in draft-17 (even with the Delta added).
    let mut seven = d18[..3].to_vec();
    seven.extend_from_slice(&body(&d18)[..7]);
    seven.push(0);
    seven.extend_from_slice(&body(&d18)[7..]);
    let len = u16::try_from(seven.len() - 3).unwrap().to_be_bytes();
    seven[1..3].copy_from_slice(&len);
    let err = Message::decode(&mut &seven[..], D17).unwrap_err();
    assert!(matches!(err, DecodeError::ProtocolViolation(_)), "{err:?}");
    assert_eq!(err.session_code(), SessionErrorCode::PROTOCOL_VIOLATION);
}

#[test]
fn request_ok_has_no_track_properties() {
    let props = Properties::default()
        .with_int(property::MAX_CACHE_DURATION, 9)
        .unwrap();
    let ok = RequestOk {
        params: Parameters::default(),
        track_properties: props,
    };
    let d17 = Message::from(ok.clone()).encode_to_vec(D17).unwrap();
    let d18 = Message::from(ok).encode_to_vec(D18).unwrap();
    assert!(d17.len() < d18.len());
    // Bytes after the parameters are not properties in draft-17 but an error.
    assert!(Message::decode(&mut &d18[..], D17).is_err());
}

#[test]
fn publish_done_codes_are_draft_16s() {
    assert_eq!(PublishDoneCode::TOO_FAR_BEHIND.to_wire(D17), 0x6);
    assert_eq!(PublishDoneCode::EXPIRED.to_wire(D17), 0x5);
    assert_eq!(PublishDoneCode::TOO_FAR_BEHIND.to_wire(D18), 0x5);
    assert_eq!(PublishDoneCode::EXCESSIVE_LOAD.to_wire(D17), 0x9);
    assert_eq!(
        PublishDoneCode::from_wire(0x6, D17),
        PublishDoneCode::TOO_FAR_BEHIND
    );
}

#[test]
fn draft_18_parameters_do_not_exist() {
    for p in [
        param::SUBGROUP_DELIVERY_TIMEOUT,
        param::FILL_TIMEOUT,
        param::TRACK_NAMESPACE_PREFIX,
    ] {
        for ctx in [
            ParamContext::Subscribe,
            ParamContext::Fetch,
            ParamContext::UpdateSubscribeNamespace,
        ] {
            assert!(!param_allowed(p, ctx, D17), "{p:#x} in {ctx:?}");
        }
    }
    assert!(param_allowed(
        param::OBJECT_DELIVERY_TIMEOUT,
        ParamContext::Subscribe,
        D17
    ));
    assert!(param_allowed(
        param::SUBGROUP_DELIVERY_TIMEOUT,
        ParamContext::Subscribe,
        D18
    ));
}
