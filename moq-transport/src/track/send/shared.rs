//! The state a subscription's writers ([`SubscriptionWriter`](super::SubscriptionWriter), in
//! `writer.rs`), its subgroup senders and its request task share (draft-19 §11, §10.11).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::task::AtomicWaker;
use moq_core::{FullTrackName, GroupOrder, Location, Properties};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::Finish;
use super::fetch::Ended;
use super::fill::{Fill, FillOwner, Owed, Unpaid};
use crate::error::Error;
use crate::latch::wait_until;
use crate::session::SessionCore;
use crate::track::params::{SubscriptionParams, stream_priority};

/// At most this many PUBLISH_STATE_NOTIFY messages wait for the request stream.
pub(super) const NOTIFY_QUEUE: usize = 16;

/// State shared by a subscription's writer, its subgroup senders and its request task.
///
/// One `Notify` wakes every wait on it (a parameters change, a fill asked for, the end, the
/// last stream closed, a location reached, PUBLISH_DONE asked for, a PUBLISH_STATE_NOTIFY
/// queued): each is rare, and a wait checks its own condition again, so a wake-up meant for
/// another costs one check. Four `Notify`s and a oneshot were ~230 bytes per subscription.
#[derive(Debug)]
pub(crate) struct WriterShared {
    pub(super) core: Arc<SessionCore>,
    pub(super) request_id: u64,
    pub(super) track_alias: u64,
    pub(super) track: FullTrackName,
    pub(super) publisher_priority: u8,
    pub(super) group_order: GroupOrder,
    pub(super) track_properties: Properties,
    /// The subscription's parameters as the subscriber last set them, and how many times they
    /// changed. Not a `watch` channel (~520 B per subscription).
    pub(super) params: Mutex<Versioned<SubscriptionParams>>,
    /// Set (by the request task) when the subscription ends for any reason other than our own
    /// PUBLISH_DONE; boxed, as it rarely is. Not a `Latch` of its own (~110 B).
    pub(super) ended: OnceLock<Box<Error>>,
    /// Set once the request task is gone, whether or not it set `ended`.
    pub(super) abandoned: AtomicBool,
    pub(super) streams_opened: AtomicU64,
    pub(super) streams_open: AtomicUsize,
    /// The largest location written or observed, and the largest of the track the publisher knows
    /// of, written on this subscription or not (a relay's cache received it while the subscription
    /// did not forward): what LARGEST_OBJECT reports (draft-19 §10.2.16), not what
    /// [`SubscriptionWriter::reached`](super::SubscriptionWriter::reached) waits for. A mutex, not
    /// a watch: it changes with every object, and waking a watch's receivers costs more than an
    /// object when nobody waits.
    pub(super) largest: Mutex<Largest>,
    /// Callers of [`SubscriptionWriter::reached`](super::SubscriptionWriter::reached) waiting:
    /// `changed` is woken for a new location only while there are some.
    pub(super) reaching: AtomicUsize,
    /// Wakes every wait on this state (see the type's docs).
    pub(super) changed: Notify,
    /// The task of the last
    /// [`SubscriptionWriter::poll_changed`](super::SubscriptionWriter::poll_changed), woken with
    /// `changed`: a poll has no `Notified` to keep between polls.
    pub(super) task: AtomicWaker,
    pub(super) finished: AtomicBool,
    /// Live [`SubscriptionWriter`](super::SubscriptionWriter)s; the last one dropped unfinished
    /// ends the subscription (see its Drop).
    pub(super) writers: AtomicUsize,
    /// What most subscriptions never use, made when first needed.
    pub(super) rare: Mutex<Option<Box<Rare>>>,
}

/// The locations [`WriterShared`] tracks.
#[derive(Debug, Default)]
pub(super) struct Largest {
    pub(super) written: Option<Location>,
    pub(super) track: Option<Location>,
    /// The track's, read when asked (see [`TrackLargest`]).
    pub(super) source: Option<TrackLargest>,
}

/// The largest location of a track, one for all the subscriptions served from it
/// ([`SubscriptionWriter::follow_track`](super::SubscriptionWriter::follow_track)): raised
/// once per object, and read by a subscription only when it reports its LARGEST_OBJECT
/// (draft-19 §10.2.16), so that an object costs one update however many subscriptions there
/// are. Clones share the location.
#[derive(Clone, Debug, Default)]
pub struct TrackLargest(Arc<Mutex<Option<Location>>>);

