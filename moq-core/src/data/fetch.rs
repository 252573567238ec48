//! Fetch streams: FETCH_HEADER and the serialized fetch objects (draft-19 §11.4.4).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{FETCH_STREAM_TYPE, expect_type};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};
use crate::types::kvp::Properties;
use crate::types::location::{GroupOrder, Location};

const SUBGROUP_MASK: u64 = 0x03;
const OBJECT_DELTA: u64 = 0x04;
const GROUP_DELTA: u64 = 0x08;
const PRIORITY: u64 = 0x10;
const PROPERTIES: u64 = 0x20;
const DATAGRAM: u64 = 0x40;
const END_OF_NON_EXISTENT_RANGE: u64 = 0x8C;
const END_OF_UNKNOWN_RANGE: u64 = 0x10C;
/// draft-21 §11.4.1.2 (from draft-20).
const END_OF_TIMED_OUT_RANGE: u64 = 0x20C;

/// FETCH_HEADER: the start of a fetch response stream (draft-19 §11.4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchHeader {
    /// The Request ID of the FETCH answered.
    pub request_id: u64,
}

impl FetchHeader {
    /// Reads the header, stream type included.
    pub fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        expect_type(buf, v, FETCH_STREAM_TYPE)?;
        Ok(FetchHeader {
            request_id: buf.get_varint(v)?,
        })
    }

    /// Writes the header, stream type included.
    pub fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(FETCH_STREAM_TYPE, v);
        buf.put_varint(self.request_id, v);
        Ok(())
    }
}

/// One object on a fetch stream, without its payload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchObject {
    /// Where the object is.
    pub location: Location,
    /// The Subgroup ID, or `None` for an object whose forwarding preference is Datagram.
    pub subgroup: Option<u64>,
    /// The Publisher Priority.
    pub priority: u8,
    /// Object Properties.
    pub properties: Properties,
    /// Payload length in bytes.
    pub payload_len: u64,
}

/// Which End of Range marker (draft-19 §11.4.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RangeEnd {
    /// 0x8C: the objects since the previous entry, up to and including `location`, do not exist.
    NonExistent,
    /// 0x10C: the objects since the previous entry, up to and including `location`, are unknown.
    Unknown,
    /// 0x20C (from draft-20): the objects since the previous entry, up to and including
    /// `location`, were not available before the FETCH's Fill Timeout ran out.
    TimedOut,
}

impl RangeEnd {
    /// The serialization flags value, if the marker exists in `v`.
    pub const fn flags(self, v: Version) -> Option<u64> {
        match self {
            RangeEnd::NonExistent => Some(END_OF_NON_EXISTENT_RANGE),
            RangeEnd::Unknown => Some(END_OF_UNKNOWN_RANGE),
            RangeEnd::TimedOut if v.has_fill() => Some(END_OF_TIMED_OUT_RANGE),
            RangeEnd::TimedOut => None,
        }
    }

    /// The marker a FETCH reports unavailable objects with when its Fill Timeout runs out:
    /// Timed-Out from draft-20 (draft-21 §9.20.6), Unknown before.
    pub const fn fill_timeout(v: Version) -> RangeEnd {
        if v.has_fill() {
            RangeEnd::TimedOut
        } else {
            RangeEnd::Unknown
        }
    }
}

/// What a [`FetchReader`] produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchEvent {
    /// An object begins; its payload follows in [`FetchEvent::Payload`] chunks.
    Object(FetchObject),
    /// Payload bytes of the current object; `last` completes it.
    Payload {
        /// The bytes.
        data: Bytes,
        /// True on the final chunk.
        last: bool,
    },
    /// An End of Range marker.
    EndOfRange {
        /// Non-existent or unknown.
        kind: RangeEnd,
        /// The last location the range covers.
        location: Location,
    },
}

/// The "prior object" state both directions keep (draft-19 §11.4.4.1).
#[derive(Clone, Copy, Debug, Default)]
struct Prior {
    /// Group and Object of the prior entry (object or end of range).
    location: Option<Location>,
    /// Subgroup of the last actual object (`None` if it was a datagram or none yet).
    subgroup: Option<u64>,
    /// Priority of the last actual object.
    priority: Option<u8>,
    /// Whether an actual object has been seen.
    any_object: bool,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Header,
    Payload { remaining: u64 },
}

