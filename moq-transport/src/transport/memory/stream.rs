//! The two halves of an in-memory stream, each a pipe held with the end it belongs to.

use std::fmt;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use bytes::Bytes;

use super::link::End;
use super::pipe::Pipe;
use crate::transport::{RecvStream, SendStream, TransportError};

/// The sending half of an in-memory stream. Dropped neither finished nor reset, it finishes
/// the stream (like quinn).
pub struct MemorySend {
    end: Arc<End>,
    pipe: Arc<Pipe>,
    priority: i32,
}

impl MemorySend {
    /// The half of `end` that writes into `pipe`.
    pub(super) fn new(end: Arc<End>, pipe: Arc<Pipe>) -> MemorySend {
        MemorySend {
            end,
            pipe,
            priority: 0,
        }
    }
}

impl fmt::Debug for MemorySend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("MemorySend");
        d.field("side", &self.end.side());
        self.pipe.debug_writer(&mut d);
        d.field("priority", &self.priority).finish()
    }
}

impl SendStream for MemorySend {
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, TransportError>> {
        self.pipe.poll_put(
            cx,
            || self.end.close_error(),
            buf.len(),
            |chunks, n| {
                let head = buf.get(..n).unwrap_or(buf);
                chunks.push_back(Bytes::copy_from_slice(head));
                head.len()
            },
        )
    }

    fn poll_write_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<usize, TransportError>> {
        let wanted = bufs.iter().map(Bytes::len).sum();
        self.pipe.poll_put(
            cx,
            || self.end.close_error(),
            wanted,
            |chunks, mut room| {
                let mut put = 0;
                for b in bufs.iter_mut().filter(|b| !b.is_empty()) {
                    if room == 0 {
                        break;
                    }
                    let n = room.min(b.len());
                    chunks.push_back(b.split_to(n));
                    room -= n;
                    put += n;
                }
                put
            },
        )
    }

    fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<u64>, TransportError>> {
        self.pipe.poll_stopped(cx, || self.end.close_error())
    }

    fn set_priority(&mut self, priority: i32) {
        self.priority = priority;
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        if let Some(e) = self.end.close_error() {
            return Err(e);
        }
        self.pipe.finish()
    }

    fn reset(&mut self, code: u64) {
        self.pipe.reset(code);
    }
}

impl Drop for MemorySend {
    fn drop(&mut self) {
        // Like quinn: a send half dropped while open is finished (an error means it had
        // already finished or reset).
        let _ = self.pipe.finish();
    }
}

/// The receiving half of an in-memory stream. Dropped before the FIN or a reset, it stops
/// the stream with code 0 (like quinn).
pub struct MemoryRecv {
    end: Arc<End>,
    pipe: Arc<Pipe>,
}

impl MemoryRecv {
    /// The half of `end` that reads from `pipe`.
    pub(super) fn new(end: Arc<End>, pipe: Arc<Pipe>) -> MemoryRecv {
        MemoryRecv { end, pipe }
    }
}

impl fmt::Debug for MemoryRecv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("MemoryRecv");
        d.field("side", &self.end.side());
        self.pipe.debug_reader(&mut d);
        d.finish()
    }
}

impl RecvStream for MemoryRecv {
    fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<Result<Option<Bytes>, TransportError>> {
        let mut one = [Bytes::new()];
        let read = ready!(
            self.pipe
                .poll_read(cx, || self.end.close_error(), &mut one, max)
        );
        let [chunk] = one;
        Poll::Ready(read.map(|n| n.map(|_| chunk)))
    }

    fn poll_read_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<Option<usize>, TransportError>> {
        self.pipe
            .poll_read(cx, || self.end.close_error(), bufs, usize::MAX)
    }

    fn stop(&mut self, code: u64) {
        self.pipe.stop(code);
    }
}

impl Drop for MemoryRecv {
    fn drop(&mut self) {
        // Like quinn: a receive half dropped before the FIN or a reset stops with code 0.
        self.pipe.stop(0);
    }
}
