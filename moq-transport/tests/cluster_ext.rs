//! The MoQ Cluster extension (draft-lcurley-moq-cluster, -01 code points as moq-dev's moq-net
//! 0.3.18 sends them) negotiated over loopback QUIC and WebTransport: both ends declare a
//! HOP_ID, NAMESPACE takes its extended form with HOP_PATH (the sender's Hop ID appended) and
//! ROUTE_COST, a route change is a repeated NAMESPACE, and what loops back is dropped. A raw
//! peer that leaves HOP_PATH out, repeats a Hop ID in it, or sends the parameters without
//! negotiating has the session closed with PROTOCOL_VIOLATION.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::raw::{RawConn, RawServer, encode, frame, put_namespace, put_vi, raw_setup};
use common::{TestServer, Transport, case, timeout};
use moq_core::codes::SessionErrorCode;
use moq_core::message::cluster::{ClusterParams, HOP_PATH, HopPath};
use moq_core::message::{
    Message, Namespace, Parameters, PublishNamespace, RequestOk, SubscribeNamespace,
};
use moq_core::{TrackNamespace, Version};
use moq_transport::namespace::{
    Advertised, NamespaceEvent, NamespaceIndex, NamespaceRoute, NamespaceSubscription,
};
use moq_transport::{Error, SessionConfig};

const PROTOCOL_VIOLATION: SessionErrorCode = SessionErrorCode::PROTOCOL_VIOLATION;

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

fn relay(hop: u64, cost: Option<u64>) -> SessionConfig {
    SessionConfig {
        cluster_hop: Some(hop),
        relay_cost: cost,
        ..Default::default()
    }
}

fn route(hops: &[u64], cost: u64) -> NamespaceRoute {
    NamespaceRoute {
        hops: hops.to_vec(),
        cost,
    }
}

async fn next(sub: &mut NamespaceSubscription) -> Advertised {
    sub.next_advertised()
        .await
        .expect("subscription ended")
        .expect("subscription failed")
}

fn added(n: TrackNamespace, route: Option<NamespaceRoute>, update: bool) -> Advertised {
    Advertised {
        event: NamespaceEvent::Added(n),
        route,
        update,
    }
}

/// Two relays' sessions (Hop IDs 7 and 9, the server pricing itself at 3): NAMESPACE carries
/// HOP_PATH with the server's Hop ID appended and ROUTE_COST, read as the route plus the link's
/// cost; a route change is a repeated NAMESPACE (an update `next` leaves out); a namespace whose
/// path holds the reader's own Hop ID is dropped and its NAMESPACE_DONE is no violation.
#[tokio::test]
async fn namespaces_carry_hop_path_and_cost_when_both_ends_declare_a_hop() {
    timeout(async {
        for v in [Version::Draft17, Version::Draft19, Version::Draft22] {
            for transport in [Transport::Quic, Transport::WebTransport] {
                case(format!("{v:?} {transport:?}"), async {
                    let index = NamespaceIndex::new();
                    let mut srv =
                        TestServer::start(relay(7, Some(3)).with_namespaces(index.clone()));
                    let (client, server) = srv.connect(transport, vec![v], relay(9, None)).await;
                    assert_eq!(client.info().cluster_peer, Some(7));
                    assert_eq!(server.info().cluster_peer, Some(9));

                    let _local = index.publish(ns(&["room", "a"]));
                    let far = index.publish_routed(ns(&["room", "b"]), route(&[5], 2));
                    let mut sub = client.subscribe_namespace(ns(&["room"])).await.unwrap();
                    // Our own publisher's: the server's hop alone, cost 0 (absent) + link 3.
                    let a = next(&mut sub).await;
                    assert_eq!(a, added(ns(&["room", "a"]), Some(route(&[7], 3)), false));
                    let b = next(&mut sub).await;
                    assert_eq!(b, added(ns(&["room", "b"]), Some(route(&[5, 7], 5)), false));

                    // A cheaper route: the same NAMESPACE again, an update.
                    far.set_route(route(&[4], 1));
                    let b = next(&mut sub).await;
                    assert_eq!(b, added(ns(&["room", "b"]), Some(route(&[4, 7], 4)), true));

                    // Through the reader (9): dropped; its withdrawal is no violation.
                    let looped = index.publish_routed(ns(&["room", "c"]), route(&[9], 1));
                    let _d = index.publish(ns(&["room", "d"]));
                    let d = next(&mut sub).await;
                    assert_eq!(d, added(ns(&["room", "d"]), Some(route(&[7], 3)), false));
                    drop(looped);
                    let _e = index.publish(ns(&["room", "e"]));
                    let e = next(&mut sub).await;
                    assert_eq!(e, added(ns(&["room", "e"]), Some(route(&[7], 3)), false));
                    // A route that now runs through the reader retracts the namespace.
                    far.set_route(route(&[9], 1));
                    let gone = next(&mut sub).await;
                    assert_eq!(gone.event, NamespaceEvent::Removed(ns(&["room", "b"])));
                    drop(far);

                    // `next` (and the Stream) leave updates out.
                    drop(sub);
                    let mut plain = client
                        .subscribe_namespace(ns(&["room", "a"]))
                        .await
                        .unwrap();
                    let e = plain.next().await.unwrap().unwrap();
                    assert_eq!(e, NamespaceEvent::Added(ns(&["room", "a"])));
                    assert!(client.close_reason().is_none(), "{v:?}");
                })
                .await;
            }
        }
    })
    .await;
}

