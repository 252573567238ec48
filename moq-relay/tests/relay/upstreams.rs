//! Publishers that come and go: switchover, a dead or restarted publisher, a track ending with its
//! publisher, a new upstream filling what the cache misses, two upstreams feeding one subgroup
//! (draft-19 §9.3-§9.5, §10.7).

use std::time::Duration;

use moq_client::{FullTrackName, Location, NamespaceEvent, Publisher, SubscribeOptions, Version};
use moq_core::Properties;
use moq_core::codes::{PublishDoneCode, RequestErrorCode, SessionErrorCode};
use moq_core::data::SubgroupId;
use moq_core::message::{Parameters, RequestError};
use moq_relay::Relay;
use moq_transport::track::{FetchEnd, Incoming, PublishOptions, SubscribeResponse, TrackEvent};

use crate::common::{case, read_objects};
use crate::support::{
    announce, client_with, connect, next_fetch, next_payload, next_stream, next_subscribe, ns,
    relay, relay_knows, relay_with, timeout, track, transport_session, until, url,
    write_first_object,
};

#[tokio::test]
async fn switchover_without_duplicates_or_gaps() {
    timeout(async {
        let relay = relay();
        let n = ns(&["mobile", "cam1"]);
        let name = track(&n, "video");
        // One publisher application, its namespace and track shared by two sessions: the
        // second session is the publisher's new network path (seed 003).
        let app = Publisher::default();
        let producer = app.create_track(name.clone()).unwrap();
        let _handle = app.publish_namespace(n.clone()).unwrap();
        let old = client_with(&relay, app.clone(), Version::Draft19)
            .connect(&url(&relay, false))
            .await
            .unwrap();
        let viewer = connect(&relay, true).await;
        // Wait until the relay knows the namespace, then subscribe.
        let mut d = viewer
            .subscriber()
            .subscribe_namespace(n.clone())
            .await
            .unwrap();
        assert!(matches!(
            d.next().await.unwrap().unwrap(),
            NamespaceEvent::Added(_)
        ));
        let mut sub = viewer
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();

        let write = |g: u64| {
            let mut w = producer.create_group(g).unwrap();
            w.write(format!("g{g}")).unwrap();
            w.finish().unwrap();
        };
        for g in 0..5 {
            write(g);
        }
        // The new session arrives and publishes the same namespace; for a while both send.
        let new = client_with(&relay, app.clone(), Version::Draft19)
            .connect(&url(&relay, false))
            .await
            .unwrap();
        // Wait until the relay's subscription on the new session is served too (it carries
        // what is published from then on, draft-19 §10.7).
        until(|| producer.subscribers() >= 2).await;
        until(|| {
            relay
                .metrics()
                .value("moq_relay_upstream_subscriptions_active")
                == 2
        })
        .await;
        for g in 5..10 {
            write(g);
        }
        // Both paths deliver groups 5..9 (0..9 on the old one, 5..9 on the new one).
        until(|| relay.metrics().value("moq_relay_objects_received_total") >= 15).await;
        // The old path goes away.
        old.close();
        drop(old);
        for g in 10..15 {
            write(g);
        }
        let got = read_objects(&mut sub, 15).await;
        let mut groups: Vec<u64> = got.iter().map(|(g, _)| *g).collect();
        groups.sort();
        assert_eq!(
            groups,
            (0..15).collect::<Vec<_>>(),
            "no duplicates, no gaps"
        );
        assert!(
            relay.metrics().value("moq_relay_objects_duplicate_total") > 0,
            "both paths delivered overlapping objects"
        );
        // Nothing else arrives.
        let more = tokio::time::timeout(Duration::from_millis(300), sub.next_group()).await;
        assert!(more.is_err(), "an extra group arrived: {more:?}");
        drop(new);
    })
    .await;
}

