//! One direction of one in-memory stream: a bounded buffer with the writer's and the reader's
//! ends of the stream (FIN, RESET_STREAM, STOP_SENDING), and the wakers of both halves.
//!
//! A pipe knows nothing of the connection: each poll takes a `closed` check, called after its
//! waker is registered, that says whether the pair was closed.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::AtomicWaker;
use parking_lot::Mutex;

use crate::transport::TransportError;

/// The writer's side of a pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SendState {
    Open,
    Finished,
    Reset(u64),
}

/// One direction of one stream.
pub(super) struct Pipe {
    /// Bytes buffered unread before writes wait.
    capacity: usize,
    state: Mutex<PipeState>,
    /// The reader waiting for data, the FIN or a reset.
    reader: AtomicWaker,
    /// The writer waiting for room.
    writer: AtomicWaker,
    /// The writer waiting for STOP_SENDING or the end of the stream.
    stopped: AtomicWaker,
}

struct PipeState {
    chunks: VecDeque<Bytes>,
    buffered: usize,
    send: SendState,
    /// STOP_SENDING from the reader.
    stop: Option<u64>,
    /// The reader has read the FIN.
    read_fin: bool,
}

impl Pipe {
    /// A pipe buffering up to `capacity` bytes (at least 1).
    pub(super) fn new(capacity: usize) -> Arc<Pipe> {
        Arc::new(Pipe {
            capacity: capacity.max(1),
            state: Mutex::new(PipeState {
                chunks: VecDeque::new(),
                buffered: 0,
                send: SendState::Open,
                stop: None,
                read_fin: false,
            }),
            reader: AtomicWaker::new(),
            writer: AtomicWaker::new(),
            stopped: AtomicWaker::new(),
        })
    }

    /// Changes the state and wakes both halves.
    fn update<R>(&self, f: impl FnOnce(&mut PipeState) -> R) -> R {
        let r = f(&mut self.state.lock());
        self.wake_all();
        r
    }

    /// Wakes both halves (the pair was closed).
    pub(super) fn wake_all(&self) {
        self.reader.wake();
        self.wake_writer();
    }

    fn wake_writer(&self) {
        self.writer.wake();
        self.stopped.wake();
    }

