//! Subscriptions and the data plane over loopback QUIC and WebTransport, draft-18 and -19:
//! SUBSCRIBE / SUBSCRIBE_OK / PUBLISH_DONE, REQUEST_UPDATE, unsubscribe, subgroup streams,
//! datagrams, PUBLISH, FETCH (standalone and joining), TRACK_STATUS, SUBSCRIBE_TRACKS and
//! filters (draft-19 §5, §10.7-§10.20, §11).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{TestServer, Transport, case, rejected_code, timeout, transports};
use moq_core::codes::{PublishDoneCode, RequestErrorCode, StreamResetCode};
use moq_core::data::{RangeEnd, SubgroupId};
use moq_core::message::{FetchType, Parameters, RequestError};
use moq_core::{
    FullTrackName, GroupOrder, Location, LocationFilter, Properties, TrackNamespace, Version,
    property,
};
use moq_transport::track::{
    FetchEnd, FetchItem, Incoming, Object, SubscribeResponse, Subscription, TrackEvent,
    TrackStatusInfo,
};
use moq_transport::{Error, Session, SessionConfig};

fn track(name: &str) -> FullTrackName {
    FullTrackName::new(
        TrackNamespace::from_strs(["live", "room"]).unwrap(),
        name.as_bytes().to_vec(),
    )
    .unwrap()
}

/// A client (subscriber) and a server session that takes requests (publisher).
async fn pair_with_requests(
    transport: Transport,
    version: Version,
) -> (Session, Session, TestServer) {
    let mut srv = TestServer::start(SessionConfig::default().with_requests());
    let (c, s) = srv
        .connect(
            transport,
            vec![version],
            SessionConfig::default().with_requests(),
        )
        .await;
    (c, s, srv)
}

async fn next_subscribe(s: &Session) -> moq_transport::track::IncomingSubscribe {
    match s.incoming().next().await.expect("no request") {
        Incoming::Subscribe(r) => r,
        other => panic!("expected SUBSCRIBE, got {other:?}"),
    }
}

/// Subscribes and has the server accept with `response`.
async fn subscribe_accepted(
    client: &Session,
    server: &Session,
    t: FullTrackName,
    params: Parameters,
    response: SubscribeResponse,
) -> (Subscription, moq_transport::track::SubscriptionWriter) {
    let accept = async {
        let req = next_subscribe(server).await;
        req.accept(response).await.unwrap()
    };
    let (sub, writer) = tokio::join!(client.subscribe(t, params), accept);
    (sub.unwrap(), writer)
}

/// Sessions at draft-19 over `transport` and a subscription to `name` with default
/// parameters, accepted as is. The sessions are returned to be kept alive.
async fn plain_subscription(
    transport: Transport,
    name: &str,
) -> (
    Subscription,
    moq_transport::track::SubscriptionWriter,
    (Session, Session, TestServer),
) {
    let (client, server, srv) = pair_with_requests(transport, Version::Draft19).await;
    let (sub, writer) = subscribe_accepted(
        &client,
        &server,
        track(name),
        Parameters::default(),
        SubscribeResponse::default(),
    )
    .await;
    (sub, writer, (client, server, srv))
}

/// Subscribes with the Location Filter `filter`, accepted as is.
async fn filtered(
    client: &Session,
    server: &Session,
    t: FullTrackName,
    filter: LocationFilter,
) -> (Subscription, moq_transport::track::SubscriptionWriter) {
    let params = Parameters {
        location_filter: Some(filter),
        ..Default::default()
    };
    subscribe_accepted(client, server, t, params, SubscribeResponse::default()).await
}

/// Ends the track (PUBLISH_DONE, TRACK_ENDED).
async fn end(writer: &moq_transport::track::SubscriptionWriter) {
    writer
        .clone()
        .finish(PublishDoneCode::TRACK_ENDED, "")
        .await
        .unwrap();
}

/// Reads every object of every subgroup until the subscription ends.
async fn collect(sub: &mut Subscription) -> (Vec<(Location, Bytes)>, Option<Error>) {
    let mut out = Vec::new();
    loop {
        match sub.next().await {
            Some(Ok(TrackEvent::Subgroup(mut s))) => {
                while let Some(o) = s.next_object().await.unwrap() {
                    out.push((o.location, o.payload));
                }
            }
            Some(Ok(TrackEvent::Datagram(o))) => out.push((o.location, o.payload)),
            Some(Err(e)) => return (out, Some(e)),
            None => return (out, None),
        }
    }
}

