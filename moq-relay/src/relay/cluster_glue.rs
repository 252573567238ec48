//! The relay's side of its cluster (the rules are in `cluster.rs`): what it offers its peers
//! (exports), what it learns from its links (offers, turned into routes), and the links it
//! keeps dialing.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use moq_core::TrackNamespace;
use moq_transport::Session;
use moq_transport::namespace::{NamespaceIndex, PublishedNamespace};

use super::mirror::{Change, Mirror};
use super::state::{ClusterState, Inner, Link, Route, owner_id};
use crate::cluster::{self, Offer, ViewEvent};

/// `path` with `node` appended.
fn extend(path: &[String], node: &str) -> Vec<String> {
    let mut p = path.to_vec();
    p.push(node.to_string());
    p
}

impl Inner {
    /// Offers `ns` to the peers as this relay reaches it now: from here if a local session
    /// publishes it, else through the best peer's path with this node appended, else not at all.
    pub(super) fn refresh_export(&self, ns: &TrackNamespace) {
        let Some(c) = &self.cluster else {
            return;
        };
        let (best, offered) = {
            let offers = c.offers.lock();
            (offers.best_of(ns), offers.sessions(ns))
        };
        let local = self.route_ids_at(ns).iter().any(|id| !offered.contains(id));
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
        self.export(c, ns, path);
    }

    /// Offers `ns` to the peers through `path` (replacing what was offered), or withdraws it.
    pub(super) fn export(&self, c: &ClusterState, ns: &TrackNamespace, path: Option<Vec<String>>) {
        let mut exports = c.exports.lock();
        if exports.get(ns).map(|(p, _)| p) == path.as_ref() {
            return;
        }
        exports.remove(ns);
        if let Some(path) = path
            && let Some(entry) = cluster::wrap(&c.config.prefix, &path, ns)
        {
            exports.insert(ns.clone(), (path, self.index.publish(entry)));
        }
    }

    /// Learns what a link's peer offers (SUBSCRIBE_NAMESPACE for the cluster view) until it ends.
    pub(super) async fn learn(self: Arc<Self>, id: u64, session: Session, link: Link) {
        let Some(c) = &self.cluster else {
            return;
        };
        let (prefix, node) = (c.config.prefix.clone(), c.config.node.clone());
        // A link that negotiated the MoQ Cluster extension reads the namespaces themselves,
        // each with its route (HOP_PATH, ROUTE_COST); one that did not, the cluster view.
        let routed = session.info().cluster_peer.is_some();
        let me =
            (self.session_config.cluster_hop).unwrap_or_else(|| crate::cluster_ext::hop_id(&node));
        let view = match &link {
            Link::Cluster(_) if !routed => TrackNamespace::from_strs([prefix.clone()]),
            Link::Cluster(_) | Link::Upstream(_) => Ok(TrackNamespace::empty()),
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
        while let Some(Ok(a)) = offers.next_advertised().await {
            let ev = match &link {
                _ if routed || a.route.is_some() => cluster::routed_event(&prefix, a),
                Link::Cluster(_) => cluster::view_event(&prefix, &node, me, a.event),
                Link::Upstream(name) => cluster::upstream_event(&prefix, name, a.event),
            };
            // What this relay announced upstream, echoed back, is not learned from it.
            let echo = |ns: &TrackNamespace| {
                matches!(link, Link::Upstream(_)) && c.local_regs.lock().contains_key(ns)
            };
            let offer = match ev {
                Some(ViewEvent::Offered(ns, _) | ViewEvent::Routed(ns, _)) if echo(&ns) => None,
                Some(ViewEvent::Offered(ns, path)) => {
                    Some((Offer::viewed(id, session.clone(), path), ns))
                }
                Some(ViewEvent::Routed(ns, route)) => {
                    Some((Offer::routed(id, session.clone(), route), ns))
                }
                Some(ViewEvent::Withdrawn(ns)) => {
                    let (before, after) = c.offers.lock().remove(&ns, id);
                    self.apply_offer(c, &ns, before, after);
                    None
                }
                None => None,
            };
            if let Some((offer, ns)) = offer {
                let (before, after) = c.offers.lock().add(&ns, offer);
                self.apply_offer(c, &ns, before, after);
            }
        }
        self.forget_link(id);
    }

    /// Withdraws everything link `id` offered.
    pub(super) fn forget_link(self: &Arc<Self>, id: u64) {
        let Some(c) = &self.cluster else {
            return;
        };
        let offered = c.offers.lock().of(id);
        for ns in offered {
            let (before, after) = c.offers.lock().remove(&ns, id);
            self.apply_offer(c, &ns, before, after);
        }
    }

    /// Routes `ns` through the best offer (only), keeps the learned namespace in the index while
    /// any peer offers it, and re-offers it to the peers through the best path.
    pub(super) fn apply_offer(
        self: &Arc<Self>,
        c: &ClusterState,
        ns: &TrackNamespace,
        before: Option<Offer>,
        after: Option<Offer>,
    ) {
        let same = |a: &Offer, b: &Offer| {
            a.session_id == b.session_id && a.path == b.path && a.route == b.route
        };
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
            self.routes.lock().remove(ns, b.session_id);
        }
        match &after {
            Some(a) => {
                self.routes.lock().insert(
                    ns,
                    a.session_id,
                    Route {
                        session_id: a.session_id,
                        session: a.session.clone(),
                    },
                );
                // The index keeps the route: a link that speaks the MoQ Cluster extension is
                // told it (HOP_PATH with this relay appended, ROUTE_COST), again when it changes.
                let mut learned = c.learned.lock();
                match learned.get(ns) {
                    Some(r) => r.set_route(a.route.clone()),
                    None => {
                        let r = self.index.publish_routed(ns.clone(), a.route.clone());
                        learned.insert(ns.clone(), r);
                    }
                }
            }
            None => {
                c.learned.lock().remove(ns);
            }
        }
        self.routes_changed.send_modify(|v| *v += 1);
        self.refresh_export(ns);
        if let Some(a) = &after
            && before.as_ref().is_none_or(|b| b.session_id != a.session_id)
        {
            self.subscribe_active(ns, a.session_id, &a.session);
        }
    }
}

/// Keeps one link to `url`, redialing with backoff until the relay is gone or draining.
pub(super) async fn keep_link(inner: Weak<Inner>, peer: String, upstream: bool) {
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
            // The link's announcements are routes like a client's (`Inner::serve_session`).
            session: i
                .session_config
                .clone()
                .with_announced(i.index.owned_by(owner_id(&i.next_id))),
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
                    i.clone().serve_session(session.clone(), Some(link)).await;
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
pub(super) async fn announce_upstream(local: NamespaceIndex, session: Session) {
    // The mirror holds each namespace's announcement; dropped with its Removed, it is withdrawn.
    let mut mirror: Mirror<PublishedNamespace> = Mirror::new(local);
    loop {
        match mirror.next().await {
            Change::Added(ns) => {
                if let Some(published) = announce(&session, ns.clone()).await {
                    mirror.set(published);
                }
            }
            Change::Removed(..) => {}
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
