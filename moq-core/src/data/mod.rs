//! The data plane (draft-19 §11; draft-14 and draft-16 §10): unidirectional stream types,
//! subgroup and fetch streams, datagrams and padding.
//!
//! One model serves every version: the types here say what an object is, and each encode and
//! decode takes the [`Version`] that says how it is written. Where a version cannot say
//! something the model holds (a FIRST_OBJECT bit before draft-18, a left-out priority in
//! draft-14, an End of Range before draft-16), the writers document what they do instead; where
//! a version says something the model does not hold (Object Does Not Exist in drafts 14-15),
//! the readers document what they make of it.
//!
//! Streams are decoded incrementally: a reader is fed bytes as they arrive (a
//! [`bytes::BytesMut`], or a [`RecvBuf`] of the received chunks), returns `Ok(None)` when it
//! needs more, and hands out payload in zero-copy chunks (slices of the received chunks, with a
//! [`RecvBuf`]) so large objects can be forwarded before they are complete.

mod datagram;
mod fetch;
mod recvbuf;
mod subgroup;

pub use datagram::{Datagram, DatagramBody, ObjectDatagram, PADDING_DATAGRAM_TYPE};
pub use fetch::{FetchEvent, FetchHeader, FetchObject, FetchReader, FetchWriter, RangeEnd};
pub use recvbuf::{DecodeBuf, RecvBuf};
pub use subgroup::{
    SubgroupEvent, SubgroupHeader, SubgroupId, SubgroupObject, SubgroupReader, SubgroupWriter,
};

use bytes::{Buf, BufMut};

use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError, QuicVarInt};

/// The stream type of a PADDING stream (draft-19 §11.5.1).
pub const PADDING_STREAM_TYPE: u64 = 0x132B3E28;
/// The stream type of a FETCH_HEADER stream (draft-19 §11.4.4).
pub const FETCH_STREAM_TYPE: u64 = 0x05;
/// The stream type of a control stream: SETUP's message type (draft-19 §3.4).
pub const CONTROL_STREAM_TYPE: u64 = 0x2F00;

/// What a unidirectional stream carries, from its first varint (draft-19 §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamType {
    /// A control stream; the type is the first field of SETUP (from draft-18).
    Control,
    /// A subgroup stream; the type's flags follow.
    Subgroup(u8),
    /// A fetch response stream.
    Fetch,
    /// Padding, to be discarded (from draft-18).
    Padding,
}

impl StreamType {
    /// Classifies a stream type as the newest draft does (draft-19 §3.4); an unknown one
    /// closes the session. [`StreamType::from_code_in`] answers for a given version.
    pub fn from_code(code: u64) -> Result<StreamType, DecodeError> {
        StreamType::from_code_in(code, Version::PREFERRED)
    }

    /// Classifies a stream type under `v`. A type the version does not define is unknown: a
    /// session MUST be closed (draft-14 §10, draft-16 §10, draft-19 §3.4). Until draft-16 the
    /// control stream is bidirectional, so no unidirectional stream has the control type, and
    /// there is no padding stream; SUBGROUP_HEADER has the types of
    /// [`SubgroupHeader::valid_type_in`].
    pub fn from_code_in(code: u64, v: Version) -> Result<StreamType, DecodeError> {
        match code {
            CONTROL_STREAM_TYPE if !v.single_control_stream() => Ok(StreamType::Control),
            FETCH_STREAM_TYPE => Ok(StreamType::Fetch),
            PADDING_STREAM_TYPE if v.has_padding() => Ok(StreamType::Padding),
            c if SubgroupHeader::valid_type_in(c, v) => Ok(StreamType::Subgroup(c as u8)),
            // The SUBGROUP_HEADER form with the reserved SUBGROUP_ID_MODE 0b11.
            c if c & !subgroup::type_flags(v) == 0x10 => Err(DecodeError::InvalidSubgroupType(c)),
            c => Err(DecodeError::UnknownStreamType(c)),
        }
    }

