//! Proptest strategies shared by the integration tests: names, locations, properties, tokens,
//! filters, parameters restricted to what a message allows, and every control message.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic,
    dead_code,
    unreachable_pub
)]

use bytes::Bytes;
use proptest::collection::vec;
use proptest::option::of as opt;
use proptest::prelude::*;

use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::message::{
    Fetch, FetchOk, FetchType, Goaway, Message, Namespace, NamespaceDone, ParamContext, Parameters,
    Publish, PublishDone, PublishNamespace, PublishSkipped, Redirect, RequestError, RequestOk,
    RequestUpdate, Setup, SetupOptions, Subscribe, SubscribeNamespace, SubscribeOk,
    SubscribeTracks, TrackStatus, param, param_allowed, setup_option,
};
use moq_core::{
    AuthToken, FilterRange, FullTrackName, GroupOrder, KeyValuePair, KvpValue, Location,
    LocationFilter, Properties, RangeFilter, RangeFilterKind, RangeFilterParam, TrackNamespace,
    Version,
};

/// Both supported versions.
pub fn version() -> impl Strategy<Value = Version> {
    prop_oneof![Just(Version::Draft18), Just(Version::Draft19)]
}

/// A `u64` spread over every vi64 length, with the extremes well represented.
pub fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..0x80,
        2 => 0x80u64..0x4000,
        1 => 0x4000u64..0x1000_0000,
        1 => any::<u64>(),
        1 => Just(u64::MAX),
    ]
}

/// Up to `max` arbitrary bytes.
pub fn bytes_up_to(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..=max).prop_map(Bytes::from)
}

/// A valid Track Namespace: 0..=32 non-empty fields, at most 4096 bytes, with the limits
/// themselves (32 fields, 4096 bytes) generated regularly.
pub fn namespace() -> BoxedStrategy<TrackNamespace> {
    prop_oneof![
        8 => vec(vec(any::<u8>(), 1..=12), 0..=6),
        2 => vec(vec(any::<u8>(), 1..=128), 0..=32),
        1 => vec(vec(any::<u8>(), 128..=128), 32..=32),
    ]
    .prop_map(|fields| TrackNamespace::new(fields.into_iter().map(Bytes::from)).unwrap())
    .boxed()
}

/// A small namespace, for places where a large one adds nothing.
pub fn small_namespace() -> impl Strategy<Value = TrackNamespace> {
    vec(vec(any::<u8>(), 1..=8), 0..=4)
        .prop_map(|fields| TrackNamespace::new(fields.into_iter().map(Bytes::from)).unwrap())
}

/// A valid Full Track Name; sometimes exactly 4096 bytes.
pub fn full_track_name() -> BoxedStrategy<FullTrackName> {
    namespace()
        .prop_flat_map(|ns| {
            let room = TrackNamespace::MAX_LEN - ns.byte_len();
            let name = prop_oneof![
                4 => vec(any::<u8>(), 0..=room.min(24)),
                1 => vec(any::<u8>(), room..=room),
            ];
            (Just(ns), name)
        })
        .prop_map(|(ns, name)| FullTrackName::new(ns, name).unwrap())
        .boxed()
}

/// Any location.
pub fn location() -> impl Strategy<Value = Location> {
    (varint(), varint()).prop_map(|(g, o)| Location::new(g, o))
}

/// One Key-Value-Pair with the shape its key's parity demands.
pub fn kvp() -> impl Strategy<Value = KeyValuePair> {
    prop_oneof![3 => 0u64..0x80, 1 => varint()].prop_flat_map(|key| {
        if key % 2 == 0 {
            varint()
                .prop_map(move |v| KeyValuePair {
                    key,
                    value: KvpValue::Int(v),
                })
                .boxed()
        } else {
            bytes_up_to(24)
                .prop_map(move |b| KeyValuePair {
                    key,
                    value: KvpValue::Bytes(b),
                })
                .boxed()
        }
    })
}

/// Properties: sorted by key (duplicates allowed), right parity.
pub fn properties() -> BoxedStrategy<Properties> {
    vec(kvp(), 0..6)
        .prop_map(|p| Properties::from_pairs(p).unwrap())
        .boxed()
}

/// Non-empty properties.
pub fn nonempty_properties() -> impl Strategy<Value = Properties> {
    vec(kvp(), 1..6).prop_map(|p| Properties::from_pairs(p).unwrap())
}

