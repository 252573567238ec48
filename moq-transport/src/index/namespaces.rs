//! The set of namespaces an endpoint "knows" (draft-19 §6.1), with live watchers per prefix.

use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use moq_core::TrackNamespace;
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::{Notify, mpsc};

use super::trie::PrefixTrie;

/// A change to the set of namespaces under a watched prefix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum NamespaceEvent {
    /// The namespace became known (NAMESPACE).
    Added(TrackNamespace),
    /// The namespace is no longer known (NAMESPACE_DONE).
    Removed(TrackNamespace),
}

impl NamespaceEvent {
    /// The namespace the event is about.
    pub fn namespace(&self) -> &TrackNamespace {
        match self {
            NamespaceEvent::Added(ns) | NamespaceEvent::Removed(ns) => ns,
        }
    }
}

/// How a namespace is reached, for the MoQ Cluster extension (draft-lcurley-moq-cluster):
/// what a relay's advertisement of it carries, less the relay's own hop.
///
/// The default (no hops, cost 0) is a namespace this endpoint's own publisher announced: a
/// relay advertises it with HOP_PATH = its own Hop ID alone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NamespaceRoute {
    /// HOP_PATH as received: the Hop IDs the advertisement went through, publisher first.
    pub hops: Vec<u64>,
    /// The route's cost from here: the ROUTE_COST received plus what pulling over the link
    /// it came on costs (the peer's RELAY_COST, else 1).
    pub cost: u64,
}

impl NamespaceRoute {
    /// Orders routes cheapest first, then shortest, as a relay chooses among them.
    pub fn rank(&self) -> (u64, usize) {
        (self.cost, self.hops.len())
    }

    /// Whether the route went through the endpoint whose Hop ID is `hop` (never through 0,
    /// which names no hop: [`moq_core::message::cluster::holds`]).
    pub fn runs_through(&self, hop: u64) -> bool {
        moq_core::message::cluster::holds(&self.hops, hop)
    }
}

/// What a watcher's queue carries: an event, or a change of a known namespace's route.
#[derive(Clone, Debug)]
pub(crate) enum Change {
    Event(NamespaceEvent),
    /// The best route of a namespace still known changed ([`NamespaceRegistration::set_route`]).
    Rerouted(TrackNamespace),
}

/// One registration: the owner of the view it was made through, and its route (`None`: this
/// endpoint's own, the default route).
#[derive(Debug, Default)]
struct Entry {
    owner: Option<NonZeroU64>,
    route: Option<Box<NamespaceRoute>>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Registrations, each with the owner of the view it was made through (see
    /// [`NamespaceIndex::owned_by`]) and its route; a namespace is known while it has at least
    /// one.
    published: PrefixTrie<Entry>,
    /// Watchers, stored at their prefix.
    watchers: PrefixTrie<mpsc::Sender<Change>>,
}

impl Inner {
    /// The best route of `ns` among its registrations, if it is known.
    fn route(&self, ns: &TrackNamespace) -> Option<NamespaceRoute> {
        self.published
            .at(ns)
            .iter()
            .map(|(_, e)| e.route.as_deref().cloned().unwrap_or_default())
            .min_by_key(|r| (r.cost, r.hops.len()))
    }
}

/// The namespaces an endpoint knows: those it publishes tracks in itself, and those it accepted
/// in PUBLISH_NAMESPACE (draft-19 §6.1, §6.2). A relay shares one index between all sessions.
///
/// Several registrations of one namespace (two publishers) count as one: watchers see `Added`
/// on the first and `Removed` after the last. A watcher sees the current set and then every
/// change, in order, so a `Removed` always follows the `Added` (or snapshot entry) for it.
///
/// Cheap to clone; clones share the set. Dropping the last clone drops the set (outstanding
/// [`NamespaceRegistration`]s and [`NamespaceWatch`]es hold a clone, so it lives while they do).
///
/// ```
/// # tokio_test_block_on(async {
/// use moq_core::TrackNamespace;
/// use moq_transport::namespace::{NamespaceIndex, NamespaceEvent};
/// let index = NamespaceIndex::new();
/// let room = TrackNamespace::from_strs(["meet", "room1"]).unwrap();
/// let reg = index.publish(room.clone());
/// let (now, mut watch) = index.watch(&TrackNamespace::from_strs(["meet"]).unwrap(), 16);
/// assert_eq!(now, vec![room.clone()]);
/// drop(reg);
/// assert_eq!(watch.next().await, Some(NamespaceEvent::Removed(room)));
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Clone, Debug, Default)]
pub struct NamespaceIndex {
    /// Each [`NamespaceRegistration`] holds a clone of it.
    shared: Arc<Shared>,
    /// The owner this view registers for ([`NamespaceIndex::owned_by`]); `None`: the index's
    /// own registrations.
    owner: Option<NonZeroU64>,
}

