//! PUBLISH_NAMESPACE, both sides (draft-19 §6.2, §10.15).

use std::collections::VecDeque;
use std::sync::Arc;

use moq_core::TrackNamespace;
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::{
    Message, ParamContext, Parameters, PublishNamespace, RequestError, RequestOk, RequestUpdate,
};
use tokio::sync::{mpsc, oneshot, watch};

use super::index::NamespaceRegistration;
use crate::error::Error;
use crate::request::{RequestGoaway, check_update, first_response};
use crate::session::stream::{Reader, Writer, cancel};
use crate::session::{AuthRequest, GoawayInfo, RequestKind, SessionInner};

enum Command {
    Update(Parameters, oneshot::Sender<Result<(), Error>>),
}

/// A namespace we announced with PUBLISH_NAMESPACE and the peer accepted.
///
/// While it lives the namespace is registered in the session's
/// [`crate::Session::namespaces`], so the peer's SUBSCRIBE_NAMESPACE finds it. Dropping it (or
/// [`PublishedNamespace::withdraw`]) withdraws the announcement by cancelling its request
/// stream (draft-19 §6.2). The peer can revoke it; [`PublishedNamespace::ended`] tells when.
#[derive(Debug)]
pub struct PublishedNamespace {
    namespace: TrackNamespace,
    request_id: u64,
    cmd: mpsc::Sender<Command>,
    state: watch::Receiver<Option<Error>>,
    goaway: watch::Receiver<Option<GoawayInfo>>,
    _registration: NamespaceRegistration,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

impl PublishedNamespace {
    /// The announced namespace.
    pub fn namespace(&self) -> &TrackNamespace {
        &self.namespace
    }

    /// The PUBLISH_NAMESPACE's Request ID.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// True until the peer revokes the announcement or the session ends.
    pub fn is_active(&self) -> bool {
        self.state.borrow().is_none()
    }

    /// Resolves when the announcement ends: [`Error::Cancelled`] if the peer revoked it, or the
    /// session's error.
    pub async fn ended(&self) -> Error {
        let mut rx = self.state.clone();
        let res = rx
            .wait_for(|s| s.is_some())
            .await
            .ok()
            .and_then(|s| s.clone());
        res.unwrap_or(Error::Cancelled(StreamResetCode::CANCELLED))
    }

    /// Sends REQUEST_UPDATE (for example a fresh AUTHORIZATION_TOKEN) and waits for the answer.
    /// A REQUEST_ERROR ends the announcement (draft-19 §10.9).
    pub async fn update(&self, params: Parameters) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::Update(params, tx))
            .await
            .map_err(|_| self.state.borrow().clone().unwrap_or(Error::EndedEarly))?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// A GOAWAY the peer sent on this request's stream: re-announce elsewhere (draft-19 §10.4).
    pub fn goaway(&self) -> Option<GoawayInfo> {
        self.goaway.borrow().clone()
    }

    /// Withdraws the announcement now (the same as dropping it).
    pub fn withdraw(self) {}
}

/// Announces `namespace` and waits for the peer's answer.
pub(crate) async fn publish_namespace(
    inner: Arc<SessionInner>,
    namespace: TrackNamespace,
    params: Parameters,
) -> Result<PublishedNamespace, Error> {
    // draft-19 §3.2.1-2: "." and ".session" may not be published by the application.
    if namespace.is_dot() || namespace.is_session_level() {
        return Err(Error::Invalid(format!("namespace {namespace} is reserved")));
    }
    params.validate(ParamContext::PublishNamespace, inner.version)?;
    let registration = inner.config.namespaces.publish(namespace.clone());
    let (mut writer, mut reader) = inner.open_request().await?;
    let guard = inner.request_guard();
    let request_id = inner.next_request_id();
    writer
        .send(PublishNamespace {
            request_id,
            namespace: namespace.clone(),
            params,
        })
        .await?;
    if let Err(e) = first_response(&inner, &mut reader, ParamContext::PublishNamespaceOk).await {
        match &e {
            Error::Rejected(_) => writer.finish(),
            _ => cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED),
        }
        return Err(e);
    }
    tracing::debug!(%namespace, request_id, "namespace published");
    let (cmd_tx, cmd_rx) = mpsc::channel(4);
    let (state_tx, state_rx) = watch::channel(None);
    let (goaway_tx, goaway_rx) = watch::channel(None);
    tokio::spawn(async move {
        let _guard = guard;
        let end = run_published(&inner, writer, reader, cmd_rx, &goaway_tx).await;
        state_tx.send_replace(Some(end));
    });
    Ok(PublishedNamespace {
        namespace,
        request_id,
        cmd: cmd_tx,
        state: state_rx,
        goaway: goaway_rx,
        _registration: registration,
    })
}

