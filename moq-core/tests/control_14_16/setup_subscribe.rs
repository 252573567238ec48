//! CLIENT_SETUP / SERVER_SETUP (draft-14 §9.3, draft-16 §9.3) and SUBSCRIBE, SUBSCRIBE_OK,
//! SUBSCRIBE_ERROR, REQUEST_ERROR (draft-14 §9.7-§9.9, draft-16 §9.8-§9.10): byte vectors.

use bytes::Bytes;
use moq_core::codes::RequestErrorCode;
use moq_core::message::{
    ClientSetup, Envelope, Message, Parameters, RequestError, RequestType, ServerSetup,
    SetupOptions, SubscribeOk,
};
use moq_core::{KeyValuePair, KvpValue, Location, property};

use crate::support::{D14, D15, D16, answer, check, hex, props, subscribe, to};

// ---------------------------------------------------------------------------------------------
// CLIENT_SETUP / SERVER_SETUP (draft-14 §9.3, draft-16 §9.3)

/// draft-14: Number of Supported Versions 1, 0xff00000E, 2 parameters: PATH "/moq" and
/// MAX_REQUEST_ID 100 (absolute types). aiomoqt 0.13 writes the same bytes.
#[test]
fn client_setup_draft14() {
    let bytes = hex("20 0013 01 c0000000ff00000e 02 01 04 2f6d6f71 02 4064");
    let msg = ClientSetup {
        versions: vec![0xff00_000e],
        max_request_id: Some(100),
        options: SetupOptions {
            path: Some(Bytes::from_static(b"/moq")),
            ..Default::default()
        },
    };
    check(&bytes, msg, &Envelope::default(), D14, "CLIENT_SETUP");
}

/// draft-16: no versions; PATH, MAX_REQUEST_ID (delta 1) and MOQT_IMPLEMENTATION 0x07 (delta
/// 5). aiomoqt 0.13 writes the same bytes.
#[test]
fn client_setup_draft16() {
    let bytes = hex("20 000d 03 01 04 2f6d6f71 01 4064 05 01 78");
    let msg = ClientSetup {
        versions: vec![],
        max_request_id: Some(100),
        options: SetupOptions {
            path: Some(Bytes::from_static(b"/moq")),
            implementation: Some("x".into()),
            ..Default::default()
        },
    };
    check(&bytes, msg, &Envelope::default(), D16, "CLIENT_SETUP");
}

/// draft-14: Selected Version 0xff00000E, MAX_REQUEST_ID 100 (aiomoqt's bytes).
#[test]
fn server_setup_draft14() {
    let bytes = hex("21 000c c0000000ff00000e 01 02 4064");
    let msg = ServerSetup {
        version: Some(0xff00_000e),
        max_request_id: Some(100),
        options: SetupOptions::default(),
    };
    check(&bytes, msg, &Envelope::default(), D14, "SERVER_SETUP");
}

/// draft-16: no Selected Version; MAX_AUTH_TOKEN_CACHE_SIZE 0x04 = 16 and an unknown (GREASE)
/// parameter 0x9D, ignored and kept.
#[test]
fn server_setup_draft16() {
    let bytes = hex("21 0008 02 04 10 4099 02 6767");
    let msg = ServerSetup {
        version: None,
        max_request_id: None,
        options: SetupOptions {
            max_auth_token_cache_size: Some(16),
            unknown: vec![KeyValuePair {
                key: 0x9D,
                value: KvpValue::Bytes(Bytes::from_static(b"gg")),
            }],
            ..Default::default()
        },
    };
    check(&bytes, msg, &Envelope::default(), D16, "SERVER_SETUP");
}

/// draft-14 §9.3.2.6 gives MOQT_IMPLEMENTATION AUTHORITY's number 0x05: in SERVER_SETUP (the
/// server never sends AUTHORITY) it is read as the implementation; 0x07 is read too.
#[test]
fn draft14_implementation_number() {
    let server = hex("21 000d c0000000ff00000e 01 05 02 6d71");
    let (msg, _) = Message::decode_addressed(&mut &server[..], D14).unwrap();
    let Message::ServerSetup(s) = msg else {
        panic!("{msg:?}")
    };
    assert_eq!(s.options.implementation.as_deref(), Some("mq"));
    // In CLIENT_SETUP 0x05 is AUTHORITY.
    let client = hex("20 000e 01 c0000000ff00000e 01 05 02 6d71");
    let (msg, _) = Message::decode_addressed(&mut &client[..], D14).unwrap();
    let Message::ClientSetup(c) = msg else {
        panic!("{msg:?}")
    };
    assert_eq!(c.options.authority.as_deref(), Some(&b"mq"[..]));
    // Encoding an AUTHORITY in a draft-14 SERVER_SETUP would be read back as the
    // implementation.
    let bad = ServerSetup {
        options: SetupOptions {
            authority: Some(Bytes::from_static(b"a")),
            ..Default::default()
        },
        ..Default::default()
    };
    assert!(Message::from(bad).encode_to_vec(D14).is_err());
}

/// draft-14: Subscriber Priority 7, Group Order 2, Forward 1, AbsoluteRange {5, 1} to End
/// Group 9 as fields; DELIVERY_TIMEOUT 500 the only parameter (aiomoqt's bytes).
#[test]
fn subscribe_draft14() {
    let bytes = hex("03 0012 02 01 02 6e73 01 74 07 02 01 04 05 01 09 01 02 41f4");
    check(&bytes, subscribe(), &Envelope::default(), D14, "SUBSCRIBE");
}

