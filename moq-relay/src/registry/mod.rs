//! The route registry: where each namespace's origin relay is, kept in a shared store.
//!
//! This is the foundation of a relay cluster that scales past what one relay can know
//! (issue 36): instead of every relay learning every namespace from its peers, a relay
//! *registers* each namespace it originates (a publisher is connected to it), and another
//! relay *looks up* the origin of a namespace only when one of its own subscribers asks for it.
//! Discovery (SUBSCRIBE_NAMESPACE) across the cluster is a *scan* of a tuple prefix plus a
//! *watch* of the changes under it. Relays also *heartbeat* their address, region and load,
//! so a draining relay can name the least loaded live relay as its successor.
//!
//! The store is behind the [`Registry`] trait; `RedisRegistry` (feature `registry-redis`,
//! on by default) keeps it on a Valkey or Redis server, or sharded over a Redis Cluster. The relay registers what its own
//! publishers announce ([`crate::register_local_namespaces`]), and with
//! [`crate::Relay::route_through_registry`] looks origins up on a miss and answers its
//! subscribers' SUBSCRIBE_NAMESPACE from scans and watches of the prefixes they ask about.
//!
//! # Leases and fencing
//!
//! A registration holds a lease of [`Registry::lease`]; [`Registration`] refreshes it at half
//! the lease. A registry may keep one lease per relay that all its namespaces ride on
//! ([`Registry::refresh_relay`]; `RedisRegistry` does): the registrations of one relay then
//! share one refresher, one store call per half lease for the relay, however many namespaces
//! it holds. A registration of a namespace that is already registered takes it over: it gets
//! a higher *epoch* (a namespace's epochs only grow), and the previous owner's next refresh
//! reports [`RegistryError::Moved`] naming the new owner, so no two relays serve one namespace
//! as its origin for longer than one refresh interval. An owner that stops refreshing (its
//! relay died) loses its namespaces when the lease runs out, and watchers see them removed.
//!
//! # Outage
//!
//! Every call has a timeout (`RedisRegistryConfig::timeout`) and fails with
//! [`RegistryError::Unavailable`] while the store cannot be reached; the connection is made
//! again by itself when the store is back, without making a new registry.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use async_trait::async_trait;
use futures::Stream;
use moq_core::TrackNamespace;
use tokio::sync::mpsc;

#[cfg(any(feature = "registry-redis", test))]
mod common;
#[cfg(feature = "registry-redis")]
mod redis;
mod successor;
#[cfg(feature = "registry-redis")]
pub use self::redis::{RedisRegistry, RedisRegistryConfig};
pub use self::successor::{DRAINING_LOAD, choose_successor};
mod registration;
pub use self::registration::{Registration, RegistrationState};

/// A relay as the registry names it: its id (unique in the cluster) and the address other
/// relays dial to reach it (for example `moqt://relay-a.example:4443`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RelayRef {
    /// The relay's id, unique in the cluster.
    pub id: String,
    /// Where other relays dial it.
    pub address: String,
}

/// The origin of a namespace: the relay that registered it, and the epoch of that
/// registration (higher is newer; see the module docs on fencing).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Origin {
    /// The relay serving the namespace.
    pub relay: RelayRef,
    /// The registration's epoch.
    pub epoch: u64,
}

/// A live relay, as its last heartbeat described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayInfo {
    /// The relay and its address.
    pub relay: RelayRef,
    /// A region tag (for choosing a successor nearby); may be empty.
    pub region: String,
    /// The relay's load, in a unit the cluster agrees on (for example sessions served).
    pub load: u64,
}

/// What [`Registry::refresh_relay`] answers: the relay's lease, extended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayLease {
    /// Names this lease of the relay (opaque). It changes when the lease starts anew (it ran
    /// out, or the store lost it) or, in a sharded store, when the relay has a lease in a
    /// shard more: the registrations made under an earlier one may be lost, and each must be
    /// checked with [`Registry::refresh`] (and registered again).
    pub generation: String,
    /// The relay's namespaces taken over (not covered by the call's `seen`), each with its
    /// new origin, oldest first.
    pub moved: Vec<(TrackNamespace, Origin)>,
    /// What covers `moved` and every takeover listed before (opaque): pass it as the next
    /// call's `seen` once `moved` is handled.
    pub seen: String,
}

/// A change under a watched prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NamespaceChange {
    /// The namespace is registered (it was not, as far as this watch knew).
    Added(TrackNamespace),
    /// The namespace is no longer registered: unregistered, or its lease ran out.
    Removed(TrackNamespace),
}

/// What went wrong in a registry call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The store could not be reached or did not answer within the timeout; the call may be
    /// made again (the connection is made again by itself).
    #[error("the registry is unavailable: {0}")]
    Unavailable(String),
    /// The registration is no longer this one's: another relay took the namespace over (the
    /// new origin), or its lease ran out and nobody holds it (`None`).
    #[error("the namespace moved to {0:?}")]
    Moved(Option<Origin>),
    /// An argument the registry cannot store (an empty namespace, a relay id with a newline).
    #[error("invalid registry argument: {0}")]
    Invalid(String),
    /// The store answered something this registry did not write there.
    #[error("unexpected answer from the registry's store: {0}")]
    Protocol(String),
}

