//! Requests from the peer that the application answers, and the queue they wait in.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use moq_core::message::RequestError;
use tokio::sync::{Mutex, mpsc};

use super::fetch::IncomingFetch;
use super::publish::IncomingPublish;
use super::status::IncomingTrackStatus;
use super::subscribe::IncomingSubscribe;
use super::tracks::IncomingSubscribeTracks;
use crate::session::SessionCore;
use moq_core::codes::RequestErrorCode;

/// A request from the peer for the application to answer.
///
/// Each variant has `accept` and `reject` methods; dropping one unanswered rejects it, so the
/// peer never waits forever.
#[derive(Debug)]
#[non_exhaustive]
pub enum Incoming {
    /// SUBSCRIBE: the peer wants a track's objects.
    Subscribe(IncomingSubscribe),
    /// FETCH: the peer wants past objects.
    Fetch(IncomingFetch),
    /// TRACK_STATUS: the peer wants a track's state.
    TrackStatus(IncomingTrackStatus),
    /// PUBLISH: the peer offers a track.
    Publish(IncomingPublish),
    /// SUBSCRIBE_TRACKS: the peer wants PUBLISHes for tracks under a prefix.
    SubscribeTracks(IncomingSubscribeTracks),
}

type Receiver = Arc<Mutex<mpsc::Receiver<Incoming>>>;
type Next = Pin<Box<dyn Future<Output = Option<Incoming>> + Send + Sync>>;

/// The stream of [`Incoming`] requests of a session (see [`crate::Session::incoming`]).
/// Clones share one queue: each request goes to one of them. Ends when the session ends.
pub struct IncomingRequests {
    rx: Receiver,
    core: Arc<SessionCore>,
    /// The receive in progress of [`futures::Stream::poll_next`].
    next: Option<Next>,
}

impl Clone for IncomingRequests {
    fn clone(&self) -> Self {
        IncomingRequests {
            rx: self.rx.clone(),
            core: self.core.clone(),
            next: None,
        }
    }
}

impl std::fmt::Debug for IncomingRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IncomingRequests").finish_non_exhaustive()
    }
}

impl IncomingRequests {
    /// The next request; `None` once the session has ended.
    ///
    /// Cancel safe.
    pub async fn next(&self) -> Option<Incoming> {
        receive(self.rx.clone(), self.core.clone()).await
    }
}

impl futures::Stream for IncomingRequests {
    type Item = Incoming;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Incoming>> {
        let (rx, core) = (self.rx.clone(), self.core.clone());
        // Waits its turn on the shared queue (registering for a wake-up, never spinning).
        let next = self.next.get_or_insert_with(|| Box::pin(receive(rx, core)));
        let res = next.as_mut().poll(cx);
        if res.is_ready() {
            self.next = None;
        }
        res
    }
}

/// The next request from the shared queue, or `None` once the session has ended.
async fn receive(rx: Receiver, core: Arc<SessionCore>) -> Option<Incoming> {
    tokio::select! {
        r = async { rx.lock().await.recv().await } => r,
        _ = core.closed() => None,
    }
}

/// Where the peer's track requests wait for the application.
#[derive(Debug)]
pub(crate) struct IncomingQueue {
    /// `None` when the application does not take requests.
    tx: Option<mpsc::Sender<Incoming>>,
    rx: Receiver,
}

impl IncomingQueue {
    /// A queue of `capacity` requests, or one that refuses everything.
    pub(crate) fn new(accept: bool, capacity: usize) -> Self {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        IncomingQueue {
            tx: accept.then_some(tx),
            rx: Arc::new(Mutex::new(rx)),
        }
    }

    /// The application's end.
    pub(crate) fn requests(&self, core: &Arc<SessionCore>) -> IncomingRequests {
        IncomingRequests {
            rx: self.rx.clone(),
            core: core.clone(),
            next: None,
        }
    }

    /// Hands a request to the application; the REQUEST_ERROR to send if it cannot take it:
    /// `not_taken` if it takes no requests at all.
    pub(crate) fn deliver(
        &self,
        request: Incoming,
        not_taken: RequestError,
    ) -> Result<(), RequestError> {
        let Some(tx) = &self.tx else {
            return Err(not_taken);
        };
        tx.try_send(request).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => RequestError::new(
                RequestErrorCode::EXCESSIVE_LOAD,
                "too many requests waiting",
            ),
            mpsc::error::TrySendError::Closed(_) => RequestError::new(
                RequestErrorCode::GOING_AWAY,
                "the application stopped taking requests",
            ),
        })
    }
}
