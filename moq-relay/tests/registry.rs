//! The route registry against a real Valkey or Redis server: each test starts its own
//! `redis-server` (or `valkey-server`) on a free loopback port, with no persistence, and kills
//! it at the end.
//!
//! The server binary is `MOQ_REDIS_SERVER`, else `valkey-server` or `redis-server` on PATH
//! (scripts/install-redis.sh installs Debian's). Without one the tests fail and say so, unless
//! `MOQ_SKIP_REGISTRY_TESTS=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::store::Store;
use common::{Binary, dev_relay, ns, timeout};
use futures::StreamExt;
use moq_core::TrackNamespace;
use moq_relay::register_local_namespaces;
use moq_relay::registry::{
    NamespaceChange, NamespaceWatch, RedisRegistry, RedisRegistryConfig, Registration,
    RegistrationState, Registry, RegistryError, RelayInfo, RelayRef,
};

fn relay(id: &str) -> RelayRef {
    RelayRef {
        id: id.to_string(),
        address: format!("moqt://{id}.test:4443"),
    }
}

/// Polls `check` until it is true, failing after `limit` (waits on the store's clock).
async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    while !check().await {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The next change of `watch`, within `limit`.
async fn next_change(watch: &mut NamespaceWatch, limit: Duration) -> NamespaceChange {
    tokio::time::timeout(limit, watch.next())
        .await
        .expect("no change in time")
        .expect("the watch ended")
}

#[tokio::test]
async fn register_then_lookup() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let registry = store.registry(10_000);
        let name = ns("live/room");
        assert_eq!(registry.lookup(&name).await, Ok(None));
        let origin = registry.register(&name, &relay("a")).await.unwrap();
        assert_eq!(origin.relay, relay("a"));
        assert!(origin.epoch > 0);
        assert_eq!(registry.lookup(&name).await, Ok(Some(origin.clone())));
        // Exactly that namespace: not its prefix, not a longer one.
        assert_eq!(registry.lookup(&ns("live")).await, Ok(None));
        assert_eq!(registry.lookup(&ns("live/room/x")).await, Ok(None));
        registry.unregister(&name, &origin).await.unwrap();
        assert_eq!(registry.lookup(&name).await, Ok(None));

        // What cannot be stored is refused, not written.
        let empty = TrackNamespace::empty();
        assert!(matches!(
            registry.register(&empty, &relay("a")).await,
            Err(RegistryError::Invalid(_))
        ));
        let bad = RelayRef {
            id: "a\nb".into(),
            address: "x".into(),
        };
        assert!(matches!(
            registry.register(&name, &bad).await,
            Err(RegistryError::Invalid(_))
        ));
    })
    .await;
}

#[tokio::test]
async fn lookups_are_cached_briefly() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let writer = store.registry(10_000);
        let mut config = RedisRegistryConfig::new(store.url());
        config.cache_ttl = Duration::from_millis(300);
        let reader = RedisRegistry::new(config).unwrap();
        let name = ns("cached");
        assert_eq!(reader.lookup(&name).await, Ok(None));
        let origin = writer.register(&name, &relay("a")).await.unwrap();
        // Within the cache's time the old answer stands; after it, the store's.
        let asked = Instant::now();
        let cached = reader.lookup(&name).await.unwrap();
        if asked.elapsed() < Duration::from_millis(250) {
            assert_eq!(cached, None, "answered from the cache");
        }
        eventually(Duration::from_secs(3), "the cache expires", || async {
            reader.lookup(&name).await == Ok(Some(origin.clone()))
        })
        .await;
    })
    .await;
}

