//! Rejections of Message Parameters (draft-19 §10.2) and the allowed-message table of every
//! parameter (§10.2.x "MAY appear in", §10.19.1).

use moq_core::DecodeError;
use moq_core::codes::SessionErrorCode;
use moq_core::message::{Message, ParamContext};

use crate::support::{BOTH, D18, D19, VIOLATION, decode, frame, rejects, subscribe_with, vi};

// ---------------------------------------------------------------------------------------------
// Message Parameters (§10.2)

#[test]
fn unknown_parameter() {
    for v in BOTH {
        rejects(
            &subscribe_with(1, &[0x05, 0x00]),
            v,
            DecodeError::UnknownParameter(0x05),
            VIOLATION,
        );
        // INCLUDE_PROPERTIES (0x35) only exists after draft-19.
        rejects(
            &subscribe_with(1, &[0x35, 0x00]),
            v,
            DecodeError::UnknownParameter(0x35),
            VIOLATION,
        );
    }
}

#[test]
fn parameter_in_wrong_message() {
    for v in BOTH {
        // FILL_TIMEOUT is for FETCH only.
        rejects(
            &subscribe_with(1, &[0x0A, 0x00]),
            v,
            DecodeError::ParameterNotAllowed {
                param: 0x0A,
                message: "SUBSCRIBE",
            },
            VIOLATION,
        );
        // RENDEZVOUS_TIMEOUT is for SUBSCRIBE only. FETCH: Request ID 0, Relative Joining.
        rejects(
            &frame(0x16, &[0x00, 0x02, 0x00, 0x00, 0x01, 0x04, 0x00]),
            v,
            DecodeError::ParameterNotAllowed {
                param: 0x04,
                message: "FETCH",
            },
            VIOLATION,
        );
    }
    // GROUP_ORDER: in SUBSCRIBE_TRACKS only from draft-19, in PUBLISH_OK only in draft-18.
    let tracks = frame(0x51, &[0x00, 0x00, 0x01, 0x22, 0x01]);
    rejects(
        &tracks,
        D18,
        DecodeError::ParameterNotAllowed {
            param: 0x22,
            message: "SUBSCRIBE_TRACKS",
        },
        VIOLATION,
    );
    assert!(decode(&tracks, D19).is_ok());
    let ok = frame(0x07, &[0x01, 0x22, 0x01]);
    rejects(
        &ok,
        D19,
        DecodeError::ParameterNotAllowed {
            param: 0x22,
            message: "REQUEST_OK",
        },
        VIOLATION,
    );
    let Message::RequestOk(ok) = decode(&ok, D18).unwrap() else {
        panic!("not REQUEST_OK");
    };
    ok.validate(ParamContext::PublishOk, D18).unwrap();
}

#[test]
fn duplicate_non_repeatable_parameter() {
    for v in BOTH {
        rejects(
            &subscribe_with(2, &[0x10, 0x01, 0x00, 0x01]),
            v,
            DecodeError::DuplicateParameter(0x10),
            VIOLATION,
        );
        // AUTHORIZATION_TOKEN may repeat.
        let tokens = [0x03, 0x02, 0x02, 0x01, 0x00, 0x02, 0x02, 0x02];
        assert!(decode(&subscribe_with(2, &tokens), v).is_ok());
        // A known Setup Option may not repeat either (PATH twice).
        rejects(
            &frame(0x2F00, &[0x01, 0x01, b'/', 0x00, 0x01, b'/']),
            v,
            DecodeError::DuplicateParameter(0x01),
            VIOLATION,
        );
    }
}

#[test]
fn forward_two() {
    for v in BOTH {
        rejects(
            &subscribe_with(1, &[0x10, 0x02]),
            v,
            DecodeError::InvalidValue {
                field: "FORWARD",
                value: 2,
            },
            VIOLATION,
        );
    }
}

#[test]
fn group_order_three() {
    for v in BOTH {
        for bad in [0u8, 3, 0xFF] {
            rejects(
                &subscribe_with(1, &[0x22, bad]),
                v,
                DecodeError::InvalidValue {
                    field: "group order",
                    value: bad.into(),
                },
                VIOLATION,
            );
        }
    }
}

#[test]
fn location_filter_type_five() {
    for v in BOTH {
        rejects(
            &subscribe_with(1, &[0x21, 0x01, 0x05]),
            v,
            DecodeError::InvalidValue {
                field: "location filter type",
                value: 5,
            },
            VIOLATION,
        );
    }
}

