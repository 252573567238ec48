//! SUBSCRIBE and SUBSCRIBE_OK, both sides (draft-19 §5.1, §10.7, §10.8).

use std::sync::Arc;

use moq_core::FullTrackName;
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::{Message, Parameters, RequestError, Subscribe, SubscribeOk};

use super::incoming::{Incoming, IncomingSubscribe, SubscribeDecision};
use super::params::{SubscriptionParams, answer_properties, millis, ms};
use super::response::FetchResponse;
use super::send::{Fill, JoinGuard, JoinPoint};
use super::state::{Asked, TrackState, no_such_track};
use super::subscription::{PublisherTask, Subscription, SubscriptionInfo, new_subscription};
use crate::error::Error;
use crate::request::Request;
use crate::session::RequestKind;

/// Sends SUBSCRIBE and waits for SUBSCRIBE_OK.
pub(crate) async fn subscribe(
    tracks: &TrackState,
    track: FullTrackName,
    params: Parameters,
) -> Result<Subscription, Error> {
    let core = tracks.core();
    let mut req = Request::open(
        core,
        Subscribe {
            request_id: 0,
            track: track.clone(),
            params: params.clone(),
        },
    )
    .await?;
    let ok = req
        .response(|m| match m {
            Message::SubscribeOk(ok) => Ok(ok),
            m => Err(m.name()),
        })
        .await?;
    if let Err(e) = ok.track_properties.validate_track() {
        req.cancel(StreamResetCode::CANCELLED);
        return Err(core.fail(e.into()));
    }
    // draft-19 §2.5.1: a Mandatory Track Property we do not understand: cancel.
    if ok.track_properties.unknown_mandatory(&[]).is_some() {
        req.cancel(StreamResetCode::CANCELLED);
        return Err(Error::Rejected(Box::new(RequestError::new(
            RequestErrorCode::UNSUPPORTED_EXTENSION,
            "the track has a mandatory property we do not understand",
        ))));
    }
    let info = SubscriptionInfo {
        track,
        track_alias: ok.track_alias,
        largest: ok.params.largest_object,
        expires: ms(ok.params.expires),
        track_properties: ok.track_properties,
    };
    let order = info.group_order();
    let props = info.track_properties.clone();
    let (mut sub, task) = new_subscription(&tracks.recv, &mut req, info, &params)?;
    // draft-21 §3.4: the fill fetch stream FILL_PARAMETERS asked for, unless its range is
    // empty or Forward State is 0 (then the publisher opens none).
    if let Some(fill) = params
        .fill
        .as_deref()
        .filter(|_| params.forward != Some(false))
        && let Some(f) = Fill::new(req.id(), fill, &params, ok.params.largest_object, order)
    {
        let stream = tracks.recv.expect_fetch(req.id());
        let response = FetchResponse::fill(core, stream, f.end, f.group_order, props);
        sub.set_fill(response);
        task.count_fill();
    }
    core.serve(async move { task.run(&mut req).await });
    Ok(sub)
}

/// Answers a SUBSCRIBE: validation and authorization here, the decision by the application;
/// then serves the subscription until it ends.
///
/// The SUBSCRIBE is recorded for Joining FETCH here, as the driver hands it over (in the same
/// step as its Request ID is marked seen), not when its future first runs: a FETCH that names
/// it, read meanwhile on its own stream (a browser sends the two together), finds it and waits
/// for it (draft-19 §10.12.2) instead of being refused INVALID_JOINING_REQUEST_ID.
///
/// The message and the request come boxed, and the answering is boxed too and freed once done
/// (the message with it): inline, its largest step sized the state the subscription waits in for
/// its whole life, and an `async fn` keeps its arguments that long.
pub(crate) fn serve_subscribe(
    tracks: Arc<TrackState>,
    msg: Box<Subscribe>,
    req: Box<Request>,
) -> impl Future<Output = Result<(), Error>> + Send + 'static {
    let join = tracks.send.track_arrived(msg.request_id, msg.track.clone());
    // Made now, so the serving future keeps a box and not the message, request and record.
    let answer = Box::pin(answer_subscribe(tracks, msg, req, join));
    async move {
        let Some(Established {
            mut req,
            publisher,
            join,
        }) = answer.await?
        else {
            return Ok(());
        };
        let res = publisher.run(&mut req, Some(&join)).await;
        drop(join);
        res
    }
}

