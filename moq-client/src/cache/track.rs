//! A track's cache: its groups, the largest location, the track's end, NEW_GROUP_REQUEST, the
//! subscriptions served from it, and the readers that follow it live.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use moq_core::data::ObjectStatus;
use moq_core::{FullTrackName, GroupOrder, Location, Properties, property};
use moq_transport::track::{SubscriptionWriter, TrackLargest, last_covered};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::group::{Group, Subgroup};
use super::object::{CacheLimits, CachedObject, DATAGRAM_SUBGROUP};
use crate::malformed::{self, Malformed, Seen};

/// An outstanding NEW_GROUP_REQUEST (draft-19 §10.2.18).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewGroup {
    /// The value asked for: the largest group the subscriber knows plus 1, or 0.
    pub value: u64,
    /// The track's largest group when it was asked; the request is outstanding until a later
    /// group starts.
    pub asked_in: Option<u64>,
}

/// The mutable part of a track.
#[derive(Debug)]
struct TrackInner {
    groups: BTreeMap<u64, Arc<Group>>,
    /// The largest location of an object actually in the cache (`TrackState::largest` may run
    /// ahead of it: a relay learns the publisher's Largest Object before the objects arrive).
    stored: Option<Location>,
    /// Every subgroup ever created, in creation order, as (group, subgroup) — readers follow
    /// this log; it is trimmed with the cache.
    log: Vec<(u64, u64)>,
    log_base: usize,
    ended: bool,
    /// The track's final object, once an END_OF_TRACK object was stored (draft-19 §2.4.2).
    final_object: Option<Location>,
    /// Why the track was found malformed, if it was (draft-19 §2.4.2).
    malformed: Option<Malformed>,
    /// Set when another incarnation of the track took its place (see
    /// [`TrackCache::supersede`]).
    superseded: bool,
    evicted_below: u64,
    /// The readers waiting for a change (a new subgroup, the end).
    readers: ReaderWakers,
    /// Groups below this one were published before the cache joined the track (a relay's
    /// cache of a track it subscribed to): their objects' status is unknown to it.
    joined_at: u64,
}

/// A track's shared state. Cheap to clone; dropping a clone does nothing, and the track's
/// objects go with its last clone.
#[derive(Clone, Debug)]
pub struct TrackCache {
    state: Arc<TrackState>,
}

#[derive(Debug)]
struct TrackState {
    name: FullTrackName,
    properties: Mutex<Properties>,
    limits: CacheLimits,
    inner: Mutex<TrackInner>,
    /// An outstanding NEW_GROUP_REQUEST (draft-19 §10.2.18): its value, until the largest
    /// group passes the group it was asked in.
    new_group: watch::Sender<Option<NewGroup>>,
    /// Subscriptions being served from this track right now.
    subscribers: watch::Sender<usize>,
    /// The subscriptions served from this track right now, by a key of their own.
    serving: Mutex<HashMap<u64, SubscriptionWriter>>,
    serving_keys: std::sync::atomic::AtomicU64,
    /// The largest location written or learned from upstream: the track's own, and what every
    /// subscription served reads when it reports its LARGEST_OBJECT (draft-19 §10.2.16).
    largest: TrackLargest,
}

impl TrackCache {
    /// A new, empty track.
    pub fn new(name: FullTrackName, properties: Properties, limits: CacheLimits) -> Self {
        TrackCache {
            state: Arc::new(TrackState {
                name,
                properties: Mutex::new(properties),
                limits,
                inner: Mutex::new(TrackInner {
                    groups: BTreeMap::new(),
                    stored: None,
                    log: Vec::new(),
                    log_base: 0,
                    ended: false,
                    final_object: None,
                    malformed: None,
                    superseded: false,
                    evicted_below: 0,
                    readers: ReaderWakers::default(),
                    joined_at: 0,
                }),
                new_group: watch::channel(None).0,
                subscribers: watch::channel(0).0,
                serving: Mutex::new(HashMap::new()),
                serving_keys: std::sync::atomic::AtomicU64::new(0),
                largest: TrackLargest::new(),
            }),
        }
    }

