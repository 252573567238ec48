//! FETCH and FETCH_OK (draft-19 §10.12, §10.13).

use bytes::Bytes;

use super::params::{ParamContext, Parameters};
use super::{ControlMessage, body_done};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::filter::LocationFilter;
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
    /// From draft-20: a range of a named track whose start is relative to the publisher's
    /// Largest Object (a LOCATION_FILTER with a relative start, draft-21 §9.20.10), up to the
    /// Largest Object.
    Relative {
        /// The track.
        track: FullTrackName,
        /// The filter (one for which [`LocationFilter::is_relative`] holds).
        filter: LocationFilter,
    },
}

/// The end of a Standalone FETCH that asks for everything up to the Largest Object.
pub const OPEN_END: Location = Location {
    group: u64::MAX,
    object: 0,
};

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
            FetchType::Relative { .. } => 0x1,
        }
    }

    /// The LOCATION_FILTER that carries this FETCH's range from draft-20 on (`None`: no filter,
    /// everything up to the Largest Object); an error for a Joining FETCH, which draft-20
    /// removed.
    fn to_filter(&self) -> Result<Option<LocationFilter>, EncodeError> {
        match self {
            FetchType::Standalone { start, end, .. } => {
                if *end == OPEN_END {
                    let f = LocationFilter::AbsoluteStart(*start).normalized();
                    return Ok((f != LocationFilter::All).then_some(f));
                }
                let end_group_delta =
                    end.group
                        .checked_sub(start.group)
                        .ok_or(EncodeError::Invalid {
                            field: "FETCH",
                            reason: "the end is before the start",
                        })?;
                // The end is exclusive, object 0 meaning the whole group; the filter's is
                // inclusive.
                let end_object = end.object.checked_sub(1);
                Ok(Some(LocationFilter::AbsoluteRange {
                    start: *start,
                    end_group_delta,
                    end_object,
                }))
            }
            FetchType::Relative { filter, .. } => Ok(Some(*filter)),
            FetchType::RelativeJoining { .. } | FetchType::AbsoluteJoining { .. } => {
                Err(EncodeError::Invalid {
                    field: "FETCH",
                    reason: "Joining FETCH exists until draft-19",
                })
            }
        }
    }

    /// The FETCH a draft-20 LOCATION_FILTER describes.
    fn from_filter(track: FullTrackName, filter: Option<LocationFilter>) -> FetchType {
        let range = |start, end| FetchType::Standalone {
            track: track.clone(),
            start,
            end,
        };
        match filter.map(LocationFilter::normalized) {
            None | Some(LocationFilter::All) => range(Location::default(), OPEN_END),
            Some(LocationFilter::AbsoluteStart(s)) => range(s, OPEN_END),
            Some(LocationFilter::AbsoluteRange {
                start,
                end_group_delta,
                end_object,
            }) => {
                let group = start.group.saturating_add(end_group_delta);
                let end = match end_object.and_then(|o| o.checked_add(1)) {
                    Some(o) => Location::new(group, o),
                    None => Location::new(group, 0),
                };
                range(start, end)
            }
            Some(filter) => FetchType::Relative {
                track: track.clone(),
                filter,
            },
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
        if !v.fetch_has_type() {
            // draft-21 §9.11: the track, and its range in LOCATION_FILTER.
            let track = FullTrackName::decode(buf, v)?;
            let mut params = Parameters::decode(buf, ParamContext::Fetch, v)?;
            body_done(buf, Self::NAME)?;
            let fetch_type = FetchType::from_filter(track, params.location_filter.take());
            return Ok(Fetch {
                request_id,
                fetch_type,
                params,
            });
        }
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
        if !v.fetch_has_type() {
            let (FetchType::Standalone { track, .. } | FetchType::Relative { track, .. }) =
                &self.fetch_type
            else {
                return Err(EncodeError::Invalid {
                    field: "FETCH",
                    reason: "Joining FETCH exists until draft-19",
                });
            };
            track.encode(buf, v)?;
            let params = Parameters {
                location_filter: self.fetch_type.to_filter()?,
                ..self.params.clone()
            };
            return params.encode(buf, ParamContext::Fetch, v);
        }
        buf.put_varint(self.fetch_type.code(), v);
        match &self.fetch_type {
            FetchType::Relative { .. } => {
                return Err(EncodeError::Invalid {
                    field: "FETCH",
                    reason: "a relative FETCH range needs draft-20",
                });
            }
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

/// FETCH_OK's End Location on the wire: until draft-19 the last object plus one (object 0 =
/// the whole group), as [`FetchOk::end_location`] keeps it; from draft-20 the last location
/// covered, inclusive (draft-21 §9.12), with Object ID 2^64-1 for a whole group.
fn end_to_wire(end: Location, v: Version) -> Location {
    if v.fetch_has_type() {
        return end;
    }
    match end.object.checked_sub(1) {
        Some(o) => Location::new(end.group, o),
        None => Location::new(end.group, u64::MAX),
    }
}

/// The inverse of [`end_to_wire`].
fn end_from_wire(end: Location, v: Version) -> Location {
    if v.fetch_has_type() {
        return end;
    }
    match end.object.checked_add(1) {
        Some(o) => Location::new(end.group, o),
        None => Location::new(end.group, 0),
    }
}

/// FETCH_OK: the publisher accepts a FETCH (draft-19 §10.13).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchOk {
    /// All objects of the track have been published and `end_location` is the last.
    pub end_of_track: bool,
    /// The end of the range served (last object plus one; object 0 = whole group), in every
    /// version (from draft-20 the wire carries the inclusive end; see the codec).
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
        let end_location = end_from_wire(Location::decode(buf, v)?, v);
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
        end_to_wire(self.end_location, v).encode(buf, v)?;
        self.params.encode(buf, ParamContext::FetchOk, v)?;
        self.track_properties.encode_all(buf, v)
    }
}
