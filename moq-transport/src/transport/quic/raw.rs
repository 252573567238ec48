//! Raw QUIC streams held as quinn's own types: a raw QUIC session's data streams skip
//! web-transport-quinn's wrappers (a priority raised and lowered around an empty header on
//! every open, a boxed `stopped` future per stream, a shared close reason per stream), which
//! with one stream per small object cost a measurable share of the CPU (docs/benchmarks.md,
//! "thru5").
//!
//! Codes are carried as they are, as web-transport-quinn's raw mode does; a code an older raw
//! peer mapped into HTTP/3's range is decoded as that mode does.
//!
//! Also what both of the adapter's stream kinds share at quinn's level (a connection error's
//! mapping, polling quinn's per-poll futures); the adapter imports from here, never the
//! reverse.

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use web_transport_quinn::proto::error_from_http3;

use crate::transport::{SendStream, TransportError};

/// Maps a quinn connection error.
pub(super) fn conn_error(e: quinn::ConnectionError) -> TransportError {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => TransportError::ClosedByPeer {
            code: c.error_code.into_inner(),
            reason: String::from_utf8_lossy(&c.reason).into_owned(),
        },
        quinn::ConnectionError::LocallyClosed => TransportError::ClosedLocally,
        e => TransportError::Lost(e.to_string()),
    }
}

/// Polls a `write_chunks` future made for this poll alone: quinn's does all its work in one
/// poll and keeps no state in its future (cancel-safe: Pending means nothing was written), so
/// a future made and dropped per poll, on the stack, is the poll function quinn does not
/// export.
pub(super) fn poll_written<E>(
    f: Pin<&mut impl Future<Output = Result<quinn::Written, E>>>,
    cx: &mut Context<'_>,
    map: fn(E) -> TransportError,
) -> Poll<Result<usize, TransportError>> {
    f.poll(cx).map(|r| r.map(|w| w.bytes).map_err(map))
}

/// Polls a `read_chunk` future made for this poll alone: quinn's only calls its (private)
/// poll function and is cancel-safe, like `write_chunks`'s (see [`poll_written`]).
pub(super) fn poll_chunk<E>(
    f: Pin<&mut impl Future<Output = Result<Option<quinn::Chunk>, E>>>,
    cx: &mut Context<'_>,
    map: fn(E) -> TransportError,
) -> Poll<Result<Option<Bytes>, TransportError>> {
    f.poll(cx)
        .map(|r| r.map(|c| c.map(|c| c.bytes)).map_err(map))
}

/// The [`RecvStream`] impl of a quinn-backed receive half, one for both stream kinds: `$ty`
/// wraps (as `.0`) a stream with quinn's `read_chunk`, `read_chunks` and `stop` (quinn's own,
/// or web-transport-quinn's over them), `$error` maps its read error and `$code` a stream code
/// as sent. Each poll makes its future on the stack: quinn's read futures only call its
/// (private) poll functions and are cancel-safe (see [`poll_chunk`]).
macro_rules! quinn_recv_stream {
    ($ty:ty, $error:path, $code:path) => {
        impl $crate::transport::RecvStream for $ty {
            fn poll_read_chunk(
                &mut self,
                cx: &mut ::std::task::Context<'_>,
                max: usize,
            ) -> ::std::task::Poll<
                Result<Option<::bytes::Bytes>, $crate::transport::TransportError>,
            > {
                let read = ::std::pin::pin!(self.0.read_chunk(max, true));
                $crate::transport::quic::raw::poll_chunk(read, cx, $error)
            }

            fn poll_read_chunks(
                &mut self,
                cx: &mut ::std::task::Context<'_>,
                bufs: &mut [::bytes::Bytes],
            ) -> ::std::task::Poll<Result<Option<usize>, $crate::transport::TransportError>>
            {
                // One lock of quinn's connection for every chunk it holds for the stream.
                let read = ::std::pin::pin!(self.0.read_chunks(bufs));
                ::std::future::Future::poll(read, cx).map_err($error)
            }

            fn stop(&mut self, code: u64) {
                let _ = self.0.stop($code(code));
            }
        }
    };
}
pub(super) use quinn_recv_stream;

