//! [`Gate`]: a poll function polled only when its own waker fired, the one-slot form of what a
//! `FuturesUnordered` does for each of its futures, at a fraction of its memory.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// A gate for one poll function that waits long (a subscription's [`Watch`](super::Watch))
/// inside a `select!` that wakes often (for every object of its subgroups). The function is
/// given a waker of its own and is called only after that waker fired: a wake-up for an
/// object does not call it. A `FuturesUnordered` holding one future did the same with a stub
/// task and a task node (~390 bytes per subscription); this is one small `Arc`.
///
/// Dropping it does nothing else.
pub(super) struct Gate(Arc<Flag>);

/// Whether the gate's waker fired since the function was last called, and the task to wake.
#[derive(Default)]
struct Flag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl Gate {
    /// A gate whose function is called on the first poll.
    pub(super) fn new() -> Self {
        let flag = Arc::new(Flag::default());
        flag.woken.store(true, Ordering::Relaxed);
        Gate(flag)
    }

    /// Calls `poll` with the gate's own waker if that waker fired since the last call, or the
    /// last call was ready (what it waits for may be ready again at once); else `Pending`,
    /// with the task of `cx` to be woken when the gate's waker fires.
    pub(super) fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        // Registered before the flag is read, so a wake-up after the read wakes the task.
        self.0.task.register(cx.waker());
        if !self.0.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let waker = Waker::from(self.0.clone());
        let out = poll(&mut Context::from_waker(&waker));
        if out.is_ready() {
            self.0.woken.store(true, Ordering::Release);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use futures::FutureExt;
    use std::future::poll_fn;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;
    use tokio::sync::oneshot;

    /// The function is called first, then only when its own waker fires, and at once again
    /// after it was ready.
    #[tokio::test]
    async fn polls_only_after_its_own_wakeup() {
        tokio::time::timeout(Duration::from_secs(5), async {
            let gate = Gate::new();
            let polls = AtomicUsize::new(0);
            let (tx, rx) = oneshot::channel::<u32>();
            let mut rx = Some(rx);
            let mut next = |cx: &mut Context<'_>| {
                gate.poll(cx, |cx| {
                    polls.fetch_add(1, Ordering::Relaxed);
                    // After its value, ready with 0.
                    let Some(r) = rx.as_mut() else {
                        return Poll::Ready(0);
                    };
                    let v = std::task::ready!(r.poll_unpin(cx)).unwrap();
                    rx = None;
                    Poll::Ready(v)
                })
            };
            let mut idle = Context::from_waker(futures::task::noop_waker_ref());
            assert!(next(&mut idle).is_pending());
            // Not woken: not called.
            assert!(next(&mut idle).is_pending());
            assert!(next(&mut idle).is_pending());
            assert_eq!(polls.load(Ordering::Relaxed), 1);
            tx.send(7).unwrap();
            assert_eq!(poll_fn(&mut next).await, 7);
            assert_eq!(polls.load(Ordering::Relaxed), 2);
            // Ready last time: called again at once.
            assert_eq!(next(&mut idle), Poll::Ready(0));
            assert_eq!(polls.load(Ordering::Relaxed), 3);
        })
        .await
        .unwrap();
    }
}
