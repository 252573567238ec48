//! One request, from either end: the rules every request kind shares (draft-19 §3.3.2, §3.3.3,
//! §10.1, §10.4, §10.9).
//!
//! A request kind (SUBSCRIBE, FETCH, ...) supplies its first message, its answer and what it
//! does once established; everything else is here: the Request ID, the one first response,
//! REQUEST_UPDATE in both directions with MAX_REQUEST_UPDATES, GOAWAY on the request stream,
//! FIN and cancellation, tokens and authorization, and waiting for the application's decision
//! while the peer may give up.

use std::sync::Arc;

use moq_core::TrackNamespace;
use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::{
    Goaway, Message, ParamContext, Parameters, RequestError, RequestMessage, RequestOk,
    RequestUpdate,
};
use tokio::sync::{mpsc, oneshot, watch};

use super::handle::{Command, EndSlot, Feed, RequestHandle, UpdateReply};
use super::stream::RequestStream;
use crate::error::Error;
use crate::session::{AuthRequest, GoawayInfo, RequestKind, ResolvedToken, SessionCore};

mod park;
mod wait;

use park::Counted;
pub(crate) use park::Parked;

/// What happened next on an established request.
#[derive(Debug)]
pub(crate) enum Event {
    /// A message for the kind to handle: anything but REQUEST_UPDATE, the answers to ours, and
    /// GOAWAY. Pass one the kind does not expect to [`Request::unexpected`].
    Message(Message),
    /// The peer's REQUEST_UPDATE, already checked (Request ID, parameters, MAX_REQUEST_UPDATES,
    /// tokens); answer it with [`Request::answer_update`]. `Err` is one that fails at the
    /// request level (an invalid Range Filter, draft-19 §5.1.3): refuse it with that error,
    /// which ends the request as the kind says (§10.9.1).
    Update(Result<RequestUpdate, RequestError>),
    /// The peer answered one of our REQUEST_UPDATEs.
    Updated(Updated),
    /// The peer finished its half: it sends nothing more, which does not cancel the request
    /// (draft-19 §3.3.2).
    Fin,
    /// The application dropped its handle.
    Dropped,
    /// The request is over: the peer cancelled it (both halves are ended with its code), or
    /// the session failed (it is closed already).
    Ended(Error),
}

/// The peer's answer to one of our REQUEST_UPDATEs, for the kind to apply before replying.
#[derive(Debug)]
pub(crate) struct Updated {
    /// What the update asked for.
    pub(crate) params: Parameters,
    /// REQUEST_OK (checked as REQUEST_UPDATE_OK) or REQUEST_ERROR.
    pub(crate) answer: Result<RequestOk, RequestError>,
    reply: UpdateReply,
}

impl Updated {
    /// Tells the application how its update went.
    pub(crate) fn reply(self) {
        let res = self.answer.map_err(|e| Error::Rejected(Box::new(e)));
        let _ = self.reply.send(res);
    }
}

/// How the wait for a decision on the peer's request ended.
#[derive(Debug)]
pub(crate) enum Decision<T> {
    /// The decision.
    Made(T),
    /// Whoever was to decide dropped the request unanswered.
    Unanswered,
    /// The peer cancelled, or the session failed (see [`Event::Ended`]): nothing more to do.
    Ended,
}

/// An update we sent, waiting for its answer.
#[derive(Debug)]
struct Pending {
    params: Parameters,
    reply: UpdateReply,
}

/// One request, as the end that sent it (the requester) or the end that answers it.
/// Whether the peer may learn that a namespace exists, by a request's tokens.
#[derive(Clone)]
pub(crate) struct Visibility(Arc<dyn Fn(&TrackNamespace) -> bool + Send + Sync>);

impl std::fmt::Debug for Visibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Visibility")
    }
}

impl Visibility {
    pub(crate) fn allows(&self, namespace: &TrackNamespace) -> bool {
        (self.0)(namespace)
    }
}

