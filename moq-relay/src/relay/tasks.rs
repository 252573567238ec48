//! The one owner of the relay's own tasks.

use std::future::Future;

use futures::FutureExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TrackedFuture;

/// Every task the relay runs outside its sessions: the accept loop, one per session it dialed
/// (a session a client opened is served by an entry of that session's table), each upstream
/// subscription and accepted PUBLISH, the links it dials, its timers and metrics
/// upkeep. Cancelling the set drops every task at its next poll; [`TaskSet::stopped`] then
/// resolves once all are gone. A clone is the same set.
#[derive(Clone, Debug, Default)]
pub(super) struct TaskSet {
    tracker: TaskTracker,
    cancel: CancellationToken,
}

impl TaskSet {
    /// Runs `task` until it completes or the set is cancelled. After cancellation it is
    /// dropped without running. Aborting the handle drops it too.
    pub(super) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) -> JoinHandle<()> {
        // Boxed: the task is kept once, not again inside `run_until_cancelled_owned`. After
        // cancellation it resolves at its first poll.
        let run = self
            .cancel
            .clone()
            .run_until_cancelled_owned(Box::pin(task));
        self.tracker.spawn(run.map(drop))
    }

    /// `task`, counted by the set while it lives (for a task spawned into a `JoinSet` that a
    /// task of this set owns and drops with it).
    pub(super) fn track<F: Future>(&self, task: F) -> TrackedFuture<F> {
        self.tracker.track_future(task)
    }

    /// Cancels every task, now and to come.
    pub(super) fn cancel(&self) {
        self.tracker.close();
        self.cancel.cancel();
    }

    /// Tasks still alive.
    pub(super) fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Resolves once the set was cancelled and every task has stopped. Cancel safe.
    pub(super) async fn stopped(&self) {
        self.cancel.cancelled().await;
        self.tracker.wait().await;
    }
}
