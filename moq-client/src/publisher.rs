//! The publishing side: namespaces and tracks, announced on every attached session and served
//! from their caches.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use moq_core::codes::RequestErrorCode;
use moq_core::message::RequestError;
use moq_core::{FullTrackName, TrackNamespace};
use moq_transport::WeakSession;
use moq_transport::namespace::PublishedNamespace;
use moq_transport::track::{Incoming, IncomingRequests};
use tokio::sync::watch;

use crate::cache::{CacheLimits, TrackCache};
use crate::directory::{AnnouncedNamespace, Directory, DirectoryOptions, Peer};
use crate::error::Error;
use crate::options::TrackOptions;
use crate::produce::TrackProducer;
use crate::serve::ServeOptions;

#[derive(Debug, Default)]
struct State {
    namespaces: HashMap<u64, (TrackNamespace, AnnouncedNamespace)>,
    /// The first answer a session gave to each namespace's PUBLISH_NAMESPACE.
    outcomes: HashMap<u64, Result<(), Error>>,
    /// How many sessions hold each namespace's announcement (withdrawn ones included, until
    /// their session has cancelled it).
    live: HashMap<u64, usize>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Bumped when the namespaces change, for the sessions that announce them.
    changed: watch::Sender<u64>,
    keys: AtomicU64,
    limits: CacheLimits,
    /// The tracks, answering every attached session's requests.
    directory: Directory,
}

/// A session's announcements (`None` where the session refused it), by namespace key; the
/// count of live announcements follows them when they are dropped, however the session's
/// announcing ends.
struct Held<'a> {
    publisher: &'a Publisher,
    announced: HashMap<u64, Option<PublishedNamespace>>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        let keys: Vec<u64> = self
            .announced
            .drain()
            .filter_map(|(k, a)| a.map(|_| k))
            .collect();
        self.publisher.forget(&keys);
    }
}

/// Publishes namespaces and tracks on every session it is attached to, and answers SUBSCRIBE,
/// FETCH and TRACK_STATUS for its tracks automatically from a bounded in-memory cache of recent
/// groups. Cheap to clone; clones share everything.
///
/// ```no_run
/// # async fn run(session: moq_client::Session) -> Result<(), moq_client::Error> {
/// use moq_client::{TrackNamespace, FullTrackName};
/// let publisher = session.publisher();
/// let _room = publisher.publish_namespace(TrackNamespace::from_strs(["chat", "room1"])?)?;
/// let track = publisher.create_track(FullTrackName::new(TrackNamespace::from_strs(["chat", "room1"])?, "messages")?)?;
/// let mut group = track.append_group()?;
/// group.write("hello")?;
/// group.finish()?;
/// # Ok(()) }
/// ```
///
/// Cheap to clone; clones share the namespaces and tracks. Dropping a clone does nothing else:
/// what is published stays until its handle ([`NamespaceHandle`], [`TrackProducer`]) is dropped.
#[derive(Clone, Debug)]
pub struct Publisher {
    shared: Arc<Shared>,
}

impl Default for Publisher {
    fn default() -> Self {
        Self::new(CacheLimits::default(), ServeOptions::default())
    }
}

/// A published namespace; dropping it withdraws it from every session, so hold it for as long
/// as the namespace should stay announced:
///
/// ```no_run
/// # fn run(publisher: moq_client::Publisher, ns: moq_client::TrackNamespace) -> Result<(), moq_client::Error> {
/// let _room = publisher.publish_namespace(ns)?;
/// // ... publish tracks; the namespace is withdrawn when `_room` goes.
/// # Ok(()) }
/// ```
///
/// The handle is `#[must_use]`: as a bare statement the announcement would be withdrawn at
/// once, and the compiler says so.
///
/// ```compile_fail
/// #[deny(unused_must_use)]
/// fn run(publisher: moq_client::Publisher, ns: moq_client::TrackNamespace) -> Result<(), moq_client::Error> {
///     publisher.publish_namespace(ns)?;
///     Ok(())
/// }
/// ```
#[must_use = "dropping a NamespaceHandle withdraws the namespace at once: hold it (`let _room = ...`) while the namespace should stay announced"]
#[derive(Debug)]
pub struct NamespaceHandle {
    shared: Arc<Shared>,
    key: u64,
    namespace: TrackNamespace,
}

