//! Requests from the peer that the application answers, and the queue they wait in.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use moq_core::message::RequestError;
use tokio::sync::mpsc;

use bytes::Bytes;
use moq_core::codes::RequestErrorCode;
use moq_core::message::{FetchType, Parameters};
use moq_core::{FullTrackName, GroupOrder, Location, LocationFilter, Properties, TrackNamespace};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

use super::params::last_covered;
use super::send::{FetchEnd, FetchWriter, SubscriptionWriter};
use super::subscription::{Subscription, SubscriptionInfo};
use crate::error::Error;
use crate::latch::Queue;
use crate::session::SessionCore;

/// A request from the peer for the application to answer.
///
/// Each variant has `accept` and `reject` methods; dropping one unanswered rejects it with
/// REQUEST_ERROR, so the peer never waits forever: SUBSCRIBE, FETCH and TRACK_STATUS with
/// INTERNAL_ERROR, PUBLISH with UNINTERESTED, SUBSCRIBE_TRACKS with NOT_SUPPORTED. If the
/// peer cancels the request first, `accept` fails with [`Error::EndedEarly`].
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

/// What a publisher answers a SUBSCRIBE with. Plain data: dropping it does nothing.
#[derive(Clone, Debug, Default)]
pub struct SubscribeResponse {
    /// The Track Alias to use; `None` lets the session choose a fresh one.
    pub track_alias: Option<u64>,
    /// The largest location published so far (LARGEST_OBJECT; draft-19 §10.2.14: required if
    /// any object exists).
    pub largest: Option<Location>,
    /// When the subscription will expire, if ever.
    pub expires: Option<Duration>,
    /// The track's properties.
    pub track_properties: Properties,
}

/// The application's answer to a SUBSCRIBE.
pub(crate) enum SubscribeDecision {
    Accept(
        SubscribeResponse,
        oneshot::Sender<Result<SubscriptionWriter, Error>>,
    ),
    Reject(RequestError),
}

impl std::fmt::Debug for SubscribeDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SubscribeDecision")
    }
}

/// A SUBSCRIBE from the peer, for the application to answer.
///
/// Dropping it unanswered refuses the SUBSCRIBE with REQUEST_ERROR (INTERNAL_ERROR).
#[derive(Debug)]
pub struct IncomingSubscribe {
    pub(super) request_id: u64,
    pub(super) track: FullTrackName,
    pub(super) params: Parameters,
    pub(super) decision: Option<oneshot::Sender<SubscribeDecision>>,
}

impl IncomingSubscribe {
    /// The Request ID.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The track asked for.
    pub fn track(&self) -> &FullTrackName {
        &self.track
    }

    /// The SUBSCRIBE's parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Accepts with SUBSCRIBE_OK; returns the writer for the subscription's objects.
    ///
    /// Not cancel-safe: the answer is sent on the first poll; dropped after that, the
    /// subscription is accepted and its writer dropped with the future, which leaves the
    /// subscription open with nothing sent on it until the subscriber cancels it or the
    /// session ends (see [`SubscriptionWriter`]'s drop).
    pub async fn accept(
        mut self,
        response: SubscribeResponse,
    ) -> Result<SubscriptionWriter, Error> {
        let (tx, rx) = oneshot::channel();
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        d.send(SubscribeDecision::Accept(response, tx))
            .map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// Rejects with REQUEST_ERROR (then FIN on its request stream).
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(SubscribeDecision::Reject(error));
        }
    }
}

/// A FETCH from the peer, resolved to a track and a range, for the application to answer.
///
/// Dropping it unanswered refuses the FETCH with REQUEST_ERROR (INTERNAL_ERROR).
#[derive(Debug)]
pub struct IncomingFetch {
    pub(super) request_id: u64,
    pub(super) track: FullTrackName,
    pub(super) start: Location,
    pub(super) end: Location,
    /// A start relative to the Largest Object, until [`IncomingFetch::resolve`] (from
    /// draft-20).
    pub(super) relative: Option<LocationFilter>,
    pub(super) params: Parameters,
    pub(super) decision: Option<oneshot::Sender<FetchDecision>>,
}

