//! Serving a [`TrackCache`] to subscribers and fetchers: one task per subscription follows the
//! track and writes each subgroup on its own stream; FETCH is answered from the cache.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use moq_core::codes::{PublishDoneCode, RequestErrorCode, StreamResetCode};
use moq_core::data::{ObjectStatus, RangeEnd, SubgroupId};
use moq_core::message::RequestError;
use moq_core::{GroupOrder, Location};
use moq_transport::track::{
    FetchEnd, FetchWriter, Fill, IncomingFetch, Object, SubgroupSender, SubscriptionWriter,
    last_covered,
};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::cache::{DATAGRAM_SUBGROUP, Subgroup, SubgroupEnd, TrackCache};
use crate::error::Error;

/// Counters of what was served, shared by every subscription that uses them.
#[derive(Debug, Default)]
pub struct ServeStats {
    /// Objects written to subscribers.
    pub objects: AtomicU64,
    /// Payload bytes written to subscribers.
    pub bytes: AtomicU64,
    /// Subgroups dropped because a subscriber fell too far behind.
    pub dropped: AtomicU64,
    /// Payload bytes the subscriptions' subgroup streams still have to send: written to the
    /// track but not yet to the stream (see [`ServeOptions::max_backlog_bytes`]), summed over
    /// the subscriptions, now.
    pub backlog: AtomicU64,
    /// The largest backlog one subscription reached.
    pub backlog_peak: AtomicU64,
    /// Subscriptions ended with PUBLISH_DONE TOO_FAR_BEHIND because their backlog passed
    /// [`ServeOptions::max_backlog_bytes`].
    pub too_far_behind: AtomicU64,
    /// Records, for each object written, the seconds since it was received (a relay's
    /// object delivery latency), if set.
    pub delivery: Option<metrics::Histogram>,
}

/// How a subscription is served.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Send objects as datagrams instead of subgroup streams.
    pub datagrams: bool,
    /// Subgroup streams in flight for one subscriber before the oldest is reset (CANCELLED,
    /// counted in [`ServeStats::dropped`]): a slow subscriber is bounded and never stalls the
    /// others. Default 64.
    pub max_inflight: usize,
    /// Payload bytes one subscription's subgroup streams may still have to send (written to
    /// the track but not yet to the stream: a subscriber that does not read, or reads too
    /// slowly, holds them) before the subscription is ended with PUBLISH_DONE TOO_FAR_BEHIND
    /// and its streams reset with TOO_FAR_BEHIND (draft-21 §5.2, §12.4, §12.5; CANCELLED
    /// before draft-17, which has no such reset code). With [`ServeOptions::max_inflight`] it
    /// bounds what a slow subscriber pins, whatever the size of the groups. Datagrams are sent
    /// at once and do not count. Default 32 MiB ([`DEFAULT_MAX_BACKLOG_BYTES`]).
    pub max_backlog_bytes: u64,
    /// Where to count what is served, if anywhere.
    pub stats: Option<Arc<ServeStats>>,
    /// Serve the fills the subscription asks for (FILL_PARAMETERS, draft-21 §3.4) from the
    /// cache; off when the caller serves them itself (a relay, from upstream).
    pub fills: bool,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            datagrams: false,
            max_inflight: 64,
            max_backlog_bytes: DEFAULT_MAX_BACKLOG_BYTES,
            stats: None,
            fills: true,
        }
    }
}

/// The default [`ServeOptions::max_backlog_bytes`]: 32 MiB.
pub const DEFAULT_MAX_BACKLOG_BYTES: u64 = 32 * 1024 * 1024;

/// What one subscription's subgroup streams still have to send, and the signal that it passed
/// its bound.
#[derive(Debug)]
struct Backlog {
    bytes: AtomicU64,
    limit: u64,
    /// Cancelled once `bytes` passed `limit`: the subscription ends TOO_FAR_BEHIND.
    exceeded: CancellationToken,
    stats: Option<Arc<ServeStats>>,
}

