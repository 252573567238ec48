//! How the relay answers what its directory does not hold: SUBSCRIBE through the routes (one
//! upstream subscription per track and publisher), FETCH and fills from the cache or one
//! publisher, TRACK_STATUS likewise.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use moq_client::model::{
    DEFAULT_FILL_TIMEOUT, Hold, Source, TrackCache, TrackCheck, Upstream, serve_fetch,
    serve_fetch_now, serve_fill, serve_fill_now,
};
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::data::RangeEnd;
use moq_core::message::{FetchType, Parameters, RequestError};
use moq_core::{FullTrackName, GroupOrder, Location, Properties};
use moq_transport::Error;
use moq_transport::track::{
    FetchEnd, FetchItem, FetchResponse, FetchWriter, Fill, IncomingFetch, SubscriptionWriter,
    TrackStatusInfo, last_covered,
};

use super::lifecycle::Downstream;
use super::state::Inner;
use super::track::RelayTrack;

/// The relay's side of its directory: SUBSCRIBE goes to the routes (one upstream subscription
/// per track and publisher), FETCH to the cache or one publisher, TRACK_STATUS likewise.
pub(super) struct RelayUpstream(Weak<Inner>);

impl RelayUpstream {
    /// The side of the relay behind `inner`, which it does not keep alive.
    pub(super) fn new(inner: Weak<Inner>) -> Self {
        RelayUpstream(inner)
    }

    fn inner(&self) -> Result<Arc<Inner>, RequestError> {
        self.0
            .upgrade()
            .ok_or_else(|| RequestError::new(RequestErrorCode::GOING_AWAY, "relay shutting down"))
    }
}

#[async_trait]
impl Upstream for RelayUpstream {
    async fn fill(&self, track: TrackCache, writer: SubscriptionWriter, fill: Fill) {
        match self.inner() {
            Ok(inner) => fill_from_upstream_or_cache(inner, track, writer, fill).await,
            Err(_) => {
                let _ = serve_fill(track, writer, fill).await;
            }
        }
    }

    async fn subscribe(
        &self,
        peer: u64,
        name: &FullTrackName,
        params: &Parameters,
    ) -> Result<Source, RequestError> {
        let inner = self.inner()?;
        inner
            .route_from_registry(&name.namespace, Some(peer))
            .await?;
        let rendezvous = params
            .rendezvous_timeout
            .filter(|t| *t > 0)
            .map(|t| Duration::from_millis(t).min(inner.config.max_rendezvous));
        // A track whose publisher ended it, with no publisher for it now: SUBSCRIBE_OK with
        // its final Largest Location, then PUBLISH_DONE TRACK_ENDED ("the track is no longer
        // being published", draft-19 §10.11); its past stays fetchable. A SUBSCRIBE with a
        // RENDEZVOUS_TIMEOUT waits for a new publisher instead (draft-19 §10.2.4).
        let finished = || inner.finished_track(name).map(Source::now);
        if rendezvous.is_none()
            && inner.routes_for(&name.namespace).is_empty()
            && let Some(source) = finished()
        {
            return Ok(source);
        }
        let track = inner.get_or_create_track(name, rendezvous, params.new_group_request);
        let guard = Downstream::new(&inner, &track);
        let standing = match inner.wait_answer(&track, rendezvous).await {
            Ok(s) => s,
            // The publisher no longer has it either.
            Err(e) if e.code == RequestErrorCode::DOES_NOT_EXIST => {
                return finished().ok_or(e);
            }
            Err(e) => return Err(e),
        };
        Ok(Source {
            track: track.cache.clone(),
            hold: Box::new(guard),
            largest: standing.largest,
            held: standing.held,
        })
    }

    async fn fetch(&self, peer: u64, f: IncomingFetch, _held: Option<TrackCache>) {
        let Ok(inner) = self.inner() else { return };
        on_fetch(inner, peer, f).await;
    }

    async fn track_status(
        &self,
        peer: u64,
        name: &FullTrackName,
        _held: Option<TrackCache>,
    ) -> Result<TrackStatusInfo, RequestError> {
        let inner = self.inner()?;
        inner
            .route_from_registry(&name.namespace, Some(peer))
            .await?;
        track_status(&inner, name).await
    }

    fn forwarding(&self, track: &TrackCache) -> Hold {
        let Ok(inner) = self.inner() else {
            return Box::new(());
        };
        let relay_track = inner.tracks.lock().get(track.name()).cloned();
        match relay_track {
            Some(t) if t.cache.same(track) => Box::new(Downstream::new(&inner, &t)),
            _ => Box::new(()),
        }
    }
}

