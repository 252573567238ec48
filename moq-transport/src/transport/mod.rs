//! The transport a session runs over: a small trait, with one adapter per transport.
//!
//! A MOQT session needs bidirectional and unidirectional streams, datagrams, stream priority,
//! stream reset / stop-sending with a code, and connection close with a code. [`Connection`],
//! [`SendStream`] and [`RecvStream`] say exactly that and nothing more, so the same session code
//! runs over raw QUIC and WebTransport (both through [`quic`]).

pub mod credit;
/// An in-memory connection pair, for testing sessions and applications without sockets.
#[cfg(feature = "memory")]
pub mod memory;
pub mod quic;

use std::fmt;
use std::net::SocketAddr;

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

/// One established connection (a QUIC connection or a WebTransport session).
#[async_trait]
pub trait Connection: Send + Sync + 'static {
    /// Opens a bidirectional stream.
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError>;
    /// Opens a unidirectional stream.
    async fn open_uni(&self) -> Result<BoxSendStream, TransportError>;
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
    /// Raw QUIC or WebTransport.
    fn kind(&self) -> TransportKind;
    /// The peer's address.
    fn remote_addr(&self) -> Option<SocketAddr>;
}

/// The sending half of a stream.
#[async_trait]
pub trait SendStream: Send + Sync + 'static {
    /// Writes all of `buf`.
    async fn write_all(&mut self, buf: &[u8]) -> Result<(), TransportError>;
    /// Writes a chunk without copying where the transport allows.
    async fn write_chunk(&mut self, buf: Bytes) -> Result<(), TransportError>;
    /// Writes every chunk in order, without copying where the transport allows, in as few
    /// transport writes as it can (the default writes them one by one).
    async fn write_all_chunks(&mut self, bufs: &mut [Bytes]) -> Result<(), TransportError> {
        for b in bufs.iter_mut() {
            self.write_chunk(std::mem::take(b)).await?;
        }
        Ok(())
    }
    /// Sets the send priority; higher values are sent first.
    fn set_priority(&mut self, priority: i32);
    /// Ends the stream gracefully (FIN) after the data written so far.
    fn finish(&mut self) -> Result<(), TransportError>;
    /// Abandons the stream with RESET_STREAM and `code`.
    fn reset(&mut self, code: u64);
    /// Resolves when the peer sends STOP_SENDING (`Some(code)`), or the stream is fully
    /// acknowledged or closed (`None`).
    async fn stopped(&mut self) -> Result<Option<u64>, TransportError>;
}

/// The receiving half of a stream.
#[async_trait]
pub trait RecvStream: Send + Sync + 'static {
    /// Reads the next chunk of at most `max` bytes; `Ok(None)` at the end of the stream (FIN).
    async fn read_chunk(&mut self, max: usize) -> Result<Option<Bytes>, TransportError>;
    /// Asks the peer to stop sending with STOP_SENDING and `code`.
    fn stop(&mut self, code: u64);
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
