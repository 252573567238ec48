//! fMP4 made by ffmpeg -> publish_fmp4 -> our relay (in-process, over loopback QUIC or
//! WebTransport) -> subscribe_fmp4 -> a file that ffprobe reads with the same codecs, frame
//! count and duration. One test per draft and transport, each with its own timeout.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::path::Path;
use std::time::Duration;

use common::*;
use moq_client::{TrackNamespace, Version};
use moq_media::{EgressOptions, IngestOptions, Packaging, Start};

const CASE_TIMEOUT: Duration = Duration::from_secs(40);
const SECONDS: u32 = 3;

/// Publishes `clip` (paced to real time) and writes what a subscriber receives to `out`.
async fn roundtrip(
    clip: &Path,
    out: &Path,
    version: Version,
    webtransport: bool,
    packaging: Packaging,
) {
    let relay = relay();
    let publisher = session(&relay, version, webtransport).await;
    let subscriber = session(&relay, version, webtransport).await;
    let ns = TrackNamespace::from_strs(["live", "test"]).unwrap();
    let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
    announced.announced().await.unwrap();

    let input = tokio::fs::File::open(clip).await.unwrap();
    let pub_session = publisher.clone();
    let pub_ns = ns.clone();
    let publishing = tokio::spawn(async move {
        moq_media::publish_fmp4(
            pub_session.publisher(),
            pub_ns,
            input,
            IngestOptions::default()
                .announce(false)
                .realtime(true)
                .packaging(packaging),
        )
        .await
    });
    let output = tokio::fs::File::create(out).await.unwrap();
    let stats = moq_media::subscribe_fmp4(
        subscriber.subscriber(),
        ns,
        output,
        EgressOptions::default().start(Start::Oldest),
    )
    .await
    .expect("subscribe_fmp4");
    let ingest = publishing.await.unwrap().expect("publish_fmp4");
    drop(announced);
    assert_eq!(stats.tracks.len(), 2, "{stats:?}");
    assert_eq!(ingest.tracks.len(), 2, "{ingest:?}");
    for (i, e) in ingest.tracks.iter().zip(&stats.tracks) {
        assert_eq!(
            i.frames, e.frames,
            "frames published vs received: {ingest:?} {stats:?}"
        );
    }
}

/// ffmpeg decodes the whole output without an error (what ffplay would play).
fn decodes(out: &Path) {
    let o = std::process::Command::new(FFMPEG)
        .args(["-v", "error", "-i"])
        .arg(out)
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "ffmpeg could not decode {}",
        out.display()
    );
    assert!(
        o.stderr.is_empty(),
        "decoding errors: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The decoded video frames, in presentation order, as MD5s (ffmpeg's framemd5).
fn frame_hashes(file: &Path) -> Vec<String> {
    let o = std::process::Command::new(FFMPEG)
        .args(["-v", "error", "-i"])
        .arg(file)
        .args(["-map", "0:v:0", "-f", "framemd5", "-"])
        .output()
        .unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit(',').next().map(|h| h.trim().to_string()))
        .collect()
}

/// The output has the input's codecs, video frame count and duration (±1 frame).
fn compare(clip: &Path, out: &Path) {
    // The same pictures in the same order: decode times and composition offsets rebuilt
    // right (the clip has B-frames).
    assert_eq!(
        frame_hashes(out),
        frame_hashes(clip),
        "decoded video frames differ"
    );
    let want = probe(clip);
    let got = probe(out);
    eprintln!("input: {want:?}\noutput: {got:?}");
    assert_eq!(got.len(), 2, "streams of the output: {got:?}");
    for kind in ["video", "audio"] {
        let w = want.iter().find(|s| s.codec_type == kind).unwrap();
        let g = got
            .iter()
            .find(|s| s.codec_type == kind)
            .unwrap_or_else(|| panic!("no {kind} stream in the output: {got:?}"));
        assert_eq!(g.codec_name, w.codec_name, "{kind} codec");
        let frame = if kind == "video" {
            1.0 / 30.0
        } else {
            1024.0 / 48000.0
        };
        assert!(
            g.frames.abs_diff(w.frames) <= 1,
            "{kind} frames: got {} want {}",
            g.frames,
            w.frames
        );
        assert!(
            (g.duration - w.duration).abs() <= frame + 1e-3,
            "{kind} duration: got {} want {}",
            g.duration,
            w.duration
        );
    }
}