/// FETCH: from the cache when it holds the whole range, else from one publisher.
async fn on_fetch(inner: Arc<Inner>, peer: u64, f: IncomingFetch) {
    let name = f.track().clone();
    if let Err(e) = inner.route_from_registry(&name.namespace, Some(peer)).await {
        f.reject(e);
        return;
    }
    let cached = inner.tracks.lock().get(&name).cloned();
    let mut budget = fill_budget(f.params().fill_timeout);
    // A track whose publisher ended it is served from its cache while that holds objects
    // (what it no longer holds is an Unknown range), unless a publisher has it again.
    if let Some(done) = inner.finished_track(&name)
        && (done.covers(f.start(), f.end()) || inner.routes_for(&name.namespace).is_empty())
    {
        inner.metrics.fetch(true);
        let _ = serve_fetch(&done, f).await;
        return;
    }
    // From the cache if it holds the whole range, or if the subscriber wants only what is
    // available now (FILL_TIMEOUT 0: no upstream FETCH, what is missing is a Timed-Out range);
    // objects the upstream announced but that are still in flight are fetched upstream
    // otherwise.
    if let Some(t) = &cached
        && (t.cache.malformed().is_some() || t.cache.covers(f.start(), f.end()))
    {
        inner.metrics.fetch(true);
        let _ = serve_fetch(&t.cache, f).await;
        return;
    }
    if budget.is_zero() && cached.is_some() {
        return available_now(cached.as_ref(), f).await;
    }
    // Not (entirely) cached: fill from one upstream publisher (draft-19 §9.5).
    let Some(route) = inner.fetch_route(&name) else {
        return f.reject(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "no publisher for this track",
        ));
    };
    if budget.is_zero() {
        return available_now(None, f).await;
    }
    inner.metrics.fetch(false);
    // A start relative to the Largest Object stays relative upstream (draft-21 §9.20.10).
    let request = f.request();
    let params = Parameters {
        group_order: Some(f.group_order()),
        ..Default::default()
    };
    // draft-19 §10.2.5: the budget is the total time spent waiting for the upstream; once it
    // is spent, what is available now is served and the rest is a Timed-Out range (Unknown
    // before draft-20).
    let asked = Instant::now();
    let answer = tokio::time::timeout(budget, route.session.fetch(request, params)).await;
    budget = budget.saturating_sub(asked.elapsed());
    let upstream = match answer {
        Ok(Ok(r)) => r,
        Ok(Err(Error::Rejected(e))) => return f.reject(*e),
        Ok(Err(e)) => {
            return f.reject(RequestError::new(
                RequestErrorCode::INTERNAL_ERROR,
                e.to_string(),
            ));
        }
        Err(_) => return available_now(cached.as_ref(), f).await,
    };
    let (start, order) = (f.start(), f.group_order());
    let end = upstream.end().end;
    let Ok(w) = f.accept(upstream.end().clone()).await else {
        return;
    };
    pipe(upstream, w, budget, start, end, order).await;
}

/// Copies an upstream fetch response onto a fetch stream (a FETCH's, or a fill's) within
/// `budget` of waiting on the upstream: once it is spent, the rest of `start`..`end` is an End of
/// Timed-Out Range (draft-21 §9.20.6); a malformed track resets the stream with
/// MALFORMED_TRACK (draft-19 §2.4.2), and dropping the upstream response cancels it.
async fn pipe(
    mut upstream: FetchResponse,
    mut w: FetchWriter,
    mut budget: Duration,
    start: Location,
    end: Location,
    order: GroupOrder,
) {
    let check = TrackCheck::new();
    loop {
        let waiting = Instant::now();
        let item = tokio::time::timeout(budget, upstream.next()).await;
        budget = budget.saturating_sub(waiting.elapsed());
        let res = match item {
            Ok(None) => break,
            Ok(Some(Ok(FetchItem::Object(o)))) => {
                if check.object(o.subgroup, &o).is_err() {
                    w.abort(StreamResetCode::MALFORMED_TRACK);
                    return;
                }
                w.write(&o).await
            }
            Ok(Some(Ok(FetchItem::EndOfRange { kind, location }))) => {
                w.end_of_range(kind, location).await
            }
            Ok(Some(Err(_))) => {
                w.abort(StreamResetCode::INTERNAL_ERROR);
                return;
            }
            Err(_) => {
                // The budget is spent: the rest of the range is unknown (a marker that cannot
                // name another group than the last entry's is left out).
                let _ = w
                    .end_of_range(RangeEnd::TimedOut, unknown_end(start, end, order))
                    .await;
                break;
            }
        };
        if res.is_err() {
            return;
        }
    }
    w.finish();
}

