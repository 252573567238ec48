//! Decoding a fetch stream's entries as bytes arrive.

use super::super::{DecodeBuf, ObjectStatus, WireStatus};
use super::entry::{
    DATAGRAM, END_OF_NON_EXISTENT_RANGE, END_OF_TIMED_OUT_RANGE, END_OF_UNKNOWN_RANGE, FetchEvent,
    FetchObject, GROUP_FIELD, OBJECT_FIELD, PRIORITY, PROPERTIES, Prior, RangeEnd, SUBGROUP_MASK,
    defined_flags,
};
use crate::Version;
use crate::coding::{BufExt, DecodeError, QuicVarInt};
use crate::types::kvp::Properties;
use crate::types::location::{GroupOrder, Location};

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
                    let Some((data, left)) = buf.take_payload(remaining) else {
                        return Ok(None);
                    };
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
        match prior.location() {
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
            .location()
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
                    .subgroup()
                    .ok_or(violation("no prior subgroup to refer to"))?,
            ),
            2 => Some(
                prior
                    .subgroup()
                    .ok_or(violation("no prior subgroup to refer to"))?
                    .checked_add(1)
                    .ok_or(DecodeError::Overflow("subgroup ID"))?,
            ),
            _ => Some(cur.get_varint(v)?),
        }
    };

    let object = if flags & OBJECT_FIELD != 0 {
        let field = cur.get_varint(v)?;
        match prior.location() {
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
            .location()
            .ok_or(violation("first fetch object refers to a prior object"))?
            .object
            .checked_add(1)
            .ok_or(DecodeError::Overflow("fetch object ID"))?
    };
    let location = Location::new(group, object);

    if let Some(kind) = range_end {
        prior.range_end(location);
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
            .priority()
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
    prior.object(location, subgroup, priority);
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
    prior.object(location, Some(subgroup), priority);
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
