//! What the relay passes on unchanged: every object and datagram field, Track Properties, new
//! objects only with FIRST_OBJECT, NEW_GROUP_REQUEST upstream (draft-19 §9.1, §9.6, §10.7, §11.3).

use moq_client::Location;
use moq_core::Properties;
use moq_core::data::{ObjectStatus, SubgroupId};
use moq_core::message::{FetchType, Parameters};
use moq_transport::track::{FetchItem, PublishOptions, SubscribeResponse, TrackEvent};

use crate::support::{
    APP_INT, Routed, announce, connect, next_payload, next_stream, next_subscribe, ns, relay,
    relay_knows, round_trip, routed, test_object, timeout, track, track_props, transport_session,
    until,
};

/// draft-19 §9.2, §9.4, §9.6, §9.7, §9.1, §10.2.16, §10.2.18: for a Forward=1 subscriber the
/// relay subscribes upstream with Forward=1 (and passes its NEW_GROUP_REQUEST on), answers
/// SUBSCRIBE_OK only once the upstream subscription is Established, passes on LARGEST_OBJECT and
/// every Track Property in SUBSCRIBE_OK, TRACK_STATUS_OK and (from its cache) FETCH_OK, and
/// forwards a many-object subgroup with every object field (Subgroup ID, priority, properties,
/// status, payload bytes) unchanged, in order.
#[tokio::test]
async fn relay_keeps_every_field_and_waits_for_the_upstream() {
    timeout(async {
        let relay = relay();
        let n = ns(&["fields"]);
        let name = track(&n, "t");
        let publisher = transport_session(&relay, false).await;
        let _announced = publisher.publish_namespace(n.clone()).await.unwrap();
        relay_knows(&relay, &n).await;

        let subscriber = transport_session(&relay, true).await;
        let pending = {
            let s = subscriber.clone();
            let name = name.clone();
            let params = Parameters {
                forward: Some(true),
                new_group_request: Some(0),
                ..Default::default()
            };
            tokio::spawn(async move { s.subscribe(name, params).await })
        };
        // draft-19 §9.2, §9.5: Forward=1 downstream, so Forward=1 upstream (omitted means 1);
        // §10.2.18: with no upstream subscription yet, NEW_GROUP_REQUEST goes upstream too.
        let upstream = next_subscribe(&publisher).await;
        assert_eq!(upstream.track(), &name);
        assert_ne!(upstream.params().forward, Some(false));
        assert_eq!(upstream.params().new_group_request, Some(0));
        // draft-19 §9.4: no SUBSCRIBE_OK while the upstream SUBSCRIBE is unanswered.
        round_trip(&subscriber).await;
        assert!(!pending.is_finished(), "SUBSCRIBE_OK before the upstream");
        let writer = upstream
            .accept(SubscribeResponse {
                largest: Some(Location::new(3, 1)),
                track_properties: track_props(),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        // draft-19 §10.2.16 (§9.4): LARGEST_OBJECT at least the upstream's; §9.6: every property.
        assert_eq!(sub.info().largest, Some(Location::new(3, 1)));
        assert_eq!(sub.info().track_properties, track_props());

        // One subgroup of many objects: Subgroup ID 7, priority 200, End of Group at the end.
        const N: u64 = 40;
        let mut s = writer
            .open_subgroup(4, SubgroupId::Explicit(7), Some(200), true)
            .await
            .unwrap();
        for i in 0..N {
            let (props, payload) = test_object(i);
            s.write(i * 2, &props, ObjectStatus::Normal, payload, None)
                .await
                .unwrap();
        }
        s.write(
            N * 2,
            &Properties::new(),
            ObjectStatus::EndOfGroup,
            bytes::Bytes::new(),
            None,
        )
        .await
        .unwrap();
        s.finish();

        // draft-19 §9.4: no reordering, nothing dropped; §9.7: fields and payloads unchanged.
        let mut got = match sub.next().await.unwrap().unwrap() {
            TrackEvent::Subgroup(g) => g,
            other => panic!("{other:?}"),
        };
        assert_eq!(got.group(), 4);
        assert_eq!(got.subgroup_id(), Some(7));
        assert_eq!(got.priority(), 200);
        for i in 0..N {
            let o = got.next_object().await.unwrap().expect("object missing");
            let (props, payload) = test_object(i);
            assert_eq!(o.location, Location::new(4, i * 2));
            assert_eq!(o.subgroup, Some(7));
            assert_eq!(o.priority, 200);
            assert_eq!(o.status, ObjectStatus::Normal);
            assert_eq!(o.properties, props, "object {i}");
            assert_eq!(o.payload, payload, "object {i}");
        }
        let end = got.next_object().await.unwrap().unwrap();
        assert_eq!(
            (end.location, end.status),
            (Location::new(4, N * 2), ObjectStatus::EndOfGroup)
        );
        assert!(
            got.next_object().await.unwrap().is_none(),
            "FIN after the last object"
        );

        // draft-19 §9.6: TRACK_STATUS_OK and FETCH_OK carry the track's properties too; the
        // FETCH is answered from the cache (§9.1: every field stored).
        let status = subscriber
            .track_status(name.clone(), Parameters::default())
            .await
            .unwrap();
        assert_eq!(status.track_properties, track_props());
        assert_eq!(status.largest, Some(Location::new(4, N * 2)));
        let request = FetchType::Standalone {
            track: name.clone(),
            start: Location::new(4, 0),
            end: Location::new(5, 0),
        };
        let mut fetch = subscriber
            .fetch(request, Parameters::default())
            .await
            .unwrap();
        assert_eq!(fetch.end().track_properties, track_props());
        let mut i = 0;
        while let Some(item) = fetch.next().await {
            let FetchItem::Object(o) = item.unwrap() else {
                continue;
            };
            let (props, payload) = test_object(i);
            assert_eq!(o.location, Location::new(4, i * 2));
            assert_eq!((o.subgroup, o.priority), (Some(7), 200));
            assert_eq!((o.properties, o.payload), (props, payload));
            i += 1;
        }
        assert_eq!(i, N);
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"hit\"}"),
            1
        );
    })
    .await;
}