    /// How many subscriptions are being served from this track right now.
    pub fn subscribers(&self) -> usize {
        *self.state.subscribers.borrow()
    }

    /// Waits until at least one subscription is served from this track: a publisher can hold
    /// back work (or, in a test, its first objects) until someone listens.
    ///
    /// Cancel safe.
    pub async fn subscribed(&self) {
        let mut rx = self.state.subscribers.subscribe();
        // The sender lives as long as this track, so this cannot fail while we hold `self`.
        let _ = rx.wait_for(|n| *n > 0).await;
    }

    /// Counts a served subscription until the guard drops.
    pub(crate) fn serving(&self, writer: &SubscriptionWriter) -> ServingGuard {
        let key = self
            .state
            .serving_keys
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.state.serving.lock().insert(key, writer.clone());
        // draft-19 §10.2.16: the subscription's LARGEST_OBJECT is the track's, even while it
        // forwards nothing (Forward State 0).
        writer.follow_track(&self.state.largest);
        self.state.subscribers.send_modify(|n| *n += 1);
        ServingGuard(self.clone(), key)
    }

    fn serving_now(&self) -> Vec<SubscriptionWriter> {
        self.state.serving.lock().values().cloned().collect()
    }

    /// Resolves once every subscription served now has been sent every object up to the
    /// largest stored so far, and has acknowledged every subgroup stream finished (objects of
    /// a group still open are sent, not necessarily acknowledged).
    ///
    /// Cancel safe.
    pub async fn delivered(&self) {
        let target = self.state.inner.lock().stored;
        let writers = self.serving_now();
        futures::future::join_all(writers.iter().map(|w| async move {
            if let Some(t) = target {
                w.reached(t).await;
            }
            w.acknowledged().await;
        }))
        .await;
    }

    /// Resolves once no subscription is served from this track any more (each was sent the
    /// end of the track or left) and the peers acknowledged the streams they were sent.
    ///
    /// Cancel safe.
    pub async fn served_out(&self) {
        let writers = self.serving_now();
        let mut rx = self.state.subscribers.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
        futures::future::join_all(writers.iter().map(|w| w.acknowledged())).await;
    }

    /// True if both handles are the same track.
    pub fn same(&self, other: &TrackCache) -> bool {
        Arc::ptr_eq(&self.state, &other.state)
    }

    /// The track's name.
    pub fn name(&self) -> &FullTrackName {
        &self.state.name
    }

    /// The track's properties.
    pub fn properties(&self) -> Properties {
        self.state.properties.lock().clone()
    }

    /// Replaces the track's properties (the most recent set wins, draft-19 §2.5).
    pub fn set_properties(&self, p: Properties) {
        *self.state.properties.lock() = p;
    }

    /// DEFAULT_PUBLISHER_PRIORITY, or 128.
    pub fn default_priority(&self) -> u8 {
        self.state.properties.lock().publisher_priority()
    }

    /// DEFAULT_PUBLISHER_GROUP_ORDER, or Ascending.
    pub fn group_order(&self) -> GroupOrder {
        self.state.properties.lock().publisher_group_order()
    }

    /// The largest location written, if any.
    pub fn largest(&self) -> Option<Location> {
        self.state.largest.get()
    }

    /// The largest location of an object actually stored (the largest may run ahead of it).
    pub fn stored(&self) -> Option<Location> {
        self.state.inner.lock().stored
    }

    /// Raises the largest location (a relay learns it from upstream before objects arrive).
    pub fn observe_largest(&self, loc: Location) {
        // Every subscription served from the track reports it in LARGEST_OBJECT (draft-19
        // §10.2.16), whether it was sent the object or not: each reads it when it does (one
        // update per object, not one per subscription).
        self.state.largest.raise(loc);
    }