async fn case(name: &str, version: Version, webtransport: bool, packaging: Packaging) {
    case_with(
        name,
        version,
        webtransport,
        packaging,
        &["-c:v", "libx264", "-c:a", "aac"],
    )
    .await;
}

async fn case_with(
    name: &str,
    version: Version,
    webtransport: bool,
    packaging: Packaging,
    codecs: &[&str],
) {
    let dir = temp_dir(name);
    let clip = make_clip_with(&dir, SECONDS, codecs);
    let out = dir.join("out.mp4");
    tokio::time::timeout(
        CASE_TIMEOUT,
        roundtrip(&clip, &out, version, webtransport, packaging),
    )
    .await
    .unwrap_or_else(|_| panic!("{name}: timed out after {CASE_TIMEOUT:?}"));
    compare(&clip, &out);
    decodes(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn loc_quic_draft14() {
    case("loc_quic_14", Version::Draft14, false, Packaging::Loc).await;
}

#[tokio::test]
async fn loc_quic_draft18() {
    case("loc_quic_18", Version::Draft18, false, Packaging::Loc).await;
}

#[tokio::test]
async fn loc_quic_draft22() {
    case("loc_quic_22", Version::Draft22, false, Packaging::Loc).await;
}

#[tokio::test]
async fn loc_webtransport_draft14() {
    case("loc_wt_14", Version::Draft14, true, Packaging::Loc).await;
}

#[tokio::test]
async fn loc_webtransport_draft18() {
    case("loc_wt_18", Version::Draft18, true, Packaging::Loc).await;
}

#[tokio::test]
async fn loc_webtransport_draft22() {
    case("loc_wt_22", Version::Draft22, true, Packaging::Loc).await;
}

#[tokio::test]
async fn hevc_opus_loc_quic_draft22() {
    case_with(
        "hevc_opus",
        Version::Draft22,
        false,
        Packaging::Loc,
        &[
            "-c:v",
            "libx265",
            "-x265-params",
            "log-level=error",
            "-tag:v",
            "hvc1",
            "-c:a",
            "libopus",
        ],
    )
    .await;
}

#[tokio::test]
async fn av1_opus_cmaf_quic_draft18() {
    case_with(
        "av1_opus",
        Version::Draft18,
        false,
        Packaging::Cmaf,
        &["-c:v", "libsvtav1", "-preset", "12", "-c:a", "libopus"],
    )
    .await;
}

#[tokio::test]
async fn av1_loc_quic_draft22() {
    case_with(
        "av1_loc",
        Version::Draft22,
        false,
        Packaging::Loc,
        &["-c:v", "libsvtav1", "-preset", "12", "-c:a", "aac"],
    )
    .await;
}

#[tokio::test]
async fn cmaf_quic_draft22() {
    case("cmaf_quic_22", Version::Draft22, false, Packaging::Cmaf).await;
}

#[tokio::test]
async fn cmaf_webtransport_draft14() {
    case("cmaf_wt_14", Version::Draft14, true, Packaging::Cmaf).await;
}

/// `ffmpeg -re ... -` piped straight into publish_fmp4: the input is read as it is written
/// (moov first, then one moof+mdat pair at a time), not after ffmpeg ends.
#[tokio::test]
async fn piped_from_ffmpeg_in_real_time() {
    require_ffmpeg();
    let dir = temp_dir("piped");
    let clip = make_clip(&dir, SECONDS);
    let out = dir.join("out.mp4");
    tokio::time::timeout(CASE_TIMEOUT, async {
        let relay = relay();
        let publisher = session(&relay, Version::Draft22, false).await;
        let subscriber = session(&relay, Version::Draft22, true).await;
        let ns = TrackNamespace::from_strs(["live", "piped"]).unwrap();
        let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
        announced.announced().await.unwrap();
        let mut ffmpeg = tokio::process::Command::new(FFMPEG)
            .args(clip_args(SECONDS, "-", true))
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = ffmpeg.stdout.take().unwrap();
        let p = publisher.clone();
        let pns = ns.clone();
        let started = std::time::Instant::now();
        let publishing = tokio::spawn(async move {
            moq_media::publish_fmp4(
                p.publisher(),
                pns,
                stdout,
                IngestOptions::default().announce(false),
            )
            .await
        });
        let file = tokio::fs::File::create(&out).await.unwrap();
        let stats = moq_media::subscribe_fmp4(
            subscriber.subscriber(),
            ns,
            file,
            EgressOptions::default().start(Start::Oldest),
        )
        .await
        .unwrap();
        let ingest = publishing.await.unwrap().unwrap();
        // ffmpeg -re took about the clip's length: the input was consumed as it came.
        assert!(started.elapsed() >= Duration::from_secs(u64::from(SECONDS) - 1));
        assert!(ffmpeg.wait().await.unwrap().success());
        assert_eq!(ingest.tracks[0].frames, stats.tracks[0].frames);
    })
    .await
    .expect("timed out");
    compare(&clip, &out);
    decodes(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A viewer that joins a live broadcast late (the default: at the current group) gets a file
/// that starts at a keyframe and decodes without an error.
#[tokio::test]
async fn late_joiner_starts_at_the_current_group() {
    let dir = temp_dir("late");
    let clip = make_clip(&dir, 4);
    let out = dir.join("out.mp4");
    tokio::time::timeout(CASE_TIMEOUT, async {
        let relay = relay();
        let publisher = session(&relay, Version::Draft22, false).await;
        let subscriber = session(&relay, Version::Draft22, false).await;
        let ns = TrackNamespace::from_strs(["live", "late"]).unwrap();
        let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
        announced.announced().await.unwrap();
        let input = tokio::fs::File::open(&clip).await.unwrap();
        let p = publisher.clone();
        let pns = ns.clone();
        let publishing = tokio::spawn(async move {
            moq_media::publish_fmp4(
                p.publisher(),
                pns,
                input,
                IngestOptions::default().announce(false).realtime(true),
            )
            .await
        });
        // Join 1.5 s in: in the middle of the second group.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let file = tokio::fs::File::create(&out).await.unwrap();
        let stats =
            moq_media::subscribe_fmp4(subscriber.subscriber(), ns, file, EgressOptions::default())
                .await
                .unwrap();
        publishing.await.unwrap().unwrap();
        // From the start of the second group (or the third, if it began meanwhile) to the end.
        let video = &stats.tracks[0];
        assert!(video.frames == 90 || video.frames == 60, "{stats:?}");
    })
    .await
    .expect("timed out");
    decodes(&out);
    let got = probe(&out);
    assert_eq!(got.len(), 2, "{got:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// An input whose times start at 1000 s (`-output_ts_offset`) is paced from its first sample,
/// not delayed by 1000 s, and comes out whole.
#[tokio::test]
async fn input_times_not_starting_at_zero() {
    let dir = temp_dir("offset");
    require_ffmpeg();
    let clip = dir.join("clip.mp4");
    // frag_discont makes the muxer keep the offset in the tfdt.
    let args: Vec<String> = clip_args_with(
        2,
        clip.to_str().unwrap(),
        false,
        &[
            "-c:v",
            "libx264",
            "-c:a",
            "aac",
            "-output_ts_offset",
            "1000",
        ],
    )
    .into_iter()
    .map(|a| {
        if a.starts_with("cmaf+") {
            format!("{a}+frag_discont")
        } else {
            a
        }
    })
    .collect();
    let made = std::process::Command::new(FFMPEG)
        .args(&args)
        .status()
        .unwrap();
    assert!(made.success());
    let out = dir.join("out.mp4");
    tokio::time::timeout(
        CASE_TIMEOUT,
        roundtrip(&clip, &out, Version::Draft22, false, Packaging::Loc),
    )
    .await
    .expect("timed out: paced from time 0 instead of the first sample?");
    assert_eq!(frame_hashes(&out), frame_hashes(&clip));
    decodes(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Track choice: audio only, a track by name, a name that is not in the catalog.
#[tokio::test]
async fn track_selection() {
    let dir = temp_dir("select");
    let clip = make_clip(&dir, 2);
    let out = dir.join("out.mp4");
    tokio::time::timeout(CASE_TIMEOUT, async {
        let relay = relay();
        let publisher = session(&relay, Version::Draft22, false).await;
        let subscriber = session(&relay, Version::Draft22, false).await;
        let ns = TrackNamespace::from_strs(["live", "select"]).unwrap();
        let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
        announced.announced().await.unwrap();
        let input = tokio::fs::File::open(&clip).await.unwrap();
        let p = publisher.clone();
        let pns = ns.clone();
        let publishing = tokio::spawn(async move {
            moq_media::publish_fmp4(
                p.publisher(),
                pns,
                input,
                IngestOptions::default().announce(false).realtime(true),
            )
            .await
        });
        let missing = moq_media::subscribe_fmp4(
            subscriber.subscriber(),
            ns.clone(),
            Vec::new(),
            EgressOptions::default().tracks(["video", "subtitles"]),
        )
        .await;
        match missing {
            Err(moq_media::MediaError::NoTrack(msg)) => {
                assert!(
                    msg.contains("subtitles") && msg.contains("video, audio"),
                    "{msg}"
                )
            }
            other => panic!("expected NoTrack, got {other:?}"),
        }
        let file = tokio::fs::File::create(&out).await.unwrap();
        let stats = moq_media::subscribe_fmp4(
            subscriber.subscriber(),
            ns,
            file,
            EgressOptions::default().no_video().start(Start::Oldest),
        )
        .await
        .unwrap();
        assert_eq!(stats.tracks.len(), 1);
        assert_eq!(stats.tracks[0].name, "audio");
        publishing.await.unwrap().unwrap();
    })
    .await
    .expect("timed out");
    let got = probe(&out);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].codec_name, "aac");
    decodes(&out);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `subscribe_fmp4 | ffmpeg -i -` (what `| ffplay -` does): the output read as a stream, not
/// a seekable file, decodes to the clip's frames.
#[tokio::test]
async fn piped_into_ffmpeg() {
    let dir = temp_dir("pipe-out");
    let clip = make_clip(&dir, 2);
    tokio::time::timeout(CASE_TIMEOUT, async {
        let relay = relay();
        let publisher = session(&relay, Version::Draft22, false).await;
        let subscriber = session(&relay, Version::Draft22, false).await;
        let ns = TrackNamespace::from_strs(["live", "pipe"]).unwrap();
        let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
        announced.announced().await.unwrap();
        let input = tokio::fs::File::open(&clip).await.unwrap();
        let p = publisher.clone();
        let pns = ns.clone();
        let publishing = tokio::spawn(async move {
            moq_media::publish_fmp4(
                p.publisher(),
                pns,
                input,
                IngestOptions::default().announce(false).realtime(true),
            )
            .await
        });
        let mut ffmpeg = tokio::process::Command::new(FFMPEG)
            .args([
                "-v", "error", "-i", "-", "-map", "0:v:0", "-f", "framemd5", "-",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = ffmpeg.stdin.take().unwrap();
        moq_media::subscribe_fmp4(
            subscriber.subscriber(),
            ns,
            stdin,
            EgressOptions::default().start(Start::Oldest),
        )
        .await
        .unwrap();
        publishing.await.unwrap().unwrap();
        let out = ffmpeg.wait_with_output().await.unwrap();
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hashes: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit(',').next().map(|h| h.trim().to_string()))
            .collect();
        assert_eq!(hashes, frame_hashes(&clip));
    })
    .await
    .expect("timed out");
    let _ = std::fs::remove_dir_all(&dir);
}
