//! PUBLISH_NAMESPACE, both sides (draft-19 §6.2, §10.15).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use moq_core::TrackNamespace;
use moq_core::codes::RequestErrorCode;
use moq_core::codes::StreamResetCode;
use moq_core::message::cluster::ClusterParams;
use moq_core::message::{
    ControlMessage, ParamContext, Parameters, PublishNamespace, RequestError, RequestOk,
};

use super::cluster::{Received, cluster_params, received_route, withheld};
use super::state::{AcceptedGuard, AcceptedSlot, NamespaceState};
use crate::error::Error;
use crate::index::NamespaceRegistration;
use crate::request::{Event, Parked, Request, RequestHandle};
use crate::session::{GoawayInfo, RequestKind};

/// A namespace we announced with PUBLISH_NAMESPACE and the peer accepted.
///
/// While it lives the namespace is registered in the session's
/// [`crate::Session::namespaces`], so the peer's SUBSCRIBE_NAMESPACE finds it. Dropping it (or
/// [`PublishedNamespace::withdraw`]) withdraws the announcement by cancelling its request
/// stream (draft-19 §6.2; PUBLISH_NAMESPACE_DONE on drafts 14-16) and unregisters the
/// namespace locally. The peer can revoke it; [`PublishedNamespace::ended`] tells when (the
/// local registration then stays until the handle drops).
///
/// It is `#[must_use]`, like every handle of this crate whose drop cancels a request
/// ([`crate::namespace::NamespaceSubscription`], [`crate::track::Subscription`],
/// [`crate::track::FetchResponse`], [`crate::track::TrackSubscription`]): as a bare statement
/// the announcement would be withdrawn at once, and the compiler says so.
///
/// ```compile_fail
/// #[deny(unused_must_use)]
/// async fn run(session: moq_transport::Session, ns: moq_core::TrackNamespace) -> Result<(), moq_transport::Error> {
///     session.publish_namespace(ns).await?;
///     Ok(())
/// }
/// ```
#[derive(Debug)]
#[must_use = "dropping it withdraws the namespace at once: hold it while the namespace should stay announced"]
pub struct PublishedNamespace {
    namespace: TrackNamespace,
    request: RequestHandle,
    _registration: NamespaceRegistration,
}

impl PublishedNamespace {
    /// The announced namespace.
    pub fn namespace(&self) -> &TrackNamespace {
        &self.namespace
    }

    /// The PUBLISH_NAMESPACE's Request ID.
    pub fn request_id(&self) -> u64 {
        self.request.id()
    }

    /// True until the peer revokes the announcement or the session ends.
    pub fn is_active(&self) -> bool {
        self.request.end().is_none()
    }

    /// Resolves when the announcement ends: [`Error::Cancelled`] if the peer revoked it, or the
    /// session's error.
    ///
    /// Cancel safe.
    pub async fn ended(&self) -> Error {
        match self.request.ended().await {
            Err(e) => e,
            Ok(()) => Error::Cancelled(StreamResetCode::CANCELLED),
        }
    }

    /// Sends REQUEST_UPDATE (for example a fresh AUTHORIZATION_TOKEN) and waits for the answer.
    /// A REQUEST_ERROR ends the announcement (draft-19 §10.9).
    ///
    /// Cancel safe: dropped before it resolves, the update is either not sent at all or sent
    /// with its answer still applied (a refusal still ends the announcement).
    pub async fn update(&self, params: Parameters) -> Result<(), Error> {
        self.request.update(params).await.map(|_| ())
    }

    /// A GOAWAY the peer sent on this request's stream: re-announce elsewhere (draft-19 §10.4).
    pub fn goaway(&self) -> Option<GoawayInfo> {
        self.request.goaway()
    }

    /// Withdraws the announcement now (the same as dropping it).
    pub fn withdraw(self) {}
}

