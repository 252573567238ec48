//! Drafts 20, 21 and 22: vectors from the bytes aiomoqt 0.13.3's encoders and moq-net 0.3.18's unit
//! tests produce, not from our encoder.

use moq_core::data::{FetchEvent, FetchReader, FetchWriter, RangeEnd};
use moq_core::message::{
    Fetch, FetchOk, FetchType, Message, OPEN_END, ParamContext, Parameters, PublishStateNotify,
    RequestUpdate, Subscribe,
};
use moq_core::{DecodeError, FullTrackName, GroupOrder, Location, LocationFilter, Version};

use crate::support::{check, decode, ns};

// ---------------------------------------------------------------------------------------------
// Drafts 20, 21 and 22: vectors from the bytes aiomoqt 0.13.3's encoders and moq-net 0.3.18's
// unit tests produce (see docs/interop.md), not from our encoder.

const D20: Version = Version::Draft20;
const D21: Version = Version::Draft21;
const D22: Version = Version::Draft22;

fn track20() -> FullTrackName {
    FullTrackName::new(ns(&["ns"]), "t").unwrap()
}

/// aiomoqt's live SUBSCRIBE: FORWARD 1 and LOCATION_FILTER Next Object, which is `02 00 00`
/// (two fields, both 0) in draft-20 and type 0x05 in draft-22.
#[test]
fn subscribe_next_object() {
    let msg = Subscribe {
        request_id: 2,
        track: track20(),
        params: Parameters {
            forward: Some(true),
            location_filter: Some(LocationFilter::LargestObject),
            ..Default::default()
        },
    };
    let d20 = [
        0x03, 0x00, 0x0e, 0x02, 0x01, 0x02, b'n', b's', 0x01, b't', 0x02, 0x10, 0x01, 0x11, 0x02,
        0x00, 0x00,
    ];
    check(&d20, msg.clone(), D20);
    check(&d20, msg.clone(), D21);
    let d22 = [
        0x03, 0x00, 0x0c, 0x02, 0x01, 0x02, b'n', b's', 0x01, b't', 0x02, 0x10, 0x01, 0x11, 0x05,
    ];
    check(&d22, msg, D22);
}

/// aiomoqt's "join" at draft-20/22: one SUBSCRIBE with LOCATION_FILTER Next Object and
/// FILL_PARAMETERS { LOCATION_FILTER relative 2 } (Length, then a counted parameter block).
#[test]
fn subscribe_with_fill() {
    let msg = Subscribe {
        request_id: 6,
        track: track20(),
        params: Parameters {
            location_filter: Some(LocationFilter::LargestObject),
            fill: Some(Box::new(Parameters {
                location_filter: Some(LocationFilter::RelativeGroups(2)),
                ..Default::default()
            })),
            ..Default::default()
        },
    };
    let d20 = [
        0x03, 0x00, 0x12, 0x06, 0x01, 0x02, b'n', b's', 0x01, b't', 0x02, 0x21, 0x02, 0x00, 0x00,
        0x02, 0x04, 0x01, 0x21, 0x01, 0x02,
    ];
    check(&d20, msg.clone(), D20);
    let d22 = [
        0x03, 0x00, 0x10, 0x06, 0x01, 0x02, b'n', b's', 0x01, b't', 0x02, 0x21, 0x05, 0x02, 0x04,
        0x01, 0x21, 0x01, 0x02,
    ];
    check(&d22, msg, D22);
}

/// moq-net's live join: FILL_PARAMETERS { LOCATION_FILTER relative 1 } is `04 01 21 01 01` in
/// both drafts; a parameter not allowed inside FILL_PARAMETERS (FORWARD) is a violation.
#[test]
fn fill_parameters_scope() {
    let mut p = Vec::new();
    let params = Parameters {
        fill: Some(Box::new(Parameters {
            location_filter: Some(LocationFilter::RelativeGroups(1)),
            ..Default::default()
        })),
        ..Default::default()
    };
    params.encode(&mut p, ParamContext::Subscribe, D20).unwrap();
    assert_eq!(p, [0x01, 0x23, 0x04, 0x01, 0x21, 0x01, 0x01]);
    // FORWARD (0x10) inside FILL_PARAMETERS.
    let bad = [0x01u8, 0x23, 0x03, 0x01, 0x10, 0x01];
    assert!(matches!(
        Parameters::decode(&mut &bad[..], ParamContext::Subscribe, D20),
        Err(DecodeError::ParameterNotAllowed { .. })
    ));
    // FILL_PARAMETERS does not exist before draft-20.
    assert!(Parameters::decode(&mut &p[..], ParamContext::Subscribe, Version::Draft19).is_err());
    // It is not subscription state.
    let mut state = Parameters::default();
    state.update_with(&params);
    assert!(state.fill.is_none());
}

