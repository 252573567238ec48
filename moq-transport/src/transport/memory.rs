//! An in-memory transport: a connected pair of [`Connection`]s with no sockets.
//!
//! It is for testing MOQT sessions and applications without QUIC: [`pair`] gives a client end
//! and a server end, and everything one end sends the other receives, in the same process.
//!
//! The pair behaves like the quinn adapter ([`super::quic`]) as seen through the traits:
//!
//! - streams are accepted in opening order, and opening waits while the peer has too many
//!   opened streams it has not accepted yet (like running out of stream credit);
//! - writes wait while a stream's buffer is full (flow control), so a slow reader costs bounded
//!   memory;
//! - FIN, RESET_STREAM and STOP_SENDING carry their codes to the other half, a reset discards
//!   the data not read yet, and [`SendStream::poll_stopped`] resolves on STOP_SENDING, or once the
//!   reader has everything up to the FIN, or after a reset;
//! - dropping a send half that was neither finished nor reset finishes it, and dropping a receive
//!   half before the FIN or a reset stops it with code 0;
//! - datagrams are refused above the maximum size and silently dropped when the peer's queue is
//!   full;
//! - the first close wins: the peer sees [`TransportError::ClosedByPeer`], we see
//!   [`TransportError::ClosedLocally`], and every pending and later operation fails with it;
//! - a connection end is closed with code 0 once every handle to it is dropped: its clones and
//!   its streams (quinn streams keep their connection alive too).
//!
//! One difference: the peer can accept a stream as soon as it is opened, where quinn announces
//! it only with its first frame (data, FIN or reset).

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use async_trait::async_trait;
use bytes::Bytes;
use futures::task::AtomicWaker;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::{
    BoxRecvStream, BoxSendStream, Connection, RecvStream, SendStream, TransportError, TransportKind,
};

/// Buffer and queue sizes of a memory pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryLimits {
    /// Bytes buffered unread per stream before writes wait (at least 1). Default 1 MiB.
    pub stream_buffer: usize,
    /// Bidirectional streams one end may have opened that the peer has not accepted yet;
    /// opening waits beyond it. Default 1024.
    pub max_bidi_streams: usize,
    /// Unidirectional streams one end may have opened that the peer has not accepted yet;
    /// opening waits beyond it. Default 4096.
    pub max_uni_streams: usize,
    /// Datagrams buffered unread per end; newer ones are dropped beyond it. Default 1024.
    pub datagram_queue: usize,
    /// The largest datagram payload, or `None` if datagrams are not supported. Default 1200.
    pub max_datagram_size: Option<usize>,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            stream_buffer: 1 << 20,
            max_bidi_streams: 1024,
            max_uni_streams: 4096,
            datagram_queue: 1024,
            max_datagram_size: Some(1200),
        }
    }
}

/// Creates a connected pair with the default [`MemoryLimits`]: `(client end, server end)`.
///
/// Both ends report `protocol` (e.g. `moqt-19`) and `kind`.
///
/// ```
/// # use moq_transport::transport::{Connection, TransportKind};
/// # use moq_transport::transport::memory;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), moq_transport::transport::TransportError> {
/// let (client, server) = memory::pair("moqt-19", TransportKind::RawQuic);
/// let mut send = client.open_uni().await?;
/// send.write_all(b"hello").await?;
/// send.finish()?;
/// let mut recv = server.accept_uni().await?;
/// assert_eq!(recv.read_chunk(64).await?.as_deref(), Some(&b"hello"[..]));
/// assert_eq!(recv.read_chunk(64).await?, None);
/// # Ok(())
/// # }
/// ```
pub fn pair(protocol: &str, kind: TransportKind) -> (MemoryConnection, MemoryConnection) {
    pair_with(protocol, kind, MemoryLimits::default())
}

/// Creates a connected pair with the given limits: `(client end, server end)`.
pub fn pair_with(
    protocol: &str,
    kind: TransportKind,
    limits: MemoryLimits,
) -> (MemoryConnection, MemoryConnection) {
    let link = Arc::new(Link {
        protocol: protocol.to_owned(),
        kind,
        limits,
        state: Mutex::new(LinkState::default()),
        client_changed: Notify::new(),
        server_changed: Notify::new(),
        closed: Notify::new(),
        pipes: Mutex::new(Vec::new()),
    });
    let end = |side| MemoryConnection {
        end: Arc::new(End {
            link: link.clone(),
            side,
        }),
    };
    (end(Side::Client), end(Side::Server))
}

/// Waits until `check` returns a value, re-checking whenever `a` or `b` is notified.
///
/// Both notifications are registered before each check, so a change made between the check
/// and the wait is not missed. `check` must not block on anything but short locks, and must
/// not notify `a` or `b` unless it returns a value (it would wake its own wait and spin).
async fn wait_for<T>(a: &Notify, b: &Notify, mut check: impl FnMut() -> Option<T>) -> T {
    loop {
        let na = a.notified();
        let nb = b.notified();
        tokio::pin!(na, nb);
        na.as_mut().enable();
        nb.as_mut().enable();
        if let Some(v) = check() {
            return v;
        }
        tokio::select! {
            _ = &mut na => {}
            _ = &mut nb => {}
        }
    }
}