#[tokio::test]
async fn subscribe_objects_and_publish_done() {
    for transport in transports() {
        for version in Version::ALL {
            case(format!("{transport:?} {version:?}"), async {
                let (client, server, _srv) = pair_with_requests(transport, *version).await;
                let t = track("video");
                let props = Properties::new()
                    .with_int(property::DEFAULT_PUBLISHER_PRIORITY, 7)
                    .unwrap();
                let response = SubscribeResponse {
                    largest: Some(Location::new(4, 2)),
                    track_properties: props.clone(),
                    ..Default::default()
                };
                let (mut sub, writer) = subscribe_accepted(
                    &client,
                    &server,
                    t.clone(),
                    Parameters::default(),
                    response,
                )
                .await;
                assert_eq!(writer.track(), &t);
                assert_eq!(sub.info().largest, Some(Location::new(4, 2)));
                // Drafts 14-15 have no Track Properties in SUBSCRIBE_OK (only its own fields).
                if version.has_track_extensions() {
                    assert_eq!(sub.info().track_properties, props);
                    assert_eq!(sub.info().publisher_priority(), 7);
                }
                assert_eq!(sub.info().track_alias, writer.track_alias());

                for g in 5..8u64 {
                    let mut s = writer
                        .open_subgroup(g, SubgroupId::Zero, None, true)
                        .await
                        .unwrap();
                    for o in 0..3u64 {
                        s.write_object(o, Bytes::from(format!("{g}.{o}")))
                            .await
                            .unwrap();
                    }
                    s.finish();
                }
                writer
                    .clone()
                    .finish(PublishDoneCode::TRACK_ENDED, "bye")
                    .await
                    .unwrap();
                let (objects, err) = collect(&mut sub).await;
                assert!(err.is_none(), "{err:?}");
                assert_eq!(objects.len(), 9, "{transport:?} {version}");
                let mut sorted = objects.clone();
                sorted.sort_by_key(|(l, _)| *l);
                assert_eq!(sorted[0], (Location::new(5, 0), Bytes::from("5.0")));
                let done = sub.publish_done().unwrap();
                assert_eq!(done.status, PublishDoneCode::TRACK_ENDED);
                assert_eq!(done.stream_count, 3, "exact Stream Count");
                assert_eq!(writer.largest(), Some(Location::new(7, 2)));
            })
            .await;
        }
    }
}

#[tokio::test]
async fn rejection_and_no_handler() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let reject = async {
            next_subscribe(&server)
                .await
                .reject(RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "nope"))
        };
        let (sub, ()) = tokio::join!(client.subscribe(track("x"), Parameters::default()), reject);
        assert_eq!(
            rejected_code(sub.unwrap_err()),
            RequestErrorCode::DOES_NOT_EXIST
        );
        // A session that does not take requests refuses them (the server-side default).
        let mut srv = TestServer::start(SessionConfig::default());
        let (client, _server) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        assert_eq!(
            rejected_code(
                client
                    .subscribe(track("x"), Parameters::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
        // Reserved namespaces do not exist (draft-19 §3.2.1).
        let dot = FullTrackName::new(TrackNamespace::from_strs(["."]).unwrap(), "t").unwrap();
        assert_eq!(
            rejected_code(
                client
                    .subscribe(dot, Parameters::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
    })
    .await;
}

#[tokio::test]
async fn unsubscribe_reaches_the_publisher() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (sub, writer, _sessions) = plain_subscription(transport, "a").await;
            drop(sub);
            let err = writer.cancelled().await;
            assert!(
                matches!(err, Error::Cancelled(StreamResetCode::CANCELLED)),
                "{err:?}"
            );
            assert!(
                writer
                    .open_subgroup(0, SubgroupId::Zero, None, false)
                    .await
                    .is_err()
            );
        })
        .await;
    }
}

