//! Egress: a subscribed broadcast written as a fragmented MP4 byte stream.

use bytes::Bytes;
use futures::StreamExt;
use moq_client::{FullTrackName, JoinFrom, Object, SubscribeOptions, Subscriber, TrackNamespace};
use mp4_atom::{Encode, FixedPoint};
use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::MediaError;
use crate::catalog::{self, Catalog, Track};
use crate::fmp4::atom_from_body;
use crate::ingest::TrackStats;
use crate::loc::LocProperties;

/// Where to start reading the media tracks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Start {
    /// The start of each track's current group (a keyframe): what a live viewer wants.
    #[default]
    CurrentGroup,
    /// The oldest group the publisher or relay still holds (a recording from the start).
    Oldest,
}

/// Which tracks [`subscribe_fmp4`] writes, and from where: `Default` plus chained setters.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct EgressOptions {
    /// Names of the tracks to write; empty (the default): the first video and the first
    /// audio track of the catalog.
    pub tracks: Vec<String>,
    /// Leave video out.
    pub no_video: bool,
    /// Leave audio out.
    pub no_audio: bool,
    /// Where each track starts.
    pub start: Start,
}

impl EgressOptions {
    /// Writes these tracks (by catalog name) instead of the first video and audio ones.
    pub fn tracks(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tracks = names.into_iter().map(Into::into).collect();
        self
    }

    /// Leaves video out.
    pub fn no_video(mut self) -> Self {
        self.no_video = true;
        self
    }

    /// Leaves audio out.
    pub fn no_audio(mut self) -> Self {
        self.no_audio = true;
        self
    }

    /// Sets where the tracks start.
    pub fn start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }

    /// The catalog's tracks these options select, in catalog order: the named ones, or
    /// the first video and the first audio track. [`MediaError::NoTrack`] if a named track
    /// is not in the catalog or nothing is selected.
    pub fn select<'a>(&self, catalog: &'a Catalog) -> Result<Vec<&'a Track>, MediaError> {
        let names = || {
            catalog
                .tracks
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = Vec::new();
        if self.tracks.is_empty() {
            if !self.no_video
                && let Some(t) = catalog.first_with_role("video")
            {
                out.push(t);
            }
            if !self.no_audio
                && let Some(t) = catalog.first_with_role("audio")
            {
                out.push(t);
            }
            if out.is_empty() {
                return Err(MediaError::NoTrack(format!(
                    "no video or audio track in the catalog (tracks: {})",
                    names()
                )));
            }
        } else {
            for name in &self.tracks {
                let t = catalog.track(name).ok_or_else(|| {
                    MediaError::NoTrack(format!(
                        "{name:?} is not in the catalog (tracks: {})",
                        names()
                    ))
                })?;
                out.push(t);
            }
        }
        Ok(out)
    }
}

/// What [`subscribe_fmp4`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EgressStats {
    /// Bytes written to the output.
    pub output_bytes: u64,
    /// One entry per written track.
    pub tracks: Vec<TrackStats>,
}

/// Subscribes to `namespace`'s MSF catalog (the latest complete catalog first, see
/// [`MsfCatalog`]), picks tracks as `options` says, subscribes to them and writes fragmented
/// MP4 to `output`: an init segment (`ftyp`+`moov` with one `trak` per track), then
/// `moof`+`mdat` fragments. Returns when every selected track has ended.
///
/// LOC tracks are written one fragment per group (a group is needed whole to rebuild decode
/// times, so the output runs a group behind the live edge); CMAF fragments are passed through
/// with their track renumbered. The first catalog decides the tracks: later catalog updates
/// are not followed. LOC groups are held until every chosen LOC track has delivered its first
/// group (that fixes the common time 0), or ended.
///
/// If a track fails (its publisher vanished, the session closed), the other tracks are still
/// written to their end, what was received is flushed, and the first failure is returned.
/// Dropping the future cancels the subscriptions; what was written stays written.
pub async fn subscribe_fmp4<W: AsyncWrite + Unpin>(
    subscriber: &Subscriber,
    namespace: TrackNamespace,
    output: W,
    options: EgressOptions,
) -> Result<EgressStats, MediaError> {
    let source = MsfCatalog::subscribe(subscriber, namespace.clone()).await?;
    subscribe_fmp4_with(subscriber, namespace, source, output, options).await
}

