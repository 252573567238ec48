//! PUBLISH_NAMESPACE and its answers (draft-14 §9.23-§9.27, draft-16 §9.20-§9.24),
//! SUBSCRIBE_NAMESPACE (draft-14 §9.28, draft-16 §9.25), FETCH / FETCH_OK (§9.16-§9.17) and the
//! small messages: byte vectors.

use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::message::{
    Envelope, FetchCancel, FetchOk, FetchType, Goaway, MaxRequestId, Message, OPEN_END, Parameters,
    PublishDone, PublishNamespace, PublishNamespaceCancel, PublishNamespaceDone, RequestError,
    RequestOk, RequestType, RequestsBlocked, SubscribeNamespace, SubscribeTracks, Unsubscribe,
    UnsubscribeNamespace,
};
use moq_core::{DecodeError, EncodeError, Location, TrackNamespace, property};

use crate::support::{
    D14, D15, D16, FAMILY, answer, check, hex, named, ns, props, round_trip, standalone_fetch, to,
    track,
};

// ---------------------------------------------------------------------------------------------
// PUBLISH_NAMESPACE and its answers and ends (draft-14 §9.23-§9.27, draft-16 §9.20-§9.24)

#[test]
fn publish_namespace_family() {
    let n = ns(&["a", "bc"]);
    let pn = PublishNamespace {
        request_id: 4,
        namespace: n.clone(),
        params: Parameters::default(),
    };
    let bytes = hex("06 0008 04 02 0161 026263 00");
    check(
        &bytes,
        pn.clone(),
        &Envelope::default(),
        D14,
        "PUBLISH_NAMESPACE",
    );
    check(&bytes, pn, &Envelope::default(), D16, "PUBLISH_NAMESPACE");

    // PUBLISH_NAMESPACE_OK (draft-14) is a Request ID alone; REQUEST_OK (draft-16) has a
    // parameter count too.
    let ok = RequestOk::default();
    let env = answer(4, RequestType::PublishNamespace);
    check(
        &hex("07 0001 04"),
        ok.clone(),
        &env,
        D14,
        "PUBLISH_NAMESPACE_OK",
    );
    check(&hex("07 0002 04 00"), ok, &env, D16, "REQUEST_OK");

    // PUBLISH_NAMESPACE_ERROR (draft-14) UNINTERESTED is 0x4.
    let err = RequestError::new(RequestErrorCode::UNINTERESTED, "x");
    check(
        &hex("08 0004 04 04 01 78"),
        err,
        &env,
        D14,
        "PUBLISH_NAMESPACE_ERROR",
    );

    // PUBLISH_NAMESPACE_DONE: by namespace (draft-14), by Request ID (draft-16).
    check(
        &hex("09 0006 02 0161 026263"),
        PublishNamespaceDone,
        &named(n.clone()),
        D14,
        "PUBLISH_NAMESPACE_DONE",
    );
    check(
        &hex("09 0001 04"),
        PublishNamespaceDone,
        &to(4),
        D16,
        "PUBLISH_NAMESPACE_DONE",
    );

    // PUBLISH_NAMESPACE_CANCEL: draft-14 UNINTERESTED 0x4 by namespace; draft-16 0x20 by
    // Request ID (aiomoqt's bytes).
    let cancel = PublishNamespaceCancel {
        code: RequestErrorCode::UNINTERESTED,
        reason: "x".into(),
    };
    check(
        &hex("0c 0009 02 0161 026263 04 01 78"),
        cancel.clone(),
        &named(n),
        D14,
        "PUBLISH_NAMESPACE_CANCEL",
    );
    check(
        &hex("0c 0004 04 20 01 78"),
        cancel,
        &to(4),
        D16,
        "PUBLISH_NAMESPACE_CANCEL",
    );
}

// ---------------------------------------------------------------------------------------------
// SUBSCRIBE_NAMESPACE (draft-14 §9.28, draft-16 §9.25)

