//! Reading a broadcast in the layout of Cloudflare's `moq-pub` (crates.io `moq-pub` 0.10,
//! draft-18) as a fragmented MP4 byte stream.
//!
//! `moq-pub` predates MSF: it publishes fMP4 from ffmpeg's stdout as
//!
//! - a track `.catalog`: one JSON object (group 0, object 0) in the shape of the old WARP
//!   catalog (draft-ietf-moq-warp-00, `moq-catalog` 0.2): `version`, `streamingFormat`,
//!   `streamingFormatVersion`, `supportsDeltaUpdates`, `commonTrackFields` (fields shared by
//!   every track: `namespace`, `packaging`, `renderGroup`, `altGroup`) and `tracks`, each with
//!   `name`, `initTrack` and `selectionParams` (`codec`, `width`, `height`, `samplerate`,
//!   `channelConfig`, `bitrate`);
//! - an init track (named by `initTrack`, `0.mp4`): one object, the file's `ftyp` and `moov`
//!   with every track of the input;
//! - one track per input track (`<track id>.m4s`), packaging `cmaf`: each object one CMAF
//!   chunk (`moof` + `mdat`, one `traf`); a new group at every video keyframe, for every track.
//!
//! [`subscribe_warp`] reads the catalog and the init segment and joins every media track;
//! [`WarpBroadcast::write_fmp4`] writes the init segment and then each chunk as it arrives,
//! which is a fragmented MP4 file (`ffprobe`, `ffplay -` and browsers' MSE read it).
//!
//! `moq-pub` writes its catalog and init objects once, when it reads the `moov`, in groups it
//! closes at once, and never ends a track (it does not handle the end of its input). Every
//! track is therefore read with [`Subscriber::join`] from [`JoinFrom::Oldest`]: whatever
//! `moq-pub` or the relay still holds (a Joining FETCH at draft-18, the only draft `moq-pub`
//! speaks; `moq-pub --fetch-groups N` lets it answer FETCH itself), then what follows; and
//! [`WarpBroadcast::write_fmp4`] ends when every track has ended or when the caller says so.

use std::collections::BTreeMap;
use std::future::Future;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::{BoxStream, SelectAll};
use moq_client::{
    FullTrackName, JoinFrom, ObjectConsumer, ObjectStatus, SubscribeOptions, Subscriber,
    TrackNamespace,
};
use mp4_atom::{Atom, Decode, DecodeMaybe, Ftyp, Header, Moof, Moov};
use serde::Deserialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// The name of `moq-pub`'s catalog track.
pub const CATALOG_TRACK: &str = ".catalog";

/// What went wrong reading a `moq-pub` broadcast.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WarpError {
    /// A subscription or join failed, or a track ended with an error.
    #[error("track {track}: {source}")]
    Transport {
        /// The track's name.
        track: String,
        /// The transport's error.
        #[source]
        source: moq_client::Error,
    },
    /// A track ended before its first object (catalog or init segment).
    #[error("track {0} ended before its first object")]
    Empty(String),
    /// The catalog is not JSON of the expected shape, or names what cannot be read.
    #[error("catalog: {0}")]
    Catalog(String),
    /// The init segment is not an `ftyp` followed by a `moov`, or does not describe the
    /// catalog's tracks.
    #[error("init segment: {0}")]
    Init(String),
    /// An object of a media track is not one `moof` (one `traf`) followed by one `mdat`.
    #[error("track {track}, object {location}: {reason}")]
    Chunk {
        /// The track's name.
        track: String,
        /// The object's group and object ID.
        location: moq_client::Location,
        /// What is wrong with it.
        reason: String,
    },
    /// Writing the output failed.
    #[error("output: {0}")]
    Io(#[from] std::io::Error),
}

/// The catalog `moq-pub` publishes (the WARP catalog of `moq-catalog` 0.2). Unknown fields are
/// ignored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct WarpCatalog {
    /// The catalog format's version (`moq-pub` writes 1).
    pub version: u16,
    /// The streaming format (`moq-pub` writes 1, WARP).
    #[serde(rename = "streamingFormat")]
    pub streaming_format: u16,
    /// The streaming format's version (`moq-pub` writes "0.2").
    #[serde(rename = "streamingFormatVersion")]
    pub streaming_format_version: String,
    /// Fields every track has unless it sets them itself.
    #[serde(rename = "commonTrackFields", default)]
    pub common: WarpCommonFields,
    /// The tracks.
    pub tracks: Vec<WarpTrack>,
}

