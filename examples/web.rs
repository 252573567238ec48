//! Discovery in a browser, in one command: a relay on loopback with its web page, a clock that
//! publishes the time every second, and chat rooms that come and go, so the page shows
//! namespaces appearing and disappearing and a track's objects live.
//!
//! ```text
//! cargo run --example web            # then open the printed http://localhost:PORT/ URL
//! cargo run --example web -- --http 127.0.0.1:8080 --bind 127.0.0.1:4443
//! ```
//!
//! The page (served by the relay's HTTP side, `moq_relay::http`) fetches `/connect.json`,
//! pins the relay's certificate by its hash and speaks MOQT over WebTransport.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use moq_client::{Client, FullTrackName, TrackNamespace, TrackProducer};
use moq_relay::{Relay, RelayConfig};

#[derive(Parser)]
struct Args {
    /// The relay's UDP address (QUIC and WebTransport).
    #[arg(long, default_value = "127.0.0.1:0")]
    bind: SocketAddr,
    /// The page's TCP address.
    #[arg(long, default_value = "127.0.0.1:0")]
    http: SocketAddr,
    /// Stop after this many seconds (default: run until interrupted).
    #[arg(long)]
    seconds: Option<u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    moq_client::cli::init_logging("warn");
    let args = Args::parse();
    let relay = Relay::bind(RelayConfig::development(args.bind)?)?;
    relay.spawn();
    let listener = tokio::net::TcpListener::bind(args.http).await?;
    let page = listener.local_addr()?;
    tokio::spawn(moq_relay::http::serve(
        listener,
        moq_relay::http::router(relay.clone(), None),
    ));
    println!(
        "relay on {} (certificate sha-256 {})",
        relay.local_addr(),
        relay.fingerprint()
    );
    println!(
        "open http://127.0.0.1:{}/?prefix=demo&track=chat",
        page.port()
    );

    let url = format!("moqt://localhost:{}/", relay.local_addr().port());
    let client = Client::builder()
        .fingerprint(&relay.fingerprint())?
        .build()?;
    let session = client.connect(&url).await?;
    let clock = announce(&session, &["demo", "clock"]).await?;
    let mut rooms: Vec<(moq_client::NamespaceHandle, TrackProducer)> = Vec::new();
    let names = ["alice", "bob", "carol"];
    let mut interrupts = moq_client::cli::Interrupts::listen();
    let stop = async {
        match args.seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs(s)).await,
            None => interrupts.interrupted().await,
        }
    };
    tokio::pin!(stop);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    for second in 0u64.. {
        tokio::select! {
            _ = &mut stop => break,
            _ = tick.tick() => {}
        }
        let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
        let mut group = clock.1.append_group()?;
        group.write(format!(
            "{:02}:{:02}:{:02} UTC",
            now / 3600 % 24,
            now / 60 % 60,
            now % 60
        ))?;
        group.finish()?;
        // Every 5 s a room opens, up to three; then they close again, oldest first.
        if second % 5 == 0 {
            let cycle = (second / 5) % (2 * names.len() as u64);
            match names.get(cycle as usize) {
                Some(who) => rooms.push(announce(&session, &["demo", "rooms", who]).await?),
                None if !rooms.is_empty() => drop(rooms.remove(0)),
                None => {}
            }
        }
        for (handle, track) in &rooms {
            let mut group = track.append_group()?;
            let who = handle
                .namespace()
                .fields()
                .next_back()
                .map(|f| String::from_utf8_lossy(f).into_owned());
            group.write(format!(
                "{} says it is second {second}",
                who.unwrap_or_default()
            ))?;
            group.finish()?;
        }
    }
    session.close();
    Ok(())
}

/// Announces `fields` and creates its `chat` track.
async fn announce(
    session: &moq_client::Session,
    fields: &[&str],
) -> anyhow::Result<(moq_client::NamespaceHandle, TrackProducer)> {
    let ns = TrackNamespace::from_strs(fields.iter().copied())?;
    let handle = session.publisher().publish_namespace(ns.clone())?;
    handle.announced().await?;
    let track = session
        .publisher()
        .create_track(FullTrackName::new(ns, "chat")?)?;
    Ok((handle, track))
}
