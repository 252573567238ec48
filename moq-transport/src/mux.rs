//! Virtual request streams on the single control stream of drafts 14-16.
//!
//! Those drafts carry every request's messages on one bidirectional control stream, addressed
//! by Request ID. The request machinery above talks to one stream per request; a [`Mux`] gives
//! it one: a virtual stream per Request ID, whose messages the session driver routes in from
//! the control stream ([`Mux::deliver`]) and whose writes go out on the control stream in
//! order. FIN, reset and STOP_SENDING are spelled as the messages those drafts use
//! (UNSUBSCRIBE, FETCH_CANCEL, PUBLISH_NAMESPACE_DONE / _CANCEL, UNSUBSCRIBE_NAMESPACE), and
//! those messages from the peer become the stream events the machinery expects. The mux also
//! keeps MAX_REQUEST_ID in both directions (draft-14 §9.5, §9.6).
//!
//! It knows the transport's streams and the codec, nothing of the session: the driver tells it
//! what arrived and closes the session on the errors it returns.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use moq_core::codes::{PublishDoneCode, RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::{
    Address, Envelope, FetchCancel, MaxRequestId, Message, Namespace, NamespaceDone, PublishDone,
    PublishNamespace, PublishNamespaceCancel, PublishNamespaceDone, RequestError, RequestType,
    RequestsBlocked, Unsubscribe, UnsubscribeNamespace,
};
use moq_core::{TrackNamespace, Version};
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc, watch};

use crate::error::Error;
use crate::transport::BoxSendStream;

/// TOO_MANY_REQUESTS (drafts 14-16 §13.1.1: a Request ID at or above MAX_REQUEST_ID).
pub(crate) const TOO_MANY_REQUESTS: SessionErrorCode = SessionErrorCode(0x7);

/// How many messages may wait for one virtual stream's reader before the control stream's
/// reader waits for it: one stream carries every request, so a request that stops reading
/// holds up the others (the single stream's nature; its memory stays bounded).
const INBOX: usize = 256;

/// What a virtual stream's reader receives.
#[derive(Debug)]
enum Inbound {
    Message(Box<Message>),
    Fin,
    Reset(StreamResetCode),
}

/// One request's virtual stream, shared by its two halves and the route table.
#[derive(Debug)]
struct Shared {
    id: OnceLock<u64>,
    kind: OnceLock<RequestType>,
    /// We sent the request.
    requester: bool,
    /// The request's namespace or prefix (draft-14 names PUBLISH_NAMESPACE_DONE, _CANCEL and
    /// UNSUBSCRIBE_NAMESPACE by it).
    namespace: OnceLock<TrackNamespace>,
    inbox: mpsc::Sender<Inbound>,
    /// The peer's REQUEST_UPDATEs on this request, in order, waiting for our answer.
    update_answers: Mutex<VecDeque<u64>>,
    /// The request's own answer has been sent (a requester's is the peer's to send).
    answered: AtomicBool,
    /// The peer ended the request: nothing of ours ends it again.
    peer_done: AtomicBool,
    /// The peer answered our request (a requester's view).
    peer_answered: AtomicBool,
    /// Drafts 14-15: NAMESPACEs (the peer's PUBLISH_NAMESPACEs) that crossed our
    /// SUBSCRIBE_NAMESPACE before its answer, delivered after it.
    early: Mutex<Vec<Message>>,
    /// A request that runs alongside this one under its Request ID and says nothing on the
    /// wire: the SUBSCRIBE_TRACKS half of a draft-14/15 SUBSCRIBE_NAMESPACE.
    shadow: bool,
    /// This request's shadow, which ends with it.
    companion: Mutex<Option<Arc<Shared>>>,
    /// The peer's "STOP_SENDING" on our half, with its code.
    stop: watch::Sender<Option<u64>>,
}

impl Shared {
    fn id(&self) -> u64 {
        self.id.get().copied().unwrap_or(u64::MAX)
    }

    fn push(&self, ev: Inbound) -> Option<impl std::future::Future<Output = ()> + '_> {
        match self.inbox.try_send(ev) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Closed(_)) => None,
            Err(mpsc::error::TrySendError::Full(ev)) => Some(async move {
                let _ = self.inbox.send(ev).await;
            }),
        }
    }
}

/// Request ID flow control in both directions.
#[derive(Debug)]
struct Credit {
    /// Our next Request ID.
    next_id: u64,
    /// The peer's MAX_REQUEST_ID: ours must stay below it.
    peer_max: u64,
    /// The MAX_REQUEST_ID we told the peer we are blocked at, if we did.
    blocked_at: Option<u64>,
    /// The peer's parity.
    peer_parity: u64,
    /// How many of the peer's requests may be open at once.
    window: u64,
    /// The peer's requests that completed.
    completed: u64,
    /// The MAX_REQUEST_ID we granted.
    granted: u64,
}

