//! PUBLISH, both sides (draft-19 §5.1, §10.10): a publisher starts a subscription on its own;
//! the subscriber answers REQUEST_OK (PUBLISH_OK) or REQUEST_ERROR.

use std::sync::Arc;
use std::time::Duration;

use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::{ParamContext, Parameters, Publish, RequestError, RequestOk};
use moq_core::{FullTrackName, Location, Properties};
use tokio::sync::watch;

use super::incoming::{Incoming, IncomingPublish};
use super::params::{SubscriptionParams, millis, ms};
use super::send::{JoinPoint, SubscriptionWriter};
use super::state::{Asked, TrackState};
use super::subscription::{PublisherTask, SubscriptionInfo, new_subscription};
use crate::error::Error;
use crate::request::Request;
use crate::session::{RequestKind, SessionCore};

/// How to PUBLISH a track. Plain data: dropping it does nothing.
#[derive(Clone, Debug, Default)]
pub struct PublishOptions {
    /// The Track Alias; `None` lets the session choose.
    pub track_alias: Option<u64>,
    /// The subscription's starting parameters; for a PUBLISH resulting from SUBSCRIBE_TRACKS,
    /// that request's parameters (draft-19 §10.19.1). All of them apply at the publisher
    /// (priority, filters, delivery timeouts, FORWARD, GROUP_ORDER); the PUBLISH carries the
    /// ones a PUBLISH may: FORWARD when it is 0, and GROUP_ORDER.
    pub subscription: Parameters,
    /// The largest location published so far (LARGEST_OBJECT).
    pub largest: Option<Location>,
    /// EXPIRES.
    pub expires: Option<Duration>,
    /// The track's properties.
    pub track_properties: Properties,
    /// AUTHORIZATION_TOKENs.
    pub authorization_tokens: Vec<moq_core::AuthToken>,
}

/// A track we PUBLISHed: its writer, and the subscriber's answer.
///
/// Dropping it drops its writer and nothing else: the PUBLISH stays open (see
/// [`SubscriptionWriter`]'s drop) until the subscriber cancels it or the session ends; end it
/// with [`SubscriptionWriter::finish`] (after [`PublishedTrack::into_writer`]).
#[derive(Debug)]
pub struct PublishedTrack {
    writer: SubscriptionWriter,
    answer: watch::Receiver<Option<Result<(), Error>>>,
    core: Arc<SessionCore>,
}

impl PublishedTrack {
    /// The writer for the track's objects; objects may flow before the answer (draft-19 §5.1).
    pub fn writer(&self) -> &SubscriptionWriter {
        &self.writer
    }

    /// Waits for PUBLISH_OK (`Ok`) or REQUEST_ERROR ([`Error::Rejected`], e.g. UNINTERESTED).
    ///
    /// Cancel safe.
    pub async fn accepted(&self) -> Result<(), Error> {
        let mut rx = self.answer.clone();
        match rx.wait_for(Option::is_some).await {
            Ok(a) => a.clone().unwrap_or(Err(Error::EndedEarly)),
            Err(_) => Err(self.core.gone()),
        }
    }

    /// The writer, for keeping after the answer.
    pub fn into_writer(self) -> SubscriptionWriter {
        self.writer
    }
}

/// Sends PUBLISH and returns at once: the answer comes later.
pub(crate) async fn publish(
    tracks: &Arc<TrackState>,
    track: FullTrackName,
    opts: PublishOptions,
) -> Result<PublishedTrack, Error> {
    let core = tracks.core();
    if track.namespace.is_dot() || track.namespace.is_session_level() {
        return Err(Error::Invalid(format!(
            "track {track} is in a reserved namespace"
        )));
    }
    let alias = opts
        .track_alias
        .unwrap_or_else(|| tracks.send.next_track_alias());
    let params = Parameters {
        // draft-19 §10.19.1: FORWARD=1 is said by omitting it.
        forward: opts.subscription.forward.filter(|f| !f),
        group_order: opts.subscription.group_order,
        largest_object: opts.largest,
        expires: opts.expires.map(millis),
        authorization_tokens: opts.authorization_tokens.clone(),
        ..Default::default()
    };
    let mut req = Request::open(
        core,
        Publish {
            request_id: 0,
            track: track.clone(),
            track_alias: alias,
            params,
            track_properties: opts.track_properties.clone(),
        },
    )
    .await?;
    let mut initial = SubscriptionParams::default();
    initial.apply(&opts.subscription, opts.largest);
    let track_name = track.clone();
    let publisher = PublisherTask::new(
        core,
        req.id(),
        alias,
        track,
        &opts.track_properties,
        initial,
        opts.largest,
    );
    let (answer_tx, answer_rx) = watch::channel(None);
    let out = PublishedTrack {
        writer: publisher.writer(),
        answer: answer_rx,
        core: core.clone(),
    };
    let tracks = tracks.clone();
    let largest = opts.largest;
    let name = track_name;
    core.serve(async move {
        // draft-19 §5.1, §10.12.2: a Joining FETCH may name the PUBLISH's Request ID.
        let join = tracks.send.track_join(req.id(), name);
        match req.request_ok(ParamContext::PublishOk).await {
            Ok(ok) => {
                publisher.apply(&ok.params);
                let forward = publisher.forwarding();
                if let Some(join) = &join {
                    join.establish(JoinPoint {
                        forward,
                        joining: largest.filter(|_| forward),
                    });
                }
                answer_tx.send_replace(Some(Ok(())));
                let _ = publisher.run(&mut req, join.as_ref()).await;
            }
            Err(e) => {
                // draft-19 §5.1.1: nothing more is sent for a refused PUBLISH.
                publisher.refused(e.clone());
                answer_tx.send_replace(Some(Err(e)));
            }
        }
    });
    Ok(out)
}

