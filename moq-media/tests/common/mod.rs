//! Shared helpers of the media tests: a clip made by ffmpeg at test time, a relay in-process,
//! publisher and subscriber sessions, and ffprobe's view of a file.

#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use moq_client::{Client, Publisher, Session, Version};
use moq_relay::{Relay, RelayConfig};

pub const FFMPEG: &str = "/usr/bin/ffmpeg";
pub const FFPROBE: &str = "/usr/bin/ffprobe";

/// Fails (never skips) when ffmpeg or ffprobe is missing.
pub fn require_ffmpeg() {
    for tool in [FFMPEG, FFPROBE] {
        assert!(
            Path::new(tool).exists(),
            "{tool} is missing: the media tests need Debian's ffmpeg (apt-get install ffmpeg, or scripts/install-media.sh)"
        );
    }
}

/// A fresh temporary directory for one test.
pub fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("moq-media-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The ffmpeg arguments that write fragmented MP4 to `out` ("-" for stdout): `seconds` of
/// testsrc at 30 fps (GOP 30) and a sine, H.264 + AAC.
pub fn clip_args(seconds: u32, out: &str, realtime: bool) -> Vec<String> {
    clip_args_with(seconds, out, realtime, &["-c:v", "libx264", "-c:a", "aac"])
}

/// [`clip_args`] with other codec arguments (`-c:v ... -c:a ...`).
pub fn clip_args_with(seconds: u32, out: &str, realtime: bool, codecs: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "-hide_banner".into(),
        "-loglevel".into(),
        "error".into(),
        "-y".into(),
    ];
    if realtime {
        a.push("-re".into());
    }
    for s in [
        "-f",
        "lavfi",
        "-i",
        "testsrc=size=320x240:rate=30",
        "-f",
        "lavfi",
        "-i",
        "sine=frequency=440:sample_rate=48000",
        "-t",
    ] {
        a.push(s.into());
    }
    a.push(seconds.to_string());
    // With libx264's default preset: High profile with B-frames (decode order !=
    // presentation order, which LOC egress must rebuild).
    a.extend(codecs.iter().map(|c| c.to_string()));
    for s in [
        "-g",
        "30",
        "-pix_fmt",
        "yuv420p",
        "-f",
        "mp4",
        "-movflags",
        "cmaf+separate_moof+delay_moov+skip_trailer",
    ] {
        a.push(s.into());
    }
    a.push(out.into());
    a
}

/// Makes a clip file with ffmpeg.
pub fn make_clip(dir: &Path, seconds: u32) -> PathBuf {
    make_clip_with(dir, seconds, &["-c:v", "libx264", "-c:a", "aac"])
}

/// Makes a clip file with other codecs.
pub fn make_clip_with(dir: &Path, seconds: u32, codecs: &[&str]) -> PathBuf {
    require_ffmpeg();
    let out = dir.join("clip.mp4");
    let status = Command::new(FFMPEG)
        .args(clip_args_with(
            seconds,
            out.to_str().unwrap(),
            false,
            codecs,
        ))
        .status()
        .expect("run ffmpeg");
    assert!(status.success(), "ffmpeg failed to make the clip");
    out
}

/// One stream as ffprobe sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Stream {
    pub codec_type: String,
    pub codec_name: String,
    pub frames: u64,
    /// `start_time`, seconds.
    pub start: f64,
    pub duration: f64,
}

/// `ffprobe -show_streams -count_frames` of a file, video before audio.
pub fn probe(file: &Path) -> Vec<Stream> {
    let out = Command::new(FFPROBE)
        .args([
            "-v",
            "error",
            "-show_streams",
            "-count_frames",
            "-of",
            "json",
        ])
        .arg(file)
        .output()
        .expect("run ffprobe");
    assert!(
        out.status.success(),
        "ffprobe failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut streams: Vec<Stream> = v["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Stream {
            codec_type: s["codec_type"].as_str().unwrap_or("").into(),
            codec_name: s["codec_name"].as_str().unwrap_or("").into(),
            frames: s["nb_read_frames"]
                .as_str()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            start: s["start_time"]
                .as_str()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0.0),
            duration: s["duration"]
                .as_str()
                .and_then(|n| n.parse().ok())
                .unwrap_or(0.0),
        })
        .collect();
    streams.sort_by(|a, b| b.codec_type.cmp(&a.codec_type));
    streams
}

/// A development relay in-process.
pub fn relay() -> Relay {
    let relay =
        Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap()).unwrap();
    relay.spawn();
    relay
}

pub fn url(relay: &Relay, webtransport: bool) -> String {
    let port = relay.local_addr().port();
    if webtransport {
        format!("https://localhost:{port}/")
    } else {
        format!("moqt://localhost:{port}")
    }
}

/// A session to the relay at `version`.
pub async fn session(relay: &Relay, version: Version, webtransport: bool) -> Session {
    Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .publisher(Publisher::default())
        .versions(vec![version])
        .build()
        .unwrap()
        .connect(&url(relay, webtransport))
        .await
        .unwrap()
}