impl Credit {
    fn grant_for(&self) -> u64 {
        self.peer_parity + 2 * (self.completed + self.window)
    }
}

#[derive(Debug)]
struct State {
    routes: HashMap<u64, Arc<Shared>>,
    /// Our REQUEST_UPDATEs awaiting an answer: their Request ID to the request they update.
    our_updates: HashMap<u64, u64>,
    /// Drafts 14-15: the PUBLISH_NAMESPACEs we sent to answer the peer's SUBSCRIBE_NAMESPACE
    /// (our Request ID to that subscription's and the namespace).
    announced: HashMap<u64, (u64, TrackNamespace)>,
    /// Drafts 14-15: the peer's PUBLISH_NAMESPACEs that answer our SUBSCRIBE_NAMESPACE
    /// (their Request ID to our subscription's and the namespace).
    discovered: HashMap<u64, (u64, TrackNamespace)>,
    credit: Credit,
}

#[derive(Debug)]
struct Inner {
    version: Version,
    out: mpsc::UnboundedSender<Vec<u8>>,
    state: Mutex<State>,
    credit_changed: Notify,
    /// Set once the control stream is gone; every virtual stream ends with it.
    closed: watch::Sender<Option<Error>>,
}

/// The single control stream of a draft-14..16 session, shared by every request on it.
#[derive(Clone, Debug)]
pub(crate) struct Mux {
    inner: Arc<Inner>,
}

impl Mux {
    /// A mux writing to the control stream's send half. `parity` is ours; `peer_max` the
    /// MAX_REQUEST_ID of the peer's SETUP; `window` how many of the peer's requests may be
    /// open at once (our SETUP granted `peer parity + 2 * window`). The writer runs as a task
    /// that `spawn` starts.
    pub(crate) fn new(
        version: Version,
        send: BoxSendStream,
        parity: u64,
        peer_max: u64,
        window: u64,
        spawn: impl FnOnce(std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>),
    ) -> Mux {
        let (out, rx) = mpsc::unbounded_channel();
        let peer_parity = 1 - parity;
        let credit = Credit {
            next_id: parity,
            peer_max,
            blocked_at: None,
            peer_parity,
            window,
            completed: 0,
            granted: peer_parity + 2 * window,
        };
        let inner = Arc::new(Inner {
            version,
            out,
            state: Mutex::new(State {
                routes: HashMap::new(),
                our_updates: HashMap::new(),
                announced: HashMap::new(),
                discovered: HashMap::new(),
                credit,
            }),
            credit_changed: Notify::new(),
            closed: watch::channel(None).0,
        });
        spawn(Box::pin(write_control(send, rx)));
        Mux { inner }
    }

    /// The MAX_REQUEST_ID for our SETUP (`peer parity + 2 * window`).
    pub(crate) fn initial_grant(window: u64, parity: u64) -> u64 {
        (1 - parity) + 2 * window
    }

    /// Sends a message that belongs to no request (GOAWAY, MAX_REQUEST_ID).
    pub(crate) fn send(&self, msg: Message) -> Result<(), Error> {
        self.inner.enqueue(&msg, &Envelope::default())
    }

    /// A Request ID of ours for a request that runs on a stream of its own (draft-16's
    /// SUBSCRIBE_NAMESPACE), within the peer's MAX_REQUEST_ID.
    pub(crate) async fn allocate(&self) -> Result<u64, Error> {
        self.inner
            .with_credit(|s| {
                let id = s.credit.next_id;
                s.credit.next_id += 2;
                Ok(id)
            })
            .await
    }

    /// A virtual stream for a request of ours; its first message (sent with
    /// [`VirtualWriter::send_fresh`]) gives it its Request ID.
    pub(crate) fn open(&self) -> (VirtualWriter, VirtualReader) {
        self.pair(true)
    }

    /// The virtual stream of the peer's request `id` of kind `kind` (its first message was
    /// read by the driver), named by `namespace` where draft-14 addresses it so.
    pub(crate) fn accept(
        &self,
        id: u64,
        kind: RequestType,
        namespace: Option<TrackNamespace>,
    ) -> (VirtualWriter, VirtualReader) {
        let (w, r) = self.pair(false);
        let _ = w.shared.id.set(id);
        let _ = w.shared.kind.set(kind);
        if let Some(ns) = namespace {
            let _ = w.shared.namespace.set(ns);
        }
        self.inner.state.lock().routes.insert(id, w.shared.clone());
        (w, r)
    }

