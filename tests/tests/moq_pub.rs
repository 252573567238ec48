//! Independent media check: Cloudflare's `moq-pub` (crates.io 0.10.0, draft-18; installed by
//! `scripts/install-peers.sh`, found through `$MOQ_PUB` from `scripts/peers.env`) publishes a
//! clip Debian's ffmpeg makes (H.264 + AAC, fragmented MP4 with the flags of moq-pub's README)
//! through our relay; our subscriber (`moq_media::warp`) reads its WARP catalog, init track and
//! CMAF tracks and writes a fragmented MP4 that ffprobe reads with the same codecs and frame
//! counts (±1).
//!
//! Ignored in a plain `cargo test` (the peer is installed later in `scripts/test.sh`, which
//! runs it with `--ignored` after `. scripts/peers.env`); when run, a missing `moq-pub`,
//! ffmpeg or ffprobe fails the test with the reason.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use moq_media::warp;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use moq_client::{NamespaceEvent, TrackNamespace, Version};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

/// The longest one case (one transport, one draft) may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

fn tool(var: &str, default: &str) -> PathBuf {
    let path = std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from);
    assert!(
        path.exists(),
        "{} not found at {} (Debian: apt-get install --no-install-recommends ffmpeg, or \
         scripts/install-media.sh; moq-pub: scripts/install-peers.sh and . scripts/peers.env)",
        var,
        path.display()
    );
    path
}

fn workdir(name: &str) -> PathBuf {
    // RUST_LOG for our relay and client, in the test's output.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// moq-pub's README: a fragment per frame, one traf per moof.
const README_FLAGS: &str = "empty_moov+frag_every_frame+separate_moof+omit_tfhd_offset";
/// What moq-media's ingest documents (CMAF, a fragment per GOP and track).
const CMAF_FLAGS: &str = "cmaf+separate_moof+delay_moov+skip_trailer";

/// A 3 s clip: 320x240 testsrc at 25 fps in H.264 (with B-frames) and a 440 Hz sine in AAC,
/// fragmented with `movflags`.
fn make_clip(dir: &Path, movflags: &str) -> PathBuf {
    let out = dir.join(format!(
        "clip-{}.mp4",
        movflags.split('+').next().unwrap_or("x")
    ));
    let status = std::process::Command::new(tool("FFMPEG", "/usr/bin/ffmpeg"))
        .args(["-hide_banner", "-v", "error", "-y"])
        .args(["-f", "lavfi", "-i", "testsrc=size=320x240:rate=25"])
        .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000"])
        .args(["-t", "3", "-map", "0:v", "-map", "1:a"])
        .args([
            "-c:v", "libx264", "-preset", "veryfast", "-g", "25", "-pix_fmt", "yuv420p",
        ])
        .args(["-c:a", "aac", "-b:a", "64k", "-f", "mp4"])
        .args(["-movflags", movflags])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success(), "ffmpeg failed to make the clip");
    out
}

/// One stream as ffprobe sees it.
#[derive(Debug)]
struct Stream {
    codec_type: String,
    codec_name: String,
    /// Packets (MP4 samples) read.
    packets: u64,
    /// Frames decoded.
    frames: u64,
}

/// Every stream of `file`, ffprobe counting packets and decoded frames.
fn probe(file: &Path) -> Vec<Stream> {
    let out = std::process::Command::new(tool("FFPROBE", "/usr/bin/ffprobe"))
        .args([
            "-v",
            "error",
            "-count_packets",
            "-count_frames",
            "-show_entries",
        ])
        .args([
            "stream=codec_type,codec_name,nb_read_packets,nb_read_frames",
            "-of",
            "json",
        ])
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ffprobe {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let count = |v: &Value| v.as_str().and_then(|n| n.parse().ok()).unwrap_or(0);
    json["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Stream {
            codec_type: s["codec_type"].as_str().unwrap_or_default().to_string(),
            codec_name: s["codec_name"].as_str().unwrap_or_default().to_string(),
            packets: count(&s["nb_read_packets"]),
            frames: count(&s["nb_read_frames"]),
        })
        .collect()
}

