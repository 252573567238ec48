//! A measurement, not a check (ignored by default): registers N namespaces from one relay
//! under one first field in a running store, then times 1,000 lookups and 21 scans of a
//! narrow prefix, for the store's memory per namespace and how scans scale. moq-bench's
//! `cluster-scale` section (section 9) measures the same and more from 1k to 1M namespaces
//! over 1,000 origins.
//!
//! ```text
//! redis-server --port 6399 --save '' --appendonly no &
//! before=$(redis-cli -p 6399 info memory | grep '^used_memory:')
//! MOQ_REGISTRY_URL=redis://127.0.0.1:6399 N=100000 \
//!     cargo test -p moq-relay --test registry_scale -- --ignored --nocapture
//! redis-cli -p 6399 info memory | grep '^used_memory:'   # minus $before, over N
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]
use futures::future::join_all;
use moq_core::TrackNamespace;
use moq_relay::registry::{RedisRegistry, RedisRegistryConfig, Registry, RelayRef};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: needs MOQ_REGISTRY_URL and N (see the file's docs)"]
async fn registry_at_scale() {
    let url = std::env::var("MOQ_REGISTRY_URL").expect("MOQ_REGISTRY_URL");
    let n: usize = std::env::var("N").map_or(100_000, |n| n.parse().expect("N"));
    let mut c = RedisRegistryConfig::new(url.clone());
    c.lease = Duration::from_secs(600);
    c.cache_ttl = Duration::ZERO;
    let reg = RedisRegistry::new(c).unwrap();
    let me = RelayRef {
        id: "relay-0001".into(),
        address: "moqt://relay-0001.example.net:4443".into(),
    };
    let t = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(200) {
        join_all(chunk.iter().map(|i| {
            let reg = reg.clone();
            let me = me.clone();
            async move {
                let ns = TrackNamespace::from_strs(["example.com", &format!("room-{i}"), "alice"])
                    .unwrap();
                reg.register(&ns, &me).await.unwrap();
            }
        }))
        .await;
    }
    println!("registered {n} in {:?}", t.elapsed());
    let mut lat = Vec::new();
    for i in 0..1000 {
        let ns =
            TrackNamespace::from_strs(["example.com", &format!("room-{}", i * 7 % n), "alice"])
                .unwrap();
        let t = Instant::now();
        assert!(reg.lookup(&ns).await.unwrap().is_some());
        lat.push(t.elapsed());
    }
    lat.sort();
    println!("lookup p50 {:?} p99 {:?}", lat[500], lat[990]);
    let prefix = TrackNamespace::from_strs(["example.com", "room-4242"]).unwrap();
    let mut sl = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let found = reg.scan(&prefix).await.unwrap();
        assert_eq!(found.len(), 1);
        sl.push(t.elapsed());
    }
    sl.sort();
    println!(
        "scan of one room among {n}: p50 {:?} max {:?} (21 scans)",
        sl[10], sl[20]
    );
}
