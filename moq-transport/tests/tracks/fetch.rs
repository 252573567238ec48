//! FETCH: standalone in both orders, range filters, joining FETCH against a SUBSCRIBE or a PUBLISH,
//! fill fetch streams (draft-19 §5.2, §10.12, §10.13, §11.4.4; draft-21 §3.4).

use bytes::Bytes;
use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::data::RangeEnd;
use moq_core::message::{FetchType, Parameters};
use moq_core::{GroupOrder, Location, LocationFilter, Properties, Version, property};
use moq_transport::SessionConfig;
use moq_transport::track::{FetchEnd, FetchItem, Incoming, Object, SubscribeResponse};

use crate::common::{TestServer, Transport, case, rejected_code, timeout, transports};
use crate::support::{collect, next_subscribe, pair_with_requests, subscribe_accepted, track};

#[tokio::test]
async fn standalone_fetch_in_both_orders() {
    for transport in transports() {
        for order in [GroupOrder::Ascending, GroupOrder::Descending] {
            case(format!("{transport:?} {order:?}"), async {
                let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
                let request = FetchType::Standalone {
                    track: track("vod"),
                    start: Location::new(1, 0),
                    end: Location::new(3, 0),
                };
                let params = Parameters {
                    group_order: Some(order),
                    ..Default::default()
                };
                let serve = async {
                    let f = match server.incoming().next().await.unwrap() {
                        Incoming::Fetch(f) => f,
                        other => panic!("{other:?}"),
                    };
                    assert_eq!(f.start(), Location::new(1, 0));
                    assert!(
                        f.contains(Location::new(3, 99)),
                        "object 0 in End means the whole group"
                    );
                    assert!(!f.contains(Location::new(4, 0)));
                    assert_eq!(f.group_order(), order);
                    let mut w = f
                        .accept(FetchEnd {
                            end_of_track: false,
                            end: Location::new(3, 2),
                            track_properties: Properties::new(),
                        })
                        .await
                        .unwrap();
                    let groups: Vec<u64> = if order == GroupOrder::Ascending {
                        vec![1, 2, 3]
                    } else {
                        vec![3, 2, 1]
                    };
                    for (i, g) in groups.iter().enumerate() {
                        if *g == 2 {
                            continue;
                        }
                        for o in 0..2u64 {
                            let obj = moq_transport::track::Object {
                                location: Location::new(*g, o),
                                subgroup: Some(0),
                                priority: 1,
                                payload: Bytes::from(format!("{g}.{o}")),
                                ..Default::default()
                            };
                            w.write(&obj).await.unwrap();
                        }
                        if i == 0 && order == GroupOrder::Ascending {
                            // Group 2 does not exist.
                            w.end_of_range(RangeEnd::NonExistent, Location::new(2, 9))
                                .await
                                .unwrap();
                        }
                    }
                    w.finish();
                };
                let (resp, ()) = tokio::join!(client.fetch(request, params), serve);
                let mut resp = resp.unwrap();
                assert_eq!(resp.end().end, Location::new(3, 2));
                let mut got = Vec::new();
                while let Some(item) = resp.next().await {
                    got.push(item.unwrap());
                }
                let locs: Vec<Location> = got
                    .iter()
                    .filter_map(|i| match i {
                        FetchItem::Object(o) => Some(o.location),
                        _ => None,
                    })
                    .collect();
                let expected: Vec<Location> = match order {
                    GroupOrder::Ascending => vec![(1, 0), (1, 1), (3, 0), (3, 1)],
                    GroupOrder::Descending => vec![(3, 0), (3, 1), (1, 0), (1, 1)],
                }
                .into_iter()
                .map(|(g, o)| Location::new(g, o))
                .collect();
                assert_eq!(locs, expected, "{transport:?} {order:?}");
                if order == GroupOrder::Ascending {
                    assert!(got.contains(&FetchItem::EndOfRange {
                        kind: RangeEnd::NonExistent,
                        location: Location::new(2, 9)
                    }));
                }
            })
            .await;
        }
    }
}

