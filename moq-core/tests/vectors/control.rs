//! Draft-19 control message vectors: SETUP (§10.3), SUBSCRIBE_NAMESPACE / NAMESPACE /
//! NAMESPACE_DONE (§10.16-§10.18), REQUEST_ERROR (§10.6), GOAWAY (§10.4), SUBSCRIBE with parameters
//! (§10.7, §10.2).

use bytes::Bytes;
use moq_core::codes::RequestErrorCode;
use moq_core::message::{
    Goaway, Message, Namespace, NamespaceDone, Parameters, Redirect, RequestError, Setup,
    SetupOptions, Subscribe, SubscribeNamespace,
};
use moq_core::{
    AuthToken, DecodeError, FilterRange, FullTrackName, GroupOrder, KeyValuePair, KvpValue,
    Location, LocationFilter, RangeFilter, RangeFilterKind, RangeFilterParam, TrackNamespace,
};

use crate::support::{D18, D19, cat, check, ns};

// ---------------------------------------------------------------------------------------------
// SETUP (§10.3)

/// SETUP with PATH, AUTHORITY, MOQT_IMPLEMENTATION, MAX_REQUEST_UPDATES and the GREASE option
/// 0x9D, which is unknown and so kept in `unknown` (and written back).
fn setup_bytes() -> Vec<u8> {
    cat(&[
        &[0xAF, 0x00], // Type 0x2F00 (2-byte vi64)
        &[0x00, 0x26], // Length 38
        &[0x01, 0x04], // Delta Type 1 -> PATH (odd: bytes), Length 4
        b"/moq",
        &[0x04, 0x0B], // Delta 4 -> 5 AUTHORITY, Length 11
        b"example.com",
        &[0x02, 0x0A], // Delta 2 -> 7 MOQT_IMPLEMENTATION, Length 10
        b"moq-rs/0.1",
        &[0x01, 0x04], // Delta 1 -> 8 MAX_REQUEST_UPDATES (even: vi64) = 4
        &[0x80, 0x95], // Delta 0x95 -> 0x9D GREASE (odd), 2-byte vi64
        &[0x02],       // Length 2
        b"gg",
    ])
}

#[test]
fn setup_draft19() {
    let expected = Setup {
        options: SetupOptions {
            path: Some(Bytes::from_static(b"/moq")),
            authority: Some(Bytes::from_static(b"example.com")),
            implementation: Some("moq-rs/0.1".into()),
            max_request_updates: Some(4),
            unknown: vec![KeyValuePair {
                key: 0x9D,
                value: KvpValue::Bytes(Bytes::from_static(b"gg")),
            }],
            ..Default::default()
        },
    };
    check(&setup_bytes(), expected, D19);
}

/// draft-18 has no MAX_REQUEST_UPDATES: option 0x08 is unknown there, ignored and kept.
#[test]
fn setup_draft18_treats_max_request_updates_as_unknown() {
    let expected = Setup {
        options: SetupOptions {
            path: Some(Bytes::from_static(b"/moq")),
            authority: Some(Bytes::from_static(b"example.com")),
            implementation: Some("moq-rs/0.1".into()),
            max_request_updates: None,
            unknown: vec![
                KeyValuePair {
                    key: 0x08,
                    value: KvpValue::Int(4),
                },
                KeyValuePair {
                    key: 0x9D,
                    value: KvpValue::Bytes(Bytes::from_static(b"gg")),
                },
            ],
            ..Default::default()
        },
    };
    check(&setup_bytes(), expected, D18);
}

/// AUTHORIZATION_TOKEN (USE_VALUE), MAX_AUTH_TOKEN_CACHE_SIZE 1024 and MAX_FILTER_RANGES 16.
#[test]
fn setup_token_cache_and_filter_ranges() {
    let bytes = cat(&[
        &[0xAF, 0x00, 0x00, 0x0C],
        &[0x03, 0x05],       // Delta 3 -> AUTHORIZATION_TOKEN, Length 5
        &[0x03, 0x00],       // Alias Type USE_VALUE, Token Type 0
        b"abc",              // Token Value
        &[0x01, 0x84, 0x00], // Delta 1 -> 4 MAX_AUTH_TOKEN_CACHE_SIZE = 1024
        &[0x02, 0x10],       // Delta 2 -> 6 MAX_FILTER_RANGES = 16
    ]);
    let options = SetupOptions {
        authorization_tokens: vec![AuthToken::new("abc")],
        max_auth_token_cache_size: Some(1024),
        ..Default::default()
    };
    check(
        &bytes,
        Setup {
            options: SetupOptions {
                max_filter_ranges: Some(16),
                ..options.clone()
            },
        },
        D19,
    );
    // draft-18 has no MAX_FILTER_RANGES either.
    check(
        &bytes,
        Setup {
            options: SetupOptions {
                unknown: vec![KeyValuePair {
                    key: 0x06,
                    value: KvpValue::Int(16),
                }],
                ..options
            },
        },
        D18,
    );
}

