//! The track directory: tracks indexed by namespace, and the one piece of code that answers a
//! peer's SUBSCRIBE, FETCH, TRACK_STATUS and SUBSCRIBE_TRACKS from them.
//!
//! A publishing application's [`crate::Publisher`] is a directory of its own tracks. moq-relay is
//! a directory too, plus routing and upstream subscriptions, which it plugs in as an
//! [`Upstream`]: the directory asks it for what it does not hold.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use moq_core::codes::RequestErrorCode;
use moq_core::message::{Parameters, RequestError};
use moq_core::{FullTrackName, Location, TrackNamespace};
use moq_transport::WeakSession;
use moq_transport::namespace::PrefixTrie;
use moq_transport::track::{
    Fill, Incoming, IncomingFetch, IncomingSubscribe, IncomingSubscribeTracks, IncomingTrackStatus,
    PublishOptions, SubscribeResponse, SubscriptionParams, SubscriptionWriter, TrackStatusInfo,
};
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};

use crate::cache::TrackCache;
use crate::serve::{FillWith, ServeOptions, serve_fetch, serve_fill, serve_subscription};

/// Something held while a subscription is served (see [`Upstream::subscribe`]).
pub type Hold = Box<dyn std::any::Any + Send>;

/// What a SUBSCRIBE is served from (see [`Upstream::subscribe`]). Dropping it releases
/// `hold`.
#[derive(Debug)]
pub struct Source {
    /// The track.
    pub track: TrackCache,
    /// Held while the subscription is served.
    pub hold: Hold,
    /// The Largest Location SUBSCRIBE_OK reports: the track's largest when the SUBSCRIBE came,
    /// or, for one that waited for its publisher, when the publisher answered (draft-19
    /// §10.2.16: for a relay, at least the upstream's LARGEST_OBJECT).
    pub largest: Option<Location>,
    /// The last object the track held at that moment ([`TrackCache::stored`]), which places
    /// the subscription's start: every object stored after it is the subscriber's, also one at
    /// or before `largest` that was still on its way from upstream (draft-19 §10.7, "newly
    /// received"), so that nothing received since is missed.
    pub held: Option<Location>,
}

impl Source {
    /// Serves from `track` as it stands now, holding nothing.
    pub fn now(track: TrackCache) -> Self {
        let (largest, held) = (track.largest(), track.stored());
        Source {
            track,
            hold: Box::new(()),
            largest,
            held,
        }
    }
}

/// Where a directory finds what it does not hold: a relay's routes and upstream subscriptions.
/// A publishing application has none.
#[async_trait]
pub trait Upstream: Send + Sync + 'static {
    /// A SUBSCRIBE from session `peer`: what to serve it from (subscribed upstream if needed,
    /// its first answer awaited), or the refusal.
    async fn subscribe(
        &self,
        peer: u64,
        name: &FullTrackName,
        params: &Parameters,
    ) -> Result<Source, RequestError>;

    /// A FETCH from session `peer`; `held` is the directory's track of that name, if any.
    /// Answer it from the cache with [`serve_fetch`] or forward it.
    async fn fetch(&self, peer: u64, fetch: IncomingFetch, held: Option<TrackCache>);

    /// A TRACK_STATUS from session `peer`; `held` is the directory's track of that name, if
    /// any.
    async fn track_status(
        &self,
        peer: u64,
        name: &FullTrackName,
        held: Option<TrackCache>,
    ) -> Result<TrackStatusInfo, RequestError>;

    /// A fill fetch stream a subscriber of `track` asked for with FILL_PARAMETERS (draft-21
    /// §3.4, from draft-20). The default serves it from the cache.
    async fn fill(&self, track: TrackCache, writer: SubscriptionWriter, fill: Fill) {
        let _ = serve_fill(track, writer, fill).await;
    }

    /// What to hold while `track` is served to a SUBSCRIBE_TRACKS subscriber.
    fn forwarding(&self, _track: &TrackCache) -> Hold {
        Box::new(())
    }
}

