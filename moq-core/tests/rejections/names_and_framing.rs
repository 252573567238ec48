//! Rejections of names (draft-19 §2.4.1) and of message framing (§10).

use moq_core::DecodeError;
use moq_core::message::MessageReader;

use crate::support::{BOTH, D19, SUBSCRIBE, VIOLATION, decode, frame, rejects, subscribe_with, vi};

const NAMESPACE: u64 = 0x08;

// ---------------------------------------------------------------------------------------------
// Names (§2.4.1)

#[test]
fn namespace_with_33_fields() {
    let mut body = vec![0x21];
    for _ in 0..33 {
        body.extend_from_slice(&[0x01, b'a']);
    }
    for v in BOTH {
        rejects(
            &frame(NAMESPACE, &body),
            v,
            DecodeError::TooManyNamespaceFields(33),
            VIOLATION,
        );
        // The same in a SUBSCRIBE_NAMESPACE prefix.
        let mut sn = vec![0x00];
        sn.extend_from_slice(&body);
        sn.push(0x00);
        rejects(
            &frame(0x50, &sn),
            v,
            DecodeError::TooManyNamespaceFields(33),
            VIOLATION,
        );
    }
    // 32 fields is fine.
    let mut ok = vec![0x20];
    for _ in 0..32 {
        ok.extend_from_slice(&[0x01, b'a']);
    }
    assert!(decode(&frame(NAMESPACE, &ok), D19).is_ok());
}

#[test]
fn namespace_with_empty_field() {
    for v in BOTH {
        rejects(
            &frame(NAMESPACE, &[0x02, 0x01, b'a', 0x00]),
            v,
            DecodeError::EmptyNamespaceField(1),
            VIOLATION,
        );
    }
}

#[test]
fn namespace_longer_than_4096() {
    let ns = |a: usize, b: usize| {
        let mut body = vec![0x02];
        body.extend(vi(a as u64));
        body.extend(std::iter::repeat_n(b'a', a));
        body.extend(vi(b as u64));
        body.extend(std::iter::repeat_n(b'b', b));
        body
    };
    for v in BOTH {
        rejects(
            &frame(NAMESPACE, &ns(2048, 2049)),
            v,
            DecodeError::NameTooLong {
                what: "track namespace",
                len: 4097,
            },
            VIOLATION,
        );
        assert!(decode(&frame(NAMESPACE, &ns(2048, 2048)), v).is_ok());
    }
}

#[test]
fn full_track_name_longer_than_4096() {
    let subscribe = |name: usize| {
        let mut body = vec![0x00, 0x01];
        body.extend(vi(4000));
        body.extend(std::iter::repeat_n(b'n', 4000));
        body.extend(vi(name as u64));
        body.extend(std::iter::repeat_n(b't', name));
        body.push(0x00);
        frame(SUBSCRIBE, &body)
    };
    for v in BOTH {
        rejects(
            &subscribe(97),
            v,
            DecodeError::NameTooLong {
                what: "full track name",
                len: 4097,
            },
            VIOLATION,
        );
        assert!(decode(&subscribe(96), v).is_ok());
    }
}

// ---------------------------------------------------------------------------------------------
// Framing (§10)

#[test]
fn unknown_message_type() {
    // 0x1E was PUBLISH_OK; 0x01, 0x20, 0x21, 0x40, 0x41 were old setup messages; 0x11 was
    // SUBSCRIBE_NAMESPACE before draft-18; 0x22 is PUBLISH_STATE_NOTIFY after draft-19.
    for ty in [
        0x1Eu64,
        0x01,
        0x20,
        0x21,
        0x40,
        0x41,
        0x11,
        0x22,
        0x2F01,
        u64::MAX,
    ] {
        for v in BOTH {
            rejects(
                &frame(ty, &[]),
                v,
                DecodeError::UnknownMessageType(ty),
                VIOLATION,
            );
            // A stream reader reports it as soon as the type is readable.
            let mut r = MessageReader::new(v);
            r.push(&vi(ty));
            assert_eq!(r.next_message(), Err(DecodeError::UnknownMessageType(ty)));
        }
    }
}

#[test]
fn body_shorter_than_fields() {
    // NAMESPACE whose Length (4) ends inside a 5-byte field.
    let bytes = [0x08, 0x00, 0x04, 0x01, 0x05, b'a', b'b'];
    for v in BOTH {
        rejects(&bytes, v, DecodeError::BodyTooShort("NAMESPACE"), VIOLATION);
    }
    // SUBSCRIBE that stops before its parameters.
    rejects(
        &frame(SUBSCRIBE, &[0x00, 0x00, 0x00]),
        D19,
        DecodeError::BodyTooShort("SUBSCRIBE"),
        VIOLATION,
    );
}

#[test]
fn trailing_bytes_after_last_field() {
    let bytes = [0x08, 0x00, 0x04, 0x01, 0x01, b'a', 0xFF];
    for v in BOTH {
        rejects(
            &bytes,
            v,
            DecodeError::TrailingBytes {
                message: "NAMESPACE",
                extra: 1,
            },
            VIOLATION,
        );
    }
    rejects(
        &subscribe_with(0, &[0x00, 0x00]),
        D19,
        DecodeError::TrailingBytes {
            message: "SUBSCRIBE",
            extra: 2,
        },
        VIOLATION,
    );
}
