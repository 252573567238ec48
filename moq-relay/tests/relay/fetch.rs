//! FETCH through the relay: from its cache and from upstream, FETCH_OK waiting for the upstream,
//! FILL_TIMEOUT, fills from the cache and from upstream, relative FETCH (draft-19 §9.4, §10.2.5;
//! draft-21 §3.4, §9.20).

use moq_client::{Location, SubscribeOptions, Version};
use moq_core::data::SubgroupId;
use moq_core::message::{FetchType, Parameters};
use moq_core::{LocationFilter, Properties};
use moq_transport::track::{FetchEnd, FetchItem, SubscribeResponse};

use crate::common::read_objects;
use crate::support::{
    Routed, announce, connect, next_fetch, next_payload, next_stream, next_subscribe, ns, relay,
    relay_knows, round_trip, routed, test_object, timeout, track, track_props, transport_session,
};

/// Every object of a FETCH, in order.
async fn fetch_all(mut f: moq_client::FetchConsumer) -> Vec<moq_client::Object> {
    let mut out = Vec::new();
    while let Some(o) = f.next_object().await {
        out.push(o.expect("fetch failed"));
    }
    out
}

#[tokio::test]
async fn fetch_from_cache_and_from_upstream() {
    timeout(async {
        let relay = relay();
        let n = ns(&["vod"]);
        let name = track(&n, "t");
        let p = connect(&relay, false).await;
        let _h = announce(&p, &n).await;
        let producer = p.publisher().create_track(name.clone()).unwrap();
        for g in 0..5 {
            let mut w = producer.append_group().unwrap();
            w.write(format!("g{g}")).unwrap();
            w.finish().unwrap();
        }
        let s = connect(&relay, false).await;
        // Nothing cached yet: the relay fetches upstream.
        let objects = fetch_all(
            s.subscriber()
                .fetch(name.clone(), Location::new(1, 0), Location::new(3, 0))
                .await
                .unwrap(),
        )
        .await;
        let groups: Vec<u64> = objects.iter().map(|o| o.location.group).collect();
        assert_eq!(groups, vec![1, 2, 3]);
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"miss\"}"),
            1
        );
        // Once subscribed, the cache holds what is published from then on (a SUBSCRIBE
        // carries only new objects, draft-19 §10.7): a FETCH of it is served from there.
        let mut sub = s
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        for g in 5..8 {
            let mut w = producer.append_group().unwrap();
            w.write(format!("g{g}")).unwrap();
            w.finish().unwrap();
        }
        let live: Vec<u64> = read_objects(&mut sub, 3)
            .await
            .iter()
            .map(|(g, _)| *g)
            .collect();
        assert_eq!(live, vec![5, 6, 7], "no cached group is replayed");
        let objects = fetch_all(
            s.subscriber()
                .fetch(name.clone(), Location::new(5, 0), Location::new(7, 0))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            objects.iter().map(|o| o.location.group).collect::<Vec<_>>(),
            vec![5, 6, 7]
        );
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"hit\"}"),
            1
        );
        // TRACK_STATUS is answered too.
        let status = s.subscriber().track_status(name.clone()).await.unwrap();
        assert_eq!(status.largest, Some(Location::new(7, 0)));
    })
    .await;
}

