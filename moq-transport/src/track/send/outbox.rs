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
//! Why: quinn keeps every written chunk as a segment of the stream's send buffer and walks the
//! unacknowledged segments for each packet it builds, so a 1 KiB chunk per object costs it far
//! more than the bytes.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};
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

/// A subgroup stream with its held bytes, shared with the flusher task while one runs.
#[derive(Debug)]
pub(super) struct Outbox(Arc<Mutex<Inner>>);

#[derive(Debug)]
struct Inner {
    /// `None` once finished or reset.
    stream: Option<BoxSendStream>,
    /// Chunks handed over, in stream order, before `open`; none is empty.
    queued: Vec<Bytes>,
    queued_len: usize,
    /// Small objects collected behind `queued`.
    open: BytesMut,
    /// A flusher task owns handing the held bytes over.
    flushing: bool,
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

impl Inner {
    fn held(&self) -> usize {
        self.queued_len + self.open.len()
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

    /// Hands held bytes to the stream until all are taken (`Ready(Ok)`) or it cannot take more
    /// (`Pending`, the task woken when it can).
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), TransportError>> {
        loop {
            if self.queued.is_empty() {
                if self.open.is_empty() {
                    self.large = false;
                    return Poll::Ready(Ok(()));
                }
                self.seal();
            }
            let Some(stream) = self.stream.as_mut() else {
                return Poll::Ready(Err(TransportError::StreamClosed));
            };
            let n = ready!(stream.poll_write_chunks(cx, &mut self.queued))?;
            if n == 0 {
                // A transport that accepts nothing without waiting would spin here.
                return Poll::Ready(Err(TransportError::Other(
                    "stream accepted no bytes".into(),
                )));
            }
            self.queued_len -= n;
            self.queued.retain(|b| !b.is_empty());
        }
    }

    fn discard(&mut self) {
        self.large = false;
        self.queued.clear();
        self.queued_len = 0;
        self.open.clear();
    }

    fn wake(&mut self) {
        if let Some(w) = self.waiter.take() {
            w.wake();
        }
    }
}

impl Outbox {
    pub(super) fn new(stream: BoxSendStream) -> Self {
        Outbox(Arc::new(Mutex::new(Inner {
            stream: Some(stream),
            queued: Vec::new(),
            queued_len: 0,
            open: BytesMut::new(),
            flushing: false,
            last_send: None,
            large: false,
            error: None,
            waiter: None,
        })))
    }

    /// Whether the stream was neither finished nor reset.
    pub(super) fn is_open(&self) -> bool {
        self.0.lock().stream.is_some()
    }

    /// Appends one object's header (taken out of `header`) and payload: a small payload copied
    /// behind its header, a large one as a chunk of its own. The stream's first object is not
    /// copied: it goes to the transport from the write (see [`Outbox::send`]), so with one
    /// stream per object nothing is copied or allocated for coalescing. Nothing goes to the
    /// stream until [`Outbox::send`].
    pub(super) fn stage(&self, header: &mut BytesMut, payload: Bytes) {
        let mut inner = self.0.lock();
        if inner.last_send.is_none() && inner.held() == 0 {
            // Two chunks in one transport write, the header's allocation shared with the
            // sender's buffer.
            inner.push(header.split().freeze());
            inner.large = payload.len() > COALESCE_MAX;
            inner.push(payload);
        } else if payload.len() <= COALESCE_MAX {
            inner.append([&header[..], &payload]);
        } else {
            inner.append([&header[..], &[]]);
            inner.seal();
            inner.push(payload);
            inner.large = true;
        }
    }