/// Decodes the entries of a fetch stream as bytes arrive, after its FETCH_HEADER. Needs the
/// FETCH's group order, which decides the direction of Group ID deltas.
#[derive(Debug)]
pub struct FetchReader {
    version: Version,
    order: GroupOrder,
    prior: Prior,
    state: State,
}

impl FetchReader {
    /// A reader for a fetch whose groups come in `order`.
    pub fn new(order: GroupOrder, version: Version) -> Self {
        FetchReader {
            version,
            order,
            prior: Prior::default(),
            state: State::Header,
        }
    }

    /// The next event from `buf`, consuming what it decodes; `Ok(None)` if more bytes are needed.
    pub fn next(&mut self, buf: &mut BytesMut) -> Result<Option<FetchEvent>, DecodeError> {
        match self.state {
            State::Header => {
                let mut cur = &buf[..];
                let mut prior = self.prior;
                let ev = match decode_entry(&mut cur, self.version, self.order, &mut prior) {
                    Ok(ev) => ev,
                    Err(DecodeError::Short) => return Ok(None),
                    Err(e) => return Err(e),
                };
                let used = buf.len() - cur.len();
                buf.advance(used);
                self.prior = prior;
                if let FetchEvent::Object(o) = &ev
                    && o.payload_len > 0
                {
                    self.state = State::Payload {
                        remaining: o.payload_len,
                    };
                }
                Ok(Some(ev))
            }
            State::Payload { remaining } => {
                if buf.is_empty() {
                    return Ok(None);
                }
                let n = usize::try_from(remaining)
                    .unwrap_or(usize::MAX)
                    .min(buf.len());
                let data = buf.split_to(n).freeze();
                let left = remaining - n as u64;
                self.state = if left == 0 {
                    State::Header
                } else {
                    State::Payload { remaining: left }
                };
                Ok(Some(FetchEvent::Payload {
                    data,
                    last: left == 0,
                }))
            }
        }
    }

    /// Checks the stream may end here: a FIN inside an entry is a PROTOCOL_VIOLATION.
    pub fn finish(&self, buf: &[u8]) -> Result<(), DecodeError> {
        match self.state {
            State::Header if buf.is_empty() => Ok(()),
            _ => Err(DecodeError::ProtocolViolation(
                "fetch stream ended in the middle of an object",
            )),
        }
    }
}

fn violation(what: &'static str) -> DecodeError {
    DecodeError::ProtocolViolation(what)
}

