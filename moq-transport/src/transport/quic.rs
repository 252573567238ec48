//! The adapter over quinn, for both transports: raw QUIC (the version is the negotiated ALPN,
//! `moqt-19`, ...) and WebTransport over HTTP/3 (the version is the protocol the server chose
//! from `WT-Available-Protocols`, draft-19 §3.1.2). A raw QUIC connection is quinn's own, and
//! so are its streams (module `raw`); a WebTransport session and its streams are
//! web-transport-quinn's.
//!
//! WebTransport error codes are 32 bits; MOQT's codes all fit.

mod raw;

pub use raw::{RawQuicRecv, RawQuicSend};
use raw::{conn_error, poll_written, quinn_recv_stream};

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use async_trait::async_trait;
use bytes::Bytes;
use futures::{FutureExt, TryFutureExt};
use web_transport_quinn as wt;
use wt::generic::poll::SendStream as PollSend;

use super::credit::{
    Direction, INITIAL_BIDI_STREAMS, INITIAL_UNI_STREAMS, MAX_BIDI_STREAMS, MAX_UNI_STREAMS,
    StreamCredit,
};
use super::{BoxRecvStream, BoxSendStream, Connection, SendStream, TransportError, TransportKind};

/// A MOQT connection over quinn: raw QUIC, or a WebTransport session.
///
/// Clones share the connection; quinn closes it (code 0) once every clone and every stream of
/// it is dropped.
#[derive(Clone, Debug)]
pub struct QuicConnection {
    inner: Inner,
    fallback: Option<String>,
    uni: Arc<StreamCredit>,
    bi: Arc<StreamCredit>,
}

/// The connection itself, by transport.
#[derive(Clone, Debug)]
enum Inner {
    /// Raw QUIC: quinn's connection, held as it is. web-transport-quinn's raw session would add
    /// ~0.8 KB of per-clone operation state and three shared allocations (~0.2 KB) to every
    /// session (docs/benchmarks.md, "idle6") for what quinn's own calls do.
    Raw(quinn::Connection),
    /// A WebTransport session, boxed: a raw connection does not carry its size.
    WebTransport(Box<wt::Session>),
}

impl QuicConnection {
    /// Wraps an established raw QUIC connection configured with
    /// [`crate::endpoint::transport_config`]: the peer's stream limits start there and are
    /// raised as the streams are used (see [`super::credit`]).
    pub fn raw(conn: quinn::Connection) -> Self {
        Self::with(Inner::Raw(conn))
    }

    /// Wraps an established WebTransport session, whose QUIC connection was configured like a
    /// raw one.
    pub fn webtransport(session: wt::Session) -> Self {
        Self::with(Inner::WebTransport(Box::new(session)))
    }

    fn with(inner: Inner) -> Self {
        QuicConnection {
            inner,
            fallback: None,
            uni: StreamCredit::new(INITIAL_UNI_STREAMS, MAX_UNI_STREAMS),
            bi: StreamCredit::new(INITIAL_BIDI_STREAMS, MAX_BIDI_STREAMS),
        }
    }

    /// The protocol to report when the server chose none (it ignored `WT-Available-Protocols`).
    pub fn with_fallback_protocol(mut self, protocol: Option<String>) -> Self {
        self.fallback = protocol;
        self
    }

    /// The QUIC connection (a WebTransport session's is shared with HTTP/3).
    pub fn quic(&self) -> &quinn::Connection {
        match &self.inner {
            Inner::Raw(conn) => conn,
            Inner::WebTransport(session) => session,
        }
    }

    /// The WebTransport session, unless this is raw QUIC.
    pub fn webtransport_session(&self) -> Option<&wt::Session> {
        match &self.inner {
            Inner::Raw(_) => None,
            Inner::WebTransport(session) => Some(session),
        }
    }

    /// The QUIC connection, when its streams are quinn's own (raw QUIC).
    fn raw_quic(&self) -> Option<&quinn::Connection> {
        match &self.inner {
            Inner::Raw(conn) => Some(conn),
            Inner::WebTransport(_) => None,
        }
    }
}

/// A boxed transport future, as `async_trait` makes them.
type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What [`Connection::accept_bi`] resolves with.
type AcceptedBi = Result<(BoxSendStream, BoxRecvStream), TransportError>;

fn code32(code: u64) -> u32 {
    u32::try_from(code).unwrap_or(u32::MAX)
}

