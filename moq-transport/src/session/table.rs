//! The session's request table: every request's serving future, polled by one task.
//!
//! A request that lives long (an accepted PUBLISH_NAMESPACE, a subscription's control side, a
//! SUBSCRIBE_NAMESPACE) spends its life waiting. As a tokio task each, it cost a task header,
//! a cancellation wrapper and a slot in the session's task tracker (~570 bytes) on top of its
//! future. Here it is an entry of a `FuturesUnordered` (one node, ~80 bytes, with a waker of
//! its own, so a wake-up polls only that entry), run by the session's one task ([`TaskSet`]):
//! cancelling the set ends the table's runner, and with it every entry, as it dropped each task
//! before.
//!
//! The runner's own parts (the connection's watch, the wait for the set's cancellation) are
//! entries too, so a wake-up of one request polls neither of them: a `join` beside the set
//! polled both at every object a subscription served (docs/benchmarks.md, "the session's
//! driving task").
//!
//! [`TaskSet`]: super::tasks::TaskSet

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use futures::future::CatchUnwind;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, Stream};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

/// One entry: a request's serving future, boxed at its own size.
pub(crate) type Entry = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the table's handles and its one task share.
#[derive(Debug, Default)]
pub(crate) struct Table {
    inner: Mutex<Inner>,
    /// Set when `inner.queued` may hold entries: the runner takes the lock only then, not at
    /// every wake-up.
    queued: AtomicBool,
    /// Entries queued or running, not yet finished or dropped (the runner's own parts not
    /// counted).
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
    /// The running task, woken (and kept: its task is the same at every poll) when an entry
    /// is queued.
    waker: Option<Waker>,
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
    /// spawns it once; it ends when `cancel` is cancelled); `entry` is dropped unrun once the
    /// table has stopped.
    pub(crate) fn add(
        self: &Arc<Self>,
        entry: Entry,
        cancel: &CancellationToken,
    ) -> Option<Runner> {
        self.queue(entry, true, cancel)
    }

    /// Starts the table with `watch` as a part of its runner (not counted in [`Table::len`],
    /// run to its end unless the set is cancelled first): returns the task to run the table
    /// unless it was started already (then the running task takes `watch` in). The session's
    /// driver starts it with the session, before the first entry.
    pub(crate) fn start(
        self: &Arc<Self>,
        watch: Entry,
        cancel: &CancellationToken,
    ) -> Option<Runner> {
        self.queue(watch, false, cancel)
    }

    fn queue(
        self: &Arc<Self>,
        entry: Entry,
        counted: bool,
        cancel: &CancellationToken,
    ) -> Option<Runner> {
        let (start, waker) = {
            let mut inner = self.inner.lock();
            if inner.closed {
                drop(inner);
                drop(entry);
                return None;
            }
            inner.queued.push(entry);
            if counted {
                self.len.fetch_add(1, Ordering::Relaxed);
            }
            self.queued.store(true, Ordering::Release);
            // Taken under the lock the runner registers under, woken outside it.
            let waker = inner.waker.clone();
            (!std::mem::replace(&mut inner.started, true), waker)
        };
        if let Some(w) = waker {
            w.wake();
        }
        start.then(|| self.runner(cancel))
    }

    fn runner(self: &Arc<Self>, cancel: &CancellationToken) -> Runner {
        let running = FuturesUnordered::new();
        // The runner's end: once this entry is done, the set is cancelled.
        let cancelled: Entry = Box::pin(cancel.clone().cancelled_owned());
        running.push(AssertUnwindSafe(cancelled).catch_unwind());
        Runner {
            table: self.clone(),
            running,
            cancel: cancel.clone(),
            registered: None,
        }
    }

    /// Entries queued or running.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }
}