fn decode_entry(
    cur: &mut &[u8],
    v: Version,
    order: GroupOrder,
    prior: &mut Prior,
) -> Result<FetchEvent, DecodeError> {
    let flags = cur.get_varint(v)?;
    let range_end = match flags {
        END_OF_NON_EXISTENT_RANGE => Some(RangeEnd::NonExistent),
        END_OF_UNKNOWN_RANGE => Some(RangeEnd::Unknown),
        END_OF_TIMED_OUT_RANGE if v.has_fill() => Some(RangeEnd::TimedOut),
        f if f < 0x80 => None,
        // draft-19 §11.4.4: any other value is a PROTOCOL_VIOLATION.
        f => {
            return Err(DecodeError::InvalidValue {
                field: "fetch serialization flags",
                value: f,
            });
        }
    };
    // End of Range markers carry a Group ID Delta and an Object ID Delta (§11.4.4.2).
    let flags = if range_end.is_some() {
        GROUP_DELTA | OBJECT_DELTA
    } else {
        flags
    };
    let first = prior.location.is_none();

    let group = if flags & GROUP_DELTA != 0 {
        let delta = cur.get_varint(v)?;
        match prior.location {
            None => delta,
            Some(p) => match order {
                GroupOrder::Ascending => p.group.checked_add(delta).and_then(|g| g.checked_add(1)),
                GroupOrder::Descending => p.group.checked_sub(delta).and_then(|g| g.checked_sub(1)),
            }
            .ok_or(DecodeError::Overflow("fetch group ID"))?,
        }
    } else {
        // draft-19 §11.4.4.1: the first object may not reference a prior object.
        prior
            .location
            .ok_or(violation("first fetch object refers to a prior group"))?
            .group
    };

    let subgroup = if range_end.is_some() || flags & DATAGRAM != 0 {
        None
    } else {
        match flags & SUBGROUP_MASK {
            0 => Some(0),
            1 => Some(
                prior
                    .subgroup
                    .ok_or(violation("no prior subgroup to refer to"))?,
            ),
            2 => Some(
                prior
                    .subgroup
                    .ok_or(violation("no prior subgroup to refer to"))?
                    .checked_add(1)
                    .ok_or(DecodeError::Overflow("subgroup ID"))?,
            ),
            _ => Some(cur.get_varint(v)?),
        }
    };

    let object = if flags & OBJECT_DELTA != 0 {
        let delta = cur.get_varint(v)?;
        match prior.location {
            Some(p) if flags & GROUP_DELTA == 0 => p
                .object
                .checked_add(delta)
                .ok_or(DecodeError::Overflow("fetch object ID"))?,
            _ => delta,
        }
    } else {
        prior
            .location
            .ok_or(violation("first fetch object refers to a prior object"))?
            .object
            .checked_add(1)
            .ok_or(DecodeError::Overflow("fetch object ID"))?
    };
    let location = Location::new(group, object);

    if let Some(kind) = range_end {
        if first && flags & (GROUP_DELTA | OBJECT_DELTA) != GROUP_DELTA | OBJECT_DELTA {
            return Err(violation("first entry must carry absolute IDs"));
        }
        prior.location = Some(location);
        return Ok(FetchEvent::EndOfRange { kind, location });
    }

    let priority = if flags & PRIORITY != 0 {
        cur.get_byte()?
    } else {
        prior
            .priority
            .ok_or(violation("no prior priority to refer to"))?
    };
    let properties = if flags & PROPERTIES != 0 {
        Properties::decode_prefixed(cur, v)?
    } else {
        Properties::new()
    };
    let payload_len = cur.get_varint(v)?;

    prior.location = Some(location);
    prior.subgroup = subgroup;
    prior.priority = Some(priority);
    prior.any_object = true;
    Ok(FetchEvent::Object(FetchObject {
        location,
        subgroup,
        priority,
        properties,
        payload_len,
    }))
}

/// Encodes the entries of one fetch stream, choosing the shortest serialization flags.
///
/// ```
/// use bytes::BytesMut;
/// use moq_core::{Version, Location, GroupOrder};
/// use moq_core::data::{FetchWriter, FetchReader, FetchObject, FetchEvent};
/// let v = Version::Draft19;
/// let mut w = FetchWriter::new(GroupOrder::Ascending, v);
/// let mut buf = Vec::new();
/// for (g, o) in [(0, 0), (0, 1), (2, 0)] {
///     let obj = FetchObject { location: Location::new(g, o), subgroup: Some(0), priority: 5, payload_len: 1, ..Default::default() };
///     w.encode_object(&mut buf, &obj).unwrap();
///     buf.push(b'x');
/// }
/// let mut r = FetchReader::new(GroupOrder::Ascending, v);
/// let mut bytes = BytesMut::from(&buf[..]);
/// let mut seen = Vec::new();
/// while let Some(ev) = r.next(&mut bytes).unwrap() {
///     if let FetchEvent::Object(o) = ev { seen.push(o.location); }
/// }
/// assert_eq!(seen, [Location::new(0, 0), Location::new(0, 1), Location::new(2, 0)]);
/// ```
#[derive(Debug)]
pub struct FetchWriter {
    version: Version,
    order: GroupOrder,
    prior: Prior,
}

impl FetchWriter {
    /// A writer for a fetch whose groups go out in `order`.
    pub fn new(order: GroupOrder, version: Version) -> Self {
        FetchWriter {
            version,
            order,
            prior: Prior::default(),
        }
    }

