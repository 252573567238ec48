//! The transport a session runs over: a small trait, with one adapter per transport.
//!
//! A MOQT session needs bidirectional and unidirectional streams, datagrams, stream priority,
//! stream reset / stop-sending with a code, and connection close with a code. [`Connection`],
//! [`SendStream`] and [`RecvStream`] say exactly that and nothing more, so the same session code
//! runs over raw QUIC and WebTransport (both through [`quic`]) and, with the `websocket`
//! feature, over QMux over a WebSocket (through `qmux`).

pub mod credit;
/// An in-memory connection pair, for testing sessions and applications without sockets.
#[cfg(feature = "memory")]
pub mod memory;
/// MOQT over QMux over a WebSocket (the `websocket` feature).
#[cfg(feature = "websocket")]
pub mod qmux;
pub mod quic;

use std::fmt;
use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::task::{Context, Poll, ready};

use async_trait::async_trait;
use bytes::Bytes;

/// A boxed send stream.
pub type BoxSendStream = Box<dyn SendStream>;
/// A boxed receive stream.
pub type BoxRecvStream = Box<dyn RecvStream>;

/// Which kind of transport carries the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransportKind {
    /// MOQT directly over QUIC (`moqt://`), version chosen by ALPN.
    RawQuic,
    /// MOQT over WebTransport over HTTP/3 (`https://`), version chosen by `WT-Protocol`.
    WebTransport,
    /// MOQT over QMux over a WebSocket (`ws://`, `wss://`), version chosen by the
    /// subprotocol (`qmux-01.moqt-19`). Like WebTransport, the URL carries the path.
    WebSocket,
}

/// Why a transport operation failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The peer closed the connection / session with an application code.
    #[error("closed by peer with code {code:#x}: {reason}")]
    ClosedByPeer {
        /// The application error code.
        code: u64,
        /// The reason phrase.
        reason: String,
    },
    /// We closed the connection.
    #[error("closed locally")]
    ClosedLocally,
    /// The connection was lost (timeout, reset, transport error).
    #[error("connection lost: {0}")]
    Lost(String),
    /// The peer reset the stream with this code.
    #[error("stream reset by peer with code {0:#x}")]
    Reset(u64),
    /// The peer asked us to stop sending with this code.
    #[error("peer sent STOP_SENDING with code {0:#x}")]
    Stopped(u64),
    /// The stream was already finished or reset by us.
    #[error("stream already closed")]
    StreamClosed,
    /// A datagram could not be sent.
    #[error("datagram not sent: {0}")]
    Datagram(String),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// One established connection (a QUIC connection, a WebTransport session or a QMux session).
#[async_trait]
pub trait Connection: Send + Sync + 'static {
    /// Opens a bidirectional stream.
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError>;
    /// Opens a unidirectional stream.
    async fn open_uni(&self) -> Result<BoxSendStream, TransportError>;
    /// Opens a unidirectional stream if that needs no wait, without the future
    /// [`Connection::open_uni`] allocates: `None` when it would wait (or the transport cannot
    /// tell without that future). For a stream per object, where the boxed future is a
    /// measurable part of a stream's cost.
    fn try_open_uni(&self) -> Option<Result<BoxSendStream, TransportError>> {
        None
    }
    /// Accepts the next bidirectional stream the peer opened.
    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError>;
    /// Accepts the next unidirectional stream the peer opened.
    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError>;
    /// Sends a datagram (unreliable; may be dropped).
    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError>;
    /// Receives the next datagram.
    async fn recv_datagram(&self) -> Result<Bytes, TransportError>;
    /// The largest datagram payload that can be sent now, if datagrams are available.
    fn max_datagram_size(&self) -> Option<usize>;
    /// Closes the connection with an application code and reason.
    fn close(&self, code: u64, reason: &str);
    /// Resolves when the connection is closed, with why.
    async fn closed(&self) -> TransportError;
    /// The negotiated protocol token (ALPN or WT-Protocol), e.g. `moqt-19`.
    fn protocol(&self) -> Option<String>;
    /// Raw QUIC, WebTransport or WebSocket.
    fn kind(&self) -> TransportKind;
    /// The peer's address.
    fn remote_addr(&self) -> Option<SocketAddr>;
}