    /// Drafts 14-15: the SUBSCRIBE_TRACKS half of the peer's SUBSCRIBE_NAMESPACE `id` (draft-14
    /// §9.22: the publisher forwards the matching PUBLISH_NAMESPACE *and PUBLISH* messages).
    /// It runs as a request of its own that is silent on the wire: its answer is the
    /// SUBSCRIBE_NAMESPACE's, and it ends when that one does; the PUBLISHes it sends are
    /// requests of their own.
    pub(crate) fn accept_shadow(&self, id: u64) -> (VirtualWriter, VirtualReader) {
        let (w, r) = self.pair_with(false, true);
        let _ = w.shared.id.set(id);
        let _ = w.shared.kind.set(RequestType::SubscribeTracks);
        if let Some(main) = self.inner.state.lock().routes.get(&id) {
            *main.companion.lock() = Some(w.shared.clone());
        }
        (w, r)
    }

    fn pair(&self, requester: bool) -> (VirtualWriter, VirtualReader) {
        self.pair_with(requester, false)
    }

    fn pair_with(&self, requester: bool, shadow: bool) -> (VirtualWriter, VirtualReader) {
        let (tx, rx) = mpsc::channel(INBOX);
        let shared = Arc::new(Shared {
            id: OnceLock::new(),
            kind: OnceLock::new(),
            requester,
            namespace: OnceLock::new(),
            inbox: tx,
            update_answers: Mutex::new(VecDeque::new()),
            answered: AtomicBool::new(requester),
            peer_done: AtomicBool::new(false),
            peer_answered: AtomicBool::new(false),
            early: Mutex::new(Vec::new()),
            shadow,
            companion: Mutex::new(None),
            stop: watch::channel(None).0,
        });
        let writer = VirtualWriter {
            inner: self.inner.clone(),
            shared: shared.clone(),
            closed: false,
        };
        let reader = VirtualReader {
            inner: Arc::downgrade(&self.inner),
            closed: self.inner.closed.subscribe(),
            shared,
            rx,
        };
        (writer, reader)
    }

    /// Checks the peer's new Request ID against the MAX_REQUEST_ID we granted (draft-14
    /// §9.5: at or above it is TOO_MANY_REQUESTS).
    pub(crate) fn check_peer_id(&self, id: u64) -> Result<(), Error> {
        let granted = self.inner.state.lock().credit.granted;
        if id >= granted {
            return Err(Error::violation(
                TOO_MANY_REQUESTS,
                format!("Request ID {id} at or above MAX_REQUEST_ID {granted}"),
            ));
        }
        Ok(())
    }

    /// One of the peer's requests that ran on a stream of its own has ended.
    pub(crate) fn peer_request_done(&self) {
        self.inner.peer_request_done(false);
    }

    /// The peer's MAX_REQUEST_ID: it may only grow (draft-14 §9.5).
    pub(crate) fn on_max_request_id(&self, max: u64) -> Result<(), Error> {
        {
            let mut s = self.inner.state.lock();
            if max < s.credit.peer_max {
                return Err(Error::protocol(format!(
                    "MAX_REQUEST_ID went down from {} to {max}",
                    s.credit.peer_max
                )));
            }
            s.credit.peer_max = max;
        }
        self.inner.credit_changed.notify_waiters();
        Ok(())
    }

    /// The peer's REQUESTS_BLOCKED: grant what completed requests allow now, even if below
    /// the batch size (draft-14 §9.6).
    pub(crate) fn on_requests_blocked(&self) {
        self.inner.peer_request_done(true);
    }

    /// Delivers a message the control stream's reader read, addressed to a request. A
    /// message for a request that is already over is dropped (it crossed our end of it).
    pub(crate) async fn deliver(&self, msg: Message, address: Address) -> Result<(), Error> {
        if let Some((route, suffix)) = self.inner.discovery(&msg, &address) {
            // draft-14 §9.19: the peer withdrew a namespace it announced for our
            // SUBSCRIBE_NAMESPACE: NAMESPACE_DONE, as the newer drafts say it.
            self.inner.peer_request_done(false);
            return push(
                &route,
                Inbound::Message(Box::new(NamespaceDone { suffix }.into())),
            )
            .await;
        }
        let Some((route, update_answer)) = self.inner.route(&msg, &address) else {
            tracing::debug!(message = msg.name(), ?address, "for a request that is over");
            return Ok(());
        };
        let code = match &msg {
            Message::PublishNamespaceCancel(c) => Some(StreamResetCode(c.code.0)),
            Message::Unsubscribe(_)
            | Message::FetchCancel(_)
            | Message::PublishNamespaceDone(_) => Some(StreamResetCode::CANCELLED),
            _ => None,
        };
        if let Some(code) = code {
            // The peer cancelled: STOP_SENDING on our half and a reset of its own.
            route.peer_done.store(true, Ordering::Relaxed);
            route.stop.send_replace(Some(code.0));
            return push(&route, Inbound::Reset(code)).await;
        }
        let kind = route.kind.get().copied();
        // What the newer drafts follow with a FIN: the answer that ends a request.
        let fin = match &msg {
            Message::UnsubscribeNamespace(_) => {
                route.peer_done.store(true, Ordering::Relaxed);
                let companion = route.companion.lock().take();
                if let Some(c) = companion {
                    c.peer_done.store(true, Ordering::Relaxed);
                    push(&c, Inbound::Fin).await?;
                }
                return push(&route, Inbound::Fin).await;
            }
            Message::RequestUpdate(u) => {
                route.update_answers.lock().push_back(u.request_id);
                false
            }
            Message::RequestError(_) | Message::PublishDone(_) => {
                // The peer ended the request: nothing of ours (UNSUBSCRIBE, ...) follows.
                route.peer_done.store(true, Ordering::Relaxed);
                true
            }
            Message::RequestOk(_) => kind == Some(RequestType::TrackStatus),
            _ => false,
        };
        let first_answer = route.requester
            && !update_answer
            && matches!(
                msg,
                Message::RequestOk(_)
                    | Message::RequestError(_)
                    | Message::SubscribeOk(_)
                    | Message::FetchOk(_)
            )
            && !route.peer_answered.swap(true, Ordering::Relaxed);
        push(&route, Inbound::Message(Box::new(msg))).await?;
        if first_answer {
            let early = std::mem::take(&mut *route.early.lock());
            for m in early {
                push(&route, Inbound::Message(Box::new(m))).await?;
            }
        }
        if fin {
            push(&route, Inbound::Fin).await?;
        }
        Ok(())
    }

