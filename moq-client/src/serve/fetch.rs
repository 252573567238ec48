//! FETCH and a subscription's fill fetch streams (draft-21 §3.4), answered from the cache.

use std::time::Duration;

use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::data::{ObjectStatus, RangeEnd};
use moq_core::message::RequestError;
use moq_core::{GroupOrder, Location};
use moq_transport::track::{
    FetchEnd, FetchWriter, Fill, IncomingFetch, Object, SubscriptionWriter, last_covered,
};

use crate::cache::{DATAGRAM_SUBGROUP, TrackCache};
use crate::error::Error;

/// Answers a FETCH from `track`'s cache: cached objects in the requested order, End of Unknown
/// Range for groups already evicted (draft-19 §11.4.4.2).
///
/// Not cancel safe: dropping the future abandons the FETCH (its stream is reset).
pub async fn serve_fetch(track: &TrackCache, fetch: IncomingFetch) -> Result<(), Error> {
    serve_fetch_marking(track, fetch, RangeEnd::Unknown).await
}

/// [`serve_fetch`] for a relay that does not wait for its upstream (FILL_TIMEOUT 0, or its
/// fill budget spent): what the cache lacks is reported as End of Timed-Out Range, sent as
/// End of Unknown Range before draft-20, which has no such marker (draft-21 §9.20.6: the relay
/// "MUST report any unavailable Objects as Timed-Out gaps"; draft-19 §10.2.5: "as Unknown
/// gaps").
///
/// Not cancel safe: dropping the future abandons the FETCH (its stream is reset).
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
///
/// Not cancel safe: dropping the future abandons the fill: its stream is reset once its
/// FETCH_HEADER is out, else the dropped [`Fill`] answers it (an End of Unknown Range).
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
///
/// Not cancel safe: dropping the future abandons the fill: its stream is reset once its
/// FETCH_HEADER is out, else the dropped [`Fill`] answers it (an End of Unknown Range).
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
