//! OBJECT_DATAGRAM (draft-19 §11.3.1; draft-14 and draft-16 §10.3.1) and padding datagrams
//! (draft-19 §11.5.2, from draft-18).

use bytes::{Buf, BufMut, Bytes};

use super::{DEFAULT_PUBLISHER_PRIORITY, ObjectStatus, WireStatus, fits};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};
use crate::types::kvp::Properties;

/// The datagram type of a PADDING datagram (draft-19 §11.5.2).
pub const PADDING_DATAGRAM_TYPE: u64 = 0x132B3E29;

const PROPERTIES: u64 = 0x01;
const END_OF_GROUP: u64 = 0x02;
const ZERO_OBJECT_ID: u64 = 0x04;
const DEFAULT_PRIORITY: u64 = 0x08;
const STATUS: u64 = 0x20;

/// What an object datagram carries after its header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatagramBody {
    /// A payload (the rest of the datagram; may be empty).
    Payload(Bytes),
    /// An object status instead of a payload.
    Status(ObjectStatus),
}

/// One object sent as a datagram (draft-19 §11.3.1).
///
/// ```
/// use moq_core::{Version, data::{ObjectDatagram, DatagramBody, Datagram}};
/// let d = ObjectDatagram { track_alias: 1, group: 2, object: 0, priority: Some(9),
///     properties: Default::default(), end_of_group: true,
///     body: DatagramBody::Payload("hi".into()) };
/// let bytes = d.encode_to_bytes(Version::Draft19).unwrap();
/// assert_eq!(bytes[0], 0x06); // END_OF_GROUP | ZERO_OBJECT_ID
/// assert_eq!(Datagram::decode(bytes, Version::Draft19).unwrap(), Datagram::Object(d));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectDatagram {
    /// The Track Alias of the subscription.
    pub track_alias: u64,
    /// The Group ID.
    pub group: u64,
    /// The Object ID.
    pub object: u64,
    /// The Publisher Priority; `None` inherits the subscription's. Draft-14 has no
    /// DEFAULT_PRIORITY bit: `None` is written as
    /// [`DEFAULT_PUBLISHER_PRIORITY`](super::DEFAULT_PUBLISHER_PRIORITY), and a datagram read
    /// under draft-14 always has `Some`.
    pub priority: Option<u8>,
    /// Object Properties (empty if none).
    pub properties: Properties,
    /// No object with a larger Object ID exists in this group.
    pub end_of_group: bool,
    /// Payload or status.
    pub body: DatagramBody,
}

impl ObjectDatagram {
    /// True if `t` is a valid OBJECT_DATAGRAM type in the newest draft: the form 0b00X0XXXX
    /// without STATUS together with END_OF_GROUP (draft-19 §11.3.1).
    /// [`ObjectDatagram::valid_type_in`] answers for a given version.
    pub const fn valid_type(t: u64) -> bool {
        Self::valid_type_in(t, Version::PREFERRED)
    }

    /// True if `t` is a valid OBJECT_DATAGRAM type under `v`. Draft-14 (§10.3.1) lists
    /// 0x00-0x07 and 0x20-0x21; from draft-15 (draft-16 §10.3.1) the type is the flags
    /// 0b00X0XXXX, DEFAULT_PRIORITY (0x08) included, and a status may set ZERO_OBJECT_ID;
    /// STATUS with END_OF_GROUP is invalid in every version.
    pub const fn valid_type_in(t: u64, v: Version) -> bool {
        let mut flags = PROPERTIES | END_OF_GROUP | ZERO_OBJECT_ID | STATUS;
        if v.has_default_priority() {
            flags |= DEFAULT_PRIORITY;
        }
        let status = t & STATUS != 0;
        t & !flags == 0
            && !(status && t & END_OF_GROUP != 0)
            && !(status && t & ZERO_OBJECT_ID != 0 && !v.status_datagram_zero_object_id())
    }

    /// The status of the object (Normal for a payload).
    pub fn status(&self) -> ObjectStatus {
        match self.body {
            DatagramBody::Payload(_) => ObjectStatus::Normal,
            DatagramBody::Status(s) => s,
        }
    }

    /// The type value this datagram is encoded with in the newest draft; see
    /// [`ObjectDatagram::type_code_in`].
    pub fn type_code(&self) -> u64 {
        self.type_code_in(Version::PREFERRED)
    }

    /// The type value this datagram is encoded with under `v`. Draft-14 has no
    /// DEFAULT_PRIORITY (the priority is written) and its status datagrams always carry the
    /// Object ID (no ZERO_OBJECT_ID with STATUS).
    pub fn type_code_in(&self, v: Version) -> u64 {
        let status = matches!(self.body, DatagramBody::Status(_));
        let mut t = 0;
        if !self.properties.is_empty() {
            t |= PROPERTIES;
        }
        if self.end_of_group {
            t |= END_OF_GROUP;
        }
        if self.object == 0 && (!status || v.status_datagram_zero_object_id()) {
            t |= ZERO_OBJECT_ID;
        }
        if self.priority.is_none() && v.has_default_priority() {
            t |= DEFAULT_PRIORITY;
        }
        if status {
            t |= STATUS;
        }
        t
    }

