//! The raw QUIC adapter, over quinn. The version is the negotiated ALPN (`moqt-19`, ...).

use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;

use super::credit::{
    Direction, INITIAL_BIDI_STREAMS, INITIAL_UNI_STREAMS, MAX_BIDI_STREAMS, MAX_UNI_STREAMS,
    StreamCredit,
};
use super::{
    BoxRecvStream, BoxSendStream, Connection, RecvStream, SendStream, TransportError, TransportKind,
};

/// A quinn connection carrying MOQT directly.
#[derive(Clone, Debug)]
pub struct QuicConnection {
    conn: quinn::Connection,
    uni: Arc<StreamCredit>,
    bi: Arc<StreamCredit>,
}

impl QuicConnection {
    /// Wraps an established connection configured with
    /// [`crate::endpoint::transport_config`]: the peer's stream limits start there and are
    /// raised as the streams are used (see [`super::credit`]).
    pub fn new(conn: quinn::Connection) -> Self {
        QuicConnection {
            conn,
            uni: StreamCredit::new(INITIAL_UNI_STREAMS, MAX_UNI_STREAMS),
            bi: StreamCredit::new(INITIAL_BIDI_STREAMS, MAX_BIDI_STREAMS),
        }
    }

    /// The underlying quinn connection.
    pub fn inner(&self) -> &quinn::Connection {
        &self.conn
    }
}

fn varint(code: u64) -> quinn::VarInt {
    quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::MAX)
}

pub(crate) fn conn_error(e: quinn::ConnectionError) -> TransportError {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => TransportError::ClosedByPeer {
            code: c.error_code.into_inner(),
            reason: String::from_utf8_lossy(&c.reason).into_owned(),
        },
        quinn::ConnectionError::LocallyClosed => TransportError::ClosedLocally,
        e => TransportError::Lost(e.to_string()),
    }
}

fn write_error(e: quinn::WriteError) -> TransportError {
    match e {
        quinn::WriteError::Stopped(code) => TransportError::Stopped(code.into_inner()),
        quinn::WriteError::ConnectionLost(e) => conn_error(e),
        quinn::WriteError::ClosedStream => TransportError::StreamClosed,
        e => TransportError::Other(e.to_string()),
    }
}

fn read_error(e: quinn::ReadError) -> TransportError {
    match e {
        quinn::ReadError::Reset(code) => TransportError::Reset(code.into_inner()),
        quinn::ReadError::ConnectionLost(e) => conn_error(e),
        quinn::ReadError::ClosedStream => TransportError::StreamClosed,
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
        let (s, r) = self.conn.open_bi().await.map_err(conn_error)?;
        Ok((Box::new(QuicSend(s)), Box::new(QuicRecv(r))))
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        let s = self.conn.open_uni().await.map_err(conn_error)?;
        Ok(Box::new(QuicSend(s)))
    }

    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let (s, r) = self.conn.accept_bi().await.map_err(conn_error)?;
        let r = self.bi.accepted(&self.conn, Direction::Bi, QuicRecv(r));
        Ok((Box::new(QuicSend(s)), Box::new(r)))
    }

    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError> {
        let r = self.conn.accept_uni().await.map_err(conn_error)?;
        Ok(Box::new(self.uni.accepted(
            &self.conn,
            Direction::Uni,
            QuicRecv(r),
        )))
    }

    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError> {
        self.conn
            .send_datagram(data)
            .map_err(|e| TransportError::Datagram(e.to_string()))
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        self.conn.read_datagram().await.map_err(conn_error)
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.conn.max_datagram_size()
    }

    fn close(&self, code: u64, reason: &str) {
        self.conn.close(varint(code), reason.as_bytes());
    }

    async fn closed(&self) -> TransportError {
        conn_error(self.conn.closed().await)
    }

    fn protocol(&self) -> Option<String> {
        negotiated_alpn(&self.conn)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::RawQuic
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        Some(self.conn.remote_address())
    }
}

/// A quinn send stream.
#[derive(Debug)]
pub struct QuicSend(pub quinn::SendStream);

#[async_trait]
impl SendStream for QuicSend {
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
        let _ = self.0.reset(varint(code));
    }

    async fn stopped(&mut self) -> Result<Option<u64>, TransportError> {
        match self.0.stopped().await {
            Ok(code) => Ok(code.map(|c| c.into_inner())),
            Err(quinn::StoppedError::ConnectionLost(e)) => Err(conn_error(e)),
            Err(e) => Err(TransportError::Other(e.to_string())),
        }
    }
}

/// A quinn receive stream.
#[derive(Debug)]
pub struct QuicRecv(pub quinn::RecvStream);

#[async_trait]
impl RecvStream for QuicRecv {
    async fn read_chunk(&mut self, max: usize) -> Result<Option<Bytes>, TransportError> {
        match self.0.read_chunk(max, true).await {
            Ok(Some(chunk)) => Ok(Some(chunk.bytes)),
            Ok(None) => Ok(None),
            Err(e) => Err(read_error(e)),
        }
    }

    fn stop(&mut self, code: u64) {
        let _ = self.0.stop(varint(code));
    }
}
