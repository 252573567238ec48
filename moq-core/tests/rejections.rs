//! One negative test per rejection rule of draft-19 (and draft-18 where it differs): each feeds
//! hand-built bytes and asserts the exact `DecodeError` and the session close code (or, for Range
//! Filters, the INVALID_FILTER request code) it maps to.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use bytes::{Bytes, BytesMut};

use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::coding::Vi64;
use moq_core::data::{
    Datagram, FetchHeader, FetchReader, PADDING_DATAGRAM_TYPE, PADDING_STREAM_TYPE, StreamType,
    SubgroupHeader, SubgroupId, SubgroupReader,
};
use moq_core::message::{Message, MessageReader, ParamContext, RequestOk, peek_request_id};
use moq_core::{DecodeError, GroupOrder, Properties, Version};

const D18: Version = Version::Draft18;
const D19: Version = Version::Draft19;
const BOTH: [Version; 2] = [D18, D19];
const VIOLATION: SessionErrorCode = SessionErrorCode::PROTOCOL_VIOLATION;

/// A vi64.
fn vi(x: u64) -> Vec<u8> {
    let mut out = Vec::new();
    Vi64::encode(x, &mut out);
    out
}

/// A framed control message: type, 16-bit length, body.
fn frame(ty: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vi(ty);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn decode(bytes: &[u8], v: Version) -> Result<Message, DecodeError> {
    let mut cur = bytes;
    Message::decode(&mut cur, v)
}

/// The message is rejected with exactly `want`, which closes the session with `code`.
fn rejects(bytes: &[u8], v: Version, want: DecodeError, code: SessionErrorCode) {
    let err = decode(bytes, v).unwrap_err();
    assert_eq!(err, want, "under {v}");
    assert_eq!(err.session_code(), code, "{err}");
    if !matches!(want, DecodeError::InvalidFilter(_)) {
        assert_eq!(err.request_code(), None, "{err}");
    }
    // A stream reader reports the same error once the frame is complete.
    let mut r = MessageReader::new(v);
    r.push(bytes);
    assert_eq!(r.next_message(), Err(want));
}

/// The frame is rejected with INVALID_FILTER: the request fails, the session stays.
fn rejects_filter(bytes: &[u8], want: &'static str) {
    let err = decode(bytes, D19).unwrap_err();
    assert_eq!(err, DecodeError::InvalidFilter(want));
    assert_eq!(err.request_code(), Some(RequestErrorCode::INVALID_FILTER));
    assert_eq!(err.request_code().unwrap().value(), 0x36);
    // The request can still be answered: its Request ID is readable.
    assert_eq!(peek_request_id(bytes, D19), Some(9));
}

/// SUBSCRIBE (Request ID 9, empty namespace and name) carrying the given parameter bytes.
fn subscribe_with(count: u8, params: &[u8]) -> Vec<u8> {
    let mut body = vec![0x09, 0x00, 0x00, count];
    body.extend_from_slice(params);
    frame(0x03, &body)
}

const NAMESPACE: u64 = 0x08;
const SUBSCRIBE: u64 = 0x03;

// ---------------------------------------------------------------------------------------------
// Names (§2.4.1)

#[test]
fn namespace_with_33_fields() {
    let mut body = vec![0x21];
    for _ in 0..33 {
        body.extend_from_slice(&[0x01, b'a']);
    }
    for v in BOTH {
        rejects(
            &frame(NAMESPACE, &body),
            v,
            DecodeError::TooManyNamespaceFields(33),
            VIOLATION,
        );
        // The same in a SUBSCRIBE_NAMESPACE prefix.
        let mut sn = vec![0x00];
        sn.extend_from_slice(&body);
        sn.push(0x00);
        rejects(
            &frame(0x50, &sn),
            v,
            DecodeError::TooManyNamespaceFields(33),
            VIOLATION,
        );
    }
    // 32 fields is fine.
    let mut ok = vec![0x20];
    for _ in 0..32 {
        ok.extend_from_slice(&[0x01, b'a']);
    }
    assert!(decode(&frame(NAMESPACE, &ok), D19).is_ok());
}

#[test]
fn namespace_with_empty_field() {
    for v in BOTH {
        rejects(
            &frame(NAMESPACE, &[0x02, 0x01, b'a', 0x00]),
            v,
            DecodeError::EmptyNamespaceField(1),
            VIOLATION,
        );
    }
}

#[test]
fn namespace_longer_than_4096() {
    let ns = |a: usize, b: usize| {
        let mut body = vec![0x02];
        body.extend(vi(a as u64));
        body.extend(std::iter::repeat_n(b'a', a));
        body.extend(vi(b as u64));
        body.extend(std::iter::repeat_n(b'b', b));
        body
    };
    for v in BOTH {
        rejects(
            &frame(NAMESPACE, &ns(2048, 2049)),
            v,
            DecodeError::NameTooLong {
                what: "track namespace",
                len: 4097,
            },
            VIOLATION,
        );
        assert!(decode(&frame(NAMESPACE, &ns(2048, 2048)), v).is_ok());
    }
}

#[test]
fn full_track_name_longer_than_4096() {
    let subscribe = |name: usize| {
        let mut body = vec![0x00, 0x01];
        body.extend(vi(4000));
        body.extend(std::iter::repeat_n(b'n', 4000));
        body.extend(vi(name as u64));
        body.extend(std::iter::repeat_n(b't', name));
        body.push(0x00);
        frame(SUBSCRIBE, &body)
    };
    for v in BOTH {
        rejects(
            &subscribe(97),
            v,
            DecodeError::NameTooLong {
                what: "full track name",
                len: 4097,
            },
            VIOLATION,
        );
        assert!(decode(&subscribe(96), v).is_ok());
    }
}

// ---------------------------------------------------------------------------------------------
// Framing (§10)

#[test]
fn unknown_message_type() {
    // 0x1E was PUBLISH_OK; 0x01, 0x20, 0x21, 0x40, 0x41 were old setup messages; 0x11 was
    // SUBSCRIBE_NAMESPACE before draft-18; 0x22 is PUBLISH_STATE_NOTIFY after draft-19.
    for ty in [
        0x1Eu64,
        0x01,
        0x20,
        0x21,
        0x40,
        0x41,
        0x11,
        0x22,
        0x2F01,
        u64::MAX,
    ] {
        for v in BOTH {
            rejects(
                &frame(ty, &[]),
                v,
                DecodeError::UnknownMessageType(ty),
                VIOLATION,
            );
            // A stream reader reports it as soon as the type is readable.
            let mut r = MessageReader::new(v);
            r.push(&vi(ty));
            assert_eq!(r.next_message(), Err(DecodeError::UnknownMessageType(ty)));
        }
    }
}

#[test]
fn body_shorter_than_fields() {
    // NAMESPACE whose Length (4) ends inside a 5-byte field.
    let bytes = [0x08, 0x00, 0x04, 0x01, 0x05, b'a', b'b'];
    for v in BOTH {
        rejects(&bytes, v, DecodeError::BodyTooShort("NAMESPACE"), VIOLATION);
    }
    // SUBSCRIBE that stops before its parameters.
    rejects(
        &frame(SUBSCRIBE, &[0x00, 0x00, 0x00]),
        D19,
        DecodeError::BodyTooShort("SUBSCRIBE"),
        VIOLATION,
    );
}

#[test]
fn trailing_bytes_after_last_field() {
    let bytes = [0x08, 0x00, 0x04, 0x01, 0x01, b'a', 0xFF];
    for v in BOTH {
        rejects(
            &bytes,
            v,
            DecodeError::TrailingBytes {
                message: "NAMESPACE",
                extra: 1,
            },
            VIOLATION,
        );
    }
    rejects(
        &subscribe_with(0, &[0x00, 0x00]),
        D19,
        DecodeError::TrailingBytes {
            message: "SUBSCRIBE",
            extra: 2,
        },
        VIOLATION,
    );
}

// ---------------------------------------------------------------------------------------------
// Message Parameters (§10.2)

#[test]
fn unknown_parameter() {
    for v in BOTH {
        rejects(
            &subscribe_with(1, &[0x05, 0x00]),
            v,
            DecodeError::UnknownParameter(0x05),
            VIOLATION,
        );
        // INCLUDE_PROPERTIES (0x35) only exists after draft-19.
        rejects(
            &subscribe_with(1, &[0x35, 0x00]),
            v,
            DecodeError::UnknownParameter(0x35),
            VIOLATION,
        );
    }
}

#[test]
fn parameter_in_wrong_message() {
    for v in BOTH {
        // FILL_TIMEOUT is for FETCH only.
        rejects(
            &subscribe_with(1, &[0x0A, 0x00]),
            v,
            DecodeError::ParameterNotAllowed {
                param: 0x0A,
                message: "SUBSCRIBE",
            },
            VIOLATION,
        );
        // RENDEZVOUS_TIMEOUT is for SUBSCRIBE only. FETCH: Request ID 0, Relative Joining.
        rejects(
            &frame(0x16, &[0x00, 0x02, 0x00, 0x00, 0x01, 0x04, 0x00]),
            v,
            DecodeError::ParameterNotAllowed {
                param: 0x04,
                message: "FETCH",
            },
            VIOLATION,
        );
    }
    // GROUP_ORDER: in SUBSCRIBE_TRACKS only from draft-19, in PUBLISH_OK only in draft-18.
    let tracks = frame(0x51, &[0x00, 0x00, 0x01, 0x22, 0x01]);
    rejects(
        &tracks,
        D18,
        DecodeError::ParameterNotAllowed {
            param: 0x22,
            message: "SUBSCRIBE_TRACKS",
        },
        VIOLATION,
    );
    assert!(decode(&tracks, D19).is_ok());
    let ok = frame(0x07, &[0x01, 0x22, 0x01]);
    rejects(
        &ok,
        D19,
        DecodeError::ParameterNotAllowed {
            param: 0x22,
            message: "REQUEST_OK",
        },
        VIOLATION,
    );
    let Message::RequestOk(ok) = decode(&ok, D18).unwrap() else {
        panic!("not REQUEST_OK");
    };
    ok.validate(ParamContext::PublishOk, D18).unwrap();
}

#[test]
fn duplicate_non_repeatable_parameter() {
    for v in BOTH {
        rejects(
            &subscribe_with(2, &[0x10, 0x01, 0x00, 0x01]),
            v,
            DecodeError::DuplicateParameter(0x10),
            VIOLATION,
        );
        // AUTHORIZATION_TOKEN may repeat.
        let tokens = [0x03, 0x02, 0x02, 0x01, 0x00, 0x02, 0x02, 0x02];
        assert!(decode(&subscribe_with(2, &tokens), v).is_ok());
        // A known Setup Option may not repeat either (PATH twice).
        rejects(
            &frame(0x2F00, &[0x01, 0x01, b'/', 0x00, 0x01, b'/']),
            v,
            DecodeError::DuplicateParameter(0x01),
            VIOLATION,
        );
    }
}

#[test]
fn forward_two() {
    for v in BOTH {
        rejects(
            &subscribe_with(1, &[0x10, 0x02]),
            v,
            DecodeError::InvalidValue {
                field: "FORWARD",
                value: 2,
            },
            VIOLATION,
        );
    }
}

#[test]
fn group_order_three() {
    for v in BOTH {
        for bad in [0u8, 3, 0xFF] {
            rejects(
                &subscribe_with(1, &[0x22, bad]),
                v,
                DecodeError::InvalidValue {
                    field: "group order",
                    value: bad.into(),
                },
                VIOLATION,
            );
        }
    }
}

#[test]
fn location_filter_type_five() {
    for v in BOTH {
        rejects(
            &subscribe_with(1, &[0x21, 0x01, 0x05]),
            v,
            DecodeError::InvalidValue {
                field: "location filter type",
                value: 5,
            },
            VIOLATION,
        );
    }
}

#[test]
fn absolute_range_end_group_overflow() {
    let filter = |delta: u64| {
        let mut body = vec![0x04];
        body.extend(vi(u64::MAX)); // Start Group
        body.push(0x00); // Start Object
        body.extend(vi(delta)); // End Group Delta
        let mut p = vec![0x21, u8::try_from(body.len()).unwrap()];
        p.extend(body);
        subscribe_with(1, &p)
    };
    for v in BOTH {
        rejects(
            &filter(1),
            v,
            DecodeError::Overflow("location filter end group"),
            VIOLATION,
        );
        assert!(decode(&filter(0), v).is_ok());
    }
}

#[test]
fn parameter_type_overflow() {
    // FORWARD (0x10), then a Type Delta of 2^64-1.
    let mut p = vec![0x10, 0x01];
    p.extend(vi(u64::MAX));
    p.push(0x00);
    for v in BOTH {
        rejects(
            &subscribe_with(2, &p),
            v,
            DecodeError::TypeOverflow,
            VIOLATION,
        );
    }
}

#[test]
fn malformed_authorization_token() {
    let kvf = SessionErrorCode::KEY_VALUE_FORMATTING_ERROR;
    for v in BOTH {
        // Alias Type 9 does not exist.
        rejects(
            &subscribe_with(1, &[0x03, 0x01, 0x09]),
            v,
            DecodeError::KeyValueFormatting("authorization token: unknown alias type"),
            kvf,
        );
        // DELETE with a byte after the alias.
        rejects(
            &subscribe_with(1, &[0x03, 0x03, 0x00, 0x05, 0xFF]),
            v,
            DecodeError::KeyValueFormatting("authorization token: trailing bytes"),
            kvf,
        );
        // USE_ALIAS without its alias.
        rejects(
            &subscribe_with(1, &[0x03, 0x01, 0x02]),
            v,
            DecodeError::KeyValueFormatting("authorization token"),
            kvf,
        );
        // The same in a SETUP option.
        rejects(
            &frame(0x2F00, &[0x03, 0x01, 0x09]),
            v,
            DecodeError::KeyValueFormatting("authorization token: unknown alias type"),
            kvf,
        );
    }
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

// ---------------------------------------------------------------------------------------------
// The allowed-message table of every Message Parameter (§10.2.x "MAY appear in", §10.19.1)

/// Every role a parameter block can have, with its name.
const CONTEXTS: [ParamContext; 20] = [
    ParamContext::Subscribe,
    ParamContext::SubscribeOk,
    ParamContext::Publish,
    ParamContext::PublishOk,
    ParamContext::Fetch,
    ParamContext::FetchOk,
    ParamContext::TrackStatus,
    ParamContext::TrackStatusOk,
    ParamContext::PublishNamespace,
    ParamContext::PublishNamespaceOk,
    ParamContext::SubscribeNamespace,
    ParamContext::SubscribeNamespaceOk,
    ParamContext::SubscribeTracks,
    ParamContext::SubscribeTracksOk,
    ParamContext::UpdateSubscription,
    ParamContext::UpdateFetch,
    ParamContext::UpdatePublishNamespace,
    ParamContext::UpdateSubscribeNamespace,
    ParamContext::UpdateSubscribeTracks,
    ParamContext::RequestUpdateOk,
];

/// A valid value of parameter `ty`, as it follows the Type on the wire.
fn param_value(ty: u64) -> Vec<u8> {
    match ty {
        0x03 => vec![0x02, 0x03, 0x00], // Token: USE_VALUE, Token Type 0, empty value
        0x09 => vec![0x01, 0x02],       // Location {1, 2}
        0x10 | 0x22 => vec![0x01],      // FORWARD 1 / GROUP_ORDER Ascending
        0x20 => vec![0x05],             // SUBSCRIBER_PRIORITY
        0x21 => vec![0x01, 0x01],       // LOCATION_FILTER: Next Group Start
        0x25..=0x27 => vec![0x02, 0x00, 0x00], // SetID 0, open range from 0
        0x28 | 0x29 => vec![0x03, 0x00, 0x02, 0x00], // SetID 0, Property Type 2, from 0
        0x34 => vec![0x01, 0x01, b'a'], // Track Namespace (a)
        _ => vec![0x05],                // varints
    }
}

/// draft-19 §10.2.1 with each parameter's "MAY appear in" (§10.2.2-§10.2.19) and §10.19.1 (a
/// parameter valid in SUBSCRIBE is valid in SUBSCRIBE_TRACKS): `param_allowed` says exactly
/// this for every parameter and role, and decoding a parameter in any other role is a
/// PROTOCOL_VIOLATION (draft-18: GROUP_ORDER in PUBLISH_OK, not SUBSCRIBE_TRACKS; no Range
/// Filters).
#[test]
fn every_parameter_is_allowed_exactly_where_the_draft_lists_it() {
    use ParamContext as C;
    let sub_like = [C::Subscribe, C::SubscribeTracks];
    let on_subscription = |more: &[C]| {
        let mut v = sub_like.to_vec();
        v.extend_from_slice(more);
        v
    };
    let all_updates = [
        C::UpdateSubscription,
        C::UpdateFetch,
        C::UpdatePublishNamespace,
        C::UpdateSubscribeNamespace,
        C::UpdateSubscribeTracks,
    ];
    let range_filter = on_subscription(&[C::Fetch, C::PublishOk, C::UpdateSubscription]);
    let table: Vec<(u64, Vec<C>)> = vec![
        (
            0x02,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        (0x03, {
            let mut v = vec![
                C::Publish,
                C::Subscribe,
                C::SubscribeNamespace,
                C::SubscribeTracks,
                C::PublishNamespace,
                C::TrackStatus,
                C::Fetch,
            ];
            v.extend(all_updates);
            v
        }),
        (0x04, on_subscription(&[])),
        (
            0x06,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        (
            0x08,
            vec![
                // Accepted in TRACK_STATUS_OK (draft-19 §10.14 reading), never sent there.
                C::TrackStatusOk,
                C::SubscribeOk,
                C::Publish,
                C::PublishOk,
                C::SubscribeNamespaceOk,
                C::SubscribeTracksOk,
                C::PublishNamespaceOk,
                C::RequestUpdateOk,
            ],
        ),
        (
            0x09,
            vec![
                C::SubscribeOk,
                C::Publish,
                C::RequestUpdateOk,
                C::TrackStatusOk,
            ],
        ),
        (0x0A, vec![C::Fetch]),
        (
            0x10,
            on_subscription(&[C::UpdateSubscription, C::Publish, C::PublishOk]),
        ),
        (
            0x20,
            on_subscription(&[
                C::Fetch,
                C::UpdateSubscription,
                C::UpdateFetch,
                C::PublishOk,
            ]),
        ),
        (
            0x21,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        // draft-19 §10.19.1: in a PUBLISH resulting from SUBSCRIBE_TRACKS (§10.2.9 omits it).
        (
            0x22,
            vec![C::Subscribe, C::SubscribeTracks, C::Fetch, C::Publish],
        ),
        (0x25, range_filter.clone()),
        (0x26, range_filter.clone()),
        (0x27, range_filter.clone()),
        (0x28, range_filter),
        (0x29, vec![C::SubscribeTracks, C::UpdateSubscribeTracks]),
        (
            0x32,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        (
            0x34,
            vec![C::UpdateSubscribeNamespace, C::UpdateSubscribeTracks],
        ),
    ];
    for v in BOTH {
        for (ty, allowed) in &table {
            let allowed: Vec<C> = match (v, *ty) {
                (D18, 0x22) => vec![C::Subscribe, C::PublishOk, C::Fetch],
                (D18, 0x25..=0x29) => vec![],
                _ => allowed.clone(),
            };
            let mut bytes = vec![0x01];
            bytes.extend(vi(*ty));
            bytes.extend(param_value(*ty));
            for ctx in CONTEXTS {
                let want = allowed.contains(&ctx);
                assert_eq!(
                    moq_core::message::param_allowed(*ty, ctx, v),
                    want,
                    "{ty:#x} in {} under {v}",
                    ctx.name()
                );
                let got = moq_core::message::Parameters::decode(&mut &bytes[..], ctx, v);
                if want {
                    assert!(got.is_ok(), "{ty:#x} in {}: {got:?}", ctx.name());
                } else if allowed.is_empty() {
                    assert_eq!(got, Err(DecodeError::UnknownParameter(*ty)));
                } else {
                    let err = got.unwrap_err();
                    assert_eq!(
                        err,
                        DecodeError::ParameterNotAllowed {
                            param: *ty,
                            message: ctx.name()
                        }
                    );
                    assert_eq!(err.session_code(), VIOLATION);
                }
            }
        }
        // Nothing else is a parameter: the gaps in the table are unknown types.
        for ty in (0u64..0x40).filter(|t| !table.iter().any(|(k, _)| k == t)) {
            assert!(
                CONTEXTS
                    .iter()
                    .all(|c| !moq_core::message::param_allowed(ty, *c, v)),
                "{ty:#x} under {v}"
            );
        }
    }
}
