//! A relay track's life: counted downstream subscriptions and live upstreams, and what
//! happens when the last of either goes (linger, wait for a new publisher, end, restart), and
//! the finished tracks kept for FETCH, TRACK_STATUS and SUBSCRIBE.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use moq_client::model::TrackCache;
use moq_core::codes::PublishDoneCode;
use moq_core::{FullTrackName, Properties};
use tokio::sync::mpsc;

use super::state::Inner;
use super::track::{RelayTrack, Timer};
use crate::metrics::Metrics;

/// How an upstream subscription ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UpstreamEnd {
    /// With PUBLISH_DONE and this status.
    Done(PublishDoneCode),
    /// Its publisher restarted its group numbering (see `upstream::ingest`): a new incarnation of the
    /// track replaces the one held.
    Restarted,
    /// Its publisher closed the session with NO_ERROR.
    Closed,
    /// Anything else: the session failed, the subscription stream ended without PUBLISH_DONE,
    /// or the task was dropped.
    Lost,
}

/// Counts a downstream subscription; the last one leaving lets the upstreams go after the
/// linger time.
pub(super) struct Downstream {
    inner: Arc<Inner>,
    track: Arc<RelayTrack>,
}

impl Downstream {
    pub(super) fn new(inner: &Arc<Inner>, track: &Arc<RelayTrack>) -> Self {
        track.downstreams.fetch_add(1, Ordering::Relaxed);
        inner.metrics.subscriptions(1.0);
        Downstream {
            inner: inner.clone(),
            track: track.clone(),
        }
    }
}

impl Drop for Downstream {
    fn drop(&mut self) {
        self.inner.metrics.subscriptions(-1.0);
        if self.track.downstreams.fetch_sub(1, Ordering::Relaxed) != 1 || self.track.published {
            return;
        }
        // Not sent once the relay shut down: its tracks go with it.
        let _ = self.inner.timers.send(Timer::Linger(self.track.clone()));
    }
}

/// One upstream delivering into a track: a PUBLISH, or a SUBSCRIBE the relay sent. Counted while
/// it lives; dropped at the end of its ingest or with its aborted task (its session ended).
///
/// When the last one goes, the track ends at once if its publisher ended it (PUBLISH_DONE
/// TRACK_ENDED, or the track was found malformed); a PUBLISHed track also ends when its
/// publisher ends it while others still deliver. Otherwise (the session died, or the
/// subscription ended for another reason: GOING_AWAY, a reset) the track waits
/// `RelayConfig::publisher_wait` for a new publisher (a new session announcing the namespace is
/// subscribed to at once, `subscribe_active`; a new PUBLISH of the name joins the track), and
/// ends if none came. An ended track leaves the relay's tracks, so the next PUBLISH or
/// SUBSCRIBE of the name starts a new one.
pub(super) struct LiveUpstream {
    metrics: Arc<Metrics>,
    inner: Weak<Inner>,
    track: Arc<RelayTrack>,
    /// How it ended, once it did.
    pub(super) status: UpstreamEnd,
    /// The most the track waits for a new publisher after this one, if less than
    /// `RelayConfig::publisher_wait` may be (an upstream over an origin link, issue 36).
    pub(super) wait: Option<Duration>,
}

impl LiveUpstream {
    pub(super) fn new(
        metrics: &Arc<Metrics>,
        inner: &Weak<Inner>,
        track: &Arc<RelayTrack>,
    ) -> Self {
        track.live_upstreams.fetch_add(1, Ordering::Relaxed);
        track.generation.fetch_add(1, Ordering::Relaxed);
        metrics.upstreams(1.0);
        LiveUpstream {
            metrics: metrics.clone(),
            inner: inner.clone(),
            track: track.clone(),
            status: UpstreamEnd::Lost,
            wait: None,
        }
    }
}

impl Drop for LiveUpstream {
    fn drop(&mut self) {
        let t = &self.track;
        let last = t.live_upstreams.fetch_sub(1, Ordering::Relaxed) == 1;
        if self.status == UpstreamEnd::Restarted {
            restart_track(&self.inner, t);
        }
        if t.cache.is_superseded() {
            self.metrics.upstreams(-1.0);
            return;
        }
        // A publisher that closes its session ends its tracks, unless it is leaving because
        // this relay sent it GOAWAY: then it is moving (and reconnects elsewhere).
        let moving = || {
            self.inner
                .upgrade()
                .is_some_and(|i| i.goaway.lock().is_some())
        };
        let ended = match self.status {
            UpstreamEnd::Done(code) => code == PublishDoneCode::TRACK_ENDED,
            UpstreamEnd::Restarted => true,
            UpstreamEnd::Closed => !moving(),
            UpstreamEnd::Lost => false,
        };
        // Another upstream still being asked (a publisher switching over) may yet deliver.
        let pending = t.pending_upstreams.load(Ordering::Relaxed) > 0;
        let finished = (ended && !pending) || t.cache.malformed().is_some();
        if (last && finished) || (ended && t.published) {
            end_track(&self.inner, t);
        } else if last {
            await_publisher(self.inner.clone(), t.clone(), self.wait);
        }
        // Last, so that whoever sees the count drop sees the track gone.
        self.metrics.upstreams(-1.0);
    }
}

/// Ends `t`: its subscriptions get PUBLISH_DONE TRACK_ENDED once they delivered what it holds,
/// and it leaves the relay's tracks.
fn end_track(inner: &Weak<Inner>, t: &Arc<RelayTrack>) {
    t.cache.end();
    if let Some(inner) = inner.upgrade() {
        inner.forget_track(t);
        keep_finished(&inner, t);
    }
}

