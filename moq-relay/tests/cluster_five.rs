//! A registry-backed cluster of relay *binaries* on loopback sharing one `redis-server` (a
//! real one per test, `common::store`), with a 2 s lease (issue 36, "Done means"): each case
//! over raw QUIC and over WebTransport for the clients (the relay-to-relay links are raw QUIC,
//! the scheme the relays advertise).
//!
//! - five relays A-E: a publisher on A reaches subscribers on C and E with one upstream
//!   subscription per track per relay (read from each relay's `/metrics`); killing A ends
//!   them within the lease and a margin; restarting the store loses no established flow and
//!   lookups work again after it; a publisher that moves from A to B reaches C's subscriber
//!   without a duplicate object;
//! - the same five, discovery (`cluster_five/discovery.rs`): SUBSCRIBE_NAMESPACE under a
//!   prefix on E sees what A and B announce under it and its removal; killing A ends E's entry
//!   of A's namespace and C's and E's subscriptions within the lease;
//! - three relays of regions x, x, y: a draining relay names the least loaded live relay of
//!   its region in GOAWAY, in each client's scheme, and none when the store is down.
//!
//! The harness (`cluster_five/harness.rs`: `Cluster`, `Node::publisher`, `Node::announce`,
//! `Node::subscriber`, `Node::discovery`) starts the binaries and reaches them. The relays
//! log at `warn` into `Binary::log_lines`; `RELAY_LOG=debug` (a `RUST_LOG` filter) asks them
//! for more.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
#[path = "cluster_five/discovery.rs"]
mod discovery;
#[path = "cluster_five/harness.rs"]
mod harness;

use std::time::{Duration, Instant};

use common::{case, ns};
use harness::{Cluster, LEASE, SCHEMES, ends_within, groups};
use moq_core::FullTrackName;

/// Draining B (region x) names A (region x) in GOAWAY, though C (region y) is less loaded:
/// the region first, then the load. A raw QUIC client gets `moqt://`, a WebTransport client
/// `https://`, both A's advertised host and port. With the store down, a draining relay with
/// no cluster peer names none (the same URI) within the registry's timeout.
#[tokio::test]
async fn goaway_names_the_least_loaded_relay_of_the_region() {
    let Some(mut cluster) = Cluster::start(&[("A", "x"), ("B", "x"), ("C", "y")]) else {
        return;
    };
    case("successor".into(), async {
        // A carries two sessions, C none.
        let _load = (
            cluster.node("A").connect("moqt").await,
            cluster.node("A").connect("https").await,
        );
        cluster.load_reported("A", 2).await;
        let raw = cluster.node("B").connect("moqt").await;
        let wt = cluster.node("B").connect("https").await;
        let a_port = cluster.node("A").port();
        cluster.node("B").bin.signal("TERM");
        for (session, scheme) in [(&raw, "moqt"), (&wt, "https")] {
            let goaway = session.transport().wait_goaway().await.expect("GOAWAY");
            assert_eq!(
                goaway.new_session_uri,
                format!("{scheme}://localhost:{a_port}"),
                "{scheme}"
            );
        }
        let b = cluster.node_mut("B");
        assert!(b.bin.exited_within(Duration::from_secs(5)).await.success());
    })
    .await;
    case("store down".into(), async {
        let session = cluster.node("C").connect("https").await;
        cluster.store.stop();
        let signalled = Instant::now();
        cluster.node("C").bin.signal("TERM");
        let goaway = session.transport().wait_goaway().await.expect("GOAWAY");
        assert_eq!(goaway.new_session_uri, "", "no successor: the same URI");
        // The registry's timeout (0.5 s) bounds the wait for the store, within the drain.
        assert!(
            signalled.elapsed() < Duration::from_secs(1),
            "{:?}",
            signalled.elapsed()
        );
    })
    .await;
}

/// The gauge of upstream subscriptions a relay holds (one per track and route).
const UPSTREAMS: &str = "moq_relay_upstream_subscriptions_active";