impl Backlog {
    fn add(&self, n: u64) {
        let now = self.bytes.fetch_add(n, Ordering::Relaxed).saturating_add(n);
        if let Some(s) = &self.stats {
            s.backlog.fetch_add(n, Ordering::Relaxed);
            s.backlog_peak.fetch_max(now, Ordering::Relaxed);
        }
        if now > self.limit {
            self.exceeded.cancel();
        }
    }

    fn sub(&self, n: u64) {
        self.bytes.fetch_sub(n, Ordering::Relaxed);
        if let Some(s) = &self.stats {
            s.backlog.fetch_sub(n, Ordering::Relaxed);
        }
    }
}

/// One subgroup stream's share of its subscription's [`Backlog`], given back when it is
/// dropped (the stream finished, was reset, or its task was aborted).
struct Pending {
    backlog: Arc<Backlog>,
    held: u64,
}

impl Pending {
    fn add(&mut self, n: usize) {
        let n = n as u64;
        self.held += n;
        self.backlog.add(n);
    }

    fn sub(&mut self, n: usize) {
        let n = (n as u64).min(self.held);
        self.held -= n;
        self.backlog.sub(n);
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        self.backlog.sub(self.held);
    }
}

/// The order a subscription's subgroups open their streams in: the order their first objects
/// were published. The subscriber takes the streams in the order they were opened (their
/// stream IDs), so a later group's stream opened first is a later group delivered first; and
/// each subgroup is served by a task of its own, and tasks run in no particular order (on a
/// multi-threaded runtime the task spawned last often runs first).
#[derive(Debug)]
struct Openings {
    /// Where the subscription starts: objects before it are not sent.
    start: Location,
    /// The subgroups whose streams are not open yet, in the order they were handed out.
    waiting: Mutex<BTreeMap<u64, Arc<Subgroup>>>,
    /// The next key for `waiting`.
    next: AtomicU64,
    /// Notified whenever a subgroup leaves `waiting`.
    left: Notify,
}

impl Openings {
    fn new(start: Location) -> Arc<Self> {
        Arc::new(Openings {
            start,
            waiting: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(0),
            left: Notify::new(),
        })
    }

    /// Counts `sg` as waiting to open its stream, after every subgroup added before.
    fn add(self: &Arc<Self>, sg: Arc<Subgroup>) -> Opening {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.waiting.lock().insert(key, sg);
        Opening {
            openings: self.clone(),
            key,
        }
    }

    /// When the first object of `sg` to send was published, if it is here.
    fn first_ready(&self, sg: &Subgroup) -> Option<std::time::Instant> {
        let mut i = 0;
        while let Ok(o) = sg.get(i) {
            if Location::new(sg.group, o.id) >= self.start {
                return Some(o.received);
            }
            i += 1;
        }
        None
    }
}

/// One subgroup waiting to open its stream (see [`Openings`]); dropped once it opened it (or
/// will not).
struct Opening {
    openings: Arc<Openings>,
    key: u64,
}

impl Opening {
    /// Waits until no subgroup handed out before this one, its stream not open yet, has an
    /// object to send published no later than `first` (this one's first).
    async fn turn(&self, first: std::time::Instant) {
        let o = &self.openings;
        loop {
            let left = o.left.notified();
            tokio::pin!(left);
            left.as_mut().enable();
            let before = o
                .waiting
                .lock()
                .range(..self.key)
                .any(|(_, sg)| o.first_ready(sg).is_some_and(|t| t <= first));
            if !before {
                return;
            }
            left.await;
        }
    }
}

impl Drop for Opening {
    fn drop(&mut self) {
        self.openings.waiting.lock().remove(&self.key);
        self.openings.left.notify_waiters();
    }
}