/// A new incarnation of `t` replaces it (its publisher restarted its group numbering): it
/// leaves the relay's tracks first, so that the subscribers renewing find the new one, then
/// its other upstreams are dropped and its subscriptions end with PUBLISH_DONE GOING_AWAY
/// (`TrackCache::supersede`).
fn restart_track(inner: &Weak<Inner>, t: &Arc<RelayTrack>) {
    if let Some(inner) = inner.upgrade() {
        inner.forget_track(t);
    }
    t.cache.supersede();
    let upstreams: Vec<_> = t.upstreams.lock().drain().collect();
    for (_, h) in upstreams {
        h.abort();
    }
}

/// How long a finished track is kept when the cache has no age limit.
const FINISHED_KEEP: Duration = Duration::from_secs(60);

/// At most this many finished tracks are kept at once (each bounded by the cache limits); more
/// are not kept.
const MAX_FINISHED: usize = 4096;

/// Keeps an ended track's cache for FETCH, TRACK_STATUS and SUBSCRIBE (`finished_track`)
/// for as long as the cache's age limit lets it hold objects; a malformed track or one that
/// holds nothing is not kept. Expired ones are forgotten here and in `finished_track`, with
/// no task of their own.
fn keep_finished(inner: &Arc<Inner>, t: &RelayTrack) {
    if t.cache.malformed().is_some() || t.cache.is_superseded() || t.cache.stored().is_none() {
        return;
    }
    let now = tokio::time::Instant::now();
    let until = now + inner.config.cache.max_age.unwrap_or(FINISHED_KEEP);
    let mut finished = inner.finished.lock();
    finished.retain(|_, (_, until)| *until > now);
    if finished.len() < MAX_FINISHED || finished.contains_key(&t.name) {
        finished.insert(t.name.clone(), (t.cache.clone(), until));
    }
}

impl Inner {
    /// Takes `t` out of the relay's tracks (if it is still the track of its name there).
    fn forget_track(&self, t: &Arc<RelayTrack>) {
        let mut tracks = self.tracks.lock();
        if tracks.get(&t.name).is_some_and(|x| Arc::ptr_eq(x, t)) {
            tracks.remove(&t.name);
        }
    }

    /// A new relay track for `name` with nothing upstream yet; `published` if a PUBLISH
    /// brought it.
    pub(super) fn new_track(
        &self,
        name: &FullTrackName,
        properties: Properties,
        published: bool,
    ) -> Arc<RelayTrack> {
        let received = self.metrics.received(&name.namespace);
        RelayTrack::new(name, properties, published, self.config.cache, received)
    }

    /// The cache of `name` if its publisher ended it (and it is not being published again) and
    /// the cache still holds objects.
    pub(super) fn finished_track(&self, name: &FullTrackName) -> Option<TrackCache> {
        let live =
            self.tracks.lock().get(name).is_some_and(|t| {
                !t.cache.is_ended() && t.live_upstreams.load(Ordering::Relaxed) > 0
            });
        if live {
            return None;
        }
        let mut finished = self.finished.lock();
        let (cache, until) = finished.get(name).cloned()?;
        if until <= tokio::time::Instant::now() {
            finished.remove(name);
            return None;
        }
        cache.largest().is_some().then_some(cache)
    }
}

/// The last publisher of `t` went away without ending it: ends it unless a new upstream goes
/// live within `RelayConfig::publisher_wait` (at most `bound`, if given).
fn await_publisher(inner: Weak<Inner>, t: Arc<RelayTrack>, bound: Option<Duration>) {
    let Some(i) = inner.upgrade() else {
        return t.cache.end();
    };
    let generation = t.generation.load(Ordering::Relaxed);
    let timer = Timer::AwaitPublisher(t, generation, bound);
    if let Err(mpsc::error::SendError(Timer::AwaitPublisher(t, ..))) = i.timers.send(timer) {
        // The relay shut down: no publisher comes back.
        end_track(&inner, &t);
    }
}

/// Runs every timer `Drop` sets (`Inner::timers`), in one task of the relay, until the relay
/// is gone.
pub(super) async fn run_timers(inner: Weak<Inner>, mut set: mpsc::UnboundedReceiver<Timer>) {
    let mut due = FuturesUnordered::new();
    loop {
        tokio::select! {
            timer = set.recv() => match timer {
                Some(timer) => due.push(fire(inner.clone(), timer)),
                None => return,
            },
            Some(()) = due.next(), if !due.is_empty() => {}
        }
    }
}

/// Waits out `timer`, then does what it says.
async fn fire(inner: Weak<Inner>, timer: Timer) {
    let Some(wait) = inner.upgrade().map(|i| match &timer {
        Timer::Linger(_) => i.config.upstream_linger,
        Timer::AwaitPublisher(_, _, bound) => {
            let wait = i.config.publisher_wait;
            bound.map_or(wait, |b| b.min(wait))
        }
    }) else {
        return;
    };
    tokio::time::sleep(wait).await;
    match timer {
        Timer::Linger(track) => {
            let Some(inner) = inner.upgrade() else { return };
            if track.downstreams.load(Ordering::Relaxed) > 0 {
                return;
            }
            inner.forget_track(&track);
            for (_, h) in track.upstreams.lock().drain() {
                h.abort();
            }
            tracing::debug!(track = %track.name, "upstream released");
        }
        Timer::AwaitPublisher(t, generation, _) => {
            if t.generation.load(Ordering::Relaxed) == generation
                && t.live_upstreams.load(Ordering::Relaxed) == 0
            {
                tracing::info!(track = %t.name, ?wait, "no publisher came back; track ended");
                end_track(&inner, &t);
            }
        }
    }
}
