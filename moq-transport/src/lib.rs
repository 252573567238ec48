//! MOQT sessions over QUIC and WebTransport.
//!
//! - [`transport`]: the small transport trait and its raw QUIC and WebTransport adapters (and,
//!   with the `memory` feature, an in-memory pair for tests).
//! - [`tls`]: rustls configuration: system roots, development certificates, fingerprint pinning.
//! - [`endpoint`]: [`endpoint::Client`] connects to `moqt://` (raw QUIC) and `https://`
//!   (WebTransport) URLs; [`endpoint::Server`] accepts both on one UDP port.
//! - [`Session`]: SETUP, request streams, namespace discovery, subscriptions.
//! - [`namespace`]: the namespace index and the discovery handles.
//! - [`track`]: subscriptions, FETCH, TRACK_STATUS, SUBSCRIBE_TRACKS and the data plane.
//!
//! Inside, each layer only uses those below it: the transport, then stream framing, then the
//! session core (lifecycle, SETUP, Request IDs, GOAWAY, the task set and the driver), then the
//! one request machinery, then the request kinds, then [`Session`] and the endpoints.
//!
//! ```no_run
//! # async fn run() -> Result<(), moq_transport::Error> {
//! use moq_transport::endpoint::{Client, ClientConfig};
//! use moq_core::TrackNamespace;
//!
//! let client = Client::new(ClientConfig::default())?;
//! let session = client.connect("moqt://relay.example.com:4443/moq").await?;
//! let mut namespaces = session.subscribe_namespace(TrackNamespace::from_strs(["live"]).unwrap()).await?;
//! while let Some(event) = namespaces.next().await {
//!     println!("{:?}", event?);
//! }
//! # Ok(()) }
//! ```
//!
//! # Handles, drop and cancel safety
//!
//! Every public handle says on its type what dropping it does, and on each async method
//! whether it is cancel safe (dropping the future before it resolves loses nothing and leaves
//! no request half answered) or not, and what is left if not.
//!
//! Dropping the handle of an open request *cancels* the request (draft-19 §3.3.3). From
//! draft-17 on that is RESET_STREAM and STOP_SENDING with CANCELLED on the request's stream;
//! drafts 14-16, which carry every request on the control stream, spell it as their message
//! for the request's kind and our role: UNSUBSCRIBE for our SUBSCRIBE (or for the peer's
//! PUBLISH we accepted), FETCH_CANCEL for a FETCH, PUBLISH_NAMESPACE_DONE for a
//! PUBLISH_NAMESPACE, UNSUBSCRIBE_NAMESPACE for a SUBSCRIBE_NAMESPACE, PUBLISH_DONE for our
//! PUBLISH. A request of the peer's is never left unanswered: one whose [`track::Incoming`] is
//! dropped unanswered is refused with REQUEST_ERROR.
//!
//! On the data plane, a stream reader dropped before the stream's end sends STOP_SENDING
//! ([`track::IncomingSubgroup`], [`track::FetchResponse`]); a stream writer dropped unfinished
//! resets its stream ([`track::SubgroupSender`], [`track::FetchWriter`]).

mod devcert;
pub mod endpoint;
mod error;
mod framing;
mod handle;
mod index;
mod latch;
mod mux;
pub mod namespace;
mod request;
mod session;
pub mod tls;
pub mod track;
pub mod transport;

pub use error::{ConnectError, Error};
pub use handle::{Session, WeakSession};
pub use session::{
    AllowAll, AuthRequest, Authorizer, Destination, GoawayInfo, IMPLEMENTATION, Limits,
    RequestKind, RequestObserver, ResolvedToken, Role, SessionConfig, SessionInfo,
};

pub use moq_core;