/// A publisher whose session dies (closed with an error, not NO_ERROR: a crash) leaves its
/// subscribers subscribed for `publisher_wait`, then they get PUBLISH_DONE (TRACK_ENDED: the
/// track is no longer published), over raw QUIC and WebTransport.
#[tokio::test]
async fn a_dead_publishers_subscribers_end_after_the_wait() {
    let wait = Duration::from_millis(800);
    let relay = relay_with(|c| c.publisher_wait = wait);
    for webtransport in [false, true] {
        case(format!("{webtransport:?}"), async {
            let n = ns(&["dies", if webtransport { "wt" } else { "quic" }]);
            let publisher = connect(&relay, webtransport).await;
            let _h = announce(&publisher, &n).await;
            let producer = publisher.publisher().create_track(track(&n, "t")).unwrap();
            let viewer = connect(&relay, !webtransport).await;
            let mut t = viewer
                .subscriber()
                .subscribe(track(&n, "t"), SubscribeOptions::default())
                .await
                .unwrap();
            let mut g = producer.append_group().unwrap();
            g.write("before").unwrap();
            g.finish().unwrap();
            assert_eq!(read_objects(&mut t, 1).await[0].1, "before");

            publisher
                .transport()
                .close(SessionErrorCode::INTERNAL_ERROR, "crashed");
            let died = std::time::Instant::now();
            assert!(t.next_group().await.is_none(), "ended with PUBLISH_DONE");
            let took = died.elapsed();
            assert_eq!(
                t.publish_done().map(|d| d.status),
                Some(PublishDoneCode::TRACK_ENDED)
            );
            // Not before the wait; soon after it.
            assert!(took >= wait, "ended after {took:?}, before the wait");
            assert!(took < wait + Duration::from_secs(3), "ended after {took:?}");
            eprintln!("webtransport={webtransport}: PUBLISH_DONE {took:?} after the publisher died (wait {wait:?})");
        })
        .await;
    }
}

/// A publisher that dies and restarts (a new session, a new producer) with its groups numbered
/// from the clock reaches the existing subscribers at its first object, on the same
/// subscription, with nothing duplicated; one that restarts from group 0 ends the old
/// subscriptions at once (they cannot continue below their start) and new ones get it.
#[tokio::test]
async fn a_restarted_publisher_reaches_existing_subscribers() {
    timeout(async {
        let relay = relay_with(|c| c.publisher_wait = Duration::from_secs(10));
        for (webtransport, from_clock) in [(false, true), (true, true), (false, false), (true, false)] {
            let n = ns(&["restarts", &format!("{webtransport}-{from_clock}")]);
            let name = track(&n, "t");
            let options = || {
                let o = moq_client::TrackOptions::default();
                if from_clock { o.groups_from_clock() } else { o }
            };
            let first = connect(&relay, webtransport).await;
            let h = announce(&first, &n).await;
            let p = first.publisher().create_track_with(name.clone(), options()).unwrap();
            let viewer = connect(&relay, !webtransport).await;
            let mut t = viewer
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            for _ in 0..2 {
                let mut g = p.append_group().unwrap();
                g.write("old").unwrap();
                g.finish().unwrap();
            }
            let old = read_objects(&mut t, 2).await;

            // A crash: the session ends with an error, and the producer never says the track
            // ended (held until the end of the round).
            first.transport().close(SessionErrorCode::INTERNAL_ERROR, "crashed");
            let _crashed = (h, p);
            let second = connect(&relay, webtransport).await;
            let _h = announce(&second, &n).await;
            let p = second.publisher().create_track_with(name.clone(), options()).unwrap();
            if !from_clock {
                // Group 0 again: the old subscription ends at once, not after the wait.
                p.subscribed().await;
                let mut g = p.append_group().unwrap();
                g.write("new").unwrap();
                g.finish().unwrap();
                assert!(t.next_group().await.is_none(), "old subscription ended");
                let mut fresh = viewer
                    .subscriber()
                    .subscribe(name.clone(), SubscribeOptions::default())
                    .await
                    .unwrap();
                let mut g = p.append_group().unwrap();
                g.write("newer").unwrap();
                g.finish().unwrap();
                assert_eq!(read_objects(&mut fresh, 1).await[0], (1, "newer".to_string()));
                continue;
            }
            // The relay subscribes the new publisher for the waiting subscription.
            p.subscribed().await;
            let mut g = p.append_group().unwrap();
            g.write("new").unwrap();
            g.finish().unwrap();
            let written = std::time::Instant::now();
            let new = read_objects(&mut t, 1).await;
            let took = written.elapsed();
            assert_eq!(new[0].1, "new");
            assert!(new[0].0 > old[1].0, "numbered above the old groups: {old:?} {new:?}");
            assert!(took < Duration::from_secs(1), "first object after {took:?}");
            eprintln!("webtransport={webtransport}: restarted publisher's first object reached the subscriber in {took:?}");
        }
    })
    .await;
}

