//! SUBSCRIBE, SUBSCRIBE_OK, REQUEST_UPDATE and PUBLISH_DONE, both sides (draft-19 §5.1,
//! §10.7-§10.11).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use moq_core::codes::{PublishDoneCode, RequestErrorCode, StreamResetCode};
use moq_core::message::{
    Message, ParamContext, Parameters, PublishDone, RequestError, RequestOk, RequestUpdate,
    Subscribe, SubscribeOk,
};
use moq_core::{FullTrackName, GroupOrder, Location, Properties, property};
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::recv::{Sink, TrackEvent};
use super::send::{Finish, SubscriptionWriter, WriterShared};
use super::{Incoming, SubscriptionParams};
use crate::error::Error;
use crate::request::{RequestGoaway, check_update};
use crate::session::stream::{Reader, Writer, cancel};
use crate::session::{AuthRequest, GoawayInfo, RequestKind, SessionInner, lock};

/// The parameters of a SUBSCRIBE; see [`Parameters`] for each (LOCATION_FILTER, FORWARD,
/// SUBSCRIBER_PRIORITY, GROUP_ORDER, delivery timeouts, RENDEZVOUS_TIMEOUT, Range Filters,
/// NEW_GROUP_REQUEST, AUTHORIZATION_TOKEN).
pub type SubscribeOptions = Parameters;

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
        self.track_properties
            .get_int(property::DEFAULT_PUBLISHER_PRIORITY)
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(128)
    }

    /// DEFAULT_PUBLISHER_GROUP_ORDER, or Ascending.
    pub fn group_order(&self) -> GroupOrder {
        match self
            .track_properties
            .get_int(property::DEFAULT_PUBLISHER_GROUP_ORDER)
        {
            Some(2) => GroupOrder::Descending,
            _ => GroupOrder::Ascending,
        }
    }
}

/// How a subscription ended, once it has.
#[derive(Clone)]
enum End {
    /// PUBLISH_DONE arrived and every stream it counted was seen (or the wait timed out).
    Done(PublishDone),
    /// Cancelled, rejected, or the session ended.
    Failed(Error),
}

/// Where the answer to a REQUEST_UPDATE goes: the LARGEST_OBJECT of REQUEST_UPDATE_OK.
type UpdateReply = oneshot::Sender<Result<Option<Location>, Error>>;

enum Command {
    Update(Parameters, UpdateReply),
}

/// A subscription to a track: its subgroup streams and datagrams, as they arrive.
///
/// [`Subscription::next`] yields [`TrackEvent`]s; it returns `None` after the publisher's
/// PUBLISH_DONE once every stream it counted has arrived, or yields the error (then `None`) if
/// the subscription was cancelled or the session ended. Dropping it unsubscribes
/// (STOP_SENDING, draft-19 §5.1).
#[derive(Debug)]
pub struct Subscription {
    info: SubscriptionInfo,
    request_id: u64,
    events: mpsc::Receiver<TrackEvent>,
    end: watch::Receiver<Option<End>>,
    reported: bool,
    cmd: mpsc::Sender<Command>,
    goaway: watch::Receiver<Option<GoawayInfo>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

impl std::fmt::Debug for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Done(d) => write!(f, "Done({:?})", d.status),
            End::Failed(e) => write!(f, "Failed({e})"),
        }
    }
}

impl Subscription {
    /// What SUBSCRIBE_OK said.
    pub fn info(&self) -> &SubscriptionInfo {
        &self.info
    }

