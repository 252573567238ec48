//! A request stream reduced to its two transport streams while nothing of its framing is in
//! use: what a request that only waits for the peer keeps of it (see
//! [`crate::request::Parked`]).

use std::task::{Context, Poll};

use bytes::Bytes;
use moq_core::Version;
use moq_core::message::{Envelope, MessageReader};

use super::{Reader, ReaderKind, StreamReader, StreamWriter, Writer, WriterKind};
use crate::transport::{BoxRecvStream, BoxSendStream, RecvStream, SendStream, TransportError};

/// Both transport streams of a request stream whose reader holds no bytes and whose writer
/// names no request (32 bytes where the framed halves are 120), with whether each half ended
/// apart ([`Ends`]), so that its owner keeps those flags beside its own. [`Bare::framed`] gives
/// the halves back as [`Bare::new`] took them.
#[derive(Debug)]
pub(crate) struct Bare {
    send: BoxSendStream,
    recv: BoxRecvStream,
}

/// Whether each half of a [`Bare`] stream ended: two bytes, kept by its owner.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ends {
    read_done: bool,
    write_closed: bool,
}

impl Bare {
    /// True if [`Bare::new`] keeps everything of `writer` and `reader`: both on a stream,
    /// nothing buffered, no envelope.
    pub(crate) fn fits(writer: &Writer, reader: &Reader) -> bool {
        matches!(
            (&writer.0, &reader.0),
            (WriterKind::Stream(w), ReaderKind::Stream(r)) if Bare::keeps(w, r)
        )
    }

    /// True if a stream's halves hold nothing but the transport streams and their ends.
    fn keeps(w: &StreamWriter, r: &StreamReader) -> bool {
        r.msgs.buffered() == 0 && w.envelope == Envelope::default()
    }

    /// The transport streams of `writer` and `reader`, and whether each ended; `Err` unless
    /// [`Bare::fits`].
    pub(crate) fn new(writer: Writer, reader: Reader) -> Result<(Bare, Ends), (Writer, Reader)> {
        let (mut w, mut r) = match (writer, reader) {
            (Writer(WriterKind::Stream(w)), Reader(ReaderKind::Stream(r)))
                if Bare::keeps(&w, &r) =>
            {
                (w, r)
            }
            other => return Err(other),
        };
        let bare = Bare {
            send: std::mem::replace(&mut w.send, Box::new(Taken)),
            recv: std::mem::replace(&mut r.recv, Box::new(Taken)),
        };
        let ends = Ends {
            read_done: r.done,
            write_closed: w.closed,
        };
        // What stands in for them is never used: their drop does nothing.
        Ok((bare, ends))
    }

    /// The framed halves again, with `ends` as [`Bare::new`] gave them, for a stream of
    /// `version`.
    pub(crate) fn framed(self, ends: Ends, version: Version) -> (Writer, Reader) {
        let writer = Writer(WriterKind::Stream(StreamWriter {
            send: self.send,
            version,
            closed: ends.write_closed,
            envelope: Envelope::default(),
        }));
        let reader = Reader(ReaderKind::Stream(StreamReader {
            recv: self.recv,
            msgs: MessageReader::new(version),
            version,
            done: ends.read_done,
        }));
        (writer, reader)
    }
}

/// Stands in for a transport stream taken out of its framed half by [`Bare::new`] until that
/// half drops (a zero-sized box: nothing is allocated). Every call is a no-op.
struct Taken;

impl SendStream for Taken {
    fn poll_write(&mut self, _: &mut Context<'_>, _: &[u8]) -> Poll<Result<usize, TransportError>> {
        Poll::Ready(Ok(0))
    }

    fn poll_write_chunks(
        &mut self,
        _: &mut Context<'_>,
        _: &mut [Bytes],
    ) -> Poll<Result<usize, TransportError>> {
        Poll::Ready(Ok(0))
    }

    fn poll_stopped(&mut self, _: &mut Context<'_>) -> Poll<Result<Option<u64>, TransportError>> {
        Poll::Ready(Ok(None))
    }

    fn set_priority(&mut self, _: i32) {}

    fn finish(&mut self) -> Result<(), TransportError> {
        Ok(())
    }

    fn reset(&mut self, _: u64) {}
}

impl RecvStream for Taken {
    fn poll_read_chunk(
        &mut self,
        _: &mut Context<'_>,
        _: usize,
    ) -> Poll<Result<Option<Bytes>, TransportError>> {
        Poll::Ready(Ok(None))
    }

    fn stop(&mut self, _: u64) {}
}
