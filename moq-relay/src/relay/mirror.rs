//! Following a namespace index as a stream of changes.

use std::collections::{HashSet, VecDeque};

use moq_core::TrackNamespace;
use moq_transport::namespace::{NamespaceEvent, NamespaceIndex, NamespaceWatch};

/// Follows everything in a [`NamespaceIndex`]: each namespace once as Added, then every
/// change. After falling behind the index it takes a fresh snapshot and reports just the
/// difference from what it reported before.
pub(super) struct Mirror {
    index: NamespaceIndex,
    known: HashSet<TrackNamespace>,
    watch: Option<NamespaceWatch>,
    pending: VecDeque<NamespaceEvent>,
}

impl Mirror {
    pub(super) fn new(index: NamespaceIndex) -> Self {
        Mirror {
            index,
            known: HashSet::new(),
            watch: None,
            pending: VecDeque::new(),
        }
    }

    /// The next change (cancel safe).
    pub(super) async fn next(&mut self) -> NamespaceEvent {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return ev;
            }
            let Some(watch) = &mut self.watch else {
                if self.known.is_empty() {
                    // Most sessions announce nothing: their watch (and its queue) is taken
                    // once there is something to follow.
                    self.index.wait_known().await;
                }
                let (now, watch) = self.index.watch(&TrackNamespace::empty(), 4096);
                let now: HashSet<TrackNamespace> = now.into_iter().collect();
                let gone = self
                    .known
                    .difference(&now)
                    .cloned()
                    .map(NamespaceEvent::Removed);
                let new = now
                    .difference(&self.known)
                    .cloned()
                    .map(NamespaceEvent::Added);
                self.pending = gone.chain(new).collect();
                self.known = now;
                self.watch = Some(watch);
                continue;
            };
            match watch.next().await {
                Some(ev) => {
                    let new = match &ev {
                        NamespaceEvent::Added(ns) => self.known.insert(ns.clone()),
                        NamespaceEvent::Removed(ns) => self.known.remove(ns),
                    };
                    if new {
                        return ev;
                    }
                }
                // Fell behind: take a fresh snapshot.
                None => self.watch = None,
            }
        }
    }
}