/// Announces `namespace` and waits for the peer's answer.
pub(crate) async fn publish_namespace(
    state: &NamespaceState,
    namespace: TrackNamespace,
    params: Parameters,
) -> Result<PublishedNamespace, Error> {
    let core = state.core();
    // draft-19 §3.2.1-2: "." and ".session" may not be published by the application.
    if namespace.is_dot() || namespace.is_session_level() {
        return Err(Error::Invalid(format!("namespace {namespace} is reserved")));
    }
    let mut params = params;
    // draft-lcurley-moq-cluster-01 Setup Negotiation: on a session that negotiated the extension
    // every advertisement carries HOP_PATH (ours appended to the route the index holds for it, if
    // any: else ours alone) and ROUTE_COST.
    if let Some(link) = core.cluster()
        && params.cluster.is_none()
    {
        let route = core
            .config()
            .namespaces
            .route(&namespace)
            .unwrap_or_default();
        // draft-lcurley-moq-cluster-01 Path Selection: never a path through the peer's Hop ID.
        if withheld(&route, link) {
            return Err(Error::Invalid(format!(
                "the route to {namespace} runs through the peer (Hop ID {})",
                link.peer
            )));
        }
        params.cluster = cluster_params(&route, link.ours);
    }
    let registration = core.config().namespaces.publish(namespace.clone());
    let mut req = Request::open(
        core,
        PublishNamespace {
            request_id: 0,
            namespace: namespace.clone(),
            params,
        },
    )
    .await?;
    req.request_ok(ParamContext::PublishNamespaceOk).await?;
    tracing::debug!(%namespace, request_id = req.id(), "namespace published");
    let request = req.handle(ParamContext::UpdatePublishNamespace);
    core.serve(async move {
        let end = published(&mut req).await;
        req.set_end(Err(end));
    });
    Ok(PublishedNamespace {
        namespace,
        request,
        _registration: registration,
    })
}

/// Keeps an accepted announcement until it is withdrawn or revoked.
async fn published(req: &mut Request) -> Error {
    loop {
        match req.next().await {
            Event::Updated(u) => {
                let failed = u.answer.as_ref().err().cloned();
                u.reply();
                if let Some(e) = failed {
                    // draft-19 §10.9: a failed update closes the namespace request.
                    req.finish();
                    return Error::Rejected(Box::new(e));
                }
            }
            // A FIN only means no more messages (draft-19 §3.3.2).
            Event::Fin | Event::Update(_) => {}
            Event::Message(m) => return req.unexpected(&m),
            // Withdrawn: cancel the request (draft-19 §6.2, §3.3.3).
            Event::Dropped => return req.dropped(),
            // Revoked by the peer (draft-19 §6.2), or the session ended.
            Event::Ended(e) => return e,
        }
    }
}

/// Answers a PUBLISH_NAMESPACE from the peer: checks, authorizes, registers the namespace in
/// the session's `announced` index and keeps it there until the peer withdraws it, we revoke
/// it, or the session ends.
///
/// It takes the namespace alone and the request boxed, and is a poll function rather than an
/// `async fn`: it waits for the namespace's whole life, and does so in the [`Accepted`] alone
/// (~56 bytes; the `async fn` it replaces waited in ~160). The one-time and rare steps
/// (accepting, answering an update) are boxed futures of their own, freed when done.
pub(crate) fn serve_publish_namespace(
    state: Arc<NamespaceState>,
    ns: TrackNamespace,
    cluster: Option<Box<ClusterParams>>,
    req: Box<Request>,
) -> impl Future<Output = Result<(), Error>> + Send {
    Serving(Step::Busy(Box::pin(accept_publish_namespace(
        state, ns, cluster, req,
    ))))
}

/// A step that gives the accepted request back if it goes on (`None`: it ended).
type Busy = Pin<Box<dyn Future<Output = Result<Option<Accepted>, Error>> + Send>>;

/// The future [`serve_publish_namespace`] returns.
struct Serving(Step);

enum Step {
    /// Accepting, or answering an update, or (on a virtual stream) waiting for an event.
    Busy(Busy),
    /// Accepted: about to wait for the peer's next message or our revocation (in place on a
    /// stream; with a future on a virtual one).
    Waiting(Accepted),
    /// Accepted, on a stream, with nothing else going on: what it keeps while it waits in
    /// place for its whole life, the request parked.
    Parked(ParkedAccepted),
    /// Ended.
    Done,
}

