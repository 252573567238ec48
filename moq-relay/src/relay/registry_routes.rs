//! Origins found on demand through the route registry (issue 36): a SUBSCRIBE, FETCH or
//! TRACK_STATUS for a namespace no session here publishes asks the registry for its origin
//! relay, dials it (one link per origin relay, reused, closed once idle) and routes the
//! namespace through that link, so the relay's usual machinery subscribes upstream there (one
//! upstream subscription per track and link, however many local subscribers).
//!
//! Lookup rule: the longest registered prefix of the track's namespace (field-wise, the
//! namespace itself first), the same rule the relay's own routes follow for PUBLISH_NAMESPACE.
//! Only a miss waits on the store: a namespace routed through a link is served from the
//! relay's routes until the link closes.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::RequestError;
use moq_core::{FullTrackName, TrackNamespace};
use moq_transport::endpoint::{Client, ClientConfig};
use moq_transport::{Session, SessionConfig};

use super::Relay;
use super::origins::{OriginLink, RegistryRouting, Slot};
use super::registry_discovery::origin_link_quic;
use super::state::{Inner, Route};
use crate::cluster_ext;
use crate::registry::{Origin, Registry, RegistryError, RelayRef};

impl Relay {
    /// Finds the origin of what no local publisher has through `routing`'s registry: a
    /// SUBSCRIBE, FETCH or TRACK_STATUS for such a namespace looks up its longest registered
    /// prefix and subscribes upstream at the origin relay over a link kept per origin relay.
    /// With no origin registered the request is refused with DOES_NOT_EXIST, with the store
    /// unreachable with INTERNAL_ERROR. Returns false (and changes nothing) if routing was
    /// already set.
    pub fn route_through_registry(&self, routing: RegistryRouting) -> bool {
        self.inner.origins.config.set(routing).is_ok()
    }

    /// The number of links to origin relays found through the registry open now.
    pub fn origin_links(&self) -> usize {
        let slots: Vec<Slot> = self.inner.origins.links.lock().values().cloned().collect();
        slots
            .iter()
            .filter(|s| s.try_lock().map(|l| l.is_some()).unwrap_or(true))
            .count()
    }
}

/// The origin of `ns`'s longest registered prefix (the namespace itself first), if any.
async fn lookup_longest(
    registry: &dyn Registry,
    ns: &TrackNamespace,
) -> Result<Option<(TrackNamespace, Origin)>, RegistryError> {
    for n in (1..=ns.len()).rev() {
        let fields = ns.fields().take(n);
        let Ok(prefix) = TrackNamespace::new(fields) else {
            continue;
        };
        if let Some(origin) = registry.lookup(&prefix).await? {
            return Ok(Some((prefix, origin)));
        }
    }
    Ok(None)
}

