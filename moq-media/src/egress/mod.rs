//! Egress: a subscribed broadcast written as a fragmented MP4 byte stream.
//!
//! Inside: `options` (which tracks, what was written), `source` (catalogs), `boxes` (the LOC
//! `trak` and fragments) ← `writer` ([`MediaSubscriber`]) ← [`subscribe_fmp4`] here.

mod boxes;
mod options;
mod source;
mod writer;

use futures::StreamExt;
use moq_client::{FullTrackName, JoinFrom, SubscribeOptions, Subscriber, TrackNamespace};
use tokio::io::AsyncWrite;

use crate::MediaError;
use crate::catalog::Track;

pub use options::{EgressOptions, EgressStats, Start};
pub use source::{CatalogSource, MsfCatalog};
pub use writer::MediaSubscriber;

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
/// Cancel safety: as [`subscribe_fmp4`], dropping the future cancels the subscriptions and
/// leaves what was written.
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