/// An authorization token of any alias type.
pub fn auth_token() -> BoxedStrategy<AuthToken> {
    prop_oneof![
        varint().prop_map(|alias| AuthToken::Delete { alias }),
        (varint(), varint(), bytes_up_to(32)).prop_map(|(alias, token_type, value)| {
            AuthToken::Register {
                alias,
                token_type,
                value,
            }
        }),
        varint().prop_map(|alias| AuthToken::UseAlias { alias }),
        (varint(), bytes_up_to(32))
            .prop_map(|(token_type, value)| AuthToken::UseValue { token_type, value }),
    ]
    .boxed()
}

/// A group order.
pub fn group_order() -> impl Strategy<Value = GroupOrder> {
    prop_oneof![Just(GroupOrder::Ascending), Just(GroupOrder::Descending)]
}

/// Any valid Location Filter (an AbsoluteRange never overflows its end group).
pub fn location_filter() -> BoxedStrategy<LocationFilter> {
    prop_oneof![
        Just(LocationFilter::NextGroupStart),
        Just(LocationFilter::LargestObject),
        location().prop_map(LocationFilter::AbsoluteStart),
        location()
            .prop_flat_map(|start| {
                let room = u64::MAX - start.group;
                (Just(start), prop_oneof![0..=room.min(1000), 0..=room])
            })
            .prop_map(|(start, end_group_delta)| LocationFilter::AbsoluteRange {
                end_object: None,
                start,
                end_group_delta,
            }),
    ]
    .boxed()
}

/// Ascending ranges; only the last may be open. Priority ranges stay within 0..=255.
pub fn filter_ranges(priority: bool) -> impl Strategy<Value = Vec<FilterRange>> {
    let step = if priority {
        (0u64..40).boxed()
    } else {
        varint().boxed()
    };
    (vec((step.clone(), step.clone()), 0..4), opt(step)).prop_map(move |(pairs, open)| {
        let max = if priority { 255 } else { u64::MAX };
        let mut out = Vec::new();
        let mut prev_end = 0u64;
        for (gap, len) in pairs {
            let Some(start) = prev_end.checked_add(gap) else {
                break;
            };
            let Some(end) = start.checked_add(len).filter(|e| *e <= max) else {
                break;
            };
            out.push(FilterRange {
                start,
                end: Some(end),
            });
            prev_end = end;
        }
        if let Some(start) = open.and_then(|gap| prev_end.checked_add(gap)) {
            if start <= max {
                out.push(FilterRange { start, end: None });
            }
        }
        out
    })
}

/// One Range Filter parameter of any kind, sometimes the "remove" form (no body).
pub fn range_filter_param() -> BoxedStrategy<RangeFilterParam> {
    (0usize..5)
        .prop_flat_map(|i| {
            let kind = RangeFilterKind::ALL[i];
            let property_type = if kind.has_property_type() {
                varint().prop_map(|t| Some(t & !1)).boxed()
            } else {
                Just(None).boxed()
            };
            let filter = (
                prop_oneof![0u8..3, any::<u8>()],
                property_type,
                filter_ranges(kind == RangeFilterKind::Priority),
            )
                .prop_map(|(set_id, property_type, ranges)| RangeFilter {
                    set_id,
                    property_type,
                    ranges,
                });
            (Just(kind), proptest::option::weighted(0.85, filter))
        })
        .prop_map(|(kind, filter)| RangeFilterParam { kind, filter })
        .boxed()
}

/// Drops every parameter `ctx` may not carry under `v`, and makes the range filters valid:
/// sorted by kind (the order they decode in) and without repeated (kind, SetID, property type).
pub fn restrict(p: &mut Parameters, ctx: ParamContext, v: Version) {
    let ok = |ty| param_allowed(ty, ctx, v);
    if !ok(param::OBJECT_DELIVERY_TIMEOUT) {
        p.object_delivery_timeout = None;
    }
    if !ok(param::AUTHORIZATION_TOKEN) {
        p.authorization_tokens.clear();
    }
    if !ok(param::RENDEZVOUS_TIMEOUT) {
        p.rendezvous_timeout = None;
    }
    if !ok(param::SUBGROUP_DELIVERY_TIMEOUT) {
        p.subgroup_delivery_timeout = None;
    }
    if !ok(param::EXPIRES) {
        p.expires = None;
    }
    if !ok(param::LARGEST_OBJECT) {
        p.largest_object = None;
    }
    if !ok(param::FILL_TIMEOUT) {
        p.fill_timeout = None;
    }
    if !ok(param::FORWARD) {
        p.forward = None;
    }
    if !ok(param::SUBSCRIBER_PRIORITY) {
        p.subscriber_priority = None;
    }
    if !ok(param::LOCATION_FILTER) {
        p.location_filter = None;
    }
    if !ok(param::GROUP_ORDER) {
        p.group_order = None;
    }
    if !ok(param::NEW_GROUP_REQUEST) {
        p.new_group_request = None;
    }
    if !ok(param::TRACK_NAMESPACE_PREFIX) {
        p.track_namespace_prefix = None;
    }
    // HOP_PATH and ROUTE_COST share their places (the MoQ Cluster rows).
    if !ok(param::HOP_PATH) {
        p.cluster = None;
    }
    p.range_filters.retain(|f| ok(f.kind.param_type()));
    p.range_filters.sort_by_key(|f| f.kind);
    let mut seen = Vec::new();
    p.range_filters.retain(|f| match &f.filter {
        None => true,
        Some(r) => {
            let key = (f.kind, r.set_id, r.property_type);
            let fresh = !seen.contains(&key);
            seen.push(key);
            fresh
        }
    });
}

