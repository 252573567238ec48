//! The relay over loopback QUIC and WebTransport with several sessions: discovery, routing by
//! namespace prefix, fan-out from one upstream subscription, two publishers of one namespace,
//! switchover without duplicates or gaps, FETCH from cache and upstream, RENDEZVOUS_TIMEOUT,
//! PUBLISH / SUBSCRIBE_TRACKS forwarding, reserved namespaces and GOAWAY (draft-19 §6, §9).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moq_client::{
    Backoff, Client, FullTrackName, Location, NamespaceEvent, Publisher, Session, Status,
    SubscribeOptions, TrackNamespace, Version,
};
use moq_core::codes::{PublishDoneCode, RequestErrorCode, SessionErrorCode};
use moq_relay::{Relay, RelayConfig};
use moq_transport::Error;

mod common;
use common::{case, read_objects};

const TIMEOUT: Duration = Duration::from_secs(20);

async fn timeout<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("test timed out")
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

fn relay() -> Relay {
    relay_with(|_| {})
}

/// A relay with its development configuration changed by `f`.
fn relay_with(f: impl FnOnce(&mut RelayConfig)) -> Relay {
    init_tracing();
    let mut config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
    f(&mut config);
    let relay = Relay::bind(config).unwrap();
    relay.spawn();
    relay
}

fn url(relay: &Relay, webtransport: bool) -> String {
    let scheme = if webtransport { "https" } else { "moqt" };
    format!("{scheme}://localhost:{}/", relay.local_addr().port())
}

fn client(relay: &Relay) -> Client {
    Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .build()
        .unwrap()
}

fn client_with(relay: &Relay, publisher: Publisher, version: Version) -> Client {
    Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .publisher(publisher)
        .versions(vec![version])
        .build()
        .unwrap()
}

async fn connect(relay: &Relay, webtransport: bool) -> Session {
    client(relay)
        .connect(&url(relay, webtransport))
        .await
        .unwrap()
}

fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

fn track(n: &TrackNamespace, name: &str) -> FullTrackName {
    FullTrackName::new(n.clone(), name.as_bytes().to_vec()).unwrap()
}

/// Every object of a FETCH, in order.
async fn fetch_all(mut f: moq_client::FetchConsumer) -> Vec<moq_client::Object> {
    let mut out = Vec::new();
    while let Some(o) = f.next_object().await {
        out.push(o.expect("fetch failed"));
    }
    out
}

async fn announce(session: &Session, namespace: &TrackNamespace) -> moq_client::NamespaceHandle {
    let h = session
        .publisher()
        .publish_namespace(namespace.clone())
        .unwrap();
    h.announced().await.unwrap();
    h
}

#[tokio::test]
async fn discovery_across_versions_and_transports() {
    let relay = relay();
    let prefix = ns(&["meet"]);
    // Publishers over raw QUIC draft-19 and WebTransport draft-18; a subscriber on each.
    let (_a, _b, _ha, hb) = timeout(async {
        let a = client_with(&relay, Publisher::default(), Version::Draft19)
            .connect(&url(&relay, false))
            .await
            .unwrap();
        let b = client_with(&relay, Publisher::default(), Version::Draft18)
            .connect(&url(&relay, true))
            .await
            .unwrap();
        let ha = announce(&a, &prefix.child("a").unwrap()).await;
        let hb = announce(&b, &prefix.child("b").unwrap()).await;
        (a, b, ha, hb)
    })
    .await;
    for (webtransport, version) in [(false, Version::Draft18), (true, Version::Draft19)] {
        case(format!("webtransport {webtransport} {version:?}"), async {
            let s = client_with(&relay, Publisher::default(), version)
                .connect(&url(&relay, webtransport))
                .await
                .unwrap();
            let mut d = s
                .subscriber()
                .subscribe_namespace(prefix.clone())
                .await
                .unwrap();
            let mut got = BTreeSet::new();
            for _ in 0..2 {
                match d.next().await.unwrap().unwrap() {
                    NamespaceEvent::Added(n) => got.insert(n),
                    e => panic!("{e:?}"),
                };
            }
            assert_eq!(
                got,
                [prefix.child("a").unwrap(), prefix.child("b").unwrap()]
                    .into_iter()
                    .collect()
            );
        })
        .await;
    }
    timeout(async {
        // The relay indexes them; withdrawing removes them.
        assert!(relay.namespaces().contains(&prefix.child("b").unwrap()));
        let s = connect(&relay, false).await;
        let mut d = s
            .subscriber()
            .subscribe_namespace(prefix.clone())
            .await
            .unwrap();
        let _ = (d.next().await, d.next().await);
        drop(hb);
        assert_eq!(
            d.next().await.unwrap().unwrap(),
            NamespaceEvent::Removed(prefix.child("b").unwrap())
        );
    })
    .await;
}

