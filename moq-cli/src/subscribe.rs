//! `moq subscribe <namespace> [track]`: a broadcast as fragmented MP4, or a track's objects one
//! per line, on stdout.

use anyhow::{Context, bail};
use moq_client::cli::Connection;
use moq_client::{
    FullTrackName, JoinFrom, NamespaceEvent, SubscribeOptions, Subscriber, TrackNamespace,
};
use moq_media::{EgressOptions, EgressStats, Start};
use tokio::io::AsyncWriteExt;

/// Write a broadcast or a track to stdout.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The broadcast's namespace, as slash-separated fields (e.g. live/demo).
    namespace: TrackNamespace,
    /// fmp4: the one track to write (default: the catalog's first video and first audio
    /// track); lines: the track to print (default `lines`).
    track: Option<String>,
    /// What to write: the broadcast as fragmented MP4 (its MSF catalog says which tracks), or
    /// a track's objects, one per line. Default: lines when a track is named, else fmp4.
    #[arg(long, value_enum)]
    format: Option<Format>,
    /// Where to start: the current group, or the oldest one the publisher or relay still
    /// holds. Default: fmp4 current (a live viewer starts at the latest keyframe), lines
    /// oldest (every line still held).
    #[arg(long, value_enum)]
    from: Option<From>,
    /// fmp4: leave video out.
    #[arg(long)]
    no_video: bool,
    /// fmp4: leave audio out.
    #[arg(long)]
    no_audio: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// Fragmented MP4.
    Fmp4,
    /// Each object's payload, then a newline.
    Lines,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum From {
    /// The start of the current group.
    Current,
    /// The oldest group still held.
    Oldest,
}

/// Waits for the namespace, then writes until the broadcast (or track) ends or Ctrl-C.
pub(crate) async fn run(connection: Connection, args: Args) -> anyhow::Result<()> {
    let subscriber = connection.subscriber().clone();
    let work = async move {
        wait_for(&subscriber, &args.namespace).await?;
        let format = args.format.unwrap_or(match args.track {
            Some(_) => Format::Lines,
            None => Format::Fmp4,
        });
        match format {
            Format::Fmp4 => fmp4(&subscriber, &args).await,
            Format::Lines => lines(&subscriber, &args).await,
        }
    };
    connection.run(work).await.unwrap_or(Ok(()))
}

/// Resolves once `ns` (or a namespace under it) is published.
async fn wait_for(subscriber: &Subscriber, ns: &TrackNamespace) -> anyhow::Result<()> {
    let mut events = subscriber
        .subscribe_namespace(ns.clone())
        .await
        .with_context(|| format!("SUBSCRIBE_NAMESPACE {ns} refused"))?;
    eprintln!("waiting for {ns}");
    loop {
        match events.next().await {
            Some(Ok(NamespaceEvent::Added(_))) => return Ok(()),
            Some(Ok(NamespaceEvent::Removed(_))) => {}
            Some(Err(e)) => bail!("waiting for {ns}: {e}"),
            None => bail!("waiting for {ns}: discovery ended"),
        }
    }
}

async fn fmp4(subscriber: &Subscriber, args: &Args) -> anyhow::Result<()> {
    let mut options = EgressOptions::default().start(match args.from {
        Some(From::Current) | None => Start::CurrentGroup,
        Some(From::Oldest) => Start::Oldest,
    });
    if let Some(t) = &args.track {
        options = options.tracks([t.clone()]);
    }
    if args.no_video {
        options = options.no_video();
    }
    if args.no_audio {
        options = options.no_audio();
    }
    eprintln!("writing {} to stdout as fMP4", args.namespace);
    let mut stdout = tokio::io::stdout();
    let stats = moq_media::subscribe_fmp4(subscriber, args.namespace.clone(), &mut stdout, options)
        .await
        .with_context(|| format!("subscribing to {}", args.namespace))?;
    stdout.flush().await.context("writing stdout")?;
    eprintln!("the broadcast ended; {}", summary(&stats));
    Ok(())
}

/// `N bytes written; video: F frames in G groups, ...`.
fn summary(stats: &EgressStats) -> String {
    let tracks: Vec<String> = stats
        .tracks
        .iter()
        .map(|t| format!("{}: {} frames in {} groups", t.name, t.frames, t.groups))
        .collect();
    format!(
        "{} bytes written; {}",
        stats.output_bytes,
        tracks.join(", ")
    )
}

async fn lines(subscriber: &Subscriber, args: &Args) -> anyhow::Result<()> {
    let track = args.track.clone().unwrap_or_else(|| "lines".to_string());
    let name = FullTrackName::new(args.namespace.clone(), track)?;
    let from = match args.from {
        Some(From::Current) => JoinFrom::CurrentGroup,
        Some(From::Oldest) | None => JoinFrom::Oldest,
    };
    let mut objects = subscriber
        .join(name.clone(), SubscribeOptions::default(), from)
        .await
        .with_context(|| format!("subscribing to {name}"))?;
    eprintln!("subscribed to {name}");
    let mut stdout = tokio::io::stdout();
    let mut received = 0u64;
    while let Some(object) = objects.next().await {
        let object = object.with_context(|| format!("reading {name}"))?;
        stdout
            .write_all(&object.payload)
            .await
            .context("writing stdout")?;
        stdout.write_all(b"\n").await.context("writing stdout")?;
        stdout.flush().await.context("writing stdout")?;
        received += 1;
    }
    eprintln!("the track ended after {received} objects");
    Ok(())
}
