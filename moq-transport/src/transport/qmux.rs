//! The adapter over qmux: MOQT over QMux (draft-ietf-quic-qmux, QUIC's stream frames over a
//! reliable byte stream) over a WebSocket, the fallback where QUIC or HTTP/3 is blocked. The
//! version is the application protocol of the negotiated WebSocket subprotocol
//! (`qmux-01.moqt-19` runs draft-19; see [`crate::endpoint::websocket`]).
//!
//! QMux has streams, stream reset / stop-sending with a code, a close with a code and
//! reason, and datagrams (which a byte stream delivers reliably), so the session code runs
//! over it unchanged. Its priorities are eight bits (higher first): control streams 255,
//! request streams 254, data streams by subscriber priority below.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use futures::{FutureExt, Sink, SinkExt, Stream, StreamExt};
use moq_core::coding::QuicVarInt;
use parking_lot::Mutex;
use qmux::ws::tungstenite::{Error as WsError, Message, error::ProtocolError};
use web_transport_trait::{
    Error as _, RecvStream as QRecvStream, SendStream as QSendStream, Session as QSession,
};

use super::{
    BoxRecvStream, BoxSendStream, Connection, RecvStream, SendStream, TransportError, TransportKind,
};

/// The most bytes one write hands to qmux (copied; [`SendStream::poll_write_chunks`] copies
/// nothing).
const MAX_WRITE: usize = 64 * 1024;

/// How long a closed WebSocket waits for the peer's Close (see [`Lingering`]).
const LINGER: Duration = Duration::from_secs(3);

/// A MOQT connection over a QMux session. Clones share the session.
#[derive(Clone)]
pub struct QmuxConnection(Arc<Shared>);

/// What a connection and its send streams share.
struct Shared {
    session: qmux::Session,
    remote: Option<SocketAddr>,
    /// Set by [`Connection::close`]: our code and reason, for [`Connection::closed`] (our own
    /// close is reported as ours) and for the socket underneath (see [`Lingering`]).
    local_close: Arc<LocalClose>,
}

/// The code and reason of the close our side made, if it made one.
#[derive(Debug, Default)]
pub(crate) struct LocalClose(OnceLock<(u32, String)>);

impl Shared {
    /// How the session ended, if it has: its close code and reason, whoever closed it.
    fn end(&self) -> Option<TransportError> {
        Some(self.ended_with(self.session.closed().now_or_never()?))
    }

    /// The end of a session that qmux says ended with `e`: our own close is reported as ours.
    fn ended_with(&self, e: qmux::Error) -> TransportError {
        match self.local_close.0.get() {
            Some(_) => TransportError::ClosedLocally,
            None => session_error(e),
        }
    }

    /// `e` as the session's end when `e` only says the session is gone (qmux reports a
    /// stream or accept that fails for that as a bare `Closed`, losing the close code).
    fn error(&self, e: qmux::Error) -> TransportError {
        match e {
            qmux::Error::StreamReset(_)
            | qmux::Error::StreamStop(_)
            | qmux::Error::StreamClosed => session_error(e),
            e => self.end().unwrap_or_else(|| session_error(e)),
        }
    }
}

impl std::fmt::Debug for QmuxConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QmuxConnection")
            .field("protocol", &self.0.session.protocol())
            .field("remote", &self.0.remote)
            .finish()
    }
}

impl QmuxConnection {
    /// Wraps an established QMux session whose application protocol is the MOQT version's
    /// ALPN token (`moqt-19`, ...); `remote` is the peer's address as far as known.
    ///
    /// The sessions [`crate::endpoint::websocket`] makes also run on a WebSocket that finishes
    /// a close qmux leaves undone, so that the close reaches the peer with its code whatever
    /// qmux was doing when it was made; a session wrapped here has only what qmux does.
    pub fn new(session: qmux::Session, remote: Option<SocketAddr>) -> Self {
        Self::with_close(session, remote, Arc::default())
    }

