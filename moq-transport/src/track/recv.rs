//! The subscriber's side of the data plane: routing subgroup streams and datagrams to
//! subscriptions by Track Alias, and fetch streams to fetches by Request ID (draft-19 §11).

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Poll, ready};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use moq_core::codes::{SessionErrorCode, StreamResetCode};
use moq_core::data::{
    DatagramBody, DecodeBuf, FetchHeader, ObjectDatagram, RecvBuf, SubgroupEvent, SubgroupHeader,
    SubgroupId, SubgroupObject, SubgroupReader,
};
use moq_core::{DecodeError, FullTrackName, Location, Version};
use parking_lot::Mutex;
use tokio::sync::{Notify, mpsc, oneshot, watch};

use super::params::{Object, SubscriptionParams};
use crate::error::Error;
use crate::session::SessionCore;
use crate::transport::BoxRecvStream;

/// What a subscription delivers. Dropping a [`TrackEvent::Subgroup`] drops its
/// [`IncomingSubgroup`] (see there).
#[derive(Debug)]
pub enum TrackEvent {
    /// A subgroup stream; read its objects with [`IncomingSubgroup::next_object`].
    Subgroup(IncomingSubgroup),
    /// An object that arrived as a datagram.
    Datagram(Object),
}

/// Where a subscription's data goes.
#[derive(Debug)]
pub(crate) struct Sink {
    pub(crate) request_id: u64,
    pub(crate) params: watch::Receiver<SubscriptionParams>,
    pub(crate) default_priority: u8,
    pub(crate) tx: mpsc::Sender<TrackEvent>,
    pub(crate) streams: AtomicU64,
    pub(crate) stream_arrived: tokio::sync::Notify,
}

/// Track Alias -> subscriptions, on the subscriber side of a session.
#[derive(Debug, Default)]
struct AliasTable {
    by_alias: HashMap<u64, Vec<Arc<Sink>>>,
    /// Aliases whose subscription ended recently: late data is discarded at once
    /// (draft-19 §11.1).
    ended: HashMap<u64, Instant>,
    /// Which track each alias names, to catch DUPLICATE_TRACK_ALIAS.
    tracks: HashMap<u64, FullTrackName>,
    /// Datagrams for aliases not known yet, held briefly.
    early_datagrams: Vec<(Instant, ObjectDatagram)>,
    /// Fetches waiting for their data stream: Request ID -> where to hand it.
    fetches: HashMap<u64, oneshot::Sender<DataRecv>>,
    /// Fetch streams that arrived before their FETCH was registered.
    early_fetches: HashMap<u64, DataRecv>,
}

/// The most chunks a data stream's reader takes from the transport at once: with quinn, one
/// lock of the connection for all of them (a QUIC packet carries ~1.2 KB of a stream, so
/// small objects come a chunk or less each).
const READ_BATCH: usize = 16;

/// A payload up to this size that arrives in pieces is assembled in a shared block of
/// [`ASSEMBLY_BLOCK`] bytes (one allocation for many objects, not one each); a larger one gets
/// an allocation of its own, and so does a stream's first (a stream that carries one object,
/// the common case for a stream per object, then costs one small allocation, not a block).
const ASSEMBLE_SHARED_MAX: usize = 4 * 1024;
/// The block small payloads that arrive in pieces are assembled in, back to back. A payload
/// keeps its block alive while it lives (at most this much per payload).
const ASSEMBLY_BLOCK: usize = 16 * 1024;

/// The receiving end of a data stream (subgroup or fetch): the stream and what was read of it
/// and not consumed yet. Dropped before the stream ended, it sends STOP_SENDING.
#[derive(Debug)]
pub(crate) struct DataRecv {
    core: Arc<SessionCore>,
    recv: Option<BoxRecvStream>,
    /// Read and not yet decoded: the received chunks, so payload is handed out as slices of
    /// them (no copy).
    pub(crate) buf: RecvBuf,
    /// The FIN arrived: `buf` holds the rest of the stream.
    pub(crate) fin: bool,
}