/// The sending half of a stream, poll-based: a write is one call into the transport, with no
/// future allocated for it. [`SendStreamExt`] (and the same methods on `dyn SendStream`) gives
/// the async forms (`write_all`, `write_chunk`, `write_all_chunks`, `stopped`).
///
/// Dropping a send half that was neither finished nor reset finishes it (like quinn).
pub trait SendStream: Send + Sync + 'static {
    /// Writes a prefix of `buf`, returning how many bytes were accepted (more than 0 unless
    /// `buf` is empty). `Pending` means nothing was written and the task will be woken when
    /// there is room.
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, TransportError>>;
    /// Writes from the front of `bufs` without copying where the transport allows, taking what
    /// was written out of them: chunks written whole are left empty, a chunk written in part
    /// keeps its unwritten suffix. Returns the bytes written; `Pending` means nothing was
    /// written.
    fn poll_write_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<usize, TransportError>>;
    /// Ready when the peer sends STOP_SENDING (`Some(code)`), or the stream is fully
    /// acknowledged or closed (`None`).
    fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<u64>, TransportError>>;
    /// Sets the send priority; higher values are sent first.
    fn set_priority(&mut self, priority: i32);
    /// Ends the stream gracefully (FIN) after the data written so far.
    fn finish(&mut self) -> Result<(), TransportError>;
    /// Abandons the stream with RESET_STREAM and `code`.
    fn reset(&mut self, code: u64);
}

/// The receiving half of a stream, poll-based (see [`SendStream`]); [`RecvStreamExt`] (and the
/// same method on `dyn RecvStream`) gives the async `read_chunk`.
///
/// Dropping a receive half before the FIN or a reset sends STOP_SENDING with code 0 (like
/// quinn).
pub trait RecvStream: Send + Sync + 'static {
    /// The next chunk of at most `max` bytes (`max` > 0), without copying; `Ok(None)` at the
    /// end of the stream (FIN). `Pending` means nothing was read.
    fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<Result<Option<Bytes>, TransportError>>;
    /// Every chunk ready now, in order, into the front of `bufs` (not empty), without copying:
    /// how many were read (at least one); `Ok(None)` at the end of the stream (FIN). `Pending`
    /// means nothing was read. For a reader of many small objects, where one call into the
    /// transport per chunk (a lock of quinn's connection each) is a measurable part of the
    /// cost. By default one chunk of at most [`READ_CHUNKS_MAX`] bytes (a transport whose
    /// reads take no shared lock gains nothing from more).
    fn poll_read_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<Option<usize>, TransportError>> {
        let Some(first) = bufs.first_mut() else {
            return Poll::Ready(Ok(Some(0)));
        };
        let read = ready!(self.poll_read_chunk(cx, READ_CHUNKS_MAX));
        Poll::Ready(read.map(|chunk| {
            chunk.map(|chunk| {
                *first = chunk;
                1
            })
        }))
    }
    /// Asks the peer to stop sending with STOP_SENDING and `code`.
    fn stop(&mut self, code: u64);
}

/// The largest chunk [`RecvStream::poll_read_chunks`] reads by default.
pub const READ_CHUNKS_MAX: usize = 64 * 1024;

/// The async forms of [`SendStream`]'s poll methods, for every send stream. No future is boxed:
/// each is a `poll_fn` over the poll method.
pub trait SendStreamExt: SendStream {
    /// Writes all of `buf`.
    ///
    /// Not cancel-safe: dropped before it resolves, a prefix of `buf` may have been written.
    fn write_all(
        &mut self,
        buf: &[u8],
    ) -> impl Future<Output = Result<(), TransportError>> + Send + Unpin {
        let mut buf = buf;
        poll_fn(move |cx| {
            while !buf.is_empty() {
                let n = ready!(self.poll_write(cx, buf))?;
                if n == 0 {
                    // A transport that accepts nothing without waiting would spin here.
                    return Poll::Ready(Err(TransportError::Other(
                        "stream accepted no bytes".into(),
                    )));
                }
                buf = buf.get(n..).unwrap_or_default();
            }
            Poll::Ready(Ok(()))
        })
    }

    /// Writes all of a chunk without copying where the transport allows.
    ///
    /// Not cancel-safe: dropped before it resolves, a prefix of the chunk may have been written.
    fn write_chunk(
        &mut self,
        buf: Bytes,
    ) -> impl Future<Output = Result<(), TransportError>> + Send + Unpin {
        let mut bufs = [buf];
        poll_fn(move |cx| write_all_chunks(&mut *self, cx, &mut bufs))
    }