    /// [`Self::new`] for a session on the socket [`lingering`] wrapped with `local_close`.
    pub(crate) fn with_close(
        session: qmux::Session,
        remote: Option<SocketAddr>,
        local_close: Arc<LocalClose>,
    ) -> Self {
        QmuxConnection(Arc::new(Shared {
            session,
            remote,
            local_close,
        }))
    }

    /// The underlying QMux session.
    pub fn inner(&self) -> &qmux::Session {
        &self.0.session
    }
}

fn code32(code: u64) -> u32 {
    u32::try_from(code).unwrap_or(u32::MAX)
}

/// Maps a qmux error that ended the session (or was seen on one of its streams).
fn session_error(e: qmux::Error) -> TransportError {
    if let Some((code, reason)) = e.session_error() {
        return TransportError::ClosedByPeer {
            code: code.into(),
            reason,
        };
    }
    match e {
        qmux::Error::StreamReset(_) => TransportError::Reset(stream_code(&e)),
        qmux::Error::StreamStop(_) => TransportError::Stopped(stream_code(&e)),
        qmux::Error::StreamClosed => TransportError::StreamClosed,
        e => TransportError::Lost(e.to_string()),
    }
}

fn stream_code(e: &qmux::Error) -> u64 {
    e.stream_error()
        .map(u64::from)
        .unwrap_or(u64::from(u32::MAX))
}

/// The eight-bit send priority (higher first) for one of the session's: control streams
/// 255, request streams 254, data streams by their subscriber priority (the top bits of
/// [`crate::track::stream_priority`]'s value) in 0..=253. Order within a band is qmux's
/// (first queued, first sent), so group order within one subscriber priority is not kept.
fn band(priority: i32) -> u8 {
    match priority {
        i32::MAX => 255,
        p if p == i32::MAX - 1 => 254,
        // The top eight bits (0..=255), scaled into 0..=253 so that none collapse.
        p => u8::try_from((p.max(0) >> 23) * 253 / 255).unwrap_or(253),
    }
}

#[async_trait]
impl Connection for QmuxConnection {
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let (s, r) = self
            .0
            .session
            .open_bi()
            .await
            .map_err(|e| self.0.error(e))?;
        Ok((Box::new(QmuxSend::new(s, &self.0)), Box::new(QmuxRecv(r))))
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        let s = self
            .0
            .session
            .open_uni()
            .await
            .map_err(|e| self.0.error(e))?;
        Ok(Box::new(QmuxSend::new(s, &self.0)))
    }

    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        // qmux raises the peer's stream limit itself as receive halves are dropped.
        let (s, r) = self
            .0
            .session
            .accept_bi()
            .await
            .map_err(|e| self.0.error(e))?;
        Ok((Box::new(QmuxSend::new(s, &self.0)), Box::new(QmuxRecv(r))))
    }

    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError> {
        let r = self
            .0
            .session
            .accept_uni()
            .await
            .map_err(|e| self.0.error(e))?;
        Ok(Box::new(QmuxRecv(r)))
    }

    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError> {
        self.0
            .session
            .send_datagram(data)
            .map_err(|e| TransportError::Datagram(e.to_string()))
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        self.0
            .session
            .recv_datagram()
            .await
            .map_err(|e| self.0.error(e))
    }

    fn max_datagram_size(&self) -> Option<usize> {
        Some(self.0.session.max_datagram_size()).filter(|n| *n > 0)
    }

    fn close(&self, code: u64, reason: &str) {
        // A session the peer already closed keeps the peer's code: qmux's close would
        // replace it with ours.
        if self.0.session.closed().now_or_never().is_some() {
            return;
        }
        // Recorded first, so the socket can still send it if qmux's own frame never leaves.
        let _ = self.0.local_close.0.set((code32(code), reason.to_string()));
        self.0.session.close(code32(code), reason);
    }

    async fn closed(&self) -> TransportError {
        self.0.ended_with(self.0.session.closed().await)
    }

    fn protocol(&self) -> Option<String> {
        self.0.session.protocol().map(str::to_owned)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::WebSocket
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        self.0.remote
    }
}

/// What a write in progress resolves to: the stream back, and what was written (`None`
/// when it was abandoned for a reset).
type WriteDone = (qmux::SendStream, Option<Result<usize, qmux::Error>>);