/// Answers a PUBLISH: checks, then the application decides.
pub(crate) async fn serve_publish(
    tracks: Arc<TrackState>,
    msg: Publish,
    mut req: Request,
) -> Result<(), Error> {
    let core = tracks.core();
    let track = msg.track;
    let props = msg.track_properties;
    props.validate_track().map_err(|e| core.fail(e.into()))?;
    // draft-19 §2.5.1: a mandatory property we do not understand.
    let unknown = props.unknown_mandatory(&[]).map(|_| {
        RequestError::new(
            RequestErrorCode::UNSUPPORTED_EXTENSION,
            "unknown mandatory track property",
        )
    });
    let none = Parameters::default();
    let admitted = tracks.admit(&req, RequestKind::Publish, &track, &none, unknown);
    if let Err(e) = admitted.await {
        return req.refuse(e).await;
    }
    let info = SubscriptionInfo {
        track: track.clone(),
        track_alias: msg.track_alias,
        largest: msg.params.largest_object,
        expires: ms(msg.params.expires),
        track_properties: props,
    };
    // Objects may come before PUBLISH_OK, so the alias is live from now on.
    let initial = Parameters {
        forward: msg.params.forward,
        group_order: msg.params.group_order,
        ..Default::default()
    };
    let (sub, task) = new_subscription(&tracks.recv, &mut req, info.clone(), &initial)?;
    let make = |decision| {
        Incoming::Publish(IncomingPublish {
            track,
            info,
            params: msg.params,
            decision: Some(decision),
        })
    };
    let uninterested = RequestError::new(RequestErrorCode::UNINTERESTED, "not interested");
    let decision = tracks
        .ask(&mut req, make, uninterested.clone(), Some(uninterested))
        .await;
    match decision {
        Asked::Answer((Ok(params), reply)) => {
            // From draft-20 PUBLISH_OK carries no subscription parameter (draft-21 §9.8):
            // the subscriber's choices follow in a REQUEST_UPDATE.
            let (ok, update) = if core.version().has_fill() {
                let ok = Parameters {
                    expires: params.expires,
                    ..Default::default()
                };
                let update = Parameters {
                    expires: None,
                    ..params.clone()
                };
                (ok, update)
            } else {
                (params.clone(), Parameters::default())
            };
            let v = core.version();
            let valid =
                ok.validate(ParamContext::PublishOk, v)
                    .and_then(|()| match update.is_empty() {
                        true => Ok(()),
                        false => update.validate(ParamContext::UpdateSubscription, v),
                    });
            if let Err(e) = valid {
                let _ = reply.send(Err(e.into()));
                req.cancel(StreamResetCode::INTERNAL_ERROR);
                return Ok(());
            }
            req.send(RequestOk {
                params: ok,
                track_properties: Properties::new(),
            })
            .await?;
            task.apply(&params);
            if !update.is_empty() {
                sub.update_later(update);
            }
            let _ = reply.send(Ok(sub));
            task.run(&mut req).await;
            Ok(())
        }
        Asked::Answer((Err(e), _)) | Asked::Refuse(e) => {
            // draft-19 §10.10: UNINTERESTED, and STOP_SENDING on the track's data streams (its
            // alias is dropped with the task, so they are stopped as they arrive).
            drop(task);
            req.refuse(e).await
        }
        Asked::Gone => Ok(()),
    }
}
