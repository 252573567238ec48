//! Bad input gets a clear error and nothing hangs: truncated and corrupt fMP4, a catalog that
//! is not JSON or names a track that does not exist, a publisher that stops mid-group.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::*;
use moq_client::{FullTrackName, TrackNamespace, Version};
use moq_media::{EgressOptions, IngestOptions, MediaError, Start};

const CASE_TIMEOUT: Duration = Duration::from_secs(30);

fn ns() -> TrackNamespace {
    TrackNamespace::from_strs(["live", "bad"]).unwrap()
}

/// Publishes `input` through a relay while a subscriber writes fMP4; returns both results.
async fn publish_and_subscribe(
    input: Vec<u8>,
) -> (
    Result<moq_media::IngestStats, MediaError>,
    Result<moq_media::EgressStats, MediaError>,
    Vec<u8>,
) {
    let relay = relay();
    let publisher = session(&relay, Version::Draft22, false).await;
    let subscriber = session(&relay, Version::Draft22, false).await;
    let announced = publisher.publisher().publish_namespace(ns()).unwrap();
    announced.announced().await.unwrap();
    // Paced, so the subscriber is there while the input is being read.
    let slow = SlowReader::new(input);
    let p = publisher.clone();
    let publishing = tokio::spawn(async move {
        moq_media::publish_fmp4(
            p.publisher(),
            ns(),
            slow,
            IngestOptions::default().announce(false).realtime(true),
        )
        .await
    });
    let mut out = Vec::new();
    let sub = moq_media::subscribe_fmp4(
        subscriber.subscriber(),
        ns(),
        &mut out,
        EgressOptions::default().start(Start::Oldest),
    )
    .await;
    let publ = publishing.await.unwrap();
    (publ, sub, out)
}

/// A reader that hands out the input in 4 KiB pieces.
struct SlowReader {
    data: std::io::Cursor<Vec<u8>>,
}

impl SlowReader {
    fn new(data: Vec<u8>) -> Self {
        SlowReader {
            data: std::io::Cursor::new(data),
        }
    }
}

impl tokio::io::AsyncRead for SlowReader {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::io::Read;
        let n = buf.remaining().min(4096);
        let mut tmp = vec![0u8; n];
        let got = self.data.read(&mut tmp)?;
        buf.put_slice(&tmp[..got]);
        std::task::Poll::Ready(Ok(()))
    }
}

/// The offset of the first top-level box of type `kind`.
fn find_box(data: &[u8], kind: &[u8; 4]) -> usize {
    let mut pos = 0;
    while pos + 8 <= data.len() {
        let size = u32::from_be_bytes(data[pos..pos + 4].try_into().unwrap()) as usize;
        if &data[pos + 4..pos + 8] == kind {
            return pos;
        }
        pos += size;
    }
    panic!("no {kind:?} box");
}