/// The one task that polls every entry of a [`Table`], until the session's tasks are
/// cancelled. Its end or its drop drops every entry and closes the table.
///
/// An entry that panics ends alone, as a task of its own did: the others run on.
pub(crate) struct Runner {
    table: Arc<Table>,
    running: FuturesUnordered<CatchUnwind<AssertUnwindSafe<Entry>>>,
    /// Looked at only when an entry ends (one of them waits for it).
    cancel: CancellationToken,
    /// The waker last left in the table for queued entries: left again only when the task's
    /// waker changes, not at every poll (an atomic registration per poll was ~1 % of a relay
    /// serving 1,000 sessions, one poll per object served).
    registered: Option<Waker>,
}

impl Future for Runner {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Registered before looking at the queue, so an entry added after the look wakes us:
        // `queue` sets the flag and takes the waker under the lock this takes.
        if !self
            .registered
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            let waker = cx.waker().clone();
            self.table.inner.lock().waker = Some(waker.clone());
            self.registered = Some(waker);
        }
        if self.table.queued.swap(false, Ordering::Acquire) {
            let queued = std::mem::take(&mut self.table.inner.lock().queued);
            self.running.extend(
                queued
                    .into_iter()
                    .map(|e| AssertUnwindSafe(e).catch_unwind()),
            );
        }
        loop {
            match Pin::new(&mut self.running).poll_next(cx) {
                Poll::Ready(Some(done)) => {
                    if self.cancel.is_cancelled() {
                        return Poll::Ready(());
                    }
                    // Not the cancellation's wait, which ends only with the set. The
                    // connection's watch ends by cancelling the set (above), so what ends here
                    // is a counted entry.
                    self.table.len.fetch_sub(1, Ordering::Relaxed);
                    if done.is_err() {
                        tracing::error!("a request's serving future panicked");
                    }
                }
                // Every entry waits (or the set yielded to the scheduler, having asked to be
                // polled again): the table runs as long as the session. Never empty: the
                // cancellation's wait is an entry until the end.
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
            inner.waker = None;
            std::mem::take(&mut inner.queued)
        };
        self.table.len.store(0, Ordering::Relaxed);
        // Dropped outside the lock: an entry's drop may add another (which is dropped unrun).
        drop(queued);
        self.running.clear();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use std::time::Duration;
    use tokio::sync::oneshot;

    /// Entries run on the one runner; a panicking entry ends alone; dropping the runner drops
    /// every entry and closes the table.
    #[tokio::test]
    async fn entries_run_end_alone_and_drop_with_the_runner() {
        tokio::time::timeout(Duration::from_secs(5), async {
            let table = Arc::new(Table::default());
            let cancel = CancellationToken::new();
            let (tx, rx) = oneshot::channel::<()>();
            let (done_tx, done_rx) = oneshot::channel();
            let runner = table
                .add(
                    Box::pin(async move {
                        let _ = rx.await;
                        let _ = done_tx.send(());
                    }),
                    &cancel,
                )
                .expect("the first entry starts the runner");
            assert!(
                table
                    .add(Box::pin(async { panic!("boom") }), &cancel)
                    .is_none()
            );
            let (kept_tx, kept_rx) = oneshot::channel::<()>();
            assert!(
                table
                    .add(
                        Box::pin(async move {
                            let _keep = kept_tx;
                            std::future::pending::<()>().await;
                        }),
                        &cancel
                    )
                    .is_none()
            );
            assert_eq!(table.len(), 3);
            let task = tokio::spawn(runner);
            tx.send(()).unwrap();
            done_rx.await.unwrap();
            // The panicking entry and the finished one are gone; the waiting one runs on.
            while table.len() != 1 {
                tokio::task::yield_now().await;
            }
            task.abort();
            assert!(kept_rx.await.is_err(), "dropped with the runner");
            assert_eq!(table.len(), 0);
            assert!(table.add(Box::pin(async {}), &cancel).is_none());
            assert_eq!(table.len(), 0, "dropped unrun once closed");
        })
        .await
        .unwrap();
    }
}