/// Which end of the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

impl Side {
    fn peer(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// How the pair was closed.
#[derive(Debug)]
struct Close {
    code: u64,
    reason: String,
    by: Side,
}

impl Close {
    /// The error `side` sees.
    fn error_for(&self, side: Side) -> TransportError {
        if self.by == side {
            TransportError::ClosedLocally
        } else {
            TransportError::ClosedByPeer {
                code: self.code,
                reason: self.reason.clone(),
            }
        }
    }
}

/// What the peer sent one end that it has not taken yet.
#[derive(Default)]
struct Inbox {
    /// Bidirectional streams: (the pipe the acceptor sends on, the pipe it receives on).
    bi: VecDeque<(Arc<Pipe>, Arc<Pipe>)>,
    /// Unidirectional streams, received by the acceptor.
    uni: VecDeque<Arc<Pipe>>,
    datagrams: VecDeque<Bytes>,
}

#[derive(Default)]
struct LinkState {
    close: Option<Close>,
    client: Inbox,
    server: Inbox,
}

impl LinkState {
    fn inbox(&mut self, side: Side) -> &mut Inbox {
        match side {
            Side::Client => &mut self.client,
            Side::Server => &mut self.server,
        }
    }
}

/// State shared by both ends.
struct Link {
    protocol: String,
    kind: TransportKind,
    limits: MemoryLimits,
    state: Mutex<LinkState>,
    /// Notified when the client's inbox changes.
    client_changed: Notify,
    /// Notified when the server's inbox changes.
    server_changed: Notify,
    /// Notified once, when the pair is closed.
    closed: Notify,
    /// Every stream's pipes, woken when the pair is closed.
    pipes: Mutex<Vec<Weak<Pipe>>>,
}

impl Link {
    fn changed(&self, side: Side) -> &Notify {
        match side {
            Side::Client => &self.client_changed,
            Side::Server => &self.server_changed,
        }
    }

    /// The error `side` sees if the pair is closed.
    fn close_error(&self, side: Side) -> Option<TransportError> {
        self.state.lock().close.as_ref().map(|c| c.error_for(side))
    }

    fn close(&self, by: Side, code: u64, reason: &str) {
        let dropped = {
            let mut state = self.state.lock();
            if state.close.is_some() {
                return;
            }
            state.close = Some(Close {
                code,
                reason: reason.to_owned(),
                by,
            });
            (
                std::mem::take(&mut state.client),
                std::mem::take(&mut state.server),
            )
        };
        drop(dropped);
        let pipes = std::mem::take(&mut *self.pipes.lock());
        for pipe in pipes.iter().filter_map(Weak::upgrade) {
            pipe.wake_all();
        }
        self.closed.notify_waiters();
        self.client_changed.notify_waiters();
        self.server_changed.notify_waiters();
    }
}

/// One end of the pair. Closes it when the last handle (connection clone or stream) is dropped.
struct End {
    link: Arc<Link>,
    side: Side,
}

impl End {
    fn close_error(&self) -> Option<TransportError> {
        self.link.close_error(self.side)
    }
}

impl Drop for End {
    fn drop(&mut self) {
        self.link.close(self.side, 0, "");
    }
}

/// The writer's side of a pipe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SendState {
    Open,
    Finished,
    Reset(u64),
}

/// One direction of one stream.
struct Pipe {
    /// Bytes buffered unread before writes wait.
    capacity: usize,
    state: Mutex<PipeState>,
    /// The reader waiting for data, the FIN or a reset.
    reader: AtomicWaker,
    /// The writer waiting for room.
    writer: AtomicWaker,
    /// The writer waiting for STOP_SENDING or the end of the stream.
    stopped: AtomicWaker,
}

struct PipeState {
    chunks: VecDeque<Bytes>,
    buffered: usize,
    send: SendState,
    /// STOP_SENDING from the reader.
    stop: Option<u64>,
    /// The reader has read the FIN.
    read_fin: bool,
}

impl Pipe {
    fn new(capacity: usize) -> Arc<Pipe> {
        Arc::new(Pipe {
            capacity: capacity.max(1),
            state: Mutex::new(PipeState {
                chunks: VecDeque::new(),
                buffered: 0,
                send: SendState::Open,
                stop: None,
                read_fin: false,
            }),
            reader: AtomicWaker::new(),
            writer: AtomicWaker::new(),
            stopped: AtomicWaker::new(),
        })
    }

    /// Changes the state and wakes both halves.
    fn update<R>(&self, f: impl FnOnce(&mut PipeState) -> R) -> R {
        let r = f(&mut self.state.lock());
        self.wake_all();
        r
    }

    fn wake_all(&self) {
        self.reader.wake();
        self.wake_writer();
    }

    fn wake_writer(&self) {
        self.writer.wake();
        self.stopped.wake();
    }