#[tokio::test]
async fn truncated_input_is_an_error_and_the_subscriber_ends() {
    let dir = temp_dir("truncated");
    let clip = std::fs::read(make_clip(&dir, 2)).unwrap();
    // Cut in the middle of the last mdat (mid-group).
    let mut cut = find_box(&clip, b"mdat");
    loop {
        let next = cut + u32::from_be_bytes(clip[cut..cut + 4].try_into().unwrap()) as usize;
        if next >= clip.len() {
            break;
        }
        cut = next + find_box(&clip[next..], b"mdat");
    }
    let input = clip[..cut + 100].to_vec();
    let (publ, sub, out) = tokio::time::timeout(CASE_TIMEOUT, publish_and_subscribe(input))
        .await
        .expect("the publisher or the subscriber hung on truncated input");
    match publ {
        Err(MediaError::Truncated(msg)) => assert!(msg.contains("mdat"), "{msg}"),
        other => panic!("expected Truncated, got {other:?}"),
    }
    // The subscriber ended (cleanly or with an error) and what it wrote starts with the init.
    eprintln!("subscriber of a truncated input: {sub:?}");
    assert!(
        out.len() > 8 && &out[4..8] == b"ftyp",
        "{} bytes",
        out.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn corrupt_input_is_an_error() {
    let dir = temp_dir("corrupt");
    let clip = std::fs::read(make_clip(&dir, 2)).unwrap();
    // A moof whose body is garbage.
    let mut bad = clip.clone();
    let moof = find_box(&bad, b"moof");
    for b in &mut bad[moof + 8..moof + 40] {
        *b = 0xff;
    }
    let r = tokio::time::timeout(CASE_TIMEOUT, async {
        let relay = relay();
        let s = session(&relay, Version::Draft22, false).await;
        moq_media::publish_fmp4(s.publisher(), ns(), &bad[..], IngestOptions::default()).await
    })
    .await
    .unwrap();
    match r {
        Err(MediaError::Mp4(msg)) => assert!(msg.contains("moof at byte"), "{msg}"),
        other => panic!("expected an Mp4 error, got {other:?}"),
    }

    // Not MP4 at all, and nothing at all.
    let relay = relay();
    let s = session(&relay, Version::Draft22, false).await;
    let text = b"hello, this is not an mp4 file\n".repeat(10);
    match moq_media::publish_fmp4(s.publisher(), ns(), &text[..], IngestOptions::default()).await {
        Err(MediaError::Mp4(msg)) => assert!(msg.contains("above the limit"), "{msg}"),
        other => panic!("expected an Mp4 error, got {other:?}"),
    }
    match moq_media::publish_fmp4(s.publisher(), ns(), &b""[..], IngestOptions::default()).await {
        Err(MediaError::Truncated(msg)) => assert!(msg.contains("before the moov"), "{msg}"),
        other => panic!("expected Truncated, got {other:?}"),
    }
    // A box header cut short.
    match moq_media::publish_fmp4(s.publisher(), ns(), &clip[..5], IngestOptions::default()).await {
        Err(MediaError::Truncated(msg)) => assert!(msg.contains("box header"), "{msg}"),
        other => panic!("expected Truncated, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Publishes `payload` as the broadcast's catalog (object 0 of group 0) by hand.
async fn bad_catalog(payload: &'static [u8]) -> Result<moq_media::EgressStats, MediaError> {
    let relay = relay();
    let publisher = session(&relay, Version::Draft22, false).await;
    let subscriber = session(&relay, Version::Draft22, false).await;
    let announced = publisher.publisher().publish_namespace(ns()).unwrap();
    let catalog = publisher
        .publisher()
        .create_track(FullTrackName::new(ns(), "catalog").unwrap())
        .unwrap();
    let mut g = catalog.append_group().unwrap();
    g.write(payload).unwrap();
    g.finish().unwrap();
    announced.announced().await.unwrap();
    moq_media::subscribe_fmp4(
        subscriber.subscriber(),
        ns(),
        Vec::new(),
        EgressOptions::default(),
    )
    .await
}

#[tokio::test]
async fn catalog_that_is_not_json_is_a_clear_error() {
    let r = tokio::time::timeout(CASE_TIMEOUT, bad_catalog(b"<html>not a catalog</html>"))
        .await
        .expect("hung");
    match r {
        Err(MediaError::Catalog(msg)) => assert!(msg.contains("not JSON"), "{msg}"),
        other => panic!("expected a catalog error, got {other:?}"),
    }
}

#[tokio::test]
async fn catalog_naming_a_missing_track_is_a_clear_error() {
    // avcC of a 320x240 H.264 High stream is not needed to fail: the track itself is absent.
    let r = tokio::time::timeout(
        CASE_TIMEOUT,
        bad_catalog(
            br#"{"version":"draft-01","tracks":[{"name":"video","packaging":"cmaf","isLive":true,
                "role":"video","codec":"avc1.64000d","initData":"AAAA"}]}"#,
        ),
    )
    .await
    .expect("hung");
    match r {
        Err(MediaError::Catalog(msg)) => assert!(msg.contains("CMAF header"), "{msg}"),
        other => panic!("expected a catalog error, got {other:?}"),
    }
    let r = tokio::time::timeout(
        CASE_TIMEOUT,
        bad_catalog(
            br#"{"version":"draft-01","tracks":[{"name":"video","packaging":"loc","isLive":true,
                "role":"video","codec":"avc1.64000d","width":320,"height":240}]}"#,
        ),
    )
    .await
    .expect("hung");
    match r {
        Err(MediaError::Catalog(msg)) => assert!(msg.contains("decoder description"), "{msg}"),
        other => panic!("expected a catalog error, got {other:?}"),
    }
    // A LOC track with a description, but no such track published.
    let r = tokio::time::timeout(
        CASE_TIMEOUT,
        bad_catalog(
            br#"{"version":"draft-01","tracks":[{"name":"audio","packaging":"loc","isLive":true,
                "role":"audio","codec":"mp4a.40.2","samplerate":48000,"channelConfig":"2",
                "initRef":"a"}],"initDataList":[{"id":"a","type":"inline","data":"EZA="}]}"#,
        ),
    )
    .await
    .expect("hung");
    match r {
        Err(MediaError::NoTrack(msg)) => assert!(msg.contains("audio"), "{msg}"),
        other => panic!("expected NoTrack, got {other:?}"),
    }
}

