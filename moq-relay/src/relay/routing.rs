//! Routing by namespace: which publisher sessions a track's SUBSCRIBE, FETCH and TRACK_STATUS
//! go to (draft-19 §9.5), and the relay track a downstream SUBSCRIBE joins.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moq_core::codes::RequestErrorCode;
use moq_core::message::RequestError;
use moq_core::{FullTrackName, TrackNamespace};
use moq_transport::Session;
use moq_transport::namespace::NamespaceRegistration;

use super::state::{Inner, Route};
use super::track::{RelayTrack, Standing};

impl Inner {
    /// Routes `ns` to session `id` (its peer announced it), unless a `.session` namespace, and
    /// subscribes the new publisher to the tracks waiting under it. Returns the namespace's
    /// registration in the shared index, which the caller keeps while the route lasts.
    pub(super) fn add_route(
        self: &Arc<Self>,
        ns: &TrackNamespace,
        id: u64,
        session: &Session,
    ) -> Option<NamespaceRegistration> {
        if ns.is_session_level() {
            return None;
        }
        tracing::debug!(session = id, namespace = %ns, "route added");
        self.routes.lock().insert(
            ns,
            id,
            Route {
                session_id: id,
                session: session.clone(),
            },
        );
        // A PUBLISH_NAMESPACE of a relay that speaks the MoQ Cluster extension carries the
        // route it came by; the shared index keeps it, so what this relay advertises on has
        // its HOP_PATH with this relay appended.
        let registration = match session.announced().route(ns).filter(|r| !r.hops.is_empty()) {
            Some(route) => self.index.publish_routed(ns.clone(), route),
            None => self.index.publish(ns.clone()),
        };
        self.routes_changed.send_modify(|v| *v += 1);
        // A namespace a client of this relay publishes: offered to the peers from here.
        self.refresh_export(ns);
        self.subscribe_active(ns, id, session);
        Some(registration)
    }

    /// draft-19 §9.5: a publisher that arrives for a namespace with active subscriptions gets
    /// SUBSCRIBE (this is also how a publisher's switchover to a new session works).
    pub(super) fn subscribe_active(
        self: &Arc<Self>,
        ns: &TrackNamespace,
        id: u64,
        session: &Session,
    ) {
        let tracks: Vec<Arc<RelayTrack>> = self
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
            self.start_upstream(&t, id, session.clone());
        }
    }

    /// Takes away the route `ns` to session `id` (its peer withdrew it), and the namespace's
    /// registration in the shared index that [`Inner::add_route`] returned.
    pub(super) fn remove_route(
        &self,
        ns: &TrackNamespace,
        id: u64,
        registration: NamespaceRegistration,
    ) {
        tracing::debug!(session = id, namespace = %ns, "route removed");
        self.routes.lock().remove(ns, id);
        drop(registration);
        self.routes_changed.send_modify(|v| *v += 1);
        self.refresh_export(ns);
    }

    /// Takes away every route to session `id` (it ended).
    pub(super) fn remove_routes_of(&self, id: u64) {
        // In place: listing every route first cost a namespace per route, all sessions'.
        let mine = self.routes.lock().remove_where(|_, r| r.session_id == id);
        self.routes_changed.send_modify(|v| *v += 1);
        for ns in &mine {
            self.refresh_export(ns);
        }
    }

    /// Every publisher session whose announced namespace is a prefix of `ns` (draft-19 §9.5).
    pub(super) fn routes_for(&self, ns: &TrackNamespace) -> Vec<Route> {
        let routes = self.routes.lock();
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
    pub(super) fn fetch_route(&self, name: &FullTrackName) -> Option<Route> {
        let delivering = self
            .tracks
            .lock()
            .get(name)
            .map(|t| t.delivering.lock().clone())
            .unwrap_or_default();
        self.routes_for(&name.namespace)
            .into_iter()
            .max_by_key(|r| (delivering.contains(&r.session_id), r.session_id))
    }

    /// The relay track for `name`, created (and subscribed upstream to every matching publisher)
    /// if absent.
    pub(super) fn get_or_create_track(
        self: &Arc<Self>,
        name: &FullTrackName,
        rendezvous: Option<Duration>,
        new_group_request: Option<u64>,
    ) -> Arc<RelayTrack> {
        let (track, created) = {
            let mut tracks = self.tracks.lock();
            match tracks.get(name) {
                Some(t) => (t.clone(), false),
                None => {
                    let t = self.new_track(name, Default::default(), false);
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
            for r in self.routes_for(&name.namespace) {
                self.start_upstream(&track, r.session_id, r.session);
            }
        }
        track
    }

    /// Waits for the track's first upstream answer, or for a publisher to appear within the
    /// rendezvous time (draft-19 §10.2.4). Returns where the subscription starts: where the track
    /// stands now if it was answered already, else where it stood at the answer. The upstream's
    /// Largest Location may then be ahead of what arrived: what is received after it is the
    /// subscriber's too (draft-19 §10.7, newly received), as is everything ingested since.
    pub(super) async fn wait_answer(
        self: &Arc<Self>,
        t: &Arc<RelayTrack>,
        rendezvous: Option<Duration>,
    ) -> Result<Standing, RequestError> {
        let deadline = rendezvous.map(|d| tokio::time::Instant::now() + d);
        let mut answer = t.answer.subscribe();
        let mut routes = self.routes_changed.subscribe();
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
                    for r in self.routes_for(&t.name.namespace) {
                        self.start_upstream(t, r.session_id, r.session);
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
}