#[tokio::test]
async fn request_update_changes_forward_and_answers_once() {
    // Draft-14's SUBSCRIBE_UPDATE has no answer to carry LARGEST_OBJECT.
    for version in Version::ALL.iter().filter(|v| v.update_is_answered()) {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, *version).await;
            let (sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("u"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            writer.observe(Location::new(3, 1));
            let largest = sub
                .update(Parameters {
                    forward: Some(false),
                    subscriber_priority: Some(9),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(
                largest,
                Some(Location::new(3, 1)),
                "REQUEST_UPDATE_OK carries LARGEST_OBJECT"
            );
            let p = writer.params();
            assert!(!p.forward);
            assert_eq!(p.subscriber_priority, 9);
            assert!(!writer.is_forwarding());
        })
        .await;
    }
}

#[tokio::test]
async fn datagrams_are_delivered() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let (mut sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("d"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            let obj = moq_transport::track::Object {
                location: Location::new(1, 2),
                priority: 3,
                payload: Bytes::from_static(b"hello"),
                ..Default::default()
            };
            // Datagrams are unreliable; on loopback they arrive. Send a few, take the first.
            for _ in 0..3 {
                assert!(writer.send_datagram(&obj).unwrap());
            }
            match sub.next().await.unwrap().unwrap() {
                TrackEvent::Datagram(o) => {
                    assert_eq!(o.location, Location::new(1, 2));
                    assert_eq!(o.priority, 3);
                    assert_eq!(&o.payload[..], b"hello");
                    assert_eq!(o.subgroup, None);
                }
                other => panic!("{other:?}"),
            }
        })
        .await;
    }
}

#[tokio::test]
async fn location_filter_is_enforced_by_the_publisher() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let filter = LocationFilter::AbsoluteRange {
            end_object: None,
            start: Location::new(2, 1),
            end_group_delta: 1,
        };
        let (mut sub, writer) = filtered(&client, &server, track("f"), filter).await;
        for g in 0..5u64 {
            let mut s = writer
                .open_subgroup(g, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            for o in 0..2u64 {
                s.write_object(o, Bytes::from_static(b"x")).await.unwrap();
            }
            s.finish();
        }
        end(&writer).await;
        let (objects, err) = collect(&mut sub).await;
        assert!(err.is_none());
        let mut locs: Vec<Location> = objects.into_iter().map(|(l, _)| l).collect();
        locs.sort();
        assert_eq!(
            locs,
            vec![
                Location::new(2, 1),
                Location::new(3, 0),
                Location::new(3, 1)
            ]
        );
    })
    .await;
}

/// Objects written several at once (`SubgroupSender::write_objects`) arrive like objects
/// written one by one, in order and filtered alike: a batch that straddles the filter's start
/// sends only what passes, and the stream does not claim FIRST_OBJECT (draft-19 §2.2).
#[tokio::test]
async fn objects_written_together_arrive_and_are_filtered() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let filter = LocationFilter::AbsoluteStart(Location::new(1, 2));
            let (mut sub, writer) = filtered(&client, &server, track("batched"), filter).await;
            for g in 0..3u64 {
                let mut s = writer
                    .open_subgroup(g, SubgroupId::Zero, None, false)
                    .await
                    .unwrap();
                s.write_objects((0..5u64).map(|o| (o, Bytes::from(format!("{g}.{o}")))))
                    .await
                    .unwrap();
                s.write_objects([(5, Bytes::new())]).await.unwrap();
                s.finish();
            }
            end(&writer).await;
            let mut got = Vec::new();
            let mut first_objects = Vec::new();
            loop {
                match sub.next().await {
                    Some(Ok(TrackEvent::Subgroup(mut s))) => {
                        first_objects.push((s.group(), s.first_object()));
                        while let Some(o) = s.next_object().await.unwrap() {
                            got.push((o.location, o.payload));
                        }
                    }
                    Some(Ok(TrackEvent::Datagram(_))) => panic!("no datagrams were sent"),
                    Some(Err(e)) => panic!("{transport:?}: {e:?}"),
                    None => break,
                }
            }
            got.sort_by_key(|(l, _)| *l);
            let mut want = Vec::new();
            for g in 1..3u64 {
                let from = if g == 1 { 2 } else { 0 };
                for o in from..5u64 {
                    want.push((Location::new(g, o), Bytes::from(format!("{g}.{o}"))));
                }
                want.push((Location::new(g, 5), Bytes::new()));
            }
            assert_eq!(got, want, "{transport:?}");
            first_objects.sort();
            // Group 0's objects were all before the start: its stream is its header alone, and
            // does not claim the group's first object either.
            assert_eq!(
                first_objects,
                vec![(0, false), (1, false), (2, true)],
                "{transport:?}"
            );
        })
        .await;
    }
}

