//! An established subscription, both sides, whichever end started it (SUBSCRIBE or PUBLISH):
//! REQUEST_UPDATE and PUBLISH_DONE (draft-19 §5.1, §10.9.1, §10.11).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use moq_core::codes::{PublishDoneCode, RequestErrorCode, StreamResetCode};
use moq_core::message::{
    FetchType, Message, ParamContext, Parameters, PublishDone, PublishStateNotify, RequestError,
    RequestOk,
};
use moq_core::{FullTrackName, GroupOrder, Location, Properties};
use tokio::sync::{Notify, oneshot, watch};

use super::params::{SubscriptionParams, ranges_budget};
use super::recv::{RecvState, Sink, SinkGuard, TrackEvent};
use super::response::FetchResponse;
use super::send::{Fill, JoinGuard, JoinPoint, SubscriptionWriter, TaskStep, WriterShared};
use crate::error::Error;
use crate::request::{Event, Feed, Request, RequestHandle};
use crate::session::{GoawayInfo, SessionCore};

/// What the publisher said in SUBSCRIBE_OK (or PUBLISH).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionInfo {
    /// The track.
    pub track: FullTrackName,
    /// The Track Alias its objects carry.
    pub track_alias: u64,
    /// The largest location the publisher had, if any (LARGEST_OBJECT).
    pub largest: Option<Location>,
    /// When the publisher will end the subscription (EXPIRES), if it said.
    pub expires: Option<Duration>,
    /// The track's properties.
    pub track_properties: Properties,
}

impl SubscriptionInfo {
    /// DEFAULT_PUBLISHER_PRIORITY, or 128.
    pub fn publisher_priority(&self) -> u8 {
        self.track_properties.publisher_priority()
    }

    /// DEFAULT_PUBLISHER_GROUP_ORDER, or Ascending.
    pub fn group_order(&self) -> GroupOrder {
        self.track_properties.publisher_group_order()
    }
}

/// Where a joining FETCH starts (see [`Subscription::joining_fetch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoiningStart {
    /// This many groups before the subscription's Largest Location's group.
    Relative(u64),
    /// This group.
    Absolute(u64),
}

/// A subscription to a track: its subgroup streams and datagrams, as they arrive.
///
/// [`Subscription::next`] yields [`TrackEvent`]s; it returns `None` after the publisher's
/// PUBLISH_DONE once every stream it counted has arrived, or yields the error (then `None`) if
/// the subscription was cancelled or the session ended.
///
/// Dropping it unsubscribes (draft-19 §5.1): RESET_STREAM and STOP_SENDING on its request
/// stream, UNSUBSCRIBE on drafts 14-16. Its Track Alias is released, so data streams that
/// arrive for it afterwards are stopped; [`IncomingSubgroup`](super::IncomingSubgroup)s already
/// handed out are not affected (each sends STOP_SENDING when it drops). A fill
/// [`FetchResponse`] taken from it lives on its own.
#[derive(Debug)]
#[must_use = "dropping it cancels the subscription (UNSUBSCRIBE)"]
pub struct Subscription {
    info: SubscriptionInfo,
    request: RequestHandle,
    events: Feed<TrackEvent>,
    done: Arc<OnceLock<PublishDone>>,
    notified: watch::Receiver<Parameters>,
    fill: Option<FetchResponse>,
    /// Where the subscription's data arrives (for the fill streams of its updates); weak, so
    /// that the subscription's events end with its task.
    recv: Arc<RecvState>,
    sink: Weak<Sink>,
}