/// draft-19 §5.1.3, §10.12: a FETCH's Range Filters are honoured by the responder whatever
/// the application writes: with OBJECTID [1, 1] and SUBGROUP [0, 0], only object 1 of
/// subgroup 0 of each group is delivered (a relay serving from its cache or from upstream
/// writes through the same writer).
#[tokio::test]
async fn fetch_honours_its_range_filters() {
    use moq_core::{FilterRange, RangeFilter, RangeFilterKind, RangeFilterParam};
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let one = |kind, start, end| RangeFilterParam {
            kind,
            filter: Some(RangeFilter {
                set_id: 0,
                property_type: None,
                ranges: vec![FilterRange {
                    start,
                    end: Some(end),
                }],
            }),
        };
        let params = Parameters {
            range_filters: vec![
                one(RangeFilterKind::Subgroup, 0, 0),
                one(RangeFilterKind::ObjectId, 1, 1),
            ],
            ..Default::default()
        };
        let request = FetchType::Standalone {
            track: track("filtered"),
            start: Location::new(0, 0),
            end: Location::new(2, 0),
        };
        let serve = async {
            let f = match server.incoming().next().await.unwrap() {
                Incoming::Fetch(f) => f,
                other => panic!("{other:?}"),
            };
            let mut w = f
                .accept(FetchEnd {
                    end_of_track: false,
                    end: Location::new(2, 0),
                    track_properties: Properties::new(),
                })
                .await
                .unwrap();
            for g in 0..2u64 {
                for (subgroup, o) in [(0, 0), (0, 1), (1, 2), (0, 3)] {
                    let obj = moq_transport::track::Object {
                        location: Location::new(g, o),
                        subgroup: Some(subgroup),
                        payload: Bytes::from(format!("{g}.{o}")),
                        ..Default::default()
                    };
                    w.write(&obj).await.unwrap();
                }
            }
            w.finish();
        };
        let (resp, ()) = tokio::join!(client.fetch(request, params), serve);
        let mut resp = resp.unwrap();
        let mut got = Vec::new();
        while let Some(item) = resp.next().await {
            if let FetchItem::Object(o) = item.unwrap() {
                got.push(o.location);
            }
        }
        assert_eq!(got, vec![Location::new(0, 1), Location::new(1, 1)]);
    })
    .await;
}

/// draft-19 §5.1.5, §10.2.16: SUBSCRIBE with Forward=0, then REQUEST_UPDATE Forward=1, then a
/// Joining FETCH: the update's REQUEST_UPDATE_OK carries the Largest Location seeded from
/// SUBSCRIBE_OK, and the Joining FETCH resolves against it.
#[tokio::test]
async fn forward_zero_update_then_joining_fetch() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let response = SubscribeResponse {
            largest: Some(Location::new(5, 1)),
            ..Default::default()
        };
        let params = Parameters {
            forward: Some(false),
            ..Default::default()
        };
        let (sub, _writer) =
            subscribe_accepted(&client, &server, track("fz"), params, response).await;
        let largest = sub
            .update(Parameters {
                forward: Some(true),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(largest, Some(Location::new(5, 1)));
        let request = FetchType::RelativeJoining {
            joining_request_id: sub.request_id(),
            joining_start: 0,
        };
        let serve = async {
            let f = match server.incoming().next().await.unwrap() {
                Incoming::Fetch(f) => f,
                other => panic!("{other:?}"),
            };
            assert_eq!(f.start(), Location::new(5, 0));
            assert_eq!(f.end(), Location::new(5, 2));
            f.accept(FetchEnd {
                end_of_track: false,
                end: Location::new(5, 2),
                track_properties: Properties::new(),
            })
            .await
            .unwrap()
            .finish();
        };
        let (resp, ()) = tokio::join!(client.fetch(request, Parameters::default()), serve);
        assert!(resp.unwrap().next().await.is_none());
    })
    .await;
}

/// draft-19 §5.1, §10.12.2: a Joining FETCH may name a subscription created by PUBLISH; it
/// resolves against the Largest Location the PUBLISH carried.
#[tokio::test]
async fn joining_fetch_names_a_publish() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let options = moq_transport::track::PublishOptions {
            largest: Some(Location::new(4, 2)),
            ..Default::default()
        };
        let published = client.publish(track("pj"), options).await.unwrap();
        let incoming = match server.incoming().next().await.unwrap() {
            Incoming::Publish(p) => p,
            other => panic!("{other:?}"),
        };
        let sub = incoming.accept(Parameters::default()).await.unwrap();
        published.accepted().await.unwrap();
        let request = FetchType::RelativeJoining {
            joining_request_id: sub.request_id(),
            joining_start: 1,
        };
        let serve = async {
            let f = match client.incoming().next().await.unwrap() {
                Incoming::Fetch(f) => f,
                other => panic!("{other:?}"),
            };
            // Start {4 - 1, 0}, End {4, 2 + 1}.
            assert_eq!(f.track(), &track("pj"));
            assert_eq!(f.start(), Location::new(3, 0));
            assert_eq!(f.end(), Location::new(4, 3));
            let w = f
                .accept(FetchEnd {
                    end_of_track: false,
                    end: Location::new(4, 3),
                    track_properties: Properties::new(),
                })
                .await
                .unwrap();
            w.finish();
        };
        let (resp, ()) = tokio::join!(server.fetch(request, Parameters::default()), serve);
        assert!(resp.unwrap().next().await.is_none());
    })
    .await;
}

