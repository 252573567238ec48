//! Publishes a clock: connects to a relay (or any MOQT server), announces a namespace with
//! PUBLISH_NAMESPACE, and writes a track (default "clock"): by default one group per second,
//! each holding one object, the current UTC time (`--group-size` and `--interval-ms` change
//! that). Prints what it publishes. Ctrl-C (or `--count` objects) ends the track and exits 0.
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

use anyhow::{Context, bail};
use clap::Parser;
use moq_client::{Client, FullTrackName, Session, TrackNamespace, Version};

/// Publish a clock track.
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
    /// The namespace to publish, as slash-separated fields.
    #[arg(long, default_value = "demo/clock")]
    namespace: String,
    /// The track's name.
    #[arg(long, default_value = "clock")]
    track: String,
    /// Offer only this draft (18 or 19); default: both, 19 preferred.
    #[arg(long, value_parser = parse_draft)]
    draft: Option<Version>,
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

fn parse_draft(s: &str) -> Result<Version, String> {
    match s {
        "18" => Ok(Version::Draft18),
        "19" => Ok(Version::Draft19),
        _ => Err(format!("unsupported draft {s:?} (18 or 19)")),
    }
}

/// `a/b/c` as a namespace of three fields.
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

    // Create the track before announcing its namespace: a relay may subscribe as soon as the
    // namespace is announced, and a track that does not exist yet is DOES_NOT_EXIST.
    let ns = parse_namespace(&args.namespace)?;
    let track = session
        .publisher()
        .create_track(FullTrackName::new(ns.clone(), args.track.clone())?)?;
    let announced = session.publisher().publish_namespace(ns.clone())?;
    tokio::select! {
        r = announced.announced() => r.context("PUBLISH_NAMESPACE refused")?,
        _ = tokio::signal::ctrl_c() => return Ok(()),
    }
    println!("published namespace {}", slashed(&ns));
    println!(
        "publishing track {:?}: an object every {} ms, {} per group",
        args.track, args.interval_ms, args.group_size
    );

    let mut tick = tokio::time::interval(Duration::from_millis(args.interval_ms));
    let mut published = 0u64;
    let mut open: Option<moq_client::GroupWriter> = None;
    while args.count.is_none_or(|n| published < n) {
        tokio::select! {
            _ = tick.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
            e = session.closed() => bail!("session ended: {e}"),
        }
        let group = match open.as_mut() {
            Some(g) => g,
            None => open.insert(track.append_group()?),
        };
        let text = now_utc();
        let object = group.write(text.clone());
        println!("group {} object {object}: {text}", group.group_id());
        if object + 1 >= args.group_size
            && let Some(g) = open.take()
        {
            g.finish();
        }
        published += 1;
    }
    if let Some(g) = open.take() {
        g.finish();
    }

    // End the track (subscribers get PUBLISH_DONE) and withdraw the namespace, then give the
    // last objects a moment to leave before the connection closes.
    drop(track);
    drop(announced);
    tokio::time::sleep(Duration::from_millis(300)).await;
    close(&session).await;
    println!("published {published} objects; bye");
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
