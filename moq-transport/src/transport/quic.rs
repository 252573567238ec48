//! The adapter over quinn, for both transports: raw QUIC (the version is the negotiated ALPN,
//! `moqt-19`, ...) and WebTransport over HTTP/3 (the version is the protocol the server chose
//! from `WT-Available-Protocols`, draft-19 §3.1.2). Both sessions are web-transport-quinn's,
//! raw QUIC in its raw mode; a raw QUIC session's streams are quinn's own (module `raw`), a
//! WebTransport session's web-transport-quinn's.
//!
//! WebTransport error codes are 32 bits; MOQT's codes all fit.

mod raw;

pub use raw::{RawQuicRecv, RawQuicSend};
use raw::{conn_error, poll_chunk, poll_written};

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker, ready};

use async_trait::async_trait;
use bytes::Bytes;
use web_transport_quinn as wt;
use wt::generic::poll::SendStream as PollSend;

use super::credit::{
    Direction, INITIAL_BIDI_STREAMS, INITIAL_UNI_STREAMS, MAX_BIDI_STREAMS, MAX_UNI_STREAMS,
    StreamCredit,
};
use super::{
    BoxRecvStream, BoxSendStream, Connection, RecvStream, SendStream, TransportError, TransportKind,
};

/// A MOQT connection over quinn: raw QUIC, or a WebTransport session.
///
/// Clones share the connection; quinn closes it (code 0) once every clone and every stream of
/// it is dropped.
#[derive(Clone, Debug)]
pub struct QuicConnection {
    session: wt::Session,
    kind: TransportKind,
    fallback: Option<String>,
    uni: Arc<StreamCredit>,
    bi: Arc<StreamCredit>,
}

impl QuicConnection {
    /// Wraps an established raw QUIC connection configured with
    /// [`crate::endpoint::transport_config`]: the peer's stream limits start there and are
    /// raised as the streams are used (see [`super::credit`]).
    pub fn raw(conn: quinn::Connection) -> Self {
        Self::with(wt::Session::raw(conn), TransportKind::RawQuic)
    }

    /// Wraps an established WebTransport session, whose QUIC connection was configured like a
    /// raw one.
    pub fn webtransport(session: wt::Session) -> Self {
        Self::with(session, TransportKind::WebTransport)
    }

    fn with(session: wt::Session, kind: TransportKind) -> Self {
        QuicConnection {
            session,
            kind,
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

    /// The underlying session (which derefs to the quinn connection).
    pub fn inner(&self) -> &wt::Session {
        &self.session
    }

    /// The QUIC connection, when its streams are quinn's own (raw QUIC).
    fn raw_quic(&self) -> Option<&quinn::Connection> {
        (self.kind == TransportKind::RawQuic).then_some(&*self.session)
    }
}

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
        if let Some(conn) = self.raw_quic() {
            let (s, r) = conn.open_bi().await.map_err(conn_error)?;
            return Ok((Box::new(RawQuicSend::new(s)), Box::new(RawQuicRecv(r))));
        }
        let (s, r) = self.session.open_bi().await.map_err(session_error)?;
        Ok((Box::new(QuicSend(s)), Box::new(QuicRecv(r))))
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        if let Some(conn) = self.raw_quic() {
            let s = conn.open_uni().await.map_err(conn_error)?;
            return Ok(Box::new(RawQuicSend::new(s)));
        }
        let s = self.session.open_uni().await.map_err(session_error)?;
        Ok(Box::new(QuicSend(s)))
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

    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        // The session derefs to its QUIC connection; with WebTransport, HTTP/3's own streams
        // count there too, which the three-quarters threshold leaves room for.
        if let Some(conn) = self.raw_quic() {
            let (s, r) = conn.accept_bi().await.map_err(conn_error)?;
            let r = self.bi.accepted(conn, Direction::Bi, RawQuicRecv(r));
            return Ok((Box::new(RawQuicSend::new(s)), Box::new(r)));
        }
        let (s, r) = self.session.accept_bi().await.map_err(session_error)?;
        let r = self.bi.accepted(&self.session, Direction::Bi, QuicRecv(r));
        Ok((Box::new(QuicSend(s)), Box::new(r)))
    }

    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError> {
        if let Some(conn) = self.raw_quic() {
            let r = conn.accept_uni().await.map_err(conn_error)?;
            return Ok(Box::new(self.uni.accepted(
                conn,
                Direction::Uni,
                RawQuicRecv(r),
            )));
        }
        let r = self.session.accept_uni().await.map_err(session_error)?;
        Ok(Box::new(self.uni.accepted(
            &self.session,
            Direction::Uni,
            QuicRecv(r),
        )))
    }

    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError> {
        self.session
            .send_datagram(data)
            .map_err(|e| TransportError::Datagram(e.to_string()))
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        self.session.read_datagram().await.map_err(session_error)
    }

    fn max_datagram_size(&self) -> Option<usize> {
        Some(self.session.max_datagram_size()).filter(|n| *n > 0)
    }

    fn close(&self, code: u64, reason: &str) {
        self.session.close(code32(code), reason.as_bytes());
    }

    async fn closed(&self) -> TransportError {
        session_error(self.session.closed().await)
    }

    fn protocol(&self) -> Option<String> {
        self.session
            .protocol()
            .map(str::to_owned)
            .or_else(|| self.fallback.clone())
    }

    fn kind(&self) -> TransportKind {
        self.kind
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        Some(self.session.remote_address())
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

impl RecvStream for QuicRecv {
    fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<Result<Option<Bytes>, TransportError>> {
        poll_chunk(pin!(self.0.read_chunk(max, true)), cx, read_error)
    }

    fn stop(&mut self, code: u64) {
        let _ = self.0.stop(code32(code));
    }
}