/// Parameters holding only what `ctx` allows under `v`.
pub fn parameters(ctx: ParamContext, v: Version) -> BoxedStrategy<Parameters> {
    let a = (
        opt(varint()),
        vec(auth_token(), 0..3),
        opt(varint()),
        opt(varint()),
        opt(varint()),
        opt(location()),
        opt(varint()),
        opt(any::<bool>()),
    );
    let b = (
        opt(any::<u8>()),
        opt(location_filter()),
        opt(group_order()),
        vec(range_filter_param(), 0..4),
        opt(varint()),
        opt(small_namespace()),
    );
    // MoQ Cluster: a HOP_PATH of distinct hops (HopPath::new refuses a repeat), a ROUTE_COST.
    let c = (
        opt(vec(varint(), 1..4)).prop_map(|h| h.and_then(moq_core::message::cluster::HopPath::new)),
        opt(varint()),
    );
    (a, b, c)
        .prop_map(move |(a, b, c)| {
            let mut p = Parameters {
                object_delivery_timeout: a.0,
                authorization_tokens: a.1,
                rendezvous_timeout: a.2,
                subgroup_delivery_timeout: a.3,
                expires: a.4,
                largest_object: a.5,
                fill_timeout: a.6,
                forward: a.7,
                subscriber_priority: b.0,
                location_filter: b.1,
                group_order: b.2,
                range_filters: b.3,
                new_group_request: b.4,
                track_namespace_prefix: b.5,
                fill: None,
                include_properties: None,
                cluster: None,
            };
            p = p.with_cluster(c.0, c.1);
            restrict(&mut p, ctx, v);
            p
        })
        .boxed()
}

/// A reason phrase of up to 1024 bytes.
pub fn reason() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "\\PC{0,24}",
        1 => "[a-z]{1024}",
    ]
}

/// An unknown Setup Option for `v` (GREASE among them), with the right shape for its parity.
pub fn unknown_setup_option(v: Version) -> impl Strategy<Value = KeyValuePair> {
    let known = move |k: &u64| {
        matches!(
            *k,
            setup_option::PATH
                | setup_option::AUTHORIZATION_TOKEN
                | setup_option::MAX_AUTH_TOKEN_CACHE_SIZE
                | setup_option::AUTHORITY
                | setup_option::MOQT_IMPLEMENTATION
        ) || (v.has_range_filters() && *k == setup_option::MAX_FILTER_RANGES)
            || (v.has_max_request_updates() && *k == setup_option::MAX_REQUEST_UPDATES)
            || (v.has_cluster_extension()
                && matches!(*k, setup_option::HOP_ID | setup_option::RELAY_COST))
    };
    prop_oneof![0u64..16, Just(0x9D), Just(0x11C), varint()]
        .prop_filter("known option", move |k| !known(k))
        .prop_flat_map(|key| {
            if key % 2 == 0 {
                varint()
                    .prop_map(move |x| KeyValuePair {
                        key,
                        value: KvpValue::Int(x),
                    })
                    .boxed()
            } else {
                bytes_up_to(16)
                    .prop_map(move |b| KeyValuePair {
                        key,
                        value: KvpValue::Bytes(b),
                    })
                    .boxed()
            }
        })
}

/// SETUP with the options `v` knows, plus unknown ones.
pub fn setup(v: Version) -> impl Strategy<Value = Setup> {
    let draft19 = |s: BoxedStrategy<Option<u64>>| {
        if v.has_range_filters() {
            s
        } else {
            Just(None).boxed()
        }
    };
    (
        opt(bytes_up_to(24)),
        opt(bytes_up_to(24)),
        vec(auth_token(), 0..3),
        opt(varint()),
        draft19(opt(varint()).boxed()),
        opt("\\PC{0,16}"),
        draft19(opt(varint()).boxed()),
        vec(unknown_setup_option(v), 0..4),
    )
        .prop_map(
            |(
                path,
                authority,
                authorization_tokens,
                max_auth_token_cache_size,
                max_filter_ranges,
                implementation,
                max_request_updates,
                mut unknown,
            )| {
                unknown.sort_by_key(|p| p.key);
                Setup {
                    options: SetupOptions {
                        path,
                        authority,
                        authorization_tokens,
                        max_auth_token_cache_size,
                        max_filter_ranges,
                        implementation,
                        max_request_updates,
                        unknown,
                        ..Default::default()
                    },
                }
            },
        )
}