/// Accepts an upstream FETCH with FETCH_OK ending at `end` and writes `objects` (subgroup 0);
/// returns the writer, for the caller to finish or hold open.
async fn answer_fetch(
    f: moq_transport::track::IncomingFetch,
    end: Location,
    objects: &[(Location, bytes::Bytes)],
) -> moq_transport::track::FetchWriter {
    let mut w = f
        .accept(FetchEnd {
            end_of_track: false,
            end,
            track_properties: Properties::default(),
        })
        .await
        .unwrap();
    for (location, payload) in objects {
        w.write(&moq_transport::track::Object {
            location: *location,
            subgroup: Some(0),
            payload: payload.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    w
}

/// The parameters of a fill relative to the Largest Object's group (draft-21 §3.4).
fn fill_relative(groups: u64) -> Option<Box<Parameters>> {
    Some(Box::new(Parameters {
        location_filter: Some(LocationFilter::RelativeGroups(groups)),
        ..Default::default()
    }))
}

/// draft-19 §9.4: a FETCH the cache cannot answer is sent upstream and FETCH_OK is withheld
/// until the upstream answers; §9.6, §9.7: FETCH_OK's Track Properties and the objects come
/// through unchanged.
#[tokio::test]
async fn fetch_ok_waits_for_the_upstream_fetch() {
    timeout(async {
        let relay = relay();
        let n = ns(&["vod2"]);
        let name = track(&n, "t");
        let publisher = transport_session(&relay, true).await;
        let _announced = publisher.publish_namespace(n.clone()).await.unwrap();
        relay_knows(&relay, &n).await;
        let subscriber = transport_session(&relay, false).await;
        let pending = {
            let s = subscriber.clone();
            let request = FetchType::Standalone {
                track: name.clone(),
                start: Location::new(1, 0),
                end: Location::new(2, 0),
            };
            tokio::spawn(async move { s.fetch(request, Parameters::default()).await })
        };
        let upstream = next_fetch(&publisher).await;
        assert_eq!(upstream.track(), &name);
        assert_eq!(upstream.start(), Location::new(1, 0));
        round_trip(&subscriber).await;
        assert!(!pending.is_finished(), "FETCH_OK before the upstream's");
        let mut w = upstream
            .accept(FetchEnd {
                end_of_track: false,
                end: Location::new(1, 3),
                track_properties: track_props(),
            })
            .await
            .unwrap();
        for i in 0..3 {
            let (properties, payload) = test_object(i);
            w.write(&moq_transport::track::Object {
                location: Location::new(1, i),
                subgroup: Some(2),
                priority: 17,
                properties,
                payload,
                ..Default::default()
            })
            .await
            .unwrap();
        }
        w.finish();
        let mut fetch = pending.await.unwrap().unwrap();
        assert_eq!(fetch.end().end, Location::new(1, 3));
        assert_eq!(fetch.end().track_properties, track_props());
        let mut i = 0;
        while let Some(item) = fetch.next().await {
            let FetchItem::Object(o) = item.unwrap() else {
                panic!("unexpected End of Range");
            };
            let (props, payload) = test_object(i);
            assert_eq!(o.location, Location::new(1, i));
            assert_eq!((o.subgroup, o.priority), (Some(2), 17));
            assert_eq!((o.properties, o.payload), (props, payload));
            i += 1;
        }
        assert_eq!(i, 3);
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"miss\"}"),
            1
        );
    })
    .await;
}

/// Every item of a FETCH response: objects as (location, payload), End of Range markers as
/// (location, "unknown" / "non-existent").
async fn fetch_items(mut fetch: moq_transport::track::FetchResponse) -> Vec<(Location, Vec<u8>)> {
    let mut items = Vec::new();
    while let Some(item) = fetch.next().await {
        items.push(match item.unwrap() {
            FetchItem::Object(o) => (o.location, o.payload.to_vec()),
            FetchItem::EndOfRange { kind, location } => {
                let kind = match kind {
                    moq_client::RangeEnd::Unknown => b"unknown".to_vec(),
                    moq_client::RangeEnd::NonExistent => b"non-existent".to_vec(),
                    moq_client::RangeEnd::TimedOut => b"timed out".to_vec(),
                };
                (location, kind)
            }
        });
    }
    items
}

/// draft-19 §10.2.5, draft-21 §9.20.6 FILL_TIMEOUT: 0 serves only what the relay holds,
/// reporting the rest as a Timed-Out range (Unknown before draft-20) without asking upstream; a
/// budget the upstream does not answer within is served the same way once spent; a budget spent
/// while the upstream's objects are coming ends the response with a Timed-Out range for the
/// rest. The relay joined the track at group 10
/// (SUBSCRIBE_OK's Largest Location is 9/0), so groups 5 to 9 are unknown to it.
#[tokio::test]
async fn fill_timeout_bounds_the_wait_for_upstream() {
    timeout(async {
        let relay = relay();
        let name = track(&ns(&["fill"]), "t");
        let response = SubscribeResponse {
            largest: Some(Location::new(9, 0)),
            ..Default::default()
        };
        let Routed {
            subscriber,
            writer,
            mut sub,
            _publisher: publisher,
            _announced,
        } = routed(&relay, &name, response).await;
        let mut ten = writer
            .open_subgroup(10, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        ten.write_object(0, bytes::Bytes::from_static(b"ten"))
            .await
            .unwrap();
        let mut down = next_stream(&mut sub).await;
        assert_eq!(next_payload(&mut down).await.1, b"ten");
        let request = FetchType::Standalone {
            track: name.clone(),
            start: Location::new(5, 0),
            end: Location::new(10, 1),
        };
        let fill = |ms| Parameters {
            fill_timeout: Some(ms),
            ..Default::default()
        };
        // draft-21 §9.20.6: what the relay lacks is a Timed-Out gap (Unknown before draft-20).
        let from_cache = vec![
            (Location::new(9, u64::MAX), b"timed out".to_vec()),
            (Location::new(10, 0), b"ten".to_vec()),
        ];
        // 0: at once, from the cache; the publisher is not asked.
        let fetch = subscriber.fetch(request.clone(), fill(0)).await.unwrap();
        assert_eq!(fetch_items(fetch).await, from_cache);
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"miss\"}"),
            0
        );
        // A budget the publisher never answers within: the same, once it is spent.
        let pending = {
            let (s, r) = (subscriber.clone(), request.clone());
            tokio::spawn(async move { s.fetch(r, fill(200)).await })
        };
        let unanswered = next_fetch(&publisher).await;
        let fetch = pending.await.unwrap().unwrap();
        assert_eq!(fetch_items(fetch).await, from_cache);
        drop(unanswered);
        // A budget spent while the publisher's objects are coming.
        let pending = {
            let (s, r) = (subscriber.clone(), request.clone());
            tokio::spawn(async move { s.fetch(r, fill(300)).await })
        };
        let five = [(Location::new(5, 0), bytes::Bytes::from_static(b"five"))];
        let w = answer_fetch(next_fetch(&publisher).await, Location::new(10, 1), &five).await;
        let fetch = pending.await.unwrap().unwrap();
        let want = vec![
            (Location::new(5, 0), b"five".to_vec()),
            // draft-21 §9.20.6: End of Timed-Out Range (Unknown before draft-20).
            (Location::new(10, 0), b"timed out".to_vec()),
        ];
        assert_eq!(fetch_items(fetch).await, want);
        drop(w);
    })
    .await;
}

