//! Three relays acting as one over real QUIC: chain, full mesh and ring; one upstream
//! subscription per track per relay; discovery of the whole cluster and of removals; a relay
//! that dies and comes back; a publisher moving between relays.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::time::Duration;

use moq_client::{Client, NamespaceEvent, Publisher, Session, SubscribeOptions, TrackConsumer};
use moq_core::{FullTrackName, TrackNamespace};
use moq_relay::cluster::ClusterConfig;
use moq_relay::{Relay, RelayConfig};
use moq_transport::tls::{Certificate, ClientTls};

const TIMEOUT: Duration = Duration::from_secs(30);

async fn timeout<F: std::future::Future>(f: F) -> F::Output {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("test timed out")
}

fn ns(path: &str) -> TrackNamespace {
    TrackNamespace::from_strs(path.split('/').filter(|f| !f.is_empty())).unwrap()
}

/// Relays named A, B, C... sharing one certificate, each dialing the peers `links` gives it
/// (by index), once every relay is bound.
fn cluster(n: usize, links: &[(usize, usize)], cert: &Certificate) -> Vec<Relay> {
    let relays: Vec<Relay> = (0..n)
        .map(|i| {
            let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
            let mut c = ClusterConfig::new(((b'A' + i as u8) as char).to_string(), vec![]);
            c.tls = ClientTls::pinned(cert.fingerprint());
            config.cluster = Some(c);
            let r = Relay::bind(config).unwrap();
            r.spawn();
            r
        })
        .collect();
    for &(from, to) in links {
        relays[from].connect_peer(&url(&relays[to]));
    }
    relays
}

fn url(r: &Relay) -> String {
    format!("moqt://localhost:{}", r.local_addr().port())
}

async fn connect(r: &Relay) -> Session {
    Client::builder()
        .fingerprint(&r.fingerprint())
        .unwrap()
        .publisher(Publisher::default())
        .build()
        .unwrap()
        .connect(&format!("{}/", url(r)))
        .await
        .unwrap()
}

/// Waits until `relay` knows `namespace` (learned over its links).
async fn knows(relay: &Relay, namespace: &TrackNamespace) {
    while !relay.namespaces().contains(namespace) {
        // The index has no per-namespace signal to wait on from outside.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn read(t: &mut TrackConsumer, n: usize) -> Vec<u64> {
    let mut out = Vec::new();
    while out.len() < n {
        let mut g = t
            .next_group()
            .await
            .expect("track ended")
            .expect("track failed");
        while let Some(o) = g.next_object().await {
            out.push(o.unwrap().location.group);
        }
    }
    out
}

/// A publisher on A, subscribers on B and C: every object arrives once, and each relay
/// holds one upstream subscription for the track, in a chain, a full mesh and a ring.
#[tokio::test]
async fn topologies_deliver_with_one_upstream_per_track() {
    timeout(async {
        let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
        for (name, links) in [
            ("chain", vec![(1, 0), (2, 1)]),
            ("mesh", vec![(1, 0), (2, 0), (2, 1)]),
            ("ring", vec![(0, 1), (1, 2), (2, 0)]),
        ] {
            let relays = cluster(3, &links, &cert);
            let publisher = connect(&relays[0]).await;
            let room = ns(&format!("{name}/room"));
            let h = publisher
                .publisher()
                .publish_namespace(room.clone())
                .unwrap();
            h.announced().await.unwrap();
            for r in &relays[1..] {
                knows(r, &room).await;
            }
            let track = FullTrackName::new(room.clone(), "t").unwrap();
            let producer = publisher.publisher().create_track(track.clone()).unwrap();
            let mut subs = Vec::new();
            for r in [&relays[1], &relays[1], &relays[2], &relays[2]] {
                let s = connect(r).await;
                let t = s
                    .subscriber()
                    .subscribe(track.clone(), SubscribeOptions::default())
                    .await
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                subs.push((s, t));
            }
            for i in 0..3 {
                let mut g = producer.append_group().unwrap();
                g.write(format!("frame {i}")).unwrap();
                g.finish().unwrap();
            }
            for (_, t) in subs.iter_mut() {
                let mut got = read(t, 3).await;
                got.sort();
                assert_eq!(got, vec![0, 1, 2], "{name}");
            }
            // A's to its publisher; B's and C's to a peer, however many subscribers.
            for (i, r) in relays.iter().enumerate() {
                assert_eq!(
                    r.metrics().value("moq_relay_upstream_subscriptions_active"),
                    1,
                    "{name}: relay {i} holds one upstream subscription per track"
                );
            }
            // Discovery on C sees A's namespace, then its removal when A's publisher leaves.
            let viewer = connect(&relays[2]).await;
            let mut found = viewer
                .subscriber()
                .subscribe_namespace(ns(name))
                .await
                .unwrap();
            assert!(matches!(found.next().await, Some(Ok(NamespaceEvent::Added(n))) if n == room));
            drop(h);
            drop(producer);
            drop(publisher);
            loop {
                match found.next().await {
                    Some(Ok(NamespaceEvent::Removed(n))) if n == room => break,
                    Some(Ok(_)) => {}
                    other => panic!("{name}: discovery ended: {other:?}"),
                }
            }
        }
    })
    .await;
}