/// A WARP catalog's `commonTrackFields`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct WarpCommonFields {
    /// The tracks' namespace, in `/`-separated path form.
    pub namespace: Option<String>,
    /// The tracks' packaging (`cmaf` or `loc`).
    pub packaging: Option<String>,
    /// The tracks' render group.
    #[serde(rename = "renderGroup")]
    pub render_group: Option<u16>,
}

/// One track of a WARP catalog.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct WarpTrack {
    /// The track's name.
    pub name: String,
    /// Its namespace, when it differs from [`WarpCommonFields::namespace`].
    pub namespace: Option<String>,
    /// The track that holds its init segment.
    #[serde(rename = "initTrack")]
    pub init_track: Option<String>,
    /// Its packaging, when it differs from [`WarpCommonFields::packaging`].
    pub packaging: Option<String>,
    /// Its codec and dimensions.
    #[serde(rename = "selectionParams", default)]
    pub selection: WarpSelection,
}

/// A WARP track's `selectionParams`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct WarpSelection {
    /// The codec string (RFC 6381), e.g. `avc1.64001f` or `mp4a.40.2`.
    pub codec: Option<String>,
    /// Width in pixels.
    pub width: Option<u32>,
    /// Height in pixels.
    pub height: Option<u32>,
    /// Audio sample rate.
    pub samplerate: Option<u32>,
    /// Audio channel configuration (a string, e.g. "2").
    #[serde(rename = "channelConfig")]
    pub channel_config: Option<String>,
    /// Bits per second.
    pub bitrate: Option<u32>,
}

impl WarpCatalog {
    /// Parses and checks a catalog: JSON of this shape, at least one track, every track
    /// named, packaged as `cmaf` (its own field or the common one) and with one init track
    /// shared by all (as `moq-pub` writes).
    pub fn parse(json: &[u8]) -> Result<Self, WarpError> {
        let catalog: WarpCatalog = serde_json::from_slice(json)
            .map_err(|e| WarpError::Catalog(format!("not a WARP catalog: {e}")))?;
        if catalog.tracks.is_empty() {
            return Err(WarpError::Catalog("no tracks".into()));
        }
        for track in &catalog.tracks {
            if track.name.is_empty() {
                return Err(WarpError::Catalog("a track has an empty name".into()));
            }
            match catalog.packaging(track) {
                Some("cmaf") => {}
                Some(other) => {
                    return Err(WarpError::Catalog(format!(
                        "track {}: packaging {other:?} is not supported (only cmaf)",
                        track.name
                    )));
                }
                None => {
                    return Err(WarpError::Catalog(format!(
                        "track {}: no packaging",
                        track.name
                    )));
                }
            }
        }
        catalog.init_track()?;
        Ok(catalog)
    }

    /// A track's packaging: its own, or the common one.
    pub fn packaging<'a>(&'a self, track: &'a WarpTrack) -> Option<&'a str> {
        track
            .packaging
            .as_deref()
            .or(self.common.packaging.as_deref())
    }

    /// The init track all the tracks name.
    pub fn init_track(&self) -> Result<&str, WarpError> {
        let mut init = None;
        for track in &self.tracks {
            let Some(name) = track.init_track.as_deref().filter(|n| !n.is_empty()) else {
                return Err(WarpError::Catalog(format!(
                    "track {}: no initTrack",
                    track.name
                )));
            };
            match init {
                None => init = Some(name),
                Some(seen) if seen == name => {}
                Some(seen) => {
                    return Err(WarpError::Catalog(format!(
                        "tracks name different init tracks ({seen}, {name}): not supported"
                    )));
                }
            }
        }
        init.ok_or_else(|| WarpError::Catalog("no tracks".into()))
    }

