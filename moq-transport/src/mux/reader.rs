//! The receiving half of a virtual request stream: what the mux routed to one request.

use std::sync::{Arc, Weak};

use moq_core::message::Message;
use tokio::sync::{mpsc, watch};

use super::route::{Inbound, Shared};
use super::table::Inner;
use crate::error::Error;

/// The receiving half of a virtual request stream; dropped, it leaves the route table.
#[derive(Debug)]
pub(crate) struct VirtualReader {
    inner: Weak<Inner>,
    closed: watch::Receiver<Option<Error>>,
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Inbound>,
}

impl VirtualReader {
    /// The reader of `shared`'s inbox `rx`, on the control stream of `inner`.
    pub(super) fn new(
        inner: &Arc<Inner>,
        shared: Arc<Shared>,
        rx: mpsc::Receiver<Inbound>,
    ) -> VirtualReader {
        VirtualReader {
            inner: Arc::downgrade(inner),
            closed: inner.closed_receiver(),
            shared,
            rx,
        }
    }
}

impl Drop for VirtualReader {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.unregister(&self.shared);
        }
    }
}

/// What a virtual stream's reader yields.
#[derive(Debug)]
pub(crate) enum Read {
    /// A message.
    Message(Box<Message>),
    /// The peer's half ended.
    Fin,
}

impl VirtualReader {
    /// The next message, the peer's end of its half, its reset ([`Error::Cancelled`]) or the
    /// end of the control stream.
    pub(crate) async fn next(&mut self) -> Result<Read, Error> {
        let ev = tokio::select! {
            biased;
            ev = self.rx.recv() => ev,
            c = self.closed.wait_for(|c| c.is_some()) => {
                return Err(c.ok().and_then(|c| c.clone()).unwrap_or_else(|| Error::protocol("the control stream is closed")));
            }
        };
        match ev {
            Some(Inbound::Message(m)) => Ok(Read::Message(m)),
            Some(Inbound::Fin) => Ok(Read::Fin),
            Some(Inbound::Reset(code)) => Err(Error::Cancelled(code)),
            None => Err(Error::protocol("the control stream is closed")),
        }
    }

    /// Messages waiting to be read.
    pub(crate) fn buffered(&self) -> usize {
        self.rx.len()
    }

    /// Stops reading: the request leaves the route table.
    pub(crate) fn stop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.unregister(&self.shared);
        }
    }
}
