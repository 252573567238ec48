//! PUBLISH, both sides (draft-19 §5.1, §10.10): a publisher starts a subscription on its own;
//! the subscriber answers REQUEST_OK (PUBLISH_OK) or REQUEST_ERROR.

use std::sync::Arc;
use std::time::Duration;

use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::{Message, ParamContext, Parameters, Publish, RequestError, RequestOk};
use moq_core::{FullTrackName, Location, Properties};
use tokio::sync::{oneshot, watch};

use super::send::SubscriptionWriter;
use super::subscribe::{
    Publisher, SubscriberTask, check_track_request, new_subscription, track_group_order,
};
use super::{Incoming, Subscription, SubscriptionInfo, SubscriptionParams};
use crate::error::Error;
use crate::session::stream::{Reader, Writer, cancel};
use crate::session::{AuthRequest, RequestKind, SessionInner};

/// How to PUBLISH a track.
#[derive(Clone, Debug, Default)]
pub struct PublishOptions {
    /// The Track Alias; `None` lets the session choose.
    pub track_alias: Option<u64>,
    /// Initial Forward State (FORWARD); default true.
    pub forward: Option<bool>,
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
#[derive(Debug)]
pub struct PublishedTrack {
    writer: SubscriptionWriter,
    answer: watch::Receiver<Option<Result<(), Error>>>,
}

impl PublishedTrack {
    /// The writer for the track's objects; objects may flow before the answer (draft-19 §5.1).
    pub fn writer(&self) -> &SubscriptionWriter {
        &self.writer
    }

    /// Waits for PUBLISH_OK (`Ok`) or REQUEST_ERROR ([`Error::Rejected`], e.g. UNINTERESTED).
    pub async fn accepted(&self) -> Result<(), Error> {
        let mut rx = self.answer.clone();
        let res = rx
            .wait_for(|a| a.is_some())
            .await
            .ok()
            .and_then(|a| a.clone());
        res.unwrap_or(Err(Error::EndedEarly))
    }

    /// The writer, for keeping after the answer.
    pub fn into_writer(self) -> SubscriptionWriter {
        self.writer
    }
}

/// Sends PUBLISH and returns at once: the answer comes later.
pub(crate) async fn publish(
    inner: Arc<SessionInner>,
    track: FullTrackName,
    opts: PublishOptions,
) -> Result<PublishedTrack, Error> {
    if track.namespace.is_dot() || track.namespace.is_session_level() {
        return Err(Error::Invalid(format!(
            "track {track} is in a reserved namespace"
        )));
    }
    let (mut writer, reader) = inner.open_request().await?;
    let guard = inner.request_guard();
    let request_id = inner.next_request_id();
    let alias = opts.track_alias.unwrap_or_else(|| inner.next_track_alias());
    let params = Parameters {
        forward: opts.forward.filter(|f| !f),
        largest_object: opts.largest,
        expires: opts
            .expires
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        authorization_tokens: opts.authorization_tokens.clone(),
        ..Default::default()
    };
    writer
        .send(Publish {
            request_id,
            track: track.clone(),
            track_alias: alias,
            params: params.clone(),
            track_properties: opts.track_properties.clone(),
        })
        .await?;
    let sub_params = SubscriptionParams {
        forward: opts.forward.unwrap_or(true),
        ..Default::default()
    };
    let order = track_group_order(&opts.track_properties);
    let publisher = Publisher::new(
        &inner,
        request_id,
        alias,
        track,
        &opts.track_properties,
        order,
        sub_params,
    );
    let (answer_tx, answer_rx) = watch::channel(None);
    let out = PublishedTrack {
        writer: publisher.writer(),
        answer: answer_rx,
    };
    tokio::spawn(async move {
        let _guard = guard;
        let mut reader = reader;
        match await_publish_ok(&inner, &mut reader, &publisher).await {
            Ok(()) => {
                answer_tx.send_replace(Some(Ok(())));
                if let Err(e) = publisher.run(&inner, writer, reader, None).await
                    && e.is_session_error()
                {
                    inner.close(e);
                }
            }
            Err(e) => {
                if let Error::Rejected(_) = &e {
                    writer.finish();
                } else {
                    cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED);
                }
                answer_tx.send_replace(Some(Err(e)));
            }
        }
    });
    Ok(out)
}

async fn await_publish_ok(
    inner: &SessionInner,
    reader: &mut Reader,
    publisher: &Publisher,
) -> Result<(), Error> {
    let msg = tokio::select! {
        m = reader.next() => m,
        e = inner.closed() => return Err(e),
    };
    match msg {
        Ok(Some(Message::RequestOk(ok))) => {
            ok.validate(ParamContext::PublishOk, inner.version)
                .inspect_err(|e| inner.close(e.clone().into()))?;
            let largest = publisher.writer().largest();
            publisher
                .params_sender()
                .send_modify(|p| p.apply(&ok.params, largest));
            Ok(())
        }
        Ok(Some(Message::RequestError(e))) => Err(Error::Rejected(Box::new(e))),
        Ok(Some(m)) => {
            let e = Error::protocol(format!("{} before the response to PUBLISH", m.name()));
            inner.close(e.clone());
            Err(e)
        }
        Ok(None) => Err(Error::EndedEarly),
        Err(e) => Err(inner.fail(e)),
    }
}

