//! What one subscription's subgroup streams still have to send ([`Backlog`]), each stream's
//! share of it ([`Pending`]), and the signal that it passed its bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::task::{Context, Poll};

use futures::task::AtomicWaker;
use tokio::sync::Notify;

use super::ServeStats;

/// What one subscription's subgroup streams still have to send, and the signal that it passed
/// its bound. A flag and a `Notify` in the one `Arc`, not a `CancellationToken` (a tree node
/// of its own, ~100 bytes per subscription).
#[derive(Debug)]
pub(super) struct Backlog {
    bytes: AtomicU64,
    limit: u64,
    /// Set once `bytes` passed `limit`: the subscription ends TOO_FAR_BEHIND. Read for every
    /// object, without a lock.
    over: AtomicBool,
    /// Woken once `over` is set.
    exceeded: Notify,
    /// The task of the last [`Backlog::poll_exceeded`], woken with `exceeded`.
    task: AtomicWaker,
    pub(super) stats: Option<Arc<ServeStats>>,
}

impl Backlog {
    /// A backlog bounded by `limit` bytes, counted in `stats` too.
    pub(super) fn new(limit: u64, stats: Option<Arc<ServeStats>>) -> Arc<Self> {
        Arc::new(Backlog {
            bytes: AtomicU64::new(0),
            limit,
            over: AtomicBool::new(false),
            exceeded: Notify::new(),
            task: AtomicWaker::new(),
            stats,
        })
    }

    fn add(&self, n: u64) {
        let now = self.bytes.fetch_add(n, Ordering::Relaxed).saturating_add(n);
        if let Some(s) = &self.stats {
            s.backlog.fetch_add(n, Ordering::Relaxed);
            s.backlog_peak.fetch_max(now, Ordering::Relaxed);
        }
        if now > self.limit && !self.over.swap(true, Ordering::AcqRel) {
            self.exceeded.notify_waiters();
            self.task.wake();
        }
    }

    fn sub(&self, n: u64) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        if let Some(s) = &self.stats {
            s.backlog.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// Whether the backlog passed its bound.
    pub(super) fn is_over(&self) -> bool {
        self.over.load(Ordering::Acquire)
    }

    /// The wake-up for the backlog passing its bound: poll it (which registers it) before
    /// reading [`Backlog::is_over`], so a bound passed after the read wakes the poller.
    pub(super) fn exceeded_wait(&self) -> tokio::sync::futures::Notified<'_> {
        self.exceeded.notified()
    }

    /// `Ready` once the backlog passed its bound; else `Pending`, with the task of `cx` (the
    /// last call's only) to be woken when it does.
    pub(super) fn poll_exceeded(&self, cx: &mut Context<'_>) -> Poll<()> {
        // Registered before the read: a bound passed after it wakes the task.
        self.task.register(cx.waker());
        if self.is_over() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// One subgroup stream's share of its subscription's [`Backlog`], given back when it is
/// dropped (the stream finished, was reset, or its task was aborted).
pub(super) struct Pending {
    backlog: Arc<Backlog>,
    held: u64,
}

impl Pending {
    /// Nothing held yet of `backlog`.
    pub(super) fn new(backlog: Arc<Backlog>) -> Self {
        Pending { backlog, held: 0 }
    }

    /// The subscription's backlog.
    pub(super) fn backlog(&self) -> &Backlog {
        &self.backlog
    }

    pub(super) fn add(&mut self, n: usize) {
        let n = n as u64;
        self.held += n;
        self.backlog.add(n);
    }

    pub(super) fn sub(&mut self, n: usize) {
        let n = (n as u64).min(self.held);
        self.held -= n;
        self.backlog.sub(n);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.backlog.sub(self.held);
    }
}
