//! SUBSCRIBE_NAMESPACE, both sides (draft-19 §6.1, §10.16-§10.18).

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use moq_core::TrackNamespace;
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::{
    Message, Namespace, NamespaceDone, ParamContext, Parameters, RequestError, RequestOk,
    RequestUpdate, SubscribeNamespace,
};
use tokio::sync::{mpsc, oneshot, watch};

use super::index::NamespaceEvent;
use crate::error::Error;
use crate::request::{RequestGoaway, check_update, first_response};
use crate::session::stream::{Reader, Writer, cancel};
use crate::session::{AuthRequest, GoawayInfo, RequestKind, SessionInner, lock};

enum Command {
    UpdatePrefix(
        TrackNamespace,
        Parameters,
        oneshot::Sender<Result<(), Error>>,
    ),
}

/// The namespaces a peer knows under a prefix, as they come and go (SUBSCRIBE_NAMESPACE).
///
/// Yields [`NamespaceEvent::Added`] for each NAMESPACE and [`NamespaceEvent::Removed`] for each
/// NAMESPACE_DONE, with full namespaces (prefix and suffix joined). If the peer ends the
/// response stream (FIN or reset) every active namespace is reported removed (draft-19 §10.18)
/// and the stream ends; if the session ends it yields that error, then ends. Dropping it
/// cancels the subscription.
///
/// Implements [`futures::Stream`].
#[derive(Debug)]
pub struct NamespaceSubscription {
    prefix: watch::Receiver<TrackNamespace>,
    request_id: u64,
    events: mpsc::Receiver<Result<NamespaceEvent, Error>>,
    cmd: mpsc::Sender<Command>,
    goaway: watch::Receiver<Option<GoawayInfo>>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Command")
    }
}

impl NamespaceSubscription {
    /// The current prefix.
    pub fn prefix(&self) -> TrackNamespace {
        self.prefix.borrow().clone()
    }

    /// The SUBSCRIBE_NAMESPACE's Request ID.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The next change; `None` once the subscription has ended.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Result<NamespaceEvent, Error>> {
        self.events.recv().await
    }

    /// Moves the subscription to a new prefix with REQUEST_UPDATE and TRACK_NAMESPACE_PREFIX
    /// (draft-19 §10.9.2). On success every namespace under the old prefix is reported removed
    /// and those under the new one follow.
    pub async fn update_prefix(&self, prefix: TrackNamespace) -> Result<(), Error> {
        let (tx, rx) = oneshot::channel();
        self.cmd
            .send(Command::UpdatePrefix(prefix, Parameters::default(), tx))
            .await
            .map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// A GOAWAY the peer sent on this request's stream.
    pub fn goaway(&self) -> Option<GoawayInfo> {
        self.goaway.borrow().clone()
    }
}

impl futures::Stream for NamespaceSubscription {
    type Item = Result<NamespaceEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}

/// Sends SUBSCRIBE_NAMESPACE and waits for REQUEST_OK.
pub(crate) async fn subscribe_namespace(
    inner: Arc<SessionInner>,
    prefix: TrackNamespace,
    params: Parameters,
) -> Result<NamespaceSubscription, Error> {
    params.validate(ParamContext::SubscribeNamespace, inner.version)?;
    let (mut writer, mut reader) = inner.open_request().await?;
    let guard = inner.request_guard();
    let request_id = inner.next_request_id();
    writer
        .send(SubscribeNamespace {
            request_id,
            prefix: prefix.clone(),
            params,
        })
        .await?;
    // draft-19 §10.18: anything but REQUEST_OK / REQUEST_ERROR first is a PROTOCOL_VIOLATION.
    if let Err(e) = first_response(&inner, &mut reader, ParamContext::SubscribeNamespaceOk).await {
        match &e {
            Error::Rejected(_) => writer.finish(),
            _ => cancel(&mut writer, &mut reader, StreamResetCode::CANCELLED),
        }
        return Err(e);
    }
    let (events_tx, events_rx) = mpsc::channel(256);
    let (cmd_tx, cmd_rx) = mpsc::channel(4);
    let (prefix_tx, prefix_rx) = watch::channel(prefix);
    let (goaway_tx, goaway_rx) = watch::channel(None);
    tokio::spawn(async move {
        let _guard = guard;
        let mut task = Subscriber {
            inner: &inner,
            writer,
            reader,
            events: events_tx,
            prefix: prefix_tx,
            goaway: goaway_tx,
            active: HashSet::new(),
        };
        task.run(cmd_rx).await;
    });
    Ok(NamespaceSubscription {
        prefix: prefix_rx,
        request_id,
        events: events_rx,
        cmd: cmd_tx,
        goaway: goaway_rx,
    })
}