/// [`subscribe_fmp4`] with the catalog from `source` (another catalog format, adapted).
pub async fn subscribe_fmp4_with<W: AsyncWrite + Unpin, C: CatalogSource>(
    subscriber: &Subscriber,
    namespace: TrackNamespace,
    mut source: C,
    output: W,
    options: EgressOptions,
) -> Result<EgressStats, MediaError> {
    let catalog = source.next_catalog().await.ok_or_else(|| {
        MediaError::Catalog("the catalog track ended before it carried a catalog".into())
    })??;
    let selected: Vec<Track> = options.select(&catalog)?.into_iter().cloned().collect();
    let mut writer = MediaSubscriber::new(&catalog, &selected, output)?;
    writer.write_init().await?;
    let from = match options.start {
        Start::CurrentGroup => JoinFrom::CurrentGroup,
        Start::Oldest => JoinFrom::Oldest,
    };
    let mut streams = Vec::new();
    for (i, t) in selected.iter().enumerate() {
        let ns = match &t.namespace {
            Some(n) if !n.is_empty() => TrackNamespace::from_strs(n.split('/'))?,
            _ => namespace.clone(),
        };
        let name = FullTrackName::new(ns, t.name.clone().into_bytes())?;
        let consumer = subscriber
            .join(name, SubscribeOptions::default(), from)
            .await
            .map_err(|e| {
                MediaError::NoTrack(format!(
                    "track {:?} of the catalog could not be subscribed: {e}",
                    t.name
                ))
            })?;
        streams.push(
            consumer
                .map(move |o| (i, Some(o)))
                .chain(futures::stream::iter([(i, None)]))
                .boxed(),
        );
    }
    let mut all = futures::stream::select_all(streams);
    let mut failure = None;
    while let Some((i, item)) = all.next().await {
        match item {
            Some(Ok(object)) => writer.object(i, object).await?,
            Some(Err(e)) => {
                tracing::debug!(track = i, error = %e, "media track failed");
                failure.get_or_insert(MediaError::from(e));
                writer.end(i).await?;
            }
            None => writer.end(i).await?,
        }
    }
    writer.finish().await?;
    match failure {
        Some(e) => Err(e),
        None => Ok(writer.stats()),
    }
}

/// Where a subscriber's catalogs come from: the MSF `catalog` track ([`MsfCatalog`]), or
/// another catalog format adapted to [`Catalog`]. Each call yields the next complete catalog
/// (deltas already applied); `None` when the catalog track ended.
#[async_trait::async_trait]
pub trait CatalogSource: Send {
    /// The next catalog. Cancel safety is the implementation's to state.
    async fn next_catalog(&mut self) -> Option<Result<Catalog, MediaError>>;
}

/// The MSF catalog of a broadcast: the track `catalog`, joined at its current group (the
/// latest independent catalog: MSF asks for SUBSCRIBE with a Joining FETCH of offset 0,
/// which [`Subscriber::join`] with [`JoinFrom::CurrentGroup`] sends up to draft-19; from
/// draft-20, where Joining FETCH is gone, `join` asks for the subscription's fill from the
/// start of the current group), then its updates (new groups, and deltas within a group).
pub struct MsfCatalog {
    objects: moq_client::ObjectConsumer,
    current: Option<Catalog>,
    group: Option<u64>,
}

impl std::fmt::Debug for MsfCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MsfCatalog")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl MsfCatalog {
    /// Joins the `catalog` track of `namespace` at its current group.
    pub async fn subscribe(
        subscriber: &Subscriber,
        namespace: TrackNamespace,
    ) -> Result<Self, MediaError> {
        let name = FullTrackName::new(namespace, catalog::CATALOG_TRACK)?;
        // draft-ietf-moq-msf §5: SUBSCRIBE with a Joining FETCH (offset 0) for the latest
        // complete catalog; a higher subscriber priority than the media's.
        let objects = subscriber
            .join(
                name,
                SubscribeOptions::default().priority(0),
                JoinFrom::CurrentGroup,
            )
            .await?;
        Ok(MsfCatalog {
            objects,
            current: None,
            group: None,
        })
    }

    /// Reads catalogs from objects already subscribed to (the `catalog` track, joined).
    pub fn from_objects(objects: moq_client::ObjectConsumer) -> Self {
        MsfCatalog {
            objects,
            current: None,
            group: None,
        }
    }
}