impl TrackLargest {
    /// None yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Raises it to `loc`, if `loc` is larger.
    pub fn raise(&self, loc: Location) {
        let mut l = self.0.lock();
        if l.is_none_or(|x| loc > x) {
            *l = Some(loc);
        }
    }

    /// The largest location raised so far.
    pub fn get(&self) -> Option<Location> {
        *self.0.lock()
    }
}

/// The rarely used part of [`WriterShared`].
#[derive(Debug, Default)]
pub(super) struct Rare {
    /// The fill the SUBSCRIBE or the last REQUEST_UPDATE asked for, until the application
    /// takes it (from draft-20).
    pub(super) fill: Option<Fill>,
    /// The PUBLISH_DONE the application asked for, until the request task takes it.
    pub(super) finish: Option<Finish>,
    /// PUBLISH_STATE_NOTIFYs for the request task to send (at most [`NOTIFY_QUEUE`]).
    pub(super) notify: VecDeque<Box<moq_core::message::Parameters>>,
    /// Fills made and neither opened nor answered yet.
    pub(super) debts: usize,
    /// Fills dropped unopened, for the request task to answer.
    pub(super) unpaid: Vec<Unpaid>,
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

/// What [`SubscriptionWriter::changed`](super::SubscriptionWriter::changed) saw. Dropping it drops
/// what it carries: a [`Fill`] dropped unopened is answered (see [`Fill`]).
#[derive(Debug)]
pub enum WriterChange {
    /// The subscriber changed the parameters (REQUEST_UPDATE): the new ones.
    Params(SubscriptionParams),
    /// The subscriber asked for a fill (REQUEST_UPDATE with FILL_PARAMETERS, from draft-20).
    Fill(Fill),
    /// The subscription ended without our PUBLISH_DONE (see
    /// [`SubscriptionWriter::cancelled`](super::SubscriptionWriter::cancelled)).
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
                ..Largest::default()
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
    pub(super) fn end_reason(&self) -> Option<Error> {
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
    pub(super) fn with_rare<R>(&self, f: impl FnOnce(&mut Rare) -> R) -> R {
        f(self.rare.lock().get_or_insert_with(Box::default))
    }

    /// Takes something out of the rare part, if it was ever made.
    pub(super) fn take_rare<R>(&self, f: impl FnOnce(&mut Rare) -> Option<R>) -> Option<R> {
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
    pub(super) fn take_fill(&self) -> Option<Fill> {
        self.take_rare(|r| r.fill.take())
    }

    /// The priority of `fill`'s stream.
    pub(super) fn fill_priority(&self, fill: &Fill) -> i32 {
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
    pub(super) fn writer_dropped(&self) {
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
    /// [`SubscriptionWriter::finish`](super::SubscriptionWriter::finish) waiting to send
    /// PUBLISH_DONE.
    pub(super) fn stream_closed(&self) {
        if self.streams_open.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.wake();
        }
    }

    /// The track's Largest Object as this publisher knows it: the larger of what was written
    /// on the subscription and what it was told of the track.
    pub(crate) fn largest_object(&self) -> Option<Location> {
        let l = self.largest.lock();
        let track = l.source.as_ref().and_then(TrackLargest::get);
        l.written.max(l.track).max(track)
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
        smaller(self.publisher_timeout(key, first), subscriber)
    }

    /// The publisher's side of [`WriterShared::timeout`] alone: it does not change for a
    /// stream once its first object is known (the subscriber's may, by SUBSCRIBE_UPDATE).
    pub(super) fn publisher_timeout(
        &self,
        key: u64,
        first: Option<&Properties>,
    ) -> Option<Duration> {
        first
            .and_then(|p| p.get_int(key))
            .or_else(|| self.track_properties.get_int(key))
            .filter(|v| *v > 0)
            .map(Duration::from_millis)
    }
}

/// The smaller of a publisher's and a subscriber's delivery timeout, or the one given
/// (draft-19 §8).
pub(super) fn smaller(
    publisher: Option<Duration>,
    subscriber: Option<Duration>,
) -> Option<Duration> {
    match (publisher, subscriber) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A value and how many times it changed.
#[derive(Debug, Default)]
pub(super) struct Versioned<T> {
    pub(super) value: T,
    pub(super) version: u64,
}