/// Objects of every size class arrive whole and in order, written one by one and together:
/// small payloads are copied behind their header into shared chunks (one chunk per object,
/// several per batch up to 64 KiB), larger ones go as chunks of their own.
#[tokio::test]
async fn small_and_large_objects_arrive_whole() {
    let sizes = [0usize, 1, 1000, 4096, 4097, 70_000, 3, 0];
    let payload = |g: u64, o: u64, n: usize| -> Bytes {
        (0..n).map(|i| (i as u64 * 7 + g * 31 + o) as u8).collect()
    };
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let filter = LocationFilter::AbsoluteStart(Location::new(0, 0));
            let (mut sub, writer) = filtered(&client, &server, track("sizes"), filter).await;
            let mut want = Vec::new();
            for g in 0..3u64 {
                let mut s = writer
                    .open_subgroup(g, SubgroupId::Zero, None, false)
                    .await
                    .unwrap();
                // Group 0 one by one; group 1 in one batch; group 2 a batch of 100 small
                // objects (more than one 64 KiB chunk) between the sizes.
                let mut objects: Vec<(u64, Bytes)> = sizes
                    .iter()
                    .enumerate()
                    .map(|(o, &n)| (o as u64, payload(g, o as u64, n)))
                    .collect();
                if g == 2 {
                    let base = objects.len() as u64;
                    objects.extend((base..base + 100).map(|o| (o, payload(g, o, 1000))));
                }
                want.extend(
                    objects
                        .iter()
                        .map(|(o, p)| (Location::new(g, *o), p.clone())),
                );
                if g == 0 {
                    for (o, p) in objects {
                        s.write_object(o, p).await.unwrap();
                    }
                } else {
                    s.write_objects(objects).await.unwrap();
                }
                s.finish();
            }
            end(&writer).await;
            let mut got = Vec::new();
            while let Some(ev) = sub.next().await {
                match ev {
                    Ok(TrackEvent::Subgroup(mut s)) => {
                        while let Some(o) = s.next_object().await.unwrap() {
                            got.push((o.location, o.payload));
                        }
                    }
                    Ok(TrackEvent::Datagram(_)) => panic!("no datagrams were sent"),
                    Err(e) => panic!("{transport:?}: {e:?}"),
                }
            }
            got.sort_by_key(|(l, _)| *l);
            assert_eq!(got.len(), want.len(), "{transport:?}");
            assert!(got == want, "{transport:?}: payloads differ");
        })
        .await;
    }
}

#[tokio::test]
async fn publish_accepted_and_rejected() {
    for version in Version::ALL {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, *version).await;
            // The client publishes to the server.
            let published = client
                .publish(track("p"), Default::default())
                .await
                .unwrap();
            let incoming = match server.incoming().next().await.unwrap() {
                Incoming::Publish(p) => p,
                other => panic!("{other:?}"),
            };
            assert_eq!(incoming.track(), &track("p"));
            // Objects may flow before PUBLISH_OK.
            let writer = published.writer().clone();
            let mut s = writer
                .open_subgroup(0, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            s.write_object(0, Bytes::from_static(b"early"))
                .await
                .unwrap();
            s.finish();
            let mut sub = incoming.accept(Parameters::default()).await.unwrap();
            published.accepted().await.unwrap();
            writer
                .clone()
                .finish(PublishDoneCode::TRACK_ENDED, "")
                .await
                .unwrap();
            let (objects, err) = collect(&mut sub).await;
            assert!(err.is_none());
            assert_eq!(
                objects,
                vec![(Location::new(0, 0), Bytes::from_static(b"early"))]
            );

            // Rejected with UNINTERESTED.
            let published = client
                .publish(track("q"), Default::default())
                .await
                .unwrap();
            match server.incoming().next().await.unwrap() {
                Incoming::Publish(p) => {
                    p.reject(RequestError::new(RequestErrorCode::UNINTERESTED, "no"))
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(
                rejected_code(published.accepted().await.unwrap_err()),
                RequestErrorCode::UNINTERESTED
            );
            // draft-19 §5.1.1: no object is sent for a request that ended in error.
            let w = published.writer();
            assert!(
                w.open_subgroup(1, SubgroupId::Zero, None, false)
                    .await
                    .is_err()
            );
            let o = moq_transport::track::Object::default();
            assert!(w.send_datagram(&o).is_err());
        })
        .await;
    }
}

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