impl DataRecv {
    /// `first` is what was read before the stream's type was known, kept as it came.
    fn new(core: Arc<SessionCore>, recv: BoxRecvStream, first: Bytes) -> Self {
        let mut buf = RecvBuf::new();
        buf.push(first);
        DataRecv {
            core,
            recv: Some(recv),
            buf,
            fin: false,
        }
    }

    /// Reads until `decode` yields the stream's header and consumes it. `None` if the stream
    /// ended or was reset first; a malformed header closes the session.
    async fn header<H>(
        &mut self,
        what: &str,
        decode: impl Fn(&mut &[u8], Version) -> Result<H, DecodeError>,
    ) -> Option<H> {
        let v = self.core.version();
        loop {
            match self.buf.decode_front(|cur| decode(cur, v)) {
                Ok(Some(h)) => return Some(h),
                Ok(None) => {}
                Err(e) => {
                    self.malformed(e);
                    return None;
                }
            }
            match self.fill().await {
                Ok(true) if !self.fin => {}
                Ok(_) => {
                    let e = Error::protocol(format!("stream ended inside a {what}"));
                    self.core.close(e);
                    return None;
                }
                Err(_) => return None,
            }
        }
    }

    /// Reads every chunk the transport has ready (up to [`READ_BATCH`], in one call into it)
    /// into the buffer, or the FIN. `Ok(false)` if we stopped the stream already.
    pub(crate) async fn fill(&mut self) -> Result<bool, Error> {
        let Some(recv) = self.recv.as_mut() else {
            return Ok(false);
        };
        let buf = &mut self.buf;
        let read = poll_fn(|cx| {
            let mut chunks: [Bytes; READ_BATCH] = Default::default();
            let r = ready!(recv.poll_read_chunks(cx, &mut chunks));
            if let Ok(Some(n)) = r {
                chunks.into_iter().take(n).for_each(|c| buf.push(c));
            }
            Poll::Ready(r)
        });
        match read.await {
            Ok(Some(_)) => {}
            Ok(None) => self.fin = true,
            Err(e) => {
                self.recv = None;
                return Err(e.into());
            }
        }
        Ok(true)
    }

    /// The peer's data does not decode: the session closes with the code the draft names
    /// (draft-19 §11.4: a FIN inside an object is a PROTOCOL_VIOLATION).
    pub(crate) fn malformed(&self, e: impl Into<Error>) -> Error {
        self.core.fail(e.into())
    }

    /// The largest object payload to assemble in memory.
    pub(crate) fn max_object_size(&self) -> u64 {
        self.core.config().limits.max_object_size as u64
    }

    /// Sends STOP_SENDING.
    pub(crate) fn stop(&mut self, code: StreamResetCode) {
        if let Some(mut r) = self.recv.take() {
            r.stop(code.0);
        }
    }
}

impl Drop for DataRecv {
    fn drop(&mut self) {
        if !self.fin {
            self.stop(StreamResetCode::CANCELLED);
        }
    }
}

/// How long data for an unknown Track Alias is held.
const UNKNOWN_ALIAS_WAIT: Duration = Duration::from_secs(2);
/// How many early datagrams are held at most.
const MAX_EARLY_DATAGRAMS: usize = 256;
/// How long an ended alias is remembered.
const ENDED_MEMORY: Duration = Duration::from_secs(10);

