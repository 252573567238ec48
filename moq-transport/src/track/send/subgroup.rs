//! [`SubgroupSender`]: one open subgroup stream of a subscription (draft-19 §11.4).

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use moq_core::codes::StreamResetCode;
use moq_core::data::{ObjectStatus, SubgroupId, SubgroupWriter};
use moq_core::{Location, Properties, property};

use super::shared::{OpenedSubgroup, SubscriptionWriter, WriterShared};
use crate::error::Error;
use crate::track::params::ObjectMeta;
use crate::transport::BoxSendStream;

/// The allocation a subgroup stream's object headers are encoded into, a few at a time.
const HEADERS_BUFFER: usize = 256;
/// Payloads up to this size are copied behind their header into one chunk, and a batch's
/// small objects into as few chunks as fit [`COALESCED_CHUNK`]: quinn keeps every written
/// chunk as a segment of the stream's send buffer and walks the unacknowledged segments for
/// each packet it builds, so a header and a small payload as two chunks cost more there than
/// copying the payload does.
const COALESCE_MAX: usize = 4 * 1024;
/// The most bytes one coalesced chunk collects.
const COALESCED_CHUNK: usize = 64 * 1024;
/// The largest allocation small objects are copied into, several objects to one.
const COALESCE_BLOCK: usize = 16 * 1024;

impl SubscriptionWriter {
    /// Opens a subgroup stream (draft-19 §11.4.2). `priority` is the Publisher Priority
    /// (`None` inherits DEFAULT_PUBLISHER_PRIORITY). The stream's QUIC priority follows the
    /// draft's scheduling order (§7.2). It claims to start at the subgroup's first object
    /// (FIRST_OBJECT) unless told otherwise ([`SubgroupSender::set_first_object`]).
    ///
    /// Cancel safe: nothing is written to the stream before it resolves.
    pub async fn open_subgroup(
        &self,
        group: u64,
        subgroup: SubgroupId,
        priority: Option<u8>,
        end_of_group: bool,
    ) -> Result<SubgroupSender, Error> {
        let opened = self
            .open_subgroup_stream(group, subgroup, priority, end_of_group)
            .await?;
        Ok(SubgroupSender::new(self.shared().clone(), opened))
    }
}

/// One open subgroup stream. Write objects in increasing Object ID order, then
/// [`SubgroupSender::finish`] once the subgroup is complete. Dropping it unfinished resets the
/// stream (draft-19 §11.4.3: FIN only when every object was delivered).
#[derive(Debug)]
pub struct SubgroupSender {
    shared: Arc<WriterShared>,
    writer: SubgroupWriter,
    stream: Option<BoxSendStream>,
    header_sent: bool,
    /// Where object headers are encoded, and split off as they are written.
    buf: BytesMut,
    /// The chunks of a [`SubgroupSender::write_objects`], empty between calls.
    chunks: Vec<Bytes>,
    omitted: bool,
    subgroup_id: Option<u64>,
    first_properties: Option<Properties>,
    priority: u8,
    first_object: bool,
}

impl SubgroupSender {
    /// A sender for a subgroup stream just opened (and counted open): closed, for
    /// PUBLISH_DONE's wait, when it ends.
    pub(super) fn new(shared: Arc<WriterShared>, opened: OpenedSubgroup) -> Self {
        let OpenedSubgroup {
            stream,
            header,
            subgroup_id,
            priority,
        } = opened;
        let version = shared.core().version();
        SubgroupSender {
            shared,
            writer: SubgroupWriter::new(header, version),
            stream: Some(stream),
            header_sent: false,
            buf: BytesMut::with_capacity(HEADERS_BUFFER),
            chunks: Vec::new(),
            omitted: false,
            subgroup_id,
            first_properties: None,
            priority,
            first_object: true,
        }
    }

    /// Whether the stream starts at the first object ever published in the subgroup (the
    /// FIRST_OBJECT bit, draft-19 §2.2): true unless set otherwise. An original publisher
    /// leaves it; a relay sets `false` when it forwards from the middle of a subgroup. It is
    /// cleared when an object is filtered out before the first one sent, and has no effect
    /// once an object was sent.
    pub fn set_first_object(&mut self, first: bool) {
        self.first_object = first;
    }

    /// The group.
    pub fn group(&self) -> u64 {
        self.writer.header().group
    }

    /// The last Object ID written.
    pub fn last_object(&self) -> Option<u64> {
        self.writer.last_object()
    }

