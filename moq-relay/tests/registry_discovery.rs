//! SUBSCRIBE_NAMESPACE across a registry-backed cluster (issue 36): relays share one registry
//! (a real `redis-server` per test); a subscriber's discovery on one relay sees what
//! publishers on the others announce, and their removal; a relay follows in the registry only
//! the prefixes its own subscribers asked about; a relay killed with SIGKILL leaves the
//! others' discovery and subscriptions within the registry's lease.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::store::{Store, registered};
use common::{case, next_event, ns};
use moq_client::{Client, NamespaceEvent, Publisher, Session, SubscribeOptions};
use moq_core::{FullTrackName, TrackNamespace, Version};
use moq_relay::register_local_namespaces;
use moq_relay::registry::{RedisRegistry, Registry, RelayRef};
use moq_relay::{RegistryRouting, Relay, RelayConfig};
use moq_transport::namespace::NamespaceEvent as TransportEvent;
use moq_transport::tls::{Certificate, ClientTls};

/// The registry's lease in these tests.
const LEASE: Duration = Duration::from_millis(2000);

/// Relay `id` on an ephemeral port presenting `cert` with default QUIC settings (a 9 s idle
/// timeout), registered with an address of `scheme`, registering its publishers' namespaces
/// in `registry` and finding the rest there, trusting `pins` on its links.
fn relay(
    scheme: &str,
    id: &str,
    cert: &Certificate,
    registry: &Arc<RedisRegistry>,
    pins: Vec<[u8; 32]>,
) -> Relay {
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
    config.publisher_wait = Duration::from_millis(200);
    relay_with(config, scheme, id, registry, pins)
}

/// [`relay`] with `config` (its address and certificate as there).
fn relay_with(
    config: RelayConfig,
    scheme: &str,
    id: &str,
    registry: &Arc<RedisRegistry>,
    pins: Vec<[u8; 32]>,
) -> Relay {
    let r = Relay::bind(config).unwrap();
    let me = RelayRef {
        id: id.into(),
        address: format!("{scheme}://localhost:{}/", r.local_addr().port()),
    };
    let registry: Arc<dyn Registry> = registry.clone();
    let glue = register_local_namespaces(r.clone(), registry.clone(), me.clone());
    r.spawn_task(glue);
    let mut routing = RegistryRouting::new(registry, me);
    routing.tls = ClientTls {
        fingerprints: pins,
        ..Default::default()
    };
    assert!(r.route_through_registry(routing));
    r.spawn();
    r
}

/// A client session to `port` over `scheme` (`moqt` raw QUIC, `https` WebTransport).
async fn connect(scheme: &str, port: u16, fingerprint: &str) -> Session {
    Client::builder()
        .fingerprint(fingerprint)
        .unwrap()
        .publisher(Publisher::default())
        .build()
        .unwrap()
        .connect(&format!("{scheme}://localhost:{port}/"))
        .await
        .unwrap()
}

