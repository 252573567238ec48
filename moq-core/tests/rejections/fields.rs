//! Rejections of message fields, Key-Value-Pairs (draft-19 §1.4.3), Range Filters (§5.1.3:
//! REQUEST_ERROR INVALID_FILTER) and REQUEST_OK roles (§10.5).

use moq_core::codes::RequestErrorCode;
use moq_core::message::{Message, ParamContext, RequestOk, peek_request_id};
use moq_core::{DecodeError, Properties};

use crate::support::{BOTH, D18, D19, VIOLATION, decode, frame, rejects, subscribe_with, vi};

/// The frame is rejected with INVALID_FILTER: the request fails, the session stays.
fn rejects_filter(bytes: &[u8], want: &'static str) {
    let err = decode(bytes, D19).unwrap_err();
    assert_eq!(err, DecodeError::InvalidFilter(want));
    assert_eq!(err.request_code(), Some(RequestErrorCode::INVALID_FILTER));
    assert_eq!(err.request_code().unwrap().value(), 0x36);
    // The request can still be answered: its Request ID is readable.
    assert_eq!(peek_request_id(bytes, D19), Some(9));
}

// ---------------------------------------------------------------------------------------------
// Message fields

#[test]
fn fetch_type_four() {
    for v in BOTH {
        for ty in [0u8, 4] {
            rejects(
                &frame(0x16, &[0x00, ty, 0x00, 0x00, 0x00]),
                v,
                DecodeError::InvalidValue {
                    field: "fetch type",
                    value: ty.into(),
                },
                VIOLATION,
            );
        }
    }
}

#[test]
fn end_of_track_two() {
    for v in BOTH {
        rejects(
            &frame(0x18, &[0x02, 0x00, 0x00, 0x00]),
            v,
            DecodeError::InvalidValue {
                field: "End Of Track",
                value: 2,
            },
            VIOLATION,
        );
    }
}

#[test]
fn reason_phrase_longer_than_1024() {
    let with_reason = |ty: u64, len: usize| {
        let mut body = vec![0x00, 0x00];
        body.extend(vi(len as u64));
        body.extend(std::iter::repeat_n(b'r', len));
        frame(ty, &body)
    };
    let too_long = DecodeError::TooLong {
        field: "reason phrase",
        len: 1025,
        max: 1024,
    };
    for v in BOTH {
        // REQUEST_ERROR and PUBLISH_DONE.
        for ty in [0x05, 0x0B] {
            rejects(&with_reason(ty, 1025), v, too_long.clone(), VIOLATION);
            assert!(decode(&with_reason(ty, 1024), v).is_ok());
        }
    }
}

#[test]
fn goaway_uri_longer_than_8192() {
    let goaway = |len: usize| {
        let mut body = vi(len as u64);
        body.extend(std::iter::repeat_n(b'u', len));
        body.push(0x00);
        frame(0x10, &body)
    };
    for v in BOTH {
        rejects(
            &goaway(8193),
            v,
            DecodeError::TooLong {
                field: "new session URI",
                len: 8193,
                max: 8192,
            },
            VIOLATION,
        );
        assert!(decode(&goaway(8192), v).is_ok());
    }
    // The Connect URI of a Redirect has the same limit.
    let mut body = vec![0x34, 0x00, 0x00];
    body.extend(vi(8193));
    body.extend(std::iter::repeat_n(b'u', 8193));
    body.extend_from_slice(&[0x00, 0x00]);
    rejects(
        &frame(0x05, &body),
        D19,
        DecodeError::TooLong {
            field: "connect URI",
            len: 8193,
            max: 8192,
        },
        VIOLATION,
    );
}

// ---------------------------------------------------------------------------------------------
// Key-Value-Pairs (§1.4.3)

#[test]
fn kvp_value_longer_than_65535() {
    let want = DecodeError::TooLong {
        field: "key-value pair value",
        len: 65536,
        max: 65535,
    };
    // In SETUP (GREASE option 0x9D) and in SUBSCRIBE_OK's Track Properties.
    let mut setup = vi(0x9D);
    setup.extend(vi(65536));
    let mut ok = vec![0x00, 0x00, 0x01];
    ok.extend(vi(65536));
    for v in BOTH {
        rejects(&frame(0x2F00, &setup), v, want.clone(), VIOLATION);
        rejects(&frame(0x04, &ok), v, want.clone(), VIOLATION);
    }
}

#[test]
fn kvp_delta_type_overflow() {
    // Type 2^64-2 (even, one vi64 value), then a delta of 2.
    let mut pairs = vi(u64::MAX - 1);
    pairs.extend_from_slice(&[0x00, 0x02, 0x00]);
    let mut ok = vec![0x00, 0x00];
    ok.extend_from_slice(&pairs);
    for v in BOTH {
        rejects(
            &frame(0x2F00, &pairs),
            v,
            DecodeError::TypeOverflow,
            VIOLATION,
        );
        rejects(&frame(0x04, &ok), v, DecodeError::TypeOverflow, VIOLATION);
    }
}