    /// The SUBSCRIBE's Request ID (for a Joining FETCH).
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The next subgroup stream or datagram; see the type's docs for how it ends.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Result<TrackEvent, Error>> {
        if let Some(ev) = self.events.recv().await {
            return Some(Ok(ev));
        }
        if self.reported {
            return None;
        }
        self.reported = true;
        let end = self
            .end
            .wait_for(|e| e.is_some())
            .await
            .ok()
            .and_then(|e| e.clone());
        match end {
            Some(End::Failed(e)) => Some(Err(e)),
            _ => None,
        }
    }

    /// The PUBLISH_DONE, once the publisher ended the subscription.
    pub fn publish_done(&self) -> Option<PublishDone> {
        match &*self.end.borrow() {
            Some(End::Done(d)) => Some(d.clone()),
            _ => None,
        }
    }

    /// Changes the subscription with REQUEST_UPDATE and waits for the answer; returns the
    /// LARGEST_OBJECT of REQUEST_UPDATE_OK. A failed update ends the subscription
    /// (draft-19 §10.9.1).
    pub async fn update(&self, params: Parameters) -> Result<Option<Location>, Error> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::Update(params, tx))
            .await
            .map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// A GOAWAY the publisher sent on this subscription's stream (draft-19 §10.4).
    pub fn goaway(&self) -> Option<GoawayInfo> {
        self.goaway.borrow().clone()
    }
}

impl futures::Stream for Subscription {
    type Item = Result<TrackEvent, Error>;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        match self.events.poll_recv(cx) {
            Poll::Ready(Some(ev)) => Poll::Ready(Some(Ok(ev))),
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => {
                if self.reported {
                    return Poll::Ready(None);
                }
                self.reported = true;
                // The task sets the end before it drops the last sender.
                let end = self.end.borrow().clone();
                Poll::Ready(match end {
                    Some(End::Failed(e)) => Some(Err(e)),
                    _ => None,
                })
            }
        }
    }
}

/// Queue of subgroup streams and datagrams a subscription holds for the application.
const EVENT_QUEUE: usize = 1024;

/// Sends SUBSCRIBE and waits for SUBSCRIBE_OK.
pub(crate) async fn subscribe(
    inner: Arc<SessionInner>,
    track: FullTrackName,
    params: Parameters,
) -> Result<Subscription, Error> {
    params.validate(ParamContext::Subscribe, inner.version)?;
    check_filter_budget(&inner, &params)?;
    let (mut writer, mut reader) = inner.open_request().await?;
    let guard = inner.request_guard();
    let request_id = inner.next_request_id();
    writer
        .send(Subscribe {
            request_id,
            track: track.clone(),
            params: params.clone(),
        })
        .await?;
    let msg = tokio::select! {
        m = reader.next() => m,
        e = inner.closed() => return Err(e),
    };
    let ok = match msg {
        Ok(Some(Message::SubscribeOk(ok))) => ok,
        Ok(Some(Message::RequestError(e))) => {
            writer.finish();
            return Err(Error::Rejected(Box::new(e)));
        }
        Ok(Some(m)) => {
            let e = Error::protocol(format!("{} before the response to SUBSCRIBE", m.name()));
            inner.close(e.clone());
            return Err(e);
        }
        Ok(None) => return Err(Error::EndedEarly),
        Err(e) => return Err(inner.fail(e)),
    };
    if let Err(e) = ok.track_properties.validate_track() {
        let e = Error::from(e);
        inner.close(e.clone());
        return Err(e);
    }
    // draft-19 §2.5.1: a Mandatory Track Property we do not understand: cancel.
    if ok.track_properties.unknown_mandatory(&[]).is_some() {
        cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED);
        return Err(Error::Rejected(Box::new(RequestError::new(
            RequestErrorCode::UNSUPPORTED_EXTENSION,
            "the track has a mandatory property we do not understand",
        ))));
    }
    let info = SubscriptionInfo {
        track: track.clone(),
        track_alias: ok.track_alias,
        largest: ok.params.largest_object,
        expires: ok
            .params
            .expires
            .filter(|e| *e > 0)
            .map(Duration::from_millis),
        track_properties: ok.track_properties,
    };
    let (sub, task) = new_subscription(&inner, info, request_id, &params)?;
    tokio::spawn(async move {
        let _guard = guard;
        task.run(&inner, writer, reader).await;
    });
    Ok(sub)
}

