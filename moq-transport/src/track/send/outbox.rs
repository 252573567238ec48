//! [`Outbox`]: a subgroup stream and the bytes written to it that the transport has not taken
//! yet, so that many small writes become few transport writes.
//!
//! The rule: a write goes to the transport from the writer, on the writer's stack, as without
//! coalescing, when it is the stream's first, when it comes more than [`DIRECT_GAP`] after the
//! previous write (a live object leaves with its write, its payload not copied when nothing is
//! held) or when it carries a large payload.
//! Small objects written back to back are copied into allocations that grow to [`BLOCK_MAX`];
//! the writer hands full ones over itself once [`INLINE_MIN`] bytes of them are held (no task
//! hop). What a write leaves held is the job of a flusher task, so that no further write or
//! flush is needed for it to leave: the flusher hands it over at once when the writer has
//! stopped (it looks again after letting other tasks run); while the writer goes on writing it
//! leaves the hand-over to it, looking again every [`DIRECT_GAP`] (a tokio timer: about a
//! millisecond); and when the transport cannot take more (flow control), it waits for the
//! transport and then hands over everything held at once. Writes wait only while
//! [`HOLD_MAX`] bytes are held.
//!
//! Why: quinn keeps every written chunk as a segment of the stream's send buffer and walks the
//! unacknowledged segments for each packet it builds, so a small chunk per object costs it far
//! more than the bytes (docs/benchmarks.md, "thru6": 4 KiB chunks put quinn's walk at 8 % of
//! the CPU); and a hand-over from another task costs wake-ups of both tasks.
//!
//! Two locks: the held bytes (taken for every write, briefly) and the stream (taken to hand
//! bytes over, which locks quinn's connection). The bytes' lock is never held while the
//! stream's is taken, so a writer appending never waits for a hand-over in progress (it did:
//! the writer and the flusher spun on one lock, ~4,000 `sched_yield`s a second).

use std::future::poll_fn;
use std::pin::pin;
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
pub(super) const HOLD_MAX: usize = 128 * 1024;
/// The largest allocation small objects are copied into: the size of the chunks the
/// transport sees when objects are written back to back (quinn walks its send buffer's
/// chunks for every packet it builds, so fewer chunks cost it less).
const BLOCK_MAX: usize = 64 * 1024;
/// Full chunks of this many bytes are handed over by the writer itself, whatever the time
/// since its previous write.
const INLINE_MIN: usize = 32 * 1024;
/// The allocation small objects are copied into while the transport takes them as written
/// (several objects share one).
const DIRECT_BLOCK: usize = 16 * 1024;
/// A write this long after the previous one goes to the transport from the writer: a live
/// stream's objects (milliseconds apart) leave with their write, never a task hop later;
/// objects written back to back are coalesced. Also how long a flusher waits before it looks
/// again at a writer still writing.
const DIRECT_GAP: Duration = Duration::from_micros(100);
/// The smallest allocation for headers alone.
const MIN_BLOCK: usize = 256;

/// A subgroup stream with its held bytes, shared with the flusher task while one runs.
#[derive(Debug)]
pub(super) struct Outbox(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    held: Mutex<Held>,
    /// Locked only to hand bytes over (and to finish or reset), never while `held` is.
    stream: Mutex<Slot>,
}

/// The stream and the chunks taken from [`Held`] for it that it has not accepted yet.
#[derive(Debug)]
struct Slot {
    /// `None` once finished or reset.
    stream: Option<BoxSendStream>,
    /// In stream order, before [`Held::queued`]; none is empty.
    taken: Vec<Bytes>,
}

