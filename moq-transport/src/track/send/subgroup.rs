//! [`SubgroupSender`]: one open subgroup stream of a subscription (draft-19 §11.4).

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use moq_core::codes::StreamResetCode;
use moq_core::data::{ObjectStatus, SubgroupId, SubgroupWriter};
use moq_core::{Location, Properties, property};

use super::outbox::Outbox;
use super::shared::{WriterShared, smaller};
use super::writer::{OpenedSubgroup, SubscriptionWriter};
use crate::error::Error;
use crate::track::params::ObjectMeta;

/// The allocation a subgroup stream's object headers are encoded into.
const HEADERS_BUFFER: usize = 64;

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
/// stream (draft-19 §11.4.3: FIN only when every object was delivered), discarding any bytes
/// still held for the transport (as a reset discards the transport's unsent bytes).
///
/// Writes are coalesced: the stream's first write, a write more than 100 µs after the
/// previous one (a live object) and payloads over 4 KiB go to the transport from the write, as
/// without coalescing (their write resolves once the transport took them). Small objects
/// written back to back are collected in a buffer that the writer hands to the transport in
/// chunks of 32-64 KiB, and a task hands over the rest as soon as the writer stops (no further
/// write or [`SubgroupSender::flush`] is needed for them to leave), or about a millisecond
/// later while it goes on writing. Such a write waits only while 128 KiB or more are held
/// (the transport's flow control blocks), so its resolving means the object was accepted, not
/// that the transport took it; errors the transport reports for held bytes come back from the
/// next write or [`SubgroupSender::flush`].
#[derive(Debug)]
pub struct SubgroupSender {
    shared: Arc<WriterShared>,
    writer: SubgroupWriter,
    out: Outbox,
    header_sent: bool,
    /// Where object headers are encoded, then copied to the outbox.
    buf: BytesMut,
    omitted: bool,
    subgroup_id: Option<u64>,
    first_properties: Option<Properties>,
    /// The publisher's OBJECT_DELIVERY_TIMEOUT for the stream, once its first object is
    /// known (looked up once: Object and Track Properties are searched by key).
    object_timeout: Option<Option<std::time::Duration>>,
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
            out: Outbox::new(stream),
            header_sent: false,
            buf: BytesMut::with_capacity(HEADERS_BUFFER),
            omitted: false,
            subgroup_id,
            first_properties: None,
            object_timeout: None,
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
    /// stream can no longer be finished and is reset at the end. Resolves once the object is
    /// accepted (see [`SubgroupSender`] on coalescing): handed to the transport, or, up to
    /// 4 KiB, held behind bytes it has not taken yet, which a task hands over without further
    /// calls.
    ///
    /// Cancel-safe once polled for a payload up to 4 KiB: the object is taken whole on the
    /// first poll, and dropping the future only stops waiting for room. Not for a larger one:
    /// dropped before it resolves, its rest waits for the next write, flush or finish; drop
    /// the sender then (it resets the stream) rather than writing on.
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
        match self
            .out
            .write(self.shared.core(), &mut self.buf, payload)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(closed()),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes Normal objects, each `(Object ID, payload)` in order, in one hand-over to the
    /// stream: for objects that are ready together (a burst, a backlog), one write costs
    /// less than one per object, which for small objects is most of the cost. Each object
    /// passes the same checks as with [`SubgroupSender::write`].
    ///
    /// Cancel safety as with [`SubgroupSender::write`] (any payload over 4 KiB makes it not
    /// cancel-safe).
    pub async fn write_objects(
        &mut self,
        objects: impl IntoIterator<Item = (u64, Bytes)>,
    ) -> Result<(), Error> {
        let none = Properties::new();
        // The batch's first object goes without a copy if it comes after a pause.
        let now = Instant::now();
        for (id, payload) in objects {
            self.buf.clear();
            if !self.encode(id, &none, ObjectStatus::Normal, payload.len(), None)? {
                continue;
            }
            if !self.out.stage(&mut self.buf, payload, now) {
                return Err(closed());
            }
        }
        Ok(self.out.send(self.shared.core()).await?)
    }

    /// Resolves once the transport took every byte written so far (nothing is held).
    ///
    /// Cancel-safe.
    pub async fn flush(&mut self) -> Result<(), Error> {
        self.shared
            .check_open()
            .inspect_err(|_| self.abort(StreamResetCode::CANCELLED))?;
        Ok(self.out.flush(self.shared.core()).await?)
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
        // draft-19 §8: reset with DELIVERY_TIMEOUT an object older than the timeout (looked
        // up only for an object that says when its first byte came).
        if let Some(at) = first_byte
            && let Some(t) = smaller(self.object_timeout(), subscriber_timeout)
            && at.elapsed() > t
        {
            self.abort(StreamResetCode::DELIVERY_TIMEOUT);
            return Err(Error::Cancelled(StreamResetCode::DELIVERY_TIMEOUT));
        }
        // The callers clear the buffer first: a failed encoding may have left bytes.
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

    /// The publisher's OBJECT_DELIVERY_TIMEOUT for the stream (after the first object).
    fn object_timeout(&mut self) -> Option<std::time::Duration> {
        let (shared, first) = (&self.shared, self.first_properties.as_ref());
        *self.object_timeout.get_or_insert_with(|| {
            shared.publisher_timeout(property::OBJECT_DELIVERY_TIMEOUT, first)
        })
    }

    /// Encodes the stream's header into the buffer. draft-19 §2.2: FIRST_OBJECT only if the
    /// stream begins at the first object ever published in the subgroup (objects filtered out
    /// before the first one sent cleared it).
    fn encode_stream_header(&mut self) -> Result<(), moq_core::coding::EncodeError> {
        self.writer.header_mut().first_object = self.first_object;
        self.writer.encode_header(&mut self.buf)
    }

    /// Writes a Normal object now (see [`SubgroupSender::write`]).
    ///
    /// Cancel safety as with [`SubgroupSender::write`].
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
        let Some((mut stream, mut held)) = self.out.take() else {
            return;
        };
        // An empty subgroup still says it exists: its header alone.
        if !self.header_sent {
            self.buf.clear();
            if self.encode_stream_header().is_ok() {
                held.push(self.buf.split().freeze());
            }
        }
        let subscriber_timeout = self.shared.with_params(|p| p.subgroup_delivery_timeout);
        let timeout = self.shared.timeout(
            property::SUBGROUP_DELIVERY_TIMEOUT,
            subscriber_timeout,
            self.first_properties.as_ref(),
        );
        if held.is_empty() {
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
            // What the transport had not taken yet (or the lone header), then FIN.
            if !held.is_empty() {
                let _ = stream.write_all_chunks(&mut held).await;
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
        if self.out.reset(code.0) {
            self.shared.stream_closed();
        }
    }
}

/// A write after the stream was finished or reset.
fn closed() -> Error {
    Error::Invalid("subgroup stream already closed".into())
}

impl Drop for SubgroupSender {
    fn drop(&mut self) {
        self.abort(StreamResetCode::CANCELLED);
    }
}
