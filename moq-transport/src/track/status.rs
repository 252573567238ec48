//! TRACK_STATUS, both sides (draft-19 §10.14): answered by REQUEST_OK (TRACK_STATUS_OK) with
//! LARGEST_OBJECT and the track's properties, then FIN.

use std::sync::Arc;

use moq_core::FullTrackName;
use moq_core::message::{ParamContext, Parameters, RequestOk, TrackStatus};

use super::incoming::{Incoming, IncomingTrackStatus, TrackStatusInfo};
use super::params::{answer_properties, ms};
use super::state::{Asked, TrackState, no_such_track};
use crate::error::Error;
use crate::request::Request;
use crate::session::RequestKind;

/// Sends TRACK_STATUS and waits for the answer.
pub(crate) async fn track_status(
    tracks: &TrackState,
    track: FullTrackName,
    params: Parameters,
) -> Result<TrackStatusInfo, Error> {
    let core = tracks.core();
    let mut req = Request::open(
        core,
        TrackStatus {
            request_id: 0,
            track,
            params,
        },
    )
    .await?;
    // draft-19 §10.14: TRACK_STATUS is the first and only message we send.
    req.finish();
    let ok = req.request_ok(ParamContext::TrackStatusOk).await?;
    Ok(TrackStatusInfo {
        largest: ok.params.largest_object,
        expires: ms(ok.params.expires),
        track_properties: ok.track_properties,
    })
}

/// Answers a TRACK_STATUS.
pub(crate) async fn serve_track_status(
    tracks: Arc<TrackState>,
    msg: TrackStatus,
    mut req: Request,
) -> Result<(), Error> {
    let track = msg.track;
    let admitted = tracks.admit(&req, RequestKind::TrackStatus, &track, &msg.params, None);
    if let Err(e) = admitted.await {
        return req.refuse(e).await;
    }
    let include = msg.params.clone();
    let make = |decision| {
        Incoming::TrackStatus(IncomingTrackStatus {
            track,
            params: msg.params,
            decision: Some(decision),
        })
    };
    let info = match tracks.ask(&mut req, make, no_such_track(), None).await {
        Asked::Answer(Ok(info)) => info,
        Asked::Answer(Err(e)) | Asked::Refuse(e) => return req.refuse(e).await,
        Asked::Gone => return Ok(()),
    };
    req.send(RequestOk {
        params: Parameters {
            largest_object: info.largest,
            // Not sent: draft-19 §10.2.7 does not list TRACK_STATUS_OK for EXPIRES, and a peer
            // reading it strictly would close the session (we accept it, §10.14).
            ..Default::default()
        },
        track_properties: answer_properties(&include, info.track_properties),
    })
    .await?;
    // draft-19 §10.14: FIN after TRACK_STATUS_OK or REQUEST_ERROR.
    req.finish();
    Ok(())
}
