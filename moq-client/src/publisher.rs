//! The publishing side: namespaces and tracks, announced on every attached session and served
//! from their caches.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use std::time::Duration;

use moq_core::codes::RequestErrorCode;
use moq_core::message::RequestError;
use moq_core::{FullTrackName, Properties, TrackNamespace};
use moq_transport::WeakSession;
use moq_transport::namespace::PublishedNamespace;
use moq_transport::track::{
    Incoming, IncomingFetch, IncomingRequests, IncomingSubscribe, IncomingTrackStatus,
    PublishOptions, SubscribeResponse, TrackStatusInfo,
};
use tokio::sync::watch;

use crate::Error;
use crate::serve::{ServeOptions, serve_fetch, serve_subscription};
use crate::track::{CacheLimits, Track};

#[derive(Debug, Default)]
struct State {
    namespaces: HashMap<u64, TrackNamespace>,
    /// The first answer a session gave to each namespace's PUBLISH_NAMESPACE.
    outcomes: HashMap<u64, Result<(), Error>>,
    tracks: HashMap<FullTrackName, Track>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
    keys: AtomicU64,
    limits: CacheLimits,
    serve: ServeOptions,
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
/// group.write("hello");
/// group.finish();
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Publisher {
    shared: Arc<Shared>,
}

impl Default for Publisher {
    fn default() -> Self {
        Self::new(CacheLimits::default(), ServeOptions::default())
    }
}

/// A published namespace; dropping it withdraws it from every session.
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
    /// REQUEST_OK, [`Error::Rejected`] for REQUEST_ERROR.
    pub async fn announced(&self) -> Result<(), Error> {
        let mut rx = self.shared.changed.subscribe();
        loop {
            if let Some(r) = self.shared.state.lock().outcomes.get(&self.key) {
                return r.clone();
            }
            if rx.changed().await.is_err() {
                return Err(Error::EndedEarly);
            }
        }
    }

    /// Withdraws the namespace now (the same as dropping it).
    pub fn withdraw(self) {}
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

/// A track being published; objects written to it are served to subscribers. Dropping it ends
/// the track (subscribers get PUBLISH_DONE TRACK_ENDED) and removes it.
#[derive(Debug)]
pub struct TrackProducer {
    track: Track,
    shared: Arc<Shared>,
}

impl std::ops::Deref for TrackProducer {
    type Target = Track;