/// How a [`Directory`] answers.
#[derive(Clone, Debug)]
pub struct DirectoryOptions {
    /// How subscriptions are served.
    pub serve: ServeOptions,
    /// How long a SUBSCRIBE for a track that does not exist yet waits for it, when its
    /// namespace is announced here (so announcing and creating tracks may happen in any
    /// order). After it, DOES_NOT_EXIST.
    pub rendezvous: Duration,
    /// The longest RENDEZVOUS_TIMEOUT a SUBSCRIBE may ask for (draft-19 §10.2.4).
    pub max_rendezvous: Duration,
}

impl Default for DirectoryOptions {
    fn default() -> Self {
        DirectoryOptions {
            serve: ServeOptions::default(),
            rendezvous: Duration::from_secs(2),
            max_rendezvous: Duration::from_secs(60),
        }
    }
}

/// One held track.
#[derive(Debug)]
struct Entry {
    key: u64,
    track: TrackCache,
}

#[derive(Debug, Default)]
struct State {
    tracks: HashMap<FullTrackName, Entry>,
    /// Offered tracks by namespace, for SUBSCRIBE_TRACKS snapshots.
    offered: PrefixTrie<(TrackCache, Option<u64>)>,
    /// SUBSCRIBE_TRACKS watchers, at their prefix: each new offered track is sent to those
    /// whose prefix covers it, so nothing is rescanned.
    watchers: PrefixTrie<mpsc::Sender<(TrackCache, Option<u64>)>>,
    /// SUBSCRIBEs waiting for a track to appear, by name.
    /// Each gets the track as it stood when it was added.
    waiters: HashMap<FullTrackName, Vec<oneshot::Sender<Source>>>,
    /// Namespaces announced here (their tracks may be created after a SUBSCRIBE arrives).
    announced: PrefixTrie<()>,
    /// Sessions with a SUBSCRIBE for a track (held or served), by track and session: they
    /// get no SUBSCRIBE_TRACKS PUBLISH of it (draft-19 §9.5).
    subscribing: HashMap<FullTrackName, HashMap<u64, usize>>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    keys: AtomicU64,
    options: DirectoryOptions,
    upstream: Option<Arc<dyn Upstream>>,
}

impl std::fmt::Debug for dyn Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Upstream")
    }
}

/// Tracks indexed by namespace, answering a peer's requests for them. Cheap to clone; clones
/// share the tracks, and dropping one does nothing else (the tracks go with the last).
#[derive(Clone, Debug)]
pub struct Directory {
    shared: Arc<Shared>,
}

impl Default for Directory {
    fn default() -> Self {
        Self::new(DirectoryOptions::default())
    }
}

/// The session a request came from: a key of its own (for the rules about where a track came
/// from) and the session, held weakly (dropping it does nothing to the session).
#[derive(Clone, Debug)]
pub struct Peer {
    /// A key unique among the sessions a directory answers.
    pub key: u64,
    /// The session.
    pub session: WeakSession,
}

/// Keeps a track in a [`Directory`]; dropping it removes the track.
#[must_use = "dropping a TrackRegistration removes the track"]
#[derive(Debug)]
pub struct TrackRegistration {
    dir: Directory,
    name: FullTrackName,
    key: u64,
}

impl Drop for TrackRegistration {
    fn drop(&mut self) {
        let mut state = self.dir.shared.state.lock();
        if state
            .tracks
            .get(&self.name)
            .is_some_and(|e| e.key == self.key)
        {
            state.tracks.remove(&self.name);
            state.offered.remove(&self.name.namespace, self.key);
        }
    }
}

/// Keeps a namespace announced in a [`Directory`]; dropping it withdraws it.
#[must_use = "dropping an AnnouncedNamespace withdraws the namespace"]
#[derive(Debug)]
pub struct AnnouncedNamespace {
    dir: Directory,
    namespace: TrackNamespace,
    key: u64,
}

impl Drop for AnnouncedNamespace {
    fn drop(&mut self) {
        self.dir
            .shared
            .state
            .lock()
            .announced
            .remove(&self.namespace, self.key);
    }
}

/// Marks a session as subscribing to a track while it lives.
struct Subscribing {
    dir: Directory,
    name: FullTrackName,
    peer: u64,
}