impl AliasTable {
    /// Registers a subscription's sink; delivers datagrams that were waiting for it. Fails with
    /// DUPLICATE_TRACK_ALIAS if the alias names a different track (draft-19 §11.1).
    fn register(
        &mut self,
        alias: u64,
        track: &FullTrackName,
        sink: Arc<Sink>,
    ) -> Result<(), Error> {
        if let Some(existing) = self.tracks.get(&alias)
            && existing != track
            && self.by_alias.get(&alias).is_some_and(|v| !v.is_empty())
        {
            return Err(Error::violation(
                SessionErrorCode::DUPLICATE_TRACK_ALIAS,
                format!("track alias {alias} already names another track"),
            ));
        }
        self.tracks.insert(alias, track.clone());
        self.ended.remove(&alias);
        let now = Instant::now();
        let mut keep = Vec::new();
        for (at, d) in self.early_datagrams.drain(..) {
            if d.track_alias == alias {
                let _ = sink.tx.try_send(TrackEvent::Datagram(datagram_object(
                    &d,
                    sink.default_priority,
                )));
            } else if now.duration_since(at) < UNKNOWN_ALIAS_WAIT {
                keep.push((at, d));
            }
        }
        self.early_datagrams = keep;
        self.by_alias.entry(alias).or_default().push(sink);
        Ok(())
    }

    fn unregister(&mut self, alias: u64, request_id: u64) {
        if let Some(v) = self.by_alias.get_mut(&alias) {
            v.retain(|s| s.request_id != request_id);
            if v.is_empty() {
                self.by_alias.remove(&alias);
                self.tracks.remove(&alias);
                let now = Instant::now();
                self.ended
                    .retain(|_, at| now.duration_since(*at) < ENDED_MEMORY);
                self.ended.insert(alias, now);
            }
        }
    }

    /// The subscription a group of `alias` belongs to: the first whose filter admits it (with
    /// several subscriptions sharing an alias, draft-19 §5.1 has the subscriber re-apply filters).
    fn route(&self, alias: u64, loc: Location) -> Option<Arc<Sink>> {
        let sinks = self.by_alias.get(&alias)?;
        sinks
            .iter()
            .find(|s| s.params.borrow().in_range(loc))
            .or_else(|| sinks.first())
            .cloned()
    }
}

fn datagram_object(d: &ObjectDatagram, default_priority: u8) -> Object {
    let (status, payload) = match &d.body {
        DatagramBody::Payload(p) => (moq_core::data::ObjectStatus::Normal, p.clone()),
        DatagramBody::Status(s) => (*s, Bytes::new()),
    };
    Object {
        location: Location::new(d.group, d.object),
        subgroup: None,
        priority: d.priority.unwrap_or(default_priority),
        status,
        properties: d.properties.clone(),
        payload,
        end_of_group: d.end_of_group,
    }
}

/// The subscriber's side of a session's data plane.
#[derive(Debug)]
pub(crate) struct RecvState {
    core: Arc<SessionCore>,
    aliases: Mutex<AliasTable>,
    /// Notified whenever an alias is registered, so held streams look again. Not a watch
    /// channel: that is an allocation of ~390 B per session.
    registered: Notify,
    /// Streams held for an unknown alias.
    parked: AtomicUsize,
}

impl RecvState {
    pub(crate) fn new(core: Arc<SessionCore>) -> Self {
        RecvState {
            core,
            aliases: Mutex::new(AliasTable::default()),
            registered: Notify::new(),
            parked: AtomicUsize::new(0),
        }
    }

    /// Registers a subscription's data sink under its Track Alias until the guard drops;
    /// DUPLICATE_TRACK_ALIAS closes the session (draft-19 §11.1).
    pub(crate) fn register(
        self: &Arc<Self>,
        alias: u64,
        track: &FullTrackName,
        sink: Arc<Sink>,
    ) -> Result<SinkGuard, Error> {
        let request_id = sink.request_id;
        let res = self.aliases.lock().register(alias, track, sink);
        res.map_err(|e| self.core.fail(e))?;
        self.registered.notify_waiters();
        Ok(SinkGuard {
            recv: self.clone(),
            alias,
            request_id,
        })
    }