    /// Hands what was staged to the stream: at once if it takes it without waiting, else to a
    /// flusher task that does as soon as it can. Waits only while [`HOLD_MAX`] bytes or more
    /// are held, or, when a payload larger than [`COALESCE_MAX`] was staged, until the
    /// transport took everything (as without coalescing). Once the stream failed, here or in
    /// the flusher, this and every later call fail with that error.
    ///
    /// Cancel-safe when only small payloads were staged: they are sent whether or not this
    /// resolves. With a large one, dropped before it resolves, the rest waits for the next
    /// call.
    pub(super) async fn send(&self, session: &SessionCore) -> Result<(), TransportError> {
        poll_fn(|cx| {
            let mut inner = self.0.lock();
            if let Some(e) = inner.error.clone() {
                inner.discard();
                return Poll::Ready(Err(e));
            }
            let now = Instant::now();
            let paused = inner
                .last_send
                .is_none_or(|t| now.duration_since(t) > DIRECT_GAP);
            inner.last_send = Some(now);
            if !inner.flushing {
                // The stream's first write (its header and first object: a stream per object
                // pays no task), a write after a pause (a live object) and large payloads go
                // to the transport from here.
                if paused || inner.large {
                    if let Poll::Ready(r) = inner.poll_drain(cx) {
                        if let Err(e) = &r {
                            inner.discard();
                            inner.error = Some(e.clone());
                        }
                        return Poll::Ready(r);
                    }
                    if inner.large {
                        // Written as before coalescing: the writer waits for the transport.
                        return Poll::Pending;
                    }
                }
                // A flusher hands the bytes over as soon as the writer's task lets a worker
                // run it (it yields, or the other worker is free), or the transport takes
                // data; meanwhile later writes append to them.
                // The flusher is a task of the session's own set: cancelled when the session
                // ends, like every task of ours.
                inner.flushing = true;
                session.spawn(flush_task(Flusher {
                    out: self.0.clone(),
                    done: false,
                }));
            }
            if !inner.large && inner.held() < HOLD_MAX {
                return Poll::Ready(Ok(()));
            }
            inner.waiter = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Resolves once the stream took every byte written so far.
    ///
    /// Cancel-safe.
    pub(super) async fn flush(&self, session: &SessionCore) -> Result<(), TransportError> {
        self.send(session).await?;
        poll_fn(|cx| {
            let mut inner = self.0.lock();
            if let Some(e) = inner.error.clone() {
                return Poll::Ready(Err(e));
            }
            if inner.stream.is_none() {
                // Reset: what was held is gone.
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            if !inner.flushing {
                return Poll::Ready(Ok(()));
            }
            inner.waiter = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Takes the stream and the bytes it has not taken yet, in order, to finish it; a running
    /// flusher stops.
    pub(super) fn take(&self) -> Option<(BoxSendStream, Vec<Bytes>)> {
        let mut inner = self.0.lock();
        let stream = inner.stream.take()?;
        inner.seal();
        inner.queued_len = 0;
        Some((stream, std::mem::take(&mut inner.queued)))
    }

    /// Resets the stream with `code`, discarding held bytes; `false` if it was already closed.
    pub(super) fn reset(&self, code: u64) -> bool {
        let mut inner = self.0.lock();
        inner.discard();
        match inner.stream.take() {
            Some(mut s) => {
                s.reset(code);
                true
            }
            None => false,
        }
    }
}

/// The flusher's hold on an outbox. Dropped before the flusher finished (the session's task
/// set was cancelled, or refused it because the session had ended), it fails the outbox so
/// that a writer waiting for held bytes to leave wakes with an error rather than waiting for
/// ever.
struct Flusher {
    out: Arc<Mutex<Inner>>,
    /// It ended by itself (the outbox's `flushing` is no longer its own: a later write may
    /// already have started the next flusher).
    done: bool,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inner = self.out.lock();
        inner.flushing = false;
        inner.discard();
        if inner.error.is_none() {
            inner.error = Some(TransportError::ClosedLocally);
        }
        inner.wake();
    }
}

/// Hands held bytes to the stream as it takes them, until none are held, the stream failed
/// (kept for the writer's next call) or it was taken or reset.
async fn flush_task(mut flusher: Flusher) {
    poll_fn(|cx| {
        let mut inner = flusher.out.lock();
        if inner.stream.is_none() {
            inner.flushing = false;
            inner.wake();
            flusher.done = true;
            return Poll::Ready(());
        }
        let r = inner.poll_drain(cx);
        if let Poll::Ready(r) = r {
            if let Err(e) = r {
                inner.discard();
                inner.error = Some(e);
            }
            inner.flushing = false;
            inner.wake();
            flusher.done = true;
            return Poll::Ready(());
        }
        if inner.held() < HOLD_MAX {
            inner.wake();
        }
        Poll::Pending
    })
    .await
}