/// A write handed to qmux, which owns the stream until it resolves.
struct Write {
    /// The number of bytes being written.
    len: usize,
    future: Mutex<Pin<Box<dyn Future<Output = WriteDone> + Send>>>,
    abandon: Arc<AtomicBool>,
}

/// Writes all of `data`; returns early, before or between its frames, once `abandon` is set
/// (qmux's writes may be dropped between frames without losing bytes).
async fn write(
    mut stream: qmux::SendStream,
    mut data: Bytes,
    abandon: Arc<AtomicBool>,
) -> WriteDone {
    let abandoned = std::future::poll_fn(|_| match abandon.load(Ordering::Acquire) {
        true => Poll::Ready(()),
        false => Poll::Pending,
    });
    let result = tokio::select! {
        biased;
        () = abandoned => None,
        r = stream.write_buf(&mut data) => Some(r),
    };
    (stream, result)
}

/// A send stream over qmux.
///
/// qmux's writes are futures: one in progress is kept here and polled by the next
/// `poll_write` (the caller gives the same bytes again, as [`SendStream`] asks), so `Pending`
/// can mean the bytes are on their way; a write abandoned half done (the future dropped and
/// the bytes never offered again) was still sent. Dropped unfinished, the stream is finished
/// (as [`SendStream`] says).
pub struct QmuxSend {
    stream: Option<qmux::SendStream>,
    /// The session, for the code it ended with when a write fails because it did.
    conn: Arc<Shared>,
    writing: Option<Write>,
    /// A write that completed while [`SendStream::poll_stopped`] polled it, reported by the
    /// next write.
    done: Option<Result<usize, TransportError>>,
    /// A priority set while a write held the stream, applied when it returns.
    priority: Option<u8>,
    finished: bool,
    ended: bool,
}

impl std::fmt::Debug for QmuxSend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QmuxSend")
            .field("writing", &self.writing.as_ref().map(|w| w.len))
            .field("finished", &self.finished)
            .finish()
    }
}

impl QmuxSend {
    fn new(stream: qmux::SendStream, conn: &Arc<Shared>) -> Self {
        QmuxSend {
            stream: Some(stream),
            conn: conn.clone(),
            writing: None,
            done: None,
            priority: None,
            finished: false,
            ended: false,
        }
    }

    /// Polls the write in progress, if any: `Ready` once there is none (its outcome kept in
    /// `done`).
    fn poll_writing(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(w) = self.writing.as_mut() else {
            return Poll::Ready(());
        };
        let (stream, result) = ready!(w.future.get_mut().as_mut().poll(cx));
        let len = w.len;
        self.writing = None;
        let mut stream = stream;
        if let Some(p) = self.priority.take() {
            stream.set_priority(p);
        }
        self.stream = Some(stream);
        self.done = Some(match result {
            Some(Ok(_)) => Ok(len),
            Some(Err(e)) => Err(self.conn.error(e)),
            None => Err(TransportError::StreamClosed),
        });
        Poll::Ready(())
    }

    /// Settles the write in progress without waiting, abandoning it if `abandon`: true if
    /// none is left.
    fn settle(&mut self, abandon: bool) -> bool {
        if let Some(w) = &self.writing
            && abandon
        {
            w.abandon.store(true, Ordering::Release);
        }
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        self.poll_writing(&mut cx).is_ready()
    }

    /// Starts writing `data` (at most [`MAX_WRITE`] bytes), or reports the write in progress.
    fn poll_write_bytes(
        &mut self,
        cx: &mut Context<'_>,
        data: impl FnOnce() -> Bytes,
    ) -> Poll<Result<usize, TransportError>> {
        loop {
            if let Some(done) = self.done.take() {
                return Poll::Ready(done);
            }
            if self.writing.is_some() {
                ready!(self.poll_writing(cx));
                continue;
            }
            if self.ended {
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            let stream = self.stream.take().ok_or(TransportError::StreamClosed)?;
            let data = data();
            let abandon = Arc::new(AtomicBool::new(false));
            self.writing = Some(Write {
                len: data.len(),
                future: Mutex::new(Box::pin(write(stream, data, abandon.clone()))),
                abandon,
            });
            return self.poll_write_bytes(cx, Bytes::new);
        }
    }
}

impl SendStream for QmuxSend {
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, TransportError>> {
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = buf.len().min(MAX_WRITE);
        self.poll_write_bytes(cx, || Bytes::copy_from_slice(buf.get(..n).unwrap_or(buf)))
    }

