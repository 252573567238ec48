//! What a session keeps about namespaces: the two prefix overlap spaces and the peer's accepted
//! PUBLISH_NAMESPACEs.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use moq_core::TrackNamespace;
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::RequestError;
use parking_lot::Mutex;

use crate::index::{PrefixTrie, RegistrationKey};
use crate::session::SessionCore;

/// The prefixes of the peer's live requests of one kind. Two of them may not overlap: equal, a
/// prefix of, or an extension of each other (draft-19 §10.18, §10.19).
#[derive(Debug)]
pub(crate) struct OverlapSpace {
    what: &'static str,
    prefixes: Mutex<PrefixTrie<()>>,
    keys: AtomicU64,
    limit: usize,
}

impl OverlapSpace {
    fn new(what: &'static str, limit: usize) -> Self {
        OverlapSpace {
            what,
            prefixes: Mutex::new(PrefixTrie::new()),
            keys: AtomicU64::new(0),
            limit,
        }
    }

    /// EXCESSIVE_LOAD if the peer already holds as many of these requests as it may.
    pub(crate) fn check_room(&self) -> Option<RequestError> {
        (self.prefixes.lock().len() >= self.limit).then(|| {
            RequestError::new(
                RequestErrorCode::EXCESSIVE_LOAD,
                format!("too many {} requests", self.what),
            )
        })
    }

    /// Takes a slot for `prefix`, held until the slot drops; PREFIX_OVERLAP if it overlaps a
    /// live one.
    pub(crate) fn take(&self, prefix: &TrackNamespace) -> Result<Slot<'_>, RequestError> {
        let key = self.keys.fetch_add(1, Ordering::Relaxed);
        let mut t = self.prefixes.lock();
        if t.overlaps(prefix) {
            return Err(self.overlap());
        }
        t.insert(prefix, key, ());
        Ok(Slot {
            space: self,
            prefix: prefix.clone(),
            key,
        })
    }

    fn overlap(&self) -> RequestError {
        RequestError::new(
            RequestErrorCode::PREFIX_OVERLAP,
            format!("prefix overlaps an existing {}", self.what),
        )
    }
}

/// A prefix held in an [`OverlapSpace`]; dropping it frees the prefix.
#[derive(Debug)]
pub(crate) struct Slot<'a> {
    space: &'a OverlapSpace,
    prefix: TrackNamespace,
    key: u64,
}

impl Slot<'_> {
    /// Moves the slot to `prefix` (a REQUEST_UPDATE's TRACK_NAMESPACE_PREFIX re-checks
    /// PREFIX_OVERLAP, draft-19 §10.9.2); on overlap it stays where it was.
    pub(crate) fn move_to(&mut self, prefix: &TrackNamespace) -> Result<(), RequestError> {
        let mut t = self.space.prefixes.lock();
        t.remove(&self.prefix, self.key);
        if t.overlaps(prefix) {
            t.insert(&self.prefix, self.key, ());
            return Err(self.space.overlap());
        }
        t.insert(prefix, self.key, ());
        self.prefix = prefix.clone();
        Ok(())
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.space.prefixes.lock().remove(&self.prefix, self.key);
    }
}

/// An accepted PUBLISH_NAMESPACE of the peer: its registration in the session's `announced`
/// index (which holds the namespace, so it is kept once; the index is the session's, so a
/// key) and, so the application can revoke it, its serving future's waker (a oneshot was ~80
/// bytes apart). Revoked, its code is in [`AnnouncedSlots::revoked`].
#[derive(Debug)]
struct Announced {
    registration: RegistrationKey,
    waker: Option<Waker>,
}

/// The accepted PUBLISH_NAMESPACEs, in slots reused as they free up. A slot is 40 bytes; a
/// hash map by key was ~115 bytes an entry at a thousand (it doubles once 7/8 full, and keeps
/// the key).
#[derive(Debug, Default)]
struct AnnouncedSlots {
    slots: Vec<Option<Announced>>,
    /// Slots free for reuse.
    free: Vec<usize>,
    len: usize,
    /// The codes of the revoked ones still in a slot: revocation is rare, and a code in every
    /// slot would make each 8 bytes larger.
    revoked: HashMap<usize, StreamResetCode>,
}