    /// The reader stops the pipe, unless it already ended.
    fn stop(&self, code: u64) {
        self.update(|st| {
            if st.read_fin || st.stop.is_some() || matches!(st.send, SendState::Reset(_)) {
                return;
            }
            st.stop = Some(code);
            st.chunks.clear();
            st.buffered = 0;
        });
    }
}

/// One end of an in-memory connection pair; see [`pair`].
///
/// Clones share the end. It is closed with code 0 once every clone and every stream of it
/// is dropped.
#[derive(Clone)]
pub struct MemoryConnection {
    end: Arc<End>,
}

impl fmt::Debug for MemoryConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryConnection")
            .field("side", &self.end.side)
            .field("protocol", &self.end.link.protocol)
            .field("kind", &self.end.link.kind)
            .finish()
    }
}

impl MemoryConnection {
    /// Keeps `pipe` to be woken when the pair is closed.
    fn register(&self, pipe: &Arc<Pipe>) {
        let mut pipes = self.end.link.pipes.lock();
        if pipes.len() == pipes.capacity() {
            // Amortized: forget the dropped streams before the list grows.
            pipes.retain(|p| p.strong_count() > 0);
        }
        pipes.push(Arc::downgrade(pipe));
    }

    fn send(&self, pipe: Arc<Pipe>) -> MemorySend {
        self.register(&pipe);
        MemorySend {
            end: self.end.clone(),
            pipe,
            priority: 0,
        }
    }

    fn recv(&self, pipe: Arc<Pipe>) -> MemoryRecv {
        self.register(&pipe);
        MemoryRecv {
            end: self.end.clone(),
            pipe,
        }
    }

    /// Waits until `make` finds room in the peer's inbox and queues a stream there.
    async fn open<T>(
        &self,
        mut make: impl FnMut(&mut Inbox) -> Option<T>,
    ) -> Result<T, TransportError> {
        let link = &self.end.link;
        let peer = self.end.side.peer();
        wait_for(link.changed(peer), &link.closed, || {
            let opened = {
                let mut state = link.state.lock();
                if let Some(c) = &state.close {
                    return Some(Err(c.error_for(self.end.side)));
                }
                make(state.inbox(peer))?
            };
            link.changed(peer).notify_waiters();
            Some(Ok(opened))
        })
        .await
    }

    /// Waits for something in our inbox that `take` takes.
    async fn take<T>(
        &self,
        mut take: impl FnMut(&mut Inbox) -> Option<T>,
    ) -> Result<T, TransportError> {
        let link = &self.end.link;
        let side = self.end.side;
        wait_for(link.changed(side), &link.closed, || {
            let taken = {
                let mut state = link.state.lock();
                if let Some(c) = &state.close {
                    return Some(Err(c.error_for(side)));
                }
                take(state.inbox(side))?
            };
            link.changed(side).notify_waiters();
            Some(Ok(taken))
        })
        .await
    }
}

#[async_trait]
impl Connection for MemoryConnection {
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let capacity = self.end.link.limits.stream_buffer;
        let limit = self.end.link.limits.max_bidi_streams;
        let (out, back) = self
            .open(|inbox| {
                if inbox.bi.len() >= limit {
                    return None;
                }
                let out = Pipe::new(capacity);
                let back = Pipe::new(capacity);
                inbox.bi.push_back((back.clone(), out.clone()));
                Some((out, back))
            })
            .await?;
        Ok((Box::new(self.send(out)), Box::new(self.recv(back))))
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        let capacity = self.end.link.limits.stream_buffer;
        let limit = self.end.link.limits.max_uni_streams;
        let out = self
            .open(|inbox| {
                if inbox.uni.len() >= limit {
                    return None;
                }
                let out = Pipe::new(capacity);
                inbox.uni.push_back(out.clone());
                Some(out)
            })
            .await?;
        Ok(Box::new(self.send(out)))
    }

    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let (send, recv) = self.take(|inbox| inbox.bi.pop_front()).await?;
        Ok((Box::new(self.send(send)), Box::new(self.recv(recv))))
    }

    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError> {
        let recv = self.take(|inbox| inbox.uni.pop_front()).await?;
        Ok(Box::new(self.recv(recv)))
    }

    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError> {
        let link = &self.end.link;
        let peer = self.end.side.peer();
        {
            let mut state = link.state.lock();
            if let Some(c) = &state.close {
                return Err(c.error_for(self.end.side));
            }
            let Some(max) = link.limits.max_datagram_size else {
                return Err(TransportError::Datagram(
                    "datagrams are not supported".into(),
                ));
            };
            if data.len() > max {
                return Err(TransportError::Datagram(format!(
                    "{} bytes is more than the maximum of {max}",
                    data.len()
                )));
            }
            let inbox = state.inbox(peer);
            if inbox.datagrams.len() >= link.limits.datagram_queue {
                // Unreliable: dropped, like a datagram lost on the way.
                return Ok(());
            }
            inbox.datagrams.push_back(data);
        }
        link.changed(peer).notify_waiters();
        Ok(())
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        self.take(|inbox| inbox.datagrams.pop_front()).await
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.end.link.limits.max_datagram_size
    }

    fn close(&self, code: u64, reason: &str) {
        self.end.link.close(self.end.side, code, reason);
    }

    async fn closed(&self) -> TransportError {
        let link = &self.end.link;
        wait_for(&link.closed, &link.closed, || self.end.close_error()).await
    }

    fn protocol(&self) -> Option<String> {
        Some(self.end.link.protocol.clone())
    }

    fn kind(&self) -> TransportKind {
        self.end.link.kind
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        None
    }
}