/// Only one end declaring a Hop ID, or a draft before 17: the extension is off and NAMESPACE
/// is the base message.
#[tokio::test]
async fn one_hop_id_alone_negotiates_nothing() {
    timeout(async {
        for (v, server_hop, client_hop) in [
            (Version::Draft19, Some(7), None),
            (Version::Draft19, None, Some(9)),
            (Version::Draft16, Some(7), Some(9)),
        ] {
            case(format!("{v:?} {server_hop:?} {client_hop:?}"), async {
                let index = NamespaceIndex::new();
                let mut sc = SessionConfig::default().with_namespaces(index.clone());
                sc.cluster_hop = server_hop;
                let mut srv = TestServer::start(sc);
                let cc = SessionConfig {
                    cluster_hop: client_hop,
                    ..Default::default()
                };
                let (client, server) = srv.connect(Transport::Quic, vec![v], cc).await;
                assert_eq!(
                    (client.info().cluster_peer, server.info().cluster_peer),
                    (None, None)
                );
                let _r = index.publish_routed(ns(&["x"]), route(&[5], 2));
                let mut sub = client.subscribe_namespace(ns(&["x"])).await.unwrap();
                assert_eq!(next(&mut sub).await, added(ns(&["x"]), None, false));
            })
            .await;
        }
    })
    .await;
}

/// A PUBLISH_NAMESPACE of a relay that speaks the extension is registered with its route (the
/// peer's path, its cost plus the link's), and ours carries HOP_PATH with our Hop ID; one
/// whose route runs through the peer is not sent.
#[tokio::test]
async fn publish_namespace_carries_and_keeps_the_route() {
    timeout(async {
        let announced = NamespaceIndex::new();
        let mut srv = TestServer::start(relay(7, None).with_announced(announced.clone()));
        let (client, _server) = srv
            .connect(Transport::Quic, vec![Version::Draft19], relay(9, Some(2)))
            .await;
        let _held = client
            .namespaces()
            .publish_routed(ns(&["p"]), route(&[3], 4));
        let _p = client.publish_namespace(ns(&["p"])).await.unwrap();
        // The client's route [3] cost 4, its hop appended, plus the link (its RELAY_COST, 2).
        assert_eq!(announced.route(&ns(&["p"])), Some(route(&[3, 9], 6)));
        // draft-lcurley-moq-cluster-01 Path Selection: a route through the server's Hop ID (7)
        // is not announced to it.
        let _back = client
            .namespaces()
            .publish_routed(ns(&["q"]), route(&[3, 7], 1));
        let refused = client.publish_namespace(ns(&["q"])).await;
        assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");
        assert_eq!(announced.route(&ns(&["q"])), None);
    })
    .await;
}