/// draft-19 §10.3.1.6: the peer's MAX_FILTER_RANGES bounds our Range Filters.
fn check_filter_budget(inner: &SessionInner, params: &Parameters) -> Result<(), Error> {
    let n = params.filter_range_count();
    let max = inner.peer_max_filter_ranges();
    if n as u64 > max {
        return Err(Error::Invalid(format!(
            "{n} filter ranges, the peer allows {max}"
        )));
    }
    Ok(())
}

/// The subscriber's running state of one subscription.
pub(crate) struct SubscriberTask {
    info: SubscriptionInfo,
    request_id: u64,
    sink: Arc<Sink>,
    params: watch::Sender<SubscriptionParams>,
    end: watch::Sender<Option<End>>,
    cmd: mpsc::Receiver<Command>,
    goaway: watch::Sender<Option<GoawayInfo>>,
}

/// Registers a subscription's alias and builds the handle and its task.
pub(crate) fn new_subscription(
    inner: &SessionInner,
    info: SubscriptionInfo,
    request_id: u64,
    params: &Parameters,
) -> Result<(Subscription, SubscriberTask), Error> {
    let (tx, rx) = mpsc::channel(EVENT_QUEUE);
    let p = SubscriptionParams::from_request(params, info.largest);
    let (params_tx, params_rx) = watch::channel(p);
    let sink = Arc::new(Sink {
        request_id,
        params: params_rx,
        default_priority: info.publisher_priority(),
        tx,
        streams: AtomicU64::new(0),
        stream_arrived: Notify::new(),
    });
    inner.register_sink(info.track_alias, &info.track, sink.clone())?;
    let (end_tx, end_rx) = watch::channel(None);
    let (cmd_tx, cmd_rx) = mpsc::channel(4);
    let (goaway_tx, goaway_rx) = watch::channel(None);
    Ok((
        Subscription {
            info: info.clone(),
            request_id,
            events: rx,
            end: end_rx,
            reported: false,
            cmd: cmd_tx,
            goaway: goaway_rx,
        },
        SubscriberTask {
            info,
            request_id,
            sink,
            params: params_tx,
            end: end_tx,
            cmd: cmd_rx,
            goaway: goaway_tx,
        },
    ))
}

impl SubscriberTask {
    /// Applies parameters the subscriber sent (PUBLISH_OK) to its own view of the filters.
    pub(crate) fn apply(&self, params: &Parameters) {
        let largest = self.info.largest;
        self.params.send_modify(|p| p.apply(params, largest));
    }

