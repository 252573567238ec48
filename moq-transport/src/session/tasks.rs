//! The one owner of a session's tasks.

use std::future::Future;
use std::sync::Arc;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::table::{Entry, Table};

/// Every task a session runs: its one driving task (the connection's watch beside its request
/// table, whose entries are its accept loops and every request's serving future, see
/// [`TaskSet::start`] and [`TaskSet::serve`]), its timers, and those the application hands it.
/// Cancelling the set drops every task, and so every request, at its next poll; nothing needs
/// to watch for the end of the session itself.
#[derive(Debug, Default)]
pub(crate) struct TaskSet {
    tracker: TaskTracker,
    cancel: CancellationToken,
    requests: Arc<Table>,
}

impl TaskSet {
    /// Runs `task` until it completes or the set is cancelled, whichever comes first. After
    /// cancellation, new tasks are dropped without running.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        if self.cancel.is_cancelled() {
            return;
        }
        // Boxed, and mapped rather than awaited in an async block: `run_until_cancelled_owned`
        // keeps its future twice (as moved in and as awaited), so inline a task would take twice
        // its size for its whole life (a request's, or a namespace's).
        let run = self
            .cancel
            .clone()
            .run_until_cancelled_owned(Box::pin(task));
        self.tracker.spawn(run.map(drop));
    }

    /// Starts the session's driving task, the one task every session has: the request table,
    /// whose entries are the session's waiting parts (its accept loops, the control stream,
    /// every request) and, as a part of the table's own, `watch` (the task that cancels the
    /// set). One task where there were four: each cost a task header, a cancellation wrapper
    /// and a slot in the tracker (docs/benchmarks.md, "idle6"). Each part is polled only when
    /// it was woken: beside the table in a `join`, the watch and the cancellation were polled
    /// at every wake-up of any request.
    pub(crate) fn start(&self, watch: impl Future<Output = ()> + Send + 'static) {
        if let Some(runner) = self.requests.start(Box::pin(watch), &self.cancel) {
            self.tracker.spawn(runner);
        }
    }

    /// Runs a request's `task` as an entry of the session's request table: polled by the
    /// session's task ([`TaskSet::start`]; without it, a task started with the first entry),
    /// not as a task of its own. Like a task,
    /// it is dropped when the set is cancelled, and dropped unrun after that.
    pub(crate) fn serve(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.serve_entry(Box::pin(task));
    }

    /// [`TaskSet::serve`] for a task boxed already (not boxed again).
    pub(crate) fn serve_entry(&self, entry: Entry) {
        if self.cancel.is_cancelled() {
            return;
        }
        // The runner ends itself when the set is cancelled.
        if let Some(runner) = self.requests.add(entry, &self.cancel) {
            self.tracker.spawn(runner);
        }
    }

    /// Cancels every task, now and to come.
    pub(crate) fn cancel(&self) {
        self.tracker.close();
        self.cancel.cancel();
    }

    /// Tasks still alive, counting each entry of the request table as one.
    pub(crate) fn len(&self) -> usize {
        self.tracker.len() + self.requests.len()
    }

    /// Resolves once the set was cancelled and every task has stopped.
    pub(crate) async fn stopped(&self) {
        self.cancel.cancelled().await;
        self.tracker.wait().await;
    }
}
