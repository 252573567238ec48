//! [`MediaSubscriber`]: the chosen tracks' objects to fMP4, LOC groups rebuilt into fragments
//! on a common time base, CMAF fragments renumbered.

use bytes::Bytes;
use moq_client::Object;
use mp4_atom::{Encode, FixedPoint};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::boxes::{fragment, loc_trak};
use super::options::EgressStats;
use crate::MediaError;
use crate::catalog::{self, Catalog, Track};
use crate::ingest::TrackStats;
use crate::loc::LocProperties;

/// One frame of a LOC group waiting to be written.
struct Frame {
    pts_us: i64,
    keyframe: bool,
    payload: Bytes,
}

/// Per selected track.
struct OutTrack {
    track: Track,
    id: u32,
    cmaf: bool,
    timescale: u32,
    /// LOC: the group being collected, and its frames.
    group: Option<u64>,
    frames: Vec<Frame>,
    /// LOC: the last decode time and duration written.
    last_dts: Option<i64>,
    last_duration: u32,
    /// The first group has been collected (or the track ended).
    primed: bool,
    ended: bool,
    stats: TrackStats,
}

/// The building block under [`subscribe_fmp4`](crate::subscribe_fmp4): given the catalog and
/// the chosen tracks, turns their objects into fMP4 on `output`. Feed it with
/// [`MediaSubscriber::object`] and [`MediaSubscriber::end`].
///
/// Dropping it drops `output` without writing what it still holds (call
/// [`MediaSubscriber::finish`] first).
pub struct MediaSubscriber<W> {
    output: W,
    tracks: Vec<OutTrack>,
    init: Bytes,
    /// LOC: the wall-clock µs written as time 0, once every track's first group is known.
    base_us: Option<i64>,
    /// LOC groups collected before `base_us` was known: (track, frames).
    waiting: Vec<(usize, Vec<Frame>)>,
    sequence: u32,
    output_bytes: u64,
}

impl<W> std::fmt::Debug for MediaSubscriber<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaSubscriber")
            .field(
                "tracks",
                &self
                    .tracks
                    .iter()
                    .map(|t| &t.track.name)
                    .collect::<Vec<_>>(),
            )
            .field("output_bytes", &self.output_bytes)
            .finish_non_exhaustive()
    }
}

/// Sample flags: a sync sample (depends on no other).
const FLAGS_SYNC: u32 = 0x0200_0000;
/// Sample flags: depends on others, not a sync sample.
const FLAGS_NON_SYNC: u32 = 0x0101_0000;

impl<W: AsyncWrite + Unpin> MediaSubscriber<W> {
    /// Prepares the init segment for `tracks` (taken from `catalog`).
    pub fn new(catalog: &Catalog, tracks: &[Track], output: W) -> Result<Self, MediaError> {
        let mut traks = Vec::new();
        let mut trexs = Vec::new();
        let mut out = Vec::new();
        for (i, t) in tracks.iter().enumerate() {
            let id = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let init = catalog.init_data(t)?;
            let (trak, trex, cmaf) = match t.packaging.as_str() {
                catalog::PACKAGING_CMAF => {
                    let init = init.ok_or_else(|| {
                        MediaError::Catalog(format!(
                            "CMAF track {:?} without init data in the catalog",
                            t.name
                        ))
                    })?;
                    let (_, moov) = crate::cmaf::read_init(&init).map_err(|e| {
                        MediaError::Catalog(format!(
                            "track {:?}: its CMAF header (init data) does not parse: {e}",
                            t.name
                        ))
                    })?;
                    let mut trak = moov.trak.first().cloned().ok_or_else(|| {
                        MediaError::Object(format!(
                            "track {:?}: a CMAF header without a track",
                            t.name
                        ))
                    })?;
                    let old = trak.tkhd.track_id;
                    let mut trex = moov
                        .mvex
                        .as_ref()
                        .and_then(|m| m.trex.iter().find(|x| x.track_id == old).cloned())
                        .unwrap_or(mp4_atom::Trex {
                            default_sample_description_index: 1,
                            ..Default::default()
                        });
                    trak.tkhd.track_id = id;
                    trex.track_id = id;
                    (trak, trex, true)
                }
                catalog::PACKAGING_LOC => {
                    let trak = loc_trak(t, id, init.as_deref())?;
                    let trex = mp4_atom::Trex {
                        track_id: id,
                        default_sample_description_index: 1,
                        ..Default::default()
                    };
                    (trak, trex, false)
                }
                other => {
                    return Err(MediaError::Unsupported(format!(
                        "track {:?}: packaging {other:?} (only \"loc\" and \"cmaf\")",
                        t.name
                    )));
                }
            };
            let timescale = trak.mdia.mdhd.timescale.max(1);
            traks.push(trak);
            trexs.push(trex);
            out.push(OutTrack {
                track: t.clone(),
                id,
                cmaf,
                timescale,
                group: None,
                frames: Vec::new(),
                last_dts: None,
                last_duration: 0,
                primed: false,
                ended: false,
                stats: TrackStats {
                    name: t.name.clone(),
                    ..Default::default()
                },
            });
        }
        let moov = mp4_atom::Moov {
            mvhd: mp4_atom::Mvhd {
                timescale: 1000,
                rate: FixedPoint::new(1, 0),
                volume: FixedPoint::new(1, 0),
                next_track_id: u32::try_from(traks.len() + 1).unwrap_or(u32::MAX),
                ..Default::default()
            },
            mvex: Some(mp4_atom::Mvex {
                mehd: None,
                trex: trexs,
            }),
            trak: traks,
            ..Default::default()
        };
        let mut init = Vec::new();
        crate::cmaf::default_ftyp().encode(&mut init)?;
        moov.encode(&mut init)?;
        Ok(MediaSubscriber {
            output,
            tracks: out,
            init: init.into(),
            base_us: None,
            waiting: Vec::new(),
            sequence: 0,
            output_bytes: 0,
        })
    }

