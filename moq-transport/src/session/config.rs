//! Session configuration and limits.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use moq_core::codes::RequestErrorCode;
use moq_core::{AuthToken, TrackNamespace, Version};

use super::auth::{AllowAll, Authorizer};
use crate::index::NamespaceIndex;

/// This implementation's MOQT_IMPLEMENTATION value.
pub const IMPLEMENTATION: &str = concat!("moqt-rs/", env!("CARGO_PKG_VERSION"));

/// Bounds on what one session may hold. Going past one is a clear error, never unbounded memory.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Streams the peer may open before SETUP completes; more are reset (draft-19 §3.3).
    pub max_pending_streams: usize,
    /// Concurrent SUBSCRIBE_NAMESPACE the peer may hold open with us.
    pub max_namespace_subscriptions: usize,
    /// Concurrent SUBSCRIBE_TRACKS the peer may hold open with us.
    pub max_track_subscriptions: usize,
    /// Namespaces the peer may publish to us at once.
    pub max_published_namespaces: usize,
    /// NAMESPACE / NAMESPACE_DONE queued for one namespace subscription before its stream is
    /// reset (draft-19 §10.18 allows the reset when the stream is blocked).
    pub namespace_queue: usize,
    /// How long to wait for the peer's SETUP.
    pub setup_timeout: Duration,
    /// Request IDs remembered to detect duplicates that arrive out of order.
    pub request_id_window: usize,
    /// Drafts 14-16: how many of the peer's requests may be open at once; MAX_REQUEST_ID is
    /// granted as they complete (draft-14 §9.5). Newer drafts use QUIC's stream limit.
    pub max_peer_requests: u64,
    /// The largest object payload assembled in memory by `next_object`; larger ones are
    /// refused (read them in chunks with `next_event` instead).
    pub max_object_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pending_streams: 64,
            max_namespace_subscriptions: 64,
            max_track_subscriptions: 64,
            max_published_namespaces: 4096,
            namespace_queue: 1024,
            setup_timeout: Duration::from_secs(10),
            request_id_window: 16 * 1024,
            max_peer_requests: 4096,
            max_object_size: 64 << 20,
        }
    }
}

/// How a session behaves. [`SessionConfig::default`] is a sensible endpoint.
///
/// ```
/// use moq_transport::{SessionConfig, namespace::NamespaceIndex};
/// // A relay shares one index between all its sessions, so each answers SUBSCRIBE_NAMESPACE
/// // with what every publisher announced.
/// let shared = NamespaceIndex::new();
/// let config = SessionConfig::default()
///     .with_namespaces(shared.clone())
///     .with_announced(shared);
/// assert_eq!(config.max_request_updates, 16);
/// ```
#[derive(Clone)]
pub struct SessionConfig {
    /// MOQT_IMPLEMENTATION to send; `None` sends nothing.
    pub implementation: Option<String>,
    /// MAX_REQUEST_UPDATES we announce: outstanding REQUEST_UPDATEs per stream the peer may have
    /// (draft-19; 0 = unlimited).
    pub max_request_updates: u64,
    /// MAX_AUTH_TOKEN_CACHE_SIZE we announce (0 = the peer may not register aliases).
    pub max_auth_token_cache_size: u64,
    /// MAX_FILTER_RANGES we announce (draft-19; 0 = the peer may not send Range Filters).
    pub max_filter_ranges: u64,
    /// AUTHORIZATION_TOKENs to send in SETUP.
    pub setup_tokens: Vec<AuthToken>,
    /// The authorization policy for the peer's requests.
    pub authorizer: Arc<dyn Authorizer>,
    /// The namespaces this endpoint knows, used to answer SUBSCRIBE_NAMESPACE. Our own
    /// [`crate::Session::publish_namespace`] registers here.
    pub namespaces: NamespaceIndex,
    /// Where namespaces the peer announces with PUBLISH_NAMESPACE are registered once accepted.
    /// A relay passes the same index as `namespaces`.
    pub announced: NamespaceIndex,
    /// Hand the peer's SUBSCRIBE, FETCH, TRACK_STATUS, PUBLISH and SUBSCRIBE_TRACKS to the
    /// application through [`crate::Session::incoming`]. When false they are refused.
    pub accept_requests: bool,
    /// How many such requests wait for the application before new ones get EXCESSIVE_LOAD.
    pub request_queue: usize,
    /// Limits.
    pub limits: Limits,
    /// Told how each of the peer's requests was answered, if set (a relay's metrics).
    pub observer: Option<Arc<dyn RequestObserver>>,
    /// HOP_ID to send in SETUP (MoQ Cluster extension, draft-lcurley-moq-cluster; sent from
    /// draft-17 only): this endpoint's Hop ID, declaring it a relay of a cluster. `None` sends
    /// nothing. When the peer declares one too the extension is on
    /// ([`crate::SessionInfo::cluster_peer`]): NAMESPACE takes its extended form, every
    /// PUBLISH_NAMESPACE and NAMESPACE carries HOP_PATH (this Hop ID appended to the route
    /// [`crate::namespace::NamespaceIndex::route`] holds) and ROUTE_COST, and a received one
    /// whose HOP_PATH holds this Hop ID is dropped.
    pub cluster_hop: Option<u64>,
    /// RELAY_COST to send with HOP_ID: what pulling from this endpoint costs.
    pub relay_cost: Option<u64>,
}