impl Future for Serving {
    type Output = Result<(), Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let step = &mut self.get_mut().0;
        loop {
            let next = match step {
                Step::Busy(f) => match ready!(f.as_mut().poll(cx)) {
                    Ok(Some(accepted)) => {
                        *step = Step::Waiting(accepted);
                        continue;
                    }
                    end => {
                        *step = Step::Done;
                        return Poll::Ready(end.map(drop));
                    }
                },
                Step::Waiting(a) if a.req.parkable(NAME, UPDATES) => {
                    let Step::Waiting(a) = std::mem::replace(step, Step::Done) else {
                        unreachable!("matched as waiting")
                    };
                    *step = Step::Parked(a.park());
                    continue;
                }
                Step::Waiting(a) => {
                    if let Poll::Ready(code) = a.accepted.poll_revoked(cx) {
                        // We revoke our acceptance by cancelling (draft-19 §6.2).
                        a.req.cancel(code);
                        *step = Step::Done;
                        return Poll::Ready(Ok(()));
                    }
                    match a.req.poll_event(cx) {
                        Some(ev) => Some(a.on_event(ready!(ev))),
                        // A virtual stream (drafts 14-16) is read by a future: one per event.
                        None => None,
                    }
                }
                Step::Parked(p) => {
                    let revoked = p.poll_revoked(cx);
                    let Step::Parked(p) = std::mem::replace(step, Step::Done) else {
                        unreachable!("matched as parked")
                    };
                    let Some(mut a) = p.unpark() else {
                        return Poll::Ready(Ok(()));
                    };
                    if let Poll::Ready(code) = revoked {
                        // We revoke our acceptance by cancelling (draft-19 §6.2).
                        a.req.cancel(code);
                        return Poll::Ready(Ok(()));
                    }
                    let ev = a.req.poll_event(cx);
                    let next = match ev {
                        Some(Poll::Ready(ev)) => Some(a.on_event(ev)),
                        None => None,
                        Some(Poll::Pending) => {
                            *step = Step::Parked(a.park());
                            return Poll::Pending;
                        }
                    };
                    *step = Step::Waiting(a);
                    next
                }
                Step::Done => return Poll::Ready(Ok(())),
            };
            if let Some(Next::Wait) = next {
                continue;
            }
            let Step::Waiting(a) = std::mem::replace(step, Step::Done) else {
                return Poll::Ready(Ok(()));
            };
            *step = Step::Busy(match next {
                Some(next) => Box::pin(a.then(next)),
                None => Box::pin(a.wait()),
            });
        }
    }
}

/// A PUBLISH_NAMESPACE's name, for the parked request.
const NAME: &str = <PublishNamespace as ControlMessage>::NAME;
/// What the peer's REQUEST_UPDATE on an accepted PUBLISH_NAMESPACE is checked against.
const UPDATES: ParamContext = ParamContext::UpdatePublishNamespace;

/// An [`Accepted`] whose request is parked: the state an accepted PUBLISH_NAMESPACE on a
/// stream waits in for its whole life (72 bytes where the request alone was 240). Its
/// [`AcceptedGuard`] is kept taken apart: the slot as the parked request's owner's word (in
/// its padding), the state beside it; dropped, it frees the slot as the guard would.
struct ParkedAccepted {
    /// `None` only once taken back by [`ParkedAccepted::unpark`].
    req: Option<Parked<AcceptedSlot>>,
    state: Arc<NamespaceState>,
}

impl ParkedAccepted {
    /// Ready with the code once the application revoked the announcement.
    fn poll_revoked(&self, cx: &mut Context<'_>) -> Poll<StreamResetCode> {
        match &self.req {
            Some(p) => self.state.poll_revoked(p.owner(), cx),
            None => Poll::Pending,
        }
    }

    /// The accepted request again, with its guard.
    fn unpark(mut self) -> Option<Accepted> {
        let (req, slot) = self.req.take()?.unpark(NAME, UPDATES);
        Some(Accepted {
            req: Box::new(req),
            accepted: AcceptedGuard::from_parts(self.state.clone(), slot),
        })
    }
}

impl Drop for ParkedAccepted {
    fn drop(&mut self) {
        if let Some(p) = self.req.take() {
            let slot = p.owner();
            // The request first, then the slot (and with it the namespace's registration), as
            // an `Accepted` drops.
            drop(p);
            drop(AcceptedGuard::from_parts(self.state.clone(), slot));
        }
    }
}

/// What an accepted PUBLISH_NAMESPACE does after an event.
enum Next {
    /// Waits for the next one.
    Wait,
    /// Answers the peer's REQUEST_UPDATE (`Err`: one that failed at the request level).
    Answer(Result<(), RequestError>),
    /// Ends: the result of the serving future.
    End(Result<(), Error>),
}

/// A PUBLISH_NAMESPACE of the peer, accepted: what its serving future keeps while the
/// namespace is published. Dropped, the namespace leaves the session's `announced` index.
struct Accepted {
    req: Box<Request>,
    /// In the session's accepted PUBLISH_NAMESPACEs, which the application can revoke; the
    /// slot keeps the namespace's registration in the session's `announced` index.
    accepted: AcceptedGuard,
}

impl Accepted {
    /// Parks the request; only if it is [`Request::parkable`].
    fn park(self) -> ParkedAccepted {
        let (state, slot) = self.accepted.into_parts();
        ParkedAccepted {
            req: Some((*self.req).park(slot)),
            state,
        }
    }

    /// What follows `ev`.
    fn on_event(&mut self, ev: Event) -> Next {
        match ev {
            // Only whether it could be taken is kept: an update inline is ~500 bytes.
            Event::Update(u) => Next::Answer(u.map(|_| ())),
            Event::Message(m) => Next::End(Err(self.req.unexpected(&m))),
            // Withdrawn by the publisher (draft-19 §6.2), or the session ended.
            Event::Ended(_) => Next::End(Ok(())),
            Event::Fin | Event::Dropped | Event::Updated(_) => Next::Wait,
        }
    }