    /// Lets `put` queue up to `room` bytes of the `wanted`, once there is room; returns how
    /// many it queued. Fails if the stream ended, or `closed` says the connection did, first.
    pub(super) fn poll_put(
        &self,
        cx: &mut Context<'_>,
        closed: impl FnOnce() -> Option<TransportError>,
        wanted: usize,
        put: impl FnOnce(&mut VecDeque<Bytes>, usize) -> usize,
    ) -> Poll<Result<usize, TransportError>> {
        if wanted == 0 {
            return Poll::Ready(Ok(0));
        }
        // Registered before the checks, so a change made after them wakes us.
        self.writer.register(cx.waker());
        if let Some(e) = closed() {
            return Poll::Ready(Err(e));
        }
        let n = {
            let mut st = self.state.lock();
            if st.send != SendState::Open {
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            if let Some(code) = st.stop {
                return Poll::Ready(Err(TransportError::Stopped(code)));
            }
            let room = self.capacity.saturating_sub(st.buffered);
            if room == 0 {
                return Poll::Pending;
            }
            let n = put(&mut st.chunks, room.min(wanted));
            st.buffered += n;
            n
        };
        self.reader.wake();
        Poll::Ready(Ok(n))
    }

    /// Resolves with the reader's STOP_SENDING code, or `None` once the reader has everything
    /// up to the FIN or the stream was reset; fails if `closed` says the connection ended.
    pub(super) fn poll_stopped(
        &self,
        cx: &mut Context<'_>,
        closed: impl FnOnce() -> Option<TransportError>,
    ) -> Poll<Result<Option<u64>, TransportError>> {
        self.stopped.register(cx.waker());
        let closed = closed();
        let st = self.state.lock();
        if let Some(code) = st.stop {
            return Poll::Ready(Ok(Some(code)));
        }
        match st.send {
            SendState::Reset(_) => return Poll::Ready(Ok(None)),
            SendState::Finished if st.read_fin => return Poll::Ready(Ok(None)),
            _ => {}
        }
        match closed {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Pending,
        }
    }

    /// The writer sends the FIN; fails if it already finished or reset.
    pub(super) fn finish(&self) -> Result<(), TransportError> {
        self.update(|st| match st.send {
            SendState::Open => {
                st.send = SendState::Finished;
                Ok(())
            }
            _ => Err(TransportError::StreamClosed),
        })
    }

    /// The writer resets the pipe, discarding the data not read yet, unless it already ended.
    pub(super) fn reset(&self, code: u64) {
        self.update(|st| {
            // A reset after the FIN still reaches a reader that has not read everything.
            let ended = matches!(st.send, SendState::Reset(_))
                || (st.send == SendState::Finished && st.read_fin);
            if !ended {
                st.send = SendState::Reset(code);
                st.chunks.clear();
                st.buffered = 0;
            }
        });
    }

    /// Reads the chunks held, up to `bufs.len()` of them and each of up to `max` bytes, into
    /// the front of `bufs` (how many), or `None` at the FIN; fails on a reset, after a stop, or
    /// if `closed` says the connection ended.
    pub(super) fn poll_read(
        &self,
        cx: &mut Context<'_>,
        closed: impl FnOnce() -> Option<TransportError>,
        bufs: &mut [Bytes],
        max: usize,
    ) -> Poll<Result<Option<usize>, TransportError>> {
        // Registered before the checks, so a change made after them wakes us.
        self.reader.register(cx.waker());
        let closed = closed();
        let read = {
            let mut st = self.state.lock();
            if st.read_fin {
                return Poll::Ready(Ok(None));
            }
            if let Some(e) = closed {
                return Poll::Ready(Err(e));
            }
            if let SendState::Reset(code) = st.send {
                return Poll::Ready(Err(TransportError::Reset(code)));
            }
            if st.stop.is_some() {
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            if !st.chunks.is_empty() {
                let mut n = 0;
                for buf in bufs.iter_mut() {
                    let Some(front) = st.chunks.front_mut() else {
                        break;
                    };
                    let chunk = if front.len() <= max {
                        let chunk = std::mem::take(front);
                        st.chunks.pop_front();
                        chunk
                    } else {
                        front.split_to(max)
                    };
                    st.buffered = st.buffered.saturating_sub(chunk.len());
                    *buf = chunk;
                    n += 1;
                }
                Some(n)
            } else if st.send == SendState::Finished {
                st.read_fin = true;
                None
            } else {
                return Poll::Pending;
            }
        };
        // Room for the writer, or the FIN read (which `stopped` waits for).
        self.wake_writer();
        Poll::Ready(Ok(read))
    }

    /// The reader stops the pipe, unless it already ended.
    pub(super) fn stop(&self, code: u64) {
        self.update(|st| {
            if st.read_fin || st.stop.is_some() || matches!(st.send, SendState::Reset(_)) {
                return;
            }
            st.stop = Some(code);
            st.chunks.clear();
            st.buffered = 0;
        });
    }

    /// Adds the writer's view of the state to a `Debug` output.
    pub(super) fn debug_writer(&self, d: &mut fmt::DebugStruct<'_, '_>) {
        let st = self.state.lock();
        d.field("state", &st.send)
            .field("buffered", &st.buffered)
            .field("stopped", &st.stop);
    }

    /// Adds the reader's view of the state to a `Debug` output.
    pub(super) fn debug_reader(&self, d: &mut fmt::DebugStruct<'_, '_>) {
        let st = self.state.lock();
        d.field("buffered", &st.buffered)
            .field("sender", &st.send)
            .field("read_fin", &st.read_fin)
            .field("stopped", &st.stop);
    }
}
