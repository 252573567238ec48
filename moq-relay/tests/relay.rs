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
    SubscribeOptions, TrackNamespace, TrackStream, Version,
};
use moq_core::codes::RequestErrorCode;
use moq_relay::{Relay, RelayConfig};
use moq_transport::Error;

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
    init_tracing();
    let relay =
        Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap()).unwrap();
    relay.spawn();
    relay
}

fn url(relay: &Relay, webtransport: bool) -> String {
    let scheme = if webtransport { "https" } else { "moqt" };
    format!("{scheme}://localhost:{}/", relay.local_addr().port())
}

fn client(relay: &Relay) -> Client {
    Client::builder()
        .fingerprint(relay.fingerprint())
        .unwrap()
        .build()
        .unwrap()
}

fn client_with(relay: &Relay, publisher: Publisher, version: Version) -> Client {
    Client::builder()
        .fingerprint(relay.fingerprint())
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

/// Reads `n` objects (any groups), returning (group, payload) pairs in arrival order.
async fn read_objects(t: &mut TrackStream, n: usize) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let mut g = t.next().await.expect("track ended").expect("track failed");
        while let Some(o) = g.next_object().await {
            let o = o.unwrap();
            out.push((
                o.location.group,
                String::from_utf8_lossy(&o.payload).into_owned(),
            ));
        }
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
    timeout(async {
        let relay = relay();
        let prefix = ns(&["meet"]);
        // Publishers over raw QUIC draft-19 and WebTransport draft-18; a subscriber on each.
        let a = client_with(&relay, Publisher::default(), Version::Draft19)
            .connect(&url(&relay, false))
            .await
            .unwrap();
        let b = client_with(&relay, Publisher::default(), Version::Draft18)
            .connect(&url(&relay, true))
            .await
            .unwrap();
        let _ha = announce(&a, &prefix.child("a").unwrap()).await;
        let hb = announce(&b, &prefix.child("b").unwrap()).await;
        for (webtransport, version) in [(false, Version::Draft18), (true, Version::Draft19)] {
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
        }
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
            relay.metrics().upstream_active.load(Ordering::Relaxed),
            1,
            "one upstream per track"
        );
        assert_eq!(
            relay.metrics().subscriptions_active.load(Ordering::Relaxed),
            3
        );
        for i in 0..4 {
            let mut g = producer.append_group().unwrap();
            g.write(format!("frame {i}"));
            g.finish();
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
        match s
            .subscriber()
            .subscribe(track(&ns(&["nobody"]), "x"), SubscribeOptions::default())
            .await
            .unwrap_err()
        {
            Error::Rejected(e) => assert_eq!(e.code, RequestErrorCode::DOES_NOT_EXIST),
            e => panic!("{e:?}"),
        }
    })
    .await;
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
            g.write("seven");
            g.finish();
        }
        let got = read_objects(&mut sub, 1).await;
        assert_eq!(got, vec![(7, "seven".to_string())]);
        let mut g = t2.create_group(8).unwrap();
        g.write("eight");
        g.finish();
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
            w.write(format!("g{g}"));
            w.finish();
        };
        for g in 0..5 {
            write(g);
        }
        // The new session arrives and publishes the same namespace; for a while both send.
        let new = client_with(&relay, app.clone(), Version::Draft19)
            .connect(&url(&relay, false))
            .await
            .unwrap();
        // Wait until the relay subscribed on the new session too.
        for _ in 0..200 {
            if relay.metrics().upstream_active.load(Ordering::Relaxed) >= 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(relay.metrics().upstream_active.load(Ordering::Relaxed), 2);
        for g in 5..10 {
            write(g);
        }
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
            relay.metrics().duplicates.load(Ordering::Relaxed) > 0,
            "both paths delivered overlapping objects"
        );
        // Nothing else arrives.
        let more = tokio::time::timeout(Duration::from_millis(300), sub.next()).await;
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
            w.write(format!("g{g}"));
            w.finish();
        }
        let s = connect(&relay, false).await;
        // Nothing cached yet: the relay fetches upstream.
        let objects = s
            .subscriber()
            .fetch(name.clone(), Location::new(1, 0), Location::new(3, 0))
            .await
            .unwrap();
        let groups: Vec<u64> = objects.iter().map(|o| o.location.group).collect();
        assert_eq!(groups, vec![1, 2, 3]);
        assert_eq!(relay.metrics().fetch_upstream.load(Ordering::Relaxed), 1);
        // Once subscribed the cache holds the track: the next FETCH is served from it.
        let mut sub = s
            .subscriber()
            .subscribe(
                name.clone(),
                SubscribeOptions::default().from(Location::new(0, 0)),
            )
            .await
            .unwrap();
        read_objects(&mut sub, 5).await;
        let objects = s
            .subscriber()
            .fetch(name.clone(), Location::new(2, 0), Location::new(4, 0))
            .await
            .unwrap();
        assert_eq!(
            objects.iter().map(|o| o.location.group).collect::<Vec<_>>(),
            vec![2, 3, 4]
        );
        assert_eq!(relay.metrics().fetch_cached.load(Ordering::Relaxed), 1);
        // TRACK_STATUS is answered too.
        let status = s.subscriber().track_status(name.clone()).await.unwrap();
        assert_eq!(status.largest, Some(Location::new(4, 0)));
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
        w.write("hi");
        w.finish();
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
        match err {
            Error::Rejected(e) => assert_eq!(e.code, RequestErrorCode::TIMEOUT),
            e => panic!("{e:?}"),
        }
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
        w.write("late");
        w.finish();
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
        let _tracks = viewer
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
        let incoming = viewer.subscriber().next_publish().await.unwrap();
        assert_eq!(incoming.track(), &name);
        let mut sub = incoming.accept(Default::default()).await.unwrap();
        let mut s = writer
            .open_subgroup(0, moq_core::data::SubgroupId::Zero, None, true)
            .await
            .unwrap();
        s.write_object(0, bytes::Bytes::from_static(b"pushed"))
            .await
            .unwrap();
        s.finish();
        match sub.next().await.unwrap().unwrap() {
            moq_transport::track::TrackEvent::Subgroup(mut g) => {
                let o = g.next_object().await.unwrap().unwrap();
                assert_eq!(&o.payload[..], b"pushed");
            }
            e => panic!("{e:?}"),
        }
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
        match s
            .subscriber()
            .subscribe(track(&ns(&["."]), "x"), SubscribeOptions::default())
            .await
            .unwrap_err()
        {
            Error::Rejected(e) => assert_eq!(e.code, RequestErrorCode::DOES_NOT_EXIST),
            e => panic!("{e:?}"),
        }
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
            .fingerprint(old.fingerprint())
            .unwrap()
            .fingerprint(new.fingerprint())
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
