//! One request's virtual stream as its two halves and the route table share it: its identity
//! (Request ID, kind, namespace), the inbox its reader reads, and the flags that say who
//! answered and who ended it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use moq_core::TrackNamespace;
use moq_core::codes::StreamResetCode;
use moq_core::message::{Message, RequestType};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use crate::error::Error;

/// How many messages may wait for one virtual stream's reader before the control stream's
/// reader waits for it: one stream carries every request, so a request that stops reading
/// holds up the others (the single stream's nature; its memory stays bounded).
const INBOX: usize = 256;

/// What a virtual stream's reader receives.
#[derive(Debug)]
pub(super) enum Inbound {
    Message(Box<Message>),
    Fin,
    Reset(StreamResetCode),
}

/// One request's virtual stream, shared by its two halves and the route table.
#[derive(Debug)]
pub(super) struct Shared {
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
    /// A virtual stream of ours (`requester`) or the peer's, a `shadow` or not, and the
    /// receiving end of its inbox.
    pub(super) fn new(requester: bool, shadow: bool) -> (Arc<Shared>, mpsc::Receiver<Inbound>) {
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
        (shared, rx)
    }

    /// Names the request, once: its Request ID, kind, and namespace where draft-14 addresses
    /// it by one.
    pub(super) fn identify(&self, id: u64, kind: RequestType, namespace: Option<TrackNamespace>) {
        let _ = self.id.set(id);
        let _ = self.kind.set(kind);
        if let Some(ns) = namespace {
            let _ = self.namespace.set(ns);
        }
    }

    /// The Request ID, or `u64::MAX` before it has one.
    pub(super) fn id(&self) -> u64 {
        self.id.get().copied().unwrap_or(u64::MAX)
    }

    /// The Request ID, if it has one.
    pub(super) fn known_id(&self) -> Option<u64> {
        self.id.get().copied()
    }

    pub(super) fn kind(&self) -> Option<RequestType> {
        self.kind.get().copied()
    }

    pub(super) fn namespace(&self) -> Option<&TrackNamespace> {
        self.namespace.get()
    }

    /// We sent the request.
    pub(super) fn requester(&self) -> bool {
        self.requester
    }

    /// Silent on the wire: the SUBSCRIBE_TRACKS half of a draft-14/15 SUBSCRIBE_NAMESPACE.
    pub(super) fn shadow(&self) -> bool {
        self.shadow
    }

    /// Queues `ev` for the reader; if the inbox is full, the wait for room.
    pub(super) fn push(&self, ev: Inbound) -> Option<impl std::future::Future<Output = ()> + '_> {
        match self.inbox.try_send(ev) {
            Ok(()) => None,
            Err(mpsc::error::TrySendError::Closed(_)) => None,
            Err(mpsc::error::TrySendError::Full(ev)) => Some(async move {
                let _ = self.inbox.send(ev).await;
            }),
        }
    }

    /// Ends the reader's half now if there is room (for a shadow ending with its request).
    pub(super) fn try_fin(&self) {
        let _ = self.inbox.try_send(Inbound::Fin);
    }

    /// The peer cancelled: STOP_SENDING on our half, with `code`.
    pub(super) fn peer_cancelled(&self, code: u64) {
        self.set_peer_done();
        self.stop.send_replace(Some(code));
    }

    /// The peer ended the request: nothing of ours ends it again.
    pub(super) fn set_peer_done(&self) {
        self.peer_done.store(true, Ordering::Relaxed);
    }

    pub(super) fn peer_done(&self) -> bool {
        self.peer_done.load(Ordering::Relaxed)
    }

    /// The peer's STOP_SENDING code on our half, as it changes.
    pub(super) fn stop_receiver(&self) -> watch::Receiver<Option<u64>> {
        self.stop.subscribe()
    }

    /// Records the peer's answer to our request; true the first time.
    pub(super) fn peer_answer(&self) -> bool {
        !self.peer_answered.swap(true, Ordering::Relaxed)
    }

    pub(super) fn peer_answered(&self) -> bool {
        self.peer_answered.load(Ordering::Relaxed)
    }

    /// Records our answer to the peer's request; true the first time.
    pub(super) fn answer(&self) -> bool {
        !self.answered.swap(true, Ordering::Relaxed)
    }

    /// Our answer did not go out after all.
    pub(super) fn unanswer(&self) {
        self.answered.store(false, Ordering::Relaxed);
    }

    /// The peer's REQUEST_UPDATE `id` waits for our answer.
    pub(super) fn queue_update_answer(&self, id: u64) {
        self.update_answers.lock().push_back(id);
    }

    /// The oldest of the peer's REQUEST_UPDATEs not answered yet.
    pub(super) fn next_update_answer(&self) -> Option<u64> {
        self.update_answers.lock().pop_front()
    }

    /// Keeps a NAMESPACE that crossed our SUBSCRIBE_NAMESPACE, for after its answer.
    pub(super) fn keep_early(&self, msg: Message) {
        self.early.lock().push(msg);
    }

    pub(super) fn take_early(&self) -> Vec<Message> {
        std::mem::take(&mut *self.early.lock())
    }

    pub(super) fn set_companion(&self, shadow: Arc<Shared>) {
        *self.companion.lock() = Some(shadow);
    }

    pub(super) fn take_companion(&self) -> Option<Arc<Shared>> {
        self.companion.lock().take()
    }
}

/// Queues `ev` for `route`'s reader, waiting for room.
pub(super) async fn push(route: &Shared, ev: Inbound) -> Result<(), Error> {
    if let Some(wait) = route.push(ev) {
        wait.await;
    }
    Ok(())
}

/// The namespace (or prefix) draft-14 names a namespace request by.
pub(crate) fn request_namespace(m: &Message) -> Option<TrackNamespace> {
    match m {
        Message::PublishNamespace(p) => Some(p.namespace.clone()),
        Message::SubscribeNamespace(s) => Some(s.prefix.clone()),
        _ => None,
    }
}