// ---------------------------------------------------------------------------------------------
// SUBSCRIBE_NAMESPACE (§10.18), NAMESPACE (§10.16), NAMESPACE_DONE (§10.17)

#[test]
fn subscribe_namespace() {
    let bytes = cat(&[
        &[0x50],       // Type 0x50: below 128, so one byte
        &[0x00, 0x17], // Length 23
        &[0x02],       // Request ID 2
        &[0x02, 0x0B], // 2 fields; field 1 length 11
        b"example.com",
        &[0x07], // field 2 length 7
        b"meeting",
        &[0x00], // Number of Parameters 0
    ]);
    let msg = SubscribeNamespace {
        request_id: 2,
        prefix: ns(&["example.com", "meeting"]),
        params: Parameters::default(),
    };
    check(&bytes, msg.clone(), D19);
    check(&bytes, msg, D18);
}

/// A zero-field prefix (every namespace), with and without an AUTHORIZATION_TOKEN parameter.
#[test]
fn subscribe_namespace_zero_field_prefix() {
    let bare = [0x50, 0x00, 0x03, 0x06, 0x00, 0x00];
    let msg = SubscribeNamespace {
        request_id: 6,
        prefix: TrackNamespace::empty(),
        params: Parameters::default(),
    };
    check(&bare, msg, D19);

    let with_token = cat(&[
        &[0x50, 0x00, 0x0A],
        &[0x04],       // Request ID 4
        &[0x00],       // 0 fields
        &[0x01],       // 1 parameter
        &[0x03, 0x05], // Type Delta 3 -> AUTHORIZATION_TOKEN, Length 5
        &[0x03, 0x00], // USE_VALUE, Token Type 0
        b"tok",
    ]);
    let msg = SubscribeNamespace {
        request_id: 4,
        prefix: TrackNamespace::empty(),
        params: Parameters {
            authorization_tokens: vec![AuthToken::new("tok")],
            ..Default::default()
        },
    };
    for v in [D18, D19] {
        check(&with_token, msg.clone(), v);
    }
}