/// Watches an accepted announcement until it is withdrawn, revoked, or the session ends.
async fn run_published(
    inner: &SessionInner,
    mut writer: Writer,
    mut reader: Reader,
    mut cmd: mpsc::Receiver<Command>,
    goaway_tx: &watch::Sender<Option<GoawayInfo>>,
) -> Error {
    let mut pending: VecDeque<oneshot::Sender<Result<(), Error>>> = VecDeque::new();
    let mut reader_open = true;
    let mut watch_stop = true;
    let mut stop_code: Option<StreamResetCode> = None;
    let mut goaway = RequestGoaway::default();
    let end = loop {
        // Revoked: the peer stopped our half and its own half has ended (draft-19 §3.3.3).
        if let (false, Some(code)) = (reader_open, stop_code) {
            writer.reset(code);
            break Error::Cancelled(code);
        }
        tokio::select! {
            c = cmd.recv() => match c {
                None => {
                    // Withdrawn: cancel the request (draft-19 §6.2, §3.3.3).
                    cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED);
                    break Error::Cancelled(StreamResetCode::CANCELLED);
                }
                Some(Command::Update(params, reply)) => {
                    let update = RequestUpdate { request_id: inner.next_request_id(), params };
                    match writer.send(update).await {
                        Ok(()) => pending.push_back(reply),
                        Err(e) => { let _ = reply.send(Err(e)); }
                    }
                }
            },
            m = reader.next(), if reader_open => match m {
                Ok(Some(Message::RequestOk(ok))) => {
                    let Some(reply) = pending.pop_front() else {
                        // draft-19 §6.2: more than one answer to PUBLISH_NAMESPACE.
                        break close(inner, Error::protocol("second REQUEST_OK for PUBLISH_NAMESPACE"));
                    };
                    if let Err(e) = ok.validate(ParamContext::RequestUpdateOk, inner.version) {
                        break close(inner, e.into());
                    }
                    let _ = reply.send(Ok(()));
                }
                Ok(Some(Message::RequestError(e))) => {
                    let Some(reply) = pending.pop_front() else {
                        break close(inner, Error::protocol("REQUEST_ERROR after PUBLISH_NAMESPACE was accepted"));
                    };
                    let _ = reply.send(Err(Error::Rejected(Box::new(e.clone()))));
                    // draft-19 §10.9: a failed update closes the namespace request.
                    writer.finish();
                    break Error::Rejected(Box::new(e));
                }
                Ok(Some(Message::Goaway(g))) => match goaway.on_goaway(inner, g) {
                    Ok(info) => { goaway_tx.send_replace(Some(info)); }
                    Err(e) => break e,
                },
                Ok(Some(m)) => break close(inner, Error::protocol(format!("{} on a PUBLISH_NAMESPACE stream", m.name()))),
                // A FIN only means no more messages (draft-19 §3.3.2).
                Ok(None) => reader_open = false,
                Err(Error::Cancelled(code)) => {
                    // Revoked by the peer (draft-19 §6.2).
                    writer.reset(code);
                    break Error::Cancelled(code);
                }
                Err(e) => break close(inner, e),
            },
            s = writer.stopped(), if watch_stop => {
                watch_stop = false;
                match s {
                    // Keep reading: messages the peer sent before cancelling still count.
                    Ok(Some(code)) => stop_code = Some(StreamResetCode(code)),
                    Ok(None) => {}
                    Err(e) => break Error::from(e),
                }
            },
            e = inner.closed() => break e,
        }
    };
    let end = inner.error(end);
    for reply in pending {
        let _ = reply.send(Err(end.clone()));
    }
    end
}

fn close(inner: &SessionInner, e: Error) -> Error {
    if e.is_session_error() {
        inner.close(e.clone());
    }
    e
}

