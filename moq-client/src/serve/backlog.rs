//! What one subscription's subgroup streams still have to send ([`Backlog`]), each stream's
//! share of it ([`Pending`]), and the signal that it passed its bound.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

    /// Resolves once the backlog passed its bound.
    ///
    /// Cancel safe.
    pub(super) async fn exceeded(&self) {
        loop {
            let wait = self.exceeded.notified();
            tokio::pin!(wait);
            wait.as_mut().enable();
            if self.is_over() {
                return;
            }
            wait.await;
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
