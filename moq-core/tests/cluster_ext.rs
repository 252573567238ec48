//! The MoQ Cluster extension's rows (draft-lcurley-moq-cluster): HOP_ID and RELAY_COST Setup
//! Options, HOP_PATH and ROUTE_COST Message Parameters, the extended NAMESPACE. Round trips
//! at every draft that carries them (17 on), and what the drafts before do with them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use bytes::Bytes;
use moq_core::message::cluster::{self, HopPath};
use moq_core::message::{
    ClientSetup, Message, Namespace, ParamContext, Parameters, PublishNamespace, Setup,
    SetupOptions, param_allowed,
};
use moq_core::{DecodeError, EncodeError, KeyValuePair, KvpValue, TrackNamespace, Version};

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::new(fields.iter().map(|f| f.as_bytes().to_vec())).unwrap()
}

fn with_cluster() -> impl Iterator<Item = Version> {
    Version::ALL
        .iter()
        .copied()
        .filter(|v| v.has_cluster_extension())
}

fn without_cluster() -> impl Iterator<Item = Version> {
    Version::ALL
        .iter()
        .copied()
        .filter(|v| !v.has_cluster_extension())
}

fn roundtrip(msg: &Message, v: Version) -> Message {
    let bytes = msg.encode_to_vec(v).unwrap();
    let back = Message::decode(&mut &bytes[..], v).unwrap();
    assert_eq!(
        back.encode_to_vec(v).unwrap(),
        bytes,
        "{v:?}: re-encodes the same"
    );
    back
}

#[test]
fn code_points_and_parity() {
    // Odd types are length-prefixed, even ones bare varints: the shapes depend on it.
    assert_eq!(
        (
            cluster::HOP_ID,
            cluster::RELAY_COST,
            cluster::HOP_PATH,
            cluster::ROUTE_COST
        ),
        (0x40B54, 0x40B56, 0x40B57, 0x40B58)
    );
    assert_eq!(cluster::HOP_PATH % 2, 1);
    assert_eq!(cluster::DEFAULT_COST, 1);
}

#[test]
fn setup_options_round_trip_from_draft_17() {
    for v in with_cluster() {
        let setup = Setup {
            options: SetupOptions {
                hop_id: Some(0x1234_5678_9abc),
                relay_cost: Some(0),
                ..Default::default()
            },
        };
        let back = roundtrip(&setup.clone().into(), v);
        assert_eq!(back, Message::from(setup), "{v:?}");
    }
}

#[test]
fn setup_options_before_draft_17_are_unknown_ones() {
    let pair = SetupOptions {
        unknown: vec![KeyValuePair {
            key: cluster::HOP_ID,
            value: KvpValue::Int(9),
        }],
        ..Default::default()
    };
    for v in without_cluster() {
        // Ours refuses to send them typed there ...
        let typed = SetupOptions {
            hop_id: Some(5),
            ..Default::default()
        };
        let setup = ClientSetup {
            versions: Vec::new(),
            max_request_id: None,
            options: typed,
        };
        assert_eq!(
            Message::from(setup).encode_to_vec(v),
            Err(EncodeError::NotInVersion("HOP_ID", v))
        );
        // ... and a peer's pair is kept as an unknown option, otherwise ignored (draft-14 §9.3,
        // draft-16 §9.3: unknown setup parameters are ignored).
        let msg: Message = ClientSetup {
            versions: Vec::new(),
            max_request_id: None,
            options: pair.clone(),
        }
        .into();
        let Message::ClientSetup(back) = roundtrip(&msg, v) else {
            panic!("not CLIENT_SETUP")
        };
        assert_eq!(
            (back.options.hop_id, back.options.unknown.len()),
            (None, 1),
            "{v:?}"
        );
    }
    // From draft-17 the same pair is the typed option.
    for v in with_cluster() {
        let Message::Setup(s) = roundtrip(
            &Setup {
                options: pair.clone(),
            }
            .into(),
            v,
        ) else {
            panic!("not SETUP")
        };
        assert_eq!(
            (s.options.hop_id, s.options.unknown.len()),
            (Some(9), 0),
            "{v:?}"
        );
    }
}

