//! SUBSCRIBE_TRACKS and PUBLISH_SKIPPED, both sides (draft-19 §6.1, §10.19, §10.20).
//!
//! The resulting PUBLISHes travel on their own request streams: the subscriber receives them as
//! [`Incoming::Publish`]; the publisher sends them with [`crate::Session::publish`].

use std::sync::Arc;

use bytes::Bytes;
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::{
    Message, ParamContext, Parameters, PublishSkipped, RequestError, RequestOk, SubscribeTracks,
};
use moq_core::{FullTrackName, TrackNamespace};
use tokio::sync::{mpsc, oneshot, watch};

use super::Incoming;
use crate::error::Error;
use crate::request::{RequestGoaway, check_update, first_response};
use crate::session::stream::{Reader, Writer, cancel};
use crate::session::{AuthRequest, RequestKind, SessionInner, lock};

/// An accepted SUBSCRIBE_TRACKS, on the subscriber side: the PUBLISH_SKIPPED notices. Dropping
/// it cancels the request (a relay then sends no further PUBLISH for it).
#[derive(Debug)]
pub struct TrackSubscription {
    prefix: TrackNamespace,
    skipped: mpsc::Receiver<Result<FullTrackName, Error>>,
    _cancel: oneshot::Sender<()>,
}

impl TrackSubscription {
    /// The prefix.
    pub fn prefix(&self) -> &TrackNamespace {
        &self.prefix
    }

    /// The next track the publisher said it will not PUBLISH (PUBLISH_SKIPPED); `None` when the
    /// request ended.
    pub async fn next_skipped(&mut self) -> Option<Result<FullTrackName, Error>> {
        self.skipped.recv().await
    }
}

/// Sends SUBSCRIBE_TRACKS and waits for REQUEST_OK.
pub(crate) async fn subscribe_tracks(
    inner: Arc<SessionInner>,
    prefix: TrackNamespace,
    params: Parameters,
) -> Result<TrackSubscription, Error> {
    params.validate(ParamContext::SubscribeTracks, inner.version)?;
    let (mut writer, mut reader) = inner.open_request().await?;
    let guard = inner.request_guard();
    let request_id = inner.next_request_id();
    writer
        .send(SubscribeTracks {
            request_id,
            prefix: prefix.clone(),
            params,
        })
        .await?;
    if let Err(e) = first_response(&inner, &mut reader, ParamContext::SubscribeTracksOk).await {
        match &e {
            Error::Rejected(_) => writer.finish(),
            _ => cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED),
        }
        return Err(e);
    }
    let (tx, rx) = mpsc::channel(256);
    let (cancel_tx, mut cancel_rx) = oneshot::channel::<()>();
    let task_prefix = prefix.clone();
    tokio::spawn(async move {
        let _guard = guard;
        let mut goaway = RequestGoaway::default();
        loop {
            tokio::select! {
                _ = &mut cancel_rx => {
                    cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED);
                    return;
                }
                m = reader.next() => match m {
                    Ok(Some(Message::PublishSkipped(s))) => {
                        let full = task_prefix.join(&s.suffix).ok().and_then(|ns| FullTrackName::new(ns, s.name).ok());
                        let Some(full) = full else {
                            inner.close(Error::protocol("PUBLISH_SKIPPED names a track that is too long"));
                            return;
                        };
                        if tx.send(Ok(full)).await.is_err() {
                            return;
                        }
                    }
                    Ok(Some(Message::Goaway(g))) => {
                        if goaway.on_goaway(&inner, g).is_err() {
                            return;
                        }
                    }
                    Ok(Some(m)) => {
                        let e = Error::protocol(format!("{} on a SUBSCRIBE_TRACKS stream", m.name()));
                        inner.close(e.clone());
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                    Ok(None) => { writer.finish(); return; }
                    Err(e) => { let _ = tx.send(Err(e)).await; return; }
                },
                e = inner.closed() => { let _ = tx.send(Err(e)).await; return; }
            }
        }
    });
    Ok(TrackSubscription {
        prefix,
        skipped: rx,
        _cancel: cancel_tx,
    })
}