impl Inner {
    /// First waits for the registration of any session on this relay that announced on
    /// `ns`'s path ([`Inner::registrations_on`]). Then routes `ns` through its origin relay
    /// when the relay is routing through a registry and
    /// no route reaches `ns` now, for a request from session `peer` (`None`: for the relay's
    /// own upstream, as when an origin moved). Refuses a relay's request (DOES_NOT_EXIST)
    /// when the route to `ns` runs through that relay, registry or not. Ok with no route added
    /// when nobody registered it, or when `peer` is a relay (its SETUP declared a HOP_ID):
    /// the request then finds no publisher (DOES_NOT_EXIST); a relay's request that only an
    /// origin link reaches is refused (DOES_NOT_EXIST). An error to answer the request with
    /// when the store or the origin cannot be reached. Cancel-safe: dropped midway, a link
    /// being dialed is dropped and nothing is routed.
    pub(super) async fn route_from_registry(
        self: &Arc<Self>,
        ns: &TrackNamespace,
        peer: Option<u64>,
    ) -> Result<(), RequestError> {
        // A publisher on this relay that announced before its session was registered is a
        // route too, once registered.
        self.registrations_on(ns).await;
        let from_relay =
            peer.and_then(|p| self.sessions.lock().get(&p).and_then(cluster_ext::peer_hop));
        // draft-lcurley-moq-cluster-01 Path Selection: a source whose HOP_PATH holds the
        // requesting relay's Hop ID is excluded; with only that one the request is unroutable
        // (serving it would hand the relay data that already went through it).
        if let Some(hop) = from_relay
            && self.index.route(ns).is_some_and(|r| r.runs_through(hop))
        {
            return Err(RequestError::new(
                RequestErrorCode::DOES_NOT_EXIST,
                "the only route to this namespace runs through the requesting relay",
            ));
        }
        let Some(cfg) = self.origins.config.get() else {
            return Ok(());
        };
        // One hop: what another relay asks of this one (it found this relay through the
        // registry, or is a cluster peer speaking the extension) is served from here or
        // refused, never looked up and sent on to a third relay, nor over a link this relay
        // opened to one: no relay-to-relay chains, no loops. The peer's HOP_ID
        // (draft-lcurley-moq-cluster-01) is the mark.
        if let Some(hop) = from_relay {
            let routes = self.routes_for(ns);
            // Origin links are not sessions the relay serves; its publishers and mesh links are.
            let only_origin_links = {
                let sessions = self.sessions.lock();
                !routes.is_empty() && routes.iter().all(|r| !sessions.contains_key(&r.session_id))
            };
            tracing::debug!(namespace = %ns, session = peer, hop, only_origin_links, "request from a relay: served one hop");
            if only_origin_links {
                return Err(RequestError::new(
                    RequestErrorCode::DOES_NOT_EXIST,
                    "served one hop: another relay's request is not sent on to a third relay",
                ));
            }
            return Ok(());
        }
        if !self.routes_for(ns).is_empty() || ns.is_empty() {
            return Ok(());
        }
        let internal = |why: String| RequestError::new(RequestErrorCode::INTERNAL_ERROR, why);
        let found = lookup_longest(&*cfg.registry, ns)
            .await
            .map_err(|e| internal(format!("route registry: {e}")))?;
        let Some((prefix, origin)) = found else {
            return Ok(());
        };
        if origin.relay.id == cfg.me.id {
            // Registered as this relay's but no publisher is here (it just left): none.
            return Ok(());
        }
        let slot = (self.origins.links.lock())
            .entry(origin.relay.id.clone())
            .or_default()
            .clone();
        let mut link = slot.lock().await;
        if link
            .as_ref()
            .is_some_and(|l| l.session.close_reason().is_some())
        {
            *link = None;
        }
        if link.is_none() {
            let session = self
                .dial_origin(cfg, &origin.relay)
                .await
                .map_err(|e| internal(format!("origin relay {}: {e}", origin.relay.id)))?;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            tracing::info!(relay = %origin.relay.id, address = %origin.relay.address, "link to an origin relay up");
            let watched = Watched {
                inner: Arc::downgrade(self),
                slot: slot.clone(),
                session: session.clone(),
                id,
                relay: origin.relay.id.clone(),
            };
            self.tasks.spawn(watched.run(cfg.idle));
            self.origins.link_ids.lock().insert(id);
            *link = Some(OriginLink {
                id,
                session,
                namespaces: HashSet::new(),
            });
        }
        let Some(l) = link.as_mut() else {
            return Ok(());
        };
        if l.namespaces.insert(prefix.clone()) {
            let route = Route {
                session_id: l.id,
                session: l.session.clone(),
            };
            self.routes.lock().insert(&prefix, l.id, route);
            self.routes_changed.send_modify(|v| *v += 1);
        }
        Ok(())
    }

