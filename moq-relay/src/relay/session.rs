//! One session's life at the relay: registered, its peer's announcements mirrored into the
//! routes, its requests answered, and everything it brought taken away when it ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moq_client::model::Peer;
use moq_transport::Session;
use moq_transport::namespace::NamespaceRegistration;
use moq_transport::track::Incoming;

use super::cluster_glue::announce_upstream;
use super::mirror::{Change, Mirror};
use super::state::{Inner, Link};
use crate::cluster;

/// The least time a session set up after the relay sent GOAWAY is given to read it.
const LATE_GOAWAY: Duration = Duration::from_millis(250);

impl Inner {
    /// Serves one session (accepted, or a link this relay dialed) until it ends, then takes
    /// away what it brought: its routes, what it offered as a link, its registration.
    pub(super) async fn serve_session(self: Arc<Self>, session: Session, link: Option<Link>) {
        let inner = self;
        let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
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
        // The session's own tasks: dropped when it closes. Mirroring its announcements waits
        // for most of its life: an entry of the session's request table, not a task.
        session.spawn_light(sync_routes(inner.clone(), id, session.clone()));
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
        // Ends when the session does.
        while let Some(req) = incoming.next().await {
            if let Some(Incoming::Publish(p)) = inner.directory.answer(req, &peer) {
                // Not one of the session's tasks: it ends when the PUBLISH does, seeing how (the
                // session's close included), which decides whether the track waits for a new
                // publisher.
                inner.tasks.spawn(inner.clone().on_publish(id, p));
            }
        }
        let ended = session.closed().await;
        if let (Some(Link::Cluster(None)), Some(_)) = (&link, &inner.cluster) {
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
        let mut sessions = inner.sessions.lock();
        sessions.insert(id, session.clone());
        inner.session_count.send_replace(sessions.len());
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

/// Mirrors what a session's peer announces (its accepted PUBLISH_NAMESPACEs) into the routes
/// and the shared index. `.session` namespaces are never forwarded (draft-19 §3.2.2). The
/// mirror keeps each routed namespace's registration in the shared index.
async fn sync_routes(inner: Arc<Inner>, id: u64, session: Session) {
    let mut mirror: Mirror<NamespaceRegistration> = Mirror::new(session.announced().clone());
    loop {
        match mirror.next().await {
            Change::Added(ns) => {
                if let Some(registration) = inner.add_route(&ns, id, &session) {
                    mirror.set(registration);
                }
            }
            Change::Removed(ns, Some(registration)) => inner.remove_route(&ns, id, registration),
            Change::Removed(_, None) => {}
        }
    }
}