/// Through the relay: a SUBSCRIBE without a filter gets only what is published after it, not
/// the relay's cached groups (draft-19 §10.7, §5.1.2), so a Joining FETCH completes it without
/// duplicates; and every subgroup stream carries FIRST_OBJECT exactly when it begins at the
/// subgroup's first object (§2.2).
#[tokio::test]
async fn subscribe_gets_only_new_objects_and_first_object() {
    timeout(async {
        let relay = relay();
        let n = ns(&["fresh"]);
        let name = track(&n, "t");
        let p = connect(&relay, false).await;
        let _h = announce(&p, &n).await;
        let producer = p.publisher().create_track(name.clone()).unwrap();

        // A first subscriber: the relay subscribes upstream and caches what comes.
        let early = connect(&relay, false).await;
        let mut first = early
            .transport()
            .subscribe(name.clone(), Parameters::default())
            .await
            .unwrap();
        let mut g0 = producer.create_group(0).unwrap();
        g0.write("a").unwrap();
        g0.write("b").unwrap();
        g0.finish().unwrap();
        let mut s0 = next_stream(&mut first).await;
        assert_eq!(s0.group(), 0);
        assert!(s0.first_object(), "a subgroup forwarded from its start");
        assert_eq!(
            next_payload(&mut s0).await,
            (Location::new(0, 0), b"a".to_vec())
        );
        let mut g1 = producer.create_group(1).unwrap();
        g1.write("c").unwrap();
        let mut s1 = next_stream(&mut first).await;
        assert_eq!(s1.group(), 1);
        assert!(s1.first_object());
        assert_eq!(
            next_payload(&mut s1).await,
            (Location::new(1, 0), b"c".to_vec())
        );

        // A second subscriber arrives in the middle of group 1.
        let late_session = connect(&relay, false).await;
        let mut late = late_session
            .transport()
            .subscribe(name.clone(), Parameters::default())
            .await
            .unwrap();
        assert_eq!(late.info().largest, Some(Location::new(1, 0)));
        g1.write("d").unwrap();
        g1.finish().unwrap();
        let mut g2 = producer.create_group(2).unwrap();
        g2.write("e").unwrap();
        g2.finish().unwrap();
        // Group 1 from its second object (no FIRST_OBJECT), then group 2 from its start;
        // nothing of group 0, nothing before the subscription.
        let mut got = Vec::new();
        for _ in 0..2 {
            let mut s = next_stream(&mut late).await;
            let first_object = s.first_object();
            while let Some(o) = s.next_object().await.unwrap() {
                got.push((o.location, first_object, o.payload.to_vec()));
            }
        }
        got.sort();
        assert_eq!(
            got,
            vec![
                (Location::new(1, 1), false, b"d".to_vec()),
                (Location::new(2, 0), true, b"e".to_vec()),
            ]
        );
        // The Joining FETCH (from draft-20 the same range as a standalone FETCH) brings what
        // came before, each object once.
        let request = late
            .joining_fetch(moq_transport::track::JoiningStart::Relative(1))
            .unwrap();
        let mut fetch = late_session
            .transport()
            .fetch(request, Parameters::default())
            .await
            .unwrap();
        let mut fetched = Vec::new();
        while let Some(item) = fetch.next().await {
            if let FetchItem::Object(o) = item.unwrap() {
                fetched.push(o.location);
            }
        }
        assert_eq!(
            fetched,
            vec![
                Location::new(0, 0),
                Location::new(0, 1),
                Location::new(1, 0)
            ]
        );
    })
    .await;
}

