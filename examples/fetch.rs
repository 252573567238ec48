//! A standalone FETCH: a relay on loopback, a publisher that writes five groups and stays, and
//! a reader that asks the relay for groups 1 to 3 only, after they were published. FETCH
//! returns what already exists, in order, and ends; use `subscribe` or `join` for what comes
//! next. Self-contained: copy it into a new crate (dependencies: moq-client, moq-relay, tokio,
//! anyhow).
//!
//! ```text
//! cargo run --example fetch
//! ```

use std::time::Duration;

use anyhow::Context;
use moq_client::{Client, FetchItem, FullTrackName, Location, TrackNamespace};
use moq_relay::{Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // An embedded relay with a generated certificate, on a free port.
    let relay = Relay::bind(RelayConfig::development("127.0.0.1:0".parse()?)?)?;
    relay.spawn();
    let url = format!("moqt://localhost:{}", relay.local_addr().port());
    let client = Client::builder()
        .fingerprint(&relay.fingerprint())?
        .build()?;

    // The publisher: five groups of one object each, then it waits (it could also finish the
    // track; the relay keeps its cache for a while either way).
    let publisher = client.connect(&url).await?;
    let ns = TrackNamespace::from_strs(["example", "fetch"])?;
    let announced = publisher.publisher().publish_namespace(ns.clone())?;
    announced.announced().await?;
    let name = FullTrackName::new(ns, "log")?;
    let track = publisher.publisher().create_track(name.clone())?;
    for i in 0..5 {
        let mut group = track.append_group()?;
        group.write(format!("entry {i}"))?;
        group.finish()?;
    }

    // The reader: groups 1, 2 and 3 (an end with object 0 means "all of group 3").
    let reader = client.connect(&url).await?;
    let mut fetch = tokio::time::timeout(
        Duration::from_secs(5),
        reader
            .subscriber()
            .fetch(name, Location::new(1, 0), Location::new(3, 0)),
    )
    .await
    .context("FETCH not answered")??;
    let mut received = Vec::new();
    while let Some(item) = fetch.next().await {
        match item? {
            FetchItem::Object(object) => {
                let text = String::from_utf8_lossy(&object.payload).into_owned();
                println!("{}: {text}", object.location);
                received.push(text);
            }
            // A gap the publisher reported: these objects do not exist or are unknown.
            FetchItem::EndOfRange { kind, location } => println!("gap up to {location}: {kind:?}"),
        }
    }
    anyhow::ensure!(
        received == ["entry 1", "entry 2", "entry 3"],
        "fetched {received:?}"
    );
    println!("fetched groups 1-3");
    Ok(())
}
