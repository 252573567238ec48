//! The two-command path, file -> relay -> file: a clip made by Debian's ffmpeg at test time
//! (H.264 with B-frames + AAC, testsrc and a sine), piped by `ffmpeg -re` into
//! `moq publish live/demo` through a relay in this process, and `moq subscribe live/demo >
//! out.mp4`; ffprobe then sees the same codecs, frame counts and durations (±1 frame). One
//! test per draft (14, 18, 22) and transport (raw QUIC, WebTransport), each with its own
//! timeout. And bad input on stdin: a truncated or corrupt fMP4 exits 1 with one line.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;
// The media tests' ffmpeg and ffprobe helpers, shared with moq-media's tests.
#[path = "../../moq-media/tests/common/mod.rs"]
mod media;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use common::{Transport, args, case, flags, moq, relay};
use media::{FFMPEG, probe, require_ffmpeg};

/// Length of the clip, in seconds.
const SECONDS: &str = "3";
const FPS: f64 = 30.0;
/// AAC frames are 1024 samples, at 48 kHz.
const AAC_FRAME: f64 = 1024.0 / 48000.0;

/// A directory of this test run under the target dir.
fn dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("moq-cli-media-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The clip, made once per test binary: H.264 (libx264 veryfast: B-frames, a GOP of 30) and
/// AAC, fragmented as `-movflags cmaf+separate_moof+delay_moov+skip_trailer` writes it.
fn clip() -> &'static Path {
    static CLIP: OnceLock<PathBuf> = OnceLock::new();
    CLIP.get_or_init(|| {
        require_ffmpeg();
        let out = dir().join("clip.mp4");
        let status = std::process::Command::new(FFMPEG)
            .args(["-hide_banner", "-loglevel", "error", "-y"])
            .args(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=30"])
            .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"])
            .args(["-t", SECONDS])
            .args([
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-g",
                "30",
                "-pix_fmt",
                "yuv420p",
            ])
            .args(["-c:a", "aac", "-b:a", "64k"])
            .args([
                "-f",
                "mp4",
                "-movflags",
                "cmaf+separate_moof+delay_moov+skip_trailer",
            ])
            .arg(&out)
            .status()
            .expect("run ffmpeg");
        assert!(status.success(), "ffmpeg failed to make the clip");
        out
    })
}

/// `ffmpeg -re -i clip -c copy ... -` | `moq publish live/demo`, with `moq subscribe live/demo
/// > out.mp4` started first; then ffprobe compares.
async fn two_commands(transport: Transport, draft: u64, packaging: &str) {
    let clip = clip();
    let relay = relay();
    let connect = flags(&relay, transport, Some(draft));
    let out_path = dir().join(format!("out-{transport:?}-{draft}-{packaging}.mp4"));
    let out = std::fs::File::create(&out_path).unwrap();

    let sub_args = [
        connect.clone(),
        args(&["subscribe", "live/demo", "--from", "oldest"]),
    ]
    .concat();
    let mut sub = moq("subscribe", &sub_args, Stdio::null(), Stdio::from(out));
    sub.stderr_line("waiting for live/demo").await;

    let mut ffmpeg = tokio::process::Command::new(FFMPEG)
        .args(["-hide_banner", "-loglevel", "error", "-re", "-i"])
        .arg(clip)
        .args([
            "-c",
            "copy",
            "-f",
            "mp4",
            "-movflags",
            "cmaf+separate_moof+delay_moov+skip_trailer",
            "-",
        ])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("run ffmpeg");
    let pipe: Stdio = ffmpeg.stdout.take().unwrap().try_into().unwrap();
    let publisher = moq(
        "publish",
        &[
            connect,
            args(&["publish", "live/demo", "--packaging", packaging]),
        ]
        .concat(),
        pipe,
        Stdio::null(),
    );
    let (code, stderr) = publisher.exit().await;
    assert_eq!(code, Some(0), "publisher: {stderr:?}");
    assert!(
        ffmpeg.wait().await.unwrap().success(),
        "ffmpeg -re -c copy failed"
    );
    let (code, stderr) = sub.exit().await;
    assert_eq!(code, Some(0), "subscriber: {stderr:?}");

    let want = probe(clip);
    let got = probe(&out_path);
    eprintln!("input: {want:?}\noutput: {got:?}");
    assert_eq!(want.len(), 2, "the clip has video and audio: {want:?}");
    assert_eq!(got.len(), 2, "streams of the output: {got:?}");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(w.codec_type, g.codec_type);
        assert_eq!(w.codec_name, g.codec_name, "codec of {}", w.codec_type);
        assert!(
            w.frames.abs_diff(g.frames) <= 1,
            "{} frames: {} in, {} out",
            w.codec_type,
            w.frames,
            g.frames
        );
        let frame = if w.codec_type == "video" {
            1.0 / FPS
        } else {
            AAC_FRAME
        };
        assert!(
            (w.start - g.start).abs() <= frame + 1e-3,
            "{} start: {} in, {} out (A/V sync)",
            w.codec_type,
            w.start,
            g.start
        );
        assert!(
            (w.duration - g.duration).abs() <= frame + 1e-3,
            "{} duration: {} in, {} out",
            w.codec_type,
            w.duration,
            g.duration
        );
    }
}

