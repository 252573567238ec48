//! [`Registration`]: a namespace kept registered, and the refresher the registrations of one
//! relay share (one per registry and relay), which refreshes the relay's lease once per half
//! lease rather than each namespace's.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use moq_core::TrackNamespace;
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use super::{Origin, Registry, RegistryError, RelayRef};

/// Where a [`Registration`] stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistrationState {
    /// Registered and refreshed, as this origin.
    Active(Origin),
    /// The last refresh could not reach the store; it is tried again. The lease may still
    /// hold (if the store returns within it) or be lost.
    Unreachable(RegistryError),
    /// Another relay took the namespace over: this registration stopped refreshing.
    Moved(Origin),
}

/// A namespace registered by this relay, kept alive by a task that refreshes it at half the
/// lease: the task is shared by every registration of the same relay in the same registry
/// (the same `Arc`), and refreshes the relay's lease with one call where the registry keeps
/// one ([`Registry::refresh_relay`]), else each registration. A lease that ran out while the
/// store was unreachable (and nobody else took the namespace) is registered again with a new
/// epoch; a takeover by another relay ends the refreshing and shows as
/// [`RegistrationState::Moved`].
///
/// Dropping it stops its refreshing (the shared task ends with the relay's last registration)
/// and unregisters the namespace in the background (best effort: if the store is down, the
/// lease runs out instead). [`Registration::unregister`] does the same and waits for it.
pub struct Registration {
    namespace: TrackNamespace,
    state: watch::Receiver<RegistrationState>,
    refresher: Arc<Refresher>,
    id: u64,
    attached: bool,
}

impl Registration {
    /// Registers `namespace` for `relay` and starts refreshing it. Must be called within a
    /// Tokio runtime. Cancel-safe: if dropped before it returns, the namespace may be
    /// registered and not refreshed, and its lease runs out.
    pub async fn start(
        registry: Arc<dyn Registry>,
        namespace: TrackNamespace,
        relay: RelayRef,
    ) -> Result<Registration, RegistryError> {
        let origin = registry.register(&namespace, &relay).await?;
        let (tx, state) = watch::channel(RegistrationState::Active(origin.clone()));
        let refresher = Refresher::shared(registry, relay);
        let id = refresher.next_id.fetch_add(1, Ordering::Relaxed);
        refresher.held.lock().insert(
            id,
            Held {
                namespace: namespace.clone(),
                origin,
                tx,
            },
        );
        Ok(Registration {
            namespace,
            state,
            refresher,
            id,
            attached: true,
        })
    }

    /// The namespace.
    pub fn namespace(&self) -> &TrackNamespace {
        &self.namespace
    }

    /// Where the registration stands now.
    pub fn state(&self) -> RegistrationState {
        self.state.borrow().clone()
    }

    /// Waits until the namespace moves to another relay and returns its new origin.
    /// Cancel-safe.
    pub async fn moved(&mut self) -> Origin {
        loop {
            if let RegistrationState::Moved(origin) = &*self.state.borrow_and_update() {
                return origin.clone();
            }
            if self.state.changed().await.is_err() {
                // Refreshing ended without a takeover (it cannot, but do not spin).
                std::future::pending::<()>().await;
            }
        }
    }

    /// Stops refreshing and unregisters the namespace (if it is still this relay's). Not
    /// cancel-safe: dropped midway, the refreshing has stopped and the lease runs out.
    pub async fn unregister(mut self) -> Result<(), RegistryError> {
        match self.detach() {
            Some(origin) => {
                let registry = self.refresher.registry.clone();
                registry.unregister(&self.namespace, &origin).await
            }
            None => Ok(()),
        }
    }

