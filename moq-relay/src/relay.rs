//! The relay: sessions, routes, per-track upstream subscriptions, fan-out and FETCH.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::FutureExt;
use moq_client::cache::TrackCache;
use moq_client::cache::{CachedObject, DATAGRAM_SUBGROUP, Malformed, Subgroup, SubgroupEnd};
use moq_client::directory::{Directory, DirectoryOptions, Hold, Peer, Source, Upstream, status_of};
use moq_client::malformed::TrackCheck;
use moq_client::serve::{
    DEFAULT_FILL_TIMEOUT, serve_fetch, serve_fetch_now, serve_fill, serve_fill_now,
};
use moq_core::codes::{PublishDoneCode, RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::data::RangeEnd;
use moq_core::message::{FetchType, Parameters, RequestError};
use moq_core::{FullTrackName, GroupOrder, Location, Properties, TrackNamespace};
use moq_transport::endpoint::{Server, ServerConfig};
use moq_transport::namespace::{
    NamespaceEvent, NamespaceIndex, NamespaceRegistration, NamespaceWatch, PrefixTrie,
    PublishedNamespace,
};
use moq_transport::tls::Certificate;
use moq_transport::track::{
    FetchEnd, FetchItem, FetchResponse, FetchWriter, Fill, Incoming, IncomingFetch,
    IncomingPublish, IncomingSubgroup, JoiningStart, Object, Subscription, SubscriptionWriter,
    TrackEvent, TrackStatusInfo, last_covered,
};
use moq_transport::{Error, Session, SessionConfig};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::cluster::{
    self, ClusterAuth, ClusterConfig, LinkStatus, Links, Offer, Offers, ViewEvent,
};
use crate::config::RelayConfig;
use crate::metrics::Metrics;

/// A publisher's session reachable for a namespace.
#[derive(Clone, Debug)]
struct Route {
    session_id: u64,
    session: Session,
}

/// One track the relay carries: its cache and the upstream subscriptions feeding it.
#[derive(Debug)]
struct RelayTrack {
    name: FullTrackName,
    cache: TrackCache,
    /// Upstream subscriptions by the publisher's session ID.
    upstreams: Mutex<HashMap<u64, JoinHandle<()>>>,
    /// Upstream subscriptions established and still delivering.
    live_upstreams: AtomicUsize,
    /// Upstream attempts not answered yet.
    pending_upstreams: AtomicUsize,
    /// The first successful upstream answer (with where the track stood then), or the last
    /// error once every attempt failed.
    answer: watch::Sender<Option<Result<Standing, RequestError>>>,
    /// Downstream subscriptions served from this track.
    downstreams: AtomicUsize,
    /// Set when the track came from a PUBLISH rather than from routing.
    published: bool,
    /// The latest rendezvous deadline of a downstream SUBSCRIBE still waiting for the track:
    /// upstream SUBSCRIBEs carry what is left of it, so a publisher that announced the
    /// namespace but has not created the track yet holds the request too.
    rendezvous_until: Mutex<Option<tokio::time::Instant>>,
    /// A NEW_GROUP_REQUEST from a downstream SUBSCRIBE that arrived with no upstream
    /// subscription: upstream SUBSCRIBEs carry it (draft-19 §10.2.18).
    new_group_request: Mutex<Option<u64>>,
    /// Counts the objects received for this track.
    received: crate::metrics::Received,
    /// Counts the upstreams that went live, so a wait for a new publisher knows whether one
    /// came while it waited.
    generation: AtomicU64,
    /// The sessions whose upstream subscription answered and still delivers: a FETCH goes to
    /// one of them first (`fetch_route`), not to a publisher that may have died unnoticed.
    delivering: Mutex<HashSet<u64>>,
}

impl RelayTrack {
    /// A track with nothing upstream yet; `published` if a PUBLISH brought it.
    fn new(
        inner: &Inner,
        name: &FullTrackName,
        properties: Properties,
        published: bool,
    ) -> Arc<Self> {
        Arc::new(RelayTrack {
            name: name.clone(),
            cache: TrackCache::new(name.clone(), properties, inner.config.cache),
            upstreams: Mutex::new(HashMap::new()),
            live_upstreams: AtomicUsize::new(0),
            pending_upstreams: AtomicUsize::new(0),
            answer: watch::channel(None).0,
            downstreams: AtomicUsize::new(0),
            published,
            rendezvous_until: Mutex::new(None),
            new_group_request: Mutex::new(None),
            received: inner.metrics.received(&name.namespace),
            generation: AtomicU64::new(0),
            delivering: Mutex::new(HashSet::new()),
        })
    }

    /// The group below which a new upstream's objects show that its publisher restarted its
    /// group numbering: the group of the last object stored, if the track held objects. Also
    /// while another upstream still counts as live: a publisher killed outright is noticed
    /// only at its session's idle timeout, and its restarted process is a new upstream
    /// session beside it (a new incarnation of the track, not one publisher contradicting
    /// itself).
    fn restart_floor(&self) -> Option<u64> {
        self.cache.stored().map(|l| l.group)
    }
}

#[derive(Debug)]
struct Inner {
    config: RelayConfig,
    index: NamespaceIndex,
    routes: Mutex<PrefixTrie<Route>>,
    routes_changed: watch::Sender<u64>,
    tracks: Mutex<HashMap<FullTrackName, Arc<RelayTrack>>>,
    /// Tracks whose publisher ended them, by name, while their cache may hold objects (for
    /// the cache's age limit): FETCH, TRACK_STATUS and SUBSCRIBE are answered from them when
    /// no publisher has the track (`finished_track`), until the instant each is forgotten.
    finished: Mutex<HashMap<FullTrackName, (TrackCache, tokio::time::Instant)>>,
    /// Answers every session's SUBSCRIBE, FETCH, TRACK_STATUS and SUBSCRIBE_TRACKS, asking
    /// this relay's routes and upstreams (`RelayUpstream`) for what it does not hold. It holds
    /// the PUBLISHed tracks, offered to SUBSCRIBE_TRACKS subscribers.
    directory: Directory,
    sessions: Mutex<HashMap<u64, Session>>,
    /// The number of open sessions, for a drain to wait on.
    session_count: watch::Sender<usize>,
    metrics: Arc<Metrics>,
    next_id: AtomicU64,
    /// Set when the relay began draining.
    draining: std::sync::atomic::AtomicBool,
    /// The GOAWAY every session gets once the relay sent one (the new session URI and when
    /// the sessions will be closed): a session set up after it was sent gets it too.
    goaway: Mutex<Option<(String, tokio::time::Instant)>>,
    /// Every session's configuration (links dial with it too).
    session_config: SessionConfig,
    /// Cluster state, when the relay is in a cluster.
    cluster: Option<ClusterState>,
}

/// What the relay knows of its cluster.
#[derive(Debug)]
struct ClusterState {
    config: ClusterConfig,
    /// What the links offer, by namespace.
    offers: Mutex<Offers>,
    /// The relay's cluster view: for each namespace it can reach, its entry with the path.
    exports: Mutex<HashMap<TrackNamespace, (Vec<String>, NamespaceRegistration)>>,
    /// Learned namespaces registered in the index (for clients' discovery).
    learned: Mutex<HashMap<TrackNamespace, NamespaceRegistration>>,
    /// The namespaces this relay's own clients publish, which links to foreign upstreams
    /// announce (PUBLISH_NAMESPACE); learned ones are not.
    local: NamespaceIndex,
    /// Each namespace's registration in `local`.
    local_regs: Mutex<HashMap<TrackNamespace, NamespaceRegistration>>,
    /// The links this relay dials: their state, WARN lines and metrics.
    links: Links,
}

/// A running relay. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Relay {
    inner: Arc<Inner>,
    server: Arc<Server>,
    addr: SocketAddr,
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
        session.observer = Some(metrics.clone());
        let mut server = ServerConfig::new(config.bind, config.certificate.clone());
        server.versions = config.versions.clone();
        server.session = session.clone();
        server.qlog_dir = config.qlog_dir.clone();
        server.quic = config.quic;
        server.udp_buffer = config.udp_buffer;
        // Each session registers what its peer announces in its own index, which the relay
        // mirrors into its routes and the shared index.
        server.per_session = Some(Arc::new(|c: SessionConfig| {
            c.with_announced(NamespaceIndex::new())
        }));
        let server = Server::bind(server)?;
        let addr = server.local_addr()?;
        let weak = Arc::downgrade(&metrics);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Metrics::UPKEEP);
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(m) => m.upkeep(),
                    None => return,
                }
            }
        });
        let mut config = config;
        config.serve.stats = Some(metrics.serve.clone());
        let cluster = config.cluster.clone();
        let link_metrics = metrics.clone();
        let options = DirectoryOptions {
            serve: config.serve.clone(),
            rendezvous: Duration::ZERO,
            max_rendezvous: config.max_rendezvous,
        };
        Ok(Relay {
            inner: Arc::new_cyclic(|weak| Inner {
                config,
                index,
                routes: Mutex::new(PrefixTrie::new()),
                routes_changed: watch::channel(0).0,
                tracks: Mutex::new(HashMap::new()),
                finished: Mutex::new(HashMap::new()),
                directory: Directory::with_upstream(options, Arc::new(RelayUpstream(weak.clone()))),
                sessions: Mutex::new(HashMap::new()),
                session_count: watch::channel(0).0,
                metrics,
                next_id: AtomicU64::new(1),
                draining: Default::default(),
                goaway: Mutex::new(None),
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
            }),
            server: Arc::new(server),
            addr,
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
    pub async fn run(&self) {
        if let Some(c) = &self.inner.cluster {
            let links = c.config.peers.iter().map(|p| (p, false));
            for (peer, upstream) in links.chain(c.config.upstreams.iter().map(|u| (u, true))) {
                let inner = Arc::downgrade(&self.inner);
                tokio::spawn(keep_link(inner, peer.clone(), upstream));
            }
        }
        while let Some(session) = self.server.accept().await {
            let inner = self.inner.clone();
            tokio::spawn(async move {
                let link = inner
                    .cluster
                    .as_ref()
                    .is_some_and(|c| cluster::is_link(&c.config.prefix, session.info()));
                let link = link.then_some(Link::Cluster(None));
                handle_session(inner, session, link).await
            });
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
            tokio::spawn(keep_link(
                Arc::downgrade(&self.inner),
                url.to_string(),
                false,
            ));
        }
    }

    /// Runs the relay in the background.
    pub fn spawn(&self) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move { this.run().await })
    }

    /// Sends GOAWAY to every session (draft-19 §10.4): clients reconnect to `new_uri` (or the
    /// same URI if empty) and sessions still open after `timeout` are closed.
    pub async fn goaway(&self, new_uri: &str, timeout: Duration) {
        // Recorded before the sessions are listed: one registered later sees it (handle_session).
        *self.inner.goaway.lock() =
            Some((new_uri.to_string(), tokio::time::Instant::now() + timeout));
        let sessions: Vec<Session> = self.inner.sessions.lock().values().cloned().collect();
        // All at once: one peer slow to read its control stream delays no other.
        let mut sent = tokio::task::JoinSet::new();
        for s in sessions {
            let uri = new_uri.to_string();
            sent.spawn(async move {
                let _ = s.goaway(&uri, timeout).await;
            });
        }
        sent.join_all().await;
    }

    /// Drains: refuses new sessions, GOAWAY to everyone (naming the first cluster peer, if
    /// any), waits up to `grace`
    /// for sessions to leave, then closes the
    /// endpoint (the sessions still open with it; at most one more second for the peers to be
    /// told) and [`Relay::run`] returns.
    pub async fn shutdown(&self, grace: Duration) {
        // New clients are refused at once (a reconnecting one goes to the GOAWAY's URI, or
        // elsewhere), not taken back by a relay that is leaving.
        self.server.refuse_new();
        self.inner.draining.store(true, Ordering::Relaxed);
        let deadline = tokio::time::Instant::now() + grace;
        let mut open = self.inner.session_count.subscribe();
        // Clients are sent to the configured successor, else to a peer of the cluster
        // (draft-19 §10.4: the new session URI); with neither, back to the same URI.
        let next = self
            .inner
            .config
            .successor
            .clone()
            .or_else(|| {
                let c = self.inner.cluster.as_ref()?;
                c.config.peers.first().cloned()
            })
            .unwrap_or_default();
        let drained = async {
            self.goaway(&next, grace).await;
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
    }
}

