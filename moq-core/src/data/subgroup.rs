//! Subgroup streams: SUBGROUP_HEADER and its objects (draft-19 §11.4.2; draft-14 and
//! draft-16 §10.4.2).

use bytes::{Buf, BufMut, Bytes};

use super::{DEFAULT_PUBLISHER_PRIORITY, DecodeBuf, ObjectStatus, WireStatus, fits, put_int};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};
use crate::types::kvp::Properties;

const PROPERTIES: u64 = 0x01;
const END_OF_GROUP: u64 = 0x08;
const DEFAULT_PRIORITY: u64 = 0x20;
const FIRST_OBJECT: u64 = 0x40;

/// The flag bits a SUBGROUP_HEADER type may have under `v`, with the always-set 0x10:
/// PROPERTIES, SUBGROUP_ID_MODE and END_OF_GROUP (0x0F) in every version (draft-14 §10.4.2),
/// DEFAULT_PRIORITY (0x20) from draft-15, FIRST_OBJECT (0x40) from draft-18.
pub(crate) const fn type_flags(v: Version) -> u64 {
    let mut flags = 0x0F;
    if v.has_default_priority() {
        flags |= DEFAULT_PRIORITY;
    }
    if v.has_first_object_bit() {
        flags |= FIRST_OBJECT;
    }
    flags
}

/// How a subgroup stream names its Subgroup ID (the SUBGROUP_ID_MODE bits, mask 0x06).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SubgroupId {
    /// Mode 0b00: the Subgroup ID is 0 and not on the wire.
    Zero,
    /// Mode 0b01: the Subgroup ID is the Object ID of the first object on the stream.
    FirstObject,
    /// Mode 0b10: the Subgroup ID is in the header.
    Explicit(u64),
}

/// SUBGROUP_HEADER (draft-19 §11.4.2): the header of a subgroup stream.
///
/// ```
/// use moq_core::{Version, data::{SubgroupHeader, SubgroupId}};
/// // The first example of draft-19 §11.6: type 0x14, alias 2, group 0, subgroup 0, priority 0.
/// let h = SubgroupHeader { track_alias: 2, group: 0, subgroup: SubgroupId::Explicit(0),
///     priority: Some(0), properties: false, end_of_group: false, first_object: false };
/// let mut buf = Vec::new();
/// h.encode(&mut buf, Version::Draft19).unwrap();
/// assert_eq!(buf, [0x14, 0x02, 0x00, 0x00, 0x00]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SubgroupHeader {
    /// The Track Alias of the subscription.
    pub track_alias: u64,
    /// The Group ID.
    pub group: u64,
    /// The Subgroup ID, or how to derive it.
    pub subgroup: SubgroupId,
    /// The Publisher Priority; `None` (DEFAULT_PRIORITY, 0x20) inherits the subscription's.
    /// Draft-14 has no DEFAULT_PRIORITY bit: `None` is written as
    /// [`DEFAULT_PUBLISHER_PRIORITY`](super::DEFAULT_PUBLISHER_PRIORITY), and a header read
    /// under draft-14 always has `Some`.
    pub priority: Option<u8>,
    /// PROPERTIES (0x01): every object carries an Object Properties block.
    pub properties: bool,
    /// END_OF_GROUP (0x08): this subgroup holds the group's largest object.
    pub end_of_group: bool,
    /// FIRST_OBJECT (0x40, from draft-18): the stream starts at the subgroup's first object.
    /// Not written before draft-18, and false in a header read under those versions.
    pub first_object: bool,
}

impl SubgroupHeader {
    /// True if `t` is a valid SUBGROUP_HEADER type in the newest draft: the form 0b0XX1XXXX
    /// without the reserved SUBGROUP_ID_MODE 0b11 (draft-19 §11.4.2).
    /// [`SubgroupHeader::valid_type_in`] answers for a given version.
    pub const fn valid_type(t: u64) -> bool {
        Self::valid_type_in(t, Version::PREFERRED)
    }