/// Serves `track` on an accepted subscription until the track ends (PUBLISH_DONE
/// TRACK_ENDED), the subscription's End Group is passed, the subscriber cancels, or it falls
/// too far behind ([`ServeOptions::max_backlog_bytes`], PUBLISH_DONE TOO_FAR_BEHIND).
pub(crate) async fn serve_subscription(
    track: TrackCache,
    writer: SubscriptionWriter,
    opts: ServeOptions,
) -> Result<(), Error> {
    let _serving = track.serving(&writer);
    // draft-19 §10.7: only what is published after the subscription was established.
    let start = writer.params().first();
    let mut reader = track.reader(start.group);
    let mut inflight: VecDeque<JoinHandle<()>> = VecDeque::new();
    let openings = Openings::new(start);
    let backlog = Arc::new(Backlog {
        bytes: AtomicU64::new(0),
        limit: opts.max_backlog_bytes,
        exceeded: CancellationToken::new(),
        stats: opts.stats.clone(),
    });
    // draft-19 §10.2.18: the subscriber's NEW_GROUP_REQUEST, in SUBSCRIBE or an update.
    let mut asked = None;
    let mut new_group = |now: Option<u64>| {
        if now != asked {
            asked = now;
            if let Some(v) = now {
                track.request_new_group(v);
            }
        }
    };
    new_group(writer.params().new_group_request);
    if opts.fills
        && let Some(fill) = writer.take_fill()
    {
        let (track, writer) = (track.clone(), writer.clone());
        tokio::spawn(async move { serve_fill(track, writer, fill).await });
    }
    let status = loop {
        let next = tokio::select! {
            n = reader.next() => n,
            Ok(p) = writer.params_changed() => {
                new_group(p.new_group_request);
                continue;
            }
            fill = writer.fill_asked(), if opts.fills => {
                let (track, writer) = (track.clone(), writer.clone());
                tokio::spawn(async move { serve_fill(track, writer, fill).await });
                continue;
            }
            e = writer.cancelled() => {
                for t in inflight {
                    t.abort();
                }
                return Err(e.into());
            }
            // draft-21 §5.2: a subscriber that does not consume at a sufficient rate, making
            // the publisher exceed its resource limits, MAY be ended with TOO_FAR_BEHIND. The
            // streams reset themselves on the same signal (§12.5).
            _ = backlog.exceeded.cancelled() => {
                if let Some(s) = &opts.stats {
                    s.too_far_behind.fetch_add(1, Ordering::Relaxed);
                }
                tracing::info!(
                    track = ?track.name(),
                    limit = opts.max_backlog_bytes,
                    "subscriber too far behind; ending the subscription"
                );
                break PublishDoneCode::TOO_FAR_BEHIND;
            }
        };
        let Some(sg) = next else {
            if track.malformed().is_some() {
                // draft-19 §2.4.2: a relay terminates downstream subscriptions at once.
                for t in inflight.drain(..) {
                    t.abort();
                }
                break PublishDoneCode::MALFORMED_TRACK;
            }
            if track.is_superseded() {
                // A new incarnation of the track replaced this one: the subscriber's start
                // and what it saw belong to the old one (see `TrackCache::supersede`). The
                // old publisher's open subgroups will not be completed: their streams reset.
                for t in inflight.drain(..) {
                    t.abort();
                }
                break PublishDoneCode::GOING_AWAY;
            }
            break PublishDoneCode::TRACK_ENDED;
        };
        let params = writer.params();
        // An update that came while no select! was waiting.
        new_group(params.new_group_request);
        if params.end_group.is_some_and(|end| sg.group > end) {
            // draft-21 §3.3.1: from draft-20 a subscription does not end when the Largest
            // Object passes its filter's end.
            if writer.version().has_subscription_ended() {
                break PublishDoneCode::SUBSCRIPTION_ENDED;
            }
            continue;
        }
        if !params.forward {
            continue;
        }
        inflight.retain(|t| !t.is_finished());
        if inflight.len() >= opts.max_inflight
            && let Some(oldest) = inflight.pop_front()
        {
            // The subscriber is too far behind: drop its oldest subgroup (its stream resets).
            oldest.abort();
            if let Some(s) = &opts.stats {
                s.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        let w = writer.clone();
        let default_priority = track.default_priority();
        let datagrams = opts.datagrams || sg.id == DATAGRAM_SUBGROUP;
        let stats = opts.stats.clone();
        let backlog = backlog.clone();
        let opening = (!datagrams).then(|| openings.add(sg.clone()));
        inflight.push_back(tokio::spawn(async move {
            let exceeded = backlog.exceeded.clone();
            if datagrams {
                tokio::select! {
                    _ = send_datagrams(&w, &sg, start, stats.as_deref()) => {}
                    _ = exceeded.cancelled() => {}
                }
                return;
            }
            let mut stream = None;
            let mut pending = Pending { backlog, held: 0 };
            let send = send_subgroup(
                &w,
                &sg,
                opening,
                start,
                default_priority,
                &mut stream,
                &mut pending,
            );
            tokio::select! {
                _ = send => {}
                _ = exceeded.cancelled() => {
                    if let Some(s) = stream.as_mut() {
                        // draft-21 §12.5: TOO_FAR_BEHIND from draft-17; CANCELLED before.
                        let code = if w.version().draft() >= 17 {
                            StreamResetCode::TOO_FAR_BEHIND
                        } else {
                            StreamResetCode::CANCELLED
                        };
                        s.abort(code);
                    }
                }
            }
        }));
    };
    for t in inflight {
        let _ = t.await;
    }
    let reason = match track.malformed() {
        Some(m) => m.to_string(),
        None if status == PublishDoneCode::TOO_FAR_BEHIND => "subscriber too far behind".into(),
        None => String::new(),
    };
    Ok(writer.finish(status, &reason).await?)
}

fn count(stats: Option<&ServeStats>, bytes: usize, received: std::time::Instant) {
    if let Some(s) = stats {
        s.objects.fetch_add(1, Ordering::Relaxed);
        s.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        if let Some(h) = &s.delivery {
            h.record(received.elapsed().as_secs_f64());
        }
    }
}

/// Sends a subgroup's objects as datagrams, as they come.
async fn send_datagrams(
    writer: &SubscriptionWriter,
    sg: &Subgroup,
    start: Location,
    stats: Option<&ServeStats>,
) -> Result<(), Error> {
    let mut i = 0;
    while let Ok(o) = sg.wait(i).await {
        i += 1;
        let loc = Location::new(sg.group, o.id);
        if loc < start {
            continue;
        }
        let len = o.payload.len();
        let received = o.received;
        if writer.send_datagram_received(
            &Object {
                location: loc,
                subgroup: None,
                priority: sg.priority,
                status: o.status,
                properties: o.properties,
                payload: o.payload,
                end_of_group: o.end_of_group,
            },
            received,
        )? {
            count(stats, len, received);
        }
    }
    Ok(())
}

/// Sends a subgroup on its own stream (opened in `stream` in its turn, see [`Openings`]; the
/// caller resets it if it stops this early), counting in `pending` the payload bytes the track holds
/// that the stream has not taken yet: while an object is being written, those that follow it
/// are counted as they come.
async fn send_subgroup(
    writer: &SubscriptionWriter,
    sg: &Subgroup,
    mut opening: Option<Opening>,
    start: Location,
    default_priority: u8,
    stream: &mut Option<SubgroupSender>,
    pending: &mut Pending,
) -> Result<(), Error> {
    let id = if sg.id == 0 {
        SubgroupId::Zero
    } else {
        SubgroupId::Explicit(sg.id)
    };
    let priority = (sg.priority != default_priority).then_some(sg.priority);
    let stats = pending.backlog.stats.clone();
    // Objects 0..counted are counted in `pending` (or were skipped by the filter).
    let mut counted = 0;
    let mut i = 0;
    loop {
        let o = match sg.wait(i).await {
            Ok(o) => o,
            Err(SubgroupEnd::Finished) => {
                if let Some(s) = stream.take() {
                    s.finish();
                }
                return Ok(());
            }
            Err(_) => {
                if let Some(s) = stream {
                    s.abort(StreamResetCode::CANCELLED);
                }
                return Ok(());
            }
        };
        i += 1;
        // The stream is opened with the first object that passes the filter: a subgroup whose
        // objects are all before the start (the current group under a LargestObject filter)
        // sends nothing rather than an empty stream.
        if Location::new(sg.group, o.id) < start {
            counted = counted.max(i);
            continue;
        }
        let len = o.payload.len();
        if counted < i {
            pending.add(len);
            counted = i;
        }
        let s = match stream {
            Some(s) => s,
            None => {
                if let Some(opening) = &opening {
                    let turn = opening.turn(o.received);
                    counting_ahead(turn, sg, start, &mut counted, pending).await;
                }
                let open = writer.open_subgroup(sg.group, id, priority, sg.end_of_group);
                let mut s = counting_ahead(open, sg, start, &mut counted, pending).await?;
                // draft-19 §2.2: FIRST_OBJECT when this stream begins where the
                // subgroup began.
                s.set_first_object(sg.from_first && i == 1);
                stream.insert(s)
            }
        };
        let received = o.received;
        let write = s.write(o.id, &o.properties, o.status, o.payload, Some(received));
        let mut write = std::pin::pin!(write);
        // The stream's header (with what the flow control takes of the object) is queued in
        // the first write's first poll: the next subgroups may open their streams then.
        let written = match opening.take() {
            Some(opened) => {
                let first = futures::future::poll_immediate(write.as_mut()).await;
                drop(opened);
                first
            }
            None => None,
        };
        match written {
            Some(res) => res?,
            None => counting_ahead(write, sg, start, &mut counted, pending).await?,
        }
        pending.sub(len);
        count(stats.as_deref(), len, received);
    }
}

/// Runs `fut` (a stream being opened, or an object written: what waits for the subscriber's
/// flow control), counting in `pending` the objects from position `counted` on that the
/// subgroup gets meanwhile, those before `start` aside.
async fn counting_ahead<F: std::future::Future>(
    fut: F,
    sg: &Subgroup,
    start: Location,
    counted: &mut usize,
    pending: &mut Pending,
) -> F::Output {
    tokio::pin!(fut);
    let mut more = true;
    loop {
        tokio::select! {
            biased;
            out = &mut fut => return out,
            next = sg.wait(*counted), if more => match next {
                Ok(n) => {
                    if Location::new(sg.group, n.id) >= start {
                        pending.add(n.payload.len());
                    }
                    *counted += 1;
                }
                Err(_) => more = false,
            },
        }
    }
}

/// Answers a FETCH from `track`'s cache: cached objects in the requested order, End of Unknown
/// Range for groups already evicted (draft-19 §11.4.4.2).
///
/// Dropping the future abandons the FETCH (its stream is reset).
pub async fn serve_fetch(track: &TrackCache, fetch: IncomingFetch) -> Result<(), Error> {
    serve_fetch_marking(track, fetch, RangeEnd::Unknown).await
}

/// [`serve_fetch`] for a relay that does not wait for its upstream (FILL_TIMEOUT 0, or its
/// fill budget spent): what the cache lacks is reported as End of Timed-Out Range, sent as
/// End of Unknown Range before draft-20, which has no such marker (draft-21 §9.20.6: the relay
/// "MUST report any unavailable Objects as Timed-Out gaps"; draft-19 §10.2.5: "as Unknown
/// gaps").
///
/// Dropping the future abandons the FETCH (its stream is reset).
pub async fn serve_fetch_now(track: &TrackCache, fetch: IncomingFetch) -> Result<(), Error> {
    serve_fetch_marking(track, fetch, RangeEnd::TimedOut).await
}

/// [`serve_fetch`] with `lacking` the marker for what the cache lacks.
async fn serve_fetch_marking(
    track: &TrackCache,
    mut fetch: IncomingFetch,
    lacking: RangeEnd,
) -> Result<(), Error> {
    // draft-19 §2.4.2, §13.1.2: a track found malformed is not served on.
    if let Some(why) = track.malformed() {
        fetch.reject(RequestError::new(
            RequestErrorCode::MALFORMED_TRACK,
            why.to_string(),
        ));
        return Ok(());
    }
    let Some(largest) = track.largest() else {
        // draft-19 §10.12.3: no objects yet is INVALID_RANGE.
        fetch.reject(RequestError::new(
            RequestErrorCode::INVALID_RANGE,
            "no objects",
        ));
        return Ok(());
    };
    // draft-21 §9.20.10: a start relative to the Largest Object (from draft-20).
    fetch.resolve(Some(largest));
    let start = fetch.start();
    if start > largest {
        fetch.reject(RequestError::new(
            RequestErrorCode::INVALID_RANGE,
            "start after the largest object",
        ));
        return Ok(());
    }
    let requested_end = fetch.end();
    let end = clamp_end(requested_end, largest);
    let order = fetch.group_order();
    let beyond = end != requested_end;
    // A whole group that the cache holds ends at its last object: FETCH_OK names it (from
    // draft-20 its End Location is inclusive, and a peer may not take "the whole group").
    let end = match track.group(end.group) {
        Some(g) if end.object == 0 => g
            .final_object()
            .or_else(|| g.largest())
            .filter(|last| Location::new(end.group, *last) >= start)
            .map_or(end, |last| Location::new(end.group, last.saturating_add(1))),
        _ => end,
    };
    let end_of_track = track.is_ended() && track.malformed().is_none() && beyond;
    let w = fetch
        .accept(FetchEnd {
            end_of_track,
            end,
            track_properties: track.properties(),
        })
        .await?;
    write_range(track, w, start, requested_end, order, lacking).await
}

/// A FETCH end (the last object plus one; object 0 = the whole group) no further than just
/// after `largest`.
fn clamp_end(end: Location, largest: Location) -> Location {
    let past_largest = Location::new(largest.group, largest.object.saturating_add(1));
    let beyond =
        end.object == 0 && end.group > largest.group || end.object != 0 && end > past_largest;
    if beyond { past_largest } else { end }
}

/// Writes what the cache holds of `start` up to `req_end` (FETCH-encoded) on a fetch stream,
/// in `order`, with End of Range markers of the kind `lacking` (Unknown, or Timed-Out for a
/// relay that does not wait for its upstream) for what it lacks, then finishes the stream (or
/// resets it if the track turns out malformed). A FETCH's response and a subscription's fill
/// fetch stream (draft-21 §3.4) are both written here.
async fn write_range(
    track: &TrackCache,
    mut w: FetchWriter,
    start: Location,
    req_end: Location,
    order: GroupOrder,
    lacking: RangeEnd,
) -> Result<(), Error> {
    let Some(largest) = track.largest() else {
        w.finish();
        return Ok(());
    };
    let end = clamp_end(req_end, largest);
    let contains = |loc: Location| loc >= start && loc <= last_covered(req_end).min(largest);
    let last_group = end.group;
    let evicted = track.unknown_below();
    let mut groups: Vec<_> = track
        .groups()
        .into_iter()
        .filter(|g| g.id >= start.group.max(evicted) && g.id <= last_group)
        .collect();
    if order == GroupOrder::Descending {
        groups.reverse();
    }
    // The groups of the range announced by the publisher but not stored yet (still in flight
    // upstream) are an Unknown range: what a relay serves without waiting for its upstream
    // (draft-19 §10.2.5). A marker names another group than the entry before it, so an
    // in-flight tail of the last stored group itself is not marked.
    let top = last_covered(end).min(largest);
    let from = match track.stored() {
        Some(s) if top.group > s.group => Location::new(s.group + 1, 0),
        Some(_) => Location::new(u64::MAX, u64::MAX),
        None => start,
    };
    let from = from.max(start).max(Location::new(evicted, 0));
    let in_flight = (from <= top).then_some(from);
    if order == GroupOrder::Ascending && start.group < evicted && evicted > 0 {
        let last_unknown = Location::new(evicted - 1, u64::MAX);
        w.end_of_range(
            lacking,
            last_unknown.min(Location::new(last_group, u64::MAX)),
        )
        .await?;
    }
    if order == GroupOrder::Descending
        && let Some(from) = in_flight
    {
        w.end_of_range(lacking, from).await?;
    }
    let mut last_written_group = None;
    for g in groups {
        // draft-19 §2.4.2: a relay that finds the track malformed resets its fetch streams.
        if track.malformed().is_some() {
            w.abort(StreamResetCode::MALFORMED_TRACK);
            return Ok(());
        }
        for (sg, o) in g.objects() {
            let loc = Location::new(g.id, o.id);
            if !contains(loc) || o.status != ObjectStatus::Normal {
                continue;
            }
            w.write(&Object {
                location: loc,
                // draft-19 §11.4.4: an object that came as a datagram is marked as one (the
                // datagram flag), not given the cache's datagram Subgroup ID.
                subgroup: (sg.id != DATAGRAM_SUBGROUP).then_some(sg.id),
                priority: sg.priority,
                status: o.status,
                properties: o.properties,
                payload: o.payload,
                end_of_group: false,
            })
            .await?;
            last_written_group = Some(g.id);
        }
    }
    // In descending order the evicted groups come last; a marker must name a group below the
    // previous entry's.
    if order == GroupOrder::Descending
        && start.group < evicted
        && last_written_group.is_none_or(|g| g > start.group)
    {
        w.end_of_range(lacking, Location::new(start.group, 0))
            .await?;
    }
    if order == GroupOrder::Ascending && in_flight.is_some() {
        w.end_of_range(lacking, top).await?;
    }
    w.finish();
    Ok(())
}

/// Serves the fill fetch stream a subscription asked for (FILL_PARAMETERS, draft-21 §3.4) from
/// the cache: what it holds of the range, with End of Unknown Range markers for what it lacks.
pub async fn serve_fill(
    track: TrackCache,
    writer: SubscriptionWriter,
    fill: Fill,
) -> Result<(), Error> {
    serve_fill_marking(track, writer, fill, RangeEnd::Unknown).await
}

/// [`serve_fill`] for a relay that does not wait for its upstream (the fill's FILL_TIMEOUT is
/// 0, or its budget is spent): what the cache lacks is reported as End of Timed-Out Range
/// (draft-21 §9.20.6).
pub async fn serve_fill_now(
    track: TrackCache,
    writer: SubscriptionWriter,
    fill: Fill,
) -> Result<(), Error> {
    serve_fill_marking(track, writer, fill, RangeEnd::TimedOut).await
}

async fn serve_fill_marking(
    track: TrackCache,
    writer: SubscriptionWriter,
    fill: Fill,
    lacking: RangeEnd,
) -> Result<(), Error> {
    let w = writer.open_fill(&fill).await?;
    let end = Location::new(fill.end.group, fill.end.object.saturating_add(1));
    write_range(&track, w, fill.start, end, fill.group_order, lacking).await
}

/// How long in all a relay waits for its upstream to fill a FETCH that has no FILL_TIMEOUT
/// parameter (draft-19 §10.2.5).
pub const DEFAULT_FILL_TIMEOUT: Duration = Duration::from_secs(10);
