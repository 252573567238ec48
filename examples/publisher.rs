//! Publishes a clock: connects to a relay (or any MOQT server), announces a namespace with
//! PUBLISH_NAMESPACE, and writes a track (default "clock"): by default one group per second,
//! each holding one object, the current UTC time (`--group-size` and `--interval-ms` change
//! that). Prints what it publishes. Ctrl-C (or `--count` objects) ends the track and exits 0.
//!
//! The client stays connected: when the relay restarts it prints the status, reconnects with
//! backoff and announces the namespace again, and the clock goes on (what it published while
//! disconnected is served from its cache). Its groups are numbered from the wall clock
//! (`TrackOptions::groups_from_clock`), so a restarted publisher continues above the groups
//! of the one before it, and the relay delivers them to the subscribers it kept.
//!
//! ```text
//! # Against a local relay with a generated certificate (its fingerprint is printed at start):
//! cargo run --example publisher -- --url moqt://localhost:4443 --fingerprint <HEX> \
//!     --namespace demo/clock
//! # Over WebTransport, trusting any certificate (development only), five ticks then exit:
//! cargo run --example publisher -- --url https://localhost:4443 --insecure \
//!     --namespace demo/clock --track clock --count 5
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Parser;
use moq_client::cli;
use moq_client::{FullTrackName, TrackNamespace, TrackOptions};

/// Publish a clock track.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    connect: cli::ClientOptions,
    /// The namespace to publish, as slash-separated fields.
    #[arg(long, default_value = "demo/clock")]
    namespace: TrackNamespace,
    /// The track's name.
    #[arg(long, default_value = "clock")]
    track: String,
    /// Exit after publishing this many objects.
    #[arg(long)]
    count: Option<u64>,
    /// Objects per group (a group is finished after this many).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    group_size: u64,
    /// Milliseconds between objects.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    interval_ms: u64,
}

/// HH:MM:SS UTC.
fn now_utc() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "{:02}:{:02}:{:02} UTC",
        secs / 3600 % 24,
        secs / 60 % 60,
        secs % 60
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    cli::init_logging("warn");
    let mut connection = args.connect.reconnecting().await?;
    // Ctrl-C, for the whole run: one seen between two waits is not lost.
    let mut interrupts = cli::Interrupts::listen();

    // Announce the namespace and create its track, in either order: a SUBSCRIBE that arrives
    // in between waits for the track. Both outlive sessions: the namespace is announced again
    // on every reconnection.
    let ns = args.namespace.clone();
    let publisher = connection.publisher().clone();
    let announced = publisher.publish_namespace(ns.clone())?;
    let track = publisher.create_track_with(
        FullTrackName::new(ns.clone(), args.track.clone())?,
        TrackOptions::default().groups_from_clock(),
    )?;
    tokio::select! {
        r = announced.announced() => r.context("PUBLISH_NAMESPACE refused")?,
        () = cli::print_status(connection.reconnecting()) => return Ok(()),
        () = interrupts.interrupted() => return Ok(()),
    }
    println!("published namespace {ns}");
    println!(
        "publishing track {:?}: an object every {} ms, {} per group",
        args.track, args.interval_ms, args.group_size
    );

    let mut tick = tokio::time::interval(Duration::from_millis(args.interval_ms));
    let mut published = 0u64;
    let mut open: Option<moq_client::GroupProducer> = None;
    while args.count.is_none_or(|n| published < n) {
        tokio::select! {
            _ = tick.tick() => {}
            () = interrupts.interrupted() => break,
            // Cancel safe: no tick is lost while the status is printed.
            Some(status) = connection.reconnecting().next_status() => {
                cli::print(&status);
                continue;
            }
        }
        let group = match open.as_mut() {
            Some(g) => g,
            None => open.insert(track.append_group()?),
        };
        let text = now_utc();
        let object = group.write(text.clone())?;
        println!("group {} object {object}: {text}", group.id());
        if object + 1 >= args.group_size
            && let Some(g) = open.take()
        {
            g.finish()?;
        }
        published += 1;
    }
    if let Some(g) = open.take() {
        g.finish()?;
    }

    // End the track and wait until the subscribers have its last objects and PUBLISH_DONE,
    // then withdraw the namespace and close.
    if let Err(e) = track.finish(Duration::from_secs(2)).await {
        eprintln!("the end of the track was not acknowledged: {e}");
    }
    drop(announced);
    connection.close().await;
    println!("published {published} objects; bye");
    Ok(())
}