/// (a) A publisher on A is found through the registry by subscribers on C (two) and E (one),
/// and each relay holds one upstream subscription for the track: C one toward A however many
/// subscribers, A one toward the publisher.
#[tokio::test]
async fn a_publisher_on_a_reaches_c_and_e_with_one_upstream_per_relay() {
    for scheme in SCHEMES {
        let Some(cluster) = Cluster::five() else {
            return;
        };
        case(format!("found over {scheme}"), async {
            let path = format!("five-{scheme}/room");
            let track = FullTrackName::new(ns(&path), "t").unwrap();
            let publisher = cluster.node("A").publisher(scheme, &track).await;
            cluster.registered(&path, "A").await;
            let mut subs = Vec::new();
            for id in ["C", "C", "E"] {
                subs.push(cluster.node(id).subscriber(scheme, &track).await);
            }
            for g in 0..3 {
                publisher.group(g);
            }
            for (_, t) in subs.iter_mut() {
                assert_eq!(groups(t, 3).await, vec![0, 1, 2], "{scheme}");
            }
            for id in ["A", "C", "E"] {
                let upstreams = cluster.node(id).gauge(UPSTREAMS).await;
                assert_eq!(
                    upstreams, 1,
                    "{scheme}: relay {id}'s upstream subscriptions"
                );
            }
            for id in ["B", "D"] {
                assert_eq!(cluster.node(id).gauge(UPSTREAMS).await, 0, "{scheme}: {id}");
            }
        })
        .await;
    }
}

/// (b) Killing A (SIGKILL) ends the subscriptions on C and E within the lease and a margin:
/// their links to A time out (1.5 s idle), and the tracks wait 0.2 s for a new publisher.
#[tokio::test]
async fn killing_a_ends_the_subscriptions_on_c_and_e_within_the_lease() {
    for scheme in SCHEMES {
        let Some(mut cluster) = Cluster::five() else {
            return;
        };
        case(format!("killed over {scheme}"), async {
            let path = format!("kill-{scheme}/room");
            let track = FullTrackName::new(ns(&path), "t").unwrap();
            let publisher = cluster.node("A").publisher(scheme, &track).await;
            cluster.registered(&path, "A").await;
            let mut subs = Vec::new();
            for id in ["C", "E"] {
                subs.push(cluster.node(id).subscriber(scheme, &track).await);
            }
            publisher.group(0);
            for (_, t) in subs.iter_mut() {
                assert_eq!(groups(t, 1).await, vec![0]);
            }
            let a = cluster.node_mut("A");
            a.bin.signal("KILL");
            a.bin.exited_within(Duration::from_secs(5)).await;
            let killed = Instant::now();
            let margin = Duration::from_secs(2);
            for (_, t) in subs.iter_mut() {
                assert!(
                    ends_within(t, LEASE + margin).await,
                    "{scheme}: a subscription still open {:?} after the kill",
                    killed.elapsed()
                );
                eprintln!(
                    "{scheme}: a subscription ended {:?} after the kill",
                    killed.elapsed()
                );
            }
            drop(publisher);
        })
        .await;
    }
}

/// (c) Restarting the store (killed, started again empty on the same port) loses no
/// established flow: C and E receive every group, in order and without a gap longer than
/// [`MAX_GAP`], while it is down for a lease; after it, A registers its namespace again and a
/// subscriber on D (which never looked it up) finds it.
#[tokio::test]
async fn restarting_the_store_loses_no_established_flow() {
    for scheme in SCHEMES {
        let Some(mut cluster) = Cluster::five() else {
            return;
        };
        case(format!("store restart over {scheme}"), async {
            let path = format!("outage-{scheme}/room");
            let track = FullTrackName::new(ns(&path), "t").unwrap();
            let publisher = cluster.node("A").publisher(scheme, &track).await;
            cluster.registered(&path, "A").await;
            let mut readers = Vec::new();
            for id in ["C", "E"] {
                let (session, mut t) = cluster.node(id).subscriber(scheme, &track).await;
                readers.push(tokio::spawn(async move {
                    let mut arrivals = Vec::new();
                    while arrivals.len() < GROUPS as usize {
                        let mut g = t.next_group().await.expect("ended").expect("failed");
                        while let Some(o) = g.next_object().await {
                            arrivals.push((o.unwrap().location.group, Instant::now()));
                        }
                    }
                    drop(session);
                    arrivals
                }));
            }
            // A group every 50 ms; the store is down from the 10th group for a lease.
            let every = Duration::from_millis(50);
            let (down, up) = (10, 10 + (LEASE.as_millis() / every.as_millis()) as u64);
            for g in 0..GROUPS {
                publisher.group(g);
                if g == down {
                    cluster.store.stop();
                }
                if g == up {
                    cluster.store.spawn();
                }
                // Pacing the publisher: a clock, not an event.
                tokio::time::sleep(every).await;
            }
            for (id, reader) in ["C", "E"].into_iter().zip(readers) {
                let arrivals = reader.await.unwrap();
                let got: Vec<u64> = arrivals.iter().map(|(g, _)| *g).collect();
                assert_eq!(got, (0..GROUPS).collect::<Vec<_>>(), "{scheme}: {id}");
                let gap = arrivals.windows(2).map(|w| w[1].1 - w[0].1).max().unwrap();
                assert!(gap < MAX_GAP, "{scheme}: {id} waited {gap:?} for a group");
                eprintln!("{scheme}: {id} got every group; longest wait {gap:?}");
            }
            // New lookups work again once A registered its namespace anew.
            cluster.registered(&path, "A").await;
            let (_d, mut t) = cluster.node("D").subscriber(scheme, &track).await;
            publisher.group(GROUPS);
            assert_eq!(groups(&mut t, 1).await, vec![GROUPS], "{scheme}: D");
        })
        .await;
    }
}