    /// Runs the subscriber side of an established subscription's request stream.
    pub(crate) async fn run(
        mut self,
        inner: &SessionInner,
        mut writer: Writer,
        mut reader: Reader,
    ) {
        let mut pending: VecDeque<(Parameters, UpdateReply)> = VecDeque::new();
        let mut goaway = RequestGoaway::default();
        let mut watch_stop = true;
        let end = loop {
            tokio::select! {
                c = self.cmd.recv() => match c {
                    None => {
                        // Unsubscribe (draft-19 §5.1: STOP_SENDING, and reset our half).
                        cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED);
                        break End::Failed(Error::Cancelled(StreamResetCode::CANCELLED));
                    }
                    Some(Command::Update(params, reply)) => {
                        if let Err(e) = params.validate(ParamContext::UpdateSubscription, inner.version) {
                            let _ = reply.send(Err(e.into()));
                            continue;
                        }
                        let max = inner.peer_max_request_updates();
                        if max > 0 && pending.len() as u64 >= max {
                            let _ = reply.send(Err(Error::Limit("the peer's MAX_REQUEST_UPDATES")));
                            continue;
                        }
                        let update = RequestUpdate { request_id: inner.next_request_id(), params: params.clone() };
                        match writer.send(update).await {
                            Ok(()) => pending.push_back((params, reply)),
                            Err(e) => { let _ = reply.send(Err(e)); }
                        }
                    }
                },
                m = reader.next() => match m {
                    Ok(Some(Message::RequestOk(ok))) => {
                        let Some((params, reply)) = pending.pop_front() else {
                            break fail(inner, Error::protocol("unsolicited REQUEST_OK on a subscription"));
                        };
                        if let Err(e) = ok.validate(ParamContext::RequestUpdateOk, inner.version) {
                            break fail(inner, e.into());
                        }
                        let largest = ok.params.largest_object;
                        self.params.send_modify(|p| p.apply(&params, largest));
                        let _ = reply.send(Ok(largest));
                    }
                    Ok(Some(Message::RequestError(e))) => match pending.pop_front() {
                        // draft-19 §10.9.1: PUBLISH_DONE (UPDATE_FAILED) follows.
                        Some((_, reply)) => { let _ = reply.send(Err(Error::Rejected(Box::new(e)))); }
                        None => break fail(inner, Error::protocol("REQUEST_ERROR after SUBSCRIBE_OK")),
                    },
                    Ok(Some(Message::PublishDone(done))) => {
                        self.wait_for_streams(inner, &done).await;
                        writer.finish();
                        break End::Done(done);
                    }
                    Ok(Some(Message::Goaway(g))) => match goaway.on_goaway(inner, g) {
                        Ok(info) => { self.goaway.send_replace(Some(info)); }
                        Err(e) => break End::Failed(e),
                    },
                    Ok(Some(m)) => break fail(inner, Error::protocol(format!("{} on a subscription stream", m.name()))),
                    // draft-19 §3.3.2: a FIN before PUBLISH_DONE means the request failed.
                    Ok(None) => break End::Failed(Error::EndedEarly),
                    Err(e) => break End::Failed(if e.is_session_error() { fail_err(inner, inner.error(e)) } else { e }),
                },
                s = writer.stopped(), if watch_stop => {
                    watch_stop = false;
                    if let Err(e) = s {
                        break End::Failed(e.into());
                    }
                }
                e = inner.closed() => break End::Failed(e),
            }
        };
        let end = match end {
            End::Failed(e) => End::Failed(inner.error(e)),
            done => done,
        };
        for (_, reply) in pending {
            let _ = reply.send(Err(match &end {
                End::Failed(e) => e.clone(),
                End::Done(_) => Error::EndedEarly,
            }));
        }
        self.end.send_replace(Some(end));
        inner.unregister_sink(self.info.track_alias, self.request_id);
    }

    /// After PUBLISH_DONE, waits until the Stream Count streams have arrived, for at most the
    /// larger delivery timeout (or 2 s) (draft-19 §10.11).
    async fn wait_for_streams(&self, inner: &SessionInner, done: &PublishDone) {
        let p = self.params.borrow().clone();
        let wait = p
            .object_delivery_timeout
            .into_iter()
            .chain(p.subgroup_delivery_timeout)
            .max()
            .unwrap_or(Duration::from_secs(2));
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let arrived = self.sink.stream_arrived.notified();
            if self.sink.streams.load(Ordering::Relaxed) >= done.stream_count {
                return;
            }
            tokio::select! {
                _ = arrived => {}
                _ = tokio::time::sleep_until(deadline) => return,
                _ = inner.closed() => return,
            }
        }
    }
}

fn fail_err(inner: &SessionInner, e: Error) -> Error {
    inner.close(e.clone());
    e
}

fn fail(inner: &SessionInner, e: Error) -> End {
    End::Failed(fail_err(inner, e))
}

/// What a publisher answers a SUBSCRIBE with.
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

pub(crate) enum Decision {
    Accept(
        SubscribeResponse,
        oneshot::Sender<Result<SubscriptionWriter, Error>>,
    ),
    Reject(RequestError),
}

/// A SUBSCRIBE from the peer, for the application to answer.
#[derive(Debug)]
pub struct IncomingSubscribe {
    pub(crate) request_id: u64,
    pub(crate) track: FullTrackName,
    pub(crate) params: Parameters,
    pub(crate) decision: Option<oneshot::Sender<Decision>>,
}