    /// Writes one object. `first_byte` is when its first byte was produced or received (for
    /// OBJECT_DELIVERY_TIMEOUT, draft-19 §8); `None` means now. Objects that do not pass the
    /// subscription's filters are skipped; if they are skipped because of Forward State the
    /// stream can no longer be finished and is reset at the end.
    ///
    /// Not cancel-safe: dropped before it resolves, part of the object may have been written;
    /// drop the sender then (it resets the stream) rather than writing on.
    pub async fn write(
        &mut self,
        id: u64,
        properties: &Properties,
        status: ObjectStatus,
        payload: Bytes,
        first_byte: Option<Instant>,
    ) -> Result<(), Error> {
        self.buf.clear();
        if !self.encode(id, properties, status, payload.len(), first_byte)? {
            return Ok(());
        }
        if payload.len() <= COALESCE_MAX {
            // One chunk (see COALESCE_MAX).
            self.append(&payload);
            let chunk = self.buf.split().freeze();
            return Ok(self.stream()?.write_chunk(chunk).await?);
        }
        let header = self.buf.split().freeze();
        // Header and payload in one write: each write takes the connection's lock and wakes
        // its driver, which for small objects costs more than the bytes.
        self.stream()?
            .write_all_chunks(&mut [header, payload])
            .await?;
        Ok(())
    }

    /// Writes Normal objects, each `(Object ID, payload)` in order, in one write to the
    /// stream: for objects that are ready together (a burst, a backlog), one write costs
    /// less than one per object, which for small objects is most of the cost. Each object
    /// passes the same checks as with [`SubgroupSender::write`].
    ///
    /// Not cancel-safe, like [`SubgroupSender::write`].
    pub async fn write_objects(
        &mut self,
        objects: impl IntoIterator<Item = (u64, Bytes)>,
    ) -> Result<(), Error> {
        let none = Properties::new();
        // The list of chunks is kept between writes (a relay behind writes a batch per wake).
        let mut chunks = std::mem::take(&mut self.chunks);
        chunks.clear();
        self.buf.clear();
        for (id, payload) in objects {
            if !self.encode(id, &none, ObjectStatus::Normal, payload.len(), None)? {
                continue;
            }
            // Small objects collect in the buffer, header and payload (see COALESCE_MAX);
            // a large payload goes as its own chunk after what was collected.
            if payload.len() <= COALESCE_MAX {
                self.append(&payload);
                if self.buf.len() < COALESCED_CHUNK {
                    continue;
                }
                chunks.push(self.buf.split().freeze());
            } else {
                chunks.push(self.buf.split().freeze());
                chunks.push(payload);
            }
        }
        if !self.buf.is_empty() {
            chunks.push(self.buf.split().freeze());
        }
        if !chunks.is_empty() {
            self.stream()?.write_all_chunks(&mut chunks).await?;
        }
        chunks.clear();
        self.chunks = chunks;
        Ok(())
    }

    /// Copies a small payload behind the header just encoded; when the buffer's allocation is
    /// full, the next is sized for a few such objects (at most [`COALESCE_BLOCK`]), so that
    /// objects share allocations rather than take one each.
    fn append(&mut self, payload: &[u8]) {
        let need = self.buf.len() + payload.len();
        if self.buf.capacity() < need {
            let cap = need.max(need.saturating_mul(4).clamp(HEADERS_BUFFER, COALESCE_BLOCK));
            let mut buf = BytesMut::with_capacity(cap);
            buf.extend_from_slice(&self.buf);
            self.buf = buf;
        }
        self.buf.extend_from_slice(payload);
    }

    fn stream(&mut self) -> Result<&mut BoxSendStream, Error> {
        self.stream
            .as_mut()
            .ok_or(Error::Invalid("subgroup stream already closed".into()))
    }

