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

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::RequestError;
use moq_core::{TrackNamespace, Version};
use moq_transport::namespace::NamespaceEvent;
use moq_transport::tls::ClientTls;
use moq_transport::{AuthRequest, Authorizer, RequestKind, ResolvedToken, Session, SessionInfo};

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
    ns.fields().first().map(|f| &f[..]) == Some(prefix.as_bytes())
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
    let fields = entry.fields();
    let path = std::str::from_utf8(fields.get(1)?).ok()?;
    let path: Vec<String> = path.split(',').map(str::to_string).collect();
    let ns = TrackNamespace::new(fields.get(2..)?.iter().cloned()).ok()?;
    (!ns.is_empty()).then_some((path, ns))
}

/// One peer's offer of a namespace.
#[derive(Clone, Debug)]
pub(crate) struct Offer {
    pub(crate) session_id: u64,
    pub(crate) session: Session,
    pub(crate) path: Vec<String>,
}

/// What the links offer, by namespace; the best offer (shortest path, then oldest link) is
/// the one routed.
#[derive(Debug, Default)]
pub(crate) struct Offers {
    by_ns: HashMap<TrackNamespace, Vec<Offer>>,
}

impl Offers {
    fn pick(v: &[Offer]) -> Option<&Offer> {
        v.iter().min_by_key(|o| (o.path.len(), o.session_id))
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
        v.retain(|o| o.session_id != offer.session_id);
        v.push(offer);
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
            (true, view) => view,
            (false, true) => false,
            (false, false) => self.inner.visible(session, tokens, namespace),
        }
    }

    fn session_expiry(&self, session: &SessionInfo) -> Option<SystemTime> {
        self.inner.session_expiry(session)
    }
}

/// Reconnect delays of a link: 250 ms doubling to 10 s.
pub(crate) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(250u64.saturating_mul(1 << attempt.min(6))).min(Duration::from_secs(10))
}

/// The events of a link's SUBSCRIBE_NAMESPACE for the cluster view, as offers.
pub(crate) enum ViewEvent {
    /// The peer can reach `ns` through `path`.
    Offered(TrackNamespace, Vec<String>),
    /// It no longer can.
    Withdrawn(TrackNamespace),
}

/// Reads one cluster-view event, ignoring entries that are not well formed or whose path
/// names `node` (they went through this relay already).
pub(crate) fn view_event(prefix: &str, node: &str, ev: NamespaceEvent) -> Option<ViewEvent> {
    match ev {
        NamespaceEvent::Added(entry) => {
            let (path, ns) = unwrap(prefix, &entry)?;
            (!path.iter().any(|n| n == node)).then_some(ViewEvent::Offered(ns, path))
        }
        NamespaceEvent::Removed(entry) => {
            let (path, ns) = unwrap(prefix, &entry)?;
            (!path.iter().any(|n| n == node)).then_some(ViewEvent::Withdrawn(ns))
        }
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
        assert!(view_event("moq-cluster", "A", NamespaceEvent::Added(e.clone())).is_none());
        assert!(matches!(
            view_event("moq-cluster", "C", NamespaceEvent::Added(e)),
            Some(ViewEvent::Offered(n, p)) if n == ns && p.len() == 2
        ));
        assert_eq!(backoff(0), Duration::from_millis(250));
        assert_eq!(backoff(20), Duration::from_secs(10));
    }
}