/// A raw relay (Hop ID 9) that negotiated the extension with our client (Hop ID 7).
async fn negotiated_raw() -> (moq_transport::Session, RawConn, RawServer) {
    let v = Version::Draft19;
    let raw_srv = RawServer::start(&[v]);
    let client = raw_srv.client_with(vec![v], relay(7, None));
    let mut options = raw_setup();
    options.hop_id = Some(9);
    let (session, raw) = raw_srv.connect(&client, options).await;
    let session = session.unwrap();
    assert_eq!(session.info().cluster_peer, Some(9));
    (session, raw, raw_srv)
}

/// Our session closing with PROTOCOL_VIOLATION, seen from both ends.
async fn closes(raw: &RawConn, session: &moq_transport::Session, err: Error) {
    assert_eq!(err.session_code(), PROTOCOL_VIOLATION, "{err}");
    let (code, reason) = raw.closed().await;
    assert_eq!(code, PROTOCOL_VIOLATION, "{reason}");
    assert_eq!(session.closed().await.session_code(), PROTOCOL_VIOLATION);
}

/// The SUBSCRIBE_NAMESPACE's first event after the raw peer answers with REQUEST_OK and
/// writes `after` on its response stream.
async fn discover_after(
    session: &moq_transport::Session,
    raw: &RawConn,
    after: Vec<u8>,
) -> Option<Result<Advertised, Error>> {
    let (sub, _streams) = tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
        let (mut send, recv, _) = raw.accept_request().await;
        let mut bytes = encode(RequestOk::default(), Version::Draft19);
        bytes.extend(after);
        send.write_all(&bytes).await.unwrap();
        (send, recv)
    });
    sub.unwrap().next_advertised().await
}

/// draft-lcurley-moq-cluster: on a session that negotiated the extension, a NAMESPACE without
/// HOP_PATH (the base form) is a PROTOCOL_VIOLATION.
#[tokio::test]
async fn a_namespace_without_hop_path_closes_the_session() {
    timeout(async {
        let (session, raw, _srv) = negotiated_raw().await;
        let base = encode(
            Namespace {
                suffix: ns(&["x"]),
                cluster: None,
            },
            Version::Draft19,
        );
        let err = discover_after(&session, &raw, base)
            .await
            .unwrap()
            .unwrap_err();
        closes(&raw, &session, err).await;
    })
    .await;
}

/// draft-lcurley-moq-cluster: a HOP_PATH naming one Hop ID twice, or empty, is a
/// PROTOCOL_VIOLATION (no conforming sender builds it).
#[tokio::test]
async fn a_malformed_hop_path_closes_the_session() {
    timeout(async {
        for (what, hops) in [("repeated", vec![4u64, 8, 4]), ("empty", vec![])] {
            case(what.to_string(), async {
                let (session, raw, _srv) = negotiated_raw().await;
                // NAMESPACE (0x08): suffix, then one parameter HOP_PATH with `hops`.
                let mut body = Vec::new();
                put_namespace(&mut body, &[b"x"]);
                put_vi(&mut body, 1);
                put_vi(&mut body, HOP_PATH);
                let mut value = Vec::new();
                for h in &hops {
                    put_vi(&mut value, *h);
                }
                put_vi(&mut body, value.len() as u64);
                body.extend(value);
                let bad = frame(0x08, &body);
                let err = discover_after(&session, &raw, bad)
                    .await
                    .unwrap()
                    .unwrap_err();
                closes(&raw, &session, err).await;
            })
            .await;
        }
    })
    .await;
}

/// draft-lcurley-moq-cluster: the extension's parameters on a session that did not negotiate
/// it (a PUBLISH_NAMESPACE with HOP_PATH from a peer that declared no Hop ID) close the
/// session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn hop_path_without_negotiation_closes_the_session() {
    timeout(async {
        let v = Version::Draft19;
        let mut srv = TestServer::start(relay(7, None));
        let (raw, _, session) = RawConn::to_server(&mut srv, v).await;
        assert_eq!(session.info().cluster_peer, None);
        let msg = PublishNamespace {
            request_id: 0,
            namespace: ns(&["p"]),
            params: Parameters::default().with_cluster(HopPath::new(vec![3]), None),
        };
        let _req = raw.open_request(&encode(msg, v)).await;
        let (code, reason) = raw.closed().await;
        assert_eq!(code, PROTOCOL_VIOLATION, "{reason}");
        assert!(reason.contains("did not negotiate"), "{reason}");
    })
    .await;
}