/// GOAWAY; the trailing Request ID only in versions that have it.
pub fn goaway(v: Version) -> impl Strategy<Value = Goaway> {
    let request_id = if v.goaway_has_request_id() {
        opt(varint()).boxed()
    } else {
        Just(None).boxed()
    };
    (
        prop_oneof![8 => bytes_up_to(40), 1 => vec(any::<u8>(), 8192..=8192).prop_map(Bytes::from)],
        varint(),
        request_id,
    )
        .prop_map(|(new_session_uri, timeout_ms, request_id)| Goaway {
            new_session_uri,
            timeout_ms,
            request_id,
        })
}

/// SUBSCRIBE.
pub fn subscribe(v: Version) -> impl Strategy<Value = Subscribe> {
    (
        varint(),
        full_track_name(),
        parameters(ParamContext::Subscribe, v),
    )
        .prop_map(|(request_id, track, params)| Subscribe {
            request_id,
            track,
            params,
        })
}

/// SUBSCRIBE_OK.
pub fn subscribe_ok(v: Version) -> impl Strategy<Value = SubscribeOk> {
    (
        varint(),
        parameters(ParamContext::SubscribeOk, v),
        properties(),
    )
        .prop_map(|(track_alias, params, track_properties)| SubscribeOk {
            track_alias,
            params,
            track_properties,
        })
}

/// REQUEST_UPDATE.
pub fn request_update(v: Version) -> impl Strategy<Value = RequestUpdate> {
    (varint(), parameters(ParamContext::AnyRequestUpdate, v))
        .prop_map(|(request_id, params)| RequestUpdate { request_id, params })
}

/// PUBLISH.
pub fn publish(v: Version) -> impl Strategy<Value = Publish> {
    (
        varint(),
        full_track_name(),
        varint(),
        parameters(ParamContext::Publish, v),
        properties(),
    )
        .prop_map(
            |(request_id, track, track_alias, params, track_properties)| Publish {
                request_id,
                track,
                track_alias,
                params,
                track_properties,
            },
        )
}

/// PUBLISH_DONE.
pub fn publish_done() -> impl Strategy<Value = PublishDone> {
    (
        varint(),
        prop_oneof![
            varint(),
            Just(PublishDone::unknown_stream_count(Version::Draft19)),
            Just(PublishDone::unknown_stream_count(Version::Draft20)),
        ],
        reason(),
    )
        .prop_map(|(status, stream_count, reason)| PublishDone {
            status: PublishDoneCode(status),
            stream_count,
            reason,
        })
}

/// Each of the three fetch types.
pub fn fetch_type() -> BoxedStrategy<FetchType> {
    prop_oneof![
        (full_track_name(), location(), location())
            .prop_map(|(track, start, end)| FetchType::Standalone { track, start, end }),
        (varint(), varint()).prop_map(|(joining_request_id, joining_start)| {
            FetchType::RelativeJoining {
                joining_request_id,
                joining_start,
            }
        }),
        (varint(), varint()).prop_map(|(joining_request_id, joining_start)| {
            FetchType::AbsoluteJoining {
                joining_request_id,
                joining_start,
            }
        }),
    ]
    .boxed()
}

/// FETCH.
pub fn fetch(v: Version) -> impl Strategy<Value = Fetch> {
    (varint(), fetch_type(), parameters(ParamContext::Fetch, v)).prop_map(
        |(request_id, fetch_type, params)| Fetch {
            request_id,
            fetch_type,
            params,
        },
    )
}

/// FETCH_OK.
pub fn fetch_ok(v: Version) -> impl Strategy<Value = FetchOk> {
    (
        any::<bool>(),
        location(),
        parameters(ParamContext::FetchOk, v),
        properties(),
    )
        .prop_map(
            |(end_of_track, end_location, params, track_properties)| FetchOk {
                end_of_track,
                end_location,
                params,
                track_properties,
            },
        )
}

/// TRACK_STATUS.
pub fn track_status(v: Version) -> impl Strategy<Value = TrackStatus> {
    (
        varint(),
        full_track_name(),
        parameters(ParamContext::TrackStatus, v),
    )
        .prop_map(|(request_id, track, params)| TrackStatus {
            request_id,
            track,
            params,
        })
}