/// A published track ends with its publisher, however it goes: PUBLISH_DONE, or its session
/// closing under a live subscription (the relay's task for it is aborted then, and once leaked
/// the track, so a later SUBSCRIBE was answered at once from the dead track's cache). A later
/// SUBSCRIBE waits for the next publisher of the name and gets only its objects.
// On two threads, as the relay binary runs: the session's end and its tasks' race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_track_ends_with_its_publisher() {
    timeout(async {
        let relay = relay();
        let name = track(&ns(&["republished"]), "t");
        // Publishes one object and ends with PUBLISH_DONE or not; returns the session.
        async fn publish_one(
            relay: &Relay,
            name: &FullTrackName,
            payload: &'static [u8],
            done: bool,
        ) -> moq_transport::Session {
            let publisher = transport_session(relay, false).await;
            let t = publisher
                .publish(name.clone(), PublishOptions::default())
                .await
                .unwrap();
            t.accepted().await.unwrap();
            let w = t.into_writer();
            write_first_object(&w, payload).await;
            // The relay has the object.
            w.delivered().await;
            if done {
                w.finish(PublishDoneCode::TRACK_ENDED, "").await.unwrap();
            }
            publisher
        }
        for done in [false, true].repeat(3) {
            publish_one(&relay, &name, b"old", done)
                .await
                .close(SessionErrorCode::NO_ERROR, "done");
            // The relay let go of that publisher.
            let m = relay.metrics();
            until(|| {
                m.value("moq_relay_upstream_subscriptions_active") == 0
                    && m.value("moq_relay_subscriptions_active") == 0
            })
            .await;
            let viewer = transport_session(&relay, false).await;
            let params = Parameters {
                rendezvous_timeout: Some(10_000),
                ..Default::default()
            };
            // The next publisher stays until its object is read: a relay may lose what it had
            // not read when a session closes.
            let (sub, _next) = tokio::join!(viewer.subscribe(name.clone(), params), async {
                // Held until this publisher comes.
                until(|| relay.metrics().value("moq_relay_subscriptions_active") > 0).await;
                publish_one(&relay, &name, b"new", true).await
            });
            let mut sub = sub.unwrap();
            let mut got = Vec::new();
            while let Some(ev) = sub.next().await {
                let TrackEvent::Subgroup(mut g) = ev.unwrap() else {
                    panic!("datagram")
                };
                while let Some(o) = g.next_object().await.unwrap() {
                    got.push(o.payload);
                }
            }
            assert_eq!(got, vec![bytes::Bytes::from_static(b"new")], "done: {done}");
        }
    })
    .await;
}