    /// True if `t` is a valid SUBGROUP_HEADER type under `v`: 0x10 with any of the version's
    /// flag bits, without SUBGROUP_ID_MODE 0b11. That is 0x10-0x15 and 0x18-0x1D in draft-14
    /// (§10.4.2), also 0x30-0x35 and 0x38-0x3D from draft-15 (draft-16 §10.4.2), and the same
    /// with 0x40 from draft-18 (draft-19 §11.4.2).
    pub const fn valid_type_in(t: u64, v: Version) -> bool {
        t & !type_flags(v) == 0x10 && t & 0x06 != 0x06
    }

    /// The stream type value for this header in the newest draft; see
    /// [`SubgroupHeader::type_code_in`].
    pub fn type_code(&self) -> u8 {
        self.type_code_in(Version::PREFERRED)
    }

    /// The stream type value this header is written with under `v`: DEFAULT_PRIORITY only
    /// from draft-15 (draft-14 writes a priority), FIRST_OBJECT only from draft-18.
    pub fn type_code_in(&self, v: Version) -> u8 {
        let mode = match self.subgroup {
            SubgroupId::Zero => 0,
            SubgroupId::FirstObject => 1,
            SubgroupId::Explicit(_) => 2,
        };
        let mut t = 0x10 | u64::from(self.properties) | (mode << 1);
        if self.end_of_group {
            t |= END_OF_GROUP;
        }
        if self.priority.is_none() {
            t |= DEFAULT_PRIORITY;
        }
        if self.first_object {
            t |= FIRST_OBJECT;
        }
        // The flags the version lacks are not written (0x10 and the low bits always stay).
        (t & (0x10 | type_flags(v))) as u8
    }

    /// Reads the header, type included.
    pub fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        let t = buf.get_varint(v)?;
        // draft-19 §11.4.2, draft-16 §10.4.2: an invalid type MUST close the session with a
        // PROTOCOL_VIOLATION; draft-14 §10: an unknown stream type MUST close the session.
        if !Self::valid_type_in(t, v) {
            return Err(DecodeError::InvalidSubgroupType(t));
        }
        let track_alias = buf.get_varint(v)?;
        let group = buf.get_varint(v)?;
        let subgroup = match (t & 0x06) >> 1 {
            0 => SubgroupId::Zero,
            1 => SubgroupId::FirstObject,
            _ => SubgroupId::Explicit(buf.get_varint(v)?),
        };
        let priority = if t & DEFAULT_PRIORITY != 0 {
            None
        } else {
            Some(buf.get_byte()?)
        };
        Ok(SubgroupHeader {
            track_alias,
            group,
            subgroup,
            priority,
            properties: t & PROPERTIES != 0,
            end_of_group: t & END_OF_GROUP != 0,
            first_object: t & FIRST_OBJECT != 0,
        })
    }

    /// Writes the header, type included. Fails if an ID does not fit the version's integers
    /// (2^62-1 until draft-16), writing nothing.
    pub fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        fits(self.track_alias, v, "track alias")?;
        fits(self.group, v, "group ID")?;
        if let SubgroupId::Explicit(id) = self.subgroup {
            fits(id, v, "subgroup ID")?;
        }
        let t = self.type_code_in(v);
        buf.put_varint(u64::from(t), v);
        buf.put_varint(self.track_alias, v);
        buf.put_varint(self.group, v);
        if let SubgroupId::Explicit(id) = self.subgroup {
            buf.put_varint(id, v);
        }
        if u64::from(t) & DEFAULT_PRIORITY == 0 {
            // draft-14 §10.4.2: Publisher Priority (8) is always present.
            buf.put_u8(self.priority.unwrap_or(DEFAULT_PUBLISHER_PRIORITY));
        }
        Ok(())
    }
}

/// The fields of one object on a subgroup stream, without its payload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubgroupObject {
    /// The Object ID (absolute; the wire carries a delta).
    pub id: u64,
    /// The Object Properties (empty if the header has no PROPERTIES bit).
    pub properties: Properties,
    /// The status; anything but Normal has no payload and no properties.
    pub status: ObjectStatus,
    /// Payload length in bytes.
    pub payload_len: u64,
}