/// draft-19 §8: OBJECT_DELIVERY_TIMEOUT applies to datagrams too: one whose first byte is
/// older than the subscriber's timeout is not sent; a fresh one is.
#[tokio::test]
async fn datagram_past_its_delivery_timeout_is_not_sent() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let params = Parameters {
            object_delivery_timeout: Some(100),
            ..Default::default()
        };
        let (mut sub, writer) = subscribe_accepted(
            &client,
            &server,
            track("dt"),
            params,
            SubscribeResponse::default(),
        )
        .await;
        let object = |o: u64| moq_transport::track::Object {
            location: Location::new(0, o),
            payload: Bytes::from(format!("o{o}")),
            ..Default::default()
        };
        let old = std::time::Instant::now()
            .checked_sub(Duration::from_secs(1))
            .unwrap();
        assert!(!writer.send_datagram_received(&object(0), old).unwrap());
        let fresh = std::time::Instant::now();
        assert!(writer.send_datagram_received(&object(1), fresh).unwrap());
        match sub.next().await.unwrap().unwrap() {
            TrackEvent::Datagram(o) => assert_eq!(o.location, Location::new(0, 1)),
            TrackEvent::Subgroup(_) => panic!("a subgroup"),
        }
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

#[tokio::test]
async fn track_status() {
    for version in Version::ALL {
        case(format!("{version:?}"), async {
            let (client, server, _srv) =
                pair_with_requests(Transport::WebTransport, *version).await;
            let props = Properties::new()
                .with_int(property::MAX_CACHE_DURATION, 5000)
                .unwrap();
            let serve = async {
                match server.incoming().next().await.unwrap() {
                    Incoming::TrackStatus(t) => {
                        assert_eq!(t.track(), &track("s"));
                        // An EXPIRES from the application is not sent in TRACK_STATUS_OK
                        // (draft-19 §10.2.7 does not list it there); it once was, and our own
                        // requester closed the session over it.
                        t.accept(TrackStatusInfo {
                            largest: Some(Location::new(9, 9)),
                            expires: Some(Duration::from_secs(30)),
                            track_properties: props.clone(),
                        });
                    }
                    other => panic!("{other:?}"),
                }
            };
            let (info, ()) = tokio::join!(
                client.track_status(track("s"), Parameters::default()),
                serve
            );
            let info = info.unwrap();
            assert_eq!(info.largest, Some(Location::new(9, 9)));
            assert_eq!(info.expires, None);
            // draft-16's and draft-17's REQUEST_OK have no room for Track Properties (14 and 15
            // carry this one as a parameter, 18 on as a property).
            if !version.has_track_extensions() || version.request_ok_has_properties() {
                // (draft-14's TRACK_STATUS_OK also names the group order.)
                let cache = info.track_properties.get_int(property::MAX_CACHE_DURATION);
                assert_eq!(cache, Some(5000), "{version}");
            }
            assert!(client.close_reason().is_none(), "{version}");
            assert!(server.close_reason().is_none(), "{version}");
        })
        .await;
    }
}

