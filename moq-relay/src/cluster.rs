//! Clustering: relays that dial each other over MOQT and act as one.
//!
//! A link is one MOQT session between two relays, dialed by the relay that lists the other as
//! a peer, to the path `/<prefix>/<node>` (the prefix is `moq-cluster` by default). Both ends
//! treat it alike: each sends SUBSCRIBE_NAMESPACE for `<prefix>` and learns the other's
//! namespaces from the NAMESPACE messages.
//!
//! What a relay offers its peers is its *cluster view*: for each namespace it can reach, the
//! entry `(<prefix>, "<path>", <namespace fields>...)`, where the path is the comma-separated
//! node names the namespace went through, origin first and this relay last. A namespace a
//! local client published has the path `<node>`. A relay ignores an entry whose path names
//! itself (the hop marker that stops loops in any topology), and of the entries for one
//! namespace it routes through the shortest path only, so a track is subscribed upstream once
//! per relay however many peers offer it. Learned namespaces join the relay's own index, so a
//! client's SUBSCRIBE_NAMESPACE on any relay sees the whole cluster.
//!
//! The cluster view lives in the relay's one namespace index under `<prefix>`; the
//! `ClusterAuth` wrapper shows it to cluster links only, and shows them nothing else. A
//! client may not publish under `<prefix>`.
//!
//! A link that cannot be made or is lost says why: every failed dial and every lost link is
//! logged at WARN with its [`LinkCause`] (certificate, token, unreachable, ...) and what to do
//! about it, and the state of each link this relay dials is in [`crate::Relay::links`], in
//! `/health`'s body and in `/metrics` (`moq_relay_cluster_link_up`,
//! `moq_relay_cluster_link_failures_total`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::RequestError;
use moq_core::{TrackNamespace, Version};
use moq_transport::ConnectError;
use moq_transport::namespace::{Advertised, NamespaceEvent, NamespaceRoute};
use moq_transport::tls::ClientTls;
use moq_transport::{
    AuthRequest, Authorizer, Error, RequestKind, ResolvedToken, Session, SessionInfo,
};
use parking_lot::Mutex;

use crate::metrics::Metrics;

/// How a relay joins a cluster.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// This relay's name, unique in the cluster (it appears in the hop paths).
    pub node: String,
    /// The peers this relay dials (`moqt://host:port` or `https://host:port`). A link is
    /// dialed by one side only: list each pair once.
    pub peers: Vec<String>,
    /// The namespace field under which cluster views are exchanged.
    pub prefix: String,
    /// A token the links present (`?jwt=`); it must grant publish and subscribe on `**`.
    pub token: Option<String>,
    /// How links trust their peers' certificates.
    pub tls: ClientTls,
    /// The versions links offer.
    pub versions: Vec<Version>,
    /// Relays of other implementations this relay takes namespaces from as a client would
    /// (SUBSCRIBE_NAMESPACE for everything); what they announce is routed to them and offered
    /// on to the cluster. What this relay's own clients publish is announced to them
    /// (PUBLISH_NAMESPACE); what it learned from its links is not.
    pub upstreams: Vec<String>,
}

impl ClusterConfig {
    /// A node named `node` dialing `peers`, with the default prefix, web PKI roots and every
    /// version.
    pub fn new(node: impl Into<String>, peers: Vec<String>) -> Self {
        ClusterConfig {
            node: node.into(),
            peers,
            prefix: "moq-cluster".to_string(),
            token: None,
            tls: ClientTls::default(),
            versions: Version::ALL.to_vec(),
            upstreams: Vec::new(),
        }
    }

    /// The URL a link to `peer` dials: the cluster path and the token.
    pub(crate) fn link_url(&self, peer: &str) -> String {
        let base = peer.trim_end_matches('/');
        match &self.token {
            Some(t) => format!("{base}/{}/{}?jwt={t}", self.prefix, self.node),
            None => format!("{base}/{}/{}", self.prefix, self.node),
        }
    }
}

