//! A MOQT relay: routing by namespace, fan-out from one upstream subscription per track and
//! publisher, a bounded cache, FETCH from cache or upstream, and publisher switchover.
//!
//! Sessions arrive over raw QUIC and WebTransport on one UDP port, at every version the
//! session layer supports. What publishers announce is indexed; SUBSCRIBE_NAMESPACE is
//! answered from that index; SUBSCRIBE goes upstream to every publisher whose announced
//! namespace is a prefix of the track's (draft-19 §9.5), once per track, and its objects are
//! fanned out to every downstream subscriber from the cache.
//!
//! ```no_run
//! # async fn run() -> Result<(), moq_relay::Error> {
//! use moq_relay::{Relay, RelayConfig};
//! let relay = Relay::bind(RelayConfig::development("[::]:4443".parse().unwrap())?)?;
//! println!("fingerprint {}", relay.fingerprint());
//! relay.run().await;
//! # Ok(()) }
//! ```

pub mod auth;
pub mod cluster;
mod config;
pub mod http;
mod metrics;
mod relay;

pub use config::RelayConfig;
pub use metrics::{Metrics, Received, SessionGauge};
pub use relay::Relay;

pub use moq_transport::Error;
