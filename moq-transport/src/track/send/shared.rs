//! The state a subscription's writers share, and [`SubscriptionWriter`]: opens subgroup
//! streams, sends datagrams, ends the subscription with PUBLISH_DONE (draft-19 §11, §10.11).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use moq_core::codes::PublishDoneCode;
use moq_core::data::{DatagramBody, ObjectDatagram, ObjectStatus, SubgroupHeader, SubgroupId};
use moq_core::{FullTrackName, GroupOrder, Location, Properties, property};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot};

use super::fetch::{Ended, FetchWriter};
use super::fill::{Fill, FillOwner, Owed, Unpaid};
use super::{Finish, written_priority};
use crate::error::Error;
use crate::latch::wait_until;
use crate::session::SessionCore;
use crate::track::params::{Object, ObjectMeta, SubscriptionParams, stream_priority};
use crate::transport::BoxSendStream;

/// At most this many PUBLISH_STATE_NOTIFY messages wait for the request stream.
const NOTIFY_QUEUE: usize = 16;

/// State shared by a subscription's writer, its subgroup senders and its request task.
///
/// One `Notify` wakes every wait on it (a parameters change, a fill asked for, the end, the
/// last stream closed, a location reached, PUBLISH_DONE asked for, a PUBLISH_STATE_NOTIFY
/// queued): each is rare, and a wait checks its own condition again, so a wake-up meant for
/// another costs one check. Four `Notify`s and a oneshot were ~230 bytes per subscription.
#[derive(Debug)]
pub(crate) struct WriterShared {
    core: Arc<SessionCore>,
    request_id: u64,
    track_alias: u64,
    track: FullTrackName,
    publisher_priority: u8,
    group_order: GroupOrder,
    track_properties: Properties,
    /// The subscription's parameters as the subscriber last set them, and how many times they
    /// changed. Not a `watch` channel (~520 B per subscription).
    params: Mutex<Versioned<SubscriptionParams>>,
    /// Set (by the request task) when the subscription ends for any reason other than our own
    /// PUBLISH_DONE; boxed, as it rarely is. Not a `Latch` of its own (~110 B).
    ended: OnceLock<Box<Error>>,
    /// Set once the request task is gone, whether or not it set `ended`.
    abandoned: AtomicBool,
    streams_opened: AtomicU64,
    streams_open: AtomicUsize,
    /// The largest location written or observed, and the largest of the track the publisher
    /// knows of, written on this subscription or not (a relay's cache received it while the
    /// subscription did not forward): what LARGEST_OBJECT reports (draft-19 §10.2.16), not
    /// what [`SubscriptionWriter::reached`] waits for. A mutex, not a watch: it changes with
    /// every object, and waking a watch's receivers costs more than an object when nobody
    /// waits.
    largest: Mutex<Largest>,
    /// Callers of [`SubscriptionWriter::reached`] waiting: `changed` is woken for a new
    /// location only while there are some.
    reaching: AtomicUsize,
    /// Wakes every wait on this state (see the type's docs).
    changed: Notify,
    /// The task of the last [`SubscriptionWriter::poll_changed`], woken with `changed`: a
    /// poll has no `Notified` to keep between polls.
    task: AtomicWaker,
    finished: AtomicBool,
    /// Live [`SubscriptionWriter`]s; the last one dropped unfinished ends the subscription
    /// (see its Drop).
    writers: AtomicUsize,
    /// What most subscriptions never use, made when first needed.
    rare: Mutex<Option<Box<Rare>>>,
}

/// The locations [`WriterShared`] tracks.
#[derive(Debug, Default)]
struct Largest {
    written: Option<Location>,
    track: Option<Location>,
}

/// The rarely used part of [`WriterShared`].
#[derive(Debug, Default)]
struct Rare {
    /// The fill the SUBSCRIBE or the last REQUEST_UPDATE asked for, until the application
    /// takes it (from draft-20).
    fill: Option<Fill>,
    /// The PUBLISH_DONE the application asked for, until the request task takes it.
    finish: Option<Finish>,
    /// PUBLISH_STATE_NOTIFYs for the request task to send (at most [`NOTIFY_QUEUE`]).
    notify: VecDeque<Box<moq_core::message::Parameters>>,
    /// Fills made and neither opened nor answered yet.
    debts: usize,
    /// Fills dropped unopened, for the request task to answer.
    unpaid: Vec<Unpaid>,
}