/// aiomoqt's interop "fetch" of the whole group 5: no Fetch Type, the range in LOCATION_FILTER
/// (three fields: {5, 0} to the end of group 5). The same bytes in draft-22 (type 0x03).
#[test]
fn fetch_whole_group() {
    let msg = Fetch {
        request_id: 8,
        fetch_type: FetchType::Standalone {
            track: track20(),
            start: Location::new(5, 0),
            end: Location::new(5, 0),
        },
        params: Parameters::default(),
    };
    let bytes = [
        0x16, 0x00, 0x0d, 0x08, 0x01, 0x02, b'n', b's', 0x01, b't', 0x01, 0x21, 0x03, 0x05, 0x00,
        0x00,
    ];
    check(&bytes, msg.clone(), D20);
    check(&bytes, msg, D22);
}

/// aiomoqt's FETCH {5, 2} to {6, 3} inclusive, priority 128, ascending.
#[test]
fn fetch_to_an_object() {
    let msg = Fetch {
        request_id: 8,
        fetch_type: FetchType::Standalone {
            track: track20(),
            start: Location::new(5, 2),
            end: Location::new(6, 4),
        },
        params: Parameters {
            subscriber_priority: Some(128),
            group_order: Some(GroupOrder::Ascending),
            ..Default::default()
        },
    };
    let bytes = [
        0x16, 0x00, 0x12, 0x08, 0x01, 0x02, b'n', b's', 0x01, b't', 0x03, 0x20, 0x80, 0x01, 0x04,
        0x05, 0x02, 0x01, 0x03, 0x01, 0x01,
    ];
    check(&bytes, msg.clone(), D20);
    check(&bytes, msg, D22);
}

/// No filter: everything from {0, 0} up to the Largest Object; a relative start stays relative
/// for the publisher to resolve; Joining FETCH cannot be sent.
#[test]
fn fetch_without_range_and_relative() {
    let open = Fetch {
        request_id: 2,
        fetch_type: FetchType::Standalone {
            track: track20(),
            start: Location::new(0, 0),
            end: OPEN_END,
        },
        params: Parameters::default(),
    };
    let bytes = [
        0x16, 0x00, 0x08, 0x02, 0x01, 0x02, b'n', b's', 0x01, b't', 0x00,
    ];
    check(&bytes, open, D20);
    let relative = Fetch {
        request_id: 2,
        fetch_type: FetchType::Relative {
            track: track20(),
            filter: LocationFilter::RelativeGroups(1),
        },
        params: Parameters::default(),
    };
    let bytes = [
        0x16, 0x00, 0x0b, 0x02, 0x01, 0x02, b'n', b's', 0x01, b't', 0x01, 0x21, 0x01, 0x01,
    ];
    check(&bytes, relative, D20);
    let joining = Fetch {
        request_id: 2,
        fetch_type: FetchType::AbsoluteJoining {
            joining_request_id: 0,
            joining_start: 1,
        },
        params: Parameters::default(),
    };
    assert!(Message::from(joining).encode_to_vec(D20).is_err());
}

/// FETCH_OK's End Location is inclusive from draft-20: {5, 4} on the wire is our exclusive
/// {5, 5}.
#[test]
fn fetch_ok_end_is_inclusive() {
    let msg = FetchOk {
        end_of_track: false,
        end_location: Location::new(5, 5),
        ..Default::default()
    };
    check(&[0x18, 0x00, 0x04, 0x00, 0x05, 0x04, 0x00], msg, D20);
}

/// PUBLISH_STATE_NOTIFY (0x22) with LARGEST_OBJECT {5, 4} and FORWARD 0; it does not exist in
/// draft-19, and only its three parameters may appear in it.
#[test]
fn publish_state_notify() {
    let msg = PublishStateNotify {
        params: Parameters {
            largest_object: Some(Location::new(5, 4)),
            forward: Some(false),
            ..Default::default()
        },
    };
    let bytes = [0x22, 0x00, 0x06, 0x02, 0x09, 0x05, 0x04, 0x07, 0x00];
    check(&bytes, msg.clone(), D20);
    check(&bytes, msg, D22);
    assert!(matches!(
        decode(&bytes, Version::Draft19),
        Err(DecodeError::UnknownMessageType(0x22))
    ));
    // EXPIRES (0x08) is not allowed in it.
    let bad = [0x22, 0x00, 0x03, 0x01, 0x08, 0x05];
    assert!(matches!(
        decode(&bad, D20),
        Err(DecodeError::ParameterNotAllowed { .. })
    ));
}

