//! Helpers shared by the wire-vector tests: checking a vector both ways.

use moq_core::message::Message;
use moq_core::{DecodeError, TrackNamespace, Version};

pub(crate) const D18: Version = Version::Draft18;
pub(crate) const D19: Version = Version::Draft19;

/// Concatenates byte pieces.
pub(crate) fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Decoding `bytes` gives `msg` and consumes them all; encoding `msg` gives `bytes`.
pub(crate) fn check(bytes: &[u8], msg: impl Into<Message>, v: Version) {
    let msg = msg.into();
    let mut cur = bytes;
    assert_eq!(
        Message::decode(&mut cur, v).unwrap(),
        msg,
        "decode under {v}"
    );
    assert!(cur.is_empty(), "bytes left over");
    assert_eq!(msg.encode_to_vec(v).unwrap(), bytes, "encode under {v}");
}

pub(crate) fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

pub(crate) fn decode(bytes: &[u8], v: Version) -> Result<Message, DecodeError> {
    Message::decode(&mut &bytes[..], v)
}