/// A SUBSCRIBE_TRACKS from the peer, for the application to answer.
#[derive(Debug)]
pub struct IncomingSubscribeTracks {
    pub(crate) prefix: TrackNamespace,
    pub(crate) params: Parameters,
    pub(crate) decision:
        Option<oneshot::Sender<Result<oneshot::Sender<TracksResponder>, RequestError>>>,
}

/// The publisher's side of an accepted SUBSCRIBE_TRACKS: send PUBLISH for each matching track
/// with [`crate::Session::publish`] (using [`TracksResponder::defaults`]), and
/// PUBLISH_SKIPPED for those it will not.
#[derive(Debug)]
pub struct TracksResponder {
    prefix: watch::Receiver<TrackNamespace>,
    params: Parameters,
    skipped: mpsc::Sender<(TrackNamespace, Bytes)>,
    ended: watch::Receiver<bool>,
}

impl TracksResponder {
    /// The current prefix (a REQUEST_UPDATE can move it).
    pub fn prefix(&self) -> TrackNamespace {
        self.prefix.borrow().clone()
    }

    /// The request's parameters: defaults for the resulting subscriptions (draft-19 §10.19.1).
    pub fn defaults(&self) -> &Parameters {
        &self.params
    }

    /// True if `track` falls under the prefix.
    pub fn matches(&self, track: &FullTrackName) -> bool {
        self.prefix.borrow().is_prefix_of(&track.namespace)
    }

    /// Reports with PUBLISH_SKIPPED that `track` will not be published.
    pub async fn skipped(&self, track: &FullTrackName) -> Result<(), Error> {
        let suffix = track
            .namespace
            .strip_prefix(&self.prefix())
            .ok_or(Error::Invalid("track not under the prefix".into()))?;
        self.skipped
            .send((suffix, track.name.clone()))
            .await
            .map_err(|_| Error::EndedEarly)
    }

    /// Resolves when the subscriber cancels the request or the session ends.
    pub async fn ended(&self) {
        let mut rx = self.ended.clone();
        let _ = rx.wait_for(|e| *e).await;
    }
}

impl IncomingSubscribeTracks {
    /// The prefix.
    pub fn prefix(&self) -> &TrackNamespace {
        &self.prefix
    }

    /// The parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Accepts with REQUEST_OK.
    pub async fn accept(mut self) -> Result<TracksResponder, Error> {
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        let (tx, rx) = oneshot::channel();
        d.send(Ok(tx)).map_err(|_| Error::EndedEarly)?;
        rx.await.map_err(|_| Error::EndedEarly)
    }

    /// Rejects with REQUEST_ERROR.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(Err(error));
        }
    }
}

/// Answers a SUBSCRIBE_TRACKS: authorization and PREFIX_OVERLAP (its own overlap space,
/// draft-19 §10.19) here, the PUBLISHes by the application.
pub(crate) async fn serve_subscribe_tracks(
    inner: &Arc<SessionInner>,
    msg: SubscribeTracks,
    mut writer: Writer,
    mut reader: Reader,
) -> Result<(), Error> {
    let tokens = inner.resolve_tokens(&msg.params.authorization_tokens)?;
    let mut prefix = msg.prefix.clone();
    let mut refusal = None;
    if msg.params.filter_range_count() as u64 > inner.config.max_filter_ranges {
        refusal = Some(RequestError::new(
            RequestErrorCode::INVALID_FILTER,
            "too many filter ranges",
        ));
    } else if lock(&inner.track_prefixes).len() >= inner.config.limits.max_track_subscriptions {
        refusal = Some(RequestError::new(
            RequestErrorCode::EXCESSIVE_LOAD,
            "too many track subscriptions",
        ));
    }
    if refusal.is_none() {
        refusal = inner
            .authorize(&AuthRequest {
                kind: RequestKind::SubscribeTracks,
                namespace: &prefix,
                track_name: None,
                tokens: &tokens,
            })
            .await
            .err();
    }
    let key = inner.next_key();
    if refusal.is_none() {
        let mut t = lock(&inner.track_prefixes);
        if t.overlaps(&prefix) {
            refusal = Some(RequestError::new(
                RequestErrorCode::PREFIX_OVERLAP,
                "prefix overlaps an existing SUBSCRIBE_TRACKS",
            ));
        } else {
            t.insert(&prefix, key, ());
        }
    }
    if let Some(e) = refusal {
        writer.send(e).await?;
        writer.finish();
        return Ok(());
    }
    let res = serve_accepted(inner, msg, &mut prefix, key, &mut writer, &mut reader).await;
    lock(&inner.track_prefixes).remove(&prefix, key);
    res
}

