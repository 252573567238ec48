//! REQUEST_OK (draft-19 §10.5), REQUEST_ERROR with Redirect (§10.6) and REQUEST_UPDATE (§10.9).

use bytes::Bytes;

use bytes::BufMut;

use super::params::{ParamContext, Parameters};
use super::setup::MAX_URI_LEN;
use super::single::RequestType;
use super::subscribe::{SubscribeOk, encode_inline_filter, get_flag};
use super::{ControlMessage, body_done, put_int};
use crate::Version;
use crate::codes::RequestErrorCode;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::filter::LocationFilter;
use crate::types::kvp::Properties;
use crate::types::location::{GroupOrder, Location, decode_reason, encode_reason};
use crate::types::namespace::{FullTrackName, TrackNamespace};

/// REQUEST_OK: the success answer to PUBLISH (PUBLISH_OK), REQUEST_UPDATE, TRACK_STATUS,
/// SUBSCRIBE_NAMESPACE, SUBSCRIBE_TRACKS and PUBLISH_NAMESPACE (draft-19 §10.5).
///
/// Decoding checks the parameters against every REQUEST_OK role; once the role is known, call
/// [`RequestOk::validate`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestOk {
    /// The parameters.
    pub params: Parameters,
    /// Track Properties; only TRACK_STATUS_OK carries any.
    pub track_properties: Properties,
}

impl RequestOk {
    /// Checks the message against its role: parameters allowed for `ctx`, and Track Properties
    /// empty unless it answers TRACK_STATUS (draft-19 §10.5: otherwise PROTOCOL_VIOLATION).
    pub fn validate(&self, ctx: ParamContext, v: Version) -> Result<(), DecodeError> {
        self.params.validate(ctx, v)?;
        if ctx != ParamContext::TrackStatusOk && !self.track_properties.is_empty() {
            return Err(DecodeError::ProtocolViolation(
                "REQUEST_OK carries track properties outside TRACK_STATUS_OK",
            ));
        }
        Ok(())
    }
}

impl ControlMessage for RequestOk {
    const TYPE: u64 = 0x07;
    const NAME: &'static str = "REQUEST_OK";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        if v.params_are_kvps() {
            // draft-16 §9.7: Parameters only, no Track Properties; draft-15's TRACK_STATUS
            // answer carries the track's values as parameters.
            let (params, track_properties) =
                Parameters::decode_with_track(buf, ParamContext::AnyRequestOk, v)?;
            body_done(buf, Self::NAME)?;
            return Ok(RequestOk {
                params,
                track_properties,
            });
        }
        let params = Parameters::decode(buf, ParamContext::AnyRequestOk, v)?;
        let track_properties = if v.request_ok_has_properties() {
            Properties::decode_all(buf, v)?
        } else {
            body_done(buf, Self::NAME)?;
            Properties::default()
        };
        Ok(RequestOk {
            params,
            track_properties,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        if v.params_are_kvps() {
            // draft-16's REQUEST_OK has no Track Extensions: they are left out, as drafts 14
            // and 15 leave out the properties they have no room for. Draft-15's carries the
            // track's values as parameters (see Parameters::encode_with_track).
            let none = Properties::default();
            let props = if v.has_track_extensions() {
                &none
            } else {
                &self.track_properties
            };
            return self
                .params
                .encode_with_track(props, buf, ParamContext::AnyRequestOk, v);
        }
        self.params.encode(buf, ParamContext::AnyRequestOk, v)?;
        if !v.request_ok_has_properties() {
            // Draft-17's REQUEST_OK has Parameters only: the properties are left out.
            return Ok(());
        }
        self.track_properties.encode_all(buf, v)
    }
}