#[tokio::test]
async fn publisher_that_stops_mid_group_ends_the_subscriber() {
    let dir = temp_dir("midgroup");
    // Fragments of 200 ms, so that the publisher stops in the middle of a 1 s group.
    let clip = std::fs::read(make_clip_with(
        &dir,
        3,
        &["-c:v", "libx264", "-c:a", "aac", "-frag_duration", "200000"],
    ))
    .unwrap();
    tokio::time::timeout(CASE_TIMEOUT, async {
        let relay = relay();
        let publisher = session(&relay, Version::Draft22, false).await;
        let subscriber = session(&relay, Version::Draft22, false).await;
        let announced = publisher.publisher().publish_namespace(ns()).unwrap();
        announced.announced().await.unwrap();
        let p = publisher.clone();
        let publishing = tokio::spawn(async move {
            moq_media::publish_fmp4(
                p.publisher(),
                ns(),
                SlowReader::new(clip),
                IngestOptions::default().announce(false).realtime(true),
            )
            .await
        });
        let out = dir.join("out.mp4");
        let file = tokio::fs::File::create(&out).await.unwrap();
        let sub = tokio::spawn({
            let s = subscriber.clone();
            async move {
                moq_media::subscribe_fmp4(
                    s.subscriber(),
                    ns(),
                    file,
                    EgressOptions::default().start(Start::Oldest),
                )
                .await
            }
        });
        // 1.5 s in: in the middle of the second group, the publisher goes away.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        publishing.abort();
        publisher.close();
        let r = sub.await.unwrap();
        eprintln!("subscriber after the publisher left: {r:?}");
        if let Ok(stats) = &r {
            // It stopped inside a group: not every frame of the clip arrived.
            assert!(stats.tracks[0].frames < 90, "{stats:?}");
        }
        if r.is_ok() {
            // What was written is a readable file.
            let streams = probe(&out);
            assert!(!streams.is_empty());
        }
    })
    .await
    .expect("the subscriber hung after its publisher stopped mid-group");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deterministic pseudo-random numbers (xorshift), so a failure can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Hundreds of corrupted copies of a clip (bytes flipped, cut, spliced): every one ends with
/// Ok or a MediaError, never a panic or a hang. No network: a publisher with no session.
#[tokio::test]
async fn mutated_inputs_never_panic() {
    let dir = temp_dir("mutated");
    let clip = std::fs::read(make_clip(&dir, 1)).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut errors = 0;
    for case in 0..300 {
        let mut data = clip.clone();
        match case % 4 {
            3 => {
                // Extreme times: a tfdt of 2^64 - 1 (version 1), in one fragment.
                let all: Vec<usize> = data
                    .windows(4)
                    .enumerate()
                    .filter(|(_, w)| w == b"tfdt")
                    .map(|(i, _)| i)
                    .collect();
                let tfdt = all[(rng.next() as usize) % all.len()];
                data[tfdt + 4] = 1;
                for b in &mut data[tfdt + 8..tfdt + 16] {
                    *b = 0xff;
                }
            }
            0 => {
                for _ in 0..1 + rng.next() % 8 {
                    let i = (rng.next() as usize) % data.len();
                    data[i] = rng.next() as u8;
                }
            }
            1 => {
                // Corrupt a box header region (the first 2 KiB hold ftyp and moov headers).
                let i = (rng.next() as usize) % data.len().min(2048);
                data[i] ^= 0xff;
            }
            _ => {
                let cut = (rng.next() as usize) % data.len();
                data.truncate(cut);
            }
        }
        let publisher = moq_client::Publisher::default();
        let r = tokio::time::timeout(
            Duration::from_secs(10),
            moq_media::publish_fmp4(
                &publisher,
                TrackNamespace::from_strs(["fuzz", &case.to_string()]).unwrap(),
                &data[..],
                IngestOptions::default()
                    .announce(false)
                    .finish_timeout(Duration::from_millis(10)),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("case {case} hung"));
        if r.is_err() {
            errors += 1;
        }
    }
    assert!(
        errors > 50,
        "only {errors} of 300 corrupted inputs were refused"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