#[derive(Debug)]
pub(crate) struct Request {
    /// Counts the request while it lives (see [`Counted`]).
    core: Counted,
    stream: RequestStream,
    /// The request message's name, for errors ("SUBSCRIBE").
    name: &'static str,
    id: u64,
    /// REQUEST_UPDATEs the peer may send on this request, checked against this context.
    peer_updates: Option<ParamContext>,
    /// What our own REQUEST_UPDATEs are checked against.
    our_updates: Option<ParamContext>,
    /// The request's AUTHORIZATION_TOKENs, resolved (the responder's view).
    tokens: Box<[ResolvedToken]>,
    /// The responder's end of a peer's request not answered yet: its answer is reported to
    /// the session's observer.
    unanswered: bool,
    /// When the request was sent or arrived.
    /// As [`since_base`] gives it: 8 bytes, where an `Instant` is 16.
    opened: u64,
    /// True until the peer finishes or resets its half.
    reader_open: bool,
    /// True until STOP_SENDING (or the end of our half) was seen.
    watch_stop: bool,
    /// Whether the peer's STOP_SENDING on our half cancels the request at once; otherwise
    /// reading goes on until its half ends, so what it sent before still counts.
    stop_cancels: bool,
    /// NAMESPACE arrives in the MoQ Cluster extension's extended form (a SUBSCRIBE_NAMESPACE
    /// of a session that negotiated it).
    clustered: bool,
    /// STOP_SENDING seen while reading goes on. Boxed: rare, and inline it is 16 bytes for
    /// every request's life.
    stopped: Option<Box<StreamResetCode>>,
    /// A message that arrived before the answer, handed to the kind after it.
    /// Boxed: rare, and a message inline is ~280 bytes for the request's life.
    deferred: Option<Box<Message>>,
    /// Made when a handle or a GOAWAY first needs it: most requests see neither, and a watch
    /// channel is ~390 bytes for the request's life.
    goaway: Option<watch::Sender<Option<GoawayInfo>>>,
    /// Our REQUEST_UPDATEs awaiting their answer, oldest first: a few at most
    /// (MAX_REQUEST_UPDATES), made with the first and freed with the last (8 bytes where an
    /// empty `Vec` inline was 24 for every request's life).
    #[allow(clippy::box_collection)]
    pending: Option<Box<Vec<Pending>>>,
    commands: Option<mpsc::Receiver<Command>>,
    /// Made when a handle or a feed first needs it: a peer's PUBLISH_NAMESPACE has neither,
    /// and a latch is ~120 bytes for the request's life.
    end: Option<EndSlot>,
}

impl Request {
    /// Sends a request: checks its parameters, opens its stream, and sends `first` with the
    /// next Request ID. Refused once the session ended or the peer sent GOAWAY.
    pub(crate) async fn open<M: RequestMessage>(
        core: &Arc<SessionCore>,
        first: M,
    ) -> Result<Request, Error> {
        first.params().validate(M::PARAMS, core.version())?;
        core.check_outgoing(first.params())?;
        let first: Message = first.into();
        let kind = first.request_type();
        let (mut writer, reader) = tokio::select! {
            r = core.open_request_stream(kind) => r?,
            e = core.closed() => return Err(e),
        };
        let id = tokio::select! {
            r = writer.send_fresh(first, core.next_request_id()) => r?,
            e = core.closed() => return Err(e),
        };
        let stream = RequestStream::new(writer, reader);
        Ok(Request::new(core, stream, M::NAME, id, true))
    }

    /// The responder's end of the peer's request `msg`; resolves its tokens (alias errors close
    /// the session, draft-19 §10.2.2). It takes no REQUEST_UPDATE until
    /// [`Request::take_updates`]. `None` if `msg` opens no request.
    pub(crate) fn accept(
        core: &Arc<SessionCore>,
        stream: RequestStream,
        msg: &Message,
    ) -> Option<Result<Request, Error>> {
        let (id, params) = msg.request()?;
        let tokens = match core.resolve_tokens(&params.authorization_tokens) {
            Ok(t) => t,
            Err(e) => return Some(Err(e)),
        };
        let mut req = Request::new(core, stream, msg.name(), id, false);
        req.tokens = tokens.into_boxed_slice();
        Some(Ok(req))
    }

    fn new(
        core: &Arc<SessionCore>,
        stream: RequestStream,
        name: &'static str,
        id: u64,
        requester: bool,
    ) -> Request {
        Request::counted(Counted::new(core), stream, name, id, requester)
    }