impl RequestOk {
    /// Reads a draft-14..17 answer named after its request: draft-14's TRACK_STATUS_OK (the
    /// layout of SUBSCRIBE_OK), PUBLISH_OK (with its fields), PUBLISH_NAMESPACE_OK and
    /// SUBSCRIBE_NAMESPACE_OK (nothing after the Request ID), and PUBLISH_OK of drafts 15-17
    /// (Parameters). `buf` holds the body after the Request ID.
    pub(crate) fn decode_answer(
        kind: RequestType,
        buf: &mut Bytes,
        v: Version,
    ) -> Result<Self, DecodeError> {
        let name = "REQUEST_OK";
        if v.has_request_ok() {
            // PUBLISH_OK of drafts 15-17: `Parameters` (draft-16 §9.14).
            let params = Parameters::decode(buf, ParamContext::PublishOk, v)?;
            // Leftover bytes are rejected by the framing, under the wire name.
            return Ok(RequestOk {
                params,
                ..Default::default()
            });
        }
        match kind {
            RequestType::TrackStatus => {
                // draft-14 §9.21: "identical to the SUBSCRIBE_OK message"; the Track Alias
                // is 0 and not used.
                let ok = SubscribeOk::decode_as(buf, ParamContext::TrackStatusOk, v)?;
                Ok(RequestOk {
                    params: ok.params,
                    track_properties: ok.track_properties,
                })
            }
            RequestType::Publish => {
                // draft-14 §9.14: Forward (8), Subscriber Priority (8), Group Order (8),
                // Filter Type, [Start Location], [End Group], Parameters.
                let forward = get_flag(buf, "Forward")?;
                let priority = buf.get_byte()?;
                // "Values of 0x0 and those larger than 0x2 are a protocol error."
                let order = GroupOrder::from_value(buf.get_byte()?.into())?;
                let filter = LocationFilter::decode_value(buf, v)?;
                let mut params = Parameters::decode(buf, ParamContext::PublishOk, v)?;
                // Leftover bytes are rejected by the framing, under the wire name.
                params.forward = Some(forward);
                params.subscriber_priority = Some(priority);
                params.group_order = Some(order);
                params.location_filter = Some(filter);
                Ok(RequestOk {
                    params,
                    ..Default::default()
                })
            }
            // draft-14 §9.24, §9.29: `Request ID` only.
            RequestType::PublishNamespace | RequestType::SubscribeNamespace => {
                // Leftover bytes are rejected by the framing, under the wire name.
                Ok(RequestOk::default())
            }
            _ => Err(DecodeError::UnexpectedMessage(name)),
        }
    }

    /// Writes the body of a draft-14..17 answer named after its request (see
    /// [`RequestOk::decode_answer`]), after the Request ID.
    pub(crate) fn encode_answer(
        &self,
        kind: RequestType,
        buf: &mut Vec<u8>,
        v: Version,
    ) -> Result<(), EncodeError> {
        let no_properties = || {
            if self.track_properties.is_empty() {
                Ok(())
            } else {
                Err(EncodeError::Invalid {
                    field: "REQUEST_OK",
                    reason: "track properties only answer TRACK_STATUS",
                })
            }
        };
        if v.has_request_ok() {
            no_properties()?;
            return self.params.encode(buf, ParamContext::PublishOk, v);
        }
        match kind {
            RequestType::TrackStatus => SubscribeOk {
                track_alias: 0,
                params: self.params.clone(),
                track_properties: self.track_properties.clone(),
            }
            .encode_as(buf, ParamContext::TrackStatusOk, v),
            RequestType::Publish => {
                no_properties()?;
                let mut rest = self.params.clone();
                // draft-14 §9.14 needs every field: FORWARD absent means 1 (draft-16
                // §9.2.2.8), SUBSCRIBER_PRIORITY absent means 128 (draft-16 §9.2.2.3), and a
                // Group Order of 0 is a protocol error, so an absent one is Ascending, the
                // publisher's default (draft-16 §11.0.0.4).
                buf.put_u8(rest.forward.take().unwrap_or(true).into());
                buf.put_u8(rest.subscriber_priority.take().unwrap_or(128));
                buf.put_u8(rest.group_order.take().unwrap_or_default().value());
                encode_inline_filter(rest.location_filter.take(), buf, v)?;
                rest.encode(buf, ParamContext::PublishOk, v)
            }
            RequestType::PublishNamespace | RequestType::SubscribeNamespace => {
                no_properties()?;
                if !self.params.is_empty() {
                    return Err(EncodeError::Invalid {
                        field: "REQUEST_OK",
                        reason: "draft-14's PUBLISH_NAMESPACE_OK / SUBSCRIBE_NAMESPACE_OK carry no parameters",
                    });
                }
                Ok(())
            }
            _ => Err(EncodeError::NotInVersion("an OK answering this request", v)),
        }
    }
}

