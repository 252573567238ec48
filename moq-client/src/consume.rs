//! The consuming side of a track: the track, its groups (spanning their subgroups), a group's
//! subgroups where the application asks for them, and objects; FETCH as a stream.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::SelectAll;
use moq_core::codes::StreamResetCode;
use moq_core::message::PublishDone;
use moq_core::{FullTrackName, GroupOrder, Location, Properties};
use moq_transport::track::{
    FetchItem, FetchResponse, IncomingSubgroup, Object, Subscription, SubscriptionInfo, TrackEvent,
};
use tokio::sync::{mpsc, watch};

use crate::error::Error;
use crate::malformed::{Malformed, TrackCheck};

/// What the publisher said of a track (SUBSCRIBE_OK, PUBLISH or TRACK_STATUS_OK).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackInfo {
    /// The track.
    pub name: FullTrackName,
    /// The largest location published when the publisher answered, if any.
    pub largest: Option<Location>,
    /// The publisher's default priority for its objects (0 highest).
    pub priority: u8,
    /// The publisher's default group order.
    pub group_order: GroupOrder,
    /// When the publisher will end the subscription, if it said.
    pub expires: Option<Duration>,
    /// The track's properties, as sent.
    pub properties: Properties,
}

impl TrackInfo {
    /// From what SUBSCRIBE_OK, PUBLISH or TRACK_STATUS_OK said.
    pub(crate) fn new(
        name: FullTrackName,
        largest: Option<Location>,
        expires: Option<Duration>,
        properties: Properties,
    ) -> Self {
        TrackInfo {
            name,
            largest,
            priority: properties.publisher_priority(),
            group_order: properties.publisher_group_order(),
            expires,
            properties,
        }
    }

    pub(crate) fn of(i: &SubscriptionInfo) -> Self {
        Self::new(
            i.track.clone(),
            i.largest,
            i.expires,
            i.track_properties.clone(),
        )
    }
}

/// One subgroup of a group: a stream of objects in increasing Object ID order, or a single
/// object that came as a datagram. Dropping it unread stops its stream.
#[must_use = "dropping a SubgroupConsumer stops its stream"]
#[derive(Debug)]
pub struct SubgroupConsumer {
    group: u64,
    inner: SubgroupInner,
    /// What the track's objects must keep (draft-19 §2.4.2).
    check: Arc<TrackCheck>,
    /// The last Object ID read from the stream.
    last: Option<u64>,
}

#[derive(Debug)]
enum SubgroupInner {
    Stream(IncomingSubgroup),
    Datagram(Option<Object>),
}

impl SubgroupConsumer {
    /// The Group ID.
    pub fn group(&self) -> u64 {
        self.group
    }

    /// The Subgroup ID, once known (`None` for a datagram).
    pub fn id(&self) -> Option<u64> {
        match &self.inner {
            SubgroupInner::Stream(s) => s.subgroup_id(),
            SubgroupInner::Datagram(_) => None,
        }
    }

    /// True if this subgroup carries the group's last object.
    fn ends_group(&self) -> bool {
        match &self.inner {
            SubgroupInner::Stream(s) => s.end_of_group(),
            SubgroupInner::Datagram(_) => false,
        }
    }

    /// The next object; `None` once the subgroup is complete. An error if its stream was
    /// reset (objects may be missing), the session ended, or the track showed itself malformed
    /// ([`Error::Malformed`], draft-19 §2.4.2: the subscription is cancelled).
    ///
    /// Cancel safe.
    pub async fn next_object(&mut self) -> Option<Result<Object, Error>> {
        let s = match &mut self.inner {
            SubgroupInner::Stream(s) => s,
            SubgroupInner::Datagram(o) => return o.take().map(Ok),
        };
        let checked = match s.next_object().await {
            Ok(Some(o)) => self.check.object(s.subgroup_id(), &o).map(|()| Some(o)),
            Ok(None) => {
                let id = s.subgroup_id().unwrap_or(0);
                let fin = self.check.fin(self.group, id, s.end_of_group(), self.last);
                fin.map(|()| None)
            }
            Err(e) => return Some(Err(e.into())),
        };
        match checked {
            Ok(o) => {
                self.last = o.as_ref().map(|o| o.location.object).or(self.last);
                o.map(Ok)
            }
            Err(why) => {
                s.stop(StreamResetCode::CANCELLED);
                Some(Err(why.into()))
            }
        }
    }
}