/// Whether a session's path marks it as a cluster link.
pub(crate) fn is_link(prefix: &str, info: &SessionInfo) -> bool {
    info.path
        .as_deref()
        .and_then(|p| p.strip_prefix('/'))
        .and_then(|p| p.strip_prefix(prefix))
        .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether `ns` is an entry of the cluster view under `prefix` (not a client's namespace).
pub(crate) fn in_view(prefix: &str, ns: &TrackNamespace) -> bool {
    ns.field(0) == Some(prefix.as_bytes())
}

/// The cluster-view entry for `ns` reached through `path`.
pub(crate) fn wrap(prefix: &str, path: &[String], ns: &TrackNamespace) -> Option<TrackNamespace> {
    let head = TrackNamespace::from_strs([prefix.to_string(), path.join(",")]).ok()?;
    head.join(ns).ok()
}

/// Splits a cluster-view entry into its path and namespace.
pub(crate) fn unwrap(
    prefix: &str,
    entry: &TrackNamespace,
) -> Option<(Vec<String>, TrackNamespace)> {
    if !in_view(prefix, entry) {
        return None;
    }
    let path = std::str::from_utf8(entry.field(1)?).ok()?;
    let path: Vec<String> = path.split(',').map(str::to_string).collect();
    let ns = TrackNamespace::new(entry.fields().skip(2)).ok()?;
    (!ns.is_empty()).then_some((path, ns))
}

/// One peer's offer of a namespace.
#[derive(Clone, Debug)]
pub(crate) struct Offer {
    pub(crate) session_id: u64,
    pub(crate) session: Session,
    /// The path as the cluster view writes it: node names, or `#<hex>` for a hop known by
    /// its Hop ID only (learned over a link that speaks the MoQ Cluster extension).
    pub(crate) path: Vec<String>,
    /// The route in the extension's terms: the Hop IDs (publisher first) and the cost.
    pub(crate) route: NamespaceRoute,
}

impl Offer {
    /// An offer over a link that negotiated the MoQ Cluster extension.
    pub(crate) fn routed(session_id: u64, session: Session, route: NamespaceRoute) -> Offer {
        let path = route.hops.iter().map(|h| format!("#{h:x}")).collect();
        Offer {
            session_id,
            session,
            path,
            route,
        }
    }

    /// An offer read from the cluster view: each name is a hop, each hop costs 1.
    pub(crate) fn viewed(session_id: u64, session: Session, path: Vec<String>) -> Offer {
        let hops: Vec<u64> = path.iter().map(|n| hop_of(n)).collect();
        let cost = hops.len() as u64 * moq_core::message::cluster::DEFAULT_COST;
        Offer {
            session_id,
            session,
            path,
            route: NamespaceRoute { hops, cost },
        }
    }
}

/// The Hop ID a name of a cluster-view path stands for: `#<hex>` is one, a node name is
/// [`crate::cluster_ext::hop_id`] of it.
pub(crate) fn hop_of(name: &str) -> u64 {
    name.strip_prefix('#')
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or_else(|| crate::cluster_ext::hop_id(name))
}

/// What the links offer, by namespace; the best offer (cheapest route, then shortest, then
/// the first offered) is the one routed. Ties keep the route a namespace has: a link with an
/// equal route offered later never takes it over, so a track's upstream does not move (and is
/// not doubled) when the other way round a ring comes up.
#[derive(Debug, Default)]
pub(crate) struct Offers {
    by_ns: HashMap<TrackNamespace, Vec<Offer>>,
}

impl Offers {
    fn pick(v: &[Offer]) -> Option<&Offer> {
        // draft-lcurley-moq-cluster-01 Path Selection: of several routes to a namespace, the
        // cheapest. Offers are kept in the order first offered: `min_by_key` keeps the first of
        // equals.
        v.iter().min_by_key(|o| o.route.rank())
    }

    /// The offer routed for `ns`.
    pub(crate) fn best_of(&self, ns: &TrackNamespace) -> Option<Offer> {
        self.by_ns.get(ns).and_then(|v| Self::pick(v)).cloned()
    }

    /// The links offering `ns`.
    pub(crate) fn sessions(&self, ns: &TrackNamespace) -> Vec<u64> {
        self.by_ns
            .get(ns)
            .map(|v| v.iter().map(|o| o.session_id).collect())
            .unwrap_or_default()
    }

    /// Adds `offer`; returns the best offer before and after.
    pub(crate) fn add(
        &mut self,
        ns: &TrackNamespace,
        offer: Offer,
    ) -> (Option<Offer>, Option<Offer>) {
        let v = self.by_ns.entry(ns.clone()).or_default();
        let before = Self::pick(v).cloned();
        // A link offering again keeps its place (the order is that of first offers).
        match v.iter_mut().find(|o| o.session_id == offer.session_id) {
            Some(o) => *o = offer,
            None => v.push(offer),
        }
        let after = Self::pick(v).cloned();
        (before, after)
    }

    /// Removes the offer of link `session_id`; returns the best offer before and after.
    pub(crate) fn remove(
        &mut self,
        ns: &TrackNamespace,
        session_id: u64,
    ) -> (Option<Offer>, Option<Offer>) {
        let Some(v) = self.by_ns.get_mut(ns) else {
            return (None, None);
        };
        let before = Self::pick(v).cloned();
        v.retain(|o| o.session_id != session_id);
        let after = Self::pick(v).cloned();
        if v.is_empty() {
            self.by_ns.remove(ns);
        }
        (before, after)
    }

    /// The namespaces link `session_id` offers.
    pub(crate) fn of(&self, session_id: u64) -> Vec<TrackNamespace> {
        self.by_ns
            .iter()
            .filter(|(_, v)| v.iter().any(|o| o.session_id == session_id))
            .map(|(ns, _)| ns.clone())
            .collect()
    }
}

/// The relay's authorizer with the cluster's rules on top: the cluster view is visible to
/// links only and links see nothing else; a client may not publish under the prefix.
pub(crate) struct ClusterAuth {
    pub(crate) inner: Arc<dyn Authorizer>,
    pub(crate) prefix: String,
}

impl ClusterAuth {
    fn in_view(&self, ns: &TrackNamespace) -> bool {
        in_view(&self.prefix, ns)
    }
}

#[async_trait]
impl Authorizer for ClusterAuth {
    async fn authorize_session(&self, session: &SessionInfo) -> Result<(), SessionErrorCode> {
        self.inner.authorize_session(session).await
    }

    async fn authorize(
        &self,
        session: &SessionInfo,
        req: &AuthRequest<'_>,
    ) -> Result<(), RequestError> {
        let link = is_link(&self.prefix, session);
        let publishes = matches!(
            req.kind,
            RequestKind::PublishNamespace | RequestKind::Publish
        );
        if !link && publishes && self.in_view(req.namespace) {
            return Err(RequestError::new(
                RequestErrorCode::UNAUTHORIZED,
                "the cluster's namespace",
            ));
        }
        self.inner.authorize(session, req).await
    }

    fn visible(
        &self,
        session: &SessionInfo,
        tokens: &[ResolvedToken],
        namespace: &TrackNamespace,
    ) -> bool {
        match (is_link(&self.prefix, session), self.in_view(namespace)) {
            // A link that speaks the MoQ Cluster extension reads the namespaces themselves,
            // each with its HOP_PATH and ROUTE_COST; one that does not, the cluster view.
            (true, view) if session.cluster_peer.is_some() => !view,
            (true, view) => view,
            (false, true) => false,
            (false, false) => self.inner.visible(session, tokens, namespace),
        }
    }

    fn session_expiry(&self, session: &SessionInfo) -> Option<SystemTime> {
        self.inner.session_expiry(session)
    }
}

/// Why a link could not be made, was lost or is of no use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LinkCause {
    /// The peer's certificate is not trusted (or does not match the pinned fingerprint).
    Certificate,
    /// The peer refused the link's token: none was given, or it is invalid, expired or does
    /// not grant `**`.
    Token,
    /// Nothing answered: no relay listens there, the network drops the packets, or (for a
    /// link that was up) the peer fell silent for the idle timeout.
    Unreachable,
    /// The peer closed the link (it shut down, drained or gave up on this relay).
    Closed,
    /// Anything else; the error says what.
    Other,
}

impl LinkCause {
    /// Reads the cause of a failed dial or a lost link from its error.
    pub fn of(err: &Error) -> LinkCause {
        let token_code = |c: SessionErrorCode| {
            [
                SessionErrorCode::UNAUTHORIZED,
                SessionErrorCode::MALFORMED_AUTH_TOKEN,
                SessionErrorCode::EXPIRED_AUTH_TOKEN,
                SessionErrorCode::UNKNOWN_AUTH_TOKEN_ALIAS,
            ]
            .contains(&c)
        };
        match err {
            Error::ClosedByPeer { code, .. } if token_code(*code) => LinkCause::Token,
            Error::Rejected(e)
                if [
                    RequestErrorCode::UNAUTHORIZED,
                    RequestErrorCode::MALFORMED_AUTH_TOKEN,
                    RequestErrorCode::EXPIRED_AUTH_TOKEN,
                ]
                .contains(&e.code) =>
            {
                LinkCause::Token
            }
            Error::ClosedByPeer { .. } => LinkCause::Closed,
            Error::Timeout(_) => LinkCause::Unreachable,
            Error::Connect(c) => match c {
                ConnectError::UnknownIssuer { .. }
                | ConnectError::FingerprintMismatch { .. }
                | ConnectError::CertificateHash { .. } => LinkCause::Certificate,
                ConnectError::Unreachable { .. }
                | ConnectError::Resolve { .. }
                | ConnectError::Refused { .. } => LinkCause::Unreachable,
                ConnectError::Tls { reason, .. }
                    if reason.contains("Certificate") || reason.contains("NotValidForName") =>
                {
                    LinkCause::Certificate
                }
                _ => LinkCause::Other,
            },
            Error::Transport(_) => {
                let text = err.to_string().to_ascii_lowercase();
                let any = |words: &[&str]| words.iter().any(|w| text.contains(w));
                if any(&[
                    "certificate",
                    "unknownissuer",
                    "fingerprint",
                    "notvalidforname",
                ]) {
                    LinkCause::Certificate
                } else if any(&["timed out", "timeout", "unreachable", "refused", "no route"]) {
                    LinkCause::Unreachable
                } else if any(&["closed by peer", "reset by peer"]) {
                    LinkCause::Closed
                } else {
                    LinkCause::Other
                }
            }
            _ => LinkCause::Other,
        }
    }

    /// The cause's name, as logs, `/health` and `/metrics` show it.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkCause::Certificate => "certificate",
            LinkCause::Token => "token",
            LinkCause::Unreachable => "unreachable",
            LinkCause::Closed => "closed",
            LinkCause::Other => "other",
        }
    }

    /// What to do about it.
    pub fn hint(self) -> &'static str {
        match self {
            LinkCause::Certificate => {
                "the peer's certificate is not trusted: pin it with --cluster-fingerprint \
                 (ClusterConfig::tls), or give the peer a certificate web PKI trusts"
            }
            LinkCause::Token => {
                "the peer refused the link's token: give the relays one key and a \
                 --cluster-token (ClusterConfig::token) granting publish and subscribe on **"
            }
            LinkCause::Unreachable => {
                "no relay answered: check the peer's address and port, that it runs, and that \
                 UDP passes between the two"
            }
            LinkCause::Closed => "the peer closed the link",
            LinkCause::Other => "see the error",
        }
    }
}

