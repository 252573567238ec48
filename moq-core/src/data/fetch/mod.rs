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
//!
//! Inside: `entry` (the types and flag bits both directions share) ← `read` (FetchReader) and
//! `write` (FetchWriter).

mod entry;
mod read;
mod write;

pub use entry::{FetchEvent, FetchHeader, FetchObject, RangeEnd};
pub use read::FetchReader;
pub use write::FetchWriter;

#[cfg(test)]
mod tests;
