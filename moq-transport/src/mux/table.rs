//! What the virtual streams of one control stream share: the route table from Request ID to
//! request, Request ID credit, the drafts 14-15 SUBSCRIBE_NAMESPACE bookkeeping, and the
//! queue to the control stream's writer.

use std::collections::HashMap;
use std::sync::Arc;

use moq_core::message::{
    Address, Envelope, MaxRequestId, Message, PublishNamespaceDone, RequestType, RequestsBlocked,
};
use moq_core::{TrackNamespace, Version};
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc, watch};

use super::credit::Credit;
use super::route::Shared;
use crate::error::Error;
use crate::transport::BoxSendStream;

#[derive(Debug)]
pub(super) struct State {
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

impl State {
    /// Takes our next Request ID (within the peer's MAX_REQUEST_ID: see
    /// [`Inner::with_credit`]).
    pub(super) fn take_id(&mut self) -> u64 {
        self.credit.take_id()
    }

    /// Our next Request ID, not taken yet.
    pub(super) fn next_id(&self) -> u64 {
        self.credit.next_id()
    }

    /// Routes the peer's messages for request `id` to `shared`.
    pub(super) fn insert_route(&mut self, id: u64, shared: Arc<Shared>) {
        self.routes.insert(id, shared);
    }

    /// Our REQUEST_UPDATE `id` on request `parent` awaits an answer.
    pub(super) fn insert_update(&mut self, id: u64, parent: u64) {
        self.our_updates.insert(id, parent);
    }

    /// Drafts 14-15: our PUBLISH_NAMESPACE `id` of `namespace` answers the peer's
    /// SUBSCRIBE_NAMESPACE `sub`.
    pub(super) fn insert_announced(&mut self, id: u64, sub: u64, namespace: TrackNamespace) {
        self.announced.insert(id, (sub, namespace));
    }
}

#[derive(Debug)]
pub(super) struct Inner {
    version: Version,
    out: mpsc::UnboundedSender<Vec<u8>>,
    state: Mutex<State>,
    credit_changed: Notify,
    /// Set once the control stream is gone; every virtual stream ends with it.
    closed: watch::Sender<Option<Error>>,
}

impl Inner {
    /// The shared state of a control stream whose writer reads `out`'s other end.
    pub(super) fn new(
        version: Version,
        out: mpsc::UnboundedSender<Vec<u8>>,
        credit: Credit,
    ) -> Inner {
        Inner {
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
        }
    }

    pub(super) fn version(&self) -> Version {
        self.version
    }

    /// The control stream's end, as it changes: `Some` once it is gone.
    pub(super) fn closed_receiver(&self) -> watch::Receiver<Option<Error>> {
        self.closed.subscribe()
    }

    /// Encodes `msg` addressed by `env` and queues it for the control stream.
    pub(super) fn enqueue(&self, msg: &Message, env: &Envelope) -> Result<(), Error> {
        let mut bytes = Vec::new();
        msg.encode_addressed(env, &mut bytes, self.version)?;
        tracing::trace!(message = msg.name(), ?env.address, len = bytes.len(), "send");
        self.out
            .send(bytes)
            .map_err(|_| Error::protocol("the control stream is closed"))
    }