/// The groups the store-restart case writes.
const GROUPS: u64 = 80;

/// The longest wait for the next group a subscriber may see while the store restarts (the
/// publisher writes one every 50 ms).
const MAX_GAP: Duration = Duration::from_millis(500);

/// (d) A publisher that moves from A to B (it publishes the namespace on B, which takes the
/// registration over, then leaves A) is delivered to the subscriber on C without a duplicate:
/// the group ids C's subscriber sees are strictly increasing across the move, on the same
/// subscription (C's relay moves its upstream from A to B when A ends the track and the
/// registry names B).
#[tokio::test]
async fn a_moved_publisher_reaches_c_without_duplicates() {
    for scheme in SCHEMES {
        let Some(cluster) = Cluster::five() else {
            return;
        };
        case(format!("moved over {scheme}"), async {
            let path = format!("moved-{scheme}/room");
            let track = FullTrackName::new(ns(&path), "t").unwrap();
            let on_a = cluster.node("A").publisher(scheme, &track).await;
            cluster.registered(&path, "A").await;
            let (_c, mut t) = cluster.node("C").subscriber(scheme, &track).await;
            for g in 0..3 {
                on_a.group(g);
            }
            let looked_up = Instant::now();
            let mut seen = groups(&mut t, 3).await;
            // The publisher comes up on B (the registry now names B), then leaves A.
            let on_b = cluster.node("B").publisher(scheme, &track).await;
            cluster.registered(&path, "B").await;
            // C's answer to its lookup is reused for 1 s (the binary's lookup cache): a move
            // within it is not seen, and the track would end. A clock, not an event.
            tokio::time::sleep_until((looked_up + LOOKUP_CACHE).into()).await;
            on_a.session.close();
            drop(on_a);
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut next = 3;
            while seen.len() < 6 {
                assert!(Instant::now() < deadline, "{scheme}: C saw only {seen:?}");
                on_b.group(next);
                next += 1;
                match tokio::time::timeout(Duration::from_millis(300), t.next_group()).await {
                    Ok(Some(Ok(mut g))) => {
                        // A group C fetched from B when it subscribed there (written before)
                        // is complete at C only once B sends a later one (upstream.rs,
                        // `Continuing`), which this loop writes next: do not wait for its end.
                        let quiet = Duration::from_millis(300);
                        while let Ok(Some(o)) = tokio::time::timeout(quiet, g.next_object()).await {
                            seen.push(o.unwrap().location.group);
                        }
                    }
                    Ok(_) => panic!("{scheme}: C's subscription ended at the move; saw {seen:?}"),
                    // Not there yet: the next group may be.
                    Err(_) => {}
                }
            }
            assert!(
                seen.windows(2).all(|w| w[0] < w[1]),
                "{scheme}: not strictly increasing: {seen:?}"
            );
        })
        .await;
    }
}

/// How long the binary reuses a lookup's answer (`RedisRegistryConfig::cache_ttl`), and a bit.
const LOOKUP_CACHE: Duration = Duration::from_millis(1100);