/// Authorizes a SUBSCRIBE only after a while, as a relay checking a token may: what is
/// authorized after it is not held back.
struct SlowSubscribe;

#[async_trait::async_trait]
impl moq_transport::Authorizer for SlowSubscribe {
    async fn authorize(
        &self,
        _s: &moq_transport::SessionInfo,
        req: &moq_transport::AuthRequest<'_>,
    ) -> Result<(), moq_core::message::RequestError> {
        if req.kind == moq_transport::RequestKind::Subscribe {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        }
        Ok(())
    }
}

/// draft-19 §10.12.2: a Joining FETCH that arrives while the SUBSCRIBE it names is still being
/// authorized waits for it rather than being refused (a browser's player sends the two at
/// once; the relay's media check once saw INVALID_JOINING_REQUEST_ID "no such subscription").
#[tokio::test]
async fn joining_fetch_waits_for_a_subscribe_being_authorized() {
    timeout(async {
        let config = SessionConfig::default().with_requests();
        let mut srv = TestServer::start(config.clone().with_authorizer(SlowSubscribe));
        let (client, server) = srv
            .connect(Transport::Quic, vec![Version::Draft19], config)
            .await;
        // The SUBSCRIBE is the client's first request: Request ID 0 (draft-19 §10.1). The
        // FETCH follows at once, while the SUBSCRIBE waits for its authorization.
        let subscribe = client.subscribe(track("slow"), Parameters::default());
        let request = FetchType::RelativeJoining {
            joining_request_id: 0,
            joining_start: 0,
        };
        let fetch = async {
            let resp = client.fetch(request, Parameters::default()).await;
            resp.expect("the Joining FETCH was refused")
        };
        let serve = async {
            let response = SubscribeResponse {
                largest: Some(Location::new(3, 1)),
                ..Default::default()
            };
            let writer = next_subscribe(&server)
                .await
                .accept(response)
                .await
                .unwrap();
            let f = match server.incoming().next().await.unwrap() {
                Incoming::Fetch(f) => f,
                other => panic!("{other:?}"),
            };
            // Start {3 - 0, 0}, End {3, 1 + 1}.
            assert_eq!(f.start(), Location::new(3, 0));
            assert_eq!(f.end(), Location::new(3, 2));
            let end = FetchEnd {
                end_of_track: false,
                end: Location::new(3, 2),
                track_properties: Properties::new(),
            };
            f.accept(end).await.unwrap().finish();
            writer
        };
        let (sub, mut resp, _writer) = tokio::join!(subscribe, fetch, serve);
        assert_eq!(sub.unwrap().request_id(), 0);
        assert!(resp.next().await.is_none());
    })
    .await;
}

#[tokio::test]
async fn joining_fetch_resolves_against_the_subscription() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let response = SubscribeResponse {
            largest: Some(Location::new(10, 4)),
            ..Default::default()
        };
        let (sub, _writer) = subscribe_accepted(
            &client,
            &server,
            track("j"),
            Parameters::default(),
            response,
        )
        .await;
        let request = FetchType::RelativeJoining {
            joining_request_id: sub.request_id(),
            joining_start: 2,
        };
        let serve = async {
            let f = match server.incoming().next().await.unwrap() {
                Incoming::Fetch(f) => f,
                other => panic!("{other:?}"),
            };
            // draft-19 §10.12.2.1: Start {10 - 2, 0}, End {10, 4 + 1}.
            assert_eq!(f.track(), &track("j"));
            assert_eq!(f.start(), Location::new(8, 0));
            assert_eq!(f.end(), Location::new(10, 5));
            let w = f
                .accept(FetchEnd {
                    end_of_track: false,
                    end: f_end(),
                    track_properties: Properties::new(),
                })
                .await
                .unwrap();
            w.finish();
        };
        fn f_end() -> Location {
            Location::new(10, 5)
        }
        let (resp, ()) = tokio::join!(client.fetch(request, Parameters::default()), serve);
        let mut resp = resp.unwrap();
        assert!(resp.next().await.is_none());

        // An unknown Request ID: INVALID_JOINING_REQUEST_ID.
        let bad = FetchType::AbsoluteJoining {
            joining_request_id: 1000,
            joining_start: 0,
        };
        assert_eq!(
            rejected_code(client.fetch(bad, Parameters::default()).await.unwrap_err()),
            RequestErrorCode::INVALID_JOINING_REQUEST_ID
        );
        // A subscription with no objects yet: INVALID_RANGE.
        let (sub2, _w2) = subscribe_accepted(
            &client,
            &server,
            track("k"),
            Parameters::default(),
            SubscribeResponse::default(),
        )
        .await;
        let join_empty = FetchType::RelativeJoining {
            joining_request_id: sub2.request_id(),
            joining_start: 0,
        };
        assert_eq!(
            rejected_code(
                client
                    .fetch(join_empty, Parameters::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::INVALID_RANGE
        );
    })
    .await;
}