/// A new upstream of a track the relay already caches carries only what is published after its
/// SUBSCRIBE (draft-19 §10.7): the relay fetches the rest from it (Joining FETCH from the group of
/// its last stored object) and its subscribers miss nothing and see nothing twice.
#[tokio::test]
async fn a_new_upstream_fills_what_the_cache_misses() {
    timeout(async {
        let relay = relay();
        let n = ns(&["switch"]);
        let name = track(&n, "t");
        let a = connect(&relay, false).await;
        let _ha = announce(&a, &n).await;
        let producer = a.publisher().create_track(name.clone()).unwrap();
        let viewer = connect(&relay, false).await;
        let mut sub = viewer
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        let mut g = producer.create_group(0).unwrap();
        g.write("g0").unwrap();
        g.finish().unwrap();
        assert_eq!(read_objects(&mut sub, 1).await, vec![(0, "g0".to_string())]);

        // The publisher's new path has published groups 1 and 2 already.
        let b = transport_session(&relay, false).await;
        let _hb = b.publish_namespace(n.clone()).await.unwrap();
        let up = next_subscribe(&b).await;
        let writer = up
            .accept(SubscribeResponse {
                track_alias: None,
                largest: Some(Location::new(2, 0)),
                expires: None,
                track_properties: Properties::new(),
            })
            .await
            .unwrap();
        let fetch = next_fetch(&b).await;
        assert_eq!(
            fetch.start(),
            Location::new(0, 0),
            "from the last stored group"
        );
        assert_eq!(
            fetch.end(),
            Location::new(2, 1),
            "up to the Largest Location"
        );
        let mut w = fetch
            .accept(FetchEnd {
                end_of_track: false,
                end: Location::new(2, 1),
                track_properties: Properties::new(),
            })
            .await
            .unwrap();
        for g in 0..3 {
            w.write(&moq_transport::track::Object {
                location: Location::new(g, 0),
                subgroup: Some(0),
                priority: 128,
                payload: bytes::Bytes::from(format!("g{g}")),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        w.finish();
        // Then the new path carries what comes after (group 2 may yet continue on it: its
        // fetched part stays open until a later group starts).
        let mut s = writer
            .open_subgroup(3, SubgroupId::Zero, None, true)
            .await
            .unwrap();
        s.write_object(0, bytes::Bytes::from_static(b"g3"))
            .await
            .unwrap();
        s.finish();
        assert_eq!(
            read_objects(&mut sub, 3).await,
            vec![
                (1, "g1".to_string()),
                (2, "g2".to_string()),
                (3, "g3".to_string())
            ]
        );
        assert!(
            relay.metrics().value("moq_relay_objects_duplicate_total") >= 1,
            "{{0, 0}} came twice"
        );
    })
    .await;
}

/// draft-19 §9.4, §11.4.3: two upstreams feeding one subgroup during a switchover never make
/// the relay reorder or drop its objects. The old path has delivered objects 0-2; the new path
/// says object 3 is published, refuses the FETCH of what the relay lacks, and sends its stream
/// from object 4 on (not from the subgroup's first object); the old path's object 3 arrives
/// after that. Downstream gets 0-6 on the one stream, in order, each once.
#[tokio::test]
async fn two_upstreams_feeding_one_subgroup_never_reorder_or_drop_it() {
    timeout(async {
        let relay = relay();
        let n = ns(&["overlap"]);
        let name = track(&n, "t");
        let payload = |i: u64| bytes::Bytes::from(format!("o{i}"));
        let old = transport_session(&relay, false).await;
        let _old_ns = old.publish_namespace(n.clone()).await.unwrap();
        relay_knows(&relay, &n).await;
        let viewer = transport_session(&relay, false).await;
        let pending = {
            let (v, name) = (viewer.clone(), name.clone());
            tokio::spawn(async move { v.subscribe(name, Parameters::default()).await })
        };
        let old_writer = next_subscribe(&old)
            .await
            .accept(SubscribeResponse::default())
            .await
            .unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        let mut old_stream = old_writer
            .open_subgroup(0, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        for i in 0..3 {
            old_stream.write_object(i, payload(i)).await.unwrap();
        }
        let mut down = next_stream(&mut sub).await;
        for i in 0..3 {
            let got = next_payload(&mut down).await;
            assert_eq!(got, (Location::new(0, i), payload(i).to_vec()));
        }
        // The new path.
        let new = transport_session(&relay, false).await;
        let _new_ns = new.publish_namespace(n.clone()).await.unwrap();
        let new_writer = next_subscribe(&new)
            .await
            .accept(SubscribeResponse {
                largest: Some(Location::new(0, 3)),
                ..Default::default()
            })
            .await
            .unwrap();
        match new.incoming().next().await.unwrap() {
            Incoming::Fetch(f) => f.reject(RequestError::new(
                RequestErrorCode::INTERNAL_ERROR,
                "not now",
            )),
            other => panic!("expected FETCH, got {other:?}"),
        }
        let mut new_stream = new_writer
            .open_subgroup(0, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        new_stream.set_first_object(false);
        for i in 4..7 {
            new_stream.write_object(i, payload(i)).await.unwrap();
        }
        new_stream.finish();
        // The relay has read the new path's first object (and the old path's three).
        until(|| relay.metrics().value("moq_relay_objects_received_total") >= 4).await;
        for i in 3..7 {
            old_stream.write_object(i, payload(i)).await.unwrap();
        }
        old_stream.finish();
        for i in 3..7 {
            let got = next_payload(&mut down).await;
            assert_eq!(got, (Location::new(0, i), payload(i).to_vec()));
        }
        assert!(
            down.next_object().await.unwrap().is_none(),
            "the stream ends"
        );
    })
    .await;
}
