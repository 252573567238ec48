//! A responder's request parked in a few words while it only waits for the peer: what a
//! peer's accepted PUBLISH_NAMESPACE keeps for as long as its namespace is published.

use std::ops::Deref;
use std::sync::Arc;

use moq_core::message::ParamContext;

use super::Request;
use crate::framing::{Bare, Ends};
use crate::request::RequestStream;
use crate::session::{ResolvedToken, SessionCore};

/// The session core, counting a live request for GOAWAY_TIMEOUT (draft-19 §3.6) from
/// [`Counted::new`] until it drops: a request's core, so that a request can be taken apart
/// into a [`Parked`] and put back together without counting twice.
#[derive(Debug)]
pub(crate) struct Counted(Arc<SessionCore>);

impl Counted {
    /// Counts a request of `core` ([`SessionCore::open_request`]).
    pub(crate) fn new(core: &Arc<SessionCore>) -> Self {
        core.open_request();
        Counted(core.clone())
    }
}

impl Deref for Counted {
    type Target = Arc<SessionCore>;

    fn deref(&self) -> &Arc<SessionCore> {
        &self.0
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.close_request();
    }
}

/// What a [`Request`] answered long ago, on a stream, with no application handle and nothing
/// pending, still needs (64 bytes where the request is 232, with a 4-byte `owner`): its core,
/// transport streams and Request ID, its tokens (an update is authorized with them), which
/// halves ended and are still watched, and its owner's word (`owner`, kept in what would be
/// padding beside the flags). Put back together with [`Parked::unpark`] to handle an event.
#[derive(Debug)]
pub(crate) struct Parked<T> {
    core: Counted,
    stream: Bare,
    id: u64,
    /// Boxed once more: most requests carry none, and a slice is 16 bytes.
    #[allow(clippy::redundant_allocation)]
    tokens: Option<Box<Box<[ResolvedToken]>>>,
    owner: T,
    ends: Ends,
    reader_open: bool,
    watch_stop: bool,
}

impl Request {
    /// Whether [`Request::park`] keeps everything of this request: a responder's, answered,
    /// named `name` and taking the peer's updates in `ctx`, on a stream (not a draft-14..16
    /// virtual one), with no handle, no GOAWAY, no update of ours pending and nothing deferred.
    pub(crate) fn parkable(&self, name: &'static str, ctx: ParamContext) -> bool {
        self.name == name
            && self.peer_updates == Some(ctx)
            && self.our_updates.is_none()
            && self.commands.is_none()
            && self.stream.fits_bare()
            && !self.unanswered
            && self.stop_cancels
            && !self.clustered
            && self.stopped.is_none()
            && self.deferred.is_none()
            && self.goaway.is_none()
            && self.pending.is_none()
            && self.end.is_none()
    }

    /// Parks a request that is [`Request::parkable`], with its owner's word `owner`.
    pub(crate) fn park<T>(self, owner: T) -> Parked<T> {
        debug_assert!(self.commands.is_none() && self.deferred.is_none());
        let Request {
            core,
            stream,
            id,
            tokens,
            reader_open,
            watch_stop,
            ..
        } = self;
        let Ok((stream, ends)) = stream.bare() else {
            unreachable!("checked by parkable")
        };
        Parked {
            core,
            stream,
            id,
            tokens: (!tokens.is_empty()).then(|| Box::new(tokens)),
            owner,
            ends,
            reader_open,
            watch_stop,
        }
    }
}

impl<T: Copy> Parked<T> {
    /// The owner's word it was parked with.
    pub(crate) fn owner(&self) -> T {
        self.owner
    }
}

impl<T> Parked<T> {
    /// The request again, as [`Request::park`] took it (named `name`, taking updates in `ctx`),
    /// and the owner's word.
    pub(crate) fn unpark(self, name: &'static str, ctx: ParamContext) -> (Request, T) {
        let version = self.core.version();
        let stream = RequestStream::from_bare(self.stream, self.ends, version);
        let mut req = Request::counted(self.core, stream, name, self.id, false);
        req.peer_updates = Some(ctx);
        req.tokens = self.tokens.map(|t| *t).unwrap_or_default();
        // Answered long ago: `opened` is only read while the request is unanswered.
        req.unanswered = false;
        req.reader_open = self.reader_open;
        req.watch_stop = self.watch_stop;
        (req, self.owner)
    }
}