    fn poll_write_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<usize, TransportError>> {
        let Some(first) = bufs.iter().find(|b| !b.is_empty()).cloned() else {
            return Poll::Ready(Ok(0));
        };
        let written = ready!(self.poll_write_bytes(cx, || first))?;
        let mut left = written;
        for b in bufs.iter_mut() {
            let n = left.min(b.len());
            b.advance(n);
            left -= n;
            if left == 0 {
                break;
            }
        }
        Poll::Ready(Ok(written))
    }

    fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<u64>, TransportError>> {
        ready!(self.poll_writing(cx));
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready(Ok(None));
        };
        match pin!(stream.closed()).poll(cx) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(None)),
            Poll::Ready(Err(e @ qmux::Error::StreamStop(_))) => {
                Poll::Ready(Ok(Some(stream_code(&e))))
            }
            Poll::Ready(Err(qmux::Error::StreamReset(_) | qmux::Error::StreamClosed)) => {
                Poll::Ready(Ok(None))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(self.conn.error(e))),
            // A finished stream is delivered as far as this side can tell: the byte stream
            // underneath is reliable, and QMux acknowledges nothing.
            Poll::Pending if self.finished => Poll::Ready(Ok(None)),
            Poll::Pending => Poll::Pending,
        }
    }

    fn set_priority(&mut self, priority: i32) {
        match self.stream.as_mut() {
            Some(s) => s.set_priority(band(priority)),
            None => self.priority = Some(band(priority)),
        }
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        if !self.settle(false) {
            return Err(TransportError::Other("a write is in progress".into()));
        }
        let stream = self.stream.as_mut().ok_or(TransportError::StreamClosed)?;
        stream.finish().map_err(|_| TransportError::StreamClosed)?;
        self.finished = true;
        self.ended = true;
        Ok(())
    }

    fn reset(&mut self, code: u64) {
        self.settle(true);
        self.done = None;
        self.ended = true;
        if let Some(s) = self.stream.as_mut() {
            s.reset(code32(code));
        }
    }
}

impl Drop for QmuxSend {
    fn drop(&mut self) {
        // qmux resets a stream dropped unfinished; the transport trait finishes it.
        if !self.ended && self.settle(false) {
            let _ = self.finish();
        }
    }
}

/// A receive stream over qmux. Dropped before the FIN or a reset, it sends STOP_SENDING with
/// code 0 (qmux's behaviour, as [`RecvStream`] says).
pub struct QmuxRecv(qmux::RecvStream);

impl std::fmt::Debug for QmuxRecv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QmuxRecv")
    }
}

impl RecvStream for QmuxRecv {
    fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<Result<Option<Bytes>, TransportError>> {
        // qmux's read keeps its state in the stream and waits only on channel receives:
        // cancel-safe, so a future made and dropped per poll loses nothing.
        Poll::Ready(match ready!(pin!(self.0.read_chunk(max)).poll(cx)) {
            Ok(chunk) => Ok(chunk),
            Err(e) => Err(session_error(e)),
        })
    }

    fn stop(&mut self, code: u64) {
        self.0.stop(code32(code));
    }
}

/// A WebSocket, as qmux takes one.
pub(crate) trait WsSocket:
    Stream<Item = Result<Message, WsError>> + Sink<Message, Error = WsError> + Unpin + Send + 'static
{
}

impl<W> WsSocket for W where
    W: Stream<Item = Result<Message, WsError>>
        + Sink<Message, Error = WsError>
        + Unpin
        + Send
        + 'static
{
}