    fn deref(&self) -> &Track {
        &self.track
    }
}

impl TrackProducer {
    /// The shared track (for readers or other publishers).
    pub fn track(&self) -> &Track {
        &self.track
    }
}

impl Drop for TrackProducer {
    fn drop(&mut self) {
        self.track.end();
        let mut state = self.shared.state.lock();
        if state
            .tracks
            .get(self.track.name())
            .is_some_and(|t| t.same(&self.track))
        {
            state.tracks.remove(self.track.name());
        }
        drop(state);
        self.shared.changed.send_modify(|v| *v += 1);
    }
}

impl Publisher {
    /// A publisher whose tracks keep `limits` of history and are served with `serve`.
    pub fn new(limits: CacheLimits, serve: ServeOptions) -> Self {
        Publisher {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                changed: watch::channel(0).0,
                keys: AtomicU64::new(0),
                limits,
                serve,
            }),
        }
    }

    /// Publishes `namespace` on every attached session (PUBLISH_NAMESPACE), now and on
    /// sessions attached later; [`NamespaceHandle::announced`] tells how the first answered.
    pub fn publish_namespace(&self, namespace: TrackNamespace) -> Result<NamespaceHandle, Error> {
        if namespace.is_reserved() {
            return Err(Error::Invalid(format!("namespace {namespace} is reserved")));
        }
        let key = self.shared.keys.fetch_add(1, Ordering::Relaxed);
        self.shared
            .state
            .lock()
            .namespaces
            .insert(key, namespace.clone());
        self.shared.changed.send_modify(|v| *v += 1);
        Ok(NamespaceHandle {
            shared: self.shared.clone(),
            key,
            namespace,
        })
    }

    /// The published namespaces.
    pub fn namespaces(&self) -> Vec<TrackNamespace> {
        self.shared
            .state
            .lock()
            .namespaces
            .values()
            .cloned()
            .collect()
    }

    /// Creates a track with default properties.
    pub fn create_track(&self, name: FullTrackName) -> Result<TrackProducer, Error> {
        self.create_track_with(name, Properties::new())
    }

    /// Creates a track with properties (DEFAULT_PUBLISHER_PRIORITY, MAX_CACHE_DURATION, ...).
    pub fn create_track_with(
        &self,
        name: FullTrackName,
        properties: Properties,
    ) -> Result<TrackProducer, Error> {
        let mut state = self.shared.state.lock();
        if state.tracks.contains_key(&name) {
            return Err(Error::Invalid(format!("track {name} already exists")));
        }
        let track = Track::new(name.clone(), properties, self.shared.limits);
        state.tracks.insert(name, track.clone());
        drop(state);
        self.shared.changed.send_modify(|v| *v += 1);
        Ok(TrackProducer {
            track,
            shared: self.shared.clone(),
        })
    }

    /// The track named `name`, if published.
    pub fn track(&self, name: &FullTrackName) -> Option<Track> {
        self.shared.state.lock().tracks.get(name).cloned()
    }

    /// Every published track under `prefix`.
    pub fn tracks_under(&self, prefix: &TrackNamespace) -> Vec<Track> {
        self.shared
            .state
            .lock()
            .tracks
            .values()
            .filter(|t| prefix.is_prefix_of(&t.name().namespace))
            .cloned()
            .collect()
    }

    /// Waits until `name` is published, for at most `timeout` (RENDEZVOUS_TIMEOUT).
    async fn wait_track(&self, name: &FullTrackName, timeout: Duration) -> Option<Track> {
        let mut rx = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(t) = self.track(name) {
                return Some(t);
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return None },
                _ = tokio::time::sleep_until(deadline) => return None,
            }
        }
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
        tokio::join!(
            self.announce_loop(&session),
            self.request_loop(&session, incoming, subscriber)
        );
    }

    async fn announce_loop(&self, session: &WeakSession) {
        // Namespace key -> its announcement on this session (`None` if the session refused it).
        let mut announced: HashMap<u64, Option<PublishedNamespace>> = HashMap::new();
        let mut rx = self.shared.changed.subscribe();
        loop {
            let wanted: Vec<(u64, TrackNamespace)> = self
                .shared
                .state
                .lock()
                .namespaces
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect();
            announced.retain(|k, _| wanted.iter().any(|(w, _)| w == k));
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
                    if state.namespaces.contains_key(&key) {
                        state.outcomes.entry(key).or_insert(outcome);
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

    async fn request_loop(
        &self,
        session: &WeakSession,
        incoming: IncomingRequests,
        subscriber: Option<crate::subscriber::Subscriber>,
    ) {
        while let Some(req) = incoming.next().await {
            let this = self.clone();
            let subscriber = subscriber.clone();
            let Some(s) = session.upgrade() else { return };
            let session = session.clone();
            // Each answer runs as one of the session's tasks, ending with it.
            s.spawn(async move {
                match req {
                    Incoming::Subscribe(r) => this.on_subscribe(r).await,
                    Incoming::Fetch(f) => this.on_fetch(f).await,
                    Incoming::TrackStatus(t) => this.on_track_status(t),
                    Incoming::Publish(p) => match subscriber {
                        Some(s) => s.offer(p),
                        None => p.reject(RequestError::new(
                            RequestErrorCode::UNINTERESTED,
                            "not subscribing",
                        )),
                    },
                    Incoming::SubscribeTracks(r) => this.on_subscribe_tracks(session, r).await,
                    _ => {}
                }
            });
        }
    }

    async fn on_subscribe(&self, req: IncomingSubscribe) {
        let name = req.track().clone();
        let wait = req
            .params()
            .rendezvous_timeout
            .filter(|t| *t > 0)
            .map(|t| Duration::from_millis(t).min(Duration::from_secs(60)));
        let track = match (self.track(&name), wait) {
            (Some(t), _) => t,
            // draft-19 §10.2.4: hold the SUBSCRIBE until the track appears, else TIMEOUT.
            (None, Some(wait)) => match self.wait_track(&name, wait).await {
                Some(t) => t,
                None => {
                    return req.reject(RequestError::new(
                        RequestErrorCode::TIMEOUT,
                        "no publisher appeared",
                    ));
                }
            },
            (None, None) => {
                return req.reject(RequestError::new(
                    RequestErrorCode::DOES_NOT_EXIST,
                    "no such track",
                ));
            }
        };
        let response = SubscribeResponse {
            track_alias: None,
            largest: track.largest(),
            expires: None,
            track_properties: track.properties(),
        };
        let Ok(writer) = req.accept(response).await else {
            return;
        };
        let _ = serve_subscription(track, writer, self.shared.serve.clone()).await;
    }

    async fn on_fetch(&self, f: IncomingFetch) {
        match self.track(f.track()) {
            Some(t) => {
                let _ = serve_fetch(&t, f).await;
            }
            None => f.reject(RequestError::new(
                RequestErrorCode::DOES_NOT_EXIST,
                "no such track",
            )),
        }
    }

    fn on_track_status(&self, t: IncomingTrackStatus) {
        match self.track(t.track()) {
            Some(track) => t.accept(TrackStatusInfo {
                largest: track.largest(),
                expires: None,
                track_properties: track.properties(),
            }),
            None => t.reject(RequestError::new(
                RequestErrorCode::DOES_NOT_EXIST,
                "no such track",
            )),
        }
    }

    /// SUBSCRIBE_TRACKS: PUBLISH every matching track, now and as they are created, until the
    /// request ends (its publications go with it).
    async fn on_subscribe_tracks(
        &self,
        session: WeakSession,
        r: moq_transport::track::IncomingSubscribeTracks,
    ) {
        let Ok(responder) = r.accept().await else {
            return;
        };
        let mut published: HashSet<FullTrackName> = HashSet::new();
        let mut publications = tokio::task::JoinSet::new();
        let mut rx = self.shared.changed.subscribe();
        loop {
            for track in self.tracks_under(&responder.prefix()) {
                if published.contains(track.name()) || track.is_ended() {
                    continue;
                }
                let defaults = responder.defaults().clone();
                let options = PublishOptions {
                    forward: defaults.forward,
                    largest: track.largest(),
                    track_properties: track.properties(),
                    ..Default::default()
                };
                let Some(session) = session.upgrade() else {
                    return;
                };
                let serve = self.shared.serve.clone();
                published.insert(track.name().clone());
                publications.spawn(async move {
                    let Ok(p) = session.publish(track.name().clone(), options).await else {
                        return;
                    };
                    drop(session);
                    if p.accepted().await.is_ok() {
                        let _ = serve_subscription(track, p.into_writer(), serve).await;
                    }
                });
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { break },
                _ = responder.ended() => break,
                // Reap finished publications.
                Some(_) = publications.join_next(), if !publications.is_empty() => {}
            }
        }
    }
}
