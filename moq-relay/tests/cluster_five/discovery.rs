//! Discovery across the five relays (issue 36, "Done means"): a SUBSCRIBE_NAMESPACE under a
//! prefix on E learns, through the registry, what publishers on A and B announce under it,
//! and their removal; relay A killed with SIGKILL leaves E's discovery, and C's and E's
//! subscriptions to its track, within the lease. Each case over raw QUIC and WebTransport
//! clients, a timeout per case.

use std::time::{Duration, Instant};

use moq_client::{NamespaceEvent, NamespaceStream};
use moq_core::FullTrackName;

use crate::common::{case, next_event, ns};
use crate::harness::{Cluster, LEASE, SCHEMES, ends_within, groups};

/// How long a discovery event may take when nothing but loopback and the store is between.
const EVENT: Duration = Duration::from_secs(5);

/// The namespaces of the next `n` events of `found`, each an addition, sorted.
async fn added(found: &mut NamespaceStream, n: usize) -> Vec<String> {
    let mut seen = Vec::new();
    for _ in 0..n {
        match next_event(found, EVENT).await {
            NamespaceEvent::Added(n) => seen.push(n.to_string()),
            ev => panic!("unexpected {ev:?}; added so far {seen:?}"),
        }
    }
    seen.sort();
    seen
}

/// Waits for the removal (NAMESPACE_DONE) of `path` as the next event of `found`.
async fn removed(found: &mut NamespaceStream, path: &str, limit: Duration) {
    match next_event(found, limit).await {
        NamespaceEvent::Removed(n) => assert_eq!(n.to_string(), path),
        ev => panic!("unexpected {ev:?}, waiting for {path}'s removal"),
    }
}

/// Asserts that `found` reports nothing for `quiet` (nothing has a signal for "no event").
async fn nothing_for(found: &mut NamespaceStream, quiet: Duration, when: &str) {
    let got = tokio::time::timeout(quiet, found.next()).await;
    assert!(got.is_err(), "{when}: unexpected {got:?}");
}

/// (e) Discovery under `find-<scheme>` on E sees the namespaces announced under it on A and
/// on B, each once: `both`, announced on A then on B (B takes the registration over), too;
/// nothing more for a whole lease (each registration is refreshed twice meanwhile, A's of
/// `both` fenced); nothing outside the prefix: not `find-<scheme>x/a` (the prefix is whole
/// fields) nor `other-<scheme>/b`, registered too. The publishers leave: A's withdraws `a`
/// (PUBLISH_NAMESPACE_DONE): NAMESPACE_DONE for it; A's withdraws `both`: nothing (B serves
/// it); B's closes its session: NAMESPACE_DONE for `b` and `both`, and nothing after.
#[tokio::test]
async fn discovery_on_e_sees_namespaces_announced_on_a_and_b_and_their_removal() {
    for scheme in SCHEMES {
        let Some(cluster) = Cluster::five() else {
            return;
        };
        case(format!("discovery over {scheme}"), async {
            let prefix = format!("find-{scheme}");
            let (_watcher, mut found) = cluster.node("E").discovery(scheme, &prefix).await;
            let [a, b, both] = ["a", "b", "both"].map(|n| format!("{prefix}/{n}"));
            let (outside_a, outside_b) = (format!("{prefix}x/a"), format!("other-{scheme}/b"));
            let (a_node, b_node) = (cluster.node("A"), cluster.node("B"));
            let (_on_a, a_ns) = a_node.announce(scheme, &a).await;
            let (_on_a2, _outside_a) = a_node.announce(scheme, &outside_a).await;
            let (_on_a3, both_on_a) = a_node.announce(scheme, &both).await;
            cluster.registered(&both, "A").await;
            let (on_b, _b_ns) = b_node.announce(scheme, &b).await;
            let (_on_b2, _outside_b) = b_node.announce(scheme, &outside_b).await;
            let both_on_b = b_node.announce(scheme, &both).await;
            for (path, id) in [(&a, "A"), (&outside_a, "A"), (&b, "B"), (&outside_b, "B")] {
                cluster.registered(path, id).await;
            }
            cluster.registered(&both, "B").await;
            let want = [a.clone(), b.clone(), both.clone()];
            assert_eq!(added(&mut found, 3).await, want, "{scheme}");
            nothing_for(&mut found, LEASE, "after all were announced").await;
            let left = Instant::now();
            a_ns.withdraw(Duration::from_secs(2)).await.unwrap();
            removed(&mut found, &a, EVENT).await;
            eprintln!(
                "{scheme}: NAMESPACE_DONE {:?} after A's withdraw",
                left.elapsed()
            );
            both_on_a.withdraw(Duration::from_secs(2)).await.unwrap();
            nothing_for(&mut found, LEASE / 2, "B still serves both").await;
            cluster.registered(&both, "B").await;
            let left = Instant::now();
            on_b.close();
            drop(both_on_b);
            let mut gone = Vec::new();
            for _ in 0..2 {
                match next_event(&mut found, EVENT).await {
                    NamespaceEvent::Removed(n) => gone.push(n.to_string()),
                    ev => panic!("unexpected {ev:?} after B left"),
                }
            }
            gone.sort();
            assert_eq!(gone, [b.clone(), both.clone()], "{scheme}");
            eprintln!(
                "{scheme}: NAMESPACE_DONE {:?} after B's close",
                left.elapsed()
            );
            nothing_for(&mut found, LEASE / 2, "after both left").await;
        })
        .await;
    }
}