#[tokio::test]
async fn subscribe_routes_by_namespace_prefix_and_fans_out() {
    timeout(async {
        let relay = relay();
        let publisher = connect(&relay, false).await;
        // The publisher announces (live); the track lives deeper, in (live, sports).
        let _h = announce(&publisher, &ns(&["live"])).await;
        let name = track(&ns(&["live", "sports"]), "video");
        let producer = publisher.publisher().create_track(name.clone()).unwrap();

        // Three subscribers over both transports share one upstream subscription.
        let mut subs = Vec::new();
        for i in 0..3 {
            let s = connect(&relay, i % 2 == 1).await;
            let t = s
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            subs.push((s, t));
        }
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_upstream_subscriptions_active"),
            1,
            "one upstream per track"
        );
        assert_eq!(relay.metrics().value("moq_relay_subscriptions_active"), 3);
        for i in 0..4 {
            let mut g = producer.append_group().unwrap();
            g.write(format!("frame {i}")).unwrap();
            g.finish().unwrap();
        }
        for (_, t) in subs.iter_mut() {
            let mut got = read_objects(t, 4).await;
            got.sort();
            assert_eq!(
                got.iter().map(|(g, _)| *g).collect::<Vec<_>>(),
                vec![0, 1, 2, 3]
            );
        }
        assert!(relay.metrics().serve.objects.load(Ordering::Relaxed) >= 12);
        // A track nobody publishes: DOES_NOT_EXIST.
        let s = connect(&relay, false).await;
        assert_eq!(
            rejected(
                s.subscriber()
                    .subscribe(track(&ns(&["nobody"]), "x"), SubscribeOptions::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
    })
    .await;
}

/// Groups a publisher writes at once after a subscriber's SUBSCRIBE was answered all come
/// through the relay (draft-19 §10.7), in the order written: whether the publisher announced
/// the namespace (the relay SUBSCRIBEs upstream) or PUBLISHed the track. The publisher and the
/// relay open their subgroup streams in the track's order, and the relay stores the upstream's
/// subgroups in the order their streams came; both once took the order their tasks happened
/// to run in, and on a multi-threaded runtime (as the relay binary runs) the task spawned last
/// often runs first: the subscriber's first group was the last one written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_written_at_once_arrive_in_order() {
    for &version in Version::ALL {
        for pushed in [false, true] {
            timeout(async {
                let relay = relay();
                let n = ns(&["in-order"]);
                let name = track(&n, "t");
                let p = client_with(&relay, Publisher::default(), version)
                    .connect(&url(&relay, false))
                    .await
                    .unwrap();
                let producer = p.publisher().create_track(name.clone()).unwrap();
                let _announced = if pushed {
                    p.publish(&producer).await.unwrap();
                    None
                } else {
                    Some(announce(&p, &n).await)
                };
                let s = client_with(&relay, Publisher::default(), version)
                    .connect(&url(&relay, false))
                    .await
                    .unwrap();
                let mut sub = s
                    .subscriber()
                    .subscribe(name.clone(), SubscribeOptions::default())
                    .await
                    .unwrap();
                for g in 0..3 {
                    let mut w = producer.append_group().unwrap();
                    w.write(format!("{g}")).unwrap();
                    w.finish().unwrap();
                }
                let want: Vec<_> = (0..3).map(|g| (g, format!("{g}"))).collect();
                assert_eq!(
                    read_objects(&mut sub, 3).await,
                    want,
                    "{version}, pushed {pushed}"
                );
            })
            .await;
        }
    }
}

#[tokio::test]
async fn two_publishers_of_one_namespace() {
    timeout(async {
        let relay = relay();
        let n = ns(&["shared"]);
        let name = track(&n, "t");
        // Both announce the same namespace; both are asked for the track; objects from both
        // are merged without duplicates.
        let p1 = connect(&relay, false).await;
        let p2 = connect(&relay, true).await;
        let _h1 = announce(&p1, &n).await;
        let _h2 = announce(&p2, &n).await;
        let t1 = p1.publisher().create_track(name.clone()).unwrap();
        let t2 = p2.publisher().create_track(name.clone()).unwrap();
        let s = connect(&relay, false).await;
        let mut sub = s
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        // The same group from both publishers (a redundant origin): delivered once.
        for t in [&t1, &t2] {
            let mut g = t.create_group(7).unwrap();
            g.write("seven").unwrap();
            g.finish().unwrap();
        }
        let got = read_objects(&mut sub, 1).await;
        assert_eq!(got, vec![(7, "seven".to_string())]);
        let mut g = t2.create_group(8).unwrap();
        g.write("eight").unwrap();
        g.finish().unwrap();
        let got = read_objects(&mut sub, 1).await;
        assert_eq!(
            got,
            vec![(8, "eight".to_string())],
            "no duplicate of group 7 in between"
        );
    })
    .await;
}

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

#[tokio::test]
async fn rendezvous_holds_a_subscribe_until_a_publisher_appears() {
    timeout(async {
        let relay = relay();
        let n = ns(&["later"]);
        let name = track(&n, "t");
        let s = connect(&relay, false).await;
        let subscribe = s.subscriber().subscribe(
            name.clone(),
            SubscribeOptions::default().rendezvous(Duration::from_secs(10)),
        );
        let publish = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let p = connect(&relay, true).await;
            let producer = p.publisher().create_track(name.clone()).unwrap();
            let h = announce(&p, &n).await;
            (p, producer, h)
        };
        let (sub, (_p, producer, _h)) = tokio::join!(subscribe, publish);
        let mut sub = sub.unwrap();
        let mut w = producer.append_group().unwrap();
        w.write("hi").unwrap();
        w.finish().unwrap();
        assert_eq!(read_objects(&mut sub, 1).await, vec![(0, "hi".to_string())]);
        // A short rendezvous with nobody: TIMEOUT.
        let err = s
            .subscriber()
            .subscribe(
                track(&ns(&["never"]), "t"),
                SubscribeOptions::default().rendezvous(Duration::from_millis(100)),
            )
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::TIMEOUT);
    })
    .await;
}

/// A publisher that announced the namespace but has not created the track yet: the relay's
/// upstream SUBSCRIBE carries the rendezvous time, so the publisher holds it too.
#[tokio::test]
async fn rendezvous_passes_upstream_to_an_announced_publisher() {
    timeout(async {
        let relay = relay();
        let n = ns(&["announced-early"]);
        let name = track(&n, "t");
        let p = connect(&relay, true).await;
        let _h = announce(&p, &n).await;
        let before = p.transport().open_requests();
        let s = connect(&relay, false).await;
        let pending = {
            let sub = s.subscriber().clone();
            let name = name.clone();
            tokio::spawn(async move {
                sub.subscribe(
                    name,
                    SubscribeOptions::default().rendezvous(Duration::from_secs(10)),
                )
                .await
            })
        };
        // No signal for "the upstream SUBSCRIBE is held": poll the publisher's request count.
        while p.transport().open_requests() <= before {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!pending.is_finished(), "answered before the track existed");
        let producer = p.publisher().create_track(name.clone()).unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        let mut w = producer.append_group().unwrap();
        w.write("late").unwrap();
        w.finish().unwrap();
        assert_eq!(
            read_objects(&mut sub, 1).await,
            vec![(0, "late".to_string())]
        );
    })
    .await;
}