    /// Drafts 14-15: the peer's PUBLISH_NAMESPACE `id` of `namespace` answers our
    /// SUBSCRIBE_NAMESPACE when one of ours covers it (draft-14 §9.22: the publisher forwards
    /// the matching PUBLISH_NAMESPACEs). Then it is that subscription's NAMESPACE, as the newer
    /// drafts say it, and is accepted here; `false` means it is a request of its own.
    pub(crate) async fn discovered(
        &self,
        id: u64,
        namespace: &TrackNamespace,
    ) -> Result<bool, Error> {
        let found = {
            let mut s = self.inner.state.lock();
            let route = s
                .routes
                .values()
                .find(|r| {
                    r.requester
                        && r.kind.get() == Some(&RequestType::SubscribeNamespace)
                        && r.namespace.get().is_some_and(|p| p.is_prefix_of(namespace))
                })
                .cloned();
            if let Some(r) = &route {
                s.discovered.insert(id, (r.id(), namespace.clone()));
            }
            route
        };
        let Some(route) = found else { return Ok(false) };
        let prefix = route.namespace.get().cloned().unwrap_or_default();
        let suffix = namespace.strip_prefix(&prefix).unwrap_or_default();
        let ok = Envelope {
            address: Some(Address::Request(id)),
            answers: Some(RequestType::PublishNamespace),
        };
        self.inner
            .enqueue(&moq_core::message::RequestOk::default().into(), &ok)?;
        let added = Namespace { suffix }.into();
        if route.peer_answered.load(Ordering::Relaxed) {
            push(&route, Inbound::Message(Box::new(added))).await?;
        } else {
            // It crossed our SUBSCRIBE_NAMESPACE: it counts (the publisher will not send it
            // again), after the answer.
            route.early.lock().push(added);
        }
        Ok(true)
    }

    /// Ends every virtual stream with `err`: the control stream is gone.
    pub(crate) fn close(&self, err: Error) {
        self.inner.closed.send_if_modified(|c| {
            if c.is_none() {
                *c = Some(err);
                true
            } else {
                false
            }
        });
        self.inner.state.lock().routes.clear();
        self.inner.credit_changed.notify_waiters();
    }
}

async fn push(route: &Shared, ev: Inbound) -> Result<(), Error> {
    if let Some(wait) = route.push(ev) {
        wait.await;
    }
    Ok(())
}

impl Inner {
    fn enqueue(&self, msg: &Message, env: &Envelope) -> Result<(), Error> {
        let mut bytes = Vec::new();
        msg.encode_addressed(env, &mut bytes, self.version)?;
        tracing::trace!(message = msg.name(), ?env.address, len = bytes.len(), "send");
        self.out
            .send(bytes)
            .map_err(|_| Error::protocol("the control stream is closed"))
    }

