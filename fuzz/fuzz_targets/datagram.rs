//! Datagrams: `Datagram::decode` on the input; an object datagram that decodes must encode
//! again and decode to the same value.
//!
//! Input: byte 0 picks the version (bit 0); the rest is the datagram.

#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use moq_core::Version;
use moq_core::data::Datagram;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let v = if first & 1 == 0 {
        Version::Draft18
    } else {
        Version::Draft19
    };
    if let Ok(Datagram::Object(d)) = Datagram::decode(Bytes::copy_from_slice(rest), v) {
        let bytes = match d.encode_to_bytes(v) {
            Ok(b) => b,
            Err(e) => panic!("decoded {d:?} but cannot encode it: {e}"),
        };
        assert_eq!(
            Datagram::decode(bytes, v).ok(),
            Some(Datagram::Object(d)),
            "re-encoded datagram decodes differently"
        );
    }
});