    /// `None` for an Object Does Not Exist (drafts 14-15), which carries nothing to hand out.
    fn decode_after_type(t: u64, buf: &mut Bytes, v: Version) -> Result<Option<Self>, DecodeError> {
        // draft-19 §11.3.1, draft-16 §10.3.1: invalid type values MUST close the session with a
        // PROTOCOL_VIOLATION; draft-14 §10: an unknown datagram type MUST close the session.
        if !Self::valid_type_in(t, v) {
            return Err(DecodeError::InvalidDatagramType(t));
        }
        let track_alias = buf.get_varint(v)?;
        let group = buf.get_varint(v)?;
        let object = if t & ZERO_OBJECT_ID != 0 {
            0
        } else {
            buf.get_varint(v)?
        };
        let priority = if t & DEFAULT_PRIORITY != 0 {
            None
        } else {
            Some(buf.get_byte()?)
        };
        let properties = if t & PROPERTIES != 0 {
            let p = Properties::decode_prefixed(buf, v)?;
            // draft-19 §11.3.1, draft-16 §10.3.1, draft-14 §10.3.1: the PROPERTIES (Extensions
            // Present) bit with a length of 0 MUST close the session with a PROTOCOL_VIOLATION.
            if p.is_empty() {
                return Err(DecodeError::ProtocolViolation(
                    "datagram PROPERTIES bit with empty properties",
                ));
            }
            p
        } else {
            Properties::new()
        };
        let (body, properties) = if t & STATUS != 0 {
            let status = WireStatus::read(buf, v)?;
            // draft-19 §11.3.1, draft-16 §10.2.1.2: properties on a status other than Normal
            // MUST close the session with a PROTOCOL_VIOLATION; draft-14 §10.2.1.2 only on an
            // Object Does Not Exist.
            let keep = status.check_properties(
                !properties.is_empty(),
                v,
                "properties on a datagram whose status is not Normal",
            )?;
            if buf.has_remaining() {
                return Err(DecodeError::TrailingBytes {
                    message: "OBJECT_DATAGRAM",
                    extra: buf.remaining(),
                });
            }
            let WireStatus::Known(status) = status else {
                return Ok(None);
            };
            let properties = if keep { properties } else { Properties::new() };
            (DatagramBody::Status(status), properties)
        } else {
            (DatagramBody::Payload(buf.get_rest()), properties)
        };
        Ok(Some(ObjectDatagram {
            track_alias,
            group,
            object,
            priority,
            properties,
            end_of_group: t & END_OF_GROUP != 0,
            body,
        }))
    }

    /// Writes the datagram. Fails, writing nothing, for a status datagram that ends the group
    /// or has properties without being Normal, or an ID that does not fit the version's
    /// integers (2^62-1 until draft-16).
    pub fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        let t = self.type_code_in(v);
        if !Self::valid_type_in(t, v) {
            return Err(EncodeError::Invalid {
                field: "object datagram",
                reason: "a status datagram cannot signal end of group",
            });
        }
        if self.status() != ObjectStatus::Normal && !self.properties.is_empty() {
            return Err(EncodeError::Invalid {
                field: "object datagram",
                reason: "only Normal objects carry properties",
            });
        }
        fits(self.track_alias, v, "track alias")?;
        fits(self.group, v, "group ID")?;
        fits(self.object, v, "object ID")?;
        let props = if self.properties.is_empty() {
            None
        } else {
            let mut tmp = Vec::new();
            self.properties.encode_prefixed(&mut tmp, v)?;
            Some(tmp)
        };
        buf.put_varint(t, v);
        buf.put_varint(self.track_alias, v);
        buf.put_varint(self.group, v);
        if t & ZERO_OBJECT_ID == 0 {
            buf.put_varint(self.object, v);
        }
        if t & DEFAULT_PRIORITY == 0 {
            // draft-14 §10.3.1: Publisher Priority (8) is always present.
            buf.put_u8(self.priority.unwrap_or(DEFAULT_PUBLISHER_PRIORITY));
        }
        if let Some(p) = props {
            buf.put_slice(&p);
        }
        match &self.body {
            DatagramBody::Payload(p) => buf.put_slice(p),
            DatagramBody::Status(s) => buf.put_varint(s.value(), v),
        }
        Ok(())
    }

    /// Encodes into a new buffer.
    pub fn encode_to_bytes(&self, v: Version) -> Result<Bytes, EncodeError> {
        let mut out = Vec::new();
        self.encode(&mut out, v)?;
        Ok(out.into())
    }
}

