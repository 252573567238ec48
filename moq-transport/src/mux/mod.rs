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
//!
//! Inside, each file importing only those before it: `credit` (Request ID flow control) and
//! `route` (one request's shared state) ← `table` (the route table and the control stream's
//! queue) ← `writer` / `reader` (the two halves) ← this module's [`Mux`].

mod credit;
mod reader;
mod route;
mod table;
mod writer;

use std::sync::Arc;

use moq_core::TrackNamespace;
use moq_core::Version;
use moq_core::codes::StreamResetCode;
use moq_core::message::{Address, Envelope, Message, Namespace, NamespaceDone, RequestType};
use tokio::sync::mpsc;

use self::credit::Credit;
use self::route::{Inbound, Shared, push};
use self::table::{Inner, write_control};
use crate::error::Error;
use crate::transport::BoxSendStream;

pub(crate) use self::reader::{Read, VirtualReader};
pub(crate) use self::route::request_namespace;
pub(crate) use self::writer::VirtualWriter;

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
        let credit = Credit::new(parity, peer_max, window);
        let inner = Arc::new(Inner::new(version, out, credit));
        spawn(Box::pin(write_control(send, rx)));
        Mux { inner }
    }

    /// The MAX_REQUEST_ID for our SETUP (`peer parity + 2 * window`).
    pub(crate) fn initial_grant(window: u64, parity: u64) -> u64 {
        Credit::initial_grant(window, parity)
    }

    /// Sends a message that belongs to no request (GOAWAY, MAX_REQUEST_ID).
    pub(crate) fn send(&self, msg: Message) -> Result<(), Error> {
        self.inner.enqueue(&msg, &Envelope::default())
    }

    /// A Request ID of ours for a request that runs on a stream of its own (draft-16's
    /// SUBSCRIBE_NAMESPACE), within the peer's MAX_REQUEST_ID.
    pub(crate) async fn allocate(&self) -> Result<u64, Error> {
        self.inner.with_credit(|s| Ok(s.take_id())).await
    }

    /// A virtual stream for a request of ours; its first message (sent with
    /// [`VirtualWriter::send_fresh`]) gives it its Request ID.
    pub(crate) fn open(&self) -> (VirtualWriter, VirtualReader) {
        let (shared, rx) = Shared::new(true, false);
        self.halves(shared, rx)
    }

    /// The virtual stream of the peer's request `id` of kind `kind` (its first message was
    /// read by the driver), named by `namespace` where draft-14 addresses it so.
    pub(crate) fn accept(
        &self,
        id: u64,
        kind: RequestType,
        namespace: Option<TrackNamespace>,
    ) -> (VirtualWriter, VirtualReader) {
        let (shared, rx) = Shared::new(false, false);
        shared.identify(id, kind, namespace);
        self.inner.insert_route(id, shared.clone());
        self.halves(shared, rx)
    }

    /// Drafts 14-15: the SUBSCRIBE_TRACKS half of the peer's SUBSCRIBE_NAMESPACE `id` (draft-14
    /// §9.22: the publisher forwards the matching PUBLISH_NAMESPACE *and PUBLISH* messages).
    /// It runs as a request of its own that is silent on the wire: its answer is the
    /// SUBSCRIBE_NAMESPACE's, and it ends when that one does; the PUBLISHes it sends are
    /// requests of their own.
    pub(crate) fn accept_shadow(&self, id: u64) -> (VirtualWriter, VirtualReader) {
        let (shared, rx) = Shared::new(false, true);
        shared.identify(id, RequestType::SubscribeTracks, None);
        self.inner.attach_shadow(id, &shared);
        self.halves(shared, rx)
    }

    /// The two halves of `shared`, whose inbox `rx` is.
    fn halves(
        &self,
        shared: Arc<Shared>,
        rx: mpsc::Receiver<Inbound>,
    ) -> (VirtualWriter, VirtualReader) {
        let reader = VirtualReader::new(&self.inner, shared.clone(), rx);
        (VirtualWriter::new(self.inner.clone(), shared), reader)
    }

    /// Checks the peer's new Request ID against the MAX_REQUEST_ID we granted (draft-14
    /// §9.5: at or above it is TOO_MANY_REQUESTS).
    pub(crate) fn check_peer_id(&self, id: u64) -> Result<(), Error> {
        self.inner.check_peer_id(id)
    }

    /// One of the peer's requests that ran on a stream of its own has ended.
    pub(crate) fn peer_request_done(&self) {
        self.inner.peer_request_done(false);
    }

    /// The peer's MAX_REQUEST_ID: it may only grow (draft-14 §9.5).
    pub(crate) fn on_max_request_id(&self, max: u64) -> Result<(), Error> {
        self.inner.on_max_request_id(max)
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
            route.peer_cancelled(code.0);
            return push(&route, Inbound::Reset(code)).await;
        }
        let kind = route.kind();
        // What the newer drafts follow with a FIN: the answer that ends a request.
        let fin = match &msg {
            Message::UnsubscribeNamespace(_) => {
                route.set_peer_done();
                let companion = route.take_companion();
                if let Some(c) = companion {
                    c.set_peer_done();
                    push(&c, Inbound::Fin).await?;
                }
                return push(&route, Inbound::Fin).await;
            }
            Message::RequestUpdate(u) => {
                route.queue_update_answer(u.request_id);
                false
            }
            Message::RequestError(_) | Message::PublishDone(_) => {
                // The peer ended the request: nothing of ours (UNSUBSCRIBE, ...) follows.
                route.set_peer_done();
                true
            }
            Message::RequestOk(_) => kind == Some(RequestType::TrackStatus),
            _ => false,
        };
        let first_answer = route.requester()
            && !update_answer
            && matches!(
                msg,
                Message::RequestOk(_)
                    | Message::RequestError(_)
                    | Message::SubscribeOk(_)
                    | Message::FetchOk(_)
            )
            && route.peer_answer();
        push(&route, Inbound::Message(Box::new(msg))).await?;
        if first_answer {
            let early = route.take_early();
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
        let found = self.inner.discovered_by(id, namespace);
        let Some(route) = found else { return Ok(false) };
        let prefix = route.namespace().cloned().unwrap_or_default();
        let suffix = namespace.strip_prefix(&prefix).unwrap_or_default();
        let ok = Envelope {
            address: Some(Address::Request(id)),
            answers: Some(RequestType::PublishNamespace),
        };
        self.inner
            .enqueue(&moq_core::message::RequestOk::default().into(), &ok)?;
        let added = Namespace {
            suffix,
            cluster: None,
        }
        .into();
        if route.peer_answered() {
            push(&route, Inbound::Message(Box::new(added))).await?;
        } else {
            // It crossed our SUBSCRIBE_NAMESPACE: it counts (the publisher will not send it
            // again), after the answer.
            route.keep_early(added);
        }
        Ok(true)
    }

    /// Ends every virtual stream with `err`: the control stream is gone.
    pub(crate) fn close(&self, err: Error) {
        self.inner.close(err);
    }
}
