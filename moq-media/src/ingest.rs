//! Ingest: a fragmented MP4 byte stream published as a broadcast (catalog plus one track per
//! media track).

use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_client::{
    FullTrackName, GroupProducer, NamespaceHandle, Publisher, TrackNamespace, TrackOptions,
    TrackProducer,
};
use tokio::io::AsyncRead;

use crate::MediaError;
use crate::catalog::{self, Catalog, InitData, Track};
use crate::fmp4::{self, BoxReader, Kind, Mp4Track, Sample};
use crate::loc::LocProperties;

/// How media objects are packaged on their tracks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Packaging {
    /// LOC: one frame per object, its timestamp and decoder configuration in Object
    /// Properties (the default).
    #[default]
    Loc,
    /// CMAF (CMSF): one `moof`+`mdat` fragment per object, the track's CMAF header in the
    /// catalog.
    Cmaf,
}

impl Packaging {
    /// The catalog's `packaging` value: "loc" or "cmaf".
    pub fn as_str(self) -> &'static str {
        match self {
            Packaging::Loc => crate::catalog::PACKAGING_LOC,
            Packaging::Cmaf => crate::catalog::PACKAGING_CMAF,
        }
    }
}

/// Settings of [`publish_fmp4`]: `Default` plus chained setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct IngestOptions {
    /// LOC (default) or CMAF.
    pub packaging: Packaging,
    /// Announce the namespace (PUBLISH_NAMESPACE) while publishing (default true).
    pub announce: bool,
    /// Publish no faster than real time, by the samples' timestamps (default false: as fast
    /// as the input arrives; `ffmpeg -re` paces its output itself).
    pub realtime: bool,
    /// The largest box accepted, in bytes (default 64 MiB): a box header announcing more is
    /// an error rather than an allocation.
    pub max_box_size: u64,
    /// How long to wait at the end for subscribers to receive everything (default 2 s).
    pub finish_timeout: std::time::Duration,
}

impl Default for IngestOptions {
    fn default() -> Self {
        IngestOptions {
            packaging: Packaging::Loc,
            announce: true,
            realtime: false,
            max_box_size: 64 << 20,
            finish_timeout: std::time::Duration::from_secs(2),
        }
    }
}

impl IngestOptions {
    /// Sets the packaging.
    pub fn packaging(mut self, packaging: Packaging) -> Self {
        self.packaging = packaging;
        self
    }

    /// Announces the namespace (true, the default) or not (the application did already).
    pub fn announce(mut self, announce: bool) -> Self {
        self.announce = announce;
        self
    }

    /// Paces publishing to real time by the samples' timestamps.
    pub fn realtime(mut self, realtime: bool) -> Self {
        self.realtime = realtime;
        self
    }

    /// Sets the largest accepted box.
    pub fn max_box_size(mut self, bytes: u64) -> Self {
        self.max_box_size = bytes;
        self
    }

    /// Sets how long to wait for delivery at the end.
    pub fn finish_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.finish_timeout = timeout;
        self
    }
}

/// Counters of one published or received track.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TrackStats {
    /// The track name.
    pub name: String,
    /// Frames (samples) carried.
    pub frames: u64,
    /// Groups started.
    pub groups: u64,
    /// Payload bytes carried.
    pub bytes: u64,
}

/// What [`publish_fmp4`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IngestStats {
    /// Bytes read from the input.
    pub input_bytes: u64,
    /// One entry per media track, in catalog order.
    pub tracks: Vec<TrackStats>,
}

/// Publisher priorities (design: catalog 0, audio 1, video 2).
const PRIORITY_CATALOG: u8 = 0;
const PRIORITY_AUDIO: u8 = 1;
const PRIORITY_VIDEO: u8 = 2;

/// With `realtime`, a sample further ahead of the clock than this is not waited for.
const MAX_AHEAD: Duration = Duration::from_secs(10);

/// Without video, an audio track starts a new group this often.
const AUDIO_GROUP: Duration = Duration::from_secs(1);