    /// The group `id`, if cached.
    pub fn group(&self, id: u64) -> Option<Arc<Group>> {
        self.state.inner.lock().groups.get(&id).cloned()
    }

    /// The cached groups, ascending, without those older than the cache's age limit (checked
    /// now: draft-19 §12.3, objects are not served from cache after MAX_CACHE_DURATION).
    pub fn groups(&self) -> Vec<Arc<Group>> {
        let mut inner = self.state.inner.lock();
        self.evict(&mut inner);
        let max_age = self.max_age();
        let now = Instant::now();
        inner
            .groups
            .values()
            .filter(|g| g.within(max_age, now))
            .cloned()
            .collect()
    }

    /// How long a group may be served from the cache: the limit, lowered by the track's
    /// MAX_CACHE_DURATION as known now (a relay learns the properties after creating the
    /// track, draft-19 §12.3).
    fn max_age(&self) -> Option<Duration> {
        let limit = self.state.limits.max_age;
        match self
            .state
            .properties
            .lock()
            .get_int(property::MAX_CACHE_DURATION)
        {
            Some(ms) => {
                let d = Duration::from_millis(ms);
                Some(limit.map_or(d, |a| a.min(d)))
            }
            None => limit,
        }
    }

    /// Groups below this ID were evicted from the cache (their objects' status is unknown).
    pub fn evicted_below(&self) -> u64 {
        self.state.inner.lock().evicted_below
    }

    /// Groups below this ID are unknown to the cache: evicted, or published before it joined
    /// the track (see [`TrackCache::joined_upstream`]). A FETCH served from the cache reports
    /// them as an Unknown range.
    pub fn unknown_below(&self) -> u64 {
        let inner = self.state.inner.lock();
        inner.evicted_below.max(inner.joined_at)
    }

    /// An upstream answered with its Largest Location `largest` (SUBSCRIBE_OK or PUBLISH): it
    /// is noted, and if the cache holds nothing yet, the groups up to and including that one
    /// are unknown to it (the upstream sends only what follows, draft-19 §10.7).
    pub fn joined_upstream(&self, largest: Option<Location>) {
        let Some(l) = largest else { return };
        let mut inner = self.state.inner.lock();
        if inner.stored.is_none() {
            inner.joined_at = inner.joined_at.max(l.group.saturating_add(1));
        }
        drop(inner);
        self.observe_largest(l);
    }

    /// True once [`TrackCache::end`] was called.
    pub fn is_ended(&self) -> bool {
        self.state.inner.lock().ended
    }

    /// Checks an object received for `sg` with publisher priority `priority` against what the
    /// cache holds, before it is appended (draft-19 §2.4.2, §9.1): its properties, the
    /// subgroup's priority, the subgroup's, group's and track's ends as stored, and a
    /// duplicate's contents, Subgroup ID and Forwarding Preference against the stored object.
    pub fn check(&self, sg: &Subgroup, priority: u8, obj: &CachedObject) -> Result<(), Malformed> {
        let group = self.group(sg.group);
        let (track_final, track_largest) = {
            let inner = self.state.inner.lock();
            (inner.final_object, inner.stored)
        };
        // The group's largest object is only asked of an END_OF_GROUP (it visits the group's
        // subgroups): not on every object.
        let group_largest = match obj.status {
            ObjectStatus::EndOfGroup => group.as_ref().and_then(|g| g.largest()),
            _ => None,
        };
        let seen = Seen {
            priority: Some(sg.priority),
            subgroup_final: sg.final_object(),
            group_final: group.as_ref().and_then(|g| g.final_object()),
            group_largest,
            track_final,
            track_largest,
        };
        let at = Location::new(sg.group, obj.id);
        malformed::check(&seen, at, priority, obj.status, &obj.properties)?;
        if let Some(old) = sg.find(obj.id)
            && (old.payload != obj.payload
                || old.properties != obj.properties
                || old.status != obj.status)
        {
            return Err(Malformed("the same object with a different payload"));
        }
        // draft-19 §9.1: the same object in another subgroup, or once as a datagram and once
        // on a stream (datagrams are kept as a subgroup of their own).
        if group.is_some_and(|g| g.holds_elsewhere(sg.id, obj.id)) {
            return Err(Malformed(
                "the same object with another Subgroup ID or Forwarding Preference",
            ));
        }
        Ok(())
    }