    /// Runs `f` once the peer's MAX_REQUEST_ID allows one more Request ID of ours; sends
    /// REQUESTS_BLOCKED once per limit while waiting (draft-14 §9.6).
    async fn with_credit<T>(
        &self,
        mut f: impl FnMut(&mut State) -> Result<T, Error>,
    ) -> Result<T, Error> {
        loop {
            let changed = self.credit_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut s = self.state.lock();
                if let Some(e) = self.closed.borrow().clone() {
                    return Err(e);
                }
                let c = &mut s.credit;
                if c.next_id < c.peer_max {
                    return f(&mut s);
                }
                if c.blocked_at != Some(c.peer_max) {
                    c.blocked_at = Some(c.peer_max);
                    let max = c.peer_max;
                    drop(s);
                    tracing::debug!(max, "blocked by the peer's MAX_REQUEST_ID");
                    self.enqueue(
                        &RequestsBlocked {
                            maximum_request_id: max,
                        }
                        .into(),
                        &Envelope::default(),
                    )?;
                }
            }
            changed.await;
        }
    }

    /// A request of the peer's completed: grant another Request ID, in batches of a quarter
    /// window (or at once when `now`, for REQUESTS_BLOCKED).
    fn peer_request_done(&self, now: bool) {
        let grant = {
            let mut s = self.state.lock();
            let c = &mut s.credit;
            if !now {
                c.completed += 1;
            }
            let next = c.grant_for();
            let batch = 2 * (c.window / 4).max(1);
            (next > c.granted && (now || next - c.granted >= batch)).then(|| {
                c.granted = next;
                next
            })
        };
        if let Some(max) = grant {
            let _ = self.enqueue(
                &MaxRequestId { request_id: max }.into(),
                &Envelope::default(),
            );
        }
    }

    /// Drafts 14-15: a PUBLISH_NAMESPACE_DONE for one of the peer's PUBLISH_NAMESPACEs that
    /// answered our SUBSCRIBE_NAMESPACE: that subscription and the namespace's suffix.
    fn discovery(&self, msg: &Message, address: &Address) -> Option<(Arc<Shared>, TrackNamespace)> {
        if !matches!(msg, Message::PublishNamespaceDone(_)) {
            return None;
        }
        let mut s = self.state.lock();
        let id = match address {
            Address::Request(id) => *id,
            Address::Namespace(ns) => *s.discovered.iter().find(|(_, (_, n))| n == ns)?.0,
        };
        let (sub, ns) = s.discovered.remove(&id)?;
        let route = s.routes.get(&sub)?.clone();
        let prefix = route.namespace.get()?;
        Some((route.clone(), ns.strip_prefix(prefix)?))
    }

    /// The virtual stream a message from the peer belongs to, and whether the message answers
    /// one of our REQUEST_UPDATEs on it.
    fn route(&self, msg: &Message, address: &Address) -> Option<(Arc<Shared>, bool)> {
        let mut s = self.state.lock();
        match address {
            Address::Request(id) if s.announced.contains_key(id) => {
                // The answer to (or cancellation of) a PUBLISH_NAMESPACE we sent for the
                // peer's SUBSCRIBE_NAMESPACE: nothing waits for it.
                if matches!(
                    msg,
                    Message::PublishNamespaceCancel(_) | Message::RequestError(_)
                ) {
                    s.announced.remove(id);
                }
                None
            }
            Address::Request(id) => {
                // The answer to one of our REQUEST_UPDATEs goes to the request it updated.
                let is_answer = matches!(msg, Message::RequestOk(_) | Message::RequestError(_));
                let (target, update) = match s.our_updates.get(id) {
                    Some(parent) if is_answer => {
                        let parent = *parent;
                        s.our_updates.remove(id);
                        (parent, true)
                    }
                    _ => (*id, false),
                };
                s.routes.get(&target).map(|r| (r.clone(), update))
            }
            Address::Namespace(ns) => {
                // draft-14: PUBLISH_NAMESPACE_DONE names the peer's namespace (we answered
                // it), PUBLISH_NAMESPACE_CANCEL ours, UNSUBSCRIBE_NAMESPACE the peer's prefix.
                let (requester, kind) = match msg {
                    Message::PublishNamespaceCancel(_) => (true, RequestType::PublishNamespace),
                    Message::UnsubscribeNamespace(_) => (false, RequestType::SubscribeNamespace),
                    _ => (false, RequestType::PublishNamespace),
                };
                s.routes
                    .values()
                    .find(|r| {
                        r.requester == requester
                            && r.kind.get() == Some(&kind)
                            && r.namespace.get() == Some(ns)
                    })
                    .map(|r| (r.clone(), false))
            }
        }
    }

    fn unregister(&self, shared: &Arc<Shared>) {
        let Some(&id) = shared.id.get() else { return };
        let removed = {
            let mut s = self.state.lock();
            let mine = s.routes.get(&id).is_some_and(|r| Arc::ptr_eq(r, shared));
            if mine {
                s.routes.remove(&id);
                s.our_updates.retain(|_, parent| *parent != id);
            }
            mine
        };
        if removed {
            self.end_discovery(shared, id);
            // Its shadow ends with it (as a FIN, which ends a draft-14/15 discovery request).
            if let Some(c) = shared.companion.lock().take() {
                let _ = c.inbox.try_send(Inbound::Fin);
            }
        }
        if removed && !shared.requester {
            self.peer_request_done(false);
        }
    }
}