/// A route registry: namespaces and their origins, relays and their load, in a store shared
/// by the relays of a cluster. Every method is bounded in time (it fails with
/// [`RegistryError::Unavailable`] rather than wait for a store that is down) and cancel-safe:
/// dropping a call's future leaves the store as the call found it or as the call left it,
/// never half-written (each write is one atomic step in the store).
#[async_trait]
pub trait Registry: Send + Sync + 'static {
    /// How long a registration or heartbeat lasts without a refresh.
    fn lease(&self) -> Duration;

    /// Registers `namespace` as originated by `relay`, for one lease, taking it over from any
    /// other owner with a higher epoch. Returns the new origin, to pass to
    /// [`refresh`](Registry::refresh) and [`unregister`](Registry::unregister).
    async fn register(
        &self,
        namespace: &TrackNamespace,
        relay: &RelayRef,
    ) -> Result<Origin, RegistryError>;

    /// Extends the lease of `origin`'s registration of `namespace` by one lease. Fails with
    /// [`RegistryError::Moved`] when the namespace is no longer registered by `origin`.
    async fn refresh(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError>;

    /// Extends `relay`'s own lease (or leases: one per shard of a sharded store), on which
    /// every namespace it registered rides, and lists the takeovers of its namespaces that
    /// `seen` does not cover: `seen` is the [`RelayLease::seen`] of the last answer whose
    /// `moved` the caller handled (empty at first), and `generation` that answer's
    /// [`RelayLease::generation`] (`None` at first). Takeovers `seen` covers are forgotten.
    /// For registries that keep one lease per relay; `None` (the default) means this registry
    /// keeps a lease per registration: [`refresh`](Registry::refresh) each instead.
    /// Cancel-safe: a takeover is listed again until a call's `seen` covers it.
    async fn refresh_relay(
        &self,
        relay: &RelayRef,
        generation: Option<&str>,
        seen: &str,
    ) -> Result<Option<RelayLease>, RegistryError> {
        let _ = (relay, generation, seen);
        Ok(None)
    }

    /// Removes `origin`'s registration of `namespace`; a registration that is no longer
    /// `origin`'s (moved or expired) is left alone, and that is not an error.
    async fn unregister(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError>;

    /// The origin of `namespace` (exactly that namespace), or `None`. May answer from a short
    /// cache (`RedisRegistryConfig::cache_ttl`), so a takeover or expiry can be seen that
    /// much later.
    async fn lookup(&self, namespace: &TrackNamespace) -> Result<Option<Origin>, RegistryError>;

    /// The registered namespaces that `prefix` is a field-wise prefix of (draft-19 §9.5
    /// matching: `(ab)` is not under `(a)`), sorted.
    async fn scan(&self, prefix: &TrackNamespace) -> Result<Vec<TrackNamespace>, RegistryError>;

    /// The changes under `prefix` from now on: first an [`NamespaceChange::Added`] for each
    /// namespace registered under it, then each registration, removal and expiry. Over an
    /// outage of the store the watch reconnects by itself and then reports what changed
    /// meanwhile. Fails only if the first connection cannot be made.
    async fn watch(&self, prefix: &TrackNamespace) -> Result<NamespaceWatch, RegistryError>;

    /// Records `relay` as live, with its region and load, for one lease.
    async fn heartbeat(&self, relay: &RelayInfo) -> Result<(), RegistryError>;

    /// The relays whose last heartbeat is less than a lease old, sorted by id.
    async fn relays(&self) -> Result<Vec<RelayInfo>, RegistryError>;
}

/// A stream of [`NamespaceChange`]s under a prefix ([`Registry::watch`]).
///
/// Dropping it stops the watch (its task ends and its store connection closes). `next()` on
/// it is cancel-safe: a change not yet taken stays queued. The stream ends only when the
/// registry's watch task ends, which it does not do while the stream is held.
pub struct NamespaceWatch {
    rx: mpsc::Receiver<NamespaceChange>,
    /// The task feeding `rx`, if the watch owns it: aborted when the watch is dropped.
    task: Option<tokio::task::AbortHandle>,
}

impl NamespaceWatch {
    /// A watch fed by a task holding the sending side; for [`Registry`] implementations.
    pub fn new(rx: mpsc::Receiver<NamespaceChange>) -> Self {
        NamespaceWatch { rx, task: None }
    }

    /// This watch, owning `task` (the one feeding it): dropping the watch aborts the task at
    /// once, rather than when it next finds the receiving side gone.
    pub fn owning(mut self, task: tokio::task::JoinHandle<()>) -> Self {
        self.task = Some(task.abort_handle());
        self
    }
}

impl Drop for NamespaceWatch {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl fmt::Debug for NamespaceWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamespaceWatch").finish_non_exhaustive()
    }
}

impl Stream for NamespaceWatch {
    type Item = NamespaceChange;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// Heartbeats `relay` (with `region` and the load `load()` reports) every half lease, for as
/// long as the future runs; a failed heartbeat is logged (once until one succeeds again) and
/// tried again at the next beat. Never ends: drop it (or the task running it) to stop; the
/// relay then drops out of [`Registry::relays`] within a lease. Cancel-safe.
pub async fn heartbeat_loop(
    registry: Arc<dyn Registry>,
    relay: RelayRef,
    region: String,
    load: impl Fn() -> u64 + Send,
) {
    let mut failing = false;
    let mut tick = tokio::time::interval(registry.lease() / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let info = RelayInfo {
            relay: relay.clone(),
            region: region.clone(),
            load: load(),
        };
        match registry.heartbeat(&info).await {
            Ok(()) if failing => {
                failing = false;
                tracing::info!(relay = %relay.id, "registry: heartbeats reach the store again");
            }
            Ok(()) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(relay = %relay.id, error = %e, "registry: heartbeat failed");
            }
            Err(_) => {}
        }
    }
}