impl Subscription {
    /// [`Subscription::update`] with a FILL_PARAMETERS (draft-21 §3.4, from draft-20): also
    /// returns the fill fetch stream the update asks for (its FETCH_HEADER carries the
    /// REQUEST_UPDATE's Request ID), or `None` if its range is empty or Forward State is 0.
    ///
    /// Not cancel-safe: dropped once the REQUEST_UPDATE is queued, the update still applies,
    /// but the fill fetch stream it asks for is not read: it is held unread until the session
    /// ends. Use [`Subscription::update`] where the call may be cancelled.
    pub async fn update_with_fill(
        &self,
        params: Parameters,
    ) -> Result<(Option<Location>, Option<FetchResponse>), Error> {
        let Some(fill) = params.fill.clone() else {
            return Ok((self.update(params).await?, None));
        };
        let (id_tx, id_rx) = oneshot::channel();
        let ok = self
            .request
            .update_noting_id(params.clone(), Some(id_tx))
            .await?;
        let id = id_rx.await.map_err(|_| Error::EndedEarly)?;
        let largest = ok.params.largest_object;
        let sink = self.sink.upgrade().ok_or(Error::EndedEarly)?;
        let view = sink.params.borrow().clone();
        if !params.forward.unwrap_or(view.forward) {
            return Ok((largest, None));
        }
        // What the fill does not say is the subscription's (as the publisher reads it).
        let mut subscription = view.fill_defaults();
        subscription.location_filter = params.location_filter.or(view.location_filter);
        let order = self.info.group_order();
        let Some(f) = Fill::new(id, &fill, &subscription, largest, order) else {
            return Ok((largest, None));
        };
        let stream = self.recv.expect_fetch(id);
        let props = self.info.track_properties.clone();
        let core = self.request.core();
        let response = FetchResponse::fill(core, stream, f.end, f.group_order, props);
        // It counts in PUBLISH_DONE's Stream Count, and is read apart.
        sink.streams.fetch_add(1, Ordering::Relaxed);
        Ok((largest, Some(response)))
    }

    /// The fill fetch stream this subscription asked for with FILL_PARAMETERS (draft-21 §3.4,
    /// from draft-20), once: the objects of the fill range in its group order, as a FETCH
    /// response without FETCH_OK. `None` if it asked for none or the range was empty.
    pub fn take_fill(&mut self) -> Option<FetchResponse> {
        self.fill.take()
    }

    pub(crate) fn set_fill(&mut self, fill: FetchResponse) {
        self.fill = Some(fill);
    }

    /// What the publisher's PUBLISH_STATE_NOTIFY messages said so far, each applied over the
    /// last (draft-21 §9.10, from draft-20: LARGEST_OBJECT, FORWARD, LOCATION_FILTER now in
    /// effect at the publisher); empty if none came.
    pub fn publisher_state(&self) -> Parameters {
        self.notified.borrow().clone()
    }

    /// Waits for the next PUBLISH_STATE_NOTIFY and returns the state after it; `None` once the
    /// subscription ended.
    ///
    /// Cancel safe.
    pub async fn publisher_state_changed(&mut self) -> Option<Parameters> {
        self.notified.changed().await.ok()?;
        Some(self.notified.borrow_and_update().clone())
    }

    /// What SUBSCRIBE_OK said.
    pub fn info(&self) -> &SubscriptionInfo {
        &self.info
    }

    /// The SUBSCRIBE's Request ID (for a Joining FETCH).
    pub fn request_id(&self) -> u64 {
        self.request.id()
    }

    /// The next subgroup stream or datagram; see the type's docs for how it ends.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Result<TrackEvent, Error>> {
        self.events.next().await
    }

    /// Queues a REQUEST_UPDATE whose answer is not waited for.
    pub(crate) fn update_later(&self, params: Parameters) {
        self.request.update_later(params);
    }

    /// The FETCH of the track's past up to this subscription's Largest Location: a Joining
    /// FETCH (draft-19 §5.2) from group `start` (absolute) or `start` groups back (relative)
    /// until draft-19; from draft-20, which has no Joining FETCH (draft-21 §9.11), the same
    /// range as a standalone FETCH. `None` if the publisher had no object yet.
    pub fn joining_fetch(&self, start: JoiningStart) -> Option<FetchType> {
        let largest = self.info.largest?;
        let id = self.request_id();
        if self.request.version().fetch_has_type() {
            return Some(match start {
                JoiningStart::Relative(n) => FetchType::RelativeJoining {
                    joining_request_id: id,
                    joining_start: n,
                },
                JoiningStart::Absolute(g) => FetchType::AbsoluteJoining {
                    joining_request_id: id,
                    joining_start: g,
                },
            });
        }
        let group = match start {
            JoiningStart::Relative(n) => largest.group.saturating_sub(n),
            JoiningStart::Absolute(g) => g.min(largest.group),
        };
        Some(FetchType::Standalone {
            track: self.info.track.clone(),
            start: Location::new(group, 0),
            end: Location::new(largest.group, largest.object.saturating_add(1)),
        })
    }

    /// The PUBLISH_DONE, once the publisher ended the subscription.
    pub fn publish_done(&self) -> Option<PublishDone> {
        self.done.get().cloned()
    }

    /// Changes the subscription with REQUEST_UPDATE and waits for the answer; returns the
    /// LARGEST_OBJECT of REQUEST_UPDATE_OK. A failed update ends the subscription
    /// (draft-19 §10.9.1).
    ///
    /// Cancel safe: dropped before it resolves, the update is either not sent at all or sent
    /// with its answer still applied (a refusal still ends the subscription).
    pub async fn update(&self, params: Parameters) -> Result<Option<Location>, Error> {
        let ok = self.request.update(params).await?;
        Ok(ok.params.largest_object)
    }

    /// A GOAWAY the publisher sent on this subscription's stream (draft-19 §10.4).
    pub fn goaway(&self) -> Option<GoawayInfo> {
        self.request.goaway()
    }
}