/// A SUBSCRIBE answered with SUBSCRIBE_OK, to serve.
struct Established {
    req: Box<Request>,
    publisher: PublisherTask,
    /// What a Joining FETCH reads, in the session's table while the subscription lives.
    join: JoinGuard,
}

/// Checks and answers a SUBSCRIBE recorded as `join`; `None` if it was refused (or its
/// decision-maker went away).
async fn answer_subscribe(
    tracks: Arc<TrackState>,
    msg: Box<Subscribe>,
    mut req: Box<Request>,
    join: JoinGuard,
) -> Result<Option<Established>, Error> {
    let core = tracks.core();
    let id = msg.request_id;
    let track = msg.track.clone();
    // The one-time steps are boxed as well (admission, the application's decision): inline,
    // the largest would size the whole answering's state.
    let admitted = Box::pin(tracks.admit(&req, RequestKind::Subscribe, &track, &msg.params, None));
    if let Err(e) = admitted.await {
        return Box::pin((*req).refuse(e)).await.map(|()| None);
    }
    // draft-18 §5.1: at most one subscription per track and role in a session; a second
    // SUBSCRIBE fails with DUPLICATE_SUBSCRIPTION (draft-19 allows several).
    if !tracks.send.admit(&join) {
        return Box::pin((*req).refuse(RequestError::new(
            RequestErrorCode::DUPLICATE_SUBSCRIPTION,
            "this session already subscribes to the track",
        )))
        .await
        .map(|()| None);
    }
    let make = |decision| {
        Incoming::Subscribe(IncomingSubscribe {
            request_id: id,
            track: track.clone(),
            params: msg.params.clone(),
            decision: Some(decision),
        })
    };
    let (response, reply) = match Box::pin(tracks.ask(&mut req, make, no_such_track(), None)).await
    {
        Asked::Answer(SubscribeDecision::Accept(r, reply)) => (r, reply),
        Asked::Answer(SubscribeDecision::Reject(e)) | Asked::Refuse(e) => {
            return Box::pin((*req).refuse(e)).await.map(|()| None);
        }
        Asked::Gone => return Ok(None),
    };
    let alias = response
        .track_alias
        .unwrap_or_else(|| tracks.send.next_track_alias());
    let params = SubscriptionParams::from_request(&msg.params, response.largest);
    let forward = params.forward;
    let track_properties = answer_properties(&msg.params, response.track_properties.clone());
    let ok = SubscribeOk {
        track_alias: alias,
        params: Parameters {
            largest_object: response.largest,
            expires: response.expires.map(millis),
            ..Default::default()
        },
        track_properties,
    };
    if let Err(e) = Box::pin(req.send(ok)).await {
        let _ = reply.send(Err(e.clone()));
        return Err(e);
    }
    join.establish(JoinPoint {
        forward,
        joining: response.largest.filter(|_| forward),
    });
    let publisher = PublisherTask::new(
        core,
        id,
        alias,
        track,
        &response.track_properties,
        params,
        response.largest,
    );
    // draft-21 §3.4.1: FILL_PARAMETERS opens a fill fetch stream when Forward State is 1.
    if let Some(fill) = msg.params.fill.as_deref().filter(|_| forward) {
        let order = response.track_properties.publisher_group_order();
        publisher.set_fill(Fill::new(id, fill, &msg.params, response.largest, order));
    }
    let _ = reply.send(Ok(publisher.writer()));
    Ok(Some(Established {
        req,
        publisher,
        join,
    }))
}
