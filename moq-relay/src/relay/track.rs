//! One track the relay carries ([`RelayTrack`]) and the small guards that count who feeds it.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use moq_client::model::{CacheLimits, TrackCache};
use moq_core::message::RequestError;
use moq_core::{FullTrackName, Location, Properties};
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics::Received;

/// One track the relay carries: its cache and the upstream subscriptions feeding it.
#[derive(Debug)]
pub(super) struct RelayTrack {
    pub(super) name: FullTrackName,
    pub(super) cache: TrackCache,
    /// Upstream subscriptions by the publisher's session ID.
    pub(super) upstreams: Mutex<HashMap<u64, JoinHandle<()>>>,
    /// Upstream subscriptions established and still delivering.
    pub(super) live_upstreams: AtomicUsize,
    /// Upstream attempts not answered yet.
    pub(super) pending_upstreams: AtomicUsize,
    /// The first successful upstream answer (with where the track stood then), or the last
    /// error once every attempt failed.
    pub(super) answer: watch::Sender<Option<Result<Standing, RequestError>>>,
    /// Downstream subscriptions served from this track.
    pub(super) downstreams: AtomicUsize,
    /// Set when the track came from a PUBLISH rather than from routing.
    pub(super) published: bool,
    /// The latest rendezvous deadline of a downstream SUBSCRIBE still waiting for the track:
    /// upstream SUBSCRIBEs carry what is left of it, so a publisher that announced the
    /// namespace but has not created the track yet holds the request too.
    pub(super) rendezvous_until: Mutex<Option<tokio::time::Instant>>,
    /// A NEW_GROUP_REQUEST from a downstream SUBSCRIBE that arrived with no upstream
    /// subscription: upstream SUBSCRIBEs carry it (draft-19 §10.2.18).
    pub(super) new_group_request: Mutex<Option<u64>>,
    /// Counts the objects received for this track.
    pub(super) received: crate::metrics::Received,
    /// Counts the upstreams that went live, so a wait for a new publisher knows whether one
    /// came while it waited.
    pub(super) generation: AtomicU64,
    /// The sessions whose upstream subscription answered and still delivers: a FETCH goes to
    /// one of them first (`fetch_route`), not to a publisher that may have died unnoticed.
    pub(super) delivering: Mutex<HashSet<u64>>,
}

impl RelayTrack {
    /// A track with nothing upstream yet; `published` if a PUBLISH brought it.
    pub(super) fn new(
        name: &FullTrackName,
        properties: Properties,
        published: bool,
        limits: CacheLimits,
        received: Received,
    ) -> Arc<Self> {
        Arc::new(RelayTrack {
            name: name.clone(),
            cache: TrackCache::new(name.clone(), properties, limits),
            upstreams: Mutex::new(HashMap::new()),
            live_upstreams: AtomicUsize::new(0),
            pending_upstreams: AtomicUsize::new(0),
            answer: watch::channel(None).0,
            downstreams: AtomicUsize::new(0),
            published,
            rendezvous_until: Mutex::new(None),
            new_group_request: Mutex::new(None),
            received,
            generation: AtomicU64::new(0),
            delivering: Mutex::new(HashSet::new()),
        })
    }

    /// The group below which a new upstream's objects show that its publisher restarted its
    /// group numbering: the group of the last object stored, if the track held objects. Also
    /// while another upstream still counts as live: a publisher killed outright is noticed
    /// only at its session's idle timeout, and its restarted process is a new upstream
    /// session beside it (a new incarnation of the track, not one publisher contradicting
    /// itself).
    pub(super) fn restart_floor(&self) -> Option<u64> {
        self.cache.stored().map(|l| l.group)
    }
}

/// Counts an upstream being asked (an upstream SUBSCRIBE, or a PUBLISH being accepted) in
/// `RelayTrack::pending_upstreams` until dropped, also when its task is aborted.
pub(super) struct PendingUpstream(Arc<RelayTrack>);

impl PendingUpstream {
    pub(super) fn new(track: &Arc<RelayTrack>) -> Self {
        track.pending_upstreams.fetch_add(1, Ordering::Relaxed);
        PendingUpstream(track.clone())
    }
}

impl Drop for PendingUpstream {
    fn drop(&mut self) {
        self.0.pending_upstreams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Where a track stood when a subscription to it was established: the Largest Location its
/// SUBSCRIBE_OK reports and the last object stored, after which the subscription starts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Standing {
    pub(super) largest: Option<Location>,
    pub(super) held: Option<Location>,
}

impl Standing {
    /// Where `cache` stands now.
    pub(super) fn of(cache: &TrackCache) -> Self {
        // Read in this order, a largest learned from an object between the two reads is
        // also held: never a held beyond the largest.
        let held = cache.stored();
        Standing {
            largest: cache.largest(),
            held,
        }
    }
}

/// A wait on a track, run by `lifecycle::run_timers`.
#[derive(Debug)]
pub(super) enum Timer {
    /// The track's last downstream subscription left: after `RelayConfig::upstream_linger`,
    /// its upstreams go unless a subscriber came back.
    Linger(Arc<RelayTrack>),
    /// The track's last publisher went away at this generation (`await_publisher`); the
    /// wait is `RelayConfig::publisher_wait`, at most the bound given (an origin link's).
    AwaitPublisher(Arc<RelayTrack>, u64, Option<Duration>),
}