/// draft-19 §9.1, §11.3.1, §11.4.4: a datagram's fields survive the relay: END_OF_GROUP,
/// Object Properties and payload reach the subscriber as they came, and a FETCH answered from
/// the cache marks the object as a datagram (no Subgroup ID), not with the cache's internal
/// datagram subgroup.
#[tokio::test]
async fn datagram_fields_survive_the_relay_and_its_cache() {
    timeout(async {
        let relay = relay();
        let name = track(&ns(&["dgram"]), "t");
        let Routed {
            subscriber,
            writer,
            mut sub,
            _publisher,
            _announced,
        } = routed(&relay, &name, SubscribeResponse::default()).await;
        let props = Properties::new().with_int(APP_INT, 7).unwrap();
        let sent = [
            moq_transport::track::Object {
                location: Location::new(0, 0),
                priority: 128,
                properties: props.clone(),
                payload: bytes::Bytes::from_static(b"first"),
                ..Default::default()
            },
            moq_transport::track::Object {
                location: Location::new(0, 1),
                priority: 128,
                payload: bytes::Bytes::from_static(b"last"),
                end_of_group: true,
                ..Default::default()
            },
        ];
        for o in &sent {
            assert!(writer.send_datagram(o).unwrap());
        }
        for want in &sent {
            match sub.next().await.unwrap().unwrap() {
                TrackEvent::Datagram(o) => assert_eq!(&o, want),
                TrackEvent::Subgroup(_) => panic!("a subgroup stream"),
            }
        }
        // From the relay's cache: the same objects, flagged as datagrams.
        let request = FetchType::Standalone {
            track: name.clone(),
            start: Location::new(0, 0),
            end: Location::new(0, 2),
        };
        let mut fetched = subscriber
            .fetch(request, Parameters::default())
            .await
            .unwrap();
        let mut got = Vec::new();
        while let Some(item) = fetched.next().await {
            if let FetchItem::Object(o) = item.unwrap() {
                got.push(o);
            }
        }
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"hit\"}"),
            1
        );
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|o| o.subgroup.is_none()), "{got:?}");
        assert_eq!(got[0].properties, props);
    })
    .await;
}

/// draft-19 §10.2.18: a NEW_GROUP_REQUEST on an Established subscription (a downstream
/// REQUEST_UPDATE) reaches the publisher of a DYNAMIC_GROUPS track as a REQUEST_UPDATE (the
/// rules on which requests are taken: `moq-client` cache unit test
/// `new_group_requests_follow_the_relay_rules`).
#[tokio::test]
async fn new_group_request_on_an_established_subscription_goes_upstream() {
    timeout(async {
        let relay = relay();
        let dynamic = Properties::new()
            .with_int(moq_core::property::DYNAMIC_GROUPS, 1)
            .unwrap();
        let response = SubscribeResponse {
            largest: Some(Location::new(3, 0)),
            track_properties: dynamic,
            ..Default::default()
        };
        let Routed {
            writer,
            sub,
            _publisher,
            _announced,
            subscriber: _subscriber,
        } = routed(&relay, &track(&ns(&["dynamic"]), "t"), response).await;
        assert_eq!(writer.params().new_group_request, None);
        let changed = writer.params_changed();
        let ask = Parameters {
            new_group_request: Some(0),
            ..Default::default()
        };
        let (asked, params) = tokio::join!(sub.update(ask), changed);
        asked.unwrap();
        assert_eq!(params.unwrap().new_group_request, Some(0));
    })
    .await;
}