/// Told of each registration made through an owner's view, as it is made and as it ends:
/// the namespace, the owner, and `true` for added.
type OwnedListener = Box<dyn Fn(&TrackNamespace, NonZeroU64, bool) + Send + Sync>;

/// What the index's clones share.
#[derive(Default)]
struct Shared {
    inner: Mutex<Inner>,
    ids: Ids,
    /// Set once by [`NamespaceIndex::on_owned_change`].
    listener: OnceLock<OwnedListener>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("inner", &self.inner)
            .field("listener", &self.listener.get().is_some())
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock()
    }

    /// Tells the listener of an owned registration's change (never under the lock: it may
    /// register or unregister in turn).
    fn owned_change(&self, ns: &TrackNamespace, owner: Option<NonZeroU64>, added: bool) {
        if let (Some(owner), Some(listener)) = (owner, self.listener.get()) {
            listener(ns, owner, added);
        }
    }

    fn unpublish(&self, ns: &TrackNamespace, id: u64) {
        let mut inner = self.lock();
        let before = inner.route(ns);
        let Some(entry) = inner.published.remove(ns, id) else {
            return;
        };
        if inner.published.at(ns).is_empty() {
            notify(
                &mut inner,
                ns,
                Change::Event(NamespaceEvent::Removed(ns.clone())),
            );
        } else if inner.route(ns) != before {
            notify(&mut inner, ns, Change::Rerouted(ns.clone()));
        }
        drop(inner);
        self.owned_change(ns, entry.owner, false);
    }

    fn set_route(&self, ns: &TrackNamespace, id: u64, route: NamespaceRoute) {
        let mut inner = self.lock();
        let before = inner.route(ns);
        let Some(entries) = inner.published.at_mut(ns) else {
            return;
        };
        if let Some((_, e)) = entries.iter_mut().find(|(i, _)| *i == id) {
            e.route = Some(Box::new(route));
        }
        if inner.route(ns) != before {
            notify(&mut inner, ns, Change::Rerouted(ns.clone()));
        }
    }
}

/// The id of a registration kept out of the index (a `.session` namespace through an
/// owner's view): no entry has it, so its removal finds nothing.
const UNREGISTERED: u64 = u64::MAX;

/// What the index's clones share outside its lock.
#[derive(Debug, Default)]
struct Ids {
    /// The next registration or watcher id.
    next: AtomicU64,
    /// Notified whenever a namespace becomes known (see [`NamespaceIndex::wait_known`]).
    known: Notify,
}