impl std::fmt::Debug for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decision")
    }
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
    pub async fn accept(
        mut self,
        response: SubscribeResponse,
    ) -> Result<SubscriptionWriter, Error> {
        let (tx, rx) = oneshot::channel();
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        d.send(Decision::Accept(response, tx))
            .map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// Rejects with REQUEST_ERROR.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(Decision::Reject(error));
        }
    }
}

/// The publisher side's record of a subscription, for Joining FETCH (draft-19 §5.2).
#[derive(Clone, Debug)]
pub(crate) struct JoinState {
    pub(crate) track: FullTrackName,
    /// `None` while Pending (subscriber); then the Joining Location if Forward was 1.
    pub(crate) established: Option<JoinPoint>,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct JoinPoint {
    pub(crate) forward: bool,
    pub(crate) joining: Option<Location>,
}

/// Answers a SUBSCRIBE: validation and authorization here, the decision by the application.
pub(crate) async fn serve_subscribe(
    inner: &Arc<SessionInner>,
    msg: Subscribe,
    mut writer: Writer,
    mut reader: Reader,
) -> Result<(), Error> {
    let tokens = inner.resolve_tokens(&msg.params.authorization_tokens)?;
    let refusal = check_track_request(inner, &msg.track, &msg.params);
    let refusal = match refusal {
        Some(r) => Some(r),
        None => inner
            .authorize(&AuthRequest {
                kind: RequestKind::Subscribe,
                namespace: &msg.track.namespace,
                track_name: Some(&msg.track.name),
                tokens: &tokens,
            })
            .await
            .err(),
    };
    if let Some(e) = refusal {
        writer.send(e).await?;
        writer.finish();
        return Ok(());
    }
    let join = watch::channel(JoinState {
        track: msg.track.clone(),
        established: None,
    });
    // draft-18 §5.1: at most one subscription per track and role in a session; a second
    // SUBSCRIBE fails with DUPLICATE_SUBSCRIPTION (draft-19 allows several).
    let Some(_join_guard) = inner.track_join(msg.request_id, join.1) else {
        writer
            .send(RequestError::new(
                RequestErrorCode::DUPLICATE_SUBSCRIPTION,
                "this session already subscribes to the track",
            ))
            .await?;
        writer.finish();
        return Ok(());
    };
    let (dtx, drx) = oneshot::channel();
    let request = IncomingSubscribe {
        request_id: msg.request_id,
        track: msg.track.clone(),
        params: msg.params.clone(),
        decision: Some(dtx),
    };
    if let Err(e) = inner.deliver(Incoming::Subscribe(request)) {
        writer.send(e).await?;
        writer.finish();
        return Ok(());
    }
    let decision = tokio::select! {
        d = drx => d.ok(),
        m = reader.next() => {
            // The subscriber cancelled (or broke the rules) before we answered.
            return match m {
                Ok(Some(m)) => Err(Error::protocol(format!("{} before SUBSCRIBE_OK", m.name()))),
                Ok(None) => Ok(()),
                Err(Error::Cancelled(_)) => { writer.reset(StreamResetCode::CANCELLED); Ok(()) }
                Err(e) => Err(e),
            };
        }
        e = inner.closed() => return Err(e),
    };
    let (response, reply) = match decision {
        Some(Decision::Accept(r, reply)) => (r, reply),
        Some(Decision::Reject(e)) => {
            writer.send(e).await?;
            writer.finish();
            return Ok(());
        }
        None => {
            writer
                .send(RequestError::new(
                    RequestErrorCode::INTERNAL_ERROR,
                    "not answered",
                ))
                .await?;
            writer.finish();
            return Ok(());
        }
    };
    let alias = response
        .track_alias
        .unwrap_or_else(|| inner.next_track_alias());
    let params = SubscriptionParams::from_request(&msg.params, response.largest);
    let group_order = track_group_order(&response.track_properties);
    let ok = SubscribeOk {
        track_alias: alias,
        params: Parameters {
            largest_object: response.largest,
            expires: response
                .expires
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            ..Default::default()
        },
        track_properties: response.track_properties.clone(),
    };
    if let Err(e) = writer.send(ok).await {
        let _ = reply.send(Err(e.clone()));
        return Err(e);
    }
    join.0.send_replace(JoinState {
        track: msg.track.clone(),
        established: Some(JoinPoint {
            forward: params.forward,
            joining: if params.forward {
                response.largest
            } else {
                None
            },
        }),
    });
    let publisher = Publisher::new(
        inner,
        msg.request_id,
        alias,
        msg.track,
        &response.track_properties,
        group_order,
        params,
    );
    let _ = reply.send(Ok(publisher.writer()));
    publisher.run(inner, writer, reader, Some(&join.0)).await
}

/// DEFAULT_PUBLISHER_GROUP_ORDER of a track.
pub(crate) fn track_group_order(props: &Properties) -> GroupOrder {
    match props.get_int(property::DEFAULT_PUBLISHER_GROUP_ORDER) {
        Some(2) => GroupOrder::Descending,
        _ => GroupOrder::Ascending,
    }
}

/// Checks shared by every track request: reserved namespaces (draft-19 §3.2.1-2) and the Range
/// Filter budget (§10.3.1.6).
pub(crate) fn check_track_request(
    inner: &SessionInner,
    track: &FullTrackName,
    params: &Parameters,
) -> Option<RequestError> {
    if track.namespace.is_dot() || (track.namespace.is_session_level() && track.name.is_empty()) {
        return Some(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "reserved namespace",
        ));
    }
    if track.namespace.is_session_level() {
        // No session-level tracks are defined yet (draft-19 §3.2.2).
        return Some(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "unknown session-level track",
        ));
    }
    let n = params.filter_range_count() as u64;
    if n > inner.config.max_filter_ranges || (n > 0 && !inner.version.has_range_filters()) {
        return Some(RequestError::new(
            RequestErrorCode::INVALID_FILTER,
            "too many filter ranges",
        ));
    }
    None
}