impl NamespaceHandle {
    /// The namespace.
    pub fn namespace(&self) -> &TrackNamespace {
        &self.namespace
    }

    /// Waits for the first attached session's answer to the PUBLISH_NAMESPACE: `Ok` for
    /// REQUEST_OK, an error whose [`Error::rejection`] is the code for REQUEST_ERROR.
    ///
    /// Cancel safe.
    pub async fn announced(&self) -> Result<(), Error> {
        let mut rx = self.shared.changed.subscribe();
        loop {
            if let Some(r) = self.shared.state.lock().outcomes.get(&self.key) {
                return r.clone();
            }
            if rx.changed().await.is_err() {
                return Err(moq_transport::Error::EndedEarly.into());
            }
        }
    }

    /// Withdraws the namespace from every session and resolves once each has sent the
    /// withdrawal (the request stream's cancellation, draft-19 §6.2, §3.3.3), or after
    /// `timeout` with [`Error::Timeout`]. QUIC acknowledges no stream reset, so this is the
    /// furthest a withdrawal can be followed; dropping the handle withdraws without waiting.
    ///
    /// Cancel safe: the namespace is withdrawn either way.
    pub async fn withdraw(self, timeout: Duration) -> Result<(), Error> {
        let (shared, key) = (self.shared.clone(), self.key);
        let mut rx = shared.changed.subscribe();
        drop(self);
        let sent = async {
            while shared.state.lock().live.get(&key).is_some_and(|n| *n > 0) {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::time::timeout(timeout, sent)
            .await
            .map_err(|_| Error::Timeout)
    }
}

impl Drop for NamespaceHandle {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.namespaces.remove(&self.key);
        state.outcomes.remove(&self.key);
        drop(state);
        self.shared.changed.send_modify(|v| *v += 1);
    }
}

impl Publisher {
    /// A publisher whose tracks keep `limits` of history and are served with `serve`.
    pub fn new(limits: CacheLimits, serve: ServeOptions) -> Self {
        Self::with_options(
            limits,
            DirectoryOptions {
                serve,
                ..Default::default()
            },
        )
    }