#[tokio::test]
async fn lease_expires_when_the_owner_stops_refreshing() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let registry = Arc::new(store.registry(400));
        let name = ns("short/lived");
        let origin = registry.register(&name, &relay("a")).await.unwrap();
        let registered = Instant::now();
        assert_eq!(registry.lookup(&name).await, Ok(Some(origin)));
        eventually(Duration::from_secs(3), "the lease runs out", || async {
            registry.lookup(&name).await == Ok(None)
        })
        .await;
        assert!(registered.elapsed() >= Duration::from_millis(350));

        // A Registration refreshes it: three leases later it is still there.
        let kept = Registration::start(registry.clone(), ns("kept"), relay("a"))
            .await
            .unwrap();
        let RegistrationState::Active(origin) = kept.state() else {
            panic!("not active: {kept:?}")
        };
        tokio::time::sleep(Duration::from_millis(1200)).await;
        assert_eq!(registry.lookup(&ns("kept")).await, Ok(Some(origin)));
        // Dropped, it unregisters.
        drop(kept);
        eventually(
            Duration::from_secs(2),
            "dropped registration goes",
            || async { registry.lookup(&ns("kept")).await == Ok(None) },
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn a_second_owner_fences_the_first() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let a = store.registry(10_000);
        let b = store.registry(10_000);
        let name = ns("moving");
        let first = a.register(&name, &relay("a")).await.unwrap();
        let second = b.register(&name, &relay("b")).await.unwrap();
        assert!(second.epoch > first.epoch);
        assert_eq!(
            a.refresh(&name, &first).await,
            Err(RegistryError::Moved(Some(second.clone())))
        );
        // The old owner's unregister leaves the new owner's registration alone.
        a.unregister(&name, &first).await.unwrap();
        assert_eq!(a.lookup(&name).await, Ok(Some(second.clone())));
        b.refresh(&name, &second).await.unwrap();

        // A Registration learns of the takeover at its next refresh (half a lease).
        let a: Arc<dyn Registry> = Arc::new(store.registry(400));
        let other = ns("moving/again");
        let mut held = Registration::start(a.clone(), other.clone(), relay("a"))
            .await
            .unwrap();
        let taken = b.register(&other, &relay("b")).await.unwrap();
        assert_eq!(held.moved().await, taken);
        assert_eq!(held.state(), RegistrationState::Moved(taken.clone()));
        // Dropping the moved registration does not unregister the new owner.
        drop(held);
        assert_eq!(b.lookup(&other).await, Ok(Some(taken)));
    })
    .await;
}

#[tokio::test]
async fn scan_matches_whole_fields() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let registry = store.registry(10_000);
        for path in ["ab", "abc", "ab/x", "ab/y/z", "b", "x/ab", "x/abc"] {
            registry.register(&ns(path), &relay("a")).await.unwrap();
        }
        let scan = |prefix: &'static str| {
            let registry = registry.clone();
            async move {
                let prefix = if prefix.is_empty() {
                    TrackNamespace::empty()
                } else {
                    ns(prefix)
                };
                registry.scan(&prefix).await.unwrap()
            }
        };
        let names = |paths: &[&str]| paths.iter().map(|p| ns(p)).collect::<Vec<_>>();
        assert_eq!(scan("ab").await, names(&["ab", "ab/x", "ab/y/z"]));
        assert_eq!(scan("abc").await, names(&["abc"]));
        assert_eq!(scan("ab/y").await, names(&["ab/y/z"]));
        assert_eq!(scan("x/ab").await, names(&["x/ab"]));
        assert_eq!(scan("a").await, names(&[]));
        assert_eq!(
            scan("").await,
            names(&["ab", "ab/x", "ab/y/z", "abc", "b", "x/ab", "x/abc"])
        );
    })
    .await;
}