async fn serve_accepted(
    inner: &Arc<SessionInner>,
    msg: SubscribeTracks,
    prefix: &mut TrackNamespace,
    key: u64,
    writer: &mut Writer,
    reader: &mut Reader,
) -> Result<(), Error> {
    let (dtx, drx) = oneshot::channel();
    let request = IncomingSubscribeTracks {
        prefix: prefix.clone(),
        params: msg.params.clone(),
        decision: Some(dtx),
    };
    let not_supported = RequestError::new(
        RequestErrorCode::NOT_SUPPORTED,
        "SUBSCRIBE_TRACKS not supported",
    );
    if let Err(e) = inner.deliver(Incoming::SubscribeTracks(request)) {
        let e = if e.code == RequestErrorCode::DOES_NOT_EXIST {
            not_supported
        } else {
            e
        };
        writer.send(e).await?;
        writer.finish();
        return Ok(());
    }
    let decision = tokio::select! {
        d = drx => d.ok(),
        e = inner.closed() => return Err(e),
    };
    let responder_tx = match decision {
        Some(Ok(tx)) => tx,
        Some(Err(e)) => {
            writer.send(e).await?;
            writer.finish();
            return Ok(());
        }
        None => {
            writer.send(not_supported).await?;
            writer.finish();
            return Ok(());
        }
    };
    writer.send(RequestOk::default()).await?;
    let (prefix_tx, prefix_rx) = watch::channel(prefix.clone());
    let (skip_tx, mut skip_rx) = mpsc::channel(64);
    let (ended_tx, ended_rx) = watch::channel(false);
    let _ = responder_tx.send(TracksResponder {
        prefix: prefix_rx,
        params: msg.params,
        skipped: skip_tx,
        ended: ended_rx,
    });
    let mut reader_open = true;
    let mut watch_stop = true;
    let mut goaway = RequestGoaway::default();
    let res = loop {
        tokio::select! {
            Some((suffix, name)) = skip_rx.recv() => writer.send(PublishSkipped { suffix, name }).await?,
            m = reader.next(), if reader_open => match m {
                Ok(Some(Message::RequestUpdate(u))) => {
                    check_update(inner, reader, &u, ParamContext::UpdateSubscribeTracks)?;
                    if let Some(new) = u.params.track_namespace_prefix.clone() {
                        // draft-19 §10.9.2: the new prefix re-checks PREFIX_OVERLAP.
                        let moved = {
                            let mut t = lock(&inner.track_prefixes);
                            t.remove(prefix, key);
                            if t.overlaps(&new) {
                                t.insert(prefix, key, ());
                                false
                            } else {
                                t.insert(&new, key, ());
                                true
                            }
                        };
                        if !moved {
                            writer.send(RequestError::new(RequestErrorCode::PREFIX_OVERLAP, "new prefix overlaps")).await?;
                            writer.finish();
                            break Ok(());
                        }
                        *prefix = new.clone();
                        prefix_tx.send_replace(new);
                    }
                    writer.send(RequestOk::default()).await?;
                }
                Ok(Some(Message::Goaway(g))) => { goaway.on_goaway(inner, g)?; }
                Ok(Some(m)) => break Err(Error::protocol(format!("{} on a SUBSCRIBE_TRACKS stream", m.name()))),
                Ok(None) => reader_open = false,
                Err(Error::Cancelled(code)) => { writer.reset(code); break Ok(()); }
                Err(e) => break Err(e),
            },
            s = writer.stopped(), if watch_stop => {
                watch_stop = false;
                if let Ok(Some(code)) = s {
                    reader.stop(StreamResetCode(code));
                    break Ok(());
                }
            }
            e = inner.closed() => break Err(e),
        }
    };
    ended_tx.send_replace(true);
    res
}