    /// Waits for the next event with a future (a virtual stream's), or our revocation, and
    /// does what follows it; `None` once the request ended.
    async fn wait(mut self) -> Result<Option<Accepted>, Error> {
        let next = tokio::select! {
            ev = self.req.next() => self.on_event(ev),
            code = std::future::poll_fn(|cx| self.accepted.poll_revoked(cx)) => {
                // We revoke our acceptance by cancelling (draft-19 §6.2).
                self.req.cancel(code);
                return Ok(None);
            }
        };
        self.then(next).await
    }

    /// Does what follows an event; `None` once the request ended.
    async fn then(mut self, next: Next) -> Result<Option<Accepted>, Error> {
        match next {
            Next::Wait => Ok(Some(self)),
            Next::End(end) => end.map(|()| None),
            Next::Answer(update) => Ok(self.answer_update(update).await?.then_some(self)),
        }
    }

    /// Answers the peer's REQUEST_UPDATE (`Err`: one that failed at the request level); false
    /// if the request ended.
    async fn answer_update(&mut self, update: Result<(), RequestError>) -> Result<bool, Error> {
        // draft-19 §10.9.1: a failed update closes the stream.
        // The guard holds its slot while it lives: there is a namespace.
        let ns = self.accepted.namespace().unwrap_or_default();
        let answer = match update {
            Ok(()) => self
                .req
                .authorize(None, RequestKind::PublishNamespace, &ns, None)
                .await
                .map(|()| RequestOk::default()),
            Err(e) => Err(e),
        };
        self.req.answer_update(answer).await
    }
}

/// Checks, authorizes and accepts a PUBLISH_NAMESPACE; `None` if it was refused.
async fn accept_publish_namespace(
    state: Arc<NamespaceState>,
    ns: TrackNamespace,
    cluster: Option<Box<ClusterParams>>,
    mut req: Box<Request>,
) -> Result<Option<Accepted>, Error> {
    let core = state.core();
    req.take_updates(UPDATES);
    let route = match received_route(core.cluster(), cluster.as_deref()) {
        Ok(Some(route)) => Some(route),
        Ok(None) => None,
        Err(Received::Violation(why)) => return Err(req.violation(why.to_string())),
        Err(Received::Looped) => {
            // draft-lcurley-moq-cluster-01 Relay Behavior: an advertisement whose HOP_PATH holds
            // our own Hop ID came back through us; it is dropped, never routed nor forwarded.
            let e = RequestError::new(RequestErrorCode::UNINTERESTED, "HOP_PATH holds our Hop ID");
            (*req).refuse(e).await?;
            return Ok(None);
        }
    };
    // Reserved namespaces (draft-19 §3.2.1-2) are refused by `authorize`.
    let refusal = state.check_announce_room();
    let authorized = req
        .authorize(refusal, RequestKind::PublishNamespace, &ns, None)
        .await;
    if let Err(e) = authorized {
        (*req).refuse(e).await?;
        return Ok(None);
    }
    let registration = core
        .config()
        .announced
        .register(ns.clone(), route.map(Box::new));
    let accepted = state.accept(registration);
    req.send(RequestOk::default()).await?;
    tracing::debug!(namespace = %ns, "PUBLISH_NAMESPACE accepted");
    Ok(Some(Accepted { req, accepted }))
}

#[cfg(test)]
mod tests {
    /// An accepted PUBLISH_NAMESPACE waits for its whole life in its serving future: that
    /// future is the [`super::ParkedAccepted`] and a tag (the `async fn` it replaced was 160
    /// bytes, and kept a boxed request besides).
    #[test]
    fn the_serving_future_is_small() {
        fn size<A, B, C, D, F: Future>(_: impl Fn(A, B, C, D) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let serving = size(super::serve_publish_namespace);
        // It keeps its request parked rather than boxed (a 240-byte chunk): 120 bytes in issue
        // 35's seventh round, 72 in its eighth (the registration moved to the accepted slot,
        // the slot's index in the parked request's padding). The session's table boxes it with
        // what its end does (16 bytes more, `session::served`): 88, a 96-byte chunk where the
        // future and its wrapper boxed apart were 128 + 32.
        assert!(serving <= 72, "{serving} bytes");
        let parked = std::mem::size_of::<crate::request::Parked<super::AcceptedSlot>>();
        assert!(parked <= 64, "{parked} bytes");
        // And the request it keeps boxed (288 bytes before the fourth round of issue 35, 248 before
        // the fifth): at most 232, which glibc's allocator serves from a 240-byte chunk.
        let request = std::mem::size_of::<crate::request::Request>();
        assert!(request <= 232, "{request} bytes");
    }
}
