//! [`Gated`]: one future polled only when its own waker fired, the one-slot form of what a
//! `FuturesUnordered` does for each of its futures, at a fraction of its memory.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::future::BoxFuture;
use futures::task::AtomicWaker;

/// A slot for one future that waits long (a subscription's [`Watch`](super::Watch)) inside a
/// `select!` that wakes often (for every object of its subgroups). The future gets a waker of
/// its own and is polled only after that waker fired: a wake-up for an object does not poll
/// it. A `FuturesUnordered` holding one future did the same with a stub task and a task node
/// (~390 bytes per subscription); this is one small `Arc`.
///
/// Empty, it is pending forever. Dropping it drops the future.
pub(super) struct Gated<T> {
    future: Option<BoxFuture<'static, T>>,
    gate: Arc<Gate>,
}

/// Whether the future's waker fired since it was last polled, and the task to wake.
#[derive(Default)]
struct Gate {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Gate {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<T> Gated<T> {
    /// A slot holding `future`, polled at once on the first poll.
    pub(super) fn new(future: BoxFuture<'static, T>) -> Self {
        let gate = Arc::new(Gate::default());
        gate.woken.store(true, Ordering::Relaxed);
        Gated {
            future: Some(future),
            gate,
        }
    }

    /// Puts `future` in the (empty) slot, to be polled on the next poll.
    pub(super) fn set(&mut self, future: BoxFuture<'static, T>) {
        self.future = Some(future);
        self.gate.woken.store(true, Ordering::Release);
    }
}

impl<T> Future for Gated<T> {
    type Output = T;

    /// Resolves with the future's output, once; the slot is then empty until [`Gated::set`].
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let this = &mut *self;
        let Some(future) = this.future.as_mut() else {
            return Poll::Pending;
        };
        // Registered before the flag is read, so a wake-up after the read wakes the task.
        this.gate.task.register(cx.waker());
        if !this.gate.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let waker = Waker::from(this.gate.clone());
        let out = future.as_mut().poll(&mut Context::from_waker(&waker));
        if out.is_ready() {
            this.future = None;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use futures::FutureExt;
    use std::time::Duration;
    use tokio::sync::oneshot;

    /// The future is polled first, then only when its own waker fires; its output is taken
    /// once, and a future set again is polled again.
    #[tokio::test]
    async fn polls_only_after_its_own_wakeup() {
        tokio::time::timeout(Duration::from_secs(5), async {
            let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let (tx, rx) = oneshot::channel::<u32>();
            let counted = polls.clone();
            let mut rx = Some(rx);
            let mut gated = Gated::new(
                futures::future::poll_fn(move |cx| {
                    counted.fetch_add(1, Ordering::Relaxed);
                    rx.as_mut().unwrap().poll_unpin(cx).map(Result::unwrap)
                })
                .boxed(),
            );
            assert!((&mut gated).now_or_never().is_none());
            // Not woken: not polled.
            assert!((&mut gated).now_or_never().is_none());
            assert!((&mut gated).now_or_never().is_none());
            assert_eq!(polls.load(Ordering::Relaxed), 1);
            tx.send(7).unwrap();
            assert_eq!((&mut gated).await, 7);
            assert_eq!(polls.load(Ordering::Relaxed), 2);
            // Empty: pending, until set again.
            assert!((&mut gated).now_or_never().is_none());
            gated.set(async { 8 }.boxed());
            assert_eq!((&mut gated).await, 8);
        })
        .await
        .unwrap();
    }
}