/// What the request task of a subscription is asked to do next (see
/// [`WriterShared::next_task_step`]).
#[derive(Debug)]
pub(crate) enum TaskStep {
    /// A fill dropped unopened to answer (first: its stream opens before PUBLISH_DONE).
    Answer(Unpaid),
    /// The application finished the subscription.
    Finish(Finish),
    /// Every writer was dropped without finishing and every subgroup stream is closed.
    WritersGone,
    /// A PUBLISH_STATE_NOTIFY to send.
    Notify(Box<moq_core::message::Parameters>),
}

/// What [`SubscriptionWriter::changed`] saw. Dropping it drops what it carries: a [`Fill`]
/// dropped unopened is answered (see [`Fill`]).
#[derive(Debug)]
pub enum WriterChange {
    /// The subscriber changed the parameters (REQUEST_UPDATE): the new ones.
    Params(SubscriptionParams),
    /// The subscriber asked for a fill (REQUEST_UPDATE with FILL_PARAMETERS, from draft-20).
    Fill(Fill),
    /// The subscription ended without our PUBLISH_DONE (see
    /// [`SubscriptionWriter::cancelled`]).
    Cancelled(Error),
}

impl WriterShared {
    /// The state of a subscription answered with `params` and `largest` (the Largest Location
    /// it was established with, draft-19 §10.7).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        core: Arc<SessionCore>,
        request_id: u64,
        track_alias: u64,
        track: FullTrackName,
        track_properties: &Properties,
        params: SubscriptionParams,
        largest: Option<Location>,
    ) -> Self {
        WriterShared {
            core,
            request_id,
            track_alias,
            track,
            publisher_priority: track_properties.publisher_priority(),
            group_order: track_properties.publisher_group_order(),
            track_properties: track_properties.clone(),
            params: Mutex::new(Versioned {
                value: params,
                version: 0,
            }),
            ended: OnceLock::new(),
            abandoned: AtomicBool::new(false),
            streams_opened: AtomicU64::new(0),
            streams_open: AtomicUsize::new(0),
            largest: Mutex::new(Largest {
                written: largest,
                track: None,
            }),
            reaching: AtomicUsize::new(0),
            changed: Notify::new(),
            task: AtomicWaker::new(),
            finished: AtomicBool::new(false),
            writers: AtomicUsize::new(0),
            rare: Mutex::new(None),
        }
    }

    /// Wakes every wait on this state: something changed.
    pub(crate) fn wake(&self) {
        self.changed.notify_waiters();
        self.task.wake();
    }

    /// The subscription ended for its writers with `e` (the first end wins), other than by our
    /// PUBLISH_DONE.
    pub(crate) fn end(&self, e: Error) {
        if self.ended.set(Box::new(e)).is_ok() {
            self.wake();
        }
    }

    /// The request task is gone: a subscription it did not end ends for the writers too
    /// (with the session's error).
    pub(crate) fn abandon(&self) {
        self.abandoned.store(true, Ordering::Release);
        self.wake();
    }

    /// Why the subscription ended for its writers, if it did.
    fn end_reason(&self) -> Option<Error> {
        if let Some(e) = self.ended.get() {
            return Some((**e).clone());
        }
        // No reason given: the subscription's task went with the session.
        self.abandoned.load(Ordering::Acquire).then(|| {
            self.ended
                .get()
                .map_or_else(|| self.core.gone(), |e| (**e).clone())
        })
    }

    /// Changes the rare part, made if needed.
    fn with_rare<R>(&self, f: impl FnOnce(&mut Rare) -> R) -> R {
        f(self.rare.lock().get_or_insert_with(Box::default))
    }

    /// Takes something out of the rare part, if it was ever made.
    fn take_rare<R>(&self, f: impl FnOnce(&mut Rare) -> Option<R>) -> Option<R> {
        self.rare.lock().as_deref_mut().and_then(f)
    }

    /// How many times the subscriber changed the parameters.
    pub(crate) fn params_version(&self) -> u64 {
        self.params.lock().version
    }

    /// Whether the subscription forwards objects (Forward State 1).
    pub(crate) fn forwards(&self) -> bool {
        self.params.lock().value.forward
    }

    /// The fill the SUBSCRIBE asked for, set before the writer is handed out. From here it
    /// owes the subscriber an answer (see [`Fill`]); one it replaces is answered now.
    pub(crate) fn set_fill(self: &Arc<Self>, fill: Option<Fill>) {
        let fill = fill.map(|mut f| {
            let priority = self.fill_priority(&f);
            let owner: Arc<dyn FillOwner> = self.clone();
            f.owed = Owed::new(&owner, &f, priority);
            f
        });
        let replaced = match fill {
            Some(f) => self.with_rare(|r| r.fill.replace(f)),
            None => self.take_rare(|r| r.fill.take()),
        };
        drop(replaced);
    }

    /// The fill the SUBSCRIBE or the last REQUEST_UPDATE asked for, once.
    fn take_fill(&self) -> Option<Fill> {
        self.take_rare(|r| r.fill.take())
    }

    /// The priority of `fill`'s stream.
    fn fill_priority(&self, fill: &Fill) -> i32 {
        let (subscriber, order) = (fill.subscriber_priority, fill.group_order);
        stream_priority(subscriber, self.publisher_priority, order, 0, 0)
    }

    /// Records the fill a REQUEST_UPDATE asked for and wakes whoever waits for one.
    pub(crate) fn ask_fill(self: &Arc<Self>, fill: Fill) {
        self.set_fill(Some(fill));
        self.wake();
    }

    /// The session the subscription belongs to.
    pub(crate) fn core(&self) -> &Arc<SessionCore> {
        &self.core
    }

    /// The track's own group order (the publisher's).
    pub(crate) fn publisher_group_order(&self) -> GroupOrder {
        self.group_order
    }

    /// Subgroup and fill streams opened so far (PUBLISH_DONE's Stream Count).
    pub(crate) fn streams_opened(&self) -> u64 {
        self.streams_opened.load(Ordering::Relaxed)
    }

    pub(crate) fn writer_made(&self) {
        self.writers.fetch_add(1, Ordering::Relaxed);
    }

    /// The last writer dropped: the request task ends the subscription.
    fn writer_dropped(&self) {
        if self.writers.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.wake();
        }
    }

    /// Resolves with what the request task is asked to do next: PUBLISH_DONE the application
    /// asked for, the end once every writer is gone (and every stream closed), or a
    /// PUBLISH_STATE_NOTIFY to send.
    ///
    /// Cancel safe: what it returns is taken only by the poll that returns it.
    pub(crate) async fn next_task_step(&self) -> TaskStep {
        wait_until(&self.changed, || {
            if let Some(step) = self.take_rare(|r| {
                (r.unpaid.pop().map(TaskStep::Answer))
                    .or_else(|| r.finish.take().map(TaskStep::Finish))
                    .or_else(|| r.notify.pop_front().map(TaskStep::Notify))
            }) {
                return Some(step);
            }
            let gone = self.writers.load(Ordering::Acquire) == 0
                && !self.finished.load(Ordering::Acquire)
                && self.streams_open.load(Ordering::Acquire) == 0;
            gone.then_some(TaskStep::WritersGone)
        })
        .await
    }

    /// After the subscription's end: the next fill dropped unopened to answer, or `None` once
    /// every fill was opened or answered. The untaken fill, if any, is dropped first (and so
    /// answered).
    ///
    /// Cancel safe.
    pub(crate) async fn next_owed(&self) -> Option<Unpaid> {
        drop(self.take_fill());
        wait_until(&self.changed, || {
            let mut rare = self.rare.lock();
            let Some(r) = rare.as_deref_mut() else {
                return Some(None);
            };
            match r.unpaid.pop() {
                Some(a) => Some(Some(a)),
                None => (r.debts == 0).then_some(None),
            }
        })
        .await
    }
}