impl fmt::Display for LinkCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a link this relay dials stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkState {
    /// Not up yet: the first dial is under way.
    Dialing,
    /// Up: the cluster views are exchanged.
    Up,
    /// The session is up but the peer refused this relay's request for its view (usually a
    /// missing token): nothing crosses the link.
    Refused,
    /// Down: the last dial failed or the link was lost; it is redialed with backoff.
    Down,
}

impl LinkState {
    /// The state's name, as `/health` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkState::Dialing => "dialing",
            LinkState::Up => "up",
            LinkState::Refused => "refused",
            LinkState::Down => "down",
        }
    }
}

/// One link this relay dials (a peer of [`ClusterConfig::peers`] or
/// [`crate::Relay::connect_peer`], or an upstream of [`ClusterConfig::upstreams`]), as
/// [`crate::Relay::links`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStatus {
    /// The peer's URL as configured, without its query (which may carry a token).
    pub peer: String,
    /// An upstream relay of another implementation, not a peer of the cluster.
    pub upstream: bool,
    /// Where the link stands.
    pub state: LinkState,
    /// Dials that failed since the link was last up.
    pub failures: u64,
    /// Why the last dial failed or the link was lost or refused (kept once it is up again).
    pub last_error: Option<(LinkCause, String)>,
}

impl fmt::Display for LinkStatus {
    /// `link <peer> <state>`, then the last error with its cause, as `/health` shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.upstream { "upstream" } else { "link" };
        write!(f, "{kind} {} {}", self.peer, self.state.as_str())?;
        if self.failures > 0 {
            write!(f, " after {} failed dials", self.failures)?;
        }
        if let Some((cause, error)) = &self.last_error {
            let last = if self.state == LinkState::Up {
                "last error"
            } else {
                "error"
            };
            write!(f, "; {last} ({cause}): {error}")?;
        }
        Ok(())
    }
}