impl Inner {
    /// Drafts 14-15: a SUBSCRIBE_NAMESPACE is over. Ours: the peer's PUBLISH_NAMESPACEs that
    /// answered it are forgotten (their Request IDs count as completed). The peer's: unless
    /// the peer ended it, the namespaces we announced for it are withdrawn.
    fn end_discovery(&self, shared: &Shared, id: u64) {
        let (discovered, announced) = {
            let mut s = self.state.lock();
            let before = s.discovered.len();
            s.discovered.retain(|_, (sub, _)| *sub != id);
            let discovered = before - s.discovered.len();
            let mut announced = Vec::new();
            s.announced.retain(|ours, (sub, ns)| {
                let keep = *sub != id;
                if !keep {
                    announced.push((*ours, ns.clone()));
                }
                keep
            });
            (discovered, announced)
        };
        for _ in 0..discovered {
            self.peer_request_done(false);
        }
        if shared.peer_done.load(Ordering::Relaxed) {
            return;
        }
        for (ours, ns) in announced {
            let _ = self.enqueue(&PublishNamespaceDone.into(), &self.done_envelope(ours, ns));
        }
    }

    /// Where PUBLISH_NAMESPACE_DONE for our PUBLISH_NAMESPACE `id` of `ns` is addressed.
    fn done_envelope(&self, id: u64, ns: TrackNamespace) -> Envelope {
        let done: Message = PublishNamespaceDone.into();
        Envelope {
            address: Some(if by_namespace(self.version, &done) {
                Address::Namespace(ns)
            } else {
                Address::Request(id)
            }),
            answers: Some(RequestType::PublishNamespace),
        }
    }
}

