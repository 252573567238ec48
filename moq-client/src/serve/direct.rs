//! Direct writes: once a subgroup's stream is open and its first object written, the objects
//! that follow are written to the stream by the call that appends them to the cache (a relay's
//! upstream reader, a publishing application), on its stack. No task is woken for them: the
//! subgroup's serving future, and the subscription's and the session's futures above it,
//! sleep until the subgroup ends or the stream needs them (the transport blocks, a write
//! fails). With a thousand subscribers that is a thousand wake-ups, three levels of
//! `FuturesUnordered` each, less per object.
//!
//! The stream has one writer at a time: the serving future, or the appender while the
//! [`Direct`] holds the stream. Both write under its lock, at the position it keeps, so an
//! object appended while the stream changes hands is written once, in order.

use std::future::Future as _;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll, Waker};

use moq_transport::track::SubgroupSender;
use parking_lot::Mutex;

use super::{ServeStats, count};
use crate::cache::{Follower, Subgroup, SubgroupEnd};
use crate::error::Error;

/// One subgroup stream of one subscription, written to by its subgroup's appender while it
/// holds the stream (see the module). Dropping it (with its serving future) drops the stream
/// it holds, which resets it.
pub(super) struct Direct {
    state: Mutex<State>,
    stats: Option<Arc<ServeStats>>,
}

struct State {
    /// The stream, while the appender writes to it.
    stream: Option<SubgroupSender>,
    /// The position in the subgroup of the next object to write.
    next: usize,
    /// The serving future's task, woken to take the stream back.
    waker: Option<Waker>,
    /// Why the stream was handed back, until the serving future took it.
    back: Option<Back>,
    /// Whether the subgroup knows this follower.
    following: bool,
}

/// Why the appender handed the stream back to the serving future.
pub(super) enum Back {
    /// The transport did not take a write at once (flow control): the object (its payload
    /// length and when it was received) is accepted, and the serving future counts it in
    /// the backlog until the stream took it.
    Blocked(usize, std::time::Instant),
    /// A write failed (the stream is reset).
    Failed(Error),
    /// The subgroup ended, or the appender could not write (see [`Follower::appended`] for
    /// [`Direct`]): the serving future takes the next object itself.
    Resume,
}

impl Direct {
    pub(super) fn new(stats: Option<Arc<ServeStats>>) -> Arc<Self> {
        Arc::new(Direct {
            state: Mutex::new(State {
                stream: None,
                next: 0,
                waker: None,
                back: None,
                following: false,
            }),
            stats,
        })
    }

    /// Hands `stream` to the appender of `sg`, from position `next` on, and waits until it
    /// hands it back: `stream` and `next` are then where it left them.
    ///
    /// Cancel safe: dropped, the stream stays here until [`Direct::take`] or the drop of
    /// this.
    pub(super) async fn follow(
        self: &Arc<Self>,
        sg: &Subgroup,
        stream: &mut Option<SubgroupSender>,
        next: &mut usize,
    ) -> Back {
        {
            let mut st = self.state.lock();
            st.stream = stream.take();
            st.next = *next;
            st.back = None;
            st.waker = None;
            if !std::mem::replace(&mut st.following, true) {
                drop(st);
                let me: Arc<dyn Follower> = self.clone();
                let weak: Weak<dyn Follower> = Arc::downgrade(&me);
                sg.follow(weak);
            }
        }
        std::future::poll_fn(|cx| {
            let mut st = self.state.lock();
            if st.back.is_none() {
                st.waker = Some(cx.waker().clone());
                // What was appended before the subgroup knew us, or while the stream was
                // ours; and what a spurious wake-up finds.
                self.write_ready(&mut st, sg);
            }
            match st.back.take() {
                Some(back) => {
                    *stream = st.stream.take();
                    *next = st.next;
                    st.waker = None;
                    Poll::Ready(back)
                }
                None => Poll::Pending,
            }
        })
        .await
    }

    /// The stream, if this holds it (its serving future was dropped while it did).
    pub(super) fn take(&self) -> Option<SubgroupSender> {
        self.state.lock().stream.take()
    }

    /// Writes the objects of `sg` from the next position on while the transport takes them at
    /// once, handing the stream back when it does not (or a write fails).
    fn write_ready(&self, st: &mut State, sg: &Subgroup) {
        let State {
            stream,
            next,
            waker,
            back,
            ..
        } = st;
        let Some(waker) = waker.as_ref() else {
            return;
        };
        let mut cx = Context::from_waker(waker);
        while back.is_none()
            && let Some(s) = stream.as_mut()
        {
            let o = match sg.get(*next) {
                Ok(o) => o,
                Err(SubgroupEnd::Open) => return,
                // Ended before the subgroup knew us, or while it told us of an append.
                Err(_) => {
                    *back = Some(Back::Resume);
                    return;
                }
            };
            *next += 1;
            let (len, received) = (o.payload.len(), o.received);
            let write = s.write(o.id, &o.properties, o.status, o.payload, Some(received));
            match std::pin::pin!(write).poll(&mut cx) {
                Poll::Ready(Ok(())) => count(self.stats.as_deref(), len, received),
                Poll::Ready(Err(e)) => *back = Some(Back::Failed(e.into())),
                // Staged: the serving future waits for the transport to take it.
                Poll::Pending => *back = Some(Back::Blocked(len, received)),
            }
        }
    }

    fn hand_back(st: &mut State, back: Back) {
        if st.stream.is_some() && st.back.is_none() {
            st.back = Some(back);
            if let Some(w) = &st.waker {
                w.wake_by_ref();
            }
        }
    }
}

impl Follower for Direct {
    /// Writes what was appended, unless called outside a tokio runtime (an application's
    /// thread of its own): a write may start a task (a flusher for bytes the transport did
    /// not take at once), so the serving future, which runs in one, takes over then.
    fn appended(&self, sg: &Subgroup) {
        let mut st = self.state.lock();
        if st.stream.is_none() || st.back.is_some() {
            return;
        }
        if tokio::runtime::Handle::try_current().is_err() {
            Self::hand_back(&mut st, Back::Resume);
            return;
        }
        self.write_ready(&mut st, sg);
        if st.back.is_some()
            && let Some(w) = &st.waker
        {
            w.wake_by_ref();
        }
    }

    fn ended(&self) {
        Self::hand_back(&mut self.state.lock(), Back::Resume);
    }
}
