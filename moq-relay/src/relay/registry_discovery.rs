//! Discovery through the route registry (issue 36): a local SUBSCRIBE_NAMESPACE for a prefix
//! is also answered from the cluster. The relay asks the registry only about the prefixes its
//! own subscribers asked about: per distinct prefix in use, one [`Registry::watch`] and one
//! [`Registry::scan`] (each time the watch is taken), shared by every local subscriber of the
//! prefix and dropped when the last one leaves. What they report is registered in the relay's
//! namespace index as a remote source under that prefix, so the sessions' own discovery
//! serves it (NAMESPACE / NAMESPACE_DONE from draft 16 on, PUBLISH_NAMESPACE before): the
//! index counts registrations, so a namespace several sources know is announced once.
//!
//! Namespaces a session of this relay publishes are not taken from the registry (they are in
//! the index already, and the relay's own registration of them must not keep them there after
//! the publisher left); [`Relay::is_remote`] tells the registry glue which entries are only
//! remote, so it does not register them as this relay's.
//!
//! The prefixes in use are learned from the sessions' SUBSCRIBE_NAMESPACE through the
//! [`RequestObserver::discovering`] hook. The empty prefix (everything) is never asked of the
//! registry: a subscriber of it sees what this relay knows, not the whole cluster.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures::StreamExt;
use moq_core::codes::RequestErrorCode;
use moq_core::{TrackNamespace, Version};
use moq_transport::RequestObserver;
use moq_transport::endpoint::QuicSettings;
use moq_transport::namespace::NamespaceRegistration;
use parking_lot::Mutex;
use tokio::task::AbortHandle;

use super::Relay;
use super::state::Inner;
use crate::metrics::Metrics;
use crate::registry::{NamespaceChange, Registry};

/// One prefix the relay follows in the registry.
struct Followed {
    /// This follower's id (a follower started again for the same prefix has a new one).
    id: u64,
    /// Local subscribers of the prefix ([`Interest`]s alive).
    users: usize,
    /// The namespaces under the prefix the registry names and no local session publishes,
    /// each registered in the relay's index.
    held: HashMap<TrackNamespace, NamespaceRegistration>,
    /// The task following the registry.
    task: Option<AbortHandle>,
}

/// The prefixes local subscribers ask about, and what the registry reports under each.
#[derive(Default)]
pub(super) struct Discovery {
    inner: OnceLock<Weak<Inner>>,
    followed: Mutex<HashMap<TrackNamespace, Followed>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Discovery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovery")
            .field("prefixes", &self.followed.lock().len())
            .finish_non_exhaustive()
    }
}

impl Discovery {
    /// Ties this to the relay's state (once, when the relay is made).
    pub(super) fn attach(&self, inner: Weak<Inner>) {
        let _ = self.inner.set(inner);
    }

    /// A local subscriber asks about `prefix`: follows it in the registry (if the relay routes
    /// through one) while the returned guard lives.
    fn interest(self: &Arc<Self>, prefix: &TrackNamespace) -> Option<Interest> {
        if prefix.is_empty() {
            return None;
        }
        let inner = self.inner.get()?.upgrade()?;
        let registry = inner.origins.config.get()?.registry.clone();
        let mut followed = self.followed.lock();
        let f = followed.entry(prefix.clone()).or_insert_with(|| {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let task =
                inner
                    .tasks
                    .spawn(follow(Arc::downgrade(self), registry, prefix.clone(), id));
            tracing::debug!(%prefix, "registry: following a prefix for discovery");
            Followed {
                id,
                users: 0,
                held: HashMap::new(),
                task: Some(task.abort_handle()),
            }
        });
        f.users += 1;
        Some(Interest {
            discovery: Arc::downgrade(self),
            prefix: prefix.clone(),
        })
    }

    /// Applies `f` to follower `id` of `prefix`, with the relay's state; `None` once the
    /// follower is gone (its last subscriber left) or the relay is.
    fn with<T>(
        &self,
        prefix: &TrackNamespace,
        id: u64,
        f: impl FnOnce(&Inner, &mut Followed) -> T,
    ) -> Option<T> {
        let inner = self.inner.get()?.upgrade()?;
        let mut followed = self.followed.lock();
        let entry = followed.get_mut(prefix).filter(|e| e.id == id)?;
        Some(f(&inner, entry))
    }
}

/// A local subscriber's interest in a prefix; dropped when its SUBSCRIBE_NAMESPACE ends or
/// moves to another prefix. The last one of a prefix stops following it and takes what the
/// registry reported there out of the index (its subscribers are gone; others of overlapping
/// prefixes keep their own entries).
struct Interest {
    discovery: Weak<Discovery>,
    prefix: TrackNamespace,
}

impl Drop for Interest {
    fn drop(&mut self) {
        let Some(d) = self.discovery.upgrade() else {
            return;
        };
        let gone = {
            let mut followed = d.followed.lock();
            let Some(f) = followed.get_mut(&self.prefix) else {
                return;
            };
            f.users -= 1;
            if f.users > 0 {
                return;
            }
            followed.remove(&self.prefix)
        };
        if let Some(mut f) = gone {
            if let Some(task) = f.task.take() {
                task.abort();
            }
            tracing::debug!(prefix = %self.prefix, "registry: prefix no longer followed");
        }
    }
}

