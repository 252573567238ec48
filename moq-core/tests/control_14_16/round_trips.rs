//! One sample of every control message of drafts 14, 15 and 16 with its envelope, and their round
//! trips through `encode_addressed` / `decode_addressed`.

use bytes::Bytes;
use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::message::{
    ClientSetup, Envelope, Fetch, FetchCancel, FetchOk, FetchType, Goaway, MaxRequestId, Message,
    Namespace, NamespaceDone, Parameters, Publish, PublishDone, PublishNamespace,
    PublishNamespaceCancel, PublishNamespaceDone, RequestError, RequestOk, RequestType,
    RequestUpdate, RequestsBlocked, ServerSetup, SetupOptions, SubscribeNamespace, SubscribeOk,
    SubscribeTracks, TrackStatus, Unsubscribe, UnsubscribeNamespace, peek_request_id,
};
use moq_core::{
    AuthToken, GroupOrder, KeyValuePair, KvpValue, Location, LocationFilter, Properties,
    TrackNamespace, Version, property,
};

use crate::support::{
    D14, D15, D16, FAMILY, answer, hex, named, ns, props, round_trip, standalone_fetch, subscribe,
    to, track,
};

// ---------------------------------------------------------------------------------------------
// Round trips of every message of each version

/// Every message the version has, with the envelope it needs.
pub(crate) fn samples(v: Version) -> Vec<(Message, Envelope)> {
    let d14 = v == D14;
    let d16 = v == D16;
    let none = Envelope::default;
    let token = AuthToken::new("tok");
    let mut out: Vec<(Message, Envelope)> = Vec::new();
    let mut push = |m: Message, e: Envelope| out.push((m, e));

    push(
        ClientSetup {
            versions: if d14 {
                vec![0xff00_000e, 0xff00_000d]
            } else {
                vec![]
            },
            max_request_id: Some(20),
            options: SetupOptions {
                path: Some(Bytes::from_static(b"/p?q")),
                authority: Some(Bytes::from_static(b"example.com")),
                authorization_tokens: vec![token.clone()],
                max_auth_token_cache_size: Some(4096),
                implementation: Some("moq-rs".into()),
                unknown: vec![KeyValuePair {
                    key: 0x9D,
                    value: KvpValue::Bytes(Bytes::from_static(b"g")),
                }],
                ..Default::default()
            },
        }
        .into(),
        none(),
    );
    push(
        ServerSetup {
            version: d14.then_some(0xff00_000e),
            max_request_id: Some(0),
            options: SetupOptions {
                implementation: Some("srv".into()),
                ..Default::default()
            },
        }
        .into(),
        none(),
    );
    push(
        Goaway {
            new_session_uri: Bytes::from_static(b"moqt://elsewhere"),
            ..Default::default()
        }
        .into(),
        none(),
    );
    push(
        MaxRequestId {
            request_id: 1 << 40,
        }
        .into(),
        none(),
    );
    push(
        RequestsBlocked {
            maximum_request_id: 7,
        }
        .into(),
        none(),
    );

    // A subscription.
    let mut sub = subscribe();
    sub.params.authorization_tokens = vec![token.clone(), AuthToken::UseAlias { alias: 3 }];
    if d16 {
        sub.params.new_group_request = Some(0);
    }
    push(sub.into(), none());
    let mut sok = SubscribeOk {
        track_alias: 9,
        params: Parameters {
            expires: Some(30_000),
            largest_object: Some(Location::new(1 << 33, 4)),
            ..Default::default()
        },
        track_properties: props(&[
            (property::OBJECT_DELIVERY_TIMEOUT, 250),
            (property::DEFAULT_PUBLISHER_GROUP_ORDER, 2),
        ]),
    };
    if !d14 {
        sok.track_properties = sok
            .track_properties
            .with_int(property::DEFAULT_PUBLISHER_PRIORITY, 3)
            .unwrap();
    }
    if !d16 {
        sok.track_properties = sok
            .track_properties
            .with_int(property::MAX_CACHE_DURATION, 60_000)
            .unwrap();
    } else {
        sok.track_properties = sok
            .track_properties
            .with_int(property::DYNAMIC_GROUPS, 1)
            .unwrap()
            .with_bytes(0x79, &b"app"[..])
            .unwrap();
    }
    push(sok.into(), to(2));
    let update = RequestUpdate {
        request_id: 10,
        params: if d14 {
            Parameters {
                location_filter: Some(LocationFilter::AbsoluteStart(Location::new(7, 0))),
                subscriber_priority: Some(1),
                forward: Some(false),
                authorization_tokens: vec![token.clone()],
                ..Default::default()
            }
        } else {
            Parameters {
                forward: Some(false),
                location_filter: Some(LocationFilter::AbsoluteRange {
                    start: Location::new(7, 0),
                    end_group_delta: 0,
                    end_object: None,
                }),
                ..Default::default()
            }
        },
    };
    push(update.into(), to(2));
    if !d14 {
        push(
            RequestOk {
                params: Parameters {
                    largest_object: Some(Location::new(8, 1)),
                    ..Default::default()
                },
                ..Default::default()
            }
            .into(),
            answer(10, RequestType::RequestUpdate),
        );
        push(
            RequestError::new(RequestErrorCode::INVALID_RANGE, "too late").into(),
            answer(10, RequestType::RequestUpdate),
        );
    }
    push(Unsubscribe.into(), to(2));
    push(
        PublishDone {
            status: PublishDoneCode::TOO_FAR_BEHIND,
            stream_count: PublishDone::unknown_stream_count(v),
            reason: "slow".into(),
        }
        .into(),
        to(2),
    );
    push(
        RequestError {
            code: RequestErrorCode::DOES_NOT_EXIST,
            retry_interval: if d16 { 5 } else { 0 },
            reason: "no such track".into(),
            redirect: None,
        }
        .into(),
        answer(2, RequestType::Subscribe),
    );

    // PUBLISH and its answers.
    let mut publish = Publish {
        request_id: 3,
        track: track(&["live", "cam"], "video"),
        track_alias: 11,
        params: Parameters {
            largest_object: Some(Location::new(2, 0)),
            forward: Some(true),
            ..Default::default()
        },
        track_properties: props(&[(property::DEFAULT_PUBLISHER_GROUP_ORDER, 1)]),
    };
    if !d14 {
        publish.params.expires = Some(5);
        publish.params.authorization_tokens = vec![token.clone()];
    }
    push(publish.into(), none());
    let mut publish_ok = Parameters {
        object_delivery_timeout: Some(100),
        forward: Some(true),
        subscriber_priority: Some(200),
        group_order: Some(GroupOrder::Descending),
        location_filter: Some(LocationFilter::LargestObject),
        ..Default::default()
    };
    if d16 {
        publish_ok.new_group_request = Some(4);
    }
    push(
        RequestOk {
            params: publish_ok,
            ..Default::default()
        }
        .into(),
        answer(3, RequestType::Publish),
    );
    push(
        RequestError::new(RequestErrorCode::UNINTERESTED, "").into(),
        answer(3, RequestType::Publish),
    );

    // FETCH and its answers.
    push(standalone_fetch().into(), none());
    push(
        Fetch {
            request_id: 12,
            fetch_type: FetchType::RelativeJoining {
                joining_request_id: 2,
                joining_start: 3,
            },
            params: Parameters {
                subscriber_priority: Some(1),
                ..Default::default()
            },
        }
        .into(),
        none(),
    );
    push(
        Fetch {
            request_id: 14,
            fetch_type: FetchType::AbsoluteJoining {
                joining_request_id: 2,
                joining_start: 0,
            },
            params: Parameters {
                subscriber_priority: Some(1),
                group_order: Some(GroupOrder::Descending),
                ..Default::default()
            },
        }
        .into(),
        none(),
    );
    let fetch_props = if d14 {
        props(&[(property::DEFAULT_PUBLISHER_GROUP_ORDER, 2)])
    } else if d16 {
        props(&[(property::MAX_CACHE_DURATION, 10)])
    } else {
        Properties::new()
    };
    push(
        FetchOk {
            end_of_track: false,
            end_location: Location::new(9, 3),
            params: Parameters::default(),
            track_properties: fetch_props,
        }
        .into(),
        to(8),
    );
    push(
        RequestError::new(RequestErrorCode::INVALID_JOINING_REQUEST_ID, "j").into(),
        answer(12, RequestType::Fetch),
    );
    push(FetchCancel.into(), to(8));

    // TRACK_STATUS and its answers.
    push(
        TrackStatus {
            request_id: 16,
            track: track(&["a"], ""),
            params: Parameters {
                authorization_tokens: vec![token.clone()],
                ..Default::default()
            },
        }
        .into(),
        none(),
    );
    let status_ok = if d14 {
        RequestOk {
            params: Parameters {
                expires: Some(9),
                largest_object: Some(Location::new(4, 4)),
                ..Default::default()
            },
            track_properties: props(&[
                (property::MAX_CACHE_DURATION, 1),
                (property::DEFAULT_PUBLISHER_GROUP_ORDER, 1),
            ]),
        }
    } else if d16 {
        RequestOk {
            params: Parameters {
                largest_object: Some(Location::new(4, 4)),
                ..Default::default()
            },
            ..Default::default()
        }
    } else {
        RequestOk {
            params: Parameters {
                largest_object: Some(Location::new(4, 4)),
                ..Default::default()
            },
            track_properties: props(&[
                (property::OBJECT_DELIVERY_TIMEOUT, 7),
                (property::DEFAULT_PUBLISHER_GROUP_ORDER, 2),
            ]),
        }
    };
    push(status_ok.into(), answer(16, RequestType::TrackStatus));
    push(
        RequestError::new(RequestErrorCode::NOT_SUPPORTED, "").into(),
        answer(16, RequestType::TrackStatus),
    );

    // Namespaces.
    let n = ns(&["room", "1"]);
    push(
        PublishNamespace {
            request_id: 18,
            namespace: n.clone(),
            params: Parameters {
                authorization_tokens: vec![token.clone()],
                ..Default::default()
            },
        }
        .into(),
        none(),
    );
    push(
        RequestOk::default().into(),
        answer(18, RequestType::PublishNamespace),
    );
    push(
        RequestError::new(RequestErrorCode::EXPIRED_AUTH_TOKEN, "").into(),
        answer(18, RequestType::PublishNamespace),
    );
    let by_ns = if v.namespace_done_by_namespace() {
        named(n.clone())
    } else {
        to(18)
    };
    push(PublishNamespaceDone.into(), by_ns.clone());
    push(
        PublishNamespaceCancel {
            code: RequestErrorCode::UNAUTHORIZED,
            reason: "revoked".into(),
        }
        .into(),
        by_ns,
    );
    push(
        SubscribeNamespace {
            request_id: 20,
            prefix: ns(&["room"]),
            params: Parameters {
                forward: (!d14).then_some(false),
                ..Default::default()
            },
        }
        .into(),
        none(),
    );
    push(
        RequestOk::default().into(),
        answer(20, RequestType::SubscribeNamespace),
    );
    push(
        RequestError::new(RequestErrorCode::PREFIX_OVERLAP, "").into(),
        answer(20, RequestType::SubscribeNamespace),
    );
    if v.has_subscribe_options() {
        push(
            SubscribeTracks {
                request_id: 22,
                prefix: TrackNamespace::empty(),
                params: Parameters::default(),
            }
            .into(),
            none(),
        );
        push(
            SubscribeNamespace {
                request_id: 24,
                prefix: TrackNamespace::empty(),
                params: Parameters::default(),
            }
            .into(),
            none(),
        );
        push(
            Namespace {
                suffix: ns(&["2"]),
                cluster: None,
            }
            .into(),
            none(),
        );
        push(NamespaceDone { suffix: ns(&["2"]) }.into(), none());
    } else {
        let unsub = if v.unsubscribe_namespace_by_prefix() {
            named(ns(&["room"]))
        } else {
            to(20)
        };
        push(UnsubscribeNamespace.into(), unsub);
    }
    out
}

