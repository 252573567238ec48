//! What publish_fmp4 puts on the wire, read back with moq-client alone: the MSF catalog, LOC
//! objects (one frame each, TIMESTAMP in wall-clock µs, the decoder configuration on each
//! group's first object, keyframe marking, audio groups following video's) and CMAF objects
//! (one moof+mdat each, the CMAF header in the catalog).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use moq_client::{FullTrackName, JoinFrom, Object, SubscribeOptions, TrackNamespace, Version};
use moq_media::catalog::Catalog;
use moq_media::loc::{self, LocProperties};
use moq_media::{IngestOptions, Packaging};

const CASE_TIMEOUT: Duration = Duration::from_secs(40);

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

/// Publishes a 3 s clip with `packaging`; returns the catalog and every object of `video`
/// and `audio`, read through the relay.
async fn published(packaging: Packaging) -> (Catalog, Vec<Object>, Vec<Object>, u64) {
    let dir = temp_dir(&format!("packaging-{packaging:?}"));
    let clip = make_clip(&dir, 3);
    let relay = relay();
    let publisher = session(&relay, Version::Draft22, false).await;
    let subscriber = session(&relay, Version::Draft22, false).await;
    let ns = TrackNamespace::from_strs(["live", "wire"]).unwrap();
    let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
    announced.announced().await.unwrap();
    let started = now_us();
    let input = tokio::fs::File::open(&clip).await.unwrap();
    let p = publisher.clone();
    let pns = ns.clone();
    let publishing = tokio::spawn(async move {
        moq_media::publish_fmp4(
            p.publisher(),
            pns,
            input,
            IngestOptions::default()
                .announce(false)
                .realtime(true)
                .packaging(packaging),
        )
        .await
    });
    let join = |name: &str| {
        let s = subscriber.clone();
        let name = FullTrackName::new(ns.clone(), name.to_string().into_bytes()).unwrap();
        async move {
            s.subscriber()
                .join(name, SubscribeOptions::default(), JoinFrom::Oldest)
                .await
                .unwrap()
        }
    };
    let mut catalog_objects = join("catalog").await;
    let first = catalog_objects.next().await.unwrap().unwrap();
    assert_eq!(
        first.location.object, 0,
        "the catalog is object 0 of its group"
    );
    let catalog = Catalog::from_json(&first.payload).unwrap();
    let mut tracks = Vec::new();
    for name in ["video", "audio"] {
        let mut objects = join(name).await;
        tracks.push(tokio::spawn(async move {
            let mut all = Vec::new();
            while let Some(o) = objects.next().await {
                all.push(o.unwrap());
            }
            all
        }));
    }
    let audio = tracks.pop().unwrap().await.unwrap();
    let video = tracks.pop().unwrap().await.unwrap();
    publishing.await.unwrap().unwrap();
    // At the end, a last catalog in a new group: complete, no track live.
    let last = catalog_objects.next().await.unwrap().unwrap();
    assert_eq!(last.location.object, 0);
    assert!(last.location.group > first.location.group);
    let end = Catalog::from_json(&last.payload).unwrap();
    assert_eq!(end.is_complete, Some(true));
    assert!(end.tracks.iter().all(|t| t.is_live == Some(false)));
    assert_eq!(end.tracks.len(), catalog.tracks.len());
    assert!(
        catalog_objects.next().await.is_none(),
        "the catalog track ends"
    );
    let _ = std::fs::remove_dir_all(&dir);
    (catalog, video, audio, started)
}

fn groups(objects: &[Object]) -> Vec<u64> {
    let mut g: Vec<u64> = objects.iter().map(|o| o.location.group).collect();
    g.dedup();
    g
}