/// What a session to another relay is.
#[derive(Clone, Debug)]
enum Link {
    /// A link to a relay of this cluster: both sides exchange cluster views. The peer's URL
    /// when this relay dialed it.
    Cluster(Option<String>),
    /// A relay of another implementation this relay takes namespaces from, as a client does:
    /// SUBSCRIBE_NAMESPACE for everything, each namespace offered through the path `[name]`.
    Upstream(String),
}

/// The least time a session set up after the relay sent GOAWAY is given to read it.
const LATE_GOAWAY: Duration = Duration::from_millis(250);

async fn handle_session(inner: Arc<Inner>, session: Session, link: Option<Link>) {
    let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
    let _gauge = inner
        .metrics
        .session(session.version(), session.transport());
    {
        let mut sessions = inner.sessions.lock();
        sessions.insert(id, session.clone());
        inner.session_count.send_replace(sessions.len());
    }
    // A GOAWAY sent to every session before this one was registered reaches it too, with what
    // is left of its timeout (draft-19 §10.4), but never less than LATE_GOAWAY: a session
    // closed at once after it would lose the GOAWAY with the connection.
    let goaway = inner.goaway.lock().clone();
    if let Some((uri, until)) = goaway {
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let s = session.clone();
        tokio::spawn(async move {
            let _ = s.goaway(&uri, left.max(LATE_GOAWAY)).await;
        });
    }
    tracing::info!(session = id, version = %session.version(), transport = ?session.transport(), "session");
    let routes = tokio::spawn(sync_routes(inner.clone(), id, session.clone()));
    let announcing = match (&link, &inner.cluster) {
        (Some(Link::Upstream(_)), Some(c)) => Some(tokio::spawn(announce_upstream(
            c.local.clone(),
            session.clone(),
        ))),
        _ => None,
    };
    let link_kind = link.clone();
    let learning = link.map(|l| tokio::spawn(learn(inner.clone(), id, session.clone(), l)));
    let incoming = session.incoming();
    let peer = Peer {
        key: id,
        session: session.downgrade(),
    };
    // Ends when the session does.
    while let Some(req) = incoming.next().await {
        if let Some(Incoming::Publish(p)) = inner.directory.answer(req, &peer) {
            // Not one of the session's tasks: it ends when the PUBLISH does, seeing how (the
            // session's close included), which decides whether the track waits for a new
            // publisher.
            tokio::spawn(on_publish(inner.clone(), id, p));
        }
    }
    let ended = session.closed().await;
    if let (Some(Link::Cluster(None)), Some(_)) = (&link_kind, &inner.cluster) {
        let ours = inner.draining.load(Ordering::Relaxed);
        cluster::accepted_link_lost(session.info(), &ended, ours);
    }
    routes.abort();
    for task in learning.into_iter().chain(announcing) {
        task.abort();
    }
    forget_link(&inner, id);
    remove_routes_of(&inner, id);
    {
        let mut sessions = inner.sessions.lock();
        sessions.remove(&id);
        inner.session_count.send_replace(sessions.len());
    }
    tracing::info!(session = id, "session ended");
}

/// Mirrors what a session's peer announces (its accepted PUBLISH_NAMESPACEs) into the routes
/// and the shared index. `.session` namespaces are never forwarded (draft-19 §3.2.2).
async fn sync_routes(inner: Arc<Inner>, id: u64, session: Session) {
    let mut registered: HashMap<TrackNamespace, NamespaceRegistration> = HashMap::new();
    let mut mirror = Mirror::new(session.announced().clone());
    loop {
        match mirror.next().await {
            NamespaceEvent::Added(ns) => add_route(&inner, &mut registered, ns, id, &session),
            NamespaceEvent::Removed(ns) => remove_route(&inner, &mut registered, &ns, id),
        }
    }
}

/// Follows everything in a [`NamespaceIndex`]: each namespace once as Added, then every
/// change. After falling behind the index it takes a fresh snapshot and reports just the
/// difference from what it reported before.
struct Mirror {
    index: NamespaceIndex,
    known: HashSet<TrackNamespace>,
    watch: Option<NamespaceWatch>,
    pending: VecDeque<NamespaceEvent>,
}

impl Mirror {
    fn new(index: NamespaceIndex) -> Self {
        Mirror {
            index,
            known: HashSet::new(),
            watch: None,
            pending: VecDeque::new(),
        }
    }

    /// The next change (cancel safe).
    async fn next(&mut self) -> NamespaceEvent {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return ev;
            }
            let Some(watch) = &mut self.watch else {
                let (now, watch) = self.index.watch(&TrackNamespace::empty(), 4096);
                let now: HashSet<TrackNamespace> = now.into_iter().collect();
                let gone = self
                    .known
                    .difference(&now)
                    .cloned()
                    .map(NamespaceEvent::Removed);
                let new = now
                    .difference(&self.known)
                    .cloned()
                    .map(NamespaceEvent::Added);
                self.pending = gone.chain(new).collect();
                self.known = now;
                self.watch = Some(watch);
                continue;
            };
            match watch.next().await {
                Some(ev) => {
                    let new = match &ev {
                        NamespaceEvent::Added(ns) => self.known.insert(ns.clone()),
                        NamespaceEvent::Removed(ns) => self.known.remove(ns),
                    };
                    if new {
                        return ev;
                    }
                }
                // Fell behind: take a fresh snapshot.
                None => self.watch = None,
            }
        }
    }
}

fn add_route(
    inner: &Arc<Inner>,
    registered: &mut HashMap<TrackNamespace, NamespaceRegistration>,
    ns: TrackNamespace,
    id: u64,
    session: &Session,
) {
    if ns.is_session_level() || registered.contains_key(&ns) {
        return;
    }
    tracing::debug!(session = id, namespace = %ns, "route added");
    inner.routes.lock().insert(
        &ns,
        id,
        Route {
            session_id: id,
            session: session.clone(),
        },
    );
    registered.insert(ns.clone(), inner.index.publish(ns.clone()));
    inner.routes_changed.send_modify(|v| *v += 1);
    // A namespace a client of this relay publishes: offered to the peers from here.
    refresh_export(inner, &ns);
    subscribe_active(inner, &ns, id, session);
}

