//! FETCH and FETCH_OK, both sides, and fetch streams (draft-19 §5.2, §10.12, §10.13, §11.4.4).

use std::sync::Arc;
use std::time::Duration;

use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::data::FetchReader;
use moq_core::message::{
    Fetch, FetchOk, FetchType, Message, OPEN_END, ParamContext, Parameters, RequestError, RequestOk,
};
use moq_core::{FullTrackName, GroupOrder, Location};

use super::incoming::{FetchDecision, Incoming, IncomingFetch};
use super::params::{answer_properties, last_covered, stream_priority};
use super::response::FetchResponse;
use super::send::{FetchEnd, FetchWriter, JoinPoint};
use super::state::{Asked, TrackState, no_such_track};
use crate::error::Error;
use crate::latch::Latch;
use crate::request::{Event, Request};
use crate::session::RequestKind;

/// What a FETCH asks for.
pub type FetchRequest = FetchType;

/// Sends FETCH and waits for FETCH_OK.
pub(crate) async fn fetch(
    tracks: &TrackState,
    request: FetchRequest,
    params: Parameters,
) -> Result<FetchResponse, Error> {
    let core = tracks.core();
    let order = params.group_order.unwrap_or(GroupOrder::Ascending);
    // The start the requester knows: a Standalone FETCH's, an Absolute Joining FETCH's group
    // (a relative start is the publisher's to resolve).
    let start = match &request {
        FetchType::Standalone { start, .. } => Some(*start),
        FetchType::AbsoluteJoining { joining_start, .. } => Some(Location::new(*joining_start, 0)),
        _ => None,
    };
    let mut req = Request::open(
        core,
        Fetch {
            request_id: 0,
            fetch_type: request,
            params,
        },
    )
    .await?;
    // The data stream may overtake FETCH_OK (one that arrived already is held for us).
    let stream = tracks.recv.expect_fetch(req.id());
    let answer = req
        .response(|m| match m {
            Message::FetchOk(ok) => Ok(ok),
            m => Err(m.name()),
        })
        .await;
    let ok = answer.inspect_err(|_| tracks.recv.forget_fetch(req.id()))?;
    // draft-19 §10.13, draft-21 §9.12: "If End Location is smaller than the Start Location in
    // the corresponding FETCH the receiver MUST close the session with a PROTOCOL_VIOLATION".
    // The model's end is exclusive (object 0: the whole group). Until draft-19 the wire's is
    // too, so an end equal to the start is not smaller; from draft-20 the wire carries the
    // last location covered, which must not be before the start.
    let before_start = |start: Location| {
        let end = ok.end_location;
        if core.version().fetch_has_type() {
            last_covered(end) < start && end != start
        } else {
            last_covered(end) < start
        }
    };
    if start.is_some_and(before_start) {
        req.cancel(StreamResetCode::CANCELLED);
        return Err(core.fail(Error::protocol(
            "FETCH_OK End Location before the FETCH's Start Location",
        )));
    }
    Ok(FetchResponse {
        end: FetchEnd {
            end_of_track: ok.end_of_track,
            end: ok.end_location,
            track_properties: ok.track_properties,
        },
        core: core.clone(),
        stream: Some(stream),
        data: None,
        reader: FetchReader::new(order, core.version()),
        pending: None,
        request: Some(req),
    })
}

fn refuse(code: RequestErrorCode, reason: &str) -> RequestError {
    RequestError::new(code, reason)
}

