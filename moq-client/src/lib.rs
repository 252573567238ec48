//! The application API for Media over QUIC Transport (MOQT).
//!
//! Connect with a [`Client`] (or accept with a [`Server`]); each [`Session`] has a
//! [`Publisher`], which announces namespaces and answers the peer's requests from its tracks,
//! and a [`Subscriber`], which discovers namespaces and reads tracks. [`Client::reconnecting`]
//! keeps a session up across failures and GOAWAY.
//!
//! # The object model
//!
//! A *track* (a [`FullTrackName`]: namespace plus name) is a sequence of *groups*; a group is
//! split into one or more *subgroups* (each a QUIC stream), which carry *objects* in
//! increasing Object ID order. Every level has a producer that writes and a consumer that
//! reads, and both describe the same shape:
//!
//! | level    | writes                | reads                                  |
//! |----------|-----------------------|----------------------------------------|
//! | track    | [`TrackProducer`]     | [`TrackConsumer`] (groups as they start) |
//! | group    | [`GroupProducer`]     | [`GroupConsumer`] (objects across its subgroups) |
//! | subgroup | [`SubgroupProducer`]  | [`SubgroupConsumer`]                   |
//! | object   | `write(payload)`      | [`Object`]                             |
//!
//! Most applications never name a subgroup: [`GroupProducer::write`] writes the group's first
//! one and [`GroupConsumer::next_object`] reads them all. [`ObjectConsumer`] (a joined track)
//! and [`FetchConsumer`] (a FETCH) are flat streams of objects.
//!
//! Settings are typed: [`TrackOptions`] for what a publisher sets, [`SubscribeOptions`] for
//! a subscription; both are `Default` plus chained setters. Endpoints are built with
//! `Client::builder()` / `Server::builder()` and `.build()`. Misuse and refusals are typed
//! [`Error`]s ([`Error::rejection`] gives a peer's [`RequestErrorCode`]).
//!
//! # Which call do I want
//!
//! | I want to ... | call | on the wire |
//! |---|---|---|
//! | serve tracks to whoever asks for them | [`Publisher::publish_namespace`] and [`Publisher::create_track`] | PUBLISH_NAMESPACE; each SUBSCRIBE, FETCH and TRACK_STATUS is answered from the track's cache |
//! | push one track to the peer without being asked | [`Session::publish`] (a track from [`Publisher::create_track`]) | PUBLISH |
//! | read what is published from now on | [`Subscriber::subscribe`] | SUBSCRIBE (renewed after a reconnect, the gap fetched) |
//! | read from a point in the past, then live, in one ordered stream | [`Subscriber::join`] with a [`JoinFrom`] ([`JoinFrom::Oldest`]: everything the publisher or relay still holds) | SUBSCRIBE and a Joining FETCH (from draft-20: the SUBSCRIBE's fill) |
//! | read a track I just discovered, missing nothing written before I asked | [`Subscriber::join`] with [`JoinFrom::Oldest`] (a bare `subscribe` starts after what exists when it arrives) | as above |
//! | read a range of the past only | [`Subscriber::fetch`] | FETCH |
//! | learn which namespaces exist under a prefix | [`Subscriber::subscribe_namespace`] | SUBSCRIBE_NAMESPACE |
//! | have the peer push every track under a prefix | [`Subscriber::subscribe_tracks`] | SUBSCRIBE_TRACKS, then a PUBLISH per track |
//! | know where a track stands (largest location) | [`Subscriber::track_status`] | TRACK_STATUS |
//! | one session, which ends when the connection does | [`Client::connect`] | |
//! | stay connected: reconnect, renew subscriptions and discoveries, re-announce, follow GOAWAY | [`Client::reconnecting`] | |
//!
//! # The runtime contract
//!
//! Everything runs on [tokio]: call it from within a tokio runtime (multi-thread or current
//! thread). Sessions spawn their own tasks, which end with the session; no handle needs a
//! background task of the application's. Handles are `Send + Sync` where they are shared
//! (`Clone` ones share state), and dropping a handle is meaningful: a dropped
//! [`NamespaceHandle`] withdraws its namespace, a dropped [`TrackProducer`] ends its track, a
//! dropped consumer cancels its request, and dropping every clone of a [`Session`] closes it.
//! Every `next`-style method is cancel safe (a `select!` that drops it loses nothing), and
//! every stream an application holds ends (with an error if it failed) when what is behind it
//! ends.
//!
//! # Publish
//!
//! Creating tracks and announcing their namespace may happen in either order: a SUBSCRIBE for
//! a track of an announced namespace that does not exist yet waits for it (two seconds by
//! default, [`model::DirectoryOptions::rendezvous`]).
//!
//! ```no_run
//! # async fn run(session: moq_client::Session) -> Result<(), moq_client::Error> {
//! use std::time::Duration;
//! use moq_client::{FullTrackName, TrackNamespace, TrackOptions};
//! let ns = TrackNamespace::from_strs(["meet", "room1"])?;
//! let _announced = session.publisher().publish_namespace(ns.clone())?;
//! let options = TrackOptions::default().priority(10);
//! let track = session.publisher().create_track_with(FullTrackName::new(ns, "chat")?, options)?;
//! let mut group = track.append_group()?;
//! group.write("hello")?;
//! group.finish()?;
//! // Resolves once every subscriber has the objects and the end of the track.
//! track.finish(Duration::from_secs(2)).await?;
//! session.close_gracefully(Duration::from_secs(2)).await?;
//! # Ok(()) }
//! ```
//!
//! # Subscribe
//!
//! ```no_run
//! # async fn run(session: moq_client::Session, name: moq_client::FullTrackName) -> Result<(), moq_client::Error> {
//! use moq_client::SubscribeOptions;
//! let mut track = session.subscriber().subscribe(name, SubscribeOptions::default()).await?;
//! while let Some(group) = track.next_group().await {
//!     let mut group = group?;
//!     while let Some(object) = group.next_object().await {
//!         println!("{}: {} bytes", object?.location, group.id());
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Discover
//!
//! ```no_run
//! # async fn run() -> Result<(), moq_client::Error> {
//! use moq_client::{Client, NamespaceEvent, TrackNamespace};
//! let session = Client::builder().build()?.connect("moqt://relay.example.com:4443").await?;
//! let mut rooms = session.subscriber().subscribe_namespace(TrackNamespace::from_strs(["meet"])?).await?;
//! while let Some(event) = rooms.next().await {
//!     match event? {
//!         NamespaceEvent::Added(ns) => println!("+ {ns}"),
//!         NamespaceEvent::Removed(ns) => println!("- {ns}"),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Fetch
//!
//! A FETCH is a stream of objects and End of Range markers ([`FetchItem`]).
//!
//! ```no_run
//! # async fn run(session: moq_client::Session, name: moq_client::FullTrackName) -> Result<(), moq_client::Error> {
//! use moq_client::{FetchItem, Location};
//! // Groups 3 to 5, whole.
//! let mut fetch = session.subscriber().fetch(name, Location::new(3, 0), Location::new(5, 0)).await?;
//! while let Some(item) = fetch.next().await {
//!     match item? {
//!         FetchItem::Object(o) => println!("{}", o.location),
//!         FetchItem::EndOfRange { kind, location } => println!("{kind:?} up to {location}"),
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! # Join
//!
//! The most common need: start at the beginning of the current group. [`Subscriber::join`]
//! sends SUBSCRIBE and a Joining FETCH and yields one ordered stream of objects, the past
//! first, with no gap and no duplicate.
//!
//! ```no_run
//! # async fn run(session: moq_client::Session, name: moq_client::FullTrackName) -> Result<(), moq_client::Error> {
//! use moq_client::{JoinFrom, SubscribeOptions};
//! let mut objects = session.subscriber().join(name, SubscribeOptions::default(), JoinFrom::CurrentGroup).await?;
//! while let Some(object) = objects.next().await {
//!     println!("{}", object?.location);
//! }
//! # Ok(()) }
//! ```
//!
//! # Relay through
//!
//! Reading a track from one session and publishing it on another is a consumer feeding a
//! producer (for a full relay, see the `moq-relay` crate, which answers requests through
//! the same [`model::Directory`] as a [`Publisher`]):
//!
//! ```no_run
//! # async fn run(upstream: moq_client::Session, downstream: moq_client::Session, name: moq_client::FullTrackName) -> Result<(), moq_client::Error> {
//! use moq_client::SubscribeOptions;
//! let mut source = upstream.subscriber().subscribe(name.clone(), SubscribeOptions::default()).await?;
//! let copy = downstream.publisher().create_track(name)?;
//! while let Some(group) = source.next_group().await {
//!     let mut group = group?;
//!     let mut out = copy.create_group(group.id())?;
//!     while let Some(object) = group.next_object().await {
//!         out.write(object?.payload)?;
//!     }
//!     out.finish()?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Reconnect
//!
//! A reconnecting client renews its namespace discoveries and subscriptions on every new
//! session (after the last group seen) and re-announces its publisher's namespaces; it follows
//! a GOAWAY's new URI, connecting before it lets the old session go.
//!
//! ```no_run
//! # async fn run(name: moq_client::FullTrackName) -> Result<(), moq_client::Error> {
//! use moq_client::{Backoff, Client, SubscribeOptions};
//! let client = Client::builder().build()?.reconnecting("moqt://relay.example.com:4443", Backoff::default());
//! client.connected().await?;
//! let mut track = client.subscriber().subscribe(name, SubscribeOptions::default()).await?;
//! while let Some(group) = track.next_group().await {
//!     println!("group {}", group?.id());
//! }
//! # Ok(()) }
//! ```
//!
//! # Command-line programs
//!
//! With the feature `cli`, `cli::ClientOptions` is the flags (and environment variables)
//! of a client program, `--url`, `--fingerprint`, `--insecure`, `--draft`, `--token`,
//! `--connect-timeout`, for a clap parser, and builds the client, connected and staying so,
//! with its status on stderr (the `moq` command-line tool, crate `moqt-cli`, is built on it).
//!
//! # Testing an application
//!
//! With the feature `memory`, `moq_client::memory::pair` connects two sessions in memory, no sockets or
//! certificates, with the same behaviour as QUIC as far as a session can tell. Enable it for
//! your tests only:
//!
//! ```toml
//! [dev-dependencies]
//! moq-client = { version = "*", features = ["memory"] }
//! ```
//!
#![cfg_attr(feature = "memory", doc = "```")]
#![cfg_attr(not(feature = "memory"), doc = "```ignore")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), moq_client::Error> {
//! use moq_client::{FullTrackName, Publisher, SubscribeOptions, TrackNamespace};
//! let (app, peer) = moq_client::memory::pair(Publisher::default(), Publisher::default()).await?;
//! let name = FullTrackName::new(TrackNamespace::from_strs(["test"])?, "t")?;
//! let track = peer.publisher().create_track(name.clone())?;
//! let mut consumer = app.subscriber().subscribe(name, SubscribeOptions::default()).await?;
//! let mut group = track.append_group()?;
//! group.write("hello")?;
//! group.finish()?;
//! let mut group = consumer.next_group().await.expect("a group")?;
//! assert_eq!(group.next_object().await.expect("an object")?.payload, "hello");
//! # Ok(()) }
//! ```

