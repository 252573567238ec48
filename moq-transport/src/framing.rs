//! Framed control messages over one stream half: the layer between the transport's byte
//! streams and the session. A [`Reader`] yields whole messages (a FIN inside one is a violation),
//! a [`Writer`] encodes them; neither sends a FIN or a reset the caller did not ask for, except
//! that dropping one unfinished cancels its half.

use bytes::Bytes;
use moq_core::Version;
use moq_core::codes::StreamResetCode;
use moq_core::message::{Message, MessageReader, frame_len};

use crate::error::Error;
use crate::transport::{BoxRecvStream, BoxSendStream, TransportError};

/// Largest read from a stream at once.
const READ_CHUNK: usize = 64 * 1024;

/// Reads control messages from the receive half of a control or request stream.
///
/// Dropped before the stream ended, it sends STOP_SENDING with CANCELLED.
#[derive(Debug)]
pub(crate) struct Reader {
    recv: BoxRecvStream,
    msgs: MessageReader,
    version: Version,
    done: bool,
}

impl Drop for Reader {
    fn drop(&mut self) {
        if !self.done {
            self.recv.stop(StreamResetCode::CANCELLED.0);
        }
    }
}

/// What reading a stream produced.
#[derive(Debug)]
pub(crate) enum Frame {
    /// A whole frame's bytes, type checked to exist.
    Bytes(Bytes),
    /// The peer finished the stream at a frame boundary.
    Fin,
}

impl Reader {
    pub(crate) fn new(recv: BoxRecvStream, version: Version) -> Self {
        Reader {
            recv,
            msgs: MessageReader::new(version),
            version,
            done: false,
        }
    }

    /// A reader that starts with bytes already read from the stream.
    pub(crate) fn with_buffer(recv: BoxRecvStream, version: Version, buffered: &[u8]) -> Self {
        let mut r = Self::new(recv, version);
        r.msgs.push(buffered);
        r
    }

    /// The next message, `Ok(None)` on a FIN at a message boundary. A FIN inside a message is a
    /// PROTOCOL_VIOLATION (draft-19 §11.4 applies the same rule to data streams); a reset is
    /// [`Error::Cancelled`].
    pub(crate) async fn next(&mut self) -> Result<Option<Message>, Error> {
        match self.next_frame().await? {
            Frame::Fin => Ok(None),
            Frame::Bytes(mut b) => Ok(Some(Message::decode(&mut b, self.version)?)),
        }
    }

    /// The next whole frame, undecoded.
    pub(crate) async fn next_frame(&mut self) -> Result<Frame, Error> {
        loop {
            if let Some(frame) = self.msgs.next_frame()? {
                return Ok(Frame::Bytes(frame));
            }
            match self.recv.read_chunk(READ_CHUNK).await {
                Ok(Some(chunk)) => self.msgs.push(&chunk),
                Ok(None) => {
                    self.done = true;
                    if self.msgs.buffered() == 0 {
                        return Ok(Frame::Fin);
                    }
                    return Err(Error::protocol("stream ended in the middle of a message"));
                }
                Err(e) => {
                    self.done = true;
                    return Err(e.into());
                }
            }
        }
    }

    /// Number of complete frames already buffered and not yet returned.
    pub(crate) fn buffered_frames(&self) -> usize {
        let mut buf = self.msgs.buffer();
        let mut n = 0;
        while let Ok(Some(len)) = frame_len(buf, self.version) {
            n += 1;
            buf = buf.get(len..).unwrap_or_default();
        }
        n
    }

    /// Sends STOP_SENDING.
    pub(crate) fn stop(&mut self, code: StreamResetCode) {
        self.done = true;
        self.recv.stop(code.0);
    }
}

/// Writes control messages to the send half of a control or request stream.
///
/// Dropped without [`Writer::finish`] or [`Writer::reset`], it resets the stream with
/// CANCELLED: a FIN is only ever sent on purpose (draft-19 §3.3.2).
#[derive(Debug)]
pub(crate) struct Writer {
    send: BoxSendStream,
    version: Version,
    closed: bool,
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.closed {
            self.send.reset(StreamResetCode::CANCELLED.0);
        }
    }
}

impl Writer {
    pub(crate) fn new(send: BoxSendStream, version: Version) -> Self {
        Writer {
            send,
            version,
            closed: false,
        }
    }

    /// Encodes and writes one message.
    pub(crate) async fn send(&mut self, msg: impl Into<Message>) -> Result<(), Error> {
        let msg = msg.into();
        let bytes = msg.encode_to_vec(self.version)?;
        tracing::trace!(message = msg.name(), len = bytes.len(), "send");
        self.send.write_all(&bytes).await.map_err(Error::from)
    }

    /// FIN.
    pub(crate) fn finish(&mut self) {
        self.closed = true;
        let _ = self.send.finish();
    }

    /// RESET_STREAM.
    pub(crate) fn reset(&mut self, code: StreamResetCode) {
        self.closed = true;
        self.send.reset(code.0);
    }

    /// Sets the stream's send priority.
    pub(crate) fn set_priority(&mut self, p: i32) {
        self.send.set_priority(p);
    }

    /// Resolves when the peer sends STOP_SENDING (with its code) or the stream closes.
    pub(crate) async fn stopped(&mut self) -> Result<Option<u64>, TransportError> {
        self.send.stopped().await
    }
}
