//! A value set at most once that others can read and await: how a request ended, why a
//! subscription's writers must stop. A bounded [`Queue`] that allocates nothing until used.
//! And [`wait_until`], the wait on a `Notify` that both and the other small shared states (a
//! subscription's parameters, the Joining FETCH record) use instead of channels.
//!
//! Not a `watch` channel: one lives as long as each request and subscription, and a watch's
//! eight-way notifier makes it 386 bytes, where this is about a hundred.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;

/// The setting end. The first [`Latch::set`] wins; dropping the latch unset tells the readers
/// it never will be (its owner went away without saying why).
#[derive(Debug)]
pub(crate) struct Latch<T>(Arc<Shared<T>>);

/// The reading end, cheap to clone.
#[derive(Debug)]
pub(crate) struct LatchWatch<T>(Arc<Shared<T>>);

impl<T> Clone for LatchWatch<T> {
    fn clone(&self) -> Self {
        LatchWatch(self.0.clone())
    }
}

#[derive(Debug)]
struct Shared<T> {
    value: OnceLock<T>,
    abandoned: AtomicBool,
    changed: Notify,
}

impl<T> Default for Latch<T> {
    fn default() -> Self {
        Latch(Arc::new(Shared {
            value: OnceLock::new(),
            abandoned: AtomicBool::new(false),
            changed: Notify::new(),
        }))
    }
}

impl<T> Latch<T> {
    /// Sets the value unless one was set before.
    pub(crate) fn set(&self, value: T) {
        self.0.set(value);
    }

    /// A reader.
    pub(crate) fn subscribe(&self) -> LatchWatch<T> {
        LatchWatch(self.0.clone())
    }
}

impl<T> Latch<T> {
    /// Tells the readers it will never be set (unless it was): what its drop does, for an
    /// owner that must see it done before it drops.
    pub(crate) fn abandon(&self) {
        self.0.abandoned.store(true, Ordering::Release);
        self.0.changed.notify_waiters();
    }
}

impl<T> Drop for Latch<T> {
    fn drop(&mut self) {
        self.abandon();
    }
}

/// Resolves with the first `Some` of `check`, called again each time `notify` wakes its
/// waiters. The wake-up is registered before each check, so a change made between the check
/// and the wait is not missed; one that wakes nobody (`notify_one` with no waiter) leaves a
/// permit, which costs at most one more check.
pub(crate) async fn wait_until<T>(notify: &Notify, mut check: impl FnMut() -> Option<T>) -> T {
    loop {
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(v) = check() {
            return v;
        }
        notified.await;
    }
}

/// A bounded queue with any number of consumers, each item going to one. Not a tokio `mpsc`:
/// that allocates its first block of slots with the channel, where most of these queues (a
/// subscription's PUBLISH_STATE_NOTIFYs, a session's incoming requests) never hold an item.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    items: parking_lot::Mutex<VecDeque<T>>,
    capacity: usize,
    pushed: Notify,
}

impl<T> Queue<T> {
    /// A queue of at most `capacity` items (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Queue {
            items: parking_lot::Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            pushed: Notify::new(),
        }
    }

    /// Queues `item`, or gives it back if the queue is full.
    pub(crate) fn push(&self, item: T) -> Result<(), T> {
        let mut items = self.items.lock();
        if items.len() >= self.capacity {
            return Err(item);
        }
        items.push_back(item);
        drop(items);
        // A permit is kept if nobody waits; a waiter dropped after its wake-up passes it on.
        self.pushed.notify_one();
        Ok(())
    }

    /// Resolves with the next item. Cancel safe: an item is taken only by the poll that
    /// returns it.
    pub(crate) async fn next(&self) -> T {
        wait_until(&self.pushed, || self.items.lock().pop_front()).await
    }
}

/// The latch was dropped without a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Abandoned;

impl<T> Shared<T> {
    fn set(&self, value: T) {
        if self.value.set(value).is_ok() {
            self.changed.notify_waiters();
        }
    }
}

