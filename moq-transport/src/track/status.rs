//! TRACK_STATUS, both sides (draft-19 §10.14): answered by REQUEST_OK (TRACK_STATUS_OK) with
//! LARGEST_OBJECT and the track's properties, then FIN.

use std::sync::Arc;
use std::time::Duration;

use moq_core::codes::RequestErrorCode;
use moq_core::message::{ParamContext, Parameters, RequestError, RequestOk, TrackStatus};
use moq_core::{FullTrackName, Location, Properties};
use tokio::sync::oneshot;

use super::Incoming;
use super::subscribe::check_track_request;
use crate::error::Error;
use crate::request::first_response;
use crate::session::stream::{Reader, Writer};
use crate::session::{AuthRequest, RequestKind, SessionInner};

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
    inner: Arc<SessionInner>,
    track: FullTrackName,
    params: Parameters,
) -> Result<TrackStatusInfo, Error> {
    params.validate(ParamContext::TrackStatus, inner.version)?;
    let (mut writer, mut reader) = inner.open_request().await?;
    let _guard = inner.request_guard();
    let request_id = inner.next_request_id();
    writer
        .send(TrackStatus {
            request_id,
            track,
            params,
        })
        .await?;
    // draft-19 §10.14: TRACK_STATUS is the first and only message we send.
    writer.finish();
    let ok = first_response(&inner, &mut reader, ParamContext::TrackStatusOk).await?;
    Ok(TrackStatusInfo {
        largest: ok.params.largest_object,
        expires: ok
            .params
            .expires
            .filter(|e| *e > 0)
            .map(Duration::from_millis),
        track_properties: ok.track_properties,
    })
}

/// A TRACK_STATUS from the peer, for the application to answer.
#[derive(Debug)]
pub struct IncomingTrackStatus {
    pub(crate) track: FullTrackName,
    pub(crate) params: Parameters,
    pub(crate) decision: Option<oneshot::Sender<Result<TrackStatusInfo, RequestError>>>,
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
    inner: &Arc<SessionInner>,
    msg: TrackStatus,
    mut writer: Writer,
    _reader: Reader,
) -> Result<(), Error> {
    let tokens = inner.resolve_tokens(&msg.params.authorization_tokens)?;
    let mut refusal = check_track_request(inner, &msg.track, &msg.params);
    if refusal.is_none() {
        refusal = inner
            .authorize(&AuthRequest {
                kind: RequestKind::TrackStatus,
                namespace: &msg.track.namespace,
                track_name: Some(&msg.track.name),
                tokens: &tokens,
            })
            .await
            .err();
    }
    let answer = match refusal {
        Some(e) => Err(e),
        None => {
            let (tx, rx) = oneshot::channel();
            let request = IncomingTrackStatus {
                track: msg.track,
                params: msg.params,
                decision: Some(tx),
            };
            match inner.deliver(Incoming::TrackStatus(request)) {
                Err(e) => Err(e),
                Ok(()) => tokio::select! {
                    r = rx => r.unwrap_or_else(|_| Err(RequestError::new(RequestErrorCode::INTERNAL_ERROR, "not answered"))),
                    e = inner.closed() => return Err(e),
                },
            }
        }
    };
    match answer {
        Ok(info) => {
            writer
                .send(RequestOk {
                    params: Parameters {
                        largest_object: info.largest,
                        expires: info
                            .expires
                            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                        ..Default::default()
                    },
                    track_properties: info.track_properties,
                })
                .await?
        }
        Err(e) => writer.send(e).await?,
    }
    // draft-19 §10.14: FIN after TRACK_STATUS_OK or REQUEST_ERROR.
    writer.finish();
    Ok(())
}