/// The sending half of an in-memory stream. Dropped neither finished nor reset, it finishes
/// the stream (like quinn).
pub struct MemorySend {
    end: Arc<End>,
    pipe: Arc<Pipe>,
    priority: i32,
}

impl fmt::Debug for MemorySend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.pipe.state.lock();
        f.debug_struct("MemorySend")
            .field("side", &self.end.side)
            .field("state", &st.send)
            .field("buffered", &st.buffered)
            .field("stopped", &st.stop)
            .field("priority", &self.priority)
            .finish()
    }
}

impl MemorySend {
    /// Lets `put` queue up to `room` bytes of the `wanted`, once there is room; returns how
    /// many it queued. Fails if the stream or the connection ended first.
    fn poll_put(
        &mut self,
        cx: &mut Context<'_>,
        wanted: usize,
        put: impl FnOnce(&mut VecDeque<Bytes>, usize) -> usize,
    ) -> Poll<Result<usize, TransportError>> {
        if wanted == 0 {
            return Poll::Ready(Ok(0));
        }
        // Registered before the checks, so a change made after them wakes us.
        self.pipe.writer.register(cx.waker());
        if let Some(e) = self.end.close_error() {
            return Poll::Ready(Err(e));
        }
        let n = {
            let mut st = self.pipe.state.lock();
            if st.send != SendState::Open {
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            if let Some(code) = st.stop {
                return Poll::Ready(Err(TransportError::Stopped(code)));
            }
            let room = self.pipe.capacity.saturating_sub(st.buffered);
            if room == 0 {
                return Poll::Pending;
            }
            let n = put(&mut st.chunks, room.min(wanted));
            st.buffered += n;
            n
        };
        self.pipe.reader.wake();
        Poll::Ready(Ok(n))
    }
}

impl SendStream for MemorySend {
    fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<Result<usize, TransportError>> {
        self.poll_put(cx, buf.len(), |chunks, n| {
            let head = buf.get(..n).unwrap_or(buf);
            chunks.push_back(Bytes::copy_from_slice(head));
            head.len()
        })
    }

    fn poll_write_chunks(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &mut [Bytes],
    ) -> Poll<Result<usize, TransportError>> {
        let wanted = bufs.iter().map(Bytes::len).sum();
        self.poll_put(cx, wanted, |chunks, mut room| {
            let mut put = 0;
            for b in bufs.iter_mut().filter(|b| !b.is_empty()) {
                if room == 0 {
                    break;
                }
                let n = room.min(b.len());
                chunks.push_back(b.split_to(n));
                room -= n;
                put += n;
            }
            put
        })
    }

    fn poll_stopped(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<u64>, TransportError>> {
        self.pipe.stopped.register(cx.waker());
        let closed = self.end.close_error();
        let st = self.pipe.state.lock();
        if let Some(code) = st.stop {
            return Poll::Ready(Ok(Some(code)));
        }
        match st.send {
            SendState::Reset(_) => return Poll::Ready(Ok(None)),
            SendState::Finished if st.read_fin => return Poll::Ready(Ok(None)),
            _ => {}
        }
        match closed {
            Some(e) => Poll::Ready(Err(e)),
            None => Poll::Pending,
        }
    }

    fn set_priority(&mut self, priority: i32) {
        self.priority = priority;
    }

    fn finish(&mut self) -> Result<(), TransportError> {
        if let Some(e) = self.end.close_error() {
            return Err(e);
        }
        self.pipe.update(|st| match st.send {
            SendState::Open => {
                st.send = SendState::Finished;
                Ok(())
            }
            _ => Err(TransportError::StreamClosed),
        })
    }

    fn reset(&mut self, code: u64) {
        self.pipe.update(|st| {
            // A reset after the FIN still reaches a reader that has not read everything.
            let ended = matches!(st.send, SendState::Reset(_))
                || (st.send == SendState::Finished && st.read_fin);
            if !ended {
                st.send = SendState::Reset(code);
                st.chunks.clear();
                st.buffered = 0;
            }
        });
    }
}

impl Drop for MemorySend {
    fn drop(&mut self) {
        // Like quinn: a send half dropped while open is finished.
        self.pipe.update(|st| {
            if st.send == SendState::Open {
                st.send = SendState::Finished;
            }
        });
    }
}

/// The receiving half of an in-memory stream. Dropped before the FIN or a reset, it stops
/// the stream with code 0 (like quinn).
pub struct MemoryRecv {
    end: Arc<End>,
    pipe: Arc<Pipe>,
}

impl fmt::Debug for MemoryRecv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.pipe.state.lock();
        f.debug_struct("MemoryRecv")
            .field("side", &self.end.side)
            .field("buffered", &st.buffered)
            .field("sender", &st.send)
            .field("read_fin", &st.read_fin)
            .field("stopped", &st.stop)
            .finish()
    }
}