pub(crate) enum FetchDecision {
    Accept(FetchEnd, oneshot::Sender<Result<FetchWriter, Error>>),
    Reject(RequestError),
}

impl std::fmt::Debug for FetchDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FetchDecision")
    }
}

impl IncomingFetch {
    /// The FETCH's Request ID.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The track.
    pub fn track(&self) -> &FullTrackName {
        &self.track
    }

    /// The first location asked for ({0, 0} for a start relative to the Largest Object until
    /// [`IncomingFetch::resolve`]).
    pub fn start(&self) -> Location {
        self.start
    }

    /// True if the start is relative to the publisher's Largest Object and not resolved yet
    /// (draft-21 §9.20.10: a LOCATION_FILTER with a relative start, from draft-20).
    pub fn is_relative(&self) -> bool {
        self.relative.is_some()
    }

    /// Resolves a start relative to the Largest Object against the publisher's `largest`; no
    /// effect on an absolute range. The end stays the Largest Object.
    pub fn resolve(&mut self, largest: Option<Location>) {
        if let Some(f) = self.relative.take() {
            self.start = f.start(largest);
        }
    }

    /// The range as a FETCH would ask it upstream: relative while unresolved.
    pub fn request(&self) -> FetchType {
        match self.relative {
            Some(filter) => FetchType::Relative {
                track: self.track.clone(),
                filter,
            },
            None => FetchType::Standalone {
                track: self.track.clone(),
                start: self.start,
                end: self.end,
            },
        }
    }

    /// The end of the range, FETCH-encoded: the last object plus one; object 0 = the whole
    /// group.
    pub fn end(&self) -> Location {
        self.end
    }

    /// True if `loc` is in the requested range.
    pub fn contains(&self, loc: Location) -> bool {
        loc >= self.start && loc <= last_covered(self.end)
    }

    /// The group order the objects must be sent in (GROUP_ORDER, default Ascending).
    pub fn group_order(&self) -> GroupOrder {
        self.params.group_order.unwrap_or(GroupOrder::Ascending)
    }

    /// The FETCH's parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Accepts with FETCH_OK; returns the writer for the fetch stream.
    ///
    /// Not cancel-safe: the answer is sent on the first poll; dropped after that, the fetch is
    /// accepted and its writer dropped with the future, which resets the fetch stream
    /// (CANCELLED).
    pub async fn accept(mut self, end: FetchEnd) -> Result<FetchWriter, Error> {
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        let (tx, rx) = oneshot::channel();
        d.send(FetchDecision::Accept(end, tx))
            .map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// Rejects with REQUEST_ERROR.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(FetchDecision::Reject(error));
        }
    }
}

/// The application's answer to a PUBLISH, and where to hand back the subscription.
pub(super) type PublishDecision = (
    Result<Parameters, RequestError>,
    oneshot::Sender<Result<Subscription, Error>>,
);

/// A PUBLISH from the peer, for the application to answer.
///
/// Dropping it unanswered refuses the PUBLISH with REQUEST_ERROR (UNINTERESTED); the track's
/// data streams are then stopped as they arrive.
#[derive(Debug)]
pub struct IncomingPublish {
    pub(super) track: FullTrackName,
    pub(super) info: SubscriptionInfo,
    pub(super) params: Parameters,
    pub(super) decision: Option<oneshot::Sender<PublishDecision>>,
}

impl IncomingPublish {
    /// The track offered.
    pub fn track(&self) -> &FullTrackName {
        &self.track
    }

    /// What the PUBLISH said (alias, largest, properties).
    pub fn info(&self) -> &SubscriptionInfo {
        &self.info
    }

