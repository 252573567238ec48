//! Where a subscriber's streams get their session, and the tasks they run in.

use std::future::Future;

use moq_transport::WeakSession;
use tokio::sync::watch;

use crate::error::Error;

/// Where a [`Subscriber`](crate::Subscriber) gets its session: one fixed session, or the
/// latest of a reconnecting client. It holds the session weakly: the streams it serves do not
/// keep a session open that the application dropped.
#[derive(Clone, Debug)]
pub(crate) struct SessionSource {
    /// The current session, `None` while (re)connecting.
    pub(crate) current: watch::Receiver<Option<WeakSession>>,
    /// True if a lost session is replaced (reconnecting client).
    pub(crate) reconnects: bool,
    /// The subscriber's tasks (one per subscription, discovery and join): they outlive a
    /// reconnecting client's sessions, and end on their own once the session (or client) is
    /// gone and their error delivered.
    pub(crate) tasks: Tasks,
}

/// Tasks that a handle owns: counted, cancelled by [`Tasks::cancel`], awaited by
/// [`Tasks::stopped`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Tasks {
    tracker: tokio_util::task::TaskTracker,
    cancel: tokio_util::sync::CancellationToken,
}

impl Tasks {
    /// Runs `task` until it completes or the set is cancelled (after that, not at all).
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        if !self.cancel.is_cancelled() {
            let run = self.cancel.clone().run_until_cancelled_owned(task);
            self.tracker.spawn(async move {
                run.await;
            });
        }
    }

    /// Cancels every task, now and to come.
    pub(crate) fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Tasks alive.
    pub(crate) fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Resolves once no task is alive (those spawned meanwhile included).
    pub(crate) async fn stopped(&self) {
        // Closing only lets `wait` resolve once empty; tasks may still be spawned.
        self.tracker.close();
        self.tracker.wait().await;
    }
}

impl SessionSource {
    /// The current session, waiting for one while reconnecting. A fixed session that ended
    /// yields its error.
    pub(crate) async fn session(&self) -> Result<moq_transport::Session, Error> {
        let mut rx = self.current.clone();
        loop {
            let s = rx.borrow_and_update().as_ref().map(WeakSession::upgrade);
            match s {
                Some(Some(s)) => match s.close_reason() {
                    None => return Ok(s),
                    Some(e) if !self.reconnects => return Err(e.into()),
                    Some(_) => {}
                },
                Some(None) if !self.reconnects => return Err(dropped()),
                _ => {}
            }
            if rx.changed().await.is_err() {
                return Err(dropped());
            }
        }
    }
}

/// The error of a stream whose session or client the application dropped.
fn dropped() -> Error {
    moq_transport::Error::Closed {
        code: moq_core::codes::SessionErrorCode::NO_ERROR,
        reason: "client dropped".into(),
    }
    .into()
}
