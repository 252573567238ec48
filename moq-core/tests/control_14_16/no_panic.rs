//! Peer input never panics the draft-14/16 control codec.

use moq_core::message::{
    Envelope, Message, Parameters, RequestOk, RequestType, frame_len, peek_request_id,
};
use moq_core::{Version, property};
use proptest::collection::vec;
use proptest::prelude::*;

use crate::round_trips::samples;
use crate::support::{D14, D15, D16, FAMILY, answer, answers, props, round_trip};

// ---------------------------------------------------------------------------------------------
// No panics on peer input

/// A frame of a type of drafts 14-16 with a random body.
fn framed() -> impl Strategy<Value = Vec<u8>> {
    let types: Vec<u8> = (0u8..0x22).collect();
    (proptest::sample::select(types), vec(any::<u8>(), 0..60)).prop_map(|(t, body)| {
        let mut out = vec![t, 0, body.len() as u8];
        out.extend(body);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Random bodies never panic, and whatever decodes encodes back to the same message.
    #[test]
    fn random_bodies(v in proptest::sample::select(FAMILY.to_vec()), data in framed()) {
        let _ = frame_len(&data, v);
        let _ = peek_request_id(&data, v);
        if let Ok((msg, address)) = Message::decode_addressed(&mut &data[..], v) {
            let env = Envelope { address: address.clone(), answers: answers(data[0]) };
            let bytes = msg.encode_addressed_to_vec(&env, v)
                .unwrap_or_else(|e| panic!("decoded {msg:?} but cannot encode it: {e}"));
            let (again, addr2) = Message::decode_addressed(&mut &bytes[..], v).unwrap();
            prop_assert_eq!(again, msg);
            prop_assert_eq!(addr2, address);
        }
    }

    /// The samples, cut anywhere, are short or rejected, never a panic.
    #[test]
    fn truncated_samples(v in proptest::sample::select(FAMILY.to_vec()), pick in any::<proptest::sample::Index>(), cut in any::<proptest::sample::Index>()) {
        let samples = samples(v);
        let (m, env) = pick.get(&samples);
        let bytes = m.encode_addressed_to_vec(env, v).unwrap();
        let n = cut.index(bytes.len());
        let _ = Message::decode_addressed(&mut &bytes[..n], v);
        // Corrupt one byte of the body.
        let mut bad = bytes.clone();
        let i = cut.index(bad.len());
        bad[i] ^= 0x41;
        let _ = Message::decode_addressed(&mut &bad[..], v);
    }
}

/// The drafts 14-16 predicates answer with ranges of drafts, never one version in between.
#[test]
fn predicates_are_ranges() {
    type Predicate = (&'static str, fn(Version) -> bool);
    let preds: [Predicate; 17] = [
        ("has_request_ok", Version::has_request_ok),
        ("inline_request_fields", Version::inline_request_fields),
        ("params_are_kvps", Version::params_are_kvps),
        ("ignores_unknown_params", Version::ignores_unknown_params),
        ("has_track_extensions", Version::has_track_extensions),
        ("request_error_has_retry", Version::request_error_has_retry),
        ("update_is_answered", Version::update_is_answered),
        ("has_publish_ok", Version::has_publish_ok),
        (
            "namespace_done_by_namespace",
            Version::namespace_done_by_namespace,
        ),
        (
            "unsubscribe_namespace_by_prefix",
            Version::unsubscribe_namespace_by_prefix,
        ),
        ("has_subscribe_options", Version::has_subscribe_options),
        ("allows_empty_namespace", Version::allows_empty_namespace),
        ("allows_empty_prefix", Version::allows_empty_prefix),
        ("goaway_has_timeout", Version::goaway_has_timeout),
        ("has_max_request_id", Version::has_max_request_id),
        (
            "filter_end_group_is_delta",
            Version::filter_end_group_is_delta,
        ),
        ("translates_error_codes", Version::translates_error_codes),
    ];
    let mut all = Version::ALL.to_vec();
    all.sort();
    for (name, f) in preds {
        let answers: Vec<bool> = all.iter().map(|v| f(*v)).collect();
        let changes = answers.windows(2).filter(|w| w[0] != w[1]).count();
        // One change at most, or two for a bounded range (true in the middle).
        assert!(
            changes <= 1 || (changes == 2 && !answers[0] && !answers[answers.len() - 1]),
            "{name}: {answers:?}"
        );
    }
    assert!(D16.has_subscribe_options() && !D15.has_subscribe_options());
    assert!(!Version::Draft18.has_subscribe_options());
}

#[test]
fn request_ok_track_properties_by_version() {
    let ok = Message::from(RequestOk {
        params: Parameters::default(),
        track_properties: props(&[(property::DEFAULT_PUBLISHER_GROUP_ORDER, 2)]),
    });
    let env = answer(1, RequestType::TrackStatus);
    // draft-14 TRACK_STATUS_OK has a Group Order field; draft-15's REQUEST_OK carries it as
    // GROUP_ORDER; draft-16's REQUEST_OK has no place for it, so it is left out.
    round_trip(&ok, &env, D14);
    round_trip(&ok, &env, D15);
    let bytes = ok.encode_addressed_to_vec(&env, D16).unwrap();
    let (back, _) = Message::decode_addressed(&mut &bytes[..], D16).unwrap();
    assert_eq!(back, Message::from(RequestOk::default()));
    // A draft-14 PUBLISH_NAMESPACE_OK carries nothing.
    let with_params = Message::from(RequestOk {
        params: Parameters {
            expires: Some(1),
            ..Default::default()
        },
        ..Default::default()
    });
    assert!(
        with_params
            .encode_addressed_to_vec(&answer(1, RequestType::PublishNamespace), D14)
            .is_err()
    );
}