    /// Dials `relay` for a link: a plain subscriber session presenting the routing's token.
    async fn dial_origin(
        &self,
        cfg: &RegistryRouting,
        relay: &RelayRef,
    ) -> Result<Session, moq_transport::Error> {
        let client = Client::new(ClientConfig {
            tls: cfg.tls.clone(),
            versions: self.config.versions.clone(),
            // draft-lcurley-moq-cluster-01 Setup Negotiation: declare this relay's Hop ID, so the
            // origin relay serves the link one hop (from draft-17; below, no mark is sent).
            session: SessionConfig {
                cluster_hop: Some(cluster_ext::hop_id(&cfg.me.id)),
                ..SessionConfig::default()
            },
            share_indexes: false,
            quic: origin_link_quic(self.config.quic, cfg.registry.lease()),
            udp_buffer: self.config.udp_buffer,
        })?;
        let base = relay.address.trim_end_matches('/');
        let url = match &cfg.token {
            Some(t) => format!("{base}/?jwt={t}"),
            None => base.to_string(),
        };
        match tokio::time::timeout(cfg.connect_timeout, client.connect(&url)).await {
            Ok(r) => r,
            Err(_) => Err(moq_transport::Error::Timeout("dialing the origin relay")),
        }
    }

    /// After the upstream subscription for `track` over origin link `id` ended as if its
    /// publisher ended the track (PUBLISH_DONE TRACK_ENDED): when the registry now names
    /// another relay the origin of the namespace routed through that link (the publisher moved
    /// there before it left), routes the namespace through the new origin instead and returns
    /// that route, for the track to subscribe there and go on. `None` (the track ends)
    /// otherwise: not an origin link, the same or no origin registered, or the store or the
    /// new origin not answering (each bounded by its timeout). Cancel-safe.
    pub(super) async fn origin_moved(
        self: &Arc<Self>,
        track: &FullTrackName,
        id: u64,
    ) -> Option<Route> {
        let cfg = self.origins.config.get()?;
        let slots: Vec<(String, Slot)> = (self.origins.links.lock().iter())
            .map(|(relay, slot)| (relay.clone(), slot.clone()))
            .collect();
        let mut found = None;
        for (relay, slot) in slots {
            // A slot held for long is being dialed, so it holds no link that was up (its id
            // would be new); one that is up is held only for a moment (a route added).
            let Ok(link) = tokio::time::timeout(SLOT_WAIT, slot.lock()).await else {
                continue;
            };
            let Some(l) = link.as_ref().filter(|l| l.id == id) else {
                continue;
            };
            // The namespace the track was routed by: the longest routed through the link.
            let prefix = (l.namespaces.iter())
                .filter(|ns| ns.is_prefix_of(&track.namespace))
                .max_by_key(|ns| ns.len())
                .cloned();
            found = prefix.map(|p| (relay, slot.clone(), p));
            break;
        }
        let (relay, slot, prefix) = found?;
        let now = cfg.registry.lookup(&prefix).await.ok()??;
        if now.relay.id == relay || now.relay.id == cfg.me.id {
            return None;
        }
        tracing::info!(namespace = %prefix, from = %relay, to = %now.relay.id, "origin moved; upstream follows");
        self.unroute(&mut *slot.lock().await, id, &prefix);
        self.route_from_registry(&track.namespace, None)
            .await
            .ok()?;
        let routes = self.routes_for(&track.namespace);
        routes.into_iter().find(|r| r.session_id != id)
    }

    /// Stops routing `ns` through origin link `id`, if `link` holds it; true if it did.
    fn unroute(&self, link: &mut Option<OriginLink>, id: u64, ns: &TrackNamespace) -> bool {
        let Some(l) = link.as_mut().filter(|l| l.id == id) else {
            return false;
        };
        if !l.namespaces.remove(ns) {
            return false;
        }
        self.routes.lock().remove(ns, id);
        self.routes_changed.send_modify(|v| *v += 1);
        true
    }

