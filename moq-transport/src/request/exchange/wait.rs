//! How a request waits: [`Request::next`] and what wakes it.

use std::task::{Context, Poll};

use moq_core::codes::StreamResetCode;
use moq_core::coding::Vi64;
use moq_core::message::{ControlMessage, Message, RequestError, RequestUpdate, peek_request_id};
use tokio::sync::mpsc;

use super::{Event, Request};
use crate::error::Error;
use crate::framing::Frame;
use crate::request::handle::Command;
use crate::transport::TransportError;

/// What woke a waiting request (see [`Request::next`]).
enum Wake {
    /// A command from the application's handle; `None` once the handle is dropped.
    Command(Option<Command>),
    /// A frame (or the end) of the peer's half.
    Frame(Result<Frame, Error>),
    /// STOP_SENDING on our half, or its end.
    Stopped(Result<Option<u64>, TransportError>),
}

impl Request {
    /// The next thing that happens on the request. Cancel safe (an update being sent when the
    /// future is dropped is answered as failed).
    ///
    /// On a stream it waits in a `poll_fn` over the halves' poll methods, so the future is a
    /// few words: a draft-19 request waits here for its whole life (a PUBLISH_NAMESPACE's).
    pub(crate) async fn next(&mut self) -> Event {
        if let Some(m) = self.deferred.take() {
            return Event::Message(*m);
        }
        loop {
            let virtual_stream = self.stream.reader.is_virtual() || self.stream.writer.is_virtual();
            // Matched in place, so that nothing of it is kept while an update is sent.
            let (params, reply, id) = match if virtual_stream {
                // Boxed: a virtual stream's futures are kept across polls.
                Box::pin(self.wake_virtual()).await
            } else {
                std::future::poll_fn(|cx| self.poll_wake(cx)).await
            } {
                Wake::Command(None) => return Event::Dropped,
                Wake::Command(Some(Command::Update(params, reply, id))) => (*params, reply, id),
                Wake::Frame(f) => match self.on_frame(f) {
                    Some(ev) => return ev,
                    None => continue,
                },
                Wake::Stopped(s) => match self.on_stopped(s) {
                    Some(ev) => return ev,
                    None => continue,
                },
            };
            // Boxed: an update is rare, and its future inline would make every request's
            // waiting state as large.
            Box::pin(self.send_update(params, reply, id)).await;
        }
    }

    /// [`Request::next`] without a future, for a request on a stream that no application
    /// handle sends updates on (a peer's accepted PUBLISH_NAMESPACE waits here for its whole
    /// life, in the few words of its caller's state). `None` where a future is needed: on a
    /// virtual stream, or with a handle; read those with `next`. Cancel safe.
    pub(crate) fn poll_event(&mut self, cx: &mut Context<'_>) -> Option<Poll<Event>> {
        if self.commands.is_some()
            || self.stream.reader.is_virtual()
            || self.stream.writer.is_virtual()
        {
            return None;
        }
        if let Some(m) = self.deferred.take() {
            return Some(Poll::Ready(Event::Message(*m)));
        }
        loop {
            let ev = match self.poll_wake(cx) {
                Poll::Pending => return Some(Poll::Pending),
                // Without a handle there are no commands: as if it were dropped.
                Poll::Ready(Wake::Command(_)) => Some(Event::Dropped),
                Poll::Ready(Wake::Frame(f)) => self.on_frame(f),
                Poll::Ready(Wake::Stopped(s)) => self.on_stopped(s),
            };
            if let Some(ev) = ev {
                return Some(Poll::Ready(ev));
            }
        }
    }

    /// What wakes a waiting request, on a stream: polled in a fixed order (commands, the
    /// peer's half, STOP_SENDING on ours).
    fn poll_wake(&mut self, cx: &mut Context<'_>) -> Poll<Wake> {
        if let Some(rx) = &mut self.commands
            && let Poll::Ready(c) = rx.poll_recv(cx)
        {
            return Poll::Ready(Wake::Command(c));
        }
        if self.reader_open
            && let Some(Poll::Ready(f)) = self.stream.reader.poll_next_frame(cx)
        {
            return Poll::Ready(Wake::Frame(f));
        }
        // The responder watches STOP_SENDING on its half only once the peer's half ended: while
        // the peer's half is open, its cancellation resets that half too (draft-19 §3.3.3), which
        // reading sees. Watching costs a waiting future and a waker entry in the transport per
        // stream (~290 bytes on quinn), for the whole life of an accepted PUBLISH_NAMESPACE.
        if self.watch_stop
            && (!self.stop_cancels || !self.reader_open)
            && let Some(Poll::Ready(s)) = self.stream.writer.poll_stopped(cx)
        {
            return Poll::Ready(Wake::Stopped(s));
        }
        Poll::Pending
    }

    /// What wakes a waiting request, on a virtual stream.
    async fn wake_virtual(&mut self) -> Wake {
        tokio::select! {
            c = recv_command(&mut self.commands) => Wake::Command(c),
            f = self.stream.reader.next_frame(), if self.reader_open => Wake::Frame(f),
            s = self.stream.writer.stopped(), if self.watch_stop => Wake::Stopped(s),
        }
    }

    /// STOP_SENDING on our half (or its end).
    fn on_stopped(&mut self, s: Result<Option<u64>, TransportError>) -> Option<Event> {
        self.watch_stop = false;
        match s {
            Ok(Some(code)) => {
                let code = StreamResetCode(code);
                if self.stop_cancels || !self.reader_open {
                    // draft-19 §3.3.3: cancelled by the peer.
                    self.cancel(code);
                    return Some(Event::Ended(Error::Cancelled(code)));
                }
                self.stopped = Some(Box::new(code));
                None
            }
            Ok(None) => None,
            Err(e) => Some(Event::Ended(self.core.error(e.into()))),
        }
    }

    /// Decodes a frame for [`Request::on_message`]; a REQUEST_UPDATE that fails to decode at
    /// the request level (INVALID_FILTER) is refused, not a session error (draft-19 §5.1.3).
    pub(super) fn on_frame(&mut self, f: Result<Frame, Error>) -> Option<Event> {
        let frame = match f {
            Ok(Frame::Bytes(b)) => b,
            Ok(Frame::Fin) => return self.on_message(Ok(None)),
            Ok(Frame::Message(m)) => return self.on_message(Ok(Some(*m))),
            Err(e) => return self.on_message(Err(e)),
        };
        let v = self.core.version();
        let decoded = match self.clustered {
            true => Message::decode_clustered(&mut frame.clone(), v),
            false => Message::decode(&mut frame.clone(), v),
        };
        let e = match decoded {
            Ok(m) => return self.on_message(Ok(Some(m))),
            Err(e) => e,
        };
        let mut ty: &[u8] = frame.as_ref();
        let update_id = Vi64::decode(&mut ty)
            .is_ok_and(|t| t == RequestUpdate::TYPE)
            .then(|| peek_request_id(&frame, v))
            .flatten();
        match (e.request_code(), update_id, self.peer_updates) {
            (Some(code), Some(id), Some(_)) => Some(match self.core.check_peer_request_id(id) {
                Ok(()) => Event::Update(Err(RequestError::new(code, e.to_string()))),
                Err(e) => Event::Ended(e),
            }),
            _ => self.on_message(Err(e.into())),
        }
    }
}

/// The next command from the application's handle; never resolves while there is no handle.
async fn recv_command(commands: &mut Option<mpsc::Receiver<Command>>) -> Option<Command> {
    match commands {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}
