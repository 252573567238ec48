//! The route registry sharded: on a real three-master Redis Cluster on loopback (each test
//! starts its own, `redis-server --cluster-enabled yes` joined by `redis-cli --cluster
//! create`), and on one node with several shards. Registrations of two relays land on
//! different masters; discovery of the empty prefix spans them, a removal and a relay's death
//! are seen from every shard, a lookup is one script on one node, and the relays' refreshes
//! keep namespaces in several shards alive. Skipped like the other registry tests when there
//! is no server and `MOQ_SKIP_REGISTRY_TESTS=1`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cluster_store::ClusterStore;
use common::store::Store;
use common::{ns, timeout, timeout_after};
use futures::StreamExt;
use moq_core::TrackNamespace;
use moq_relay::registry::{
    NamespaceChange, NamespaceWatch, RedisRegistry, RedisRegistryConfig, Registration,
    RegistrationState, Registry, RelayRef,
};

fn relay(id: &str) -> RelayRef {
    RelayRef {
        id: id.to_string(),
        address: format!("moqt://{id}.test:4443"),
    }
}

/// The next change of `watch`, within 5 s.
async fn next_change(watch: &mut NamespaceWatch) -> NamespaceChange {
    tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("no change in time")
        .expect("the watch ended")
}

/// The next `n` changes of `watch`, as a set.
async fn changes(watch: &mut NamespaceWatch, n: usize) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    while out.len() < n {
        let change = match next_change(watch).await {
            NamespaceChange::Added(n) => format!("+{n}"),
            NamespaceChange::Removed(n) => format!("-{n}"),
        };
        assert!(out.insert(change.clone()), "{change} twice");
    }
    out
}

/// Two namespaces (`<first>/room`) whose entries are on different masters of `cluster`.
fn on_two_masters(
    cluster: &ClusterStore,
    registry: &RedisRegistry,
) -> (TrackNamespace, TrackNamespace) {
    let mut by_node = std::collections::HashMap::new();
    for i in 0..64 {
        let name = ns(&format!("f{i}/room"));
        let node = cluster.node_of(&registry.entry_key(&name).unwrap());
        by_node.entry(node).or_insert(name);
        if by_node.len() == 2 {
            let mut two = by_node.into_values();
            return (two.next().unwrap(), two.next().unwrap());
        }
    }
    panic!("every first field on one master");
}

#[tokio::test]
async fn a_cluster_spreads_registrations_and_discovery_spans_its_masters() {
    let Some(cluster) = ClusterStore::start() else {
        return;
    };
    timeout_after(Duration::from_secs(60), async {
        let a = cluster.registry(10_000);
        let b = cluster.registry(10_000);
        let (name_a, name_b) = on_two_masters(&cluster, &a);
        let key_a = a.entry_key(&name_a).unwrap();
        let key_b = a.entry_key(&name_b).unwrap();
        assert_ne!(cluster.node_of(&key_a), cluster.node_of(&key_b));
        a.ping().await.unwrap();

        // Everything (the empty prefix) spans every shard; `f<i>` is one shard's.
        let mut all = a.watch(&TrackNamespace::empty()).await.unwrap();
        let first_b = TrackNamespace::new([name_b.field(0).unwrap()]).unwrap();
        let mut under_b = b.watch(&first_b).await.unwrap();

        let origin_a = a.register(&name_a, &relay("a")).await.unwrap();
        let origin_b = b.register(&name_b, &relay("b")).await.unwrap();
        let want: BTreeSet<String> = [format!("+{name_a}"), format!("+{name_b}")].into();
        assert_eq!(changes(&mut all, 2).await, want);
        assert_eq!(
            next_change(&mut under_b).await,
            NamespaceChange::Added(name_b.clone())
        );
        let mut both = vec![name_a.clone(), name_b.clone()];
        both.sort_by(|x, y| x.fields().cmp(y.fields()));
        assert_eq!(b.scan(&TrackNamespace::empty()).await.unwrap(), both);
        assert_eq!(a.scan(&first_b).await.unwrap(), vec![name_b.clone()]);

        // A lookup is one script on the one node holding the namespace.
        assert_eq!(b.lookup(&name_a).await, Ok(Some(origin_a.clone())));
        cluster.scripts_run();
        assert_eq!(b.lookup(&name_a).await, Ok(Some(origin_a.clone())));
        let ran = cluster.scripts_run();
        let node_a = cluster.node_of(&key_a);
        for (port, calls) in ran {
            let want = u64::from(port == node_a);
            assert_eq!(calls, want, "scripts on node {port} for one lookup");
        }
        assert_eq!(a.lookup(&name_b).await, Ok(Some(origin_b.clone())));
        assert_eq!(a.lookup(&ns("f0/none")).await, Ok(None));

        // A removal on one master reaches the watch of everything and of its shard.
        b.unregister(&name_b, &origin_b).await.unwrap();
        assert_eq!(
            next_change(&mut all).await,
            NamespaceChange::Removed(name_b.clone())
        );
        assert_eq!(
            next_change(&mut under_b).await,
            NamespaceChange::Removed(name_b.clone())
        );
        assert_eq!(a.lookup(&name_b).await, Ok(None));
        assert_eq!(
            a.scan(&TrackNamespace::empty()).await.unwrap(),
            vec![name_a.clone()]
        );

        // A relay that stops refreshing: its namespaces on every master go with its lease.
        let short = cluster.registry(400);
        let mut dead = Vec::new();
        for i in 0..6 {
            let name = ns(&format!("d{i}/x"));
            short.register(&name, &relay("dead")).await.unwrap();
            dead.push(name);
        }
        let nodes: BTreeSet<u16> = (dead.iter())
            .map(|n| cluster.node_of(&short.entry_key(n).unwrap()))
            .collect();
        assert!(nodes.len() >= 2, "6 first fields on {nodes:?}");
        let added: BTreeSet<String> = dead.iter().map(|n| format!("+{n}")).collect();
        assert_eq!(changes(&mut all, 6).await, added);
        let started = Instant::now();
        let removed: BTreeSet<String> = dead.iter().map(|n| format!("-{n}")).collect();
        assert_eq!(changes(&mut all, 6).await, removed);
        assert!(
            started.elapsed() < Duration::from_millis(2000),
            "removals after {:?} (lease 400 ms)",
            started.elapsed()
        );
        assert_eq!(a.lookup(&dead[0]).await, Ok(None));
        assert_eq!(a.lookup(&name_a).await, Ok(Some(origin_a)));
    })
    .await;
}