#[test]
fn absolute_range_end_group_overflow() {
    let filter = |delta: u64| {
        let mut body = vec![0x04];
        body.extend(vi(u64::MAX)); // Start Group
        body.push(0x00); // Start Object
        body.extend(vi(delta)); // End Group Delta
        let mut p = vec![0x21, u8::try_from(body.len()).unwrap()];
        p.extend(body);
        subscribe_with(1, &p)
    };
    for v in BOTH {
        rejects(
            &filter(1),
            v,
            DecodeError::Overflow("location filter end group"),
            VIOLATION,
        );
        assert!(decode(&filter(0), v).is_ok());
    }
}

#[test]
fn parameter_type_overflow() {
    // FORWARD (0x10), then a Type Delta of 2^64-1.
    let mut p = vec![0x10, 0x01];
    p.extend(vi(u64::MAX));
    p.push(0x00);
    for v in BOTH {
        rejects(
            &subscribe_with(2, &p),
            v,
            DecodeError::TypeOverflow,
            VIOLATION,
        );
    }
}

#[test]
fn malformed_authorization_token() {
    let kvf = SessionErrorCode::KEY_VALUE_FORMATTING_ERROR;
    for v in BOTH {
        // Alias Type 9 does not exist.
        rejects(
            &subscribe_with(1, &[0x03, 0x01, 0x09]),
            v,
            DecodeError::KeyValueFormatting("authorization token: unknown alias type"),
            kvf,
        );
        // DELETE with a byte after the alias.
        rejects(
            &subscribe_with(1, &[0x03, 0x03, 0x00, 0x05, 0xFF]),
            v,
            DecodeError::KeyValueFormatting("authorization token: trailing bytes"),
            kvf,
        );
        // USE_ALIAS without its alias.
        rejects(
            &subscribe_with(1, &[0x03, 0x01, 0x02]),
            v,
            DecodeError::KeyValueFormatting("authorization token"),
            kvf,
        );
        // The same in a SETUP option.
        rejects(
            &frame(0x2F00, &[0x03, 0x01, 0x09]),
            v,
            DecodeError::KeyValueFormatting("authorization token: unknown alias type"),
            kvf,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The allowed-message table of every Message Parameter (§10.2.x "MAY appear in", §10.19.1)

/// Every role a parameter block can have, with its name.
const CONTEXTS: [ParamContext; 20] = [
    ParamContext::Subscribe,
    ParamContext::SubscribeOk,
    ParamContext::Publish,
    ParamContext::PublishOk,
    ParamContext::Fetch,
    ParamContext::FetchOk,
    ParamContext::TrackStatus,
    ParamContext::TrackStatusOk,
    ParamContext::PublishNamespace,
    ParamContext::PublishNamespaceOk,
    ParamContext::SubscribeNamespace,
    ParamContext::SubscribeNamespaceOk,
    ParamContext::SubscribeTracks,
    ParamContext::SubscribeTracksOk,
    ParamContext::UpdateSubscription,
    ParamContext::UpdateFetch,
    ParamContext::UpdatePublishNamespace,
    ParamContext::UpdateSubscribeNamespace,
    ParamContext::UpdateSubscribeTracks,
    ParamContext::RequestUpdateOk,
];

/// A valid value of parameter `ty`, as it follows the Type on the wire.
fn param_value(ty: u64) -> Vec<u8> {
    match ty {
        0x03 => vec![0x02, 0x03, 0x00], // Token: USE_VALUE, Token Type 0, empty value
        0x09 => vec![0x01, 0x02],       // Location {1, 2}
        0x10 | 0x22 => vec![0x01],      // FORWARD 1 / GROUP_ORDER Ascending
        0x20 => vec![0x05],             // SUBSCRIBER_PRIORITY
        0x21 => vec![0x01, 0x01],       // LOCATION_FILTER: Next Group Start
        0x25..=0x27 => vec![0x02, 0x00, 0x00], // SetID 0, open range from 0
        0x28 | 0x29 => vec![0x03, 0x00, 0x02, 0x00], // SetID 0, Property Type 2, from 0
        0x34 => vec![0x01, 0x01, b'a'], // Track Namespace (a)
        _ => vec![0x05],                // varints
    }
}

/// draft-19 §10.2.1 with each parameter's "MAY appear in" (§10.2.2-§10.2.19) and §10.19.1 (a
/// parameter valid in SUBSCRIBE is valid in SUBSCRIBE_TRACKS): `param_allowed` says exactly
/// this for every parameter and role, and decoding a parameter in any other role is a
/// PROTOCOL_VIOLATION (draft-18: GROUP_ORDER in PUBLISH_OK, not SUBSCRIBE_TRACKS; no Range
/// Filters).
#[test]
fn every_parameter_is_allowed_exactly_where_the_draft_lists_it() {
    use ParamContext as C;
    let sub_like = [C::Subscribe, C::SubscribeTracks];
    let on_subscription = |more: &[C]| {
        let mut v = sub_like.to_vec();
        v.extend_from_slice(more);
        v
    };
    let all_updates = [
        C::UpdateSubscription,
        C::UpdateFetch,
        C::UpdatePublishNamespace,
        C::UpdateSubscribeNamespace,
        C::UpdateSubscribeTracks,
    ];
    let range_filter = on_subscription(&[C::Fetch, C::PublishOk, C::UpdateSubscription]);
    let table: Vec<(u64, Vec<C>)> = vec![
        (
            0x02,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        (0x03, {
            let mut v = vec![
                C::Publish,
                C::Subscribe,
                C::SubscribeNamespace,
                C::SubscribeTracks,
                C::PublishNamespace,
                C::TrackStatus,
                C::Fetch,
            ];
            v.extend(all_updates);
            v
        }),
        (0x04, on_subscription(&[])),
        (
            0x06,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        (
            0x08,
            vec![
                // Accepted in TRACK_STATUS_OK (draft-19 §10.14 reading), never sent there.
                C::TrackStatusOk,
                C::SubscribeOk,
                C::Publish,
                C::PublishOk,
                C::SubscribeNamespaceOk,
                C::SubscribeTracksOk,
                C::PublishNamespaceOk,
                C::RequestUpdateOk,
            ],
        ),
        (
            0x09,
            vec![
                C::SubscribeOk,
                C::Publish,
                C::RequestUpdateOk,
                C::TrackStatusOk,
            ],
        ),
        (0x0A, vec![C::Fetch]),
        (
            0x10,
            on_subscription(&[C::UpdateSubscription, C::Publish, C::PublishOk]),
        ),
        (
            0x20,
            on_subscription(&[
                C::Fetch,
                C::UpdateSubscription,
                C::UpdateFetch,
                C::PublishOk,
            ]),
        ),
        (
            0x21,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        // draft-19 §10.19.1: in a PUBLISH resulting from SUBSCRIBE_TRACKS (§10.2.9 omits it).
        (
            0x22,
            vec![C::Subscribe, C::SubscribeTracks, C::Fetch, C::Publish],
        ),
        (0x25, range_filter.clone()),
        (0x26, range_filter.clone()),
        (0x27, range_filter.clone()),
        (0x28, range_filter),
        (0x29, vec![C::SubscribeTracks, C::UpdateSubscribeTracks]),
        (
            0x32,
            on_subscription(&[C::PublishOk, C::UpdateSubscription]),
        ),
        (
            0x34,
            vec![C::UpdateSubscribeNamespace, C::UpdateSubscribeTracks],
        ),
    ];
    for v in BOTH {
        for (ty, allowed) in &table {
            let allowed: Vec<C> = match (v, *ty) {
                (D18, 0x22) => vec![C::Subscribe, C::PublishOk, C::Fetch],
                (D18, 0x25..=0x29) => vec![],
                _ => allowed.clone(),
            };
            let mut bytes = vec![0x01];
            bytes.extend(vi(*ty));
            bytes.extend(param_value(*ty));
            for ctx in CONTEXTS {
                let want = allowed.contains(&ctx);
                assert_eq!(
                    moq_core::message::param_allowed(*ty, ctx, v),
                    want,
                    "{ty:#x} in {} under {v}",
                    ctx.name()
                );
                let got = moq_core::message::Parameters::decode(&mut &bytes[..], ctx, v);
                if want {
                    assert!(got.is_ok(), "{ty:#x} in {}: {got:?}", ctx.name());
                } else if allowed.is_empty() {
                    assert_eq!(got, Err(DecodeError::UnknownParameter(*ty)));
                } else {
                    let err = got.unwrap_err();
                    assert_eq!(
                        err,
                        DecodeError::ParameterNotAllowed {
                            param: *ty,
                            message: ctx.name()
                        }
                    );
                    assert_eq!(err.session_code(), VIOLATION);
                }
            }
        }
        // Nothing else is a parameter: the gaps in the table are unknown types.
        for ty in (0u64..0x40).filter(|t| !table.iter().any(|(k, _)| k == t)) {
            assert!(
                CONTEXTS
                    .iter()
                    .all(|c| !moq_core::message::param_allowed(ty, *c, v)),
                "{ty:#x} under {v}"
            );
        }
    }
}