#[test]
fn every_message_round_trips() {
    for v in FAMILY {
        let samples = samples(v);
        assert!(samples.len() >= 30, "{v}: {}", samples.len());
        for (m, env) in &samples {
            round_trip(m, env, v);
        }
    }
}

/// Every message type of each version appears in the samples.
#[test]
fn samples_cover_every_type() {
    for v in FAMILY {
        let mut seen: Vec<u64> = samples(v)
            .iter()
            .map(|(m, e)| m.type_code_in(e, v).unwrap().0)
            .collect();
        seen.sort_unstable();
        seen.dedup();
        let all: Vec<u64> = (0..0x60)
            .filter(|t| Message::name_of(*t, v).is_some())
            .collect();
        assert_eq!(seen, all, "{v}");
    }
}

#[test]
fn version_names() {
    assert_eq!(Message::name_of(0x02, D14), Some("SUBSCRIBE_UPDATE"));
    assert_eq!(Message::name_of(0x02, D15), Some("SUBSCRIBE_UPDATE"));
    assert_eq!(Message::name_of(0x02, D16), Some("REQUEST_UPDATE"));
    assert_eq!(Message::name_of(0x0E, D14), Some("TRACK_STATUS_OK"));
    assert_eq!(Message::name_of(0x0E, D16), Some("NAMESPACE_DONE"));
    assert_eq!(Message::name_of(0x0F, D14), Some("TRACK_STATUS_ERROR"));
    assert_eq!(Message::name_of(0x0F, D16), None);
    assert_eq!(Message::name_of(0x08, D14), Some("PUBLISH_NAMESPACE_ERROR"));
    assert_eq!(Message::name_of(0x08, D15), None);
    assert_eq!(Message::name_of(0x08, D16), Some("NAMESPACE"));
    assert_eq!(Message::name_of(0x07, D14), Some("PUBLISH_NAMESPACE_OK"));
    assert_eq!(Message::name_of(0x07, D15), Some("REQUEST_OK"));
    assert_eq!(Message::name_of(0x1E, D16), Some("PUBLISH_OK"));
    assert_eq!(Message::name_of(0x1E, Version::Draft18), None);
    assert_eq!(Message::name_of(0x11, D16), Some("SUBSCRIBE_NAMESPACE"));
    assert_eq!(Message::name_of(0x11, Version::Draft19), None);
    assert_eq!(Message::name_of(0x20, Version::Draft19), None);
    assert_eq!(Message::name_of(0x2F00, D16), None);
}

/// Request messages begin with their own Request ID in every version; answers do not open a
/// request.
#[test]
fn peek_request_id_by_version() {
    let sub = Message::from(subscribe()).encode_to_vec(D14).unwrap();
    assert_eq!(peek_request_id(&sub, D14), Some(2));
    let update = Message::from(RequestUpdate {
        request_id: 10,
        params: Parameters {
            forward: Some(true),
            ..Default::default()
        },
    })
    .encode_addressed_to_vec(&to(2), D16)
    .unwrap();
    assert_eq!(peek_request_id(&update, D16), Some(10));
    let err = hex("05 0003 02 04 00");
    assert_eq!(peek_request_id(&err, D14), None);
    let sn = hex("11 0008 06 02 0161 026263 00");
    assert_eq!(peek_request_id(&sn, D14), Some(6));
}
