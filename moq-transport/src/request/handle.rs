//! The application's side of a request: the handle that updates and cancels it, and the feed
//! of what it delivers.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use moq_core::message::{Parameters, RequestOk};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::Error;
use crate::latch::{Abandoned, Latch, LatchWatch};
use crate::session::{GoawayInfo, SessionCore};

/// Where the answer to a REQUEST_UPDATE goes.
pub(crate) type UpdateReply = oneshot::Sender<Result<RequestOk, Error>>;

/// What a handle asks of its request's task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Send REQUEST_UPDATE with these parameters; its Request ID goes to the last sender, if
    /// any, before it is sent.
    ///
    /// The parameters are boxed: a command is held in every request's waiting state.
    Update(Box<Parameters>, UpdateReply, Option<oneshot::Sender<u64>>),
}

/// How a request ended: `Ok` when it ended gracefully. Unset while it runs; a request whose
/// task was cancelled with the session never sets it, and the session's reason stands in.
pub(crate) type EndSlot = Latch<Result<(), Error>>;

type EndWatch = LatchWatch<Result<(), Error>>;

/// How the request behind `end` ended, if it has.
fn end_of(end: &EndWatch, core: &SessionCore) -> Option<Result<(), Error>> {
    // The task is gone without saying why: the session ended under it.
    end.state()
        .unwrap_or_else(|Abandoned| Some(Err(core.gone())))
}

/// The application's handle on an established request: its Request ID, REQUEST_UPDATE, the
/// GOAWAY on its stream and how it ended. Dropping it cancels the request.
#[derive(Debug)]
pub(crate) struct RequestHandle {
    core: Arc<SessionCore>,
    id: u64,
    commands: mpsc::Sender<Command>,
    goaway: watch::Receiver<Option<GoawayInfo>>,
    end: EndWatch,
}

impl RequestHandle {
    pub(super) fn new(
        core: Arc<SessionCore>,
        id: u64,
        commands: mpsc::Sender<Command>,
        goaway: watch::Receiver<Option<GoawayInfo>>,
        end: EndWatch,
    ) -> Self {
        RequestHandle {
            core,
            id,
            commands,
            goaway,
            end,
        }
    }

    /// The Request ID.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// The session's version.
    pub(crate) fn version(&self) -> moq_core::Version {
        self.core.version()
    }

    /// The session.
    pub(crate) fn core(&self) -> &Arc<SessionCore> {
        &self.core
    }

    /// Queues a REQUEST_UPDATE without waiting for its answer (which is applied when it
    /// comes).
    pub(crate) fn update_later(&self, params: Parameters) {
        let (tx, _) = oneshot::channel();
        let _ = self
            .commands
            .try_send(Command::Update(Box::new(params), tx, None));
    }

    /// Sends REQUEST_UPDATE and waits for the answer.
    pub(crate) async fn update(&self, params: Parameters) -> Result<RequestOk, Error> {
        self.update_noting_id(params, None).await
    }

    /// [`RequestHandle::update`], telling `id` the REQUEST_UPDATE's Request ID.
    pub(crate) async fn update_noting_id(
        &self,
        params: Parameters,
        id: Option<oneshot::Sender<u64>>,
    ) -> Result<RequestOk, Error> {
        let answer = self.queue_update(params, id).await?;
        self.answer(answer).await
    }

    /// Queues a REQUEST_UPDATE once there is room, and returns where its answer will come
    /// (for [`RequestHandle::answer`]); `id` is told its Request ID before it is sent.
    ///
    /// Cancel safe: nothing is queued until it resolves; once it has, the update goes out
    /// whether or not the answer is awaited.
    pub(crate) async fn queue_update(
        &self,
        params: Parameters,
        id: Option<oneshot::Sender<u64>>,
    ) -> Result<oneshot::Receiver<Result<RequestOk, Error>>, Error> {
        let Ok(room) = self.commands.reserve().await else {
            return Err(self.end_error());
        };
        let (tx, rx) = oneshot::channel();
        room.send(Command::Update(Box::new(params), tx, id));
        Ok(rx)
    }

    /// The answer to a REQUEST_UPDATE queued with [`RequestHandle::queue_update`]. Cancel safe.
    pub(crate) async fn answer(
        &self,
        answer: oneshot::Receiver<Result<RequestOk, Error>>,
    ) -> Result<RequestOk, Error> {
        answer.await.unwrap_or_else(|_| Err(self.end_error()))
    }

    /// The GOAWAY the peer sent on this request's stream, if any (draft-19 §10.4).
    pub(crate) fn goaway(&self) -> Option<GoawayInfo> {
        self.goaway.borrow().clone()
    }

    /// How the request ended, if it has.
    pub(crate) fn end(&self) -> Option<Result<(), Error>> {
        end_of(&self.end, &self.core)
    }

    /// Resolves when the request ends.
    pub(crate) async fn ended(&self) -> Result<(), Error> {
        self.end
            .wait()
            .await
            .unwrap_or_else(|Abandoned| Err(self.core.gone()))
    }

    /// Why an operation on the request failed: how it ended.
    fn end_error(&self) -> Error {
        match self.end() {
            Some(Err(e)) => e,
            _ => Error::EndedEarly,
        }
    }
}

/// What a request delivers to the application, in order, then how it ended: each item, then
/// the error if it ended with one (once), then `None`.
#[derive(Debug)]
pub(crate) struct Feed<T> {
    rx: mpsc::Receiver<T>,
    end: EndWatch,
    core: Arc<SessionCore>,
    done: bool,
}

impl<T> Feed<T> {
    pub(super) fn new(rx: mpsc::Receiver<T>, end: EndWatch, core: Arc<SessionCore>) -> Self {
        Feed {
            rx,
            end,
            core,
            done: false,
        }
    }

    /// The next item, or how the request ended. Cancel safe.
    pub(crate) async fn next(&mut self) -> Option<Result<T, Error>> {
        match self.rx.recv().await {
            Some(item) => Some(Ok(item)),
            None => self.finish(),
        }
    }

    /// [`Feed::next`] as a poll.
    pub(crate) fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, Error>>> {
        match self.rx.poll_recv(cx) {
            Poll::Ready(Some(item)) => Poll::Ready(Some(Ok(item))),
            Poll::Ready(None) => Poll::Ready(self.finish()),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Every sender is gone: report the end once.
    fn finish(&mut self) -> Option<Result<T, Error>> {
        if std::mem::replace(&mut self.done, true) {
            return None;
        }
        match end_of(&self.end, &self.core) {
            Some(Ok(())) => None,
            Some(Err(e)) => Some(Err(e)),
            None => Some(Err(self.core.gone())),
        }
    }
}

impl<T> futures::Stream for Feed<T> {
    type Item = Result<T, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Feed::poll_next(&mut self, cx)
    }
}
