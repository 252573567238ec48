//! FETCH and FETCH_OK (draft-19 §10.12, §10.13).

use bytes::Bytes;

use super::params::{ParamContext, Parameters};
use super::{ControlMessage, body_done};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::kvp::Properties;
use crate::types::location::Location;
use crate::types::namespace::FullTrackName;

/// Which objects a FETCH asks for (draft-19 §10.12).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchType {
    /// 0x1: a range of a named track. `end` is the last object plus one; `end.object == 0`
    /// means the whole `end.group`.
    Standalone {
        /// The track.
        track: FullTrackName,
        /// The first location.
        start: Location,
        /// The end location (exclusive object, see above).
        end: Location,
    },
    /// 0x2: `joining_start` groups before the joined subscription's Joining Location.
    RelativeJoining {
        /// The subscription joined.
        joining_request_id: u64,
        /// How many groups back.
        joining_start: u64,
    },
    /// 0x3: from group `joining_start` up to the joined subscription's Joining Location.
    AbsoluteJoining {
        /// The subscription joined.
        joining_request_id: u64,
        /// The first group.
        joining_start: u64,
    },
}

impl Default for FetchType {
    fn default() -> Self {
        FetchType::Standalone {
            track: FullTrackName::default(),
            start: Location::default(),
            end: Location::default(),
        }
    }
}

impl FetchType {
    /// The wire Fetch Type.
    pub const fn code(&self) -> u64 {
        match self {
            FetchType::Standalone { .. } => 0x1,
            FetchType::RelativeJoining { .. } => 0x2,
            FetchType::AbsoluteJoining { .. } => 0x3,
        }
    }
}

/// FETCH: ask for a range of already published objects (draft-19 §10.12).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Fetch {
    /// The Request ID.
    pub request_id: u64,
    /// Standalone or joining.
    pub fetch_type: FetchType,
    /// The parameters (priority, group order, filters, fill timeout).
    pub params: Parameters,
}

impl ControlMessage for Fetch {
    const TYPE: u64 = 0x16;
    const NAME: &'static str = "FETCH";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let request_id = buf.get_varint(v)?;
        let ty = buf.get_varint(v)?;
        let fetch_type = match ty {
            0x1 => FetchType::Standalone {
                track: FullTrackName::decode(buf, v)?,
                start: Location::decode(buf, v)?,
                end: Location::decode(buf, v)?,
            },
            0x2 => FetchType::RelativeJoining {
                joining_request_id: buf.get_varint(v)?,
                joining_start: buf.get_varint(v)?,
            },
            0x3 => FetchType::AbsoluteJoining {
                joining_request_id: buf.get_varint(v)?,
                joining_start: buf.get_varint(v)?,
            },
            // draft-19 §10.12: any other Fetch Type is a PROTOCOL_VIOLATION.
            _ => {
                return Err(DecodeError::InvalidValue {
                    field: "fetch type",
                    value: ty,
                });
            }
        };
        let params = Parameters::decode(buf, ParamContext::Fetch, v)?;
        body_done(buf, Self::NAME)?;
        Ok(Fetch {
            request_id,
            fetch_type,
            params,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.request_id, v);
        buf.put_varint(self.fetch_type.code(), v);
        match &self.fetch_type {
            FetchType::Standalone { track, start, end } => {
                track.encode(buf, v)?;
                start.encode(buf, v)?;
                end.encode(buf, v)?;
            }
            FetchType::RelativeJoining {
                joining_request_id,
                joining_start,
            }
            | FetchType::AbsoluteJoining {
                joining_request_id,
                joining_start,
            } => {
                buf.put_varint(*joining_request_id, v);
                buf.put_varint(*joining_start, v);
            }
        }
        self.params.encode(buf, ParamContext::Fetch, v)
    }
}

/// FETCH_OK: the publisher accepts a FETCH (draft-19 §10.13).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchOk {
    /// All objects of the track have been published and `end_location` is the last.
    pub end_of_track: bool,
    /// The end of the range served (last object plus one; object 0 = whole group).
    pub end_location: Location,
    /// The parameters.
    pub params: Parameters,
    /// The track's properties.
    pub track_properties: Properties,
}

impl ControlMessage for FetchOk {
    const TYPE: u64 = 0x18;
    const NAME: &'static str = "FETCH_OK";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let end_of_track = match buf.get_byte()? {
            0 => false,
            1 => true,
            x => {
                return Err(DecodeError::InvalidValue {
                    field: "End Of Track",
                    value: x.into(),
                });
            }
        };
        let end_location = Location::decode(buf, v)?;
        let params = Parameters::decode(buf, ParamContext::FetchOk, v)?;
        let track_properties = Properties::decode_all(buf, v)?;
        Ok(FetchOk {
            end_of_track,
            end_location,
            params,
            track_properties,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.push(self.end_of_track.into());
        self.end_location.encode(buf, v)?;
        self.params.encode(buf, ParamContext::FetchOk, v)?;
        self.track_properties.encode_all(buf, v)
    }
}
