//! Upstream: what feeds a relay track. A SUBSCRIBE the relay sends to each publisher of the
//! track, or a PUBLISH it accepts; their objects go into the track's cache (subgroup streams,
//! datagrams, and a Joining FETCH of what a new upstream missed), with the malformed-track
//! checks of draft-19 §2.4.2.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::FutureExt;
use moq_client::model::{CachedObject, DATAGRAM_SUBGROUP, Malformed, Subgroup, SubgroupEnd};
use moq_core::codes::{PublishDoneCode, RequestErrorCode, SessionErrorCode};
use moq_core::message::{Parameters, RequestError};
use moq_transport::track::{
    FetchItem, IncomingPublish, IncomingSubgroup, JoiningStart, Object, Subscription, TrackEvent,
};
use moq_transport::{Error, Session};

use super::lifecycle::{LiveUpstream, UpstreamEnd};
use super::state::Inner;
use super::tasks::TaskSet;
use super::track::{PendingUpstream, RelayTrack, Standing};
use crate::metrics::Metrics;

impl Inner {
    /// Subscribes upstream to `track` on a publisher's session, unless already subscribed there.
    pub(super) fn start_upstream(
        self: &Arc<Self>,
        track: &Arc<RelayTrack>,
        session_id: u64,
        session: Session,
    ) {
        let mut upstreams = track.upstreams.lock();
        if upstreams.get(&session_id).is_some_and(|h| !h.is_finished()) {
            return;
        }
        let pending = PendingUpstream::new(track);
        // Over a link to an origin relay, the wait after the upstream ends is bounded (issue 36).
        let wait = self.origin_wait(session_id);
        let t = track.clone();
        let metrics = self.metrics.clone();
        let weak = Arc::downgrade(self);
        let tasks = self.tasks.clone();
        let handle = self.tasks.spawn(async move {
            // Relays use their own priority and order upstream (draft-19 §7.3), with no filter: the
            // publisher sends what it publishes from now on; what the cache misses of the past
            // is fetched (fill_from_upstream).
            let rendezvous = t
                .rendezvous_until
                .lock()
                .and_then(|until| until.checked_duration_since(tokio::time::Instant::now()))
                .map(|left| left.as_millis().clamp(1, u64::MAX as u128) as u64);
            let params = Parameters {
                rendezvous_timeout: rendezvous,
                new_group_request: *t.new_group_request.lock(),
                ..Default::default()
            };
            let res = session.subscribe(t.name.clone(), params).await;
            drop(pending);
            match res {
                Ok(sub) => {
                    // Answered: the request is no longer pending for later upstreams; it is
                    // outstanding at the cache (now that DYNAMIC_GROUPS is known), so the same
                    // request from a downstream is not sent again (draft-19 §10.2.18).
                    let carried = t.new_group_request.lock().take();
                    let info = sub.info().clone();
                    let floor = t.restart_floor();
                    t.cache.set_properties(info.track_properties.clone());
                    t.cache.joined_upstream(info.largest);
                    if let Some(v) = carried {
                        t.cache.request_new_group(v);
                    }
                    t.answer.send_replace(Some(Ok(Standing::of(&t.cache))));
                    let mut live = LiveUpstream::new(&metrics, &weak, &t);
                    live.wait = wait;
                    t.delivering.lock().insert(session_id);
                    let continuing = fill_from_upstream(&t, &session, &sub, &metrics).await;
                    live.status = ingest(&tasks, &t, sub, &metrics, continuing, floor).await;
                    t.delivering.lock().remove(&session_id);
                    // An origin found through the registry that ended the track may have moved
                    // to another relay: the track follows it there instead of ending.
                    if live.status == UpstreamEnd::Done(PublishDoneCode::TRACK_ENDED)
                        && t.downstreams.load(Ordering::Relaxed) > 0
                        && let Some(inner) = weak.upgrade()
                        && let Some(route) = inner.origin_moved(&t.name, session_id).await
                    {
                        inner.start_upstream(&t, route.session_id, route.session);
                        live.status = UpstreamEnd::Lost;
                    }
                }
                Err(e) => {
                    tracing::debug!(track = %t.name, error = %e, "upstream SUBSCRIBE failed");
                    let err = match e {
                        Error::Rejected(r) => *r,
                        e => RequestError::new(RequestErrorCode::INTERNAL_ERROR, e.to_string()),
                    };
                    if t.pending_upstreams.load(Ordering::Relaxed) == 0
                        && t.live_upstreams.load(Ordering::Relaxed) == 0
                    {
                        t.answer.send_if_modified(|a| {
                            if a.is_none() {
                                *a = Some(Err(err));
                                true
                            } else {
                                false
                            }
                        });
                    }
                }
            }
        });
        upstreams.insert(session_id, handle);
    }