    /// Where the data stream of FETCH `request_id` will be handed, including one that arrived
    /// before the FETCH was sent.
    pub(crate) fn expect_fetch(&self, request_id: u64) -> oneshot::Receiver<DataRecv> {
        let (tx, rx) = oneshot::channel();
        let mut table = self.aliases.lock();
        match table.early_fetches.remove(&request_id) {
            Some(s) => {
                let _ = tx.send(s);
            }
            None => {
                table.fetches.insert(request_id, tx);
            }
        }
        rx
    }

    /// Forgets a FETCH that will get no data stream.
    pub(crate) fn forget_fetch(&self, request_id: u64) {
        self.aliases.lock().fetches.remove(&request_id);
    }

    /// Routes a datagram to its subscription, holds it briefly if the alias is not known yet,
    /// or drops it (draft-19 §11.3).
    pub(crate) fn datagram(&self, d: ObjectDatagram) {
        let mut table = self.aliases.lock();
        let loc = Location::new(d.group, d.object);
        if let Some(sink) = table.route(d.track_alias, loc) {
            let _ = sink.tx.try_send(TrackEvent::Datagram(datagram_object(
                &d,
                sink.default_priority,
            )));
        } else if !table.ended.contains_key(&d.track_alias) {
            let now = Instant::now();
            table
                .early_datagrams
                .retain(|(at, _)| now.duration_since(*at) < UNKNOWN_ALIAS_WAIT);
            if table.early_datagrams.len() < MAX_EARLY_DATAGRAMS {
                table.early_datagrams.push((now, d));
            }
        }
    }

    /// Routes a subgroup stream to its subscription, waiting briefly (and boundedly) for an
    /// alias that is not known yet.
    pub(crate) async fn subgroup_stream(&self, recv: BoxRecvStream, buf: Bytes) {
        let mut data = DataRecv::new(self.core.clone(), recv, buf);
        let Some(header) = data
            .header("SUBGROUP_HEADER", |b, v| SubgroupHeader::decode(b, v))
            .await
        else {
            return;
        };
        let group = header.group;
        // Most streams' alias is known: routed without registering for a registration.
        let known = self
            .aliases
            .lock()
            .route(header.track_alias, Location::new(group, 0));
        let sink = match known {
            Some(sink) => sink,
            // Boxed: inline, its timer and registration would make every stream's handler
            // larger.
            None => match Box::pin(self.wait_for_alias(&mut data, &header)).await {
                Some(sink) => sink,
                None => return,
            },
        };
        sink.streams.fetch_add(1, Ordering::Relaxed);
        sink.stream_arrived.notify_waiters();
        let incoming = IncomingSubgroup {
            reader: SubgroupReader::new(header, self.core.version()),
            data,
            default_priority: sink.default_priority,
            pending: None,
            assembly: BytesMut::new(),
            assembled: false,
        };
        let _ = sink.tx.send(TrackEvent::Subgroup(incoming)).await;
    }

    /// The subscription of a stream whose Track Alias was not known when it arrived: waits
    /// briefly (and boundedly) for it to be registered; `None` if it is not, or names an
    /// ended subscription.
    async fn wait_for_alias(
        &self,
        data: &mut DataRecv,
        header: &SubgroupHeader,
    ) -> Option<Arc<Sink>> {
        let group = header.group;
        let deadline = Instant::now() + UNKNOWN_ALIAS_WAIT;
        let mut parked: Option<Parked<'_>> = None;
        loop {
            // Enabled before the table is looked at: a registration after the look wakes it.
            let registered = self.registered.notified();
            tokio::pin!(registered);
            registered.as_mut().enable();
            {
                let table = self.aliases.lock();
                if let Some(sink) = table.route(header.track_alias, Location::new(group, 0)) {
                    return Some(sink);
                }
                if table.ended.contains_key(&header.track_alias) {
                    // Late data for an ended subscription.
                    return None;
                }
            }
            // draft-19 §11.4.2: hold a stream for an unknown alias briefly, and boundedly.
            if parked.is_none() {
                match Parked::new(self) {
                    Some(p) => parked = Some(p),
                    None => {
                        data.stop(StreamResetCode::EXCESSIVE_LOAD);
                        return None;
                    }
                }
            }
            tokio::select! {
                _ = registered => {}
                _ = tokio::time::sleep_until(deadline.into()) => return None,
            }
        }
    }