/// How long a Joining FETCH waits for the SUBSCRIBE it names to arrive.
const JOINING_SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// Resolves a FETCH to (track, start, end) (draft-19 §10.12.2 for joining fetches).
async fn resolve(
    tracks: &TrackState,
    msg: &Fetch,
) -> Result<(FullTrackName, Location, Location), RequestError> {
    let (joining_id, joining_start, relative) = match &msg.fetch_type {
        FetchType::Standalone { track, start, end } => {
            // draft-19 §10.12.3: End MUST be at or after Start.
            if last_covered(*end) < *start {
                return Err(refuse(RequestErrorCode::INVALID_RANGE, "end before start"));
            }
            return Ok((track.clone(), *start, *end));
        }
        // From draft-20: the start is the publisher's to resolve (IncomingFetch::resolve).
        FetchType::Relative { track, .. } => {
            return Ok((track.clone(), Location::default(), OPEN_END));
        }
        FetchType::RelativeJoining {
            joining_request_id,
            joining_start,
        } => (*joining_request_id, *joining_start, true),
        FetchType::AbsoluteJoining {
            joining_request_id,
            joining_start,
        } => (*joining_request_id, *joining_start, false),
    };
    // The SUBSCRIBE travels on its own stream and may arrive after the FETCH that joins it; a
    // Request ID below the FETCH's own that has not arrived yet is given a moment to appear.
    // One that arrived and is not in the table has ended (a finished track's SUBSCRIBE is
    // answered, then ended at once): refused now.
    let wait = if joining_id < msg.request_id && !tracks.core().peer_request_seen(joining_id) {
        JOINING_SUBSCRIBE_WAIT
    } else {
        Duration::ZERO
    };
    let Some(record) = tracks.send.join_state_within(joining_id, wait).await else {
        return Err(refuse(
            RequestErrorCode::INVALID_JOINING_REQUEST_ID,
            "no such subscription",
        ));
    };
    // A Pending subscription: wait until it is established (draft-19 §10.12.2).
    let established =
        tokio::time::timeout(Duration::from_secs(5), tracks.send.established(&record)).await;
    let JoinPoint { forward, joining } = match established {
        Ok(Some(point)) => point,
        // Its request ended first (refused, or cancelled): there is no such subscription.
        Ok(None) => {
            return Err(refuse(
                RequestErrorCode::INVALID_JOINING_REQUEST_ID,
                "the subscription ended before it was established",
            ));
        }
        Err(_) => {
            return Err(refuse(
                RequestErrorCode::TIMEOUT,
                "subscription not established",
            ));
        }
    };
    // draft-19 §10.12.2: Forward State 0, or no objects yet, is INVALID_RANGE.
    if !forward {
        return Err(refuse(
            RequestErrorCode::INVALID_RANGE,
            "the joined subscription does not forward",
        ));
    }
    let Some(joining) = joining else {
        return Err(refuse(
            RequestErrorCode::INVALID_RANGE,
            "no objects published yet",
        ));
    };
    let start_group = if relative {
        joining.group.saturating_sub(joining_start)
    } else {
        joining_start
    };
    let start = Location::new(start_group, 0);
    let end = Location::new(joining.group, joining.object.saturating_add(1));
    if start_group > joining.group {
        return Err(refuse(
            RequestErrorCode::INVALID_RANGE,
            "start after the joining location",
        ));
    }
    Ok((record.track.clone(), start, end))
}

/// Answers a FETCH: resolution and checks here, the objects from the application.
pub(crate) async fn serve_fetch(
    tracks: Arc<TrackState>,
    msg: Fetch,
    mut req: Request,
) -> Result<(), Error> {
    let core = tracks.core();
    req.take_updates(ParamContext::UpdateFetch);
    let (track, start, end) = match resolve(&tracks, &msg).await {
        Ok(r) => r,
        Err(e) => return req.refuse(e).await,
    };
    let admitted = tracks.admit(&req, RequestKind::Fetch, &track, &msg.params, None);
    if let Err(e) = admitted.await {
        return req.refuse(e).await;
    }
    let make = |decision| {
        Incoming::Fetch(IncomingFetch {
            request_id: msg.request_id,
            track,
            start,
            end,
            relative: match &msg.fetch_type {
                FetchType::Relative { filter, .. } => Some(*filter),
                _ => None,
            },
            params: msg.params.clone(),
            decision: Some(decision),
        })
    };
    let (fetch_end, reply) = match tracks.ask(&mut req, make, no_such_track(), None).await {
        Asked::Answer(FetchDecision::Accept(end, reply)) => (end, reply),
        Asked::Answer(FetchDecision::Reject(e)) | Asked::Refuse(e) => return req.refuse(e).await,
        Asked::Gone => return Ok(()),
    };
    let order = msg.params.group_order.unwrap_or(GroupOrder::Ascending);
    let mut stream = core.conn().open_uni().await?;
    let priority = msg.params.subscriber_priority.unwrap_or(128);
    stream.set_priority(stream_priority(priority, 128, order, 0, 0));
    let cancel = Latch::default();
    let fw = FetchWriter::start(
        core,
        stream,
        msg.request_id,
        order,
        msg.params.range_filters.clone(),
        Some(Arc::new(cancel.subscribe())),
    )
    .await?;
    req.send(FetchOk {
        end_of_track: fetch_end.end_of_track,
        end_location: fetch_end.end,
        params: Parameters::default(),
        track_properties: answer_properties(&msg.params, fetch_end.track_properties),
    })
    .await?;
    let _ = reply.send(Ok(fw));
    // Serve REQUEST_UPDATE (priority) and cancellation until the requester is done; one that
    // finished its half already will send nothing more (draft-19 §3.3.2).
    if req.peer_finished() {
        req.finish();
        return Ok(());
    }
    loop {
        match req.next().await {
            Event::Update(Ok(_)) => req.send(RequestOk::default()).await?,
            // draft-19 §10.9.1: a failed update resets the FETCH data stream.
            Event::Update(Err(e)) => {
                cancel.set(Error::Rejected(Box::new(e.clone())));
                req.answer_update(Err(e)).await?;
                return Ok(());
            }
            Event::Fin => {
                req.finish();
                return Ok(());
            }
            Event::Message(m) => return Err(req.unexpected(&m)),
            // draft-19 §5.2: cancelling the FETCH resets its data stream too.
            Event::Ended(e) => {
                cancel.set(e);
                return Ok(());
            }
            Event::Dropped | Event::Updated(_) => {}
        }
    }
}