/// A WebSocket for a QMux session, and the [`LocalClose`] the session's
/// [`QmuxConnection::with_close`] must be given.
pub(crate) fn lingering<W: WsSocket>(ws: W) -> (Lingering<W>, Arc<LocalClose>) {
    let local_close = Arc::new(LocalClose::default());
    let ws = Lingering {
        ws: Some(ws),
        local_close: local_close.clone(),
        close_sent: false,
        ws_closed: false,
        peer_closed: false,
    };
    (ws, local_close)
}

/// The WebSocket under a QMux session, which finishes the session's close once qmux lets go of
/// it, and keeps a peer's close from being taken for a failed write (qmux 0.5.3 falls short
/// in three ways, each of which loses a close code):
///
/// - A close that finds qmux's writer in the middle of a write (the socket busy) abandons
///   that write and drops the APPLICATION_CLOSE queued behind it, and the WebSocket is dropped
///   without its Close. Here the abandoned message is still flushed, the APPLICATION_CLOSE
///   sent if it never was, then the Close.
/// - The socket is dropped as soon as the session ends, unread bytes and all, and a TCP socket
///   closed with unread bytes answers with a reset, which can make the peer discard what it
///   had not read yet: our APPLICATION_CLOSE among it. Here the socket is read until the
///   peer's Close (or its end, or [`LINGER`]) first, as RFC 6455 §7.1.1 asks of an endpoint
///   that closes.
/// - The peer's close is taken for a lost connection: qmux's reader, having handled the peer's
///   APPLICATION_CLOSE, reads on, and the WebSocket's Close that follows replaces the
///   session's end (the peer's code) with a bare `Closed`. And a write that fails because
///   that Close has arrived ends the session the same way before the reader has come to the
///   APPLICATION_CLOSE. Here qmux is given nothing after a message that starts with the
///   peer's APPLICATION_CLOSE or CONNECTION_CLOSE (qmux sends each alone in its message; a
///   peer that puts one after other frames of a record is not caught), and such a failed
///   write is dropped instead (see [`Lingering::unless_closing`]).
///
/// All three belong in qmux; this does them from outside.
pub(crate) struct Lingering<W: WsSocket> {
    ws: Option<W>,
    local_close: Arc<LocalClose>,
    /// An APPLICATION_CLOSE went to the socket.
    close_sent: bool,
    /// qmux started the WebSocket's close.
    ws_closed: bool,
    /// The peer's APPLICATION_CLOSE or CONNECTION_CLOSE was passed to qmux.
    peer_closed: bool,
}

/// RFC 9000 §19.19's APPLICATION_CLOSE frame type, which QMux keeps (draft-ietf-quic-qmux
/// §5): alone in its WebSocket message, as qmux sends it.
const APPLICATION_CLOSE: u8 = 0x1d;
/// RFC 9000 §19.19's CONNECTION_CLOSE frame type (a transport error).
const CONNECTION_CLOSE: u8 = 0x1c;

/// An APPLICATION_CLOSE frame (qmux-00 and qmux-01 encode it alike): type, error code,
/// reason length, reason.
pub(crate) fn application_close(code: u32, reason: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(reason.len() + 12);
    b.put_u8(APPLICATION_CLOSE);
    let _ = QuicVarInt::encode(code.into(), &mut b);
    let _ = QuicVarInt::encode(reason.len() as u64, &mut b);
    b.put_slice(reason.as_bytes());
    b.freeze()
}

impl<W: WsSocket> Stream for Lingering<W> {
    type Item = Result<Message, WsError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // Nothing after the peer's close reaches qmux (see the type's doc); the socket is read
        // on when qmux lets go of it.
        if self.peer_closed {
            return Poll::Pending;
        }
        let Some(ws) = self.ws.as_mut() else {
            return Poll::Ready(None);
        };
        let item = ready!(ws.poll_next_unpin(cx));
        if let Some(Ok(Message::Binary(b))) = &item {
            self.peer_closed = matches!(b.first(), Some(&(APPLICATION_CLOSE | CONNECTION_CLOSE)));
        }
        Poll::Ready(item)
    }
}