/// Sees how the peer's requests are answered: once per request, with the first answer.
pub trait RequestObserver: Send + Sync + 'static {
    /// The peer's request `kind` (the message name: "SUBSCRIBE", "PUBLISH_NAMESPACE", ...)
    /// at `version` was answered `elapsed` after it arrived: `Ok` for an OK, or the
    /// REQUEST_ERROR code.
    fn answered(
        &self,
        version: Version,
        kind: &'static str,
        outcome: Result<(), RequestErrorCode>,
        elapsed: Duration,
    );

    /// The peer's SUBSCRIBE_NAMESPACE for `prefix` was accepted and is answered from
    /// [`SessionConfig::namespaces`]: what this returns is held while the subscription lives
    /// on that prefix, and dropped when it ends or a REQUEST_UPDATE moves it to another
    /// prefix (this is then asked about the new one). A relay uses it to learn the prefixes
    /// its subscribers ask about, and feeds the index from other sources under them while
    /// the guard is held. The default holds nothing.
    fn discovering(&self, _prefix: &TrackNamespace) -> Option<Box<dyn Send + Sync>> {
        None
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            implementation: Some(IMPLEMENTATION.to_string()),
            max_request_updates: 16,
            max_auth_token_cache_size: 4096,
            max_filter_ranges: 32,
            setup_tokens: Vec::new(),
            authorizer: Arc::new(AllowAll),
            namespaces: NamespaceIndex::new(),
            announced: NamespaceIndex::new(),
            accept_requests: false,
            request_queue: 64,
            limits: Limits::default(),
            observer: None,
            cluster_hop: None,
            relay_cost: None,
        }
    }
}

impl SessionConfig {
    /// Uses `index` as the set of namespaces this endpoint knows.
    pub fn with_namespaces(mut self, index: NamespaceIndex) -> Self {
        self.namespaces = index;
        self
    }

    /// Registers accepted PUBLISH_NAMESPACEs in `index`.
    pub fn with_announced(mut self, index: NamespaceIndex) -> Self {
        self.announced = index;
        self
    }

    /// Uses `authorizer` for the peer's requests.
    pub fn with_authorizer(mut self, authorizer: impl Authorizer) -> Self {
        self.authorizer = Arc::new(authorizer);
        self
    }

    /// Sends `token` in SETUP.
    pub fn with_setup_token(mut self, token: AuthToken) -> Self {
        self.setup_tokens.push(token);
        self
    }

    /// Hands the peer's track requests to the application ([`crate::Session::incoming`]).
    pub fn with_requests(mut self) -> Self {
        self.accept_requests = true;
        self
    }

    /// Replaces the limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

impl fmt::Debug for SessionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionConfig")
            .field("implementation", &self.implementation)
            .field("max_request_updates", &self.max_request_updates)
            .field("max_auth_token_cache_size", &self.max_auth_token_cache_size)
            .field("max_filter_ranges", &self.max_filter_ranges)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}