    /// Stops refreshing; the origin to unregister if the registration was still active.
    fn detach(&mut self) -> Option<Origin> {
        if !std::mem::take(&mut self.attached) {
            return None;
        }
        self.refresher.held.lock().remove(&self.id);
        match self.state() {
            RegistrationState::Active(origin) => Some(origin),
            _ => None,
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let Some(origin) = self.detach() else { return };
        // Nothing is spawned here: the refresher's task takes the unregistration from its
        // queue (and drains the queue before it ends, after the last registration).
        let _ = self.refresher.gone.send((self.namespace.clone(), origin));
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("namespace", &self.namespace)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

/// A registration the refresher keeps alive.
struct Held {
    namespace: TrackNamespace,
    origin: Origin,
    tx: watch::Sender<RegistrationState>,
}

/// The refreshing of one relay's registrations in one registry; its task ends when the last
/// of them drops it, once it has sent the unregistrations queued before.
struct Refresher {
    registry: Arc<dyn Registry>,
    relay: RelayRef,
    held: Mutex<HashMap<u64, Held>>,
    next_id: AtomicU64,
    /// Registrations dropped while active, for the task to unregister: at most one entry per
    /// registration, so bounded by them.
    gone: mpsc::UnboundedSender<(TrackNamespace, Origin)>,
}

/// The live refreshers, by registry (its `Arc`'s address: a refresher holds the registry, so
/// the address is not reused while it lives) and relay.
type Refreshers = HashMap<(usize, RelayRef), Weak<Refresher>>;
static REFRESHERS: LazyLock<Mutex<Refreshers>> = LazyLock::new(Default::default);

impl Refresher {
    /// The refresher of `relay` in `registry`, started if there is none.
    fn shared(registry: Arc<dyn Registry>, relay: RelayRef) -> Arc<Refresher> {
        let key = (Arc::as_ptr(&registry).cast::<()>() as usize, relay);
        let mut all = REFRESHERS.lock();
        if let Some(live) = all.get(&key).and_then(Weak::upgrade) {
            return live;
        }
        all.retain(|_, r| r.strong_count() > 0);
        let (gone, gone_rx) = mpsc::unbounded_channel();
        let refresher = Arc::new(Refresher {
            registry: registry.clone(),
            relay: key.1.clone(),
            held: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            gone,
        });
        // The task's life is the refresher's: it ends when the refresher's queue closes (the
        // refresher dropped) and is drained.
        tokio::spawn(refresh_loop(Arc::downgrade(&refresher), registry, gone_rx));
        all.insert(key, Arc::downgrade(&refresher));
        refresher
    }

    /// Sets registration `id`'s state; a moved one is no longer refreshed.
    fn set(&self, id: u64, state: RegistrationState) {
        let mut held = self.held.lock();
        let Some(entry) = held.get_mut(&id) else {
            return;
        };
        if let RegistrationState::Active(origin) = &state {
            entry.origin = origin.clone();
        }
        let moved = matches!(state, RegistrationState::Moved(_));
        entry.tx.send_replace(state);
        if moved {
            held.remove(&id);
        }
    }

    /// Checks registration `id` on its own: refreshed, moved, or lost and registered again.
    async fn check(&self, id: u64, namespace: &TrackNamespace, origin: &Origin) {
        let state = match self.registry.refresh(namespace, origin).await {
            Ok(()) => RegistrationState::Active(origin.clone()),
            Err(RegistryError::Moved(Some(to))) => {
                let (relay, epoch) = (&to.relay.id, to.epoch);
                tracing::info!(%namespace, %relay, epoch, "registry: namespace moved to another relay");
                RegistrationState::Moved(to)
            }
            // The lease ran out (the store was away for longer than it) and nobody took the
            // namespace: register it again.
            Err(RegistryError::Moved(None)) => {
                match self.registry.register(namespace, &self.relay).await {
                    Ok(again) => RegistrationState::Active(again),
                    Err(e) => RegistrationState::Unreachable(e),
                }
            }
            Err(e) => {
                tracing::warn!(%namespace, error = %e, "registry: refresh failed");
                RegistrationState::Unreachable(e)
            }
        };
        self.set(id, state);
    }

    /// One round: the relay's lease (or each registration's), and what moved.
    async fn refresh(&self, generation: &mut Option<String>, seen: &mut String) {
        let held: Vec<(u64, TrackNamespace, Origin)> = (self.held.lock().iter())
            .map(|(id, h)| (*id, h.namespace.clone(), h.origin.clone()))
            .collect();
        if held.is_empty() {
            return;
        }
        let lease = match self
            .registry
            .refresh_relay(&self.relay, generation.as_deref(), seen)
            .await
        {
            Ok(Some(lease)) => lease,
            Ok(None) => {
                for (id, namespace, origin) in &held {
                    self.check(*id, namespace, origin).await;
                }
                return;
            }
            Err(e) => {
                tracing::warn!(relay = %self.relay.id, error = %e, "registry: refresh failed");
                for (id, _, _) in &held {
                    self.set(*id, RegistrationState::Unreachable(e.clone()));
                }
                return;
            }
        };
        // A lease that started anew (or one not seen yet): each registration may be lost.
        let anew = generation.as_ref() != Some(&lease.generation);
        *generation = Some(lease.generation);
        // Handled below, without a pause: the next call may forget them.
        *seen = lease.seen;
        let moved: HashMap<TrackNamespace, Origin> = lease.moved.into_iter().collect();
        for (id, namespace, origin) in held {
            match moved.get(&namespace) {
                Some(to) if to.epoch > origin.epoch => {
                    let (relay, epoch) = (&to.relay.id, to.epoch);
                    tracing::info!(%namespace, %relay, epoch, "registry: namespace moved to another relay");
                    self.set(id, RegistrationState::Moved(to.clone()));
                }
                _ if anew => self.check(id, &namespace, &origin).await,
                _ => self.set(id, RegistrationState::Active(origin)),
            }
        }
    }
}

/// Refreshes every half lease while the refresher lives, and unregisters what its dropped
/// registrations queue; ends when the queue is closed (the refresher dropped) and drained.
async fn refresh_loop(
    refresher: Weak<Refresher>,
    registry: Arc<dyn Registry>,
    mut gone: mpsc::UnboundedReceiver<(TrackNamespace, Origin)>,
) {
    let every = registry.lease() / 2;
    let (mut generation, mut seen) = (None, String::new());
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            next = gone.recv() => match next {
                Some((namespace, origin)) => {
                    let _ = registry.unregister(&namespace, &origin).await;
                }
                None => return,
            },
            _ = tick.tick() => {
                if let Some(refresher) = refresher.upgrade() {
                    refresher.refresh(&mut generation, &mut seen).await;
                }
            }
        }
    }
}
