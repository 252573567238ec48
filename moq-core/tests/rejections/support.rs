//! Helpers shared by the rejection tests: decoding hand-built bytes and asserting the error and the
//! close code it maps to.

use moq_core::codes::SessionErrorCode;
use moq_core::coding::Vi64;
use moq_core::message::{Message, MessageReader};
use moq_core::{DecodeError, Version};

pub(crate) const D18: Version = Version::Draft18;
pub(crate) const D19: Version = Version::Draft19;
pub(crate) const BOTH: [Version; 2] = [D18, D19];
pub(crate) const VIOLATION: SessionErrorCode = SessionErrorCode::PROTOCOL_VIOLATION;

/// A vi64.
pub(crate) fn vi(x: u64) -> Vec<u8> {
    let mut out = Vec::new();
    Vi64::encode(x, &mut out);
    out
}

/// A framed control message: type, 16-bit length, body.
pub(crate) fn frame(ty: u64, body: &[u8]) -> Vec<u8> {
    let mut out = vi(ty);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

pub(crate) fn decode(bytes: &[u8], v: Version) -> Result<Message, DecodeError> {
    let mut cur = bytes;
    Message::decode(&mut cur, v)
}

/// The message is rejected with exactly `want`, which closes the session with `code`.
pub(crate) fn rejects(bytes: &[u8], v: Version, want: DecodeError, code: SessionErrorCode) {
    let err = decode(bytes, v).unwrap_err();
    assert_eq!(err, want, "under {v}");
    assert_eq!(err.session_code(), code, "{err}");
    if !matches!(want, DecodeError::InvalidFilter(_)) {
        assert_eq!(err.request_code(), None, "{err}");
    }
    // A stream reader reports the same error once the frame is complete.
    let mut r = MessageReader::new(v);
    r.push(bytes);
    assert_eq!(r.next_message(), Err(want));
}

/// SUBSCRIBE (Request ID 9, empty namespace and name) carrying the given parameter bytes.
pub(crate) fn subscribe_with(count: u8, params: &[u8]) -> Vec<u8> {
    let mut body = vec![0x09, 0x00, 0x00, count];
    body.extend_from_slice(params);
    frame(0x03, &body)
}

pub(crate) const SUBSCRIBE: u64 = 0x03;