/// The URL without its query, which may carry a token.
fn shown(peer: &str) -> &str {
    peer.split_once('?').map_or(peer, |(base, _)| base)
}

/// The links this relay dials, by configured peer URL: their state for [`crate::Relay::links`],
/// their WARN lines and their metrics.
#[derive(Debug)]
pub(crate) struct Links {
    links: Mutex<BTreeMap<String, LinkStatus>>,
    metrics: Arc<Metrics>,
}

impl Links {
    pub(crate) fn new(metrics: Arc<Metrics>) -> Self {
        Links {
            links: Mutex::new(BTreeMap::new()),
            metrics,
        }
    }

    /// Every link, in the order of their URLs.
    pub(crate) fn all(&self) -> Vec<LinkStatus> {
        self.links.lock().values().cloned().collect()
    }

    fn update(&self, peer: &str, upstream: bool, f: impl FnOnce(&mut LinkStatus)) -> LinkStatus {
        let mut links = self.links.lock();
        let link = links.entry(peer.to_string()).or_insert_with(|| LinkStatus {
            peer: shown(peer).to_string(),
            upstream,
            state: LinkState::Dialing,
            failures: 0,
            last_error: None,
        });
        f(link);
        self.metrics
            .link_up(&link.peer, link.state == LinkState::Up);
        link.clone()
    }