    /// A publisher PUBLISHes a track to the relay: accept it into the cache and offer it to
    /// SUBSCRIBE_TRACKS subscribers (draft-19 §9.5).
    pub(super) async fn on_publish(self: Arc<Self>, session_id: u64, p: IncomingPublish) {
        let name = p.track().clone();
        let info = p.info().clone();
        let track = {
            let mut tracks = self.tracks.lock();
            tracks
                .entry(name.clone())
                .or_insert_with(|| self.new_track(&name, info.track_properties.clone(), true))
                .clone()
        };
        // The relay takes every object of a PUBLISHed track (it forwards to whoever subscribes).
        // Until draft-19 an absent FORWARD in PUBLISH_OK means 1; from draft-20 the PUBLISH's own
        // FORWARD stands until a REQUEST_UPDATE changes it (draft-21 §9.8), so it is asked for.
        let forward = Parameters {
            forward: Some(true),
            ..Default::default()
        };
        // Pending while PUBLISH_OK goes out: a SUBSCRIBE that arrives between PUBLISH_OK and the
        // answer below waits for it instead of finding no publisher (`wait_answer`).
        let pending = PendingUpstream::new(&track);
        let accepted = p.accept(forward).await;
        drop(pending);
        let Ok(sub) = accepted else {
            // Wakes the SUBSCRIBEs that waited for this publisher, to look again.
            track.answer.send_modify(|_| {});
            return;
        };
        let floor = track.restart_floor();
        track.cache.set_properties(info.track_properties.clone());
        track.cache.joined_upstream(info.largest);
        track
            .answer
            .send_replace(Some(Ok(Standing::of(&track.cache))));
        let mut live = LiveUpstream::new(&self.metrics, &Arc::downgrade(&self), &track);
        // Offered to SUBSCRIBE_TRACKS subscribers (never back to this session) while it lasts.
        let _offered = self
            .directory
            .insert(track.cache.clone(), Some(session_id), true);
        live.status = ingest(
            &self.tasks,
            &track,
            sub,
            &self.metrics,
            Continuing::default(),
            floor,
        )
        .await;
    }
}

/// How long ingesting waits for the upstream's answer to a REQUEST_UPDATE.
const UPDATE_WAIT: Duration = Duration::from_secs(2);