/// draft-21 §3.4, §3.5 (from draft-20): a SUBSCRIBE through the relay with FILL_PARAMETERS gets
/// the fill range from the relay's cache on a fill fetch stream (FETCH_HEADER with the
/// SUBSCRIBE's Request ID, no FETCH_OK), and what is published after it on the subscription:
/// aiomoqt's "join" (Next Object, fill relative 2: the previous group and the current one).
#[tokio::test]
async fn a_fill_comes_from_the_relay_cache() {
    timeout(async {
        let relay = relay();
        let name = track(&ns(&["fill", "join"]), "t");
        let Routed {
            subscriber,
            writer,
            mut sub,
            _publisher,
            _announced,
        } = routed(&relay, &name, SubscribeResponse::default()).await;
        assert!(subscriber.version() >= Version::Draft20);
        let payload = |g: u64, o: u64| bytes::Bytes::from(format!("{g}.{o}"));
        // The current group's subgroup stays open.
        let mut current = None;
        for g in 0..3u64 {
            let mut s = writer
                .open_subgroup(g, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            for o in 0..2 {
                s.write_object(o, payload(g, o)).await.unwrap();
            }
            if g < 2 {
                s.finish();
            } else {
                current = Some(s);
            }
            let mut down = next_stream(&mut sub).await;
            for o in 0..2 {
                assert_eq!(next_payload(&mut down).await.1, payload(g, o).to_vec());
            }
        }
        let params = Parameters {
            location_filter: Some(LocationFilter::LargestObject),
            fill: fill_relative(2),
            ..Default::default()
        };
        let mut joined = subscriber.subscribe(name.clone(), params).await.unwrap();
        assert_eq!(joined.info().largest, Some(Location::new(2, 1)));
        let mut fill = joined.take_fill().expect("a fill fetch stream");
        let mut got = Vec::new();
        while let Some(item) = fill.next().await {
            if let FetchItem::Object(o) = item.unwrap() {
                got.push((o.location, o.payload));
            }
        }
        let want: Vec<_> = [(1, 0), (1, 1), (2, 0), (2, 1)]
            .into_iter()
            .map(|(g, o)| (Location::new(g, o), payload(g, o)))
            .collect();
        assert_eq!(got, want);
        drop(current);
    })
    .await;
}

/// draft-21 §3.4, §9.11: a fill the relay's cache does not hold (the track's first subscriber
/// asks for the current group, published before the relay joined) comes from an upstream
/// FETCH of the fill range, piped onto the fill fetch stream.
#[tokio::test]
async fn a_fill_the_cache_lacks_comes_from_upstream() {
    timeout(async {
        let relay = relay();
        let n = ns(&["fill", "upstream"]);
        let name = track(&n, "t");
        let publisher = transport_session(&relay, false).await;
        let _announced = publisher.publish_namespace(n.clone()).await.unwrap();
        relay_knows(&relay, &n).await;
        let subscriber = transport_session(&relay, false).await;
        let params = Parameters {
            location_filter: Some(LocationFilter::LargestObject),
            fill: fill_relative(1),
            ..Default::default()
        };
        let pending = {
            let (s, name) = (subscriber.clone(), name.clone());
            tokio::spawn(async move { s.subscribe(name, params).await })
        };
        let _writer = next_subscribe(&publisher)
            .await
            .accept(SubscribeResponse {
                largest: Some(Location::new(5, 2)),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        let upstream = next_fetch(&publisher).await;
        assert_eq!(
            (upstream.start(), upstream.end()),
            (Location::new(5, 0), Location::new(5, 3))
        );
        let objects: Vec<_> = (0..3)
            .map(|o| (Location::new(5, o), bytes::Bytes::from(format!("5.{o}"))))
            .collect();
        answer_fetch(upstream, Location::new(5, 3), &objects)
            .await
            .finish();
        let mut fill = sub.take_fill().expect("a fill fetch stream");
        let mut got = Vec::new();
        while let Some(item) = fill.next().await {
            if let FetchItem::Object(o) = item.unwrap() {
                got.push(o.location);
            }
        }
        assert_eq!(got, (0..3).map(|o| Location::new(5, o)).collect::<Vec<_>>());
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"miss\"}"),
            1
        );
        // A REQUEST_UPDATE's fill the cache lacks goes upstream too.
        let again = Parameters {
            fill: fill_relative(1),
            ..Default::default()
        };
        let answer = async {
            let again = [(Location::new(5, 0), bytes::Bytes::from_static(b"again"))];
            answer_fetch(next_fetch(&publisher).await, Location::new(5, 1), &again)
                .await
                .finish();
        };
        let (updated, ()) = tokio::join!(sub.update_with_fill(again), answer);
        let mut fill = updated.unwrap().1.expect("the update's fill");
        let item = fill.next().await.unwrap().unwrap();
        assert!(matches!(item, FetchItem::Object(o) if o.payload == "again"));
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"miss\"}"),
            2
        );
    })
    .await;
}