/// What a [`SubgroupReader`] produces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubgroupEvent {
    /// A new object begins; its payload follows in [`SubgroupEvent::Payload`] chunks.
    Object(SubgroupObject),
    /// Payload bytes of the current object; `last` is true on the final chunk (an empty object
    /// produces no chunk).
    Payload {
        /// The bytes.
        data: Bytes,
        /// True if this completes the object.
        last: bool,
    },
}

#[derive(Debug, Clone, Copy)]
enum State {
    Header,
    Payload { remaining: u64 },
}

/// Decodes the objects of a subgroup stream as bytes arrive, after its header.
///
/// ```
/// use bytes::BytesMut;
/// use moq_core::{Version, data::{SubgroupHeader, SubgroupId, SubgroupReader, SubgroupEvent}};
/// let v = Version::Draft19;
/// let mut buf = BytesMut::from(&[0x14u8, 0x02, 0x00, 0x00, 0x00, 0x00, 0x04, b'a', b'b'][..]);
/// let header = SubgroupHeader::decode(&mut buf, v).unwrap();
/// let mut r = SubgroupReader::new(header, v);
/// assert!(matches!(r.next(&mut buf).unwrap(), Some(SubgroupEvent::Object(o)) if o.id == 0 && o.payload_len == 4));
/// assert!(matches!(r.next(&mut buf).unwrap(), Some(SubgroupEvent::Payload { last: false, .. })));
/// assert_eq!(r.next(&mut buf).unwrap(), None); // waiting for "cd"
/// buf.extend_from_slice(b"cd");
/// assert!(matches!(r.next(&mut buf).unwrap(), Some(SubgroupEvent::Payload { last: true, .. })));
/// assert!(r.finish(&buf).is_ok());
/// ```
#[derive(Debug)]
pub struct SubgroupReader {
    header: SubgroupHeader,
    version: Version,
    prev: Option<u64>,
    state: State,
    subgroup_id: Option<u64>,
}

impl SubgroupReader {
    /// A reader for the objects after `header`.
    pub fn new(header: SubgroupHeader, version: Version) -> Self {
        let subgroup_id = match header.subgroup {
            SubgroupId::Zero => Some(0),
            SubgroupId::Explicit(id) => Some(id),
            SubgroupId::FirstObject => None,
        };
        SubgroupReader {
            header,
            version,
            prev: None,
            state: State::Header,
            subgroup_id,
        }
    }

    /// The stream's header.
    pub fn header(&self) -> &SubgroupHeader {
        &self.header
    }

    /// The Subgroup ID, once known (mode 0b01 learns it from the first object).
    pub fn subgroup_id(&self) -> Option<u64> {
        self.subgroup_id
    }

    /// The last Object ID read.
    pub fn last_object(&self) -> Option<u64> {
        self.prev
    }

    /// The next event from `buf`, consuming what it decodes; `Ok(None)` if more bytes are needed.
    ///
    /// Until draft-15 an object may have status Object Does Not Exist (0x1, draft-14
    /// §10.2.1.1); such an object is consumed without an event, as if it had not been sent,
    /// but it still counts as the previous object for the next Object ID Delta,
    /// [`SubgroupReader::last_object`] and a [`SubgroupId::FirstObject`] Subgroup ID.
    pub fn next(&mut self, buf: &mut impl DecodeBuf) -> Result<Option<SubgroupEvent>, DecodeError> {
        loop {
            match self.state {
                State::Header => {
                    let Some((id, obj)) = buf.decode_front(|cur| self.decode_object(cur))? else {
                        return Ok(None);
                    };
                    self.prev = Some(id);
                    if self.subgroup_id.is_none() {
                        self.subgroup_id = Some(id);
                    }
                    let Some(obj) = obj else {
                        continue;
                    };
                    if obj.payload_len > 0 {
                        self.state = State::Payload {
                            remaining: obj.payload_len,
                        };
                    }
                    return Ok(Some(SubgroupEvent::Object(obj)));
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
                    return Ok(Some(SubgroupEvent::Payload {
                        data,
                        last: left == 0,
                    }));
                }
            }
        }
    }