#[test]
fn namespace_and_namespace_done() {
    let namespace = cat(&[&[0x08, 0x00, 0x09, 0x02, 0x03], b"123", &[0x03], b"200"]);
    let done = cat(&[&[0x0E, 0x00, 0x05, 0x01, 0x03], b"123"]);
    for v in [D18, D19] {
        check(
            &namespace,
            Namespace {
                suffix: ns(&["123", "200"]),
                cluster: None,
            },
            v,
        );
        check(
            &done,
            NamespaceDone {
                suffix: ns(&["123"]),
            },
            v,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// REQUEST_ERROR (§10.6)

#[test]
fn request_error_plain() {
    let bytes = cat(&[
        &[0x05, 0x00, 0x0D],
        &[0x10],       // DOES_NOT_EXIST
        &[0x83, 0xE9], // Retry Interval 1001 (wait 1000 ms)
        &[0x09],       // Reason Phrase Length
        b"not found",
    ]);
    let msg = RequestError {
        code: RequestErrorCode::DOES_NOT_EXIST,
        retry_interval: 1001,
        reason: "not found".into(),
        redirect: None,
    };
    for v in [D18, D19] {
        check(&bytes, msg.clone(), v);
    }
}

#[test]
fn request_error_redirect() {
    let bytes = cat(&[
        &[0x05, 0x00, 0x22], // Length 34
        &[0x34],             // REDIRECT
        &[0x00],             // do not retry here
        &[0x00],             // empty reason
        &[0x14],             // Connect URI Length 20
        b"moqt://relay.example",
        &[0x01, 0x04], // Track Namespace: 1 field of 4 bytes
        b"live",
        &[0x03], // Track Name Length 3
        b"cam",
    ]);
    let msg = RequestError {
        code: RequestErrorCode::REDIRECT,
        retry_interval: 0,
        reason: String::new(),
        redirect: Some(Box::new(Redirect {
            connect_uri: Bytes::from_static(b"moqt://relay.example"),
            track: FullTrackName::new(ns(&["live"]), "cam").unwrap(),
        })),
    };
    for v in [D18, D19] {
        check(&bytes, msg.clone(), v);
    }

    // An all-empty Redirect: same URI, same track.
    let empty = [0x05, 0x00, 0x06, 0x34, 0x01, 0x00, 0x00, 0x00, 0x00];
    check(
        &empty,
        RequestError {
            code: RequestErrorCode::REDIRECT,
            retry_interval: 1,
            reason: String::new(),
            redirect: Some(Box::default()),
        },
        D19,
    );
}

// ---------------------------------------------------------------------------------------------
// GOAWAY (§10.4; draft-18 adds a trailing Request ID)

#[test]
fn goaway_draft18_with_request_id() {
    let bytes = cat(&[
        &[0x10, 0x00, 0x0C],
        &[0x08], // New Session URI Length 8
        b"moqt://b",
        &[0x93, 0x88], // Timeout 5000 ms
        &[0x07],       // draft-18: Request ID 7
    ]);
    check(
        &bytes,
        Goaway {
            new_session_uri: Bytes::from_static(b"moqt://b"),
            timeout_ms: 5000,
            request_id: Some(7),
        },
        D18,
    );
    // draft-19 has no Request ID: the byte is left over.
    assert_eq!(
        Message::decode(&mut &bytes[..], D19),
        Err(DecodeError::TrailingBytes {
            message: "GOAWAY",
            extra: 1
        })
    );
}

#[test]
fn goaway_draft19() {
    let bytes = cat(&[&[0x10, 0x00, 0x0B, 0x08], b"moqt://b", &[0x93, 0x88]]);
    let msg = Goaway {
        new_session_uri: Bytes::from_static(b"moqt://b"),
        timeout_ms: 5000,
        request_id: None,
    };
    check(&bytes, msg.clone(), D19);
    // In draft-18 the Request ID is optional, so the same bytes mean the same thing.
    check(&bytes, msg, D18);
    // A client's GOAWAY: empty URI, no timeout.
    check(&[0x10, 0x00, 0x02, 0x00, 0x00], Goaway::default(), D19);
}

// ---------------------------------------------------------------------------------------------
// SUBSCRIBE (§10.7) with parameters (§10.2)

#[test]
fn subscribe_with_parameters() {
    let bytes = cat(&[
        &[0x03, 0x00, 0x17],
        &[0x00],       // Request ID 0
        &[0x01, 0x04], // Namespace: 1 field, 4 bytes
        b"live",
        &[0x03], // Track Name Length
        b"cam",
        &[0x04],                         // 4 parameters
        &[0x10, 0x00],                   // 0x10 FORWARD = 0
        &[0x10, 0x80],                   // +0x10 = 0x20 SUBSCRIBER_PRIORITY = 128 (uint8)
        &[0x01, 0x03, 0x03, 0x05, 0x01], // +1 = 0x21 LOCATION_FILTER, len 3, AbsoluteStart {5, 1}
        &[0x01, 0x02],                   // +1 = 0x22 GROUP_ORDER = Descending
    ]);
    let msg = Subscribe {
        request_id: 0,
        track: FullTrackName::new(ns(&["live"]), "cam").unwrap(),
        params: Parameters {
            forward: Some(false),
            subscriber_priority: Some(128),
            location_filter: Some(LocationFilter::AbsoluteStart(Location::new(5, 1))),
            group_order: Some(GroupOrder::Descending),
            ..Default::default()
        },
    };
    for v in [D18, D19] {
        check(&bytes, msg.clone(), v);
    }
}

/// draft-19 §5.1.3's example: OBJECTID_FILTER for ranges 3-5 and 10-15 is `3, 2, 5, 5`.
#[test]
fn subscribe_with_range_filter() {
    let bytes = [
        0x03, 0x00, 0x0B, // SUBSCRIBE, Length 11
        0x02, // Request ID 2
        0x00, 0x00, // empty namespace, empty name
        0x01, // 1 parameter
        0x26, 0x05, // OBJECTID_FILTER, Length 5
        0x00, // SetID 0
        0x03, 0x02, 0x05, 0x05, // ranges
    ];
    let msg = Subscribe {
        request_id: 2,
        track: FullTrackName::default(),
        params: Parameters {
            range_filters: vec![RangeFilterParam {
                kind: RangeFilterKind::ObjectId,
                filter: Some(RangeFilter {
                    set_id: 0,
                    property_type: None,
                    ranges: vec![
                        FilterRange {
                            start: 3,
                            end: Some(5),
                        },
                        FilterRange {
                            start: 10,
                            end: Some(15),
                        },
                    ],
                }),
            }],
            ..Default::default()
        },
    };
    check(&bytes, msg, D19);
}
