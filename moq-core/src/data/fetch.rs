//! Fetch streams: FETCH_HEADER and the serialized fetch objects (draft-19 §11.4.4; draft-14
//! and draft-16 §10.4.4).
//!
//! How a fetch object is written depends on the version:
//!
//! - draft-14: Group ID, Subgroup ID, Object ID, Publisher Priority, Extension Headers Length
//!   and headers, Payload Length, and an Object Status when that length is 0; all explicit.
//! - draft-15: one byte of Serialization Flags, then only the fields that differ from the prior
//!   object (absolute IDs), and the Object Status as in draft-14.
//! - draft-16 (and 17): the flags are a varint that may also say DATAGRAM (0x40) or be an End
//!   of Range (0x8C, 0x10C); no Object Status.
//! - draft-18 on: Group ID and Object ID are deltas from the prior entry, in the FETCH's group
//!   order; draft-20 adds End of Timed-Out Range (0x20C).

use bytes::{Buf, BufMut, Bytes};

use super::{DecodeBuf, FETCH_STREAM_TYPE, ObjectStatus, WireStatus, expect_type, fits, put_int};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError, QuicVarInt};
use crate::types::kvp::Properties;
use crate::types::location::{GroupOrder, Location};

const SUBGROUP_MASK: u64 = 0x03;
/// The Object ID field is present: absolute until draft-17, a delta from draft-18.
const OBJECT_FIELD: u64 = 0x04;
/// The Group ID field is present: absolute until draft-17, a delta from draft-18.
const GROUP_FIELD: u64 = 0x08;
const PRIORITY: u64 = 0x10;
const PROPERTIES: u64 = 0x20;
/// From draft-16.
const DATAGRAM: u64 = 0x40;
/// From draft-16.
const END_OF_NON_EXISTENT_RANGE: u64 = 0x8C;
/// From draft-16.
const END_OF_UNKNOWN_RANGE: u64 = 0x10C;
/// draft-21 §11.4.1.2 (from draft-20).
const END_OF_TIMED_OUT_RANGE: u64 = 0x20C;

/// The flag bits a fetch object may set under `v` (from draft-15): the subgroup mode and the
/// presence bits (0x3F), and DATAGRAM (0x40) from draft-16.
const fn defined_flags(v: Version) -> u64 {
    if v.fetch_end_of_range() { 0x7F } else { 0x3F }
}

/// FETCH_HEADER: the start of a fetch response stream (draft-19 §11.4.4; draft-14 §10.4.4,
/// the same in every version).
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

    /// Writes the header, stream type included. Fails, writing nothing, if the Request ID does
    /// not fit the version's integers (2^62-1 until draft-16).
    pub fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        fits(self.request_id, v, "request ID")?;
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
    ///
    /// Until draft-15 a fetch object always has a Subgroup ID, the Object ID for a datagram
    /// (draft-14 §10.4.4): `None` is written so, and is never read back.
    pub subgroup: Option<u64>,
    /// The Publisher Priority.
    pub priority: u8,
    /// Object Properties.
    pub properties: Properties,
    /// Payload length in bytes.
    pub payload_len: u64,
}

