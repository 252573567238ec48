//! The sending half of a virtual request stream: a request's messages out on the control
//! stream, with FIN, reset and STOP_SENDING spelled as the messages drafts 14-16 use.

use std::sync::Arc;

use moq_core::TrackNamespace;
use moq_core::codes::{PublishDoneCode, RequestErrorCode, StreamResetCode};
use moq_core::message::{
    Address, Envelope, FetchCancel, Message, PublishDone, PublishNamespace, PublishNamespaceCancel,
    PublishNamespaceDone, RequestError, RequestType, Unsubscribe, UnsubscribeNamespace,
};

use super::route::{Inbound, Shared, request_namespace};
use super::table::{Inner, by_namespace};
use crate::error::Error;

/// The sending half of a virtual request stream.
#[derive(Debug)]
pub(crate) struct VirtualWriter {
    inner: Arc<Inner>,
    shared: Arc<Shared>,
    closed: bool,
}

impl VirtualWriter {
    /// The writer of `shared`, on the control stream of `inner`.
    pub(super) fn new(inner: Arc<Inner>, shared: Arc<Shared>) -> VirtualWriter {
        VirtualWriter {
            inner,
            shared,
            closed: false,
        }
    }

    /// Sends a message that takes a fresh Request ID of ours (the request itself, or a
    /// REQUEST_UPDATE): waits for the peer's MAX_REQUEST_ID to allow it, then numbers and
    /// queues it in one step, so Request IDs go out in order. Returns the ID.
    pub(crate) async fn send_fresh(&mut self, mut msg: Message) -> Result<u64, Error> {
        let shared = self.shared.clone();
        let version = self.inner.version();
        let inner = self.inner.clone();
        inner
            .with_credit(|s| {
                // Taken only once the message is known to open a request.
                let id = s.next_id();
                let env = match &mut msg {
                    Message::RequestUpdate(u) => {
                        u.request_id = id;
                        let parent = shared.id();
                        s.insert_update(id, parent);
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
                        shared.identify(id, kind, request_namespace(m));
                        s.insert_route(id, shared.clone());
                        Envelope::default()
                    }
                };
                s.take_id();
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
        if sh.shadow() {
            return Ok(());
        }
        let kind = sh.kind();
        if !sh.requester() && kind == Some(RequestType::SubscribeNamespace) {
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
        let first_answer = is_answer && sh.answer();
        if is_answer && !first_answer {
            // An answer to the peer's REQUEST_UPDATE, in the order they came.
            let Some(update) = sh.next_update_answer() else {
                return Err(Error::Invalid(format!(
                    "{} with no request to answer",
                    msg.name()
                )));
            };
            self.inner.peer_request_done(false);
            if !self.inner.version().update_is_answered() {
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
            sh.unanswer();
        }
        sent
    }

    /// Drafts 14-15 answer SUBSCRIBE_NAMESPACE with a PUBLISH_NAMESPACE per matching
    /// namespace, each a request of ours (draft-14 §9.22); NAMESPACE is that.
    async fn announce(&mut self, suffix: TrackNamespace) -> Result<(), Error> {
        let sh = self.shared.clone();
        let prefix = sh.namespace().cloned().unwrap_or_default();
        let namespace = prefix
            .join(&suffix)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        let inner = self.inner.clone();
        inner
            .with_credit(|s| {
                let id = s.take_id();
                s.insert_announced(id, sh.id(), namespace.clone());
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
        let prefix = self.shared.namespace().cloned().unwrap_or_default();
        let Ok(namespace) = prefix.join(&suffix) else {
            return Ok(());
        };
        match self.inner.take_announced(sub, &namespace) {
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
            || self.shared.peer_done()
            || self.shared.shadow()
        {
            return;
        }
        let msg: Option<Message> = match (self.shared.requester(), self.shared.kind()) {
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
            || self.shared.peer_done()
            || self.shared.shadow()
        {
            return;
        }
        let sh = &self.shared;
        let Some(kind) = sh.kind() else { return };
        if !sh.requester() && sh.answer() {
            let e = RequestError::new(RequestErrorCode::INTERNAL_ERROR, "cancelled");
            return self.end_with(e.into());
        }
        let ended = || PublishDone {
            status: PublishDoneCode::INTERNAL_ERROR,
            stream_count: 0,
            reason: "cancelled".into(),
        };
        let msg: Option<Message> = match (sh.requester(), kind) {
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
        let v = self.inner.version();
        let address = match sh.namespace() {
            Some(ns) if by_namespace(v, &msg) => Address::Namespace(ns.clone()),
            _ => Address::Request(sh.id()),
        };
        let env = Envelope {
            address: Some(address),
            answers: sh.kind(),
        };
        if let Err(e) = self.inner.enqueue(&msg, &env) {
            tracing::debug!(message = msg.name(), error = %e, "not sent");
        }
    }

    /// Resolves when the peer cancels the request (its code), or with `None` once the
    /// control stream is gone.
    pub(crate) async fn stopped(&mut self) -> Option<u64> {
        let mut stop = self.shared.stop_receiver();
        let mut closed = self.inner.closed_receiver();
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