struct Subscriber<'a> {
    inner: &'a SessionInner,
    writer: Writer,
    reader: Reader,
    events: mpsc::Sender<Result<NamespaceEvent, Error>>,
    prefix: watch::Sender<TrackNamespace>,
    goaway: watch::Sender<Option<GoawayInfo>>,
    active: HashSet<TrackNamespace>,
}

enum Next {
    Continue,
    /// The peer ended the response stream: every active namespace is done.
    Ended(Option<Error>),
    /// The subscription is over with this error (already reported or fatal).
    Failed(Error),
    /// The application dropped the handle.
    Dropped,
}

impl Subscriber<'_> {
    async fn run(&mut self, mut cmd: mpsc::Receiver<Command>) {
        let mut pending: VecDeque<(TrackNamespace, oneshot::Sender<Result<(), Error>>)> =
            VecDeque::new();
        let mut goaway = RequestGoaway::default();
        let mut watch_stop = true;
        let mut stop_code: Option<StreamResetCode> = None;
        let next = loop {
            let step = tokio::select! {
                c = cmd.recv() => match c {
                    None => Next::Dropped,
                    Some(Command::UpdatePrefix(prefix, mut params, reply)) => {
                        params.track_namespace_prefix = Some(prefix.clone());
                        let update = RequestUpdate { request_id: self.inner.next_request_id(), params };
                        match self.writer.send(update).await {
                            Ok(()) => pending.push_back((prefix, reply)),
                            Err(e) => { let _ = reply.send(Err(e)); }
                        }
                        Next::Continue
                    }
                },
                m = self.reader.next() => match self.on_message(m, &mut pending, &mut goaway).await {
                    // A FIN after the peer stopped our half ends the request as cancelled.
                    Next::Ended(None) => Next::Ended(stop_code.map(Error::Cancelled)),
                    n => n,
                },
                s = self.writer.stopped(), if watch_stop => {
                    watch_stop = false;
                    match s {
                        // Keep reading until the peer's half ends: what it sent still counts.
                        Ok(Some(code)) => { stop_code = Some(StreamResetCode(code)); Next::Continue }
                        Ok(None) => Next::Continue,
                        Err(e) => Next::Failed(e.into()),
                    }
                },
                e = self.inner.closed() => Next::Failed(e),
            };
            match step {
                Next::Continue => continue,
                other => break other,
            }
        };
        let end = match next {
            Next::Dropped => {
                // Cancelled by the application (draft-19 §6.1: reset / STOP_SENDING).
                cancel(
                    &mut self.writer,
                    &mut self.reader,
                    StreamResetCode::CANCELLED,
                );
                return;
            }
            Next::Ended(err) => {
                // draft-19 §10.18: a FIN or reset counts as NAMESPACE_DONE for each active one.
                self.writer.finish();
                let mut gone: Vec<TrackNamespace> = self.active.drain().collect();
                gone.sort();
                for ns in gone {
                    if self
                        .events
                        .send(Ok(NamespaceEvent::Removed(ns)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                err
            }
            Next::Failed(e) => Some(self.inner.error(e)),
            Next::Continue => None,
        };
        for (_, reply) in pending {
            let _ = reply.send(Err(end.clone().unwrap_or(Error::EndedEarly)));
        }
        if let Some(e) = end {
            let _ = self.events.send(Err(e)).await;
        }
    }

    async fn emit(&mut self, ev: NamespaceEvent) -> Next {
        match self.events.send(Ok(ev)).await {
            Ok(()) => Next::Continue,
            Err(_) => Next::Dropped,
        }
    }

    fn violation(&self, reason: String) -> Next {
        let e = Error::protocol(reason);
        self.inner.close(e.clone());
        Next::Failed(e)
    }

    async fn on_message(
        &mut self,
        m: Result<Option<Message>, Error>,
        pending: &mut VecDeque<(TrackNamespace, oneshot::Sender<Result<(), Error>>)>,
        goaway: &mut RequestGoaway,
    ) -> Next {
        let prefix = self.prefix.borrow().clone();
        match m {
            Ok(Some(Message::Namespace(n))) => {
                let full = match prefix.join(&n.suffix) {
                    Ok(f) => f,
                    Err(e) => return self.violation(format!("NAMESPACE suffix: {e}")),
                };
                if self.active.insert(full.clone()) {
                    return self.emit(NamespaceEvent::Added(full)).await;
                }
                Next::Continue
            }
            Ok(Some(Message::NamespaceDone(n))) => {
                let full = prefix.join(&n.suffix).ok();
                match full {
                    Some(full) if self.active.remove(&full) => {
                        self.emit(NamespaceEvent::Removed(full)).await
                    }
                    // draft-19 §10.18: NAMESPACE_DONE before its NAMESPACE is a PROTOCOL_VIOLATION.
                    _ => self.violation(format!(
                        "NAMESPACE_DONE for {} before its NAMESPACE",
                        n.suffix
                    )),
                }
            }
            Ok(Some(Message::RequestOk(ok))) => {
                let Some((new_prefix, reply)) = pending.pop_front() else {
                    return self.violation("second REQUEST_OK for SUBSCRIBE_NAMESPACE".into());
                };
                if let Err(e) = ok.validate(ParamContext::RequestUpdateOk, self.inner.version) {
                    let e = Error::from(e);
                    self.inner.close(e.clone());
                    return Next::Failed(e);
                }
                // The namespaces that follow are relative to the new prefix.
                let mut gone: Vec<TrackNamespace> = self.active.drain().collect();
                gone.sort();
                self.prefix.send_replace(new_prefix);
                let _ = reply.send(Ok(()));
                for ns in gone {
                    if let Next::Dropped = self.emit(NamespaceEvent::Removed(ns)).await {
                        return Next::Dropped;
                    }
                }
                Next::Continue
            }
            Ok(Some(Message::RequestError(e))) => match pending.pop_front() {
                Some((_, reply)) => {
                    let _ = reply.send(Err(Error::Rejected(Box::new(e.clone()))));
                    // draft-19 §10.9: the responder closes the stream after a failed update.
                    Next::Continue
                }
                None => {
                    self.violation("REQUEST_ERROR after SUBSCRIBE_NAMESPACE was accepted".into())
                }
            },
            Ok(Some(Message::Goaway(g))) => match goaway.on_goaway(self.inner, g) {
                Ok(info) => {
                    self.goaway.send_replace(Some(info));
                    Next::Continue
                }
                Err(e) => Next::Failed(e),
            },
            Ok(Some(m)) => self.violation(format!("{} on a SUBSCRIBE_NAMESPACE stream", m.name())),
            Ok(None) => Next::Ended(None),
            Err(Error::Cancelled(code)) => Next::Ended(Some(Error::Cancelled(code))),
            Err(e) => {
                if e.is_session_error() {
                    self.inner.close(e.clone());
                }
                Next::Failed(e)
            }
        }
    }
}

/// Removes a prefix from the session's overlap space when the subscription ends.
struct PrefixSlot<'a> {
    inner: &'a SessionInner,
    prefix: TrackNamespace,
    key: u64,
}

impl Drop for PrefixSlot<'_> {
    fn drop(&mut self) {
        lock(&self.inner.namespace_prefixes).remove(&self.prefix, self.key);
    }
}

