//! [`Outbox`]: a subgroup stream and the bytes written to it that the transport has not taken
//! yet, so that many small writes become few transport writes.
//!
//! The rule: a write goes to the transport from the writer, as without coalescing, when it is
//! the stream's first, when it comes more than [`DIRECT_GAP`] after the previous write (a live
//! object leaves with its write) or when it carries a large payload. Small objects written
//! back to back are appended to one buffer that a flusher task hands over as soon as a worker
//! is free (no further write or flush is needed for them to leave); while it is behind, later
//! writes append to the buffer, which the transport then sees as one chunk, until
//! [`HOLD_MAX`] bytes are held, when the writer waits.
//!
//! The held bytes and the stream are under separate locks: the flusher holds the stream's
//! while the transport takes chunks (quinn takes its connection's lock then, which its driver
//! holds while it builds packets), and a writer appending meanwhile takes only the bytes'. One
//! flusher task per outbox, started at the first burst, parks between bursts and is woken by
//! the writer rather than a task spawned per burst; it ends with the stream.
//!
//! Why: quinn keeps every written chunk as a segment of the stream's send buffer and walks the
//! unacknowledged segments for each packet it builds, so a 1 KiB chunk per object costs it far
//! more than the bytes.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;

use crate::session::SessionCore;
use crate::transport::{BoxSendStream, TransportError};

/// Payloads up to this size are copied behind their header into one buffer; larger ones are
/// handed to the transport as chunks of their own, without a copy.
pub(super) const COALESCE_MAX: usize = 4 * 1024;
/// The most bytes held for the transport before a write waits for it.
pub(super) const HOLD_MAX: usize = 64 * 1024;
/// The allocation small objects are copied into while the transport takes them as written
/// (several objects share one).
const DIRECT_BLOCK: usize = 16 * 1024;
/// A write this long after the previous one goes to the transport from the writer: a live
/// stream's objects (milliseconds apart) leave with their write, never a task hop later;
/// objects written back to back are coalesced.
const DIRECT_GAP: Duration = Duration::from_micros(100);
/// The smallest allocation for headers alone.
const MIN_BLOCK: usize = 256;

/// A subgroup stream with its held bytes, shared with its flusher task once one runs.
#[derive(Debug)]
pub(super) struct Outbox(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    /// The stream and the chunks taken from `held` that it has not taken yet. Locked first
    /// when both are.
    wire: Mutex<Wire>,
    held: Mutex<Held>,
}

#[derive(Debug)]
struct Wire {
    /// `None` once finished or reset.
    stream: Option<BoxSendStream>,
    /// Chunks taken out of [`Held`], in stream order, ahead of what it holds; none is empty.
    taken: Vec<Bytes>,
}

#[derive(Debug)]
struct Held {
    /// Chunks handed over, in stream order, before `open`; none is empty.
    queued: Vec<Bytes>,
    queued_len: usize,
    /// Small objects collected behind `queued`.
    open: BytesMut,
    /// Bytes in [`Wire::taken`].
    taken_len: usize,
    /// The stream was finished or reset (kept here so that a writer never waits for the
    /// stream's lock to know).
    closed: bool,
    /// The flusher owns handing the held bytes over.
    flushing: bool,
    /// A flusher task was started (it runs until the stream is gone).
    flusher: bool,
    /// The parked flusher, woken when it has bytes to hand over again.
    flusher_waker: Option<Waker>,
    /// When the writer last called [`Outbox::send`] (`None` before the first write).
    last_send: Option<Instant>,
    /// A large payload is held: the writer waits until the transport took everything, as
    /// large objects gain nothing from being held.
    large: bool,
    /// What a write to the stream failed with: every later call fails with it (the stream
    /// is dead).
    error: Option<TransportError>,
    /// The writer, waiting for the held bytes to drop below [`HOLD_MAX`] or to be flushed.
    waiter: Option<Waker>,
}

