//! MOQT sessions over QUIC and WebTransport.
//!
//! - [`transport`]: the small transport trait and its raw QUIC and WebTransport adapters.
//! - [`tls`]: rustls configuration: system roots, development certificates, fingerprint pinning.
//! - [`endpoint`]: [`endpoint::Client`] connects to `moqt://` (raw QUIC) and `https://`
//!   (WebTransport) URLs; [`endpoint::Server`] accepts both on one UDP port.
//! - [`Session`]: SETUP, request streams, namespace discovery.
//! - [`namespace`]: the namespace index and the discovery handles.
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

pub mod endpoint;
mod error;
pub mod namespace;
mod request;
mod session;
pub mod tls;
pub mod track;
pub mod transport;

pub use error::Error;
pub use session::{
    AllowAll, AuthRequest, Authorizer, Destination, GoawayInfo, IMPLEMENTATION, Limits,
    RequestKind, ResolvedToken, Role, Session, SessionConfig, SessionInfo,
};

pub use moq_core;