    /// The flags and fields that place `loc` after the prior entry: `(flags, group, object)`
    /// where `group` / `object` are the Group ID Delta and Object ID Delta to write, if any.
    fn location_fields(
        &self,
        loc: Location,
    ) -> Result<(u64, Option<u64>, Option<u64>), EncodeError> {
        let bad = || EncodeError::Invalid {
            field: "fetch stream",
            reason: "locations must follow the group order, objects ascending within a group",
        };
        Ok(match self.prior.location {
            None => (
                GROUP_DELTA | OBJECT_DELTA,
                Some(loc.group),
                Some(loc.object),
            ),
            Some(p) if p.group == loc.group => {
                if loc.object <= p.object {
                    return Err(bad());
                }
                if loc.object == p.object + 1 {
                    (0, None, None)
                } else {
                    (OBJECT_DELTA, None, Some(loc.object - p.object))
                }
            }
            Some(p) => {
                let delta = match self.order {
                    GroupOrder::Ascending if loc.group > p.group => loc.group - p.group - 1,
                    GroupOrder::Descending if loc.group < p.group => p.group - loc.group - 1,
                    _ => return Err(bad()),
                };
                (GROUP_DELTA | OBJECT_DELTA, Some(delta), Some(loc.object))
            }
        })
    }

    /// Writes one object's fields; the caller writes `payload_len` payload bytes next.
    pub fn encode_object<B: BufMut>(
        &mut self,
        buf: &mut B,
        obj: &FetchObject,
    ) -> Result<(), EncodeError> {
        let v = self.version;
        let (mut flags, group_field, object_field) = self.location_fields(obj.location)?;
        let subgroup_field = match obj.subgroup {
            None => {
                flags |= DATAGRAM;
                None
            }
            Some(0) => None,
            Some(s) if self.prior.subgroup == Some(s) => {
                flags |= 1;
                None
            }
            Some(s) if self.prior.subgroup.and_then(|p| p.checked_add(1)) == Some(s) => {
                flags |= 2;
                None
            }
            Some(s) => {
                flags |= 3;
                Some(s)
            }
        };
        if self.prior.priority != Some(obj.priority) {
            flags |= PRIORITY;
        }
        if !obj.properties.is_empty() {
            flags |= PROPERTIES;
        }
        buf.put_varint(flags, v);
        if let Some(g) = group_field {
            buf.put_varint(g, v);
        }
        if let Some(s) = subgroup_field {
            buf.put_varint(s, v);
        }
        if let Some(o) = object_field {
            buf.put_varint(o, v);
        }
        if flags & PRIORITY != 0 {
            buf.put_u8(obj.priority);
        }
        if flags & PROPERTIES != 0 {
            obj.properties.encode_prefixed(buf, v)?;
        }
        buf.put_varint(obj.payload_len, v);
        self.prior.location = Some(obj.location);
        self.prior.subgroup = obj.subgroup;
        self.prior.priority = Some(obj.priority);
        self.prior.any_object = true;
        Ok(())
    }

