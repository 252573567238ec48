//! TRACK_STATUS, both sides (draft-19 §10.14): answered by REQUEST_OK (TRACK_STATUS_OK) with
//! LARGEST_OBJECT and the track's properties, then FIN.

use std::sync::Arc;
use std::time::Duration;

use moq_core::message::{ParamContext, Parameters, RequestError, RequestOk, TrackStatus};
use moq_core::{FullTrackName, Location, Properties};
use tokio::sync::oneshot;

use super::incoming::Incoming;
use super::params::{millis, ms};
use super::state::{Asked, TrackState, no_such_track};
use crate::error::Error;
use crate::request::Request;
use crate::session::RequestKind;

/// A track's state, as TRACK_STATUS_OK carries it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackStatusInfo {
    /// The largest location published, if any.
    pub largest: Option<Location>,
    /// EXPIRES, if the publisher gave one.
    pub expires: Option<Duration>,
    /// The track's properties.
    pub track_properties: Properties,
}

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

/// A TRACK_STATUS from the peer, for the application to answer.
#[derive(Debug)]
pub struct IncomingTrackStatus {
    track: FullTrackName,
    params: Parameters,
    decision: Option<oneshot::Sender<Result<TrackStatusInfo, RequestError>>>,
}

impl IncomingTrackStatus {
    /// The track asked about.
    pub fn track(&self) -> &FullTrackName {
        &self.track
    }

    /// The request's parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Answers with TRACK_STATUS_OK.
    pub fn accept(mut self, info: TrackStatusInfo) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(Ok(info));
        }
    }

    /// Answers with REQUEST_ERROR.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(Err(error));
        }
    }
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
            expires: info.expires.map(millis),
            ..Default::default()
        },
        track_properties: info.track_properties,
    })
    .await?;
    // draft-19 §10.14: FIN after TRACK_STATUS_OK or REQUEST_ERROR.
    req.finish();
    Ok(())
}
