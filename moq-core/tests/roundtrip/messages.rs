//! Round trips of every control message: encode, decode, re-encode to the same bytes, and byte by
//! byte through `MessageReader`.

use moq_core::Version;
use moq_core::coding::Vi64;
use moq_core::message::{Message, MessageReader, Namespace, NamespaceDone, frame_len};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::common::*;

/// Encodes, decodes, and checks the result equals the original, consumes every byte, and
/// re-encodes to the same bytes.
fn check_message(msg: &Message, v: Version) {
    let bytes = msg.encode_to_vec(v).unwrap();
    assert!(bytes.len() <= 9 + 2 + 65535);

    let mut cur = &bytes[..];
    assert_eq!(Vi64::decode(&mut cur).unwrap(), msg.type_code());
    let len = u16::from_be_bytes([cur[0], cur[1]]) as usize;
    assert_eq!(len, cur.len() - 2, "Length must cover exactly the body");
    assert_eq!(frame_len(&bytes, v).unwrap(), Some(bytes.len()));

    let mut cur = &bytes[..];
    let back = Message::decode(&mut cur, v).unwrap();
    assert_eq!(&back, msg);
    assert!(cur.is_empty());
    assert_eq!(
        back.encode_to_vec(v).unwrap(),
        bytes,
        "encoding is canonical"
    );
}

fn with_version<S: Strategy>(f: fn(Version) -> S) -> impl Strategy<Value = (Version, S::Value)> {
    version().prop_flat_map(move |v| (Just(v), f(v)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn setup_round_trips((v, m) in with_version(setup)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn goaway_round_trips((v, m) in with_version(goaway)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn subscribe_round_trips((v, m) in with_version(subscribe)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn subscribe_ok_round_trips((v, m) in with_version(subscribe_ok)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn request_update_round_trips((v, m) in with_version(request_update)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_round_trips((v, m) in with_version(publish)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_done_round_trips(v in version(), m in publish_done()) {
        check_message(&m.into(), v);
    }

    #[test]
    fn fetch_round_trips((v, m) in with_version(fetch)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn fetch_ok_round_trips((v, m) in with_version(fetch_ok)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn track_status_round_trips((v, m) in with_version(track_status)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_namespace_round_trips((v, m) in with_version(publish_namespace)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn namespace_round_trips(v in version(), suffix in namespace()) {
        check_message(&Namespace { suffix, cluster: None }.into(), v);
    }

    #[test]
    fn namespace_done_round_trips(v in version(), suffix in namespace()) {
        check_message(&NamespaceDone { suffix }.into(), v);
    }

    #[test]
    fn subscribe_namespace_round_trips((v, m) in with_version(subscribe_namespace)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn subscribe_tracks_round_trips((v, m) in with_version(subscribe_tracks)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn publish_skipped_round_trips(v in version(), m in publish_skipped()) {
        check_message(&m.into(), v);
    }

    #[test]
    fn request_ok_round_trips((v, m) in with_version(request_ok)) {
        check_message(&m.into(), v);
    }

    #[test]
    fn request_error_round_trips(v in version(), m in request_error()) {
        check_message(&m.into(), v);
    }

    /// One byte at a time, the reader yields nothing until the last byte, then the message.
    #[test]
    fn message_reader_byte_by_byte((v, msg) in versioned_message()) {
        let bytes = msg.encode_to_vec(v).unwrap();
        let mut r = MessageReader::new(v);
        for (i, b) in bytes.iter().enumerate() {
            r.push(std::slice::from_ref(b));
            let got = r.next_message().unwrap();
            if i + 1 < bytes.len() {
                prop_assert_eq!(got, None);
            } else {
                prop_assert_eq!(got.as_ref(), Some(&msg));
            }
        }
        prop_assert_eq!(r.buffered(), 0);
    }

    /// Several messages back to back, in arbitrary chunks, come out in order.
    #[test]
    fn message_reader_chunked(
        (v, msgs) in version().prop_flat_map(|v| (Just(v), vec(any_message(v), 1..5))),
        sizes in vec(1usize..300, 0..8),
    ) {
        let mut bytes = Vec::new();
        for m in &msgs {
            m.encode(&mut bytes, v).unwrap();
        }
        let mut r = MessageReader::new(v);
        let mut got = Vec::new();
        for chunk in chunks(&bytes, &sizes) {
            r.push(chunk);
            while let Some(m) = r.next_message().unwrap() {
                got.push(m);
            }
        }
        prop_assert_eq!(got, msgs);
        prop_assert_eq!(r.buffered(), 0);
    }
}