/// The application's answer to a PUBLISH, and where to hand back the subscription.
type PublishDecision = (
    Result<Parameters, RequestError>,
    oneshot::Sender<Result<Subscription, Error>>,
);

/// A PUBLISH from the peer, for the application to answer.
#[derive(Debug)]
pub struct IncomingPublish {
    pub(crate) track: FullTrackName,
    pub(crate) info: SubscriptionInfo,
    pub(crate) params: Parameters,
    pub(crate) decision: Option<oneshot::Sender<PublishDecision>>,
}

impl IncomingPublish {
    /// The track offered.
    pub fn track(&self) -> &FullTrackName {
        &self.track
    }

    /// What the PUBLISH said (alias, largest, properties).
    pub fn info(&self) -> &SubscriptionInfo {
        &self.info
    }

    /// The PUBLISH's parameters (FORWARD, EXPIRES, ...).
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Accepts with PUBLISH_OK carrying `params` (FORWARD, SUBSCRIBER_PRIORITY, LOCATION_FILTER,
    /// delivery timeouts, ...). Objects that arrived before are delivered too.
    pub async fn accept(mut self, params: Parameters) -> Result<Subscription, Error> {
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        let (tx, rx) = oneshot::channel();
        d.send((Ok(params), tx)).map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// Rejects with REQUEST_ERROR (UNINTERESTED, usually) and stops the track's data streams.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let (tx, _) = oneshot::channel();
            let _ = d.send((Err(error), tx));
        }
    }
}

/// Answers a PUBLISH: checks, then the application decides.
pub(crate) async fn serve_publish(
    inner: &Arc<SessionInner>,
    msg: Publish,
    mut writer: Writer,
    mut reader: Reader,
) -> Result<(), Error> {
    let tokens = inner.resolve_tokens(&msg.params.authorization_tokens)?;
    msg.track_properties.validate_track()?;
    let mut refusal = check_track_request(inner, &msg.track, &Parameters::default());
    if refusal.is_none() && msg.track_properties.unknown_mandatory(&[]).is_some() {
        // draft-19 §2.5.1: a mandatory property we do not understand.
        refusal = Some(RequestError::new(
            RequestErrorCode::UNSUPPORTED_EXTENSION,
            "unknown mandatory track property",
        ));
    }
    if refusal.is_none() {
        refusal = inner
            .authorize(&AuthRequest {
                kind: RequestKind::Publish,
                namespace: &msg.track.namespace,
                track_name: Some(&msg.track.name),
                tokens: &tokens,
            })
            .await
            .err();
    }
    if let Some(e) = refusal {
        writer.send(e).await?;
        writer.finish();
        return Ok(());
    }
    let info = SubscriptionInfo {
        track: msg.track.clone(),
        track_alias: msg.track_alias,
        largest: msg.params.largest_object,
        expires: msg
            .params
            .expires
            .filter(|e| *e > 0)
            .map(Duration::from_millis),
        track_properties: msg.track_properties.clone(),
    };
    // Objects may come before PUBLISH_OK, so the alias is live from now on.
    let initial = Parameters {
        forward: msg.params.forward,
        ..Default::default()
    };
    let (sub, task) = new_subscription(inner, info.clone(), msg.request_id, &initial)?;
    let (dtx, drx) = oneshot::channel();
    let request = IncomingPublish {
        track: msg.track.clone(),
        info,
        params: msg.params.clone(),
        decision: Some(dtx),
    };
    let uninterested = RequestError::new(RequestErrorCode::UNINTERESTED, "not interested");
    if let Err(e) = inner.deliver(Incoming::Publish(request)) {
        let e = if e.code == RequestErrorCode::DOES_NOT_EXIST {
            uninterested
        } else {
            e
        };
        writer.send(e).await?;
        writer.finish();
        inner.unregister_sink(msg.track_alias, msg.request_id);
        return Ok(());
    }
    let decision = tokio::select! {
        d = drx => d.ok(),
        e = inner.closed() => return Err(e),
    };
    match decision {
        Some((Ok(params), reply)) => {
            if let Err(e) = params.validate(ParamContext::PublishOk, inner.version) {
                let _ = reply.send(Err(e.into()));
                inner.unregister_sink(msg.track_alias, msg.request_id);
                cancel(&mut writer, &mut reader, StreamResetCode::INTERNAL_ERROR);
                return Ok(());
            }
            writer
                .send(RequestOk {
                    params: params.clone(),
                    track_properties: Properties::new(),
                })
                .await?;
            let _ = reply.send(Ok(sub));
            run_task(inner, task, params, writer, reader).await;
            Ok(())
        }
        other => {
            let e = match other {
                Some((Err(e), _)) => e,
                _ => uninterested,
            };
            // draft-19 §10.10: UNINTERESTED, and STOP_SENDING on the track's data streams
            // (its alias is dropped, so they are stopped as they arrive).
            inner.unregister_sink(msg.track_alias, msg.request_id);
            writer.send(e).await?;
            writer.finish();
            Ok(())
        }
    }
}

async fn run_task(
    inner: &SessionInner,
    task: SubscriberTask,
    params: Parameters,
    writer: Writer,
    reader: Reader,
) {
    task.apply(&params);
    task.run(inner, writer, reader).await;
}
