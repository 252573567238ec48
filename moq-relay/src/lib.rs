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
//!
//! # Features
//!
//! The default features build the `moq-relay` binary. An application that embeds the relay
//! takes `default-features = false` and adds only what it uses; the relay alone then costs
//! about what `moq-client` does (no HTTP server, CLI, JWT library or second crypto stack:
//! `tests/features.rs` checks it).
//!
//! | feature | adds | pulls in |
//! |---|---|---|
//! | `auth` | `moq_relay::auth`: JWT token authorization (`TokenAuth`), keys, claims | jsonwebtoken with aws-lc-rs (jsonwebtoken 11 has no ring backend; its RustCrypto one brings `rsa`, RUSTSEC-2023-0071), serde |
//! | `prometheus` | metrics kept and rendered as Prometheus text ([`Metrics::render`]); without it they are not kept | metrics-exporter-prometheus |
//! | `http` | `moq_relay::http`: the HTTP side (`/certificate.sha256`, `/metrics`, `/health`, `/announced`, the page); implies `auth` and `prometheus` | axum, hyper |
//! | `cli` | the `moq-relay` binary (flags, TOML settings, log output, signals); implies `http` | clap, toml, tracing-subscriber |
//! | `qlog` | [`RelayConfig::qlog_dir`] traces | moq-transport's `qlog` |
//! | `registry-redis` | `registry::RedisRegistry`: the route registry on a Valkey or Redis server | redis (tokio, connection manager) |
//!
//! Default: `cli`, `qlog` and `registry-redis`.

#[cfg(feature = "auth")]
pub mod auth;
pub mod cluster;
pub mod cluster_ext;
mod config;
#[cfg(feature = "http")]
pub mod http;
mod metrics;
pub mod registry;
mod relay;

pub use config::RelayConfig;
pub use metrics::{Metrics, Received, SessionGauge};
pub use relay::{RegistryRouting, Relay, register_local_namespaces};

pub use moq_transport::Error;
