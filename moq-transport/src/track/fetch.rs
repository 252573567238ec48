//! FETCH and FETCH_OK, both sides, and fetch streams (draft-19 §5.2, §10.12, §10.13, §11.4.4).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::data::{self, FetchEvent, FetchHeader, FetchReader, RangeEnd};
use moq_core::message::{
    Fetch, FetchOk, FetchType, Message, ParamContext, Parameters, RequestError, RequestOk,
};
use moq_core::{FullTrackName, GroupOrder, Location, Properties};
use tokio::sync::{oneshot, watch};

use super::subscribe::{JoinPoint, check_track_request};
use super::{Incoming, Object};
use crate::error::Error;
use crate::request::{RequestGoaway, check_update};
use crate::session::stream::{Reader, Writer, cancel};
use crate::session::{AuthRequest, RequestKind, SessionInner, lock};
use crate::transport::{BoxRecvStream, BoxSendStream};

/// The parameters of a FETCH (SUBSCRIBER_PRIORITY, GROUP_ORDER, Range Filters, FILL_TIMEOUT,
/// AUTHORIZATION_TOKEN).
pub type FetchOptions = Parameters;

/// What a FETCH asks for.
pub type FetchRequest = FetchType;

/// What FETCH_OK said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchEnd {
    /// Every object of the track has been published and `end` is the last.
    pub end_of_track: bool,
    /// The end of the range served (last object plus one; object 0 = the whole group).
    pub end: Location,
    /// The track's properties.
    pub track_properties: Properties,
}

/// One entry of a fetch response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchItem {
    /// An object.
    Object(Object),
    /// Objects up to and including `location` do not exist (0x8C) or are unknown (0x10C).
    EndOfRange {
        /// Which kind.
        kind: RangeEnd,
        /// The last location covered.
        location: Location,
    },
}

/// The answer to a FETCH: FETCH_OK, then its objects in the requested order.
///
/// [`FetchResponse::next`] returns `None` when the publisher finished the fetch stream, or an
/// error if it was reset or the session ended. Dropping it cancels the fetch.
#[derive(Debug)]
pub struct FetchResponse {
    end: FetchEnd,
    inner: Arc<SessionInner>,
    stream: Option<oneshot::Receiver<(BoxRecvStream, BytesMut)>>,
    recv: Option<BoxRecvStream>,
    buf: BytesMut,
    reader: FetchReader,
    fin: bool,
    _control: (Writer, Reader),
}

impl FetchResponse {
    /// What FETCH_OK said.
    pub fn end(&self) -> &FetchEnd {
        &self.end
    }

    async fn stream(&mut self) -> Result<(), Error> {
        if self.recv.is_some() {
            return Ok(());
        }
        let Some(rx) = self.stream.take() else {
            return Err(Error::EndedEarly);
        };
        let (recv, buf) = tokio::select! {
            r = rx => r.map_err(|_| Error::EndedEarly)?,
            e = self.inner.closed() => return Err(e),
        };
        self.recv = Some(recv);
        self.buf = buf;
        Ok(())
    }