// ---------------------------------------------------------------------------------------------
// Range Filters (§5.1.3): rejected with REQUEST_ERROR INVALID_FILTER, not a session close

#[test]
fn range_filter_odd_property_type() {
    // OBJECT_PROPERTY_FILTER, SetID 0, Property Type 3 (odd), range start 0.
    rejects_filter(
        &subscribe_with(1, &[0x28, 0x03, 0x00, 0x03, 0x00]),
        "property filter type is odd",
    );
}

#[test]
fn range_filter_priority_above_255() {
    // PRIORITY_FILTER, SetID 0, open range starting at 256.
    rejects_filter(
        &subscribe_with(1, &[0x27, 0x03, 0x00, 0x81, 0x00]),
        "priority above 255",
    );
    // Range 200..=256.
    rejects_filter(
        &subscribe_with(1, &[0x27, 0x04, 0x00, 0x80, 0xC8, 0x38]),
        "priority above 255",
    );
    // 200..=255 is fine.
    assert!(
        decode(
            &subscribe_with(1, &[0x27, 0x04, 0x00, 0x80, 0xC8, 0x37]),
            D19
        )
        .is_ok()
    );
}

#[test]
fn range_filter_duplicate_set_id() {
    // OBJECTID_FILTER twice with SetID 1.
    rejects_filter(
        &subscribe_with(2, &[0x26, 0x02, 0x01, 0x00, 0x00, 0x02, 0x01, 0x05]),
        "filter repeated with the same SetID",
    );
    // Different SetIDs are fine.
    assert!(
        decode(
            &subscribe_with(2, &[0x26, 0x02, 0x01, 0x00, 0x00, 0x02, 0x02, 0x05]),
            D19
        )
        .is_ok()
    );
    // OBJECT_PROPERTY_FILTER: same SetID and Property Type repeat; a different type is fine.
    rejects_filter(
        &subscribe_with(2, &[0x28, 0x02, 0x00, 0x02, 0x00, 0x02, 0x00, 0x02]),
        "filter repeated with the same SetID",
    );
    assert!(
        decode(
            &subscribe_with(2, &[0x28, 0x02, 0x00, 0x02, 0x00, 0x02, 0x00, 0x04]),
            D19
        )
        .is_ok()
    );
}

#[test]
fn range_filter_delta_overflow() {
    let mut body = vec![0x00];
    body.extend(vi(u64::MAX));
    body.push(0x01);
    let mut p = vec![0x25, u8::try_from(body.len()).unwrap()];
    p.extend(body);
    rejects_filter(&subscribe_with(1, &p), "range end overflows");
}

#[test]
fn range_filters_do_not_exist_in_draft18() {
    for ty in 0x25u8..=0x29 {
        rejects(
            &subscribe_with(1, &[ty, 0x00]),
            D18,
            DecodeError::UnknownParameter(ty.into()),
            VIOLATION,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// REQUEST_OK roles (§10.5)

#[test]
fn request_ok_with_track_properties_outside_track_status() {
    // No parameters, Track Properties {0x0E: 7}.
    let bytes = frame(0x07, &[0x00, 0x0E, 0x07]);
    for v in BOTH {
        let Message::RequestOk(ok) = decode(&bytes, v).unwrap() else {
            panic!("not REQUEST_OK");
        };
        assert_eq!(
            ok.track_properties,
            Properties::new().with_int(0x0E, 7).unwrap()
        );
        let err = ok.validate(ParamContext::PublishOk, v).unwrap_err();
        assert_eq!(
            err,
            DecodeError::ProtocolViolation(
                "REQUEST_OK carries track properties outside TRACK_STATUS_OK"
            )
        );
        assert_eq!(err.session_code(), VIOLATION);
        ok.validate(ParamContext::TrackStatusOk, v).unwrap();
    }
    // A parameter some REQUEST_OK role allows, checked against the actual role.
    let ok = RequestOk {
        params: moq_core::message::Parameters {
            largest_object: Some(moq_core::Location::new(1, 2)),
            ..Default::default()
        },
        track_properties: Properties::new(),
    };
    let err = ok
        .validate(ParamContext::PublishNamespaceOk, D19)
        .unwrap_err();
    assert_eq!(
        err,
        DecodeError::ParameterNotAllowed {
            param: 0x09,
            message: "PUBLISH_NAMESPACE_OK",
        }
    );
    assert_eq!(err.session_code(), VIOLATION);
}
