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

use super::state::{Inner, Route};
use super::track::{RelayTrack, Standing};

impl Inner {
    /// A namespace session `id`'s peer announced was registered in the shared index through
    /// the session's owner view (`added`), or its registration ended: the route it is
    /// changed. Added, the new publisher is subscribed to the tracks waiting under it (once
    /// the session is registered: [`Inner::subscribe_registered`] covers those announced
    /// before). `.session` namespaces are never routed (draft-19 §3.2.2): the view keeps them
    /// out of the index.
    ///
    /// Called by the index's listener, outside its lock; on removal from the registration's
    /// drop, so it spawns nothing then.
    pub(super) fn route_changed(self: &Arc<Self>, ns: &TrackNamespace, id: u64, added: bool) {
        tracing::debug!(session = id, namespace = %ns, added, "route changed");
        self.routes_changed.send_modify(|v| *v += 1);
        // A namespace a client of this relay publishes: offered to the peers from here.
        self.refresh_export(ns);
        if added {
            let session = self.sessions.lock().get(&id).cloned();
            if let Some(session) = session {
                self.subscribe_active(ns, id, &session);
            }
        }
    }

    /// Subscribes session `id`, registered just now, to the tracks waiting under what its peer
    /// announced before it was (a PUBLISH_NAMESPACE may be accepted before the relay
    /// registers the session: [`Inner::route_changed`] then found no session to subscribe).
    pub(super) fn subscribe_registered(self: &Arc<Self>, id: u64, session: &Session) {
        let tracks: Vec<Arc<RelayTrack>> = self
            .tracks
            .lock()
            .values()
            .filter(|t| !t.published && t.downstreams.load(Ordering::Relaxed) > 0)
            .cloned()
            .collect();
        for t in tracks {
            let owners = self.index.owners_on_path(&t.name.namespace);
            if owners.iter().any(|o| o.get() == id) {
                self.start_upstream(&t, id, session.clone());
            }
        }
        // A SUBSCRIBE waiting for this session's registration (`wait_answer`) looks again.
        self.routes_changed.send_modify(|v| *v += 1);
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

    /// Takes away every route to session `id` (it ended) held apart from the index (a link's
    /// cluster offers); what its peer announced leaves the index with its registrations.
    pub(super) fn remove_routes_of(&self, id: u64) {
        // In place: listing every route first cost a namespace per route, all sessions'.
        let mine = self.routes.lock().remove_where(|_, r| r.session_id == id);
        self.routes_changed.send_modify(|v| *v += 1);
        for ns in &mine {
            self.refresh_export(ns);
        }
    }

    /// Every publisher session whose announced namespace is a prefix of `ns` (draft-19 §9.5):
    /// the sessions whose peers announced it (owners of the shared index's entries, while the
    /// session is registered) and the routes held apart (cluster offers, origin links).
    pub(super) fn routes_for(&self, ns: &TrackNamespace) -> Vec<Route> {
        // One lock at a time.
        let owners = self.index.owners_on_path(ns);
        let mut seen = HashSet::new();
        let mut out: Vec<Route> = self
            .routes
            .lock()
            .prefixes_of(ns)
            .map(|(_, r)| r.clone())
            .filter(|r| seen.insert(r.session_id))
            .collect();
        if !owners.is_empty() {
            let sessions = self.sessions.lock();
            out.extend(
                owners
                    .into_iter()
                    .map(|o| o.get())
                    .filter(|id| seen.insert(*id))
                    .filter_map(|id| {
                        sessions.get(&id).map(|s| Route {
                            session_id: id,
                            session: s.clone(),
                        })
                    }),
            );
        }
        out
    }

    /// The ids of the sessions routing `ns` itself: owners of its entries in the shared index
    /// and routes held apart, each once.
    pub(super) fn route_ids_at(&self, ns: &TrackNamespace) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .index
            .owners_at(ns)
            .into_iter()
            .map(|o| o.get())
            .collect();
        ids.extend(self.routes.lock().at(ns).iter().map(|(id, _)| *id));
        ids.sort_unstable();
        ids.dedup();
        ids
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

    /// True while a publisher announced on `ns`'s path but the relay has not registered its
    /// session yet: the session's driver accepts PUBLISH_NAMESPACE as soon as SETUP is done,
    /// and the session may wait in the server's accept queue before the relay's task for it
    /// runs.
    fn unregistered_owner(&self, ns: &TrackNamespace) -> bool {
        let owners = self.index.owners_on_path(ns);
        if owners.is_empty() {
            return false;
        }
        let sessions = self.sessions.lock();
        owners.iter().any(|o| !sessions.contains_key(&o.get()))
    }

    /// Waits until every session whose peer announced on `ns`'s path is registered (its
    /// routes start there: [`Inner::subscribe_registered`]), at most [`REGISTRATION_GRACE`],
    /// so that a SUBSCRIBE, FETCH or TRACK_STATUS sent right after discovery showed the
    /// namespace finds its publisher rather than DOES_NOT_EXIST. Returns at once when none is
    /// waiting; past the grace the request is routed as things stand. Cancel safe.
    pub(super) async fn registrations_on(&self, ns: &TrackNamespace) {
        // The common case costs one look and no subscription.
        if !self.unregistered_owner(ns) {
            return;
        }
        // Subscribed before the loop's look, so a registration in between wakes the wait.
        let mut routes = self.routes_changed.subscribe();
        tracing::debug!(namespace = %ns, "waiting for an announcing session's registration");
        let _ = tokio::time::timeout(REGISTRATION_GRACE, async {
            while self.unregistered_owner(ns) {
                if routes.changed().await.is_err() {
                    return;
                }
            }
        })
        .await;
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
                    return Err(no_publisher());
                };
                if tokio::time::Instant::now() >= deadline {
                    return Err(timed_out());
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
                        return Err(timed_out());
                    }
                }
            }
        }
    }
}