/// A NAMESPACE whose HOP_PATH holds our own Hop ID is dropped, and the one after it arrives.
#[tokio::test]
async fn a_looped_namespace_from_a_raw_relay_is_dropped() {
    timeout(async {
        let (session, raw, _srv) = negotiated_raw().await;
        let advert = |suffix: &str, hops: Vec<u64>| {
            encode(
                Namespace {
                    suffix: ns(&[suffix]),
                    cluster: Some(Box::new(ClusterParams {
                        hop_path: HopPath::new(hops),
                        route_cost: Some(2),
                    })),
                },
                Version::Draft19,
            )
        };
        let mut bytes = advert("looped", vec![3, 7, 9]);
        bytes.extend(advert("fine", vec![3, 9]));
        let first = discover_after(&session, &raw, bytes)
            .await
            .unwrap()
            .unwrap();
        // Cost 2 advertised + 1 for a link nobody priced.
        assert_eq!(
            first,
            added(ns(&["a", "fine"]), Some(route(&[3, 9], 3)), false)
        );
        assert!(session.close_reason().is_none());
    })
    .await;
}

/// draft-lcurley-moq-cluster-01 Path Selection: a publisher MUST NOT advertise a path whose
/// HOP_PATH holds the Hop ID the peer declared. A raw relay (Hop ID 9) subscribes to ours
/// (Hop ID 7) and reads the response stream's bytes: a namespace routed through 9 is never
/// sent (nor its NAMESPACE_DONE); one advertised before is withdrawn with NAMESPACE_DONE when
/// its route moves through 9, and advertised again when it moves off. Fails before: the
/// looped NAMESPACE went out and only the receiver dropped it.
#[tokio::test]
async fn a_route_through_the_subscriber_is_never_advertised_to_it() {
    timeout(async {
        let v = Version::Draft19;
        let index = NamespaceIndex::new();
        let srv = TestServer::start(relay(7, None).with_namespaces(index.clone()));
        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), v).await;
        let mut options = raw_setup();
        options.hop_id = Some(9);
        let (_, session) = tokio::join!(raw.handshake(options), srv.server.accept());
        // Kept: dropping our session would close it.
        let _session = session.unwrap();
        assert_eq!(_session.info().cluster_peer, Some(9));

        let through_9 = index.publish_routed(ns(&["r", "back"]), route(&[3, 9], 2));
        let moving = index.publish_routed(ns(&["r", "moving"]), route(&[3], 1));
        let sub = SubscribeNamespace {
            request_id: 0,
            prefix: ns(&["r"]),
            params: Parameters::default(),
        };
        let (_send, mut resp) = raw.open_request(&encode(sub, v)).await;
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        let advertised = |m: Message| match m {
            Message::Namespace(n) => (
                n.suffix,
                n.cluster
                    .and_then(|c| c.hop_path)
                    .map(|p| p.hops().to_vec()),
            ),
            m => panic!("{} where a NAMESPACE was due", m.name()),
        };
        // The snapshot: `moving` only, its path with our hop appended.
        let first = advertised(resp.expect_clustered().await);
        assert_eq!(first, (ns(&["moving"]), Some(vec![3, 7])));

        // Its route moves through 9: withdrawn. Off 9 again: advertised again.
        moving.set_route(route(&[4, 9], 1));
        match resp.expect_clustered().await {
            Message::NamespaceDone(d) => assert_eq!(d.suffix, ns(&["moving"])),
            m => panic!("{} where NAMESPACE_DONE was due", m.name()),
        }
        moving.set_route(route(&[5], 1));
        let again = advertised(resp.expect_clustered().await);
        assert_eq!(again, (ns(&["moving"]), Some(vec![5, 7])));

        // The withheld one goes: nothing is said; the next message is about a new namespace.
        drop(through_9);
        let _new = index.publish(ns(&["r", "new"]));
        let next = advertised(resp.expect_clustered().await);
        assert_eq!(next, (ns(&["new"]), Some(vec![7])));
    })
    .await;
}