/// Where to retry a request (draft-19 §10.6.1).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redirect {
    /// The URI to connect to; empty means the current session's URI.
    pub connect_uri: Bytes,
    /// The track to ask for instead; an empty namespace and name mean the original one.
    pub track: FullTrackName,
}

/// REQUEST_ERROR: the failure answer to any request (draft-19 §10.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestError {
    /// Why the request failed.
    pub code: RequestErrorCode,
    /// 0 = do not retry; otherwise the minimum wait in ms, plus one.
    pub retry_interval: u64,
    /// A diagnostic reason, at most 1024 bytes.
    pub reason: String,
    /// Present exactly when `code` is REDIRECT.
    pub redirect: Option<Box<Redirect>>,
}

impl RequestError {
    /// An error with no retry and no redirect.
    pub fn new(code: RequestErrorCode, reason: impl Into<String>) -> Self {
        RequestError {
            code,
            retry_interval: 0,
            reason: reason.into(),
            redirect: None,
        }
    }
}

impl RequestError {
    /// Reads the body (after the Request ID under drafts 14-16) of an error answering a
    /// request of `kind`: drafts 14-16 number the codes differently (draft-14 per request
    /// kind), see [`RequestErrorCode::from_wire`].
    pub(crate) fn decode_answer(
        kind: Option<RequestType>,
        buf: &mut Bytes,
        v: Version,
    ) -> Result<Self, DecodeError> {
        if !v.translates_error_codes() {
            return Self::decode_body(buf, v);
        }
        // draft-14 §9.9 (and every *_ERROR): Error Code, Error Reason; draft-16 §9.8 adds
        // Retry Interval after the code.
        let code = RequestErrorCode::from_wire(buf.get_varint(v)?, kind, v);
        let retry_interval = if v.request_error_has_retry() {
            buf.get_varint(v)?
        } else {
            0
        };
        let reason = decode_reason(buf, v)?;
        // Leftover bytes are rejected by the framing, under the wire name.
        Ok(RequestError {
            code,
            retry_interval,
            reason,
            redirect: None,
        })
    }

    /// Writes the body of an error answering a request of `kind` (see
    /// [`RequestError::decode_answer`]). A Retry Interval has no place before draft-16 and
    /// is not sent (the peer then does as for 0); a Redirect needs draft-18.
    pub(crate) fn encode_answer(
        &self,
        kind: Option<RequestType>,
        buf: &mut Vec<u8>,
        v: Version,
    ) -> Result<(), EncodeError> {
        if !v.translates_error_codes() {
            return self.encode_body(buf, v);
        }
        if self.redirect.is_some() || self.code == RequestErrorCode::REDIRECT {
            return Err(EncodeError::NotInVersion("REDIRECT", v));
        }
        put_int(buf, self.code.to_wire(kind, v), v)?;
        if v.request_error_has_retry() {
            put_int(buf, self.retry_interval, v)?;
        }
        encode_reason(&self.reason, buf, v)
    }
}