#[tokio::test]
async fn watch_sees_additions_removals_and_expiry() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let long = store.registry(10_000);
        let short = store.registry(500);
        let old = long.register(&ns("w/old"), &relay("a")).await.unwrap();
        let mut watch = long.watch(&ns("w")).await.unwrap();
        let step = Duration::from_secs(3);
        // What was there first.
        assert_eq!(
            next_change(&mut watch, step).await,
            NamespaceChange::Added(ns("w/old"))
        );
        let fresh = long.register(&ns("w/new"), &relay("b")).await.unwrap();
        // Not under the prefix: a sibling sharing a string prefix, another first field.
        long.register(&ns("wx/no"), &relay("a")).await.unwrap();
        long.register(&ns("other"), &relay("a")).await.unwrap();
        assert_eq!(
            next_change(&mut watch, step).await,
            NamespaceChange::Added(ns("w/new"))
        );
        long.unregister(&ns("w/new"), &fresh).await.unwrap();
        assert_eq!(
            next_change(&mut watch, step).await,
            NamespaceChange::Removed(ns("w/new"))
        );
        long.unregister(&ns("w/old"), &old).await.unwrap();
        assert_eq!(
            next_change(&mut watch, step).await,
            NamespaceChange::Removed(ns("w/old"))
        );

        // A lease that runs out is seen as a removal, within about a lease.
        short.register(&ns("w/brief"), &relay("c")).await.unwrap();
        assert_eq!(
            next_change(&mut watch, step).await,
            NamespaceChange::Added(ns("w/brief"))
        );
        let added = Instant::now();
        assert_eq!(
            next_change(&mut watch, step).await,
            NamespaceChange::Removed(ns("w/brief"))
        );
        let seen = added.elapsed();
        assert!(
            seen >= Duration::from_millis(400) && seen < Duration::from_millis(1500),
            "expiry seen after {seen:?} (lease 500 ms)"
        );
    })
    .await;
}

#[tokio::test]
async fn a_store_restart_fails_calls_then_recovers() {
    let Some(mut store) = Store::start() else {
        return;
    };
    timeout(async {
        let registry = store.registry(10_000);
        let before = registry
            .register(&ns("r/before"), &relay("a"))
            .await
            .unwrap();
        let mut watch = registry.watch(&ns("r")).await.unwrap();
        assert_eq!(
            next_change(&mut watch, Duration::from_secs(3)).await,
            NamespaceChange::Added(ns("r/before"))
        );

        store.stop();
        // While it is down every call fails within its timeout (500 ms here), with a clear
        // error; none hangs.
        for _ in 0..3 {
            let asked = Instant::now();
            let err = registry.lookup(&ns("r/before")).await.unwrap_err();
            assert!(matches!(err, RegistryError::Unavailable(_)), "{err:?}");
            assert!(asked.elapsed() < Duration::from_secs(2));
        }
        assert!(matches!(
            registry.refresh(&ns("r/before"), &before).await,
            Err(RegistryError::Unavailable(_))
        ));
        assert!(matches!(
            registry.scan(&ns("r")).await,
            Err(RegistryError::Unavailable(_))
        ));

        // Back (empty: no persistence), the same registry works again.
        store.spawn();
        eventually(Duration::from_secs(10), "calls work again", || async {
            registry.ping().await.is_ok()
        })
        .await;
        let after = registry
            .register(&ns("r/after"), &relay("a"))
            .await
            .unwrap();
        assert_eq!(registry.lookup(&ns("r/after")).await, Ok(Some(after)));
        // The lost registration reports it: not moved to anyone, gone.
        assert_eq!(
            registry.refresh(&ns("r/before"), &before).await,
            Err(RegistryError::Moved(None))
        );
        // The watch reconnected and reports what changed while it was away.
        let mut changes = Vec::new();
        while changes.len() < 2 {
            changes.push(next_change(&mut watch, Duration::from_secs(10)).await);
        }
        assert!(
            changes.contains(&NamespaceChange::Removed(ns("r/before"))),
            "{changes:?}"
        );
        assert!(
            changes.contains(&NamespaceChange::Added(ns("r/after"))),
            "{changes:?}"
        );
    })
    .await;
}

