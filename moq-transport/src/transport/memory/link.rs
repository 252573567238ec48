//! The state both ends of a memory pair share: the limits, each end's inbox of streams and
//! datagrams the peer sent, how the pair was closed, and the notifications that wake waiters.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::pipe::Pipe;
use crate::transport::{TransportError, TransportKind};

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

/// Which end of the pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Side {
    Client,
    Server,
}

impl Side {
    pub(super) fn peer(self) -> Side {
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
pub(super) struct Inbox {
    /// Bidirectional streams: (the pipe the acceptor sends on, the pipe it receives on).
    bi: VecDeque<(Arc<Pipe>, Arc<Pipe>)>,
    /// Unidirectional streams, received by the acceptor.
    uni: VecDeque<Arc<Pipe>>,
    datagrams: VecDeque<Bytes>,
}

impl Inbox {
    /// Queues a new bidirectional stream for the acceptor, unless `limit` are waiting;
    /// returns the opener's (send, receive) pipes.
    pub(super) fn open_bi(
        &mut self,
        limit: usize,
        capacity: usize,
    ) -> Option<(Arc<Pipe>, Arc<Pipe>)> {
        if self.bi.len() >= limit {
            return None;
        }
        let out = Pipe::new(capacity);
        let back = Pipe::new(capacity);
        self.bi.push_back((back.clone(), out.clone()));
        Some((out, back))
    }

    /// Queues a new unidirectional stream for the acceptor, unless `limit` are waiting;
    /// returns the opener's send pipe.
    pub(super) fn open_uni(&mut self, limit: usize, capacity: usize) -> Option<Arc<Pipe>> {
        if self.uni.len() >= limit {
            return None;
        }
        let out = Pipe::new(capacity);
        self.uni.push_back(out.clone());
        Some(out)
    }

    /// The oldest bidirectional stream not accepted yet: (send pipe, receive pipe).
    pub(super) fn accept_bi(&mut self) -> Option<(Arc<Pipe>, Arc<Pipe>)> {
        self.bi.pop_front()
    }

    /// The oldest unidirectional stream not accepted yet.
    pub(super) fn accept_uni(&mut self) -> Option<Arc<Pipe>> {
        self.uni.pop_front()
    }

    /// The oldest datagram not received yet.
    pub(super) fn datagram(&mut self) -> Option<Bytes> {
        self.datagrams.pop_front()
    }
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
pub(super) struct Link {
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
    pub(super) fn new(protocol: &str, kind: TransportKind, limits: MemoryLimits) -> Arc<Link> {
        Arc::new(Link {
            protocol: protocol.to_owned(),
            kind,
            limits,
            state: Mutex::new(LinkState::default()),
            client_changed: Notify::new(),
            server_changed: Notify::new(),
            closed: Notify::new(),
            pipes: Mutex::new(Vec::new()),
        })
    }

    pub(super) fn protocol(&self) -> &str {
        &self.protocol
    }

    pub(super) fn kind(&self) -> TransportKind {
        self.kind
    }

    pub(super) fn limits(&self) -> &MemoryLimits {
        &self.limits
    }

    /// Notified when `side`'s inbox changes.
    pub(super) fn changed(&self, side: Side) -> &Notify {
        match side {
            Side::Client => &self.client_changed,
            Side::Server => &self.server_changed,
        }
    }

    /// Notified once, when the pair is closed.
    pub(super) fn closed(&self) -> &Notify {
        &self.closed
    }

    /// The error `side` sees if the pair is closed.
    pub(super) fn close_error(&self, side: Side) -> Option<TransportError> {
        self.state.lock().close.as_ref().map(|c| c.error_for(side))
    }

    /// For `me`: lets `f` take from or queue into `target`'s inbox, and wakes `target`'s
    /// waiters if it did. `None` if `f` found nothing to do; the close error once closed.
    pub(super) fn with_inbox<T>(
        &self,
        me: Side,
        target: Side,
        f: impl FnOnce(&mut Inbox) -> Option<T>,
    ) -> Option<Result<T, TransportError>> {
        let done = {
            let mut state = self.state.lock();
            if let Some(c) = &state.close {
                return Some(Err(c.error_for(me)));
            }
            f(state.inbox(target))?
        };
        self.changed(target).notify_waiters();
        Some(Ok(done))
    }

    /// Queues a datagram from `from` for its peer: refused above the maximum size, dropped
    /// when the peer's queue is full.
    pub(super) fn send_datagram(&self, from: Side, data: Bytes) -> Result<(), TransportError> {
        let peer = from.peer();
        {
            let mut state = self.state.lock();
            if let Some(c) = &state.close {
                return Err(c.error_for(from));
            }
            let Some(max) = self.limits.max_datagram_size else {
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
            if inbox.datagrams.len() >= self.limits.datagram_queue {
                // Unreliable: dropped, like a datagram lost on the way.
                return Ok(());
            }
            inbox.datagrams.push_back(data);
        }
        self.changed(peer).notify_waiters();
        Ok(())
    }

    /// Keeps `pipe` to be woken when the pair is closed.
    pub(super) fn register(&self, pipe: &Arc<Pipe>) {
        let mut pipes = self.pipes.lock();
        if pipes.len() == pipes.capacity() {
            // Amortized: forget the dropped streams before the list grows.
            pipes.retain(|p| p.strong_count() > 0);
        }
        pipes.push(Arc::downgrade(pipe));
    }

    /// Closes the pair, unless it already was: the first close wins.
    pub(super) fn close(&self, by: Side, code: u64, reason: &str) {
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
pub(super) struct End {
    link: Arc<Link>,
    side: Side,
}

impl End {
    pub(super) fn new(link: Arc<Link>, side: Side) -> Arc<End> {
        Arc::new(End { link, side })
    }

    pub(super) fn link(&self) -> &Link {
        &self.link
    }

    pub(super) fn side(&self) -> Side {
        self.side
    }

    /// The error this end sees if the pair is closed.
    pub(super) fn close_error(&self) -> Option<TransportError> {
        self.link.close_error(self.side)
    }
}

impl Drop for End {
    fn drop(&mut self) {
        self.link.close(self.side, 0, "");
    }
}