    /// Reads the type at the start of `buf` without consuming it; `Ok(None)` if not all there.
    pub fn peek(buf: &[u8], v: Version) -> Result<Option<StreamType>, DecodeError> {
        let mut cur = buf;
        match cur.get_varint(v) {
            Ok(code) => StreamType::from_code_in(code, v).map(Some),
            Err(DecodeError::Short) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The Publisher Priority of a subscription whose publisher names none: 128 (draft-16 §11,
/// DEFAULT PUBLISHER PRIORITY; draft-19 §12.2). Draft-14 has no way to name one and
/// no way to leave an object's priority out, so an object that inherits the subscription's
/// priority is written with this one.
pub const DEFAULT_PUBLISHER_PRIORITY: u8 = 128;

/// The status of an object delivered by a subscription (draft-19 §11.2.1.1).
///
/// Drafts 14 and 15 also have 0x1, Object Does Not Exist. It says no more than the object's
/// absence does from draft-16 on, so readers consume such objects without handing them out
/// (see [`SubgroupReader`], [`FetchReader`], [`Datagram::decode`]) and this type has no
/// variant for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ObjectStatus {
    /// 0x0: a normal object; the only status that may carry payload or properties.
    #[default]
    Normal,
    /// 0x3: no object with this Group ID and an Object ID at or above this one exists.
    EndOfGroup,
    /// 0x4: no object at or after this location exists.
    EndOfTrack,
}

impl ObjectStatus {
    /// The wire value.
    pub const fn value(self) -> u64 {
        match self {
            ObjectStatus::Normal => 0x0,
            ObjectStatus::EndOfGroup => 0x3,
            ObjectStatus::EndOfTrack => 0x4,
        }
    }

    /// From the wire; other values are treated as a PROTOCOL_VIOLATION (draft-19 §11.2.1.1).
    pub fn from_value(value: u64) -> Result<Self, DecodeError> {
        match value {
            0x0 => Ok(ObjectStatus::Normal),
            0x3 => Ok(ObjectStatus::EndOfGroup),
            0x4 => Ok(ObjectStatus::EndOfTrack),
            _ => Err(DecodeError::InvalidValue {
                field: "object status",
                value,
            }),
        }
    }
}

/// An Object Status as read under a version: one of [`ObjectStatus`] or, until draft-15,
/// Object Does Not Exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireStatus {
    /// A status every version has.
    Known(ObjectStatus),
    /// 0x1 (until draft-15).
    DoesNotExist,
}

impl WireStatus {
    /// Reads an Object Status under `v`. draft-14 §10.2.1.1: "Any other value SHOULD be
    /// treated as a protocol error" (a PROTOCOL_VIOLATION); the same in draft-16 §10.2.1.1.
    pub(crate) fn read<B: Buf>(buf: &mut B, v: Version) -> Result<WireStatus, DecodeError> {
        match buf.get_varint(v)? {
            0x1 if v.has_object_does_not_exist() => Ok(WireStatus::DoesNotExist),
            x => ObjectStatus::from_value(x).map(WireStatus::Known),
        }
    }

    /// Checks the properties an object with this status came with and says whether to keep
    /// them. draft-14 §10.2.1.2: extension headers on an Object Does Not Exist MUST close the
    /// session with a PROTOCOL_VIOLATION; from draft-15 (draft-16 §10.2.1.2) the same holds for
    /// every status but Normal. Draft-14 allows them on End of Group / End of Track, which
    /// this crate gives no properties: they are read and dropped.
    /// `violation` describes the error.
    pub(crate) fn check_properties(
        self,
        has_properties: bool,
        v: Version,
        violation: &'static str,
    ) -> Result<bool, DecodeError> {
        match self {
            WireStatus::Known(ObjectStatus::Normal) => Ok(true),
            _ if !has_properties => Ok(false),
            WireStatus::Known(_) if !v.properties_only_on_normal() => Ok(false),
            _ => Err(DecodeError::ProtocolViolation(violation)),
        }
    }
}

/// Writes a varint that must fit the version's integers: until draft-16 a QUIC varint holds at
/// most 2^62-1, and a larger value cannot be sent.
pub(crate) fn put_int<B: BufMut>(
    buf: &mut B,
    x: u64,
    v: Version,
    field: &'static str,
) -> Result<(), EncodeError> {
    fits(x, v, field)?;
    buf.put_varint(x, v);
    Ok(())
}

/// Checks `x` fits the version's integers (see [`put_int`]) without writing it.
pub(crate) fn fits(x: u64, v: Version, field: &'static str) -> Result<(), EncodeError> {
    if v.quic_varints() && x > QuicVarInt::MAX {
        return Err(EncodeError::Invalid {
            field,
            reason: "larger than 2^62-1, the largest QUIC varint (until draft-16)",
        });
    }
    Ok(())
}

/// Reads the type of a datagram or stream and checks it is the expected one.
pub(crate) fn expect_type<B: Buf>(buf: &mut B, v: Version, want: u64) -> Result<(), DecodeError> {
    let t = buf.get_varint(v)?;
    if t != want {
        return Err(DecodeError::UnknownStreamType(t));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_types() {
        let v = Version::Draft19;
        assert_eq!(
            StreamType::peek(&[0xaf, 0x00], v).unwrap(),
            Some(StreamType::Control)
        );
        assert_eq!(StreamType::peek(&[0xaf], v).unwrap(), None);
        assert_eq!(
            StreamType::peek(&[0x05], v).unwrap(),
            Some(StreamType::Fetch)
        );
        assert_eq!(
            StreamType::peek(&[0x14], v).unwrap(),
            Some(StreamType::Subgroup(0x14))
        );
        assert_eq!(
            StreamType::peek(&[0x16], v),
            Err(DecodeError::InvalidSubgroupType(0x16))
        );
        assert_eq!(
            StreamType::peek(&[0x01], v),
            Err(DecodeError::UnknownStreamType(1))
        );
        let mut pad = Vec::new();
        crate::coding::Vi64::encode(PADDING_STREAM_TYPE, &mut pad);
        assert_eq!(
            StreamType::peek(&pad, v).unwrap(),
            Some(StreamType::Padding)
        );
    }
}
