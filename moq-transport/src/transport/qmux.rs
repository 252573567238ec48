//! The adapter over qmux: MOQT over QMux (draft-ietf-quic-qmux, QUIC's stream frames over a
//! reliable byte stream) over a WebSocket, the fallback where QUIC or HTTP/3 is blocked. The
//! version is the application protocol of the negotiated WebSocket subprotocol
//! (`qmux-01.moqt-19` runs draft-19; see [`crate::endpoint::websocket`]).
//!
//! QMux has streams, stream reset / stop-sending with a code, a close with a code and
//! reason, and datagrams (which a byte stream delivers reliably), so the session code runs
//! over it unchanged. Its priorities are eight bits (higher first): see `band` (below).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};

use async_trait::async_trait;
use bytes::{Buf, Bytes};
use parking_lot::Mutex;
use web_transport_trait::{
    Error as _, RecvStream as QRecvStream, SendStream as QSendStream, Session as QSession,
};

use super::{
    BoxRecvStream, BoxSendStream, Connection, RecvStream, SendStream, TransportError, TransportKind,
};

/// The most bytes one write hands to qmux (copied; [`SendStream::poll_write_chunks`] copies
/// nothing).
const MAX_WRITE: usize = 64 * 1024;

/// A MOQT connection over a QMux session. Clones share the session.
#[derive(Clone)]
pub struct QmuxConnection {
    session: qmux::Session,
    remote: Option<SocketAddr>,
    /// Set by [`Connection::close`], so [`Connection::closed`] reports our own close as ours.
    closed_locally: Arc<AtomicBool>,
}

impl std::fmt::Debug for QmuxConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QmuxConnection")
            .field("protocol", &self.session.protocol())
            .field("remote", &self.remote)
            .finish()
    }
}

impl QmuxConnection {
    /// Wraps an established QMux session whose application protocol is the MOQT version's
    /// ALPN token (`moqt-19`, ...); `remote` is the peer's address as far as known.
    pub fn new(session: qmux::Session, remote: Option<SocketAddr>) -> Self {
        QmuxConnection {
            session,
            remote,
            closed_locally: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The underlying QMux session.
    pub fn inner(&self) -> &qmux::Session {
        &self.session
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
        p => u8::try_from(p.max(0) >> 23).unwrap_or(u8::MAX).min(253),
    }
}

#[async_trait]
impl Connection for QmuxConnection {
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let (s, r) = self.session.open_bi().await.map_err(session_error)?;
        Ok((Box::new(QmuxSend::new(s)), Box::new(QmuxRecv(r))))
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        let s = self.session.open_uni().await.map_err(session_error)?;
        Ok(Box::new(QmuxSend::new(s)))
    }

    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        // qmux raises the peer's stream limit itself as receive halves are dropped.
        let (s, r) = self.session.accept_bi().await.map_err(session_error)?;
        Ok((Box::new(QmuxSend::new(s)), Box::new(QmuxRecv(r))))
    }

    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError> {
        let r = self.session.accept_uni().await.map_err(session_error)?;
        Ok(Box::new(QmuxRecv(r)))
    }

    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError> {
        self.session
            .send_datagram(data)
            .map_err(|e| TransportError::Datagram(e.to_string()))
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        self.session.recv_datagram().await.map_err(session_error)
    }

    fn max_datagram_size(&self) -> Option<usize> {
        Some(self.session.max_datagram_size()).filter(|n| *n > 0)
    }

    fn close(&self, code: u64, reason: &str) {
        self.closed_locally.store(true, Ordering::Release);
        self.session.close(code32(code), reason);
    }

    async fn closed(&self) -> TransportError {
        let e = self.session.closed().await;
        match self.closed_locally.load(Ordering::Acquire) {
            true => TransportError::ClosedLocally,
            false => session_error(e),
        }
    }

    fn protocol(&self) -> Option<String> {
        self.session.protocol().map(str::to_owned)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::WebSocket
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        self.remote
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
    fn new(stream: qmux::SendStream) -> Self {
        QmuxSend {
            stream: Some(stream),
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
            Some(Err(e)) => Err(session_error(e)),
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
            Poll::Ready(Err(e)) => Poll::Ready(Err(session_error(e))),
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
