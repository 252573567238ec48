//! A MOQT server with no relay: the application accepts sessions itself and serves its own
//! tracks to them (here, a counter), the way a camera or a game server could. A client connects
//! straight to it and subscribes. Self-contained: copy it into a new crate (dependencies:
//! moq-client, tokio, anyhow).
//!
//! ```text
//! cargo run --example server
//! ```

use std::time::Duration;

use anyhow::Context;
use moq_client::{Client, FullTrackName, Server, SubscribeOptions, TrackNamespace};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The server: a generated certificate, a free port, and a publisher whose tracks every
    // session that connects may subscribe to.
    let server = Server::builder()
        .bind("127.0.0.1:0".parse()?)
        .generate_certificate(&["localhost"])
        .build()?;
    let name = FullTrackName::new(TrackNamespace::from_strs(["example", "server"])?, "count")?;
    let _announced = server
        .publisher()
        .publish_namespace(name.namespace.clone())?;
    let track = server.publisher().create_track(name.clone())?;
    let addr = server.local_addr()?;
    let fingerprint = server.fingerprint().to_string();
    // Accept sessions in the background; the publisher answers their requests.
    tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(session) = server.accept().await {
            println!("server: session at draft {:?}", session.version());
            sessions.push(session);
        }
    });

    // A client subscribes; then the server writes three groups.
    let client = Client::builder().fingerprint(&fingerprint)?.build()?;
    let session = client
        .connect(&format!("moqt://localhost:{}", addr.port()))
        .await?;
    let mut count = session
        .subscriber()
        .subscribe(name, SubscribeOptions::default())
        .await?;
    for i in 0..3u32 {
        let mut group = track.append_group()?;
        group.write(i.to_string())?;
        group.finish()?;
    }
    for expected in 0..3u32 {
        let mut group = tokio::time::timeout(Duration::from_secs(5), count.next_group())
            .await
            .context("no group")?
            .context("track ended")??;
        let object = group.next_object().await.context("empty group")??;
        let text = String::from_utf8_lossy(&object.payload).into_owned();
        println!("client: group {} says {text}", group.id());
        anyhow::ensure!(text == expected.to_string(), "got {text}");
    }
    session.close();
    Ok(())
}
