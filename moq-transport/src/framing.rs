//! Framed control messages over one stream half: the layer between the transport's byte
//! streams and the session. A [`Reader`] yields whole messages (a FIN inside one is a violation),
//! a [`Writer`] encodes them; neither sends a FIN or a reset the caller did not ask for, except
//! that dropping one unfinished cancels its half.

use std::task::{Context, Poll, ready};

use bytes::Bytes;
use moq_core::Version;
use moq_core::codes::StreamResetCode;
use moq_core::message::{Address, Envelope, Message, MessageReader, RequestType, frame_len};

use crate::error::Error;
use crate::mux::{Read, VirtualReader, VirtualWriter};
use crate::transport::{BoxRecvStream, BoxSendStream, TransportError};

mod bare;

pub(crate) use bare::{Bare, Ends};

/// Largest read from a stream at once.
const READ_CHUNK: usize = 64 * 1024;

/// Reads control messages from the receive half of a control or request stream, or from a
/// request's virtual stream on the draft-14..16 control stream ([`crate::mux`]).
///
/// Dropped before the stream ended, it sends STOP_SENDING with CANCELLED.
#[derive(Debug)]
pub(crate) struct Reader(ReaderKind);

#[derive(Debug)]
enum ReaderKind {
    Stream(StreamReader),
    Virtual(VirtualReader),
}

#[derive(Debug)]
struct StreamReader {
    recv: BoxRecvStream,
    msgs: MessageReader,
    version: Version,
    done: bool,
}

impl Drop for StreamReader {
    fn drop(&mut self) {
        if !self.done {
            self.recv.stop(StreamResetCode::CANCELLED.0);
        }
    }
}

impl StreamReader {
    /// The next whole frame: one buffered already, else read until one is.
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Result<Frame, Error>> {
        loop {
            match self.msgs.next_frame() {
                Ok(Some(frame)) => return Poll::Ready(Ok(Frame::Bytes(frame))),
                Ok(None) => {}
                Err(e) => return Poll::Ready(Err(e.into())),
            }
            match ready!(self.recv.poll_read_chunk(cx, READ_CHUNK)) {
                Ok(Some(chunk)) => self.msgs.push(&chunk),
                Ok(None) => {
                    self.done = true;
                    if self.msgs.buffered() == 0 {
                        return Poll::Ready(Ok(Frame::Fin));
                    }
                    return Poll::Ready(Err(Error::protocol(
                        "stream ended in the middle of a message",
                    )));
                }
                Err(e) => {
                    self.done = true;
                    return Poll::Ready(Err(e.into()));
                }
            }
        }
    }
}

/// What reading a stream produced.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A whole frame's bytes, type checked to exist.
    Bytes(Bytes),
    /// A message already decoded (a virtual stream's, routed from the control stream).
    Message(Box<Message>),
    /// The peer finished the stream at a frame boundary.
    Fin,
}

impl Reader {
    pub(crate) fn new(recv: BoxRecvStream, version: Version) -> Self {
        Reader(ReaderKind::Stream(StreamReader {
            recv,
            msgs: MessageReader::new(version),
            version,
            done: false,
        }))
    }

    /// A reader that starts with bytes already read from the stream.
    pub(crate) fn with_buffer(recv: BoxRecvStream, version: Version, buffered: &[u8]) -> Self {
        let mut r = Self::new(recv, version);
        if let ReaderKind::Stream(s) = &mut r.0 {
            s.msgs.push(buffered);
        }
        r
    }

    /// A request's virtual stream on the control stream.
    pub(crate) fn virtual_stream(r: VirtualReader) -> Self {
        Reader(ReaderKind::Virtual(r))
    }

    /// The next message, `Ok(None)` on a FIN at a message boundary. A FIN inside a message is a
    /// PROTOCOL_VIOLATION (draft-19 §11.4 applies the same rule to data streams); a reset is
    /// [`Error::Cancelled`].
    pub(crate) async fn next(&mut self) -> Result<Option<Message>, Error> {
        Ok(self.next_addressed().await?.map(|(m, _)| m))
    }

