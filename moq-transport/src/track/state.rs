//! What a session keeps for its track requests: both data planes and the application's queue.

use std::sync::Arc;

use moq_core::FullTrackName;
use moq_core::codes::RequestErrorCode;
use moq_core::message::{Parameters, RequestError};
use tokio::sync::oneshot;

use super::incoming::{Incoming, IncomingQueue};
use super::params::filter_budget;
use super::recv::RecvState;
use super::send::SendState;
use crate::request::{Decision, Request, not_answered};
use crate::session::{RequestKind, SessionCore};

/// A session's track state.
#[derive(Debug)]
pub(crate) struct TrackState {
    core: Arc<SessionCore>,
    /// The subscriber's side of the data plane.
    pub(crate) recv: Arc<RecvState>,
    /// The publisher's side of the data plane.
    pub(crate) send: SendState,
    /// The peer's requests waiting for the application.
    pub(crate) incoming: IncomingQueue,
}

/// What came of handing a request to the application.
#[derive(Debug)]
pub(crate) enum Asked<T> {
    /// Its answer.
    Answer(T),
    /// Refuse the request with this (the application takes no requests, is too far behind,
    /// or dropped it unanswered).
    Refuse(RequestError),
    /// The peer cancelled meanwhile, or the session failed: nothing more to do.
    Gone,
}

impl TrackState {
    pub(crate) fn new(core: Arc<SessionCore>) -> Self {
        let config = core.config();
        TrackState {
            recv: Arc::new(RecvState::new(core.clone())),
            send: SendState::new(core.clone()),
            incoming: IncomingQueue::new(config.accept_requests, config.request_queue),
            core,
        }
    }

    pub(crate) fn core(&self) -> &Arc<SessionCore> {
        &self.core
    }

    /// The checks of every track request: reserved namespaces (draft-19 §3.2.1-2, in
    /// [`Request::authorize`]), the Range Filter budget we announced (§10.3.1.6), then
    /// `refusal` (the kind's own), then the authorizer: the first refusal.
    pub(crate) async fn admit(
        &self,
        req: &Request,
        kind: RequestKind,
        track: &FullTrackName,
        params: &Parameters,
        refusal: Option<RequestError>,
    ) -> Result<(), RequestError> {
        let refusal = self.check_filter_budget(params).or(refusal);
        req.authorize(refusal, kind, &track.namespace, Some(&track.name))
            .await
    }

    /// INVALID_FILTER for more Range Filter ranges than we allow (draft-19 §10.3.1.6).
    pub(crate) fn check_filter_budget(&self, params: &Parameters) -> Option<RequestError> {
        filter_budget(&self.core, params)
    }

    /// Hands the peer's request to the application (built by `make` around the channel its
    /// answer comes back on) and waits for the answer while watching the peer.
    /// `not_taken` refuses it if the application takes no requests; one dropped unanswered is
    /// refused with `unanswered`, or INTERNAL_ERROR.
    pub(crate) async fn ask<T>(
        &self,
        req: &mut Request,
        make: impl FnOnce(oneshot::Sender<T>) -> Incoming,
        not_taken: RequestError,
        unanswered: Option<RequestError>,
    ) -> Asked<T> {
        let (tx, rx) = oneshot::channel();
        if let Err(e) = self.incoming.deliver(make(tx), not_taken) {
            return Asked::Refuse(e);
        }
        match req.decide(rx).await {
            Decision::Made(t) => Asked::Answer(t),
            Decision::Unanswered => Asked::Refuse(unanswered.unwrap_or_else(not_answered)),
            Decision::Ended => Asked::Gone,
        }
    }
}

/// The refusal for a track request when the application takes none.
pub(crate) fn no_such_track() -> RequestError {
    RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "no such track here")
}
