//! SUBSCRIBE_TRACKS and PUBLISH_SKIPPED, both sides (draft-19 §6.1, §10.19, §10.20).
//!
//! The resulting PUBLISHes travel on their own request streams: the subscriber receives them as
//! [`Incoming::Publish`]; the publisher sends them with [`crate::Session::publish`].

use std::sync::Arc;

use moq_core::codes::RequestErrorCode;
use moq_core::message::{
    Message, ParamContext, Parameters, PublishSkipped, RequestError, RequestOk, SubscribeTracks,
};
use moq_core::{FullTrackName, TrackNamespace};
use tokio::sync::{mpsc, watch};

use super::incoming::{Incoming, IncomingSubscribeTracks, TracksResponder};
use super::state::{Asked, TrackState};
use crate::error::Error;
use crate::namespace::NamespaceState;
use crate::request::{Event, Feed, Request, RequestHandle};
use crate::session::{GoawayInfo, RequestKind};

/// An accepted SUBSCRIBE_TRACKS, on the subscriber side: the PUBLISH_SKIPPED notices.
///
/// Dropping it cancels the request (draft-19 §3.3.3, see
/// [the crate docs](crate#handles-drop-and-cancel-safety)): a relay then sends no further
/// PUBLISH for it. The PUBLISHes it already
/// brought are subscriptions of their own ([`Incoming::Publish`]), unaffected.
#[derive(Debug)]
#[must_use = "dropping it cancels the SUBSCRIBE_TRACKS"]
pub struct TrackSubscription {
    prefix: TrackNamespace,
    request: RequestHandle,
    skipped: Feed<FullTrackName>,
}

impl TrackSubscription {
    /// The prefix.
    pub fn prefix(&self) -> &TrackNamespace {
        &self.prefix
    }

    /// The next track the publisher said it will not PUBLISH (PUBLISH_SKIPPED); `None` when the
    /// request ended.
    ///
    /// Cancel safe.
    pub async fn next_skipped(&mut self) -> Option<Result<FullTrackName, Error>> {
        self.skipped.next().await
    }

    /// A GOAWAY the publisher sent on this request's stream (draft-19 §10.4).
    pub fn goaway(&self) -> Option<GoawayInfo> {
        self.request.goaway()
    }

    /// Changes the request with REQUEST_UPDATE (draft-19 §10.9): a new prefix
    /// (TRACK_NAMESPACE_PREFIX, §10.9.2) or new defaults for the PUBLISHes still to come
    /// (filters, FORWARD, priority, ...). A refusal ([`Error::Rejected`]) ends the request.
    ///
    /// [`TrackSubscription::prefix`] is the prefix last sent: it changes when the
    /// REQUEST_UPDATE is queued, before the answer (a refusal ends the request anyway).
    ///
    /// Cancel safe: dropped before the REQUEST_UPDATE is queued, nothing changes; dropped
    /// after, the update goes out and applies at the publisher, and `prefix()` already says so.
    pub async fn update(&mut self, params: Parameters) -> Result<(), Error> {
        let prefix = params.track_namespace_prefix.clone();
        let answer = self.request.queue_update(params, None).await?;
        // Queued: from here it goes out whatever becomes of this future.
        if let Some(p) = prefix {
            self.prefix = p;
        }
        self.request.answer(answer).await.map(drop)
    }
}

/// Sends SUBSCRIBE_TRACKS and waits for REQUEST_OK.
pub(crate) async fn subscribe_tracks(
    tracks: &TrackState,
    prefix: TrackNamespace,
    params: Parameters,
) -> Result<TrackSubscription, Error> {
    let core = tracks.core();
    let mut req = Request::open(
        core,
        SubscribeTracks {
            request_id: 0,
            prefix: prefix.clone(),
            params,
        },
    )
    .await?;
    req.request_ok(ParamContext::SubscribeTracksOk).await?;
    let request = req.handle(ParamContext::UpdateSubscribeTracks);
    let (skipped, feed) = req.feed(256);
    let task_prefix = prefix.clone();
    core.serve(async move {
        let end = skipped_tracks(&mut req, task_prefix, skipped).await;
        req.set_end(end);
    });
    Ok(TrackSubscription {
        prefix,
        request,
        skipped: feed,
    })
}

/// The subscriber's side of an accepted SUBSCRIBE_TRACKS: PUBLISH_SKIPPED until the end.
///
/// `prefix` is the one in effect at the publisher: it moves when the answer to a
/// REQUEST_UPDATE that moved it arrives, on this same stream, so every PUBLISH_SKIPPED after that
/// answer is relative to the new prefix (draft-19 §10.20, §10.9.2).
async fn skipped_tracks(
    req: &mut Request,
    mut prefix: TrackNamespace,
    skipped: mpsc::Sender<FullTrackName>,
) -> Result<(), Error> {
    loop {
        match req.next().await {
            Event::Message(Message::PublishSkipped(s)) => {
                let full = prefix
                    .join(&s.suffix)
                    .ok()
                    .and_then(|ns| FullTrackName::new(ns, s.name).ok());
                let Some(full) = full else {
                    return Err(
                        req.violation("PUBLISH_SKIPPED names a track that is too long".into())
                    );
                };
                if skipped.send(full).await.is_err() {
                    return Err(req.dropped());
                }
            }
            Event::Message(m) => return Err(req.unexpected(&m)),
            Event::Updated(u) => {
                if let (Ok(_), Some(new)) = (&u.answer, &u.params.track_namespace_prefix) {
                    prefix = new.clone();
                }
                u.reply();
            }
            Event::Fin => {
                req.finish();
                return Ok(());
            }
            Event::Dropped => return Err(req.dropped()),
            Event::Ended(e) => return Err(e),
            Event::Update(_) => {}
        }
    }
}