    /// The next message and, on a draft-14..16 control stream, the request it is addressed to.
    pub(crate) async fn next_addressed(
        &mut self,
    ) -> Result<Option<(Message, Option<Address>)>, Error> {
        let v = self.version();
        match self.next_frame().await? {
            Frame::Fin => Ok(None),
            Frame::Message(m) => Ok(Some((*m, None))),
            Frame::Bytes(mut b) => Ok(Some(Message::decode_addressed(&mut b, v)?)),
        }
    }

    fn version(&self) -> Version {
        match &self.0 {
            ReaderKind::Stream(s) => s.version,
            ReaderKind::Virtual(_) => Version::PREFERRED,
        }
    }

    /// The next whole frame, undecoded (or decoded already, on a virtual stream).
    pub(crate) async fn next_frame(&mut self) -> Result<Frame, Error> {
        match &mut self.0 {
            ReaderKind::Stream(s) => std::future::poll_fn(|cx| s.poll_frame(cx)).await,
            // Boxed: inline, a virtual stream's read would make every request's waiting state
            // ~200 bytes larger for its whole life, on real streams too.
            ReaderKind::Virtual(v) => Ok(match Box::pin(v.next()).await? {
                Read::Message(m) => Frame::Message(m),
                Read::Fin => Frame::Fin,
            }),
        }
    }

    /// [`Reader::next_frame`] without a future, on a stream; `None` on a virtual stream (read
    /// it with `next_frame`). Cancel safe: what was read is kept in the reader.
    pub(crate) fn poll_next_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Result<Frame, Error>>> {
        match &mut self.0 {
            ReaderKind::Stream(s) => Some(s.poll_frame(cx)),
            ReaderKind::Virtual(_) => None,
        }
    }

    /// True on a request's virtual stream (drafts 14-16).
    pub(crate) fn is_virtual(&self) -> bool {
        matches!(self.0, ReaderKind::Virtual(_))
    }

    /// Number of complete frames already buffered and not yet returned.
    pub(crate) fn buffered_frames(&self) -> usize {
        let s = match &self.0 {
            ReaderKind::Stream(s) => s,
            ReaderKind::Virtual(v) => return v.buffered(),
        };
        let mut buf = s.msgs.buffer();
        let mut n = 0;
        while let Ok(Some(len)) = frame_len(buf, s.version) {
            n += 1;
            buf = buf.get(len..).unwrap_or_default();
        }
        n
    }

    /// Sends STOP_SENDING.
    pub(crate) fn stop(&mut self, code: StreamResetCode) {
        match &mut self.0 {
            ReaderKind::Stream(s) => {
                s.done = true;
                s.recv.stop(code.0);
            }
            ReaderKind::Virtual(v) => v.stop(),
        }
    }
}

/// Writes control messages to the send half of a control or request stream, or to a request's
/// virtual stream on the draft-14..16 control stream ([`crate::mux`]).
///
/// Dropped without [`Writer::finish`] or [`Writer::reset`], it resets the stream with
/// CANCELLED: a FIN is only ever sent on purpose (draft-19 §3.3.2).
#[derive(Debug)]
pub(crate) struct Writer(WriterKind);

#[derive(Debug)]
enum WriterKind {
    Stream(StreamWriter),
    Virtual(VirtualWriter),
}

#[derive(Debug)]
struct StreamWriter {
    send: BoxSendStream,
    version: Version,
    closed: bool,
    /// The request this stream carries, for draft-16 answers that name it.
    envelope: Envelope,
}

impl Drop for StreamWriter {
    fn drop(&mut self) {
        if !self.closed {
            self.send.reset(StreamResetCode::CANCELLED.0);
        }
    }
}

impl Writer {
    pub(crate) fn new(send: BoxSendStream, version: Version) -> Self {
        Writer(WriterKind::Stream(StreamWriter {
            send,
            version,
            closed: false,
            envelope: Envelope::default(),
        }))
    }