#[tokio::test]
async fn publish_reaches_subscribe_tracks() {
    timeout(async {
        let relay = relay();
        let n = ns(&["pushed"]);
        let name = track(&n, "t");
        let viewer = connect(&relay, false).await;
        let mut tracks = viewer
            .subscriber()
            .subscribe_tracks(n.clone())
            .await
            .unwrap();
        // A publisher PUBLISHes a track to the relay.
        let p = connect(&relay, true).await;
        let published = p
            .transport()
            .publish(name.clone(), Default::default())
            .await
            .unwrap();
        published.accepted().await.unwrap();
        let writer = published.writer().clone();
        // The relay PUBLISHes it to the SUBSCRIBE_TRACKS subscriber.
        let incoming = match tracks.next().await.unwrap().unwrap() {
            moq_client::TrackOffer::Published(t) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(incoming.name(), &name);
        let mut sub = incoming.accept(Default::default()).await.unwrap();
        let mut s = writer
            .open_subgroup(0, moq_core::data::SubgroupId::Zero, None, true)
            .await
            .unwrap();
        s.write_object(0, bytes::Bytes::from_static(b"pushed"))
            .await
            .unwrap();
        s.finish();
        assert_eq!(
            read_objects(&mut sub, 1).await,
            vec![(0, "pushed".to_string())]
        );
    })
    .await;
}

#[tokio::test]
async fn reserved_namespaces_are_refused() {
    timeout(async {
        let relay = relay();
        let s = connect(&relay, false).await;
        for bad in [ns(&["."]), ns(&[".session", "x"])] {
            let err = s
                .transport()
                .publish_namespace(bad.clone())
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        }
        assert_eq!(
            rejected(
                s.subscriber()
                    .subscribe(track(&ns(&["."]), "x"), SubscribeOptions::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
    })
    .await;
}

#[tokio::test]
async fn goaway_moves_a_reconnecting_client() {
    timeout(async {
        let old = relay();
        let new = relay();
        let n = ns(&["moving"]);
        // A reconnecting client pinned to both relays' certificates.
        let client = Client::builder()
            .fingerprint(&old.fingerprint())
            .unwrap()
            .fingerprint(&new.fingerprint())
            .unwrap()
            .build()
            .unwrap();
        let r = client.reconnecting(&url(&old, false), Backoff::default());
        r.connected().await.unwrap();
        let _h = r.publisher().publish_namespace(n.clone()).unwrap();
        for _ in 0..200 {
            if old.namespaces().contains(&n) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(old.namespaces().contains(&n));
        old.goaway(&url(&new, false), Duration::from_secs(5)).await;
        let mut status = r;
        loop {
            match status.next_status().await.unwrap() {
                Status::Connected(u) if u == url(&new, false) => break,
                _ => {}
            }
        }
        for _ in 0..200 {
            if new.namespaces().contains(&n) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            new.namespaces().contains(&n),
            "namespaces re-published after GOAWAY"
        );
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

// ---------------------------------------------------------------------------------------------
// draft-19 §6, §9 rule by rule, with moq-transport sessions on both sides so that what the
// relay sends upstream (SUBSCRIBE, FETCH, their parameters) can be seen and answered by hand.

use moq_core::data::{ObjectStatus, SubgroupId};
use moq_core::message::{FetchType, Parameters, RequestError};
use moq_core::{
    AuthToken, LocationFilter, Properties, RangeFilter, RangeFilterKind, RangeFilterParam,
};
use moq_transport::track::{
    FetchEnd, FetchItem, Incoming, IncomingSubgroup, IncomingSubscribe, PublishOptions,
    SubscribeResponse, TrackEvent,
};
use moq_transport::{AuthRequest, Authorizer, RequestKind, SessionInfo};

/// An application-private Track / Object Property (draft-19 §15.8: 0x78-0x7F), integer-valued.
const APP_INT: u64 = 0x7A;
/// An application-private Property with a byte value.
const APP_BYTES: u64 = 0x79;

/// Polls `cond` until it holds: for relay states that send no signal (a held SUBSCRIBE, a
/// publisher let go), seen through the relay's counters.
async fn until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The relay's count `m` now.
/// Writes object {0, 0} on a stream of its own and finishes it.
async fn write_first_object(w: &moq_transport::track::SubscriptionWriter, payload: &'static [u8]) {
    let mut s = w
        .open_subgroup(0, SubgroupId::Zero, None, false)
        .await
        .unwrap();
    s.write_object(0, bytes::Bytes::from_static(payload))
        .await
        .unwrap();
    s.finish();
}

/// A moq-transport session to the relay that takes requests itself (SUBSCRIBE, FETCH, PUBLISH
/// ...), offering every version (the relay picks draft-19).
async fn transport_session(relay: &Relay, webtransport: bool) -> moq_transport::Session {
    transport_session_with(relay, webtransport, Version::ALL.to_vec()).await
}

/// A raw moq-transport session to the relay over raw QUIC, offering only `version`.
async fn transport_session_at(relay: &Relay, version: Version) -> moq_transport::Session {
    transport_session_with(relay, false, vec![version]).await
}

async fn transport_session_with(
    relay: &Relay,
    webtransport: bool,
    versions: Vec<Version>,
) -> moq_transport::Session {
    let client = moq_transport::endpoint::Client::new(moq_transport::endpoint::ClientConfig {
        tls: moq_transport::tls::ClientTls::pinned(
            moq_transport::tls::parse_fingerprint(&relay.fingerprint()).unwrap(),
        ),
        versions,
        session: moq_transport::SessionConfig::default().with_requests(),
        share_indexes: false,
        ..Default::default()
    })
    .unwrap();
    client.connect(&url(relay, webtransport)).await.unwrap()
}

/// Waits until the relay has `namespace` in its index (a route to its publisher exists).
async fn relay_knows(relay: &Relay, namespace: &TrackNamespace) {
    let (now, mut watch) = relay.namespaces().watch(namespace, 16);
    if now.contains(namespace) {
        return;
    }
    while let Some(ev) = watch.next().await {
        if ev == NamespaceEvent::Added(namespace.clone()) {
            return;
        }
    }
    panic!("namespace watch ended");
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

/// The next request a raw session receives, which must be a FETCH.
async fn next_fetch(s: &moq_transport::Session) -> moq_transport::track::IncomingFetch {
    match s.incoming().next().await.expect("no request") {
        Incoming::Fetch(f) => f,
        other => panic!("expected FETCH, got {other:?}"),
    }
}

async fn next_subscribe(s: &moq_transport::Session) -> IncomingSubscribe {
    match s.incoming().next().await.expect("no request") {
        Incoming::Subscribe(r) => r,
        other => panic!("expected SUBSCRIBE, got {other:?}"),
    }
}

fn rejected(e: impl Into<moq_client::Error>) -> RequestErrorCode {
    let e = e.into();
    e.rejection()
        .unwrap_or_else(|| panic!("expected REQUEST_ERROR, got {e:?}"))
}

/// Track properties the publishers below send: a known one and two the relay does not know.
fn track_props() -> Properties {
    Properties::new()
        .with_int(moq_core::property::DEFAULT_PUBLISHER_PRIORITY, 9)
        .unwrap()
        .with_bytes(APP_BYTES, &b"origin-a"[..])
        .unwrap()
        .with_int(APP_INT, 1)
        .unwrap()
}

/// Object `i` of the test subgroup: binary payloads of varying length (some empty), properties
/// on every third.
fn test_object(i: u64) -> (Properties, bytes::Bytes) {
    let props = if i % 3 == 0 {
        Properties::new()
            .with_int(APP_INT, i)
            .unwrap()
            .with_bytes(APP_BYTES, vec![0xFF, 0x00, i as u8])
            .unwrap()
    } else {
        Properties::new()
    };
    let payload: Vec<u8> = (0..(i * 37) % 300).map(|b| (b * 7 + i) as u8).collect();
    (props, payload.into())
}

/// A round trip on `session`'s connection to the relay: anything the relay sent before its
/// answer has had time to arrive (used before checking that something did not happen).
async fn round_trip(session: &moq_transport::Session) {
    // Answered with REQUEST_OK the first time, PREFIX_OVERLAP later: either is a round trip.
    let _ = session.subscribe_namespace(ns(&["round-trip"])).await;
}

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

/// draft-19 §9.5: a SUBSCRIBE goes to every publisher whose PUBLISH_NAMESPACE is the track's
/// namespace or a prefix of it (fields matched whole: (ab) is no prefix of (a, b)), each with
/// Forward=1; a PUBLISHed track does not make its publisher a route for its namespace (an
/// explicit PUBLISH_NAMESPACE is needed), though the track itself is served.
#[tokio::test]
async fn subscribe_goes_to_every_matching_publisher_only() {
    timeout(async {
        let relay = relay();
        let (p1, p2, p3, p4) = (
            transport_session(&relay, false).await,
            transport_session(&relay, true).await,
            transport_session(&relay, false).await,
            transport_session(&relay, true).await,
        );
        let _a1 = p1.publish_namespace(ns(&["a"])).await.unwrap();
        let _a2 = p2.publish_namespace(ns(&["a", "b"])).await.unwrap();
        let _a3 = p3.publish_namespace(ns(&["ab"])).await.unwrap();
        for n in [ns(&["a"]), ns(&["a", "b"]), ns(&["ab"])] {
            relay_knows(&relay, &n).await;
        }
        let subscriber = transport_session(&relay, false).await;
        let name = track(&ns(&["a", "b"]), "t");
        let pending = {
            let s = subscriber.clone();
            let name = name.clone();
            tokio::spawn(async move { s.subscribe(name, Parameters::default()).await })
        };
        let mut writers = Vec::new();
        for p in [&p1, &p2] {
            let upstream = next_subscribe(p).await;
            assert_eq!(upstream.track(), &name);
            assert_ne!(upstream.params().forward, Some(false));
            writers.push(upstream.accept(SubscribeResponse::default()).await.unwrap());
        }
        let mut sub = pending.await.unwrap().unwrap();
        // Objects from either publisher reach the subscriber (draft-19 §9.3).
        for (g, w) in writers.iter().enumerate() {
            let mut s = w
                .open_subgroup(g as u64, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            s.write_object(0, bytes::Bytes::from(format!("from p{}", g + 1)))
                .await
                .unwrap();
            s.finish();
        }
        let mut from = BTreeSet::new();
        while from.len() < 2 {
            let TrackEvent::Subgroup(mut s) = sub.next().await.unwrap().unwrap() else {
                panic!("datagram")
            };
            let o = s.next_object().await.unwrap().unwrap();
            from.insert(String::from_utf8(o.payload.to_vec()).unwrap());
        }
        assert_eq!(from, BTreeSet::from(["from p1".into(), "from p2".into()]));
        // p3's (ab) did not match: the first SUBSCRIBE it sees is one for its own namespace.
        let other = {
            let s = subscriber.clone();
            tokio::spawn(async move {
                s.subscribe(track(&ns(&["ab"]), "t"), Parameters::default())
                    .await
            })
        };
        let upstream = next_subscribe(&p3).await;
        assert_eq!(upstream.track(), &track(&ns(&["ab"]), "t"));
        let _w3 = upstream.accept(SubscribeResponse::default()).await.unwrap();
        let _ = other.await.unwrap().unwrap();

        // p4 PUBLISHes (solo)/t1 without PUBLISH_NAMESPACE: (solo)/t1 is served, (solo)/t2 is
        // not routed to p4.
        let published = p4
            .publish(track(&ns(&["solo"]), "t1"), PublishOptions::default())
            .await
            .unwrap();
        published.accepted().await.unwrap();
        let err = subscriber
            .subscribe(track(&ns(&["solo"]), "t2"), Parameters::default())
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::DOES_NOT_EXIST);
        let _ = subscriber
            .subscribe(track(&ns(&["solo"]), "t1"), Parameters::default())
            .await
            .unwrap();
        // A namespace route appears only with the explicit PUBLISH_NAMESPACE.
        assert!(!relay.namespaces().contains(&ns(&["solo"])));
    })
    .await;
}

/// A TRACK_PROPERTY_FILTER (0x29) on APP_INT = 1 (SetID 0, one range [1, 1]).
fn app_int_is_one() -> Parameters {
    Parameters {
        range_filters: vec![RangeFilterParam {
            kind: RangeFilterKind::TrackProperty,
            filter: Some(RangeFilter {
                set_id: 0,
                property_type: Some(APP_INT),
                ranges: vec![moq_core::FilterRange {
                    start: 1,
                    end: Some(1),
                }],
            }),
        }],
        ..Default::default()
    }
}

/// draft-19 §6.1, §6.3, §9.5, §9.6: SUBSCRIBE_TRACKS with a zero-field prefix covers every
/// namespace; the relay PUBLISHes matching tracks with their properties, but never the
/// subscriber's own tracks, and not those whose Track Properties fail its TRACK_PROPERTY_FILTER.
#[tokio::test]
async fn subscribe_tracks_skips_own_and_filtered_tracks() {
    timeout(async {
        let relay = relay();
        let viewer = transport_session(&relay, false).await;
        let _tracks = viewer
            .subscribe_tracks(TrackNamespace::empty(), app_int_is_one())
            .await
            .unwrap();
        let props = |v: u64| Properties::new().with_int(APP_INT, v).unwrap();
        // The viewer's own track passes the filter but is its own.
        let own = viewer
            .publish(
                track(&ns(&["mine"]), "own"),
                PublishOptions {
                    track_properties: props(1),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        own.accepted().await.unwrap();
        let publisher = transport_session(&relay, true).await;
        let mut kept = Vec::new();
        for (name, value) in [("filtered", 2), ("passes", 1)] {
            let p = publisher
                .publish(
                    track(&ns(&["other"]), name),
                    PublishOptions {
                        track_properties: props(value),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            p.accepted().await.unwrap();
            kept.push(p);
        }
        // The first (and only) PUBLISH the viewer gets is the one that passes.
        match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => {
                assert_eq!(p.track(), &track(&ns(&["other"]), "passes"));
                assert_eq!(p.info().track_properties, props(1));
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

/// draft-19 §9.5, §10.2.6: a SUBSCRIBE held for a publisher (RENDEZVOUS_TIMEOUT) proceeds when
/// the track is PUBLISHed, and that PUBLISH is not also forwarded to the same subscriber through
/// its SUBSCRIBE_TRACKS.
#[tokio::test]
async fn held_subscribe_takes_the_publish() {
    timeout(async {
        let relay = relay();
        let n = ns(&["held"]);
        let viewer = transport_session(&relay, false).await;
        let _tracks = viewer
            .subscribe_tracks(n.clone(), Parameters::default())
            .await
            .unwrap();
        let pending = {
            let s = viewer.clone();
            let params = Parameters {
                rendezvous_timeout: Some(10_000),
                ..Default::default()
            };
            let name = track(&n, "t");
            tokio::spawn(async move { s.subscribe(name, params).await })
        };
        // Held by the relay.
        until(|| relay.metrics().value("moq_relay_subscriptions_active") > 0).await;
        let publisher = transport_session(&relay, true).await;
        let t = publisher
            .publish(track(&n, "t"), PublishOptions::default())
            .await
            .unwrap();
        t.accepted().await.unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        let u = publisher
            .publish(track(&n, "u"), PublishOptions::default())
            .await
            .unwrap();
        u.accepted().await.unwrap();
        // The only PUBLISH the viewer gets is for u.
        match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => assert_eq!(p.track(), &track(&n, "u")),
            other => panic!("{other:?}"),
        }
        // And t's objects arrive on the SUBSCRIBE.
        write_first_object(t.writer(), b"t0").await;
        let TrackEvent::Subgroup(mut g) = sub.next().await.unwrap().unwrap() else {
            panic!("datagram")
        };
        assert_eq!(&g.next_object().await.unwrap().unwrap().payload[..], b"t0");
    })
    .await;
}

/// A SUBSCRIBE held for its publisher starts where the track stood when the publisher answered:
/// an object the publisher sends right after PUBLISH_OK reaches it, even when the relay ingests
/// it before it answers the SUBSCRIBE (it once started after that object).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_subscribe_gets_the_first_object() {
    timeout(async {
        let relay = relay();
        let n = ns(&["held-first"]);
        for round in 0..5 {
            let name = track(&n, &format!("t{round}"));
            let viewer = transport_session(&relay, false).await;
            let before = relay.metrics().value("moq_relay_subscriptions_active");
            let pending = {
                let s = viewer.clone();
                let params = Parameters {
                    rendezvous_timeout: Some(10_000),
                    ..Default::default()
                };
                let name = name.clone();
                tokio::spawn(async move { s.subscribe(name, params).await })
            };
            // Held by the relay.
            until(|| relay.metrics().value("moq_relay_subscriptions_active") > before).await;
            let publisher = transport_session(&relay, true).await;
            let t = publisher
                .publish(name, PublishOptions::default())
                .await
                .unwrap();
            t.accepted().await.unwrap();
            write_first_object(t.writer(), b"first").await;
            let mut sub = pending.await.unwrap().unwrap();
            let TrackEvent::Subgroup(mut g) = sub.next().await.unwrap().unwrap() else {
                panic!("datagram")
            };
            let o = g.next_object().await.unwrap().unwrap();
            assert_eq!(
                (o.location.object, &o.payload[..]),
                (0, &b"first"[..]),
                "round {round}"
            );
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

/// Publishing needs the token "pub" and, for PUBLISH, the track name "allowed"; anything under
/// (private) needs the token "key".
struct Policy;

impl Policy {
    fn decide(req: &AuthRequest<'_>) -> Result<(), RequestError> {
        let has = |t: &[u8]| req.tokens.iter().any(|x| &x.value[..] == t);
        let private = req.namespace.field(0).is_some_and(|f| f == b"private");
        let ok = match req.kind {
            RequestKind::PublishNamespace => has(b"pub"),
            RequestKind::Publish => has(b"pub") && req.track_name == Some(&b"allowed"[..]),
            _ => !private || has(b"key"),
        };
        if ok {
            Ok(())
        } else {
            Err(RequestError::new(RequestErrorCode::UNAUTHORIZED, "policy"))
        }
    }
}

/// The trait is declared with `async_trait`; written out here without the macro.
impl Authorizer for Policy {
    fn authorize<'a, 'b, 'c, 'd, 'r>(
        &'a self,
        _session: &'b SessionInfo,
        req: &'c AuthRequest<'d>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RequestError>> + Send + 'r>>
    where
        'a: 'r,
        'b: 'r,
        'c: 'r,
        'd: 'r,
        Self: 'r,
    {
        Box::pin(std::future::ready(Policy::decide(req)))
    }
}

fn token(t: &'static str) -> Parameters {
    Parameters {
        authorization_tokens: vec![AuthToken::new(t)],
        ..Default::default()
    }
}

/// draft-19 §9.4, §9.5: the relay checks every subscriber's and publisher's authorization per
/// request (through its Authorizer): PUBLISH_NAMESPACE and PUBLISH need the publisher's token,
/// a PUBLISH authorized for one track says nothing about another, and SUBSCRIBE, FETCH and
/// TRACK_STATUS under (private) need the subscriber's token; refused requests create no route.
#[tokio::test]
async fn relay_authorizes_publishers_and_subscribers() {
    timeout(async {
        init_tracing();
        let mut config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
        config.authorizer = std::sync::Arc::new(Policy);
        let relay = Relay::bind(config).unwrap();
        relay.spawn();
        let p = transport_session(&relay, false).await;
        let err = p.publish_namespace(ns(&["private"])).await.unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        let _ok = p
            .publish_namespace_with(ns(&["private"]), token("pub"))
            .await
            .unwrap();
        relay_knows(&relay, &ns(&["private"])).await;
        let publish = |name: &'static str, tokens: Vec<AuthToken>| {
            let p = p.clone();
            async move {
                p.publish(
                    track(&ns(&["pushed"]), name),
                    PublishOptions {
                        authorization_tokens: tokens,
                        ..Default::default()
                    },
                )
                .await
                .unwrap()
                .accepted()
                .await
            }
        };
        assert_eq!(
            rejected(publish("allowed", vec![]).await.unwrap_err()),
            RequestErrorCode::UNAUTHORIZED
        );
        assert_eq!(
            rejected(
                publish("other", vec![AuthToken::new("pub")])
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::UNAUTHORIZED
        );
        publish("allowed", vec![AuthToken::new("pub")])
            .await
            .unwrap();

        let s = transport_session(&relay, true).await;
        let name = track(&ns(&["private"]), "t");
        let err = s
            .subscribe(name.clone(), Parameters::default())
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        let request = FetchType::Standalone {
            track: name.clone(),
            start: Location::new(0, 0),
            end: Location::new(1, 0),
        };
        let err = s.fetch(request, Parameters::default()).await.unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        let err = s
            .track_status(name.clone(), Parameters::default())
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        // Refused before anything went upstream: nothing was fetched there, and the first
        // request the publisher sees is the authorized SUBSCRIBE below.
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"miss\"}"),
            0
        );
        // With the token the SUBSCRIBE is routed to the publisher.
        let pending = {
            let s = s.clone();
            tokio::spawn(async move { s.subscribe(name, token("key")).await })
        };
        let upstream = next_subscribe(&p).await;
        assert!(
            upstream.params().authorization_tokens.is_empty(),
            "parameters are hop-by-hop"
        );
        let _w = upstream.accept(SubscribeResponse::default()).await.unwrap();
        let _ = pending.await.unwrap().unwrap();
    })
    .await;
}

/// A track routed through the relay: its publisher announced the namespace and answered the
/// relay's upstream SUBSCRIBE with `response`; a subscriber SUBSCRIBEd through the relay.
/// Bind every field (`_name`, not `_` or `..`): a dropped session closes.
struct Routed {
    _publisher: moq_transport::Session,
    _announced: moq_transport::namespace::PublishedNamespace,
    subscriber: moq_transport::Session,
    writer: moq_transport::track::SubscriptionWriter,
    sub: moq_transport::track::Subscription,
}

async fn routed(relay: &Relay, name: &FullTrackName, response: SubscribeResponse) -> Routed {
    let n = &name.namespace;
    let publisher = transport_session(relay, false).await;
    let announced = publisher.publish_namespace(n.clone()).await.unwrap();
    relay_knows(relay, n).await;
    let subscriber = transport_session(relay, false).await;
    let pending = {
        let (s, name) = (subscriber.clone(), name.clone());
        tokio::spawn(async move { s.subscribe(name, Parameters::default()).await })
    };
    let writer = next_subscribe(&publisher)
        .await
        .accept(response)
        .await
        .unwrap();
    let sub = pending.await.unwrap().unwrap();
    Routed {
        _publisher: publisher,
        _announced: announced,
        subscriber,
        writer,
        sub,
    }
}

/// The next subgroup stream of a raw subscription.
async fn next_stream(sub: &mut moq_transport::track::Subscription) -> IncomingSubgroup {
    match sub.next().await.unwrap().unwrap() {
        TrackEvent::Subgroup(g) => g,
        TrackEvent::Datagram(o) => panic!("a datagram: {o:?}"),
    }
}

/// The payload of a stream's next object.
async fn next_payload(s: &mut IncomingSubgroup) -> (Location, Vec<u8>) {
    let o = s.next_object().await.unwrap().unwrap();
    (o.location, o.payload.to_vec())
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

/// draft-19 §10.19.1: SUBSCRIBE_TRACKS's parameters are the default parameters of the
/// subscriptions its PUBLISHes create: GROUP_ORDER is carried in the PUBLISH, and the others
/// (here an OBJECTID range filter keeping objects 0 and 1) are applied by the relay.
#[tokio::test]
async fn subscribe_tracks_parameters_shape_the_publish() {
    timeout(async {
        let relay = relay();
        let n = ns(&["shaped"]);
        let viewer = transport_session(&relay, false).await;
        let defaults = Parameters {
            group_order: Some(moq_core::GroupOrder::Descending),
            range_filters: vec![RangeFilterParam {
                kind: RangeFilterKind::ObjectId,
                filter: Some(RangeFilter {
                    set_id: 0,
                    property_type: None,
                    ranges: vec![moq_core::FilterRange {
                        start: 0,
                        end: Some(1),
                    }],
                }),
            }],
            ..Default::default()
        };
        let _tracks = viewer.subscribe_tracks(n.clone(), defaults).await.unwrap();
        let publisher = transport_session(&relay, true).await;
        let published = publisher
            .publish(track(&n, "t"), PublishOptions::default())
            .await
            .unwrap();
        published.accepted().await.unwrap();
        let incoming = match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            incoming.params().group_order,
            Some(moq_core::GroupOrder::Descending)
        );
        let mut sub = incoming.accept(Parameters::default()).await.unwrap();
        let mut s = published
            .writer()
            .open_subgroup(0, SubgroupId::Zero, None, true)
            .await
            .unwrap();
        for i in 0..4 {
            s.write_object(i, bytes::Bytes::from(format!("o{i}")))
                .await
                .unwrap();
        }
        s.finish();
        let mut down = next_stream(&mut sub).await;
        assert_eq!(next_payload(&mut down).await.1, b"o0");
        assert_eq!(next_payload(&mut down).await.1, b"o1");
        // Objects 2 and 3 do not pass the filter: the stream ends after object 1.
        assert!(down.next_object().await.unwrap().is_none());
    })
    .await;
}

/// draft-19 §10.9, §10.9.2, §10.19: a REQUEST_UPDATE of SUBSCRIBE_TRACKS takes effect for the
/// PUBLISHes still to come (here a new TRACK_PROPERTY_FILTER), and a new prefix is
/// authorized like the request was: (private) without the token is refused (UNAUTHORIZED),
/// which ends the request.
#[tokio::test]
async fn subscribe_tracks_updates_take_effect_or_are_refused() {
    timeout(async {
        let mut config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
        config.authorizer = std::sync::Arc::new(Policy);
        let relay = Relay::bind(config).unwrap();
        relay.spawn();
        let viewer = transport_session(&relay, false).await;
        let mut tracks = viewer
            .subscribe_tracks(ns(&["other"]), app_int_is_one())
            .await
            .unwrap();
        // The filter moves to APP_INT = 2.
        let mut two = app_int_is_one();
        if let Some(f) = two.range_filters[0].filter.as_mut() {
            f.ranges[0] = moq_core::FilterRange {
                start: 2,
                end: Some(2),
            };
        }
        tracks.update(two).await.unwrap();
        let publisher = transport_session(&relay, true).await;
        let props = |v: u64| Properties::new().with_int(APP_INT, v).unwrap();
        let mut kept = Vec::new();
        // The policy lets PUBLISH through only for the track name "allowed".
        for (name, value) in [("one", 1), ("two", 2)] {
            let p = publisher
                .publish(
                    track(&ns(&["other", name]), "allowed"),
                    PublishOptions {
                        track_properties: props(value),
                        authorization_tokens: token("pub").authorization_tokens,
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            p.accepted().await.unwrap();
            kept.push(p);
        }
        match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => {
                assert_eq!(p.track(), &track(&ns(&["other", "two"]), "allowed"))
            }
            other => panic!("{other:?}"),
        }
        // A prefix the viewer may not see.
        let err = tracks
            .update(Parameters {
                track_namespace_prefix: Some(ns(&["private"])),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
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

/// draft-19 §6.1, §10.20: when the relay cannot create the PUBLISH for a SUBSCRIBE_TRACKS
/// subscriber (here: the subscriber sent GOAWAY, so the relay starts no new request to it), it
/// says so with PUBLISH_SKIPPED instead of leaving the subscriber guessing.
#[tokio::test]
async fn publish_skipped_when_the_publish_cannot_be_created() {
    timeout(async {
        let relay = relay();
        let n = ns(&["skipped"]);
        let viewer = transport_session(&relay, false).await;
        let mut tracks = viewer
            .subscribe_tracks(n.clone(), Parameters::default())
            .await
            .unwrap();
        viewer.goaway("", Duration::ZERO).await.unwrap();
        round_trip(&viewer).await;
        let publisher = transport_session(&relay, true).await;
        let p = publisher
            .publish(track(&n, "t"), PublishOptions::default())
            .await
            .unwrap();
        p.accepted().await.unwrap();
        let skipped = tracks.next_skipped().await.unwrap().unwrap();
        assert_eq!(skipped, track(&n, "t"));
    })
    .await;
}

/// The ways a test publisher makes a track malformed after a good object 0 in subgroup (0, 3)
/// at priority 10 (draft-19 §2.4.2, §9.1).
#[derive(Clone, Copy, Debug)]
enum Breach {
    /// Condition 1: the same subgroup on a second stream at another priority.
    Priority,
    /// Condition 5: an object after END_OF_TRACK.
    AfterEndOfTrack,
    /// §9.1: the same object in another subgroup.
    OtherSubgroup,
    /// Condition 7, §9.1: the same object as a datagram.
    AsDatagram,
    /// Conditions 2 and 3: two streams of one subgroup end with FIN at different objects.
    TwoFins,
}

/// draft-19 §2.4.2, §9.1: a relay that finds an upstream track malformed, in each way of
/// [`Breach`], terminates its downstream subscriptions with PUBLISH_DONE MALFORMED_TRACK, does
/// not forward (or cache) the offending object, and refuses a FETCH of the track with
/// MALFORMED_TRACK.
#[tokio::test]
async fn a_malformed_track_ends_downstream() {
    timeout(async {
        let relay = relay();
        for breach in [
            Breach::Priority,
            Breach::AfterEndOfTrack,
            Breach::OtherSubgroup,
            Breach::AsDatagram,
            Breach::TwoFins,
        ] {
            let name = track(&ns(&["malformed", &format!("{breach:?}")]), "t");
            let Routed {
                subscriber,
                writer,
                mut sub,
                _publisher,
                _announced,
            } = routed(&relay, &name, SubscribeResponse::default()).await;
            let bad = bytes::Bytes::from_static(b"bad");
            let mut first = writer
                .open_subgroup(0, SubgroupId::Explicit(3), Some(10), false)
                .await
                .unwrap();
            first
                .write_object(0, bytes::Bytes::from_static(b"ok"))
                .await
                .unwrap();
            let mut down = next_stream(&mut sub).await;
            assert_eq!(next_payload(&mut down).await.1, b"ok");
            let other = |group, id, priority| {
                writer.open_subgroup(group, SubgroupId::Explicit(id), Some(priority), false)
            };
            match breach {
                Breach::Priority => {
                    let mut second = other(0, 3, 20).await.unwrap();
                    second.write_object(1, bad).await.unwrap();
                    second.finish();
                }
                Breach::AfterEndOfTrack => {
                    let props = Properties::default();
                    let end = ObjectStatus::EndOfTrack;
                    first
                        .write(1, &props, end, bytes::Bytes::new(), None)
                        .await
                        .unwrap();
                    let mut later = other(1, 0, 10).await.unwrap();
                    later.write_object(0, bad).await.unwrap();
                    later.finish();
                }
                Breach::OtherSubgroup => {
                    let mut second = other(0, 4, 10).await.unwrap();
                    second.write_object(0, bad).await.unwrap();
                    second.finish();
                }
                Breach::AsDatagram => {
                    writer
                        .send_datagram(&moq_transport::track::Object {
                            location: Location::new(0, 0),
                            subgroup: None,
                            priority: 10,
                            status: ObjectStatus::Normal,
                            properties: Properties::default(),
                            payload: bad,
                            end_of_group: false,
                        })
                        .unwrap();
                }
                Breach::TwoFins => {
                    first
                        .write_object(1, bytes::Bytes::from_static(b"ok"))
                        .await
                        .unwrap();
                    let mut second = other(0, 3, 10).await.unwrap();
                    second
                        .write_object(0, bytes::Bytes::from_static(b"ok"))
                        .await
                        .unwrap();
                    second.finish();
                }
            }
            first.finish();
            while let Some(ev) = sub.next().await {
                let payload = match ev {
                    Ok(TrackEvent::Subgroup(mut s)) => {
                        while let Ok(Some(o)) = s.next_object().await {
                            assert_ne!(&o.payload[..], b"bad", "{breach:?}: forwarded");
                        }
                        continue;
                    }
                    Ok(TrackEvent::Datagram(o)) => o.payload,
                    Err(_) => break,
                };
                assert_ne!(&payload[..], b"bad", "{breach:?}: forwarded");
            }
            let done = sub.publish_done().expect("PUBLISH_DONE");
            assert_eq!(done.status, PublishDoneCode::MALFORMED_TRACK, "{breach:?}");
            let fetch = FetchType::Standalone {
                track: name.clone(),
                start: Location::new(0, 0),
                end: Location::new(1, 0),
            };
            match subscriber.fetch(fetch, Parameters::default()).await {
                Err(Error::Rejected(e)) => {
                    assert_eq!(e.code, RequestErrorCode::MALFORMED_TRACK, "{breach:?}")
                }
                other => panic!("{breach:?}: FETCH of a malformed track: {other:?}"),
            }
        }
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

/// draft-21 §9.8 (from draft-20): PUBLISH_OK carries no parameter, so a PUBLISH sent with
/// FORWARD 0 stays unforwarded until the subscriber's REQUEST_UPDATE: the relay, which takes
/// every PUBLISHed track, asks for FORWARD 1 (aiomoqt's publish-track-subscribe).
#[tokio::test]
async fn a_publish_with_forward_zero_is_asked_to_forward() {
    let relay = relay();
    let n = ns(&["forward", "zero"]);
    for version in [Version::Draft19, Version::Draft20, Version::Draft22] {
        case(format!("{version:?}"), async {
            let publisher = transport_session_at(&relay, version).await;
            let options = PublishOptions {
                subscription: Parameters {
                    forward: Some(false),
                    ..Default::default()
                },
                ..Default::default()
            };
            let p = publisher
                .publish(track(&n, &format!("v{}", version.draft())), options)
                .await
                .unwrap();
            p.accepted().await.unwrap();
            let w = p.writer();
            while !w.params().forward {
                w.params_changed().await.unwrap();
            }
        })
        .await;
    }
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