/// draft-21 §3.4 (from draft-20): FILL_PARAMETERS gives the publisher the fill range resolved
/// against its Largest Object (`take_fill`), the fill fetch stream carries the SUBSCRIBE's
/// Request ID and no FETCH_OK, its objects reach `Subscription::take_fill`, and it counts in
/// PUBLISH_DONE's Stream Count; a fill whose range is empty opens nothing. Also §9.20.22:
/// INCLUDE_PROPERTIES 0 leaves SUBSCRIBE_OK's Track Properties empty.
#[tokio::test]
async fn fill_fetch_stream_and_include_properties() {
    for transport in transports() {
        for version in [Version::Draft20, Version::Draft22] {
            case(format!("{transport:?} {version:?}"), async {
                let (client, server, _srv) = pair_with_requests(transport, version).await;
                let props = Properties::new()
                    .with_int(property::DEFAULT_PUBLISHER_PRIORITY, 7)
                    .unwrap();
                let response = SubscribeResponse {
                    largest: Some(Location::new(4, 2)),
                    track_properties: props,
                    ..Default::default()
                };
                let params = Parameters {
                    location_filter: Some(LocationFilter::LargestObject),
                    include_properties: Some(false),
                    fill: Some(Box::new(Parameters {
                        location_filter: Some(LocationFilter::RelativeGroups(1)),
                        ..Default::default()
                    })),
                    ..Default::default()
                };
                let (mut sub, writer) =
                    subscribe_accepted(&client, &server, track("fill"), params, response).await;
                assert!(sub.info().track_properties.is_empty(), "{version}");
                let fill = writer.take_fill().expect("a fill");
                assert_eq!(fill.request_id, sub.request_id());
                assert_eq!(
                    (fill.start, fill.end),
                    (Location::new(4, 0), Location::new(4, 2))
                );
                let mut w = writer.open_fill(&fill).await.unwrap();
                for o in 0..3 {
                    w.write(&Object {
                        location: Location::new(4, o),
                        subgroup: Some(0),
                        payload: Bytes::from(format!("4.{o}")),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                }
                w.finish();
                let mut got = Vec::new();
                let mut response = sub.take_fill().expect("the fill fetch stream");
                while let Some(item) = response.next().await {
                    if let FetchItem::Object(o) = item.unwrap() {
                        got.push(o.location);
                    }
                }
                assert_eq!(got, (0..3).map(|o| Location::new(4, o)).collect::<Vec<_>>());
                // A REQUEST_UPDATE's fill: its own stream, with the update's Request ID.
                let again = Parameters {
                    fill: Some(Box::new(Parameters {
                        location_filter: Some(LocationFilter::RelativeGroups(1)),
                        ..Default::default()
                    })),
                    ..Default::default()
                };
                let asked = async {
                    let fill = writer.fill_asked().await;
                    let mut w = writer.open_fill(&fill).await.unwrap();
                    w.write(&Object {
                        location: Location::new(4, 2),
                        subgroup: Some(0),
                        payload: Bytes::from_static(b"again"),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                    w.finish();
                    fill
                };
                let (updated, fill) = tokio::join!(sub.update_with_fill(again), asked);
                let (_, response) = updated.unwrap();
                assert_ne!(fill.request_id, sub.request_id());
                let mut response = response.expect("the update's fill fetch stream");
                let item = response.next().await.unwrap().unwrap();
                assert!(matches!(item, FetchItem::Object(o) if o.payload == "again"));
                assert!(response.next().await.is_none());
                writer
                    .clone()
                    .finish(PublishDoneCode::TRACK_ENDED, "bye")
                    .await
                    .unwrap();
                let (_, err) = collect(&mut sub).await;
                assert!(err.is_none(), "{err:?}");
                assert_eq!(sub.publish_done().unwrap().stream_count, 2);
                // Next Object as the fill's range: empty, no stream on either side.
                let params = Parameters {
                    fill: Some(Box::new(Parameters {
                        location_filter: Some(LocationFilter::LargestObject),
                        ..Default::default()
                    })),
                    ..Default::default()
                };
                let response = SubscribeResponse {
                    largest: Some(Location::new(4, 2)),
                    ..Default::default()
                };
                let (mut sub, writer) =
                    subscribe_accepted(&client, &server, track("empty"), params, response).await;
                assert!(writer.take_fill().is_none());
                assert!(sub.take_fill().is_none());
            })
            .await;
        }
    }
}