impl Held {
    fn held(&self) -> usize {
        self.queued_len + self.open.len() + self.taken_len
    }

    /// Moves `open` to the end of `queued`.
    fn seal(&mut self) {
        if !self.open.is_empty() {
            let chunk = self.open.split().freeze();
            self.queued_len += chunk.len();
            self.queued.push(chunk);
        }
    }

    fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.queued_len += chunk.len();
            self.queued.push(chunk);
        }
    }

    /// Copies `parts` (a header and a small payload) behind what `open` holds, in one
    /// allocation. When its allocation is full the next is sized
    /// for several such objects: after the stream's first write, up to [`HOLD_MAX`], so that
    /// the transport sees large chunks.
    fn append(&mut self, parts: [&[u8]; 2]) {
        let need = parts[0].len() + parts[1].len();
        if self.open.capacity() - self.open.len() < need {
            self.seal();
            let block = if self.last_send.is_some() {
                HOLD_MAX
            } else {
                DIRECT_BLOCK
            };
            let cap = need.saturating_mul(4).clamp(MIN_BLOCK, block);
            self.open = BytesMut::with_capacity(cap.max(need));
        }
        for p in parts {
            self.open.extend_from_slice(p);
        }
    }

    /// Moves every held chunk to `taken` (empty before); `false` if none was held.
    fn take_into(&mut self, taken: &mut Vec<Bytes>) -> bool {
        self.seal();
        if self.queued.is_empty() {
            self.large = false;
            return false;
        }
        std::mem::swap(&mut self.queued, taken);
        self.taken_len += std::mem::take(&mut self.queued_len);
        true
    }

    /// Drops every held byte (those taken for the stream are the caller's to drop).
    fn discard(&mut self) {
        self.large = false;
        self.queued.clear();
        self.queued_len = 0;
        self.open.clear();
        self.taken_len = 0;
    }

    /// Records a failed write: the stream is dead, what it held is dropped.
    fn fail(&mut self, e: TransportError) {
        self.discard();
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    fn wake(&mut self) {
        if let Some(w) = self.waiter.take() {
            w.wake();
        }
    }
}

impl Shared {
    /// Hands held bytes to the stream until all are taken (`Ready(Ok)`) or it cannot take more
    /// (`Pending`, the task woken when it can). The bytes' lock is taken only to move chunks
    /// out and to count what the stream took, never while the stream is called.
    fn poll_drain(
        &self,
        wire: &mut Wire,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), TransportError>> {
        loop {
            if wire.taken.is_empty() && !self.held.lock().take_into(&mut wire.taken) {
                return Poll::Ready(Ok(()));
            }
            let Some(stream) = wire.stream.as_mut() else {
                return Poll::Ready(Err(TransportError::StreamClosed));
            };
            let n = match stream.poll_write_chunks(cx, &mut wire.taken) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(r) => r?,
            };
            if n == 0 {
                // A transport that accepts nothing without waiting would spin here.
                return Poll::Ready(Err(TransportError::Other(
                    "stream accepted no bytes".into(),
                )));
            }
            wire.taken.retain(|b| !b.is_empty());
            let mut held = self.held.lock();
            held.taken_len = held.taken_len.saturating_sub(n);
        }
    }
}

impl Outbox {
    pub(super) fn new(stream: BoxSendStream) -> Self {
        Outbox(Arc::new(Shared {
            wire: Mutex::new(Wire {
                stream: Some(stream),
                taken: Vec::new(),
            }),
            held: Mutex::new(Held {
                queued: Vec::new(),
                queued_len: 0,
                open: BytesMut::new(),
                taken_len: 0,
                closed: false,
                flushing: false,
                flusher: false,
                flusher_waker: None,
                last_send: None,
                large: false,
                error: None,
                waiter: None,
            }),
        }))
    }

    /// Whether the stream was neither finished nor reset.
    pub(super) fn is_open(&self) -> bool {
        !self.0.held.lock().closed
    }