/// Waits until `relay` follows exactly `prefixes` in the registry.
async fn follows(relay: &Relay, prefixes: &[&str]) {
    let want: Vec<TrackNamespace> = prefixes.iter().map(|p| ns(p)).collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while relay.discovery_prefixes() != want {
        assert!(
            Instant::now() < deadline,
            "follows {:?}, not {want:?}",
            relay.discovery_prefixes()
        );
        // An ended SUBSCRIBE_NAMESPACE has no signal outside the relay.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A subscriber of `disc` on E sees what publishers on A and B announce (and E's own
/// publisher's once), not what is outside the prefix, and NAMESPACE_DONE when each leaves;
/// E registers none of A's or B's as its own. Over raw QUIC and WebTransport (the clients'
/// sessions and the relays' registered addresses).
#[tokio::test]
async fn discovery_on_e_sees_namespaces_announced_on_a_and_b_and_their_removal() {
    for scheme in ["moqt", "https"] {
        case(format!("discovery over {scheme}"), async {
            let Some(store) = Store::start() else { return };
            let registry = Arc::new(store.registry(LEASE.as_millis() as u64));
            let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
            let pins = vec![cert.fingerprint()];
            let [a, b, e] =
                ["A", "B", "E"].map(|id| relay(scheme, id, &cert, &registry, pins.clone()));
            let fp = a.fingerprint();
            let watcher = connect(scheme, e.local_addr().port(), &fp).await;
            let mut found = watcher
                .subscriber()
                .subscribe_namespace(ns("disc"))
                .await
                .unwrap();
            follows(&e, &["disc"]).await;
            let on_a = connect(scheme, a.local_addr().port(), &fp).await;
            let on_b = connect(scheme, b.local_addr().port(), &fp).await;
            let on_e = connect(scheme, e.local_addr().port(), &fp).await;
            let mut held = Vec::new();
            for (s, path) in [
                (&on_a, "disc/a"),
                (&on_a, "other/x"),
                (&on_b, "disc/b"),
                (&on_e, "disc/e"),
            ] {
                let h = s.publisher().publish_namespace(ns(path)).unwrap();
                h.announced().await.unwrap();
                held.push(Some(h));
            }
            registered(&registry, "disc/a", "A").await;
            registered(&registry, "disc/b", "B").await;
            registered(&registry, "disc/e", "E").await;
            let mut seen = Vec::new();
            for _ in 0..3 {
                match next_event(&mut found, Duration::from_secs(5)).await {
                    NamespaceEvent::Added(n) => seen.push(n.to_string()),
                    ev => panic!("unexpected {ev:?}"),
                }
            }
            seen.sort();
            assert_eq!(seen, ["disc/a", "disc/b", "disc/e"]);
            // Only the prefix asked about is followed, and only where it was asked.
            assert_eq!(e.discovery_prefixes(), vec![ns("disc")]);
            assert!(a.discovery_prefixes().is_empty() && b.discovery_prefixes().is_empty());
            assert!(e.is_remote(&ns("disc/a")) && !e.is_remote(&ns("disc/e")));
            // E's discovery did not make it register A's namespace as its own.
            registered(&registry, "disc/a", "A").await;
            // The publishers leave, A's first: NAMESPACE_DONE for each, once.
            for (i, path) in [(0, "disc/a"), (2, "disc/b"), (3, "disc/e")] {
                let h: moq_client::NamespaceHandle = held[i].take().unwrap();
                h.withdraw(Duration::from_secs(2)).await.unwrap();
                match next_event(&mut found, Duration::from_secs(5)).await {
                    NamespaceEvent::Removed(n) => assert_eq!(n.to_string(), path),
                    ev => panic!("unexpected {ev:?} after {path} left"),
                }
            }
            // Nothing comes back (the registry's own echo of E's namespace included).
            let quiet = tokio::time::timeout(LEASE / 2, found.next()).await;
            assert!(quiet.is_err(), "unexpected {quiet:?}");
            // The last subscriber of the prefix leaves: it is not followed any more.
            drop(found);
            follows(&e, &[]).await;
            drop((held, on_a, on_b, on_e, watcher));
        })
        .await;
    }
}

/// One follower per distinct prefix in use, shared by its subscribers and dropped with the
/// last; a prefix nobody asked about is not followed anywhere.
#[tokio::test]
async fn one_follower_per_prefix_dropped_with_its_last_subscriber() {
    case("followers".into(), async {
        let Some(store) = Store::start() else { return };
        let registry = Arc::new(store.registry(LEASE.as_millis() as u64));
        let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
        let e = relay("moqt", "E", &cert, &registry, vec![cert.fingerprint()]);
        let fp = e.fingerprint();
        let port = e.local_addr().port();
        // Three sessions: one session's prefixes may not overlap (PREFIX_OVERLAP).
        let (s1, s2, s3) = (
            connect("moqt", port, &fp).await,
            connect("moqt", port, &fp).await,
            connect("moqt", port, &fp).await,
        );
        let x1 = s1.subscriber().subscribe_namespace(ns("x")).await.unwrap();
        let x2 = s2.subscriber().subscribe_namespace(ns("x")).await.unwrap();
        let y = s3
            .subscriber()
            .subscribe_namespace(ns("x/y"))
            .await
            .unwrap();
        follows(&e, &["x", "x/y"]).await;
        drop(x1);
        // x still has a subscriber.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(e.discovery_prefixes(), vec![ns("x"), ns("x/y")]);
        drop(x2);
        follows(&e, &["x/y"]).await;
        drop(y);
        follows(&e, &[]).await;
        drop((s1, s2, s3));
    })
    .await;
}

/// Relay A (the binary, lease 2 s) is killed with SIGKILL: C's and E's discovery entries of
/// A's namespace get NAMESPACE_DONE, and their subscriptions to A's track end, within the
/// lease (C and E keep QUIC's default 9 s idle timeout: their links to A use at most half
/// the lease, the wait for a new publisher after them at most a quarter).
#[tokio::test]
async fn killing_a_relay_ends_its_discovery_entries_and_subscriptions_within_the_lease() {
    case(
        "sigkill".into(),
        kill_origin(Some(Duration::from_millis(200))),
    )
    .await;
}

/// Issue 36: as above with C's and E's default `publisher_wait` (10 s, longer than the
/// lease): the subscriptions over their links to the dead A still end within the lease.
#[tokio::test]
async fn killing_a_relay_ends_its_subscriptions_within_the_lease_with_the_default_publisher_wait() {
    case("sigkill default wait".into(), kill_origin(None)).await;
}

/// The SIGKILL case: C and E wait `publisher_wait` for a new publisher (`None`: the default).
async fn kill_origin(publisher_wait: Option<Duration>) {
    let Some(store) = Store::start() else { return };
    let registry = Arc::new(store.registry(LEASE.as_millis() as u64));
    let mut a = store.origin_binary("A", &["--registry-lease", "2"]);
    let a_pin = moq_transport::tls::parse_fingerprint(&a.fingerprint).unwrap();
    let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
    let [c, e] = ["C", "E"].map(|id| {
        let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
        if let Some(w) = publisher_wait {
            config.publisher_wait = w;
        }
        relay_with(config, "moqt", id, &registry, vec![a_pin])
    });
    let publisher = connect("moqt", a.port, &a.fingerprint).await;
    let h = publisher
        .publisher()
        .publish_namespace(ns("kill/room"))
        .unwrap();
    h.announced().await.unwrap();
    registered(&registry, "kill/room", "A").await;
    let track = FullTrackName::new(ns("kill/room"), "t").unwrap();
    let producer = publisher.publisher().create_track(track.clone()).unwrap();
    let mut subs = Vec::new();
    let mut found = Vec::new();
    for r in [&c, &e] {
        let s = connect("moqt", r.local_addr().port(), &c.fingerprint()).await;
        let mut d = s
            .subscriber()
            .subscribe_namespace(ns("kill"))
            .await
            .unwrap();
        match next_event(&mut d, Duration::from_secs(5)).await {
            NamespaceEvent::Added(n) => assert_eq!(n, ns("kill/room")),
            ev => panic!("unexpected {ev:?}"),
        }
        let t = s
            .subscriber()
            .subscribe(track.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        subs.push((s, t));
        found.push(d);
    }
    let mut g = producer.append_group().unwrap();
    g.write("before").unwrap();
    g.finish().unwrap();
    for (_, t) in subs.iter_mut() {
        assert_eq!(common::read_objects(t, 1).await.len(), 1);
    }
    a.signal("KILL");
    let killed = Instant::now();
    a.exited_within(Duration::from_secs(5)).await;
    // The lease, and a little for the prune (25 ms at most), the messages on loopback and
    // a machine shared with other builds.
    let within = LEASE + Duration::from_millis(300);
    // Each measured on its own, all at once.
    let dones = found.iter_mut().map(|d| async move {
        match next_event(d, Duration::from_secs(10)).await {
            NamespaceEvent::Removed(n) => assert_eq!(n, ns("kill/room")),
            ev => panic!("unexpected {ev:?}"),
        }
        ("NAMESPACE_DONE", killed.elapsed())
    });
    let ends = subs.iter_mut().map(|(_, t)| async move {
        let ended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                match t.next_group().await {
                    Some(Ok(_)) => {}
                    _ => return,
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "subscription still open 10 s after the kill");
        ("subscription ended", killed.elapsed())
    });
    let (dones, ends) = tokio::join!(
        futures::future::join_all(dones),
        futures::future::join_all(ends)
    );
    for (what, after) in dones.into_iter().chain(ends) {
        eprintln!("{what} {after:?} after the kill");
        assert!(after <= within, "{what} {after:?} after the kill");
    }
    drop((h, producer));
}

/// The store restarted (empty) mid-run: E's discovery keeps its entries while the store is
/// down, and once it is back reports the removal that happened meanwhile (B's publisher left)
/// and ends with what the relays registered again (A's), each announced at most once at a
/// time.
#[tokio::test]
async fn a_store_restart_keeps_entries_and_reports_what_changed_meanwhile() {
    case("store restart".into(), async {
        let Some(mut store) = Store::start() else {
            return;
        };
        let registry = Arc::new(store.registry(LEASE.as_millis() as u64));
        let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
        let pins = vec![cert.fingerprint()];
        let [a, e] = ["A", "E"].map(|id| relay("moqt", id, &cert, &registry, pins.clone()));
        let fp = a.fingerprint();
        let watcher = connect("moqt", e.local_addr().port(), &fp).await;
        let mut found = watcher
            .subscriber()
            .subscribe_namespace(ns("out"))
            .await
            .unwrap();
        follows(&e, &["out"]).await;
        let on_a = connect("moqt", a.local_addr().port(), &fp).await;
        let keep = on_a.publisher().publish_namespace(ns("out/a")).unwrap();
        let leave = on_a.publisher().publish_namespace(ns("out/b")).unwrap();
        keep.announced().await.unwrap();
        leave.announced().await.unwrap();
        let mut known = std::collections::BTreeSet::new();
        for _ in 0..2 {
            match next_event(&mut found, Duration::from_secs(5)).await {
                NamespaceEvent::Added(n) => assert!(known.insert(n.to_string())),
                ev => panic!("unexpected {ev:?}"),
            }
        }
        store.stop();
        // B's publisher leaves while the store is down (its unregister cannot reach it).
        leave.withdraw(Duration::from_secs(2)).await.unwrap();
        // The entries stay while the store is down.
        let quiet = tokio::time::timeout(LEASE, found.next()).await;
        assert!(quiet.is_err(), "during the outage: {quiet:?}");
        store.spawn();
        // Back: out/b is reported gone; out/a stays or comes back (the store lost it until
        // A registers it again). Each event changes the set (no duplicate).
        let deadline = Instant::now() + 3 * LEASE;
        while known != ["out/a".to_string()].into() || Instant::now() < deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            let ev = match tokio::time::timeout(left.max(Duration::from_millis(1)), found.next())
                .await
            {
                Ok(Some(Ok(ev))) => ev,
                Ok(other) => panic!("discovery ended: {other:?}"),
                Err(_) if Instant::now() >= deadline => break,
                Err(_) => continue,
            };
            eprintln!("after the restart: {ev:?}");
            match ev {
                NamespaceEvent::Added(n) => assert!(known.insert(n.to_string()), "{n} twice"),
                NamespaceEvent::Removed(n) => {
                    assert!(known.remove(&n.to_string()), "{n} not known")
                }
            }
        }
        assert_eq!(known, ["out/a".to_string()].into());
        drop((keep, on_a, found, watcher));
    })
    .await;
}

/// Subscribers at drafts 14 and 15 (PUBLISH_NAMESPACE answers SUBSCRIBE_NAMESPACE) and 16
/// (NAMESPACE) on E learn a namespace announced on A through the registry, and its end.
#[tokio::test]
async fn older_drafts_learn_registry_namespaces_too() {
    let Some(store) = Store::start() else { return };
    let registry = Arc::new(store.registry(LEASE.as_millis() as u64));
    let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
    let pins = vec![cert.fingerprint()];
    let (a, e) = case("relays".into(), async {
        let [a, e] = ["A", "E"].map(|id| relay("moqt", id, &cert, &registry, pins.clone()));
        (a, e)
    })
    .await;
    for version in [Version::Draft14, Version::Draft15, Version::Draft16] {
        case(format!("draft {}", version.draft()), async {
            let path = format!("old{}/a", version.draft());
            let watcher = common::raw_session(&e, version).await;
            let prefix = ns(&format!("old{}", version.draft()));
            let mut found = watcher.subscribe_namespace(prefix.clone()).await.unwrap();
            follows(&e, &[&prefix.to_string()]).await;
            let on_a = connect("moqt", a.local_addr().port(), &a.fingerprint()).await;
            let h = on_a.publisher().publish_namespace(ns(&path)).unwrap();
            h.announced().await.unwrap();
            let ev = tokio::time::timeout(Duration::from_secs(5), found.next()).await;
            assert!(
                matches!(&ev, Ok(Some(Ok(TransportEvent::Added(n)))) if *n == ns(&path)),
                "{ev:?}"
            );
            h.withdraw(Duration::from_secs(2)).await.unwrap();
            let ev = tokio::time::timeout(Duration::from_secs(5), found.next()).await;
            assert!(
                matches!(&ev, Ok(Some(Ok(TransportEvent::Removed(n)))) if *n == ns(&path)),
                "{ev:?}"
            );
            drop((found, watcher, on_a));
        })
        .await;
    }
}

/// A namespace E knows from the registry (A's) that a publisher on E then announces too: E
/// registers it as its own within half a lease (the index reported no change), serves it when
/// A's publisher leaves, and ends it (NAMESPACE_DONE) within the lease once E's leaves too.
#[tokio::test]
async fn a_publisher_here_of_a_namespace_known_from_the_registry_is_registered() {
    case("taken over here".into(), async {
        let Some(store) = Store::start() else { return };
        let registry = Arc::new(store.registry(LEASE.as_millis() as u64));
        let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
        let pins = vec![cert.fingerprint()];
        let [a, e] = ["A", "E"].map(|id| relay("moqt", id, &cert, &registry, pins.clone()));
        let fp = a.fingerprint();
        let watcher = connect("moqt", e.local_addr().port(), &fp).await;
        let mut found = (watcher.subscriber())
            .subscribe_namespace(ns("mv"))
            .await
            .unwrap();
        follows(&e, &["mv"]).await;
        let on_a = connect("moqt", a.local_addr().port(), &fp).await;
        let there = on_a.publisher().publish_namespace(ns("mv/x")).unwrap();
        there.announced().await.unwrap();
        match next_event(&mut found, Duration::from_secs(5)).await {
            NamespaceEvent::Added(n) => assert_eq!(n, ns("mv/x")),
            ev => panic!("unexpected {ev:?}"),
        }
        assert!(e.is_remote(&ns("mv/x")));
        let on_e = connect("moqt", e.local_addr().port(), &fp).await;
        let here = on_e.publisher().publish_namespace(ns("mv/x")).unwrap();
        here.announced().await.unwrap();
        assert!(!e.is_remote(&ns("mv/x")));
        registered(&registry, "mv/x", "E").await;
        there.withdraw(Duration::from_secs(2)).await.unwrap();
        here.withdraw(Duration::from_secs(2)).await.unwrap();
        let left = Instant::now();
        match next_event(&mut found, 2 * LEASE).await {
            NamespaceEvent::Removed(n) => assert_eq!(n, ns("mv/x")),
            ev => panic!("unexpected {ev:?}"),
        }
        let after = left.elapsed();
        assert!(
            after <= LEASE,
            "NAMESPACE_DONE {after:?} after the last publisher left"
        );
        drop((on_a, on_e, found, watcher));
    })
    .await;
}