/// What reaches a group from the track.
#[derive(Debug)]
enum Part {
    /// Boxed: a subgroup's reader holds its receive buffer inline.
    Subgroup(Box<SubgroupConsumer>),
    Datagram(Object),
}

/// One subgroup's objects as a stream, boxed once per subgroup: a group reading its subgroups
/// polls these in a `SelectAll`, so an object costs no allocation of the subgroup's reader
/// (each object used to box a new future holding the whole reader). A subgroup ends after its
/// first error, and is dropped then (its stream stopped).
type Reading = futures::stream::BoxStream<'static, Result<Object, Error>>;

fn read(s: SubgroupConsumer) -> Reading {
    futures::stream::unfold(Some(s), |s| async move {
        let mut s = s?;
        match s.next_object().await? {
            Ok(o) => Some((Ok(o), Some(s))),
            Err(e) => Some((Err(e), None)),
        }
    })
    .boxed()
}

/// One group of a subscribed track, spanning its subgroups: their objects as they arrive
/// (within a subgroup in Object ID order; subgroups interleave). Take the subgroups one by one
/// with [`GroupConsumer::next_subgroup`] instead where their boundaries matter; use one of the
/// two methods per group.
///
/// The group ends once its subgroups ended and either the subgroup carrying the group's last
/// object has been seen, a later group started (in either group order), or the track ended.
#[must_use = "dropping a GroupConsumer stops reading the group"]
pub struct GroupConsumer {
    id: u64,
    parts: mpsc::Receiver<Part>,
    parts_open: bool,
    reading: SelectAll<Reading>,
    end_of_group: bool,
    check: Arc<TrackCheck>,
}

impl std::fmt::Debug for GroupConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupConsumer")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl GroupConsumer {
    /// The Group ID.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn done(&self) -> bool {
        self.reading.is_empty() && (!self.parts_open || self.end_of_group && self.parts.is_empty())
    }

    /// The next object of the group; `None` once the group ended. An error if one of its
    /// subgroups was reset or the session ended.
    ///
    /// Cancel safe.
    pub async fn next_object(&mut self) -> Option<Result<Object, Error>> {
        loop {
            if self.done() {
                return None;
            }
            tokio::select! {
                p = self.parts.recv(), if self.parts_open => match p {
                    Some(Part::Datagram(o)) => return Some(Ok(o)),
                    Some(Part::Subgroup(s)) => {
                        self.end_of_group |= s.ends_group();
                        self.reading.push(read(*s));
                    }
                    None => self.parts_open = false,
                },
                // `None`: the last subgroup being read is complete.
                next = self.reading.next(), if !self.reading.is_empty() => {
                    if let Some(next) = next {
                        return Some(next);
                    }
                }
            }
        }
    }

    /// The next subgroup of the group as it arrives (a datagram is a subgroup of one object);
    /// `None` once no more will come.
    ///
    /// Cancel safe.
    pub async fn next_subgroup(&mut self) -> Option<SubgroupConsumer> {
        if self.end_of_group && self.parts.is_empty() {
            return None;
        }
        match self.parts.recv().await? {
            Part::Subgroup(s) => {
                self.end_of_group |= s.ends_group();
                Some(*s)
            }
            Part::Datagram(o) => Some(SubgroupConsumer {
                group: self.id,
                inner: SubgroupInner::Datagram(Some(o)),
                check: self.check.clone(),
                last: None,
            }),
        }
    }
}

/// Subgroup streams a group takes before more are refused (a peer cannot make one group grow
/// without bound).
const GROUP_PARTS: usize = 64;

/// Sorts a subscription's subgroup streams and datagrams into groups.
pub(crate) struct Router {
    groups: BTreeMap<u64, mpsc::Sender<Part>>,
    out: mpsc::Sender<Result<GroupConsumer, Error>>,
    /// What the track's objects must keep (draft-19 §2.4.2).
    check: Arc<TrackCheck>,
    /// The PUBLISH_DONE that ended the track, for its consumer.
    done: Arc<std::sync::OnceLock<PublishDone>>,
}

