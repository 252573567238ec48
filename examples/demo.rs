//! The main demo, in one process: a relay on loopback, two publishers announcing namespaces
//! under one prefix (one over raw QUIC, one over WebTransport), and a subscriber that discovers
//! them with SUBSCRIBE_NAMESPACE, joins a track of each through the relay (SUBSCRIBE and a
//! Joining FETCH of what was published before), and prints
//! what it sees. Exits 0 when everything arrived.
//!
//! ```text
//! cargo run --example demo
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use moq_client::{
    Client, FullTrackName, JoinFrom, NamespaceEvent, SubscribeOptions, TrackNamespace,
};
use moq_relay::{Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    moq_client::cli::init_logging("warn");
    tokio::time::timeout(Duration::from_secs(30), run())
        .await
        .context("demo timed out")?
}

async fn run() -> anyhow::Result<()> {
    let relay = Relay::bind(RelayConfig::development("127.0.0.1:0".parse()?)?)?;
    relay.spawn();
    let port = relay.local_addr().port();
    println!(
        "relay listening on {} (certificate sha-256 {})",
        relay.local_addr(),
        relay.fingerprint()
    );
    let quic = format!("moqt://localhost:{port}/demo");
    let webtransport = format!("https://localhost:{port}/demo");
    let client = || Client::builder().fingerprint(&relay.fingerprint())?.build();

    // Two publishers, each with a namespace under (demo, rooms) and a "chat" track.
    let prefix = TrackNamespace::from_strs(["demo", "rooms"])?;
    let mut publishers = Vec::new();
    for (who, url) in [("alice", &quic), ("bob", &webtransport)] {
        let session = client()?.connect(url).await?;
        let ns = prefix.child(who)?;
        let announced = session.publisher().publish_namespace(ns.clone())?;
        announced.announced().await?;
        let track = session
            .publisher()
            .create_track(FullTrackName::new(ns, "chat")?)?;
        for i in 0..3 {
            let mut group = track.append_group()?;
            group.write(format!("{who} says hello #{i}"))?;
            group.finish()?;
        }
        println!(
            "{who} published {} over {}",
            announced.namespace(),
            if url.starts_with("https") {
                "WebTransport"
            } else {
                "raw QUIC"
            }
        );
        publishers.push((session, announced, track));
    }

    // The subscriber discovers both namespaces and reads each chat from the beginning.
    let subscriber = client()?.connect(&quic).await?;
    let mut discovery = subscriber
        .subscriber()
        .subscribe_namespace(prefix.clone())
        .await?;
    let mut found = Vec::new();
    while found.len() < 2 {
        match discovery.next().await {
            Some(Ok(NamespaceEvent::Added(ns))) => {
                println!("discovered namespace {ns}");
                found.push(ns);
            }
            Some(Ok(other)) => bail!("unexpected {other:?}"),
            Some(Err(e)) => return Err(e.into()),
            None => bail!("discovery ended early"),
        }
    }
    // A SUBSCRIBE carries only what is published after it (draft-19 §10.7); `join` adds a
    // Joining FETCH of the groups before, here all of them, with no gap and no duplicate.
    for ns in found {
        let name = FullTrackName::new(ns, "chat")?;
        let mut objects = subscriber
            .subscriber()
            .join(name.clone(), SubscribeOptions::default(), JoinFrom::Oldest)
            .await?;
        for _ in 0..3 {
            let object = objects.next().await.context("track ended early")??;
            println!(
                "{name} {}: {}",
                object.location,
                String::from_utf8_lossy(&object.payload)
            );
        }
    }

    // A publisher leaves: its namespace is withdrawn.
    let (session, announced, _track) = publishers.remove(0);
    drop(announced);
    match discovery.next().await {
        Some(Ok(NamespaceEvent::Removed(ns))) => println!("namespace gone: {ns}"),
        other => bail!("expected a removal, got {other:?}"),
    }
    session.close();
    println!("demo complete");
    Ok(())
}