/// Which End of Range marker (draft-19 §11.4.4.2, from draft-16).
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
    /// The serialization flags value, if the marker exists in `v`: 0x8C and 0x10C from
    /// draft-16 (draft-16 §10.4.4), 0x20C from draft-20.
    pub const fn flags(self, v: Version) -> Option<u64> {
        match self {
            RangeEnd::NonExistent if v.fetch_end_of_range() => Some(END_OF_NON_EXISTENT_RANGE),
            RangeEnd::Unknown if v.fetch_end_of_range() => Some(END_OF_UNKNOWN_RANGE),
            RangeEnd::TimedOut if v.has_fill() => Some(END_OF_TIMED_OUT_RANGE),
            _ => None,
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
    /// An End of Range marker (from draft-16).
    EndOfRange {
        /// Non-existent or unknown.
        kind: RangeEnd,
        /// The last location the range covers.
        location: Location,
    },
}

/// The "prior object" state both directions keep (draft-19 §11.4.4.1, draft-16 §10.4.4.1).
#[derive(Clone, Copy, Debug, Default)]
struct Prior {
    /// Group and Object of the prior entry (object or end of range).
    location: Option<Location>,
    /// Subgroup of the last actual object (`None` if it was a datagram or none yet).
    subgroup: Option<u64>,
    /// Priority of the last actual object.
    priority: Option<u8>,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Header,
    Payload { remaining: u64 },
}

/// Decodes the entries of a fetch stream as bytes arrive, after its FETCH_HEADER. Needs the
/// FETCH's group order, which decides the direction of Group ID deltas (from draft-18).
///
/// Until draft-15 a fetch object with Payload Length 0 carries an Object Status (draft-14
/// §10.4.4). Draft-14 says a gap in a fetch stream's locations means the objects in it do not
/// exist (§9.16.3), and from draft-16 a fetch has no Object Status at all, so an
/// object whose status is not Normal (Object Does Not Exist, End of Group, End of Track) is
/// consumed without an event, as if it had not been sent.
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
    pub fn next(&mut self, buf: &mut impl DecodeBuf) -> Result<Option<FetchEvent>, DecodeError> {
        loop {
            match self.state {
                State::Header => {
                    let (v, order) = (self.version, self.order);
                    let decoded = buf.decode_front(|cur| {
                        let mut prior = self.prior;
                        decode_entry(cur, v, order, &mut prior).map(|ev| (ev, prior))
                    })?;
                    let Some((ev, prior)) = decoded else {
                        return Ok(None);
                    };
                    self.prior = prior;
                    let Some(ev) = ev else {
                        continue;
                    };
                    if let FetchEvent::Object(o) = &ev
                        && o.payload_len > 0
                    {
                        self.state = State::Payload {
                            remaining: o.payload_len,
                        };
                    }
                    return Ok(Some(ev));
                }
                State::Payload { remaining } => {
                    let max = usize::try_from(remaining).unwrap_or(usize::MAX);
                    let Some(data) = buf.take_front(max) else {
                        return Ok(None);
                    };
                    let left = remaining.saturating_sub(data.len() as u64);
                    self.state = if left == 0 {
                        State::Header
                    } else {
                        State::Payload { remaining: left }
                    };
                    return Ok(Some(FetchEvent::Payload {
                        data,
                        last: left == 0,
                    }));
                }
            }
        }
    }

    /// Checks the stream may end here: a FIN inside an entry is a PROTOCOL_VIOLATION
    /// (draft-19 §11.4, draft-14 §10.4: the session SHOULD be terminated).
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

/// One entry; `None` for an object whose status is not Normal (drafts 14-15), consumed.
fn decode_entry(
    cur: &mut &[u8],
    v: Version,
    order: GroupOrder,
    prior: &mut Prior,
) -> Result<Option<FetchEvent>, DecodeError> {
    if !v.fetch_serialization_flags() {
        return decode_explicit(cur, v, prior);
    }
    // draft-16 §10.4.4: Serialization Flags (i); NOTES B.2: one byte in draft-15.
    let flags = if v.fetch_end_of_range() {
        cur.get_varint(v)?
    } else {
        u64::from(cur.get_byte()?)
    };
    let range_end = match flags {
        END_OF_NON_EXISTENT_RANGE if v.fetch_end_of_range() => Some(RangeEnd::NonExistent),
        END_OF_UNKNOWN_RANGE if v.fetch_end_of_range() => Some(RangeEnd::Unknown),
        END_OF_TIMED_OUT_RANGE if v.has_fill() => Some(RangeEnd::TimedOut),
        f if f & !defined_flags(v) == 0 => None,
        // draft-19 §11.4.4, draft-16 §10.4.4: any other value is a PROTOCOL_VIOLATION.
        f => {
            return Err(DecodeError::InvalidValue {
                field: "fetch serialization flags",
                value: f,
            });
        }
    };
    // End of Range markers carry a Group ID and an Object ID (draft-19 §11.4.4.2, draft-16
    // §10.4.4.2).
    let flags = if range_end.is_some() {
        GROUP_FIELD | OBJECT_FIELD
    } else {
        flags
    };

    let group = if flags & GROUP_FIELD != 0 {
        let field = cur.get_varint(v)?;
        match prior.location {
            // draft-19 §11.4.4.1: a Group ID Delta, in the group order.
            Some(p) if v.fetch_id_deltas() => match order {
                GroupOrder::Ascending => p.group.checked_add(field).and_then(|g| g.checked_add(1)),
                GroupOrder::Descending => p.group.checked_sub(field).and_then(|g| g.checked_sub(1)),
            }
            .ok_or(DecodeError::Overflow("fetch group ID"))?,
            // The first entry, or draft-16 §10.4.4.1: the Group ID itself.
            _ => field,
        }
    } else {
        // draft-19 §11.4.4.1, draft-16 §10.4.4.1: the first object may not reference a prior
        // object (MUST close the session with a PROTOCOL_VIOLATION).
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

    let object = if flags & OBJECT_FIELD != 0 {
        let field = cur.get_varint(v)?;
        match prior.location {
            // draft-19 §11.4.4.1: an Object ID Delta within the prior entry's group.
            Some(p) if v.fetch_id_deltas() && flags & GROUP_FIELD == 0 => p
                .object
                .checked_add(field)
                .ok_or(DecodeError::Overflow("fetch object ID"))?,
            // A new group or the first entry; draft-16 §10.4.4.1: the Object ID itself.
            _ => field,
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
        prior.location = Some(location);
        // The end of a whole group, which QUIC varints write as their largest value (see
        // FetchWriter::encode_end_of_range).
        let location = if v.quic_varints() && object == QuicVarInt::MAX {
            Location::new(group, u64::MAX)
        } else {
            location
        };
        return Ok(Some(FetchEvent::EndOfRange { kind, location }));
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
    // NOTES B.2-B.3: draft-15 keeps draft-14's Object Status after a zero Payload Length;
    // draft-16 removed it.
    let status = if payload_len == 0 && v.fetch_object_status() {
        WireStatus::read(cur, v)?
    } else {
        WireStatus::Known(ObjectStatus::Normal)
    };
    // draft-15 (as draft-16 §10.2.1.2): properties only on a Normal object.
    status.check_properties(
        !properties.is_empty(),
        v,
        "properties on a fetch object whose status is not Normal",
    )?;

    // A status object is a serialized object: the next one may refer to it.
    prior.location = Some(location);
    prior.subgroup = subgroup;
    prior.priority = Some(priority);
    if status != WireStatus::Known(ObjectStatus::Normal) {
        return Ok(None);
    }
    Ok(Some(FetchEvent::Object(FetchObject {
        location,
        subgroup,
        priority,
        properties,
        payload_len,
    })))
}

/// A draft-14 fetch object (§10.4.4): every field explicit.
fn decode_explicit(
    cur: &mut &[u8],
    v: Version,
    prior: &mut Prior,
) -> Result<Option<FetchEvent>, DecodeError> {
    let group = cur.get_varint(v)?;
    let subgroup = cur.get_varint(v)?;
    let object = cur.get_varint(v)?;
    let priority = cur.get_byte()?;
    // draft-14 §10.4.4: Extension Headers Length is always present.
    let properties = Properties::decode_prefixed(cur, v)?;
    let payload_len = cur.get_varint(v)?;
    // draft-14 §10.4.4: the Object Status field is only sent if the Payload Length is zero.
    let status = if payload_len == 0 {
        WireStatus::read(cur, v)?
    } else {
        WireStatus::Known(ObjectStatus::Normal)
    };
    // draft-14 §10.2.1.2: extension headers on an Object Does Not Exist MUST close the
    // session with a PROTOCOL_VIOLATION.
    status.check_properties(
        !properties.is_empty(),
        v,
        "properties on a fetch object whose status is not Normal",
    )?;
    let location = Location::new(group, object);
    prior.location = Some(location);
    prior.subgroup = Some(subgroup);
    prior.priority = Some(priority);
    if status != WireStatus::Known(ObjectStatus::Normal) {
        return Ok(None);
    }
    Ok(Some(FetchEvent::Object(FetchObject {
        location,
        subgroup: Some(subgroup),
        priority,
        properties,
        payload_len,
    })))
}

/// Encodes the entries of one fetch stream, choosing the shortest serialization flags.
///
/// Entries must come in the FETCH's group order, objects ascending within a group, in every
/// version. An End of Range (from draft-16) that a version cannot write: Non-Existent is left
/// out before draft-16, where a gap in a fetch stream already says the objects do not exist
/// (draft-14 §9.16.3); Unknown and Timed-Out fail with [`EncodeError::NotInVersion`].
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
    /// What the next entry may refer to.
    prior: Prior,
    /// The location of the last entry given, written or not: the next must come after it.
    last: Option<Location>,
}

impl FetchWriter {
    /// A writer for a fetch whose groups go out in `order`.
    pub fn new(order: GroupOrder, version: Version) -> Self {
        FetchWriter {
            version,
            order,
            prior: Prior::default(),
            last: None,
        }
    }

    /// Checks `loc` comes after the last entry: groups in the fetch's order, objects ascending
    /// within a group (draft-19 §10.12.3, draft-14 §9.16.3).
    fn check_order(&self, loc: Location) -> Result<(), EncodeError> {
        let ok = match self.last {
            None => true,
            Some(p) if p.group == loc.group => loc.object > p.object,
            Some(p) => match self.order {
                GroupOrder::Ascending => loc.group > p.group,
                GroupOrder::Descending => loc.group < p.group,
            },
        };
        if ok {
            Ok(())
        } else {
            Err(EncodeError::Invalid {
                field: "fetch stream",
                reason: "locations must follow the group order, objects ascending within a group",
            })
        }
    }

    /// The flags and fields that place `loc` after the prior entry: `(flags, group, object)`
    /// where `group` / `object` are the Group ID and Object ID fields to write, if any (deltas
    /// from draft-18). `loc` has passed [`FetchWriter::check_order`].
    fn location_fields(&self, loc: Location) -> (u64, Option<u64>, Option<u64>) {
        let v = self.version;
        match self.prior.location {
            None => (
                GROUP_FIELD | OBJECT_FIELD,
                Some(loc.group),
                Some(loc.object),
            ),
            Some(p) if p.group == loc.group => {
                if p.object.checked_add(1) == Some(loc.object) {
                    (0, None, None)
                } else if v.fetch_id_deltas() {
                    (OBJECT_FIELD, None, Some(loc.object - p.object))
                } else {
                    (OBJECT_FIELD, None, Some(loc.object))
                }
            }
            // Another group: its ID, and the Object ID absolute in every version (draft-16
            // would allow leaving out Object ID = prior + 1; it is written all the same).
            Some(p) => {
                let group = if !v.fetch_id_deltas() {
                    loc.group
                } else if loc.group > p.group {
                    loc.group - p.group - 1
                } else {
                    p.group - loc.group - 1
                };
                (GROUP_FIELD | OBJECT_FIELD, Some(group), Some(loc.object))
            }
        }
    }

    /// Writes one object's fields; the caller writes `payload_len` payload bytes next. Fails,
    /// writing nothing, for an object out of order or an ID that does not fit the version's
    /// integers (2^62-1 until draft-16).
    pub fn encode_object<B: BufMut>(
        &mut self,
        buf: &mut B,
        obj: &FetchObject,
    ) -> Result<(), EncodeError> {
        let v = self.version;
        self.check_order(obj.location)?;
        // draft-14 §10.4.4: "The Subgroup ID field of an object with a Forwarding Preference
        // of Datagram is set to the Object ID"; draft-16 has the DATAGRAM flag instead.
        let subgroup = match obj.subgroup {
            None if !v.fetch_end_of_range() => Some(obj.location.object),
            s => s,
        };
        fits(obj.location.group, v, "group ID")?;
        fits(obj.location.object, v, "object ID")?;
        fits(subgroup.unwrap_or(0), v, "subgroup ID")?;
        fits(obj.payload_len, v, "payload length")?;
        let props = if obj.properties.is_empty() {
            None
        } else {
            let mut tmp = Vec::new();
            obj.properties.encode_prefixed(&mut tmp, v)?;
            Some(tmp)
        };

        if !v.fetch_serialization_flags() {
            // draft-14 §10.4.4: every field, and an Extension Headers Length even if 0.
            buf.put_varint(obj.location.group, v);
            buf.put_varint(subgroup.unwrap_or(0), v);
            buf.put_varint(obj.location.object, v);
            buf.put_u8(obj.priority);
            match &props {
                Some(p) => buf.put_slice(p),
                None => buf.put_varint(0, v),
            }
        } else {
            let (mut flags, group_field, object_field) = self.location_fields(obj.location);
            let subgroup_field = match subgroup {
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
            if props.is_some() {
                flags |= PROPERTIES;
            }
            if v.fetch_end_of_range() {
                buf.put_varint(flags, v);
            } else {
                // NOTES B.2: one byte in draft-15; no bit above 0x20 is set here.
                buf.put_u8(flags as u8);
            }
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
            if let Some(p) = &props {
                buf.put_slice(p);
            }
        }
        buf.put_varint(obj.payload_len, v);
        if obj.payload_len == 0 && v.fetch_object_status() {
            // draft-14 §10.2.1.1: "Zero-length objects explicitly encode the Normal status."
            buf.put_varint(ObjectStatus::Normal.value(), v);
        }
        self.prior.location = Some(obj.location);
        self.prior.subgroup = subgroup;
        self.prior.priority = Some(obj.priority);
        self.last = Some(obj.location);
        Ok(())
    }

    /// Writes an End of Range marker covering everything after the prior entry up to and
    /// including `location`.
    ///
    /// From draft-18 a marker carries a Group ID Delta (draft-19 §11.4.4.2), which cannot
    /// name the prior entry's own group; such a marker is refused: end ranges on another
    /// group. Before draft-16 there are no markers: a Non-Existent range is left out (nothing
    /// is written; a gap already says so, draft-14 §9.16.3), an Unknown one fails. Timed-Out
    /// exists from draft-20.
    pub fn encode_end_of_range<B: BufMut>(
        &mut self,
        buf: &mut B,
        kind: RangeEnd,
        location: Location,
    ) -> Result<(), EncodeError> {
        let v = self.version;
        self.check_order(location)?;
        let Some(flags) = kind.flags(v) else {
            return match kind {
                RangeEnd::NonExistent => {
                    self.last = Some(location);
                    Ok(())
                }
                RangeEnd::Unknown => Err(EncodeError::NotInVersion("End of Unknown Range", v)),
                RangeEnd::TimedOut => Err(EncodeError::NotInVersion("End of Timed-Out Range", v)),
            };
        };
        let (group, object) = if v.fetch_id_deltas() {
            let (fl, group, object) = self.location_fields(location);
            let (Some(group), Some(object)) = (group, object) else {
                return Err(EncodeError::Invalid {
                    field: "end of range",
                    reason: "an end of range in the prior entry's group cannot be encoded",
                });
            };
            debug_assert_eq!(fl, GROUP_FIELD | OBJECT_FIELD);
            (group, object)
        } else {
            // draft-16 §10.4.4.2: the Group ID and Object ID fields. A range to the end of a
            // group (Object ID 2^64-1) ends at the largest Object ID a QUIC varint can name.
            let object = if v.quic_varints() && location.object == u64::MAX {
                QuicVarInt::MAX
            } else {
                location.object
            };
            (location.group, object)
        };
        fits(group, v, "group ID")?;
        fits(object, v, "object ID")?;
        buf.put_varint(flags, v);
        put_int(buf, group, v, "group ID")?;
        put_int(buf, object, v, "object ID")?;
        self.last = Some(location);
        if v.fetch_id_deltas() {
            self.prior.location = Some(location);
        } else {
            // draft-16 leaves open whether a marker is the "prior Object" the next object's
            // flags refer to; the next object is written in full, as the first would be.
            self.prior = Prior::default();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

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