#[tokio::test]
async fn two_commands_quic_draft14() {
    case("quic draft-14", two_commands(Transport::Quic, 14, "loc")).await;
}

#[tokio::test]
async fn two_commands_quic_draft18() {
    case("quic draft-18", two_commands(Transport::Quic, 18, "loc")).await;
}

#[tokio::test]
async fn two_commands_quic_draft22() {
    case("quic draft-22", two_commands(Transport::Quic, 22, "loc")).await;
}

#[tokio::test]
async fn two_commands_cmaf_quic_draft18() {
    case(
        "cmaf quic draft-18",
        two_commands(Transport::Quic, 18, "cmaf"),
    )
    .await;
}

#[tokio::test]
async fn two_commands_cmaf_webtransport_draft22() {
    case(
        "cmaf webtransport draft-22",
        two_commands(Transport::WebTransport, 22, "cmaf"),
    )
    .await;
}

#[tokio::test]
async fn two_commands_webtransport_draft14() {
    case(
        "webtransport draft-14",
        two_commands(Transport::WebTransport, 14, "loc"),
    )
    .await;
}

#[tokio::test]
async fn two_commands_webtransport_draft18() {
    case(
        "webtransport draft-18",
        two_commands(Transport::WebTransport, 18, "loc"),
    )
    .await;
}

#[tokio::test]
async fn two_commands_webtransport_draft22() {
    case(
        "webtransport draft-22",
        two_commands(Transport::WebTransport, 22, "loc"),
    )
    .await;
}

/// `moq publish` with `input` on stdin: exits 1 with one line on stderr, which contains
/// `expected`.
async fn bad_input(name: &str, input: Vec<u8>, expected: &str) {
    let relay = relay();
    let connect = flags(&relay, Transport::Quic, None);
    let path = dir().join(format!("{name}.mp4"));
    std::fs::write(&path, input).unwrap();
    let stdin = Stdio::from(std::fs::File::open(&path).unwrap());
    let (code, stderr) = moq(
        name,
        &[connect, args(&["publish", "live/bad"])].concat(),
        stdin,
        Stdio::null(),
    )
    .exit()
    .await;
    assert_eq!(code, Some(1), "{name}: {stderr:?}");
    let errors: Vec<&String> = stderr
        .iter()
        .filter(|l| l.starts_with("moq: error:"))
        .collect();
    assert_eq!(errors.len(), 1, "{name}: {stderr:?}");
    assert!(errors[0].contains(expected), "{name}: {stderr:?}");
    assert!(
        !stderr.iter().any(|l| l.contains("panicked")),
        "{name}: {stderr:?}"
    );
}

/// A clip cut in the middle of a fragment.
#[tokio::test]
async fn truncated_fmp4_exits_1() {
    case("truncated", async {
        let mut bytes = std::fs::read(clip()).unwrap();
        bytes.truncate(bytes.len() * 2 / 3);
        bad_input("truncated", bytes, "truncated").await;
    })
    .await;
}

/// Bytes that are not MP4 at all, and a clip whose `moov` is overwritten.
#[tokio::test]
async fn corrupt_fmp4_exits_1() {
    case("corrupt", async {
        bad_input("not-mp4", b"this is not an mp4 file\n".repeat(100), "fMP4").await;
        let mut bytes = std::fs::read(clip()).unwrap();
        let moov = bytes.windows(4).position(|w| w == b"moov").expect("a moov");
        for b in bytes.iter_mut().skip(moov + 4).take(64) {
            *b = 0xff;
        }
        bad_input("corrupt-moov", bytes, "fMP4").await;
    })
    .await;
}

/// A relay that verifies tokens refuses the namespace of an fMP4 publisher without one: exit
/// 1, one line naming the refusal (not a publish to nobody that exits 0).
#[tokio::test]
async fn refused_fmp4_publisher_exits_1() {
    use moq_relay::auth::{Algorithm, Jwk, KeySet, TokenAuth};
    case("refused", async {
        let key = Jwk::generate(Algorithm::ES256, None).unwrap();
        let mut keys = KeySet::new();
        keys.add_jwk(&key.public().unwrap()).unwrap();
        let mut config =
            moq_relay::RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
        config.authorizer = std::sync::Arc::new(TokenAuth::new(keys, &[]).unwrap());
        let relay = moq_relay::Relay::bind(config).unwrap();
        relay.spawn();
        let connect = flags(&relay, Transport::Quic, None);
        let stdin = Stdio::from(std::fs::File::open(clip()).unwrap());
        let (code, stderr) = moq(
            "refused",
            &[connect, args(&["publish", "live/demo"])].concat(),
            stdin,
            Stdio::null(),
        )
        .exit()
        .await;
        assert_eq!(code, Some(1), "{stderr:?}");
        let errors: Vec<&String> = stderr
            .iter()
            .filter(|l| l.starts_with("moq: error:"))
            .collect();
        assert_eq!(errors.len(), 1, "{stderr:?}");
        assert!(
            errors[0].contains("PUBLISH_NAMESPACE live/demo refused"),
            "{stderr:?}"
        );
    })
    .await;
}
