//! The application API for Media over QUIC Transport (MOQT).
//!
//! Connect with a [`Client`] (or accept with a [`Server`]); each [`Session`] has a
//! [`Publisher`] that announces namespaces and serves tracks from a bounded in-memory cache, and
//! a [`Subscriber`] that discovers namespaces and subscribes to tracks as [`futures::Stream`]s.
//! [`Client::reconnecting`] keeps a session up across failures and GOAWAY.
//!
//! Discovering namespaces:
//!
//! ```no_run
//! # async fn run() -> Result<(), moq_client::Error> {
//! use moq_client::{Client, TrackNamespace};
//! let session = Client::builder().build()?.connect("moqt://relay.example.com:4443").await?;
//! let mut rooms = session.subscriber().subscribe_namespace(TrackNamespace::from_strs(["meet"])?).await?;
//! while let Some(event) = rooms.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(()) }
//! ```
//!
//! Publishing a track:
//!
//! ```no_run
//! # async fn run(session: moq_client::Session) -> Result<(), moq_client::Error> {
//! use moq_client::{FullTrackName, TrackNamespace};
//! let ns = TrackNamespace::from_strs(["meet", "room1"])?;
//! let _announced = session.publisher().publish_namespace(ns.clone())?;
//! let track = session.publisher().create_track(FullTrackName::new(ns, "chat")?)?;
//! let mut group = track.append_group()?;
//! group.write("hello")?;
//! group.finish()?;
//! # Ok(()) }
//! ```

pub mod cache;
mod client;
pub mod directory;
mod error;
mod options;
mod produce;
mod publisher;
pub mod serve;
mod subscriber;

pub use cache::CacheLimits;
pub use client::{
    Backoff, Client, ClientBuilder, Reconnecting, Server, ServerBuilder, Session, Status,
};
pub use error::Error;
pub use options::TrackOptions;
pub use produce::{GroupProducer, SubgroupProducer, TrackProducer};
pub use publisher::{NamespaceHandle, Publisher};
pub use serve::ServeOptions;
pub use subscriber::{GroupStream, NamespaceStream, SubscribeOptions, Subscriber, TrackStream};

pub use moq_core::codes::RequestErrorCode;
pub use moq_core::{
    FullTrackName, GroupOrder, Location, NameError, Properties, TrackNamespace, Version,
};
pub use moq_transport;
pub use moq_transport::namespace::NamespaceEvent;
pub use moq_transport::track::Object;

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