impl RecvStream for MemoryRecv {
    fn poll_read_chunk(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
    ) -> Poll<Result<Option<Bytes>, TransportError>> {
        // Registered before the checks, so a change made after them wakes us.
        self.pipe.reader.register(cx.waker());
        let closed = self.end.close_error();
        let read = {
            let mut st = self.pipe.state.lock();
            if st.read_fin {
                return Poll::Ready(Ok(None));
            }
            if let Some(e) = closed {
                return Poll::Ready(Err(e));
            }
            if let SendState::Reset(code) = st.send {
                return Poll::Ready(Err(TransportError::Reset(code)));
            }
            if st.stop.is_some() {
                return Poll::Ready(Err(TransportError::StreamClosed));
            }
            if let Some(front) = st.chunks.front_mut() {
                let chunk = if front.len() <= max {
                    let chunk = std::mem::take(front);
                    st.chunks.pop_front();
                    chunk
                } else {
                    front.split_to(max)
                };
                st.buffered = st.buffered.saturating_sub(chunk.len());
                Some(chunk)
            } else if st.send == SendState::Finished {
                st.read_fin = true;
                None
            } else {
                return Poll::Pending;
            }
        };
        // Room for the writer, or the FIN read (which `stopped` waits for).
        self.pipe.wake_writer();
        Poll::Ready(Ok(read))
    }

    fn stop(&mut self, code: u64) {
        self.pipe.stop(code);
    }
}

impl Drop for MemoryRecv {
    fn drop(&mut self) {
        // Like quinn: a receive half dropped before the FIN or a reset stops with code 0.
        self.pipe.stop(0);
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    /// Runs a test body with a deadline.
    async fn timed<F: Future<Output = ()>>(body: F) {
        tokio::time::timeout(Duration::from_secs(5), body)
            .await
            .expect("test timed out");
    }

    fn raw() -> (MemoryConnection, MemoryConnection) {
        pair("moqt-19", TransportKind::RawQuic)
    }

    fn limited(limits: MemoryLimits) -> (MemoryConnection, MemoryConnection) {
        pair_with("moqt-19", TransportKind::RawQuic, limits)
    }

    /// Reads everything up to the FIN.
    async fn read_to_end(recv: &mut BoxRecvStream) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some(chunk) = recv.read_chunk(usize::MAX).await.unwrap() {
            out.extend_from_slice(&chunk);
        }
        out
    }

    /// True if the future is still waiting after one poll.
    fn pending<F: Future + Unpin>(f: &mut F) -> bool {
        f.now_or_never().is_none()
    }

    #[tokio::test]
    async fn reports_protocol_kind_and_no_address() {
        timed(async {
            let (client, server) = pair("moqt-19", TransportKind::WebTransport);
            for end in [&client, &server] {
                assert_eq!(end.protocol().as_deref(), Some("moqt-19"));
                assert_eq!(end.kind(), TransportKind::WebTransport);
                assert_eq!(end.remote_addr(), None);
                assert_eq!(end.max_datagram_size(), Some(1200));
            }
        })
        .await;
    }

    #[tokio::test]
    async fn bidi_round_trip_both_directions() {
        timed(async {
            let (client, server) = raw();
            for (opener, acceptor) in [(&client, &server), (&server, &client)] {
                let (mut send, mut recv) = opener.open_bi().await.unwrap();
                send.write_all(b"ping").await.unwrap();
                send.finish().unwrap();
                let (mut peer_send, mut peer_recv) = acceptor.accept_bi().await.unwrap();
                assert_eq!(read_to_end(&mut peer_recv).await, b"ping");
                peer_send
                    .write_chunk(Bytes::from_static(b"pong"))
                    .await
                    .unwrap();
                peer_send.finish().unwrap();
                assert_eq!(read_to_end(&mut recv).await, b"pong");
            }
        })
        .await;
    }

    #[tokio::test]
    async fn uni_round_trip_both_directions() {
        timed(async {
            let (client, server) = raw();
            for (opener, acceptor) in [(&client, &server), (&server, &client)] {
                let mut send = opener.open_uni().await.unwrap();
                let mut chunks = [Bytes::from_static(b"a"), Bytes::from_static(b"bc")];
                send.write_all_chunks(&mut chunks).await.unwrap();
                send.finish().unwrap();
                let mut recv = acceptor.accept_uni().await.unwrap();
                assert_eq!(read_to_end(&mut recv).await, b"abc");
            }
        })
        .await;
    }

    #[tokio::test]
    async fn streams_are_accepted_in_opening_order() {
        timed(async {
            let (client, server) = raw();
            let mut first = client.open_uni().await.unwrap();
            let mut second = client.open_uni().await.unwrap();
            second.write_all(b"2").await.unwrap();
            first.write_all(b"1").await.unwrap();
            drop((first, second));
            let mut a = server.accept_uni().await.unwrap();
            let mut b = server.accept_uni().await.unwrap();
            assert_eq!(read_to_end(&mut a).await, b"1");
            assert_eq!(read_to_end(&mut b).await, b"2");
        })
        .await;
    }

