//! What the relay keeps for routing through a route registry (issue 36): the configuration
//! ([`RegistryRouting`]) and the links to origin relays. The state only: finding origins and
//! dialing them is `registry_routes.rs`.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use moq_core::TrackNamespace;
use moq_transport::Session;
use moq_transport::tls::ClientTls;
use parking_lot::Mutex;

use crate::registry::{Registry, RelayRef};

/// How a relay finds origins through a registry ([`crate::Relay::route_through_registry`]).
#[derive(Clone)]
pub struct RegistryRouting {
    /// The registry the cluster's relays register their namespaces in.
    pub registry: Arc<dyn Registry>,
    /// This relay as the registry names it (an origin that is this relay is not dialed).
    pub me: RelayRef,
    /// The token a link presents to an origin relay (`?jwt=`, like a cluster link's); it must
    /// grant subscribe on what is looked up.
    pub token: Option<String>,
    /// How links trust the origin relays' certificates.
    pub tls: ClientTls,
    /// A link with no upstream subscription over it for this long (checked every `idle`,
    /// so between one and two times it) is closed.
    pub idle: Duration,
    /// How long dialing an origin relay may take before the request is refused.
    pub connect_timeout: Duration,
}

impl RegistryRouting {
    /// Routing through `registry` as `me`, with no token, default TLS, links closed after
    /// 30 s idle and dials given 5 s.
    pub fn new(registry: Arc<dyn Registry>, me: RelayRef) -> Self {
        RegistryRouting {
            registry,
            me,
            token: None,
            tls: ClientTls::default(),
            idle: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
        }
    }
}

impl fmt::Debug for RegistryRouting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistryRouting")
            .field("me", &self.me)
            .field("idle", &self.idle)
            .finish_non_exhaustive()
    }
}

/// A link to an origin relay: its route id and session, and the namespaces routed through it.
pub(super) struct OriginLink {
    pub(super) id: u64,
    pub(super) session: Session,
    pub(super) namespaces: HashSet<TrackNamespace>,
}

/// A slot per origin relay id: dials to one relay are made one at a time.
pub(super) type Slot = Arc<tokio::sync::Mutex<Option<OriginLink>>>;

/// The relay's registry routing: its configuration once set, and its links by origin relay id.
#[derive(Default)]
pub(super) struct Origins {
    pub(super) config: std::sync::OnceLock<RegistryRouting>,
    pub(super) links: Mutex<HashMap<String, Slot>>,
    /// The route ids of the links up now (a link's id leaves when its watcher drops it), so
    /// that an upstream can tell it goes over an origin link (`Inner::origin_wait`).
    pub(super) link_ids: Mutex<HashSet<u64>>,
}

impl fmt::Debug for Origins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Origins")
            .field("config", &self.config.get())
            .field("links", &self.links.lock().len())
            .finish()
    }
}
