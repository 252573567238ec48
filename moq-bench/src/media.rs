//! Section 7: media. A 720p30 H.264 + AAC clip (made by Debian's `ffmpeg` at the start of the
//! section, fragmented one frame per fragment), ingested in real time by moq-media's
//! [`publish_fmp4`] (LOC packaging) through a relay process to N subscriber sessions, each
//! reading the broadcast's `video` and `audio` tracks. It measures:
//!
//! - the ingest-to-frame latency: the time from a frame's LOC TIMESTAMP (wall-clock
//!   microseconds: the ingest publishes each frame at that time, see moq-media's docs) to the
//!   moment a subscriber holds the whole frame, demuxed and ready for a decoder (this process
//!   does not decode: a browser's decode adds its own, which the page's player reports);
//! - the relay's CPU time per second of 720p video (+ audio) delivered to N subscribers.
//!
//! Every relay is driven at draft-18 over raw QUIC with the same clients, as in section 2.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use futures::StreamExt;
use moq_client::{FullTrackName, Session, SubscribeOptions, TrackConsumer, TrackNamespace};
use moq_media::loc::LocFrame;
use moq_media::{IngestOptions, publish_fmp4};
use parking_lot::Mutex;

use crate::fanout::VERSION;
use crate::latency::Percentiles;
use crate::relays::{RelayCommand, RelayKind, RelayProcess, app_client};

/// What section 7 runs.
#[derive(Clone, Debug)]
pub struct MediaConfig {
    /// Subscriber counts (one session each, reading video and audio).
    pub counts: Vec<usize>,
    /// The clip's length; the window is what is left after the warm-up and before the end.
    pub clip: Duration,
    /// Published before the window (not counted).
    pub warmup: Duration,
    /// The relays to compare, ours first.
    pub relays: Vec<RelayCommand>,
    /// Where the clip, relay logs and certificates go.
    pub workdir: PathBuf,
}

impl MediaConfig {
    /// The default run: 1 and 100 subscribers, a 14 s clip, 3 s warm-up.
    pub fn full(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        MediaConfig {
            counts: vec![1, 100],
            clip: Duration::from_secs(14),
            warmup: Duration::from_secs(3),
            relays,
            workdir,
        }
    }

    /// A smoke run: 1 and 10 subscribers, a 6 s clip.
    pub fn quick(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        MediaConfig {
            counts: vec![1, 10],
            clip: Duration::from_secs(6),
            warmup: Duration::from_secs(2),
            ..Self::full(relays, workdir)
        }
    }
}

/// One relay at one N.
#[derive(Clone, Debug)]
pub struct MediaMeasurement {
    /// Video frames the ingest published in the window.
    pub published: u64,
    /// Video frames delivered in the window, over all subscribers.
    pub delivered: u64,
    /// Ingest-to-frame latency of the video frames in the window.
    pub latency: Percentiles,
    /// Video frames delivered without the TIMESTAMP the ingest wrote (missing, or more than a
    /// minute from the clock: changed on the way); not in `latency`.
    pub unreadable: u64,
    /// The window's wall time (seconds of video published in it).
    pub window: Duration,
    /// Relay CPU seconds over the window.
    pub relay_cpu_seconds: f64,
    /// Bytes of video and audio payload delivered per subscriber per second.
    pub bytes_per_second: f64,
}

impl MediaMeasurement {
    /// Relay CPU milliseconds per second of video delivered to all N subscribers.
    pub fn cpu_ms_per_video_second(&self) -> f64 {
        self.relay_cpu_seconds * 1e3 / self.window.as_secs_f64().max(1e-9)
    }
}

/// One cell of the table.
#[derive(Clone, Debug)]
pub struct MediaCase {
    /// Which relay.
    pub kind: RelayKind,
    /// N.
    pub subscribers: usize,
    /// The measurement, or why there is none.
    pub outcome: Result<MediaMeasurement, String>,
}