    /// The longest a track waits for a new publisher after its upstream over route `id` ended
    /// without ending the track, if `id` is a link to an origin relay: a quarter of the
    /// registry's lease. Issue 36: the link to a relay that died closes at its QUIC idle
    /// timeout, at most half the lease (`origin_link_quic`); with this wait after it, the
    /// tracks over it end within the lease, as the dead relay's namespaces do, whatever
    /// `RelayConfig::publisher_wait` is. `None` for any other route (a local publisher, a mesh
    /// link): those wait `publisher_wait`.
    pub(super) fn origin_wait(&self, id: u64) -> Option<Duration> {
        let cfg = self.origins.config.get()?;
        let link = self.origins.link_ids.lock().contains(&id);
        link.then(|| cfg.registry.lease() / 4)
    }

    /// Whether a track has a running upstream subscription over route `id`.
    fn link_in_use(&self, id: u64) -> bool {
        let tracks: Vec<_> = self.tracks.lock().values().cloned().collect();
        tracks.iter().any(|t| {
            t.upstreams
                .lock()
                .get(&id)
                .is_some_and(|h| !h.is_finished())
        })
    }

    /// Removes link `id`'s routes and closes it, if `link` still holds it.
    fn drop_link(&self, link: &mut Option<OriginLink>, id: u64) {
        self.origins.link_ids.lock().remove(&id);
        let Some(l) = link.take_if(|l| l.id == id) else {
            return;
        };
        let mut routes = self.routes.lock();
        for ns in &l.namespaces {
            routes.remove(ns, id);
        }
        drop(routes);
        l.session.close(SessionErrorCode::NO_ERROR, "idle");
        self.routes_changed.send_modify(|v| *v += 1);
    }
}

/// The longest [`Inner::origin_moved`] waits for a slot held by another task.
const SLOT_WAIT: Duration = Duration::from_millis(100);

/// A link being watched ([`Watched::run`]).
struct Watched {
    inner: std::sync::Weak<Inner>,
    slot: Slot,
    session: Session,
    id: u64,
    /// The origin relay's id.
    relay: String,
}

impl Watched {
    /// Removes the link's routes when its session ends, and closes it once no upstream
    /// subscription used it for a whole `idle` period.
    async fn run(self, idle: Duration) {
        let mut tick = tokio::time::interval(idle);
        tick.tick().await;
        let mut unused = false;
        loop {
            tokio::select! {
                _ = self.session.closed() => break,
                _ = tick.tick() => {
                    let Some(i) = self.inner.upgrade() else { return };
                    self.forget_moved(&i).await;
                    let used = i.link_in_use(self.id);
                    if !used && unused {
                        break;
                    }
                    unused = !used;
                }
            }
        }
        let Some(i) = self.inner.upgrade() else {
            return;
        };
        let mut link = self.slot.lock().await;
        i.drop_link(&mut link, self.id);
    }

    /// Stops routing through this link the namespaces the registry no longer names its relay
    /// the origin of (moved to another relay, or gone), so the next request for them looks
    /// them up again; subscriptions already made stay. A store that does not answer changes
    /// nothing.
    async fn forget_moved(&self, inner: &Arc<Inner>) {
        let Some(cfg) = inner.origins.config.get() else {
            return;
        };
        let namespaces: Vec<TrackNamespace> = match self.slot.try_lock() {
            Ok(l) => (l.iter())
                .filter(|l| l.id == self.id)
                .flat_map(|l| l.namespaces.iter().cloned())
                .collect(),
            Err(_) => return,
        };
        for ns in namespaces {
            let moved = match cfg.registry.lookup(&ns).await {
                Ok(Some(o)) => o.relay.id != self.relay,
                Ok(None) => true,
                Err(_) => false,
            };
            if !moved {
                continue;
            }
            if let Ok(mut l) = self.slot.try_lock()
                && inner.unroute(&mut l, self.id, &ns)
            {
                tracing::debug!(namespace = %ns, relay = %self.relay, "origin moved; route dropped");
            }
        }
    }
}