#[test]
fn hop_path_and_route_cost_on_publish_namespace() {
    let params = Parameters::default().with_cluster(
        HopPath::new(vec![7, 0, 300, 0x3FFF_FFFF_FFFF_FFFF]),
        Some(2),
    );
    for v in with_cluster() {
        let msg: Message = PublishNamespace {
            request_id: 2,
            namespace: ns(&["a", "b"]),
            params: params.clone(),
        }
        .into();
        let back = roundtrip(&msg, v);
        assert_eq!(back, msg, "{v:?}");
        assert!(param_allowed(
            cluster::HOP_PATH,
            ParamContext::UpdatePublishNamespace,
            v
        ));
        assert!(!param_allowed(
            cluster::HOP_PATH,
            ParamContext::Subscribe,
            v
        ));
    }
    for v in without_cluster() {
        let msg: Message = PublishNamespace {
            request_id: 2,
            namespace: ns(&["a"]),
            params: params.clone(),
        }
        .into();
        assert!(msg.encode_to_vec(v).is_err(), "{v:?}: not in the version");
    }
}

#[test]
fn hop_path_wire_shape_has_no_count() {
    // One parameter: type delta 0x40B57 (draft-19's 3-byte varint), Length 3, the three
    // one-byte hops.
    let params = Parameters::default().with_cluster(HopPath::new(vec![1, 2, 3]), None);
    let mut buf = Vec::new();
    params
        .encode(&mut buf, ParamContext::PublishNamespace, Version::Draft19)
        .unwrap();
    assert_eq!(buf, vec![0x01, 0xC4, 0x0B, 0x57, 0x03, 0x01, 0x02, 0x03]);
}

/// A HOP_PATH value with `body` as its bytes, in a PUBLISH_NAMESPACE parameter block.
fn decode_hop_path(body: &[u8]) -> Result<Parameters, DecodeError> {
    let mut buf = vec![0x01, 0xC4, 0x0B, 0x57, body.len() as u8];
    buf.extend_from_slice(body);
    Parameters::decode(
        &mut &buf[..],
        ParamContext::PublishNamespace,
        Version::Draft19,
    )
}

#[test]
fn malformed_hop_paths_are_refused() {
    assert_eq!(
        decode_hop_path(&[4, 8]).unwrap().hop_path(),
        HopPath::new(vec![4, 8]).as_ref()
    );
    // Empty, a repeated non-zero hop, a varint cut by the Length: each a violation.
    assert!(matches!(
        decode_hop_path(&[]),
        Err(DecodeError::InvalidValue { .. })
    ));
    assert!(matches!(
        decode_hop_path(&[4, 8, 4]),
        Err(DecodeError::InvalidValue { value: 4, .. })
    ));
    assert!(decode_hop_path(&[0x81]).is_err());
    // 0 names no hop: it may repeat.
    assert!(decode_hop_path(&[0, 5, 0]).is_ok());
}

#[test]
fn hop_path_loop_and_append() {
    let path = HopPath::new(vec![10, 20]).unwrap();
    assert!(path.contains(20));
    assert!(!path.contains(cluster::UNKNOWN_HOP));
    assert_eq!(path.appended(30).unwrap().hops(), &[10, 20, 30]);
    assert_eq!(path.appended(10), None, "a loop is not forwarded");
}

#[test]
fn extended_namespace_round_trips() {
    let params = Parameters::default().with_cluster(HopPath::new(vec![9]), Some(4));
    let msg = Namespace {
        suffix: ns(&["room"]),
        cluster: None,
    };
    for v in with_cluster() {
        let mut buf = Vec::new();
        msg.encode_extended(&params, &mut buf, v).unwrap();
        let (back, back_params) = Namespace::decode_extended(&mut Bytes::from(buf), v).unwrap();
        let typed = Namespace {
            cluster: params.cluster.clone(),
            ..msg.clone()
        };
        assert_eq!(
            (back, back_params),
            (typed.clone(), params.clone()),
            "{v:?}"
        );
        // A Namespace whose `cluster` is set is written in the extended form, and
        // Message::decode_clustered (a negotiated session's reader) reads it back typed.
        let bytes = Message::from(typed.clone()).encode_to_vec(v).unwrap();
        let mut b = Bytes::from(bytes.clone());
        assert_eq!(
            Message::decode_clustered(&mut b, v).unwrap(),
            typed.clone().into()
        );
        assert!(b.is_empty());
        // The base reader (a session that did not negotiate) refuses it: trailing bytes.
        assert!(Message::decode(&mut &bytes[..], v).is_err(), "{v:?}");
        // The base form (what a session that did not negotiate uses) is unchanged.
        let base = roundtrip(&msg.clone().into(), v);
        assert_eq!(base, Message::from(msg.clone()));
    }
    for v in without_cluster() {
        let mut buf = Vec::new();
        assert!(msg.encode_extended(&params, &mut buf, v).is_err());
    }
}