#[async_trait::async_trait]
impl CatalogSource for MsfCatalog {
    /// Cancel safe between objects (an object half-applied is never kept).
    async fn next_catalog(&mut self) -> Option<Result<Catalog, MediaError>> {
        loop {
            let object = match self.objects.next().await? {
                Ok(o) => o,
                Err(e) => return Some(Err(e.into())),
            };
            if object.payload.is_empty() {
                continue;
            }
            let (g, id) = (object.location.group, object.location.object);
            if id > 0 && self.group != Some(g) {
                // draft-ietf-moq-msf §5: updates before the first object of the latest
                // group MUST be ignored.
                continue;
            }
            let next = Catalog::from_object(self.current.as_ref(), id, &object.payload);
            return Some(next.inspect(|c| {
                self.group = Some(g);
                self.current = Some(c.clone());
            }));
        }
    }
}

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

/// The building block under [`subscribe_fmp4`]: given the catalog and the chosen tracks,
/// turns their objects into fMP4 on `output`. Feed it with [`MediaSubscriber::object`] and
/// [`MediaSubscriber::end`].
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

/// A `moof` (one `traf`) and its `mdat`.
fn fragment(
    track_id: u32,
    sequence: u32,
    dts: u64,
    entries: Vec<mp4_atom::TrunEntry>,
    data: &[u8],
) -> Result<Bytes, MediaError> {
    let mut moof = mp4_atom::Moof {
        mfhd: mp4_atom::Mfhd {
            sequence_number: sequence,
        },
        traf: vec![mp4_atom::Traf {
            tfhd: mp4_atom::Tfhd {
                track_id,
                default_base_is_moof: true,
                ..Default::default()
            },
            tfdt: Some(mp4_atom::Tfdt {
                base_media_decode_time: dts,
            }),
            trun: vec![mp4_atom::Trun {
                data_offset: Some(0),
                samples: entries.into(),
            }],
            ..Default::default()
        }],
    };
    let mut out = Vec::new();
    moof.encode(&mut out)?;
    let offset = i32::try_from(out.len() + 8).unwrap_or(i32::MAX);
    for traf in &mut moof.traf {
        for trun in &mut traf.trun {
            trun.data_offset = Some(offset);
        }
    }
    out.clear();
    moof.encode(&mut out)?;
    let size = u32::try_from(data.len() + 8)
        .map_err(|_| MediaError::Object("a group too large for one mdat".into()))?;
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(b"mdat");
    out.extend_from_slice(data);
    Ok(out.into())
}