/// Feeds an upstream subscription into the track's cache until it ends; says how.
///
/// `floor` is [`RelayTrack::restart_floor`] when the upstream began: if the publisher says (in
/// its answer's Largest Location) or shows (with its first object) that it numbers its groups
/// below it, it restarted from a lower group. Subscriptions to the track cannot be continued:
/// their filters start after the old numbering, and the cache holds the old groups under the
/// same numbers. The track is superseded (`restart_track`): it leaves the relay's tracks, its
/// other upstreams (a killed publisher's session the relay has not yet seen die) are dropped,
/// and its subscribers get PUBLISH_DONE GOING_AWAY (their publisher went away), which a
/// reconnecting moq-client subscriber renews at once; the next SUBSCRIBE starts over on the
/// new numbering. A publisher that
/// numbers its groups from the clock (`TrackOptions::groups_from_clock`) never regresses, and
/// its existing subscribers continue at its first object.
async fn ingest(
    tasks: &TaskSet,
    t: &Arc<RelayTrack>,
    mut sub: Subscription,
    metrics: &Arc<Metrics>,
    mut continuing: Continuing,
    floor: Option<u64>,
) -> UpstreamEnd {
    // `fresh`: the publisher gave no Largest Location, so it is new, and a first group equal
    // to the last one stored is a restart too (its objects would collide with the old ones).
    let regressed = |group: u64, fresh: bool| {
        let lower = floor.is_some_and(|f| group < f || (fresh && group == f));
        if lower {
            tracing::info!(track = %t.name, group, "publisher restarted its group numbering lower; track ended");
        }
        lower
    };
    if sub
        .info()
        .largest
        .is_some_and(|l| regressed(l.group, false))
    {
        return UpstreamEnd::Restarted;
    }
    let mut first = floor.is_some() && sub.info().largest.is_none();
    // The publisher closed its session on purpose (NO_ERROR): its tracks ended with it.
    let mut left = false;
    let mut streams = tokio::task::JoinSet::new();
    let mut asked = t.cache.new_group();
    loop {
        let ev = tokio::select! {
            ev = sub.next() => ev,
            n = t.cache.new_group_requested(asked) => {
                // draft-19 §10.2.18: a downstream NEW_GROUP_REQUEST on an Established
                // subscription goes upstream in a REQUEST_UPDATE (the cache took it only if
                // the track has dynamic groups and none as large is outstanding).
                asked = Some(n);
                let update = Parameters {
                    new_group_request: Some(n.value),
                    ..Default::default()
                };
                // Objects wait meanwhile; an upstream that does not answer is not waited for
                // long.
                let _ = tokio::time::timeout(UPDATE_WAIT, sub.update(update)).await;
                continue;
            }
        };
        let Some(ev) = ev else { break };
        // draft-19 §2.4.2: a subscriber that finds the track malformed cancels the
        // subscription (dropping it unsubscribes).
        if t.cache.malformed().is_some() {
            break;
        }
        // Reap finished copies so the set stays as small as the open streams.
        while streams.try_join_next().is_some() {}
        if std::mem::take(&mut first) {
            let group = match &ev {
                Ok(TrackEvent::Subgroup(s)) => Some(s.group()),
                Ok(TrackEvent::Datagram(o)) => Some(o.location.group),
                Err(_) => None,
            };
            if group.is_some_and(|g| regressed(g, true)) {
                return UpstreamEnd::Restarted;
            }
        }
        match &ev {
            Ok(TrackEvent::Subgroup(s)) => continuing.saw(s.group(), s.subgroup_id().unwrap_or(0)),
            Ok(TrackEvent::Datagram(o)) => continuing.saw(o.location.group, DATAGRAM_SUBGROUP),
            Err(_) => {}
        }
        match ev {
            Ok(TrackEvent::Subgroup(s)) => {
                let t = t.clone();
                let metrics = metrics.clone();
                let mut copy = Box::pin(async move { ingest_subgroup(&t, s, &metrics).await });
                // Begun here, in the order the streams came: the cache takes each subgroup,
                // and the objects that are here already, in that order (downstream streams
                // open in it). A task of its own per stream began them in whatever order the
                // tasks ran; on several threads the last spawned often runs first.
                if (&mut copy).now_or_never().is_none() {
                    // Counted by the relay's tasks; aborted with the set when this ends.
                    streams.spawn(tasks.track(copy));
                }
            }
            Ok(TrackEvent::Datagram(o)) => {
                store_object(t, DATAGRAM_SUBGROUP, o, metrics);
            }
            Err(e) => {
                left = matches!(&e, Error::ClosedByPeer { code, .. } if *code == SessionErrorCode::NO_ERROR);
                break;
            }
        }
    }
    // The track ends only after every subgroup stream it sent is in the cache: PUBLISH_DONE
    // can overtake the data streams (draft-19 §10.11 Stream Count). Streams still open after
    // the drain time are cut.
    let drain = tokio::time::timeout(STREAM_DRAIN, async {
        while streams.join_next().await.is_some() {}
    });
    if drain.await.is_err() {
        streams.abort_all();
    }
    match sub.publish_done() {
        Some(done) => UpstreamEnd::Done(done.status),
        None if left => UpstreamEnd::Closed,
        None => UpstreamEnd::Lost,
    }
}

/// An upstream showed the track malformed (draft-19 §2.4.2): its subscriptions end with
/// PUBLISH_DONE MALFORMED_TRACK, its ingest cancels the upstream subscription, and the object
/// that showed it is not cached.
fn found_malformed(t: &RelayTrack, why: Malformed) {
    tracing::warn!(track = %t.cache.name(), %why, "upstream track is malformed");
    t.cache.set_malformed(why);
}

/// Stores one object that came outside a subgroup stream (a datagram, or one of a FETCH) in
/// subgroup `id` of its group; returns that subgroup.
fn store_object(t: &RelayTrack, id: u64, o: Object, metrics: &Metrics) -> Option<Arc<Subgroup>> {
    let sg = t
        .cache
        .subgroup(o.location.group, id, o.priority, false, false)?;
    t.received.object(o.payload.len());
    let obj = CachedObject::from(o);
    // draft-19 §2.4.2 (objects outside a subgroup stream have no subgroup priority to keep).
    if let Err(why) = t.cache.check(&sg, sg.priority, &obj) {
        found_malformed(t, why);
        return None;
    }
    if !t.cache.append(&sg, obj) {
        metrics.duplicate();
    }
    Some(sg)
}