    #[tokio::test]
    async fn fin_after_data_and_read_max() {
        timed(async {
            let (client, server) = raw();
            let mut send = client.open_uni().await.unwrap();
            send.write_all(b"hello").await.unwrap();
            send.write_all(b"world").await.unwrap();
            send.finish().unwrap();
            let mut recv = server.accept_uni().await.unwrap();
            assert_eq!(
                recv.read_chunk(3).await.unwrap().as_deref(),
                Some(&b"hel"[..])
            );
            assert_eq!(
                recv.read_chunk(3).await.unwrap().as_deref(),
                Some(&b"lo"[..])
            );
            assert_eq!(
                recv.read_chunk(10).await.unwrap().as_deref(),
                Some(&b"world"[..])
            );
            assert_eq!(recv.read_chunk(10).await.unwrap(), None);
            assert_eq!(recv.read_chunk(10).await.unwrap(), None);
        })
        .await;
    }

    #[tokio::test]
    async fn finish_twice_and_write_after_finish_fail() {
        timed(async {
            let (client, _server) = raw();
            let mut send = client.open_uni().await.unwrap();
            send.finish().unwrap();
            assert_eq!(send.finish(), Err(TransportError::StreamClosed));
            assert_eq!(
                send.write_all(b"x").await,
                Err(TransportError::StreamClosed)
            );
        })
        .await;
    }

    #[tokio::test]
    async fn reset_code_reaches_the_reader() {
        timed(async {
            let (client, server) = raw();
            let mut send = client.open_uni().await.unwrap();
            let mut recv = server.accept_uni().await.unwrap();
            let mut read = recv.read_chunk(10);
            assert!(pending(&mut read));
            send.write_all(b"discarded").await.unwrap();
            assert_eq!(read.await.unwrap().as_deref(), Some(&b"discarded"[..]));
            send.write_all(b"unread").await.unwrap();
            send.reset(7);
            assert_eq!(recv.read_chunk(10).await, Err(TransportError::Reset(7)));
            assert_eq!(recv.read_chunk(10).await, Err(TransportError::Reset(7)));
            assert_eq!(
                send.write_all(b"x").await,
                Err(TransportError::StreamClosed)
            );
            assert_eq!(send.finish(), Err(TransportError::StreamClosed));
            assert_eq!(send.stopped().await, Ok(None));
        })
        .await;
    }

    #[tokio::test]
    async fn reset_after_finish_reaches_a_reader_that_has_not_read_the_fin() {
        timed(async {
            let (client, server) = raw();
            let mut send = client.open_uni().await.unwrap();
            send.write_all(b"data").await.unwrap();
            send.finish().unwrap();
            send.reset(3);
            let mut recv = server.accept_uni().await.unwrap();
            assert_eq!(recv.read_chunk(10).await, Err(TransportError::Reset(3)));

            let mut send = client.open_uni().await.unwrap();
            send.write_all(b"data").await.unwrap();
            send.finish().unwrap();
            let mut recv = server.accept_uni().await.unwrap();
            assert_eq!(read_to_end(&mut recv).await, b"data");
            send.reset(3);
            assert_eq!(recv.read_chunk(10).await, Ok(None));
        })
        .await;
    }

    #[tokio::test]
    async fn stop_code_reaches_the_writer() {
        timed(async {
            let (client, server) = raw();
            let (mut send, _recv) = client.open_bi().await.unwrap();
            send.write_all(b"x").await.unwrap();
            let (_peer_send, mut peer_recv) = server.accept_bi().await.unwrap();
            let mut stopped = send.stopped();
            assert!(pending(&mut stopped));
            drop(stopped);
            peer_recv.stop(9);
            assert_eq!(send.stopped().await, Ok(Some(9)));
            assert_eq!(send.write_all(b"y").await, Err(TransportError::Stopped(9)));
            assert_eq!(
                peer_recv.read_chunk(10).await,
                Err(TransportError::StreamClosed)
            );
        })
        .await;
    }

    #[tokio::test]
    async fn stop_wakes_a_blocked_writer() {
        timed(async {
            let (client, server) = limited(MemoryLimits {
                stream_buffer: 4,
                ..MemoryLimits::default()
            });
            let mut send = client.open_uni().await.unwrap();
            let mut recv = server.accept_uni().await.unwrap();
            let (write, ()) = tokio::join!(
                // Polled first: the write fills the buffer and waits.
                send.write_all(b"too long"),
                async { recv.stop(11) }
            );
            assert_eq!(write, Err(TransportError::Stopped(11)));
        })
        .await;
    }

    #[tokio::test]
    async fn stopped_is_none_once_the_reader_has_the_fin() {
        timed(async {
            let (client, server) = raw();
            let mut send = client.open_uni().await.unwrap();
            send.write_all(b"abc").await.unwrap();
            send.finish().unwrap();
            let mut recv = server.accept_uni().await.unwrap();
            let stopped = send.stopped();
            tokio::pin!(stopped);
            assert!(futures::poll!(stopped.as_mut()).is_pending());
            assert_eq!(
                recv.read_chunk(10).await.unwrap().as_deref(),
                Some(&b"abc"[..])
            );
            assert!(futures::poll!(stopped.as_mut()).is_pending());
            assert_eq!(recv.read_chunk(10).await.unwrap(), None);
            assert_eq!(stopped.await, Ok(None));
        })
        .await;
    }

