//! The subscriber's side of a fetch stream: a FETCH's response, or a subscription's fill
//! fetch stream (draft-19 §11.4.4; draft-21 §3.4).

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use moq_core::data::{self, DecodeBuf, FetchEvent, FetchReader, RangeEnd};
use moq_core::{GroupOrder, Location};
use tokio::sync::oneshot;

use super::params::Object;
use super::recv::DataRecv;
use super::send::FetchEnd;
use crate::error::Error;
use crate::request::Request;
use crate::session::SessionCore;

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
/// error if it was reset or the session ended.
///
/// Dropping it before the end cancels the FETCH: RESET_STREAM and STOP_SENDING on its request
/// stream (FETCH_CANCEL on drafts 14-16) and STOP_SENDING on its data stream. Dropped after
/// [`FetchResponse::next`] returned `None`, it only closes what is left of the request
/// stream. A fill fetch stream (from [`crate::track::Subscription::take_fill`]) has no request
/// stream: dropping it stops its data stream only.
#[derive(Debug)]
#[must_use = "dropping it cancels the FETCH"]
pub struct FetchResponse {
    pub(super) end: FetchEnd,
    pub(super) core: Arc<SessionCore>,
    pub(super) stream: Option<oneshot::Receiver<DataRecv>>,
    pub(super) data: Option<DataRecv>,
    pub(super) reader: FetchReader,
    /// The object being assembled.
    pub(super) pending: Option<(data::FetchObject, BytesMut)>,
    /// The FETCH's request stream; none for a fill fetch stream (draft-21 §3.4).
    pub(super) request: Option<Request>,
}

impl FetchResponse {
    /// What FETCH_OK said.
    pub fn end(&self) -> &FetchEnd {
        &self.end
    }

    /// Waits for the fetch's data stream.
    async fn stream(&mut self) -> Result<(), Error> {
        let rx = self.stream.take().ok_or(Error::EndedEarly)?;
        let data = tokio::select! {
            r = rx => r.map_err(|_| Error::EndedEarly)?,
            e = self.core.closed() => return Err(e),
        };
        self.data = Some(data);
        Ok(())
    }

    /// The next object or End of Range marker.
    ///
    /// Cancel safe: an object being assembled when the future is dropped is completed by the
    /// next call.
    pub async fn next(&mut self) -> Option<Result<FetchItem, Error>> {
        match self.next_inner().await {
            Ok(Some(i)) => Some(Ok(i)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }

    async fn next_inner(&mut self) -> Result<Option<FetchItem>, Error> {
        if self.data.is_none() {
            self.stream().await?;
        }
        let Some(data) = self.data.as_mut() else {
            return Err(Error::EndedEarly);
        };
        let current = &mut self.pending;
        loop {
            match self.reader.next(&mut data.buf) {
                Ok(Some(FetchEvent::Object(o))) => {
                    if o.payload_len == 0 {
                        return Ok(Some(FetchItem::Object(fetch_object(o, Bytes::new()))));
                    }
                    if o.payload_len > data.max_object_size() {
                        return Err(Error::Limit("object larger than max_object_size"));
                    }
                    *current = Some((o, BytesMut::new()));
                    continue;
                }
                Ok(Some(FetchEvent::Payload { data: chunk, last })) => {
                    let Some((o, mut buf)) = current.take() else {
                        return Err(Error::protocol("fetch payload without an object"));
                    };
                    if last {
                        let payload = if buf.is_empty() {
                            chunk
                        } else {
                            buf.extend_from_slice(&chunk);
                            buf.freeze()
                        };
                        return Ok(Some(FetchItem::Object(fetch_object(o, payload))));
                    }
                    buf.extend_from_slice(&chunk);
                    *current = Some((o, buf));
                    continue;
                }
                Ok(Some(FetchEvent::EndOfRange { kind, location })) => {
                    return Ok(Some(FetchItem::EndOfRange { kind, location }));
                }
                Ok(None) => {}
                Err(e) => return Err(data.malformed(e)),
            }
            if data.fin {
                return match self.reader.finish(data.buf.front()) {
                    Ok(()) if current.is_none() => {
                        // Done: close our half of the request stream gracefully.
                        if let Some(r) = self.request.as_mut() {
                            r.finish();
                        }
                        Ok(None)
                    }
                    _ => {
                        Err(data.malformed(Error::protocol("fetch stream ended inside an object")))
                    }
                };
            }
            if !data.fill().await? {
                return Ok(None);
            }
        }
    }
}

impl FetchResponse {
    /// The fill fetch stream a subscription asked for with FILL_PARAMETERS (draft-21 §3.4,
    /// from draft-20): its FETCH_HEADER carries `request_id` and no FETCH_OK comes; it covers
    /// `start` to `end` (inclusive).
    pub(crate) fn fill(
        core: &Arc<SessionCore>,
        stream: oneshot::Receiver<DataRecv>,
        end: Location,
        order: GroupOrder,
        track_properties: moq_core::Properties,
    ) -> FetchResponse {
        FetchResponse {
            end: FetchEnd {
                end_of_track: false,
                end: Location::new(end.group, end.object.saturating_add(1)),
                track_properties,
            },
            core: core.clone(),
            stream: Some(stream),
            data: None,
            reader: FetchReader::new(order, core.version()),
            pending: None,
            request: None,
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
        end_of_group: false,
    }
}