    /// One object's fields: its ID, and the object unless it is an Object Does Not Exist.
    fn decode_object(&self, cur: &mut &[u8]) -> Result<(u64, Option<SubgroupObject>), DecodeError> {
        let v = self.version;
        let delta = cur.get_varint(v)?;
        // draft-19 §11.4.2 (draft-14 §10.4.2 alike): Object ID = previous + delta + 1, or delta
        // for the first object; past 2^64-1 is a PROTOCOL_VIOLATION.
        let id = match self.prev {
            None => delta,
            Some(p) => p
                .checked_add(delta)
                .and_then(|x| x.checked_add(1))
                .ok_or(DecodeError::Overflow("object ID"))?,
        };
        let properties = if self.header.properties {
            Properties::decode_prefixed(cur, v)?
        } else {
            Properties::new()
        };
        let payload_len = cur.get_varint(v)?;
        // draft-14 §10.4.2: the Object Status is only sent if the Payload Length is zero.
        let status = if payload_len == 0 {
            WireStatus::read(cur, v)?
        } else {
            WireStatus::Known(ObjectStatus::Normal)
        };
        // draft-19 §11.2.1.2, draft-16 §10.2.1.2, draft-14 §10.2.1.2: properties on a status
        // that may not have them MUST close the session with a PROTOCOL_VIOLATION.
        let keep = status.check_properties(
            !properties.is_empty(),
            v,
            "properties on an object whose status is not Normal",
        )?;
        let status = match status {
            WireStatus::Known(s) => s,
            WireStatus::DoesNotExist => return Ok((id, None)),
        };
        Ok((
            id,
            Some(SubgroupObject {
                id,
                properties: if keep { properties } else { Properties::new() },
                status,
                payload_len,
            }),
        ))
    }

    /// Checks the stream may end here: a FIN in the middle of an object is a
    /// PROTOCOL_VIOLATION (draft-19 §11.4). `buf` is what is left unconsumed.
    pub fn finish(&self, buf: &[u8]) -> Result<(), DecodeError> {
        match self.state {
            State::Header if buf.is_empty() => Ok(()),
            _ => Err(DecodeError::ProtocolViolation(
                "stream ended in the middle of an object",
            )),
        }
    }
}

/// Encodes the objects of one subgroup stream, tracking the Object ID deltas.
///
/// ```
/// use moq_core::{Version, data::{SubgroupHeader, SubgroupId, SubgroupWriter, ObjectStatus}};
/// let header = SubgroupHeader { track_alias: 2, group: 0, subgroup: SubgroupId::Explicit(0),
///     priority: Some(0), properties: false, end_of_group: false, first_object: false };
/// let mut w = SubgroupWriter::new(header, Version::Draft19);
/// let mut buf = Vec::new();
/// w.encode_header(&mut buf).unwrap();
/// w.encode_object(&mut buf, 0, &Default::default(), ObjectStatus::Normal, b"abcd").unwrap();
/// w.encode_object(&mut buf, 1, &Default::default(), ObjectStatus::Normal, b"efgh").unwrap();
/// assert_eq!(buf, b"\x14\x02\x00\x00\x00\x00\x04abcd\x00\x04efgh");
/// ```
#[derive(Debug)]
pub struct SubgroupWriter {
    header: SubgroupHeader,
    version: Version,
    prev: Option<u64>,
}

impl SubgroupWriter {
    /// A writer for a stream with `header`.
    pub fn new(header: SubgroupHeader, version: Version) -> Self {
        SubgroupWriter {
            header,
            version,
            prev: None,
        }
    }

    /// The header.
    pub fn header(&self) -> &SubgroupHeader {
        &self.header
    }

    /// The header, to change before it is encoded.
    pub fn header_mut(&mut self) -> &mut SubgroupHeader {
        &mut self.header
    }

    /// The last Object ID written.
    pub fn last_object(&self) -> Option<u64> {
        self.prev
    }

    /// Writes the stream header (see [`SubgroupHeader::encode`] for what each version
    /// leaves out).
    pub fn encode_header<B: BufMut>(&self, buf: &mut B) -> Result<(), EncodeError> {
        self.header.encode(buf, self.version)
    }