#[test]
fn subscribe_namespace_draft14_and_16() {
    let sn = SubscribeNamespace {
        request_id: 6,
        prefix: ns(&["a", "bc"]),
        params: Parameters::default(),
    };
    check(
        &hex("11 0008 06 02 0161 026263 00"),
        sn.clone(),
        &Envelope::default(),
        D14,
        "SUBSCRIBE_NAMESPACE",
    );
    // draft-16: Subscribe Options NAMESPACE (0x01) after the prefix.
    check(
        &hex("11 0009 06 02 0161 026263 01 00"),
        sn.clone(),
        &Envelope::default(),
        D16,
        "SUBSCRIBE_NAMESPACE",
    );
    // Options 2 (both) is read as a SUBSCRIBE_NAMESPACE too.
    let both = hex("11 0009 06 02 0161 026263 02 00");
    let (m, _) = Message::decode_addressed(&mut &both[..], D16).unwrap();
    assert_eq!(m, sn.into());
    // Options PUBLISH (0x00) with an empty prefix and FORWARD 0: SUBSCRIBE_TRACKS (aiomoqt's
    // bytes).
    let tracks = SubscribeTracks {
        request_id: 6,
        prefix: TrackNamespace::empty(),
        params: Parameters {
            forward: Some(false),
            ..Default::default()
        },
    };
    check(
        &hex("11 0006 06 00 00 01 10 00"),
        tracks.clone(),
        &Envelope::default(),
        D16,
        "SUBSCRIBE_NAMESPACE",
    );
    // Options 3 does not exist.
    let bad = hex("11 0004 06 00 03 00");
    assert!(matches!(
        Message::decode_addressed(&mut &bad[..], D16),
        Err(DecodeError::InvalidValue { .. })
    ));
    // SUBSCRIBE_TRACKS does not exist before draft-16.
    assert!(matches!(
        Message::from(tracks).encode_to_vec(D15),
        Err(EncodeError::NotInVersion(..))
    ));
    // SUBSCRIBE_NAMESPACE_OK (draft-14) and UNSUBSCRIBE_NAMESPACE by prefix (draft-14) or by
    // Request ID (draft-15).
    check(
        &hex("12 0001 06"),
        RequestOk::default(),
        &answer(6, RequestType::SubscribeNamespace),
        D14,
        "SUBSCRIBE_NAMESPACE_OK",
    );
    check(
        &hex("14 0006 02 0161 026263"),
        UnsubscribeNamespace,
        &named(ns(&["a", "bc"])),
        D14,
        "UNSUBSCRIBE_NAMESPACE",
    );
    check(
        &hex("14 0001 06"),
        UnsubscribeNamespace,
        &to(6),
        D15,
        "UNSUBSCRIBE_NAMESPACE",
    );
    assert_eq!(Message::name_of(0x14, D16), None);
}

/// draft-14: Subscriber Priority 9, Group Order 1, Standalone {1, 0} to {3, 0} (the whole of
/// group 3: the end is exclusive, as the model keeps it) (aiomoqt's bytes).
#[test]
fn fetch_standalone_draft14() {
    let bytes = hex("16 0011 08 09 01 01 02 0161 026263 01 74 0100 0300 00");
    check(
        &bytes,
        standalone_fetch(),
        &Envelope::default(),
        D14,
        "FETCH",
    );
}

/// draft-16: priority and order are parameters 0x20 and 0x22 (aiomoqt's bytes).
#[test]
fn fetch_standalone_draft16() {
    let bytes = hex("16 0013 08 01 02 0161 026263 01 74 0100 0300 02 20 09 02 01");
    check(
        &bytes,
        standalone_fetch(),
        &Envelope::default(),
        D16,
        "FETCH",
    );
}

