//! Control messages: `Message::decode` on the whole input and `MessageReader` fed in chunks.
//! Whatever decodes must encode again and decode to the same value.
//!
//! Input: byte 0 picks the version (bit 0) and the chunk size (bits 1-7); the rest is the
//! stream.

#![no_main]

use libfuzzer_sys::fuzz_target;
use moq_core::Version;
use moq_core::message::{Message, MessageReader, frame_len, peek_request_id};

fn reencodes(msg: &Message, v: Version) {
    let bytes = match msg.encode_to_vec(v) {
        Ok(b) => b,
        Err(e) => panic!("decoded {msg:?} under {v} but cannot encode it: {e}"),
    };
    match Message::decode(&mut &bytes[..], v) {
        Ok(back) => assert_eq!(&back, msg, "re-encoded message decodes differently"),
        Err(e) => panic!("re-encoded {msg:?} does not decode under {v}: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let v = if first & 1 == 0 {
        Version::Draft18
    } else {
        Version::Draft19
    };
    let chunk = usize::from(first >> 1).max(1);

    if let Ok(msg) = Message::decode(&mut &rest[..], v) {
        reencodes(&msg, v);
    }
    let _ = frame_len(rest, v);
    let _ = peek_request_id(rest, v);

    let mut reader = MessageReader::new(v);
    'feed: for part in rest.chunks(chunk) {
        reader.push(part);
        loop {
            match reader.next_message() {
                Ok(Some(msg)) => reencodes(&msg, v),
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
    }
});