/// draft-19 §9.5: a publisher that arrives for a namespace with active subscriptions gets
/// SUBSCRIBE (this is also how a publisher's switchover to a new session works).
fn subscribe_active(inner: &Arc<Inner>, ns: &TrackNamespace, id: u64, session: &Session) {
    let tracks: Vec<Arc<RelayTrack>> = inner
        .tracks
        .lock()
        .values()
        .filter(|t| {
            !t.published
                && ns.is_prefix_of(&t.name.namespace)
                && t.downstreams.load(Ordering::Relaxed) > 0
        })
        .cloned()
        .collect();
    for t in tracks {
        start_upstream(inner, &t, id, session.clone());
    }
}

fn remove_route(
    inner: &Inner,
    registered: &mut HashMap<TrackNamespace, NamespaceRegistration>,
    ns: &TrackNamespace,
    id: u64,
) {
    if registered.remove(ns).is_some() {
        tracing::debug!(session = id, namespace = %ns, "route removed");
        inner.routes.lock().remove(ns, id);
        inner.routes_changed.send_modify(|v| *v += 1);
        refresh_export(inner, ns);
    }
}

fn remove_routes_of(inner: &Inner, id: u64) {
    let mut routes = inner.routes.lock();
    let mine: Vec<TrackNamespace> = routes
        .under(&TrackNamespace::empty())
        .into_iter()
        .filter(|(_, r)| r.session_id == id)
        .map(|(ns, _)| ns)
        .collect();
    for ns in &mine {
        routes.remove(ns, id);
    }
    drop(routes);
    inner.routes_changed.send_modify(|v| *v += 1);
    for ns in &mine {
        refresh_export(inner, ns);
    }
}

/// Every publisher session whose announced namespace is a prefix of `ns` (draft-19 §9.5).
fn routes_for(inner: &Inner, ns: &TrackNamespace) -> Vec<Route> {
    let routes = inner.routes.lock();
    let mut seen = HashSet::new();
    routes
        .prefixes_of(ns)
        .map(|(_, r)| r.clone())
        .filter(|r| seen.insert(r.session_id))
        .collect()
}

/// The publisher a FETCH (or TRACK_STATUS) of `name` goes to: one whose upstream subscription
/// to the track delivers now, else the session that announced last (a publisher killed
/// outright is noticed only at its idle timeout; its restarted process announces after it).
fn fetch_route(inner: &Inner, name: &FullTrackName) -> Option<Route> {
    let delivering = inner
        .tracks
        .lock()
        .get(name)
        .map(|t| t.delivering.lock().clone())
        .unwrap_or_default();
    routes_for(inner, &name.namespace)
        .into_iter()
        .max_by_key(|r| (delivering.contains(&r.session_id), r.session_id))
}

/// The relay track for `name`, created (and subscribed upstream to every matching publisher)
/// if absent.
fn get_or_create_track(
    inner: &Arc<Inner>,
    name: &FullTrackName,
    rendezvous: Option<Duration>,
    new_group_request: Option<u64>,
) -> Arc<RelayTrack> {
    let (track, created) = {
        let mut tracks = inner.tracks.lock();
        match tracks.get(name) {
            Some(t) => (t.clone(), false),
            None => {
                let t = RelayTrack::new(inner, name, Default::default(), false);
                tracks.insert(name.clone(), t.clone());
                (t, true)
            }
        }
    };
    if let Some(d) = rendezvous {
        let until = tokio::time::Instant::now() + d;
        let mut current = track.rendezvous_until.lock();
        *current = Some(current.map_or(until, |c| c.max(until)));
    }
    if created || track.upstreams.lock().is_empty() {
        // draft-19 §10.2.18: with no Established upstream subscription, a NEW_GROUP_REQUEST
        // goes upstream with the SUBSCRIBE.
        if new_group_request.is_some() {
            *track.new_group_request.lock() = new_group_request;
        }
        for r in routes_for(inner, &name.namespace) {
            start_upstream(inner, &track, r.session_id, r.session);
        }
    }
    track
}

/// Subscribes upstream to `track` on a publisher's session, unless already subscribed there.
fn start_upstream(inner: &Arc<Inner>, track: &Arc<RelayTrack>, session_id: u64, session: Session) {
    let mut upstreams = track.upstreams.lock();
    if upstreams.get(&session_id).is_some_and(|h| !h.is_finished()) {
        return;
    }
    let pending = PendingUpstream::new(track);
    let t = track.clone();
    let metrics = inner.metrics.clone();
    let weak = Arc::downgrade(inner);
    let handle = tokio::spawn(async move {
        // Relays use their own priority and order upstream (draft-19 §7.3), with no filter: the
        // publisher sends what it publishes from now on; what the cache misses of the past
        // is fetched (fill_from_upstream).
        let rendezvous = t
            .rendezvous_until
            .lock()
            .and_then(|until| until.checked_duration_since(tokio::time::Instant::now()))
            .map(|left| left.as_millis().clamp(1, u64::MAX as u128) as u64);
        let params = Parameters {
            rendezvous_timeout: rendezvous,
            new_group_request: *t.new_group_request.lock(),
            ..Default::default()
        };
        let res = session.subscribe(t.name.clone(), params).await;
        drop(pending);
        match res {
            Ok(sub) => {
                // Answered: the request is no longer pending for later upstreams; it is
                // outstanding at the cache (now that DYNAMIC_GROUPS is known), so the same
                // request from a downstream is not sent again (draft-19 §10.2.18).
                let carried = t.new_group_request.lock().take();
                let info = sub.info().clone();
                let floor = t.restart_floor();
                t.cache.set_properties(info.track_properties.clone());
                t.cache.joined_upstream(info.largest);
                if let Some(v) = carried {
                    t.cache.request_new_group(v);
                }
                t.answer.send_replace(Some(Ok(Standing::of(&t.cache))));
                let mut live = LiveUpstream::new(&metrics, &weak, &t);
                t.delivering.lock().insert(session_id);
                let continuing = fill_from_upstream(&t, &session, &sub, &metrics).await;
                live.status = ingest(&t, sub, &metrics, continuing, floor).await;
                t.delivering.lock().remove(&session_id);
            }
            Err(e) => {
                tracing::debug!(track = %t.name, error = %e, "upstream SUBSCRIBE failed");
                let err = match e {
                    Error::Rejected(r) => *r,
                    e => RequestError::new(RequestErrorCode::INTERNAL_ERROR, e.to_string()),
                };
                if t.pending_upstreams.load(Ordering::Relaxed) == 0
                    && t.live_upstreams.load(Ordering::Relaxed) == 0
                {
                    t.answer.send_if_modified(|a| {
                        if a.is_none() {
                            *a = Some(Err(err));
                            true
                        } else {
                            false
                        }
                    });
                }
            }
        }
    });
    upstreams.insert(session_id, handle);
}

/// Counts an upstream being asked (an upstream SUBSCRIBE, or a PUBLISH being accepted) in
/// `RelayTrack::pending_upstreams` until dropped, also when its task is aborted.
struct PendingUpstream(Arc<RelayTrack>);

impl PendingUpstream {
    fn new(track: &Arc<RelayTrack>) -> Self {
        track.pending_upstreams.fetch_add(1, Ordering::Relaxed);
        PendingUpstream(track.clone())
    }
}