#[tokio::test]
async fn loc_objects_on_the_wire() {
    require_ffmpeg();
    let (catalog, video, audio, started) =
        tokio::time::timeout(CASE_TIMEOUT, published(Packaging::Loc))
            .await
            .expect("timed out");
    assert!(catalog.version.starts_with("draft-"));
    let v = catalog.track("video").unwrap();
    let a = catalog.track("audio").unwrap();
    assert_eq!(v.packaging, "loc");
    assert!(v.codec.as_deref().unwrap().starts_with("avc1.64"), "{v:?}");
    assert_eq!(a.codec.as_deref(), Some("mp4a.40.2"));
    assert_eq!((v.width, v.height), (Some(320), Some(240)));
    assert_eq!(a.samplerate, Some(48000));
    assert_eq!(a.channel_config.as_deref(), Some("1"));
    let v_init = catalog.init_data(v).unwrap().unwrap();
    let a_init = catalog.init_data(a).unwrap().unwrap();
    assert_eq!(v_init[0], 1, "avcC configurationVersion");

    // One frame per object: 3 s at 30 fps; a group per GOP (30 frames).
    assert_eq!(video.len(), 90);
    assert_eq!(groups(&video).len(), 3);
    // Audio groups follow video's.
    assert_eq!(groups(&audio).len(), groups(&video).len());
    let now = now_us();
    for (objects, init, config) in [
        (&video, &v_init, loc::VIDEO_CONFIG),
        (&audio, &a_init, loc::AUDIO_CONFIG),
    ] {
        let mut last_group = None;
        for o in objects.iter() {
            let p = LocProperties::from_properties(&o.properties);
            // Wall-clock microseconds, no TIMESCALE.
            assert!(p.timescale.is_none());
            let ts = p.timestamp.expect("TIMESTAMP on every object");
            assert!(
                ts + 1_000_000 >= started && ts <= now + 5_000_000,
                "{ts} vs {started}..{now}"
            );
            let first = last_group != Some(o.location.group);
            last_group = Some(o.location.group);
            assert_eq!(first, o.location.object == 0);
            assert_eq!(
                o.properties.get_bytes(config).is_some(),
                first,
                "the configuration on each group's first object only ({})",
                o.location
            );
            if first {
                assert_eq!(&o.properties.get_bytes(config).unwrap()[..], &init[..]);
            }
        }
    }
    for o in &video {
        let key = LocProperties::from_properties(&o.properties).is_keyframe();
        assert_eq!(
            key,
            o.location.object == 0,
            "keyframes start groups ({})",
            o.location
        );
        // Canonical H.264: 4-byte length-prefixed NAL units that fill the payload.
        let mut rest = &o.payload[..];
        while !rest.is_empty() {
            let n = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            rest = &rest[4 + n..];
        }
    }
}

#[tokio::test]
async fn cmaf_objects_on_the_wire() {
    require_ffmpeg();
    let (catalog, video, audio, _) = tokio::time::timeout(CASE_TIMEOUT, published(Packaging::Cmaf))
        .await
        .expect("timed out");
    for (name, objects) in [("video", &video), ("audio", &audio)] {
        let t = catalog.track(name).unwrap();
        assert_eq!(t.packaging, "cmaf");
        let init = catalog.init_data(t).unwrap().unwrap();
        let (ftyp, moov) = moq_media::cmaf::read_init(&init).unwrap();
        assert!(ftyp.is_some());
        assert_eq!(moov.trak.len(), 1, "one track per CMAF header");
        assert!(!objects.is_empty());
        for o in objects.iter() {
            // One moof then one mdat, nothing else.
            assert_eq!(&o.payload[4..8], b"moof", "{}", o.location);
            let moof_len = u32::from_be_bytes(o.payload[..4].try_into().unwrap()) as usize;
            assert_eq!(&o.payload[moof_len + 4..moof_len + 8], b"mdat");
            let mdat_len =
                u32::from_be_bytes(o.payload[moof_len..moof_len + 4].try_into().unwrap()) as usize;
            assert_eq!(moof_len + mdat_len, o.payload.len());
            // The same fragment renumbered still parses.
            moq_media::cmaf::renumber_fragment(&o.payload, 7, 1).unwrap();
        }
    }
    assert_eq!(groups(&video).len(), 3, "a group per GOP");
    // The two headers merged into one moov, tracks renumbered 1 and 2.
    let inits: Vec<_> = ["video", "audio"]
        .iter()
        .map(|n| {
            catalog
                .init_data(catalog.track(n).unwrap())
                .unwrap()
                .unwrap()
        })
        .collect();
    let (merged, old_ids) = moq_media::cmaf::merge_inits(&inits).unwrap();
    let (_, moov) = moq_media::cmaf::read_init(&merged).unwrap();
    let ids: Vec<u32> = moov.trak.iter().map(|t| t.tkhd.track_id).collect();
    assert_eq!(ids, [1, 2]);
    assert_eq!(old_ids.len(), 2);
    assert_eq!(moov.mvex.unwrap().trex.len(), 2);
}

