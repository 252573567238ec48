//! OBJECT_DATAGRAM (draft-19 §11.3.1) and padding datagrams (§11.5.2).

use bytes::{Buf, BufMut, Bytes};

use super::ObjectStatus;
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
    /// The Publisher Priority; `None` inherits the subscription's.
    pub priority: Option<u8>,
    /// Object Properties (empty if none).
    pub properties: Properties,
    /// No object with a larger Object ID exists in this group.
    pub end_of_group: bool,
    /// Payload or status.
    pub body: DatagramBody,
}

impl ObjectDatagram {
    /// True if `t` is a valid OBJECT_DATAGRAM type: the form 0b00X0XXXX without STATUS together
    /// with END_OF_GROUP (draft-19 §11.3.1).
    pub const fn valid_type(t: u64) -> bool {
        t & !0x2F == 0 && !(t & STATUS != 0 && t & END_OF_GROUP != 0)
    }

    /// The status of the object (Normal for a payload).
    pub fn status(&self) -> ObjectStatus {
        match self.body {
            DatagramBody::Payload(_) => ObjectStatus::Normal,
            DatagramBody::Status(s) => s,
        }
    }

    /// The type value this datagram is encoded with.
    pub fn type_code(&self) -> u64 {
        let mut t = 0;
        if !self.properties.is_empty() {
            t |= PROPERTIES;
        }
        if self.end_of_group {
            t |= END_OF_GROUP;
        }
        if self.object == 0 {
            t |= ZERO_OBJECT_ID;
        }
        if self.priority.is_none() {
            t |= DEFAULT_PRIORITY;
        }
        if matches!(self.body, DatagramBody::Status(_)) {
            t |= STATUS;
        }
        t
    }

    fn decode_after_type(t: u64, buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        // draft-19 §11.3.1: invalid type values are a PROTOCOL_VIOLATION.
        if !Self::valid_type(t) {
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
            // draft-19 §11.3.1: PROPERTIES bit with Properties Length 0 is a PROTOCOL_VIOLATION.
            if p.is_empty() {
                return Err(DecodeError::ProtocolViolation(
                    "datagram PROPERTIES bit with empty properties",
                ));
            }
            p
        } else {
            Properties::new()
        };
        let body = if t & STATUS != 0 {
            let status = ObjectStatus::from_value(buf.get_varint(v)?)?;
            // draft-19 §11.3.1: STATUS and PROPERTIES with a non-Normal status is a violation.
            if status != ObjectStatus::Normal && !properties.is_empty() {
                return Err(DecodeError::ProtocolViolation(
                    "properties on a datagram whose status is not Normal",
                ));
            }
            if buf.has_remaining() {
                return Err(DecodeError::TrailingBytes {
                    message: "OBJECT_DATAGRAM",
                    extra: buf.remaining(),
                });
            }
            DatagramBody::Status(status)
        } else {
            DatagramBody::Payload(buf.get_rest())
        };
        Ok(ObjectDatagram {
            track_alias,
            group,
            object,
            priority,
            properties,
            end_of_group: t & END_OF_GROUP != 0,
            body,
        })
    }

    /// Writes the datagram.
    pub fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        let t = self.type_code();
        if !Self::valid_type(t) {
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
        buf.put_varint(t, v);
        buf.put_varint(self.track_alias, v);
        buf.put_varint(self.group, v);
        if self.object != 0 {
            buf.put_varint(self.object, v);
        }
        if let Some(p) = self.priority {
            buf.put_u8(p);
        }
        if !self.properties.is_empty() {
            self.properties.encode_prefixed(buf, v)?;
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
    /// Padding, to be discarded (draft-19 §11.5.2).
    Padding,
}

impl Datagram {
    /// Decodes a whole datagram. An unknown type closes the session (draft-19 §11); a datagram
    /// cut short is a protocol violation.
    pub fn decode(mut buf: Bytes, v: Version) -> Result<Datagram, DecodeError> {
        let t = buf.get_varint(v).map_err(|e| e.in_complete("datagram"))?;
        if t == PADDING_DATAGRAM_TYPE {
            return Ok(Datagram::Padding);
        }
        ObjectDatagram::decode_after_type(t, &mut buf, v)
            .map(Datagram::Object)
            .map_err(|e| e.in_complete("OBJECT_DATAGRAM"))
    }

    /// A padding datagram of `len` bytes in all (at least the type's 5 bytes).
    pub fn padding(len: usize, v: Version) -> Bytes {
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