    /// Runs `f` once the peer's MAX_REQUEST_ID allows one more Request ID of ours; sends
    /// REQUESTS_BLOCKED once per limit while waiting (draft-14 §9.6).
    pub(super) async fn with_credit<T>(
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
                if s.credit.has_room() {
                    return f(&mut s);
                }
                if let Some(max) = s.credit.blocked() {
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

    /// Checks the peer's new Request ID against the MAX_REQUEST_ID we granted (draft-14
    /// §9.5: at or above it is TOO_MANY_REQUESTS).
    pub(super) fn check_peer_id(&self, id: u64) -> Result<(), Error> {
        self.state.lock().credit.check_peer_id(id)
    }

    /// The peer's MAX_REQUEST_ID: it may only grow (draft-14 §9.5).
    pub(super) fn on_max_request_id(&self, max: u64) -> Result<(), Error> {
        self.state.lock().credit.raise_peer_max(max)?;
        self.credit_changed.notify_waiters();
        Ok(())
    }

    /// A request of the peer's completed: grant another Request ID, in batches of a quarter
    /// window (or at once when `now`, for REQUESTS_BLOCKED).
    pub(super) fn peer_request_done(&self, now: bool) {
        let grant = self.state.lock().credit.complete(now);
        if let Some(max) = grant {
            let _ = self.enqueue(
                &MaxRequestId { request_id: max }.into(),
                &Envelope::default(),
            );
        }
    }

    /// Makes `shadow` the companion of request `id`, if it is still going (under the table's
    /// lock, so it ends with the request however the two race).
    pub(super) fn attach_shadow(&self, id: u64, shadow: &Arc<Shared>) {
        if let Some(main) = self.state.lock().routes.get(&id) {
            main.set_companion(shadow.clone());
        }
    }

    /// Routes the peer's messages for request `id` to `shared`.
    pub(super) fn insert_route(&self, id: u64, shared: Arc<Shared>) {
        self.state.lock().insert_route(id, shared);
    }

    /// Drafts 14-15: the SUBSCRIBE_NAMESPACE of ours that covers the peer's PUBLISH_NAMESPACE
    /// `id` of `namespace`, which then answers it.
    pub(super) fn discovered_by(&self, id: u64, namespace: &TrackNamespace) -> Option<Arc<Shared>> {
        let mut s = self.state.lock();
        let route = s
            .routes
            .values()
            .find(|r| {
                r.requester()
                    && r.kind() == Some(RequestType::SubscribeNamespace)
                    && r.namespace().is_some_and(|p| p.is_prefix_of(namespace))
            })
            .cloned();
        if let Some(r) = &route {
            s.discovered.insert(id, (r.id(), namespace.clone()));
        }
        route
    }

    /// Drafts 14-15: forgets our PUBLISH_NAMESPACE of `namespace` for the peer's
    /// SUBSCRIBE_NAMESPACE `sub`: its Request ID and namespace, if there was one.
    pub(super) fn take_announced(
        &self,
        sub: u64,
        namespace: &TrackNamespace,
    ) -> Option<(u64, TrackNamespace)> {
        let mut s = self.state.lock();
        let id = s
            .announced
            .iter()
            .find(|(_, (sn, ns))| *sn == sub && ns == namespace)
            .map(|(id, _)| *id);
        id.and_then(|id| s.announced.remove(&id).map(|(_, ns)| (id, ns)))
    }

    /// Ends every virtual stream with `err`: the control stream is gone.
    pub(super) fn close(&self, err: Error) {
        self.closed.send_if_modified(|c| {
            if c.is_none() {
                *c = Some(err);
                true
            } else {
                false
            }
        });
        self.state.lock().routes.clear();
        self.credit_changed.notify_waiters();
    }

    /// Drafts 14-15: a PUBLISH_NAMESPACE_DONE for one of the peer's PUBLISH_NAMESPACEs that
    /// answered our SUBSCRIBE_NAMESPACE: that subscription and the namespace's suffix.
    pub(super) fn discovery(
        &self,
        msg: &Message,
        address: &Address,
    ) -> Option<(Arc<Shared>, TrackNamespace)> {
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
        let prefix = route.namespace()?;
        Some((route.clone(), ns.strip_prefix(prefix)?))
    }

    /// The virtual stream a message from the peer belongs to, and whether the message answers
    /// one of our REQUEST_UPDATEs on it.
    pub(super) fn route(&self, msg: &Message, address: &Address) -> Option<(Arc<Shared>, bool)> {
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
                        r.requester() == requester
                            && r.kind() == Some(kind)
                            && r.namespace() == Some(ns)
                    })
                    .map(|r| (r.clone(), false))
            }
        }
    }

    /// `shared` leaves the route table (its reader is gone or stopped reading).
    pub(super) fn unregister(&self, shared: &Arc<Shared>) {
        let Some(id) = shared.known_id() else { return };
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
            if let Some(c) = shared.take_companion() {
                c.try_fin();
            }
        }
        if removed && !shared.requester() {
            self.peer_request_done(false);
        }
    }

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
        if shared.peer_done() {
            return;
        }
        for (ours, ns) in announced {
            let _ = self.enqueue(&PublishNamespaceDone.into(), &self.done_envelope(ours, ns));
        }
    }

    /// Where PUBLISH_NAMESPACE_DONE for our PUBLISH_NAMESPACE `id` of `ns` is addressed.
    pub(super) fn done_envelope(&self, id: u64, ns: TrackNamespace) -> Envelope {
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
pub(super) async fn write_control(
    mut send: BoxSendStream,
    mut rx: mpsc::UnboundedReceiver<Vec<u8>>,
) {
    while let Some(bytes) = rx.recv().await {
        if send.write_all(&bytes).await.is_err() {
            return;
        }
    }
}

/// Whether draft-14 names this message's request by namespace rather than Request ID.
pub(super) const fn by_namespace(v: Version, msg: &Message) -> bool {
    match msg {
        Message::PublishNamespaceDone(_) | Message::PublishNamespaceCancel(_) => {
            v.namespace_done_by_namespace()
        }
        Message::UnsubscribeNamespace(_) => v.unsubscribe_namespace_by_prefix(),
        _ => false,
    }
}