    /// The PUBLISH's parameters (FORWARD, EXPIRES, ...).
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Accepts with PUBLISH_OK carrying `params` (FORWARD, SUBSCRIBER_PRIORITY, LOCATION_FILTER,
    /// delivery timeouts, ...). Objects that arrived before are delivered too.
    ///
    /// Not cancel-safe: the answer is sent on the first poll; dropped after that, the PUBLISH is
    /// accepted and its subscription dropped with the future, which unsubscribes at once
    /// (see [`Subscription`]'s drop).
    pub async fn accept(mut self, params: Parameters) -> Result<Subscription, Error> {
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        let (tx, rx) = oneshot::channel();
        d.send((Ok(params), tx)).map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// Rejects with REQUEST_ERROR (UNINTERESTED, usually) and stops the track's data streams.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let (tx, _) = oneshot::channel();
            let _ = d.send((Err(error), tx));
        }
    }
}

/// A track's state, as TRACK_STATUS_OK carries it. Plain data: dropping it does nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackStatusInfo {
    /// The largest location published, if any.
    pub largest: Option<Location>,
    /// EXPIRES, if the publisher gave one.
    pub expires: Option<Duration>,
    /// The track's properties.
    pub track_properties: Properties,
}

/// A TRACK_STATUS from the peer, for the application to answer. Both answers are sent at
/// once, followed by FIN (draft-19 §10.14).
///
/// Dropping it unanswered refuses the TRACK_STATUS with REQUEST_ERROR (INTERNAL_ERROR).
#[derive(Debug)]
pub struct IncomingTrackStatus {
    pub(super) track: FullTrackName,
    pub(super) params: Parameters,
    pub(super) decision: Option<oneshot::Sender<Result<TrackStatusInfo, RequestError>>>,
}

impl IncomingTrackStatus {
    /// The track asked about.
    pub fn track(&self) -> &FullTrackName {
        &self.track
    }

    /// The request's parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Answers with TRACK_STATUS_OK.
    pub fn accept(mut self, info: TrackStatusInfo) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(Ok(info));
        }
    }

    /// Answers with REQUEST_ERROR.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(Err(error));
        }
    }
}

/// A SUBSCRIBE_TRACKS from the peer, for the application to answer.
///
/// Dropping it unanswered refuses the SUBSCRIBE_TRACKS with REQUEST_ERROR (NOT_SUPPORTED).
#[derive(Debug)]
pub struct IncomingSubscribeTracks {
    pub(super) prefix: TrackNamespace,
    pub(super) params: Parameters,
    pub(super) decision:
        Option<oneshot::Sender<Result<oneshot::Sender<TracksResponder>, RequestError>>>,
}

/// The publisher's side of an accepted SUBSCRIBE_TRACKS: send PUBLISH for each matching track
/// with [`crate::Session::publish`] (using [`TracksResponder::defaults`]), and
/// PUBLISH_SKIPPED for those it will not. Clones share the request.
///
/// Dropping it (every clone) does not end the request: the SUBSCRIBE_TRACKS stays accepted,
/// with its REQUEST_UPDATEs answered, until the subscriber cancels it or the session ends; the
/// PUBLISHes already sent are subscriptions of their own, unaffected.
#[derive(Clone, Debug)]
pub struct TracksResponder {
    pub(super) prefix: watch::Receiver<TrackNamespace>,
    pub(super) params: watch::Receiver<Parameters>,
    pub(super) skipped: mpsc::Sender<(TrackNamespace, Bytes)>,
    pub(super) ended: watch::Receiver<bool>,
    pub(super) visible: crate::request::Visibility,
}

impl TracksResponder {
    /// The current prefix (a REQUEST_UPDATE can move it).
    pub fn prefix(&self) -> TrackNamespace {
        self.prefix.borrow().clone()
    }

    /// The request's parameters as updated so far: defaults for the subscriptions its
    /// PUBLISHes create from now on (draft-19 §10.19.1, §10.9).
    pub fn defaults(&self) -> Parameters {
        self.params.borrow().clone()
    }