    /// Writes every chunk in order, without copying where the transport allows, in as few
    /// transport writes as it can; the chunks are left empty.
    ///
    /// Not cancel-safe: dropped before it resolves, a prefix may have been written (and taken
    /// out of `bufs`, so `bufs` holds exactly what was not written).
    fn write_all_chunks(
        &mut self,
        bufs: &mut [Bytes],
    ) -> impl Future<Output = Result<(), TransportError>> + Send + Unpin {
        poll_fn(move |cx| write_all_chunks(&mut *self, cx, bufs))
    }

    /// Resolves when the peer sends STOP_SENDING (`Some(code)`), or the stream is fully
    /// acknowledged or closed (`None`).
    ///
    /// Cancel-safe.
    fn stopped(
        &mut self,
    ) -> impl Future<Output = Result<Option<u64>, TransportError>> + Send + Unpin {
        poll_fn(move |cx| self.poll_stopped(cx))
    }
}

impl<S: SendStream + ?Sized> SendStreamExt for S {}

/// Writes the chunks not written yet (the first non-empty one on), until all are.
fn write_all_chunks<S: SendStream + ?Sized>(
    s: &mut S,
    cx: &mut Context<'_>,
    bufs: &mut [Bytes],
) -> Poll<Result<(), TransportError>> {
    loop {
        let first = bufs
            .iter()
            .position(|b| !b.is_empty())
            .unwrap_or(bufs.len());
        match bufs.get_mut(first..) {
            Some(rest) if !rest.is_empty() => ready!(s.poll_write_chunks(cx, rest))?,
            _ => return Poll::Ready(Ok(())),
        };
    }
}

/// The async form of [`RecvStream::poll_read_chunk`], for every receive stream.
pub trait RecvStreamExt: RecvStream {
    /// Reads the next chunk of at most `max` bytes; `Ok(None)` at the end of the stream (FIN).
    ///
    /// Cancel-safe: dropped before it resolves, nothing was read.
    fn read_chunk(
        &mut self,
        max: usize,
    ) -> impl Future<Output = Result<Option<Bytes>, TransportError>> + Send + Unpin {
        poll_fn(move |cx| self.poll_read_chunk(cx, max))
    }
}

impl<R: RecvStream + ?Sized> RecvStreamExt for R {}

/// The async methods callable on a boxed stream without importing [`SendStreamExt`].
impl dyn SendStream {
    /// See [`SendStreamExt::write_all`] (not cancel-safe).
    pub fn write_all(
        &mut self,
        buf: &[u8],
    ) -> impl Future<Output = Result<(), TransportError>> + Send + Unpin {
        SendStreamExt::write_all(self, buf)
    }

    /// See [`SendStreamExt::write_chunk`] (not cancel-safe).
    pub fn write_chunk(
        &mut self,
        buf: Bytes,
    ) -> impl Future<Output = Result<(), TransportError>> + Send + Unpin {
        SendStreamExt::write_chunk(self, buf)
    }

    /// See [`SendStreamExt::write_all_chunks`] (not cancel-safe).
    pub fn write_all_chunks(
        &mut self,
        bufs: &mut [Bytes],
    ) -> impl Future<Output = Result<(), TransportError>> + Send + Unpin {
        SendStreamExt::write_all_chunks(self, bufs)
    }

    /// See [`SendStreamExt::stopped`] (cancel-safe).
    pub fn stopped(
        &mut self,
    ) -> impl Future<Output = Result<Option<u64>, TransportError>> + Send + Unpin {
        SendStreamExt::stopped(self)
    }
}

/// The async method callable on a boxed stream without importing [`RecvStreamExt`].
impl dyn RecvStream {
    /// See [`RecvStreamExt::read_chunk`] (cancel-safe).
    pub fn read_chunk(
        &mut self,
        max: usize,
    ) -> impl Future<Output = Result<Option<Bytes>, TransportError>> + Send + Unpin {
        RecvStreamExt::read_chunk(self, max)
    }
}

impl fmt::Debug for dyn Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("kind", &self.kind())
            .field("protocol", &self.protocol())
            .field("remote", &self.remote_addr())
            .finish()
    }
}

impl fmt::Debug for dyn SendStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendStream")
    }
}

impl fmt::Debug for dyn RecvStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RecvStream")
    }
}