#[tokio::test]
async fn subscribe_tracks_and_publish_skipped() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let prefix = TrackNamespace::from_strs(["live"]).unwrap();
        let serve = async {
            match server.incoming().next().await.unwrap() {
                Incoming::SubscribeTracks(r) => r.accept().await.unwrap(),
                other => panic!("{other:?}"),
            }
        };
        let (ts, responder) = tokio::join!(
            client.subscribe_tracks(prefix.clone(), Parameters::default()),
            serve
        );
        let mut ts = ts.unwrap();
        assert!(responder.matches(&track("a")));
        responder.skipped(&track("a")).await.unwrap();
        assert_eq!(ts.next_skipped().await.unwrap().unwrap(), track("a"));
        // A PUBLISH for a matching track arrives on its own stream.
        let published = server
            .publish(track("b"), Default::default())
            .await
            .unwrap();
        match client.incoming().next().await.unwrap() {
            Incoming::Publish(p) => {
                assert_eq!(p.track(), &track("b"));
                let _sub = p.accept(Parameters::default()).await.unwrap();
            }
            other => panic!("{other:?}"),
        }
        published.accepted().await.unwrap();
        // Its own overlap space: a second overlapping SUBSCRIBE_TRACKS is refused, while a
        // SUBSCRIBE_NAMESPACE with the same prefix is fine.
        let _ns = client.subscribe_namespace(prefix.clone()).await.unwrap();
        assert_eq!(
            rejected_code(
                client
                    .subscribe_tracks(prefix.child("x").unwrap(), Parameters::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::PREFIX_OVERLAP
        );
        // Cancelling reaches the responder.
        drop(ts);
        responder.ended().await;
    })
    .await;
}

#[tokio::test]
async fn session_end_ends_subscriptions_and_writers() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let (mut sub, writer) = subscribe_accepted(
            &client,
            &server,
            track("e"),
            Parameters::default(),
            SubscribeResponse::default(),
        )
        .await;
        client.close(moq_core::codes::SessionErrorCode::NO_ERROR, "bye");
        let (_, err) = collect(&mut sub).await;
        assert!(matches!(err, Some(Error::Closed { .. })), "{err:?}");
        assert!(sub.next().await.is_none());
        let e = writer.cancelled().await;
        assert!(e.is_session_error(), "{e:?}");
    })
    .await;
}

