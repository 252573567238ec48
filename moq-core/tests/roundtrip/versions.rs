//! Text that is not UTF-8, and what differs between the versions.

use moq_core::coding::Vi64;
use moq_core::message::Message;
use moq_core::{GroupOrder, Version};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::common::*;

// ---------------------------------------------------------------------------------------------
// Text that is not UTF-8

/// A framed message of type `ty` with `body`.
fn frame(ty: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    Vi64::encode(ty, &mut out);
    out.extend_from_slice(&u16::try_from(body.len()).unwrap().to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Decodes `bytes`, then checks the value encodes again and decodes to itself.
fn decode_and_reencode(bytes: &[u8], v: Version) -> Message {
    let msg = Message::decode(&mut &bytes[..], v).unwrap();
    let again = msg.encode_to_vec(v).unwrap();
    assert_eq!(Message::decode(&mut &again[..], v).unwrap(), msg);
    msg
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Reason phrases and MOQT_IMPLEMENTATION need not be UTF-8 on the wire; they decode lossily
    /// into text within the field's limit, so the message always encodes again.
    #[test]
    fn non_utf8_text_reencodes(
        v in version(),
        reason in vec(prop_oneof![3 => any::<u8>(), 1 => 0x80u8..0xC0], 0..=1024),
        implementation in vec(any::<u8>(), 0..300),
    ) {
        let mut body = vec![0x00, 0x00];
        Vi64::encode(reason.len() as u64, &mut body);
        body.extend_from_slice(&reason);
        for ty in [0x05, 0x0B] {
            let text = match decode_and_reencode(&frame(ty, &body), v) {
                Message::RequestError(e) => e.reason,
                Message::PublishDone(d) => d.reason,
                other => panic!("unexpected {other:?}"),
            };
            prop_assert!(text.len() <= 1024);
            if let Ok(s) = std::str::from_utf8(&reason) {
                prop_assert_eq!(text.as_str(), s);
            }
        }

        let mut setup = vec![0x07];
        Vi64::encode(implementation.len() as u64, &mut setup);
        setup.extend_from_slice(&implementation);
        let Message::Setup(s) = decode_and_reencode(&frame(0x2F00, &setup), v) else {
            panic!("not SETUP");
        };
        prop_assert!(s.options.implementation.unwrap().len() <= implementation.len());
    }
}

/// A 1024-byte reason ending in a byte that is not UTF-8: the replacement character does not
/// fit, so the text is cut before it instead of growing past 1024 bytes.
#[test]
fn reason_at_limit_with_invalid_byte() {
    let mut reason = vec![b'a'; 1023];
    reason.push(0xFF);
    let mut body = vec![0x10, 0x00, 0x84, 0x00]; // DOES_NOT_EXIST, no retry, Length 1024
    body.extend_from_slice(&reason);
    for v in [Version::Draft18, Version::Draft19] {
        let Message::RequestError(e) = decode_and_reencode(&frame(0x05, &body), v) else {
            panic!("not REQUEST_ERROR");
        };
        assert_eq!(e.reason, "a".repeat(1023));
    }
    // Where it fits, the replacement character stays.
    let body = [0x10, 0x00, 0x02, b'a', 0xFF];
    let Message::RequestError(e) = decode_and_reencode(&frame(0x05, &body), Version::Draft19)
    else {
        panic!("not REQUEST_ERROR");
    };
    assert_eq!(e.reason, "a\u{FFFD}");
}

// ---------------------------------------------------------------------------------------------
// What differs between the versions

/// The encoder refuses what a version does not have, and accepts it in the version that does.
#[test]
fn version_differences() {
    use moq_core::EncodeError;
    use moq_core::message::{
        Goaway, Parameters, RequestOk, Setup, SetupOptions, Subscribe, SubscribeTracks,
    };
    use moq_core::{RangeFilterKind, RangeFilterParam};

    let (d18, d19) = (Version::Draft18, Version::Draft19);
    let roundtrips = |m: Message, v| {
        let bytes = m.encode_to_vec(v).unwrap();
        assert_eq!(Message::decode(&mut &bytes[..], v).unwrap(), m);
    };

    // GOAWAY's Request ID: draft-18 only.
    let goaway: Message = Goaway {
        request_id: Some(3),
        ..Default::default()
    }
    .into();
    roundtrips(goaway.clone(), d18);
    assert_eq!(
        goaway.encode_to_vec(d19),
        Err(EncodeError::NotInVersion("GOAWAY Request ID", d19))
    );

    // MAX_FILTER_RANGES and MAX_REQUEST_UPDATES: draft-19 only.
    for (options, name) in [
        (
            SetupOptions {
                max_filter_ranges: Some(4),
                ..Default::default()
            },
            "MAX_FILTER_RANGES",
        ),
        (
            SetupOptions {
                max_request_updates: Some(4),
                ..Default::default()
            },
            "MAX_REQUEST_UPDATES",
        ),
    ] {
        let setup: Message = Setup { options }.into();
        roundtrips(setup.clone(), d19);
        assert_eq!(
            setup.encode_to_vec(d18),
            Err(EncodeError::NotInVersion(name, d18))
        );
    }

    let not_allowed = Err(EncodeError::Invalid {
        field: "parameters",
        reason: "a parameter is not allowed in this message or version",
    });

    // Range filters: draft-19 only.
    let filtered: Message = Subscribe {
        params: Parameters {
            range_filters: vec![RangeFilterParam {
                kind: RangeFilterKind::Subgroup,
                filter: None,
            }],
            ..Default::default()
        },
        ..Default::default()
    }
    .into();
    roundtrips(filtered.clone(), d19);
    assert_eq!(filtered.encode_to_vec(d18), not_allowed);

    // GROUP_ORDER: in PUBLISH_OK (a REQUEST_OK) only in draft-18, in SUBSCRIBE_TRACKS only in
    // draft-19.
    let ordered = Parameters {
        group_order: Some(GroupOrder::Descending),
        ..Default::default()
    };
    let publish_ok: Message = RequestOk {
        params: ordered.clone(),
        ..Default::default()
    }
    .into();
    roundtrips(publish_ok.clone(), d18);
    assert_eq!(publish_ok.encode_to_vec(d19), not_allowed);
    let tracks: Message = SubscribeTracks {
        params: ordered,
        ..Default::default()
    }
    .into();
    roundtrips(tracks.clone(), d19);
    assert_eq!(tracks.encode_to_vec(d18), not_allowed);
}