    /// Hands a fetch stream to its FETCH, or holds it until the FETCH is registered.
    pub(crate) async fn fetch_stream(&self, recv: BoxRecvStream, buf: Bytes) {
        let mut data = DataRecv::new(self.core.clone(), recv, buf);
        let Some(header) = data
            .header("FETCH_HEADER", |b, v| FetchHeader::decode(b, v))
            .await
        else {
            return;
        };
        let mut table = self.aliases.lock();
        if let Some(tx) = table.fetches.remove(&header.request_id) {
            let _ = tx.send(data);
        } else if table.early_fetches.len() < self.core.config().limits.max_pending_streams {
            table.early_fetches.insert(header.request_id, data);
        } else {
            data.stop(StreamResetCode::EXCESSIVE_LOAD);
        }
    }
}

/// Keeps a subscription's sink registered; dropping it (the subscription ended, or its task
/// was cancelled with the session) unregisters it, so the subscription's streams end.
#[derive(Debug)]
pub(crate) struct SinkGuard {
    recv: Arc<RecvState>,
    alias: u64,
    request_id: u64,
}

impl Drop for SinkGuard {
    fn drop(&mut self) {
        self.recv
            .aliases
            .lock()
            .unregister(self.alias, self.request_id);
    }
}

/// Counts a stream held for an unknown alias; at most `max_pending_streams` at once.
struct Parked<'a>(&'a RecvState);

