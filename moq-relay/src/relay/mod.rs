//! The relay: sessions, routes, per-track upstream subscriptions, fan-out and FETCH.
//!
//! [`Relay`] (this file) binds, accepts and shuts down. The rest, each a part of what the
//! shared state ([`state::Inner`]) does:
//!
//! - `session`: one session's life (registered, announcements mirrored, requests answered);
//! - `routing`: routes by namespace, the relay track a SUBSCRIBE joins;
//! - `upstream`: upstream subscriptions and PUBLISHes feeding a track's cache;
//! - `lifecycle`: downstream and upstream counts and what their ends do to a track;
//! - `requests`: SUBSCRIBE, FETCH, fills and TRACK_STATUS the directory passes on;
//! - `cluster_glue`: exports, offers and links of a cluster;
//! - `track`, `mirror`: a relay track, and a namespace index followed as changes;
//! - `websocket`: sessions over QMux over WebSocket, upgraded on the HTTP side.

mod cluster_glue;
mod lifecycle;
mod mirror;
mod origins;
mod registry_discovery;
mod registry_glue;
mod registry_routes;
mod requests;
mod routing;
mod session;
mod state;
mod successor;
mod tasks;
mod track;
mod upstream;
#[cfg(feature = "websocket")]
mod websocket;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moq_client::model::{Directory, DirectoryOptions};
use moq_core::TrackNamespace;
use moq_core::codes::SessionErrorCode;
use moq_transport::endpoint::{Server, ServerConfig};
use moq_transport::namespace::{NamespaceIndex, NamespaceRoute, PrefixTrie};
use moq_transport::tls::Certificate;
use moq_transport::{Error, Session, SessionConfig};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use self::cluster_glue::keep_link;
use self::lifecycle::run_timers;
pub use self::origins::RegistryRouting;
pub use self::registry_glue::register_local_namespaces;
use self::requests::RelayUpstream;
use self::state::{ClusterState, Inner, owner_id};
use self::successor::{NewUri, SuccessorSource};
use self::tasks::TaskSet;
use crate::cluster::{self, ClusterAuth, LinkStatus, Links, Offers};
use crate::config::RelayConfig;
use crate::metrics::Metrics;
use crate::registry::{Registry, RelayRef};

/// A running relay. Cheap to clone.
///
/// Dropping a handle, even the last, stops nothing: the sessions and links already started
/// hold the relay's state and run on; [`Relay::shutdown`] is how a relay stops.
#[derive(Clone, Debug)]
pub struct Relay {
    inner: Arc<Inner>,
    server: Arc<Server>,
    addr: SocketAddr,
    /// The prefixes followed in the route registry for the sessions' discovery (held here,
    /// not in [`Inner`], which it refers to).
    discovery: Arc<registry_discovery::Discovery>,
}