impl futures::Stream for Subscription {
    type Item = Result<TrackEvent, Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        self.events.poll_next(cx)
    }
}

/// Queue of subgroup streams and datagrams a subscription holds for the application.
const EVENT_QUEUE: usize = 1024;

/// The subscriber's side of one subscription, once established.
pub(crate) struct SubscriberTask {
    sink: Arc<Sink>,
    largest: Option<Location>,
    params: watch::Sender<SubscriptionParams>,
    done: Arc<OnceLock<PublishDone>>,
    notified: watch::Sender<Parameters>,
    _registered: SinkGuard,
}

/// Registers a subscription's alias (objects may arrive before its answer) and builds the
/// application's handle and the task that runs it.
pub(crate) fn new_subscription(
    recv: &Arc<RecvState>,
    req: &mut Request,
    info: SubscriptionInfo,
    params: &Parameters,
) -> Result<(Subscription, SubscriberTask), Error> {
    let (tx, events) = req.feed(EVENT_QUEUE);
    let p = SubscriptionParams::from_request(params, info.largest);
    let (params_tx, params_rx) = watch::channel(p);
    let sink = Arc::new(Sink {
        request_id: req.id(),
        params: params_rx,
        default_priority: info.publisher_priority(),
        tx,
        streams: AtomicU64::new(0),
        stream_arrived: Notify::new(),
    });
    let registered = recv.register(info.track_alias, &info.track, sink.clone())?;
    let done = Arc::new(OnceLock::new());
    let request = req.handle(ParamContext::UpdateSubscription);
    let (notified, notified_rx) = watch::channel(Parameters::default());
    Ok((
        Subscription {
            info: info.clone(),
            request,
            events,
            done: done.clone(),
            notified: notified_rx,
            fill: None,
            recv: recv.clone(),
            sink: Arc::downgrade(&sink),
        },
        SubscriberTask {
            sink,
            largest: info.largest,
            params: params_tx,
            done,
            notified,
            _registered: registered,
        },
    ))
}

impl SubscriberTask {
    /// The subscription has a fill fetch stream: it counts in PUBLISH_DONE's Stream Count
    /// (draft-21 §9.9) but is read apart, so it is counted as arrived.
    pub(crate) fn count_fill(&self) {
        self.sink.streams.fetch_add(1, Ordering::Relaxed);
    }

    /// Applies parameters the subscriber sent (PUBLISH_OK) to its own view of the filters.
    pub(crate) fn apply(&self, params: &Parameters) {
        let largest = self.largest;
        self.params.send_modify(|p| p.apply(params, largest));
    }

    /// Runs the subscriber's side of an established subscription until PUBLISH_DONE, an
    /// unsubscribe, or the end of the session; records how it ended.
    pub(crate) async fn run(self, req: &mut Request) {
        let end = self.serve(req).await;
        req.set_end(end);
    }