#[tokio::test]
async fn registrations_in_many_shards_of_a_cluster_stay_alive_and_learn_takeovers() {
    let Some(cluster) = ClusterStore::start() else {
        return;
    };
    timeout(async {
        // Lease 300 ms: refreshed every 150 ms, one script per shard the relay is in.
        let registry: Arc<dyn Registry> = Arc::new(cluster.registry(300));
        let mut held = Vec::new();
        for i in 0..12 {
            let name = ns(&format!("s{i}/live"));
            held.push(
                Registration::start(registry.clone(), name, relay("r"))
                    .await
                    .unwrap(),
            );
        }
        // Four leases later, all live.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        for registration in &held {
            assert!(
                matches!(registration.state(), RegistrationState::Active(_)),
                "{registration:?}"
            );
            let origin = registry.lookup(registration.namespace()).await.unwrap();
            assert_eq!(origin.map(|o| o.relay.id), Some("r".to_string()));
        }
        // Another relay takes one over: the registration learns it at its next refresh.
        let other = cluster.registry(10_000);
        let taken = held[5].namespace().clone();
        let to = other.register(&taken, &relay("other")).await.unwrap();
        assert_eq!(timeout(held[5].moved()).await, to);
        for (i, registration) in held.iter().enumerate().filter(|(i, _)| *i != 5) {
            assert!(
                matches!(registration.state(), RegistrationState::Active(_)),
                "{i}: {registration:?}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn one_node_with_several_shards() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let registry = |lease_ms| {
            let mut config = RedisRegistryConfig::new(store.url());
            config.shards = 4;
            config.lease = Duration::from_millis(lease_ms);
            config.cache_ttl = Duration::ZERO;
            RedisRegistry::new(config).unwrap()
        };
        let long = registry(10_000);
        let mut all = long.watch(&TrackNamespace::empty()).await.unwrap();
        let shared: Arc<dyn Registry> = Arc::new(registry(200));
        let mut held = Vec::new();
        let mut want = BTreeSet::new();
        for i in 0..10 {
            let name = ns(&format!("p{i}/x"));
            want.insert(format!("+{name}"));
            held.push(
                Registration::start(shared.clone(), name, relay("r"))
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(changes(&mut all, 10).await, want);
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(long.scan(&TrackNamespace::empty()).await.unwrap().len(), 10);
        let taken = held[3].namespace().clone();
        let to = long.register(&taken, &relay("other")).await.unwrap();
        assert_eq!(held[3].moved().await, to);
        // Dropping the rest unregisters them: every shard's removal reaches the watch.
        let gone: BTreeSet<String> = (held.iter().enumerate())
            .filter(|(i, _)| *i != 3)
            .map(|(_, r)| format!("-{}", r.namespace()))
            .collect();
        drop(held);
        assert_eq!(changes(&mut all, 9).await, gone);
        assert_eq!(long.scan(&TrackNamespace::empty()).await, Ok(vec![taken]));
        // Out-of-range shard counts are refused.
        let mut config = RedisRegistryConfig::new(store.url());
        config.shards = 0;
        assert!(RedisRegistry::new(config).is_err());
    })
    .await;
}
