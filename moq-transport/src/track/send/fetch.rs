//! [`FetchWriter`]: the publisher's side of a FETCH's data stream (draft-19 §11.4.4).

use std::sync::Arc;

use moq_core::codes::StreamResetCode;
use moq_core::data::{self, RangeEnd};
use moq_core::{GroupOrder, Location, Properties};

use crate::error::Error;
use crate::latch::LatchWatch;
use crate::session::SessionCore;
use crate::track::params::{Object, ObjectMeta, SubscriptionParams};
use crate::transport::BoxSendStream;

/// What FETCH_OK said. Plain data: dropping it does nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchEnd {
    /// Every object of the track has been published and `end` is the last.
    pub end_of_track: bool,
    /// The end of the range served (last object plus one; object 0 = the whole group).
    pub end: Location,
    /// The track's properties.
    pub track_properties: Properties,
}

/// What ends a fetch stream's writes early: its FETCH's end, or its subscription's (a fill).
pub(crate) trait Ended: Send + Sync + std::fmt::Debug {
    /// Why it ended, if it did.
    fn ended(&self) -> Option<Error>;
}

impl Ended for LatchWatch<Error> {
    fn ended(&self) -> Option<Error> {
        self.get()
    }
}

/// Writes a fetch response stream: FETCH_HEADER, then objects in the requested order
/// (draft-19 §11.4.4). [`FetchWriter::finish`] ends it; dropping it unfinished resets it.
#[derive(Debug)]
pub struct FetchWriter {
    stream: Option<BoxSendStream>,
    /// The FETCH's Range Filters: objects that fail them are not sent (draft-19 §5.1.3).
    filters: Vec<moq_core::RangeFilterParam>,
    writer: data::FetchWriter,
    buf: Vec<u8>,
    /// What ends it early besides the session, if anything.
    cancelled: Option<Arc<dyn Ended>>,
    core: Arc<SessionCore>,
}

impl FetchWriter {
    /// A writer on `stream`, a fetch stream just opened, once its FETCH_HEADER with
    /// `request_id` is written: objects go in `order`, those failing the FETCH's Range Filters
    /// `filters` are left out, and `cancelled` says when the FETCH was cancelled.
    ///
    /// Not cancel-safe, but never leaves a stream that looks complete: dropped before it
    /// resolves, or failing, the stream is reset (CANCELLED), not finished. A FIN would tell the
    /// subscriber the range is whole (draft-21 §3.4.1: FIN once all objects are delivered).
    pub(crate) async fn start(
        core: &Arc<SessionCore>,
        stream: BoxSendStream,
        request_id: u64,
        order: GroupOrder,
        filters: Vec<moq_core::RangeFilterParam>,
        cancelled: Option<Arc<dyn Ended>>,
    ) -> Result<Self, Error> {
        // Made first, so that its drop resets the stream whatever happens below.
        let mut w = FetchWriter {
            stream: Some(stream),
            filters,
            writer: data::FetchWriter::new(order, core.version()),
            buf: Vec::new(),
            cancelled,
            core: core.clone(),
        };
        data::FetchHeader { request_id }.encode(&mut w.buf, core.version())?;
        let s = w.stream.as_mut().ok_or(Error::EndedEarly)?;
        s.write_all(&w.buf).await?;
        Ok(w)
    }

    fn check(&mut self) -> Result<(), Error> {
        let ended = self.cancelled.as_ref().and_then(|c| c.ended());
        if let Some(e) = ended.or_else(|| self.core.close_reason()) {
            if let Some(mut s) = self.stream.take() {
                s.reset(StreamResetCode::CANCELLED.0);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Writes one object; one that fails the FETCH's Range Filters is skipped (draft-19
    /// §5.1.3: only objects passing every filter are delivered).
    ///
    /// Not cancel-safe: dropped before it resolves, part of the object may have been written;
    /// drop the writer then (it resets the stream) rather than writing on.
    pub async fn write(&mut self, obj: &Object) -> Result<(), Error> {
        self.check()?;
        let meta = ObjectMeta {
            location: obj.location,
            subgroup: obj.subgroup,
            priority: obj.priority,
            properties: &obj.properties,
        };
        if !SubscriptionParams::object_passes(&self.filters, meta) {
            return Ok(());
        }
        self.buf.clear();
        let header = data::FetchObject {
            location: obj.location,
            subgroup: obj.subgroup,
            priority: obj.priority,
            properties: obj.properties.clone(),
            payload_len: obj.payload.len() as u64,
        };
        self.writer.encode_object(&mut self.buf, &header)?;
        let s = self.stream.as_mut().ok_or(Error::EndedEarly)?;
        s.write_all(&self.buf).await?;
        if !obj.payload.is_empty() {
            s.write_chunk(obj.payload.clone()).await?;
        }
        Ok(())
    }

    /// Writes an End of Range marker (draft-19 §11.4.4.2). A Timed-Out range is reported as
    /// Unknown before draft-20, which has no such marker; before draft-16 there are no markers
    /// at all and the range is left out (the subscriber sees a gap, draft-14 §9.16.3).
    ///
    /// Not cancel-safe, like [`FetchWriter::write`].
    pub async fn end_of_range(&mut self, kind: RangeEnd, location: Location) -> Result<(), Error> {
        self.check()?;
        let v = self.core.version();
        let kind = match kind {
            _ if !v.fetch_end_of_range() => RangeEnd::NonExistent,
            RangeEnd::TimedOut if !v.has_fill() => RangeEnd::Unknown,
            k => k,
        };
        self.buf.clear();
        self.writer
            .encode_end_of_range(&mut self.buf, kind, location)?;
        let s = self.stream.as_mut().ok_or(Error::EndedEarly)?;
        s.write_all(&self.buf).await.map_err(Error::from)
    }

    /// Ends the fetch stream with a FIN: every object of the range was sent.
    pub fn finish(mut self) {
        if let Some(mut s) = self.stream.take() {
            let _ = s.finish();
        }
    }

    /// Resets the fetch stream (e.g. UNKNOWN_OBJECT_STATUS, draft-19 §10.12.3).
    pub fn abort(mut self, code: StreamResetCode) {
        if let Some(mut s) = self.stream.take() {
            s.reset(code.0);
        }
    }
}

impl Drop for FetchWriter {
    fn drop(&mut self) {
        if let Some(mut s) = self.stream.take() {
            s.reset(StreamResetCode::CANCELLED.0);
        }
    }
}