    async fn serve(&self, req: &mut Request) -> Result<(), Error> {
        // draft-19 §5.1: the publisher ends a subscription with PUBLISH_DONE, which may follow
        // its STOP_SENDING on a stream it is done with.
        req.stop_cancels(false);
        loop {
            match req.next().await {
                Event::Updated(u) => {
                    if let Ok(ok) = &u.answer {
                        let largest = ok.params.largest_object;
                        self.params.send_modify(|p| p.apply(&u.params, largest));
                    }
                    // draft-19 §10.9.1: after a REQUEST_ERROR, PUBLISH_DONE (UPDATE_FAILED)
                    // follows.
                    u.reply();
                }
                Event::Message(Message::PublishDone(done)) => {
                    self.wait_for_streams(&done).await;
                    req.finish();
                    let _ = self.done.set(done);
                    return Ok(());
                }
                // draft-21 §9.10 (from draft-20): the publisher's state changed; informative.
                Event::Message(Message::PublishStateNotify(n)) => {
                    self.notified.send_modify(|p| p.update_with(&n.params));
                }
                Event::Message(m) => return Err(req.unexpected(&m)),
                // draft-19 §3.3.2: a FIN before PUBLISH_DONE means the request failed.
                Event::Fin => return Err(Error::EndedEarly),
                // Unsubscribe (draft-19 §5.1: STOP_SENDING, and reset our half).
                Event::Dropped => return Err(req.dropped()),
                Event::Ended(e) => return Err(e),
                Event::Update(_) => {}
            }
        }
    }