#[macro_use]
mod setters;

mod cache;
#[cfg(feature = "cli")]
pub mod cli;
mod client;
mod consume;
mod directory;
mod error;
mod malformed;
#[cfg(feature = "memory")]
pub mod memory;
pub mod model;
mod options;
mod produce;
mod publisher;
mod serve;
mod subscriber;

pub use cache::{CacheLimits, NewGroup};
pub use client::{Client, ClientBuilder, Reconnecting, Server, ServerBuilder, Session, Status};
pub use consume::{
    FetchConsumer, GroupConsumer, ObjectConsumer, SubgroupConsumer, TrackConsumer, TrackInfo,
};
pub use error::{Error, SessionError};
pub use malformed::Malformed;
pub use options::{Backoff, JoinFrom, RenewRetry, SubscribeOptions, TrackOptions};
pub use produce::{GroupProducer, SubgroupProducer, TrackProducer};
pub use publisher::{NamespaceHandle, Publisher};
pub use serve::ServeOptions;
pub use subscriber::{IncomingTrack, NamespaceStream, Subscriber, TrackOffer, TrackOffers};

pub use moq_core::codes::{PublishDoneCode, RequestErrorCode};
pub use moq_core::data::ObjectStatus;
pub use moq_core::data::RangeEnd;
pub use moq_core::message::PublishDone;
pub use moq_core::{
    AuthToken, FullTrackName, GroupOrder, Location, LocationFilter, NameError, Properties,
    TrackNamespace, Version,
};
/// The session layer underneath, for what this crate does not wrap: [`Session::transport`]
/// gives its session, and [`model::Directory`] answers its requests.
pub use moq_transport;
pub use moq_transport::ConnectError;
/// Deliberately part of this API: session settings and the TLS certificate of a [`Server`].
pub use moq_transport::endpoint::QuicSettings;
pub use moq_transport::namespace::NamespaceEvent;
pub use moq_transport::track::{FetchItem, Object};
pub use moq_transport::{SessionConfig, tls::Certificate};

/// The README's examples, compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