impl NamespaceIndex {
    /// An empty index.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.shared.lock()
    }

    fn next_id(&self) -> u64 {
        self.shared.ids.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A view of this index whose registrations ([`NamespaceIndex::publish`]) are marked as
    /// `owner`'s: the same set, watchers and lookups, one entry per registration. A relay
    /// gives each session such a view as its [`crate::SessionConfig::announced`], so what a
    /// peer announces is one entry of the shared index that also says which session routes it
    /// ([`NamespaceIndex::owners_on_path`]), told to [`NamespaceIndex::on_owned_change`].
    ///
    /// A view stands for a peer session: a `.session` namespace through it is that session's
    /// own (draft-19 §3.2.2) and is not registered in the shared set.
    pub fn owned_by(&self, owner: NonZeroU64) -> NamespaceIndex {
        NamespaceIndex {
            shared: self.shared.clone(),
            owner: Some(owner),
        }
    }

    /// The owner this view registers for, if it is an owner's view.
    pub fn owner(&self) -> Option<NonZeroU64> {
        self.owner
    }

    /// Calls `listener` with each registration made through an owner's view: the namespace,
    /// the owner and `true` as it is made, `false` as it ends (its guard dropped). It runs on
    /// the registering or dropping thread, outside the index's lock (it may use the index);
    /// it must not block. Only one listener can be set: false if one was.
    pub fn on_owned_change(
        &self,
        listener: impl Fn(&TrackNamespace, NonZeroU64, bool) + Send + Sync + 'static,
    ) -> bool {
        self.shared.listener.set(Box::new(listener)).is_ok()
    }

    /// The owners with a registration of `ns` itself, each once.
    pub fn owners_at(&self, ns: &TrackNamespace) -> Vec<NonZeroU64> {
        let inner = self.lock();
        let mut owners: Vec<NonZeroU64> = inner
            .published
            .at(ns)
            .iter()
            .filter_map(|(_, e)| e.owner)
            .collect();
        owners.sort();
        owners.dedup();
        owners
    }

    /// The owners with a registration of `ns` or of a field-wise prefix of it (whose
    /// sessions could hold `ns`'s tracks), each once. Cost: the path length.
    pub fn owners_on_path(&self, ns: &TrackNamespace) -> Vec<NonZeroU64> {
        let inner = self.lock();
        let mut owners: Vec<NonZeroU64> = inner
            .published
            .prefixes_of(ns)
            .filter_map(|(_, e)| e.owner)
            .collect();
        owners.sort();
        owners.dedup();
        owners
    }

    /// Registers `ns` as known until the returned guard is dropped.
    pub fn publish(&self, ns: TrackNamespace) -> NamespaceRegistration {
        self.publish_with(ns, None)
    }

    /// Registers `ns` as known, reached through `route` (MoQ Cluster extension), until the
    /// returned guard is dropped. Of a namespace's registrations the cheapest route (then the
    /// shortest) is the one [`NamespaceIndex::route`] answers.
    pub fn publish_routed(
        &self,
        ns: TrackNamespace,
        route: NamespaceRoute,
    ) -> NamespaceRegistration {
        self.publish_with(ns, Some(Box::new(route)))
    }

    fn publish_with(
        &self,
        ns: TrackNamespace,
        route: Option<Box<NamespaceRoute>>,
    ) -> NamespaceRegistration {
        let RegistrationKey { ns, id } = self.register(ns, route);
        NamespaceRegistration {
            shared: self.shared.clone(),
            ns,
            id,
        }
    }

    /// [`NamespaceIndex::publish`] (or, with a route, [`NamespaceIndex::publish_routed`]) for
    /// an owner that keeps many registrations with the index beside them: the key alone, 8
    /// bytes less than a [`NamespaceRegistration`], which this index's
    /// [`NamespaceIndex::unregister`] ends (nothing does if it is dropped).
    pub(crate) fn register(
        &self,
        ns: TrackNamespace,
        route: Option<Box<NamespaceRoute>>,
    ) -> RegistrationKey {
        if self.owner.is_some() && ns.is_session_level() {
            return RegistrationKey {
                ns,
                id: UNREGISTERED,
            };
        }
        let id = self.next_id();
        let mut inner = self.lock();
        let first = inner.published.at(&ns).is_empty();
        let before = (!first).then(|| inner.route(&ns)).flatten();
        let owner = self.owner;
        inner.published.insert(&ns, id, Entry { owner, route });
        if first {
            notify(
                &mut inner,
                &ns,
                Change::Event(NamespaceEvent::Added(ns.clone())),
            );
            drop(inner);
            self.shared.ids.known.notify_waiters();
        } else {
            if inner.route(&ns) != before {
                notify(&mut inner, &ns, Change::Rerouted(ns.clone()));
            }
            drop(inner);
        }
        self.shared.owned_change(&ns, self.owner, true);
        RegistrationKey { ns, id }
    }

    /// Ends a registration made by [`NamespaceIndex::register`] on this index (or a view of
    /// it), as dropping a [`NamespaceRegistration`] does.
    pub(crate) fn unregister(&self, key: RegistrationKey) {
        self.shared.unpublish(&key.ns, key.id);
    }

    /// The best route of `ns` (cheapest, then shortest, of its registrations), if it is known.
    pub fn route(&self, ns: &TrackNamespace) -> Option<NamespaceRoute> {
        self.lock().route(ns)
    }

    /// True if `ns` itself is known.
    pub fn contains(&self, ns: &TrackNamespace) -> bool {
        !self.lock().published.at(ns).is_empty()
    }

    /// Every known namespace that has `prefix` as a field-wise prefix.
    pub fn matching(&self, prefix: &TrackNamespace) -> Vec<TrackNamespace> {
        let inner = self.lock();
        dedup(inner.published.under(prefix).into_iter().map(|(ns, _)| ns))
    }

    /// True if some known namespace is a field-wise prefix of `ns` (it could hold `ns`'s tracks).
    pub fn covers(&self, ns: &TrackNamespace) -> bool {
        self.lock().published.prefixes_of(ns).next().is_some()
    }

    /// Number of distinct known namespaces.
    pub fn len(&self) -> usize {
        self.matching(&TrackNamespace::empty()).len()
    }

    /// True if no namespace is known.
    pub fn is_empty(&self) -> bool {
        self.lock().published.is_empty()
    }

    /// Resolves once some namespace is known (at once if one is now): for a follower of the
    /// whole index that takes its [`NamespaceIndex::watch`] (whose queue is an allocation of
    /// its own) only once there is something to follow.
    ///
    /// Cancel safe.
    pub async fn wait_known(&self) {
        loop {
            let known = self.shared.ids.known.notified();
            tokio::pin!(known);
            known.as_mut().enable();
            if !self.is_empty() {
                return;
            }
            known.await;
        }
    }

    /// The namespaces under `prefix` now, and a watch for every later change. The two are taken
    /// atomically, so nothing is missed or repeated. If more than `capacity` events queue up
    /// unread, the watch ends (its [`NamespaceWatch::next`] returns `None`) rather than grow.
    pub fn watch(
        &self,
        prefix: &TrackNamespace,
        capacity: usize,
    ) -> (Vec<TrackNamespace>, NamespaceWatch) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let id = self.next_id();
        let mut inner = self.lock();
        let now = dedup(inner.published.under(prefix).into_iter().map(|(ns, _)| ns));
        inner.watchers.insert(prefix, id, tx);
        drop(inner);
        (
            now,
            NamespaceWatch {
                index: self.clone(),
                prefix: prefix.clone(),
                id,
                rx,
            },
        )
    }
}