    /// Writes an End of Range marker covering everything after the prior entry up to and
    /// including `location`.
    ///
    /// A marker always carries a Group ID Delta (draft-19 §11.4.4.2), which cannot name the
    /// prior entry's own group; such a marker is refused: end ranges on another group.
    pub fn encode_end_of_range<B: BufMut>(
        &mut self,
        buf: &mut B,
        kind: RangeEnd,
        location: Location,
    ) -> Result<(), EncodeError> {
        let v = self.version;
        let (flags, group, object) = self.location_fields(location)?;
        let (Some(group), Some(object)) = (group, object) else {
            return Err(EncodeError::Invalid {
                field: "end of range",
                reason: "an end of range in the prior entry's group cannot be encoded",
            });
        };
        debug_assert_eq!(flags, GROUP_DELTA | OBJECT_DELTA);
        let flags = kind.flags(v).ok_or(EncodeError::Invalid {
            field: "end of range",
            reason: "End of Timed-Out Range exists from draft-20",
        })?;
        buf.put_varint(flags, v);
        buf.put_varint(group, v);
        buf.put_varint(object, v);
        self.prior.location = Some(location);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version::Draft19;

    fn read_all(order: GroupOrder, bytes: &[u8]) -> Result<Vec<FetchEvent>, DecodeError> {
        let mut r = FetchReader::new(order, V);
        let mut buf = BytesMut::from(bytes);
        let mut out = Vec::new();
        while let Some(ev) = r.next(&mut buf)? {
            out.push(ev);
        }
        r.finish(&buf)?;
        Ok(out)
    }

    fn obj(g: u64, o: u64, sg: Option<u64>, p: u8) -> FetchObject {
        FetchObject {
            location: Location::new(g, o),
            subgroup: sg,
            priority: p,
            properties: Properties::new(),
            payload_len: 0,
        }
    }

    #[test]
    fn round_trip_both_orders() {
        for order in [GroupOrder::Ascending, GroupOrder::Descending] {
            let groups: Vec<u64> = match order {
                GroupOrder::Ascending => vec![1, 2, 5],
                GroupOrder::Descending => vec![5, 2, 1],
            };
            let mut objs = Vec::new();
            for g in &groups {
                objs.push(obj(*g, 0, Some(0), 1));
                objs.push(obj(*g, 1, Some(0), 1));
                objs.push(obj(*g, 3, Some(1), 2));
                objs.push(obj(*g, 4, None, 2));
                objs.push(obj(*g, 9, Some(7), 2));
            }
            let mut w = FetchWriter::new(order, V);
            let mut buf = Vec::new();
            FetchHeader { request_id: 4 }.encode(&mut buf, V).unwrap();
            for o in &objs {
                w.encode_object(&mut buf, o).unwrap();
            }
            let mut b = &buf[..];
            assert_eq!(FetchHeader::decode(&mut b, V).unwrap().request_id, 4);
            let events = read_all(order, b).unwrap();
            let got: Vec<FetchObject> = events
                .into_iter()
                .filter_map(|e| match e {
                    FetchEvent::Object(o) => Some(o),
                    _ => None,
                })
                .collect();
            assert_eq!(got, objs);
        }
    }

    #[test]
    fn end_of_range_markers() {
        let mut w = FetchWriter::new(GroupOrder::Ascending, V);
        let mut buf = Vec::new();
        w.encode_object(&mut buf, &obj(1, 0, Some(0), 3)).unwrap();
        w.encode_end_of_range(&mut buf, RangeEnd::Unknown, Location::new(3, 4))
            .unwrap();
        w.encode_object(&mut buf, &obj(4, 0, Some(0), 3)).unwrap();
        let ev = read_all(GroupOrder::Ascending, &buf).unwrap();
        assert_eq!(
            ev[1],
            FetchEvent::EndOfRange {
                kind: RangeEnd::Unknown,
                location: Location::new(3, 4)
            }
        );
        assert!(
            matches!(&ev[2], FetchEvent::Object(o) if o.location == Location::new(4, 0) && o.priority == 3)
        );
        // As the first entry.
        let mut w = FetchWriter::new(GroupOrder::Ascending, V);
        let mut buf = Vec::new();
        w.encode_end_of_range(&mut buf, RangeEnd::NonExistent, Location::new(0, 7))
            .unwrap();
        assert_eq!(buf[..2], [0x80, 0x8C]);
        // An object after it may not refer to a prior subgroup or priority.
        buf.extend_from_slice(&[0x01, 0x00]); // flags: subgroup = prior, no priority
        assert!(matches!(
            read_all(GroupOrder::Ascending, &buf),
            Err(DecodeError::ProtocolViolation(_))
        ));
    }

    #[test]
    fn rejections() {
        // First object without absolute IDs.
        assert!(matches!(
            read_all(GroupOrder::Ascending, &[0x10, 0x05, 0x00]),
            Err(DecodeError::ProtocolViolation(_))
        ));
        // Unknown flag value >= 128.
        assert!(matches!(
            read_all(GroupOrder::Ascending, &[0x80, 0x80]),
            Err(DecodeError::InvalidValue { .. })
        ));
        // Descending below zero: first at group 0, then a group delta.
        let bad = [0x1C, 0x00, 0x00, 0x01, 0x00, 0x08, 0x00, 0x00];
        assert!(matches!(
            read_all(GroupOrder::Descending, &bad),
            Err(DecodeError::Overflow(_))
        ));
        // FIN mid-payload.
        assert!(read_all(GroupOrder::Ascending, &[0x1C, 0x00, 0x00, 0x01, 0x02, b'a']).is_err());
    }
}
