//! SUBSCRIBE, SUBSCRIBE_OK, PUBLISH, PUBLISH_DONE and TRACK_STATUS (draft-19 §10.7-§10.11,
//! §10.14).

use bytes::{BufMut, Bytes};

use super::params::{ParamContext, Parameters, check_ints_fit};
use super::{ControlMessage, body_done, put_int};
use crate::Version;
use crate::codes::PublishDoneCode;
use crate::coding::{BufExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::filter::LocationFilter;
use crate::types::kvp::{Properties, property};
use crate::types::location::{GroupOrder, Location, decode_reason, encode_reason};
use crate::types::namespace::FullTrackName;

/// `Request ID, Track Namespace, Track Name, Parameters`: the body SUBSCRIBE and TRACK_STATUS
/// share (draft-19 §10.14: "identical to the SUBSCRIBE message"). Draft-14 has Subscriber
/// Priority (8), Group Order (8), Forward (8) and the filter between the name and the
/// parameters (§9.7; §9.20 TRACK_STATUS has the same layout): they become SUBSCRIBE's
/// SUBSCRIBER_PRIORITY, GROUP_ORDER (0, the publisher's order, is no parameter), FORWARD and
/// LOCATION_FILTER; TRACK_STATUS has no use for them and drops them once checked.
fn decode_track_request(
    buf: &mut Bytes,
    ctx: ParamContext,
    v: Version,
    name: &'static str,
) -> Result<(u64, FullTrackName, Parameters), DecodeError> {
    let request_id = super::get_request_id(buf, v)?;
    let track = FullTrackName::decode(buf, v)?;
    let mut inline = Parameters::default();
    if v.inline_request_fields() {
        inline.subscriber_priority = Some(buf.get_byte()?);
        // draft-14 §9.7: "Values larger than 0x2 are a protocol error"; 0x0 is the
        // publisher's order.
        inline.group_order = get_group_order(buf, true)?;
        // draft-14 §9.7: Forward other than 0 or 1 MUST terminate the session with
        // PROTOCOL_VIOLATION.
        inline.forward = Some(get_flag(buf, "Forward")?);
        // draft-14 §9.7: a filter type other than 0x1-0x4 MUST close the session.
        inline.location_filter = Some(LocationFilter::decode_value(buf, v)?);
    }
    let mut params = Parameters::decode(buf, ctx, v)?;
    body_done(buf, name)?;
    if ctx == ParamContext::Subscribe {
        params.subscriber_priority = inline.subscriber_priority.or(params.subscriber_priority);
        params.group_order = inline.group_order.or(params.group_order);
        params.forward = inline.forward.or(params.forward);
        params.location_filter = inline.location_filter.or(params.location_filter);
    }
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
    super::put_request_id(buf, request_id, v)?;
    track.encode(buf, v)?;
    if !v.inline_request_fields() {
        return params.encode(buf, ctx, v);
    }
    let mut rest = params.clone();
    // draft-14 §9.7 needs every field. Defaults for those the message leaves out:
    // SUBSCRIBER_PRIORITY 128 (what draft-16 §9.2.2.3 uses when it is omitted; draft-14 §7.3
    // recommends the middle of the range), Group Order 0 ("the original publisher's Group
    // Order SHOULD be used"), Forward 1 (draft-16 §9.2.2.8), and AbsoluteStart {0, 0}, which
    // draft-16 §5.1.2 calls "equivalent to an unfiltered subscription".
    buf.put_u8(rest.subscriber_priority.take().unwrap_or(128));
    buf.put_u8(rest.group_order.take().map_or(0, GroupOrder::value));
    buf.put_u8(rest.forward.take().unwrap_or(true).into());
    encode_inline_filter(rest.location_filter.take(), buf, v)?;
    rest.encode(buf, ctx, v)
}

/// A draft-14 one-byte flag (Forward, Content Exists, End Of Track): other than 0 or 1 is a
/// PROTOCOL_VIOLATION.
pub(crate) fn get_flag(buf: &mut Bytes, field: &'static str) -> Result<bool, DecodeError> {
    match buf.get_byte()? {
        0 => Ok(false),
        1 => Ok(true),
        x => Err(DecodeError::InvalidValue {
            field,
            value: x.into(),
        }),
    }
}

/// A draft-14 Group Order byte: 1 or 2, or, where `zero_ok`, 0 for "the publisher's order"
/// (`None`); anything else is a protocol error (draft-14 §9.7, §9.8).
fn get_group_order(buf: &mut Bytes, zero_ok: bool) -> Result<Option<GroupOrder>, DecodeError> {
    match buf.get_byte()? {
        0 if zero_ok => Ok(None),
        x => GroupOrder::from_value(x.into()).map(Some),
    }
}

/// Draft-14's `Filter Type, [Start Location], [End Group]` (§9.7); `None` is sent as
/// AbsoluteStart {0, 0}, which draft-16 §5.1.2 calls "equivalent to an unfiltered
/// subscription".
pub(crate) fn encode_inline_filter(
    filter: Option<LocationFilter>,
    buf: &mut Vec<u8>,
    v: Version,
) -> Result<(), EncodeError> {
    filter
        .unwrap_or(LocationFilter::AbsoluteStart(Location::default()))
        .encode_value(buf, v)
}

/// Draft-14's `Content Exists (8), [Largest Location]` (§9.8, §9.13): LARGEST_OBJECT.
fn get_content(buf: &mut Bytes, v: Version) -> Result<Option<Location>, DecodeError> {
    // "Any other value is a protocol error and MUST terminate the session with a
    // PROTOCOL_VIOLATION".
    if get_flag(buf, "Content Exists")? {
        Ok(Some(Location::decode(buf, v)?))
    } else {
        Ok(None)
    }
}

fn put_content(
    largest: Option<Location>,
    buf: &mut Vec<u8>,
    v: Version,
) -> Result<(), EncodeError> {
    match largest {
        Some(l) => {
            buf.put_u8(1);
            l.encode(buf, v)
        }
        None => {
            buf.put_u8(0);
            Ok(())
        }
    }
}

/// Draft-14's Group Order of SUBSCRIBE_OK, PUBLISH, TRACK_STATUS_OK and FETCH_OK (1 or 2;
/// "Values of 0x0 and those larger than 0x2 are a protocol error"): the publisher's order,
/// which draft-16 made the DEFAULT_PUBLISHER_GROUP_ORDER Track Extension; kept there.
pub(crate) fn track_group_order(order: u8, props: Properties) -> Result<Properties, DecodeError> {
    GroupOrder::from_value(order.into())?;
    props
        .with_int(property::DEFAULT_PUBLISHER_GROUP_ORDER, order.into())
        .map_err(|_| DecodeError::KeyValueFormatting("group order"))
}

/// The Group Order byte for draft-14 from the track's properties: absent means Ascending
/// (draft-16 §11.0.0.4).
pub(crate) fn put_track_group_order(
    props: &Properties,
    buf: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    match props.get_int(property::DEFAULT_PUBLISHER_GROUP_ORDER) {
        None => buf.put_u8(GroupOrder::Ascending.value()),
        Some(x @ (1 | 2)) => buf.put_u8(x as u8),
        Some(_) => {
            return Err(EncodeError::Invalid {
                field: "DEFAULT_PUBLISHER_GROUP_ORDER",
                reason: "1 or 2",
            });
        }
    }
    Ok(())
}

/// Reads the Track Properties that end a message where the version has them (draft-16 §9.10
/// Track Extensions, draft-19 Track Properties), checking draft-16's rule for
/// DELIVERY_TIMEOUT; until draft-15 they come from the parameters (`from_params`).
pub(crate) fn decode_track_properties(
    buf: &mut Bytes,
    from_params: Properties,
    v: Version,
) -> Result<Properties, DecodeError> {
    if !v.has_track_extensions() {
        return Ok(from_params);
    }
    let props = Properties::decode_all(buf, v)?;
    // draft-16 §11.0.0.1: a DELIVERY_TIMEOUT of 0 MUST close the session.
    if v.delivery_timeout_nonzero()
        && v.params_are_kvps()
        && props.get_int(property::OBJECT_DELIVERY_TIMEOUT) == Some(0)
    {
        return Err(DecodeError::InvalidValue {
            field: "DELIVERY_TIMEOUT",
            value: 0,
        });
    }
    Ok(props)
}

/// Writes the trailing Track Properties where the version has them (see
/// [`decode_track_properties`]).
pub(crate) fn encode_track_properties(
    props: &Properties,
    buf: &mut Vec<u8>,
    v: Version,
) -> Result<(), EncodeError> {
    if !v.has_track_extensions() {
        return Ok(());
    }
    check_ints_fit(props.pairs(), v)?;
    props.encode_all(buf, v)
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

impl SubscribeOk {
    /// Reads the body (after the Request ID under drafts 14-16) with parameters checked
    /// against `ctx`: SUBSCRIBE_OK, or draft-14's TRACK_STATUS_OK, which has its layout.
    pub(crate) fn decode_as(
        buf: &mut Bytes,
        ctx: ParamContext,
        v: Version,
    ) -> Result<Self, DecodeError> {
        let track_alias = buf.get_varint(v)?;
        if v.inline_request_fields() {
            // draft-14 §9.8: Expires (i), Group Order (8), Content Exists (8), [Largest
            // Location], Parameters. Expires 0 ("does not expire") is no EXPIRES.
            let expires = Some(buf.get_varint(v)?).filter(|x| *x != 0);
            let order = buf.get_byte()?;
            let largest = get_content(buf, v)?;
            let (mut params, track) = Parameters::decode_with_track(buf, ctx, v)?;
            // Leftover bytes are rejected by the framing, under the wire name.
            params.expires = expires;
            params.largest_object = largest;
            let track_properties = track_group_order(order, track)?;
            return Ok(SubscribeOk {
                track_alias,
                params,
                track_properties,
            });
        }
        let (params, track) = Parameters::decode_with_track(buf, ctx, v)?;
        let track_properties = decode_track_properties(buf, track, v)?;
        // Leftover bytes are rejected by the framing, under the wire name.
        Ok(SubscribeOk {
            track_alias,
            params,
            track_properties,
        })
    }

    /// Writes the body as [`SubscribeOk::decode_as`] reads it.
    pub(crate) fn encode_as(
        &self,
        buf: &mut Vec<u8>,
        ctx: ParamContext,
        v: Version,
    ) -> Result<(), EncodeError> {
        put_int(buf, self.track_alias, v)?;
        if v.inline_request_fields() {
            let mut rest = self.params.clone();
            // Expires 0: "does not expire" (draft-14 §9.8).
            put_int(buf, rest.expires.take().unwrap_or(0), v)?;
            put_track_group_order(&self.track_properties, buf)?;
            put_content(rest.largest_object.take(), buf, v)?;
            return rest.encode_with_track(&self.track_properties, buf, ctx, v);
        }
        self.params
            .encode_with_track(&self.track_properties, buf, ctx, v)?;
        encode_track_properties(&self.track_properties, buf, v)
    }
}

impl ControlMessage for SubscribeOk {
    const TYPE: u64 = 0x04;
    const NAME: &'static str = "SUBSCRIBE_OK";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        Self::decode_as(buf, ParamContext::SubscribeOk, v)
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        self.encode_as(buf, ParamContext::SubscribeOk, v)
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
        let request_id = super::get_request_id(buf, v)?;
        let track = FullTrackName::decode(buf, v)?;
        let track_alias = buf.get_varint(v)?;
        if v.inline_request_fields() {
            // draft-14 §9.13: Group Order (8), Content Exists (8), [Largest Location],
            // Forward (8), Parameters.
            let order = buf.get_byte()?;
            let largest = get_content(buf, v)?;
            // "Any value other than 0 or 1 is a PROTOCOL_VIOLATION."
            let forward = get_flag(buf, "Forward")?;
            let (mut params, track_values) =
                Parameters::decode_with_track(buf, ParamContext::Publish, v)?;
            body_done(buf, Self::NAME)?;
            params.largest_object = largest;
            params.forward = Some(forward);
            let track_properties = track_group_order(order, track_values)?;
            return Ok(Publish {
                request_id,
                track,
                track_alias,
                params,
                track_properties,
            });
        }
        let (params, track_values) = Parameters::decode_with_track(buf, ParamContext::Publish, v)?;
        let track_properties = decode_track_properties(buf, track_values, v)?;
        body_done(buf, Self::NAME)?;
        Ok(Publish {
            request_id,
            track,
            track_alias,
            params,
            track_properties,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        super::put_request_id(buf, self.request_id, v)?;
        self.track.encode(buf, v)?;
        put_int(buf, self.track_alias, v)?;
        let ctx = ParamContext::Publish;
        if v.inline_request_fields() {
            let mut rest = self.params.clone();
            put_track_group_order(&self.track_properties, buf)?;
            put_content(rest.largest_object.take(), buf, v)?;
            // Forward absent means 1 (draft-16 §9.2.2.8: "If the parameter is omitted from any
            // other message, the default value is 1").
            buf.put_u8(rest.forward.take().unwrap_or(true).into());
            return rest.encode_with_track(&self.track_properties, buf, ctx, v);
        }
        self.params
            .encode_with_track(&self.track_properties, buf, ctx, v)?;
        encode_track_properties(&self.track_properties, buf, v)
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
        // Drafts 14-16 number some codes differently (draft-14 §13.1.3, draft-16 §13.4.3).
        let status = PublishDoneCode::from_wire(buf.get_varint(v)?, v);
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
        put_int(buf, self.status.to_wire(v), v)?;
        // draft-20's "unknown" (2^64-1) is draft-14's 2^62-1 (§9.12: a publisher that cannot
        // give the exact number "MUST set Stream Count to 2^62 - 1").
        let count = if self.stream_count == u64::MAX && v.quic_varints() {
            Self::unknown_stream_count(v)
        } else {
            self.stream_count
        };
        put_int(buf, count, v)?;
        encode_reason(&self.reason, buf, v)
    }
}