    /// The namespace of `track`: its own, the common one, or `broadcast` when the catalog
    /// names none.
    pub fn namespace_of(
        &self,
        track: &WarpTrack,
        broadcast: &TrackNamespace,
    ) -> Result<TrackNamespace, WarpError> {
        match track
            .namespace
            .as_deref()
            .or(self.common.namespace.as_deref())
        {
            None => Ok(broadcast.clone()),
            Some(path) => path.parse().map_err(|e| {
                WarpError::Catalog(format!("track {}: namespace {path:?}: {e}", track.name))
            }),
        }
    }
}

/// The track IDs the `moov` of an init segment describes, in order; checks that the segment
/// is an `ftyp` followed by a `moov` and nothing else.
pub fn init_track_ids(init: &[u8]) -> Result<Vec<u32>, WarpError> {
    let mut buf = init;
    Ftyp::decode(&mut buf).map_err(|e| WarpError::Init(format!("no ftyp first: {e}")))?;
    let moov = Moov::decode(&mut buf).map_err(|e| WarpError::Init(format!("no moov: {e}")))?;
    if !buf.is_empty() {
        return Err(WarpError::Init(format!(
            "{} bytes after the moov",
            buf.len()
        )));
    }
    let ids: Vec<u32> = moov.trak.iter().map(|t| t.tkhd.track_id).collect();
    if ids.is_empty() {
        return Err(WarpError::Init("the moov has no track".into()));
    }
    Ok(ids)
}

/// One CMAF chunk: the track ID its `traf` names and its number of samples. Checks that the
/// object is exactly one `moof` with one `traf` and one `mdat`.
pub fn chunk_samples(object: &[u8]) -> Result<(u32, u64), String> {
    let mut buf = object;
    let moof = Moof::decode(&mut buf).map_err(|e| format!("no moof first: {e}"))?;
    let [traf] = moof.traf.as_slice() else {
        return Err(format!("{} trafs in the moof, not one", moof.traf.len()));
    };
    let samples = traf.trun.iter().map(|trun| trun.samples.len() as u64).sum();
    let header = Header::decode_maybe(&mut buf)
        .map_err(|e| format!("no mdat after the moof: {e}"))?
        .ok_or("no mdat after the moof")?;
    if header.kind != mp4_atom::Mdat::KIND {
        return Err(format!("{} after the moof, not mdat", header.kind));
    }
    let size = header.size.unwrap_or(buf.len());
    if size != buf.len() {
        return Err(format!(
            "the mdat says {size} bytes, the object has {}",
            buf.len()
        ));
    }
    Ok((traf.tfhd.track_id, samples))
}

/// What [`WarpBroadcast::write_fmp4`] wrote so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WarpStats {
    /// Chunks (objects) written.
    pub chunks: u64,
    /// Bytes written, the init segment included.
    pub bytes: u64,
    /// Samples written per MP4 track ID.
    pub samples: BTreeMap<u32, u64>,
}

/// A `moq-pub` broadcast being read: its catalog, init segment and joined media tracks.
///
/// Dropping it cancels the media tracks' subscriptions.
pub struct WarpBroadcast {
    catalog: WarpCatalog,
    init: Bytes,
    track_ids: Vec<u32>,
    tracks: Vec<(String, ObjectConsumer)>,
}

impl std::fmt::Debug for WarpBroadcast {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarpBroadcast")
            .field("catalog", &self.catalog)
            .field("init", &self.init.len())
            .field("track_ids", &self.track_ids)
            .finish_non_exhaustive()
    }
}

/// Reads the first object of `name`, joined from the oldest group held.
async fn first_object(subscriber: &Subscriber, name: FullTrackName) -> Result<Bytes, WarpError> {
    let track = String::from_utf8_lossy(&name.name).into_owned();
    let mut objects = join(subscriber, name).await?;
    while let Some(object) = objects.next().await {
        let object = object.map_err(|source| WarpError::Transport {
            track: track.clone(),
            source,
        })?;
        if object.status == ObjectStatus::Normal && !object.payload.is_empty() {
            return Ok(object.payload);
        }
    }
    Err(WarpError::Empty(track))
}

