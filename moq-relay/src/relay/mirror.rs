//! Following a namespace index as a stream of changes.

use std::borrow::Borrow;
use std::collections::{HashSet, VecDeque};
use std::hash::{Hash, Hasher};

use moq_core::TrackNamespace;
use moq_transport::namespace::{
    NamespaceEvent, NamespaceIndex, NamespaceRegistration, NamespaceWatch, PublishedNamespace,
};

/// A value [`Mirror`] keeps for a namespace, which holds that namespace itself (so the mirror
/// does not keep it a second time as a key).
pub(super) trait Named {
    /// The namespace the value is for.
    fn namespace(&self) -> &TrackNamespace;
}

impl Named for NamespaceRegistration {
    fn namespace(&self) -> &TrackNamespace {
        NamespaceRegistration::namespace(self)
    }
}

impl Named for PublishedNamespace {
    fn namespace(&self) -> &TrackNamespace {
        PublishedNamespace::namespace(self)
    }
}

/// A change [`Mirror::next`] reports.
pub(super) enum Change<V> {
    /// The namespace became known; [`Mirror::set`] attaches the caller's value to it.
    Added(TrackNamespace),
    /// The namespace is no longer known, with the value the caller attached, if any (which
    /// holds the namespace).
    Removed(Option<V>),
}

/// A namespace [`Mirror`] reported, with the caller's value once attached: one entry of its
/// set, found by the namespace.
enum Known<V> {
    Bare(TrackNamespace),
    Set(V),
}

impl<V: Named> Known<V> {
    fn ns(&self) -> &TrackNamespace {
        match self {
            Known::Bare(ns) => ns,
            Known::Set(v) => v.namespace(),
        }
    }

    fn into_change(self) -> Change<V> {
        match self {
            Known::Bare(_) => Change::Removed(None),
            Known::Set(v) => Change::Removed(Some(v)),
        }
    }
}

impl<V: Named> Hash for Known<V> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As the namespace itself, which `Borrow` finds it by.
        self.ns().hash(state);
    }
}

impl<V: Named> PartialEq for Known<V> {
    fn eq(&self, other: &Self) -> bool {
        self.ns() == other.ns()
    }
}

impl<V: Named> Eq for Known<V> {}

impl<V: Named> Borrow<TrackNamespace> for Known<V> {
    fn borrow(&self) -> &TrackNamespace {
        self.ns()
    }
}

/// Follows everything in a [`NamespaceIndex`]: each namespace once as Added, then every
/// change. After falling behind the index it takes a fresh snapshot and reports just the
/// difference from what it reported before.
///
/// It keeps the caller's value for each namespace it reported (what the caller holds while
/// the namespace is known), so the set of known namespaces is kept once, not once here and
/// again in the caller's map; the value holds its namespace, which is not kept again as a key
/// (a map's entry with both was 48 bytes for a registration, the set's is 32).
pub(super) struct Mirror<V> {
    index: NamespaceIndex,
    known: HashSet<Known<V>>,
    watch: Option<NamespaceWatch>,
    /// Changes found by a fresh snapshot, not reported yet (a Removed one stays in `known`
    /// until it is).
    pending: VecDeque<NamespaceEvent>,
}

impl<V: Named> Mirror<V> {
    pub(super) fn new(index: NamespaceIndex) -> Self {
        Mirror {
            index,
            known: HashSet::new(),
            watch: None,
            pending: VecDeque::new(),
        }
    }

    /// Attaches `value` to its namespace if that is known (else drops it).
    pub(super) fn set(&mut self, value: V) {
        if self.known.contains(value.namespace()) {
            self.known.replace(Known::Set(value));
        }
    }

    /// The next change (cancel safe: a change is taken out only when it is returned).
    pub(super) async fn next(&mut self) -> Change<V> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                match ev {
                    NamespaceEvent::Added(ns) => return Change::Added(ns),
                    NamespaceEvent::Removed(ns) => return self.removed(ns),
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
                    if !self.known.contains(&ns) {
                        self.known.insert(Known::Bare(ns.clone()));
                        return Change::Added(ns);
                    }
                }
                Some(NamespaceEvent::Removed(ns)) => {
                    if self.known.contains(&ns) {
                        return self.removed(ns);
                    }
                }
                // Fell behind: take a fresh snapshot.
                None => self.watch = None,
            }
        }
    }

    /// Takes `ns` out of the known set, as a Removed change.
    fn removed(&mut self, ns: TrackNamespace) -> Change<V> {
        match self.known.take(&ns) {
            Some(k) => k.into_change(),
            None => Change::Removed(None),
        }
    }

    /// Queues the difference between what was reported and the snapshot `now`.
    fn resync(&mut self, now: Vec<TrackNamespace>) {
        let now: HashSet<TrackNamespace> = now.into_iter().collect();
        self.pending = self
            .known
            .iter()
            .map(Known::ns)
            .filter(|ns| !now.contains(*ns))
            .cloned()
            .map(NamespaceEvent::Removed)
            .collect();
        for ns in now {
            if !self.known.contains(&ns) {
                self.known.insert(Known::Bare(ns.clone()));
                self.pending.push_back(NamespaceEvent::Added(ns));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use std::time::Duration;

    /// An entry is the registration alone (a map's key and value were 48 bytes).
    #[test]
    fn an_entry_is_its_value() {
        assert!(std::mem::size_of::<Known<NamespaceRegistration>>() <= 32);
    }

    /// Added, then the value attached to it comes back with its Removed.
    #[tokio::test]
    async fn removed_gives_back_the_value() {
        tokio::time::timeout(Duration::from_secs(5), async {
            let index = NamespaceIndex::new();
            let shared = NamespaceIndex::new();
            let mut mirror: Mirror<NamespaceRegistration> = Mirror::new(index.clone());
            let a = TrackNamespace::from_strs(["a"]).unwrap();
            let reg = index.publish(a.clone());
            let Change::Added(ns) = mirror.next().await else {
                panic!("not Added");
            };
            assert_eq!(ns, a);
            mirror.set(shared.publish(a.clone()));
            assert!(shared.contains(&a));
            drop(reg);
            let Change::Removed(Some(value)) = mirror.next().await else {
                panic!("not Removed with the value");
            };
            assert_eq!(value.namespace(), &a);
            drop(value);
            assert!(!shared.contains(&a));
        })
        .await
        .unwrap();
    }
}