#[tokio::test]
async fn heartbeats_list_live_relays() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let registry = store.registry(400);
        let info = |id: &str, region: &str, load: u64| RelayInfo {
            relay: relay(id),
            region: region.to_string(),
            load,
        };
        registry.heartbeat(&info("b", "us", 1)).await.unwrap();
        registry.heartbeat(&info("a", "eu", 5)).await.unwrap();
        assert_eq!(
            registry.relays().await,
            Ok(vec![info("a", "eu", 5), info("b", "us", 1)])
        );
        // A new heartbeat replaces the load.
        registry.heartbeat(&info("a", "eu", 7)).await.unwrap();
        assert_eq!(registry.relays().await.unwrap()[0].load, 7);
        // Only "b" keeps beating: "a" drops out after its lease.
        eventually(
            Duration::from_secs(3),
            "relay a's lease runs out",
            || async {
                registry.heartbeat(&info("b", "us", 2)).await.unwrap();
                registry.relays().await == Ok(vec![info("b", "us", 2)])
            },
        )
        .await;
    })
    .await;
}

#[tokio::test]
async fn the_binary_heartbeats_and_registers_what_it_is_announced() {
    let Some(store) = Store::start_with(&["--requirepass", "s3cret"]) else {
        return;
    };
    timeout(async {
        // The password from MOQ_RELAY_REGISTRY_PASSWORD, the rest from flags.
        let relay = Binary::start(
            &[
                "--tls-generate",
                "localhost",
                "--auth-disabled",
                "--registry",
                &store.url(),
                "--relay-id",
                "relay-x",
                "--region",
                "eu-west",
                "--advertise",
                "moqt://relay-x.test:4443",
            ],
            &[("MOQ_RELAY_REGISTRY_PASSWORD", "s3cret")],
        );
        let mut config = RedisRegistryConfig::new(store.url());
        config.password = Some("s3cret".into());
        let registry = RedisRegistry::new(config).unwrap();
        let expected = RelayInfo {
            relay: RelayRef {
                id: "relay-x".into(),
                address: "moqt://relay-x.test:4443".into(),
            },
            region: "eu-west".into(),
            load: 0,
        };
        eventually(Duration::from_secs(10), "the relay's heartbeat", || async {
            registry.relays().await == Ok(vec![expected.clone()])
        })
        .await;
        // What a publisher of the relay announces is registered as the relay's.
        let session = common::client(&relay.fingerprint)
            .connect(&format!("moqt://localhost:{}/", relay.port))
            .await
            .unwrap();
        let announced = session
            .publisher()
            .publish_namespace(ns("bin/room"))
            .unwrap();
        announced.announced().await.unwrap();
        eventually(
            Duration::from_secs(10),
            "the announced namespace",
            || async {
                matches!(
                    registry.lookup(&ns("bin/room")).await,
                    Ok(Some(o)) if o.relay == expected.relay
                )
            },
        )
        .await;
        // Without the password the store refuses, and says so.
        let refused = RedisRegistry::new(RedisRegistryConfig::new(store.url())).unwrap();
        assert!(refused.relays().await.is_err());
        drop(relay);
    })
    .await;
}

#[tokio::test]
async fn a_relays_own_publishers_are_registered_across_an_outage() {
    let Some(mut store) = Store::start() else {
        return;
    };
    timeout(async {
        let me = relay("relay-p");
        let relay = dev_relay();
        let registry = Arc::new(store.registry(400));
        relay.spawn_task(register_local_namespaces(
            relay.clone(),
            registry.clone(),
            me.clone(),
        ));
        let session = common::client(&relay.fingerprint())
            .connect(&format!("moqt://localhost:{}/", relay.local_addr().port()))
            .await
            .unwrap();
        let announce = |path: &str| {
            let handle = session
                .publisher()
                .publish_namespace(ns(path))
                .unwrap();
            async move {
                handle.announced().await.unwrap();
                handle
            }
        };
        let registered = |path: &'static str| {
            let registry = registry.clone();
            let me = me.clone();
            move || {
                let registry = registry.clone();
                let me = me.clone();
                async move {
                    matches!(registry.lookup(&ns(path)).await, Ok(Some(o)) if o.relay == me)
                }
            }
        };
        let gone = |path: &'static str| {
            let registry = registry.clone();
            move || {
                let registry = registry.clone();
                async move { registry.lookup(&ns(path)).await == Ok(None) }
            }
        };
        let kept = announce("pub/kept").await;
        let brief = announce("pub/brief").await;
        let step = Duration::from_secs(5);
        eventually(step, "pub/kept registered", registered("pub/kept")).await;
        eventually(step, "pub/brief registered", registered("pub/brief")).await;
        // Withdrawn by its publisher: unregistered.
        drop(brief);
        eventually(step, "pub/brief unregistered", gone("pub/brief")).await;

        // The store goes away (and comes back empty): what was announced meanwhile and what
        // was registered before are registered again.
        store.stop();
        let late = announce("pub/late").await;
        store.spawn();
        eventually(step, "pub/late registered", registered("pub/late")).await;
        eventually(step, "pub/kept registered again", registered("pub/kept")).await;
        drop((kept, late));
    })
    .await;
}