fn dedup(it: impl Iterator<Item = TrackNamespace>) -> Vec<TrackNamespace> {
    let mut v: Vec<TrackNamespace> = it.collect();
    v.sort();
    v.dedup();
    v
}

/// Sends `event` to every watcher whose prefix is a prefix of `ns`; a watcher whose queue is
/// full is dropped, which ends its watch.
fn notify(inner: &mut Inner, ns: &TrackNamespace, event: Change) {
    let mut lagged = Vec::new();
    for (depth, id, tx) in inner.watchers.entries_on_path(ns) {
        if tx.try_send(event.clone()).is_err() {
            lagged.push((depth, id));
        }
    }
    for (depth, id) in lagged {
        inner.watchers.remove(&ns.prefix(depth), id);
    }
}

/// Keeps a namespace registered in a [`NamespaceIndex`]; dropping it unregisters it (the
/// index's watchers see [`NamespaceEvent::Removed`] once no other registration of the
/// namespace is left, and sessions answering SUBSCRIBE_NAMESPACE from the index send
/// NAMESPACE_DONE).
#[derive(Debug)]
pub struct NamespaceRegistration {
    /// The index's shared part alone (not a view): 8 bytes less in every registration.
    shared: Arc<Shared>,
    ns: TrackNamespace,
    id: u64,
}

impl NamespaceRegistration {
    /// The registered namespace.
    pub fn namespace(&self) -> &TrackNamespace {
        &self.ns
    }

    /// Changes the route this registration reaches its namespace through (MoQ Cluster
    /// extension); watchers that follow routes see the namespace re-advertised when its best
    /// route changes.
    pub fn set_route(&self, route: NamespaceRoute) {
        self.shared.set_route(&self.ns, self.id, route);
    }
}

impl Drop for NamespaceRegistration {
    fn drop(&mut self) {
        self.shared.unpublish(&self.ns, self.id);
    }
}

/// A registration made by [`NamespaceIndex::register`]: its namespace and id, with no index
/// (and no drop) of its own; [`NamespaceIndex::unregister`] ends it.
#[derive(Debug)]
pub(crate) struct RegistrationKey {
    ns: TrackNamespace,
    id: u64,
}

impl RegistrationKey {
    /// The registered namespace.
    pub(crate) fn namespace(&self) -> &TrackNamespace {
        &self.ns
    }
}

/// Changes under a prefix of a [`NamespaceIndex`]; dropping it stops the watch (it leaves
/// the index; nothing is sent anywhere).
#[derive(Debug)]
pub struct NamespaceWatch {
    index: NamespaceIndex,
    prefix: TrackNamespace,
    id: u64,
    rx: mpsc::Receiver<Change>,
}

impl NamespaceWatch {
    /// The next change; `None` if this watch fell behind by more than its capacity and was
    /// dropped by the index.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<NamespaceEvent> {
        loop {
            if let Change::Event(ev) = self.rx.recv().await? {
                return Some(ev);
            }
        }
    }

    /// [`NamespaceWatch::next`], with the changes of a known namespace's route too.
    ///
    /// Cancel safe.
    pub(crate) async fn next_change(&mut self) -> Option<Change> {
        self.rx.recv().await
    }

    /// The watched prefix.
    pub fn prefix(&self) -> &TrackNamespace {
        &self.prefix
    }
}

