//! Egress fed with hostile objects (no network): LOC objects with extreme or missing
//! timestamps and odd group orders, CMAF objects that are not fragments. Every one ends with
//! Ok or a MediaError, never a panic.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use bytes::Bytes;
use common::*;
use moq_client::{Location, Object, Properties, Publisher, TrackNamespace};
use moq_media::catalog::Catalog;
use moq_media::loc::{self, LocProperties};
use moq_media::{IngestOptions, MediaPublisher, MediaSubscriber, Packaging};

/// The catalog ingest makes for a real clip (published to no one).
async fn catalog_for(packaging: Packaging) -> Catalog {
    let dir = temp_dir(&format!("egress-input-{packaging:?}"));
    let clip = std::fs::read(make_clip(&dir, 1)).unwrap();
    let publisher = Publisher::default();
    let mut ingest = MediaPublisher::new(
        &publisher,
        TrackNamespace::from_strs(["egress", "input"]).unwrap(),
        IngestOptions::default()
            .announce(false)
            .packaging(packaging),
    )
    .unwrap();
    ingest.run(&clip[..]).await.unwrap();
    let catalog = ingest.catalog().unwrap().clone();
    let _ = std::fs::remove_dir_all(&dir);
    catalog
}

fn object(group: u64, id: u64, properties: Properties, payload: &[u8]) -> Object {
    Object {
        location: Location::new(group, id),
        properties,
        payload: Bytes::copy_from_slice(payload),
        ..Default::default()
    }
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[tokio::test]
async fn hostile_loc_objects_never_panic() {
    let catalog = catalog_for(Packaging::Loc).await;
    let tracks = catalog.tracks.clone();
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for round in 0..50 {
        let mut out = MediaSubscriber::new(&catalog, &tracks, Vec::new()).unwrap();
        out.write_init().await.unwrap();
        for _ in 0..40 {
            let track = (rng.next() % 2) as usize;
            let ts = match rng.next() % 5 {
                0 => Some(0),
                1 => Some(u64::MAX),
                2 => None,
                3 => Some(rng.next()),
                _ => Some(1_700_000_000_000_000 + rng.next() % 10_000_000),
            };
            let props = LocProperties {
                timestamp: ts,
                timescale: match rng.next() % 4 {
                    0 => Some(0),
                    1 => Some(u64::MAX),
                    2 => Some(90_000),
                    _ => None,
                },
                ..Default::default()
            };
            let props = if rng.next().is_multiple_of(3) {
                props.keyframe()
            } else {
                props
            };
            let mut payload = vec![0u8; (rng.next() % 64) as usize];
            payload.iter_mut().for_each(|b| *b = rng.next() as u8);
            let o = object(
                rng.next() % 4,
                rng.next() % 8,
                props.to_properties().unwrap(),
                &payload,
            );
            let _ = out.object(track, o).await;
        }
        let _ = out.end(0).await;
        let _ = out.finish().await;
        let _ = round;
    }
    // An object with a property of the wrong kind is read as absent.
    let odd = Properties::new()
        .with_bytes(loc::TIMESTAMP + 1, &b"x"[..])
        .unwrap();
    let mut out = MediaSubscriber::new(&catalog, &tracks, Vec::new()).unwrap();
    let err = out
        .object(0, object(0, 0, odd, b"frame"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("TIMESTAMP"), "{err}");
}

#[tokio::test]
async fn hostile_cmaf_objects_are_errors() {
    let catalog = catalog_for(Packaging::Cmaf).await;
    let tracks = catalog.tracks.clone();
    let mut rng = Rng(0x0fed_cba9_8765_4321);
    let mut errors = 0;
    for _ in 0..200 {
        let mut out = MediaSubscriber::new(&catalog, &tracks, Vec::new()).unwrap();
        let mut payload = vec![0u8; (rng.next() % 200) as usize + 1];
        payload.iter_mut().for_each(|b| *b = rng.next() as u8);
        if rng.next().is_multiple_of(2) && payload.len() >= 8 {
            // A plausible box header.
            let n = (payload.len() as u32).to_be_bytes();
            payload[..4].copy_from_slice(&n);
            payload[4..8].copy_from_slice(b"moof");
        }
        if out
            .object(0, object(0, 0, Properties::new(), &payload))
            .await
            .is_err()
        {
            errors += 1;
        }
    }
    assert!(errors > 150, "{errors} of 200 garbage fragments refused");
}