/// Writes the control stream: everything every request sends, in the order sent.
async fn write_control(mut send: BoxSendStream, mut rx: mpsc::UnboundedReceiver<Vec<u8>>) {
    while let Some(bytes) = rx.recv().await {
        if send.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

/// Whether draft-14 names this message's request by namespace rather than Request ID.
const fn by_namespace(v: Version, msg: &Message) -> bool {
    match msg {
        Message::PublishNamespaceDone(_) | Message::PublishNamespaceCancel(_) => {
            v.namespace_done_by_namespace()
        }
        Message::UnsubscribeNamespace(_) => v.unsubscribe_namespace_by_prefix(),
        _ => false,
    }
}

/// The sending half of a virtual request stream.
#[derive(Debug)]
pub(crate) struct VirtualWriter {
    inner: Arc<Inner>,
    shared: Arc<Shared>,
    closed: bool,
}

impl VirtualWriter {
    /// Sends a message that takes a fresh Request ID of ours (the request itself, or a
    /// REQUEST_UPDATE): waits for the peer's MAX_REQUEST_ID to allow it, then numbers and
    /// queues it in one step, so Request IDs go out in order. Returns the ID.
    pub(crate) async fn send_fresh(&mut self, mut msg: Message) -> Result<u64, Error> {
        let shared = self.shared.clone();
        let version = self.inner.version;
        let inner = self.inner.clone();
        inner
            .with_credit(|s| {
                let id = s.credit.next_id;
                let env = match &mut msg {
                    Message::RequestUpdate(u) => {
                        u.request_id = id;
                        let parent = shared.id();
                        s.our_updates.insert(id, parent);
                        Envelope {
                            address: Some(Address::Request(parent)),
                            answers: None,
                        }
                    }
                    m => {
                        m.set_request_id(id);
                        let kind = m.request_type().ok_or_else(|| {
                            Error::Invalid(format!("{} opens no request", m.name()))
                        })?;
                        let _ = shared.id.set(id);
                        let _ = shared.kind.set(kind);
                        if let Some(ns) = request_namespace(m) {
                            let _ = shared.namespace.set(ns);
                        }
                        s.routes.insert(id, shared.clone());
                        Envelope::default()
                    }
                };
                s.credit.next_id += 2;
                inner.enqueue(&msg, &env)?;
                Ok(id)
            })
            .await
            .inspect(|_| {
                // draft-14 §9.10: SUBSCRIBE_UPDATE has no answer; the machinery above waits
                // for one, so it gets a REQUEST_OK of nothing.
                if matches!(msg, Message::RequestUpdate(_)) && !version.update_is_answered() {
                    let ok = moq_core::message::RequestOk::default();
                    let _ = shared.push(Inbound::Message(Box::new(ok.into())));
                }
            })
    }

    /// Sends a message on this request: an answer (to the request, or in order to the peer's
    /// REQUEST_UPDATEs), PUBLISH_DONE, ...
    pub(crate) async fn send(&mut self, msg: Message) -> Result<(), Error> {
        let sh = &self.shared;
        if sh.shadow {
            return Ok(());
        }
        let kind = sh.kind.get().copied();
        if !sh.requester && kind == Some(RequestType::SubscribeNamespace) {
            match msg {
                Message::Namespace(n) => return self.announce(n.suffix).await,
                Message::NamespaceDone(n) => return self.withdraw(n.suffix),
                _ => {}
            }
        }
        let is_answer = matches!(
            msg,
            Message::RequestOk(_)
                | Message::RequestError(_)
                | Message::SubscribeOk(_)
                | Message::FetchOk(_)
        );
        let mut address = sh.id();
        let mut answers = kind;
        let first_answer = is_answer && !sh.answered.swap(true, Ordering::Relaxed);
        if is_answer && !first_answer {
            // An answer to the peer's REQUEST_UPDATE, in the order they came.
            let Some(update) = sh.update_answers.lock().pop_front() else {
                return Err(Error::Invalid(format!(
                    "{} with no request to answer",
                    msg.name()
                )));
            };
            self.inner.peer_request_done(false);
            if !self.inner.version.update_is_answered() {
                // draft-14 §9.10: SUBSCRIBE_UPDATE is not answered.
                return Ok(());
            }
            address = update;
            answers = Some(RequestType::RequestUpdate);
        }
        let sent = self.inner.enqueue(
            &msg,
            &Envelope {
                address: Some(Address::Request(address)),
                answers,
            },
        );
        if sent.is_err() && first_answer {
            // Not answered after all: a reset still answers it (REQUEST_ERROR).
            sh.answered.store(false, Ordering::Relaxed);
        }
        sent
    }

    /// Drafts 14-15 answer SUBSCRIBE_NAMESPACE with a PUBLISH_NAMESPACE per matching
    /// namespace, each a request of ours (draft-14 §9.22); NAMESPACE is that.
    async fn announce(&mut self, suffix: TrackNamespace) -> Result<(), Error> {
        let sh = self.shared.clone();
        let prefix = sh.namespace.get().cloned().unwrap_or_default();
        let namespace = prefix
            .join(&suffix)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let inner = self.inner.clone();
        inner
            .with_credit(|s| {
                let id = s.credit.next_id;
                s.credit.next_id += 2;
                s.announced.insert(id, (sh.id(), namespace.clone()));
                let msg = PublishNamespace {
                    request_id: id,
                    namespace: namespace.clone(),
                    params: Default::default(),
                };
                inner.enqueue(&msg.into(), &Envelope::default())
            })
            .await
    }

    /// NAMESPACE_DONE on a draft-14/15 SUBSCRIBE_NAMESPACE: PUBLISH_NAMESPACE_DONE.
    fn withdraw(&mut self, suffix: TrackNamespace) -> Result<(), Error> {
        let sub = self.shared.id();
        let prefix = self.shared.namespace.get().cloned().unwrap_or_default();
        let Ok(namespace) = prefix.join(&suffix) else {
            return Ok(());
        };
        let found = {
            let mut s = self.inner.state.lock();
            let id = s
                .announced
                .iter()
                .find(|(_, (sn, ns))| *sn == sub && *ns == namespace)
                .map(|(id, _)| *id);
            id.and_then(|id| s.announced.remove(&id).map(|(_, ns)| (id, ns)))
        };
        match found {
            Some((id, ns)) => self.inner.enqueue(
                &PublishNamespaceDone.into(),
                &self.inner.done_envelope(id, ns),
            ),
            None => Ok(()),
        }
    }

    /// FIN: for our PUBLISH_NAMESPACE, PUBLISH_NAMESPACE_DONE; for our draft-14/15
    /// SUBSCRIBE_NAMESPACE, UNSUBSCRIBE_NAMESPACE; otherwise nothing goes on the wire.
    pub(crate) fn finish(&mut self) {
        if std::mem::replace(&mut self.closed, true)
            || self.shared.peer_done.load(Ordering::Relaxed)
            || self.shared.shadow
        {
            return;
        }
        let msg: Option<Message> = match (self.shared.requester, self.shared.kind.get()) {
            (true, Some(RequestType::PublishNamespace)) => Some(PublishNamespaceDone.into()),
            (true, Some(RequestType::SubscribeNamespace)) => Some(UnsubscribeNamespace.into()),
            _ => None,
        };
        if let Some(m) = msg {
            self.end_with(m);
        }
    }

    /// A reset: the cancellation message of the request's kind and our role (UNSUBSCRIBE,
    /// FETCH_CANCEL, PUBLISH_NAMESPACE_DONE / _CANCEL, UNSUBSCRIBE_NAMESPACE); a request of
    /// the peer's that was not answered yet gets its REQUEST_ERROR, so every request is
    /// answered.
    pub(crate) fn reset(&mut self, code: StreamResetCode) {
        if std::mem::replace(&mut self.closed, true)
            || self.shared.peer_done.load(Ordering::Relaxed)
            || self.shared.shadow
        {
            return;
        }
        let sh = &self.shared;
        let Some(&kind) = sh.kind.get() else { return };
        if !sh.requester && !sh.answered.swap(true, Ordering::Relaxed) {
            let e = RequestError::new(RequestErrorCode::INTERNAL_ERROR, "cancelled");
            return self.end_with(e.into());
        }
        let ended = || PublishDone {
            status: PublishDoneCode::INTERNAL_ERROR,
            stream_count: 0,
            reason: "cancelled".into(),
        };
        let msg: Option<Message> = match (sh.requester, kind) {
            (true, RequestType::Subscribe) | (false, RequestType::Publish) => {
                Some(Unsubscribe.into())
            }
            (true, RequestType::Fetch) => Some(FetchCancel.into()),
            (true, RequestType::PublishNamespace) => Some(PublishNamespaceDone.into()),
            (true, RequestType::SubscribeNamespace) => Some(UnsubscribeNamespace.into()),
            (true, RequestType::Publish) | (false, RequestType::Subscribe) => Some(ended().into()),
            (false, RequestType::PublishNamespace) => Some(
                PublishNamespaceCancel {
                    code: RequestErrorCode(code.0),
                    reason: String::new(),
                }
                .into(),
            ),
            _ => None,
        };
        if let Some(m) = msg {
            self.end_with(m);
        }
    }

    fn end_with(&self, msg: Message) {
        let sh = &self.shared;
        let v = self.inner.version;
        let address = match sh.namespace.get() {
            Some(ns) if by_namespace(v, &msg) => Address::Namespace(ns.clone()),
            _ => Address::Request(sh.id()),
        };
        let env = Envelope {
            address: Some(address),
            answers: sh.kind.get().copied(),
        };
        if let Err(e) = self.inner.enqueue(&msg, &env) {
            tracing::debug!(message = msg.name(), error = %e, "not sent");
        }
    }

    /// Resolves when the peer cancels the request (its code), or with `None` once the
    /// control stream is gone.
    pub(crate) async fn stopped(&mut self) -> Option<u64> {
        let mut stop = self.shared.stop.subscribe();
        let mut closed = self.inner.closed.subscribe();
        tokio::select! {
            r = stop.wait_for(|s| s.is_some()) => r.ok().and_then(|s| *s),
            _ = closed.wait_for(|c| c.is_some()) => None,
        }
    }
}

impl Drop for VirtualWriter {
    fn drop(&mut self) {
        // Like a stream's writer: dropped unfinished, the request is cancelled.
        self.reset(StreamResetCode::CANCELLED);
    }
}

/// The receiving half of a virtual request stream; dropped, it leaves the route table.
#[derive(Debug)]
pub(crate) struct VirtualReader {
    inner: Weak<Inner>,
    closed: watch::Receiver<Option<Error>>,
    shared: Arc<Shared>,
    rx: mpsc::Receiver<Inbound>,
}

impl Drop for VirtualReader {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.unregister(&self.shared);
        }
    }
}

