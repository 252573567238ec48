//! `moq publish <namespace>`: a broadcast read from stdin.

use std::time::Duration;

use anyhow::Context;
use moq_client::cli::{Connection, parse_duration};
use moq_client::{FullTrackName, GroupProducer, Publisher, TrackNamespace};
use moq_media::{IngestOptions, IngestStats, Packaging};
use tokio::io::AsyncBufReadExt;

/// Publish a broadcast read from stdin.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The broadcast's namespace, as slash-separated fields (e.g. live/demo).
    namespace: TrackNamespace,
    /// What stdin carries: fragmented MP4 (`ffmpeg ... -f mp4 -movflags
    /// cmaf+separate_moof+delay_moov+skip_trailer -`), published as an MSF catalog and one
    /// track per media track; or lines of text, each line one object of one track.
    #[arg(long, value_enum, default_value_t = Format::Fmp4)]
    format: Format,
    /// fmp4: how frames are packaged on the tracks: LOC (a frame per object) or CMAF (a
    /// fragment per object).
    #[arg(long, value_enum, default_value_t = PackagingArg::Loc)]
    packaging: PackagingArg,
    /// fmp4: publish no faster than real time, by the samples' timestamps (for a file; ffmpeg
    /// -re does the same).
    #[arg(long)]
    realtime: bool,
    /// lines: the track's name.
    #[arg(long, default_value = "lines")]
    track: String,
    /// lines: lines per group (a group is finished after this many).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    group_size: u64,
    /// At the end of the input, how long to wait for subscribers to receive everything.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    linger: Duration,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// Fragmented MP4 / CMAF.
    Fmp4,
    /// Lines of text, one object each.
    Lines,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum PackagingArg {
    /// LOC: one frame per object.
    Loc,
    /// CMAF: one fragment (moof+mdat) per object.
    Cmaf,
}

/// Publishes stdin until its end (or Ctrl-C).
pub(crate) async fn run(connection: Connection, args: Args) -> anyhow::Result<()> {
    let publisher = connection.publisher().clone();
    let work = async move {
        match args.format {
            Format::Fmp4 => fmp4(&publisher, &args).await,
            Format::Lines => lines(&publisher, &args).await,
        }
    };
    connection.run(work).await.unwrap_or(Ok(()))
}

async fn fmp4(publisher: &Publisher, args: &Args) -> anyhow::Result<()> {
    let packaging = match args.packaging {
        PackagingArg::Loc => Packaging::Loc,
        PackagingArg::Cmaf => Packaging::Cmaf,
    };
    let options = IngestOptions::default()
        .packaging(packaging)
        .realtime(args.realtime)
        .finish_timeout(args.linger);
    eprintln!(
        "publishing {} from stdin (fMP4, {})",
        args.namespace,
        packaging.as_str()
    );
    let stats = moq_media::publish_fmp4(
        publisher,
        args.namespace.clone(),
        tokio::io::stdin(),
        options,
    )
    .await
    .context("publishing fMP4 from stdin")?;
    eprintln!("published {}", summary(&stats));
    Ok(())
}

/// `N bytes read; video: F frames in G groups, ...`.
fn summary(stats: &IngestStats) -> String {
    let tracks: Vec<String> = stats
        .tracks
        .iter()
        .map(|t| format!("{}: {} frames in {} groups", t.name, t.frames, t.groups))
        .collect();
    format!("{} bytes read; {}", stats.input_bytes, tracks.join(", "))
}

async fn lines(publisher: &Publisher, args: &Args) -> anyhow::Result<()> {
    let ns = args.namespace.clone();
    let announced = publisher.publish_namespace(ns.clone())?;
    let track = publisher.create_track(FullTrackName::new(ns.clone(), args.track.clone())?)?;
    let accepted = announced.announced();
    tokio::pin!(accepted);
    let mut waiting = true;
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    // Kept across iterations: a read interrupted by the announcement's answer has appended
    // what it read so far, and the next read continues the line.
    let mut line = Vec::new();
    let mut group: Option<GroupProducer> = None;
    let mut published = 0u64;
    loop {
        tokio::select! {
            r = &mut accepted, if waiting => {
                r.with_context(|| format!("PUBLISH_NAMESPACE {ns} refused"))?;
                eprintln!("published namespace {ns}, track {:?}", args.track);
                waiting = false;
            }
            n = stdin.read_until(b'\n', &mut line) => {
                if n.context("reading stdin")? == 0 {
                    break;
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                let g = match group.as_mut() {
                    Some(g) => g,
                    None => group.insert(track.append_group()?),
                };
                let object = g.write(std::mem::take(&mut line))?;
                published += 1;
                if object + 1 >= args.group_size
                    && let Some(g) = group.take()
                {
                    g.finish()?;
                }
            }
        }
    }
    if let Some(g) = group.take() {
        g.finish()?;
    }
    // The end of the track, delivered to the subscribers, before the namespace goes.
    if let Err(e) = track.finish(args.linger).await {
        eprintln!("the end of the track was not acknowledged by every subscriber: {e}");
    }
    // The namespace is withdrawn as `announced` drops.
    eprintln!("published {published} lines");
    Ok(())
}