/// Takes a slot for `prefix` in the session's SUBSCRIBE_NAMESPACE overlap space, or `None` if
/// it overlaps a live one (draft-19 §10.18: equal, a prefix of, or an extension of).
fn take_slot<'a>(
    inner: &'a SessionInner,
    prefix: &TrackNamespace,
    key: u64,
) -> Option<PrefixSlot<'a>> {
    let mut t = lock(&inner.namespace_prefixes);
    if t.overlaps(prefix) {
        return None;
    }
    t.insert(prefix, key, ());
    Some(PrefixSlot {
        inner,
        prefix: prefix.clone(),
        key,
    })
}

/// Answers a SUBSCRIBE_NAMESPACE from the peer from the session's namespace index.
pub(crate) async fn serve_subscribe_namespace(
    inner: &Arc<SessionInner>,
    msg: SubscribeNamespace,
    mut writer: Writer,
    mut reader: Reader,
) -> Result<(), Error> {
    let mut tokens = inner.resolve_tokens(&msg.params.authorization_tokens)?;
    let mut prefix = msg.prefix;
    let limits = &inner.config.limits;
    let refusal = if lock(&inner.namespace_prefixes).len() >= limits.max_namespace_subscriptions {
        Some(RequestError::new(
            RequestErrorCode::EXCESSIVE_LOAD,
            "too many namespace subscriptions",
        ))
    } else {
        // draft-19 §10.18: the publisher MUST ensure the subscriber is authorized.
        inner
            .authorize(&AuthRequest {
                kind: RequestKind::SubscribeNamespace,
                namespace: &prefix,
                track_name: None,
                tokens: &tokens,
            })
            .await
            .err()
    };
    let key = inner.next_key();
    let slot = match refusal {
        Some(e) => Err(e),
        None => take_slot(inner, &prefix, key).ok_or_else(|| {
            RequestError::new(
                RequestErrorCode::PREFIX_OVERLAP,
                "prefix overlaps an existing SUBSCRIBE_NAMESPACE",
            )
        }),
    };
    let mut slot = match slot {
        Ok(s) => s,
        Err(e) => {
            // draft-19 §10.18: on error the stream is closed with a FIN.
            tracing::debug!(%prefix, code = ?e.code, "SUBSCRIBE_NAMESPACE refused");
            writer.send(e).await?;
            writer.finish();
            return Ok(());
        }
    };
    let (now, mut watch) = inner
        .config
        .namespaces
        .watch(&prefix, limits.namespace_queue);
    // draft-19 §10.18: REQUEST_OK first, then a NAMESPACE for each known match.
    writer.send(RequestOk::default()).await?;
    send_snapshot(&mut writer, &prefix, now).await?;
    tracing::debug!(%prefix, "SUBSCRIBE_NAMESPACE accepted");

    let mut reader_open = true;
    let mut watch_stop = true;
    let mut goaway = RequestGoaway::default();
    loop {
        tokio::select! {
            ev = watch.next() => match ev {
                Some(NamespaceEvent::Added(ns)) => {
                    if let Some(suffix) = ns.strip_prefix(&prefix) {
                        writer.send(Namespace { suffix }).await?;
                    }
                }
                Some(NamespaceEvent::Removed(ns)) => {
                    if let Some(suffix) = ns.strip_prefix(&prefix) {
                        writer.send(NamespaceDone { suffix }).await?;
                    }
                }
                None => {
                    // We fell behind the index: reset rather than queue without bound
                    // (draft-19 §10.18 allows resetting a blocked response stream).
                    tracing::debug!(%prefix, "namespace subscription fell behind; resetting");
                    cancel(&mut writer, &mut reader, StreamResetCode::TOO_FAR_BEHIND);
                    return Ok(());
                }
            },
            m = reader.next(), if reader_open => match m {
                Ok(Some(Message::RequestUpdate(u))) => {
                    check_update(inner, &reader, &u, ParamContext::UpdateSubscribeNamespace)?;
                    // draft-19 §10.9: a parameter absent from REQUEST_UPDATE keeps its value, so
                    // the request's tokens stand unless the update brings new ones.
                    let new_tokens = inner.resolve_tokens(&u.params.authorization_tokens)?;
                    if !new_tokens.is_empty() {
                        tokens = new_tokens;
                    }
                    let new_prefix = u.params.track_namespace_prefix.clone().unwrap_or_else(|| prefix.clone());
                    let auth = AuthRequest { kind: RequestKind::SubscribeNamespace, namespace: &new_prefix, track_name: None, tokens: &tokens };
                    let mut refusal = inner.authorize(&auth).await.err();
                    if refusal.is_none() && new_prefix != prefix {
                        // draft-19 §10.9.2: the new prefix re-checks PREFIX_OVERLAP.
                        let mut t = lock(&inner.namespace_prefixes);
                        t.remove(&prefix, key);
                        if t.overlaps(&new_prefix) {
                            t.insert(&prefix, key, ());
                            refusal = Some(RequestError::new(RequestErrorCode::PREFIX_OVERLAP, "new prefix overlaps"));
                        } else {
                            t.insert(&new_prefix, key, ());
                            slot.prefix = new_prefix.clone();
                        }
                    }
                    if let Some(e) = refusal {
                        // draft-19 §10.9: a failed update closes the stream.
                        writer.send(e).await?;
                        writer.finish();
                        return Ok(());
                    }
                    if new_prefix != prefix {
                        prefix = new_prefix;
                        let (now, w) = inner.config.namespaces.watch(&prefix, limits.namespace_queue);
                        watch = w;
                        writer.send(RequestOk::default()).await?;
                        send_snapshot(&mut writer, &prefix, now).await?;
                    } else {
                        writer.send(RequestOk::default()).await?;
                    }
                }
                Ok(Some(Message::Goaway(g))) => { goaway.on_goaway(inner, g)?; }
                Ok(Some(m)) => return Err(Error::protocol(format!("{} on a SUBSCRIBE_NAMESPACE stream", m.name()))),
                // A FIN from the subscriber is not a cancellation (draft-19 §3.3.2).
                Ok(None) => reader_open = false,
                Err(Error::Cancelled(code)) => { writer.reset(code); return Ok(()); }
                Err(e) => return Err(e),
            },
            s = writer.stopped(), if watch_stop => match s {
                Ok(Some(code)) => { reader.stop(StreamResetCode(code)); return Ok(()); }
                Ok(None) => watch_stop = false,
                Err(e) => return Err(e.into()),
            },
            e = inner.closed() => return Err(e),
        }
    }
}

async fn send_snapshot(
    writer: &mut Writer,
    prefix: &TrackNamespace,
    now: Vec<TrackNamespace>,
) -> Result<(), Error> {
    for ns in now {
        if let Some(suffix) = ns.strip_prefix(prefix) {
            writer.send(Namespace { suffix }).await?;
        }
    }
    Ok(())
}