/// Answers a SUBSCRIBE_TRACKS: authorization and PREFIX_OVERLAP (its own overlap space,
/// draft-19 §10.19) here, the PUBLISHes by the application.
pub(crate) async fn serve_subscribe_tracks(
    tracks: Arc<TrackState>,
    namespaces: Arc<NamespaceState>,
    msg: Box<SubscribeTracks>,
    mut req: Box<Request>,
) -> Result<(), Error> {
    // Boxed message and request, and every step but waiting boxed when it runs, as in
    // SUBSCRIBE_NAMESPACE: inline, the largest step sized the whole life's state (5.9 KB).
    req.take_updates(ParamContext::UpdateSubscribeTracks);
    let space = &namespaces.track_subscriptions;
    let prefix = msg.prefix;
    let refusal = tracks
        .check_filter_budget(&msg.params)
        .or_else(|| space.check_room());
    let admitted = Box::pin(req.authorize(refusal, RequestKind::SubscribeTracks, &prefix, None))
        .await
        .and_then(|()| space.take(&prefix));
    let mut slot = match admitted {
        Ok(slot) => slot,
        Err(e) => return Box::pin((*req).refuse(e)).await,
    };
    let make = |decision| {
        Incoming::SubscribeTracks(IncomingSubscribeTracks {
            prefix: prefix.clone(),
            params: msg.params.clone(),
            decision: Some(decision),
        })
    };
    let not_supported = RequestError::new(
        RequestErrorCode::NOT_SUPPORTED,
        "SUBSCRIBE_TRACKS not supported",
    );
    let decision =
        Box::pin(tracks.ask(&mut req, make, not_supported.clone(), Some(not_supported))).await;
    let responder = match decision {
        Asked::Answer(Ok(tx)) => tx,
        Asked::Answer(Err(e)) | Asked::Refuse(e) => return Box::pin((*req).refuse(e)).await,
        Asked::Gone => return Ok(()),
    };
    Box::pin(req.send(RequestOk::default())).await?;
    let (prefix_tx, prefix_rx) = watch::channel(prefix);
    let (params_tx, params_rx) = watch::channel(msg.params);
    let (skip_tx, mut skip_rx) = mpsc::channel(64);
    let (ended_tx, ended_rx) = watch::channel(false);
    let _ = responder.send(TracksResponder {
        prefix: prefix_rx,
        params: params_rx,
        skipped: skip_tx,
        ended: ended_rx,
        visible: req.visibility(),
    });
    let res = loop {
        tokio::select! {
            Some((namespace, name)) = skip_rx.recv() => {
                // The suffix is taken against the prefix in effect when the message goes out,
                // not when the application queued it: an update answered in between moved it
                // (draft-19 §10.20). A track no longer under the prefix is no longer asked about.
                let suffix = namespace.strip_prefix(&prefix_tx.borrow());
                if let Some(suffix) = suffix {
                    Box::pin(req.send(PublishSkipped { suffix, name })).await?;
                }
            }
            ev = req.next() => match ev {
                // draft-19 §10.9.1: a failed update closes the stream.
                Event::Update(Err(e)) => {
                    Box::pin(req.answer_update(Err(e))).await?;
                    break Ok(());
                }
                Event::Update(Ok(u)) => {
                    // draft-19 §10.9: absent parameters keep their value; the others become
                    // the defaults of the PUBLISHes sent from now on (§10.19.1).
                    let mut next = params_tx.borrow().clone();
                    next.update_with(&u.params);
                    let mut answer = match tracks.check_filter_budget(&next) {
                        Some(e) => Err(e),
                        None => Ok(RequestOk::default()),
                    };
                    if let (Ok(_), Some(new)) = (&answer, &u.params.track_namespace_prefix) {
                        // draft-19 §10.18-10.19: the new prefix is authorized, and re-checks
                        // PREFIX_OVERLAP (§10.9.2).
                        let authorized =
                            Box::pin(req.authorize(None, RequestKind::SubscribeTracks, new, None))
                                .await;
                        match authorized.and_then(|()| slot.move_to(new)) {
                            Ok(()) => {
                                prefix_tx.send_replace(new.clone());
                            }
                            Err(e) => answer = Err(e),
                        }
                    }
                    if answer.is_ok() {
                        params_tx.send_replace(next);
                    }
                    if !Box::pin(req.answer_update(answer)).await? {
                        break Ok(());
                    }
                }
                Event::Message(m) => break Err(req.unexpected(&m)),
                Event::Ended(_) => break Ok(()),
                // draft-18 §6.1: the subscriber's FIN cancels, freeing the prefix.
                Event::Fin if tracks.core().version().fin_cancels_discovery() => {
                    req.finish();
                    break Ok(());
                }
                // draft-19 §3.3.2: a FIN is not a cancellation.
                Event::Fin | Event::Dropped | Event::Updated(_) => {}
            },
        }
    };
    ended_tx.send_replace(true);
    res
}