/// The draft-20 parameter table: subscription parameters move from PUBLISH_OK to PUBLISH, and
/// INCLUDE_PROPERTIES exists (0 or 1).
#[test]
fn parameter_table_moves() {
    let forward = Parameters {
        forward: Some(true),
        ..Default::default()
    };
    let mut buf = Vec::new();
    assert!(
        forward
            .encode(&mut buf, ParamContext::PublishOk, D20)
            .is_err()
    );
    assert!(
        forward
            .encode(&mut buf, ParamContext::PublishOk, Version::Draft19)
            .is_ok()
    );
    let include = Parameters {
        include_properties: Some(false),
        ..Default::default()
    };
    let mut buf = Vec::new();
    include
        .encode(&mut buf, ParamContext::Subscribe, D20)
        .unwrap();
    assert_eq!(buf, [0x01, 0x35, 0x00]);
    assert!(
        Parameters::decode(&mut &[0x01u8, 0x35, 0x02][..], ParamContext::Subscribe, D20).is_err()
    );
    // FORWARD in a REQUEST_UPDATE of SUBSCRIBE_TRACKS (draft-21 §9.20.19).
    let update = RequestUpdate {
        request_id: 4,
        params: forward.clone(),
    };
    assert!(Message::from(update).encode_to_vec(D20).is_ok());
    assert!(
        forward
            .validate(ParamContext::UpdateSubscribeTracks, D20)
            .is_ok()
    );
    assert!(
        forward
            .validate(ParamContext::UpdateSubscribeTracks, Version::Draft19)
            .is_err()
    );
}

/// End of Timed-Out Range (0x20C, `82 0c`) exists from draft-20.
#[test]
fn timed_out_range() {
    let mut w = FetchWriter::new(GroupOrder::Ascending, D20);
    let mut buf = Vec::new();
    w.encode_end_of_range(&mut buf, RangeEnd::TimedOut, Location::new(5, 9))
        .unwrap();
    assert_eq!(buf, [0x82, 0x0c, 0x05, 0x09]);
    let mut r = FetchReader::new(GroupOrder::Ascending, D20);
    let mut b = bytes::BytesMut::from(&buf[..]);
    assert_eq!(
        r.next(&mut b).unwrap(),
        Some(FetchEvent::EndOfRange {
            kind: RangeEnd::TimedOut,
            location: Location::new(5, 9)
        })
    );
    let mut r = FetchReader::new(GroupOrder::Ascending, Version::Draft19);
    let mut b = bytes::BytesMut::from(&buf[..]);
    assert!(r.next(&mut b).is_err());
    let mut w = FetchWriter::new(GroupOrder::Ascending, Version::Draft19);
    assert!(
        w.encode_end_of_range(&mut Vec::new(), RangeEnd::TimedOut, Location::new(5, 9))
            .is_err()
    );
}

/// TRACK_NAMESPACE_PREFIX (0x34) in a REQUEST_UPDATE: bare, as the text encodes it (and as we
/// send it); aiomoqt 0.13.3 length-prefixes it at draft-20, which is taken too.
#[test]
fn track_namespace_prefix_both_ways() {
    let msg = RequestUpdate {
        request_id: 4,
        params: Parameters {
            track_namespace_prefix: Some(ns(&["a", "b"])),
            ..Default::default()
        },
    };
    let bare = [
        0x02, 0x00, 0x08, 0x04, 0x01, 0x34, 0x02, 0x01, b'a', 0x01, b'b',
    ];
    check(&bare, msg.clone(), D20);
    check(&bare, msg.clone(), D22);
    let aiomoqt_d20 = [
        0x02, 0x00, 0x09, 0x04, 0x01, 0x34, 0x05, 0x02, 0x01, b'a', 0x01, b'b',
    ];
    assert_eq!(decode(&aiomoqt_d20, D20).unwrap(), Message::from(msg));
}

/// PUBLISH_DONE's Stream Count may be 2^64-1 ("unknown" from draft-20, draft-21 §9.9): nine
/// bytes of vi64.
#[test]
fn publish_done_unknown_stream_count() {
    let msg = moq_core::message::PublishDone {
        status: moq_core::codes::PublishDoneCode::TRACK_ENDED,
        stream_count: moq_core::message::PublishDone::unknown_stream_count(D20),
        reason: String::new(),
    };
    let bytes = [
        0x0b, 0x00, 0x0b, 0x02, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00,
    ];
    check(&bytes, msg.clone(), D20);
    assert!(!msg.stream_count_known());
}