impl Drop for PendingUpstream {
    fn drop(&mut self) {
        self.0.pending_upstreams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long ingesting waits for the upstream's answer to a REQUEST_UPDATE.
const UPDATE_WAIT: Duration = Duration::from_secs(2);

/// How an upstream subscription ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UpstreamEnd {
    /// With PUBLISH_DONE and this status.
    Done(PublishDoneCode),
    /// Its publisher restarted its group numbering (see [`ingest`]): a new incarnation of the
    /// track replaces the one held.
    Restarted,
    /// Its publisher closed the session with NO_ERROR.
    Closed,
    /// Anything else: the session failed, the subscription stream ended without PUBLISH_DONE,
    /// or the task was dropped.
    Lost,
}

/// Feeds an upstream subscription into the track's cache until it ends; says how.
///
/// `floor` is [`RelayTrack::restart_floor`] when the upstream began: if the publisher says (in
/// its answer's Largest Location) or shows (with its first object) that it numbers its groups
/// below it, it restarted from a lower group. Subscriptions to the track cannot be continued:
/// their filters start after the old numbering, and the cache holds the old groups under the
/// same numbers. The track is superseded (`restart_track`): it leaves the relay's tracks, its
/// other upstreams (a killed publisher's session the relay has not yet seen die) are dropped,
/// and its subscribers get PUBLISH_DONE GOING_AWAY (their publisher went away), which a
/// reconnecting moq-client subscriber renews at once; the next SUBSCRIBE starts over on the
/// new numbering. A publisher that
/// numbers its groups from the clock (`TrackOptions::groups_from_clock`) never regresses, and
/// its existing subscribers continue at its first object.
async fn ingest(
    t: &Arc<RelayTrack>,
    mut sub: Subscription,
    metrics: &Arc<Metrics>,
    mut continuing: Continuing,
    floor: Option<u64>,
) -> UpstreamEnd {
    // `fresh`: the publisher gave no Largest Location, so it is new, and a first group equal
    // to the last one stored is a restart too (its objects would collide with the old ones).
    let regressed = |group: u64, fresh: bool| {
        let lower = floor.is_some_and(|f| group < f || (fresh && group == f));
        if lower {
            tracing::info!(track = %t.name, group, "publisher restarted its group numbering lower; track ended");
        }
        lower
    };
    if sub
        .info()
        .largest
        .is_some_and(|l| regressed(l.group, false))
    {
        return UpstreamEnd::Restarted;
    }
    let mut first = floor.is_some() && sub.info().largest.is_none();
    // The publisher closed its session on purpose (NO_ERROR): its tracks ended with it.
    let mut left = false;
    let mut streams = tokio::task::JoinSet::new();
    let mut asked = t.cache.new_group();
    loop {
        let ev = tokio::select! {
            ev = sub.next() => ev,
            n = t.cache.new_group_requested(asked) => {
                // draft-19 §10.2.18: a downstream NEW_GROUP_REQUEST on an Established
                // subscription goes upstream in a REQUEST_UPDATE (the cache took it only if
                // the track has dynamic groups and none as large is outstanding).
                asked = Some(n);
                let update = Parameters {
                    new_group_request: Some(n.value),
                    ..Default::default()
                };
                // Objects wait meanwhile; an upstream that does not answer is not waited for
                // long.
                let _ = tokio::time::timeout(UPDATE_WAIT, sub.update(update)).await;
                continue;
            }
        };
        let Some(ev) = ev else { break };
        // draft-19 §2.4.2: a subscriber that finds the track malformed cancels the
        // subscription (dropping it unsubscribes).
        if t.cache.malformed().is_some() {
            break;
        }
        // Reap finished copies so the set stays as small as the open streams.
        while streams.try_join_next().is_some() {}
        if std::mem::take(&mut first) {
            let group = match &ev {
                Ok(TrackEvent::Subgroup(s)) => Some(s.group()),
                Ok(TrackEvent::Datagram(o)) => Some(o.location.group),
                Err(_) => None,
            };
            if group.is_some_and(|g| regressed(g, true)) {
                return UpstreamEnd::Restarted;
            }
        }
        match &ev {
            Ok(TrackEvent::Subgroup(s)) => continuing.saw(s.group(), s.subgroup_id().unwrap_or(0)),
            Ok(TrackEvent::Datagram(o)) => continuing.saw(o.location.group, DATAGRAM_SUBGROUP),
            Err(_) => {}
        }
        match ev {
            Ok(TrackEvent::Subgroup(s)) => {
                let t = t.clone();
                let metrics = metrics.clone();
                let mut copy = Box::pin(async move { ingest_subgroup(&t, s, &metrics).await });
                // Begun here, in the order the streams came: the cache takes each subgroup,
                // and the objects that are here already, in that order (downstream streams
                // open in it). A task of its own per stream began them in whatever order the
                // tasks ran; on several threads the last spawned often runs first.
                if (&mut copy).now_or_never().is_none() {
                    streams.spawn(copy);
                }
            }
            Ok(TrackEvent::Datagram(o)) => {
                store_object(t, DATAGRAM_SUBGROUP, o, metrics);
            }
            Err(e) => {
                left = matches!(&e, Error::ClosedByPeer { code, .. } if *code == SessionErrorCode::NO_ERROR);
                break;
            }
        }
    }
    // The track ends only after every subgroup stream it sent is in the cache: PUBLISH_DONE
    // can overtake the data streams (draft-19 §10.11 Stream Count). Streams still open after
    // the drain time are cut.
    let drain = tokio::time::timeout(STREAM_DRAIN, async {
        while streams.join_next().await.is_some() {}
    });
    if drain.await.is_err() {
        streams.abort_all();
    }
    match sub.publish_done() {
        Some(done) => UpstreamEnd::Done(done.status),
        None if left => UpstreamEnd::Closed,
        None => UpstreamEnd::Lost,
    }
}

/// An upstream showed the track malformed (draft-19 §2.4.2): its subscriptions end with
/// PUBLISH_DONE MALFORMED_TRACK, its ingest cancels the upstream subscription, and the object
/// that showed it is not cached.
fn found_malformed(t: &RelayTrack, why: Malformed) {
    tracing::warn!(track = %t.cache.name(), %why, "upstream track is malformed");
    t.cache.set_malformed(why);
}

/// Stores one object that came outside a subgroup stream (a datagram, or one of a FETCH) in
/// subgroup `id` of its group; returns that subgroup.
fn store_object(t: &RelayTrack, id: u64, o: Object, metrics: &Metrics) -> Option<Arc<Subgroup>> {
    let sg = t
        .cache
        .subgroup(o.location.group, id, o.priority, false, false)?;
    t.received.object(o.payload.len());
    let obj = CachedObject::from(o);
    // draft-19 §2.4.2 (objects outside a subgroup stream have no subgroup priority to keep).
    if let Err(why) = t.cache.check(&sg, sg.priority, &obj) {
        found_malformed(t, why);
        return None;
    }
    if !t.cache.append(&sg, obj) {
        metrics.duplicate();
    }
    Some(sg)
}

/// A new upstream subscription carries only what is published after it (draft-19 §10.7). For
/// a track the cache already holds (a publisher's switchover to a new session, seed 003), the
/// objects from the group of the last one stored up to the new upstream's Largest Location are
/// fetched from it (Joining FETCH, §5.2), so that nothing the old path had not delivered is
/// missed. The subgroups of the groups before the last are complete once the FETCH is; those
/// of the last group may continue on the new path, and are returned.
async fn fill_from_upstream(
    t: &RelayTrack,
    session: &Session,
    sub: &Subscription,
    m: &Metrics,
) -> Continuing {
    let mut last = Continuing::default();
    let (Some(stored), Some(largest)) = (t.cache.stored(), sub.info().largest) else {
        return last;
    };
    if largest <= stored {
        return last;
    }
    let Some(request) = sub.joining_fetch(JoiningStart::Absolute(stored.group)) else {
        return last;
    };
    let Ok(mut fetch) = session.fetch(request, Parameters::default()).await else {
        return last;
    };
    let mut filled: Vec<Arc<Subgroup>> = Vec::new();
    loop {
        match fetch.next().await {
            Some(Ok(FetchItem::Object(o))) => {
                let id = o.subgroup.unwrap_or(DATAGRAM_SUBGROUP);
                if let Some(sg) = store_object(t, id, o, m)
                    && !filled.iter().any(|f| Arc::ptr_eq(f, &sg))
                {
                    filled.push(sg);
                }
            }
            Some(Ok(FetchItem::EndOfRange { .. })) => {}
            Some(Err(_)) => return last,
            None => break,
        }
    }
    for sg in filled {
        if sg.group < largest.group {
            sg.complete();
        } else {
            last.subgroups.push(sg);
        }
    }
    last.group = largest.group;
    last
}

/// The fetched subgroups of the group a new upstream starts in: complete unless the new path
/// continues them. A stream of the same subgroup takes one over (its FIN ends it); the others
/// end when the new path moves to a later group, or with the subscription.
#[derive(Default)]
struct Continuing {
    group: u64,
    subgroups: Vec<Arc<Subgroup>>,
}

impl Continuing {
    /// The new path sent (`group`, `id`).
    fn saw(&mut self, group: u64, id: u64) {
        if group == self.group {
            self.subgroups.retain(|sg| sg.id != id);
        } else if group > self.group {
            self.finish();
        }
    }