#[tokio::test]
async fn two_relays_with_one_namespace_the_last_serves_and_the_other_takes_over() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let registry = Arc::new(store.registry(400));
        let mut sessions = Vec::new();
        for id in ["relay-1", "relay-2"] {
            let me = relay(id);
            let server = dev_relay();
            server.spawn_task(register_local_namespaces(
                server.clone(),
                registry.clone(),
                me,
            ));
            let session = common::client(&server.fingerprint())
                .connect(&format!("moqt://localhost:{}/", server.local_addr().port()))
                .await
                .unwrap();
            sessions.push((server, session));
        }
        let origin_is = |id: &'static str| {
            let registry = registry.clone();
            move || {
                let registry = registry.clone();
                async move {
                    matches!(registry.lookup(&ns("shared/room")).await, Ok(Some(o)) if o.relay.id == id)
                }
            }
        };
        let announce = |session: &moq_client::Session| {
            let handle = session
                .publisher()
                .publish_namespace(ns("shared/room"))
                .unwrap();
            async move {
                handle.announced().await.unwrap();
                handle
            }
        };
        let step = Duration::from_secs(5);
        let first = announce(&sessions[0].1).await;
        eventually(step, "relay-1 serves it", origin_is("relay-1")).await;
        let second = announce(&sessions[1].1).await;
        eventually(step, "relay-2 took it over", origin_is("relay-2")).await;
        // Held for a few refreshes: relay-1 stands by and does not take it back.
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert!(origin_is("relay-2")().await);
        // relay-2's publisher leaves: relay-1 serves it again.
        drop(second);
        eventually(step, "relay-1 took it back", origin_is("relay-1")).await;
        drop(first);
    })
    .await;
}

/// How many scripts the store ran since the last call (its `INFO commandstats`, reset).
async fn scripts_run(url: &str) -> u64 {
    let client = redis::Client::open(url).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut con)
        .await
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut con)
        .await
        .unwrap();
    common::store::script_calls(&info)
}