/// Whether a session of the relay (not a link) publishes `ns` itself.
fn published_here(inner: &Inner, ns: &TrackNamespace) -> bool {
    // One lock at a time.
    let ids = inner.route_ids_at(ns);
    let sessions = inner.sessions.lock();
    ids.iter().any(|id| sessions.contains_key(id))
}

impl Followed {
    /// The registry names `ns` under the prefix.
    fn add(&mut self, inner: &Inner, ns: TrackNamespace) {
        if self.held.contains_key(&ns) || published_here(inner, &ns) {
            return;
        }
        let registration = inner.index.publish(ns.clone());
        self.held.insert(ns, registration);
    }

    /// Makes what is held what the registry holds now (`now`, a scan).
    fn resync(&mut self, inner: &Inner, now: Vec<TrackNamespace>) {
        let now: std::collections::HashSet<TrackNamespace> = now.into_iter().collect();
        self.held.retain(|ns, _| now.contains(ns));
        for ns in now {
            self.add(inner, ns);
        }
    }
}

/// Follows `prefix` in `registry` for follower `id`: takes a watch, then a scan to set what is
/// held to what the store holds (what went away while no watch ran ends, what came is added),
/// then applies the watch's changes. The watch itself carries the store's outages (it reports
/// what changed meanwhile); a watch that cannot be taken (the store is down) is tried again
/// with a backoff up to the lease, and entries held meanwhile stay. Ends when the follower
/// is gone; cancel-safe (aborted by the last [`Interest`]).
async fn follow(
    discovery: Weak<Discovery>,
    registry: Arc<dyn Registry>,
    prefix: TrackNamespace,
    id: u64,
) {
    let first = Duration::from_millis(50);
    let mut backoff = first;
    let mut warned = false;
    loop {
        let watch = match registry.watch(&prefix).await {
            Ok(watch) => watch,
            Err(e) => {
                if !std::mem::replace(&mut warned, true) {
                    tracing::warn!(%prefix, error = %e, "registry: cannot watch a prefix yet");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(registry.lease());
                continue;
            }
        };
        (backoff, warned) = (first, false);
        if let Ok(now) = registry.scan(&prefix).await {
            let d = discovery.upgrade();
            let resynced = d.and_then(|d| d.with(&prefix, id, |i, f| f.resync(i, now)));
            if resynced.is_none() {
                return;
            }
        }
        let mut watch = watch;
        while let Some(change) = watch.next().await {
            let Some(d) = discovery.upgrade() else { return };
            let applied = d.with(&prefix, id, |inner, f| match change {
                NamespaceChange::Added(ns) => f.add(inner, ns),
                NamespaceChange::Removed(ns) => {
                    f.held.remove(&ns);
                }
            });
            if applied.is_none() {
                return;
            }
        }
        // The watch ended (the registry's task did): take it again.
    }
}

/// The sessions' request observer: the relay's metrics, and the discovery hook.
pub(super) struct Observer {
    pub(super) metrics: Arc<Metrics>,
    pub(super) discovery: Arc<Discovery>,
}

impl RequestObserver for Observer {
    fn answered(
        &self,
        version: Version,
        kind: &'static str,
        outcome: Result<(), RequestErrorCode>,
        elapsed: Duration,
    ) {
        self.metrics.answered(version, kind, outcome, elapsed);
    }

    fn discovering(&self, prefix: &TrackNamespace) -> Option<Box<dyn Send + Sync>> {
        let interest = self.discovery.interest(prefix)?;
        Some(Box::new(interest))
    }
}

/// The QUIC settings of a link to an origin relay: the relay's, with an idle timeout of at
/// most half the registry's lease (and keep-alives at a third of it), so the subscriptions
/// over a link to a relay that died end within the lease, as its namespaces do (the link
/// closes at its idle timeout; the tracks over it end after `RelayConfig::publisher_wait`,
/// at most a quarter of the lease (`Inner::origin_wait`), unless a new origin takes them
/// over).
pub(super) fn origin_link_quic(quic: QuicSettings, lease: Duration) -> QuicSettings {
    let most = lease / 2;
    match quic.idle_timeout > most {
        true => quic.with_idle_timeout(most),
        false => quic,
    }
}

impl Relay {
    /// The prefixes this relay follows in the registry for its subscribers' discovery (one
    /// per distinct SUBSCRIBE_NAMESPACE prefix in use, empty prefix excepted), sorted. Empty
    /// unless the relay routes through a registry ([`Relay::route_through_registry`]).
    pub fn discovery_prefixes(&self) -> Vec<TrackNamespace> {
        let mut v: Vec<TrackNamespace> = (self.discovery.followed.lock().keys()).cloned().collect();
        v.sort();
        v
    }

    /// Whether `ns` is in the relay's index only as something it learned from elsewhere: an
    /// entry of the cluster view ([`Relay::is_cluster_view`]), or a namespace the registry
    /// reported for a subscriber's discovery that no session of this relay publishes. Such a
    /// namespace is not registered as this relay's ([`crate::register_local_namespaces`]).
    pub fn is_remote(&self, ns: &TrackNamespace) -> bool {
        if self.is_cluster_view(ns) {
            return true;
        }
        let held = (self.discovery.followed.lock().values()).any(|f| f.held.contains_key(ns));
        held && !published_here(&self.inner, ns)
    }
}