/// An open end (the model's `OPEN_END`, group 2^64-1) goes as {2^62-1, 0}: the whole of the
/// last group a QUIC varint can name.
#[test]
fn fetch_open_end() {
    let mut f = standalone_fetch();
    f.fetch_type = FetchType::Standalone {
        track: track(&["a"], "t"),
        start: Location::new(1, 0),
        end: OPEN_END,
    };
    for v in FAMILY {
        let bytes = Message::from(f.clone()).encode_to_vec(v).unwrap();
        assert!(
            bytes
                .windows(9)
                .any(|w| w == hex("ffffffffffffffff 00").as_slice()),
            "{v}"
        );
        round_trip(&f.clone().into(), &Envelope::default(), v);
    }
}

/// FETCH_OK: draft-14 Group Order 1 (kept as the track's DEFAULT_PUBLISHER_GROUP_ORDER), End
/// Of Track 1, End {3, 0}; draft-16 without the order, with Track Extensions.
#[test]
fn fetch_ok_draft14_and_16() {
    let ok = FetchOk {
        end_of_track: true,
        end_location: Location::new(3, 0),
        params: Parameters::default(),
        track_properties: props(&[(property::DEFAULT_PUBLISHER_GROUP_ORDER, 1)]),
    };
    check(
        &hex("18 0006 08 01 01 0300 00"),
        ok.clone(),
        &to(8),
        D14,
        "FETCH_OK",
    );
    check(
        &hex("18 0007 08 01 0300 00 2201"),
        ok,
        &to(8),
        D16,
        "FETCH_OK",
    );
    check(&hex("17 0001 08"), FetchCancel, &to(8), D16, "FETCH_CANCEL");
}

// ---------------------------------------------------------------------------------------------
// The small ones

#[test]
fn max_request_id_requests_blocked_unsubscribe_publish_done() {
    for v in FAMILY {
        check(
            &hex("15 0002 40c8"),
            MaxRequestId { request_id: 200 },
            &Envelope::default(),
            v,
            "MAX_REQUEST_ID",
        );
        check(
            &hex("1a 0002 40c8"),
            RequestsBlocked {
                maximum_request_id: 200,
            },
            &Envelope::default(),
            v,
            "REQUESTS_BLOCKED",
        );
        check(&hex("0a 0001 02"), Unsubscribe, &to(2), v, "UNSUBSCRIBE");
        // PUBLISH_DONE EXPIRED is 0x5 until draft-16 (0x6 from draft-18), 3 streams, "bye"
        // (aiomoqt's draft-14 bytes).
        check(
            &hex("0b 0007 02 05 03 03 627965"),
            PublishDone {
                status: PublishDoneCode::EXPIRED,
                stream_count: 3,
                reason: "bye".into(),
            },
            &to(2),
            v,
            "PUBLISH_DONE",
        );
        // GOAWAY is the URI alone.
        check(
            &hex("10 0001 00"),
            Goaway::default(),
            &Envelope::default(),
            v,
            "GOAWAY",
        );
    }
    // MALFORMED_TRACK: 0x7 in drafts 14-15, 0x12 in draft-16.
    let done = |code| PublishDone {
        status: PublishDoneCode(code),
        stream_count: 0,
        reason: String::new(),
    };
    let malformed = Message::from(done(0x12));
    assert_eq!(
        malformed.encode_addressed_to_vec(&to(1), D14).unwrap(),
        hex("0b 0004 01 07 00 00")
    );
    assert_eq!(
        malformed.encode_addressed_to_vec(&to(1), D16).unwrap(),
        hex("0b 0004 01 12 00 00")
    );
    // draft-20's "unknown" Stream Count (2^64-1) is draft-14's 2^62-1.
    let unknown = Message::from(done(0).clone());
    let unknown = match unknown {
        Message::PublishDone(mut d) => {
            d.stream_count = u64::MAX;
            Message::from(d)
        }
        _ => unreachable!(),
    };
    assert_eq!(
        unknown.encode_addressed_to_vec(&to(1), D14).unwrap(),
        hex("0b 000b 01 00 ffffffffffffffff 00")
    );
}