    /// [`Request::new`] with the core already counting it.
    fn counted(
        core: Counted,
        stream: RequestStream,
        name: &'static str,
        id: u64,
        requester: bool,
    ) -> Request {
        Request {
            core,
            stream,
            name,
            id,
            peer_updates: None,
            our_updates: None,
            tokens: Box::default(),
            unanswered: !requester,
            opened: since_base(),
            reader_open: true,
            watch_stop: true,
            stop_cancels: !requester,
            clustered: false,
            stopped: None,
            deferred: None,
            goaway: None,
            pending: None,
            commands: None,
            end: None,
        }
    }

    /// The Request ID.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Lets the peer send REQUEST_UPDATE on this request, checked against `ctx`.
    pub(crate) fn take_updates(&mut self, ctx: ParamContext) {
        self.peer_updates = Some(ctx);
    }

    /// Whether the peer's STOP_SENDING on our half cancels the request at once (by default
    /// the responder's view) or reading goes on until the peer's half ends (the requester's).
    /// A subscription follows its roles instead: the subscriber cancels with STOP_SENDING, the
    /// publisher ends with PUBLISH_DONE (draft-19 §5.1).
    pub(crate) fn stop_cancels(&mut self, cancels: bool) {
        self.stop_cancels = cancels;
    }

    /// Reads NAMESPACE in the MoQ Cluster extension's extended form from now on.
    pub(crate) fn read_clustered(&mut self) {
        self.clustered = true;
    }

    /// True once the peer finished its half (it sends nothing more, draft-19 §3.3.2).
    pub(crate) fn peer_finished(&self) -> bool {
        !self.reader_open
    }

    // The requester's side.

    /// Waits for the one first response. `accept` takes the kind's answer (or names a message
    /// that is not one). REQUEST_ERROR is [`Error::Rejected`] and our half is finished;
    /// any other message first closes the session with PROTOCOL_VIOLATION (draft-19 §3.3.2); a
    /// FIN first means the request failed. A GOAWAY on the stream first moves the request
    /// ([`Error::Moved`], draft-19 §10.4), and a draft-18 control-stream GOAWAY whose Request
    /// ID says it was not processed ends it with [`Error::GoingAway`]. On every error the
    /// request is over.
    pub(crate) async fn response<T>(
        &mut self,
        accept: impl FnOnce(Message) -> Result<T, &'static str>,
    ) -> Result<T, Error> {
        let msg = tokio::select! {
            m = self.stream.reader.next() => m,
            e = self.core.closed() => return Err(e),
            e = self.core.unprocessed(self.id) => {
                self.stream.cancel(StreamResetCode::CANCELLED);
                return Err(e);
            }
        };
        let err = match msg {
            Ok(Some(Message::RequestError(e))) => match self.check_redirect(&e) {
                Ok(()) => {
                    self.stream.finish();
                    return Err(Error::Rejected(Box::new(e)));
                }
                Err(violation) => violation,
            },
            // draft-19 §10.4: re-issue it where the GOAWAY says, and close the old stream.
            Ok(Some(Message::Goaway(g))) => {
                let g = self.on_goaway(g)?;
                tracing::debug!(request = self.name, id = self.id, uri = %g.new_session_uri, "request moved by GOAWAY");
                Error::Moved {
                    new_session_uri: g.new_session_uri,
                    timeout: g.timeout,
                }
            }
            Ok(Some(m)) => match accept(m) {
                Ok(t) => return Ok(t),
                Err(name) => self.violation(format!("{name} before the response to {}", self.name)),
            },
            Ok(None) => Error::EndedEarly,
            Err(e) => self.core.fail(self.core.error(e)),
        };
        self.stream.cancel(StreamResetCode::CANCELLED);
        Err(err)
    }

    /// Waits for REQUEST_OK as the first response, checked against `ctx` (a parameter not
    /// allowed there closes the session, draft-19 §10.2.1).
    pub(crate) async fn request_ok(&mut self, ctx: ParamContext) -> Result<RequestOk, Error> {
        let ok = self
            .response(|m| match m {
                Message::RequestOk(ok) => Ok(ok),
                m => Err(m.name()),
            })
            .await?;
        let version = self.core.version();
        ok.validate(ctx, version).map_err(|e| {
            self.stream.cancel(StreamResetCode::CANCELLED);
            self.core.fail(e.into())
        })?;
        Ok(ok)
    }