impl Drop for Subscribing {
    fn drop(&mut self) {
        let mut state = self.dir.shared.state.lock();
        if let Some(peers) = state.subscribing.get_mut(&self.name) {
            if let Some(n) = peers.get_mut(&self.peer) {
                *n -= 1;
                if *n == 0 {
                    peers.remove(&self.peer);
                }
            }
            if peers.is_empty() {
                state.subscribing.remove(&self.name);
            }
        }
    }
}

/// An accepted subscription, ready to be served (see [`Directory::on_subscribe`]).
struct Serving {
    track: TrackCache,
    writer: SubscriptionWriter,
    serve: ServeOptions,
    fill_with: Option<FillWith>,
    /// Held while it is served.
    _subscribing: Subscribing,
    _hold: Hold,
}

impl Directory {
    /// An empty directory of its own tracks.
    pub fn new(options: DirectoryOptions) -> Self {
        Self::build(options, None)
    }

    /// An empty directory that asks `upstream` for what it does not hold.
    pub fn with_upstream(options: DirectoryOptions, upstream: Arc<dyn Upstream>) -> Self {
        Self::build(options, Some(upstream))
    }

    fn build(options: DirectoryOptions, upstream: Option<Arc<dyn Upstream>>) -> Self {
        Directory {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                keys: AtomicU64::new(0),
                options,
                upstream,
            }),
        }
    }

    /// How it answers.
    pub fn options(&self) -> &DirectoryOptions {
        &self.shared.options
    }

    fn key(&self) -> u64 {
        self.shared.keys.fetch_add(1, Ordering::Relaxed)
    }

    /// Adds `track` until the registration drops. `origin` is the session it came from, if
    /// any (it is never offered back there); `offered` makes it visible to SUBSCRIBE_TRACKS.
    /// Fails with the track already held under that name.
    pub fn insert(
        &self,
        track: TrackCache,
        origin: Option<u64>,
        offered: bool,
    ) -> Result<TrackRegistration, TrackCache> {
        let name = track.name().clone();
        let key = self.key();
        let mut state = self.shared.state.lock();
        if let Some(e) = state.tracks.get(&name) {
            return Err(e.track.clone());
        }
        state.tracks.insert(
            name.clone(),
            Entry {
                key,
                track: track.clone(),
            },
        );
        if offered {
            state
                .offered
                .insert(&name.namespace, key, (track.clone(), origin));
            // Each watcher whose prefix covers the track hears of it; one that fell behind
            // is dropped (its SUBSCRIBE_TRACKS takes a fresh snapshot).
            let mut lagged = Vec::new();
            for (depth, id, tx) in state.watchers.entries_on_path(&name.namespace) {
                if tx.try_send((track.clone(), origin)).is_err() {
                    lagged.push((depth, id));
                }
            }
            for (depth, id) in lagged {
                state.watchers.remove(&name.namespace.prefix(depth), id);
            }
        }
        for waiter in state.waiters.remove(&name).into_iter().flatten() {
            let _ = waiter.send(Source::now(track.clone()));
        }
        drop(state);
        Ok(TrackRegistration {
            dir: self.clone(),
            name,
            key,
        })
    }

    /// The track named `name`, if held.
    pub fn get(&self, name: &FullTrackName) -> Option<TrackCache> {
        self.shared
            .state
            .lock()
            .tracks
            .get(name)
            .map(|e| e.track.clone())
    }

    /// The track named `name`, waiting up to `timeout` for it to be added.
    ///
    /// Cancel safe.
    pub async fn wait_for(&self, name: &FullTrackName, timeout: Duration) -> Option<TrackCache> {
        self.wait(name, timeout).await.map(|s| s.track)
    }

    /// [`Self::wait_for`], with the largest location the subscription starts after: the
    /// track's when it was added, if it was waited for.
    async fn wait(&self, name: &FullTrackName, timeout: Duration) -> Option<Source> {
        let rx = {
            let mut state = self.shared.state.lock();
            if let Some(e) = state.tracks.get(name) {
                let track = e.track.clone();
                drop(state);
                return Some(Source::now(track));
            }
            let (tx, rx) = oneshot::channel();
            let waiting = state.waiters.entry(name.clone()).or_default();
            waiting.retain(|w| !w.is_closed());
            waiting.push(tx);
            rx
        };
        tokio::time::timeout(timeout, rx).await.ok()?.ok()
    }

    /// The offered tracks under `prefix`.
    pub fn offered_under(&self, prefix: &TrackNamespace) -> Vec<TrackCache> {
        let state = self.shared.state.lock();
        state
            .offered
            .under(prefix)
            .into_iter()
            .map(|(_, (t, _))| t.clone())
            .collect()
    }

    /// Announces `namespace` here: a SUBSCRIBE for one of its tracks that does not exist yet
    /// waits [`DirectoryOptions::rendezvous`] for it.
    pub fn announce(&self, namespace: TrackNamespace) -> AnnouncedNamespace {
        let key = self.key();
        self.shared
            .state
            .lock()
            .announced
            .insert(&namespace, key, ());
        AnnouncedNamespace {
            dir: self.clone(),
            namespace,
            key,
        }
    }

    fn subscribing(&self, name: &FullTrackName, peer: u64) -> Subscribing {
        *self
            .shared
            .state
            .lock()
            .subscribing
            .entry(name.clone())
            .or_default()
            .entry(peer)
            .or_insert(0) += 1;
        Subscribing {
            dir: self.clone(),
            name: name.clone(),
            peer,
        }
    }

    /// Answers the peer's SUBSCRIBE, FETCH, TRACK_STATUS or SUBSCRIBE_TRACKS, as a task of its
    /// session. Any other request (PUBLISH) is handed back.
    pub fn answer(&self, request: Incoming, peer: &Peer) -> Option<Incoming> {
        let Some(session) = peer.session.upgrade() else {
            // The session is gone; dropping the request refuses it.
            return None;
        };
        // Each answer is the task itself, not wrapped in another future: its memory is per
        // request. Those that mostly wait (a subscription, a SUBSCRIBE_TRACKS, a status) are
        // entries of the session's request table rather than tasks of their own.
        let dir = self.clone();
        match request {
            Incoming::Subscribe(r) => session.spawn_light(dir.on_subscribe(r, peer.clone())),
            Incoming::Fetch(f) => session.spawn(dir.on_fetch(f, peer.key)),
            Incoming::TrackStatus(t) => session.spawn_light(dir.on_track_status(t, peer.key)),
            Incoming::SubscribeTracks(r) => {
                session.spawn_light(dir.on_subscribe_tracks(r, peer.clone()))
            }
            other => return Some(other),
        }
        None
    }

    /// Answers a SUBSCRIBE, then serves the subscription. The answering (finding the track,
    /// SUBSCRIBE_OK) is boxed with the request and freed once done: an `async fn` keeps its
    /// arguments for its whole life, and inline, the answering's largest step (waiting for the
    /// track) sized the state the subscription is served in.
    fn on_subscribe(
        self,
        req: IncomingSubscribe,
        peer: Peer,
    ) -> impl Future<Output = ()> + Send + 'static {
        let accept = Box::pin(async move { self.accept_subscribe(req, peer).await });
        async move {
            let Some(s) = accept.await else {
                return;
            };
            let Serving {
                track,
                writer,
                serve,
                fill_with,
                _subscribing,
                _hold,
            } = s;
            let _ = serve_subscription(track, writer, serve, fill_with).await;
        }
    }

    /// Finds what a SUBSCRIBE asks for and accepts it; `None` if it was refused or went away.
    async fn accept_subscribe(&self, req: IncomingSubscribe, peer: Peer) -> Option<Serving> {
        let name = req.track().clone();
        // draft-19 §9.5: registered before waiting, so a PUBLISH that answers a held SUBSCRIBE
        // is not also forwarded to this session through its SUBSCRIBE_TRACKS.
        let subscribing = self.subscribing(&name, peer.key);
        let found = match &self.shared.upstream {
            Some(up) => up.subscribe(peer.key, &name, req.params()).await,
            None => self.resolve(&name, req.params()).await,
        };
        let Source {
            track,
            hold,
            largest,
            held,
        } = match found {
            Ok(found) => found,
            Err(e) => {
                tracing::debug!(track = %name, code = ?e.code, "SUBSCRIBE refused");
                req.reject(e);
                return None;
            }
        };
        let response = SubscribeResponse {
            track_alias: None,
            largest,
            expires: None,
            track_properties: track.properties(),
        };
        let writer = req.accept(response).await.ok()?;
        // Before anything is written: objects the relay receives from now on are the
        // subscriber's, whatever LARGEST_OBJECT said (draft-19 §10.7).
        writer.carry_after(held);
        // The fills (the SUBSCRIBE's and its REQUEST_UPDATEs') the upstream may have to
        // complete.
        let fill_with = self.shared.upstream.clone().map(|up| -> FillWith {
            Arc::new(move |track, writer, fill| {
                let up = up.clone();
                async move { up.fill(track, writer, fill).await }.boxed()
            })
        });
        let mut serve = self.shared.options.serve.clone();
        serve.fills |= fill_with.is_some();
        Some(Serving {
            track,
            writer,
            serve,
            fill_with,
            _subscribing: subscribing,
            _hold: hold,
        })
    }

    /// The track a SUBSCRIBE asks for: held now, or added within its RENDEZVOUS_TIMEOUT or (if
    /// its namespace is announced here) [`DirectoryOptions::rendezvous`].
    async fn resolve(
        &self,
        name: &FullTrackName,
        params: &Parameters,
    ) -> Result<Source, RequestError> {
        let options = &self.shared.options;
        let asked = params
            .rendezvous_timeout
            .filter(|t| *t > 0)
            .map(|t| Duration::from_millis(t).min(options.max_rendezvous));
        let announced = self
            .shared
            .state
            .lock()
            .announced
            .prefixes_of(&name.namespace)
            .next()
            .is_some();
        let ours = announced.then_some(options.rendezvous);
        let wait = asked.into_iter().chain(ours).max().unwrap_or_default();
        if let Some(s) = self.wait(name, wait).await {
            return Ok(s);
        }
        Err(match asked {
            // draft-19 §10.2.4: no publisher within RENDEZVOUS_TIMEOUT is TIMEOUT.
            Some(_) => RequestError::new(RequestErrorCode::TIMEOUT, "no publisher appeared"),
            None => RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "no such track"),
        })
    }

    async fn on_fetch(self, f: IncomingFetch, peer: u64) {
        let held = self.get(f.track());
        match (&self.shared.upstream, held) {
            (Some(up), held) => up.fetch(peer, f, held).await,
            (None, Some(t)) => {
                let _ = serve_fetch(&t, f).await;
            }
            (None, None) => f.reject(RequestError::new(
                RequestErrorCode::DOES_NOT_EXIST,
                "no such track",
            )),
        }
    }

    async fn on_track_status(self, t: IncomingTrackStatus, peer: u64) {
        let held = self.get(t.track());
        let answer = match &self.shared.upstream {
            Some(up) => up.track_status(peer, t.track(), held).await,
            None => held.map(|h| status_of(&h)).ok_or_else(|| {
                RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "no such track")
            }),
        };
        match answer {
            Ok(info) => t.accept(info),
            Err(e) => t.reject(e),
        }
    }

    /// SUBSCRIBE_TRACKS: PUBLISH each offered track under the prefix, now and as they are
    /// added, except those the session published itself (draft-19 §6.1), those it SUBSCRIBEs
    /// to (§9.5) and those whose properties fail its TRACK_PROPERTY_FILTERs (§5.1.3, §6.3).
    /// Ends (and so do its publications) when the request ends.
    async fn on_subscribe_tracks(self, r: IncomingSubscribeTracks, peer: Peer) {
        let Ok(responder) = r.accept().await else {
            return;
        };
        let queue = self.shared.options.serve.max_inflight.max(64);
        let mut published: HashMap<FullTrackName, TrackCache> = HashMap::new();
        // The publications run in this future: dropping it (the request ended) drops them.
        let mut publications = Publications::new();
        let mut prefix = responder.prefix();
        'watch: loop {
            let (now, mut added) = self.watch_offered(&prefix, queue);
            for (track, origin) in now {
                self.forward(
                    &mut published,
                    &mut publications,
                    &responder,
                    &peer,
                    track,
                    origin,
                );
            }
            loop {
                tokio::select! {
                    a = added.rx.recv() => match a {
                        Some((track, origin)) => {
                            self.forward(&mut published, &mut publications, &responder, &peer, track, origin);
                        }
                        // Fell behind: take a fresh snapshot.
                        None => continue 'watch,
                    },
                    p = responder.prefix_changed(&prefix) => {
                        prefix = p;
                        continue 'watch;
                    }
                    _ = responder.ended() => return,
                    // Reap finished publications (a track that ended may be published again).
                    Some(()) = publications.next(), if !publications.is_empty() => {
                        published.retain(|_, t| !t.is_ended());
                    }
                }
            }
        }
    }

    /// The offered tracks under `prefix` now, and each one added later (atomically: none
    /// missed or repeated); the watch ends if more than `capacity` queue up unread.
    fn watch_offered(
        &self,
        prefix: &TrackNamespace,
        capacity: usize,
    ) -> (Vec<(TrackCache, Option<u64>)>, Watch) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let key = self.key();
        let mut state = self.shared.state.lock();
        let now = state
            .offered
            .under(prefix)
            .into_iter()
            .map(|(_, v)| v.clone())
            .collect();
        state.watchers.insert(prefix, key, tx);
        drop(state);
        (
            now,
            Watch {
                dir: self.clone(),
                prefix: prefix.clone(),
                key,
                rx,
            },
        )
    }

    /// PUBLISHes one track to a SUBSCRIBE_TRACKS subscriber, unless a rule says not to.
    fn forward(
        &self,
        published: &mut HashMap<FullTrackName, TrackCache>,
        publications: &mut Publications,
        responder: &moq_transport::track::TracksResponder,
        peer: &Peer,
        track: TrackCache,
        origin: Option<u64>,
    ) {
        let name = track.name().clone();
        let subscribes = self
            .shared
            .state
            .lock()
            .subscribing
            .get(&name)
            .is_some_and(|p| p.contains_key(&peer.key));
        let defaults = responder.defaults();
        let filters = &defaults.range_filters;
        if origin == Some(peer.key)
            || subscribes
            || track.is_ended()
            || !responder.matches(&name)
            || published.get(&name).is_some_and(|t| t.same(&track))
            || !SubscriptionParams::track_passes(filters, &track.properties())
        {
            return;
        }
        let Some(session) = peer.session.upgrade() else {
            return;
        };
        published.insert(name, track.clone());
        // draft-19 §10.19.1: the request's parameters are the subscription's defaults.
        let options = PublishOptions {
            subscription: defaults.clone(),
            largest: track.largest(),
            track_properties: track.properties(),
            ..Default::default()
        };
        let hold = self
            .shared
            .upstream
            .as_ref()
            .map(|up| up.forwarding(&track));
        let serve = self.shared.options.serve.clone();
        let responder = responder.clone();
        publications.push(Box::pin(async move {
            let _hold = hold;
            let Ok(p) = session.publish(track.name().clone(), options).await else {
                // draft-19 §6.1, §10.20: a PUBLISH that cannot be created is reported with
                // PUBLISH_SKIPPED (and the track is not PUBLISHed to this request later).
                let _ = responder.skipped(track.name()).await;
                return;
            };
            drop(session);
            if p.accepted().await.is_ok() {
                let _ = serve_subscription(track, p.into_writer(), serve, None).await;
            }
        }));
    }
}

/// A SUBSCRIBE_TRACKS request's publications, one future each.
type Publications = FuturesUnordered<futures::future::BoxFuture<'static, ()>>;

/// A SUBSCRIBE_TRACKS watch of offered tracks; dropping it stops the watch.
struct Watch {
    dir: Directory,
    prefix: TrackNamespace,
    key: u64,
    rx: mpsc::Receiver<(TrackCache, Option<u64>)>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.dir
            .shared
            .state
            .lock()
            .watchers
            .remove(&self.prefix, self.key);
    }
}

/// What TRACK_STATUS_OK says of a held track.
pub(crate) fn status_of(track: &TrackCache) -> TrackStatusInfo {
    TrackStatusInfo {
        largest: track.largest(),
        expires: None,
        track_properties: track.properties(),
    }
}