    /// A dial of `peer` begins (registers the link on the first).
    pub(crate) fn dialing(&self, peer: &str, upstream: bool) {
        self.update(peer, upstream, |_| {});
    }

    /// The link to `peer` is up.
    pub(crate) fn up(&self, peer: &str, upstream: bool) {
        self.update(peer, upstream, |l| {
            l.state = LinkState::Up;
            l.failures = 0;
        });
        tracing::info!(peer = shown(peer), "cluster link up");
    }

    /// A dial of `peer` failed with `err`; the next is in `retry`.
    pub(crate) fn failed(&self, peer: &str, upstream: bool, err: &Error, retry: Duration) {
        let cause = LinkCause::of(err);
        let link = self.update(peer, upstream, |l| {
            l.state = LinkState::Down;
            l.failures += 1;
            l.last_error = Some((cause, err.to_string()));
        });
        self.metrics.link_failure(&link.peer, cause.as_str());
        tracing::warn!(
            peer = %link.peer,
            cause = cause.as_str(),
            error = %err,
            failures = link.failures,
            retry_in = ?retry,
            "cluster link to {} could not be made: {}",
            link.peer,
            cause.hint()
        );
    }

    /// The link to `peer` ended with `err`; `ours` when this relay closed it (draining or
    /// shutting down). An orderly close (ours, or the peer's with NO_ERROR) is no failure.
    pub(crate) fn lost(&self, peer: &str, upstream: bool, err: &Error, ours: bool) {
        let ours = ours || orderly(err);
        let cause = LinkCause::of(err);
        let link = self.update(peer, upstream, |l| {
            l.state = LinkState::Down;
            if !ours {
                l.last_error = Some((cause, err.to_string()));
            }
        });
        if ours {
            tracing::info!(peer = %link.peer, error = %err, "cluster link closed");
            return;
        }
        self.failure(&link, cause, err, "lost");
    }

    /// The peer of a link refused this relay's SUBSCRIBE_NAMESPACE for its view with `err`.
    /// `peer` is `None` for a link the peer dialed (`remote` names it then).
    pub(crate) fn refused(&self, peer: Option<(&str, bool)>, remote: &str, err: &Error) {
        let cause = LinkCause::of(err);
        let Some((peer, upstream)) = peer else {
            tracing::warn!(
                remote,
                cause = cause.as_str(),
                error = %err,
                "the cluster peer at {remote} refused its view: {}",
                cause.hint()
            );
            return;
        };
        let link = self.update(peer, upstream, |l| {
            l.state = LinkState::Refused;
            l.last_error = Some((cause, err.to_string()));
        });
        self.failure(&link, cause, err, "is up but the peer refused its view");
    }

    /// Counts a failure of `link` for `cause` and says so at WARN: "cluster link to {peer}
    /// {what}: {hint}".
    fn failure(&self, link: &LinkStatus, cause: LinkCause, err: &Error, what: &str) {
        self.metrics.link_failure(&link.peer, cause.as_str());
        tracing::warn!(
            peer = %link.peer,
            cause = cause.as_str(),
            error = %err,
            "cluster link to {} {what}: {}",
            link.peer,
            cause.hint()
        );
    }
}

/// Whether a link ended in order: closed by this relay, or by the peer with NO_ERROR or
/// GOAWAY_TIMEOUT (it shut down or drained).
fn orderly(err: &Error) -> bool {
    match err {
        Error::Closed { .. } => true,
        Error::ClosedByPeer { code, .. } => {
            [SessionErrorCode::NO_ERROR, SessionErrorCode::GOAWAY_TIMEOUT].contains(code)
        }
        _ => false,
    }
}

