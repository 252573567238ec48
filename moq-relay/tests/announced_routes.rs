//! What a session's peer announces is one entry of the relay's shared index, owned by the
//! session (issue 35): its route and its discovery entry at once, over raw QUIC and
//! WebTransport (draft-19 §6.2, §9.5).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use moq_client::{
    Client, FullTrackName, NamespaceEvent, Session, SubscribeOptions, TrackNamespace,
};
use moq_relay::{Relay, RelayConfig};

mod common;
use common::read_objects;

const TIMEOUT: Duration = Duration::from_secs(20);

fn relay() -> Relay {
    let config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
    let relay = Relay::bind(config).unwrap();
    relay.spawn();
    relay
}

async fn connect(relay: &Relay, webtransport: bool) -> Session {
    let scheme = if webtransport { "https" } else { "moqt" };
    Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .build()
        .unwrap()
        .connect(&format!(
            "{scheme}://localhost:{}/",
            relay.local_addr().port()
        ))
        .await
        .unwrap()
}

fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

/// Waits until the relay's index reports `namespace` removed.
async fn removed(relay: &Relay, namespace: &TrackNamespace) {
    let (now, mut watch) = relay.namespaces().watch(namespace, 16);
    if !now.contains(namespace) {
        return;
    }
    while let Some(ev) = watch.next().await {
        if ev == NamespaceEvent::Removed(namespace.clone()) {
            return;
        }
    }
    panic!("namespace watch ended");
}

/// Two sessions announce a namespace and an extension of it: each is one entry of the shared
/// index, owned by its session; a SUBSCRIBE under both is routed to the publisher; a
/// withdrawal and a closed session each take their entry away.
#[tokio::test]
async fn an_announced_namespace_is_one_entry_owned_by_its_session() {
    tokio::time::timeout(TIMEOUT, async {
        let relay = relay();
        for webtransport in [false, true] {
            let index = relay.namespaces();
            let room = ns(&["room", if webtransport { "wt" } else { "quic" }]);
            let deep = room.child("deep").unwrap();
            let p1 = connect(&relay, webtransport).await;
            let p2 = connect(&relay, webtransport).await;
            let h1 = p1.publisher().publish_namespace(room.clone()).unwrap();
            h1.announced().await.unwrap();
            let h2 = p2.publisher().publish_namespace(deep.clone()).unwrap();
            h2.announced().await.unwrap();
            // Registered before REQUEST_OK was sent: one owner each, two on the path below.
            assert_eq!(index.owners_at(&room).len(), 1);
            assert_eq!(index.owners_at(&deep).len(), 1);
            let below = deep.child("x").unwrap();
            assert_eq!(index.owners_on_path(&below).len(), 2);
            assert_ne!(index.owners_at(&room), index.owners_at(&deep));

            // Routed to the publisher of the longer namespace.
            let name = FullTrackName::new(deep.clone(), b"t".to_vec()).unwrap();
            let t = p2.publisher().create_track(name.clone()).unwrap();
            let s = connect(&relay, webtransport).await;
            let mut sub = s
                .subscriber()
                .subscribe(name, SubscribeOptions::default())
                .await
                .unwrap();
            let mut g = t.create_group(1).unwrap();
            g.write("one").unwrap();
            g.finish().unwrap();
            assert_eq!(
                read_objects(&mut sub, 1).await,
                vec![(1, "one".to_string())]
            );

            // Withdrawn: its entry goes; the other stays.
            drop(h2);
            removed(&relay, &deep).await;
            assert!(index.owners_on_path(&below).len() == 1 && index.contains(&room));
            // The session closed: its entry goes with it.
            p1.close();
            removed(&relay, &room).await;
            assert!(index.owners_on_path(&below).is_empty());
            drop((h1, sub, t, s, p2));
        }
    })
    .await
    .expect("test timed out");
}