/// (f) Relay A is killed (SIGKILL) while E's subscriber discovers under `gone-<scheme>` (A's
/// namespace and B's) and subscribers on C and E receive A's track: E gets NAMESPACE_DONE for
/// A's namespace and both subscriptions end within the lease and [`ALLOWANCE`], each measured
/// from the signal; B's namespace stays (no event for a lease after, still registered as B's).
#[tokio::test]
async fn killing_a_ends_its_discovery_entry_on_e_and_the_subscriptions_within_the_lease() {
    for scheme in SCHEMES {
        let Some(mut cluster) = Cluster::five() else {
            return;
        };
        case(format!("killed while discovered over {scheme}"), async {
            let prefix = format!("gone-{scheme}");
            let (a, b) = (format!("{prefix}/a"), format!("{prefix}/b"));
            let track = FullTrackName::new(ns(&a), "t").unwrap();
            let publisher = cluster.node("A").publisher(scheme, &track).await;
            let (_on_b, _b_ns) = cluster.node("B").announce(scheme, &b).await;
            cluster.registered(&a, "A").await;
            cluster.registered(&b, "B").await;
            let (_watcher, mut found) = cluster.node("E").discovery(scheme, &prefix).await;
            assert_eq!(
                added(&mut found, 2).await,
                [a.clone(), b.clone()],
                "{scheme}"
            );
            let mut subs = Vec::new();
            for id in ["C", "E"] {
                subs.push(cluster.node(id).subscriber(scheme, &track).await);
            }
            publisher.group(0);
            for (_, t) in subs.iter_mut() {
                assert_eq!(groups(t, 1).await, vec![0], "{scheme}");
            }
            cluster.node("A").bin.signal("KILL");
            let killed = Instant::now();
            // Each measured on its own, all at once.
            let done = async {
                removed(&mut found, &a, 2 * LEASE + EVENT).await;
                ("E's NAMESPACE_DONE", killed.elapsed())
            };
            let ends = subs
                .iter_mut()
                .zip(["C", "E"])
                .map(|((_, t), id)| async move {
                    let ended = ends_within(t, 2 * LEASE + EVENT).await;
                    assert!(
                        ended,
                        "{id}'s subscription still open {:?}",
                        killed.elapsed()
                    );
                    (id, killed.elapsed())
                });
            let (done, ends) = tokio::join!(done, futures::future::join_all(ends));
            for (what, after) in std::iter::once(done).chain(ends) {
                eprintln!("{scheme}: {what} ended {after:?} after the SIGKILL");
                assert!(
                    after <= LEASE + ALLOWANCE,
                    "{scheme}: {what} ended {after:?} after the SIGKILL"
                );
            }
            nothing_for(&mut found, LEASE, "B's namespace after A's end").await;
            cluster.registered(&b, "B").await;
            let a = cluster.node_mut("A");
            a.bin.exited_within(Duration::from_secs(5)).await;
            drop(publisher);
        })
        .await;
    }
}

/// What an end may take past the lease: the store's prune of an expired lease (25 ms at
/// most), the messages on loopback and a machine shared with other builds.
const ALLOWANCE: Duration = Duration::from_millis(300);