/// An accepted link (one the peer dialed) ended with `err`: WARN unless it ended in order.
pub(crate) fn accepted_link_lost(info: &SessionInfo, err: &Error, ours: bool) {
    if ours || orderly(err) {
        return;
    }
    let cause = LinkCause::of(err);
    let remote = info.remote.map(|a| a.to_string()).unwrap_or_default();
    tracing::warn!(
        path = shown(info.path.as_deref().unwrap_or("")),
        cause = cause.as_str(),
        error = %err,
        "cluster link from {remote} lost: {}",
        cause.hint()
    );
}

/// How long a link must have been up for its next dial to start the backoff over.
pub(crate) const STABLE_LINK: Duration = Duration::from_secs(10);

/// Reconnect delays of a link: 250 ms doubling to 10 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(10))
}

/// The events of a link's SUBSCRIBE_NAMESPACE for the cluster view, as offers.
pub(crate) enum ViewEvent {
    /// The peer can reach `ns` through `path`.
    Offered(TrackNamespace, Vec<String>),
    /// The peer can reach `ns` by this route (MoQ Cluster extension: its HOP_PATH, its
    /// ROUTE_COST plus the link's cost; what loops through this relay never gets here).
    Routed(TrackNamespace, NamespaceRoute),
    /// It no longer can.
    Withdrawn(TrackNamespace),
}

/// Reads one cluster-view event, ignoring entries that are not well formed or whose path
/// names `node` (they went through this relay already), by name or by its Hop ID `me`.
pub(crate) fn view_event(
    prefix: &str,
    node: &str,
    me: u64,
    ev: NamespaceEvent,
) -> Option<ViewEvent> {
    let ours = |path: &[String]| path.iter().any(|n| n == node || hop_of(n) == me);
    match ev {
        NamespaceEvent::Added(entry) => {
            let (path, ns) = unwrap(prefix, &entry)?;
            (!ours(&path)).then_some(ViewEvent::Offered(ns, path))
        }
        NamespaceEvent::Removed(entry) => {
            let (path, ns) = unwrap(prefix, &entry)?;
            (!ours(&path)).then_some(ViewEvent::Withdrawn(ns))
        }
    }
}

/// Reads one NAMESPACE or NAMESPACE_DONE of a link that negotiated the MoQ Cluster extension
/// (entries of a cluster view, should it show one, are not namespaces and are skipped).
pub(crate) fn routed_event(prefix: &str, a: Advertised) -> Option<ViewEvent> {
    match (a.event, a.route) {
        (NamespaceEvent::Added(ns), Some(route)) if !in_view(prefix, &ns) => {
            Some(ViewEvent::Routed(ns, route))
        }
        (NamespaceEvent::Removed(ns), _) if !in_view(prefix, &ns) => Some(ViewEvent::Withdrawn(ns)),
        _ => None,
    }
}

/// Reads one event of an upstream relay's discovery as an offer through `[name]` (entries of
/// a cluster view, should it show one, are not namespaces and are skipped).
pub(crate) fn upstream_event(prefix: &str, name: &str, ev: NamespaceEvent) -> Option<ViewEvent> {
    match ev {
        NamespaceEvent::Added(ns) if !in_view(prefix, &ns) => {
            Some(ViewEvent::Offered(ns, vec![name.to_string()]))
        }
        NamespaceEvent::Removed(ns) if !in_view(prefix, &ns) => Some(ViewEvent::Withdrawn(ns)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrap_unwrap_and_hop_marker() {
        let ns = TrackNamespace::from_strs(["room", "a"]).unwrap();
        let e = wrap("moq-cluster", &["A".into(), "B".into()], &ns).unwrap();
        assert_eq!(
            unwrap("moq-cluster", &e),
            Some((vec!["A".into(), "B".into()], ns.clone()))
        );
        assert!(
            view_event(
                "moq-cluster",
                "A",
                crate::cluster_ext::hop_id("A"),
                NamespaceEvent::Added(e.clone())
            )
            .is_none()
        );
        assert!(matches!(
            view_event("moq-cluster", "C", crate::cluster_ext::hop_id("C"), NamespaceEvent::Added(e)),
            Some(ViewEvent::Offered(n, p)) if n == ns && p.len() == 2
        ));
        assert_eq!(backoff(0), Duration::from_millis(250));
        assert_eq!(backoff(20), Duration::from_secs(10));
    }
}