/// draft-19 §7.2: with Descending group order a new group's stream has a higher send priority,
/// so its first object is not stuck behind the tail of the previous group under load.
#[tokio::test]
async fn new_group_is_not_stuck_behind_the_old_tail() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let params = Parameters {
            group_order: Some(GroupOrder::Descending),
            ..Default::default()
        };
        let (mut sub, writer) = subscribe_accepted(
            &client,
            &server,
            track("prio"),
            params,
            SubscribeResponse::default(),
        )
        .await;
        // Queue a large tail on group 1, then the first object of group 2.
        let tail = Bytes::from(vec![7u8; 16 << 20]);
        let mut old = writer
            .open_subgroup(1, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        let mut new = writer
            .open_subgroup(2, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        let send = async {
            old.write_object(0, tail).await.unwrap();
            old.finish();
        };
        let send_new = async {
            new.write_object(0, Bytes::from_static(b"keyframe"))
                .await
                .unwrap();
            new.finish();
        };
        // Read both streams as they come, recording the order in which objects complete.
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let recv = async {
            let mut tasks = Vec::new();
            for _ in 0..2 {
                let Some(Ok(TrackEvent::Subgroup(mut s))) = sub.next().await else {
                    panic!("no subgroup")
                };
                let tx = order_tx.clone();
                tasks.push(tokio::spawn(async move {
                    while let Some(o) = s.next_object().await.unwrap() {
                        tx.send((o.location.group, o.payload.len())).unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        };
        tokio::join!(send, send_new, recv);
        drop(order_tx);
        let first = order_rx.recv().await.unwrap();
        assert_eq!(
            first,
            (2, 8),
            "the new group's first object arrives before the old group's tail"
        );
        assert_eq!(order_rx.recv().await.unwrap(), (1, 16 << 20));
    })
    .await;
}

/// draft-19 §10.2.15 (EXPIRES): the publisher's EXPIRES in SUBSCRIBE_OK reaches the subscriber;
/// draft-19 §8, §10.2.4 (OBJECT_DELIVERY_TIMEOUT): the subscriber's timeout reaches the
/// publisher, which resets the subgroup stream with DELIVERY_TIMEOUT instead of sending an
/// object older than it.
#[tokio::test]
async fn expires_and_object_delivery_timeout() {
    use std::time::{Duration, Instant};
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let params = Parameters {
            object_delivery_timeout: Some(100),
            ..Default::default()
        };
        let response = SubscribeResponse {
            expires: Some(Duration::from_secs(30)),
            ..Default::default()
        };
        let (sub, writer) =
            subscribe_accepted(&client, &server, track("late"), params, response).await;
        assert_eq!(sub.info().expires, Some(Duration::from_secs(30)));
        assert_eq!(
            writer.params().object_delivery_timeout,
            Some(Duration::from_millis(100))
        );
        let mut s = writer
            .open_subgroup(0, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        let props = Properties::new();
        let fresh = Some(Instant::now());
        s.write(
            0,
            &props,
            moq_core::data::ObjectStatus::Normal,
            Bytes::from_static(b"on time"),
            fresh,
        )
        .await
        .unwrap();
        let stale = Instant::now().checked_sub(Duration::from_secs(1));
        let err = s
            .write(
                1,
                &props,
                moq_core::data::ObjectStatus::Normal,
                Bytes::from_static(b"late"),
                stale,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Cancelled(StreamResetCode::DELIVERY_TIMEOUT)),
            "{err:?}"
        );
    })
    .await;
}

/// draft-18 §5.1: a second SUBSCRIBE to a track this session already subscribes to fails with
/// DUPLICATE_SUBSCRIPTION; draft-19 dropped the rule, so both are served there.
#[tokio::test]
async fn duplicate_subscriptions_by_version() {
    for version in [Version::Draft18, Version::Draft19] {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, version).await;
            let (first, _w1) = subscribe_accepted(
                &client,
                &server,
                track("dup"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            if version.allows_duplicate_subscriptions() {
                let (_second, _w2) = subscribe_accepted(
                    &client,
                    &server,
                    track("dup"),
                    Parameters::default(),
                    SubscribeResponse::default(),
                )
                .await;
                return; // the next case
            }
            // Refused by the session itself: the application never sees it.
            assert_eq!(
                rejected_code(
                    client
                        .subscribe(track("dup"), Parameters::default())
                        .await
                        .unwrap_err()
                ),
                RequestErrorCode::DUPLICATE_SUBSCRIPTION
            );
            drop(first);
        })
        .await;
    }
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

/// draft-21 §9.10 (from draft-20): the publisher's PUBLISH_STATE_NOTIFY carries its Largest
/// Object and reaches the subscriber's `publisher_state`; before draft-20 there is none to send.
#[tokio::test]
async fn publish_state_notify_reaches_the_subscriber() {
    for version in [Version::Draft19, Version::Draft20, Version::Draft22] {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, version).await;
            let (mut sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("state"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            let mut s = writer
                .open_subgroup(5, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            s.write_object(0, Bytes::from_static(b"x")).await.unwrap();
            let sent = writer.notify_state(Parameters::default());
            if version < Version::Draft20 {
                assert!(sent.is_err());
                return; // the next case
            }
            sent.unwrap();
            let state = sub.publisher_state_changed().await.unwrap();
            assert_eq!(state.largest_object, Some(Location::new(5, 0)));
            assert_eq!(
                sub.publisher_state().largest_object,
                Some(Location::new(5, 0))
            );
        })
        .await;
    }
}

/// A writer's `params_changed` resolves once per change of the parameters (REQUEST_UPDATE,
/// draft-19 §10.9): after returning one it waits for the next, and a change made before the
/// call, after the writer last read the parameters, is not missed. (It used to resolve at once
/// forever after the first update, and moq-client's serving loop spun on it.)
#[tokio::test]
async fn params_changed_resolves_once_per_update() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (sub, writer, _sessions) = plain_subscription(transport, "params").await;
            assert_eq!(writer.params().subscriber_priority, 128);
            for priority in [10, 20] {
                let ask = Parameters {
                    subscriber_priority: Some(priority),
                    ..Default::default()
                };
                let (asked, changed) = tokio::join!(sub.update(ask), writer.params_changed());
                asked.unwrap();
                assert_eq!(changed.unwrap().subscriber_priority, priority);
                // Nothing signals "no change", so this looks for a bounded time.
                let again =
                    tokio::time::timeout(Duration::from_millis(100), writer.params_changed()).await;
                assert!(again.is_err(), "{transport:?}: resolved with no update");
            }
            // Updated after the writer last read the parameters, before the call.
            let ask = Parameters {
                subscriber_priority: Some(30),
                ..Default::default()
            };
            sub.update(ask).await.unwrap();
            let clone = writer.clone();
            assert_eq!(
                writer.params_changed().await.unwrap().subscriber_priority,
                30
            );
            // A clone starts from what its source had seen.
            assert_eq!(
                clone.params_changed().await.unwrap().subscriber_priority,
                30
            );
        })
        .await;
    }
}