impl AnnouncedSlots {
    fn insert(&mut self, a: Announced) -> usize {
        self.len += 1;
        match self.free.pop() {
            Some(i) => {
                if let Some(slot) = self.slots.get_mut(i) {
                    *slot = Some(a);
                }
                i
            }
            None => {
                self.slots.push(Some(a));
                self.slots.len() - 1
            }
        }
    }

    fn get_mut(&mut self, i: usize) -> Option<&mut Announced> {
        self.slots.get_mut(i)?.as_mut()
    }

    /// Empties slot `i`; what it held, its registration to be ended outside the lock (that takes
    /// the index's).
    fn remove(&mut self, i: usize) -> Option<Announced> {
        let a = self.slots.get_mut(i).and_then(Option::take)?;
        self.revoked.remove(&i);
        self.len -= 1;
        if self.len == 0 {
            // Nothing accepted any more: give the memory back.
            self.slots = Vec::new();
            self.free = Vec::new();
            self.revoked = HashMap::new();
        } else {
            self.free.push(i);
        }
        Some(a)
    }
}

/// A session's namespace state.
#[derive(Debug)]
pub(crate) struct NamespaceState {
    core: Arc<SessionCore>,
    /// The peer's live SUBSCRIBE_NAMESPACE prefixes.
    pub(crate) subscriptions: OverlapSpace,
    /// The peer's live SUBSCRIBE_TRACKS prefixes.
    pub(crate) track_subscriptions: OverlapSpace,
    announced: Mutex<AnnouncedSlots>,
}

impl NamespaceState {
    pub(crate) fn new(core: Arc<SessionCore>) -> Self {
        let limits = &core.config().limits;
        NamespaceState {
            subscriptions: OverlapSpace::new(
                "SUBSCRIBE_NAMESPACE",
                limits.max_namespace_subscriptions,
            ),
            track_subscriptions: OverlapSpace::new(
                "SUBSCRIBE_TRACKS",
                limits.max_track_subscriptions,
            ),
            announced: Mutex::new(AnnouncedSlots::default()),
            core,
        }
    }

    pub(crate) fn core(&self) -> &Arc<SessionCore> {
        &self.core
    }

    /// EXCESSIVE_LOAD if the peer already publishes as many namespaces as it may.
    pub(crate) fn check_announce_room(&self) -> Option<RequestError> {
        let max = self.core.config().limits.max_published_namespaces;
        (self.announced.lock().len >= max).then(|| {
            RequestError::new(
                RequestErrorCode::EXCESSIVE_LOAD,
                "too many published namespaces",
            )
        })
    }

    /// Records an accepted PUBLISH_NAMESPACE, keeping its `registration` in the session's
    /// `announced` index (ended with the slot), until the guard drops;
    /// [`AcceptedGuard::poll_revoked`] tells if the application revokes it.
    pub(crate) fn accept(self: &Arc<Self>, registration: RegistrationKey) -> AcceptedGuard {
        let slot = self.announced.lock().insert(Announced {
            registration,
            waker: None,
        });
        // More than 2^32 slots cannot be held in memory: the conversion cannot fail.
        let slot = AcceptedSlot(u32::try_from(slot).unwrap_or(u32::MAX));
        AcceptedGuard {
            state: Some(self.clone()),
            slot,
        }
    }

    /// Revokes every accepted PUBLISH_NAMESPACE of `namespace`; returns how many.
    pub(crate) fn revoke(&self, namespace: &TrackNamespace, code: StreamResetCode) -> usize {
        let mut announced = self.announced.lock();
        let AnnouncedSlots { slots, revoked, .. } = &mut *announced;
        let mut n = 0;
        for (i, a) in slots.iter_mut().enumerate() {
            let Some(a) = a else { continue };
            if a.registration.namespace() == namespace && !revoked.contains_key(&i) {
                n += 1;
                revoked.insert(i, code);
                if let Some(w) = a.waker.take() {
                    w.wake();
                }
            }
        }
        n
    }