    #[tokio::test]
    async fn writes_wait_while_the_buffer_is_full() {
        timed(async {
            let (client, server) = limited(MemoryLimits {
                stream_buffer: 8,
                ..MemoryLimits::default()
            });
            let mut send = client.open_uni().await.unwrap();
            let mut recv = server.accept_uni().await.unwrap();
            send.write_all(b"12345678").await.unwrap();
            let write = send.write_all(b"abcdefghij");
            tokio::pin!(write);
            assert!(futures::poll!(write.as_mut()).is_pending());
            assert_eq!(
                recv.read_chunk(5).await.unwrap().as_deref(),
                Some(&b"12345"[..])
            );
            // Room for 5 more bytes: the writer moves on but still has 7 to go.
            assert!(futures::poll!(write.as_mut()).is_pending());
            let reader = async {
                let mut got = Vec::new();
                while got.len() < 13 {
                    got.extend_from_slice(&recv.read_chunk(100).await.unwrap().unwrap());
                }
                got
            };
            let (written, got) = tokio::join!(write.as_mut(), reader);
            written.unwrap();
            assert_eq!(got, b"678abcdefghij");
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writer_task_resumes_when_the_reader_reads() {
        timed(async {
            let (client, server) = limited(MemoryLimits {
                stream_buffer: 16,
                ..MemoryLimits::default()
            });
            let writer = tokio::spawn(async move {
                let mut send = client.open_uni().await.unwrap();
                for _ in 0..100 {
                    send.write_all(&[7; 10]).await.unwrap();
                }
                send.finish().unwrap();
                send.stopped().await
            });
            let mut recv = server.accept_uni().await.unwrap();
            let data = read_to_end(&mut recv).await;
            assert_eq!(data.len(), 1000);
            assert_eq!(writer.await.unwrap(), Ok(None));
        })
        .await;
    }

    #[tokio::test]
    async fn datagrams_too_large_refused_and_overflow_dropped() {
        timed(async {
            let (client, server) = limited(MemoryLimits {
                datagram_queue: 2,
                max_datagram_size: Some(4),
                ..MemoryLimits::default()
            });
            assert!(matches!(
                client.send_datagram(Bytes::from_static(b"12345")),
                Err(TransportError::Datagram(_))
            ));
            for d in ["a", "b", "c"] {
                client.send_datagram(Bytes::from(d)).unwrap();
            }
            assert_eq!(server.recv_datagram().await.unwrap(), "a");
            assert_eq!(server.recv_datagram().await.unwrap(), "b");
            let mut next = server.recv_datagram();
            assert!(pending(&mut next));
            client.send_datagram(Bytes::from_static(b"d")).unwrap();
            assert_eq!(next.await.unwrap(), "d");
            server.send_datagram(Bytes::from_static(b"back")).unwrap();
            assert_eq!(client.recv_datagram().await.unwrap(), "back");

            let (client, _server) = limited(MemoryLimits {
                max_datagram_size: None,
                ..MemoryLimits::default()
            });
            assert_eq!(client.max_datagram_size(), None);
            assert!(matches!(
                client.send_datagram(Bytes::from_static(b"1")),
                Err(TransportError::Datagram(_))
            ));
        })
        .await;
    }

    #[tokio::test]
    async fn close_is_seen_by_both_ends() {
        timed(async {
            let (client, server) = raw();
            let (mut c_send, mut c_recv) = client.open_bi().await.unwrap();
            c_send.write_all(b"buffered").await.unwrap();
            let (mut s_send, mut s_recv) = server.accept_bi().await.unwrap();
            let by_peer = TransportError::ClosedByPeer {
                code: 5,
                reason: "bye".into(),
            };
            let local = TransportError::ClosedLocally;

            // Pending operations on both ends are woken by the close.
            let s_closed = server.closed();
            let s_accept = server.accept_uni();
            let c_read = c_recv.read_chunk(10);
            let c_stopped = c_send.stopped();
            let closing = async {
                client.close(5, "bye");
                client.close(6, "second close is ignored");
                server.close(7, "so is the peer's");
            };
            let (s_closed, s_accept, c_read, c_stopped, ()) =
                tokio::join!(s_closed, s_accept, c_read, c_stopped, closing);
            assert_eq!(s_closed, by_peer);
            assert_eq!(s_accept.unwrap_err(), by_peer);
            assert_eq!(c_read, Err(local.clone()));
            assert_eq!(c_stopped, Err(local.clone()));

            // The peer: everything fails with ClosedByPeer, even data already buffered.
            assert_eq!(s_recv.read_chunk(10).await, Err(by_peer.clone()));
            assert_eq!(s_send.write_all(b"x").await, Err(by_peer.clone()));
            assert_eq!(s_send.finish(), Err(by_peer.clone()));
            assert_eq!(server.accept_bi().await.unwrap_err(), by_peer);
            assert_eq!(server.open_uni().await.unwrap_err(), by_peer);
            assert_eq!(server.recv_datagram().await, Err(by_peer.clone()));
            assert_eq!(server.send_datagram(Bytes::new()), Err(by_peer.clone()));

            // Our side: ClosedLocally.
            assert_eq!(client.closed().await, local);
            assert_eq!(client.open_bi().await.unwrap_err(), local);
            assert_eq!(client.accept_bi().await.unwrap_err(), local);
            assert_eq!(c_send.write_all(b"x").await, Err(local.clone()));
            assert_eq!(client.send_datagram(Bytes::new()), Err(local.clone()));
        })
        .await;
    }

    #[tokio::test]
    async fn dropping_every_clone_closes_the_end() {
        timed(async {
            let (client, server) = raw();
            let other = client.clone();
            let closed = server.closed();
            tokio::pin!(closed);
            drop(client);
            assert!(futures::poll!(closed.as_mut()).is_pending());
            drop(other);
            assert_eq!(
                closed.await,
                TransportError::ClosedByPeer {
                    code: 0,
                    reason: String::new()
                }
            );
        })
        .await;
    }

    #[tokio::test]
    async fn streams_keep_their_end_open() {
        timed(async {
            let (client, server) = raw();
            let mut send = client.open_uni().await.unwrap();
            drop(client);
            let mut recv = server.accept_uni().await.unwrap();
            send.write_all(b"still open").await.unwrap();
            send.finish().unwrap();
            assert_eq!(read_to_end(&mut recv).await, b"still open");
            assert_eq!(send.stopped().await, Ok(None));
            // The last handle to the client end: dropping it closes the connection.
            drop(send);
            assert_eq!(
                server.closed().await,
                TransportError::ClosedByPeer {
                    code: 0,
                    reason: String::new()
                }
            );
        })
        .await;
    }

    #[tokio::test]
    async fn dropping_an_unfinished_send_half_finishes_it() {
        timed(async {
            let (client, server) = raw();
            let (mut send, _recv) = client.open_bi().await.unwrap();
            send.write_all(b"last words").await.unwrap();
            drop(send);
            let (_send, mut recv) = server.accept_bi().await.unwrap();
            assert_eq!(read_to_end(&mut recv).await, b"last words");
        })
        .await;
    }

    #[tokio::test]
    async fn dropping_an_unread_recv_half_stops_with_zero() {
        timed(async {
            let (client, server) = raw();
            let mut send = client.open_uni().await.unwrap();
            send.write_all(b"unread").await.unwrap();
            let recv = server.accept_uni().await.unwrap();
            {
                let stopped = send.stopped();
                tokio::pin!(stopped);
                assert!(futures::poll!(stopped.as_mut()).is_pending());
                drop(recv);
                assert_eq!(stopped.await, Ok(Some(0)));
            }
            assert_eq!(send.write_all(b"x").await, Err(TransportError::Stopped(0)));

            // A recv half dropped after the FIN does not stop.
            let mut send = client.open_uni().await.unwrap();
            send.finish().unwrap();
            let mut recv = server.accept_uni().await.unwrap();
            assert_eq!(recv.read_chunk(1).await, Ok(None));
            drop(recv);
            assert_eq!(send.stopped().await, Ok(None));
        })
        .await;
    }

    #[tokio::test]
    async fn open_waits_while_the_peer_has_max_streams_unaccepted() {
        timed(async {
            let (client, server) = limited(MemoryLimits {
                max_bidi_streams: 2,
                max_uni_streams: 1,
                ..MemoryLimits::default()
            });
            let _a = client.open_bi().await.unwrap();
            let _b = client.open_bi().await.unwrap();
            let third = client.open_bi();
            tokio::pin!(third);
            assert!(futures::poll!(third.as_mut()).is_pending());
            // The other direction has its own limit.
            let _back = server.open_bi().await.unwrap();
            let _accepted = server.accept_bi().await.unwrap();
            let (mut send, _recv) = third.await.unwrap();
            send.write_all(b"third").await.unwrap();
            let _second = server.accept_bi().await.unwrap();
            let (_s, mut recv) = server.accept_bi().await.unwrap();
            drop(send);
            assert_eq!(read_to_end(&mut recv).await, b"third");

            let _u = client.open_uni().await.unwrap();
            let next = client.open_uni();
            tokio::pin!(next);
            assert!(futures::poll!(next.as_mut()).is_pending());
            let _accepted = server.accept_uni().await.unwrap();
            next.await.unwrap();
        })
        .await;
    }

    #[tokio::test]
    async fn debug_output_names_the_end() {
        timed(async {
            let (client, server) = raw();
            let text = format!("{client:?}");
            assert!(text.contains("Client"), "{text}");
            let send = server.open_uni().await.unwrap();
            let recv = client.accept_uni().await.unwrap();
            assert!(format!("{send:?}").contains("SendStream"));
            assert!(format!("{recv:?}").contains("RecvStream"));
        })
        .await;
    }
}
