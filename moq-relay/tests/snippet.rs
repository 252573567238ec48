//! The README's discovery snippet ("Discovering namespaces and reading what you find"), run
//! against a relay over QUIC at every draft: a reader that discovers a namespace and joins its
//! track receives every group the publisher wrote after the namespace appeared, also those
//! written before the reader's SUBSCRIBE reached the publisher.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::timeout_after;
use moq_client::{
    Client, FullTrackName, JoinFrom, NamespaceEvent, Publisher, SubscribeOptions, TrackNamespace,
    Version,
};
use moq_relay::{Relay, RelayConfig};

/// The snippet's reader, as written in the README (with the test's client and URL), returning
/// the groups of the objects it printed.
async fn readme_reader(client: Client, url: String) -> Result<Vec<u64>, moq_client::Error> {
    let mut groups = Vec::new();
    let session = client.connect(&url).await?;
    let mut rooms = session
        .subscriber()
        .subscribe_namespace(TrackNamespace::from_strs(["meet"])?)
        .await?;
    while let Some(event) = rooms.next().await {
        let NamespaceEvent::Added(room) = event? else {
            continue;
        };
        let chat = FullTrackName::new(room, "chat")?;
        let mut objects = session
            .subscriber()
            .join(chat, SubscribeOptions::default(), JoinFrom::Oldest)
            .await?;
        while let Some(object) = objects.next().await {
            let object = object?;
            groups.push(object.location.group);
            // The test's publisher writes six groups; the README's loop would go on.
            if groups.len() == 6 {
                return Ok(groups);
            }
        }
        return Ok(groups);
    }
    Ok(groups)
}

#[tokio::test]
async fn the_readme_discovery_snippet_receives_every_group() {
    for &v in Version::ALL {
        timeout_after(Duration::from_secs(15), async {
            let relay =
                Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap())
                    .unwrap();
            relay.spawn();
            let url = format!("moqt://localhost:{}", relay.local_addr().port());
            let client = |v| {
                Client::builder()
                    .fingerprint(&relay.fingerprint())
                    .unwrap()
                    .versions(vec![v])
                    .publisher(Publisher::default())
                    .build()
                    .unwrap()
            };
            // The README's publisher: announce, create the track, write at once.
            let p = client(v).connect(&url).await.unwrap();
            let ns = TrackNamespace::from_strs(["meet", "room1"]).unwrap();
            let announced = p.publisher().publish_namespace(ns.clone()).unwrap();
            let chat = p
                .publisher()
                .create_track(FullTrackName::new(ns, "chat").unwrap())
                .unwrap();
            announced.announced().await.unwrap();
            // Groups written before any reader exists.
            for g in 0..3 {
                let mut group = chat.append_group().unwrap();
                group.write(format!("hello {g}")).unwrap();
                group.finish().unwrap();
            }
            let reader = tokio::spawn(readme_reader(client(v), url.clone()));
            // And after the reader's subscription reached the publisher.
            chat.subscribed().await;
            for g in 3..6 {
                let mut group = chat.append_group().unwrap();
                group.write(format!("hello {g}")).unwrap();
                group.finish().unwrap();
            }
            let groups = reader.await.unwrap().unwrap();
            assert_eq!(groups, (0..6).collect::<Vec<_>>(), "at {v}");
        })
        .await;
    }
}

/// `join` sets the subscription's start itself: a filter of the caller's own is refused, not
/// silently replaced.
#[tokio::test]
async fn join_refuses_a_filter_it_would_override() {
    timeout_after(Duration::from_secs(10), async {
        let relay =
            Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap()).unwrap();
        relay.spawn();
        let session = Client::builder()
            .fingerprint(&relay.fingerprint())
            .unwrap()
            .build()
            .unwrap()
            .connect(&format!("moqt://localhost:{}", relay.local_addr().port()))
            .await
            .unwrap();
        let name = FullTrackName::new(TrackNamespace::from_strs(["meet"]).unwrap(), "t").unwrap();
        let options = SubscribeOptions::default().start_at(moq_client::Location::new(0, 0));
        let err = session
            .subscriber()
            .join(name, options, JoinFrom::Oldest)
            .await
            .unwrap_err();
        assert!(matches!(err, moq_client::Error::Invalid(_)), "{err:?}");
    })
    .await;
}
