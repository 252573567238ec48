//! Following a namespace index as a stream of changes.

use std::collections::{HashMap, VecDeque};

use moq_core::TrackNamespace;
use moq_transport::namespace::{NamespaceEvent, NamespaceIndex, NamespaceWatch};

/// A change [`Mirror::next`] reports.
pub(super) enum Change<V> {
    /// The namespace became known; [`Mirror::set`] attaches the caller's value to it.
    Added(TrackNamespace),
    /// The namespace is no longer known, with the value the caller attached (`V::default()`
    /// if none).
    Removed(TrackNamespace, V),
}

/// Follows everything in a [`NamespaceIndex`]: each namespace once as Added, then every
/// change. After falling behind the index it takes a fresh snapshot and reports just the
/// difference from what it reported before.
///
/// It keeps the caller's value for each namespace it reported (what the caller holds while
/// the namespace is known), so the set of known namespaces is kept once, not once here and
/// again in the caller's map.
pub(super) struct Mirror<V> {
    index: NamespaceIndex,
    known: HashMap<TrackNamespace, V>,
    watch: Option<NamespaceWatch>,
    /// Changes found by a fresh snapshot, not reported yet (a Removed one stays in `known`
    /// until it is).
    pending: VecDeque<NamespaceEvent>,
}

impl<V: Default> Mirror<V> {
    pub(super) fn new(index: NamespaceIndex) -> Self {
        Mirror {
            index,
            known: HashMap::new(),
            watch: None,
            pending: VecDeque::new(),
        }
    }

    /// Attaches `value` to the known namespace `ns` (no-op if it is not known).
    pub(super) fn set(&mut self, ns: &TrackNamespace, value: V) {
        if let Some(v) = self.known.get_mut(ns) {
            *v = value;
        }
    }

    /// The next change (cancel safe: a change is taken out only when it is returned).
    pub(super) async fn next(&mut self) -> Change<V> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                match ev {
                    NamespaceEvent::Added(ns) => return Change::Added(ns),
                    NamespaceEvent::Removed(ns) => {
                        let v = self.known.remove(&ns).unwrap_or_default();
                        return Change::Removed(ns, v);
                    }
                }
            }
            let Some(watch) = &mut self.watch else {
                if self.known.is_empty() {
                    // Most sessions announce nothing: their watch (and its queue) is taken
                    // once there is something to follow.
                    self.index.wait_known().await;
                }
                let (now, watch) = self.index.watch(&TrackNamespace::empty(), 4096);
                self.resync(now);
                self.watch = Some(watch);
                continue;
            };
            match watch.next().await {
                Some(NamespaceEvent::Added(ns)) => {
                    if !self.known.contains_key(&ns) {
                        self.known.insert(ns.clone(), V::default());
                        return Change::Added(ns);
                    }
                }
                Some(NamespaceEvent::Removed(ns)) => {
                    if let Some(v) = self.known.remove(&ns) {
                        return Change::Removed(ns, v);
                    }
                }
                // Fell behind: take a fresh snapshot.
                None => self.watch = None,
            }
        }
    }

    /// Queues the difference between what was reported and the snapshot `now`.
    fn resync(&mut self, now: Vec<TrackNamespace>) {
        let now: std::collections::HashSet<TrackNamespace> = now.into_iter().collect();
        self.pending = self
            .known
            .keys()
            .filter(|ns| !now.contains(*ns))
            .cloned()
            .map(NamespaceEvent::Removed)
            .collect();
        for ns in now {
            if !self.known.contains_key(&ns) {
                self.known.insert(ns.clone(), V::default());
                self.pending.push_back(NamespaceEvent::Added(ns));
            }
        }
    }
}
