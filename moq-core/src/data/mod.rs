//! The data plane (draft-19 §11): unidirectional stream types, subgroup and fetch streams,
//! datagrams and padding.
//!
//! Streams are decoded incrementally: a reader is fed bytes as they arrive
//! ([`bytes::BytesMut`]), returns `Ok(None)` when it needs more, and hands out payload in
//! zero-copy chunks so large objects can be forwarded before they are complete.

mod datagram;
mod fetch;
mod subgroup;

pub use datagram::{Datagram, DatagramBody, ObjectDatagram, PADDING_DATAGRAM_TYPE};
pub use fetch::{FetchEvent, FetchHeader, FetchObject, FetchReader, FetchWriter, RangeEnd};
pub use subgroup::{
    SubgroupEvent, SubgroupHeader, SubgroupId, SubgroupObject, SubgroupReader, SubgroupWriter,
};

use bytes::Buf;

use crate::Version;
use crate::coding::{BufExt, DecodeError};

/// The stream type of a PADDING stream (draft-19 §11.5.1).
pub const PADDING_STREAM_TYPE: u64 = 0x132B3E28;
/// The stream type of a FETCH_HEADER stream (draft-19 §11.4.4).
pub const FETCH_STREAM_TYPE: u64 = 0x05;
/// The stream type of a control stream: SETUP's message type (draft-19 §3.4).
pub const CONTROL_STREAM_TYPE: u64 = 0x2F00;

/// What a unidirectional stream carries, from its first varint (draft-19 §3.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamType {
    /// A control stream; the type is the first field of SETUP.
    Control,
    /// A subgroup stream; the type's flags follow.
    Subgroup(u8),
    /// A fetch response stream.
    Fetch,
    /// Padding, to be discarded.
    Padding,
}

impl StreamType {
    /// Classifies a stream type; an unknown one closes the session (draft-19 §3.4).
    pub fn from_code(code: u64) -> Result<StreamType, DecodeError> {
        match code {
            CONTROL_STREAM_TYPE => Ok(StreamType::Control),
            FETCH_STREAM_TYPE => Ok(StreamType::Fetch),
            PADDING_STREAM_TYPE => Ok(StreamType::Padding),
            c if SubgroupHeader::valid_type(c) => Ok(StreamType::Subgroup(c as u8)),
            c if c < 0x80 && c & 0x90 == 0x10 => Err(DecodeError::InvalidSubgroupType(c)),
            c => Err(DecodeError::UnknownStreamType(c)),
        }
    }

    /// Reads the type at the start of `buf` without consuming it; `Ok(None)` if not all there.
    pub fn peek(buf: &[u8], v: Version) -> Result<Option<StreamType>, DecodeError> {
        let mut cur = buf;
        match cur.get_varint(v) {
            Ok(code) => StreamType::from_code(code).map(Some),
            Err(DecodeError::Short) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The status of an object delivered by a subscription (draft-19 §11.2.1.1).
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