    /// Appends one object's header (taken out of `header`) and payload: a small payload copied
    /// behind its header, a large one as a chunk of its own. The stream's first object is not
    /// copied: it goes to the transport from the write (see [`Outbox::send`]), so with one
    /// stream per object nothing is copied or allocated for coalescing. Nothing goes to the
    /// stream until [`Outbox::send`].
    pub(super) fn stage(&self, header: &mut BytesMut, payload: Bytes) {
        let mut held = self.0.held.lock();
        if held.last_send.is_none() && held.held() == 0 {
            // Two chunks in one transport write, the header's allocation shared with the
            // sender's buffer.
            held.push(header.split().freeze());
            held.large = payload.len() > COALESCE_MAX;
            held.push(payload);
        } else if payload.len() <= COALESCE_MAX {
            held.append([&header[..], &payload]);
        } else {
            held.append([&header[..], &[]]);
            held.seal();
            held.push(payload);
            held.large = true;
        }
    }

    /// Hands what was staged to the stream: at once if it takes it without waiting, else to the
    /// flusher task, which does as soon as it can. Waits only while [`HOLD_MAX`] bytes or more
    /// are held, or, when a payload larger than [`COALESCE_MAX`] was staged, until the
    /// transport took everything (as without coalescing). Once the stream failed, here or in
    /// the flusher, this and every later call fail with that error.
    ///
    /// Cancel-safe when only small payloads were staged: they are sent whether or not this
    /// resolves. With a large one, dropped before it resolves, the rest waits for the next
    /// call.
    pub(super) async fn send(&self, session: &SessionCore) -> Result<(), TransportError> {
        poll_fn(|cx| {
            let direct = {
                let mut held = self.0.held.lock();
                if let Some(e) = held.error.clone() {
                    held.discard();
                    return Poll::Ready(Err(e));
                }
                let now = Instant::now();
                let paused = held
                    .last_send
                    .is_none_or(|t| now.duration_since(t) > DIRECT_GAP);
                held.last_send = Some(now);
                // The stream's first write (its header and first object: a stream per object
                // pays no task), a write after a pause (a live object) and large payloads go
                // to the transport from here, unless the flusher owns the bytes.
                !held.flushing && (paused || held.large)
            };
            if direct {
                let mut wire = self.0.wire.lock();
                match self.0.poll_drain(&mut wire, cx) {
                    Poll::Ready(Ok(())) => return Poll::Ready(Ok(())),
                    Poll::Ready(Err(e)) => {
                        wire.taken.clear();
                        self.0.held.lock().fail(e.clone());
                        return Poll::Ready(Err(e));
                    }
                    Poll::Pending => {}
                }
            }
            let mut held = self.0.held.lock();
            let mut spawn = false;
            if !held.flushing {
                if direct && held.large {
                    // Written as before coalescing: the writer waits for the transport.
                    return Poll::Pending;
                }
                // The flusher hands the bytes over as soon as the writer's task lets a worker
                // run it (it yields, or the other worker is free), or the transport takes
                // data; meanwhile later writes append to them.
                held.flushing = true;
                if let Some(w) = held.flusher_waker.take() {
                    w.wake();
                } else if !held.flusher {
                    held.flusher = true;
                    spawn = true;
                }
            }
            let ready = !held.large && held.held() < HOLD_MAX;
            if !ready {
                held.waiter = Some(cx.waker().clone());
            }
            drop(held);
            if spawn {
                // One task for the outbox's life, of the session's own set: cancelled when the
                // session ends, like every task of ours. Spawned unlocked: one refused (the
                // session ended) is dropped at once, and fails the outbox.
                session.spawn(flush_task(Flusher {
                    out: self.0.clone(),
                    done: false,
                }));
            }
            if ready {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        })
        .await
    }

    /// Resolves once the stream took every byte written so far.
    ///
    /// Cancel-safe.
    pub(super) async fn flush(&self, session: &SessionCore) -> Result<(), TransportError> {
        self.send(session).await?;
        poll_fn(|cx| {
            let mut held = self.0.held.lock();
            if let Some(e) = held.error.clone() {
                return Poll::Ready(Err(e));
            }
            if held.closed {
                // Reset: what was held is gone.
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            if !held.flushing {
                return Poll::Ready(Ok(()));
            }
            held.waiter = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Takes the stream and the bytes it has not taken yet, in order, to finish it; the
    /// flusher stops.
    pub(super) fn take(&self) -> Option<(BoxSendStream, Vec<Bytes>)> {
        let mut wire = self.0.wire.lock();
        let stream = wire.stream.take()?;
        let mut chunks = std::mem::take(&mut wire.taken);
        let mut held = self.0.held.lock();
        held.seal();
        chunks.append(&mut held.queued);
        held.queued_len = 0;
        held.taken_len = 0;
        held.closed = true;
        held.stop_flusher();
        Some((stream, chunks))
    }

    /// Resets the stream with `code`, discarding held bytes; `false` if it was already closed.
    pub(super) fn reset(&self, code: u64) -> bool {
        let mut wire = self.0.wire.lock();
        wire.taken.clear();
        let stream = wire.stream.take();
        let mut held = self.0.held.lock();
        held.discard();
        held.closed = true;
        held.stop_flusher();
        match stream {
            Some(mut s) => {
                s.reset(code);
                true
            }
            None => false,
        }
    }
}

impl Held {
    /// The stream is gone: a parked flusher wakes to end, a running one ends at its next poll.
    fn stop_flusher(&mut self) {
        if let Some(w) = self.flusher_waker.take() {
            w.wake();
        }
    }
}

/// The flusher's hold on an outbox. Dropped before the flusher finished (the session's task
/// set was cancelled, or refused it because the session had ended), it fails the outbox so
/// that a writer waiting for held bytes to leave wakes with an error rather than waiting for
/// ever.
struct Flusher {
    out: Arc<Shared>,
    /// It ended by itself, with the stream.
    done: bool,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut held = self.out.held.lock();
        held.flusher = false;
        held.flusher_waker = None;
        // Parked, it owned nothing: the next burst starts another (which a session that ended
        // refuses, failing the outbox then).
        if std::mem::take(&mut held.flushing) {
            held.fail(TransportError::ClosedLocally);
            held.wake();
        }
    }
}

/// Hands held bytes to the stream as it takes them whenever the writer gives it some, parked
/// in between, until the stream is taken or reset. A failed stream's error is kept for the
/// writer's next call.
async fn flush_task(mut flusher: Flusher) {
    poll_fn(|cx| {
        let out = flusher.out.clone();
        let mut wire = out.wire.lock();
        if wire.stream.is_none() {
            let mut held = out.held.lock();
            held.flushing = false;
            held.flusher = false;
            held.wake();
            flusher.done = true;
            return Poll::Ready(());
        }
        {
            let mut held = out.held.lock();
            if !held.flushing {
                // Parked: nothing given to hand over since the last burst.
                held.flusher_waker = Some(cx.waker().clone());
                return Poll::Pending;
            }
        }
        match out.poll_drain(&mut wire, cx) {
            Poll::Ready(r) => {
                let mut held = out.held.lock();
                match r {
                    Err(e) => {
                        wire.taken.clear();
                        held.fail(e);
                    }
                    Ok(()) if held.held() > 0 => {
                        // Written while the bytes' lock was free: handed over on the next
                        // turn, still this burst's.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                    Ok(()) => {}
                }
                // Everything handed over (or the stream failed): the burst is done, the next
                // write goes to the stream itself or wakes this task again.
                held.flushing = false;
                held.flusher_waker = Some(cx.waker().clone());
                held.wake();
            }
            Poll::Pending => {
                let mut held = out.held.lock();
                if held.held() < HOLD_MAX {
                    held.wake();
                }
            }
        }
        Poll::Pending
    })
    .await
}
