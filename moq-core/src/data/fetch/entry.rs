//! What a fetch stream carries, shared by its reader and writer: FETCH_HEADER, the object and
//! End of Range types, the serialization flag bits and the "prior object" state.

use bytes::{Buf, BufMut, Bytes};

use super::super::{FETCH_STREAM_TYPE, expect_type, fits};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};
use crate::types::kvp::Properties;
use crate::types::location::Location;

pub(super) const SUBGROUP_MASK: u64 = 0x03;
/// The Object ID field is present: absolute until draft-17, a delta from draft-18.
pub(super) const OBJECT_FIELD: u64 = 0x04;
/// The Group ID field is present: absolute until draft-17, a delta from draft-18.
pub(super) const GROUP_FIELD: u64 = 0x08;
pub(super) const PRIORITY: u64 = 0x10;
pub(super) const PROPERTIES: u64 = 0x20;
/// From draft-16.
pub(super) const DATAGRAM: u64 = 0x40;
/// From draft-16.
pub(super) const END_OF_NON_EXISTENT_RANGE: u64 = 0x8C;
/// From draft-16.
pub(super) const END_OF_UNKNOWN_RANGE: u64 = 0x10C;
/// draft-21 §11.4.1.2 (from draft-20).
pub(super) const END_OF_TIMED_OUT_RANGE: u64 = 0x20C;

/// The flag bits a fetch object may set under `v` (from draft-15): the subgroup mode and the
/// presence bits (0x3F), and DATAGRAM (0x40) from draft-16.
pub(super) const fn defined_flags(v: Version) -> u64 {
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

/// What a [`FetchReader`](crate::data::FetchReader) produces.
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
pub(super) struct Prior {
    /// Group and Object of the prior entry (object or end of range).
    location: Option<Location>,
    /// Subgroup of the last actual object (`None` if it was a datagram or none yet).
    subgroup: Option<u64>,
    /// Priority of the last actual object.
    priority: Option<u8>,
}

impl Prior {
    /// Group and Object of the prior entry.
    pub(super) fn location(&self) -> Option<Location> {
        self.location
    }

    /// Subgroup of the last actual object.
    pub(super) fn subgroup(&self) -> Option<u64> {
        self.subgroup
    }

    /// Priority of the last actual object.
    pub(super) fn priority(&self) -> Option<u8> {
        self.priority
    }

    /// An object (of any status) was the entry at `location`.
    pub(super) fn object(&mut self, location: Location, subgroup: Option<u64>, priority: u8) {
        self.location = Some(location);
        self.subgroup = subgroup;
        self.priority = Some(priority);
    }

    /// An End of Range marker was the entry at `location`.
    pub(super) fn range_end(&mut self, location: Location) {
        self.location = Some(location);
    }
}