impl<W: WsSocket> Lingering<W> {
    /// `r`, unless it fails because the WebSocket is closing: then the message is dropped
    /// and `Ok` returned. qmux ends a session whose write fails with a bare `Closed`, and the
    /// first end wins; a peer that sends its APPLICATION_CLOSE and then its Close makes every
    /// write fail before qmux's reader has come to the APPLICATION_CLOSE, so the peer's code
    /// would be lost. The reader ends the session at the peer's Close in any case.
    fn unless_closing<T: Default>(r: Result<T, WsError>) -> Result<T, WsError> {
        match r {
            Err(
                WsError::ConnectionClosed
                | WsError::AlreadyClosed
                | WsError::Protocol(ProtocolError::SendAfterClosing),
            ) => Ok(T::default()),
            r => r,
        }
    }
}

impl<W: WsSocket> Sink<Message> for Lingering<W> {
    type Error = WsError;

    fn poll_ready(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        match self.ws.as_mut() {
            Some(ws) => ws.poll_ready_unpin(cx).map(Self::unless_closing),
            None => Poll::Ready(Err(WsError::AlreadyClosed)),
        }
    }

    fn start_send(mut self: Pin<&mut Self>, msg: Message) -> Result<(), WsError> {
        let close = match &msg {
            Message::Binary(b) => b.first() == Some(&APPLICATION_CLOSE),
            _ => false,
        };
        let closing = matches!(msg, Message::Close(_));
        let ws = self.ws.as_mut().ok_or(WsError::AlreadyClosed)?;
        Self::unless_closing(ws.start_send_unpin(msg))?;
        self.close_sent |= close;
        self.ws_closed |= closing;
        Ok(())
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        match self.ws.as_mut() {
            Some(ws) => ws.poll_flush_unpin(cx).map(Self::unless_closing),
            None => Poll::Ready(Ok(())),
        }
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), WsError>> {
        self.ws_closed = true;
        match self.ws.as_mut() {
            Some(ws) => ws.poll_close_unpin(cx),
            None => Poll::Ready(Ok(())),
        }
    }
}

impl<W: WsSocket> Drop for Lingering<W> {
    fn drop(&mut self) {
        // Without a runtime (it is shutting down) there is nobody left to tell.
        let (Some(ws), Ok(rt)) = (self.ws.take(), tokio::runtime::Handle::try_current()) else {
            return;
        };
        let close = match (self.close_sent, self.ws_closed) {
            (false, false) => self.local_close.0.get().cloned(),
            _ => None,
        };
        rt.spawn(linger(ws, close, self.ws_closed));
    }
}

/// Finishes the close of a WebSocket qmux let go of: sends `close` (our APPLICATION_CLOSE that
/// qmux did not send) and the WebSocket's Close unless qmux `closed` it, flushes, then reads
/// until the peer's Close, for at most [`LINGER`].
async fn linger<W: WsSocket>(mut ws: W, close: Option<(u32, String)>, closed: bool) {
    let finish = async {
        if let Some((code, reason)) = close {
            tracing::debug!(code, "sending the APPLICATION_CLOSE qmux dropped");
            ws.feed(Message::Binary(application_close(code, &reason)))
                .await?;
        }
        match closed {
            true => ws.flush().await?,
            // RFC 6455 §5.5.1: flushes what is queued, then the Close.
            false => ws.close().await?,
        }
        while let Some(Ok(_)) = ws.next().await {}
        Ok::<_, WsError>(())
    };
    let _ = tokio::time::timeout(LINGER, finish).await;
}

#[cfg(test)]
mod tests {
    use super::band;

    /// Control above requests above data; data ordered by subscriber priority.
    #[test]
    fn bands_keep_the_order() {
        use crate::track::stream_priority;
        use moq_core::GroupOrder;
        let data = |sub| band(stream_priority(sub, 128, GroupOrder::Ascending, 0, 0));
        assert_eq!(band(i32::MAX), 255);
        assert_eq!(band(i32::MAX - 1), 254);
        assert!(data(0) <= 253);
        assert!(data(0) > data(1));
        assert!(data(1) > data(200));
        assert_eq!(band(-5), 0);
    }
}