/// The result of section 7.
#[derive(Clone, Debug)]
pub struct MediaReport {
    /// The configuration it ran with.
    pub config: MediaConfig,
    /// The clip, as ffprobe would name it.
    pub clip: String,
    /// Every cell.
    pub cases: Vec<MediaCase>,
    /// Relays that were not run, and why.
    pub skipped: Vec<String>,
}

impl MediaReport {
    /// The section as text.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "{}; ingested in real time by moq_media::publish_fmp4 (LOC), {:.0} s window after \
             {:.0} s warm-up; draft-18 over raw QUIC, one subscriber session per N reading \
             video + audio; latency = LOC TIMESTAMP (when the ingest published the frame) to \
             the whole frame at a subscriber; relay CPU = utime+stime of /proc/<pid>/stat\n",
            self.clip,
            (c.clip.saturating_sub(c.warmup + Duration::from_secs(1))).as_secs_f64(),
            c.warmup.as_secs_f64(),
        );
        for r in &c.relays {
            out.push_str(&format!("  {}\n", r.describe()));
        }
        for s in &self.skipped {
            out.push_str(&format!("  skipped: {s}\n"));
        }
        out.push_str(&format!(
            "  {:<11} {:>5} {:>9} {:>9} {:>9} {:>9} {:>16} {:>9}\n",
            "relay", "N", "delivered", "p50 ms", "p99 ms", "max ms", "CPU ms/video s", "kB/s/sub"
        ));
        for case in &self.cases {
            match &case.outcome {
                Ok(m) if m.unreadable > 0 && m.unreadable == m.delivered => out.push_str(&format!(
                    "  {:<11} {:>5} {:>8.1}% {:>29} {:>16.1} {:>9.0}  (every TIMESTAMP changed on the way)\n",
                    case.kind.label(),
                    case.subscribers,
                    100.0 * m.delivered as f64
                        / (m.published as f64 * case.subscribers as f64).max(1.0),
                    "n/a",
                    m.cpu_ms_per_video_second(),
                    m.bytes_per_second / 1e3,
                )),
                Ok(m) => out.push_str(&format!(
                    "  {:<11} {:>5} {:>8.1}% {:>9.2} {:>9.2} {:>9.2} {:>16.1} {:>9.0}\n",
                    case.kind.label(),
                    case.subscribers,
                    100.0 * m.delivered as f64
                        / (m.published as f64 * case.subscribers as f64).max(1.0),
                    m.latency.p50_ms,
                    m.latency.p99_ms,
                    m.latency.max_ms,
                    m.cpu_ms_per_video_second(),
                    m.bytes_per_second / 1e3,
                )),
                Err(e) => out.push_str(&format!(
                    "  {:<11} {:>5} n/a ({e})\n",
                    case.kind.label(),
                    case.subscribers
                )),
            }
        }
        let ours = |n| {
            self.cases
                .iter()
                .find(|x| x.kind == RelayKind::Ours && x.subscribers == n)
                .and_then(|x| x.outcome.as_ref().ok())
        };
        for case in self.cases.iter().filter(|x| x.kind != RelayKind::Ours) {
            if let (Some(a), Ok(b)) = (ours(case.subscribers), &case.outcome) {
                if b.unreadable == b.delivered {
                    out.push_str(&format!(
                        "    ours / {:<11} N={:<4} CPU per video second {:>5.2}x  (no latency: TIMESTAMPs changed)\n",
                        case.kind.label(),
                        case.subscribers,
                        a.cpu_ms_per_video_second() / b.cpu_ms_per_video_second(),
                    ));
                    continue;
                }
                out.push_str(&format!(
                    "    ours / {:<11} N={:<4} CPU per video second {:>5.2}x  p50 {:>5.2}x  p99 {:>5.2}x\n",
                    case.kind.label(),
                    case.subscribers,
                    a.cpu_ms_per_video_second() / b.cpu_ms_per_video_second(),
                    a.latency.p50_ms / b.latency.p50_ms,
                    a.latency.p99_ms / b.latency.p99_ms,
                ));
            }
        }
        out
    }
}

