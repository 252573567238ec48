//! One session's life at the relay: registered (its peer's announcements are routes through
//! its owner view of the shared index), its requests answered, and everything it brought
//! taken away when it ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moq_client::model::Peer;
use moq_transport::Session;
use moq_transport::track::Incoming;

use super::cluster_glue::announce_upstream;
use super::state::{Inner, Link};
use crate::cluster;

/// The least time a session set up after the relay sent GOAWAY is given to read it.
const LATE_GOAWAY: Duration = Duration::from_millis(250);

impl Inner {
    /// Serves a session a client opened (over QUIC, WebTransport or WebSocket): a cluster
    /// link if its path says so.
    ///
    /// As a task of the relay's. As an entry of the session's own request table (idle6,
    /// ~0.3 KiB less per idle session) aiomoqt's publish-track-subscribe, whose SUBSCRIBE on a
    /// second session follows its PUBLISH without waiting for PUBLISH_OK, was refused
    /// DOES_NOT_EXIST in 2 of 6 interop runs (0 of 6 as a task): the PUBLISH reached the
    /// relay's directory later. Its end takes away what the session brought ([`Registered`],
    /// [`AcceptedLink`]).
    pub(super) fn serve_accepted(self: Arc<Self>, session: Session) {
        let link = self
            .cluster
            .as_ref()
            .is_some_and(|c| crate::cluster::is_link(&c.config.prefix, session.info()));
        let link = link.then_some(Link::Cluster(None));
        let inner = self.clone();
        self.tasks.spawn(inner.serve_session(session, link));
    }

    /// Serves one session (accepted, or a link this relay dialed) until it ends, then takes
    /// away what it brought: its routes, what it offered as a link, its registration.
    pub(super) async fn serve_session(self: Arc<Self>, session: Session, link: Option<Link>) {
        let inner = self;
        // Every session the relay serves registers what its peer announces through an owner
        // view of the shared index (accepted: `Relay::bind`'s per-session configuration;
        // dialed: `keep_link`), whose owner is the session's id.
        let id = match session.announced().owner() {
            Some(owner) => owner.get(),
            None => inner.next_id.fetch_add(1, Ordering::Relaxed),
        };
        let _gauge = inner
            .metrics
            .session(session.version(), session.transport());
        let _registered = Registered::new(&inner, id, &session);
        // A GOAWAY sent to every session before this one was registered reaches it too, with what
        // is left of its timeout (draft-19 §10.4), but never less than LATE_GOAWAY: a session
        // closed at once after it would lose the GOAWAY with the connection.
        let goaway = inner.goaway.lock().clone();
        if let Some((uri, until)) = goaway {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            let s = session.downgrade();
            let uri = uri.for_transport(session.transport());
            session.spawn_light(async move {
                if let Some(s) = s.upgrade() {
                    let _ = s.goaway(&uri, left.max(LATE_GOAWAY)).await;
                }
            });
        }
        tracing::info!(session = id, version = %session.version(), transport = ?session.transport(), cluster_peer = ?session.info().cluster_peer, "session");
        // The session's own tasks: dropped when it closes.
        if let (Some(Link::Upstream(_)), Some(c)) = (&link, &inner.cluster) {
            session.spawn(announce_upstream(c.local.clone(), session.clone()));
        }
        if let Some(l) = link.clone() {
            session.spawn(inner.clone().learn(id, session.clone(), l));
        }
        let incoming = session.incoming();
        let peer = Peer {
            key: id,
            session: session.downgrade(),
        };
        // Reports how an accepted cluster link ended, when it did (dropped with the session's
        // table, or at the end of this future).
        let _accepted = matches!(link, Some(Link::Cluster(None)))
            .then(|| {
                inner
                    .cluster
                    .as_ref()
                    .map(|_| AcceptedLink(inner.clone(), session.clone()))
            })
            .flatten();
        // Ends when the session does.
        while let Some(req) = incoming.next().await {
            if let Some(Incoming::Publish(p)) = inner.directory.answer(req, &peer) {
                // Not one of the session's tasks: it ends when the PUBLISH does, seeing how (the
                // session's close included), which decides whether the track waits for a new
                // publisher.
                inner.tasks.spawn(inner.clone().on_publish(id, p));
            }
        }
        session.closed().await;
    }
}

/// An accepted cluster link, reported when its serving ends (dropped with the session's
/// request table when the session closes, or at the end of `serve_session`).
struct AcceptedLink(Arc<Inner>, Session);

impl Drop for AcceptedLink {
    fn drop(&mut self) {
        let AcceptedLink(inner, session) = self;
        if let Some(ended) = session.close_reason() {
            let ours = inner.draining.load(Ordering::Relaxed);
            cluster::accepted_link_lost(session.info(), &ended, ours);
        }
    }
}

/// A session in the relay's sessions while it lives. Dropped (the session ended, or the relay
/// shut down and dropped its task), it takes away what the session brought: what it offered
/// as a link, its routes, its entry.
struct Registered {
    inner: Arc<Inner>,
    id: u64,
}

impl Registered {
    fn new(inner: &Arc<Inner>, id: u64, session: &Session) -> Self {
        {
            let mut sessions = inner.sessions.lock();
            sessions.insert(id, session.clone());
            inner.session_count.send_replace(sessions.len());
        }
        // What its peer announced before now routes from here on.
        inner.subscribe_registered(id, session);
        Registered {
            inner: inner.clone(),
            id,
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let (inner, id) = (&self.inner, self.id);
        inner.forget_link(id);
        inner.remove_routes_of(id);
        {
            let mut sessions = inner.sessions.lock();
            sessions.remove(&id);
            inner.session_count.send_replace(sessions.len());
        }
        tracing::info!(session = id, "session ended");
    }
}
