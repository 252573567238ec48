//! Publishes a fragmented MP4 file through a relay started in-process and writes what a
//! subscriber receives to another file: the whole media path in one program.
//!
//! ```text
//! ffmpeg -f lavfi -i testsrc=size=640x360:rate=30 -f lavfi -i sine -t 5 \
//!     -c:v libx264 -g 30 -c:a aac -f mp4 \
//!     -movflags cmaf+separate_moof+delay_moov+skip_trailer in.mp4
//! cargo run -p moq-media --example relay_fmp4 -- in.mp4 out.mp4 [cmaf]
//! ffprobe out.mp4
//! ```

use anyhow::Context;
use moq_client::{Client, TrackNamespace};
use moq_media::{EgressOptions, IngestOptions, Packaging, Start};
use moq_relay::{Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let input = args
        .next()
        .context("usage: relay_fmp4 IN.mp4 OUT.mp4 [cmaf]")?;
    let output = args
        .next()
        .context("usage: relay_fmp4 IN.mp4 OUT.mp4 [cmaf]")?;
    let packaging = match args.next().as_deref() {
        Some("cmaf") => Packaging::Cmaf,
        _ => Packaging::Loc,
    };

    // A development relay on a free loopback port, and a client that trusts its certificate.
    let relay = Relay::bind(RelayConfig::development("127.0.0.1:0".parse()?)?)?;
    relay.spawn();
    let url = format!("moqt://localhost:{}", relay.local_addr().port());
    let client = Client::builder()
        .fingerprint(&relay.fingerprint())?
        .build()?;
    let publisher = client.connect(&url).await?;
    let subscriber = client.connect(&url).await?;

    // Announce first, so the subscriber finds the namespace as soon as it asks.
    let ns = TrackNamespace::from_strs(["example", "media"])?;
    let announced = publisher.publisher().publish_namespace(ns.clone())?;
    announced.announced().await?;

    // Publish the file paced to real time (as a live encoder would write it).
    let file = tokio::fs::File::open(&input).await?;
    let session = publisher.clone();
    let pub_ns = ns.clone();
    let publishing = tokio::spawn(async move {
        let options = IngestOptions::default()
            .announce(false)
            .realtime(true)
            .packaging(packaging);
        moq_media::publish_fmp4(session.publisher(), pub_ns, file, options).await
    });

    // Subscribe from the oldest group still held, so the file is whole.
    let out = tokio::fs::File::create(&output).await?;
    let options = EgressOptions::default().start(Start::Oldest);
    let received = moq_media::subscribe_fmp4(subscriber.subscriber(), ns, out, options).await?;
    let published = publishing.await??;
    println!("published: {published:?}");
    println!("received:  {received:?}");
    Ok(())
}
