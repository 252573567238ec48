//! The stream one request's messages travel on.

use moq_core::codes::StreamResetCode;
use moq_core::message::Message;

use crate::error::Error;
use moq_core::Version;

use crate::framing::{Bare, Ends, Reader, Writer};

/// Both directions of one request's messages.
///
/// From draft-17 on, every request has a bidirectional stream of its own: this is its two
/// halves. Draft-14/16 carry every request on the one control stream; there this type becomes a
/// virtual stream keyed by Request ID (messages routed in from the control stream reader, writes
/// interleaved on the control stream's writer, FIN and resets spelled as the messages those
/// drafts use), and nothing above it changes. See docs/architecture.md.
#[derive(Debug)]
pub(crate) struct RequestStream {
    pub(super) writer: Writer,
    pub(super) reader: Reader,
}

impl RequestStream {
    /// A request stream from its two halves.
    pub(crate) fn new(writer: Writer, reader: Reader) -> Self {
        RequestStream { writer, reader }
    }

    /// Sends one message.
    pub(crate) async fn send(&mut self, msg: impl Into<Message>) -> Result<(), Error> {
        self.writer.send(msg).await
    }

    /// FIN on our half: we send nothing more (draft-19 §3.3.2).
    pub(crate) fn finish(&mut self) {
        self.writer.finish();
    }

    /// Cancels the request (draft-19 §3.3.3): RESET_STREAM on our half and STOP_SENDING on the
    /// peer's, with `code`.
    pub(crate) fn cancel(&mut self, code: StreamResetCode) {
        self.writer.reset(code);
        self.reader.stop(code);
    }

    /// RESET_STREAM on our half only.
    pub(crate) fn reset(&mut self, code: StreamResetCode) {
        self.writer.reset(code);
    }

    /// True if [`RequestStream::bare`] keeps everything of it.
    pub(crate) fn fits_bare(&self) -> bool {
        Bare::fits(&self.writer, &self.reader)
    }

    /// Its two transport streams alone and whether each half ended, if
    /// [`RequestStream::fits_bare`].
    pub(crate) fn bare(self) -> Result<(Bare, Ends), RequestStream> {
        Bare::new(self.writer, self.reader)
            .map_err(|(writer, reader)| RequestStream { writer, reader })
    }

    /// The stream again, from [`RequestStream::bare`], for a stream of `version`.
    pub(crate) fn from_bare(bare: Bare, ends: Ends, version: Version) -> RequestStream {
        let (writer, reader) = bare.framed(ends, version);
        RequestStream { writer, reader }
    }
}
