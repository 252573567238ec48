#![doc = include_str!("../README.md")]
//!
//! # Use
//!
//! The two entry points take a `moq_client` [`Publisher`](moq_client::Publisher) or
//! [`Subscriber`](moq_client::Subscriber) (a session's, or one shared by several sessions)
//! and a byte stream:
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use moq_client::{Client, TrackNamespace};
//! use moq_media::{EgressOptions, IngestOptions, Packaging};
//!
//! let session = Client::builder().build()?.connect("moqt://relay.example.com:4443").await?;
//! let ns = TrackNamespace::from_strs(["live", "demo"])?;
//!
//! // `ffmpeg ... -f mp4 -movflags cmaf+separate_moof+delay_moov+skip_trailer - | this`:
//! // announces live/demo, publishes its catalog and tracks, returns at the end of stdin.
//! let stats = moq_media::publish_fmp4(
//!     session.publisher(),
//!     ns.clone(),
//!     tokio::io::stdin(),
//!     IngestOptions::default().packaging(Packaging::Loc),
//! )
//! .await?;
//! eprintln!("published {stats:?}");
//!
//! // `this | ffplay -`: the catalog, then the first video and audio tracks, as fMP4.
//! let stats = moq_media::subscribe_fmp4(
//!     session.subscriber(),
//!     ns,
//!     tokio::io::stdout(),
//!     EgressOptions::default(),
//! )
//! .await?;
//! eprintln!("wrote {stats:?}");
//! # Ok(()) }
//! ```
//!
//! The building blocks underneath: [`catalog`] (the MSF types), [`loc`] (LOC properties),
//! [`cmaf`] (CMAF headers and fragments), [`MediaPublisher`] (ingest, step by step) and
//! [`MediaSubscriber`] (objects to fMP4), with [`CatalogSource`] for catalogs in another
//! format ([`MsfCatalog`] reads MSF's); [`warp`] reads Cloudflare's moq-pub layout.

pub mod catalog;
pub mod cmaf;
pub mod egress;
mod error;
mod fmp4;
pub mod ingest;
pub mod loc;
pub mod warp;

pub use egress::{
    CatalogSource, EgressOptions, EgressStats, MediaSubscriber, MsfCatalog, Start, subscribe_fmp4,
    subscribe_fmp4_with,
};
pub use error::MediaError;
pub use ingest::{IngestOptions, IngestStats, MediaPublisher, Packaging, TrackStats, publish_fmp4};
/// The ISO-BMFF crate whose types [`cmaf`] takes and returns (`Ftyp`, `Moov`, `Trak`, ...).
pub use mp4_atom;
