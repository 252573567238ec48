//! `Session::publish`: push a track to a relay with PUBLISH, without announcing a namespace
//! and without waiting to be asked, then read it through the relay by its name. Use this when
//! a publisher has a few known tracks; use `publish_namespace` + `create_track` when
//! subscribers should find the tracks under a namespace (see `discover`). Self-contained: copy
//! it into a new crate (dependencies: moq-client, moq-relay, tokio, anyhow).
//!
//! ```text
//! cargo run --example publish
//! ```

use std::time::Duration;

use anyhow::Context;
use moq_client::{Client, FullTrackName, SubscribeOptions, TrackNamespace};
use moq_relay::{Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let relay = Relay::bind(RelayConfig::development("127.0.0.1:0".parse()?)?)?;
    relay.spawn();
    let url = format!("moqt://localhost:{}", relay.local_addr().port());
    let client = Client::builder()
        .fingerprint(&relay.fingerprint())?
        .build()?;

    // The publisher creates a track and offers it to the relay (PUBLISH); `publish` returns
    // once the relay accepted it, and the session serves the track from then on.
    let publisher = client.connect(&url).await?;
    let name = FullTrackName::new(TrackNamespace::from_strs(["example", "pushed"])?, "news")?;
    let track = publisher.publisher().create_track(name.clone())?;
    publisher.publish(&track).await?;
    println!("published {name}");

    // A subscriber reads it through the relay by name.
    let reader = client.connect(&url).await?;
    let mut news = reader
        .subscriber()
        .subscribe(name, SubscribeOptions::default())
        .await?;
    for headline in ["first", "second"] {
        let mut group = track.append_group()?;
        group.write(headline)?;
        group.finish()?;
    }
    for expected in ["first", "second"] {
        let mut group = tokio::time::timeout(Duration::from_secs(5), news.next_group())
            .await
            .context("no group")?
            .context("track ended")??;
        let object = group.next_object().await.context("empty group")??;
        anyhow::ensure!(object.payload == expected.as_bytes(), "got {object:?}");
        println!("group {}: {expected}", group.id());
    }
    Ok(())
}