impl Router {
    fn new(
        out: mpsc::Sender<Result<GroupConsumer, Error>>,
        done: Arc<std::sync::OnceLock<PublishDone>>,
    ) -> Self {
        Router {
            groups: BTreeMap::new(),
            out,
            check: Arc::new(TrackCheck::new()),
            done,
        }
    }

    /// Hands one event to its group, starting the group if it is new. `Err` once the
    /// application dropped the track.
    pub(crate) async fn route(&mut self, ev: TrackEvent) -> Result<(), ()> {
        let (group, part) = match ev {
            TrackEvent::Subgroup(s) => (
                s.group(),
                Part::Subgroup(Box::new(SubgroupConsumer {
                    group: s.group(),
                    inner: SubgroupInner::Stream(s),
                    check: self.check.clone(),
                    last: None,
                })),
            ),
            TrackEvent::Datagram(o) => {
                // A malformed one is not delivered; the subscription ends (see `malformed`).
                if self.check.object(o.subgroup, &o).is_err() {
                    return Ok(());
                }
                (o.location.group, Part::Datagram(o))
            }
        };
        let part = match self.groups.get(&group) {
            Some(tx) => match tx.try_send(part) {
                // A full group drops the part (its stream is stopped).
                Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => return Ok(()),
                // The application was done with the group: a late subgroup comes as the
                // group again rather than being lost.
                Err(mpsc::error::TrySendError::Closed(part)) => part,
            },
            None => part,
        };
        // A later group started: the earlier ones take nothing more (a late part of one comes
        // as that group again, so nothing is lost). In either group order: a descending
        // subscription's live groups still start in ascending order, and Cloudflare's
        // draft-14 stack declares Descending on every SUBSCRIBE_OK; waiting for an earlier
        // group's end there stalled a reader at every group boundary.
        self.groups = self.groups.split_off(&group);
        let (tx, rx) = mpsc::channel(GROUP_PARTS);
        let _ = tx.try_send(part);
        self.groups.insert(group, tx);
        let consumer = GroupConsumer {
            id: group,
            parts: rx,
            parts_open: true,
            reading: SelectAll::new(),
            end_of_group: false,
            check: self.check.clone(),
        };
        self.out.send(Ok(consumer)).await.map_err(|_| ())
    }

    /// The track ended: every group is complete once its parts are read.
    pub(crate) fn end(&mut self, done: Option<PublishDone>) {
        if let Some(d) = done {
            let _ = self.done.set(d);
        }
        self.close_groups();
    }

    /// Every group handed out so far is complete once its parts are read; a later part of one
    /// of them comes as that group again.
    pub(crate) fn close_groups(&mut self) {
        self.groups.clear();
    }

    /// A new incarnation of the track follows (its publisher restarted and numbers its
    /// groups anew): the groups handed out so far are complete, and what the malformed-track
    /// rules remember of the old one is forgotten (draft-19 §2.4.2 is about one publisher
    /// contradicting itself).
    pub(crate) fn restart(&mut self) {
        self.close_groups();
        self.check = Arc::new(TrackCheck::new());
    }

    /// The subscription failed: the error follows the groups already handed out.
    pub(crate) async fn fail(&mut self, e: Error) {
        self.groups.clear();
        let _ = self.out.send(Err(e)).await;
    }

    /// Resolves once the application dropped the track.
    pub(crate) async fn closed(&self) {
        self.out.closed().await;
    }

    /// Resolves once one of the track's objects showed it malformed (draft-19 §2.4.2).
    pub(crate) async fn malformed(&self) -> Malformed {
        self.check.found().await
    }
}

/// A subscribed track: its groups as they start. Ends when the publisher ends the track;
/// yields an error (then ends) if the subscription fails and cannot be renewed. Dropping it
/// unsubscribes.
#[must_use = "dropping a TrackConsumer unsubscribes at once"]
#[derive(Debug)]
pub struct TrackConsumer {
    pub(crate) groups: mpsc::Receiver<Result<GroupConsumer, Error>>,
    pub(crate) info: watch::Receiver<Option<TrackInfo>>,
    done: Arc<std::sync::OnceLock<PublishDone>>,
}