    /// True if `track` falls under the prefix and the subscriber may learn of it (the
    /// session's [`crate::Authorizer::visible`], by the request's tokens).
    pub fn matches(&self, track: &FullTrackName) -> bool {
        self.prefix.borrow().is_prefix_of(&track.namespace) && self.visible.allows(&track.namespace)
    }

    /// Reports with PUBLISH_SKIPPED that `track` will not be published. The message names the
    /// track relative to the prefix in effect when it goes out; if a REQUEST_UPDATE moves the
    /// prefix away from `track` before then, nothing is sent (the subscriber no longer asks
    /// about it).
    ///
    /// Cancel safe: dropped before it resolves, nothing was queued.
    pub async fn skipped(&self, track: &FullTrackName) -> Result<(), Error> {
        if !self.prefix.borrow().is_prefix_of(&track.namespace) {
            return Err(Error::Invalid("track not under the prefix".into()));
        }
        self.skipped
            .send((track.namespace.clone(), track.name.clone()))
            .await
            .map_err(|_| Error::EndedEarly)
    }

    /// Resolves when the subscriber cancels the request or the session ends.
    ///
    /// Cancel safe.
    pub async fn ended(&self) {
        let mut rx = self.ended.clone();
        let _ = rx.wait_for(|e| *e).await;
    }

    /// Resolves with the prefix once a REQUEST_UPDATE has moved it away from `from`
    /// (draft-19 §10.9.2); never if the request ends first.
    ///
    /// Cancel safe.
    pub async fn prefix_changed(&self, from: &TrackNamespace) -> TrackNamespace {
        let mut rx = self.prefix.clone();
        let moved = rx.wait_for(|p| p != from).await.map(|p| p.clone());
        match moved {
            Ok(p) => p,
            Err(_) => std::future::pending().await,
        }
    }
}

impl IncomingSubscribeTracks {
    /// The prefix.
    pub fn prefix(&self) -> &TrackNamespace {
        &self.prefix
    }

    /// The parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Accepts with REQUEST_OK.
    ///
    /// Not cancel-safe: the answer is sent on the first poll; dropped after that, the request is
    /// accepted and its responder dropped with the future (see [`TracksResponder`]'s drop).
    pub async fn accept(mut self) -> Result<TracksResponder, Error> {
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        let (tx, rx) = oneshot::channel();
        d.send(Ok(tx)).map_err(|_| Error::EndedEarly)?;
        rx.await.map_err(|_| Error::EndedEarly)
    }

    /// Rejects with REQUEST_ERROR.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(Err(error));
        }
    }
}

type Receiver = Arc<Queue<Box<Incoming>>>;
type Next = Pin<Box<dyn Future<Output = Option<Incoming>> + Send + Sync>>;

/// The stream of [`Incoming`] requests of a session (see [`crate::Session::incoming`]).
/// Clones share one queue: each request goes to one of them. Ends when the session ends.
///
/// Dropping it (every clone) does not refuse anything: requests keep queueing, up to the
/// queue's capacity (then they are refused with EXCESSIVE_LOAD), for a later
/// [`crate::Session::incoming`] to take, and the peer waits for their answers meanwhile. An
/// application that set [`crate::SessionConfig::accept_requests`] keeps taking them. Dropping
/// a clone in the middle of [`futures::Stream::poll_next`] loses no request.
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
        r = rx.next() => Some(*r),
        _ = core.closed() => None,
    }
}

/// Where the peer's track requests wait for the application.
#[derive(Debug)]
pub(crate) struct IncomingQueue {
    /// False when the application does not take requests.
    accept: bool,
    rx: Receiver,
}

impl IncomingQueue {
    /// A queue of `capacity` requests, or one that refuses everything.
    pub(crate) fn new(accept: bool, capacity: usize) -> Self {
        IncomingQueue {
            accept,
            rx: Arc::new(Queue::new(capacity)),
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
        if !self.accept {
            return Err(not_taken);
        }
        self.rx.push(Box::new(request)).map_err(|_| {
            RequestError::new(
                RequestErrorCode::EXCESSIVE_LOAD,
                "too many requests waiting",
            )
        })
    }
}
