//! Discovers namespaces: connects to a relay (or any MOQT server), sends SUBSCRIBE_NAMESPACE for
//! `--prefix`, and prints each namespace as it appears (`+`) and goes away (`-`). Exits 0 on
//! Ctrl-C or after `--count` events.
//!
//! ```text
//! # Everything under demo/ on a local relay:
//! cargo run --example discover -- --url moqt://localhost:4443 --fingerprint <HEX> --prefix demo
//! # Every namespace, over WebTransport with draft-18, until the first two events:
//! cargo run --example discover -- --url https://localhost:4443 --insecure --draft 18 --count 2
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;
use moq_client::{Client, NamespaceEvent, Session, TrackNamespace, Version};

/// Discover namespaces under a prefix.
#[derive(Parser, Debug)]
struct Args {
    /// The server: `moqt://host:port` (raw QUIC) or `https://host:port` (WebTransport).
    #[arg(long, default_value = "moqt://localhost:4443")]
    url: String,
    /// Trust the server whose certificate has this SHA-256 fingerprint (hex).
    #[arg(long)]
    fingerprint: Option<String>,
    /// Trust any certificate (development only).
    #[arg(long)]
    insecure: bool,
    /// The prefix, as slash-separated fields; empty (the default) means every namespace.
    #[arg(long, alias = "namespace", default_value = "")]
    prefix: String,
    /// Offer only this draft (18 or 19); default: both, 19 preferred.
    #[arg(long, value_parser = parse_draft)]
    draft: Option<Version>,
    /// Exit after this many events.
    #[arg(long)]
    count: Option<u64>,
}

fn parse_draft(s: &str) -> Result<Version, String> {
    match s {
        "18" => Ok(Version::Draft18),
        "19" => Ok(Version::Draft19),
        _ => Err(format!("unsupported draft {s:?} (18 or 19)")),
    }
}

/// `a/b/c` as a namespace of three fields; `` as the empty prefix.
fn parse_namespace(s: &str) -> anyhow::Result<TrackNamespace> {
    let fields = s.split('/').filter(|f| !f.is_empty());
    TrackNamespace::from_strs(fields).with_context(|| format!("bad namespace {s:?}"))
}

/// A namespace as slash-separated fields.
fn slashed(ns: &TrackNamespace) -> String {
    let fields: Vec<_> = ns
        .fields()
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    fields.join("/")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();

    let mut builder = Client::builder();
    if let Some(fp) = &args.fingerprint {
        builder = builder.fingerprint(fp)?;
    }
    if args.insecure {
        builder = builder.insecure();
    }
    if let Some(v) = args.draft {
        builder = builder.versions(vec![v]);
    }
    let client = builder.build()?;
    let session = tokio::select! {
        s = client.connect(&args.url) => s.with_context(|| format!("connecting to {}", args.url))?,
        _ = tokio::signal::ctrl_c() => return Ok(()),
    };
    println!("connected to {} ({})", args.url, session.version());

    let result = tokio::select! {
        r = run(&session, &args) => r,
        _ = tokio::signal::ctrl_c() => Ok(()),
    };
    close(&session).await;
    result
}

async fn run(session: &Session, args: &Args) -> anyhow::Result<()> {
    let prefix = parse_namespace(&args.prefix)?;
    let mut events = session
        .subscriber()
        .subscribe_namespace(prefix.clone())
        .await
        .context("SUBSCRIBE_NAMESPACE refused")?;
    println!("watching namespaces under {:?}", slashed(&prefix));
    let mut seen = 0u64;
    while args.count.is_none_or(|n| seen < n) {
        match events.next().await {
            Some(Ok(NamespaceEvent::Added(ns))) => println!("+ {}", slashed(&ns)),
            Some(Ok(NamespaceEvent::Removed(ns))) => println!("- {}", slashed(&ns)),
            Some(Err(e)) => bail!("discovery failed: {e}"),
            None => bail!("discovery ended"),
        }
        seen += 1;
    }
    Ok(())
}

/// Closes the session and gives the CONNECTION_CLOSE a moment to leave before the process
/// exits (the client endpoint offers nothing to await for that), so the server does not wait
/// for an idle timeout.
async fn close(session: &Session) {
    session.close();
    session.closed().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
}