/// What a virtual stream's reader yields.
#[derive(Debug)]
pub(crate) enum Read {
    /// A message.
    Message(Box<Message>),
    /// The peer's half ended.
    Fin,
}

impl VirtualReader {
    /// The next message, the peer's end of its half, its reset ([`Error::Cancelled`]) or the
    /// end of the control stream.
    pub(crate) async fn next(&mut self) -> Result<Read, Error> {
        let ev = tokio::select! {
            biased;
            ev = self.rx.recv() => ev,
            c = self.closed.wait_for(|c| c.is_some()) => {
                return Err(c.ok().and_then(|c| c.clone()).unwrap_or_else(|| Error::protocol("the control stream is closed")));
            }
        };
        match ev {
            Some(Inbound::Message(m)) => Ok(Read::Message(m)),
            Some(Inbound::Fin) => Ok(Read::Fin),
            Some(Inbound::Reset(code)) => Err(Error::Cancelled(code)),
            None => Err(Error::protocol("the control stream is closed")),
        }
    }

    /// Messages waiting to be read.
    pub(crate) fn buffered(&self) -> usize {
        self.rx.len()
    }

    /// Stops reading: the request leaves the route table.
    pub(crate) fn stop(&mut self) {
        if let Some(inner) = self.inner.upgrade() {
            inner.unregister(&self.shared);
        }
    }
}

/// The namespace (or prefix) draft-14 names a namespace request by.
pub(crate) fn request_namespace(m: &Message) -> Option<TrackNamespace> {
    match m {
        Message::PublishNamespace(p) => Some(p.namespace.clone()),
        Message::SubscribeNamespace(s) => Some(s.prefix.clone()),
        _ => None,
    }
}