    /// Writes one object's fields; the payload is written after them if `payload` is non-empty.
    /// Use [`SubgroupWriter::encode_object_header`] to stream a payload separately.
    pub fn encode_object<B: BufMut>(
        &mut self,
        buf: &mut B,
        id: u64,
        properties: &Properties,
        status: ObjectStatus,
        payload: &[u8],
    ) -> Result<(), EncodeError> {
        self.encode_object_header(buf, id, properties, status, payload.len() as u64)?;
        buf.put_slice(payload);
        Ok(())
    }

    /// Writes one object's fields announcing `payload_len` bytes of payload, which the caller
    /// writes next.
    pub fn encode_object_header<B: BufMut>(
        &mut self,
        buf: &mut B,
        id: u64,
        properties: &Properties,
        status: ObjectStatus,
        payload_len: u64,
    ) -> Result<(), EncodeError> {
        let v = self.version;
        let delta = match self.prev {
            None => id,
            Some(p) if id > p => id - p - 1,
            Some(_) => {
                return Err(EncodeError::Invalid {
                    field: "object ID",
                    reason: "object IDs on a subgroup stream must increase",
                });
            }
        };
        if status != ObjectStatus::Normal && (payload_len > 0 || !properties.is_empty()) {
            return Err(EncodeError::Invalid {
                field: "object",
                reason: "only Normal objects carry payload or properties",
            });
        }
        if !self.header.properties && !properties.is_empty() {
            return Err(EncodeError::Invalid {
                field: "object properties",
                reason: "the subgroup header has no PROPERTIES bit",
            });
        }
        // Everything that can fail is checked before anything is written.
        fits(id, v, "object ID")?;
        fits(payload_len, v, "payload length")?;
        let props = if self.header.properties && !properties.is_empty() {
            let mut tmp = Vec::new();
            properties.encode_prefixed(&mut tmp, v)?;
            Some(tmp)
        } else {
            None
        };
        put_int(buf, delta, v, "object ID delta")?;
        if self.header.properties {
            match props {
                Some(p) => buf.put_slice(&p),
                // draft-14 §10.4.2: objects with no extensions set Extension Headers Length 0.
                None => buf.put_varint(0, v),
            }
        }
        buf.put_varint(payload_len, v);
        if payload_len == 0 {
            buf.put_varint(status.value(), v);
        }
        self.prev = Some(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;

    const V: Version = Version::Draft19;

    #[test]
    fn every_valid_type_round_trips() {
        let mut count = 0;
        for t in 0u64..0x100 {
            let mut buf = Vec::new();
            crate::coding::Vi64::encode(t, &mut buf);
            buf.extend_from_slice(&[0x01, 0x02, 0x03, 0x04]);
            let res = SubgroupHeader::decode(&mut &buf[..], V);
            if SubgroupHeader::valid_type(t) {
                count += 1;
                let h = res.unwrap();
                assert_eq!(u64::from(h.type_code()), t);
                let mut out = Vec::new();
                h.encode(&mut out, V).unwrap();
                assert_eq!(&out[..], &buf[..out.len()]);
            } else {
                assert_eq!(res, Err(DecodeError::InvalidSubgroupType(t)));
            }
        }
        // 8 ranges of 6 valid values each (draft-19 §11.4.2).
        assert_eq!(count, 48);
        for t in [
            0x16, 0x17, 0x1E, 0x1F, 0x36, 0x37, 0x3E, 0x3F, 0x56, 0x57, 0x5E, 0x5F, 0x76, 0x77,
            0x7E, 0x7F,
        ] {
            assert!(!SubgroupHeader::valid_type(t));
        }
    }

    /// The second example of draft-19 §11.6: type 0x35, properties on the first object.
    #[test]
    fn draft_example_with_properties() {
        let header = SubgroupHeader {
            track_alias: 2,
            group: 0,
            subgroup: SubgroupId::Explicit(0),
            priority: None,
            properties: true,
            end_of_group: false,
            first_object: false,
        };
        assert_eq!(header.type_code(), 0x35);
        let props = Properties::new()
            .with_int(4, 2_186_796_243)
            .unwrap()
            .with_bytes(77, &b"traceID:123456"[..])
            .unwrap();
        let mut w = SubgroupWriter::new(header, V);
        let mut buf = Vec::new();
        w.encode_header(&mut buf).unwrap();
        w.encode_object(&mut buf, 0, &props, ObjectStatus::Normal, b"abcd")
            .unwrap();
        w.encode_object(
            &mut buf,
            1,
            &Properties::new(),
            ObjectStatus::Normal,
            b"efgh",
        )
        .unwrap();

        let mut bytes = BytesMut::from(&buf[..]);
        let h = SubgroupHeader::decode(&mut bytes, V).unwrap();
        assert_eq!(h, header);
        let mut r = SubgroupReader::new(h, V);
        let mut objects = Vec::new();
        while let Some(ev) = r.next(&mut bytes).unwrap() {
            objects.push(ev);
        }
        assert_eq!(objects.len(), 4);
        assert!(
            matches!(&objects[0], SubgroupEvent::Object(o) if o.properties == props && o.id == 0)
        );
        assert!(
            matches!(&objects[2], SubgroupEvent::Object(o) if o.id == 1 && o.properties.is_empty())
        );
        assert!(r.finish(&bytes).is_ok());
    }

    #[test]
    fn status_objects_and_violations() {
        let header = SubgroupHeader {
            track_alias: 1,
            group: 5,
            subgroup: SubgroupId::FirstObject,
            priority: Some(1),
            properties: true,
            end_of_group: true,
            first_object: true,
        };
        let mut w = SubgroupWriter::new(header, V);
        let mut buf = Vec::new();
        w.encode_object(&mut buf, 7, &Properties::new(), ObjectStatus::Normal, b"")
            .unwrap();
        w.encode_object(
            &mut buf,
            9,
            &Properties::new(),
            ObjectStatus::EndOfGroup,
            b"",
        )
        .unwrap();
        let mut bytes = BytesMut::from(&buf[..]);
        let mut r = SubgroupReader::new(header, V);
        assert!(
            matches!(r.next(&mut bytes).unwrap(), Some(SubgroupEvent::Object(o)) if o.id == 7 && o.status == ObjectStatus::Normal)
        );
        assert_eq!(r.subgroup_id(), Some(7));
        assert!(
            matches!(r.next(&mut bytes).unwrap(), Some(SubgroupEvent::Object(o)) if o.id == 9 && o.status == ObjectStatus::EndOfGroup)
        );

        // Unknown status 0x1.
        let mut r = SubgroupReader::new(header, V);
        let mut bad = BytesMut::from(&[0x00u8, 0x00, 0x00, 0x01][..]);
        assert!(matches!(
            r.next(&mut bad),
            Err(DecodeError::InvalidValue { .. })
        ));
        // Properties on an End of Group object.
        let mut r = SubgroupReader::new(header, V);
        let mut bad = BytesMut::from(&[0x00u8, 0x02, 0x02, 0x01, 0x00, 0x03][..]);
        assert!(matches!(
            r.next(&mut bad),
            Err(DecodeError::ProtocolViolation(_))
        ));
        // FIN mid-object.
        let mut r = SubgroupReader::new(header, V);
        let mut part = BytesMut::from(&[0x00u8, 0x00, 0x05, b'a'][..]);
        assert!(r.next(&mut part).unwrap().is_some());
        assert!(r.next(&mut part).unwrap().is_some());
        assert!(r.finish(&part).is_err());
        // Object ID overflow.
        let mut r = SubgroupReader::new(
            SubgroupHeader {
                properties: false,
                ..header
            },
            V,
        );
        let mut over = Vec::new();
        crate::coding::Vi64::encode(u64::MAX, &mut over);
        over.extend_from_slice(&[0x00, 0x00, 0x00, 0x00, 0x00]);
        let mut over = BytesMut::from(&over[..]);
        assert!(r.next(&mut over).unwrap().is_some());
        assert_eq!(r.next(&mut over), Err(DecodeError::Overflow("object ID")));
    }
}