    fn finish(&mut self) {
        for sg in self.subgroups.drain(..) {
            sg.complete();
        }
    }
}

impl Drop for Continuing {
    fn drop(&mut self) {
        self.finish();
    }
}

/// How long a stream that begins inside a subgroup waits for another upstream to deliver the
/// objects before it.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);

/// How long a finished upstream's subgroup streams may take to arrive before the track ends.
const STREAM_DRAIN: Duration = Duration::from_secs(5);

/// Copies one upstream subgroup stream into the cache. Objects already there (sent by another
/// upstream of the same track, e.g. during a switchover) are dropped, so downstream sees no
/// duplicate; a reset is passed on only if no other upstream can complete the subgroup.
async fn ingest_subgroup(t: &Arc<RelayTrack>, mut s: IncomingSubgroup, metrics: &Metrics) {
    let first = s.next_object().await;
    let group = s.group();
    let id = s.subgroup_id().unwrap_or(0);
    let (priority, end_of_group) = (s.priority(), s.end_of_group());
    let Some(sg) = t
        .cache
        .subgroup(group, id, priority, end_of_group, s.first_object())
    else {
        return;
    };
    let writing = sg.writing();
    let mut next = Some(first);
    // The last object this stream carried.
    let mut last = None;
    loop {
        let res = match next.take() {
            Some(r) => r,
            None => s.next_object().await,
        };
        match res {
            Ok(Some(o)) => {
                t.received.object(o.payload.len());
                // A stream that begins inside the subgroup (a new upstream's, during a
                // switchover) waits until the objects before its first are in, as far as
                // another upstream still delivers them (draft-19 §9.4, §11.4.3: never
                // reordered, never dropped).
                if last.is_none() && !s.first_object() {
                    let caught_up = sg.caught_up(o.location.object);
                    let _ = tokio::time::timeout(CATCH_UP_WAIT, caught_up).await;
                }
                last = Some(o.location.object);
                let obj = CachedObject::from(o);
                // draft-19 §2.4.2: a malformed track is not served on, the object not cached.
                if let Err(why) = t.cache.check(&sg, priority, &obj) {
                    return found_malformed(t, why);
                }
                if !t.cache.append(&sg, obj) {
                    metrics.duplicate();
                }
            }
            Ok(None) => {
                // draft-19 §2.4.2 conditions 2 and 3: a stream of the subgroup ends with FIN
                // before an object the cache holds, or two such streams end at different
                // objects.
                if let Some(l) = last
                    && (sg.last_id() > Some(l) || sg.final_object().is_some_and(|f| f != l))
                {
                    let why = Malformed("a subgroup ended at two different objects");
                    return found_malformed(t, why);
                }
                sg.finish();
                return;
            }
            Err(_) => {
                drop(writing);
                if t.live_upstreams.load(Ordering::Relaxed) <= 1 {
                    sg.reset();
                    return;
                }
                // Another upstream may complete it; reset if it makes no progress.
                let before = sg.len();
                tokio::time::sleep(Duration::from_secs(2)).await;
                if sg.state() == SubgroupEnd::Open && sg.len() == before {
                    sg.reset();
                }
                return;
            }
        }
    }
}

/// Where a track stood when a subscription to it was established: the Largest Location its
/// SUBSCRIBE_OK reports and the last object stored, after which the subscription starts.
#[derive(Clone, Copy, Debug)]
struct Standing {
    largest: Option<Location>,
    held: Option<Location>,
}

impl Standing {
    /// Where `cache` stands now.
    fn of(cache: &TrackCache) -> Self {
        // Read in this order, a largest learned from an object between the two reads is
        // also held: never a held beyond the largest.
        let held = cache.stored();
        Standing {
            largest: cache.largest(),
            held,
        }
    }
}

/// Waits for the track's first upstream answer, or for a publisher to appear within the
/// rendezvous time (draft-19 §10.2.4). Returns where the subscription starts: where the track
/// stands now if it was answered already, else where it stood at the answer. The upstream's
/// Largest Location may then be ahead of what arrived: what is received after it is the
/// subscriber's too (draft-19 §10.7, newly received), as is everything ingested since.
async fn wait_answer(
    inner: &Arc<Inner>,
    t: &Arc<RelayTrack>,
    rendezvous: Option<Duration>,
) -> Result<Standing, RequestError> {
    let deadline = rendezvous.map(|d| tokio::time::Instant::now() + d);
    let mut answer = t.answer.subscribe();
    let mut routes = inner.routes_changed.subscribe();
    if let Some(a) = answer.borrow_and_update().clone() {
        return a.map(|_| Standing::of(&t.cache));
    }
    loop {
        if let Some(a) = answer.borrow_and_update().clone() {
            return a;
        }
        // A PUBLISH being accepted counts as an upstream (`on_publish`).
        let upstreams =
            !t.upstreams.lock().is_empty() || t.pending_upstreams.load(Ordering::Relaxed) > 0;
        if !upstreams {
            // No publisher: DOES_NOT_EXIST now, or wait for one (RENDEZVOUS_TIMEOUT).
            let Some(deadline) = deadline else {
                return Err(RequestError::new(
                    RequestErrorCode::DOES_NOT_EXIST,
                    "no publisher for this track",
                ));
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(RequestError::new(
                    RequestErrorCode::TIMEOUT,
                    "no publisher appeared",
                ));
            }
        }
        tokio::select! {
            _ = answer.changed() => {}
            _ = routes.changed() => {
                for r in routes_for(inner, &t.name.namespace) {
                    start_upstream(inner, t, r.session_id, r.session);
                }
            }
            _ = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            } => {
                if t.upstreams.lock().is_empty() {
                    return Err(RequestError::new(RequestErrorCode::TIMEOUT, "no publisher appeared"));
                }
            }
        }
    }
}

/// Counts a downstream subscription; the last one leaving lets the upstreams go after the
/// linger time.
struct Downstream {
    inner: Arc<Inner>,
    track: Arc<RelayTrack>,
}

impl Downstream {
    fn new(inner: &Arc<Inner>, track: &Arc<RelayTrack>) -> Self {
        track.downstreams.fetch_add(1, Ordering::Relaxed);
        inner.metrics.subscriptions(1.0);
        Downstream {
            inner: inner.clone(),
            track: track.clone(),
        }
    }
}

impl Drop for Downstream {
    fn drop(&mut self) {
        self.inner.metrics.subscriptions(-1.0);
        if self.track.downstreams.fetch_sub(1, Ordering::Relaxed) != 1 || self.track.published {
            return;
        }
        let inner = self.inner.clone();
        let track = self.track.clone();
        tokio::spawn(async move {
            tokio::time::sleep(inner.config.upstream_linger).await;
            if track.downstreams.load(Ordering::Relaxed) > 0 {
                return;
            }
            let mut tracks = inner.tracks.lock();
            if tracks
                .get(&track.name)
                .is_some_and(|t| Arc::ptr_eq(t, &track))
            {
                tracks.remove(&track.name);
            }
            drop(tracks);
            for (_, h) in track.upstreams.lock().drain() {
                h.abort();
            }
            tracing::debug!(track = %track.name, "upstream released");
        });
    }
}

/// The relay's side of its directory: SUBSCRIBE goes to the routes (one upstream subscription
/// per track and publisher), FETCH to the cache or one publisher, TRACK_STATUS likewise.
struct RelayUpstream(Weak<Inner>);

impl RelayUpstream {
    fn inner(&self) -> Result<Arc<Inner>, RequestError> {
        self.0
            .upgrade()
            .ok_or_else(|| RequestError::new(RequestErrorCode::GOING_AWAY, "relay shutting down"))
    }
}

#[async_trait]
impl Upstream for RelayUpstream {
    async fn fill(&self, track: TrackCache, writer: SubscriptionWriter, fill: Fill) {
        match self.inner() {
            Ok(inner) => fill_from_upstream_or_cache(inner, track, writer, fill).await,
            Err(_) => {
                let _ = serve_fill(track, writer, fill).await;
            }
        }
    }

    async fn subscribe(
        &self,
        _peer: u64,
        name: &FullTrackName,
        params: &Parameters,
    ) -> Result<Source, RequestError> {
        let inner = self.inner()?;
        let rendezvous = params
            .rendezvous_timeout
            .filter(|t| *t > 0)
            .map(|t| Duration::from_millis(t).min(inner.config.max_rendezvous));
        // A track whose publisher ended it, with no publisher for it now: SUBSCRIBE_OK with
        // its final Largest Location, then PUBLISH_DONE TRACK_ENDED ("the track is no longer
        // being published", draft-19 §10.11); its past stays fetchable. A SUBSCRIBE with a
        // RENDEZVOUS_TIMEOUT waits for a new publisher instead (draft-19 §10.2.4).
        let finished = || finished_track(&inner, name).map(Source::now);
        if rendezvous.is_none()
            && routes_for(&inner, &name.namespace).is_empty()
            && let Some(source) = finished()
        {
            return Ok(source);
        }
        let track = get_or_create_track(&inner, name, rendezvous, params.new_group_request);
        let guard = Downstream::new(&inner, &track);
        let standing = match wait_answer(&inner, &track, rendezvous).await {
            Ok(s) => s,
            // The publisher no longer has it either.
            Err(e) if e.code == RequestErrorCode::DOES_NOT_EXIST => {
                return finished().ok_or(e);
            }
            Err(e) => return Err(e),
        };
        Ok(Source {
            track: track.cache.clone(),
            hold: Box::new(guard),
            largest: standing.largest,
            held: standing.held,
        })
    }

    async fn fetch(&self, f: IncomingFetch, _held: Option<TrackCache>) {
        let Ok(inner) = self.inner() else { return };
        on_fetch(inner, f).await;
    }

    async fn track_status(
        &self,
        name: &FullTrackName,
        _held: Option<TrackCache>,
    ) -> Result<TrackStatusInfo, RequestError> {
        let inner = self.inner()?;
        track_status(&inner, name).await
    }

    fn forwarding(&self, track: &TrackCache) -> Hold {
        let Ok(inner) = self.inner() else {
            return Box::new(());
        };
        let relay_track = inner.tracks.lock().get(track.name()).cloned();
        match relay_track {
            Some(t) if t.cache.same(track) => Box::new(Downstream::new(&inner, &t)),
            _ => Box::new(()),
        }
    }
}

