//! Egress: a subscribed broadcast written as a fragmented MP4 byte stream.

use moq_client::{Subscriber, TrackNamespace};
use tokio::io::AsyncWrite;

use crate::MediaError;
use crate::catalog::Catalog;
use crate::ingest::TrackStats;

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

    /// The catalog's tracks these options select, in catalog order.
    pub fn select<'a>(
        &self,
        catalog: &'a Catalog,
    ) -> Result<Vec<&'a crate::catalog::Track>, MediaError> {
        let _ = catalog;
        Err(MediaError::Unsupported("not implemented yet".into()))
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

/// Subscribes to `namespace`'s catalog (the latest complete catalog first), picks tracks as
/// `options` says, subscribes to them and writes fragmented MP4 to `output`: an init segment
/// (`ftyp`+`moov` with one `trak` per track), then `moof`+`mdat` fragments. Returns when every
/// selected track has ended.
pub async fn subscribe_fmp4<W: AsyncWrite + Unpin>(
    subscriber: &Subscriber,
    namespace: TrackNamespace,
    output: W,
    options: EgressOptions,
) -> Result<EgressStats, MediaError> {
    let _ = (subscriber, namespace, output, options);
    Err(MediaError::Unsupported("not implemented yet".into()))
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
/// latest independent catalog), then its updates.
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
        let _ = (subscriber, namespace);
        Err(MediaError::Unsupported("not implemented yet".into()))
    }
}

#[async_trait::async_trait]
impl CatalogSource for MsfCatalog {
    async fn next_catalog(&mut self) -> Option<Result<Catalog, MediaError>> {
        let _ = (&mut self.objects, &self.current, self.group);
        None
    }
}
