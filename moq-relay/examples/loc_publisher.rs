//! A test publisher for the relay page's player (`moq-relay/web/`): runs Debian's ffmpeg to
//! make H.264 (testsrc, Annex B) and AAC (sine, ADTS) in real time and publishes them as an
//! MSF catalog plus two LOC tracks (`video`, `audio`) under one namespace, the layout of
//! `moq-media` (docs in moq-relay/web/app.js). A stand-in for `moq publish` in
//! `scripts/media-check.sh`, not a general ingest: no B-frames (Annex B carries no
//! presentation times), one fixed clip.
//!
//! ```text
//! cargo run -p moq-relay --example loc_publisher -- --url moqt://localhost:4443 \
//!     --fingerprint <HEX> --namespace live/demo --seconds 10
//! ```
//!
//! `--video-codec hev1.1.6.L93.B0` writes that codec string into the catalog instead of the
//! real one (the player's "cannot decode" case).

use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use base64::Engine;
use clap::Parser;
use moq_client::{Client, FullTrackName, Properties, TrackNamespace, TrackOptions, TrackProducer};
use std::io::Read;
use std::process::{Child, Command};
use tokio::sync::mpsc;

/// Publish a test clip as an MSF catalog and LOC tracks.
#[derive(Parser, Debug)]
struct Args {
    /// The relay: moqt://host:port (raw QUIC) or https://host:port (WebTransport).
    #[arg(long)]
    url: String,
    /// The relay certificate's SHA-256, hex.
    #[arg(long)]
    fingerprint: String,
    /// The broadcast's namespace, slash-separated.
    #[arg(long, default_value = "live/demo")]
    namespace: String,
    /// Seconds of media.
    #[arg(long, default_value_t = 10)]
    seconds: u32,
    /// The codec string the catalog names for the video track (default: the real one).
    #[arg(long)]
    video_codec: Option<String>,
    /// ffmpeg's path.
    #[arg(long, default_value = "/usr/bin/ffmpeg")]
    ffmpeg: String,
}

