//! What a session keeps about namespaces: the two prefix overlap spaces and the peer's accepted
//! PUBLISH_NAMESPACEs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};

use moq_core::TrackNamespace;
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::RequestError;
use parking_lot::Mutex;

use crate::index::PrefixTrie;
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

/// An accepted PUBLISH_NAMESPACE of the peer, so the application can revoke it. Its serving
/// future's waker is kept here rather than a channel's (a oneshot is ~80 bytes apart).
#[derive(Debug)]
struct Announced {
    namespace: TrackNamespace,
    revocation: Revocation,
}

/// Whether an accepted PUBLISH_NAMESPACE was revoked: one field, 24 bytes, where a waker and
/// an optional code apart were 32.
#[derive(Debug, Default)]
enum Revocation {
    /// Not revoked; its serving future was not polled yet.
    #[default]
    None,
    /// Not revoked; the serving future, woken when it is.
    Waiting(Waker),
    /// Revoked with this code.
    Revoked(StreamResetCode),
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

    fn remove(&mut self, i: usize) {
        if self.slots.get_mut(i).and_then(Option::take).is_none() {
            return;
        }
        self.len -= 1;
        if self.len == 0 {
            // Nothing accepted any more: give the memory back.
            self.slots = Vec::new();
            self.free = Vec::new();
        } else {
            self.free.push(i);
        }
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

    /// Records an accepted PUBLISH_NAMESPACE until the guard drops; [`AcceptedGuard::poll_revoked`]
    /// tells if the application revokes it.
    pub(crate) fn accept(self: &Arc<Self>, namespace: TrackNamespace) -> AcceptedGuard {
        let slot = self.announced.lock().insert(Announced {
            namespace,
            revocation: Revocation::None,
        });
        AcceptedGuard(self.clone(), slot)
    }

    /// Revokes every accepted PUBLISH_NAMESPACE of `namespace`; returns how many.
    pub(crate) fn revoke(&self, namespace: &TrackNamespace, code: StreamResetCode) -> usize {
        let mut announced = self.announced.lock();
        let mut n = 0;
        for a in announced.slots.iter_mut().flatten() {
            if &a.namespace == namespace && !matches!(a.revocation, Revocation::Revoked(_)) {
                n += 1;
                if let Revocation::Waiting(w) =
                    std::mem::replace(&mut a.revocation, Revocation::Revoked(code))
                {
                    w.wake();
                }
            }
        }
        n
    }
}

/// Forgets an accepted PUBLISH_NAMESPACE when it ends.
#[derive(Debug)]
pub(crate) struct AcceptedGuard(Arc<NamespaceState>, usize);

impl AcceptedGuard {
    /// Ready with the code once the application revoked the announcement.
    pub(crate) fn poll_revoked(&self, cx: &mut Context<'_>) -> Poll<StreamResetCode> {
        let mut announced = self.0.announced.lock();
        let Some(a) = announced.get_mut(self.1) else {
            return Poll::Pending;
        };
        match &a.revocation {
            Revocation::Revoked(code) => Poll::Ready(*code),
            Revocation::Waiting(w) if w.will_wake(cx.waker()) => Poll::Pending,
            Revocation::None | Revocation::Waiting(_) => {
                a.revocation = Revocation::Waiting(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

impl Drop for AcceptedGuard {
    fn drop(&mut self) {
        self.0.announced.lock().remove(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announced(name: &str) -> Announced {
        Announced {
            namespace: TrackNamespace::from_strs([name]).unwrap(),
            revocation: Revocation::None,
        }
    }

    /// Freed slots are reused, and the memory is given back once none is in use.
    #[test]
    fn slots_reuse_and_free() {
        let mut s = AnnouncedSlots::default();
        let a = s.insert(announced("a"));
        let b = s.insert(announced("b"));
        assert_eq!((a, b, s.len), (0, 1, 2));
        s.remove(a);
        s.remove(a);
        assert_eq!(s.len, 1, "removing twice counts once");
        assert!(s.get_mut(a).is_none());
        assert_eq!(s.insert(announced("c")), a, "the freed slot is reused");
        assert_eq!(
            s.get_mut(b).map(|x| x.namespace.clone()),
            Some(TrackNamespace::from_strs(["b"]).unwrap())
        );
        s.remove(a);
        s.remove(b);
        assert_eq!(s.len, 0);
        assert_eq!(s.slots.capacity() + s.free.capacity(), 0);
        assert!(
            std::mem::size_of::<Option<Announced>>() <= 40,
            "48 before issue 35's fourth round"
        );
    }
}