/// FETCH: from the cache when it holds the whole range, else from one publisher.
async fn on_fetch(inner: Arc<Inner>, f: IncomingFetch) {
    let name = f.track().clone();
    let cached = inner.tracks.lock().get(&name).cloned();
    let mut budget = fill_budget(f.params().fill_timeout);
    // A track whose publisher ended it is served from its cache while that holds objects
    // (what it no longer holds is an Unknown range), unless a publisher has it again.
    if let Some(done) = finished_track(&inner, &name)
        && (done.covers(f.start(), f.end()) || routes_for(&inner, &name.namespace).is_empty())
    {
        inner.metrics.fetch(true);
        let _ = serve_fetch(&done, f).await;
        return;
    }
    // From the cache if it holds the whole range, or if the subscriber wants only what is
    // available now (FILL_TIMEOUT 0: no upstream FETCH, what is missing is a Timed-Out range);
    // objects the upstream announced but that are still in flight are fetched upstream
    // otherwise.
    if let Some(t) = &cached
        && (t.cache.malformed().is_some() || t.cache.covers(f.start(), f.end()))
    {
        inner.metrics.fetch(true);
        let _ = serve_fetch(&t.cache, f).await;
        return;
    }
    if budget.is_zero() && cached.is_some() {
        return available_now(cached.as_ref(), f).await;
    }
    // Not (entirely) cached: fill from one upstream publisher (draft-19 §9.5).
    let Some(route) = fetch_route(&inner, &name) else {
        return f.reject(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "no publisher for this track",
        ));
    };
    if budget.is_zero() {
        return available_now(None, f).await;
    }
    inner.metrics.fetch(false);
    // A start relative to the Largest Object stays relative upstream (draft-21 §9.20.10).
    let request = f.request();
    let params = Parameters {
        group_order: Some(f.group_order()),
        ..Default::default()
    };
    // draft-19 §10.2.5: the budget is the total time spent waiting for the upstream; once it
    // is spent, what is available now is served and the rest is a Timed-Out range (Unknown
    // before draft-20).
    let asked = Instant::now();
    let answer = tokio::time::timeout(budget, route.session.fetch(request, params)).await;
    budget = budget.saturating_sub(asked.elapsed());
    let upstream = match answer {
        Ok(Ok(r)) => r,
        Ok(Err(Error::Rejected(e))) => return f.reject(*e),
        Ok(Err(e)) => {
            return f.reject(RequestError::new(
                RequestErrorCode::INTERNAL_ERROR,
                e.to_string(),
            ));
        }
        Err(_) => return available_now(cached.as_ref(), f).await,
    };
    let (start, order) = (f.start(), f.group_order());
    let end = upstream.end().end;
    let Ok(w) = f.accept(upstream.end().clone()).await else {
        return;
    };
    pipe(upstream, w, budget, start, end, order).await;
}

/// Copies an upstream fetch response onto a fetch stream (a FETCH's, or a fill's) within
/// `budget` of waiting on the upstream: once it is spent, the rest of `start`..`end` is an End of
/// Timed-Out Range (draft-21 §9.20.6); a malformed track resets the stream with
/// MALFORMED_TRACK (draft-19 §2.4.2), and dropping the upstream response cancels it.
async fn pipe(
    mut upstream: FetchResponse,
    mut w: FetchWriter,
    mut budget: Duration,
    start: Location,
    end: Location,
    order: GroupOrder,
) {
    let check = TrackCheck::new();
    loop {
        let waiting = Instant::now();
        let item = tokio::time::timeout(budget, upstream.next()).await;
        budget = budget.saturating_sub(waiting.elapsed());
        let res = match item {
            Ok(None) => break,
            Ok(Some(Ok(FetchItem::Object(o)))) => {
                if check.object(o.subgroup, &o).is_err() {
                    w.abort(StreamResetCode::MALFORMED_TRACK);
                    return;
                }
                w.write(&o).await
            }
            Ok(Some(Ok(FetchItem::EndOfRange { kind, location }))) => {
                w.end_of_range(kind, location).await
            }
            Ok(Some(Err(_))) => {
                w.abort(StreamResetCode::INTERNAL_ERROR);
                return;
            }
            Err(_) => {
                // The budget is spent: the rest of the range is unknown (a marker that cannot
                // name another group than the last entry's is left out).
                let _ = w
                    .end_of_range(RangeEnd::TimedOut, unknown_end(start, end, order))
                    .await;
                break;
            }
        };
        if res.is_err() {
            return;
        }
    }
    w.finish();
}

/// A fill a downstream subscriber asked for (FILL_PARAMETERS, draft-21 §3.4): from the cache if
/// it holds the range, else by an upstream FETCH of it (§9.11: a relay MUST ask upstream for
/// objects of unknown status) within the fill's budget; without a publisher, from the cache.
async fn fill_from_upstream_or_cache(
    inner: Arc<Inner>,
    track: TrackCache,
    writer: SubscriptionWriter,
    fill: Fill,
) {
    let end = Location::new(fill.end.group, fill.end.object.saturating_add(1));
    let route = fetch_route(&inner, track.name());
    let (Some(route), false) = (route, track.covers(fill.start, end)) else {
        inner.metrics.fetch(true);
        let _ = serve_fill(track, writer, fill).await;
        return;
    };
    let budget = fill_budget(fill.fill_timeout);
    // draft-21 §9.20.6: FILL_TIMEOUT 0 "MUST NOT wait for upstream delivery and MUST report
    // any unavailable Objects as Timed-Out gaps".
    if budget.is_zero() {
        inner.metrics.fetch(true);
        let _ = serve_fill_now(track, writer, fill).await;
        return;
    }
    inner.metrics.fetch(false);
    let request = FetchType::Standalone {
        track: track.name().clone(),
        start: fill.start,
        end,
    };
    let params = Parameters {
        group_order: Some(fill.group_order),
        ..Default::default()
    };
    let asked = Instant::now();
    let answer = tokio::time::timeout(budget, route.session.fetch(request, params)).await;
    let upstream = match answer {
        Ok(Ok(upstream)) => upstream,
        // draft-21 §9.20.6: the budget is spent: what the cache holds, the rest Timed-Out.
        Err(_) => {
            let _ = serve_fill_now(track, writer, fill).await;
            return;
        }
        // draft-21 §3.4.1: a fill that cannot be served is opened and reset.
        Ok(Err(_)) => {
            if let Ok(w) = writer.open_fill(&fill).await {
                w.abort(StreamResetCode::INTERNAL_ERROR);
            }
            return;
        }
    };
    let Ok(w) = writer.open_fill(&fill).await else {
        return;
    };
    let budget = budget.saturating_sub(asked.elapsed());
    pipe(upstream, w, budget, fill.start, end, fill.group_order).await;
}

/// The longest a FETCH waits for upstream fills, whatever its FILL_TIMEOUT asks (draft-19
/// §10.2.5 lets a relay use a shorter time without saying so).
const MAX_FILL_TIMEOUT: Duration = Duration::from_secs(30);

/// A FETCH's or a fill's budget for waiting on upstream (draft-19 §10.2.5): its FILL_TIMEOUT
/// (ms), at most [`MAX_FILL_TIMEOUT`], or [`DEFAULT_FILL_TIMEOUT`] without one.
fn fill_budget(fill_timeout: Option<u64>) -> Duration {
    fill_timeout
        .map_or(DEFAULT_FILL_TIMEOUT, Duration::from_millis)
        .min(MAX_FILL_TIMEOUT)
}

/// Where an End of Range marker covering the rest of a range goes: its last location in
/// ascending order, its first in descending order.
fn unknown_end(start: Location, end: Location, order: GroupOrder) -> Location {
    match order {
        GroupOrder::Descending => start,
        _ => last_covered(end),
    }
}

/// Answers a FETCH with what the relay holds now, without asking upstream (FILL_TIMEOUT 0, or
/// a budget spent before the upstream answered): from the cache, what it misses as Timed-Out
/// ranges (draft-21 §9.20.6; Unknown before draft-20, draft-19 §10.2.5); with nothing cached,
/// the whole range.
async fn available_now(cached: Option<&Arc<RelayTrack>>, f: IncomingFetch) {
    if let Some(t) = cached
        && t.cache.largest().is_some()
    {
        let _ = serve_fetch_now(&t.cache, f).await;
        return;
    }
    let (start, end, order) = (f.start(), f.end(), f.group_order());
    let ok = FetchEnd {
        end_of_track: false,
        end,
        track_properties: Properties::default(),
    };
    let Ok(mut w) = f.accept(ok).await else {
        return;
    };
    if w.end_of_range(RangeEnd::TimedOut, unknown_end(start, end, order))
        .await
        .is_ok()
    {
        w.finish();
    }
}

/// TRACK_STATUS: from the track when its upstream answered, else from one publisher.
async fn track_status(
    inner: &Arc<Inner>,
    name: &FullTrackName,
) -> Result<TrackStatusInfo, RequestError> {
    let cached = inner.tracks.lock().get(name).cloned();
    if let Some(rt) = cached
        && matches!(*rt.answer.borrow(), Some(Ok(_)))
    {
        return Ok(status_of(&rt.cache));
    }
    let finished = finished_track(inner, name);
    let Some(route) = fetch_route(inner, name) else {
        if let Some(done) = finished {
            return Ok(status_of(&done));
        }
        return Err(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "no publisher for this track",
        ));
    };
    match route
        .session
        .track_status(name.clone(), Parameters::default())
        .await
    {
        Ok(info) => Ok(info),
        Err(Error::Rejected(e)) => Err(*e),
        Err(e) => Err(RequestError::new(
            RequestErrorCode::INTERNAL_ERROR,
            e.to_string(),
        )),
    }
}