/// Answers a PUBLISH_NAMESPACE from the peer: checks, authorizes, registers the namespace in
/// the session's `announced` index and keeps it there until the peer withdraws it, we revoke
/// it, or the session ends.
pub(crate) async fn serve_publish_namespace(
    inner: &Arc<SessionInner>,
    msg: PublishNamespace,
    mut writer: Writer,
    mut reader: Reader,
) -> Result<(), Error> {
    let ns = msg.namespace;
    let reject = |code, reason: &str| RequestError::new(code, reason);
    // draft-19 §3.2.1-2: "." and unknown ".session" namespaces do not exist.
    let refusal = if ns.is_dot() || ns.is_session_level() {
        Some(reject(
            RequestErrorCode::DOES_NOT_EXIST,
            "reserved namespace",
        ))
    } else if inner.announced_count() >= inner.config.limits.max_published_namespaces {
        Some(reject(
            RequestErrorCode::EXCESSIVE_LOAD,
            "too many published namespaces",
        ))
    } else {
        None
    };
    let mut tokens = inner.resolve_tokens(&msg.params.authorization_tokens)?;
    let refusal = match refusal {
        Some(r) => Some(r),
        None => inner
            .authorize(&AuthRequest {
                kind: RequestKind::PublishNamespace,
                namespace: &ns,
                track_name: None,
                tokens: &tokens,
            })
            .await
            .err(),
    };
    if let Some(err) = refusal {
        tracing::debug!(namespace = %ns, code = ?err.code, "PUBLISH_NAMESPACE refused");
        writer.send(err).await?;
        writer.finish();
        return Ok(());
    }
    let _registration = inner.config.announced.publish(ns.clone());
    let (key, mut revoke) = inner.track_announced(ns.clone());
    let res = async {
        writer.send(RequestOk::default()).await?;
        tracing::debug!(namespace = %ns, "PUBLISH_NAMESPACE accepted");
        let mut reader_open = true;
        let mut watch_stop = true;
        let mut goaway = RequestGoaway::default();
        loop {
            tokio::select! {
                m = reader.next(), if reader_open => match m {
                    Ok(Some(Message::RequestUpdate(u))) => {
                        check_update(inner, &reader, &u, ParamContext::UpdatePublishNamespace)?;
                        // draft-19 §10.9: a parameter absent from REQUEST_UPDATE keeps its value, so
                    // the request's tokens stand unless the update brings new ones.
                    let new_tokens = inner.resolve_tokens(&u.params.authorization_tokens)?;
                    if !new_tokens.is_empty() {
                        tokens = new_tokens;
                    }
                        let auth = AuthRequest { kind: RequestKind::PublishNamespace, namespace: &ns, track_name: None, tokens: &tokens };
                        match inner.authorize(&auth).await {
                            Ok(()) => writer.send(RequestOk::default()).await?,
                            Err(e) => {
                                // draft-19 §10.9: a failed update closes the stream.
                                writer.send(e).await?;
                                writer.finish();
                                return Ok(());
                            }
                        }
                    }
                    Ok(Some(Message::Goaway(g))) => { goaway.on_goaway(inner, g)?; }
                    Ok(Some(m)) => return Err(Error::protocol(format!("{} on a PUBLISH_NAMESPACE stream", m.name()))),
                    Ok(None) => reader_open = false,
                    // Withdrawn by the publisher (draft-19 §6.2).
                    Err(Error::Cancelled(code)) => { writer.reset(code); return Ok(()); }
                    Err(e) => return Err(e),
                },
                s = writer.stopped(), if watch_stop => match s {
                    Ok(Some(code)) => { reader.stop(StreamResetCode(code)); return Ok(()); }
                    Ok(None) => watch_stop = false,
                    Err(e) => return Err(e.into()),
                },
                code = revoke.recv() => {
                    // We revoke our acceptance by cancelling (draft-19 §6.2).
                    cancel(&mut writer, &mut reader, code.unwrap_or(StreamResetCode::CANCELLED));
                    return Ok(());
                }
                e = inner.closed() => return Err(e),
            }
        }
    }
    .await;
    inner.untrack_announced(key);
    tracing::debug!(namespace = %ns, "PUBLISH_NAMESPACE ended");
    res
}
