//! Ingest: a fragmented MP4 byte stream published as a broadcast (catalog plus one track per
//! media track).

use moq_client::{Publisher, TrackNamespace};
use tokio::io::AsyncRead;

use crate::MediaError;

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

/// Reads a fragmented MP4 stream (ftyp, moov, then moof+mdat pairs, as
/// `ffmpeg -f mp4 -movflags cmaf+separate_moof+delay_moov+skip_trailer -` writes it) and
/// publishes it under `namespace`: a `catalog` track (MSF) and one track per media track,
/// packaged as `options.packaging` says. Returns at the end of the input, once the tracks
/// are finished (subscribers see them end).
///
/// Malformed or truncated input is a [`MediaError`]; the tracks are ended all the same.
pub async fn publish_fmp4<R: AsyncRead + Unpin>(
    publisher: &Publisher,
    namespace: TrackNamespace,
    input: R,
    options: IngestOptions,
) -> Result<IngestStats, MediaError> {
    let _ = (publisher, namespace, input, options);
    Err(MediaError::Unsupported("not implemented yet".into()))
}