/// Reads a fragmented MP4 stream (`ftyp`, `moov`, then `moof`+`mdat` pairs, as
/// `ffmpeg -f mp4 -movflags cmaf+separate_moof+delay_moov+skip_trailer -` writes it) and
/// publishes it under `namespace`: a `catalog` track (MSF) and one track per media track
/// (`video`, `audio`, then `video1`, `audio1`, ...), packaged as `options.packaging` says.
/// The input is read box by box: only one box is held in memory at a time.
///
/// Returns at the end of the input, once the tracks are finished (subscribers see them end,
/// within `options.finish_timeout`). Malformed or truncated input is a [`MediaError`]; the
/// tracks end all the same (what was published stays; the group in progress is abandoned).
///
/// Dropping the future ends the tracks at once (the group in progress is abandoned) and
/// withdraws the namespace it announced.
///
/// Cancel safety: dropping the future is the way to stop it early, with the effect above.
pub async fn publish_fmp4<R: AsyncRead + Unpin>(
    publisher: &Publisher,
    namespace: TrackNamespace,
    input: R,
    options: IngestOptions,
) -> Result<IngestStats, MediaError> {
    let mut ingest = MediaPublisher::new(publisher, namespace, options)?;
    let result = ingest.run(input).await;
    let stats = ingest.finish(result.is_ok()).await;
    result.map(|()| stats)
}

/// One published media track.
struct OutTrack {
    info: Mp4Track,
    name: String,
    producer: TrackProducer,
    group: Option<GroupProducer>,
    /// Presentation time (µs from the anchor) at which the current group started.
    group_start_us: i64,
    /// The next sample must start a new group (audio following video's groups).
    new_group: bool,
    /// Decode time after the last sample (for a `traf` without `tfdt`).
    next_dts: u64,
    stats: TrackStats,
}

/// The building block under [`publish_fmp4`]: creates the `catalog` track, announces the
/// namespace, and publishes what [`MediaPublisher::run`] reads. Dropping it ends every
/// track.
pub struct MediaPublisher {
    publisher: Publisher,
    namespace: TrackNamespace,
    options: IngestOptions,
    catalog_track: TrackProducer,
    _announced: Option<NamespaceHandle>,
    tracks: Vec<OutTrack>,
    catalog: Option<Catalog>,
    ftyp: Option<mp4_atom::Ftyp>,
    /// Wall clock (µs since the Unix epoch) of media time 0: when the first sample arrived.
    anchor_us: u64,
    started: Instant,
    /// The input's decode time (µs) that `anchor_us` and `started` stand for: the first
    /// sample's, so an input whose times do not start at 0 is neither delayed nor dated in
    /// the future.
    origin_us: Option<i64>,
    input_bytes: u64,
}

