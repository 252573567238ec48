//! A publisher killed outright and restarted before the relay noticed (its old session is
//! silent: the relay sees its death only at the idle timeout) does not poison its track: the
//! new process's first object reaches a reconnecting subscriber's open track within a second,
//! whether it numbers its groups from 0 again (a new incarnation: the relay ends the old one's
//! subscriptions with PUBLISH_DONE GOING_AWAY and the subscriber renews by itself) or above the
//! old ones (the same subscription continues). Over QUIC, at every draft.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use common::proxy::{Impairment, Proxy};
use common::{read_objects, timeout_after};
use moq_client::{
    Backoff, Client, FullTrackName, Publisher, SubscribeOptions, TrackNamespace, Version,
};
use moq_relay::{Relay, RelayConfig};

fn client(relay: &Relay, v: Version) -> Client {
    Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .versions(vec![v])
        .publisher(Publisher::default())
        .build()
        .unwrap()
}

/// One case: the restarted publisher numbers from 0 (`above` false) or above the old groups.
async fn restart(v: Version, above: bool) {
    let relay =
        Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap()).unwrap();
    relay.spawn();
    let url = |port: u16| format!("moqt://localhost:{port}/");
    let direct = url(relay.local_addr().port());
    let name = FullTrackName::new(TrackNamespace::from_strs(["cam"]).unwrap(), "video").unwrap();

    // The first publisher reaches the relay through a UDP proxy, so that it can fall silent.
    let server: SocketAddr = ([127, 0, 0, 1], relay.local_addr().port()).into();
    let lossless = Impairment {
        drop: 0.0,
        duplicate: 0.0,
        reorder: 0.0,
        seed: 1,
    };
    let proxy = Proxy::start(server, lossless).await;
    let old = client(&relay, v)
        .connect(&url(proxy.addr().port()))
        .await
        .unwrap();
    let h = old
        .publisher()
        .publish_namespace(name.namespace.clone())
        .unwrap();
    h.announced().await.unwrap();
    let producer = old.publisher().create_track(name.clone()).unwrap();

    let viewer = client(&relay, v).reconnecting(&direct, Backoff::default());
    viewer.connected().await.unwrap();
    let mut track = viewer
        .subscriber()
        .subscribe(name.clone(), SubscribeOptions::default())
        .await
        .unwrap();
    for _ in 0..3 {
        let mut g = producer.append_group().unwrap();
        g.write("old").unwrap();
        g.finish().unwrap();
    }
    assert_eq!(read_objects(&mut track, 3).await.len(), 3);

    // SIGKILL: the old session goes silent (no close, no PUBLISH_DONE); its handles stay.
    drop(proxy);
    let _killed = (old, h, producer);

    // The restarted process: a new session, the same namespace and track.
    let new = client(&relay, v).connect(&direct).await.unwrap();
    let _h = new
        .publisher()
        .publish_namespace(name.namespace.clone())
        .unwrap();
    let producer = new.publisher().create_track(name.clone()).unwrap();
    // The relay subscribes the new announcer for the track it carries.
    producer.subscribed().await;
    let first = if above { 10 } else { 0 };
    let mut g = producer.create_group(first).unwrap();
    g.write("new").unwrap();
    g.finish().unwrap();
    let written = Instant::now();
    let got = read_objects(&mut track, 1).await;
    let took = written.elapsed();
    assert_eq!(
        got,
        vec![(first, "new".to_string())],
        "at {v}, above: {above}"
    );
    assert!(
        took < Duration::from_secs(1),
        "at {v}, above: {above}: the new publisher's first object after {took:?}"
    );
    // And what follows, on the same consumer.
    let mut g = producer.append_group().unwrap();
    g.write("newer").unwrap();
    g.finish().unwrap();
    assert_eq!(
        read_objects(&mut track, 1).await,
        vec![(first + 1, "newer".to_string())],
        "at {v}, above: {above}"
    );
}

#[tokio::test]
async fn a_restarted_publisher_does_not_poison_its_track() {
    for &v in Version::ALL {
        for above in [false, true] {
            timeout_after(Duration::from_secs(15), restart(v, above)).await;
        }
    }
}