impl Drop for NamespaceWatch {
    fn drop(&mut self) {
        self.index.lock().watchers.remove(&self.prefix, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(f: &[&str]) -> TrackNamespace {
        TrackNamespace::from_strs(f.iter().copied()).unwrap()
    }

    #[tokio::test]
    async fn two_publishers_count_once() {
        let index = NamespaceIndex::new();
        let (now, mut w) = index.watch(&TrackNamespace::empty(), 8);
        assert!(now.is_empty());
        let a = index.publish(ns(&["x"]));
        let b = index.publish(ns(&["x"]));
        assert_eq!(w.next().await, Some(NamespaceEvent::Added(ns(&["x"]))));
        drop(a);
        assert!(index.contains(&ns(&["x"])));
        drop(b);
        assert_eq!(w.next().await, Some(NamespaceEvent::Removed(ns(&["x"]))));
        assert!(index.is_empty());
    }

    #[tokio::test]
    async fn watchers_see_only_their_prefix() {
        let index = NamespaceIndex::new();
        let (_, mut wa) = index.watch(&ns(&["a"]), 8);
        let (_, mut wb) = index.watch(&ns(&["b"]), 8);
        let _r = index.publish(ns(&["a", "1"]));
        let _s = index.publish(ns(&["b", "2"]));
        assert_eq!(
            wa.next().await,
            Some(NamespaceEvent::Added(ns(&["a", "1"])))
        );
        assert_eq!(
            wb.next().await,
            Some(NamespaceEvent::Added(ns(&["b", "2"])))
        );
        assert!(wa.rx.try_recv().is_err());
        assert_eq!(index.matching(&ns(&["a"])), vec![ns(&["a", "1"])]);
        assert!(index.covers(&ns(&["a", "1", "deep"])));
    }

    /// `wait_known` waits while nothing is known, is woken by the first publication, and
    /// resolves at once while a namespace is known.
    #[tokio::test]
    async fn wait_known_resolves_on_the_first_namespace() {
        let index = NamespaceIndex::new();
        let waiting = index.wait_known();
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        let reg = index.publish(ns(&["x"]));
        let woken = tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await;
        assert!(woken.is_ok(), "the first publication wakes the waiter");
        let now = tokio::time::timeout(std::time::Duration::from_secs(5), index.wait_known()).await;
        assert!(now.is_ok(), "resolves at once while a namespace is known");
        drop(reg);
    }

    /// An owner's view registers in the shared set, marked with its owner; the listener hears
    /// of each owned registration as it is made and as it ends, and a `.session` namespace
    /// through a view is not registered.
    #[test]
    fn owner_views_share_one_entry() {
        use std::sync::Arc;
        let index = NamespaceIndex::new();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let log = heard.clone();
        assert!(index.on_owned_change(move |ns, owner, added| {
            log.lock().push((ns.clone(), owner.get(), added));
        }));
        assert!(!index.on_owned_change(|_, _, _| {}), "one listener");
        let one = NonZeroU64::MIN;
        let two = one.saturating_add(1);
        let a = index.owned_by(one).publish(ns(&["a"]));
        let b = index.owned_by(two).publish(ns(&["a", "b"]));
        let plain = index.publish(ns(&["a", "b"]));
        assert_eq!(index.owned_by(one).owner(), Some(one));
        assert_eq!(index.owner(), None);
        assert_eq!(index.owners_on_path(&ns(&["a", "b", "c"])), vec![one, two]);
        assert_eq!(index.owners_at(&ns(&["a", "b"])), vec![two]);
        assert_eq!(index.len(), 2);
        let session = index.owned_by(one).publish(ns(&[".session", "x"]));
        assert!(!index.contains(&ns(&[".session", "x"])));
        drop(session);
        drop(plain);
        drop(b);
        assert!(index.owners_on_path(&ns(&["a", "b"])) == vec![one]);
        drop(a);
        assert!(index.is_empty());
        assert_eq!(
            *heard.lock(),
            vec![
                (ns(&["a"]), 1, true),
                (ns(&["a", "b"]), 2, true),
                (ns(&["a", "b"]), 2, false),
                (ns(&["a"]), 1, false),
            ]
        );
    }

    #[tokio::test]
    async fn overflow_ends_the_watch() {
        let index = NamespaceIndex::new();
        let (_, mut w) = index.watch(&TrackNamespace::empty(), 2);
        let regs: Vec<_> = (0..5)
            .map(|i| index.publish(ns(&[&i.to_string()])))
            .collect();
        assert!(w.next().await.is_some());
        assert!(w.next().await.is_some());
        assert_eq!(w.next().await, None);
        drop(regs);
    }
}