    /// A request's virtual stream on the control stream.
    pub(crate) fn virtual_stream(w: VirtualWriter) -> Self {
        Writer(WriterKind::Virtual(w))
    }

    /// Names the request this stream answers (draft-16 answers carry its Request ID).
    pub(crate) fn answering(&mut self, id: u64, kind: Option<RequestType>) {
        if let WriterKind::Stream(s) = &mut self.0 {
            s.envelope = Envelope {
                address: Some(Address::Request(id)),
                answers: kind,
            };
        }
    }

    /// Encodes and writes one message.
    pub(crate) async fn send(&mut self, msg: impl Into<Message>) -> Result<(), Error> {
        let msg = msg.into();
        let s = match &mut self.0 {
            WriterKind::Stream(s) => s,
            // Boxed, as the message is encoded first below: a future that holds neither is
            // small, and every request's waiting state includes one (see Request::next).
            WriterKind::Virtual(v) => return Box::pin(v.send(msg)).await,
        };
        let bytes = {
            let mut bytes = Vec::new();
            msg.encode_addressed(&s.envelope, &mut bytes, s.version)?;
            tracing::trace!(message = msg.name(), len = bytes.len(), "send");
            bytes
        };
        s.send.write_all(&bytes).await.map_err(Error::from)
    }

    /// Sends a message that takes a fresh Request ID from `next_id` (the request itself, or a
    /// REQUEST_UPDATE). On a virtual stream the control stream numbers it, within the peer's
    /// MAX_REQUEST_ID, so IDs go out in order. Returns the ID.
    pub(crate) async fn send_fresh(
        &mut self,
        mut msg: Message,
        next_id: impl std::future::Future<Output = Result<u64, Error>>,
    ) -> Result<u64, Error> {
        if let WriterKind::Virtual(v) = &mut self.0 {
            return v.send_fresh(msg).await;
        }
        let id = next_id.await?;
        match &mut msg {
            Message::RequestUpdate(u) => u.request_id = id,
            m => {
                m.set_request_id(id);
                let kind = m.request_type();
                self.answering(id, kind);
            }
        }
        self.send(msg).await?;
        Ok(id)
    }

    /// FIN.
    pub(crate) fn finish(&mut self) {
        match &mut self.0 {
            WriterKind::Stream(s) => {
                s.closed = true;
                let _ = s.send.finish();
            }
            WriterKind::Virtual(v) => v.finish(),
        }
    }

    /// RESET_STREAM.
    pub(crate) fn reset(&mut self, code: StreamResetCode) {
        match &mut self.0 {
            WriterKind::Stream(s) => {
                if !std::mem::replace(&mut s.closed, true) {
                    s.send.reset(code.0);
                }
            }
            WriterKind::Virtual(v) => v.reset(code),
        }
    }

    /// Sets the stream's send priority.
    pub(crate) fn set_priority(&mut self, p: i32) {
        if let WriterKind::Stream(s) = &mut self.0 {
            s.send.set_priority(p);
        }
    }

    /// [`Writer::stopped`] without a future, on a stream; `None` on a virtual stream.
    pub(crate) fn poll_stopped(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Option<Poll<Result<Option<u64>, TransportError>>> {
        match &mut self.0 {
            WriterKind::Stream(s) => Some(s.send.poll_stopped(cx)),
            WriterKind::Virtual(_) => None,
        }
    }

    /// True on a request's virtual stream (drafts 14-16).
    pub(crate) fn is_virtual(&self) -> bool {
        matches!(self.0, WriterKind::Virtual(_))
    }

    /// Resolves when the peer sends STOP_SENDING (with its code) or the stream closes.
    pub(crate) async fn stopped(&mut self) -> Result<Option<u64>, TransportError> {
        match &mut self.0 {
            WriterKind::Stream(s) => s.send.stopped().await,
            // Boxed, as in `Reader::next_frame` (~350 bytes inline).
            WriterKind::Virtual(v) => Ok(Box::pin(v.stopped()).await),
        }
    }
}