impl ControlMessage for RequestError {
    const TYPE: u64 = 0x05;
    const NAME: &'static str = "REQUEST_ERROR";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        if v.translates_error_codes() {
            return Self::decode_answer(None, buf, v);
        }
        let code = RequestErrorCode(buf.get_varint(v)?);
        let retry_interval = buf.get_varint(v)?;
        let reason = decode_reason(buf, v)?;
        let redirect = if code == RequestErrorCode::REDIRECT {
            // draft-19 §10.6.1: Redirect follows only for REDIRECT.
            let connect_uri = buf.get_len_prefixed(v, "connect URI", MAX_URI_LEN as u64)?;
            let ns = TrackNamespace::decode(buf, v)?;
            let track = FullTrackName::decode_name(ns, buf, v)?;
            Some(Box::new(Redirect { connect_uri, track }))
        } else {
            None
        };
        body_done(buf, Self::NAME)?;
        Ok(RequestError {
            code,
            retry_interval,
            reason,
            redirect,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        if v.translates_error_codes() {
            return self.encode_answer(None, buf, v);
        }
        buf.put_varint(self.code.0, v);
        buf.put_varint(self.retry_interval, v);
        encode_reason(&self.reason, buf, v)?;
        if self.code == RequestErrorCode::REDIRECT {
            // An absent Redirect is sent empty: same URI, same track.
            let empty = Redirect::default();
            let r = self.redirect.as_deref().unwrap_or(&empty);
            buf.put_len_prefixed(&r.connect_uri, v, "connect URI", MAX_URI_LEN)?;
            r.track.encode(buf, v)?;
        } else if self.redirect.is_some() {
            return Err(EncodeError::Invalid {
                field: "REQUEST_ERROR",
                reason: "a Redirect needs error code REDIRECT",
            });
        }
        Ok(())
    }
}

/// REQUEST_UPDATE: changes the parameters of an open request (draft-19 §10.9).
///
/// Decoding checks the parameters against every REQUEST_UPDATE role; once the updated request
/// is known, call [`Parameters::validate`] with its `Update*` context.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestUpdate {
    /// A fresh Request ID.
    pub request_id: u64,
    /// The changed parameters; absent ones keep their value.
    pub params: Parameters,
}

impl RequestUpdate {
    /// Reads what follows the Request ID (and, under drafts 14-16, the Existing Request ID,
    /// read by [`Message::decode_addressed`](super::Message::decode_addressed)).
    pub(crate) fn decode_fields(
        request_id: u64,
        buf: &mut Bytes,
        v: Version,
    ) -> Result<Self, DecodeError> {
        let name = "REQUEST_UPDATE";
        if !v.inline_request_fields() {
            let params = Parameters::decode(buf, ParamContext::AnyRequestUpdate, v)?;
            body_done(buf, name)?;
            return Ok(RequestUpdate { request_id, params });
        }
        // draft-14 §9.10 SUBSCRIBE_UPDATE: Start Location, End Group (plus 1; 0 = open),
        // Subscriber Priority (8), Forward (8), Parameters.
        let start = Location::decode(buf, v)?;
        let end_group = buf.get_varint(v)?;
        let priority = buf.get_byte()?;
        // "Any other value ... MUST terminate the session with a PROTOCOL_VIOLATION".
        let forward = get_flag(buf, "Forward")?;
        let mut params = Parameters::decode(buf, ParamContext::AnyRequestUpdate, v)?;
        body_done(buf, name)?;
        let filter = match end_group.checked_sub(1) {
            None => LocationFilter::AbsoluteStart(start),
            Some(last) => LocationFilter::AbsoluteRange {
                start,
                // "End Group MUST be greater than or equal to the Group specified in Start":
                // otherwise a PROTOCOL_VIOLATION (§9.10).
                end_group_delta: last.checked_sub(start.group).ok_or(
                    DecodeError::InvalidValue {
                        field: "End Group (before the Start Location's group)",
                        value: end_group,
                    },
                )?,
                end_object: None,
            },
        };
        params.location_filter = Some(filter);
        params.subscriber_priority = Some(priority);
        params.forward = Some(forward);
        Ok(RequestUpdate { request_id, params })
    }

