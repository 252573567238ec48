//! SUBSCRIBE, SUBSCRIBE_OK, PUBLISH, PUBLISH_DONE and TRACK_STATUS (draft-19 §10.7-§10.11,
//! §10.14).

use bytes::Bytes;

use super::params::{ParamContext, Parameters};
use super::{ControlMessage, body_done};
use crate::Version;
use crate::codes::PublishDoneCode;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::kvp::Properties;
use crate::types::location::{decode_reason, encode_reason};
use crate::types::namespace::FullTrackName;

/// `Request ID, Track Namespace, Track Name, Parameters`: the body SUBSCRIBE and TRACK_STATUS
/// share (draft-19 §10.14: "identical to the SUBSCRIBE message").
fn decode_track_request(
    buf: &mut Bytes,
    ctx: ParamContext,
    v: Version,
    name: &'static str,
) -> Result<(u64, FullTrackName, Parameters), DecodeError> {
    let request_id = buf.get_varint(v)?;
    let track = FullTrackName::decode(buf, v)?;
    let params = Parameters::decode(buf, ctx, v)?;
    body_done(buf, name)?;
    Ok((request_id, track, params))
}

fn encode_track_request(
    buf: &mut Vec<u8>,
    request_id: u64,
    track: &FullTrackName,
    params: &Parameters,
    ctx: ParamContext,
    v: Version,
) -> Result<(), EncodeError> {
    buf.put_varint(request_id, v);
    track.encode(buf, v)?;
    params.encode(buf, ctx, v)
}

/// SUBSCRIBE: ask for a track's new objects (draft-19 §10.7).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subscribe {
    /// The Request ID.
    pub request_id: u64,
    /// The track.
    pub track: FullTrackName,
    /// The parameters (filter, priority, forward, ...).
    pub params: Parameters,
}

impl ControlMessage for Subscribe {
    const TYPE: u64 = 0x03;
    const NAME: &'static str = "SUBSCRIBE";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let (request_id, track, params) =
            decode_track_request(buf, ParamContext::Subscribe, v, Self::NAME)?;
        Ok(Subscribe {
            request_id,
            track,
            params,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        encode_track_request(
            buf,
            self.request_id,
            &self.track,
            &self.params,
            ParamContext::Subscribe,
            v,
        )
    }
}

/// TRACK_STATUS: ask for a track's state without subscribing (draft-19 §10.14).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrackStatus {
    /// The Request ID.
    pub request_id: u64,
    /// The track.
    pub track: FullTrackName,
    /// The parameters (authorization only).
    pub params: Parameters,
}

impl ControlMessage for TrackStatus {
    const TYPE: u64 = 0x0D;
    const NAME: &'static str = "TRACK_STATUS";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let (request_id, track, params) =
            decode_track_request(buf, ParamContext::TrackStatus, v, Self::NAME)?;
        Ok(TrackStatus {
            request_id,
            track,
            params,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        encode_track_request(
            buf,
            self.request_id,
            &self.track,
            &self.params,
            ParamContext::TrackStatus,
            v,
        )
    }
}

/// SUBSCRIBE_OK: the publisher accepts a SUBSCRIBE (draft-19 §10.8).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscribeOk {
    /// The Track Alias objects of this subscription will carry.
    pub track_alias: u64,
    /// The parameters (LARGEST_OBJECT, EXPIRES).
    pub params: Parameters,
    /// The track's properties.
    pub track_properties: Properties,
}

impl ControlMessage for SubscribeOk {
    const TYPE: u64 = 0x04;
    const NAME: &'static str = "SUBSCRIBE_OK";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let track_alias = buf.get_varint(v)?;
        let params = Parameters::decode(buf, ParamContext::SubscribeOk, v)?;
        let track_properties = Properties::decode_all(buf, v)?;
        Ok(SubscribeOk {
            track_alias,
            params,
            track_properties,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.track_alias, v);
        self.params.encode(buf, ParamContext::SubscribeOk, v)?;
        self.track_properties.encode_all(buf, v)
    }
}

/// PUBLISH: the publisher starts a subscription on its own (draft-19 §10.10).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Publish {
    /// The Request ID.
    pub request_id: u64,
    /// The track.
    pub track: FullTrackName,
    /// The Track Alias objects will carry.
    pub track_alias: u64,
    /// The parameters (FORWARD, LARGEST_OBJECT, EXPIRES).
    pub params: Parameters,
    /// The track's properties.
    pub track_properties: Properties,
}

impl ControlMessage for Publish {
    const TYPE: u64 = 0x1D;
    const NAME: &'static str = "PUBLISH";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let request_id = buf.get_varint(v)?;
        let track = FullTrackName::decode(buf, v)?;
        let track_alias = buf.get_varint(v)?;
        let params = Parameters::decode(buf, ParamContext::Publish, v)?;
        let track_properties = Properties::decode_all(buf, v)?;
        Ok(Publish {
            request_id,
            track,
            track_alias,
            params,
            track_properties,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.request_id, v);
        self.track.encode(buf, v)?;
        buf.put_varint(self.track_alias, v);
        self.params.encode(buf, ParamContext::Publish, v)?;
        self.track_properties.encode_all(buf, v)
    }
}

/// PUBLISH_DONE: the last message of a subscription's publisher side (draft-19 §10.11).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishDone {
    /// Why the subscription ended.
    pub status: PublishDoneCode,
    /// Number of data streams opened for the subscription (fill fetch streams included, from
    /// draft-20); see [`PublishDone::unknown_stream_count`] for "unknown".
    pub stream_count: u64,
    /// A diagnostic reason, at most 1024 bytes.
    pub reason: String,
}

impl PublishDone {
    /// The Stream Count meaning "unknown" in `v`: 2^62-1 until draft-19 (§10.11), 2^64-1 from
    /// draft-20 (draft-21 §9.9).
    ///
    /// ```
    /// use moq_core::{Version, message::PublishDone};
    /// assert_eq!(PublishDone::unknown_stream_count(Version::Draft20), u64::MAX);
    /// assert_eq!(PublishDone::unknown_stream_count(Version::Draft19), (1 << 62) - 1);
    /// ```
    pub const fn unknown_stream_count(v: Version) -> u64 {
        if v.has_fill() {
            u64::MAX
        } else {
            (1 << 62) - 1
        }
    }

    /// True if the Stream Count says how many streams there were: it is below the "unknown"
    /// value of every version (aiomoqt 0.13.3 keeps draft-19's at draft-20 too).
    pub fn stream_count_known(&self) -> bool {
        self.stream_count < Self::unknown_stream_count(Version::Draft19)
    }
}

impl ControlMessage for PublishDone {
    const TYPE: u64 = 0x0B;
    const NAME: &'static str = "PUBLISH_DONE";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let status = PublishDoneCode(buf.get_varint(v)?);
        let stream_count = buf.get_varint(v)?;
        let reason = decode_reason(buf, v)?;
        body_done(buf, Self::NAME)?;
        Ok(PublishDone {
            status,
            stream_count,
            reason,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.status.0, v);
        buf.put_varint(self.stream_count, v);
        encode_reason(&self.reason, buf, v)
    }
}
