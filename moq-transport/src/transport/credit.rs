//! Stream credit that grows with use.
//!
//! quinn allocates bookkeeping for every stream the peer may open as soon as the limit allows
//! it (about 67 bytes per stream, measured with heaptrack: 17 KB for 128 + 128), so a limit
//! of 4096 unidirectional and 1024 bidirectional streams costs ~340 KiB per connection even
//! when idle. Connections therefore start with
//! [`INITIAL_UNI_STREAMS`] / [`INITIAL_BIDI_STREAMS`] and the limit doubles, up to
//! [`MAX_UNI_STREAMS`] / [`MAX_BIDI_STREAMS`], whenever three quarters of it are in use
//! (streams accepted and not yet dropped by the session).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;

use super::{RecvStream, TransportError};

/// Unidirectional streams the peer may open at first.
pub const INITIAL_UNI_STREAMS: u32 = 32;
/// Unidirectional streams the peer may have open at most.
pub const MAX_UNI_STREAMS: u32 = 4096;
/// Bidirectional streams (requests) the peer may open at first.
pub const INITIAL_BIDI_STREAMS: u32 = 32;
/// Bidirectional streams the peer may have open at most.
pub const MAX_BIDI_STREAMS: u32 = 1024;

/// Which of the peer's stream limits a [`StreamCredit`] governs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Direction {
    /// Bidirectional streams.
    Bi,
    /// Unidirectional streams.
    Uni,
}

/// Counts the peer's open streams of one direction and decides when to raise its limit.
#[derive(Debug)]
pub(crate) struct StreamCredit {
    open: AtomicU64,
    limit: AtomicU64,
    max: u64,
}

impl StreamCredit {
    pub(crate) fn new(initial: u32, max: u32) -> Arc<Self> {
        Arc::new(StreamCredit {
            open: AtomicU64::new(0),
            limit: AtomicU64::new(initial.into()),
            max: max.max(initial).into(),
        })
    }

    /// Counts an accepted stream until the returned guard is dropped. Returns the new limit
    /// if it should be raised now.
    pub(crate) fn opened(self: &Arc<Self>) -> (OpenStream, Option<u64>) {
        let open = self.open.fetch_add(1, Ordering::AcqRel) + 1;
        let guard = OpenStream(self.clone());
        let mut limit = self.limit.load(Ordering::Acquire);
        loop {
            if open * 4 < limit * 3 || limit >= self.max {
                return (guard, None);
            }
            let raised = (limit * 2).min(self.max);
            match self
                .limit
                .compare_exchange(limit, raised, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return (guard, Some(raised)),
                Err(now) => limit = now,
            }
        }
    }

    /// Counts a stream the peer opened on `conn` until the returned wrapper drops, and raises
    /// the peer's limit for that direction there when it is due (QUIC MAX_STREAMS).
    pub(crate) fn accepted<R>(
        self: &Arc<Self>,
        conn: &quinn::Connection,
        dir: Direction,
        recv: R,
    ) -> Counted<R> {
        let (open, raise) = self.opened();
        if let Some(n) = raise {
            let n = quinn::VarInt::from_u64(n).unwrap_or(quinn::VarInt::MAX);
            match dir {
                Direction::Bi => conn.set_max_concurrent_bi_streams(n),
                Direction::Uni => conn.set_max_concurrent_uni_streams(n),
            }
        }
        Counted {
            inner: recv,
            _open: open,
        }
    }

    #[cfg(test)]
    fn open(&self) -> u64 {
        self.open.load(Ordering::Acquire)
    }
}

/// One accepted stream, counted until dropped.
#[derive(Debug)]
pub(crate) struct OpenStream(Arc<StreamCredit>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A receive stream that keeps its [`OpenStream`] count while it lives.
#[derive(Debug)]
pub(crate) struct Counted<R> {
    pub(crate) inner: R,
    pub(crate) _open: OpenStream,
}

impl<R: RecvStream> RecvStream for Counted<R> {
    fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<Result<Option<Bytes>, TransportError>> {
        self.inner.poll_read_chunk(cx, max)
    }

    fn poll_read_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<Option<usize>, TransportError>> {
        self.inner.poll_read_chunks(cx, bufs)
    }

    fn stop(&mut self, code: u64) {
        self.inner.stop(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_at_three_quarters_up_to_the_max() {
        let c = StreamCredit::new(4, 16);
        let mut held = Vec::new();
        let mut raises = Vec::new();
        for _ in 0..16 {
            let (g, r) = c.opened();
            held.push(g);
            raises.extend(r);
        }
        assert_eq!(raises, vec![8, 16], "3 of 4 open, then 6 of 8");
        assert_eq!(c.open(), 16);
        held.clear();
        assert_eq!(c.open(), 0, "dropping the streams returns the count");
        let (_g, r) = c.opened();
        assert_eq!(r, None, "never lowered, never above the max");
    }
}
