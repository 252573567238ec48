//! Fixed wire vectors written by hand from the draft-19 text (§10, §11; draft-18 for GOAWAY's
//! Request ID) and, for drafts 20-22, taken from the peers' encoders; not produced by ours. Each vector is checked both ways: decoding the bytes
//! gives the expected value, and encoding the value gives the bytes.
//!
//! Reminder of the vi64 encoding used throughout: values below 128 take one byte; below 16384
//! two bytes `10xxxxxx xxxxxxxx`; so SETUP's type 0x2F00 is `AF 00` and 0x9D is `80 9D`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use bytes::{Bytes, BytesMut};

use moq_core::codes::RequestErrorCode;
use moq_core::data::{
    Datagram, DatagramBody, FetchEvent, FetchHeader, FetchObject, FetchReader, FetchWriter,
    ObjectDatagram, ObjectStatus, RangeEnd, StreamType, SubgroupEvent, SubgroupHeader, SubgroupId,
    SubgroupReader, SubgroupWriter,
};
use moq_core::message::{
    Fetch, FetchOk, FetchType, Goaway, Message, Namespace, NamespaceDone, OPEN_END, ParamContext,
    Parameters, PublishStateNotify, Redirect, RequestError, RequestUpdate, Setup, SetupOptions,
    Subscribe, SubscribeNamespace,
};
use moq_core::{
    AuthToken, DecodeError, FilterRange, FullTrackName, GroupOrder, KeyValuePair, KvpValue,
    Location, LocationFilter, Properties, RangeFilter, RangeFilterKind, RangeFilterParam,
    TrackNamespace, Version,
};

const D18: Version = Version::Draft18;
const D19: Version = Version::Draft19;

/// Concatenates byte pieces.
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Decoding `bytes` gives `msg` and consumes them all; encoding `msg` gives `bytes`.
fn check(bytes: &[u8], msg: impl Into<Message>, v: Version) {
    let msg = msg.into();
    let mut cur = bytes;
    assert_eq!(
        Message::decode(&mut cur, v).unwrap(),
        msg,
        "decode under {v}"
    );
    assert!(cur.is_empty(), "bytes left over");
    assert_eq!(msg.encode_to_vec(v).unwrap(), bytes, "encode under {v}");
}

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

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

// ---------------------------------------------------------------------------------------------
// SUBGROUP_HEADER (§11.4.2): the two examples of §11.6

#[test]
fn subgroup_example_1() {
    let bytes = cat(&[
        &[0x14, 0x02, 0x00, 0x00, 0x00], // Type 0x14, Alias 2, Group 0, Subgroup 0, Priority 0
        &[0x00, 0x04],                   // Object ID Delta 0 (ID 0), Payload Length 4
        b"abcd",
        &[0x00, 0x04], // Object ID Delta 0 (ID 1), Payload Length 4
        b"efgh",
    ]);
    let header = SubgroupHeader {
        track_alias: 2,
        group: 0,
        subgroup: SubgroupId::Explicit(0),
        priority: Some(0),
        properties: false,
        end_of_group: false,
        first_object: false,
    };
    let objects = [
        (0, Properties::new(), b"abcd"),
        (1, Properties::new(), b"efgh"),
    ];
    check_subgroup(&bytes, header, &objects);
}

/// The draft's text gives "Properties Length = 33" and "Length = 21" for this example, but the
/// pairs it lists (type 4 = 2186796243, type 77 = "traceID:123456") take 1 + 5 + 1 + 1 + 14 =
/// 22 bytes, and the string is 14 bytes long. The bytes below follow the structure.
#[test]
fn subgroup_example_2() {
    let bytes = cat(&[
        &[0x35, 0x02, 0x00, 0x00], // Type 0x35 (no priority), Alias 2, Group 0, Subgroup 0
        &[0x00],                   // Object ID Delta 0 (ID 0)
        &[0x16],                   // Properties Length 22
        &[0x04, 0xF0, 0x82, 0x57, 0xDC, 0xD3], // Type 4 = 2186796243 (5-byte vi64)
        &[0x49, 0x0E],             // Delta 73 -> Type 77, Length 14
        b"traceID:123456",
        &[0x04], // Payload Length 4
        b"abcd",
        &[0x00, 0x00, 0x04], // Delta 0 (ID 1), Properties Length 0, Payload Length 4
        b"efgh",
    ]);
    let header = SubgroupHeader {
        track_alias: 2,
        group: 0,
        subgroup: SubgroupId::Explicit(0),
        priority: None,
        properties: true,
        end_of_group: false,
        first_object: false,
    };
    let props = Properties::from_pairs([
        KeyValuePair {
            key: 4,
            value: KvpValue::Int(2_186_796_243),
        },
        KeyValuePair {
            key: 77,
            value: KvpValue::Bytes(Bytes::from_static(b"traceID:123456")),
        },
    ])
    .unwrap();
    let objects = [(0, props, b"abcd"), (1, Properties::new(), b"efgh")];
    check_subgroup(&bytes, header, &objects);
}

