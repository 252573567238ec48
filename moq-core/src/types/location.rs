//! Location (draft-19 §1.4.2), group order, and the reason phrase (§1.4.4).

use std::fmt;

use bytes::{Buf, BufMut};

use crate::Version;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError, QuicVarInt};

/// A position in a track: `{Group, Object}`, ordered lexicographically (draft-19 §1.4.2).
///
/// ```
/// use moq_core::Location;
/// assert!(Location::new(1, 9) < Location::new(2, 0));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The Group ID.
    pub group: u64,
    /// The Object ID.
    pub object: u64,
}

impl Location {
    /// A location.
    pub const fn new(group: u64, object: u64) -> Self {
        Location { group, object }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{{}, {}}}", self.group, self.object)
    }
}

impl Decode for Location {
    fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        Ok(Location {
            group: buf.get_varint(v)?,
            object: buf.get_varint(v)?,
        })
    }
}

impl Encode for Location {
    fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        put_int(buf, self.group, v)?;
        put_int(buf, self.object, v)
    }
}

/// Writes a variable-length integer in the version's encoding, failing for a value the
/// encoding cannot carry: 2^62 and above with the QUIC varints of drafts 14-16 (RFC 9000
/// §16); every `u64` fits the vi64 of the newer drafts.
pub(crate) fn put_int<B: BufMut + ?Sized>(
    buf: &mut B,
    x: u64,
    v: Version,
) -> Result<(), EncodeError> {
    if v.quic_varints() && x > QuicVarInt::MAX {
        return Err(EncodeError::Invalid {
            field: "integer",
            reason: "2^62 or more does not fit a QUIC varint (drafts 14-16)",
        });
    }
    buf.put_varint(x, v);
    Ok(())
}

/// The order in which groups of one subscription or fetch are delivered (draft-19 §7.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GroupOrder {
    /// Lower Group IDs first (0x1). The default.
    #[default]
    Ascending,
    /// Higher Group IDs first (0x2).
    Descending,
}

impl GroupOrder {
    /// The wire value.
    pub const fn value(self) -> u8 {
        match self {
            GroupOrder::Ascending => 1,
            GroupOrder::Descending => 2,
        }
    }

    /// From the wire value; anything but 1 or 2 is a PROTOCOL_VIOLATION (draft-19 §10.2.9).
    pub fn from_value(value: u64) -> Result<Self, DecodeError> {
        match value {
            1 => Ok(GroupOrder::Ascending),
            2 => Ok(GroupOrder::Descending),
            _ => Err(DecodeError::InvalidValue {
                field: "group order",
                value,
            }),
        }
    }
}

/// The largest Reason Phrase, in bytes (draft-19 §1.4.4).
pub const MAX_REASON_LEN: usize = 1024;

/// Reads a Reason Phrase: length (at most 1024, else PROTOCOL_VIOLATION) then UTF-8 text.
/// Invalid UTF-8 is replaced rather than refused: the phrase is diagnostic only.
pub(crate) fn decode_reason<B: Buf>(buf: &mut B, v: Version) -> Result<String, DecodeError> {
    let bytes = buf.get_len_prefixed(v, "reason phrase", MAX_REASON_LEN as u64)?;
    Ok(lossy_text(&bytes, MAX_REASON_LEN))
}

/// Text from the wire with invalid UTF-8 replaced by U+FFFD, cut at a character boundary to at
/// most `max` bytes. A replacement character takes three bytes where the invalid sequence may
/// take one, so without the cut a 1024-byte reason could decode to more than 1024 bytes and then
/// fail to encode again (when a relay forwards it, say).
pub(crate) fn lossy_text(bytes: &[u8], max: usize) -> String {
    let mut text = String::from_utf8_lossy(bytes).into_owned();
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Writes a Reason Phrase; longer than 1024 bytes is an error.
pub(crate) fn encode_reason<B: BufMut>(
    reason: &str,
    buf: &mut B,
    v: Version,
) -> Result<(), EncodeError> {
    buf.put_len_prefixed(reason.as_bytes(), v, "reason phrase", MAX_REASON_LEN)
}