    /// After PUBLISH_DONE, waits until the Stream Count streams have arrived, for at most the
    /// larger delivery timeout (or 2 s) (draft-19 §10.11).
    async fn wait_for_streams(&self, done: &PublishDone) {
        let p = self.params.borrow().clone();
        let wait = p
            .object_delivery_timeout
            .into_iter()
            .chain(p.subgroup_delivery_timeout)
            .max()
            .unwrap_or(Duration::from_secs(2));
        let deadline = tokio::time::Instant::now() + wait;
        // An unknown count is not waited for.
        if !done.stream_count_known() {
            return;
        }
        loop {
            let arrived = self.sink.stream_arrived.notified();
            if self.sink.streams.load(Ordering::Relaxed) >= done.stream_count {
                return;
            }
            tokio::select! {
                _ = arrived => {}
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }
}

/// What [`PublisherTask::run`] waits for next.
enum Step {
    /// What the writers asked for.
    Task(TaskStep),
    /// Something on the request stream.
    Event(Box<Event>),
}

/// What a step of [`PublisherTask::run`] leaves it to do.
enum Flow {
    /// Wait for the next step.
    Go,
    /// The subscription is over.
    Done(Result<(), Error>),
    /// Sending on the request stream failed.
    Failed(Error),
}

/// The publisher's side of one subscription: the state its [`SubscriptionWriter`]s share, and
/// the task that answers the subscriber on the request stream.
///
/// Dropping it tells the writers the subscription is over (their waits end).
pub(crate) struct PublisherTask {
    shared: Arc<WriterShared>,
}

impl Drop for PublisherTask {
    fn drop(&mut self) {
        self.shared.abandon();
    }
}

impl PublisherTask {
    pub(crate) fn new(
        core: &Arc<SessionCore>,
        request_id: u64,
        alias: u64,
        track: FullTrackName,
        track_properties: &Properties,
        mut params: SubscriptionParams,
        largest: Option<Location>,
    ) -> Self {
        // draft-19 §10.7: objects up to the Largest Location the subscription was established
        // with are not its own; and it is the subscription's largest until more is written
        // (§10.2.16 LARGEST_OBJECT in REQUEST_UPDATE_OK).
        params.established = largest;
        let shared = Arc::new(WriterShared::new(
            core.clone(),
            request_id,
            alias,
            track,
            track_properties,
            params,
            largest,
        ));
        PublisherTask { shared }
    }

    /// A writer of the subscription. The subscription ends once the last one is dropped (see
    /// [`SubscriptionWriter`]), so one is made only to be handed out.
    pub(crate) fn writer(&self) -> SubscriptionWriter {
        self.shared.writer_made();
        let seen = self.shared.params_version();
        SubscriptionWriter {
            shared: self.shared.clone(),
            seen: AtomicU64::new(seen),
        }
    }

    /// The fill the SUBSCRIBE asked for, set before the writer is handed out.
    pub(crate) fn set_fill(&self, fill: Option<Fill>) {
        self.shared.set_fill(fill);
    }

    /// Ends the subscription before it was established (the PUBLISH was refused): its writers
    /// fail with `e` and send nothing more (draft-19 §5.1.1).
    pub(crate) fn refused(self, e: Error) {
        self.end(e);
    }

    /// Ends the subscription with `e` for its writers, and wakes their waits.
    fn end(&self, e: Error) {
        self.shared.end(e);
    }

    /// Whether objects are forwarded now (Forward State).
    pub(crate) fn forwarding(&self) -> bool {
        self.shared.forwards()
    }

    /// Applies the subscriber's PUBLISH_OK parameters.
    pub(crate) fn apply(&self, params: &Parameters) {
        let largest = self.shared.largest_object();
        self.shared.modify_params(|p| p.apply(params, largest));
    }

    /// Serves REQUEST_UPDATE and cancellation until PUBLISH_DONE is sent or the subscription is
    /// cancelled. `join` is the record a Joining FETCH reads.
    pub(crate) async fn run(
        self,
        req: &mut Request,
        join: Option<&JoinGuard>,
    ) -> Result<(), Error> {
        // draft-19 §5.1: STOP_SENDING from the subscriber ends the subscription.
        req.stop_cancels(true);
        req.take_updates(ParamContext::UpdateSubscription);
        // The answers of fills dropped unopened being sent (see [`Fill`]); made at the first.
        let mut answers: Option<Answers> = None;
        let res = loop {
            // What happened is taken out of the select and handled by a boxed step, freed once
            // done: nothing of a step (an update's answer, a PUBLISH_DONE, a send) is kept in
            // the state a subscription waits in for its whole life.
            let step = tokio::select! {
                t = self.shared.next_task_step() => match t {
                    TaskStep::Answer(a) => {
                        let core = self.shared.core().clone();
                        answers.get_or_insert_with(Answers::new).push(a.send(core).boxed());
                        continue;
                    }
                    t => Step::Task(t),
                },
                ev = req.next() => Step::Event(Box::new(ev)),
                Some(()) = next_answer(&mut answers) => continue,
            };
            match Box::pin(self.step(req, step, join)).await {
                Flow::Go => {}
                Flow::Done(Err(e)) => {
                    self.end(e.clone());
                    break Err(e);
                }
                Flow::Done(res) => break res,
                // A send failed: returned as is, the writers learn of it as the latch drops.
                Flow::Failed(e) => break Err(e),
            }
        };
        // Boxed: its waits would size the state the subscription waits in.
        Box::pin(self.answer_owed(answers)).await;
        res
    }

    /// After the subscription's end: answers every fill still owed (the untaken one too, and
    /// one the application drops later) before the task ends.
    async fn answer_owed(&self, mut answers: Option<Answers>) {
        loop {
            tokio::select! {
                a = self.shared.next_owed() => match a {
                    Some(a) => {
                        let core = self.shared.core().clone();
                        answers.get_or_insert_with(Answers::new).push(a.send(core).boxed());
                    }
                    None => break,
                },
                Some(()) = next_answer(&mut answers) => {}
            }
        }
        while next_answer(&mut answers).await.is_some() {}
    }

    /// Handles one step of [`PublisherTask::run`].
    async fn step(&self, req: &mut Request, step: Step, join: Option<&JoinGuard>) -> Flow {
        match step {
            Step::Task(TaskStep::Finish(f)) => {
                let done = PublishDone {
                    status: f.status,
                    stream_count: f.stream_count,
                    reason: f.reason,
                };
                let r = send_done(req, done).await;
                let _ = f.sent.send(r.clone());
                return Flow::Done(r);
            }
            // draft-19 §10.11: a sender MUST NOT destroy subscription state until it sends
            // PUBLISH_DONE, and sends it only after every stream it opened is closed. A
            // publisher that dropped its last writer no longer publishes the track:
            // TRACK_ENDED (SUBSCRIPTION_ENDED is for the end of a location filter), the
            // same end a relay gives a track whose publisher's session closed.
            // `run` sends these beside its steps; one that came here is sent in turn.
            Step::Task(TaskStep::Answer(a)) => a.send(self.shared.core().clone()).await,
            Step::Task(TaskStep::WritersGone) => {
                let done = PublishDone {
                    status: PublishDoneCode::TRACK_ENDED,
                    stream_count: self.shared.streams_opened(),
                    reason: "the publisher went away".into(),
                };
                return Flow::Done(send_done(req, done).await);
            }
            // draft-21 §9.10: the publisher's state changed.
            Step::Task(TaskStep::Notify(params)) => {
                let sent = req.send(PublishStateNotify { params: *params }).await;
                return sent.map_or_else(Flow::Failed, |()| Flow::Go);
            }
            Step::Event(ev) => match *ev {
                Event::Update(u) => {
                    let sent = match u.and_then(|u| self.update(&u, join)) {
                        Ok(ok) => req.send(ok).await,
                        Err(e) => {
                            if let Err(e) = req.send(e).await {
                                return Flow::Failed(e);
                            }
                            // draft-19 §10.9.1: a failed update ends the subscription.
                            return Flow::Done(self.update_failed(req).await);
                        }
                    };
                    return sent.map_or_else(Flow::Failed, |()| Flow::Go);
                }
                Event::Message(m) => return Flow::Done(Err(req.unexpected(&m))),
                // Unsubscribed (draft-19 §5.1): every stream of the subscription is reset.
                Event::Ended(e @ Error::Cancelled(_)) => {
                    self.end(e);
                    return Flow::Done(Ok(()));
                }
                Event::Ended(e) => return Flow::Done(Err(e)),
                Event::Fin | Event::Dropped | Event::Updated(_) => {}
            },
        }
        Flow::Go
    }

    /// Applies a REQUEST_UPDATE: REQUEST_OK with the Largest Location, or the refusal.
    fn update(
        &self,
        update: &moq_core::message::RequestUpdate,
        join: Option<&JoinGuard>,
    ) -> Result<RequestOk, RequestError> {
        let params = &update.params;
        // draft-19 §10.2.16: LARGEST_OBJECT is the track's, also when this subscription
        // forwarded none of it (Forward State 0).
        let largest = self.shared.largest_object();
        let current = self.shared.params();
        let was_forwarding = current.forward;
        let mut next = current;
        next.apply(params, largest);
        if next.end_group.is_some_and(|end| end < next.start.group) {
            return Err(RequestError::new(
                RequestErrorCode::INVALID_RANGE,
                "update refused",
            ));
        }
        // draft-19 §10.3.1.6: MAX_FILTER_RANGES counts the subscription's filters after the
        // update, not only the update's.
        let total = moq_core::RangeFilterParam::range_count(&next.range_filters);
        if let Some(e) = ranges_budget(self.shared.core(), total) {
            return Err(e);
        }
        let forwarding = next.forward;
        // draft-21 §3.4: a REQUEST_UPDATE's FILL_PARAMETERS opens a fill fetch stream of its
        // own (its Request ID), with Forward State 1.
        if let Some(fill) = params.fill.as_deref().filter(|_| forwarding) {
            let subscription = next.fill_defaults();
            let order = self.shared.publisher_group_order();
            if let Some(f) = Fill::new(update.request_id, fill, &subscription, largest, order) {
                self.shared.ask_fill(f);
            }
        }
        self.shared.modify_params(|p| *p = next);
        if let Some(join) = join
            && !was_forwarding
            && forwarding
        {
            // draft-19 §5.1: the Joining Location is the Largest Location communicated when
            // Forward changes from 0 to 1.
            join.establish(JoinPoint {
                forward: true,
                joining: largest,
            });
        }
        Ok(RequestOk {
            params: Parameters {
                largest_object: largest,
                ..Default::default()
            },
            track_properties: Properties::new(),
        })
    }

    /// After a refused update: the streams are reset, then PUBLISH_DONE (UPDATE_FAILED) with
    /// their count, then FIN (draft-19 §10.9.1, §10.11).
    async fn update_failed(&self, req: &mut Request) -> Result<(), Error> {
        self.end(Error::Cancelled(StreamResetCode::CANCELLED));
        let _ =
            tokio::time::timeout(Duration::from_secs(2), self.shared.all_streams_closed()).await;
        let done = PublishDone {
            status: PublishDoneCode::UPDATE_FAILED,
            stream_count: self.shared.streams_opened(),
            reason: "update failed".into(),
        };
        send_done(req, done).await
    }
}

/// The answers of fills dropped unopened being sent by a subscription's request task.
type Answers = FuturesUnordered<BoxFuture<'static, ()>>;

/// The next answer sent; `None` if none is being sent.
///
/// Cancel safe.
async fn next_answer(answers: &mut Option<Answers>) -> Option<()> {
    answers.as_mut()?.next().await
}

/// Sends PUBLISH_DONE and finishes the request stream (draft-19 §10.11).
async fn send_done(req: &mut Request, done: PublishDone) -> Result<(), Error> {
    let r = req.send(done).await;
    req.finish();
    r
}
