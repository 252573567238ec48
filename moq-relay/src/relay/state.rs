//! The relay's shared state: what every part of the relay reads and changes through the
//! methods the other files of this module give [`Inner`].

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use moq_client::model::{Directory, TrackCache};
use moq_core::{FullTrackName, TrackNamespace};
use moq_transport::namespace::{NamespaceIndex, NamespaceRegistration, PrefixTrie};
use moq_transport::{Session, SessionConfig};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use super::origins::Origins;
use super::successor::{NewUri, SuccessorSource};
use super::tasks::TaskSet;
use super::track::{RelayTrack, Timer};
use crate::cluster::{ClusterConfig, Links, Offers};
use crate::config::RelayConfig;
use crate::metrics::Metrics;

/// A publisher's session reachable for a namespace.
#[derive(Clone, Debug)]
pub(super) struct Route {
    pub(super) session_id: u64,
    pub(super) session: Session,
}

/// Everything the relay holds, shared by its sessions and tasks.
#[derive(Debug)]
pub(super) struct Inner {
    pub(super) config: RelayConfig,
    pub(super) index: NamespaceIndex,
    pub(super) routes: Mutex<PrefixTrie<Route>>,
    pub(super) routes_changed: watch::Sender<u64>,
    pub(super) tracks: Mutex<HashMap<FullTrackName, Arc<RelayTrack>>>,
    /// Tracks whose publisher ended them, by name, while their cache may hold objects (for
    /// the cache's age limit): FETCH, TRACK_STATUS and SUBSCRIBE are answered from them when
    /// no publisher has the track (`finished_track`), until the instant each is forgotten.
    pub(super) finished: Mutex<HashMap<FullTrackName, (TrackCache, tokio::time::Instant)>>,
    /// Answers every session's SUBSCRIBE, FETCH, TRACK_STATUS and SUBSCRIBE_TRACKS, asking
    /// this relay's routes and upstreams (`RelayUpstream`) for what it does not hold. It holds
    /// the PUBLISHed tracks, offered to SUBSCRIBE_TRACKS subscribers.
    pub(super) directory: Directory,
    pub(super) sessions: Mutex<HashMap<u64, Session>>,
    /// The number of open sessions, for a drain to wait on.
    pub(super) session_count: watch::Sender<usize>,
    pub(super) metrics: Arc<Metrics>,
    /// Ids of sessions and links; shared with the per-session configuration, which takes each
    /// accepted session's id before the session exists ([`owner_id`]).
    pub(super) next_id: Arc<AtomicU64>,
    /// Set when the relay began draining.
    pub(super) draining: AtomicBool,
    /// The GOAWAY every session gets once the relay sent one (the new session URI and when
    /// the sessions will be closed): a session set up after it was sent gets it too.
    pub(super) goaway: Mutex<Option<(NewUri, tokio::time::Instant)>>,
    /// Where a draining relay with no configured successor looks for one.
    pub(super) successor: std::sync::OnceLock<SuccessorSource>,
    /// Every session's configuration (links dial with it too).
    pub(super) session_config: SessionConfig,
    /// Cluster state, when the relay is in a cluster.
    pub(super) cluster: Option<ClusterState>,
    /// Every task of the relay (each session's own tasks are the session's).
    pub(super) tasks: TaskSet,
    /// The timers of the relay's tracks (`lifecycle::run_timers`): set from `Drop`, which
    /// spawns nothing.
    pub(super) timers: mpsc::UnboundedSender<Timer>,
    /// Origins found through a route registry, and the links to them.
    pub(super) origins: Origins,
}

/// A new session id from `ids`, as the owner of the session's view of the shared index
/// (`NamespaceIndex::owned_by`): ids start at 1.
pub(super) fn owner_id(ids: &AtomicU64) -> NonZeroU64 {
    NonZeroU64::new(ids.fetch_add(1, Ordering::Relaxed)).unwrap_or(NonZeroU64::MAX)
}

/// What the relay knows of its cluster.
#[derive(Debug)]
pub(super) struct ClusterState {
    pub(super) config: ClusterConfig,
    /// What the links offer, by namespace.
    pub(super) offers: Mutex<Offers>,
    /// The relay's cluster view: for each namespace it can reach, its entry with the path.
    pub(super) exports: Mutex<HashMap<TrackNamespace, (Vec<String>, NamespaceRegistration)>>,
    /// Learned namespaces registered in the index (for clients' discovery).
    pub(super) learned: Mutex<HashMap<TrackNamespace, NamespaceRegistration>>,
    /// The namespaces this relay's own clients publish, which links to foreign upstreams
    /// announce (PUBLISH_NAMESPACE); learned ones are not.
    pub(super) local: NamespaceIndex,
    /// Each namespace's registration in `local`.
    pub(super) local_regs: Mutex<HashMap<TrackNamespace, NamespaceRegistration>>,
    /// The links this relay dials: their state, WARN lines and metrics.
    pub(super) links: Links,
}

/// What a session to another relay is.
#[derive(Clone, Debug)]
pub(super) enum Link {
    /// A link to a relay of this cluster: both sides exchange cluster views. The peer's URL
    /// when this relay dialed it.
    Cluster(Option<String>),
    /// A relay of another implementation this relay takes namespaces from, as a client does:
    /// SUBSCRIBE_NAMESPACE for everything, each namespace offered through the path `[name]`.
    Upstream(String),
}
