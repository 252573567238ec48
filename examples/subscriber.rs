//! Subscribes to one track and prints its objects: connects to a relay (or any MOQT server),
//! sends SUBSCRIBE for `--namespace` + `--track`, and prints each object as it arrives. Exits 0
//! on Ctrl-C, when the publisher ends the track, or after `--count` objects.
//!
//! The client stays connected: when the relay restarts (or the connection drops) it prints
//! the status, reconnects with backoff and renews the subscription after the last group it
//! received, so the objects continue. A relay that comes back before the publisher refuses
//! the renewal (DOES_NOT_EXIST) for a while: it is retried for up to 30 s
//! (`SubscribeOptions::retry`) before the program gives up.
//!
//! ```text
//! # The clock of the publisher example, from now on:
//! cargo run --example subscriber -- --url moqt://localhost:4443 --fingerprint <HEX> \
//!     --namespace demo/clock --track clock
//! # Waiting up to 10 s for the publisher to appear, 3 objects:
//! cargo run --example subscriber -- --url https://localhost:4443 --insecure \
//!     --namespace demo/clock --track clock --rendezvous 10 --count 3
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use moq_client::cli;
use moq_client::{
    FullTrackName, Location, SubscribeOptions, Subscriber, TrackConsumer, TrackNamespace,
};

/// Subscribe to a track and print its objects.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    connect: cli::ClientOptions,
    /// The track's namespace, as slash-separated fields.
    #[arg(long, default_value = "demo/clock")]
    namespace: TrackNamespace,
    /// The track's name.
    #[arg(long, default_value = "clock")]
    track: String,
    /// Exit after this many objects.
    #[arg(long)]
    count: Option<u64>,
    /// Start at this group (AbsoluteStart); default: from now on. A SUBSCRIBE delivers only
    /// what is published after it is answered (draft-19 §10.7), so a group before that is not
    /// brought back: that is FETCH's (`Subscriber::join` does both).
    #[arg(long)]
    from: Option<u64>,
    /// Let the server hold the SUBSCRIBE this many seconds for the track to appear
    /// (RENDEZVOUS_TIMEOUT). "From now on" counts from when the subscription was answered.
    #[arg(long)]
    rendezvous: Option<u64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    cli::init_logging("warn");
    let connection = args.connect.reconnecting().await?;
    let subscriber = connection.subscriber().clone();
    // Until done or Ctrl-C, printing the connection's status on stderr.
    connection
        .run(run(&subscriber, &args))
        .await
        .unwrap_or(Ok(()))
}

async fn run(subscriber: &Subscriber, args: &Args) -> anyhow::Result<()> {
    let name = FullTrackName::new(args.namespace.clone(), args.track.clone())?;
    let mut options = SubscribeOptions::default();
    if let Some(g) = args.from {
        options = options.start_at(Location::new(g, 0));
    }
    if let Some(s) = args.rendezvous {
        options = options.rendezvous(Duration::from_secs(s));
    }
    // Waits for the first connection; renewed on every reconnection after that.
    let mut stream = subscriber
        .subscribe(name, options)
        .await
        .context("SUBSCRIBE refused")?;
    match stream.info().and_then(|i| i.largest) {
        Some(l) => println!(
            "subscribed to {:?}; largest so far: group {} object {}",
            args.track, l.group, l.object
        ),
        None => println!("subscribed to {:?}; nothing published yet", args.track),
    }
    let received = print_objects(&mut stream, args.count).await?;
    println!("received {received} objects; bye");
    Ok(())
}

/// Prints objects until the track ends or `count` were printed; returns how many.
async fn print_objects(stream: &mut TrackConsumer, count: Option<u64>) -> anyhow::Result<u64> {
    let mut received = 0;
    while let Some(group) = stream.next_group().await {
        let mut group = group.context("subscription failed")?;
        while let Some(object) = group.next_object().await {
            let object = match object {
                Ok(o) => o,
                // A group abandoned by the publisher (or dropped for being too far behind).
                Err(e) => {
                    println!("group {} cut short: {e}", group.id());
                    break;
                }
            };
            println!(
                "group {} object {}: {}",
                object.location.group,
                object.location.object,
                String::from_utf8_lossy(&object.payload)
            );
            received += 1;
            if count.is_some_and(|n| received >= n) {
                return Ok(received);
            }
        }
    }
    if count.is_some_and(|n| received < n) {
        bail!("the track ended after {received} objects");
    }
    println!("the track ended");
    Ok(received)
}