#[derive(Debug)]
struct Held {
    /// Chunks handed over, in stream order, before `open`; none is empty.
    queued: Vec<Bytes>,
    queued_len: usize,
    /// Small objects collected behind `queued`.
    open: BytesMut,
    /// The size of `open`'s allocation when it was made: the next is twice as large, up to
    /// [`BLOCK_MAX`], while objects are written back to back.
    block: usize,
    /// Bytes in [`Slot::taken`].
    taken_len: usize,
    /// The stream was finished or reset.
    closed: bool,
    /// A flusher task owns handing over what a write leaves held.
    flushing: bool,
    /// The transport took less than it was offered: the flusher waits for it, and writes do
    /// not try until it took everything.
    blocked: bool,
    /// The flusher, waiting for the writer to stop or for a time to pass; woken when the
    /// transport blocks a write.
    flusher: Option<Waker>,
    /// Calls of [`Outbox::send`], for the flusher to tell whether the writer is still writing.
    writes: u64,
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
    /// allocation. When its allocation is full the next is sized for several such objects
    /// and twice the previous one: after the stream's first write, up to [`BLOCK_MAX`], so
    /// that the transport sees large chunks.
    fn append(&mut self, parts: [&[u8]; 2]) {
        let need = parts[0].len() + parts[1].len();
        if self.open.capacity() - self.open.len() < need {
            self.seal();
            let max = if self.last_send.is_some() {
                BLOCK_MAX
            } else {
                DIRECT_BLOCK
            };
            self.block = need
                .saturating_mul(4)
                .max(self.block.saturating_mul(2))
                .clamp(MIN_BLOCK, max);
            self.open = BytesMut::with_capacity(self.block.max(need));
        }
        for p in parts {
            self.open.extend_from_slice(p);
        }
    }

    /// See [`Outbox::stage`]; `now` is when the write came.
    fn stage(&mut self, header: &mut BytesMut, payload: Bytes, now: Instant) -> bool {
        if self.closed {
            return false;
        }
        // The stream's first object, or one after a pause: it leaves with its write.
        if self.held() == 0 && self.paused(now) {
            // Nothing to coalesce with: two chunks in one transport write, the payload the
            // caller's own `Bytes` (a relay's cached object), not a copy. Copied, every live
            // object of a relay's subscriber cost an allocation, the copy and a shared chunk's
            // drop: ~4.6 % of the relay's CPU at 1,000 subscribers (docs/benchmarks.md). The
            // header takes the sender's buffer with it (a split would share it, which costs
            // an allocation per stream: with one stream per object, 1.5 % of the CPU); a
            // later object's header grows a new one.
            self.push(std::mem::take(header).freeze());
            self.large = payload.len() > COALESCE_MAX;
            self.push(payload);
        } else if payload.len() <= COALESCE_MAX {
            self.append([&header[..], &payload]);
        } else {
            self.append([&header[..], &[]]);
            self.seal();
            self.push(payload);
            self.large = true;
        }
        true
    }

    /// A write at `now` comes after a pause (or is the stream's first): its object leaves
    /// with it.
    fn paused(&self, now: Instant) -> bool {
        self.last_send
            .is_none_or(|t| now.duration_since(t) > DIRECT_GAP)
    }

    fn discard(&mut self) {
        self.large = false;
        self.queued.clear();
        self.queued_len = 0;
        self.open.clear();
    }

    /// The stream failed: what is held is gone, and every later call fails with `e`.
    fn fail(&mut self, e: TransportError) {
        self.discard();
        self.error.get_or_insert(e);
        self.wake();
    }

    fn wake(&mut self) {
        if let Some(w) = self.waiter.take() {
            w.wake();
        }
    }
}

