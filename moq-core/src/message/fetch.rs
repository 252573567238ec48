//! FETCH and FETCH_OK (draft-19 §10.12, §10.13).

use bytes::Bytes;

use super::params::{ParamContext, Parameters};
use super::subscribe::{
    decode_track_properties, encode_track_properties, put_track_group_order, track_group_order,
};
use super::{ControlMessage, body_done, put_int};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError, QuicVarInt};
use crate::types::filter::LocationFilter;
use crate::types::kvp::Properties;
use crate::types::location::{GroupOrder, Location};
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
        let request_id = super::get_request_id(buf, v)?;
        let mut inline = Parameters::default();
        if v.inline_request_fields() {
            // draft-14 §9.16: Subscriber Priority (8), Group Order (8; 0 = the publisher's,
            // "Values larger than 0x2 are a protocol error").
            inline.subscriber_priority = Some(buf.get_byte()?);
            inline.group_order = match buf.get_byte()? {
                0 => None,
                x => Some(GroupOrder::from_value(x.into())?),
            };
        }
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
                end: end_from_quic(Location::decode(buf, v)?, v),
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
        let mut params = Parameters::decode(buf, ParamContext::Fetch, v)?;
        body_done(buf, Self::NAME)?;
        params.subscriber_priority = inline.subscriber_priority.or(params.subscriber_priority);
        params.group_order = inline.group_order.or(params.group_order);
        Ok(Fetch {
            request_id,
            fetch_type,
            params,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        super::put_request_id(buf, self.request_id, v)?;
        let mut rest = self.params.clone();
        if v.inline_request_fields() {
            // draft-14 §9.16 needs both fields: priority 128 when absent (draft-16 §9.2.2.3),
            // Group Order 0, "the original publisher's Group Order SHOULD be used".
            buf.push(rest.subscriber_priority.take().unwrap_or(128));
            buf.push(rest.group_order.take().map_or(0, GroupOrder::value));
        }
        let params = &rest;
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
                ..params.clone()
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
                end_to_quic(*end, v).encode(buf, v)?;
            }
            FetchType::RelativeJoining {
                joining_request_id,
                joining_start,
            }
            | FetchType::AbsoluteJoining {
                joining_request_id,
                joining_start,
            } => {
                put_int(buf, *joining_request_id, v)?;
                put_int(buf, *joining_start, v)?;
            }
        }
        params.encode(buf, ParamContext::Fetch, v)
    }
}

/// [`OPEN_END`] (group 2^64-1) under the QUIC varints of drafts 14-16, which stop at 2^62-1:
/// those drafts have no "open end" of their own (draft-14 §9.16.1, draft-16 §9.16.1: "End
/// Location, plus 1. A Location.Object value of 0 means the entire group"), so the whole of
/// the last group they can name, {2^62-1, 0}, which covers every Object they can carry.
const QUIC_OPEN_END: Location = Location {
    group: QuicVarInt::MAX,
    object: 0,
};

fn end_to_quic(end: Location, v: Version) -> Location {
    if v.quic_varints() && end == OPEN_END {
        QUIC_OPEN_END
    } else {
        end
    }
}

fn end_from_quic(end: Location, v: Version) -> Location {
    if v.quic_varints() && end == QUIC_OPEN_END {
        OPEN_END
    } else {
        end
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
        // draft-14 §9.17: Group Order (8) first, the publisher's order for the fetch (kept as
        // the track's DEFAULT_PUBLISHER_GROUP_ORDER, where draft-16 puts the publisher's
        // order).
        let order = if v.inline_request_fields() {
            Some(buf.get_byte()?)
        } else {
            None
        };
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
        // Drafts 14-16 send the exclusive end the model keeps (draft-16 §9.17:
        // {Largest.Group, Largest.Object + 1}, Object 0 for a whole group).
        let end_location = end_from_quic(end_from_wire(Location::decode(buf, v)?, v), v);
        let (params, track_values) = Parameters::decode_with_track(buf, ParamContext::FetchOk, v)?;
        let mut track_properties = decode_track_properties(buf, track_values, v)?;
        body_done(buf, Self::NAME)?;
        if let Some(order) = order {
            track_properties = track_group_order(order, track_properties)?;
        }
        Ok(FetchOk {
            end_of_track,
            end_location,
            params,
            track_properties,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        if v.inline_request_fields() {
            put_track_group_order(&self.track_properties, buf)?;
        }
        buf.push(self.end_of_track.into());
        end_to_quic(end_to_wire(self.end_location, v), v).encode(buf, v)?;
        self.params
            .encode_with_track(&self.track_properties, buf, ParamContext::FetchOk, v)?;
        encode_track_properties(&self.track_properties, buf, v)
    }
}