async fn join(subscriber: &Subscriber, name: FullTrackName) -> Result<ObjectConsumer, WarpError> {
    let track = String::from_utf8_lossy(&name.name).into_owned();
    subscriber
        .join(name, SubscribeOptions::default(), JoinFrom::Oldest)
        .await
        .map_err(|source| WarpError::Transport { track, source })
}

fn full_name(namespace: &TrackNamespace, name: &str) -> Result<FullTrackName, WarpError> {
    FullTrackName::new(namespace.clone(), Bytes::copy_from_slice(name.as_bytes()))
        .map_err(|e| WarpError::Catalog(format!("track name {name:?}: {e}")))
}

/// Reads the catalog and the init segment of the `moq-pub` broadcast `namespace` and joins
/// each of its media tracks from the oldest group held.
///
/// Cancel safety: dropping the future cancels the subscriptions it made.
pub async fn subscribe_warp(
    subscriber: &Subscriber,
    namespace: TrackNamespace,
) -> Result<WarpBroadcast, WarpError> {
    let json = first_object(subscriber, full_name(&namespace, CATALOG_TRACK)?).await?;
    let catalog = WarpCatalog::parse(&json)?;
    tracing::debug!(?catalog, "moq-pub catalog");
    // The init track is in the namespace of the tracks that name it.
    let first = catalog
        .tracks
        .first()
        .ok_or_else(|| WarpError::Catalog("no tracks".into()))?;
    let init_ns = catalog.namespace_of(first, &namespace)?;
    let init = first_object(subscriber, full_name(&init_ns, catalog.init_track()?)?).await?;
    let track_ids = init_track_ids(&init)?;
    if track_ids.len() != catalog.tracks.len() {
        return Err(WarpError::Init(format!(
            "the moov has {} tracks, the catalog {}",
            track_ids.len(),
            catalog.tracks.len()
        )));
    }
    let mut tracks = Vec::with_capacity(catalog.tracks.len());
    for track in &catalog.tracks {
        let ns = catalog.namespace_of(track, &namespace)?;
        let objects = join(subscriber, full_name(&ns, &track.name)?).await?;
        tracks.push((track.name.clone(), objects));
    }
    Ok(WarpBroadcast {
        catalog,
        init,
        track_ids,
        tracks,
    })
}

impl WarpBroadcast {
    /// The catalog.
    pub fn catalog(&self) -> &WarpCatalog {
        &self.catalog
    }

    /// The init segment (`ftyp` + `moov`).
    pub fn init(&self) -> &Bytes {
        &self.init
    }