impl Shared {
    /// Hands held bytes to the stream until all are taken (`Ready(Ok)`) or it cannot take more
    /// (`Pending`, the task woken when it can). Without `all`, the objects collected in the
    /// open allocation stay (the writer hands over full chunks only). Called with `slot`
    /// locked and `held` not.
    fn poll_drain(
        &self,
        slot: &mut Slot,
        all: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Result<(), TransportError>> {
        loop {
            if slot.taken.is_empty() {
                let mut held = self.held.lock();
                if all {
                    held.seal();
                }
                if held.queued.is_empty() {
                    if held.open.is_empty() {
                        held.large = false;
                    }
                    held.blocked = false;
                    return Poll::Ready(Ok(()));
                }
                std::mem::swap(&mut slot.taken, &mut held.queued);
                held.taken_len += held.queued_len;
                held.queued_len = 0;
            }
            let Some(stream) = slot.stream.as_mut() else {
                return Poll::Ready(Err(TransportError::StreamClosed));
            };
            let n = match stream.poll_write_chunks(cx, &mut slot.taken) {
                Poll::Pending => {
                    self.held.lock().blocked = true;
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => {
                    slot.taken.clear();
                    let mut held = self.held.lock();
                    held.taken_len = 0;
                    held.fail(e.clone());
                    return Poll::Ready(Err(e));
                }
                // A transport that accepts nothing without waiting would spin here.
                Poll::Ready(Ok(0)) => {
                    let e = TransportError::Other("stream accepted no bytes".into());
                    slot.taken.clear();
                    let mut held = self.held.lock();
                    held.taken_len = 0;
                    held.fail(e.clone());
                    return Poll::Ready(Err(e));
                }
                Poll::Ready(Ok(n)) => n,
            };
            slot.taken.retain(|b| !b.is_empty());
            let mut held = self.held.lock();
            held.taken_len -= n;
            if !held.large && held.held() < HOLD_MAX {
                held.wake();
            }
        }
    }
}

impl Outbox {
    pub(super) fn new(stream: BoxSendStream) -> Self {
        Outbox(Arc::new(Shared {
            held: Mutex::new(Held {
                queued: Vec::new(),
                queued_len: 0,
                open: BytesMut::new(),
                block: 0,
                taken_len: 0,
                closed: false,
                flushing: false,
                blocked: false,
                flusher: None,
                writes: 0,
                last_send: None,
                large: false,
                error: None,
                waiter: None,
            }),
            stream: Mutex::new(Slot {
                stream: Some(stream),
                taken: Vec::new(),
            }),
        }))
    }

    /// Appends one object's header (taken out of `header`) and payload: a small payload copied
    /// behind its header, a large one as a chunk of its own. The stream's first object is not
    /// copied, nor one written at `now` after a pause with nothing held: it goes to the
    /// transport from the write (see [`Outbox::send`]), so with one stream per object, or
    /// objects that come apart (live), nothing is copied or allocated for coalescing. Nothing
    /// goes to the stream until [`Outbox::send`]. `false` (nothing staged) if the stream was
    /// finished or reset.
    pub(super) fn stage(&self, header: &mut BytesMut, payload: Bytes, now: Instant) -> bool {
        self.0.held.lock().stage(header, payload, now)
    }

    /// Hands held bytes over from the caller's stack. `None` if a flusher is on it (handing
    /// over, or waiting for a blocked transport). `Ready(Ok)` once the transport took them
    /// all; `Pending` if it blocked (the task is registered with the transport, and a
    /// flusher, if one runs, is told to take over).
    fn poll_hand_over(
        &self,
        all: bool,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Result<(), TransportError>>> {
        let mut slot = self.0.stream.try_lock()?;
        {
            // The flusher marks the transport blocked before it lets go of the stream: it
            // waits for the transport, which wakes one task only.
            let held = self.0.held.lock();
            if held.blocked && held.flushing {
                return None;
            }
        }
        let r = self.0.poll_drain(&mut slot, all, cx);
        drop(slot);
        if r.is_pending() {
            let mut held = self.0.held.lock();
            if let Some(w) = held.flusher.take() {
                w.wake();
            }
        }
        Some(r)
    }

    /// Hands what was staged to the stream (see the module's rule): from here if it is due,
    /// else left to a flusher task. Waits only while [`HOLD_MAX`] bytes or more are held, or,
    /// when a payload larger than [`COALESCE_MAX`] was staged, until the transport took
    /// everything (as without coalescing). Once the stream failed, here or in the flusher,
    /// this and every later call fail with that error.
    ///
    /// Cancel-safe when only small payloads were staged: they are sent whether or not this
    /// resolves. With a large one, dropped before it resolves, the rest waits for the next
    /// call.
    pub(super) async fn send(&self, session: &SessionCore) -> Result<(), TransportError> {
        self.stage_and_send(session, None).await.map(|_| ())
    }

    /// [`Outbox::stage`] of one object and [`Outbox::send`], with the held bytes locked once
    /// for both (a write per object is the common case). `Ok(false)` (nothing staged, nothing
    /// sent) if the stream was finished or reset.
    pub(super) async fn write(
        &self,
        session: &SessionCore,
        header: &mut BytesMut,
        payload: Bytes,
    ) -> Result<bool, TransportError> {
        self.stage_and_send(session, Some((header, payload))).await
    }

    async fn stage_and_send(
        &self,
        session: &SessionCore,
        mut object: Option<(&mut BytesMut, Bytes)>,
    ) -> Result<bool, TransportError> {
        // The clock is read before the lock, not under it (the flusher and the transport's
        // hand-over take the same lock).
        let mut first = Some(Instant::now());
        poll_fn(|cx| {
            let mut held = self.0.held.lock();
            // The object is staged on the first poll, when `first` is the write's time.
            if let (Some(now), Some((header, payload))) = (first, object.take())
                && !held.stage(header, payload, now)
            {
                return Poll::Ready(Ok(false));
            }
            if let Some(e) = held.error.clone() {
                held.discard();
                return Poll::Ready(Err(e));
            }
            // Everything goes with a large payload or after a pause; while objects come back
            // to back, full chunks.
            let mut all = held.large;
            if let Some(now) = first.take() {
                held.writes += 1;
                if held.paused(now) {
                    // A live object: the next back-to-back run starts with small allocations.
                    all = true;
                    held.block = 0;
                }
                held.last_send = Some(now);
            }
            let due = all || held.queued_len >= INLINE_MIN;
            if due && !(held.blocked && held.flushing) && held.held() > 0 {
                drop(held);
                let r = self.poll_hand_over(all, cx);
                if let Some(Poll::Ready(Err(e))) = r {
                    return Poll::Ready(Err(e));
                }
                held = self.0.held.lock();
                if r.is_some_and(|r| r.is_pending()) && held.large && !held.flushing {
                    // Written as before coalescing: the writer waits for the transport.
                    return Poll::Pending;
                }
            }
            if !held.flushing && held.held() > 0 {
                // A flusher makes sure the held bytes leave without a further call. It is a
                // task of the session's own set: cancelled when the session ends, like every
                // task of ours.
                held.flushing = true;
                let seen = held.writes;
                session.spawn(flush_task(Flusher {
                    out: self.0.clone(),
                    done: false,
                    seen,
                }));
            }
            if !held.large && held.held() < HOLD_MAX {
                return Poll::Ready(Ok(true));
            }
            held.waiter = Some(cx.waker().clone());
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
            let mut held = self.0.held.lock();
            if let Some(e) = held.error.clone() {
                return Poll::Ready(Err(e));
            }
            if held.closed {
                // Reset: what was held is gone.
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            if held.held() == 0 {
                return Poll::Ready(Ok(()));
            }
            if !(held.blocked && held.flushing) {
                drop(held);
                let r = self.poll_hand_over(true, cx);
                if let Some(Poll::Ready(r)) = r {
                    return Poll::Ready(r);
                }
                held = self.0.held.lock();
                if r.is_some() && !held.flushing {
                    // Registered with the transport by the hand-over.
                    return Poll::Pending;
                }
            }
            held.waiter = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }

    /// Takes the stream and the bytes it has not taken yet, in order, to finish it; a running
    /// flusher stops.
    pub(super) fn take(&self) -> Option<(BoxSendStream, Vec<Bytes>)> {
        let mut slot = self.0.stream.lock();
        let stream = slot.stream.take()?;
        let mut chunks = std::mem::take(&mut slot.taken);
        let mut held = self.0.held.lock();
        held.closed = true;
        held.seal();
        held.queued_len = 0;
        held.taken_len = 0;
        chunks.append(&mut held.queued);
        if let Some(w) = held.flusher.take() {
            w.wake();
        }
        Some((stream, chunks))
    }

    /// Resets the stream with `code`, discarding held bytes; `false` if it was already closed.
    pub(super) fn reset(&self, code: u64) -> bool {
        let mut slot = self.0.stream.lock();
        slot.taken.clear();
        let stream = slot.stream.take();
        let mut held = self.0.held.lock();
        held.discard();
        held.taken_len = 0;
        held.closed = true;
        if let Some(w) = held.flusher.take() {
            w.wake();
        }
        drop(held);
        match stream {
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
    out: Arc<Shared>,
    /// It ended by itself (the outbox's `flushing` is no longer its own: a later write may
    /// already have started the next flusher).
    done: bool,
    /// The writer's count of writes when the flusher last looked.
    seen: u64,
}

impl Drop for Flusher {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut held = self.out.held.lock();
        held.flushing = false;
        held.flusher = None;
        held.fail(TransportError::ClosedLocally);
    }
}

/// What the flusher does next.
enum Step {
    /// Hand the held bytes over.
    Drain,
    /// The writer is still writing: look again later.
    Linger,
    /// Nothing left to do.
    Done,
}

/// Makes sure held bytes leave: hands them over once the writer stopped writing or the
/// transport blocked, leaving the hand-over to a writer still writing; ends when nothing is
/// held and the writer stopped, or the stream failed or was finished or reset.
async fn flush_task(mut flusher: Flusher) {
    // Other tasks run first: a writer that stopped has, when this runs again, written
    // nothing since the flusher first looked.
    flusher.seen = flusher.out.held.lock().writes;
    tokio::task::yield_now().await;
    loop {
        let step = {
            let held = flusher.out.held.lock();
            let active = held.writes != flusher.seen;
            flusher.seen = held.writes;
            if held.closed || held.error.is_some() {
                Step::Done
            } else if held.held() == 0 {
                if active { Step::Linger } else { Step::Done }
            } else if active && !held.blocked && !held.large {
                Step::Linger
            } else {
                Step::Drain
            }
        };
        match step {
            Step::Done => break,
            Step::Drain => {
                let r = poll_fn(|cx| {
                    {
                        // Woken, besides by the transport, when the stream is finished or
                        // reset, or a write took the transport's wake-up.
                        let mut held = flusher.out.held.lock();
                        if held.closed {
                            return Poll::Ready(Ok(()));
                        }
                        held.flusher = Some(cx.waker().clone());
                    }
                    let mut slot = flusher.out.stream.lock();
                    flusher.out.poll_drain(&mut slot, true, cx)
                })
                .await;
                if r.is_err() {
                    break;
                }
                flusher.out.held.lock().wake();
            }
            Step::Linger => {
                let mut sleep = pin!(tokio::time::sleep(DIRECT_GAP));
                poll_fn(|cx| {
                    let mut held = flusher.out.held.lock();
                    if held.closed || held.blocked || held.error.is_some() {
                        held.flusher = None;
                        return Poll::Ready(());
                    }
                    if sleep.as_mut().poll(cx).is_ready() {
                        held.flusher = None;
                        return Poll::Ready(());
                    }
                    held.flusher = Some(cx.waker().clone());
                    Poll::Pending
                })
                .await;
            }
        }
    }
    let mut held = flusher.out.held.lock();
    held.flushing = false;
    held.flusher = None;
    held.wake();
    flusher.done = true;
}