/// A [`Latch`] held in place rather than shared, for a value inside something shared already
/// (the session's core): no allocation of its own, and no reading end apart; it is never
/// abandoned (whoever reads it holds its owner).
#[derive(Debug)]
pub(crate) struct InPlace<T>(Shared<T>);

impl<T> Default for InPlace<T> {
    fn default() -> Self {
        InPlace(Shared {
            value: OnceLock::new(),
            abandoned: AtomicBool::new(false),
            changed: Notify::new(),
        })
    }
}

impl<T> InPlace<T> {
    /// Sets the value unless one was set before.
    pub(crate) fn set(&self, value: T) {
        self.0.set(value);
    }
}

impl<T: Clone> InPlace<T> {
    /// The value, if set.
    pub(crate) fn get(&self) -> Option<T> {
        self.0.get()
    }

    /// Resolves with the value once set. Cancel safe.
    pub(crate) async fn wait(&self) -> T {
        match self.0.wait().await {
            Ok(v) => v,
            // Never abandoned: whoever waits holds its owner.
            Err(Abandoned) => std::future::pending().await,
        }
    }
}

impl<T: Clone> Shared<T> {
    fn get(&self) -> Option<T> {
        self.value.get().cloned()
    }

    fn state(&self) -> Result<Option<T>, Abandoned> {
        if let Some(v) = self.get() {
            return Ok(Some(v));
        }
        if self.abandoned.load(Ordering::Acquire) {
            // Set before the latch dropped, or never.
            return self.get().map(Some).ok_or(Abandoned);
        }
        Ok(None)
    }

    async fn wait(&self) -> Result<T, Abandoned> {
        wait_until(&self.changed, || self.state().transpose()).await
    }
}

impl<T: Clone> LatchWatch<T> {
    /// The value, if set.
    pub(crate) fn get(&self) -> Option<T> {
        self.0.get()
    }

    /// The value if set, `Ok(None)` while it may still be, [`Abandoned`] if it never will.
    pub(crate) fn state(&self) -> Result<Option<T>, Abandoned> {
        self.0.state()
    }

    /// Resolves with the value once set, or [`Abandoned`]. Cancel safe.
    pub(crate) async fn wait(&self) -> Result<T, Abandoned> {
        self.0.wait().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_first_value_wins_and_wakes_a_waiter() {
        let latch = Latch::default();
        let watch = latch.subscribe();
        assert_eq!(watch.state(), Ok(None));
        let waiter = tokio::spawn({
            let watch = watch.clone();
            async move { watch.wait().await }
        });
        latch.set(1);
        latch.set(2);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert_eq!(got.ok().and_then(Result::ok), Some(Ok(1)));
        drop(latch);
        assert_eq!(watch.state(), Ok(Some(1)));
    }

    #[tokio::test]
    async fn a_queue_is_bounded_and_in_order() {
        let q = Queue::new(2);
        assert_eq!(q.push(1), Ok(()));
        assert_eq!(q.push(2), Ok(()));
        assert_eq!(q.push(3), Err(3));
        let first = tokio::time::timeout(Duration::from_secs(5), q.next()).await;
        assert_eq!(first, Ok(1));
        assert_eq!(q.push(3), Ok(()));
        let rest = tokio::time::timeout(Duration::from_secs(5), async {
            (q.next().await, q.next().await)
        })
        .await;
        assert_eq!(rest, Ok((2, 3)));
    }

    #[tokio::test]
    async fn dropped_unset_is_abandoned() {
        let latch = Latch::<u8>::default();
        let watch = latch.subscribe();
        let waiter = tokio::spawn({
            let watch = watch.clone();
            async move { watch.wait().await }
        });
        drop(latch);
        let got = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert_eq!(got.ok().and_then(Result::ok), Some(Err(Abandoned)));
        assert_eq!(watch.get(), None);
        assert_eq!(watch.state(), Err(Abandoned));
    }
}