    /// Ready with the code once the application revoked the accepted PUBLISH_NAMESPACE in
    /// `slot`.
    pub(crate) fn poll_revoked(
        &self,
        slot: AcceptedSlot,
        cx: &mut Context<'_>,
    ) -> Poll<StreamResetCode> {
        let i = slot.index();
        let mut announced = self.announced.lock();
        if let Some(code) = announced.revoked.get(&i) {
            return Poll::Ready(*code);
        }
        let Some(a) = announced.get_mut(i) else {
            return Poll::Pending;
        };
        match &a.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => a.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The namespace accepted in `slot`.
    pub(crate) fn namespace(&self, slot: AcceptedSlot) -> Option<TrackNamespace> {
        let mut announced = self.announced.lock();
        Some(
            announced
                .get_mut(slot.index())?
                .registration
                .namespace()
                .clone(),
        )
    }

    /// Forgets the accepted PUBLISH_NAMESPACE in `slot`, which leaves the `announced` index.
    fn release(&self, slot: AcceptedSlot) {
        let removed = self.announced.lock().remove(slot.index());
        if let Some(a) = removed {
            self.core.config().announced.unregister(a.registration);
        }
    }
}

/// Where an accepted PUBLISH_NAMESPACE is in its session's [`NamespaceState`]: 4 bytes, which
/// a parked request keeps in its padding ([`crate::request::Parked`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct AcceptedSlot(u32);

impl AcceptedSlot {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// Forgets an accepted PUBLISH_NAMESPACE when it ends. It can be taken apart
/// ([`AcceptedGuard::into_parts`]) for an owner that keeps the two parts apart and puts them
/// back together ([`AcceptedGuard::from_parts`]) to drop them.
#[derive(Debug)]
pub(crate) struct AcceptedGuard {
    /// `None` only once taken apart.
    state: Option<Arc<NamespaceState>>,
    slot: AcceptedSlot,
}

impl AcceptedGuard {
    /// The guard of `slot` in `state`, as [`AcceptedGuard::into_parts`] gave them.
    pub(crate) fn from_parts(state: Arc<NamespaceState>, slot: AcceptedSlot) -> Self {
        AcceptedGuard {
            state: Some(state),
            slot,
        }
    }

    /// Its two parts, which the caller now owns: the slot is freed when they are put back
    /// together and dropped.
    pub(crate) fn into_parts(mut self) -> (Arc<NamespaceState>, AcceptedSlot) {
        let Some(state) = self.state.take() else {
            unreachable!("a guard is taken apart once")
        };
        (state, self.slot)
    }

    /// Ready with the code once the application revoked the announcement.
    pub(crate) fn poll_revoked(&self, cx: &mut Context<'_>) -> Poll<StreamResetCode> {
        match &self.state {
            Some(state) => state.poll_revoked(self.slot, cx),
            None => Poll::Pending,
        }
    }

    /// The accepted namespace.
    pub(crate) fn namespace(&self) -> Option<TrackNamespace> {
        self.state.as_ref()?.namespace(self.slot)
    }
}

impl Drop for AcceptedGuard {
    fn drop(&mut self) {
        if let Some(state) = &self.state {
            state.release(self.slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::NamespaceIndex;

    fn announced(index: &NamespaceIndex, name: &str) -> Announced {
        Announced {
            registration: index.register(TrackNamespace::from_strs([name]).unwrap(), None),
            waker: None,
        }
    }

    /// Freed slots are reused, and the memory is given back once none is in use.
    #[test]
    fn slots_reuse_and_free() {
        let index = NamespaceIndex::new();
        let mut s = AnnouncedSlots::default();
        let a = s.insert(announced(&index, "a"));
        let b = s.insert(announced(&index, "b"));
        assert_eq!((a, b, s.len), (0, 1, 2));
        index.unregister(s.remove(a).unwrap().registration);
        assert!(s.remove(a).is_none());
        assert_eq!(s.len, 1, "removing twice counts once");
        assert!(!index.contains(&TrackNamespace::from_strs(["a"]).unwrap()));
        assert!(s.get_mut(a).is_none());
        assert_eq!(
            s.insert(announced(&index, "c")),
            a,
            "the freed slot is reused"
        );
        assert_eq!(
            s.get_mut(b).map(|x| x.registration.namespace().clone()),
            Some(TrackNamespace::from_strs(["b"]).unwrap())
        );
        index.unregister(s.remove(a).unwrap().registration);
        index.unregister(s.remove(b).unwrap().registration);
        assert_eq!(s.len, 0);
        assert_eq!(s.slots.capacity() + s.free.capacity(), 0);
        assert!(index.is_empty());
        // The registration's key moved in (24 bytes; the namespace it holds was a copy of its
        // own here), the revocation's code moved out (issue 35's eighth round): 40, as it was
        // when the serving future kept the registration (32 bytes) besides.
        assert!(
            std::mem::size_of::<Option<Announced>>() <= 40,
            "48 before issue 35's fourth round"
        );
    }
}