impl<'a> Parked<'a> {
    fn new(recv: &'a RecvState) -> Option<Self> {
        let n = recv.parked.fetch_add(1, Ordering::Relaxed);
        let p = Parked(recv);
        (n < recv.core.config().limits.max_pending_streams).then_some(p)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.parked.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One subgroup stream of a subscription, read object by object.
///
/// Objects come in Object ID order. The stream ends with `Ok(None)` when the publisher finished
/// it (every object of the subgroup was delivered), or with [`Error::Cancelled`] if it was
/// reset (objects may be missing).
///
/// Dropping it before the stream's end sends STOP_SENDING (CANCELLED) on it; the
/// subscription is not affected. Dropped after the end, it does nothing.
#[derive(Debug)]
pub struct IncomingSubgroup {
    reader: SubgroupReader,
    data: DataRecv,
    default_priority: u8,
    /// The object being assembled by [`IncomingSubgroup::next_object`]; its payload so far is
    /// `assembly`.
    pending: Option<SubgroupObject>,
    /// The payload being assembled, carved from a block that the payloads assembled before it
    /// share (see [`ASSEMBLE_SHARED_MAX`]); empty between objects.
    assembly: BytesMut,
    /// A payload was assembled on this stream before: the next small one takes a block.
    assembled: bool,
}

impl IncomingSubgroup {
    /// The stream's header.
    pub fn header(&self) -> &SubgroupHeader {
        self.reader.header()
    }

    /// The Group ID.
    pub fn group(&self) -> u64 {
        self.reader.header().group
    }

    /// The Subgroup ID, once known.
    pub fn subgroup_id(&self) -> Option<u64> {
        match self.reader.header().subgroup {
            SubgroupId::FirstObject => self.reader.subgroup_id(),
            SubgroupId::Zero => Some(0),
            SubgroupId::Explicit(id) => Some(id),
        }
    }

    /// The publisher priority of the subgroup.
    pub fn priority(&self) -> u8 {
        self.reader
            .header()
            .priority
            .unwrap_or(self.default_priority)
    }

    /// True if this subgroup holds the group's last object (END_OF_GROUP).
    pub fn end_of_group(&self) -> bool {
        self.reader.header().end_of_group
    }

    /// True if the stream begins at the first object ever published in the subgroup
    /// (FIRST_OBJECT, draft-19 §2.2).
    pub fn first_object(&self) -> bool {
        self.reader.header().first_object
    }

    /// The next event: an object's fields or a chunk of its payload, without assembling
    /// payloads (for forwarding). `Ok(None)` at a clean end of the stream.
    ///
    /// Cancel safe. Do not mix it with [`IncomingSubgroup::next_object`] while an object is
    /// being assembled.
    pub async fn next_event(&mut self) -> Result<Option<SubgroupEvent>, Error> {
        let data = &mut self.data;
        loop {
            match self.reader.next(&mut data.buf) {
                Ok(Some(ev)) => return Ok(Some(ev)),
                Ok(None) => {}
                Err(e) => return Err(data.malformed(e)),
            }
            if data.fin {
                // draft-19 §11.4: a FIN in the middle of an object is a PROTOCOL_VIOLATION.
                let end = self.reader.finish(data.buf.front());
                return end.map(|()| None).map_err(|e| data.malformed(e));
            }
            if !data.fill().await? {
                return Ok(None);
            }
        }
    }

    /// The next whole object; `Ok(None)` when the publisher finished the stream.
    ///
    /// Cancel safe: an object being assembled when the future is dropped is kept and completed
    /// by the next call.
    pub async fn next_object(&mut self) -> Result<Option<Object>, Error> {
        loop {
            let Some(ev) = self.next_event().await? else {
                if self.pending.is_some() {
                    return Err(Error::protocol("subgroup stream ended inside an object"));
                }
                return Ok(None);
            };
            match ev {
                SubgroupEvent::Object(_) if self.pending.is_some() => {
                    return Err(Error::protocol("object header inside an object's payload"));
                }
                SubgroupEvent::Object(o) => {
                    if o.payload_len > self.data.max_object_size() {
                        self.stop(StreamResetCode::EXCESSIVE_LOAD);
                        return Err(Error::Limit("object larger than max_object_size"));
                    }
                    if o.payload_len == 0 {
                        return Ok(Some(self.object(o, Bytes::new())));
                    }
                    self.pending = Some(o);
                }
                SubgroupEvent::Payload { data, last } => {
                    let Some(o) = self.pending.as_ref() else {
                        return Err(Error::Invalid("payload without an object".into()));
                    };
                    if last && self.assembly.is_empty() {
                        // A payload that came in one chunk is passed on without a copy.
                        let Some(o) = self.pending.take() else {
                            continue;
                        };
                        return Ok(Some(self.object(o, data)));
                    }
                    if self.assembly.is_empty() {
                        // Sized once rather than grown piece by piece; at most 1 MiB ahead of
                        // the data, so a peer announcing a large object it never sends does
                        // not make us reserve it.
                        let want = (o.payload_len as usize).min(1 << 20);
                        if self.assembly.capacity() < want {
                            let shared = self.assembled && want <= ASSEMBLE_SHARED_MAX;
                            self.assembly =
                                BytesMut::with_capacity(if shared { ASSEMBLY_BLOCK } else { want });
                        }
                        self.assembled = true;
                    }
                    self.assembly.extend_from_slice(&data);
                    if !last {
                        continue;
                    }
                    let Some(o) = self.pending.take() else {
                        continue;
                    };
                    let payload = self.assembly.split().freeze();
                    return Ok(Some(self.object(o, payload)));
                }
            }
        }
    }

    fn object(&self, o: SubgroupObject, payload: Bytes) -> Object {
        Object {
            location: Location::new(self.group(), o.id),
            subgroup: self.subgroup_id(),
            priority: self.priority(),
            status: o.status,
            properties: o.properties,
            payload,
            end_of_group: false,
        }
    }

    /// Sends STOP_SENDING: this subgroup is no longer of interest.
    pub fn stop(&mut self, code: StreamResetCode) {
        self.data.stop(code);
    }
}