    /// Writes the body under drafts 14-16: the Request ID, the Existing Request ID of the
    /// request updated, and the rest.
    ///
    /// Draft-14's SUBSCRIBE_UPDATE restates the subscription's Start Location, End Group,
    /// Subscriber Priority and Forward (§9.10): LOCATION_FILTER (an absolute one),
    /// SUBSCRIBER_PRIORITY and FORWARD must all be set; an absent one is an
    /// [`EncodeError`], as the field cannot say "unchanged".
    pub(crate) fn encode_with_existing(
        &self,
        existing: u64,
        buf: &mut Vec<u8>,
        v: Version,
    ) -> Result<(), EncodeError> {
        put_int(buf, self.request_id, v)?;
        put_int(buf, existing, v)?;
        if !v.inline_request_fields() {
            return self.params.encode(buf, ParamContext::AnyRequestUpdate, v);
        }
        let needs = |reason| EncodeError::Invalid {
            field: "SUBSCRIBE_UPDATE",
            reason,
        };
        let mut rest = self.params.clone();
        let (start, end_group) = match rest.location_filter.take() {
            Some(LocationFilter::AbsoluteStart(start)) => (start, 0),
            Some(LocationFilter::All) => (Location::default(), 0),
            Some(LocationFilter::AbsoluteRange {
                start,
                end_group_delta,
                end_object: None,
            }) => {
                let end = start
                    .group
                    .checked_add(end_group_delta)
                    .and_then(|g| g.checked_add(1))
                    .ok_or(needs("End Group overflows"))?;
                (start, end)
            }
            Some(_) => return Err(needs("draft-14 updates to an absolute start or range only")),
            None => {
                return Err(needs(
                    "draft-14 needs LOCATION_FILTER (Start Location, End Group)",
                ));
            }
        };
        start.encode(buf, v)?;
        put_int(buf, end_group, v)?;
        buf.put_u8(
            rest.subscriber_priority
                .take()
                .ok_or(needs("draft-14 needs SUBSCRIBER_PRIORITY"))?,
        );
        buf.put_u8(
            rest.forward
                .take()
                .ok_or(needs("draft-14 needs FORWARD"))?
                .into(),
        );
        rest.encode(buf, ParamContext::AnyRequestUpdate, v)
    }
}

impl ControlMessage for RequestUpdate {
    const TYPE: u64 = 0x02;
    const NAME: &'static str = "REQUEST_UPDATE";

    /// Under drafts 14-16 the Existing Request ID that follows the Request ID is skipped (see
    /// [`Message::decode_addressed`](super::Message::decode_addressed)).
    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let request_id = super::get_request_id(buf, v)?;
        if v.single_control_stream() {
            buf.get_varint(v)?;
        }
        Self::decode_fields(request_id, buf, v)
    }

    /// Under drafts 14-16 this fails: the body needs the Existing Request ID, which
    /// [`Message::encode_addressed`](super::Message::encode_addressed) takes from its
    /// envelope.
    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        if v.single_control_stream() {
            return Err(EncodeError::Invalid {
                field: "REQUEST_UPDATE",
                reason: "needs its Existing Request ID (Message::encode_addressed)",
            });
        }
        super::put_request_id(buf, self.request_id, v)?;
        self.params.encode(buf, ParamContext::AnyRequestUpdate, v)
    }
}

/// PUBLISH_STATE_NOTIFY: the publisher tells the subscriber that the subscription's state
/// changed for a reason other than a REQUEST_UPDATE (draft-21 §9.10, from draft-20). Sent on the
/// subscription's request stream; not answered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishStateNotify {
    /// The parameters whose values changed (LOCATION_FILTER, FORWARD, LARGEST_OBJECT).
    pub params: Parameters,
}

impl ControlMessage for PublishStateNotify {
    const TYPE: u64 = 0x22;
    const NAME: &'static str = "PUBLISH_STATE_NOTIFY";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let params = Parameters::decode(buf, ParamContext::PublishStateNotify, v)?;
        body_done(buf, Self::NAME)?;
        Ok(PublishStateNotify { params })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        self.params.encode(buf, ParamContext::PublishStateNotify, v)
    }
}