/// A publisher PUBLISHes a track to the relay: accept it into the cache and offer it to
/// SUBSCRIBE_TRACKS subscribers (draft-19 §9.5).
async fn on_publish(inner: Arc<Inner>, session_id: u64, p: IncomingPublish) {
    let name = p.track().clone();
    let info = p.info().clone();
    let track = {
        let mut tracks = inner.tracks.lock();
        tracks
            .entry(name.clone())
            .or_insert_with(|| RelayTrack::new(&inner, &name, info.track_properties.clone(), true))
            .clone()
    };
    // The relay takes every object of a PUBLISHed track (it forwards to whoever subscribes).
    // Until draft-19 an absent FORWARD in PUBLISH_OK means 1; from draft-20 the PUBLISH's own
    // FORWARD stands until a REQUEST_UPDATE changes it (draft-21 §9.8), so it is asked for.
    let forward = Parameters {
        forward: Some(true),
        ..Default::default()
    };
    // Pending while PUBLISH_OK goes out: a SUBSCRIBE that arrives between PUBLISH_OK and the
    // answer below waits for it instead of finding no publisher (`wait_answer`).
    let pending = PendingUpstream::new(&track);
    let accepted = p.accept(forward).await;
    drop(pending);
    let Ok(sub) = accepted else {
        // Wakes the SUBSCRIBEs that waited for this publisher, to look again.
        track.answer.send_modify(|_| {});
        return;
    };
    let floor = track.restart_floor();
    track.cache.set_properties(info.track_properties.clone());
    track.cache.joined_upstream(info.largest);
    track
        .answer
        .send_replace(Some(Ok(Standing::of(&track.cache))));
    let mut live = LiveUpstream::new(&inner.metrics, &Arc::downgrade(&inner), &track);
    // Offered to SUBSCRIBE_TRACKS subscribers (never back to this session) while it lasts.
    let _offered = inner
        .directory
        .insert(track.cache.clone(), Some(session_id), true);
    live.status = ingest(&track, sub, &inner.metrics, Continuing::default(), floor).await;
}

/// One upstream delivering into a track: a PUBLISH, or a SUBSCRIBE the relay sent. Counted while
/// it lives; dropped at the end of its ingest or with its aborted task (its session ended).
///
/// When the last one goes, the track ends at once if its publisher ended it (PUBLISH_DONE
/// TRACK_ENDED, or the track was found malformed); a PUBLISHed track also ends when its
/// publisher ends it while others still deliver. Otherwise (the session died, or the
/// subscription ended for another reason: GOING_AWAY, a reset) the track waits
/// `RelayConfig::publisher_wait` for a new publisher (a new session announcing the namespace is
/// subscribed to at once, `subscribe_active`; a new PUBLISH of the name joins the track), and
/// ends if none came. An ended track leaves the relay's tracks, so the next PUBLISH or
/// SUBSCRIBE of the name starts a new one.
struct LiveUpstream {
    metrics: Arc<Metrics>,
    inner: Weak<Inner>,
    track: Arc<RelayTrack>,
    /// How it ended, once it did.
    status: UpstreamEnd,
}

impl LiveUpstream {
    fn new(metrics: &Arc<Metrics>, inner: &Weak<Inner>, track: &Arc<RelayTrack>) -> Self {
        track.live_upstreams.fetch_add(1, Ordering::Relaxed);
        track.generation.fetch_add(1, Ordering::Relaxed);
        metrics.upstreams(1.0);
        LiveUpstream {
            metrics: metrics.clone(),
            inner: inner.clone(),
            track: track.clone(),
            status: UpstreamEnd::Lost,
        }
    }
}

impl Drop for LiveUpstream {
    fn drop(&mut self) {
        let t = &self.track;
        let last = t.live_upstreams.fetch_sub(1, Ordering::Relaxed) == 1;
        if self.status == UpstreamEnd::Restarted {
            restart_track(&self.inner, t);
        }
        if t.cache.is_superseded() {
            self.metrics.upstreams(-1.0);
            return;
        }
        // A publisher that closes its session ends its tracks, unless it is leaving because
        // this relay sent it GOAWAY: then it is moving (and reconnects elsewhere).
        let moving = || {
            self.inner
                .upgrade()
                .is_some_and(|i| i.goaway.lock().is_some())
        };
        let ended = match self.status {
            UpstreamEnd::Done(code) => code == PublishDoneCode::TRACK_ENDED,
            UpstreamEnd::Restarted => true,
            UpstreamEnd::Closed => !moving(),
            UpstreamEnd::Lost => false,
        };
        // Another upstream still being asked (a publisher switching over) may yet deliver.
        let pending = t.pending_upstreams.load(Ordering::Relaxed) > 0;
        let finished = (ended && !pending) || t.cache.malformed().is_some();
        if (last && finished) || (ended && t.published) {
            end_track(&self.inner, t);
        } else if last {
            await_publisher(self.inner.clone(), t.clone());
        }
        // Last, so that whoever sees the count drop sees the track gone.
        self.metrics.upstreams(-1.0);
    }
}

/// Ends `t`: its subscriptions get PUBLISH_DONE TRACK_ENDED once they delivered what it holds,
/// and it leaves the relay's tracks.
fn end_track(inner: &Weak<Inner>, t: &Arc<RelayTrack>) {
    t.cache.end();
    if let Some(inner) = inner.upgrade() {
        let mut tracks = inner.tracks.lock();
        if tracks.get(&t.name).is_some_and(|x| Arc::ptr_eq(x, t)) {
            tracks.remove(&t.name);
        }
        drop(tracks);
        keep_finished(&inner, t);
    }
}

/// A new incarnation of `t` replaces it (its publisher restarted its group numbering): it
/// leaves the relay's tracks first, so that the subscribers renewing find the new one, then
/// its other upstreams are dropped and its subscriptions end with PUBLISH_DONE GOING_AWAY
/// (`TrackCache::supersede`).
fn restart_track(inner: &Weak<Inner>, t: &Arc<RelayTrack>) {
    if let Some(inner) = inner.upgrade() {
        let mut tracks = inner.tracks.lock();
        if tracks.get(&t.name).is_some_and(|x| Arc::ptr_eq(x, t)) {
            tracks.remove(&t.name);
        }
    }
    t.cache.supersede();
    let upstreams: Vec<_> = t.upstreams.lock().drain().collect();
    for (_, h) in upstreams {
        h.abort();
    }
}

/// How long a finished track is kept when the cache has no age limit.
const FINISHED_KEEP: Duration = Duration::from_secs(60);

/// At most this many finished tracks are kept at once (each bounded by the cache limits); more
/// are not kept.
const MAX_FINISHED: usize = 4096;

/// Keeps an ended track's cache for FETCH, TRACK_STATUS and SUBSCRIBE (`finished_track`)
/// for as long as the cache's age limit lets it hold objects; a malformed track or one that
/// holds nothing is not kept. Expired ones are forgotten here and in `finished_track`, with
/// no task of their own.
fn keep_finished(inner: &Arc<Inner>, t: &RelayTrack) {
    if t.cache.malformed().is_some() || t.cache.is_superseded() || t.cache.stored().is_none() {
        return;
    }
    let now = tokio::time::Instant::now();
    let until = now + inner.config.cache.max_age.unwrap_or(FINISHED_KEEP);
    let mut finished = inner.finished.lock();
    finished.retain(|_, (_, until)| *until > now);
    if finished.len() < MAX_FINISHED || finished.contains_key(&t.name) {
        finished.insert(t.name.clone(), (t.cache.clone(), until));
    }
}

/// The cache of `name` if its publisher ended it (and it is not being published again) and
/// the cache still holds objects.
fn finished_track(inner: &Inner, name: &FullTrackName) -> Option<TrackCache> {
    let live = inner
        .tracks
        .lock()
        .get(name)
        .is_some_and(|t| !t.cache.is_ended() && t.live_upstreams.load(Ordering::Relaxed) > 0);
    if live {
        return None;
    }
    let mut finished = inner.finished.lock();
    let (cache, until) = finished.get(name).cloned()?;
    if until <= tokio::time::Instant::now() {
        finished.remove(name);
        return None;
    }
    cache.largest().is_some().then_some(cache)
}

/// The last publisher of `t` went away without ending it: ends it unless a new upstream goes
/// live within `RelayConfig::publisher_wait`.
fn await_publisher(inner: Weak<Inner>, t: Arc<RelayTrack>) {
    let Some(wait) = inner.upgrade().map(|i| i.config.publisher_wait) else {
        return t.cache.end();
    };
    let generation = t.generation.load(Ordering::Relaxed);
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return end_track(&inner, &t);
    };
    runtime.spawn(async move {
        tokio::time::sleep(wait).await;
        if t.generation.load(Ordering::Relaxed) == generation
            && t.live_upstreams.load(Ordering::Relaxed) == 0
        {
            tracing::info!(track = %t.name, ?wait, "no publisher came back; track ended");
            end_track(&inner, &t);
        }
    });
}