    /// A publisher whose tracks keep `limits` of history and are answered as `options` says
    /// (serving, and how long a SUBSCRIBE for a track not created yet waits for it).
    pub fn with_options(limits: CacheLimits, options: DirectoryOptions) -> Self {
        Publisher {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                changed: watch::channel(0).0,
                keys: AtomicU64::new(0),
                limits,
                directory: Directory::new(options),
            }),
        }
    }

    /// Publishes `namespace` on every attached session (PUBLISH_NAMESPACE), now and on
    /// sessions attached later; [`NamespaceHandle::announced`] tells how the first answered.
    pub fn publish_namespace(&self, namespace: TrackNamespace) -> Result<NamespaceHandle, Error> {
        if namespace.is_reserved() {
            return Err(Error::Reserved(namespace));
        }
        let key = self.shared.keys.fetch_add(1, Ordering::Relaxed);
        let announced = self.shared.directory.announce(namespace.clone());
        self.shared
            .state
            .lock()
            .namespaces
            .insert(key, (namespace.clone(), announced));
        self.shared.changed.send_modify(|v| *v += 1);
        Ok(NamespaceHandle {
            shared: self.shared.clone(),
            key,
            namespace,
        })
    }

    pub(crate) fn serve_options(&self) -> ServeOptions {
        self.shared.directory.options().serve.clone()
    }

    /// The published namespaces.
    pub fn namespaces(&self) -> Vec<TrackNamespace> {
        self.shared
            .state
            .lock()
            .namespaces
            .values()
            .map(|(ns, _)| ns.clone())
            .collect()
    }

    /// Creates a track with default options; its objects are served to every session's
    /// subscribers. [`Error::TrackExists`] if the name is published already.
    pub fn create_track(&self, name: FullTrackName) -> Result<TrackProducer, Error> {
        self.create_track_with(name, TrackOptions::default())
    }

    /// Creates a track with `options` (priority, group order, delivery timeouts, cache).
    pub fn create_track_with(
        &self,
        name: FullTrackName,
        options: TrackOptions,
    ) -> Result<TrackProducer, Error> {
        if name.namespace.is_reserved() {
            return Err(Error::Reserved(name.namespace));
        }
        let limits = options.cache.unwrap_or(self.shared.limits);
        let cache = TrackCache::new(name.clone(), options.to_properties()?, limits);
        let registration = self
            .shared
            .directory
            .insert(cache.clone(), None, true)
            .map_err(|_| Error::TrackExists(name))?;
        Ok(TrackProducer::new(
            cache,
            registration,
            options.groups_from_clock,
        ))
    }

    /// Serves a session: announces every namespace on it (and later ones), and answers its
    /// requests. Runs as one of the session's tasks, until the session ends; it holds the
    /// session weakly so as not to keep it open.
    pub(crate) async fn serve(
        &self,
        session: WeakSession,
        subscriber: Option<crate::subscriber::Subscriber>,
    ) {
        let Some(incoming) = session.upgrade().map(|s| s.incoming()) else {
            return;
        };
        let peer = Peer {
            key: self.shared.keys.fetch_add(1, Ordering::Relaxed),
            session,
        };
        tokio::join!(
            self.announce_loop(&peer.session),
            self.request_loop(&peer, incoming, subscriber)
        );
    }

    async fn announce_loop(&self, session: &WeakSession) {
        let mut held = Held {
            publisher: self,
            announced: HashMap::new(),
        };
        let announced = &mut held.announced;
        let mut rx = self.shared.changed.subscribe();
        loop {
            let wanted: Vec<(u64, TrackNamespace)> = self
                .shared
                .state
                .lock()
                .namespaces
                .iter()
                .map(|(k, (ns, _))| (*k, ns.clone()))
                .collect();
            let mut withdrawn = Vec::new();
            announced.retain(|k, a| {
                let keep = wanted.iter().any(|(w, _)| w == k);
                if !keep && a.is_some() {
                    withdrawn.push(*k);
                }
                keep
            });
            // Dropping the announcements above cancelled them on this session.
            self.forget(&withdrawn);
            for (key, ns) in wanted {
                if announced.contains_key(&key) {
                    continue;
                }
                let Some(s) = session.upgrade() else { return };
                let res = s.publish_namespace(ns.clone()).await;
                drop(s);
                let outcome = res.as_ref().map(|_| ()).map_err(Clone::clone);
                {
                    let mut state = self.shared.state.lock();
                    if res.is_ok() {
                        // Counted with the outcome, so a withdrawal that sees the answer waits
                        // for this announcement too.
                        *state.live.entry(key).or_default() += 1;
                    }
                    if state.namespaces.contains_key(&key) {
                        state
                            .outcomes
                            .entry(key)
                            .or_insert(outcome.map_err(Error::from));
                    }
                }
                self.shared.changed.send_modify(|v| *v += 1);
                match res {
                    Ok(p) => {
                        announced.insert(key, Some(p));
                    }
                    Err(e) => {
                        tracing::warn!(namespace = %ns, error = %e, "PUBLISH_NAMESPACE refused");
                        if e.is_session_error() {
                            return;
                        }
                        // Do not retry on this session: remember it as answered.
                        announced.insert(key, None);
                    }
                }
            }
            if rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// Counts announcements this session no longer holds.
    fn forget(&self, keys: &[u64]) {
        if keys.is_empty() {
            return;
        }
        {
            let mut state = self.shared.state.lock();
            for k in keys {
                if let Some(n) = state.live.get_mut(k) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        state.live.remove(k);
                    }
                }
            }
        }
        self.shared.changed.send_modify(|v| *v += 1);
    }

    /// Answers the session's requests from the directory; a PUBLISH goes to the subscriber.
    async fn request_loop(
        &self,
        peer: &Peer,
        incoming: IncomingRequests,
        subscriber: Option<crate::subscriber::Subscriber>,
    ) {
        while let Some(req) = incoming.next().await {
            // Anything else the directory answers, or refuses by dropping it.
            if let Some(Incoming::Publish(p)) = self.shared.directory.answer(req, peer) {
                match &subscriber {
                    Some(s) => s.offer(p),
                    None => p.reject(RequestError::new(
                        RequestErrorCode::UNINTERESTED,
                        "not subscribing",
                    )),
                }
            }
        }
    }
}