impl Relay {
    /// Binds the relay's UDP port. Sessions are accepted by [`Relay::run`].
    pub fn bind(config: RelayConfig) -> Result<Relay, Error> {
        let index = NamespaceIndex::new();
        let metrics = Arc::new(Metrics::new(config.metrics_per_namespace));
        let mut session = SessionConfig::default()
            .with_namespaces(index.clone())
            .with_requests();
        session.authorizer = match &config.cluster {
            Some(c) => Arc::new(ClusterAuth {
                inner: config.authorizer.clone(),
                prefix: c.prefix.clone(),
            }),
            None => config.authorizer.clone(),
        };
        session.limits = config.limits.clone();
        // draft-lcurley-moq-cluster-01 Setup Negotiation: a relay declares its Hop ID on every
        // session; the extension is on where the peer (another relay) declares one too.
        session.cluster_hop = config.cluster_hop.or_else(|| {
            let c = config.cluster.as_ref()?;
            Some(crate::cluster_ext::hop_id(&c.node))
        });
        session.relay_cost = config.relay_cost;
        // The metrics, and the hook that learns the prefixes subscribers discover under.
        let discovery = Arc::new(registry_discovery::Discovery::default());
        session.observer = Some(Arc::new(registry_discovery::Observer {
            metrics: metrics.clone(),
            discovery: discovery.clone(),
        }));
        let mut server = ServerConfig::new(config.bind, config.certificate.clone());
        server.versions = config.versions.clone();
        server.session = session.clone();
        server.qlog_dir = config.qlog_dir.clone();
        server.quic = config.quic;
        server.udp_buffer = config.udp_buffer;
        // Each session registers what its peer announces in the shared index through a view
        // owned by the session's id: one entry per namespace, which is also its route
        // (`Inner::route_changed`, `Inner::routes_for`).
        let ids = Arc::new(AtomicU64::new(1));
        let (views, view_ids) = (index.clone(), ids.clone());
        server.per_session = Some(Arc::new(move |c: SessionConfig| {
            c.with_announced(views.owned_by(owner_id(&view_ids)))
        }));
        let server = Server::bind(server)?;
        let addr = server.local_addr()?;
        let tasks = TaskSet::default();
        let weak = Arc::downgrade(&metrics);
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(Metrics::UPKEEP);
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(m) => m.upkeep(),
                    None => return,
                }
            }
        });
        let (timers, due) = mpsc::unbounded_channel();
        let mut config = config;
        config.serve.stats = Some(metrics.serve.clone());
        let cluster = config.cluster.clone();
        let link_metrics = metrics.clone();
        let options = DirectoryOptions {
            serve: config.serve.clone(),
            rendezvous: Duration::ZERO,
            max_rendezvous: config.max_rendezvous,
        };
        let inner = Arc::new_cyclic(|weak| Inner {
            config,
            index,
            routes: Mutex::new(PrefixTrie::new()),
            routes_changed: watch::channel(0).0,
            tracks: Mutex::new(HashMap::new()),
            finished: Mutex::new(HashMap::new()),
            directory: Directory::with_upstream(
                options,
                Arc::new(RelayUpstream::new(weak.clone())),
            ),
            sessions: Mutex::new(HashMap::new()),
            session_count: watch::channel(0).0,
            metrics,
            next_id: ids,
            draining: Default::default(),
            goaway: Mutex::new(None),
            successor: Default::default(),
            session_config: session,
            cluster: cluster.map(|config| ClusterState {
                config,
                offers: Mutex::new(Offers::default()),
                exports: Mutex::new(HashMap::new()),
                learned: Mutex::new(HashMap::new()),
                local: NamespaceIndex::new(),
                local_regs: Mutex::new(HashMap::new()),
                links: Links::new(link_metrics),
            }),
            tasks,
            timers,
            origins: Default::default(),
        });
        discovery.attach(Arc::downgrade(&inner));
        let weak = Arc::downgrade(&inner);
        inner.index.on_owned_change(move |ns, owner, added| {
            if let Some(inner) = weak.upgrade() {
                inner.route_changed(ns, owner.get(), added);
            }
        });
        inner.tasks.spawn(run_timers(Arc::downgrade(&inner), due));
        Ok(Relay {
            inner,
            server: Arc::new(server),
            addr,
            discovery,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The SHA-256 fingerprint of the certificate the relay presents now, hex.
    pub fn fingerprint(&self) -> String {
        moq_transport::tls::hex(&self.server.fingerprint())
    }

    /// Presents `certificate` from the next handshake on; open sessions continue with theirs.
    pub fn set_certificate(&self, certificate: &Certificate) -> Result<(), Error> {
        self.server.set_certificate(certificate)
    }

    /// The certificate the relay presents, following [`Relay::set_certificate`]: what its HTTP
    /// side presents over TLS ([`crate::http::serve_tls`]).
    pub fn certificate(&self) -> &moq_transport::tls::ServerCert {
        self.server.certificate()
    }

    /// The relay's counters.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// Whether `ns` is an entry of the cluster view (exchanged between relays, not a
    /// namespace any client published).
    pub fn is_cluster_view(&self, ns: &TrackNamespace) -> bool {
        self.inner
            .cluster
            .as_ref()
            .is_some_and(|c| cluster::in_view(&c.config.prefix, ns))
    }

    /// How the relay reaches `ns` (MoQ Cluster extension): the hops and cost of its best
    /// route, the default (no hops, cost 0) for a namespace its own publisher announced;
    /// `None` for a namespace it does not know.
    pub fn namespace_route(&self, ns: &TrackNamespace) -> Option<NamespaceRoute> {
        self.inner.index.route(ns)
    }

    /// This relay's Hop ID, if it declares one (see [`RelayConfig::cluster_hop`]).
    pub fn hop_id(&self) -> Option<u64> {
        self.inner.session_config.cluster_hop
    }

    /// The open sessions that negotiated the MoQ Cluster extension (their peer is a relay
    /// that declared a Hop ID too), with the peer's Hop ID.
    pub fn cluster_peers(&self) -> Vec<u64> {
        let sessions = self.inner.sessions.lock();
        sessions
            .values()
            .filter_map(|s| s.info().cluster_peer)
            .collect()
    }

    /// The namespaces the relay knows.
    pub fn namespaces(&self) -> &NamespaceIndex {
        &self.inner.index
    }

    /// False once [`Relay::shutdown`] began draining.
    pub fn is_accepting(&self) -> bool {
        !self.inner.draining.load(Ordering::Relaxed)
    }

    /// Number of open sessions.
    pub fn sessions(&self) -> usize {
        self.inner.sessions.lock().len()
    }

    /// Accepts and serves sessions until the relay is shut down.
    ///
    /// Cancel safety: dropping the future stops accepting new sessions; the sessions and
    /// links already started are the relay's tasks and go on until [`Relay::shutdown`].
    pub async fn run(&self) {
        if let Some(c) = &self.inner.cluster {
            let links = c.config.peers.iter().map(|p| (p, false));
            for (peer, upstream) in links.chain(c.config.upstreams.iter().map(|u| (u, true))) {
                let inner = Arc::downgrade(&self.inner);
                self.inner
                    .tasks
                    .spawn(keep_link(inner, peer.clone(), upstream));
            }
        }
        while let Some(session) = self.server.accept().await {
            self.inner.clone().serve_accepted(session);
        }
    }

    /// The links this relay dials (its peers and upstreams) and where each stands: up, or why
    /// not (a failed dial's cause: certificate, token, unreachable). Empty outside a cluster.
    /// `/health` shows the same.
    pub fn links(&self) -> Vec<LinkStatus> {
        self.inner
            .cluster
            .as_ref()
            .map(|c| c.links.all())
            .unwrap_or_default()
    }

    /// Keeps a cluster link to the relay at `url` (`moqt://host:port` or `https://...`),
    /// redialing with backoff while this relay runs. Does nothing unless the relay was
    /// configured with [`RelayConfig::cluster`].
    pub fn connect_peer(&self, url: &str) {
        if self.inner.cluster.is_some() {
            self.inner.tasks.spawn(keep_link(
                Arc::downgrade(&self.inner),
                url.to_string(),
                false,
            ));
        }
    }

    /// Runs the relay in the background, as one of its tasks ([`Relay::task_count`]): the
    /// handle resolves when [`Relay::run`] returns or [`Relay::shutdown`] ends it. Dropping the
    /// handle detaches it (the relay keeps running).
    pub fn spawn(&self) -> JoinHandle<()> {
        let this = self.clone();
        self.inner.tasks.spawn(async move { this.run().await })
    }

    /// Runs `task` as one of the relay's tasks: counted by [`Relay::task_count`] and dropped
    /// when [`Relay::shutdown`] ends (a task that outlives the relay's drain, such as its HTTP
    /// side or a certificate reloader). After the shutdown it is dropped without running.
    pub fn spawn_task(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.inner.tasks.spawn(task);
    }

    /// How many tasks the relay runs now: [`Relay::spawn`]'s, one per session served, per
    /// upstream subscription, accepted PUBLISH and subgroup stream being copied into the cache,
    /// per cluster link it dials, its timers and upkeep, and those given to
    /// [`Relay::spawn_task`]. Each session's own tasks are counted by its
    /// `Session::task_count`. Zero once [`Relay::shutdown`] returned.
    pub fn task_count(&self) -> usize {
        self.inner.tasks.len()
    }

    /// Sends GOAWAY to every session (draft-19 §10.4): clients reconnect to `new_uri` (or the
    /// same URI if empty) and sessions still open after `timeout` are closed.
    ///
    /// Cancel safety: dropped before it resolves, GOAWAY is not sent to the sessions it had not
    /// reached yet; the deadline it recorded still applies to sessions that open later.
    pub async fn goaway(&self, new_uri: &str, timeout: Duration) {
        self.send_goaway(NewUri::Exact(new_uri.to_string()), timeout)
            .await
    }

    async fn send_goaway(&self, new_uri: NewUri, timeout: Duration) {
        // Recorded before the sessions are listed: one registered later sees it (serve_session).
        *self.inner.goaway.lock() = Some((new_uri.clone(), tokio::time::Instant::now() + timeout));
        let sessions: Vec<Session> = self.inner.sessions.lock().values().cloned().collect();
        // All at once: one peer slow to read its control stream delays no other. Each a task
        // of its own (counted by the relay's), aborted if this is dropped first.
        let mut sent = tokio::task::JoinSet::new();
        for s in sessions {
            // draft-19 §10.4: the new session URI SHOULD use the same scheme as the current one.
            let uri = new_uri.for_transport(s.transport());
            sent.spawn(self.inner.tasks.track(async move {
                let _ = s.goaway(&uri, timeout).await;
            }));
        }
        sent.join_all().await;
    }

    /// Has a draining relay with no configured [`RelayConfig::successor`] name in GOAWAY the
    /// relay `registry` chooses ([`crate::registry::choose_successor`]: the least loaded live
    /// relay of `region`, else of any region, never `me`), by the address it advertises, in
    /// each session's scheme (`moqt://` raw QUIC, `https://` WebTransport, `wss://` WebSocket). When draining, the
    /// relay first heartbeats `me` as draining ([`crate::registry::DRAINING_LOAD`]); a store
    /// that does not answer within its timeout (or the drain's grace) leaves the rule without a
    /// registry: the first cluster peer, else none. Returns false (and changes nothing) if a
    /// registry was already given.
    pub fn successor_from_registry(
        &self,
        registry: Arc<dyn Registry>,
        me: RelayRef,
        region: String,
    ) -> bool {
        let source = SuccessorSource {
            registry,
            me,
            region,
        };
        self.inner.successor.set(source).is_ok()
    }

    /// The load this relay reports in its registry heartbeats: its open sessions, or
    /// [`crate::registry::DRAINING_LOAD`] once it began draining.
    pub fn registry_load(&self) -> u64 {
        match self.is_accepting() {
            true => self.sessions() as u64,
            false => crate::registry::DRAINING_LOAD,
        }
    }

    /// Whom GOAWAY names when draining: the configured successor, else the registry's choice
    /// (asked for no longer than until `deadline`), else the first cluster peer, else none.
    async fn successor(&self, deadline: tokio::time::Instant) -> NewUri {
        if let Some(uri) = &self.inner.config.successor {
            return NewUri::Exact(uri.clone());
        }
        if let Some(source) = self.inner.successor.get() {
            let limit = deadline.saturating_duration_since(tokio::time::Instant::now());
            if let Some(address) = source.choose(limit).await {
                return NewUri::Relay(address);
            }
        }
        let peer = self.inner.cluster.as_ref();
        let peer = peer.and_then(|c| c.config.peers.first().cloned());
        NewUri::Exact(peer.unwrap_or_default())
    }

    /// Drains: refuses new sessions, GOAWAY to everyone (naming the configured successor, else
    /// the registry's choice, else the first cluster peer, if any), waits up to `grace` for sessions to leave, then closes the endpoint (the sessions
    /// still open with it; at most one more second for the peers to be told), and [`Relay::run`]
    /// returns. Last it cancels every task of the relay ([`Relay::task_count`]) and waits for
    /// them and each session's tasks to stop.
    ///
    /// Not cancel safe: dropped before it returns, the relay may be left refusing sessions
    /// with its tasks running.
    pub async fn shutdown(&self, grace: Duration) {
        // New clients are refused at once (a reconnecting one goes to the GOAWAY's URI, or
        // elsewhere), not taken back by a relay that is leaving.
        self.server.refuse_new();
        self.inner.draining.store(true, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + grace;
        let mut open = self.inner.session_count.subscribe();
        // Clients are sent to the configured successor, else to the relay the registry
        // chooses, else to a peer of the cluster (draft-19 §10.4: the new session URI); with
        // none, back to the same URI. Asking the registry takes from the grace, never more.
        let next = self.successor(deadline).await;
        let drained = async {
            let grace = deadline.saturating_duration_since(tokio::time::Instant::now());
            self.send_goaway(next, grace).await;
            let _ = open.wait_for(|n| *n == 0).await;
        };
        let _ = tokio::time::timeout_at(deadline, drained).await;
        // draft-19 §3.6: a session not closed by the peer within the timeout is closed, with
        // GOAWAY_TIMEOUT if requests are still open: the rule of the sessions' own GOAWAY
        // timers, due now too, so the code does not depend on which fires first. Cluster links
        // this relay dialed are not the server's connections: closed the same way.
        let open: Vec<Session> = self.inner.sessions.lock().values().cloned().collect();
        for s in &open {
            s.close_after_goaway();
        }
        // A WebTransport session's close is a capsule on its CONNECT stream, written by a task
        // of its own: let those reach the peers before the endpoint closes every connection.
        // Also when no session is left: one that just closed itself (its own GOAWAY timer fell
        // due with the deadline) may still be writing its capsule. Without it the peer sees
        // the endpoint's close and no session code (web-transport-quinn then reports the
        // session as closed locally; CI saw it once).
        let _ = tokio::time::timeout(Duration::from_secs(1), self.server.wait_idle()).await;
        self.server
            .close(SessionErrorCode::NO_ERROR.0, "relay shutting down");
        // Let the close reach the clients that stayed, so they do not wait for a timeout.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.server.wait_idle()).await;
        // Every task of the relay, and of the sessions it served, is gone when this returns
        // (each is dropped at its next poll: this waits for no peer).
        self.inner.tasks.cancel();
        let stopped = async {
            self.inner.tasks.stopped().await;
            futures::future::join_all(open.iter().map(|s| s.stopped())).await;
        };
        let _ = tokio::time::timeout(Duration::from_secs(1), stopped).await;
    }
}
