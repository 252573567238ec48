//! [`SubscriptionWriter`]: opens a subscription's subgroup streams, sends its datagrams, ends
//! it with PUBLISH_DONE (draft-19 §11, §10.11), over the state in [`WriterShared`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Instant;

use futures::FutureExt;
use moq_core::codes::PublishDoneCode;
use moq_core::data::{DatagramBody, ObjectDatagram, ObjectStatus, SubgroupHeader, SubgroupId};
use moq_core::{FullTrackName, GroupOrder, Location, property};
use tokio::sync::oneshot;

use super::fetch::{Ended, FetchWriter};
use super::fill::{Fill, FillOwner};
use super::shared::{NOTIFY_QUEUE, TrackLargest, WriterChange, WriterShared};
use super::{Finish, written_priority};
use crate::error::Error;
use crate::latch::wait_until;
use crate::track::params::{Object, ObjectMeta, SubscriptionParams, stream_priority};
use crate::transport::BoxSendStream;

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
        let mut stream = self.open_uni().await?;
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

    /// Like [`SubscriptionWriter::observe_track`] for every location `track` is raised to,
    /// now and later: the subscription reads it when it reports its LARGEST_OBJECT, so a
    /// relay serving many subscriptions of a track raises one [`TrackLargest`] per object
    /// instead of telling each. A second call replaces the first's.
    pub fn follow_track(&self, track: &TrackLargest) {
        self.shared.largest.lock().source = Some(track.clone());
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

    /// Opens a unidirectional stream, or fails once the subscription ends first.
    ///
    /// Cancel safe: nothing is written to the stream before it resolves.
    async fn open_uni(&self) -> Result<BoxSendStream, Error> {
        // A stream is usually available at once: only when it is not does the open also wait
        // for the subscription's end (registering for that costs a lock per stream).
        let conn = self.shared.core.conn();
        if let Some(r) = conn.try_open_uni() {
            return Ok(r?);
        }
        let mut open = conn.open_uni();
        Ok(match (&mut open).now_or_never() {
            Some(r) => r?,
            None => tokio::select! {
                r = open => r?,
                e = self.cancelled() => return Err(e),
            },
        })
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
        // Read in place: a clone of the parameters per stream is a cost per object when each
        // object has a stream.
        let (subscriber_priority, order) = s.with_params(|p| {
            (
                p.subscriber_priority,
                p.group_order.unwrap_or(s.group_order),
            )
        });
        let publisher = priority.unwrap_or(s.publisher_priority);
        let explicit = match subgroup {
            SubgroupId::Zero => 0,
            SubgroupId::FirstObject => 0,
            SubgroupId::Explicit(id) => id,
        };
        let mut stream = self.open_uni().await?;
        stream.set_priority(stream_priority(
            subscriber_priority,
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