/// The publisher side of an established subscription's request stream.
pub(crate) struct Publisher {
    shared: Arc<WriterShared>,
    params: watch::Sender<SubscriptionParams>,
    ended: watch::Sender<Option<Error>>,
    finish: oneshot::Receiver<Finish>,
}

impl Publisher {
    pub(crate) fn new(
        inner: &Arc<SessionInner>,
        request_id: u64,
        alias: u64,
        track: FullTrackName,
        track_properties: &Properties,
        group_order: GroupOrder,
        params: SubscriptionParams,
    ) -> Self {
        let (params_tx, params_rx) = watch::channel(params);
        let (ended_tx, ended_rx) = watch::channel(None);
        let (finish_tx, finish_rx) = oneshot::channel();
        let publisher_priority = track_properties
            .get_int(property::DEFAULT_PUBLISHER_PRIORITY)
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(128);
        let shared = Arc::new(WriterShared {
            session: inner.clone(),
            request_id,
            track_alias: alias,
            track,
            publisher_priority,
            group_order,
            track_properties: track_properties.clone(),
            params: params_rx,
            ended: ended_rx,
            streams_opened: AtomicU64::new(0),
            streams_open: AtomicUsize::new(0),
            streams_closed: Notify::new(),
            largest: Mutex::new(None),
            finish: Mutex::new(Some(finish_tx)),
            finished: AtomicBool::new(false),
        });
        Publisher {
            shared,
            params: params_tx,
            ended: ended_tx,
            finish: finish_rx,
        }
    }

    pub(crate) fn writer(&self) -> SubscriptionWriter {
        SubscriptionWriter {
            shared: self.shared.clone(),
        }
    }

    pub(crate) fn params_sender(&self) -> &watch::Sender<SubscriptionParams> {
        &self.params
    }