// ---- clustering (see cluster.rs) ------------------------------------------------------------

/// `path` with `node` appended.
fn extend(path: &[String], node: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(node.to_string());
    p
}

/// Offers `ns` to the peers as this relay reaches it now: from here if a local session
/// publishes it, else through the best peer's path with this node appended, else not at all.
fn refresh_export(inner: &Inner, ns: &TrackNamespace) {
    let Some(c) = &inner.cluster else {
        return;
    };
    let (best, offered) = {
        let offers = c.offers.lock();
        (offers.best_of(ns), offers.sessions(ns))
    };
    let local = inner
        .routes
        .lock()
        .at(ns)
        .iter()
        .any(|(id, _)| !offered.contains(id));
    {
        let mut regs = c.local_regs.lock();
        match local {
            true => {
                regs.entry(ns.clone())
                    .or_insert_with(|| c.local.publish(ns.clone()));
            }
            false => {
                regs.remove(ns);
            }
        }
    }
    let path = match (local, best) {
        (true, _) => Some(vec![c.config.node.clone()]),
        (false, Some(o)) => Some(extend(&o.path, &c.config.node)),
        (false, None) => None,
    };
    export(inner, c, ns, path);
}

/// Offers `ns` to the peers through `path` (replacing what was offered), or withdraws it.
fn export(inner: &Inner, c: &ClusterState, ns: &TrackNamespace, path: Option<Vec<String>>) {
    let mut exports = c.exports.lock();
    if exports.get(ns).map(|(p, _)| p) == path.as_ref() {
        return;
    }
    exports.remove(ns);
    if let Some(path) = path
        && let Some(entry) = cluster::wrap(&c.config.prefix, &path, ns)
    {
        exports.insert(ns.clone(), (path, inner.index.publish(entry)));
    }
}

/// Keeps one link to `url`, redialing with backoff until the relay is gone or draining.
async fn keep_link(inner: Weak<Inner>, peer: String, upstream: bool) {
    let mut attempt = 0;
    loop {
        let Some(i) = inner.upgrade() else {
            return;
        };
        let Some(c) = &i.cluster else {
            return;
        };
        if i.draining.load(Ordering::Relaxed) {
            return;
        }
        let client = moq_transport::endpoint::Client::new(moq_transport::endpoint::ClientConfig {
            tls: c.config.tls.clone(),
            versions: c.config.versions.clone(),
            session: i
                .session_config
                .clone()
                .with_announced(NamespaceIndex::new()),
            share_indexes: true,
            quic: i.config.quic,
            udp_buffer: i.config.udp_buffer,
        });
        let (url, link) = match upstream {
            true => (peer.clone(), Link::Upstream(peer.clone())),
            false => (c.config.link_url(&peer), Link::Cluster(Some(peer.clone()))),
        };
        c.links.dialing(&peer, upstream);
        match client.map(|cl| async move { cl.connect(&url).await }) {
            Ok(connecting) => match connecting.await {
                Ok(session) => {
                    c.links.up(&peer, upstream);
                    let since = tokio::time::Instant::now();
                    handle_session(i.clone(), session.clone(), Some(link)).await;
                    let ours = i.draining.load(Ordering::Relaxed);
                    c.links.lost(&peer, upstream, &session.closed().await, ours);
                    // A link that lasted is redialed at once; one the peer ends as soon as it
                    // is up (a refused token) backs off like a failed dial.
                    if since.elapsed() >= cluster::STABLE_LINK {
                        attempt = 0;
                    }
                }
                Err(e) => c
                    .links
                    .failed(&peer, upstream, &e, cluster::backoff(attempt + 1)),
            },
            Err(e) => {
                tracing::warn!(peer = %peer, error = %e, "cluster link not configured");
                return;
            }
        }
        drop(i);
        attempt += 1;
        tokio::time::sleep(cluster::backoff(attempt)).await;
    }
}

/// Announces to a foreign upstream (PUBLISH_NAMESPACE) every namespace this relay's own
/// clients publish, and withdraws each (PUBLISH_NAMESPACE_DONE) when they stop, for as long as
/// the link lasts. A namespace the upstream refuses stays unannounced there.
async fn announce_upstream(local: NamespaceIndex, session: Session) {
    let mut held: HashMap<TrackNamespace, Option<PublishedNamespace>> = HashMap::new();
    let mut mirror = Mirror::new(local);
    loop {
        match mirror.next().await {
            NamespaceEvent::Added(ns) => {
                let published = announce(&session, ns.clone()).await;
                held.insert(ns, published);
            }
            NamespaceEvent::Removed(ns) => {
                held.remove(&ns);
            }
        }
    }
}

/// PUBLISH_NAMESPACE `ns` on `session`; `None` if refused.
async fn announce(session: &Session, ns: TrackNamespace) -> Option<PublishedNamespace> {
    match session.publish_namespace(ns.clone()).await {
        Ok(p) => Some(p),
        Err(e) => {
            tracing::warn!(namespace = %ns, error = %e, "upstream refused a namespace");
            None
        }
    }
}

/// Learns what a link's peer offers (SUBSCRIBE_NAMESPACE for the cluster view) until it ends.
async fn learn(inner: Arc<Inner>, id: u64, session: Session, link: Link) {
    let Some(c) = &inner.cluster else {
        return;
    };
    let (prefix, node) = (c.config.prefix.clone(), c.config.node.clone());
    let view = match &link {
        Link::Cluster(_) => TrackNamespace::from_strs([prefix.clone()]),
        Link::Upstream(_) => Ok(TrackNamespace::empty()),
    };
    let Ok(view) = view else {
        return;
    };
    let mut offers = match session.subscribe_namespace(view).await {
        Ok(s) => s,
        Err(e) => {
            let dialed = match &link {
                Link::Cluster(peer) => peer.as_deref().map(|p| (p, false)),
                Link::Upstream(peer) => Some((peer.as_str(), true)),
            };
            let remote = session.info().remote.map(|a| a.to_string());
            let remote = format!("{} (session {id})", remote.unwrap_or_default());
            c.links.refused(dialed, &remote, &e);
            return;
        }
    };
    while let Some(Ok(ev)) = offers.next().await {
        let ev = match &link {
            Link::Cluster(_) => cluster::view_event(&prefix, &node, ev),
            // What this relay announced there, echoed back, is not learned from it.
            Link::Upstream(name) => cluster::upstream_event(&prefix, name, ev).filter(
                |e| !matches!(e, ViewEvent::Offered(ns, _) if c.local_regs.lock().contains_key(ns)),
            ),
        };
        match ev {
            Some(ViewEvent::Offered(ns, path)) => {
                let offer = Offer {
                    session_id: id,
                    session: session.clone(),
                    path,
                };
                let (before, after) = c.offers.lock().add(&ns, offer);
                apply_offer(&inner, c, &ns, before, after);
            }
            Some(ViewEvent::Withdrawn(ns)) => {
                let (before, after) = c.offers.lock().remove(&ns, id);
                apply_offer(&inner, c, &ns, before, after);
            }
            None => {}
        }
    }
    forget_link(&inner, id);
}

/// Withdraws everything link `id` offered.
fn forget_link(inner: &Arc<Inner>, id: u64) {
    let Some(c) = &inner.cluster else {
        return;
    };
    let offered = c.offers.lock().of(id);
    for ns in offered {
        let (before, after) = c.offers.lock().remove(&ns, id);
        apply_offer(inner, c, &ns, before, after);
    }
}

/// Routes `ns` through the best offer (only), keeps the learned namespace in the index while
/// any peer offers it, and re-offers it to the peers through the best path.
fn apply_offer(
    inner: &Arc<Inner>,
    c: &ClusterState,
    ns: &TrackNamespace,
    before: Option<Offer>,
    after: Option<Offer>,
) {
    let same = |a: &Offer, b: &Offer| a.session_id == b.session_id && a.path == b.path;
    if let (Some(b), Some(a)) = (&before, &after)
        && same(b, a)
    {
        return;
    }
    tracing::debug!(
        namespace = %ns,
        before = ?before.as_ref().map(|o| (o.session_id, &o.path)),
        after = ?after.as_ref().map(|o| (o.session_id, &o.path)),
        "cluster route"
    );
    if let Some(b) = &before {
        inner.routes.lock().remove(ns, b.session_id);
    }
    match &after {
        Some(a) => {
            inner.routes.lock().insert(
                ns,
                a.session_id,
                Route {
                    session_id: a.session_id,
                    session: a.session.clone(),
                },
            );
            c.learned
                .lock()
                .entry(ns.clone())
                .or_insert_with(|| inner.index.publish(ns.clone()));
        }
        None => {
            c.learned.lock().remove(ns);
        }
    }
    inner.routes_changed.send_modify(|v| *v += 1);
    refresh_export(inner, ns);
    if let Some(a) = &after
        && before.as_ref().is_none_or(|b| b.session_id != a.session_id)
    {
        subscribe_active(inner, ns, a.session_id, &a.session);
    }
}