impl Ended for WriterShared {
    fn ended(&self) -> Option<Error> {
        self.end_reason()
    }
}

impl FillOwner for WriterShared {
    fn count_stream(&self) {
        self.streams_opened.fetch_add(1, Ordering::Relaxed);
    }

    fn owe(&self) {
        self.with_rare(|r| r.debts += 1);
    }

    fn paid(&self) {
        self.with_rare(|r| r.debts = r.debts.saturating_sub(1));
        self.wake();
    }

    fn unpaid(&self, answer: Unpaid) {
        self.with_rare(|r| {
            r.debts = r.debts.saturating_sub(1);
            r.unpaid.push(answer);
        });
        self.wake();
    }
}

impl WriterShared {
    /// One of the subscription's subgroup streams ended: the last to end wakes a
    /// [`SubscriptionWriter::finish`] waiting to send PUBLISH_DONE.
    pub(super) fn stream_closed(&self) {
        if self.streams_open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.wake();
        }
    }

    /// The track's Largest Object as this publisher knows it: the larger of what was written
    /// on the subscription and what it was told of the track.
    pub(crate) fn largest_object(&self) -> Option<Location> {
        let l = self.largest.lock();
        l.written.max(l.track)
    }

    pub(super) fn note_largest(&self, loc: Location) {
        let newer = {
            let mut l = self.largest.lock();
            let newer = l.written.is_none_or(|x| loc > x);
            if newer {
                l.written = Some(loc);
            }
            newer
        };
        // SeqCst with `reached`: either it sees the new location, or this sees it waiting.
        if newer && self.reaching.load(Ordering::SeqCst) > 0 {
            self.wake();
        }
    }

    /// Resolves once every subgroup stream of the subscription is closed.
    pub(crate) async fn all_streams_closed(&self) {
        wait_until(&self.changed, || {
            (self.streams_open.load(Ordering::Acquire) == 0).then_some(())
        })
        .await
    }

    /// The subscription's current parameters.
    pub(crate) fn params(&self) -> SubscriptionParams {
        self.params.lock().value.clone()
    }

    /// Reads the subscription's current parameters in place (no clone: this is done for
    /// every object a subgroup sender writes).
    pub(super) fn with_params<R>(&self, f: impl FnOnce(&SubscriptionParams) -> R) -> R {
        f(&self.params.lock().value)
    }

    /// Changes the parameters and wakes whoever waits for a change.
    pub(crate) fn modify_params(&self, f: impl FnOnce(&mut SubscriptionParams)) {
        let mut p = self.params.lock();
        f(&mut p.value);
        p.version += 1;
        drop(p);
        self.wake();
    }

    pub(super) fn check_open(&self) -> Result<(), Error> {
        if let Some(e) = self.ended.get() {
            return Err((**e).clone());
        }
        if let Some(e) = self.core.close_reason() {
            return Err(e);
        }
        if self.finished.load(Ordering::Relaxed) {
            return Err(Error::Invalid("the subscription was finished".into()));
        }
        Ok(())
    }

    /// The publisher's delivery timeouts: Track Properties, overridden per subgroup by Object
    /// Properties of its first object; the smaller non-zero of publisher and subscriber wins
    /// (draft-19 §8).
    pub(super) fn timeout(
        &self,
        key: u64,
        subscriber: Option<Duration>,
        first: Option<&Properties>,
    ) -> Option<Duration> {
        let publisher = first
            .and_then(|p| p.get_int(key))
            .or_else(|| self.track_properties.get_int(key))
            .filter(|v| *v > 0)
            .map(Duration::from_millis);
        match (publisher, subscriber) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Sends a subscription's objects: opens subgroup streams, sends datagrams, and ends the
/// subscription with PUBLISH_DONE. Cheap to clone.
///
/// Objects that do not pass the subscription's filters (Forward State, Location Filter, Range
/// Filters; draft-19 §5.1.4) are skipped, never sent. When the subscriber cancels, or the
/// session ends, writes fail with that error and [`SubscriptionWriter::cancelled`] resolves.
///
/// Dropping a clone does nothing. Dropping the last one unfinished ends the subscription: once
/// its open [`SubgroupSender`](super::SubgroupSender)s close, PUBLISH_DONE TRACK_ENDED with
/// the exact Stream Count (draft-19 §10.11). [`SubscriptionWriter::finish`] gives a status.
#[derive(Debug)]
pub struct SubscriptionWriter {
    pub(crate) shared: Arc<WriterShared>,
    /// The parameters' version this writer last returned from [`SubscriptionWriter::params`]
    /// or [`SubscriptionWriter::params_changed`].
    pub(crate) seen: AtomicU64,
}

impl Clone for SubscriptionWriter {
    fn clone(&self) -> Self {
        self.shared.writer_made();
        SubscriptionWriter {
            shared: self.shared.clone(),
            seen: AtomicU64::new(self.seen.load(Ordering::Relaxed)),
        }
    }
}

impl Drop for SubscriptionWriter {
    fn drop(&mut self) {
        self.shared.writer_dropped();
    }
}

/// A value and how many times it changed.
#[derive(Debug, Default)]
struct Versioned<T> {
    value: T,
    version: u64,
}

impl SubscriptionWriter {
    /// The Request ID of the SUBSCRIBE or PUBLISH.
    pub fn request_id(&self) -> u64 {
        self.shared.request_id
    }

    /// The session's version.
    pub fn version(&self) -> moq_core::Version {
        self.shared.core.version()
    }

    /// The Track Alias this subscription's objects carry.
    pub fn track_alias(&self) -> u64 {
        self.shared.track_alias
    }

    /// The track.
    pub fn track(&self) -> &FullTrackName {
        &self.shared.track
    }

    /// The fill the SUBSCRIBE asked for (FILL_PARAMETERS, draft-21 §3.4, from draft-20), once:
    /// `None` if it asked for none, the range is empty, or Forward State was 0. Deliver it with
    /// [`SubscriptionWriter::open_fill`].
    pub fn take_fill(&self) -> Option<Fill> {
        self.shared.take_fill()
    }

    /// Tells the subscriber that the subscription's state changed for a reason of the
    /// publisher's own (PUBLISH_STATE_NOTIFY, draft-21 §9.10, from draft-20): `params` holds
    /// the values that changed (LOCATION_FILTER, FORWARD; LARGEST_OBJECT is added when known).
    /// A subscriber-controlled value may only be changed when the subscriber asked for it.
    /// Before draft-20 there is no such message: `Err(Error::Invalid)`.
    pub fn notify_state(&self, mut params: moq_core::message::Parameters) -> Result<(), Error> {
        let s = &self.shared;
        s.check_open()?;
        if !s.core.version().has_fill() {
            return Err(Error::Invalid(
                "PUBLISH_STATE_NOTIFY exists from draft-20".into(),
            ));
        }
        // draft-21 §9.10: LARGEST_OBJECT MUST be included if known.
        params.largest_object = params.largest_object.or(s.largest_object());
        params
            .validate(
                moq_core::message::ParamContext::PublishStateNotify,
                s.core.version(),
            )
            .map_err(|e| Error::Invalid(e.to_string()))?;
        s.with_rare(|r| {
            if r.notify.len() >= NOTIFY_QUEUE {
                return Err(Error::Invalid("too many state notifications queued".into()));
            }
            r.notify.push_back(Box::new(params));
            Ok(())
        })?;
        s.wake();
        Ok(())
    }

    /// Resolves with the next fill a REQUEST_UPDATE asks for (the SUBSCRIBE's is taken with
    /// [`SubscriptionWriter::take_fill`] first).
    ///
    /// Cancel safe.
    pub async fn fill_asked(&self) -> Fill {
        wait_until(&self.shared.changed, || self.take_fill()).await
    }

    /// Opens the fill fetch stream of `fill`: a FETCH_HEADER with its Request ID and no
    /// FETCH_OK (draft-21 §3.4). Write the range's objects in `fill.group_order`, then finish
    /// it; a fill that cannot be served is aborted (reset), and so is one whose writer is
    /// dropped unfinished. It counts in PUBLISH_DONE's Stream Count.
    ///
    /// Not cancel-safe, but a drop never makes a fill look complete, nor leaves it unanswered:
    /// dropped before the FETCH_HEADER is written, the stream is reset, not finished (a FIN
    /// after part of a header, or after a header alone, would say "that's all", draft-21
    /// §3.4.1), and the fill is still owed: answered when `fill` drops (see [`Fill`]).
    pub async fn open_fill(&self, fill: &Fill) -> Result<FetchWriter, Error> {
        let s = &self.shared;
        s.check_open()?;
        let mut stream = tokio::select! {
            r = s.core.conn().open_uni() => r?,
            e = self.cancelled() => return Err(e),
        };
        stream.set_priority(s.fill_priority(fill));
        let (order, filters) = (fill.group_order, fill.range_filters.clone());
        let started = FetchWriter::start(
            &s.core,
            stream,
            fill.request_id,
            order,
            filters,
            Some(s.clone() as Arc<dyn Ended>),
        );
        let w = started.await?;
        // The subscriber can tell the stream is this fill's: it answers, with a FIN or a reset.
        fill.owed.pay();
        s.count_stream();
        Ok(w)
    }

    /// The subscription's current parameters. [`SubscriptionWriter::params_changed`] then
    /// waits for a change after these.
    pub fn params(&self) -> SubscriptionParams {
        let p = self.shared.params.lock();
        self.seen.store(p.version, Ordering::Relaxed);
        p.value.clone()
    }

    /// Resolves with the parameters once the subscriber changed them (REQUEST_UPDATE) since
    /// this writer last returned them (from [`SubscriptionWriter::params`] or this call): at
    /// once if that happened already, so a check of `params()` followed by this call misses
    /// nothing. Ends with the error that ended the subscription.
    ///
    /// Cancel safe.
    pub async fn params_changed(&self) -> Result<SubscriptionParams, Error> {
        match self.changed(false).await {
            WriterChange::Params(p) => Ok(p),
            WriterChange::Cancelled(e) => Err(e),
            // Not asked for.
            WriterChange::Fill(_) => Err(Error::EndedEarly),
        }
    }

    /// Resolves with the next change of the subscription: new parameters (as
    /// [`SubscriptionWriter::params_changed`] returns them), the fill a REQUEST_UPDATE asked
    /// for (as [`SubscriptionWriter::fill_asked`], only if `fills`), or the error that ended
    /// the subscription. One wait for all three, where a `select!` over the three calls holds
    /// three.
    ///
    /// Cancel safe.
    pub async fn changed(&self, fills: bool) -> WriterChange {
        wait_until(&self.shared.changed, || self.change(fills)).await
    }

    /// [`SubscriptionWriter::changed`] as a poll function, for a hand-written future that
    /// keeps no `Notified` between polls: `Ready` with the change, or `Pending` with the task
    /// of `cx` to be woken at the next one. One slot: only the task of the last call is woken,
    /// so it is meant for one loop serving the subscription, not for several at once (they
    /// use [`SubscriptionWriter::changed`]).
    ///
    /// Cancel safe: a change is taken only when it is returned.
    pub fn poll_changed(&self, cx: &mut Context<'_>, fills: bool) -> Poll<WriterChange> {
        // Registered before the check: a change made after it wakes the task.
        self.shared.task.register(cx.waker());
        self.change(fills).map_or(Poll::Pending, Poll::Ready)
    }

    /// The change [`SubscriptionWriter::changed`] returns now, if any.
    fn change(&self, fills: bool) -> Option<WriterChange> {
        let s = &self.shared;
        {
            let p = s.params.lock();
            let seen = self.seen.swap(p.version, Ordering::Relaxed);
            if p.version != seen {
                return Some(WriterChange::Params(p.value.clone()));
            }
        }
        if fills && let Some(f) = self.take_fill() {
            return Some(WriterChange::Fill(f));
        }
        s.end_reason().map(WriterChange::Cancelled)
    }

    /// The group order objects are prioritized in: the subscriber's, else the track's.
    pub fn group_order(&self) -> GroupOrder {
        let order = self.shared.params.lock().value.group_order;
        order.unwrap_or(self.shared.group_order)
    }

    /// True while objects are wanted (Forward State 1).
    pub fn is_forwarding(&self) -> bool {
        self.shared.params.lock().value.forward
    }

    /// True if an object with these fields would be sent.
    pub fn wants(&self, obj: ObjectMeta<'_>) -> bool {
        self.shared.params.lock().value.passes(obj)
    }

    /// The largest location written so far.
    pub fn largest(&self) -> Option<Location> {
        self.shared.largest.lock().written
    }

    /// Resolves once an object at `loc` or later has been written (or observed), or the
    /// subscription ended.
    ///
    /// Cancel safe.
    pub async fn reached(&self, loc: Location) {
        let s = &self.shared;
        let _waiting = Waiting::new(&s.reaching);
        wait_until(&s.changed, || {
            let reached = s.largest.lock().written.is_some_and(|l| l >= loc);
            (reached || s.end_reason().is_some()).then_some(())
        })
        .await
    }

    /// Resolves once the peer has acknowledged every data stream of the session finished before
    /// the call, this subscription's among them (streams still open are not waited for), or
    /// the session ended.
    ///
    /// Cancel safe.
    pub async fn acknowledged(&self) {
        // A stream the subscriber stopped, or the session's end, counts as answered too.
        tokio::select! {
            _ = self.shared.core.acknowledged() => {}
            _ = self.shared.core.closed() => {}
        }
    }

    /// Records a location as published (for LARGEST_OBJECT in REQUEST_UPDATE_OK) without
    /// sending it, e.g. when it was filtered out.
    pub fn observe(&self, loc: Location) {
        self.shared.note_largest(loc);
    }

    /// Records that the track has an object at `loc` whether or not this subscription sends
    /// it (a relay's cache received it; another subscriber of the track was sent it): the
    /// LARGEST_OBJECT of REQUEST_UPDATE_OK and PUBLISH_STATE_NOTIFY is the larger of this and
    /// what was written (draft-19 §10.2.16). Unlike [`SubscriptionWriter::observe`],
    /// [`SubscriptionWriter::reached`] does not count it as written.
    pub fn observe_track(&self, loc: Location) {
        let mut l = self.shared.largest.lock();
        if l.track.is_none_or(|x| loc > x) {
            l.track = Some(loc);
        }
    }

    /// The subscription carries every object after `held`, the last one this publisher held
    /// when the subscription was established, when that is before the Largest Location it
    /// was established with. A relay learns an upstream's Largest Location before the objects
    /// up to it arrive; those it receives afterwards are newly received, so they are this
    /// subscription's (draft-19 §10.7: "Subscribe only requests newly published or received
    /// Objects"; §5.1.2: an object smaller than the Largest Object that arrives after the
    /// SUBSCRIBE passes every filter but Largest Object, whose start excludes it). Call it
    /// before writing; it never moves the start later, and the subscription's Location
    /// Filter still applies.
    pub fn carry_after(&self, held: Option<Location>) {
        let mut p = self.shared.params.lock();
        // None (nothing held) sorts first: everything is newly received.
        p.value.established = p.value.established.min(held);
    }

    /// Resolves when the subscription ends without our PUBLISH_DONE: [`Error::Cancelled`] when
    /// the subscriber cancels it, or the session's error.
    ///
    /// Cancel safe.
    pub async fn cancelled(&self) -> Error {
        wait_until(&self.shared.changed, || self.shared.end_reason()).await
    }

    /// Opens a subgroup's stream and counts it open: what
    /// [`SubscriptionWriter::open_subgroup`] wraps in a sender.
    ///
    /// Cancel safe: nothing is written to the stream before it resolves.
    pub(super) async fn open_subgroup_stream(
        &self,
        group: u64,
        subgroup: SubgroupId,
        priority: Option<u8>,
        end_of_group: bool,
    ) -> Result<OpenedSubgroup, Error> {
        self.shared.check_open()?;
        let s = &self.shared;
        let params = self.shared.params();
        let order = params.group_order.unwrap_or(s.group_order);
        let publisher = priority.unwrap_or(s.publisher_priority);
        let explicit = match subgroup {
            SubgroupId::Zero => 0,
            SubgroupId::FirstObject => 0,
            SubgroupId::Explicit(id) => id,
        };
        let mut stream = tokio::select! {
            r = s.core.conn().open_uni() => r?,
            e = self.cancelled() => return Err(e),
        };
        stream.set_priority(stream_priority(
            params.subscriber_priority,
            publisher,
            order,
            group,
            explicit,
        ));
        s.streams_opened.fetch_add(1, Ordering::Relaxed);
        s.streams_open.fetch_add(1, Ordering::Relaxed);
        let header = SubgroupHeader {
            track_alias: s.track_alias,
            group,
            subgroup,
            priority: written_priority(s.core.version(), priority, publisher),
            properties: true,
            end_of_group,
            first_object: true,
        };
        let subgroup_id = match subgroup {
            SubgroupId::FirstObject => None,
            _ => Some(explicit),
        };
        Ok(OpenedSubgroup {
            stream,
            header,
            subgroup_id,
            priority: publisher,
        })
    }

    /// The state this writer shares with its subscription's other writers and senders.
    pub(super) fn shared(&self) -> &Arc<WriterShared> {
        &self.shared
    }

    /// Sends one object as a datagram (draft-19 §11.3.1). Returns `false` if it was filtered
    /// out or is larger than the path allows (it is then dropped, as the draft says).
    pub fn send_datagram(&self, obj: &Object) -> Result<bool, Error> {
        self.datagram(obj, None)
    }

    /// [`SubscriptionWriter::send_datagram`] for an object whose first byte was produced or
    /// received at `first_byte`: one older than the OBJECT_DELIVERY_TIMEOUT is dropped instead
    /// (draft-19 §8).
    pub fn send_datagram_received(&self, obj: &Object, first_byte: Instant) -> Result<bool, Error> {
        self.datagram(obj, Some(first_byte))
    }

    fn datagram(&self, obj: &Object, first_byte: Option<Instant>) -> Result<bool, Error> {
        self.shared.check_open()?;
        let s = &self.shared;
        s.note_largest(obj.location);
        let meta = ObjectMeta {
            subgroup: None,
            ..obj.meta()
        };
        if !self.wants(meta) {
            return Ok(false);
        }
        // draft-19 §8: an object past its delivery timeout is not sent.
        let params = s.params();
        let timeout = s.timeout(
            property::OBJECT_DELIVERY_TIMEOUT,
            params.object_delivery_timeout,
            Some(&obj.properties),
        );
        if let (Some(t), Some(at)) = (timeout, first_byte)
            && at.elapsed() > t
        {
            return Ok(false);
        }
        let d = ObjectDatagram {
            track_alias: s.track_alias,
            group: obj.location.group,
            object: obj.location.object,
            priority: written_priority(
                s.core.version(),
                (obj.priority != s.publisher_priority).then_some(obj.priority),
                obj.priority,
            ),
            properties: obj.properties.clone(),
            // draft-19 §11.3.1: the datagram's END_OF_GROUP flag.
            end_of_group: obj.end_of_group,
            body: match obj.status {
                ObjectStatus::Normal if !obj.payload.is_empty() || !obj.properties.is_empty() => {
                    DatagramBody::Payload(obj.payload.clone())
                }
                status => DatagramBody::Status(status),
            },
        };
        let bytes = d.encode_to_bytes(s.core.version())?;
        if s.core
            .conn()
            .max_datagram_size()
            .is_none_or(|max| bytes.len() > max)
        {
            return Ok(false);
        }
        s.core
            .conn()
            .send_datagram(bytes)
            .map(|()| true)
            .map_err(Error::from)
    }

    /// Resolves once every subgroup stream of the subscription is closed and the peer has
    /// acknowledged every finished one (or it was reset, or the session ended).
    ///
    /// Cancel safe.
    pub async fn delivered(&self) {
        tokio::select! {
            _ = self.shared.all_streams_closed() => {}
            _ = self.cancelled() => return,
        }
        self.acknowledged().await;
    }

    /// Ends the subscription: waits until every subgroup stream is closed, then sends
    /// PUBLISH_DONE with the exact Stream Count and finishes the request stream
    /// (draft-19 §10.11).
    ///
    /// Not cancel-safe: dropped before it resolves, the subscription counts as finished (a
    /// second `finish` fails) but PUBLISH_DONE may not have been sent with this status; if it
    /// was not, the subscription ends as if this writer had been dropped (TRACK_ENDED once
    /// the last writer is gone).
    pub async fn finish(self, status: PublishDoneCode, reason: &str) -> Result<(), Error> {
        let s = &self.shared;
        if s.finished.swap(true, Ordering::Relaxed) {
            return Err(Error::Invalid("already finished".into()));
        }
        // A fill never taken is answered now (see [`Fill`]), and counted below.
        let untaken = s.take_fill();
        drop(untaken);
        // draft-19 §10.11: PUBLISH_DONE only after every stream of the subscription is closed.
        tokio::select! {
            _ = s.all_streams_closed() => {}
            e = self.cancelled() => return Err(e),
        }
        let (tx, rx) = oneshot::channel();
        let finish = Finish {
            status,
            reason: reason.to_string(),
            stream_count: s.streams_opened.load(Ordering::Relaxed),
            sent: tx,
        };
        s.with_rare(|r| r.finish = Some(finish));
        s.wake();
        // The request task answers before it ends; ended without taking it, the subscription
        // ended early.
        tokio::select! {
            biased;
            r = rx => r.unwrap_or(Err(Error::EndedEarly)),
            _ = self.cancelled() => Err(Error::EndedEarly),
        }
    }
}

/// A subgroup stream just opened, with the header it starts with: what a
/// [`SubgroupSender`](super::SubgroupSender) is made of.
pub(super) struct OpenedSubgroup {
    pub(super) stream: BoxSendStream,
    pub(super) header: SubgroupHeader,
    /// The Subgroup ID when the header names it (not FIRST_OBJECT).
    pub(super) subgroup_id: Option<u64>,
    /// The Publisher Priority of its objects.
    pub(super) priority: u8,
}

/// Counts a caller of [`SubscriptionWriter::reached`] while it waits.
struct Waiting<'a>(&'a AtomicUsize);

impl<'a> Waiting<'a> {
    fn new(count: &'a AtomicUsize) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