/// draft-16: the same as parameters, delta-typed: DELIVERY_TIMEOUT 0x02, FORWARD 0x10,
/// SUBSCRIBER_PRIORITY 0x20, SUBSCRIPTION_FILTER 0x21 (length 4, End Group 9 absolute),
/// GROUP_ORDER 0x22 (aiomoqt's bytes).
#[test]
fn subscribe_draft16() {
    let bytes = hex("03 0017 02 01 02 6e73 01 74 05 02 41f4 0e 01 10 07 01 04 04050109 01 02");
    check(&bytes, subscribe(), &Envelope::default(), D16, "SUBSCRIBE");
}

/// draft-14 SUBSCRIBE_OK: Request ID 2, Track Alias 3, Expires 1000, Group Order 2, Content
/// Exists 1, Largest {5, 6}, no parameters (aiomoqt's bytes).
#[test]
fn subscribe_ok_draft14() {
    let bytes = hex("04 0009 02 03 43e8 02 01 05 06 00");
    let msg = SubscribeOk {
        track_alias: 3,
        params: Parameters {
            expires: Some(1000),
            largest_object: Some(Location::new(5, 6)),
            ..Default::default()
        },
        track_properties: props(&[(property::DEFAULT_PUBLISHER_GROUP_ORDER, 2)]),
    };
    check(&bytes, msg, &to(2), D14, "SUBSCRIBE_OK");
}

/// draft-16 SUBSCRIBE_OK: EXPIRES 0x08 and LARGEST_OBJECT 0x09 (length-prefixed Location) as
/// parameters, then Track Extensions: DEFAULT_PUBLISHER_GROUP_ORDER 0x22 = 2 (aiomoqt's bytes).
#[test]
fn subscribe_ok_draft16() {
    let bytes = hex("04 000c 02 03 02 08 43e8 01 02 0506 22 02");
    let msg = SubscribeOk {
        track_alias: 3,
        params: Parameters {
            expires: Some(1000),
            largest_object: Some(Location::new(5, 6)),
            ..Default::default()
        },
        track_properties: props(&[(property::DEFAULT_PUBLISHER_GROUP_ORDER, 2)]),
    };
    check(&bytes, msg, &to(2), D16, "SUBSCRIBE_OK");
}

/// draft-15 SUBSCRIBE_OK: the track's values are parameters (PUBLISHER_PRIORITY 0x0E,
/// GROUP_ORDER 0x22; absolute types), kept as Track Properties.
#[test]
fn subscribe_ok_draft15() {
    let bytes = hex("04 0009 02 03 03 08 00 0e 05 22 01");
    let msg = SubscribeOk {
        track_alias: 3,
        params: Parameters {
            expires: Some(0),
            ..Default::default()
        },
        track_properties: props(&[
            (property::DEFAULT_PUBLISHER_PRIORITY, 5),
            (property::DEFAULT_PUBLISHER_GROUP_ORDER, 1),
        ]),
    };
    check(&bytes, msg, &to(2), D15, "SUBSCRIBE_OK");
}

/// draft-14 SUBSCRIBE_ERROR with TRACK_DOES_NOT_EXIST (0x4): the unified DOES_NOT_EXIST
/// (aiomoqt's bytes).
#[test]
fn subscribe_error_draft14() {
    let bytes = hex("05 0007 02 04 04 6e6f7065");
    let msg = RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "nope");
    check(
        &bytes,
        msg,
        &answer(2, RequestType::Subscribe),
        D14,
        "SUBSCRIBE_ERROR",
    );
    // The same code in a FETCH_ERROR, PUBLISH_ERROR, SUBSCRIBE_NAMESPACE_ERROR.
    let fetch = hex("19 0003 02 05 00");
    let (m, _) = Message::decode_addressed(&mut &fetch[..], D14).unwrap();
    assert_eq!(
        m,
        RequestError::new(RequestErrorCode::INVALID_RANGE, "").into()
    );
    let publish = hex("1f 0003 02 04 00");
    let (m, _) = Message::decode_addressed(&mut &publish[..], D14).unwrap();
    assert_eq!(
        m,
        RequestError::new(RequestErrorCode::UNINTERESTED, "").into()
    );
    let sub_ns = hex("13 0003 02 05 00");
    let (m, _) = Message::decode_addressed(&mut &sub_ns[..], D14).unwrap();
    assert_eq!(
        m,
        RequestError::new(RequestErrorCode::PREFIX_OVERLAP, "").into()
    );
    assert_eq!(
        Message::name_of(0x13, D14),
        Some("SUBSCRIBE_NAMESPACE_ERROR")
    );
}

/// draft-16 REQUEST_ERROR: INVALID_RANGE, Retry Interval 1001, reason "r" (aiomoqt's bytes).
#[test]
fn request_error_draft16() {
    let bytes = hex("05 0006 08 11 43e9 01 72");
    let msg = RequestError {
        code: RequestErrorCode::INVALID_RANGE,
        retry_interval: 1001,
        reason: "r".into(),
        redirect: None,
    };
    check(&bytes, msg.clone(), &to(8), D16, "REQUEST_ERROR");
    // draft-15 has no Retry Interval: it is not sent, and reads back as 0.
    let d15 = msg.clone().into();
    let bytes15 = Message::encode_addressed_to_vec(&d15, &to(8), D15).unwrap();
    assert_eq!(bytes15, hex("05 0004 08 11 01 72"));
    let (back, _) = Message::decode_addressed(&mut &bytes15[..], D15).unwrap();
    assert_eq!(
        back,
        RequestError {
            retry_interval: 0,
            ..msg
        }
        .into()
    );
}
