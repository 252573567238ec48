//! Requests from the peer that the application answers.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::sync::{Mutex, mpsc};

use super::{
    IncomingFetch, IncomingPublish, IncomingSubscribe, IncomingSubscribeTracks, IncomingTrackStatus,
};

/// A request from the peer for the application to answer.
///
/// Each variant has `accept` and `reject` methods; dropping one unanswered rejects it with
/// INTERNAL_ERROR, so the peer never waits forever.
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

/// The stream of [`Incoming`] requests of a session (see [`crate::Session::incoming`]).
/// Clones share one queue. Ends when the session ends.
#[derive(Clone, Debug)]
pub struct IncomingRequests {
    pub(crate) rx: Arc<Mutex<mpsc::Receiver<Incoming>>>,
}

impl IncomingRequests {
    /// The next request; `None` once the session has ended.
    ///
    /// Cancel safe.
    pub async fn next(&self) -> Option<Incoming> {
        self.rx.lock().await.recv().await
    }
}

impl futures::Stream for IncomingRequests {
    type Item = Incoming;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Incoming>> {
        match self.rx.try_lock() {
            Ok(mut rx) => rx.poll_recv(cx),
            Err(_) => {
                // Another clone is reading; try again shortly.
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }
}