const WIDTH: u32 = 640;
const HEIGHT: u32 = 360;
const FPS: u64 = 30;
const SAMPLE_RATE: u64 = 48000;
/// LOC property IDs (draft-ietf-moq-loc editor's copy 2026-07-20).
const TIMESTAMP: u64 = 0x10;
const VIDEO_CONFIG: u64 = 0x0D;
const VIDEO_FRAME_MARKING: u64 = 0x09;
const AUDIO_CONFIG: u64 = 0x0F;

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn spawn(ffmpeg: &str, args: &[&str]) -> anyhow::Result<Child> {
    Command::new(ffmpeg)
        .args(["-hide_banner", "-loglevel", "error", "-re"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {ffmpeg}"))
}

/// Reads `child`'s stdout on a thread of its own: chunks, then an empty one at the end.
fn reader(child: &mut Child) -> anyhow::Result<mpsc::UnboundedReceiver<Vec<u8>>> {
    let mut out = child.stdout.take().context("no stdout")?;
    let (tx, rx) = mpsc::unbounded_channel();
    std::thread::spawn(move || {
        let mut chunk = vec![0u8; 65536];
        loop {
            let n = out.read(&mut chunk).unwrap_or(0);
            let bytes = chunk.get(..n).unwrap_or_default().to_vec();
            if tx.send(bytes).is_err() || n == 0 {
                return;
            }
        }
    });
    Ok(rx)
}

/// Splits Annex B bytes into NAL units (start codes removed); the last, possibly incomplete,
/// stays in `buf` unless `end`.
fn take_nals(buf: &mut Vec<u8>, end: bool) -> Vec<Vec<u8>> {
    let mut starts: Vec<(usize, usize)> = Vec::new();
    for (i, w) in buf.windows(3).enumerate() {
        if w == [0, 0, 1] && starts.last().is_none_or(|&(_, from)| i >= from) {
            starts.push((i, i + 3));
        }
    }
    let mut nals = Vec::new();
    for (w, &(_, from)) in starts.iter().enumerate() {
        let to = match starts.get(w + 1) {
            Some(&(next, _)) => next,
            None if end => buf.len(),
            None => break,
        };
        let mut nal = buf.get(from..to).unwrap_or_default().to_vec();
        while nal.last() == Some(&0) {
            nal.pop(); // the leading zero of a 4-byte start code, or trailing zeros
        }
        nals.push(nal);
    }
    let keep = match (end, starts.last()) {
        (false, Some(&(last, _))) => buf.get(last..).unwrap_or_default().to_vec(),
        _ => Vec::new(),
    };
    *buf = keep;
    nals
}

struct Video {
    sps: Option<Vec<u8>>,
    pps: Option<Vec<u8>>,
    frame: Vec<Vec<u8>>,
    keyframe: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let ns: TrackNamespace = args.namespace.parse()?;
    let secs = args.seconds.to_string();
    let mut video_proc = spawn(
        &args.ffmpeg,
        &[
            "-f",
            "lavfi",
            "-i",
            &format!("testsrc=size={WIDTH}x{HEIGHT}:rate={FPS}"),
            "-t",
            &secs,
            "-c:v",
            "libx264",
            "-preset",
            "veryfast",
            "-tune",
            "zerolatency",
            "-profile:v",
            "high",
            "-pix_fmt",
            "yuv420p",
            "-bf",
            "0",
            "-g",
            "30",
            "-x264-params",
            "aud=1",
            "-f",
            "h264",
            "-",
        ],
    )?;
    let mut audio_proc = spawn(
        &args.ffmpeg,
        &[
            "-f",
            "lavfi",
            "-i",
            &format!("sine=frequency=440:sample_rate={SAMPLE_RATE}"),
            "-t",
            &secs,
            "-ac",
            "2",
            "-c:a",
            "aac",
            "-b:a",
            "128k",
            "-f",
            "adts",
            "-",
        ],
    )?;
    // Media time 0 is the wall clock when the first bytes come out of ffmpeg (its start-up is
    // not latency), the same anchor for both tracks.
    let mut anchor: Option<u64> = None;

    let client = Client::builder().fingerprint(&args.fingerprint)?.build()?;
    let session = client.connect(&args.url).await?;
    let publisher = session.publisher().clone();
    let _announced = publisher.publish_namespace(ns.clone())?;
    let track = |name: &str, priority: u8| -> anyhow::Result<TrackProducer> {
        Ok(publisher.create_track_with(
            FullTrackName::new(ns.clone(), name.to_string())?,
            TrackOptions::default().priority(priority),
        )?)
    };
    let catalog_track = track("catalog", 0)?;
    let audio_track = track("audio", 1)?;
    let video_track = track("video", 2)?;

    // Audio: the first ADTS header gives the AudioSpecificConfig.
    let mut audio_out = reader(&mut audio_proc)?;
    let mut video_out = reader(&mut video_proc)?;
    let mut abuf = Vec::new();
    let mut vbuf = Vec::new();
    let mut video = Video {
        sps: None,
        pps: None,
        frame: Vec::new(),
        keyframe: false,
    };
    let mut avc_c: Option<Vec<u8>> = None;
    let mut asc: Option<Vec<u8>> = None;
    let mut catalog_sent = false;
    let (mut vframes, mut aframes) = (0u64, 0u64);
    let mut vgroup = None;
    let mut agroup: Option<moq_client::GroupProducer> = None;
    let (mut vdone, mut adone) = (false, false);
    let b64 = base64::engine::general_purpose::STANDARD;

    while !(vdone && adone) {
        // One read from whichever has data; each parsed into frames.
        let mut vframes_ready = Vec::new();
        tokio::select! {
            chunk = video_out.recv(), if !vdone => {
                let chunk = chunk.unwrap_or_default();
                let n = chunk.len();
                vbuf.extend_from_slice(&chunk);
                let nals = take_nals(&mut vbuf, n == 0);
                if n == 0 { vdone = true; }
                for nal in nals {
                    let kind = nal.first().map_or(0, |b| b & 0x1f);
                    match kind {
                        9 => {
                            if !video.frame.is_empty() {
                                vframes_ready.push((std::mem::take(&mut video.frame), video.keyframe));
                            }
                            video.keyframe = false;
                        }
                        7 => video.sps = Some(nal),
                        8 => video.pps = Some(nal),
                        _ => {
                            if kind == 5 { video.keyframe = true; }
                            video.frame.push(nal);
                        }
                    }
                }
                if vdone && !video.frame.is_empty() {
                    vframes_ready.push((std::mem::take(&mut video.frame), video.keyframe));
                }
            }
            chunk = audio_out.recv(), if !adone => {
                let chunk = chunk.unwrap_or_default();
                if chunk.is_empty() { adone = true; }
                abuf.extend_from_slice(&chunk);
                while let Some(&[b0, b1, b2, b3, b4, b5, _]) = abuf.get(..7) {
                    if b0 != 0xff || b1 & 0xf0 != 0xf0 { bail!("ADTS sync lost"); }
                    let len = (((b3 & 3) as usize) << 11) | ((b4 as usize) << 3) | ((b5 as usize) >> 5);
                    let header = if b1 & 1 == 1 { 7 } else { 9 };
                    if len < header { bail!("bad ADTS frame length"); }
                    let Some(frame) = abuf.get(header..len) else { break };
                    let frame = frame.to_vec();
                    let object_type = (b2 >> 6) + 1;
                    let sfi = (b2 >> 2) & 0xf;
                    let channels = ((b2 & 1) << 2) | (b3 >> 6);
                    let config = vec![(object_type << 3) | (sfi >> 1), ((sfi & 1) << 7) | (channels << 3)];
                    abuf.drain(..len);
                    asc.get_or_insert(config);
                    let ts = *anchor.get_or_insert_with(now_us) + aframes * 1024 * 1_000_000 / SAMPLE_RATE;
                    // A new audio group about once a second.
                    let mut props = Properties::new().with_int(TIMESTAMP, ts)?;
                    if aframes % 47 == 0 {
                        if let Some(g) = agroup.take() { g.finish()?; }
                        agroup = Some(audio_track.append_group()?);
                        props = props.with_bytes(AUDIO_CONFIG, asc.clone().unwrap_or_default())?;
                    }
                    if let Some(g) = agroup.as_mut() { g.write_with(frame, props)?; }
                    aframes += 1;
                }
            }
        }
        for (nals, key) in vframes_ready {
            if avc_c.is_none() {
                let (Some(sps), Some(pps)) = (&video.sps, &video.pps) else {
                    bail!("no SPS/PPS before the first frame")
                };
                let [_, profile, compat, level, ..] = sps[..] else {
                    bail!("short SPS")
                };
                let mut c = vec![1, profile, compat, level, 0xff, 0xe1];
                c.extend_from_slice(&(sps.len() as u16).to_be_bytes());
                c.extend_from_slice(sps);
                c.push(1);
                c.extend_from_slice(&(pps.len() as u16).to_be_bytes());
                c.extend_from_slice(pps);
                avc_c = Some(c);
            }
            let mut payload = Vec::new();
            for nal in &nals {
                payload.extend_from_slice(&(nal.len() as u32).to_be_bytes());
                payload.extend_from_slice(nal);
            }
            let ts = *anchor.get_or_insert_with(now_us) + vframes * 1_000_000 / FPS;
            let mut props = Properties::new().with_int(TIMESTAMP, ts)?;
            if key {
                if let Some(g) = vgroup.take() {
                    moq_client::GroupProducer::finish(g)?;
                }
                vgroup = Some(video_track.append_group()?);
                props = props
                    .with_bytes(VIDEO_CONFIG, avc_c.clone().unwrap_or_default())?
                    .with_bytes(VIDEO_FRAME_MARKING, vec![0xe0u8])?; // S, E, I (RFC 9626)
            }
            if let Some(g) = vgroup.as_mut() {
                g.write_with(payload, props)?;
            }
            vframes += 1;
        }
        if !catalog_sent {
            if let (Some(avc), Some(asc)) = (&avc_c, &asc) {
                let real = match avc[..] {
                    [_, p, c, l, ..] => format!("avc1.{p:02x}{c:02x}{l:02x}"),
                    _ => bail!("short avcC"),
                };
                let codec = args.video_codec.clone().unwrap_or(real);
                let catalog = serde_json::json!({
                    "version": "draft-01",
                    "generatedAt": now_us() / 1000,
                    "tracks": [
                        { "name": "video", "packaging": "loc", "role": "video", "isLive": true, "renderGroup": 1,
                          "codec": codec, "width": WIDTH, "height": HEIGHT, "framerate": FPS, "initRef": "video-init" },
                        { "name": "audio", "packaging": "loc", "role": "audio", "isLive": true, "renderGroup": 1,
                          "codec": "mp4a.40.2", "samplerate": SAMPLE_RATE, "channelConfig": "2", "initRef": "audio-init" },
                    ],
                    "initDataList": [
                        { "id": "video-init", "type": "inline", "data": b64.encode(avc) },
                        { "id": "audio-init", "type": "inline", "data": b64.encode(asc) },
                    ],
                });
                let mut g = catalog_track.append_group()?;
                g.write(serde_json::to_vec(&catalog)?)?;
                g.finish()?;
                catalog_sent = true;
                eprintln!("published {ns}: catalog, video ({codec}), audio");
            }
        }
    }
    if let Some(g) = vgroup.take() {
        g.finish()?;
    }
    if let Some(g) = agroup.take() {
        g.finish()?;
    }
    eprintln!("published {vframes} video frames, {aframes} audio frames");
    // Stay a moment so that the last objects leave, then end.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = video_proc.wait();
    let _ = audio_proc.wait();
    Ok(())
}
