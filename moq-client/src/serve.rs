//! Serving a [`TrackCache`] to subscribers and fetchers: one future per subscription follows
//! the track and writes each subgroup on its own stream, from a future of its own that it polls
//! (no task per subgroup); FETCH is answered from the cache (`fetch`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use futures::future::{AbortHandle, Abortable, Aborted, Either};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use moq_core::codes::{PublishDoneCode, StreamResetCode};
use moq_core::data::{ObjectStatus, SubgroupId};
use moq_core::{Location, property};
use moq_transport::track::{
    Fill, Object, SubgroupSender, SubscriptionParams, SubscriptionWriter, WriterChange,
};
use parking_lot::Mutex;
use tokio::sync::Notify;

mod backlog;
mod direct;
mod fetch;
mod gate;
mod until;

pub use fetch::{DEFAULT_FILL_TIMEOUT, serve_fetch, serve_fetch_now, serve_fill, serve_fill_now};

use backlog::{Backlog, Pending};
use direct::{Back, Direct};
use gate::Gate;

use crate::cache::{
    CachedObject, DATAGRAM_SUBGROUP, Subgroup, SubgroupEnd, TrackCache, TrackReader,
};
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

/// The order a subscription's subgroups open their streams in: the order their first objects
/// were published. The subscriber takes the streams in the order they were opened (their
/// stream IDs), so a later group's stream opened first is a later group delivered first; and
/// each subgroup is served by a future of its own, and those run in no particular order.
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
///
/// Each subgroup is served by a future of its own, polled by this one (no task of its own):
/// dropping this future resets the subscription's open subgroup streams and fill streams.
///
/// Not cancel safe: dropping the future abandons the subscription's streams (reset), with no
/// PUBLISH_DONE of its own: with its writers gone, the transport ends the subscription with
/// PUBLISH_DONE TRACK_ENDED once those streams are closed.
///
/// Fills (draft-21 §3.4) are served when `opts.fills` is set: by `fill_with` if given (a
/// relay's upstream), else from the cache. Either way they run in this future and are sent
/// before PUBLISH_DONE, whose Stream Count includes them (draft-19 §10.11).
pub(crate) async fn serve_subscription(
    track: TrackCache,
    writer: SubscriptionWriter,
    opts: ServeOptions,
    fill_with: Option<FillWith>,
) -> Result<(), Error> {
    let fill = |fill: Fill| -> BoxFuture<'static, ()> {
        let (track, writer) = (track.clone(), writer.clone());
        match &fill_with {
            Some(with) => with(track, writer, fill),
            None => serve_fill(track, writer, fill).map(drop).boxed(),
        }
    };
    let _serving = track.serving(&writer);
    // draft-19 §10.7: only what is published after the subscription was established.
    let start = writer.params().first();
    let reader = track.reader(start.group);
    // The subgroups being sent, each under the number it was started with; `aborts` holds
    // their abort handles in that order (the oldest first). Boxed: a `FuturesUnordered`
    // allocates a stub task the size of its future type when it is created, so an idle
    // subscription would otherwise hold a whole subgroup's sending state.
    let mut inflight: LazySet<BoxFuture<'static, Result<u64, Aborted>>> = LazySet::default();
    let mut aborts: BTreeMap<u64, AbortHandle> = BTreeMap::new();
    let mut started = 0u64;
    let mut fills = LazySet::default();
    // Made with the first subgroup sent on a stream: an idle subscription holds none.
    let mut openings: Option<Arc<Openings>> = None;
    let backlog = Backlog::new(opts.max_backlog_bytes, opts.stats.clone());
    // Objects are batched into one write only where no delivery timeout can apply (see
    // `send_subgroup`); the track's own OBJECT_DELIVERY_TIMEOUT is one.
    let track_timed = track
        .properties()
        .get_int(property::OBJECT_DELIVERY_TIMEOUT)
        .is_some();
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
        && let Some(asked) = writer.take_fill()
    {
        fills.push(fill(asked));
    }
    // What the loop waits for besides its subgroups (see `Watch`).
    let mut watch = Watch {
        reader,
        writer: writer.clone(),
        backlog: backlog.clone(),
        fills: opts.fills,
        gate: Gate::new(),
    };
    let status = loop {
        let next = tokio::select! {
            event = std::future::poll_fn(|cx| watch.poll_next(cx)) => match event {
                Control::Next(next) => next,
                Control::Params(p) => {
                    new_group(p.new_group_request);
                    continue;
                }
                Control::Fill(asked) => {
                    fills.push(fill(asked));
                    continue;
                }
                // Dropping the subgroups' futures resets their streams.
                Control::Cancelled(e) => return Err(e.into()),
                // draft-21 §5.2: a subscriber that does not consume at a sufficient rate,
                // making the publisher exceed its resource limits, MAY be ended with
                // TOO_FAR_BEHIND. The streams reset themselves on the same signal (§12.5).
                Control::Exceeded => {
                    if let Some(s) = &opts.stats {
                        s.too_far_behind.fetch_add(1, Ordering::Relaxed);
                    }
                    tracing::info!(
                        track = ?track.name(),
                        limit = opts.max_backlog_bytes,
                        "subscriber too far behind; ending the subscription"
                    );
                    fills.clear();
                    break PublishDoneCode::TOO_FAR_BEHIND;
                }
            },
            Some(done) = inflight.next(), if !inflight.is_empty() => {
                if let Ok(n) = done {
                    aborts.remove(&n);
                }
                continue;
            }
            Some(_) = fills.next(), if !fills.is_empty() => continue,
        };
        let Some(sg) = next else {
            if track.malformed().is_some() {
                // draft-19 §2.4.2: a relay terminates downstream subscriptions at once.
                inflight.clear();
                break PublishDoneCode::MALFORMED_TRACK;
            }
            if track.is_superseded() {
                // A new incarnation of the track replaced this one: the subscriber's start
                // and what it saw belong to the old one (see `TrackCache::supersede`). The
                // old publisher's open subgroups will not be completed: their streams reset.
                inflight.clear();
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
        // Subgroups that ended meanwhile do not count.
        while let Some(Some(done)) = inflight.next().now_or_never() {
            if let Ok(n) = done {
                aborts.remove(&n);
            }
        }
        if aborts.len() >= opts.max_inflight
            && let Some((_, oldest)) = aborts.pop_first()
        {
            // The subscriber is too far behind: drop its oldest subgroup (its stream resets
            // when the set next polls it).
            oldest.abort();
            if let Some(s) = &opts.stats {
                s.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        let datagrams = opts.datagrams || sg.id == DATAGRAM_SUBGROUP;
        let serve = Serve {
            writer: writer.clone(),
            opening: (!datagrams).then(|| {
                openings
                    .get_or_insert_with(|| Openings::new(start))
                    .add(sg.clone())
            }),
            sg,
            start,
            default_priority: track.default_priority(),
            track_timed,
            backlog: backlog.clone(),
        };
        let (abort, registration) = AbortHandle::new_pair();
        aborts.insert(started, abort);
        let n = started;
        inflight.push(
            Abortable::new(serve.run(datagrams), registration)
                .map(move |r| r.map(|()| n))
                .boxed(),
        );
        started += 1;
    };
    // The ending is boxed: inline, its waits sized the state the subscription is served in
    // for its whole life.
    Box::pin(async {
        // The rest of the open subgroups (and fills) are sent before PUBLISH_DONE, unless the
        // subscriber goes meanwhile.
        let rest = async {
            while inflight.next().await.is_some() {}
            while fills.next().await.is_some() {}
        };
        tokio::select! {
            _ = rest => {}
            e = writer.cancelled() => return Err(e.into()),
        }
        let reason = match track.malformed() {
            Some(m) => m.to_string(),
            None if status == PublishDoneCode::TOO_FAR_BEHIND => "subscriber too far behind".into(),
            None => String::new(),
        };
        Ok(writer.finish(status, &reason).await?)
    })
    .await
}

/// A `FuturesUnordered` made at its first push: even empty, one holds a node the size of its
/// future type and its queue, which an idle subscription would keep for nothing.
struct LazySet<F>(Option<FuturesUnordered<F>>);

impl<F> Default for LazySet<F> {
    fn default() -> Self {
        LazySet(None)
    }
}

impl<F> LazySet<F> {
    fn push(&mut self, f: F) {
        self.0.get_or_insert_with(FuturesUnordered::new).push(f);
    }

    fn is_empty(&self) -> bool {
        self.0.as_ref().is_none_or(FuturesUnordered::is_empty)
    }

    fn clear(&mut self) {
        if let Some(s) = &mut self.0 {
            s.clear();
        }
    }
}

impl<F: std::future::Future> futures::Stream for LazySet<F> {
    type Item = F::Output;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<F::Output>> {
        match &mut self.0 {
            Some(s) => s.poll_next_unpin(cx),
            None => std::task::Poll::Ready(None),
        }
    }
}

/// How a subscription's fills are served when not from the cache alone (a relay's upstream,
/// [`crate::directory::Upstream::fill`]).
pub(crate) type FillWith =
    Arc<dyn Fn(TrackCache, SubscriptionWriter, Fill) -> BoxFuture<'static, ()> + Send + Sync>;

/// What a subscription's serving loop waits for besides its subgroups' progress, polled by
/// one poll function behind a [`Gate`], so that a wake-up for an object polls that subgroup
/// alone and not these waits (each locks a mutex when polled). Held inline in the loop's
/// state: no boxed future of its own (~500 bytes per subscription), and no `Notified` kept
/// between polls (the reader, the writer and the backlog each keep the task's waker).
struct Watch {
    reader: TrackReader,
    writer: SubscriptionWriter,
    /// Its end once it passed its bound.
    backlog: Arc<Backlog>,
    /// Whether fills the subscriber asks for are served.
    fills: bool,
    gate: Gate,
}

/// One event [`Watch`] saw.
enum Control {
    /// The track's next subgroup (`None`: it ended).
    Next(Option<Arc<Subgroup>>),
    /// The subscriber changed the subscription's parameters.
    Params(SubscriptionParams),
    /// The subscriber asked for a fill (draft-20 and later).
    Fill(Fill),
    /// The subscription was cancelled or its session ended.
    Cancelled(moq_transport::Error),
    /// The subscription's backlog passed its bound.
    Exceeded,
}

impl Watch {
    /// The next event: a change of the subscription (its cancellation first), its backlog
    /// passing its bound, or the track's next subgroup.
    ///
    /// Cancel safe: an event is taken only when it is returned.
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Control> {
        let Watch {
            reader,
            writer,
            backlog,
            fills,
            gate,
        } = self;
        gate.poll(cx, |cx| {
            if let Poll::Ready(c) = writer.poll_changed(cx, *fills) {
                return Poll::Ready(match c {
                    WriterChange::Params(p) => Control::Params(p),
                    WriterChange::Fill(f) => Control::Fill(f),
                    WriterChange::Cancelled(e) => Control::Cancelled(e),
                });
            }
            if backlog.poll_exceeded(cx).is_ready() {
                return Poll::Ready(Control::Exceeded);
            }
            reader.poll_next(cx).map(Control::Next)
        })
    }
}

/// One subgroup of a subscription to send.
struct Serve {
    writer: SubscriptionWriter,
    sg: Arc<Subgroup>,
    opening: Option<Opening>,
    start: Location,
    default_priority: u8,
    /// Whether the track carries an OBJECT_DELIVERY_TIMEOUT.
    track_timed: bool,
    backlog: Arc<Backlog>,
}

impl Serve {
    /// Sends the subgroup as datagrams or on its stream, until it ends or the subscription's
    /// backlog passes its bound (the stream is then reset, draft-21 §12.5).
    async fn run(mut self, datagrams: bool) {
        let opening = self.opening.take();
        let Serve {
            writer: w,
            sg,
            backlog,
            ..
        } = &self;
        if datagrams {
            let send = send_datagrams(w, sg, self.start, backlog.stats.as_deref());
            until::until_cancelled(send, backlog).await;
            return;
        }
        let mut stream = None;
        let mut pending = Pending::new(backlog.clone());
        let mut direct = None;
        let send = send_subgroup(&self, opening, &mut stream, &mut pending, &mut direct);
        let sent = until::until_cancelled(send, backlog).await;
        // Stopped while the appender held the stream: it is still there.
        let mut stream = stream.or_else(|| direct.as_ref().and_then(|d| d.take()));
        if sent.is_none()
            && let Some(s) = stream.as_mut()
        {
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
/// are counted as they come. Objects already in the cache when one is written go out with it
/// in one write; one that comes alone is written at once. Once the stream is open and its
/// first write done, the stream is handed to the subgroup's appender ([`Direct`], made then in
/// `direct`) until it needs this future again.
async fn send_subgroup(
    serve: &Serve,
    mut opening: Option<Opening>,
    stream: &mut Option<SubgroupSender>,
    pending: &mut Pending,
    direct: &mut Option<Arc<Direct>>,
) -> Result<(), Error> {
    let Serve {
        writer, sg, start, ..
    } = serve;
    let start = *start;
    let id = if sg.id == 0 {
        SubgroupId::Zero
    } else {
        SubgroupId::Explicit(sg.id)
    };
    let priority = (sg.priority != serve.default_priority).then_some(sg.priority);
    let stats = pending.backlog().stats.clone();
    // Objects 0..counted are counted in `pending` (or were skipped by the filter).
    let mut counted = 0;
    let mut i = 0;
    // Whether an object of the stream carried an OBJECT_DELIVERY_TIMEOUT (the first one sent
    // sets the stream's).
    let mut first_timed = false;
    let mut batch = Vec::new();
    loop {
        // A subgroup that ended already is finished here: no follower is made for it (with
        // a stream per object, the common case).
        if stream.is_some() && sg.state() == SubgroupEnd::Open {
            let direct = direct.get_or_insert_with(|| Direct::new(stats.clone()));
            match direct.follow(sg, stream, &mut i).await {
                Back::Resume => {}
                Back::Failed(e) => return Err(e),
                Back::Blocked(len, received) => {
                    counted = counted.max(i);
                    pending.add(len);
                    if let Some(s) = stream.as_mut() {
                        counting_ahead(s.flush(), sg, start, &mut counted, pending).await?;
                    }
                    pending.sub(len);
                    count(stats.as_deref(), len, received);
                    continue;
                }
            }
            counted = counted.max(i);
        }
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
        first_timed |= timed(&o.properties);
        // The objects that follow, already here, go in the same write: plain ones only, and
        // only where no delivery timeout can apply (`write_objects` checks none, draft-19 §8).
        batch.clear();
        if plain(&o)
            && let Ok(next) = sg.get(i)
            && plain(&next)
            && !serve.track_timed
            && !first_timed
            && writer.params().object_delivery_timeout.is_none()
        {
            let mut next = Ok(next);
            let mut bytes = len;
            while let Ok(n) = next
                && plain(&n)
                && batch.len() < MAX_BATCH
                && bytes + n.payload.len() <= MAX_BATCH_BYTES
                && !pending.backlog().is_over()
            {
                bytes += n.payload.len();
                i += 1;
                if counted < i {
                    pending.add(n.payload.len());
                    counted = i;
                }
                batch.push(n);
                next = sg.get(i);
            }
        }
        let received = o.received;
        {
            let write = if batch.is_empty() {
                Either::Left(s.write(o.id, &o.properties, o.status, o.payload, Some(received)))
            } else {
                let more = batch.iter().map(|n| (n.id, n.payload.clone()));
                Either::Right(s.write_objects(std::iter::once((o.id, o.payload)).chain(more)))
            };
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
        }
        pending.sub(len);
        count(stats.as_deref(), len, received);
        for n in batch.drain(..) {
            pending.sub(n.payload.len());
            count(stats.as_deref(), n.payload.len(), n.received);
        }
    }
}

/// The most objects written at once.
const MAX_BATCH: usize = 64;

/// The most payload bytes written at once: batching saves a write's fixed cost, which matters
/// for small objects; a batch's bytes count in the backlog until all of it is written.
const MAX_BATCH_BYTES: usize = 64 << 10;

/// Whether `o` may be written with others in one write: a Normal object without properties.
fn plain(o: &CachedObject) -> bool {
    o.status == ObjectStatus::Normal && o.properties.is_empty()
}

/// Whether `p` carries an OBJECT_DELIVERY_TIMEOUT.
fn timed(p: &moq_core::Properties) -> bool {
    p.get_int(property::OBJECT_DELIVERY_TIMEOUT).is_some()
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
