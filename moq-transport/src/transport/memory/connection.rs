//! One end of a memory pair as a [`Connection`], and the functions that make the pair.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio::sync::Notify;

use super::link::{End, Inbox, Link, MemoryLimits, Side};
use super::pipe::Pipe;
use super::stream::{MemoryRecv, MemorySend};
use crate::transport::{BoxRecvStream, BoxSendStream, Connection, TransportError, TransportKind};

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
    let link = Link::new(protocol, kind, limits);
    let end = |side| MemoryConnection {
        end: End::new(link.clone(), side),
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

/// is dropped.
#[derive(Clone)]
pub struct MemoryConnection {
    end: Arc<End>,
}

impl fmt::Debug for MemoryConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryConnection")
            .field("side", &self.end.side())
            .field("protocol", &self.end.link().protocol())
            .field("kind", &self.end.link().kind())
            .finish()
    }
}

impl MemoryConnection {
    fn send(&self, pipe: Arc<Pipe>) -> MemorySend {
        self.end.link().register(&pipe);
        MemorySend::new(self.end.clone(), pipe)
    }

    fn recv(&self, pipe: Arc<Pipe>) -> MemoryRecv {
        self.end.link().register(&pipe);
        MemoryRecv::new(self.end.clone(), pipe)
    }

    /// Waits until `make` finds room in the peer's inbox and queues a stream there.
    async fn open<T>(
        &self,
        mut make: impl FnMut(&mut Inbox) -> Option<T>,
    ) -> Result<T, TransportError> {
        let link = self.end.link();
        let (side, peer) = (self.end.side(), self.end.side().peer());
        wait_for(link.changed(peer), link.closed(), || {
            link.with_inbox(side, peer, &mut make)
        })
        .await
    }

    /// Waits for something in our inbox that `take` takes.
    async fn take<T>(
        &self,
        mut take: impl FnMut(&mut Inbox) -> Option<T>,
    ) -> Result<T, TransportError> {
        let link = self.end.link();
        let side = self.end.side();
        wait_for(link.changed(side), link.closed(), || {
            link.with_inbox(side, side, &mut take)
        })
        .await
    }
}

#[async_trait]
impl Connection for MemoryConnection {
    async fn open_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let limits = self.end.link().limits();
        let (capacity, limit) = (limits.stream_buffer, limits.max_bidi_streams);
        let (out, back) = self.open(|inbox| inbox.open_bi(limit, capacity)).await?;
        Ok((Box::new(self.send(out)), Box::new(self.recv(back))))
    }

    async fn open_uni(&self) -> Result<BoxSendStream, TransportError> {
        let limits = self.end.link().limits();
        let (capacity, limit) = (limits.stream_buffer, limits.max_uni_streams);
        let out = self.open(|inbox| inbox.open_uni(limit, capacity)).await?;
        Ok(Box::new(self.send(out)))
    }

    async fn accept_bi(&self) -> Result<(BoxSendStream, BoxRecvStream), TransportError> {
        let (send, recv) = self.take(Inbox::accept_bi).await?;
        Ok((Box::new(self.send(send)), Box::new(self.recv(recv))))
    }

    async fn accept_uni(&self) -> Result<BoxRecvStream, TransportError> {
        let recv = self.take(Inbox::accept_uni).await?;
        Ok(Box::new(self.recv(recv)))
    }

    fn send_datagram(&self, data: Bytes) -> Result<(), TransportError> {
        self.end.link().send_datagram(self.end.side(), data)
    }

    async fn recv_datagram(&self) -> Result<Bytes, TransportError> {
        self.take(Inbox::datagram).await
    }

    fn max_datagram_size(&self) -> Option<usize> {
        self.end.link().limits().max_datagram_size
    }

    fn close(&self, code: u64, reason: &str) {
        self.end.link().close(self.end.side(), code, reason);
    }

    async fn closed(&self) -> TransportError {
        let closed = self.end.link().closed();
        wait_for(closed, closed, || self.end.close_error()).await
    }

    fn protocol(&self) -> Option<String> {
        Some(self.end.link().protocol().to_owned())
    }

    fn kind(&self) -> TransportKind {
        self.end.link().kind()
    }

    fn remote_addr(&self) -> Option<SocketAddr> {
        None
    }
}