fn check_subgroup(bytes: &[u8], header: SubgroupHeader, objects: &[(u64, Properties, &[u8; 4])]) {
    for v in [D18, D19] {
        assert_eq!(
            StreamType::peek(bytes, v).unwrap(),
            Some(StreamType::Subgroup(bytes[0]))
        );
        let mut buf = BytesMut::from(bytes);
        assert_eq!(SubgroupHeader::decode(&mut buf, v).unwrap(), header);
        let mut r = SubgroupReader::new(header, v);
        for (id, props, payload) in objects {
            match r.next(&mut buf).unwrap() {
                Some(SubgroupEvent::Object(o)) => {
                    assert_eq!(o.id, *id);
                    assert_eq!(&o.properties, props);
                    assert_eq!(o.status, ObjectStatus::Normal);
                    assert_eq!(o.payload_len, 4);
                }
                other => panic!("expected an object, got {other:?}"),
            }
            assert_eq!(
                r.next(&mut buf).unwrap(),
                Some(SubgroupEvent::Payload {
                    data: Bytes::copy_from_slice(&payload[..]),
                    last: true
                })
            );
        }
        assert_eq!(r.next(&mut buf).unwrap(), None);
        r.finish(&buf).unwrap();
        assert_eq!(r.subgroup_id(), Some(0));

        let mut w = SubgroupWriter::new(header, v);
        let mut out = Vec::new();
        w.encode_header(&mut out).unwrap();
        for (id, props, payload) in objects {
            w.encode_object(&mut out, *id, props, ObjectStatus::Normal, &payload[..])
                .unwrap();
        }
        assert_eq!(out, bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// OBJECT_DATAGRAM (§11.3.1)

#[test]
fn object_datagrams() {
    let cases = [
        (
            // Type 0x00: Object ID and Priority present, payload.
            vec![0x00, 0x01, 0x02, 0x03, 0x80, b'h', b'i'],
            ObjectDatagram {
                track_alias: 1,
                group: 2,
                object: 3,
                priority: Some(0x80),
                properties: Properties::new(),
                end_of_group: false,
                body: DatagramBody::Payload(Bytes::from_static(b"hi")),
            },
        ),
        (
            // Type 0x2D: STATUS | DEFAULT_PRIORITY | ZERO_OBJECT_ID | PROPERTIES, Normal status.
            vec![0x2D, 0x01, 0x02, 0x02, 0x3C, 0x01, 0x00],
            ObjectDatagram {
                track_alias: 1,
                group: 2,
                object: 0,
                priority: None,
                properties: Properties::new().with_int(0x3C, 1).unwrap(),
                end_of_group: false,
                body: DatagramBody::Status(ObjectStatus::Normal),
            },
        ),
        (
            // Type 0x0E: DEFAULT_PRIORITY | ZERO_OBJECT_ID | END_OF_GROUP, payload "x".
            vec![0x0E, 0x05, 0x06, b'x'],
            ObjectDatagram {
                track_alias: 5,
                group: 6,
                object: 0,
                priority: None,
                properties: Properties::new(),
                end_of_group: true,
                body: DatagramBody::Payload(Bytes::from_static(b"x")),
            },
        ),
        (
            // Type 0x24: STATUS | ZERO_OBJECT_ID, priority 7, End of Track.
            vec![0x24, 0x05, 0x06, 0x07, 0x04],
            ObjectDatagram {
                track_alias: 5,
                group: 6,
                object: 0,
                priority: Some(7),
                properties: Properties::new(),
                end_of_group: false,
                body: DatagramBody::Status(ObjectStatus::EndOfTrack),
            },
        ),
    ];
    for v in [D18, D19] {
        for (bytes, d) in &cases {
            assert_eq!(
                Datagram::decode(Bytes::copy_from_slice(bytes), v).unwrap(),
                Datagram::Object(d.clone())
            );
            assert_eq!(&d.encode_to_bytes(v).unwrap()[..], &bytes[..]);
        }
        // PADDING datagram: type 0x132B3E29 (5-byte vi64) then zeros.
        let pad = [0xF0, 0x13, 0x2B, 0x3E, 0x29, 0x00, 0x00];
        assert_eq!(
            Datagram::decode(Bytes::copy_from_slice(&pad), v).unwrap(),
            Datagram::Padding
        );
        assert_eq!(&Datagram::padding(7, v)[..], &pad[..]);
    }
}

// ---------------------------------------------------------------------------------------------
// FETCH_HEADER and fetch objects (§11.4.4)

fn fetch_obj(g: u64, o: u64, subgroup: Option<u64>, priority: u8, len: u64) -> FetchEvent {
    FetchEvent::Object(FetchObject {
        location: Location::new(g, o),
        subgroup,
        priority,
        properties: Properties::new(),
        payload_len: len,
    })
}

fn payload(b: &'static [u8]) -> FetchEvent {
    FetchEvent::Payload {
        data: Bytes::from_static(b),
        last: true,
    }
}

fn check_fetch(bytes: &[u8], request_id: u64, order: GroupOrder, events: &[FetchEvent]) {
    for v in [D18, D19] {
        assert_eq!(StreamType::peek(bytes, v).unwrap(), Some(StreamType::Fetch));
        let mut buf = BytesMut::from(bytes);
        assert_eq!(
            FetchHeader::decode(&mut buf, v).unwrap().request_id,
            request_id
        );
        let mut r = FetchReader::new(order, v);
        let mut got = Vec::new();
        while let Some(ev) = r.next(&mut buf).unwrap() {
            got.push(ev);
        }
        r.finish(&buf).unwrap();
        assert_eq!(got, events);

        let mut out = Vec::new();
        FetchHeader { request_id }.encode(&mut out, v).unwrap();
        let mut w = FetchWriter::new(order, v);
        for ev in events {
            match ev {
                FetchEvent::Object(o) => w.encode_object(&mut out, o).unwrap(),
                FetchEvent::Payload { data, .. } => out.extend_from_slice(data),
                FetchEvent::EndOfRange { kind, location } => {
                    w.encode_end_of_range(&mut out, *kind, *location).unwrap()
                }
            }
        }
        assert_eq!(out, bytes);
    }
}

#[test]
fn fetch_stream_ascending() {
    let bytes = cat(&[
        &[0x05, 0x07],                   // FETCH_HEADER, Request ID 7
        &[0x1C, 0x03, 0x00, 0x80, 0x01], // Group+Object+Priority: {3, 0}, prio 128, len 1
        b"a",
        &[0x00, 0x00],       // {3, 1}: prior + 1, subgroup 0, prior priority, len 0
        &[0x80, 0x8C],       // End of Non-Existent Range (2-byte vi64)
        &[0x01, 0x04],       //   Group 3 + 1 + 1 = 5, Object 4
        &[0x5C, 0x00, 0x00], // Datagram + Group + Object + Priority: {6, 0}
        &[0x09, 0x02],       //   priority 9, len 2
        b"zz",
        &[0x07, 0x05, 0x02, 0x00], // explicit subgroup 5, Object Delta 2: {6, 2}, len 0
        &[0x01, 0x00],             // prior subgroup (5), {6, 3}
        &[0x02, 0x00],             // prior subgroup + 1 (6), {6, 4}
    ]);
    let events = [
        fetch_obj(3, 0, Some(0), 128, 1),
        payload(b"a"),
        fetch_obj(3, 1, Some(0), 128, 0),
        FetchEvent::EndOfRange {
            kind: RangeEnd::NonExistent,
            location: Location::new(5, 4),
        },
        fetch_obj(6, 0, None, 9, 2),
        payload(b"zz"),
        fetch_obj(6, 2, Some(5), 9, 0),
        fetch_obj(6, 3, Some(5), 9, 0),
        fetch_obj(6, 4, Some(6), 9, 0),
    ];
    check_fetch(&bytes, 7, GroupOrder::Ascending, &events);
}

#[test]
fn fetch_stream_descending() {
    let bytes = [
        0x05, 0x00, // FETCH_HEADER, Request ID 0
        0x1C, 0x0A, 0x00, 0x01, 0x00, // {10, 0}, priority 1, len 0
        0x0C, 0x02, 0x05, 0x00, // Group 10 - (2 + 1) = 7, Object 5, len 0
        0x81, 0x0C, 0x00, 0x01, // End of Unknown Range (0x10C): Group 7 - 1 = 6, Object 1
    ];
    let events = [
        fetch_obj(10, 0, Some(0), 1, 0),
        fetch_obj(7, 5, Some(0), 1, 0),
        FetchEvent::EndOfRange {
            kind: RangeEnd::Unknown,
            location: Location::new(6, 1),
        },
    ];
    check_fetch(&bytes, 0, GroupOrder::Descending, &events);
}

// ---------------------------------------------------------------------------------------------
// Drafts 20, 21 and 22: vectors from the bytes aiomoqt 0.13.3's encoders and moq-net 0.3.18's
// unit tests produce (see docs/interop.md), not from our encoder.

const D20: Version = Version::Draft20;
const D21: Version = Version::Draft21;
const D22: Version = Version::Draft22;

fn track20() -> FullTrackName {
    FullTrackName::new(ns(&["ns"]), "t").unwrap()
}

fn decode(bytes: &[u8], v: Version) -> Result<Message, DecodeError> {
    Message::decode(&mut &bytes[..], v)
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
