//! A subgroup's serving future, run until its subscription's backlog passes its bound.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Poll, Waker};

use tokio_util::sync::CancellationToken;

/// Runs `fut` until it ends (`Some` of its output) or `token` is cancelled (`None`); whoever
/// cancels `token` sets `flag` first.
///
/// What a `select!` on `fut` and `token.cancelled()` does, cheaper: a `select!` polls the
/// cancellation at every wake-up, which locks the token's node and its `Notify`'s waiters, and
/// here a wake-up is one object for one subscriber. This polls the cancellation to register
/// its waker, then again only when the waker changed or `flag` is set.
///
/// Cancel safe if `fut` is.
pub(super) async fn until_cancelled<F: Future>(
    fut: F,
    token: &CancellationToken,
    flag: &AtomicBool,
) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut cancelled = pin!(token.cancelled());
    let mut registered: Option<Waker> = None;
    poll_fn(|cx| {
        let stale = registered.as_ref().is_none_or(|w| !w.will_wake(cx.waker()));
        if stale || flag.load(Ordering::Acquire) {
            if cancelled.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            if stale {
                registered = Some(cx.waker().clone());
            }
        }
        fut.as_mut().poll(cx).map(Some)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A cancellation made while `fut` waits wakes and ends the wait, with the waker
    /// registered only at the first poll.
    #[tokio::test]
    async fn ends_when_cancelled_while_waiting() {
        let token = CancellationToken::new();
        let flag = AtomicBool::new(false);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let cancel = async {
            tokio::task::yield_now().await;
            flag.store(true, Ordering::Release);
            token.cancel();
        };
        let run = until_cancelled(rx, &token, &flag);
        let (out, ()) =
            tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(run, cancel) })
                .await
                .expect("the cancellation ends the wait");
        assert!(out.is_none());
        drop(tx);
    }

    /// Without a cancellation, the future's output comes through.
    #[tokio::test]
    async fn passes_the_output() {
        let token = CancellationToken::new();
        let flag = AtomicBool::new(false);
        let out = tokio::time::timeout(
            Duration::from_secs(5),
            until_cancelled(async { 7 }, &token, &flag),
        )
        .await
        .expect("ready at once");
        assert_eq!(out, Some(7));
    }
}