    /// Serves REQUEST_UPDATE and cancellation until PUBLISH_DONE is sent or the subscription is
    /// cancelled.
    pub(crate) async fn run(
        mut self,
        inner: &Arc<SessionInner>,
        mut writer: Writer,
        mut reader: Reader,
        join: Option<&watch::Sender<JoinState>>,
    ) -> Result<(), Error> {
        let mut reader_open = true;
        let mut watch_stop = true;
        let mut goaway = RequestGoaway::default();
        let res = loop {
            tokio::select! {
                f = &mut self.finish => {
                    let Ok(f) = f else { break Ok(()) };
                    let done = PublishDone { status: f.status, stream_count: f.stream_count, reason: f.reason };
                    let r = writer.send(done).await;
                    writer.finish();
                    let _ = f.sent.send(r.clone());
                    break r;
                }
                m = reader.next(), if reader_open => match m {
                    Ok(Some(Message::RequestUpdate(u))) => {
                        check_update(inner, &reader, &u, ParamContext::UpdateSubscription)?;
                        let _tokens = inner.resolve_tokens(&u.params.authorization_tokens)?;
                        let largest = *lock(&self.shared.largest);
                        let n = u.params.filter_range_count() as u64;
                        let mut next = self.params.borrow().clone();
                        next.apply(&u.params, largest);
                        let bad_range = next.end_group.is_some_and(|end| end < next.start.group);
                        if n > inner.config.max_filter_ranges || bad_range {
                            let code = if bad_range { RequestErrorCode::INVALID_RANGE } else { RequestErrorCode::INVALID_FILTER };
                            writer.send(RequestError::new(code, "update refused")).await?;
                            // draft-19 §10.9.1: a failed update ends the subscription.
                            self.ended.send_replace(Some(Error::Cancelled(StreamResetCode::CANCELLED)));
                            wait_streams_closed(&self.shared).await;
                            let done = PublishDone {
                                status: PublishDoneCode::UPDATE_FAILED,
                                stream_count: self.shared.streams_opened.load(Ordering::Relaxed),
                                reason: "update failed".into(),
                            };
                            writer.send(done).await?;
                            writer.finish();
                            break Ok(());
                        }
                        let was_forwarding = self.params.borrow().forward;
                        self.params.send_replace(next.clone());
                        if let Some(join) = join
                            && !was_forwarding
                            && next.forward
                        {
                            // draft-19 §5.1: the Joining Location is the Largest Location
                            // communicated when Forward changes from 0 to 1.
                            join.send_modify(|j| j.established = Some(JoinPoint { forward: true, joining: largest }));
                        }
                        let ok = RequestOk {
                            params: Parameters { largest_object: largest, ..Default::default() },
                            track_properties: Properties::new(),
                        };
                        writer.send(ok).await?;
                    }
                    Ok(Some(Message::Goaway(g))) => { goaway.on_goaway(inner, g)?; }
                    Ok(Some(m)) => break Err(Error::protocol(format!("{} on a subscription stream", m.name()))),
                    Ok(None) => reader_open = false,
                    Err(Error::Cancelled(code)) => {
                        // Unsubscribed (draft-19 §5.1): reset every stream of the subscription.
                        self.ended.send_replace(Some(Error::Cancelled(code)));
                        writer.reset(code);
                        break Ok(());
                    }
                    Err(e) => break Err(e),
                },
                s = writer.stopped(), if watch_stop => {
                    watch_stop = false;
                    match s {
                        Ok(Some(code)) => {
                            // draft-19 §5.1: STOP_SENDING from the subscriber ends the subscription.
                            let code = StreamResetCode(code);
                            self.ended.send_replace(Some(Error::Cancelled(code)));
                            reader.stop(code);
                            writer.reset(code);
                            break Ok(());
                        }
                        Ok(None) => {}
                        Err(e) => break Err(e.into()),
                    }
                }
                e = inner.closed() => { self.ended.send_replace(Some(e.clone())); break Err(e) }
            }
        };
        if let Err(e) = &res {
            self.ended.send_replace(Some(e.clone()));
        }
        res
    }
}

async fn wait_streams_closed(shared: &WriterShared) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while shared.streams_open.load(Ordering::Acquire) > 0 {
        let n = shared.streams_closed.notified();
        if shared.streams_open.load(Ordering::Acquire) == 0 {
            break;
        }
        tokio::select! {
            _ = n => {}
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
}