/// A `trak` for a LOC track, from the catalog's codec string and the decoder description.
fn loc_trak(t: &Track, id: u32, description: Option<&[u8]>) -> Result<mp4_atom::Trak, MediaError> {
    use mp4_atom::Codec;
    let codec = t.codec.as_deref().unwrap_or("");
    let prefix = codec.split('.').next().unwrap_or("");
    let need = || {
        description.ok_or_else(|| {
            MediaError::Catalog(format!(
                "track {:?} ({codec}): no decoder description (initRef) in the catalog",
                t.name
            ))
        })
    };
    let visual = mp4_atom::Visual {
        data_reference_index: 1,
        width: t.width.and_then(|w| u16::try_from(w).ok()).unwrap_or(0),
        height: t.height.and_then(|h| u16::try_from(h).ok()).unwrap_or(0),
        ..Default::default()
    };
    let samplerate = t.samplerate.unwrap_or(48_000);
    let channels: u16 = t
        .channel_config
        .as_deref()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2);
    let audio = mp4_atom::Audio {
        data_reference_index: 1,
        channel_count: channels,
        sample_size: 16,
        sample_rate: FixedPoint::new(u16::try_from(samplerate).unwrap_or(0), 0),
    };
    let (entry, video, timescale) = match prefix {
        "avc1" | "avc3" => {
            let avcc = atom_from_body::<mp4_atom::Avcc>(need()?)?;
            (
                Codec::Avc1(mp4_atom::Avc1 {
                    visual,
                    avcc,
                    ..Default::default()
                }),
                true,
                90_000,
            )
        }
        "hvc1" | "hev1" => {
            let hvcc = atom_from_body::<mp4_atom::Hvcc>(need()?)?;
            let entry = if prefix == "hvc1" {
                Codec::Hvc1(mp4_atom::Hvc1 {
                    visual,
                    hvcc,
                    ..Default::default()
                })
            } else {
                Codec::Hev1(mp4_atom::Hev1 {
                    visual,
                    hvcc,
                    ..Default::default()
                })
            };
            (entry, true, 90_000)
        }
        "av01" => {
            let av1c = atom_from_body::<mp4_atom::Av1c>(need()?)?;
            (
                Codec::Av01(mp4_atom::Av01 {
                    visual,
                    av1c,
                    ..Default::default()
                }),
                true,
                90_000,
            )
        }
        "mp4a" => {
            let asc = need()?;
            let (a, b) = (
                asc.first().copied().unwrap_or(0),
                asc.get(1).copied().unwrap_or(0),
            );
            let dec_specific = mp4_atom::esds::DecoderSpecific {
                profile: a >> 3,
                freq_index: ((a & 7) << 1) | (b >> 7),
                chan_conf: (b >> 3) & 0xf,
                raw: asc.to_vec(),
            };
            let esds = mp4_atom::Esds {
                es_desc: mp4_atom::esds::EsDescriptor {
                    es_id: 1,
                    dec_config: mp4_atom::esds::DecoderConfig {
                        object_type_indication: 0x40,
                        stream_type: 5,
                        max_bitrate: t.bitrate.and_then(|b| u32::try_from(b).ok()).unwrap_or(0),
                        avg_bitrate: t.bitrate.and_then(|b| u32::try_from(b).ok()).unwrap_or(0),
                        dec_specific: Some(dec_specific),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            };
            (
                Codec::Mp4a(mp4_atom::Mp4a {
                    audio,
                    esds,
                    btrt: None,
                    taic: None,
                }),
                false,
                samplerate,
            )
        }
        "opus" => {
            // The OpusHead (RFC 7845 §5.1), if the catalog carries one: pre-skip at 10..12.
            let pre_skip = description
                .and_then(|d| Some(u16::from_le_bytes([*d.get(10)?, *d.get(11)?])))
                .unwrap_or(0);
            (
                Codec::Opus(mp4_atom::Opus {
                    audio: mp4_atom::Audio {
                        sample_rate: FixedPoint::new(48_000, 0),
                        ..audio
                    },
                    dops: mp4_atom::Dops {
                        output_channel_count: u8::try_from(channels).unwrap_or(2),
                        pre_skip,
                        input_sample_rate: samplerate,
                        output_gain: 0,
                        channel_mapping: None,
                    },
                    btrt: None,
                }),
                false,
                48_000,
            )
        }
        _ => {
            return Err(MediaError::Unsupported(format!(
                "track {:?}: codec {codec:?} (supported: avc1, avc3, hvc1, hev1, av01, mp4a, opus)",
                t.name
            )));
        }
    };
    let timescale = t
        .timescale
        .and_then(|s| u32::try_from(s).ok())
        .filter(|s| *s > 0)
        .unwrap_or(timescale);
    let (handler, vmhd, smhd) = if video {
        (b"vide", Some(mp4_atom::Vmhd::default()), None)
    } else {
        (b"soun", None, Some(mp4_atom::Smhd::default()))
    };
    Ok(mp4_atom::Trak {
        tkhd: mp4_atom::Tkhd {
            track_id: id,
            enabled: true,
            in_movie: true,
            volume: FixedPoint::new(u8::from(!video), 0),
            width: FixedPoint::new(u16::try_from(t.width.unwrap_or(0)).unwrap_or(0), 0),
            height: FixedPoint::new(u16::try_from(t.height.unwrap_or(0)).unwrap_or(0), 0),
            ..Default::default()
        },
        mdia: mp4_atom::Mdia {
            mdhd: mp4_atom::Mdhd {
                timescale,
                language: "und".into(),
                ..Default::default()
            },
            hdlr: mp4_atom::Hdlr {
                handler: handler.into(),
                name: if video {
                    "VideoHandler"
                } else {
                    "SoundHandler"
                }
                .into(),
            },
            minf: mp4_atom::Minf {
                vmhd,
                smhd,
                dinf: mp4_atom::Dinf {
                    dref: mp4_atom::Dref {
                        entries: vec![mp4_atom::DrefEntry::Url(mp4_atom::Url {
                            location: String::new(),
                        })],
                    },
                },
                stbl: mp4_atom::Stbl {
                    stsd: mp4_atom::Stsd {
                        codecs: vec![entry],
                    },
                    ..Default::default()
                },
                ..Default::default()
            },
        },
        ..Default::default()
    })
}
