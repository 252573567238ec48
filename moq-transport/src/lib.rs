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