    /// The application's handle on this request, whose REQUEST_UPDATEs are checked against
    /// `ctx`. Dropping the handle ends [`Request::next`] with [`Event::Dropped`].
    pub(crate) fn handle(&mut self, ctx: ParamContext) -> RequestHandle {
        let (tx, rx) = mpsc::channel(4);
        self.commands = Some(rx);
        self.our_updates = Some(ctx);
        RequestHandle::new(
            self.core.clone(),
            self.id,
            tx,
            self.goaway_tx().subscribe(),
            self.end_slot().subscribe(),
        )
    }

    /// A queue of `capacity` items for the application, which ends as this request ends.
    pub(crate) fn feed<T>(&mut self, capacity: usize) -> (mpsc::Sender<T>, Feed<T>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (
            tx,
            Feed::new(rx, self.end_slot().subscribe(), self.core.clone()),
        )
    }

    fn end_slot(&mut self) -> &EndSlot {
        self.end.get_or_insert_with(EndSlot::default)
    }

    /// Records how the request ended, for the application's handle and feed (none made, no
    /// one asks).
    pub(crate) fn set_end(&self, end: Result<(), Error>) {
        if let Some(slot) = &self.end {
            slot.set(end);
        }
    }

    // The responder's side.

    /// The authorizer's verdict on this request (or on a REQUEST_UPDATE naming a new
    /// prefix), unless the name is reserved or `refusal` already refuses it.
    ///
    /// Every request kind passes its namespace (track, announced namespace or prefix) through
    /// here, so a reserved one is refused before any kind's own check, the application or a
    /// relay's routing can see it.
    pub(crate) async fn authorize(
        &self,
        refusal: Option<RequestError>,
        kind: RequestKind,
        namespace: &TrackNamespace,
        track_name: Option<&[u8]>,
    ) -> Result<(), RequestError> {
        if let Some(e) = reserved(self.core.version(), namespace) {
            return Err(e);
        }
        if let Some(e) = refusal {
            return Err(e);
        }
        self.core
            .authorize(&AuthRequest {
                kind,
                namespace,
                track_name,
                tokens: &self.tokens,
            })
            .await
    }

    /// Whether the peer may learn that `namespace` exists (draft-19 §10.18: discovery only
    /// reveals what the subscriber is authorized for), by the request's tokens.
    pub(crate) fn visible(&self, namespace: &TrackNamespace) -> bool {
        self.core.visible(&self.tokens, namespace)
    }

    /// [`Request::visible`] as a check that outlives the request's borrow.
    pub(crate) fn visibility(&self) -> Visibility {
        let (core, tokens) = (Arc::downgrade(&self.core), self.tokens.clone());
        Visibility(Arc::new(move |ns: &TrackNamespace| {
            core.upgrade().is_some_and(|c| c.visible(&tokens, ns))
        }))
    }

    /// Refuses the request: REQUEST_ERROR, then FIN (draft-19 §3.3.2).
    pub(crate) async fn refuse(mut self, e: RequestError) -> Result<(), Error> {
        self.read_before_answer()?;
        self.observe(Err(e.code));
        tracing::debug!(request = self.name, id = self.id, code = ?e.code, reason = %e.reason, "refused");
        self.stream.send(e).await?;
        self.stream.finish();
        Ok(())
    }

    /// Waits for the decision on this request, reading the peer meanwhile: a FIN only ends
    /// its half (draft-19 §3.3.2), a reset cancels the request, and REQUEST_UPDATE before the
    /// answer is a violation. Another message (a PUBLISH_DONE ending a PUBLISH early, §5.1) is
    /// kept for [`Request::next`] after the answer.
    pub(crate) async fn decide<T>(&mut self, decision: oneshot::Receiver<T>) -> Decision<T> {
        tokio::pin!(decision);
        while self.deferred.is_none() {
            tokio::select! {
                d = &mut decision => return d.map_or(Decision::Unanswered, Decision::Made),
                ev = self.next() => match ev {
                    Event::Ended(_) => return Decision::Ended,
                    Event::Message(m) => self.deferred = Some(Box::new(m)),
                    Event::Update(_) => {
                        self.violation(format!("REQUEST_UPDATE before the response to {}", self.name));
                        return Decision::Ended;
                    }
                    // No handle and no updates of ours exist before the answer.
                    Event::Fin | Event::Dropped | Event::Updated(_) => {}
                },
            }
        }
        decision.await.map_or(Decision::Unanswered, Decision::Made)
    }