#[tokio::test]
async fn a_relays_registrations_share_one_refresh() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        // 40 namespaces of one relay, lease 200 ms: refreshed per namespace, that would be
        // 40 calls every 100 ms; riding on the relay's lease, one.
        let registry: Arc<dyn Registry> = Arc::new(store.registry(200));
        let mut held = Vec::new();
        for i in 0..40 {
            let name = ns(&format!("many/{i}"));
            held.push(
                Registration::start(registry.clone(), name, relay("r"))
                    .await
                    .unwrap(),
            );
        }
        // Past the first round (which checks each registration once).
        tokio::time::sleep(Duration::from_millis(250)).await;
        scripts_run(&store.url()).await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let calls = scripts_run(&store.url()).await;
        eprintln!("{calls} store calls in 1 s for 40 namespaces of one relay (lease 200 ms)");
        assert!(
            (5..=20).contains(&calls),
            "{calls} store calls in 1 s for 40 namespaces (lease 200 ms)"
        );
        // And they are all still there, live.
        assert_eq!(registry.scan(&ns("many")).await.unwrap().len(), 40);
        for registration in &held {
            assert!(
                matches!(registration.state(), RegistrationState::Active(_)),
                "{registration:?}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn a_dead_relays_namespaces_go_with_its_lease() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let long = store.registry(10_000);
        let short = store.registry(400);
        let mut watch = long.watch(&ns("d")).await.unwrap();
        let kept = long.register(&ns("d/kept"), &relay("alive")).await.unwrap();
        for i in 0..25 {
            short
                .register(&ns(&format!("d/gone/{i}")), &relay("dead"))
                .await
                .unwrap();
        }
        let registered = Instant::now();
        let mut added = 0;
        while added < 26 {
            match next_change(&mut watch, Duration::from_secs(3)).await {
                NamespaceChange::Added(_) => added += 1,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(long.scan(&ns("d")).await.unwrap().len(), 26);
        // Nobody refreshes relay "dead": every one of its namespaces is reported removed
        // shortly after its lease ends; lookups and scans skip them.
        let mut removed = std::collections::BTreeSet::new();
        while removed.len() < 25 {
            match next_change(&mut watch, Duration::from_secs(3)).await {
                NamespaceChange::Removed(n) => assert!(removed.insert(n)),
                other => panic!("{other:?}"),
            }
        }
        let seen = registered.elapsed();
        assert!(
            seen >= Duration::from_millis(350) && seen < Duration::from_millis(1500),
            "removals seen after {seen:?} (lease 400 ms)"
        );
        assert_eq!(long.lookup(&ns("d/gone/3")).await, Ok(None));
        assert_eq!(long.scan(&ns("d")).await, Ok(vec![ns("d/kept")]));
        assert_eq!(long.lookup(&ns("d/kept")).await, Ok(Some(kept)));

        // A relay back with the same id starts a new lease: its old namespaces stay dead.
        let back = store.registry(400);
        let old = back
            .register(&ns("e/old"), &relay("phoenix"))
            .await
            .unwrap();
        assert_eq!(back.lookup(&ns("e/old")).await, Ok(Some(old.clone())));
        eventually(Duration::from_secs(3), "phoenix's lease ends", || async {
            back.lookup(&ns("e/old")).await == Ok(None)
        })
        .await;
        back.heartbeat(&RelayInfo {
            relay: relay("phoenix"),
            region: String::new(),
            load: 0,
        })
        .await
        .unwrap();
        assert_eq!(back.lookup(&ns("e/old")).await, Ok(None));
        assert_eq!(back.scan(&ns("e")).await, Ok(vec![]));
        assert_eq!(
            back.refresh(&ns("e/old"), &old).await,
            Err(RegistryError::Moved(None))
        );
    })
    .await;
}

/// Dropping a registration unregisters it at once (the refresher's task does it, nothing is
/// spawned from `Drop`), the last one of a relay too: its refresher's task drains the queue
/// before it ends. With a 10 s lease, nothing but the unregistration can remove them.
#[tokio::test]
async fn dropped_registrations_are_unregistered_even_the_last() {
    let Some(store) = Store::start() else { return };
    timeout(async {
        let registry: Arc<dyn Registry> = Arc::new(store.registry(10_000));
        let mut held = Vec::new();
        for i in 0..3 {
            let name = ns(&format!("gone/{i}"));
            held.push(
                Registration::start(registry.clone(), name, relay("g"))
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(registry.scan(&ns("gone")).await.unwrap().len(), 3);
        drop(held.pop());
        eventually(Duration::from_secs(2), "one unregistered", || async {
            registry.scan(&ns("gone")).await.unwrap().len() == 2
        })
        .await;
        drop(held);
        eventually(Duration::from_secs(2), "the last unregistered", || async {
            registry.scan(&ns("gone")).await.unwrap().is_empty()
        })
        .await;
    })
    .await;
}