/// An input whose first byte comes `delay` after the first read: an encoder starting up.
struct Delayed<R> {
    delay: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    inner: R,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Delayed<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if let Some(sleep) = self.delay.as_mut() {
            std::task::ready!(sleep.as_mut().poll(cx));
            self.delay = None;
        }
        std::pin::Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

/// An encoder that takes a while to write its first fragment (ffmpeg with delay_moov writes the
/// moov only then) must not make every TIMESTAMP look that much older: media time 0 is when
/// the first sample arrives, not when the ingest started (fails before: the first frame was
/// dated at the ingest's start).
#[tokio::test]
async fn media_time_zero_is_when_the_first_sample_arrives() {
    const STARTUP: Duration = Duration::from_millis(400);
    tokio::time::timeout(CASE_TIMEOUT, async {
        let dir = temp_dir("anchor");
        let clip = make_clip(&dir, 2);
        let relay = relay();
        let publisher = session(&relay, Version::Draft22, false).await;
        let subscriber = session(&relay, Version::Draft22, false).await;
        let ns = TrackNamespace::from_strs(["live", "anchor"]).unwrap();
        let announced = publisher.publisher().publish_namespace(ns.clone()).unwrap();
        announced.announced().await.unwrap();
        let started = now_us();
        let input = Delayed {
            delay: Some(Box::pin(tokio::time::sleep(STARTUP))),
            inner: tokio::fs::File::open(&clip).await.unwrap(),
        };
        let p = publisher.clone();
        let pns = ns.clone();
        let publishing = tokio::spawn(async move {
            let options = IngestOptions::default().announce(false).realtime(true);
            moq_media::publish_fmp4(p.publisher(), pns, input, options).await
        });
        let join = |name: &str| {
            let s = subscriber.clone();
            let name = FullTrackName::new(ns.clone(), name.to_string().into_bytes()).unwrap();
            async move {
                s.subscriber()
                    .join(name, SubscribeOptions::default(), JoinFrom::Oldest)
                    .await
                    .unwrap()
            }
        };
        let mut catalog = join("catalog").await;
        catalog.next().await.unwrap().unwrap();
        let first = join("video").await.next().await.unwrap().unwrap();
        let ts = LocProperties::from_properties(&first.properties)
            .timestamp_us()
            .unwrap();
        assert!(
            ts >= started + STARTUP.as_micros() as u64,
            "the first frame is dated {} ms after the ingest started, before its data existed \
             ({} ms)",
            (ts as i64 - started as i64) / 1000,
            STARTUP.as_millis()
        );
        publishing.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("timed out");
}

/// `publish_fmp4` with the default options announces the namespace itself (PUBLISH_NAMESPACE),
/// so a subscriber that knows only the name finds the broadcast through the relay.
#[tokio::test]
async fn the_default_options_announce_the_namespace() {
    tokio::time::timeout(CASE_TIMEOUT, async {
        let dir = temp_dir("announce");
        let clip = make_clip(&dir, 2);
        let relay = relay();
        let publisher = session(&relay, Version::Draft22, false).await;
        let subscriber = session(&relay, Version::Draft22, false).await;
        let ns = TrackNamespace::from_strs(["live", "announced"]).unwrap();
        let mut found = subscriber
            .subscriber()
            .subscribe_namespace(TrackNamespace::from_strs(["live"]).unwrap())
            .await
            .unwrap();
        let input = tokio::fs::File::open(&clip).await.unwrap();
        let p = publisher.clone();
        let pns = ns.clone();
        let publishing = tokio::spawn(async move {
            let options = IngestOptions::default().realtime(true);
            moq_media::publish_fmp4(p.publisher(), pns, input, options).await
        });
        match found.next().await.unwrap().unwrap() {
            moq_client::NamespaceEvent::Added(n) => assert_eq!(n, ns),
            other => panic!("expected the namespace, got {other:?}"),
        }
        let catalog = FullTrackName::new(ns.clone(), "catalog").unwrap();
        let mut objects = subscriber
            .subscriber()
            .join(catalog, SubscribeOptions::default(), JoinFrom::Oldest)
            .await
            .unwrap();
        let first = objects.next().await.unwrap().unwrap();
        Catalog::from_json(&first.payload).unwrap();
        publishing.await.unwrap().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("timed out");
}