    /// Records a subscriber's NEW_GROUP_REQUEST `value` (draft-19 §10.2.18). It is taken only
    /// for a track with DYNAMIC_GROUPS = 1, when it is 0 or above the largest group, and when
    /// no outstanding request has a value at least as large. Returns whether it was taken.
    pub fn request_new_group(&self, value: u64) -> bool {
        if self
            .state
            .properties
            .lock()
            .get_int(property::DYNAMIC_GROUPS)
            != Some(1)
        {
            return false;
        }
        let largest = self.largest().map(|l| l.group);
        if value != 0 && largest.is_some_and(|g| value <= g) {
            return false;
        }
        let mut taken = false;
        self.state.new_group.send_if_modified(|cur| {
            // Outstanding until the largest group moves on; one of 0 covers any value.
            let outstanding = cur.filter(|n| n.asked_in == largest);
            if outstanding.is_some_and(|n| value == 0 || n.value == 0 || n.value >= value) {
                return false;
            }
            *cur = Some(NewGroup {
                value,
                asked_in: largest,
            });
            taken = true;
            true
        });
        taken
    }

    /// The outstanding NEW_GROUP_REQUEST, if any.
    pub fn new_group(&self) -> Option<NewGroup> {
        *self.state.new_group.borrow()
    }

    /// Resolves with the next NEW_GROUP_REQUEST taken after `seen` (pass the last one
    /// returned, `None` at first).
    ///
    /// Cancel safe.
    pub async fn new_group_requested(&self, seen: Option<NewGroup>) -> NewGroup {
        let mut rx = self.state.new_group.subscribe();
        loop {
            if let Some(n) = *rx.borrow_and_update()
                && Some(n) != seen
            {
                return n;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Ends the track as malformed (draft-19 §2.4.2): the subscriptions served from it end
    /// with PUBLISH_DONE MALFORMED_TRACK (see `serve::serve_subscription`).
    pub fn set_malformed(&self, why: Malformed) {
        let mut inner = self.state.inner.lock();
        inner.malformed.get_or_insert(why);
        inner.ended = true;
        let readers = inner.readers.take();
        drop(inner);
        wake_all(readers);
    }

    /// Why the track is malformed, if it is.
    pub fn malformed(&self) -> Option<Malformed> {
        self.state.inner.lock().malformed
    }

    /// Ends the track because a new incarnation of it replaces this one (a relay's publisher
    /// that restarted and numbers its groups anew): the subscriptions served from it end with
    /// PUBLISH_DONE GOING_AWAY (their publisher went away; subscribing again reaches the new
    /// one), see `serve::serve_subscription`.
    pub fn supersede(&self) {
        self.end_as(true);
    }

    /// Whether [`TrackCache::supersede`] ended the track.
    pub fn is_superseded(&self) -> bool {
        self.state.inner.lock().superseded
    }

    /// Marks the track as over (no more groups); live readers end, and so do the subgroups of
    /// objects that came as datagrams.
    pub fn end(&self) {
        self.end_as(false);
    }

    /// Ends the track, superseded by a new incarnation or not.
    fn end_as(&self, superseded: bool) {
        let mut inner = self.state.inner.lock();
        inner.ended = true;
        inner.superseded |= superseded;
        let groups: Vec<Arc<Group>> = inner.groups.values().cloned().collect();
        let readers = inner.readers.take();
        drop(inner);
        // Objects that came as datagrams have no stream whose end ends their subgroup: the
        // track's end does, so that a subscription serving them ends too, with PUBLISH_DONE
        // (draft-19 §10.11: sent once every data stream is closed; datagrams have none). Before,
        // a relay's subscription to a datagram track never sent it.
        for g in groups {
            if let Some(sg) = g.subgroup(DATAGRAM_SUBGROUP) {
                sg.complete();
            }
        }
        wake_all(readers);
    }

    /// The subgroup (`group`, `id`), created if absent (a group older than the eviction point
    /// is refused); `from_first` says whether its first object will be the first ever
    /// published in it (see [`Subgroup::from_first`]).
    pub fn subgroup(
        &self,
        group: u64,
        id: u64,
        priority: u8,
        end_of_group: bool,
        from_first: bool,
    ) -> Option<Arc<Subgroup>> {
        let mut inner = self.state.inner.lock();
        if group < inner.evicted_below {
            return None;
        }
        let g = inner
            .groups
            .entry(group)
            .or_insert_with(|| Arc::new(Group::new(group)))
            .clone();
        let (s, created) = g.subgroup_or_insert(id, priority, end_of_group, from_first);
        if !created {
            return Some(s);
        }
        inner.log.push((group, id));
        self.evict(&mut inner);
        let readers = inner.readers.take();
        drop(inner);
        wake_all(readers);
        Some(s)
    }

    /// Appends an object to (`group`, `subgroup`) and notes the largest location.
    pub fn append(&self, sg: &Subgroup, obj: CachedObject) -> bool {
        let loc = Location::new(sg.group, obj.id);
        let end_of_track = obj.status == ObjectStatus::EndOfTrack;
        let added = sg.append(obj);
        if added {
            let mut inner = self.state.inner.lock();
            if end_of_track {
                inner.final_object = Some(inner.final_object.map_or(loc, |f| f.min(loc)));
            }
            if inner.stored.is_none_or(|l| loc > l) {
                inner.stored = Some(loc);
            }
            drop(inner);
            self.observe_largest(loc);
        }
        added
    }

    /// True if the cache can answer a FETCH of `start` up to `end` (exclusive, as in FETCH):
    /// it holds the start group and every object up to the end or the largest location known,
    /// whichever is first, has been stored.
    pub fn covers(&self, start: Location, end: Location) -> bool {
        let mut inner = self.state.inner.lock();
        self.evict(&mut inner);
        let (Some(largest), Some(stored)) = (self.largest(), inner.stored) else {
            return false;
        };
        // draft-19 §12.3: a group past its age is not served, even the newest one.
        let max_age = self.max_age();
        let now = Instant::now();
        let has_start = start.group >= inner.evicted_below.max(inner.joined_at)
            && inner
                .groups
                .iter()
                .find(|(_, g)| g.within(max_age, now))
                .is_some_and(|(id, _)| *id <= start.group);
        has_start && stored >= last_covered(end).min(largest)
    }

    fn evict(&self, inner: &mut TrackInner) {
        let limits = self.state.limits;
        let max_age = self.max_age();
        let now = Instant::now();
        loop {
            let n = inner.groups.len();
            if n <= 1 {
                break;
            }
            let Some((&oldest, g)) = inner.groups.iter().next() else {
                break;
            };
            let bytes: usize = inner.groups.values().map(|g| g.bytes()).sum();
            let too_old = !g.within(max_age, now);
            if n > limits.max_groups || bytes > limits.max_bytes || too_old {
                inner.groups.remove(&oldest);
                inner.evicted_below = inner.evicted_below.max(oldest + 1);
                // Trim the log of entries for evicted groups.
                let keep_from = inner
                    .log
                    .iter()
                    .position(|(g, _)| *g >= inner.evicted_below)
                    .unwrap_or(inner.log.len());
                inner.log.drain(..keep_from);
                inner.log_base += keep_from;
            } else {
                break;
            }
        }
    }

    /// A reader of subgroups in groups at or after `start_group`, first those already cached,
    /// then each new one as it appears.
    pub fn reader(&self, start_group: u64) -> TrackReader {
        let slot = self.state.inner.lock().readers.add();
        TrackReader {
            track: self.clone(),
            next: 0,
            start_group,
            slot,
        }
    }

    /// The Group ID after the largest one written or started.
    pub fn next_group_id(&self) -> u64 {
        let inner = self.state.inner.lock();
        let written = self.largest().map(|l| l.group);
        let started = inner.groups.keys().next_back().copied();
        written.max(started).map_or(0, |g| g + 1)
    }
}

/// Counts one subscription served from a track; see [`TrackCache::subscribers`].
#[derive(Debug)]
pub(crate) struct ServingGuard(TrackCache, u64);

impl Drop for ServingGuard {
    fn drop(&mut self) {
        self.0.state.serving.lock().remove(&self.1);
        self.0
            .state
            .subscribers
            .send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Follows a track's subgroups as they appear. Dropping it stops following (nothing else).
#[derive(Debug)]
pub struct TrackReader {
    track: TrackCache,
    next: usize,
    start_group: u64,
    /// Its waker's slot in the track's [`ReaderWakers`].
    slot: usize,
}

impl TrackReader {
    /// The next subgroup (in creation order) at or after the start group; `None` once the
    /// track ended and every subgroup was returned.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Arc<Subgroup>> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// [`TrackReader::next`] as a poll function, for a hand-written future: `Pending` with
    /// the task of `cx` to be woken when the track changes (the last call's task only).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Arc<Subgroup>>> {
        let mut inner = self.track.state.inner.lock();
        if self.next < inner.log_base {
            // Subgroups we had not reached were evicted; skip them.
            self.next = inner.log_base;
        }
        while let Some(&(g, s)) = inner.log.get(self.next - inner.log_base) {
            self.next += 1;
            if g < self.start_group {
                continue;
            }
            if let Some(sg) = inner.groups.get(&g).and_then(|grp| grp.subgroup(s)) {
                return Poll::Ready(Some(sg));
            }
        }
        if inner.ended {
            return Poll::Ready(None);
        }
        // Under the lock a change is made under: the change after this check wakes it.
        inner.readers.register(self.slot, cx.waker());
        Poll::Pending
    }
}

impl Drop for TrackReader {
    fn drop(&mut self) {
        self.track.state.inner.lock().readers.remove(self.slot);
    }
}

/// The wakers of a track's readers waiting for a change, one slot each: not a `watch`
/// channel, whose `changed()` future a poll function could not keep between polls.
#[derive(Debug, Default)]
struct ReaderWakers {
    slots: Vec<Option<Waker>>,
    /// Slots of dropped readers, to reuse.
    free: Vec<usize>,
}

impl ReaderWakers {
    /// A slot for a new reader.
    fn add(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        })
    }

    /// Frees a dropped reader's slot.
    fn remove(&mut self, slot: usize) {
        if let Some(w) = self.slots.get_mut(slot) {
            *w = None;
            self.free.push(slot);
        }
    }

    /// Wakes `waker` at the next change.
    fn register(&mut self, slot: usize, waker: &Waker) {
        if let Some(w) = self.slots.get_mut(slot)
            && !w.as_ref().is_some_and(|w| w.will_wake(waker))
        {
            *w = Some(waker.clone());
        }
    }

    /// The wakers to wake for a change (woken once the track's lock is released).
    fn take(&mut self) -> Vec<Waker> {
        self.slots.iter_mut().filter_map(Option::take).collect()
    }
}

/// Wakes the readers [`ReaderWakers::take`] returned.
fn wake_all(readers: Vec<Waker>) {
    for w in readers {
        w.wake();
    }
}