/// One case: moq-pub over `scheme` (`moqt` raw QUIC, `https` WebTransport) to our relay, our
/// subscriber at `version`.
async fn case(moq_pub: &Path, clip: &Path, dir: &Path, tag: &str, scheme: &str, version: Version) {
    let source = probe(clip);
    let total: u64 = source.iter().map(|s| s.packets).sum();
    let config = moq_relay::RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
    let relay = moq_relay::Relay::bind(config).unwrap();
    relay.spawn();
    let port = relay.local_addr().port();
    let name = format!("live/warp-{tag}-{scheme}-{}", version.draft());
    let namespace: TrackNamespace = name.parse().unwrap();

    let session = moq_client::Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .versions(vec![version])
        .build()
        .unwrap()
        .connect(&format!("moqt://localhost:{port}"))
        .await
        .unwrap();
    let mut announced = session
        .subscriber()
        .subscribe_namespace("live".parse().unwrap())
        .await
        .unwrap();

    let mut child = tokio::process::Command::new(moq_pub)
        .args([
            "--name",
            &name,
            "--fetch-groups",
            "64",
            "--tls-disable-verify",
        ])
        .arg(format!("{scheme}://127.0.0.1:{port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(
                dir.join(format!("moq-pub-{tag}-{scheme}-{}.log", version.draft())),
            )
            .unwrap(),
        )
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The whole clip at once, as `ffmpeg ... | moq-pub` without -re; stdin stays open (moq-pub
    // 0.10 does not handle EOF) until the child is killed.
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(&std::fs::read(clip).unwrap())
        .await
        .unwrap();
    stdin.flush().await.unwrap();

    loop {
        match announced.next().await {
            Some(Ok(NamespaceEvent::Added(ns))) if ns == namespace => break,
            Some(Ok(_)) => {}
            other => panic!("moq-pub's namespace never arrived: {other:?}"),
        }
    }
    let broadcast = warp::subscribe_warp(session.subscriber(), namespace)
        .await
        .unwrap();
    let codecs: Vec<_> = broadcast
        .catalog()
        .tracks
        .iter()
        .map(|t| t.selection.codec.clone().unwrap_or_default())
        .collect();
    assert!(
        codecs.iter().any(|c| c.starts_with("avc1."))
            && codecs.iter().any(|c| c.starts_with("mp4a.40")),
        "catalog codecs {codecs:?}"
    );

    let out_path = dir.join(format!("out-{tag}-{scheme}-{}.mp4", version.draft()));
    let file = tokio::fs::File::create(&out_path).await.unwrap();
    let (tx, mut rx) = tokio::sync::watch::channel(warp::WarpStats::default());
    // Every sample the clip has (moq-pub never ends its tracks: it does not see EOF).
    let stop = async move {
        let _ = rx
            .wait_for(|s| s.samples.values().sum::<u64>() >= total)
            .await;
    };
    let stats = broadcast.write_fmp4(file, stop, Some(&tx)).await.unwrap();
    child.kill().await.unwrap();
    drop(stdin);

    let got = probe(&out_path);
    eprintln!(
        "{scheme} draft-{}: source {source:?}, received {got:?}, {stats:?}",
        version.draft()
    );
    assert_eq!(got.len(), source.len(), "streams: {got:?} vs {source:?}");
    for (s, g) in source.iter().zip(&got) {
        assert_eq!(
            (&s.codec_type, &s.codec_name),
            (&g.codec_type, &g.codec_name),
            "codec"
        );
        assert!(s.frames > 0, "{}: no frames in the clip", s.codec_type);
        assert!(
            s.frames.abs_diff(g.frames) <= 1 && s.packets.abs_diff(g.packets) <= 1,
            "{}: {s:?} sent, {g:?} received",
            s.codec_type
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moq-pub from scripts/install-peers.sh: scripts/test.sh runs it with --ignored"]
async fn moq_pub_through_our_relay_into_our_subscriber() {
    let moq_pub = tool("MOQ_PUB", "");
    let dir = workdir("moq-pub");
    let readme = make_clip(&dir, README_FLAGS);
    let cmaf = make_clip(&dir, CMAF_FLAGS);
    for (clip, flags, scheme, version) in [
        (&readme, README_FLAGS, "moqt", Version::Draft18),
        (&readme, README_FLAGS, "moqt", Version::Draft22),
        (&readme, README_FLAGS, "https", Version::Draft18),
        (&readme, README_FLAGS, "https", Version::Draft14),
        (&cmaf, CMAF_FLAGS, "moqt", Version::Draft22),
    ] {
        let label = format!(
            "moq-pub over {scheme} ({flags}), our subscriber at draft-{}",
            version.draft()
        );
        eprintln!("-- {label}");
        let tag = if flags == CMAF_FLAGS {
            "cmaf"
        } else {
            "readme"
        };
        tokio::time::timeout(
            CASE_TIMEOUT,
            case(&moq_pub, clip, &dir, tag, scheme, version),
        )
        .await
        .unwrap_or_else(|_| panic!("{label}: timed out after {CASE_TIMEOUT:?}"));
    }
}

/// The top-level boxes of an MP4 file, each with its header.
fn boxes(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while rest.len() >= 8 {
        let size = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        assert!(size >= 8 && size <= rest.len(), "box size {size}");
        out.push(&rest[..size]);
        rest = &rest[size..];
    }
    out
}

/// A broadcast in moq-pub's layout, published with our own client through our relay, read
/// back by `warp`: what it cannot read (a catalog that is not JSON, one whose init segment
/// has another number of tracks, a truncated or foreign chunk) is a clear error, no panic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warp_rejects_bad_broadcasts() {
    let dir = workdir("warp-bad");
    let clip = std::fs::read(make_clip(&dir, README_FLAGS)).unwrap();
    let parts = boxes(&clip);
    let init: Vec<u8> = [parts[0], parts[1]].concat(); // ftyp + moov (two tracks)
    let chunk: Vec<u8> = [parts[2], parts[3]].concat(); // the first moof + mdat
    let catalog = |tracks: &[&str]| {
        let tracks: Vec<String> = tracks
            .iter()
            .map(|t| format!(r#"{{"name":"{t}","initTrack":"0.mp4","selectionParams":{{}}}}"#))
            .collect();
        format!(
            r#"{{"version":1,"streamingFormat":1,"streamingFormatVersion":"0.2","commonTrackFields":{{"packaging":"cmaf"}},"tracks":[{}]}}"#,
            tracks.join(",")
        )
    };
    let mut foreign = chunk.clone();
    // tfhd's track ID (moof > mfhd, traf > tfhd): 7 is not in the init segment.
    let tfhd = foreign.windows(4).position(|w| w == b"tfhd").unwrap();
    foreign[tfhd + 8..tfhd + 12].copy_from_slice(&7u32.to_be_bytes());
    let cases: Vec<(&str, String, Vec<u8>, &str)> = vec![
        (
            "not json",
            "{tracks".into(),
            chunk.clone(),
            "catalog: not a WARP catalog",
        ),
        (
            "track count",
            catalog(&["1.m4s"]),
            chunk.clone(),
            "the moov has 2 tracks, the catalog 1",
        ),
        (
            "truncated chunk",
            catalog(&["1.m4s", "2.m4s"]),
            chunk[..chunk.len() - 10].to_vec(),
            "the mdat says",
        ),
        (
            "garbage chunk",
            catalog(&["1.m4s", "2.m4s"]),
            b"garbage, not a box".to_vec(),
            "no moof first",
        ),
        (
            "foreign track",
            catalog(&["1.m4s", "2.m4s"]),
            foreign,
            "track ID 7 is not in the init segment",
        ),
    ];
    for (label, json, media, want) in cases {
        let run = async {
            let relay = moq_relay::Relay::bind(
                moq_relay::RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap(),
            )
            .unwrap();
            relay.spawn();
            let url = format!("moqt://localhost:{}", relay.local_addr().port());
            let client = moq_client::Client::builder()
                .fingerprint(&relay.fingerprint())
                .unwrap()
                .build()
                .unwrap();
            let (publisher, subscriber) = (
                client.connect(&url).await.unwrap(),
                client.connect(&url).await.unwrap(),
            );
            let ns: TrackNamespace = "live/bad".parse().unwrap();
            let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
            // The relay knows the namespace before anyone asks for its tracks.
            announced.announced().await.unwrap();
            let mut tracks = Vec::new();
            for (name, payload) in [
                (".catalog", json.into_bytes()),
                ("0.mp4", init.clone()),
                ("1.m4s", media.clone()),
                ("2.m4s", media),
            ] {
                let full =
                    moq_client::FullTrackName::new(ns.clone(), bytes::Bytes::from(name)).unwrap();
                let track = publisher.publisher().create_track(full).unwrap();
                let mut group = track.append_group().unwrap();
                group.write(payload).unwrap();
                tracks.push((track, group));
            }
            let result = match warp::subscribe_warp(subscriber.subscriber(), ns).await {
                Err(e) => Err(e),
                Ok(broadcast) => {
                    broadcast
                        .write_fmp4(tokio::io::sink(), std::future::pending(), None)
                        .await
                }
            };
            let err = result.expect_err(label).to_string();
            assert!(err.contains(want), "{label}: {err}");
        };
        tokio::time::timeout(CASE_TIMEOUT, run)
            .await
            .unwrap_or_else(|_| panic!("{label}: timed out"));
    }
}