/// Any MOQT datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Datagram {
    /// An object.
    Object(ObjectDatagram),
    /// Padding, to be discarded (draft-19 §11.5.2); also an Object Does Not Exist status
    /// datagram under drafts 14-15 (see [`Datagram::decode`]).
    Padding,
}

impl Datagram {
    /// Decodes a whole datagram. An unknown type closes the session (draft-19 §11, draft-14
    /// §10); a datagram cut short is a protocol violation.
    ///
    /// Until draft-15 a status datagram may say Object Does Not Exist (0x1, draft-14
    /// §10.2.1.1). That object is not handed out: such a datagram decodes as
    /// [`Datagram::Padding`], to be discarded. Padding itself exists from draft-18 only;
    /// before, its type is unknown.
    pub fn decode(mut buf: Bytes, v: Version) -> Result<Datagram, DecodeError> {
        let t = buf.get_varint(v).map_err(|e| e.in_complete("datagram"))?;
        if t == PADDING_DATAGRAM_TYPE && v.has_padding() {
            return Ok(Datagram::Padding);
        }
        ObjectDatagram::decode_after_type(t, &mut buf, v)
            .map(|d| d.map_or(Datagram::Padding, Datagram::Object))
            .map_err(|e| e.in_complete("OBJECT_DATAGRAM"))
    }

    /// A padding datagram of `len` bytes in all (at least the type's 5 bytes). Padding exists
    /// from draft-18; under an earlier version this is empty: send nothing.
    pub fn padding(len: usize, v: Version) -> Bytes {
        if !v.has_padding() {
            return Bytes::new();
        }
        let mut out = Vec::with_capacity(len.max(4));
        out.put_varint(PADDING_DATAGRAM_TYPE, v);
        out.resize(len.max(out.len()), 0);
        out.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version::Draft19;

    #[test]
    fn valid_types_match_draft_list() {
        let valid: Vec<u64> = (0u64..0x100)
            .filter(|t| ObjectDatagram::valid_type(*t))
            .collect();
        let expect: Vec<u64> = (0x00..=0x0F)
            .chain([0x20, 0x21, 0x24, 0x25, 0x28, 0x29, 0x2C, 0x2D])
            .collect();
        assert_eq!(valid, expect);
        for t in [
            0x22u64, 0x23, 0x26, 0x27, 0x2A, 0x2B, 0x2E, 0x2F, 0x10, 0x30, 0x40,
        ] {
            let mut b = Vec::new();
            crate::coding::Vi64::encode(t, &mut b);
            b.extend_from_slice(&[0, 0, 0, 0, 0]);
            assert_eq!(
                Datagram::decode(b.into(), V),
                Err(DecodeError::InvalidDatagramType(t))
            );
        }
    }

    #[test]
    fn every_valid_type_decodes() {
        for t in (0u64..0x30).filter(|t| ObjectDatagram::valid_type(*t)) {
            let mut b = Vec::new();
            crate::coding::Vi64::encode(t, &mut b);
            b.extend_from_slice(&[1, 2]); // alias, group
            if t & ZERO_OBJECT_ID == 0 {
                b.push(3);
            }
            if t & DEFAULT_PRIORITY == 0 {
                b.push(4);
            }
            if t & PROPERTIES != 0 {
                b.extend_from_slice(&[2, 2, 5]); // length 2: type 2 = 5
            }
            if t & STATUS != 0 {
                b.push(0);
            } else {
                b.extend_from_slice(b"xy");
            }
            let d = match Datagram::decode(b.clone().into(), V).unwrap() {
                Datagram::Object(d) => d,
                Datagram::Padding => panic!(),
            };
            assert_eq!(d.type_code() & !ZERO_OBJECT_ID, t & !ZERO_OBJECT_ID);
            let back = d.encode_to_bytes(V).unwrap();
            assert_eq!(Datagram::decode(back, V).unwrap(), Datagram::Object(d));
        }
    }

    #[test]
    fn rejections() {
        // PROPERTIES bit with length 0.
        assert!(matches!(
            Datagram::decode(Bytes::from_static(&[0x01, 1, 2, 3, 4, 0]), V),
            Err(DecodeError::ProtocolViolation(_))
        ));
        // STATUS + PROPERTIES with End of Track.
        assert!(matches!(
            Datagram::decode(Bytes::from_static(&[0x21, 1, 2, 3, 4, 2, 2, 5, 4]), V),
            Err(DecodeError::ProtocolViolation(_))
        ));
        // Truncated.
        assert_eq!(
            Datagram::decode(Bytes::from_static(&[0x00, 1]), V),
            Err(DecodeError::BodyTooShort("OBJECT_DATAGRAM"))
        );
        // Padding.
        assert_eq!(
            Datagram::decode(Datagram::padding(20, V), V),
            Ok(Datagram::Padding)
        );
    }
}