/// PUBLISH_NAMESPACE.
pub fn publish_namespace(v: Version) -> impl Strategy<Value = PublishNamespace> {
    (
        varint(),
        namespace(),
        parameters(ParamContext::PublishNamespace, v),
    )
        .prop_map(|(request_id, namespace, params)| PublishNamespace {
            request_id,
            namespace,
            params,
        })
}

/// SUBSCRIBE_NAMESPACE; the prefix may have zero fields.
pub fn subscribe_namespace(v: Version) -> impl Strategy<Value = SubscribeNamespace> {
    (
        varint(),
        namespace(),
        parameters(ParamContext::SubscribeNamespace, v),
    )
        .prop_map(|(request_id, prefix, params)| SubscribeNamespace {
            request_id,
            prefix,
            params,
        })
}

/// SUBSCRIBE_TRACKS.
pub fn subscribe_tracks(v: Version) -> impl Strategy<Value = SubscribeTracks> {
    (
        varint(),
        namespace(),
        parameters(ParamContext::SubscribeTracks, v),
    )
        .prop_map(|(request_id, prefix, params)| SubscribeTracks {
            request_id,
            prefix,
            params,
        })
}

/// PUBLISH_SKIPPED: suffix plus name within 4096 bytes.
pub fn publish_skipped() -> impl Strategy<Value = PublishSkipped> {
    full_track_name().prop_map(|t| PublishSkipped {
        suffix: t.namespace,
        name: t.name,
    })
}

/// REQUEST_OK with any parameter some REQUEST_OK role allows.
pub fn request_ok(v: Version) -> impl Strategy<Value = RequestOk> {
    (parameters(ParamContext::AnyRequestOk, v), properties()).prop_map(
        |(params, track_properties)| RequestOk {
            params,
            track_properties,
        },
    )
}

/// REQUEST_ERROR: any code but REDIRECT without a Redirect, or REDIRECT with one.
pub fn request_error() -> impl Strategy<Value = RequestError> {
    let plain = (
        varint().prop_filter("not REDIRECT", |c| *c != RequestErrorCode::REDIRECT.0),
        varint(),
        reason(),
    )
        .prop_map(|(code, retry_interval, reason)| RequestError {
            code: RequestErrorCode(code),
            retry_interval,
            reason,
            redirect: None,
        });
    let redirect = (
        varint(),
        reason(),
        prop_oneof![4 => bytes_up_to(40), 1 => vec(any::<u8>(), 8192..=8192).prop_map(Bytes::from)],
        prop_oneof![Just(FullTrackName::default()), full_track_name()],
    )
        .prop_map(
            |(retry_interval, reason, connect_uri, track)| RequestError {
                code: RequestErrorCode::REDIRECT,
                retry_interval,
                reason,
                redirect: Some(Box::new(Redirect { connect_uri, track })),
            },
        );
    prop_oneof![plain, redirect]
}

/// Any control message valid under `v`.
pub fn any_message(v: Version) -> impl Strategy<Value = Message> {
    prop_oneof![
        setup(v).prop_map(Message::from),
        goaway(v).prop_map(Message::from),
        subscribe(v).prop_map(Message::from),
        subscribe_ok(v).prop_map(Message::from),
        request_update(v).prop_map(Message::from),
        publish(v).prop_map(Message::from),
        publish_done().prop_map(Message::from),
        fetch(v).prop_map(Message::from),
        fetch_ok(v).prop_map(Message::from),
        track_status(v).prop_map(Message::from),
        publish_namespace(v).prop_map(Message::from),
        namespace().prop_map(|suffix| Message::from(Namespace {
            suffix,
            cluster: None
        })),
        namespace().prop_map(|suffix| Message::from(NamespaceDone { suffix })),
        subscribe_namespace(v).prop_map(Message::from),
        subscribe_tracks(v).prop_map(Message::from),
        publish_skipped().prop_map(Message::from),
        request_ok(v).prop_map(Message::from),
        request_error().prop_map(Message::from),
    ]
}

/// A version and a control message valid under it.
pub fn versioned_message() -> impl Strategy<Value = (Version, Message)> {
    version().prop_flat_map(|v| (Just(v), any_message(v)))
}

/// Splits `data` into chunks of the given sizes (cycled); the rest goes in one last chunk.
pub fn chunks<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = if sizes.is_empty() {
            rest.len()
        } else {
            sizes[i % sizes.len()].clamp(1, rest.len())
        };
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
        i += 1;
    }
    out
}