    /// The init segment (`ftyp`+`moov`).
    pub fn init_segment(&self) -> &Bytes {
        &self.init
    }

    /// Writes the init segment.
    ///
    /// Not cancel-safe: dropped part way, the output may hold part of the segment; discard
    /// the writer then.
    pub async fn write_init(&mut self) -> Result<(), MediaError> {
        let init = self.init.clone();
        self.write(&init).await
    }

    async fn write(&mut self, bytes: &[u8]) -> Result<(), MediaError> {
        self.output.write_all(bytes).await?;
        self.output.flush().await?;
        self.output_bytes += bytes.len() as u64;
        Ok(())
    }

    /// The counters so far.
    pub fn stats(&self) -> EgressStats {
        EgressStats {
            output_bytes: self.output_bytes,
            tracks: self.tracks.iter().map(|t| t.stats.clone()).collect(),
        }
    }

    /// Takes an object of track `i` (the index in the chosen tracks).
    ///
    /// Not cancel-safe: it may write fragments to the output, and dropped part way the output
    /// may end inside one; discard the writer then.
    pub async fn object(&mut self, i: usize, object: Object) -> Result<(), MediaError> {
        if object.payload.is_empty() {
            return Ok(());
        }
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(());
        };
        if t.ended {
            return Ok(());
        }
        if t.cmaf {
            self.sequence = self.sequence.wrapping_add(1);
            let (fragment, samples) =
                crate::cmaf::renumber_fragment(&object.payload, t.id, self.sequence)?;
            t.stats.frames += samples;
            t.stats.bytes += object.payload.len() as u64;
            if t.group != Some(object.location.group) {
                t.group = Some(object.location.group);
                t.stats.groups += 1;
            }
            return self.write(&fragment).await;
        }
        let props = LocProperties::from_properties(&object.properties);
        let pts_us = props.timestamp_us().ok_or_else(|| {
            MediaError::Object(format!(
                "LOC object {} of track {:?} without a TIMESTAMP",
                object.location, t.track.name
            ))
        })?;
        let group = object.location.group;
        if t.group != Some(group) && t.group.is_some() {
            self.flush(i).await?;
        }
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(());
        };
        if t.group != Some(group) {
            t.group = Some(group);
            t.stats.groups += 1;
        }
        t.stats.frames += 1;
        t.stats.bytes += object.payload.len() as u64;
        t.frames.push(Frame {
            pts_us: i64::try_from(pts_us).unwrap_or(i64::MAX),
            keyframe: props.is_keyframe() || t.track.role.as_deref() == Some("audio"),
            payload: object.payload,
        });
        Ok(())
    }

    /// Track `i` ended: its last group is written.
    ///
    /// Not cancel-safe, as [`MediaSubscriber::object`].
    pub async fn end(&mut self, i: usize) -> Result<(), MediaError> {
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(());
        };
        if t.ended {
            return Ok(());
        }
        t.ended = true;
        if !t.cmaf {
            self.flush(i).await?;
        }
        if let Some(t) = self.tracks.get_mut(i) {
            t.primed = true;
        }
        self.release().await
    }

    /// Writes what is still held (at the end of every track).
    ///
    /// Not cancel-safe, as [`MediaSubscriber::object`].
    pub async fn finish(&mut self) -> Result<(), MediaError> {
        for i in 0..self.tracks.len() {
            if let Some(t) = self.tracks.get_mut(i) {
                t.primed = true;
            }
            self.flush(i).await?;
        }
        self.release().await?;
        self.output.flush().await?;
        Ok(())
    }

    /// Track `i`'s collected LOC group is complete.
    async fn flush(&mut self, i: usize) -> Result<(), MediaError> {
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(());
        };
        let frames = std::mem::take(&mut t.frames);
        if frames.is_empty() {
            return Ok(());
        }
        t.primed = true;
        if self.base_us.is_some() {
            let fragment = self.loc_fragment(i, frames)?;
            self.write(&fragment).await
        } else {
            self.waiting.push((i, frames));
            self.release().await
        }
    }

    /// Once every LOC track has its first group (or ended), fixes the time base and writes
    /// the groups held until then.
    async fn release(&mut self) -> Result<(), MediaError> {
        if self.base_us.is_some() || self.tracks.iter().any(|t| !t.cmaf && !t.primed) {
            return Ok(());
        }
        // Time 0 is the earliest presentation time of any track. Decode times are the
        // sorted presentation times, so none is below it.
        let base = self
            .waiting
            .iter()
            .flat_map(|(_, frames)| frames.iter().map(|f| f.pts_us))
            .min()
            .unwrap_or(0);
        self.base_us = Some(base);
        for (i, frames) in std::mem::take(&mut self.waiting) {
            let fragment = self.loc_fragment(i, frames)?;
            self.write(&fragment).await?;
        }
        Ok(())
    }

    /// One `moof`+`mdat` for a LOC group of track `i`: decode times rebuilt from the sorted
    /// presentation times (B-frames), composition offsets = PTS - DTS.
    fn loc_fragment(&mut self, i: usize, frames: Vec<Frame>) -> Result<Bytes, MediaError> {
        let base = self.base_us.unwrap_or(0);
        self.sequence = self.sequence.wrapping_add(1);
        let sequence = self.sequence;
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(Bytes::new());
        };
        let ts = i128::from(t.timescale);
        let pts: Vec<i64> = frames
            .iter()
            .map(|f| {
                let v =
                    ((i128::from(f.pts_us) - i128::from(base)) * ts * 2 + 1_000_000) / 2_000_000;
                i64::try_from(v).unwrap_or(0)
            })
            .collect();
        // Decode times: the group's presentation times in increasing order (B-frames are
        // presented after frames decoded later); the composition offsets PTS - DTS may be
        // negative (trun version 1), so no shift is needed.
        let mut sorted = pts.clone();
        sorted.sort_unstable();
        let mut dts = Vec::with_capacity(pts.len());
        let mut prev = t.last_dts;
        for s in &sorted {
            let mut d = (*s).max(0);
            if let Some(p) = prev
                && d <= p
            {
                d = p.saturating_add(1);
            }
            dts.push(d);
            prev = Some(d);
        }
        let default_duration = if t.last_duration > 0 {
            t.last_duration
        } else {
            default_duration(&t.track, t.timescale)
        };
        let mut entries = Vec::with_capacity(frames.len());
        let mut mdat = Vec::with_capacity(frames.iter().map(|f| f.payload.len()).sum());
        for (k, f) in frames.iter().enumerate() {
            let d = dts.get(k).copied().unwrap_or(0);
            let duration = match dts.get(k + 1) {
                Some(n) => u32::try_from(n.saturating_sub(d)).unwrap_or(default_duration),
                None => default_duration,
            };
            entries.push(mp4_atom::TrunEntry {
                duration: Some(duration),
                size: Some(u32::try_from(f.payload.len()).unwrap_or(u32::MAX)),
                flags: Some(if f.keyframe {
                    FLAGS_SYNC
                } else {
                    FLAGS_NON_SYNC
                }),
                cts: Some(pts.get(k).copied().unwrap_or(0).saturating_sub(d)),
            });
            mdat.extend_from_slice(&f.payload);
            if k + 1 < frames.len() {
                t.last_duration = duration;
            }
        }
        t.last_dts = dts.last().copied();
        let first_dts = dts.first().copied().unwrap_or(0);
        fragment(
            t.id,
            sequence,
            u64::try_from(first_dts).unwrap_or(0),
            entries,
            &mdat,
        )
    }
}

/// A frame's duration when a group has one frame and nothing came before.
fn default_duration(t: &Track, timescale: u32) -> u32 {
    let codec = t.codec.as_deref().unwrap_or("");
    if codec.starts_with("mp4a") {
        1024
    } else if codec == "opus" {
        timescale / 50
    } else {
        let fps = t.framerate.filter(|f| *f > 0.0).unwrap_or(30.0);
        (f64::from(timescale) / fps).round() as u32
    }
}