/// quinn's `stopped` future, kept across polls once a poll found the stream still open.
type Stopped =
    Pin<Box<dyn Future<Output = Result<Option<quinn::VarInt>, quinn::StoppedError>> + Send + Sync>>;

/// A stream code as sent: raw QUIC carries it as is.
fn varint(code: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::MAX)
}

/// A peer's stream code: raw, or HTTP/3-mapped by an older raw peer.
fn decode(code: quinn::VarInt) -> u64 {
    let code = code.into_inner();
    error_from_http3(code).map_or(code, u64::from)
}

fn write_error(e: quinn::WriteError) -> TransportError {
    match e {
        quinn::WriteError::Stopped(code) => TransportError::Stopped(decode(code)),
        quinn::WriteError::ConnectionLost(e) => conn_error(e),
        quinn::WriteError::ClosedStream => TransportError::StreamClosed,
        e => TransportError::Other(e.to_string()),
    }
}

fn read_error(e: quinn::ReadError) -> TransportError {
    match e {
        quinn::ReadError::Reset(code) => TransportError::Reset(decode(code)),
        quinn::ReadError::ConnectionLost(e) => conn_error(e),
        quinn::ReadError::ClosedStream => TransportError::StreamClosed,
        e => TransportError::Other(e.to_string()),
    }
}

/// The sending half of a raw QUIC stream. Dropped unfinished, it finishes the stream (quinn's
/// behaviour).
pub struct RawQuicSend {
    stream: quinn::SendStream,
    stopped: Option<Stopped>,
}

impl RawQuicSend {
    /// Wraps a stream of a raw QUIC connection.
    pub fn new(stream: quinn::SendStream) -> Self {
        RawQuicSend {
            stream,
            stopped: None,
        }
    }
}

impl fmt::Debug for RawQuicSend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawQuicSend")
            .field("id", &self.stream.id())
            .finish()
    }
}

impl SendStream for RawQuicSend {
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, TransportError>> {
        Pin::new(&mut self.stream)
            .poll_write(cx, buf)
            .map_err(write_error)
    }

    fn poll_write_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<usize, TransportError>> {
        poll_written(pin!(self.stream.write_chunks(bufs)), cx, write_error)
    }

    fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<u64>, TransportError>> {
        let r = match self.stopped.as_mut() {
            Some(f) => ready!(f.as_mut().poll(cx)),
            None => {
                // Most polls find the stream acknowledged (a pruning of finished streams):
                // asked on the stack, without an allocation; only a stream still open keeps a
                // future, registered for the wake-up.
                match pin!(self.stream.stopped()).poll(cx) {
                    Poll::Ready(r) => r,
                    Poll::Pending => {
                        let mut f: Stopped = Box::pin(self.stream.stopped());
                        let r = f.as_mut().poll(cx);
                        self.stopped = Some(f);
                        ready!(r)
                    }
                }
            }
        };
        Poll::Ready(match r {
            Ok(code) => Ok(code.map(decode)),
            Err(quinn::StoppedError::ConnectionLost(e)) => Err(conn_error(e)),
            Err(e) => Err(TransportError::Other(e.to_string())),
        })
    }

    fn set_priority(&mut self, priority: i32) {
        let _ = self.stream.set_priority(priority);
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        self.stream
            .finish()
            .map_err(|_| TransportError::StreamClosed)
    }

    fn reset(&mut self, code: u64) {
        let _ = self.stream.reset(varint(code));
    }
}

/// The receiving half of a raw QUIC stream. Dropped before the FIN or a reset, it sends
/// STOP_SENDING with code 0 (quinn's behaviour).
#[derive(Debug)]
pub struct RawQuicRecv(pub quinn::RecvStream);

quinn_recv_stream!(RawQuicRecv, read_error, varint);