/// How long a SUBSCRIBE waits for the session of a publisher that already announced to be
/// registered (a scheduling delay, not a network one).
const REGISTRATION_GRACE: Duration = Duration::from_secs(2);

/// No publisher for the track (draft-19 §10.2.4: DOES_NOT_EXIST).
fn no_publisher() -> RequestError {
    RequestError::new(
        RequestErrorCode::DOES_NOT_EXIST,
        "no publisher for this track",
    )
}

/// No publisher within the rendezvous time (draft-19 §10.2.4: TIMEOUT).
fn timed_out() -> RequestError {
    RequestError::new(RequestErrorCode::TIMEOUT, "no publisher appeared")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::num::NonZeroU64;

    use super::*;
    use crate::{Relay, RelayConfig};

    /// A request for a namespace announced by a session the relay has not registered yet waits
    /// for that session (here: until its announcement ends), and one with no such session on
    /// the path does not wait at all.
    #[tokio::test]
    async fn a_request_waits_for_the_registration_of_an_announcing_session() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let relay =
                Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap())
                    .unwrap();
            let inner = &relay.inner;
            let room = TrackNamespace::from_strs(["room"]).unwrap();
            let track = TrackNamespace::from_strs(["room", "cam"]).unwrap();
            inner.registrations_on(&track).await;
            // Session 999 announced `room` through its owner view: not registered.
            let view = inner.index.owned_by(NonZeroU64::new(999).unwrap());
            let announced = view.publish(room.clone());
            let mut wait = Box::pin(inner.registrations_on(&track));
            assert!(futures::poll!(&mut wait).is_pending());
            // Other namespaces do not wait for it.
            inner
                .registrations_on(&TrackNamespace::from_strs(["hall"]).unwrap())
                .await;
            drop(announced);
            wait.await;
        })
        .await
        .unwrap();
    }
}
