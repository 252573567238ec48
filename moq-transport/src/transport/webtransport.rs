//! The WebTransport adapter, over web-transport-quinn (HTTP/3). The version is the protocol
//! the server chose from `WT-Available-Protocols` (draft-19 §3.1.2).
//!
//! WebTransport error codes are 32 bits; MOQT's codes all fit.

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use web_transport_quinn as wt;

use super::credit::{
    Direction, INITIAL_BIDI_STREAMS, INITIAL_UNI_STREAMS, MAX_BIDI_STREAMS, MAX_UNI_STREAMS,
    StreamCredit,
};
use super::{
    BoxRecvStream, BoxSendStream, Connection, RecvStream, SendStream, TransportError, TransportKind,
};

/// A WebTransport session carrying MOQT.
#[derive(Clone, Debug)]
pub struct WebTransportConnection {
    session: wt::Session,
    fallback: Option<String>,
    uni: Arc<StreamCredit>,
    bi: Arc<StreamCredit>,
}

impl WebTransportConnection {
    /// Wraps an established session whose QUIC connection was configured with
    /// [`crate::endpoint::transport_config`]: the peer's stream limits start there and are
    /// raised as the streams are used (see [`super::credit`]).
    pub fn new(session: wt::Session) -> Self {
        WebTransportConnection {
            session,
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

    /// The underlying session.
    pub fn inner(&self) -> &wt::Session {
        &self.session
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
        wt::SessionError::ConnectionError(e) => super::quic::conn_error(e),
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

#[async_trait]
impl Connection for WebTransportConnection {
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let (s, r) = self.session.open_bi().await.map_err(session_error)?;
        Ok((Box::new(WtSend(s)), Box::new(WtRecv(r))))
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        let s = self.session.open_uni().await.map_err(session_error)?;
        Ok(Box::new(WtSend(s)))
    }

    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let (s, r) = self.session.accept_bi().await.map_err(session_error)?;
        // The session derefs to its QUIC connection; HTTP/3's own streams count there too,
        // which the three-quarters threshold leaves room for.
        let r = self.bi.accepted(&self.session, Direction::Bi, WtRecv(r));
        Ok((Box::new(WtSend(s)), Box::new(r)))
    }

    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError> {
        let r = self.session.accept_uni().await.map_err(session_error)?;
        Ok(Box::new(self.uni.accepted(
            &self.session,
            Direction::Uni,
            WtRecv(r),
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
        Some(self.session.max_datagram_size())
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
        TransportKind::WebTransport
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        None
    }
}

/// A WebTransport send stream.
#[derive(Debug)]
pub struct WtSend(pub wt::SendStream);

#[async_trait]
impl SendStream for WtSend {
    async fn write_all(&mut self, buf: &[u8]) -> Result<(), TransportError> {
        self.0.write_all(buf).await.map_err(write_error)
    }

    async fn write_chunk(&mut self, buf: Bytes) -> Result<(), TransportError> {
        self.0.write_chunk(buf).await.map_err(write_error)
    }

    async fn write_all_chunks(&mut self, bufs: &mut [Bytes]) -> Result<(), TransportError> {
        self.0.write_all_chunks(bufs).await.map_err(write_error)
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

    async fn stopped(&mut self) -> Result<Option<u64>, TransportError> {
        match self.0.stopped().await {
            Ok(code) => Ok(code.map(u64::from)),
            Err(e) => Err(session_error(e)),
        }
    }
}

/// A WebTransport receive stream.
#[derive(Debug)]
pub struct WtRecv(pub wt::RecvStream);

#[async_trait]
impl RecvStream for WtRecv {
    async fn read_chunk(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        match self.0.read_chunk(max, true).await {
            Ok(Some(chunk)) => Ok(Some(chunk.bytes)),
            Ok(None) => Ok(None),
            Err(e) => Err(read_error(e)),
        }
    }

    fn stop(&mut self, code: u64) {
        let _ = self.0.stop(code32(code));
    }
}
