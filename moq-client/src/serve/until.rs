//! A subgroup's serving future, run until its subscription's backlog passes its bound.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::{Poll, Waker};

use super::backlog::Backlog;

/// Runs `fut` until it ends (`Some` of its output) or `backlog` passes its bound (`None`).
///
/// What a `select!` on `fut` and [`Backlog::exceeded`] does, cheaper: a `select!` polls the
/// wait at every wake-up, which locks its `Notify`'s waiters, and here a wake-up is one object
/// for one subscriber. This polls the wait to register its waker, then only when the waker
/// changed; the flag it reads at every poll is one atomic load.
///
/// Cancel safe if `fut` is.
pub(super) async fn until_cancelled<F: Future>(fut: F, backlog: &Backlog) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let mut exceeded = pin!(backlog.exceeded_wait());
    let mut registered: Option<Waker> = None;
    poll_fn(|cx| {
        if registered.as_ref().is_none_or(|w| !w.will_wake(cx.waker())) {
            // Registered before the flag is read: a bound passed after the read wakes us.
            if exceeded.as_mut().poll(cx).is_pending() {
                registered = Some(cx.waker().clone());
            }
        }
        if backlog.is_over() {
            return Poll::Ready(None);
        }
        fut.as_mut().poll(cx).map(Some)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Passing the bound while `fut` waits wakes and ends the wait, with the waker registered
    /// only at the first poll.
    #[tokio::test]
    async fn ends_when_the_bound_is_passed_while_waiting() {
        let backlog = Backlog::new(10, None);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let pass = async {
            tokio::task::yield_now().await;
            let mut p = super::super::backlog::Pending::new(backlog.clone());
            p.add(11);
        };
        let run = until_cancelled(rx, &backlog);
        let (out, ()) =
            tokio::time::timeout(Duration::from_secs(5), async { tokio::join!(run, pass) })
                .await
                .expect("passing the bound ends the wait");
        assert!(out.is_none());
        drop(tx);
    }

    /// Within the bound, the future's output comes through.
    #[tokio::test]
    async fn passes_the_output() {
        let backlog = Backlog::new(10, None);
        let out = tokio::time::timeout(
            Duration::from_secs(5),
            until_cancelled(async { 7 }, &backlog),
        )
        .await
        .expect("ready at once");
        assert_eq!(out, Some(7));
    }
}