/// A new upstream subscription carries only what is published after it (draft-19 §10.7). For
/// a track the cache already holds (a publisher's switchover to a new session, seed 003), the
/// objects from the group of the last one stored up to the new upstream's Largest Location are
/// fetched from it (Joining FETCH, §5.2), so that nothing the old path had not delivered is
/// missed. The subgroups of the groups before the last are complete once the FETCH is; those
/// of the last group may continue on the new path, and are returned.
async fn fill_from_upstream(
    t: &RelayTrack,
    session: &Session,
    sub: &Subscription,
    m: &Metrics,
) -> Continuing {
    let mut last = Continuing::default();
    let (Some(stored), Some(largest)) = (t.cache.stored(), sub.info().largest) else {
        return last;
    };
    if largest <= stored {
        return last;
    }
    let Some(request) = sub.joining_fetch(JoiningStart::Absolute(stored.group)) else {
        return last;
    };
    let Ok(mut fetch) = session.fetch(request, Parameters::default()).await else {
        return last;
    };
    let mut filled: Vec<Arc<Subgroup>> = Vec::new();
    loop {
        match fetch.next().await {
            Some(Ok(FetchItem::Object(o))) => {
                let id = o.subgroup.unwrap_or(DATAGRAM_SUBGROUP);
                if let Some(sg) = store_object(t, id, o, m)
                    && !filled.iter().any(|f| Arc::ptr_eq(f, &sg))
                {
                    filled.push(sg);
                }
            }
            Some(Ok(FetchItem::EndOfRange { .. })) => {}
            Some(Err(_)) => return last,
            None => break,
        }
    }
    for sg in filled {
        if sg.group < largest.group {
            sg.complete();
        } else {
            last.subgroups.push(sg);
        }
    }
    last.group = largest.group;
    last
}

/// The fetched subgroups of the group a new upstream starts in: complete unless the new path
/// continues them. A stream of the same subgroup takes one over (its FIN ends it); the others
/// end when the new path moves to a later group, or with the subscription.
#[derive(Default)]
struct Continuing {
    group: u64,
    subgroups: Vec<Arc<Subgroup>>,
}

impl Continuing {
    /// The new path sent (`group`, `id`).
    fn saw(&mut self, group: u64, id: u64) {
        if group == self.group {
            self.subgroups.retain(|sg| sg.id != id);
        } else if group > self.group {
            self.finish();
        }
    }

    fn finish(&mut self) {
        for sg in self.subgroups.drain(..) {
            sg.complete();
        }
    }
}

impl Drop for Continuing {
    fn drop(&mut self) {
        self.finish();
    }
}

/// How long a stream that begins inside a subgroup waits for another upstream to deliver the
/// objects before it.
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);

/// How long a finished upstream's subgroup streams may take to arrive before the track ends.
const STREAM_DRAIN: Duration = Duration::from_secs(5);

/// Copies one upstream subgroup stream into the cache. Objects already there (sent by another
/// upstream of the same track, e.g. during a switchover) are dropped, so downstream sees no
/// duplicate; a reset is passed on only if no other upstream can complete the subgroup.
async fn ingest_subgroup(t: &Arc<RelayTrack>, mut s: IncomingSubgroup, metrics: &Metrics) {
    let first = s.next_object().await;
    let group = s.group();
    let id = s.subgroup_id().unwrap_or(0);
    let (priority, end_of_group) = (s.priority(), s.end_of_group());
    let Some(sg) = t
        .cache
        .subgroup(group, id, priority, end_of_group, s.first_object())
    else {
        return;
    };
    let writing = sg.writing();
    let mut next = Some(first);
    // The last object this stream carried.
    let mut last = None;
    loop {
        let res = match next.take() {
            Some(r) => r,
            None => s.next_object().await,
        };
        match res {
            Ok(Some(o)) => {
                t.received.object(o.payload.len());
                // A stream that begins inside the subgroup (a new upstream's, during a
                // switchover) waits until the objects before its first are in, as far as
                // another upstream still delivers them (draft-19 §9.4, §11.4.3: never
                // reordered, never dropped).
                if last.is_none() && !s.first_object() {
                    let caught_up = sg.caught_up(o.location.object);
                    let _ = tokio::time::timeout(CATCH_UP_WAIT, caught_up).await;
                }
                last = Some(o.location.object);
                let obj = CachedObject::from(o);
                // draft-19 §2.4.2: a malformed track is not served on, the object not cached.
                if let Err(why) = t.cache.check(&sg, priority, &obj) {
                    return found_malformed(t, why);
                }
                if !t.cache.append(&sg, obj) {
                    metrics.duplicate();
                }
            }
            Ok(None) => {
                // draft-19 §2.4.2 conditions 2 and 3: a stream of the subgroup ends with FIN
                // before an object the cache holds, or two such streams end at different
                // objects.
                if let Some(l) = last
                    && (sg.last_id() > Some(l) || sg.final_object().is_some_and(|f| f != l))
                {
                    let why = Malformed("a subgroup ended at two different objects");
                    return found_malformed(t, why);
                }
                sg.finish();
                return;
            }
            Err(_) => {
                drop(writing);
                if t.live_upstreams.load(Ordering::Relaxed) <= 1 {
                    sg.reset();
                    return;
                }
                // Another upstream may complete it; reset if it makes no progress.
                let before = sg.len();
                tokio::time::sleep(Duration::from_secs(2)).await;
                if sg.state() == SubgroupEnd::Open && sg.len() == before {
                    sg.reset();
                }
                return;
            }
        }
    }
}