    /// Checks one object against the subscription and appends what precedes its payload to the
    /// buffer (the stream's header first, if not sent yet); `false` if the object is not sent.
    fn encode(
        &mut self,
        id: u64,
        properties: &Properties,
        status: ObjectStatus,
        payload_len: usize,
        first_byte: Option<Instant>,
    ) -> Result<bool, Error> {
        self.shared
            .check_open()
            .inspect_err(|_| self.abort(StreamResetCode::CANCELLED))?;
        let loc = Location::new(self.group(), id);
        self.shared.note_largest(loc);
        let subgroup = self.subgroup_id.or(Some(id));
        let meta = ObjectMeta {
            location: loc,
            subgroup,
            priority: self.priority,
            properties,
        };
        // One lock and no copy of the parameters per object.
        let (forward, passes, subscriber_timeout) = self.shared.with_params(|p| {
            (
                p.forward,
                p.forward && p.in_range(loc) && p.passes_range_filters(meta),
                p.object_delivery_timeout,
            )
        });
        if !forward {
            self.omitted = true;
            self.first_object = false;
            return Ok(false);
        }
        if !passes {
            // draft-19 §2.2: the stream no longer starts at the subgroup's first object.
            self.first_object = false;
            return Ok(false);
        }
        if self.first_properties.is_none() {
            self.first_properties = Some(properties.clone());
        }
        // draft-19 §8: reset with DELIVERY_TIMEOUT an object older than the timeout.
        let timeout = self.shared.timeout(
            property::OBJECT_DELIVERY_TIMEOUT,
            subscriber_timeout,
            self.first_properties.as_ref(),
        );
        if let (Some(t), Some(at)) = (timeout, first_byte)
            && at.elapsed() > t
        {
            self.abort(StreamResetCode::DELIVERY_TIMEOUT);
            return Err(Error::Cancelled(StreamResetCode::DELIVERY_TIMEOUT));
        }
        self.stream()?;
        // Headers are encoded one after another into one buffer and split off it, so that
        // objects share an allocation instead of one each (the callers clear it first: a
        // failed encoding may have left bytes).
        if !self.header_sent {
            self.encode_stream_header()?;
            self.header_sent = true;
        }
        self.writer.encode_object_header(
            &mut self.buf,
            id,
            properties,
            status,
            payload_len as u64,
        )?;
        Ok(true)
    }

    /// Encodes the stream's header into the buffer. draft-19 §2.2: FIRST_OBJECT only if the
    /// stream begins at the first object ever published in the subgroup (objects filtered out
    /// before the first one sent cleared it).
    fn encode_stream_header(&mut self) -> Result<(), moq_core::coding::EncodeError> {
        self.writer.header_mut().first_object = self.first_object;
        self.writer.encode_header(&mut self.buf)
    }

    /// Writes a Normal object now.
    ///
    /// Not cancel-safe, like [`SubgroupSender::write`].
    pub async fn write_object(&mut self, id: u64, payload: Bytes) -> Result<(), Error> {
        self.write(id, &Properties::new(), ObjectStatus::Normal, payload, None)
            .await
    }

    /// Ends the subgroup: FIN if every object was sent, else a reset (draft-19 §11.4.3). With a
    /// SUBGROUP_DELIVERY_TIMEOUT the stream is reset if not fully delivered in time (§8).
    pub fn finish(mut self) {
        if self.omitted {
            self.abort(StreamResetCode::CANCELLED);
            return;
        }
        let Some(mut stream) = self.stream.take() else {
            return;
        };
        // An empty subgroup still says it exists: its header alone.
        let header = (!self.header_sent)
            .then(|| {
                self.buf.clear();
                self.encode_stream_header().ok()?;
                Some(self.buf.split().freeze())
            })
            .flatten();
        let params = self.shared.params();
        let timeout = self.shared.timeout(
            property::SUBGROUP_DELIVERY_TIMEOUT,
            params.subgroup_delivery_timeout,
            self.first_properties.as_ref(),
        );
        if header.is_none() {
            let _ = stream.finish();
            self.shared.stream_closed();
            if timeout.is_none() {
                self.shared.core().finished(stream);
                return;
            }
        }
        let shared = self.shared.clone();
        // Watched until the peer acknowledged every byte (draft-19 §8: reset with
        // DELIVERY_TIMEOUT if that takes longer than the subgroup delivery timeout).
        self.shared.core().after_finish(async move {
            if let Some(header) = header {
                let _ = stream.write_all(&header).await;
                let _ = stream.finish();
                shared.stream_closed();
            }
            let acked = async {
                let _ = stream.stopped().await;
            };
            match timeout {
                Some(t) => {
                    if tokio::time::timeout(t, acked).await.is_err() {
                        stream.reset(StreamResetCode::DELIVERY_TIMEOUT.0);
                    }
                }
                None => acked.await,
            }
        });
    }

    /// Resets the stream with `code`.
    pub fn abort(&mut self, code: StreamResetCode) {
        if let Some(mut s) = self.stream.take() {
            s.reset(code.0);
            self.shared.stream_closed();
        }
    }
}

impl Drop for SubgroupSender {
    fn drop(&mut self) {
        self.abort(StreamResetCode::CANCELLED);
    }
}
