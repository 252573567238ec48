//! `subscribe_tracks`: ask a relay for every track published under a prefix (SUBSCRIBE_TRACKS)
//! and take each as it is offered, without knowing the track names in advance. Here two
//! publishers PUBLISH a track each under `example/cams`; the viewer accepts both and reads one
//! object of each. (To learn namespaces rather than tracks, use `subscribe_namespace`, see
//! `discover`.) Self-contained: copy it into a new crate (dependencies: moq-client, moq-relay,
//! tokio, anyhow).
//!
//! ```text
//! cargo run --example subscribe_tracks
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use moq_client::{Client, FullTrackName, SubscribeOptions, TrackNamespace, TrackOffer};
use moq_relay::{Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let relay = Relay::bind(RelayConfig::development("127.0.0.1:0".parse()?)?)?;
    relay.spawn();
    let url = format!("moqt://localhost:{}", relay.local_addr().port());
    let client = Client::builder()
        .fingerprint(&relay.fingerprint())?
        .build()?;
    let prefix = TrackNamespace::from_strs(["example", "cams"])?;

    // The viewer asks first: tracks published later are offered as they come.
    let viewer = client.connect(&url).await?;
    let mut offers = viewer.subscriber().subscribe_tracks(prefix.clone()).await?;

    // Two cameras each PUBLISH a track under the prefix.
    let mut cameras = Vec::new();
    for cam in ["front", "back"] {
        let session = client.connect(&url).await?;
        let name = FullTrackName::new(prefix.child(cam)?, "video")?;
        let track = session.publisher().create_track(name)?;
        session.publish(&track).await?;
        cameras.push((session, track));
    }

    let mut seen = Vec::new();
    while seen.len() < 2 {
        let offer = tokio::time::timeout(Duration::from_secs(5), offers.next())
            .await
            .context("no offer")?
            .context("SUBSCRIBE_TRACKS ended")??;
        let incoming = match offer {
            TrackOffer::Published(track) => track,
            TrackOffer::Skipped(name) => bail!("relay skipped {name}"),
        };
        let name = incoming.name().clone();
        println!("offered {name}");
        let mut video = incoming.accept(SubscribeOptions::default()).await?;
        // The matching camera writes one frame; the viewer reads it.
        let (_, track) = cameras
            .iter()
            .find(|(_, t)| t.name() == &name)
            .context("unknown track")?;
        let mut group = track.append_group()?;
        group.write("frame")?;
        group.finish()?;
        let mut group = tokio::time::timeout(Duration::from_secs(5), video.next_group())
            .await
            .context("no group")?
            .context("track ended")??;
        let frame = group.next_object().await.context("empty group")??;
        println!("  {} bytes in group {}", frame.payload.len(), group.id());
        seen.push(name);
    }
    Ok(())
}