/// draft-21 §9.20.10 (from draft-20): a FETCH whose start is relative to the Largest Object is
/// forwarded relative (the relay does not know the publisher's Largest), not as {0, 0} onwards.
#[tokio::test]
async fn a_relative_fetch_is_forwarded_relative() {
    timeout(async {
        let relay = relay();
        let n = ns(&["relative", "fetch"]);
        let publisher = transport_session(&relay, false).await;
        let _announced = publisher.publish_namespace(n.clone()).await.unwrap();
        relay_knows(&relay, &n).await;
        let subscriber = transport_session(&relay, false).await;
        let request = FetchType::Relative {
            track: track(&n, "t"),
            filter: LocationFilter::RelativeGroups(1),
        };
        let pending = {
            let s = subscriber.clone();
            tokio::spawn(async move { s.fetch(request, Parameters::default()).await })
        };
        let mut upstream = next_fetch(&publisher).await;
        assert!(upstream.is_relative());
        upstream.resolve(Some(Location::new(7, 2)));
        assert_eq!(upstream.start(), Location::new(7, 0));
        let seven = [(Location::new(7, 0), bytes::Bytes::from_static(b"7.0"))];
        answer_fetch(upstream, Location::new(7, 1), &seven)
            .await
            .finish();
        let mut fetch = pending.await.unwrap().unwrap();
        let item = fetch.next().await.unwrap().unwrap();
        assert!(matches!(item, FetchItem::Object(o) if o.location == Location::new(7, 0)));
    })
    .await;
}
