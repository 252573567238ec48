//! Media over MOQT: the MOQT Streaming Format (MSF) catalog, LOC and CMAF packaging, and the
//! two ends a user needs, fragmented MP4 in ([`publish_fmp4`]) and out ([`subscribe_fmp4`]).
//!
//! Built only on [`moq_client`]'s public API: a broadcast is a Track Namespace holding a
//! `catalog` track (MSF JSON) and one track per media track.
//!
//! ```no_run
//! # async fn run(session: moq_client::Session) -> Result<(), moq_media::MediaError> {
//! use moq_client::TrackNamespace;
//! use moq_media::{EgressOptions, IngestOptions};
//! let ns = TrackNamespace::from_strs(["live", "demo"])?;
//! // Publish what ffmpeg writes on stdin ...
//! let stats = moq_media::publish_fmp4(session.publisher(), ns.clone(), tokio::io::stdin(), IngestOptions::default()).await?;
//! // ... or write a broadcast as fMP4 to stdout.
//! let stats = moq_media::subscribe_fmp4(session.subscriber(), ns, tokio::io::stdout(), EgressOptions::default()).await?;
//! # Ok(()) }
//! ```

pub mod catalog;
pub mod cmaf;
pub mod egress;
mod error;
mod fmp4;
pub mod ingest;
pub mod loc;
pub mod warp;

pub use egress::{CatalogSource, EgressOptions, EgressStats, MsfCatalog, Start, subscribe_fmp4};
pub use error::MediaError;
pub use ingest::{IngestOptions, IngestStats, MediaPublisher, Packaging, TrackStats, publish_fmp4};