    /// Writes the init segment, then every chunk of every track as it arrives (each checked to
    /// be one `moof` of a track of the init segment and its `mdat`), flushing after each, until
    /// every track has ended or `stop` resolves (checked between chunks, so the output always
    /// ends with a whole chunk). `progress`, when given, is updated after each chunk.
    ///
    /// Cancel safety: dropping the future cancels the subscriptions; the output may then end
    /// inside a chunk (use `stop` for a clean end).
    pub async fn write_fmp4<W: AsyncWrite + Unpin>(
        self,
        mut output: W,
        stop: impl Future<Output = ()>,
        progress: Option<&tokio::sync::watch::Sender<WarpStats>>,
    ) -> Result<WarpStats, WarpError> {
        let mut stats = WarpStats::default();
        output.write_all(&self.init).await?;
        output.flush().await?;
        stats.bytes = self.init.len() as u64;
        for id in &self.track_ids {
            stats.samples.insert(*id, 0);
        }
        if let Some(p) = progress {
            p.send_replace(stats.clone());
        }
        let mut all: SelectAll<BoxStream<'static, (String, Option<_>)>> = SelectAll::new();
        for (name, objects) in self.tracks {
            // Each track's objects, then one `None` when it ends.
            let stream = futures::stream::unfold(Some((name, objects)), |state| async move {
                let (name, mut objects) = state?;
                match objects.next().await {
                    Some(item) => Some(((name.clone(), Some(item)), Some((name, objects)))),
                    None => Some(((name, None), None)),
                }
            });
            all.push(stream.boxed());
        }
        tokio::pin!(stop);
        loop {
            let (track, item) = tokio::select! {
                biased;
                _ = &mut stop => break,
                next = all.next() => match next {
                    Some(next) => next,
                    None => break,
                },
            };
            let Some(item) = item else {
                tracing::debug!(track, "moq-pub track ended");
                continue;
            };
            let object = item.map_err(|source| WarpError::Transport {
                track: track.clone(),
                source,
            })?;
            if object.status != ObjectStatus::Normal || object.payload.is_empty() {
                continue;
            }
            let (id, samples) =
                chunk_samples(&object.payload).map_err(|reason| WarpError::Chunk {
                    track: track.clone(),
                    location: object.location,
                    reason,
                })?;
            let Some(count) = stats.samples.get_mut(&id) else {
                return Err(WarpError::Chunk {
                    track,
                    location: object.location,
                    reason: format!("track ID {id} is not in the init segment"),
                });
            };
            *count += samples;
            output.write_all(&object.payload).await?;
            output.flush().await?;
            stats.chunks += 1;
            stats.bytes += object.payload.len() as u64;
            if let Some(p) = progress {
                p.send_replace(stats.clone());
            }
        }
        output.flush().await?;
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_moq_pub_writes() {
        // The shape of moq-pub 0.10's catalog (moq-catalog 0.2): packaging only in the
        // common fields, the namespace in moq-transport 0.17's path form (a leading '/').
        let json = br#"{
          "version": 1, "streamingFormat": 1, "streamingFormatVersion": "0.2",
          "supportsDeltaUpdates": true,
          "commonTrackFields": {"namespace": "/live/demo", "packaging": "cmaf", "renderGroup": 1},
          "tracks": [
            {"initTrack": "0.mp4", "name": "1.m4s",
             "selectionParams": {"codec": "avc1.64000d", "width": 320, "height": 240}},
            {"initTrack": "0.mp4", "name": "2.m4s",
             "selectionParams": {"codec": "mp4a.40.2", "samplerate": 48000, "channelConfig": "1",
                                 "bitrate": 69000}, "futureField": [1]}
          ]
        }"#;
        let c = WarpCatalog::parse(json).unwrap();
        assert_eq!(c.init_track().unwrap(), "0.mp4");
        assert_eq!(c.tracks.len(), 2);
        assert_eq!(c.tracks[1].selection.channel_config.as_deref(), Some("1"));
        let ns: TrackNamespace = "other".parse().unwrap();
        assert_eq!(
            c.namespace_of(&c.tracks[0], &ns).unwrap(),
            "live/demo".parse::<TrackNamespace>().unwrap()
        );
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        let cases: [(&[u8], &str); 6] = [
            (b"not json", "not a WARP catalog"),
            (br#"{"version":1}"#, "not a WARP catalog"),
            (
                br#"{"version":1,"streamingFormat":1,"streamingFormatVersion":"0.2","tracks":[]}"#,
                "no tracks",
            ),
            (
                br#"{"version":1,"streamingFormat":1,"streamingFormatVersion":"0.2","tracks":[{"name":"a","initTrack":"i"}]}"#,
                "no packaging",
            ),
            (
                br#"{"version":1,"streamingFormat":1,"streamingFormatVersion":"0.2","commonTrackFields":{"packaging":"loc"},"tracks":[{"name":"a","initTrack":"i"}]}"#,
                "not supported",
            ),
            (
                br#"{"version":1,"streamingFormat":1,"streamingFormatVersion":"0.2","commonTrackFields":{"packaging":"cmaf"},"tracks":[{"name":"a","initTrack":"i"},{"name":"b","initTrack":"j"}]}"#,
                "different init tracks",
            ),
        ];
        for (json, want) in cases {
            let err = WarpCatalog::parse(json).unwrap_err().to_string();
            assert!(
                err.contains(want),
                "{}: {err}",
                String::from_utf8_lossy(json)
            );
        }
    }

    #[test]
    fn rejects_bad_boxes() {
        assert!(init_track_ids(b"").is_err());
        assert!(init_track_ids(b"\0\0\0\x14ftypiso6\0\0\x02\0mp41").is_err());
        assert!(chunk_samples(b"").is_err());
        assert!(chunk_samples(b"\0\0\0\x08mdat").is_err());
        // A truncated box header never panics.
        assert!(chunk_samples(b"\0\0\0").is_err());
    }
}
