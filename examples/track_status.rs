//! `track_status`: ask where a track is (TRACK_STATUS) without subscribing, e.g. to show how
//! far a live stream has come or to decide what to FETCH. Self-contained: copy it into a new
//! crate (dependencies: moq-client, moq-relay, tokio, anyhow).
//!
//! ```text
//! cargo run --example track_status
//! ```

use anyhow::Context;
use moq_client::{Client, FullTrackName, Location, TrackNamespace};
use moq_relay::{Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let relay = Relay::bind(RelayConfig::development("127.0.0.1:0".parse()?)?)?;
    relay.spawn();
    let url = format!("moqt://localhost:{}", relay.local_addr().port());
    let client = Client::builder()
        .fingerprint(&relay.fingerprint())?
        .build()?;

    // A publisher with three groups, the last of two objects.
    let publisher = client.connect(&url).await?;
    let ns = TrackNamespace::from_strs(["example", "status"])?;
    let announced = publisher.publisher().publish_namespace(ns.clone())?;
    announced.announced().await?;
    let name = FullTrackName::new(ns, "ticks")?;
    let track = publisher.publisher().create_track(name.clone())?;
    for objects in [1, 1, 2] {
        let mut group = track.append_group()?;
        for i in 0..objects {
            group.write(format!("tick {i}"))?;
        }
        group.finish()?;
    }

    // Anyone may ask the relay where the track is; it asks the publisher if it must.
    let reader = client.connect(&url).await?;
    let info = reader.subscriber().track_status(name).await?;
    let largest = info.largest.context("the track has objects")?;
    println!(
        "{}: largest object {largest}, priority {}, group order {:?}",
        info.name, info.priority, info.group_order
    );
    anyhow::ensure!(largest == Location::new(2, 1), "largest {largest}");
    Ok(())
}