/// Runs section 7 against every relay in `cfg`.
pub async fn run(cfg: &MediaConfig, skipped: Vec<String>) -> Result<MediaReport> {
    let clip = make_clip(&cfg.workdir, cfg.clip).await?;
    let mut cases = Vec::new();
    for cmd in &cfg.relays {
        for &n in &cfg.counts {
            let outcome = match RelayProcess::start(cmd, &cfg.workdir).await {
                Ok(mut relay) => {
                    let r = tokio::time::timeout(
                        cfg.clip + Duration::from_secs(60),
                        measure(cfg, &clip, &relay, n),
                    )
                    .await
                    .unwrap_or_else(|_| Err(anyhow!("timed out")));
                    if !relay.is_running() {
                        Err(format!("the relay exited: {}", relay.log_tail()))
                    } else {
                        r.map_err(|e| format!("{e:#}"))
                    }
                }
                Err(e) => Err(format!("{e:#}")),
            };
            cases.push(MediaCase {
                kind: cmd.kind,
                subscribers: n,
                outcome,
            });
        }
    }
    Ok(MediaReport {
        config: cfg.clone(),
        clip: format!(
            "1280x720 30 fps H.264 (libx264 veryfast, zerolatency, GOP 1 s) + AAC 48 kHz, {:.0} s",
            cfg.clip.as_secs_f64()
        ),
        cases,
        skipped,
    })
}