    /// The next object or End of Range marker.
    pub async fn next(&mut self) -> Option<Result<FetchItem, Error>> {
        match self.next_inner().await {
            Ok(Some(i)) => Some(Ok(i)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    async fn next_inner(&mut self) -> Result<Option<FetchItem>, Error> {
        self.stream().await?;
        let mut current: Option<(data::FetchObject, BytesMut)> = None;
        loop {
            match self.reader.next(&mut self.buf) {
                Ok(Some(FetchEvent::Object(o))) => {
                    if o.payload_len == 0 {
                        return Ok(Some(FetchItem::Object(fetch_object(o, Bytes::new()))));
                    }
                    if o.payload_len > self.inner.config.limits.max_object_size as u64 {
                        return Err(Error::Limit("object larger than max_object_size"));
                    }
                    current = Some((o, BytesMut::new()));
                    continue;
                }
                Ok(Some(FetchEvent::Payload { data, last })) => {
                    let Some((o, mut buf)) = current.take() else {
                        return Err(Error::protocol("fetch payload without an object"));
                    };
                    if last {
                        let payload = if buf.is_empty() {
                            data
                        } else {
                            buf.extend_from_slice(&data);
                            buf.freeze()
                        };
                        return Ok(Some(FetchItem::Object(fetch_object(o, payload))));
                    }
                    buf.extend_from_slice(&data);
                    current = Some((o, buf));
                    continue;
                }
                Ok(Some(FetchEvent::EndOfRange { kind, location })) => {
                    return Ok(Some(FetchItem::EndOfRange { kind, location }));
                }
                Ok(None) => {}
                Err(e) => {
                    let e = Error::from(e);
                    self.inner.close(e.clone());
                    return Err(e);
                }
            }
            if self.fin {
                return match self.reader.finish(&self.buf) {
                    Ok(()) if current.is_none() => {
                        // Done: close our half of the request stream gracefully.
                        self._control.0.finish();
                        Ok(None)
                    }
                    _ => {
                        let e = Error::protocol("fetch stream ended inside an object");
                        self.inner.close(e.clone());
                        Err(e)
                    }
                };
            }
            let Some(recv) = self.recv.as_mut() else {
                return Ok(None);
            };
            match recv.read_chunk(64 * 1024).await {
                Ok(Some(c)) => self.buf.extend_from_slice(&c),
                Ok(None) => self.fin = true,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

impl Drop for FetchResponse {
    fn drop(&mut self) {
        if !self.fin
            && let Some(r) = self.recv.as_mut()
        {
            r.stop(StreamResetCode::CANCELLED.0);
        }
    }
}

fn fetch_object(o: data::FetchObject, payload: Bytes) -> Object {
    Object {
        location: o.location,
        subgroup: o.subgroup,
        priority: o.priority,
        status: data::ObjectStatus::Normal,
        properties: o.properties,
        payload,
    }
}

/// The last location a range covers, given the FETCH encoding of its end (object 0 = the whole
/// group), or `None` if nothing is covered.
fn last_covered(end: Location) -> Location {
    if end.object == 0 {
        Location::new(end.group, u64::MAX)
    } else {
        Location::new(end.group, end.object - 1)
    }
}

/// Sends FETCH and waits for FETCH_OK.
pub(crate) async fn fetch(
    inner: Arc<SessionInner>,
    request: FetchRequest,
    params: Parameters,
) -> Result<FetchResponse, Error> {
    params.validate(ParamContext::Fetch, inner.version)?;
    let (mut writer, mut reader) = inner.open_request().await?;
    let request_id = inner.next_request_id();
    let (tx, rx) = oneshot::channel();
    {
        let mut table = lock(&inner.aliases);
        match table.early_fetches.remove(&request_id) {
            Some(s) => {
                let _ = tx.send(s);
            }
            None => {
                table.fetches.insert(request_id, tx);
            }
        }
    }
    let order = params.group_order.unwrap_or(GroupOrder::Ascending);
    let start = match &request {
        FetchType::Standalone { start, .. } => Some(*start),
        _ => None,
    };
    writer
        .send(Fetch {
            request_id,
            fetch_type: request,
            params,
        })
        .await?;
    let msg = tokio::select! {
        m = reader.next() => m,
        e = inner.closed() => return Err(e),
    };
    let ok = match msg {
        Ok(Some(Message::FetchOk(ok))) => ok,
        Ok(Some(Message::RequestError(e))) => {
            lock(&inner.aliases).fetches.remove(&request_id);
            writer.finish();
            return Err(Error::Rejected(Box::new(e)));
        }
        Ok(Some(m)) => {
            let e = Error::protocol(format!("{} before the response to FETCH", m.name()));
            inner.close(e.clone());
            return Err(e);
        }
        Ok(None) => return Err(Error::EndedEarly),
        Err(e) => return Err(inner.fail(e)),
    };
    // draft-19 §10.13: an End Location smaller than the Start Location is a violation.
    if let Some(start) = start
        && last_covered(ok.end_location) < start
        && ok.end_location != start
    {
        let e = Error::protocol("FETCH_OK End Location before the FETCH's Start Location");
        inner.close(e.clone());
        return Err(e);
    }
    Ok(FetchResponse {
        end: FetchEnd {
            end_of_track: ok.end_of_track,
            end: ok.end_location,
            track_properties: ok.track_properties,
        },
        inner: inner.clone(),
        stream: Some(rx),
        recv: None,
        buf: BytesMut::new(),
        reader: FetchReader::new(order, inner.version),
        fin: false,
        _control: (writer, reader),
    })
}

/// A FETCH from the peer, resolved to a track and a range, for the application to answer.
#[derive(Debug)]
pub struct IncomingFetch {
    pub(crate) request_id: u64,
    pub(crate) track: FullTrackName,
    pub(crate) start: Location,
    pub(crate) end: Location,
    pub(crate) params: Parameters,
    pub(crate) decision: Option<oneshot::Sender<FetchDecision>>,
}

pub(crate) enum FetchDecision {
    Accept(FetchEnd, oneshot::Sender<Result<FetchWriter, Error>>),
    Reject(RequestError),
}

impl std::fmt::Debug for FetchDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FetchDecision")
    }
}

impl IncomingFetch {
    /// The FETCH's Request ID.
    pub fn request_id(&self) -> u64 {
        self.request_id
    }

    /// The track.
    pub fn track(&self) -> &FullTrackName {
        &self.track
    }

    /// The first location asked for.
    pub fn start(&self) -> Location {
        self.start
    }

    /// The end of the range, FETCH-encoded: the last object plus one; object 0 = the whole
    /// group.
    pub fn end(&self) -> Location {
        self.end
    }

    /// True if `loc` is in the requested range.
    pub fn contains(&self, loc: Location) -> bool {
        loc >= self.start && loc <= last_covered(self.end)
    }

    /// The group order the objects must be sent in (GROUP_ORDER, default Ascending).
    pub fn group_order(&self) -> GroupOrder {
        self.params.group_order.unwrap_or(GroupOrder::Ascending)
    }

    /// The FETCH's parameters.
    pub fn params(&self) -> &Parameters {
        &self.params
    }

    /// Accepts with FETCH_OK; returns the writer for the fetch stream.
    pub async fn accept(mut self, end: FetchEnd) -> Result<FetchWriter, Error> {
        let d = self.decision.take().ok_or(Error::EndedEarly)?;
        let (tx, rx) = oneshot::channel();
        d.send(FetchDecision::Accept(end, tx))
            .map_err(|_| Error::EndedEarly)?;
        rx.await.unwrap_or(Err(Error::EndedEarly))
    }

    /// Rejects with REQUEST_ERROR.
    pub fn reject(mut self, error: RequestError) {
        if let Some(d) = self.decision.take() {
            let _ = d.send(FetchDecision::Reject(error));
        }
    }
}

/// Writes a fetch response stream: FETCH_HEADER, then objects in the requested order
/// (draft-19 §11.4.4). [`FetchWriter::finish`] ends it; dropping it unfinished resets it.
#[derive(Debug)]
pub struct FetchWriter {
    stream: Option<BoxSendStream>,
    writer: data::FetchWriter,
    buf: Vec<u8>,
    cancelled: watch::Receiver<Option<Error>>,
}

impl FetchWriter {
    fn check(&mut self) -> Result<(), Error> {
        if let Some(e) = self.cancelled.borrow().clone() {
            if let Some(mut s) = self.stream.take() {
                s.reset(StreamResetCode::CANCELLED.0);
            }
            return Err(e);
        }
        Ok(())
    }

    /// Writes one object.
    pub async fn write(&mut self, obj: &Object) -> Result<(), Error> {
        self.check()?;
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

    /// Writes an End of Range marker (draft-19 §11.4.4.2).
    pub async fn end_of_range(&mut self, kind: RangeEnd, location: Location) -> Result<(), Error> {
        self.check()?;
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

fn refuse(code: RequestErrorCode, reason: &str) -> RequestError {
    RequestError::new(code, reason)
}

/// How long a Joining FETCH waits for the SUBSCRIBE it names to arrive.
const JOINING_SUBSCRIBE_WAIT: Duration = Duration::from_secs(1);

/// Resolves a FETCH to (track, start, end) (draft-19 §10.12.2 for joining fetches).
async fn resolve(
    inner: &SessionInner,
    msg: &Fetch,
) -> Result<(FullTrackName, Location, Location), RequestError> {
    let (joining_id, joining_start, relative) = match &msg.fetch_type {
        FetchType::Standalone { track, start, end } => {
            // draft-19 §10.12.3: End MUST be at or after Start.
            if last_covered(*end) < *start {
                return Err(refuse(RequestErrorCode::INVALID_RANGE, "end before start"));
            }
            return Ok((track.clone(), *start, *end));
        }
        FetchType::RelativeJoining {
            joining_request_id,
            joining_start,
        } => (*joining_request_id, *joining_start, true),
        FetchType::AbsoluteJoining {
            joining_request_id,
            joining_start,
        } => (*joining_request_id, *joining_start, false),
    };
    // The SUBSCRIBE travels on its own stream and may arrive after the FETCH that joins it; a
    // Request ID below the FETCH's own is given a moment to appear.
    let wait = if joining_id < msg.request_id {
        JOINING_SUBSCRIBE_WAIT
    } else {
        Duration::ZERO
    };
    let Some(mut rx) = inner.join_state_within(joining_id, wait).await else {
        return Err(refuse(
            RequestErrorCode::INVALID_JOINING_REQUEST_ID,
            "no such subscription",
        ));
    };
    // A Pending subscription: wait until it is established (draft-19 §10.12.2).
    let state = tokio::time::timeout(
        Duration::from_secs(5),
        rx.wait_for(|j| j.established.is_some()),
    )
    .await
    .ok()
    .and_then(|r| r.ok().map(|j| j.clone()));
    let Some(state) = state else {
        return Err(refuse(
            RequestErrorCode::TIMEOUT,
            "subscription not established",
        ));
    };
    let Some(JoinPoint { forward, joining }) = state.established else {
        return Err(refuse(
            RequestErrorCode::INVALID_JOINING_REQUEST_ID,
            "no such subscription",
        ));
    };
    // draft-19 §10.12.2: Forward State 0, or no objects yet, is INVALID_RANGE.
    if !forward {
        return Err(refuse(
            RequestErrorCode::INVALID_RANGE,
            "the joined subscription does not forward",
        ));
    }
    let Some(joining) = joining else {
        return Err(refuse(
            RequestErrorCode::INVALID_RANGE,
            "no objects published yet",
        ));
    };
    let start_group = if relative {
        joining.group.saturating_sub(joining_start)
    } else {
        joining_start
    };
    let start = Location::new(start_group, 0);
    let end = Location::new(joining.group, joining.object.saturating_add(1));
    if start_group > joining.group {
        return Err(refuse(
            RequestErrorCode::INVALID_RANGE,
            "start after the joining location",
        ));
    }
    Ok((state.track, start, end))
}

/// Answers a FETCH: resolution and checks here, the objects from the application.
pub(crate) async fn serve_fetch(
    inner: &Arc<SessionInner>,
    msg: Fetch,
    mut writer: Writer,
    mut reader: Reader,
) -> Result<(), Error> {
    let tokens = inner.resolve_tokens(&msg.params.authorization_tokens)?;
    let resolved = resolve(inner, &msg).await;
    let (track, start, end) = match resolved {
        Ok(r) => r,
        Err(e) => {
            writer.send(e).await?;
            writer.finish();
            return Ok(());
        }
    };
    let mut refusal = check_track_request(inner, &track, &msg.params);
    if refusal.is_none() {
        refusal = inner
            .authorize(&AuthRequest {
                kind: RequestKind::Fetch,
                namespace: &track.namespace,
                track_name: Some(&track.name),
                tokens: &tokens,
            })
            .await
            .err();
    }
    if let Some(e) = refusal {
        writer.send(e).await?;
        writer.finish();
        return Ok(());
    }
    let (dtx, drx) = oneshot::channel();
    let request = IncomingFetch {
        request_id: msg.request_id,
        track,
        start,
        end,
        params: msg.params.clone(),
        decision: Some(dtx),
    };
    if let Err(e) = inner.deliver(Incoming::Fetch(request)) {
        writer.send(e).await?;
        writer.finish();
        return Ok(());
    }
    let decision = tokio::select! {
        d = drx => d.ok(),
        e = inner.closed() => return Err(e),
    };
    let (fetch_end, reply) = match decision {
        Some(FetchDecision::Accept(end, reply)) => (end, reply),
        Some(FetchDecision::Reject(e)) => {
            writer.send(e).await?;
            writer.finish();
            return Ok(());
        }
        None => {
            writer
                .send(refuse(RequestErrorCode::INTERNAL_ERROR, "not answered"))
                .await?;
            writer.finish();
            return Ok(());
        }
    };
    let order = msg.params.group_order.unwrap_or(GroupOrder::Ascending);
    let mut stream = tokio::select! {
        s = inner.conn.open_uni() => s?,
        e = inner.closed() => return Err(e),
    };
    let priority = msg.params.subscriber_priority.unwrap_or(128);
    stream.set_priority(super::stream_priority(priority, 128, order, 0, 0));
    let mut header = Vec::new();
    FetchHeader {
        request_id: msg.request_id,
    }
    .encode(&mut header, inner.version)?;
    stream.write_all(&header).await?;
    let (cancel_tx, cancel_rx) = watch::channel(None);
    let fw = FetchWriter {
        stream: Some(stream),
        writer: data::FetchWriter::new(order, inner.version),
        buf: Vec::new(),
        cancelled: cancel_rx,
    };
    writer
        .send(FetchOk {
            end_of_track: fetch_end.end_of_track,
            end_location: fetch_end.end,
            params: Parameters::default(),
            track_properties: fetch_end.track_properties,
        })
        .await?;
    let _ = reply.send(Ok(fw));
    // Serve REQUEST_UPDATE (priority) and cancellation until the requester is done.
    let mut goaway = RequestGoaway::default();
    let mut watch_stop = true;
    loop {
        tokio::select! {
            m = reader.next() => match m {
                Ok(Some(Message::RequestUpdate(u))) => {
                    check_update(inner, &reader, &u, ParamContext::UpdateFetch)?;
                    writer.send(RequestOk::default()).await?;
                }
                Ok(Some(Message::Goaway(g))) => { goaway.on_goaway(inner, g)?; }
                Ok(Some(m)) => return Err(Error::protocol(format!("{} on a FETCH stream", m.name()))),
                Ok(None) => { writer.finish(); return Ok(()); }
                Err(Error::Cancelled(code)) => {
                    cancel_tx.send_replace(Some(Error::Cancelled(code)));
                    writer.reset(code);
                    return Ok(());
                }
                Err(e) => return Err(e),
            },
            s = writer.stopped(), if watch_stop => {
                watch_stop = false;
                if let Ok(Some(code)) = s {
                    // draft-19 §5.2: STOP_SENDING cancels the fetch; reset both streams.
                    let code = StreamResetCode(code);
                    cancel_tx.send_replace(Some(Error::Cancelled(code)));
                    cancel(&mut writer, &mut reader, code);
                    return Ok(());
                }
            }
            e = inner.closed() => { cancel_tx.send_replace(Some(e.clone())); return Err(e) }
        }
    }
}
