//! REQUEST_OK (draft-19 §10.5), REQUEST_ERROR with Redirect (§10.6) and REQUEST_UPDATE (§10.9).

use bytes::Bytes;

use super::params::{ParamContext, Parameters};
use super::setup::MAX_URI_LEN;
use super::{ControlMessage, body_done};
use crate::Version;
use crate::codes::RequestErrorCode;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::kvp::Properties;
use crate::types::location::{decode_reason, encode_reason};
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
        let params = Parameters::decode(buf, ParamContext::AnyRequestOk, v)?;
        let track_properties = Properties::decode_all(buf, v)?;
        Ok(RequestOk {
            params,
            track_properties,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        self.params.encode(buf, ParamContext::AnyRequestOk, v)?;
        self.track_properties.encode_all(buf, v)
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

impl ControlMessage for RequestError {
    const TYPE: u64 = 0x05;
    const NAME: &'static str = "REQUEST_ERROR";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
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

impl ControlMessage for RequestUpdate {
    const TYPE: u64 = 0x02;
    const NAME: &'static str = "REQUEST_UPDATE";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let request_id = buf.get_varint(v)?;
        let params = Parameters::decode(buf, ParamContext::AnyRequestUpdate, v)?;
        body_done(buf, Self::NAME)?;
        Ok(RequestUpdate { request_id, params })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.request_id, v);
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