/// draft-19 §9.1, §11.3.1: every datagram form (with and without properties, with and without
/// END_OF_GROUP, a status object) of a track that arrived by PUBLISH reaches a subscriber of it
/// through the relay, field for field.
#[tokio::test]
async fn every_datagram_form_of_a_published_track_is_forwarded() {
    timeout(async {
        let relay = relay();
        let n = ns(&["dgram-pub"]);
        let name = track(&n, "t");
        let publisher = transport_session(&relay, false).await;
        let published = publisher
            .publish(name.clone(), PublishOptions::default())
            .await
            .unwrap();
        published.accepted().await.unwrap();
        let subscriber = transport_session(&relay, true).await;
        let mut sub = subscriber
            .subscribe(name.clone(), Parameters::default())
            .await
            .unwrap();
        let props = Properties::new().with_int(APP_INT, 3).unwrap();
        let object = |g: u64, o: u64| moq_transport::track::Object {
            location: Location::new(g, o),
            priority: 128,
            payload: bytes::Bytes::from(format!("{g}.{o}")),
            ..Default::default()
        };
        let sent = vec![
            object(0, 0),
            moq_transport::track::Object {
                properties: props.clone(),
                ..object(0, 1)
            },
            moq_transport::track::Object {
                end_of_group: true,
                ..object(0, 2)
            },
            moq_transport::track::Object {
                properties: props,
                end_of_group: true,
                ..object(1, 0)
            },
            moq_transport::track::Object {
                status: ObjectStatus::EndOfGroup,
                payload: bytes::Bytes::new(),
                ..object(2, 0)
            },
        ];
        for o in &sent {
            assert!(published.writer().send_datagram(o).unwrap());
        }
        // Datagrams keep no order across groups (each group is sent by its own task).
        let mut got = Vec::new();
        for _ in &sent {
            match sub.next().await.unwrap().unwrap() {
                TrackEvent::Datagram(o) => got.push(o),
                TrackEvent::Subgroup(_) => panic!("a subgroup stream"),
            }
        }
        got.sort_by_key(|o| o.location);
        assert_eq!(got, sent);
    })
    .await;
}

/// draft-19 §9.5, §11.3.1: a SUBSCRIBE held for its publisher and answered by a PUBLISH gets
/// that track's datagrams too, the first one included, with their END_OF_GROUP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_subscribe_gets_the_publishs_datagrams() {
    timeout(async {
        let relay = relay();
        let name = track(&ns(&["held-dgram"]), "t");
        let viewer = transport_session(&relay, false).await;
        let pending = {
            let (s, name) = (viewer.clone(), name.clone());
            let params = Parameters {
                rendezvous_timeout: Some(10_000),
                ..Default::default()
            };
            tokio::spawn(async move { s.subscribe(name, params).await })
        };
        until(|| relay.metrics().value("moq_relay_subscriptions_active") > 0).await;
        let publisher = transport_session(&relay, true).await;
        let t = publisher
            .publish(name, PublishOptions::default())
            .await
            .unwrap();
        t.accepted().await.unwrap();
        let sent = [
            moq_transport::track::Object {
                location: Location::new(0, 0),
                priority: 128,
                payload: bytes::Bytes::from_static(b"held"),
                end_of_group: true,
                ..Default::default()
            },
            moq_transport::track::Object {
                location: Location::new(1, 0),
                priority: 128,
                payload: bytes::Bytes::from_static(b"next"),
                ..Default::default()
            },
        ];
        for o in &sent {
            assert!(t.writer().send_datagram(o).unwrap());
        }
        let mut sub = pending.await.unwrap().unwrap();
        // Datagrams keep no order (both groups may be cached by the time it is answered).
        let mut got = Vec::new();
        for _ in &sent {
            match sub.next().await.unwrap().unwrap() {
                TrackEvent::Datagram(o) => got.push(o),
                TrackEvent::Subgroup(_) => panic!("a subgroup stream"),
            }
        }
        got.sort_by_key(|o| o.location);
        assert_eq!(got, sent);
    })
    .await;
}
