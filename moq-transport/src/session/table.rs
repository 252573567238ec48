//! The session's request table: every request's serving future, polled by one task.
//!
//! A request that lives long (an accepted PUBLISH_NAMESPACE, a subscription's control side, a
//! SUBSCRIBE_NAMESPACE) spends its life waiting. As a tokio task each, it cost a task header,
//! a cancellation wrapper and a slot in the session's task tracker (~570 bytes) on top of its
//! future. Here it is an entry of a `FuturesUnordered` (one node, ~80 bytes, with a waker of
//! its own, so a wake-up polls only that entry), run by one task of the session's [`TaskSet`]:
//! cancelling the set drops that task, and with it every entry, as it dropped each task before.
//!
//! [`TaskSet`]: super::tasks::TaskSet

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::FuturesUnordered;
use futures::task::AtomicWaker;
use parking_lot::Mutex;

/// One entry: a request's serving future, boxed at its own size.
pub(crate) type Entry = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the table's handles and its one task share.
#[derive(Debug, Default)]
pub(crate) struct Table {
    inner: Mutex<Inner>,
    /// The running task, woken when an entry is queued.
    waker: AtomicWaker,
    /// Entries queued or running, not yet finished or dropped.
    len: AtomicUsize,
}

#[derive(Default)]
struct Inner {
    /// Entries added since the task last looked.
    queued: Vec<Entry>,
    /// True once the task was started.
    started: bool,
    /// True once the task ended: later entries are dropped unrun.
    closed: bool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("queued", &self.queued.len())
            .field("started", &self.started)
            .field("closed", &self.closed)
            .finish()
    }
}

impl Table {
    /// Adds `entry`. Returns the task to run the table if it is not running yet (the caller
    /// spawns it once); `entry` is dropped unrun once the table has stopped.
    pub(crate) fn add(self: &Arc<Self>, entry: Entry) -> Option<Runner> {
        let start = {
            let mut inner = self.inner.lock();
            if inner.closed {
                drop(inner);
                drop(entry);
                return None;
            }
            inner.queued.push(entry);
            self.len.fetch_add(1, Ordering::Relaxed);
            !std::mem::replace(&mut inner.started, true)
        };
        self.waker.wake();
        start.then(|| Runner {
            table: self.clone(),
            running: FuturesUnordered::new(),
        })
    }

    /// Entries queued or running.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

/// The one task that polls every entry of a [`Table`]. Dropping it (the session's tasks are
/// cancelled) drops every entry and closes the table.
pub(crate) struct Runner {
    table: Arc<Table>,
    running: FuturesUnordered<Entry>,
}

impl Future for Runner {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Registered before looking at the queue, so an entry added after the look wakes us.
        self.table.waker.register(cx.waker());
        let queued = std::mem::take(&mut self.table.inner.lock().queued);
        self.running.extend(queued);
        loop {
            match Pin::new(&mut self.running).poll_next(cx) {
                Poll::Ready(Some(())) => {
                    self.table.len.fetch_sub(1, Ordering::Relaxed);
                }
                // Empty, or every entry waits (or the set yielded to the scheduler, having
                // asked to be polled again): the table runs as long as the session.
                Poll::Ready(None) | Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let queued = {
            let mut inner = self.table.inner.lock();
            inner.closed = true;
            std::mem::take(&mut inner.queued)
        };
        self.table.len.store(0, Ordering::Relaxed);
        // Dropped outside the lock: an entry's drop may add another (which is dropped unrun).
        drop(queued);
        self.running.clear();
    }
}