/// draft-19 §10.11: a publisher that drops every writer of a subscription without finishing it
/// still ends it: once its open subgroup streams close, PUBLISH_DONE (TRACK_ENDED, the exact
/// Stream Count) follows, for a SUBSCRIBE and for a PUBLISH, over every transport.
#[tokio::test]
async fn dropped_writer_ends_the_subscription() {
    for transport in transports() {
        case(format!("{transport:?} SUBSCRIBE"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let (mut sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("w"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            let mut s = writer
                .open_subgroup(0, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            let clone = writer.clone();
            drop(writer);
            drop(clone);
            // The open subgroup stream lives on, and is delivered before PUBLISH_DONE.
            s.write_object(0, Bytes::from_static(b"last"))
                .await
                .unwrap();
            s.finish();
            let (objects, err) = collect(&mut sub).await;
            assert!(err.is_none(), "{err:?}");
            assert_eq!(
                objects,
                vec![(Location::new(0, 0), Bytes::from_static(b"last"))]
            );
            let done = sub.publish_done().expect("PUBLISH_DONE");
            assert_eq!(done.status, PublishDoneCode::TRACK_ENDED);
            assert_eq!(done.stream_count, 1);
        })
        .await;
        case(format!("{transport:?} PUBLISH"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let published = client
                .publish(track("p"), Default::default())
                .await
                .unwrap();
            let incoming = match server.incoming().next().await.unwrap() {
                Incoming::Publish(p) => p,
                other => panic!("{other:?}"),
            };
            let mut sub = incoming.accept(Parameters::default()).await.unwrap();
            published.accepted().await.unwrap();
            drop(published);
            let (objects, err) = collect(&mut sub).await;
            assert!(err.is_none(), "{err:?}");
            assert!(objects.is_empty());
            let done = sub.publish_done().expect("PUBLISH_DONE");
            assert_eq!(done.status, PublishDoneCode::TRACK_ENDED);
            assert_eq!(done.stream_count, 0);
        })
        .await;
    }
}

/// PUBLISH_SKIPPED after a REQUEST_UPDATE moved the prefix names the track under the new prefix:
/// its suffix is relative to the prefix in effect (draft-19 §10.20, §10.9.2), on both sides.
#[tokio::test]
async fn publish_skipped_after_the_prefix_moved_names_the_new_prefix() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let old = TrackNamespace::from_strs(["live", "a"]).unwrap();
        let new = TrackNamespace::from_strs(["live", "b", "c"]).unwrap();
        let serve = async {
            match server.incoming().next().await.unwrap() {
                Incoming::SubscribeTracks(r) => r.accept().await.unwrap(),
                other => panic!("{other:?}"),
            }
        };
        let (ts, responder) = tokio::join!(
            client.subscribe_tracks(old.clone(), Parameters::default()),
            serve
        );
        let mut ts = ts.unwrap();
        let under = |ns: &TrackNamespace, name: &str| {
            FullTrackName::new(ns.child("x").unwrap(), name.as_bytes().to_vec()).unwrap()
        };
        responder.skipped(&under(&old, "1")).await.unwrap();
        assert_eq!(ts.next_skipped().await.unwrap().unwrap(), under(&old, "1"));
        let params = Parameters {
            track_namespace_prefix: Some(new.clone()),
            ..Default::default()
        };
        ts.update(params).await.unwrap();
        assert_eq!(responder.prefix(), new);
        responder.skipped(&under(&new, "2")).await.unwrap();
        assert_eq!(ts.next_skipped().await.unwrap().unwrap(), under(&new, "2"));
    })
    .await;
}
