//! A track whose publisher finished stays available from the relay's cache while the cache
//! holds it: FETCH, `join` and TRACK_STATUS are served from it, and a SUBSCRIBE is accepted
//! and ended at once with PUBLISH_DONE TRACK_ENDED (the track is no longer being published,
//! draft-19 §10.11), its SUBSCRIBE_OK giving the final Largest Location. Over QUIC, with a
//! late reader at every draft.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::{read_objects, timeout, timeout_after};
use moq_client::{
    Client, FullTrackName, JoinFrom, Location, Publisher, Session, SubscribeOptions,
    TrackNamespace, Version,
};
use moq_relay::{Relay, RelayConfig};

fn relay() -> Relay {
    let relay =
        Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap()).unwrap();
    relay.spawn();
    relay
}

async fn connect(relay: &Relay, version: Option<Version>) -> Session {
    let mut b = Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .publisher(Publisher::default());
    if let Some(v) = version {
        b = b.versions(vec![v]);
    }
    b.build()
        .unwrap()
        .connect(&format!("moqt://localhost:{}/", relay.local_addr().port()))
        .await
        .unwrap()
}

/// A publisher writes groups 0-2 of `name` to a relay while a reader is subscribed, finishes
/// the track and closes its session; returns once the reader saw the track end.
async fn finished_track(relay: &Relay, name: &FullTrackName) {
    let p = connect(relay, None).await;
    let h = p
        .publisher()
        .publish_namespace(name.namespace.clone())
        .unwrap();
    h.announced().await.unwrap();
    let producer = p.publisher().create_track(name.clone()).unwrap();
    let reader = connect(relay, None).await;
    let mut sub = reader
        .subscriber()
        .subscribe(name.clone(), SubscribeOptions::default())
        .await
        .unwrap();
    for g in 0..3 {
        let mut w = producer.append_group().unwrap();
        w.write(format!("g{g}")).unwrap();
        w.finish().unwrap();
    }
    assert_eq!(read_objects(&mut sub, 3).await.len(), 3);
    producer.finish(Duration::from_secs(5)).await.unwrap();
    drop(h);
    p.close_gracefully(Duration::from_secs(2)).await.ok();
    drop(p);
    // The relay ended the track (PUBLISH_DONE TRACK_ENDED reached the reader).
    assert!(sub.next_group().await.is_none(), "the track ends");
}

#[tokio::test]
async fn a_finished_track_stays_fetchable() {
    let relay = relay();
    let name = FullTrackName::new(TrackNamespace::from_strs(["vod"]).unwrap(), "t").unwrap();
    timeout(finished_track(&relay, &name)).await;
    for &v in Version::ALL {
        timeout_after(Duration::from_secs(10), async {
            let s = connect(&relay, Some(v)).await;
            // FETCH from the cache.
            let mut f = s
                .subscriber()
                .fetch(name.clone(), Location::new(0, 0), Location::new(3, 0))
                .await
                .unwrap_or_else(|e| panic!("FETCH at {v}: {e}"));
            let mut groups = Vec::new();
            while let Some(o) = f.next_object().await {
                groups.push(o.unwrap().location.group);
            }
            assert_eq!(groups, vec![0, 1, 2], "FETCH at {v}");
            // TRACK_STATUS.
            let status = s
                .subscriber()
                .track_status(name.clone())
                .await
                .unwrap_or_else(|e| panic!("TRACK_STATUS at {v}: {e}"));
            assert_eq!(status.largest, Some(Location::new(2, 0)), "at {v}");
            // A join: the current group (and one before it) from the cache, then the end.
            let mut objects = s
                .subscriber()
                .join(
                    name.clone(),
                    SubscribeOptions::default(),
                    JoinFrom::GroupsBefore(1),
                )
                .await
                .unwrap_or_else(|e| panic!("join at {v}: {e}"));
            let mut joined = Vec::new();
            while let Some(o) = objects.next().await {
                joined.push(o.unwrap().location.group);
            }
            assert_eq!(joined, vec![1, 2], "join at {v}");
            // A SUBSCRIBE: answered, with the final Largest Location, then ended.
            let mut sub = s
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap_or_else(|e| panic!("SUBSCRIBE at {v}: {e}"));
            assert_eq!(
                sub.info().and_then(|i| i.largest),
                Some(Location::new(2, 0)),
                "at {v}"
            );
            assert!(sub.next_group().await.is_none(), "ended at {v}");
        })
        .await;
    }
}
