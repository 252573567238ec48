//! Relay configuration.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::ClusterConfig;
use moq_client::{CacheLimits, ServeOptions};
use moq_core::Version;
use moq_transport::endpoint::{DEFAULT_UDP_BUFFER, QuicSettings};
use moq_transport::tls::Certificate;
use moq_transport::{AllowAll, Authorizer, Limits};

/// How a relay runs.
#[derive(Clone)]
pub struct RelayConfig {
    /// The UDP address for raw QUIC and WebTransport.
    pub bind: SocketAddr,
    /// The certificate to present.
    pub certificate: Certificate,
    /// Versions accepted, most preferred first.
    pub versions: Vec<Version>,
    /// How much of each track is cached.
    pub cache: CacheLimits,
    /// How downstream subscriptions are served.
    pub serve: ServeOptions,
    /// Who may publish and subscribe.
    pub authorizer: Arc<dyn Authorizer>,
    /// The longest RENDEZVOUS_TIMEOUT honoured (a SUBSCRIBE held for a publisher to appear).
    pub max_rendezvous: Duration,
    /// How long an upstream subscription is kept after its last downstream subscriber left.
    pub upstream_linger: Duration,
    /// How long a track whose last publisher went away without ending it (its session died,
    /// or its subscription ended with a status other than TRACK_ENDED) waits for a new
    /// publisher before its downstream subscriptions end with PUBLISH_DONE TRACK_ENDED.
    pub publisher_wait: Duration,
    /// Per-session limits.
    pub limits: Limits,
    /// A qlog trace of every QUIC connection goes into this directory (the `qlog` feature,
    /// on by default).
    pub qlog_dir: Option<std::path::PathBuf>,
    /// Congestion control, keep-alive and idle timeout of every connection, accepted and
    /// dialed (cluster links).
    pub quic: QuicSettings,
    /// Bytes of UDP receive and send buffer asked of the kernel ([`moq_transport::endpoint::ServerConfig::udp_buffer`]).
    pub udp_buffer: usize,
    /// Label the received-object metrics with the namespace (one series per namespace).
    pub metrics_per_namespace: bool,
    /// Join a cluster of relays (see [`crate::cluster`]).
    pub cluster: Option<ClusterConfig>,
    /// This relay's Hop ID in the MoQ Cluster extension (draft-lcurley-moq-cluster), declared
    /// as HOP_ID in the SETUP of every session from draft-17 on; the extension is on for each
    /// session whose peer declares one too. Unset, a relay of a cluster declares
    /// [`crate::cluster_ext::hop_id`] of its node name, and a relay alone declares none.
    pub cluster_hop: Option<u64>,
    /// RELAY_COST declared with the Hop ID: what pulling from this relay costs its peers
    /// (unset: they count 1, [`moq_core::message::cluster::DEFAULT_COST`]).
    pub relay_cost: Option<u64>,
    /// The URI a draining relay names in GOAWAY, so its clients reconnect there (draft-19
    /// §10.4: the new session URI), as it is. Unset, a relay given a registry
    /// ([`crate::Relay::successor_from_registry`]) names the relay the registry chooses, else
    /// a relay of a cluster names its first peer, and a relay alone names none (clients
    /// reconnect to the same URI).
    pub successor: Option<String>,
}

impl std::fmt::Debug for RelayConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayConfig")
            .field("bind", &self.bind)
            .field("versions", &self.versions)
            .field("cache", &self.cache)
            .field("max_rendezvous", &self.max_rendezvous)
            .field("upstream_linger", &self.upstream_linger)
            .field("publisher_wait", &self.publisher_wait)
            .field("quic", &self.quic)
            .field("successor", &self.successor)
            .finish_non_exhaustive()
    }
}

impl RelayConfig {
    /// A relay on `bind` presenting `certificate`, with defaults for the rest.
    pub fn new(bind: SocketAddr, certificate: Certificate) -> Self {
        RelayConfig {
            bind,
            certificate,
            versions: Version::ALL.to_vec(),
            cache: CacheLimits::default(),
            serve: ServeOptions::default(),
            authorizer: Arc::new(AllowAll),
            max_rendezvous: Duration::from_secs(30),
            upstream_linger: Duration::from_secs(2),
            publisher_wait: Duration::from_secs(10),
            limits: Limits::default(),
            qlog_dir: None,
            quic: QuicSettings::default(),
            udp_buffer: DEFAULT_UDP_BUFFER,
            metrics_per_namespace: false,
            cluster: None,
            cluster_hop: None,
            relay_cost: None,
            successor: None,
        }
    }

    /// A relay on `bind` with a generated certificate for `localhost` (development).
    pub fn development(bind: SocketAddr) -> Result<Self, moq_transport::Error> {
        Ok(Self::new(
            bind,
            Certificate::generate(&["localhost".to_string()])?,
        ))
    }
}