impl TrackConsumer {
    /// A consumer of `sub`'s groups, the router that feeds it, and where a renewed
    /// subscription's info goes.
    pub(crate) fn new(sub: &Subscription) -> (Self, Router, watch::Sender<Option<TrackInfo>>) {
        let (tx, rx) = mpsc::channel(64);
        let (info_tx, info_rx) = watch::channel(Some(TrackInfo::of(sub.info())));
        let done = Arc::new(std::sync::OnceLock::new());
        let consumer = TrackConsumer {
            groups: rx,
            info: info_rx,
            done: done.clone(),
        };
        (consumer, Router::new(tx, done), info_tx)
    }

    /// The next group; `None` once the track ended.
    ///
    /// Cancel safe.
    pub async fn next_group(&mut self) -> Option<Result<GroupConsumer, Error>> {
        self.groups.recv().await
    }

    /// What the publisher said when the current subscription started.
    pub fn info(&self) -> Option<TrackInfo> {
        self.info.borrow().clone()
    }

    /// The PUBLISH_DONE that ended the track, once [`TrackConsumer::next_group`] returned
    /// `None`: its status tells a track that ended (TRACK_ENDED) from a subscriber the
    /// publisher dropped (TOO_FAR_BEHIND, EXPIRED, ...). `None` before the end, or if the track
    /// ended without one.
    pub fn publish_done(&self) -> Option<PublishDone> {
        self.done.get().cloned()
    }
}

impl futures::Stream for TrackConsumer {
    type Item = Result<GroupConsumer, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.groups.poll_recv(cx)
    }
}

/// The answer to a FETCH: its objects in the requested order, with End of Range markers where
/// objects are known not to exist or are not known (draft-19 §11.4.4.2), as a
/// [`futures::Stream`]. Dropping it cancels the FETCH.
#[must_use = "dropping a FetchConsumer cancels the FETCH"]
pub struct FetchConsumer {
    end: (Location, bool),
    items: futures::stream::BoxStream<'static, Result<FetchItem, Error>>,
}

impl std::fmt::Debug for FetchConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FetchConsumer")
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

impl FetchConsumer {
    pub(crate) fn new(response: FetchResponse) -> Self {
        let end = response.end();
        let end = (end.end, end.end_of_track);
        let check = Arc::new(TrackCheck::new());
        let items = futures::stream::unfold(Some(response), move |r| {
            let check = check.clone();
            async move {
                let mut r = r?;
                let item = match r.next().await? {
                    // draft-19 §2.4.2 (which applies to FETCH too): a malformed track ends the
                    // fetch, which is cancelled.
                    Ok(FetchItem::Object(o)) => match check.object(o.subgroup, &o) {
                        Ok(()) => Ok(FetchItem::Object(o)),
                        Err(why) => return Some((Err(why.into()), None)),
                    },
                    other => other.map_err(Error::from),
                };
                Some((item, Some(r)))
            }
        });
        FetchConsumer {
            end,
            items: Box::pin(items),
        }
    }

    /// The end of the range served (the last object plus one; object 0 means the whole group),
    /// and whether the track ends there.
    pub fn end(&self) -> (Location, bool) {
        self.end
    }

    /// The next object or End of Range marker; `None` once the range was served.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Result<FetchItem, Error>> {
        self.items.next().await
    }

    /// The next object, skipping End of Range markers.
    ///
    /// Cancel safe.
    pub async fn next_object(&mut self) -> Option<Result<Object, Error>> {
        loop {
            match self.next().await? {
                Ok(FetchItem::Object(o)) => return Some(Ok(o)),
                Ok(FetchItem::EndOfRange { .. }) => {}
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl futures::Stream for FetchConsumer {
    type Item = Result<FetchItem, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.items.as_mut().poll_next(cx)
    }
}

/// Objects of a track in order, as [`crate::Subscriber::join`] gives them: the past of the
/// current group (and earlier ones, as asked), then everything published from now on, with no
/// gap and no duplicate. Dropping it ends the subscription.
#[must_use = "dropping an ObjectConsumer ends the subscription at once"]
#[derive(Debug)]
pub struct ObjectConsumer {
    pub(crate) objects: mpsc::Receiver<Result<Object, Error>>,
}

impl ObjectConsumer {
    /// The next object; `None` once the track ended.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Result<Object, Error>> {
        self.objects.recv().await
    }
}

impl futures::Stream for ObjectConsumer {
    type Item = Result<Object, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.objects.poll_recv(cx)
    }
}