/// A fill a downstream subscriber asked for (FILL_PARAMETERS, draft-21 §3.4): from the cache if
/// it holds the range, else by an upstream FETCH of it (§9.11: a relay MUST ask upstream for
/// objects of unknown status) within the fill's budget; without a publisher, from the cache.
async fn fill_from_upstream_or_cache(
    inner: Arc<Inner>,
    track: TrackCache,
    writer: SubscriptionWriter,
    fill: Fill,
) {
    let end = Location::new(fill.end.group, fill.end.object.saturating_add(1));
    let route = inner.fetch_route(track.name());
    let (Some(route), false) = (route, track.covers(fill.start, end)) else {
        inner.metrics.fetch(true);
        let _ = serve_fill(track, writer, fill).await;
        return;
    };
    let budget = fill_budget(fill.fill_timeout);
    // draft-21 §9.20.6: FILL_TIMEOUT 0 "MUST NOT wait for upstream delivery and MUST report
    // any unavailable Objects as Timed-Out gaps".
    if budget.is_zero() {
        inner.metrics.fetch(true);
        let _ = serve_fill_now(track, writer, fill).await;
        return;
    }
    inner.metrics.fetch(false);
    let request = FetchType::Standalone {
        track: track.name().clone(),
        start: fill.start,
        end,
    };
    let params = Parameters {
        group_order: Some(fill.group_order),
        ..Default::default()
    };
    let asked = Instant::now();
    let answer = tokio::time::timeout(budget, route.session.fetch(request, params)).await;
    let upstream = match answer {
        Ok(Ok(upstream)) => upstream,
        // draft-21 §9.20.6: the budget is spent: what the cache holds, the rest Timed-Out.
        Err(_) => {
            let _ = serve_fill_now(track, writer, fill).await;
            return;
        }
        // draft-21 §3.4.1: a fill that cannot be served is opened and reset.
        Ok(Err(_)) => {
            if let Ok(w) = writer.open_fill(&fill).await {
                w.abort(StreamResetCode::INTERNAL_ERROR);
            }
            return;
        }
    };
    let Ok(w) = writer.open_fill(&fill).await else {
        return;
    };
    let budget = budget.saturating_sub(asked.elapsed());
    pipe(upstream, w, budget, fill.start, end, fill.group_order).await;
}

/// The longest a FETCH waits for upstream fills, whatever its FILL_TIMEOUT asks (draft-19
/// §10.2.5 lets a relay use a shorter time without saying so).
const MAX_FILL_TIMEOUT: Duration = Duration::from_secs(30);

/// A FETCH's or a fill's budget for waiting on upstream (draft-19 §10.2.5): its FILL_TIMEOUT
/// (ms), at most [`MAX_FILL_TIMEOUT`], or [`DEFAULT_FILL_TIMEOUT`] without one.
fn fill_budget(fill_timeout: Option<u64>) -> Duration {
    fill_timeout
        .map_or(DEFAULT_FILL_TIMEOUT, Duration::from_millis)
        .min(MAX_FILL_TIMEOUT)
}

/// Where an End of Range marker covering the rest of a range goes: its last location in
/// ascending order, its first in descending order.
fn unknown_end(start: Location, end: Location, order: GroupOrder) -> Location {
    match order {
        GroupOrder::Descending => start,
        _ => last_covered(end),
    }
}

/// Answers a FETCH with what the relay holds now, without asking upstream (FILL_TIMEOUT 0, or
/// a budget spent before the upstream answered): from the cache, what it misses as Timed-Out
/// ranges (draft-21 §9.20.6; Unknown before draft-20, draft-19 §10.2.5); with nothing cached,
/// the whole range.
async fn available_now(cached: Option<&Arc<RelayTrack>>, f: IncomingFetch) {
    if let Some(t) = cached
        && t.cache.largest().is_some()
    {
        let _ = serve_fetch_now(&t.cache, f).await;
        return;
    }
    let (start, end, order) = (f.start(), f.end(), f.group_order());
    let ok = FetchEnd {
        end_of_track: false,
        end,
        track_properties: Properties::default(),
    };
    let Ok(mut w) = f.accept(ok).await else {
        return;
    };
    if w.end_of_range(RangeEnd::TimedOut, unknown_end(start, end, order))
        .await
        .is_ok()
    {
        w.finish();
    }
}

/// TRACK_STATUS: from the track when its upstream answered, else from one publisher.
async fn track_status(
    inner: &Arc<Inner>,
    name: &FullTrackName,
) -> Result<TrackStatusInfo, RequestError> {
    let cached = inner.tracks.lock().get(name).cloned();
    if let Some(rt) = cached
        && matches!(*rt.answer.borrow(), Some(Ok(_)))
    {
        return Ok(rt.cache.status());
    }
    let finished = inner.finished_track(name);
    let Some(route) = inner.fetch_route(name) else {
        if let Some(done) = finished {
            return Ok(done.status());
        }
        return Err(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "no publisher for this track",
        ));
    };
    match route
        .session
        .track_status(name.clone(), Parameters::default())
        .await
    {
        Ok(info) => Ok(info),
        Err(Error::Rejected(e)) => Err(*e),
        Err(e) => Err(RequestError::new(
            RequestErrorCode::INTERNAL_ERROR,
            e.to_string(),
        )),
    }
}