impl std::fmt::Debug for MediaPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaPublisher")
            .field("namespace", &self.namespace)
            .field(
                "tracks",
                &self.tracks.iter().map(|t| &t.name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// `t` media units of `timescale` in microseconds, rounded to the nearest.
fn to_us(t: i64, timescale: u32) -> i64 {
    let ts = i128::from(timescale.max(1));
    let v = (i128::from(t) * 1_000_000 * 2 + ts) / (2 * ts);
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl MediaPublisher {
    /// Creates the `catalog` track under `namespace` and announces the namespace (unless
    /// `options.announce` is false). Media tracks are created when the `moov` is read.
    pub fn new(
        publisher: &Publisher,
        namespace: TrackNamespace,
        options: IngestOptions,
    ) -> Result<Self, MediaError> {
        let name = FullTrackName::new(namespace.clone(), catalog::CATALOG_TRACK)?;
        // draft-ietf-moq-msf §5: the catalog SHOULD have a higher priority than its tracks.
        // draft-ietf-moq-msf §6.1: a restarted publisher's first Group ID MUST be above any
        // it published before: groups are numbered from the wall clock (ms), as MSF suggests.
        let catalog_track = publisher.create_track_with(
            name,
            TrackOptions::default()
                .priority(PRIORITY_CATALOG)
                .groups_from_clock(),
        )?;
        let announced = if options.announce {
            Some(publisher.publish_namespace(namespace.clone())?)
        } else {
            None
        };
        Ok(MediaPublisher {
            publisher: publisher.clone(),
            namespace,
            options,
            catalog_track,
            _announced: announced,
            tracks: Vec::new(),
            catalog: None,
            ftyp: None,
            anchor_us: now_us(),
            started: Instant::now(),
            origin_us: None,
            input_bytes: 0,
        })
    }

    /// The catalog published, once the `moov` was read.
    pub fn catalog(&self) -> Option<&Catalog> {
        self.catalog.as_ref()
    }

    /// Reads `input` to its end and publishes it.
    ///
    /// Cancel safety: dropped part way, input read but not yet published is lost and the
    /// group in progress stays open; the tracks end with [`MediaPublisher::finish`] or when this is
    /// dropped.
    pub async fn run<R: AsyncRead + Unpin>(&mut self, input: R) -> Result<(), MediaError> {
        let mut reader = BoxReader::new(input, self.options.max_box_size);
        let mut pending_moof: Option<(fmp4::RawBox, mp4_atom::Moof)> = None;
        let result = async {
            while let Some(b) = reader.next().await? {
                self.input_bytes = reader.position();
                match &b.kind {
                    b"ftyp" => {
                        self.ftyp = Some(fmp4::guarded("the ftyp", || {
                            let mut body = b.bytes.as_ref();
                            Ok(mp4_atom::Decode::decode(&mut body)?)
                        })?);
                    }
                    b"moov" => {
                        if self.catalog.is_some() {
                            return Err(MediaError::Unsupported(
                                "a second moov (a new initialization segment) in the input".into(),
                            ));
                        }
                        let (moov, tracks) = fmp4::read_moov(b.body()).map_err(|e| match e {
                            MediaError::Mp4(m) => {
                                MediaError::Mp4(format!("the moov at byte {}: {m}", b.pos))
                            }
                            e => e,
                        })?;
                        self.start(&moov, tracks)?;
                    }
                    b"moof" => {
                        if self.catalog.is_none() {
                            return Err(MediaError::Mp4("a moof before the moov".into()));
                        }
                        if pending_moof.is_some() {
                            return Err(MediaError::Mp4("a moof without its mdat".into()));
                        }
                        let moof = fmp4::decode_moof(&b.bytes).map_err(|e| {
                            MediaError::Mp4(format!("the moof at byte {}: {e}", b.pos))
                        })?;
                        pending_moof = Some((b, moof));
                    }
                    b"mdat" => {
                        let Some((moof_box, moof)) = pending_moof.take() else {
                            return Err(MediaError::Mp4(
                                "an mdat without a moof before it: not a fragmented MP4".into(),
                            ));
                        };
                        self.fragment(moof_box, moof, b).await?;
                    }
                    // styp, sidx, prft, free, emsg, mfra, ...: nothing to publish.
                    _ => {}
                }
            }
            self.input_bytes = reader.position();
            if self.catalog.is_none() {
                return Err(MediaError::Truncated(format!(
                    "the input ended after {} bytes, before the moov",
                    reader.position()
                )));
            }
            if pending_moof.is_some() {
                return Err(MediaError::Truncated(
                    "the input ended after a moof, before its mdat".into(),
                ));
            }
            Ok(())
        }
        .await;
        if result.is_err() {
            self.input_bytes = reader.position();
        }
        result
    }

    /// Creates the media tracks and publishes the catalog.
    fn start(&mut self, moov: &mp4_atom::Moov, tracks: Vec<Mp4Track>) -> Result<(), MediaError> {
        if tracks.is_empty() {
            return Err(MediaError::Unsupported(
                "the moov has no video or audio track".into(),
            ));
        }
        let mut catalog = Catalog::new();
        let (mut videos, mut audios) = (0, 0);
        let ftyp = self.ftyp.clone().unwrap_or_else(crate::cmaf::default_ftyp);
        for info in tracks {
            let (n, priority) = match info.kind {
                Kind::Video => (&mut videos, PRIORITY_VIDEO),
                Kind::Audio => (&mut audios, PRIORITY_AUDIO),
            };
            let name = match *n {
                0 => info.kind.role().to_string(),
                k => format!("{}{k}", info.kind.role()),
            };
            *n += 1;
            let init = match self.options.packaging {
                Packaging::Loc => info.description.clone(),
                Packaging::Cmaf => Some(crate::cmaf::init_segment(
                    &ftyp, &moov.mvhd, &info.trak, &info.trex,
                )?),
            };
            let mut track = Track {
                name: name.clone(),
                packaging: self.options.packaging.as_str().into(),
                is_live: Some(true),
                role: Some(info.kind.role().into()),
                render_group: Some(1),
                codec: Some(info.codec.clone()),
                timescale: Some(u64::from(info.timescale)),
                bitrate: info.bitrate,
                width: info.width,
                height: info.height,
                samplerate: info.samplerate,
                channel_config: info.channels.map(|c| c.to_string()),
                ..Default::default()
            };
            if let Some(init) = init {
                track.init_ref = Some(name.clone());
                catalog
                    .init_data_list
                    .push(InitData::inline(name.clone(), &init));
            }
            catalog.tracks.push(track);
            let full = FullTrackName::new(self.namespace.clone(), name.clone().into_bytes())?;
            let producer = self.publisher.create_track_with(
                full,
                TrackOptions::default()
                    .priority(priority)
                    .groups_from_clock(),
            )?;
            self.tracks.push(OutTrack {
                info,
                stats: TrackStats {
                    name: name.clone(),
                    ..Default::default()
                },
                name,
                producer,
                group: None,
                group_start_us: 0,
                new_group: true,
                next_dts: 0,
            });
        }
        catalog.validate()?;
        // draft-ietf-moq-msf §5: an independent catalog is object 0 of a new group, subgroup 0.
        let mut group = self.catalog_track.append_group()?;
        group.write(catalog.to_json())?;
        group.finish()?;
        tracing::debug!(namespace = %self.namespace, tracks = catalog.tracks.len(), "catalog published");
        self.catalog = Some(catalog);
        Ok(())
    }

    /// Publishes the samples of one `moof`+`mdat` pair.
    async fn fragment(
        &mut self,
        moof_box: fmp4::RawBox,
        moof: mp4_atom::Moof,
        mdat: fmp4::RawBox,
    ) -> Result<(), MediaError> {
        let mut data = Vec::with_capacity(moof_box.bytes.len() + mdat.bytes.len());
        data.extend_from_slice(&moof_box.bytes);
        data.extend_from_slice(&mdat.bytes);
        let data = Bytes::from(data);
        let infos: Vec<Mp4Track> = self.tracks.iter().map(|t| t.info.clone()).collect();
        let tracks = &self.tracks;
        let mut next_dts = |id: u32| {
            tracks
                .iter()
                .find(|t| t.info.id == id)
                .map_or(0, |t| t.next_dts)
        };
        let runs = fmp4::read_fragment(&moof, moof_box.pos, &data, &infos, &mut next_dts)?;
        if self.options.packaging == Packaging::Cmaf && moof.traf.len() > 1 {
            return Err(MediaError::Unsupported(
                "CMAF packaging of a moof with several tracks (use -movflags separate_moof)".into(),
            ));
        }
        for run in runs {
            let Some(first) = run.samples.first().cloned() else {
                continue;
            };
            let i = self.index(run.track_id);
            let dts_us = to_us(
                first.dts as i64,
                self.tracks.get(i).map_or(1, |t| t.info.timescale),
            );
            let origin = match self.origin_us {
                Some(origin) => origin,
                None => {
                    // Media time 0 is when the first sample arrives, not when the ingest
                    // started: an encoder may take a while to write its first fragment (ffmpeg
                    // with delay_moov writes the moov only then), and every frame's TIMESTAMP
                    // would carry that wait as latency.
                    self.anchor_us = now_us();
                    self.started = Instant::now();
                    *self.origin_us.insert(dts_us)
                }
            };
            if self.options.realtime {
                let us = dts_us.saturating_sub(origin);
                let at = self
                    .started
                    .checked_add(Duration::from_micros(us.max(0) as u64));
                // A time far ahead (a jump in the input's times) is not waited for.
                match at {
                    Some(at) if at <= Instant::now() + MAX_AHEAD => {
                        tokio::time::sleep_until(at.into()).await;
                    }
                    _ => tracing::debug!(us, "a sample far ahead of the clock: not paced"),
                }
            }
            match self.options.packaging {
                Packaging::Loc => {
                    for s in run.samples {
                        self.publish_loc(run.track_id, s)?;
                    }
                }
                Packaging::Cmaf => {
                    self.publish_cmaf(run.track_id, &first, &run.samples, data.clone())?
                }
            }
        }
        Ok(())
    }

    fn index(&self, track_id: u32) -> usize {
        self.tracks
            .iter()
            .position(|t| t.info.id == track_id)
            .unwrap_or(usize::MAX)
    }

    /// Starts a new group on track `i` if its next sample (`s`, at `pts_us`) should.
    fn maybe_new_group(&mut self, i: usize, s: &Sample, pts_us: i64) -> Result<bool, MediaError> {
        let has_video = self.tracks.iter().any(|t| t.info.kind == Kind::Video);
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(false);
        };
        let start = match t.info.kind {
            // A group starts at each keyframe (and the first sample in any case).
            Kind::Video => s.keyframe || t.group.is_none(),
            Kind::Audio => {
                t.group.is_none()
                    || t.new_group
                    || (!has_video
                        && pts_us.saturating_sub(t.group_start_us)
                            >= AUDIO_GROUP.as_micros() as i64)
            }
        };
        if !start {
            return Ok(false);
        }
        if let Some(g) = t.group.take() {
            g.finish()?;
        }
        t.group = Some(t.producer.append_group()?);
        t.group_start_us = pts_us;
        t.new_group = false;
        t.stats.groups += 1;
        let video = t.info.kind == Kind::Video;
        if video {
            // Audio follows video's groups.
            for a in self
                .tracks
                .iter_mut()
                .filter(|a| a.info.kind == Kind::Audio)
            {
                a.new_group = true;
            }
        }
        Ok(true)
    }

    fn publish_loc(&mut self, track_id: u32, s: Sample) -> Result<(), MediaError> {
        let i = self.index(track_id);
        let Some(t) = self.tracks.get(i) else {
            return Ok(());
        };
        let pts = (s.dts as i64)
            .saturating_add(s.cts)
            .saturating_sub(t.info.edit_shift);
        let pts_us = to_us(pts, t.info.timescale).saturating_sub(self.origin_us.unwrap_or(0));
        let first = self.maybe_new_group(i, &s, pts_us)?;
        let anchor = self.anchor_us;
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(());
        };
        // LOC: TIMESTAMP without TIMESCALE is wall-clock microseconds since the Unix epoch.
        let mut props = LocProperties {
            timestamp: Some(anchor.saturating_add_signed(pts_us)),
            ..Default::default()
        };
        if first {
            match t.info.kind {
                Kind::Video => props.video_config = t.info.description.clone(),
                Kind::Audio => props.audio_config = t.info.description.clone(),
            }
        }
        if t.info.kind == Kind::Video && s.keyframe {
            props = props.keyframe();
        }
        t.next_dts = s.dts.saturating_add(u64::from(s.duration));
        t.stats.frames += 1;
        t.stats.bytes += s.data.len() as u64;
        let props = props.to_properties()?;
        if let Some(g) = t.group.as_mut() {
            g.write_with(s.data, props)?;
        }
        Ok(())
    }

    fn publish_cmaf(
        &mut self,
        track_id: u32,
        first: &Sample,
        samples: &[Sample],
        fragment: Bytes,
    ) -> Result<(), MediaError> {
        let i = self.index(track_id);
        let Some(t) = self.tracks.get(i) else {
            return Ok(());
        };
        let pts = (first.dts as i64)
            .saturating_add(first.cts)
            .saturating_sub(t.info.edit_shift);
        let pts_us = to_us(pts, t.info.timescale).saturating_sub(self.origin_us.unwrap_or(0));
        self.maybe_new_group(i, first, pts_us)?;
        let Some(t) = self.tracks.get_mut(i) else {
            return Ok(());
        };
        if let Some(last) = samples.last() {
            t.next_dts = last.dts.saturating_add(u64::from(last.duration));
        }
        t.stats.frames += samples.len() as u64;
        t.stats.bytes += fragment.len() as u64;
        if let Some(g) = t.group.as_mut() {
            // CMSF: one object per CMAF fragment (moof+mdat) of one track.
            g.write(fragment)?;
        }
        Ok(())
    }

    /// Ends every track: after a clean end of input the groups in progress are finished and
    /// delivery is awaited (`finish_timeout`); after an error they are abandoned. Returns the
    /// counters.
    ///
    /// Cancel safety: dropping the future part way abandons the groups in progress, as after
    /// an error.
    pub async fn finish(mut self, clean: bool) -> IngestStats {
        let mut stats = IngestStats {
            input_bytes: self.input_bytes,
            tracks: Vec::new(),
        };
        let timeout = self.options.finish_timeout;
        let mut ends = Vec::new();
        for mut t in self.tracks.drain(..) {
            if let Some(g) = t.group.take() {
                if clean {
                    let _ = g.finish();
                } else {
                    g.abort();
                }
            }
            stats.tracks.push(t.stats.clone());
            ends.push(t.producer.finish(timeout));
        }
        if clean && let Some(mut last) = self.catalog.take() {
            // The broadcast is over: a last independent catalog, in a new group, says so
            // (MSF §5.1.3 isComplete, §5.2.7 isLive false; generatedAt is left out, as MSF
            // §5.1.2 asks when tracks are not live).
            last.is_complete = Some(true);
            last.generated_at = None;
            for t in &mut last.tracks {
                t.is_live = Some(false);
            }
            if let Ok(mut g) = self.catalog_track.append_group()
                && g.write(last.to_json()).is_ok()
            {
                let _ = g.finish();
            }
        }
        ends.push(self.catalog_track.finish(timeout));
        // Waiting is best effort: a track nobody subscribed to times out at once.
        let _ = futures::future::join_all(ends).await;
        stats
    }
}
