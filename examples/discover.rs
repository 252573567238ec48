//! Discovers namespaces: connects to a relay (or any MOQT server), sends SUBSCRIBE_NAMESPACE for
//! `--prefix`, and prints each namespace as it appears (`+`) and goes away (`-`). Exits 0 on
//! Ctrl-C or after `--count` events.
//!
//! The client stays connected: when the relay restarts it prints the status, every namespace
//! goes away (`-`) with the lost session, and comes back (`+`) once discovery is renewed on
//! the next one.
//!
//! ```text
//! # Everything under demo/ on a local relay:
//! cargo run --example discover -- --url moqt://localhost:4443 --fingerprint <HEX> --prefix demo
//! # Every namespace, over WebTransport with draft-18, until the first two events:
//! cargo run --example discover -- --url https://localhost:4443 --insecure --draft 18 --count 2
//! ```

use anyhow::{Context, bail};
use clap::Parser;
use moq_client::cli;
use moq_client::{NamespaceEvent, Subscriber, TrackNamespace};

/// Discover namespaces under a prefix.
#[derive(Parser, Debug)]
struct Args {
    #[command(flatten)]
    connect: cli::ClientOptions,
    /// The prefix, as slash-separated fields; empty (the default) means every namespace.
    #[arg(long, alias = "namespace", default_value = "")]
    prefix: TrackNamespace,
    /// Exit after this many events.
    #[arg(long)]
    count: Option<u64>,
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
    let prefix = args.prefix.clone();
    let mut events = subscriber
        .subscribe_namespace(prefix.clone())
        .await
        .context("SUBSCRIBE_NAMESPACE refused")?;
    println!("watching namespaces under {:?}", prefix.to_string());
    let mut seen = 0u64;
    while args.count.is_none_or(|n| seen < n) {
        match events.next().await {
            Some(Ok(NamespaceEvent::Added(ns))) => println!("+ {ns}"),
            Some(Ok(NamespaceEvent::Removed(ns))) => println!("- {ns}"),
            Some(Err(e)) => bail!("discovery failed: {e}"),
            None => bail!("discovery ended"),
        }
        seen += 1;
    }
    Ok(())
}