fn session_error(e: wt::SessionError) -> TransportError {
    match e {
        wt::SessionError::WebTransportError(wt::WebTransportError::Closed(code, reason)) => {
            TransportError::ClosedByPeer {
                code: code.into(),
                reason,
            }
        }
        wt::SessionError::ConnectionError(e) => conn_error(e),
        e => TransportError::Lost(e.to_string()),
    }
}

fn write_error(e: wt::WriteError) -> TransportError {
    match e {
        wt::WriteError::Stopped(code) => TransportError::Stopped(code.into()),
        wt::WriteError::SessionError(e) => session_error(e),
        wt::WriteError::ClosedStream => TransportError::StreamClosed,
        e => TransportError::Other(e.to_string()),
    }
}

fn read_error(e: wt::ReadError) -> TransportError {
    match e {
        wt::ReadError::Reset(code) => TransportError::Reset(code.into()),
        wt::ReadError::SessionError(e) => session_error(e),
        wt::ReadError::ClosedStream => TransportError::StreamClosed,
        e => TransportError::Other(e.to_string()),
    }
}

/// Reads the ALPN a quinn connection negotiated.
pub(crate) fn negotiated_alpn(conn: &quinn::Connection) -> Option<String> {
    let data = conn.handshake_data()?;
    let data = data
        .downcast::<quinn::crypto::rustls::HandshakeData>()
        .ok()?;
    String::from_utf8(data.protocol?).ok()
}

#[async_trait]
impl Connection for QuicConnection {
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        match &self.inner {
            Inner::Raw(conn) => {
                let (s, r) = conn.open_bi().await.map_err(conn_error)?;
                Ok((Box::new(RawQuicSend::new(s)), Box::new(RawQuicRecv(r))))
            }
            Inner::WebTransport(session) => {
                let (s, r) = session.open_bi().await.map_err(session_error)?;
                Ok((Box::new(QuicSend(s)), Box::new(QuicRecv(r))))
            }
        }
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        match &self.inner {
            Inner::Raw(conn) => {
                let s = conn.open_uni().await.map_err(conn_error)?;
                Ok(Box::new(RawQuicSend::new(s)))
            }
            Inner::WebTransport(session) => {
                let s = session.open_uni().await.map_err(session_error)?;
                Ok(Box::new(QuicSend(s)))
            }
        }
    }

    fn try_open_uni(&self) -> Option<Result<BoxSendStream, TransportError>> {
        let conn = self.raw_quic()?;
        // quinn's open takes a stream at its first poll when the peer's credit allows; the
        // registration for more credit that a pending poll makes is dropped with the future.
        let mut cx = Context::from_waker(Waker::noop());
        match pin!(conn.open_uni()).poll(&mut cx) {
            Poll::Ready(r) => Some(
                r.map(|s| Box::new(RawQuicSend::new(s)) as BoxSendStream)
                    .map_err(conn_error),
            ),
            Poll::Pending => None,
        }
    }

    // The waits a session keeps pending all its life (accepting, datagrams, the close) box
    // each transport's future at its own size: as `async fn`s, one future would hold either
    // transport's wait, and a raw QUIC session would keep WebTransport's larger ones.

    fn accept_bi<'a, 'async_trait>(&'a self) -> BoxFuture<'async_trait, AcceptedBi>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        // With WebTransport, HTTP/3's own streams count on the QUIC connection too, which the
        // three-quarters threshold leaves room for.
        match &self.inner {
            Inner::Raw(conn) => Box::pin(async move {
                let (s, r) = conn.accept_bi().await.map_err(conn_error)?;
                let r = self.bi.accepted(conn, Direction::Bi, RawQuicRecv(r));
                Ok((
                    Box::new(RawQuicSend::new(s)) as BoxSendStream,
                    Box::new(r) as _,
                ))
            }),
            Inner::WebTransport(session) => Box::pin(async move {
                let (s, r) = session.accept_bi().await.map_err(session_error)?;
                let r = self.bi.accepted(session, Direction::Bi, QuicRecv(r));
                Ok((Box::new(QuicSend(s)) as BoxSendStream, Box::new(r) as _))
            }),
        }
    }

    fn accept_uni<'a, 'async_trait>(
        &'a self,
    ) -> BoxFuture<'async_trait, Result<BoxRecvStream, TransportError>>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        match &self.inner {
            Inner::Raw(conn) => Box::pin(async move {
                let r = conn.accept_uni().await.map_err(conn_error)?;
                let r = self.uni.accepted(conn, Direction::Uni, RawQuicRecv(r));
                Ok(Box::new(r) as BoxRecvStream)
            }),
            Inner::WebTransport(session) => Box::pin(async move {
                let r = session.accept_uni().await.map_err(session_error)?;
                let r = self.uni.accepted(session, Direction::Uni, QuicRecv(r));
                Ok(Box::new(r) as BoxRecvStream)
            }),
        }
    }

    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError> {
        match &self.inner {
            Inner::Raw(conn) => conn
                .send_datagram(data)
                .map_err(|e| TransportError::Datagram(e.to_string())),
            Inner::WebTransport(session) => session
                .send_datagram(data)
                .map_err(|e| TransportError::Datagram(e.to_string())),
        }
    }

    fn recv_datagram<'a, 'async_trait>(
        &'a self,
    ) -> BoxFuture<'async_trait, Result<Bytes, TransportError>>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        match &self.inner {
            Inner::Raw(conn) => Box::pin(conn.read_datagram().map_err(conn_error)),
            Inner::WebTransport(session) => {
                Box::pin(session.read_datagram().map_err(session_error))
            }
        }
    }

    fn max_datagram_size(&self) -> Option<usize> {
        let n = match &self.inner {
            Inner::Raw(conn) => conn.max_datagram_size().unwrap_or(0),
            Inner::WebTransport(session) => session.max_datagram_size(),
        };
        Some(n).filter(|n| *n > 0)
    }

    fn close(&self, code: u64, reason: &str) {
        match &self.inner {
            // As web-transport-quinn's raw mode: the code as it is.
            Inner::Raw(conn) => conn.close(code32(code).into(), reason.as_bytes()),
            Inner::WebTransport(session) => session.close(code32(code), reason.as_bytes()),
        }
    }

    fn closed<'a, 'async_trait>(&'a self) -> BoxFuture<'async_trait, TransportError>
    where
        'a: 'async_trait,
        Self: 'async_trait,
    {
        match &self.inner {
            Inner::Raw(conn) => Box::pin(conn.closed().map(conn_error)),
            Inner::WebTransport(session) => Box::pin(session.closed().map(session_error)),
        }
    }

    fn protocol(&self) -> Option<String> {
        match &self.inner {
            Inner::Raw(conn) => negotiated_alpn(conn),
            Inner::WebTransport(session) => session.protocol().map(str::to_owned),
        }
        .or_else(|| self.fallback.clone())
    }

    fn kind(&self) -> TransportKind {
        match &self.inner {
            Inner::Raw(_) => TransportKind::RawQuic,
            Inner::WebTransport(_) => TransportKind::WebTransport,
        }
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        Some(self.quic().remote_address())
    }
}