    /// Answers the peer's REQUEST_UPDATE. A REQUEST_ERROR ends the request: it is followed by
    /// a FIN (draft-19 §10.9); returns whether the request goes on.
    pub(crate) async fn answer_update(
        &mut self,
        answer: Result<RequestOk, RequestError>,
    ) -> Result<bool, Error> {
        match answer {
            Ok(ok) => {
                self.stream.send(ok).await?;
                Ok(true)
            }
            Err(e) => {
                self.stream.send(e).await?;
                self.stream.finish();
                Ok(false)
            }
        }
    }

    // Both sides.

    /// Sends a message on the request's stream.
    pub(crate) async fn send(&mut self, msg: impl Into<Message>) -> Result<(), Error> {
        let msg = msg.into();
        if self.unanswered {
            self.read_before_answer()?;
            self.observe(match &msg {
                Message::RequestError(e) => Err(e.code),
                _ => Ok(()),
            });
        }
        self.stream.send(msg).await
    }

    /// Before the first answer to the peer's request goes out, takes what the peer already sent
    /// behind the request (read but not handled, or received and not read yet), without waiting:
    /// a REQUEST_UPDATE before the answer, or on a request that takes none (TRACK_STATUS),
    /// closes the session with PROTOCOL_VIOLATION (draft-22 §9.5: "An endpoint that receives a
    /// REQUEST_UPDATE other than in the two cases above MUST close the session with a
    /// PROTOCOL_VIOLATION"; draft-19 §10.9), whether or not a wait for the answer read it
    /// first. Another message is kept for [`Request::next`], as [`Request::decide`] does; a
    /// reset ends the request. Without this, an answer ready before the bytes behind the
    /// request were read was sent and the rest of the stream never looked at.
    fn read_before_answer(&mut self) -> Result<(), Error> {
        use futures::FutureExt;
        while self.reader_open && self.deferred.is_none() {
            let Some(frame) = self.stream.reader.next_frame().now_or_never() else {
                break;
            };
            match self.on_frame(frame) {
                None | Some(Event::Fin | Event::Dropped | Event::Updated(_)) => {}
                Some(Event::Message(m)) => self.deferred = Some(Box::new(m)),
                Some(Event::Update(_)) => {
                    return Err(self.violation(format!(
                        "REQUEST_UPDATE before the response to {}",
                        self.name
                    )));
                }
                Some(Event::Ended(e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reports the answer to a peer's request to the session's observer, once.
    fn observe(&mut self, outcome: Result<(), RequestErrorCode>) {
        if std::mem::take(&mut self.unanswered)
            && let Some(o) = &self.core.config().observer
        {
            o.answered(
                self.core.version(),
                self.name,
                outcome,
                std::time::Duration::from_nanos(since_base().saturating_sub(self.opened)),
            );
        }
    }

    /// FIN on our half.
    pub(crate) fn finish(&mut self) {
        self.stream.finish();
    }

    /// Cancels the request with `code` (draft-19 §3.3.3).
    pub(crate) fn cancel(&mut self, code: StreamResetCode) {
        self.stream.cancel(code);
    }

    /// Cancels the request for an application that dropped its handle.
    pub(crate) fn dropped(&mut self) -> Error {
        self.cancel(StreamResetCode::CANCELLED);
        Error::Cancelled(StreamResetCode::CANCELLED)
    }

    /// Closes the session with PROTOCOL_VIOLATION for a message this request does not take.
    pub(crate) fn unexpected(&self, m: &Message) -> Error {
        self.violation(format!("{} on a {} stream", m.name(), self.name))
    }

    /// Closes the session with PROTOCOL_VIOLATION.
    pub(crate) fn violation(&self, reason: String) -> Error {
        self.core.fail(Error::protocol(reason))
    }

    /// Our oldest REQUEST_UPDATE awaiting its answer, taken out (the list freed once empty).
    fn next_pending(&mut self) -> Option<Pending> {
        let list = self.pending.as_mut()?;
        let p = (!list.is_empty()).then(|| list.remove(0));
        if list.is_empty() {
            self.pending = None;
        }
        p
    }

    fn on_message(&mut self, m: Result<Option<Message>, Error>) -> Option<Event> {
        let version = self.core.version();
        match m {
            Ok(Some(Message::RequestUpdate(u))) => Some(match self.peer_updates {
                Some(ctx) => match self.check_update(&u, ctx) {
                    Ok(()) => Event::Update(Ok(u)),
                    Err(e) => Event::Ended(e),
                },
                None => Event::Ended(self.unexpected(&Message::RequestUpdate(u))),
            }),
            Ok(Some(Message::RequestOk(ok))) => {
                let Some(p) = self.next_pending() else {
                    return Some(Event::Ended(self.violation(format!(
                        "second REQUEST_OK for {} (no REQUEST_UPDATE outstanding)",
                        self.name
                    ))));
                };
                if let Err(e) = ok.validate(ParamContext::RequestUpdateOk, version) {
                    return Some(Event::Ended(self.core.fail(e.into())));
                }
                Some(Event::Updated(Updated {
                    params: p.params,
                    answer: Ok(ok),
                    reply: p.reply,
                }))
            }
            Ok(Some(Message::RequestError(e))) => {
                if let Err(violation) = self.check_redirect(&e) {
                    return Some(Event::Ended(violation));
                }
                let Some(p) = self.next_pending() else {
                    return Some(Event::Ended(self.violation(format!(
                        "REQUEST_ERROR after {} was accepted",
                        self.name
                    ))));
                };
                Some(Event::Updated(Updated {
                    params: p.params,
                    answer: Err(e),
                    reply: p.reply,
                }))
            }
            Ok(Some(Message::Goaway(g))) => self.on_goaway(g).err().map(Event::Ended),
            Ok(Some(m)) => Some(Event::Message(m)),
            Ok(None) => {
                self.reader_open = false;
                match self.stopped.as_deref().copied() {
                    // The peer stopped our half and has ended its own: cancelled.
                    Some(code) => {
                        self.stream.reset(code);
                        Some(Event::Ended(Error::Cancelled(code)))
                    }
                    None => Some(Event::Fin),
                }
            }
            Err(Error::Cancelled(code)) => {
                // draft-19 §3.3.3: the peer reset its half; end ours with its code.
                self.reader_open = false;
                self.stream.reset(code);
                Some(Event::Ended(Error::Cancelled(code)))
            }
            Err(e) => {
                self.reader_open = false;
                Some(Event::Ended(self.core.fail(self.core.error(e))))
            }
        }
    }

    /// Checks the peer's REQUEST_UPDATE: a fresh Request ID, parameters allowed for `ctx`, at
    /// most MAX_REQUEST_UPDATES outstanding (counting updates already buffered behind it, since
    /// each is answered at once), and its tokens. Session errors close the session.
    fn check_update(&mut self, u: &RequestUpdate, ctx: ParamContext) -> Result<(), Error> {
        let core = &self.core;
        core.check_peer_request_id(u.request_id)?;
        u.params
            .validate(ctx, core.version())
            .map_err(|e| core.fail(e.into()))?;
        let max = core.config().max_request_updates;
        if max > 0 && core.version().has_max_request_updates() {
            let outstanding = 1 + self.stream.reader.buffered_frames() as u64;
            // draft-19 §10.3.1.7: more than MAX_REQUEST_UPDATES outstanding on one stream.
            if outstanding > max {
                return Err(core.fail(Error::violation(
                    SessionErrorCode::TOO_MANY_REQUEST_UPDATES,
                    format!("{outstanding} REQUEST_UPDATEs outstanding (at most {max})"),
                )));
            }
        }
        // draft-19 §10.9: a parameter absent from REQUEST_UPDATE keeps its value, so the
        // request's tokens stand unless the update brings new ones.
        let tokens = core.resolve_tokens(&u.params.authorization_tokens)?;
        if !tokens.is_empty() {
            self.tokens = tokens.into_boxed_slice();
        }
        Ok(())
    }

    /// Sends one of our REQUEST_UPDATEs, within the peer's MAX_REQUEST_UPDATES.
    async fn send_update(
        &mut self,
        params: Parameters,
        reply: UpdateReply,
        id: Option<oneshot::Sender<u64>>,
    ) {
        let version = self.core.version();
        if let Some(ctx) = self.our_updates
            && let Err(e) = params.validate(ctx, version)
        {
            let _ = reply.send(Err(e.into()));
            return;
        }
        let max = self.core.peer_max_request_updates();
        if max > 0 && self.pending.as_ref().map_or(0, |p| p.len()) as u64 >= max {
            let _ = reply.send(Err(Error::Limit("the peer's MAX_REQUEST_UPDATES")));
            return;
        }
        if let Err(e) = self.core.check_outgoing(&params) {
            let _ = reply.send(Err(e));
            return;
        }
        let update = RequestUpdate {
            request_id: 0,
            params: params.clone(),
        };
        let sent = self
            .stream
            .writer
            .send_fresh(update.into(), self.core.next_request_id())
            .await;
        match sent {
            Ok(update_id) => {
                if let Some(id) = id {
                    let _ = id.send(update_id);
                }
                self.pending
                    .get_or_insert_default()
                    .push(Pending { params, reply })
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        }
    }

    /// GOAWAY on a request stream: at most one (draft-19 §10.4).
    fn on_goaway(&mut self, g: Goaway) -> Result<GoawayInfo, Error> {
        if self.goaway.as_ref().is_some_and(|g| g.borrow().is_some()) {
            return Err(self.violation("second GOAWAY on a request stream".into()));
        }
        let info = self
            .core
            .check_goaway(&g, false)
            .map_err(|e| self.core.fail(e))?;
        self.goaway_tx().send_replace(Some(info.clone()));
        Ok(info)
    }

    /// Checks the Redirect of a REQUEST_ERROR answering this request (from draft-18; draft-22
    /// §9.4.1, draft-19 §10.6.1): the session is closed with PROTOCOL_VIOLATION for a Connect
    /// URI sent by a client ("If a server receives a Redirect with a non-zero Connect URI
    /// Length it MUST close the session"; a client cannot send us elsewhere), or a Track Name
    /// for a namespace-scoped request ("MUST be empty").
    fn check_redirect(&self, e: &RequestError) -> Result<(), Error> {
        let Some(r) = e.redirect.as_deref() else {
            return Ok(());
        };
        if self.core.role() == crate::session::Role::Server && !r.connect_uri.is_empty() {
            return Err(self.violation(format!(
                "REDIRECT with a Connect URI from a client, answering {}",
                self.name
            )));
        }
        let namespace_scoped = matches!(
            self.name,
            "SUBSCRIBE_NAMESPACE" | "PUBLISH_NAMESPACE" | "SUBSCRIBE_TRACKS"
        );
        if namespace_scoped && !r.track.name.is_empty() {
            return Err(self.violation(format!(
                "REDIRECT with a Track Name, answering {}",
                self.name
            )));
        }
        Ok(())
    }

    fn goaway_tx(&mut self) -> &watch::Sender<Option<GoawayInfo>> {
        self.goaway.get_or_insert_with(|| watch::channel(None).0)
    }
}

/// The REQUEST_ERROR for a request its answerer dropped unanswered.
pub(crate) fn not_answered() -> RequestError {
    RequestError::new(RequestErrorCode::INTERNAL_ERROR, "not answered")
}

/// The refusal of a request naming a reserved namespace, if `namespace` is one.
///
/// draft-19 §3.2.1 (draft-22 §2.4.3): a request referencing a namespace whose first field is
/// exactly "." MUST be rejected with DOES_NOT_EXIST. draft-19 §3.2.2 (draft-22 §6.5): a
/// request for an unrecognized session-level track or namespace MUST be rejected with
/// DOES_NOT_EXIST rather than passed to the application, and the empty track name under
/// ".session" does not exist; no session-level track or namespace is defined, so every
/// request under ".session" is refused (which also keeps a relay from forwarding one). Other
/// names beginning with "." are passed on (§3.2.1). Before draft-18 none of these is reserved.
pub(crate) fn reserved(
    version: moq_core::Version,
    namespace: &TrackNamespace,
) -> Option<RequestError> {
    if !version.has_reserved_namespaces() {
        return None;
    }
    if namespace.is_dot() {
        // draft-19 §3.2.1: MUST reject requests referencing it with DOES_NOT_EXIST.
        return Some(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "reserved namespace",
        ));
    }
    if namespace.is_session_level() {
        // draft-19 §3.2.2: MUST reject an unrecognized session-level track or namespace with
        // DOES_NOT_EXIST.
        return Some(RequestError::new(
            RequestErrorCode::DOES_NOT_EXIST,
            "unknown session-level track or namespace",
        ));
    }
    None
}

/// Nanoseconds since a fixed instant of the process (the first call), for timing a request.
fn since_base() -> u64 {
    static BASE: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let nanos = BASE
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos();
    u64::try_from(nanos).unwrap_or(u64::MAX)
}