/// Encodes the clip once (fragmented MP4, a fragment per frame) with Debian's ffmpeg.
async fn make_clip(workdir: &Path, length: Duration) -> Result<PathBuf> {
    let path = workdir.join("clip-720p30.mp4");
    let secs = format!("{}", length.as_secs());
    let out = tokio::process::Command::new("ffmpeg")
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args(["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30"])
        .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"])
        .args(["-t", &secs, "-c:v", "libx264", "-preset", "veryfast"])
        .args(["-tune", "zerolatency", "-g", "30", "-pix_fmt", "yuv420p"])
        .args(["-b:v", "2500k", "-c:a", "aac", "-b:a", "128k", "-f", "mp4"])
        .args([
            "-movflags",
            "cmaf+separate_moof+delay_moov+skip_trailer+frag_every_frame",
        ])
        .arg(&path)
        .output()
        .await
        .context("running ffmpeg (install Debian's ffmpeg: scripts/install-media.sh)")?;
    if !out.status.success() {
        bail!(
            "ffmpeg failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(path)
}

/// What the subscribers share.
#[derive(Default)]
struct Tally {
    /// Set while the window is open.
    measuring: AtomicBool,
    delivered: AtomicU64,
    bytes: AtomicU64,
    /// Video frames without a TIMESTAMP near the clock.
    unreadable: AtomicU64,
    latencies: Mutex<Vec<u32>>,
}

impl Tally {
    fn record(&self, frame: &LocFrame, video: bool) {
        if !self.measuring.load(Ordering::Relaxed) {
            return;
        }
        self.bytes
            .fetch_add(frame.payload.len() as u64, Ordering::Relaxed);
        if !video {
            return;
        }
        self.delivered.fetch_add(1, Ordering::Relaxed);
        let now = now_us();
        match frame.properties.timestamp_us() {
            // A TIMESTAMP more than a minute away from the clock is not the one the ingest
            // wrote: a relay changed it (moq-dev's relay does, see docs/benchmarks.md).
            Some(ts) if now.abs_diff(ts) < 60_000_000 => {
                let micros = now.saturating_sub(ts);
                self.latencies
                    .lock()
                    .push(u32::try_from(micros).unwrap_or(u32::MAX));
            }
            _ => {
                self.unreadable.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

async fn measure(
    cfg: &MediaConfig,
    clip: &Path,
    relay: &RelayProcess,
    n: usize,
) -> Result<MediaMeasurement> {
    let url = relay.url();
    let namespace = TrackNamespace::from_strs(["bench", "media"])?;

    // The publisher: the clip, paced by its timestamps.
    let client = app_client(&[VERSION])?;
    let publisher = client.connect(&url).await.context("publisher connect")?;
    let input = tokio::fs::File::open(clip).await?;
    let ingest = {
        let publisher = publisher.clone();
        let namespace = namespace.clone();
        tokio::spawn(async move {
            publish_fmp4(
                publisher.publisher(),
                namespace,
                input,
                IngestOptions::default().realtime(true),
            )
            .await
        })
    };
    let _abort = AbortOnDrop(ingest.abort_handle());
    let started = Instant::now();

    // N subscriber sessions, 50 to a UDP socket, each subscribing to video and audio (retried
    // until the ingest has created the tracks).
    let clients = (0..n.div_ceil(50))
        .map(|_| app_client(&[VERSION]))
        .collect::<Result<Vec<_>>>()?;
    let sessions: Vec<Session> = futures::stream::iter(0..n)
        .map(|i| {
            let url = url.clone();
            let client = clients.get(i / 50).cloned();
            async move {
                let client = client.context("no client")?;
                client
                    .connect(&url)
                    .await
                    .map_err(|e| anyhow!("subscriber connect: {e}"))
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_>>()?;
    let tally = Arc::new(Tally::default());
    let mut readers = tokio::task::JoinSet::new();
    for session in &sessions {
        for (track, video) in [("video", true), ("audio", false)] {
            let name = FullTrackName::new(namespace.clone(), track)?;
            let consumer = subscribe(session, name).await?;
            readers.spawn(read(consumer, tally.clone(), video));
        }
    }
    let subscribed = started.elapsed();
    if subscribed + cfg.warmup + Duration::from_secs(2) > cfg.clip {
        bail!(
            "subscribing took {:.1} s of a {:.0} s clip",
            subscribed.as_secs_f64(),
            cfg.clip.as_secs_f64()
        );
    }

    // The window: from the warm-up's end to a second before the clip's.
    tokio::time::sleep(cfg.warmup.saturating_sub(subscribed)).await;
    let end = started + cfg.clip - Duration::from_secs(1);
    let cpu0 = relay.cpu_seconds()?;
    let t0 = Instant::now();
    tally.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep_until(end.into()).await;
    tally.measuring.store(false, Ordering::Relaxed);
    let window = t0.elapsed();
    let cpu = relay.cpu_seconds()? - cpu0;

    // 30 frames a second of video were published in the window.
    let published = (window.as_secs_f64() * 30.0).round() as u64;
    let latencies = std::mem::take(&mut *tally.latencies.lock());
    let bytes = tally.bytes.load(Ordering::Relaxed) as f64;
    readers.abort_all();
    for s in &sessions {
        s.close();
    }
    publisher.close();
    Ok(MediaMeasurement {
        published,
        delivered: tally.delivered.load(Ordering::Relaxed),
        latency: Percentiles::of(latencies),
        unreadable: tally.unreadable.load(Ordering::Relaxed),
        window,
        relay_cpu_seconds: cpu,
        bytes_per_second: bytes / n.max(1) as f64 / window.as_secs_f64().max(1e-9),
    })
}

/// Subscribes, retrying while the track does not exist yet (for up to 10 s).
async fn subscribe(session: &Session, name: FullTrackName) -> Result<TrackConsumer> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let attempt = tokio::time::timeout(
            Duration::from_secs(5),
            session
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default()),
        )
        .await;
        match attempt {
            Ok(Ok(consumer)) => return Ok(consumer),
            Ok(Err(e)) if Instant::now() < deadline => {
                tracing::debug!("subscribe {name}: {e}; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(Err(e)) => return Err(anyhow!("subscribe {name}: {e}")),
            Err(_) => return Err(anyhow!("subscribe {name}: no answer in 5 s")),
        }
    }
}

async fn read(mut consumer: TrackConsumer, tally: Arc<Tally>, video: bool) {
    while let Some(Ok(mut group)) = consumer.next_group().await {
        while let Some(Ok(object)) = group.next_object().await {
            tally.record(&LocFrame::from_object(&object), video);
        }
    }
}

/// Aborts the ingest task when the measurement ends, however it ends.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