/// A WebTransport send stream. Dropped unfinished, it finishes the stream (quinn's behaviour).
#[derive(Debug)]
pub struct QuicSend(pub wt::SendStream);

impl SendStream for QuicSend {
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, TransportError>> {
        PollSend::poll_write(&mut self.0, cx, buf).map_err(write_error)
    }

    fn poll_write_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<usize, TransportError>> {
        poll_written(pin!(self.0.write_chunks(bufs)), cx, write_error)
    }

    fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<u64>, TransportError>> {
        // web-transport-quinn keeps the `stopped` future across polls (one allocation per
        // stream, on the first poll).
        Poll::Ready(match ready!(PollSend::poll_closed(&mut self.0, cx)) {
            Ok(()) => Ok(None),
            Err(wt::WriteError::Stopped(code)) => Ok(Some(code.into())),
            // A code outside WebTransport's space: as before, stopped without a code.
            Err(wt::WriteError::InvalidStopped(_)) => Ok(None),
            Err(wt::WriteError::SessionError(e)) => Err(session_error(e)),
            Err(e) => Err(write_error(e)),
        })
    }

    fn set_priority(&mut self, priority: i32) {
        let _ = self.0.set_priority(priority);
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        self.0.finish().map_err(|_| TransportError::StreamClosed)
    }

    fn reset(&mut self, code: u64) {
        let _ = self.0.reset(code32(code));
    }
}

/// A WebTransport receive stream. Dropped before the FIN or a reset, it sends STOP_SENDING with
/// code 0 (quinn's behaviour).
#[derive(Debug)]
pub struct QuicRecv(pub wt::RecvStream);

quinn_recv_stream!(QuicRecv, read_error, code32);
