//! How namespaces meet prefixes: through a server, whole-field byte-exact matching, the zero-field
//! prefix, what an endpoint publishes itself, PREFIX_OVERLAP and prefix updates (draft-19 §6,
//! §10.15-§10.18).

use moq_core::codes::RequestErrorCode;
use moq_core::message::Parameters;
use moq_core::{TrackNamespace, Version};
use moq_transport::SessionConfig;
use moq_transport::namespace::NamespaceEvent;

use crate::common::{TestServer, Transport, case, pair, rejected_code, timeout, transports};
use crate::support::{next, ns, relay_config};

#[tokio::test]
async fn publisher_to_subscriber_through_a_server() {
    for transport in transports() {
        for version in Version::ALL {
            case(format!("{transport:?} {version:?}"), async {
                let mut srv = TestServer::start(relay_config());
                let (publisher, _) = srv
                    .connect(transport, vec![*version], SessionConfig::default())
                    .await;
                let (subscriber, _) = srv
                    .connect(transport, vec![*version], SessionConfig::default())
                    .await;

                let room1 = publisher
                    .publish_namespace(ns(&["meet", "room1"]))
                    .await
                    .unwrap();
                assert!(room1.is_active());
                // The current set first, as suffixes after the prefix (draft-19 §10.16).
                let mut sub = subscriber.subscribe_namespace(ns(&["meet"])).await.unwrap();
                assert_eq!(
                    next(&mut sub).await,
                    NamespaceEvent::Added(ns(&["meet", "room1"]))
                );
                // Then live changes.
                let room2 = publisher
                    .publish_namespace(ns(&["meet", "room2"]))
                    .await
                    .unwrap();
                assert_eq!(
                    next(&mut sub).await,
                    NamespaceEvent::Added(ns(&["meet", "room2"]))
                );
                drop(room1);
                assert_eq!(
                    next(&mut sub).await,
                    NamespaceEvent::Removed(ns(&["meet", "room1"]))
                );
                room2.withdraw();
                assert_eq!(
                    next(&mut sub).await,
                    NamespaceEvent::Removed(ns(&["meet", "room2"]))
                );
            })
            .await;
        }
    }
}

#[tokio::test]
async fn matching_is_whole_field_and_byte_exact() {
    timeout(async {
        let mut srv = TestServer::start(relay_config());
        let (publisher, _) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let (subscriber, _) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let _a = publisher.publish_namespace(ns(&["a", "bc"])).await.unwrap();
        let _b = publisher.publish_namespace(ns(&["a", "B"])).await.unwrap();
        let _c = publisher.publish_namespace(ns(&["ab"])).await.unwrap();

        // (a, b) is not a prefix of (a, bc) nor of (a, B).
        let mut sub = subscriber
            .subscribe_namespace(ns(&["a", "b"]))
            .await
            .unwrap();
        // (a) matches both (a, ...) but not (ab); it overlaps (a, b), so use another session.
        let (other, _) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let mut sub_a = other.subscribe_namespace(ns(&["a"])).await.unwrap();
        let mut got = vec![next(&mut sub_a).await, next(&mut sub_a).await];
        got.sort_by_key(|e| e.namespace().clone());
        assert_eq!(
            got,
            vec![
                NamespaceEvent::Added(ns(&["a", "B"])),
                NamespaceEvent::Added(ns(&["a", "bc"]))
            ]
        );
        // Nothing arrives on (a, b): publish something that does match to prove the order.
        let _d = publisher
            .publish_namespace(ns(&["a", "b", "c"]))
            .await
            .unwrap();
        assert_eq!(
            next(&mut sub).await,
            NamespaceEvent::Added(ns(&["a", "b", "c"]))
        );
    })
    .await;
}

#[tokio::test]
async fn zero_field_prefix_means_every_namespace() {
    timeout(async {
        let mut srv = TestServer::start(relay_config());
        let (publisher, _) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let (subscriber, _) = srv
            .connect(
                Transport::WebTransport,
                vec![Version::Draft18],
                SessionConfig::default(),
            )
            .await;
        let _x = publisher.publish_namespace(ns(&["x"])).await.unwrap();
        let _y = publisher.publish_namespace(ns(&["y", "z"])).await.unwrap();
        let mut sub = subscriber
            .subscribe_namespace(TrackNamespace::empty())
            .await
            .unwrap();
        let mut got = vec![next(&mut sub).await, next(&mut sub).await];
        got.sort_by_key(|e| e.namespace().clone());
        assert_eq!(
            got,
            vec![
                NamespaceEvent::Added(ns(&["x"])),
                NamespaceEvent::Added(ns(&["y", "z"]))
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn endpoint_knows_what_it_publishes_itself() {
    timeout(async {
        // A plain server (not a relay) that publishes tracks in a namespace knows it.
        let (client, server, _srv) = pair(Transport::Quic, Version::Draft19).await;
        let _reg = server.namespaces().publish(ns(&["clock", "utc"]));
        let mut sub = client.subscribe_namespace(ns(&["clock"])).await.unwrap();
        assert_eq!(
            next(&mut sub).await,
            NamespaceEvent::Added(ns(&["clock", "utc"]))
        );
        // And a client's own PUBLISH_NAMESPACE makes it known on the client side too.
        let _p = client.publish_namespace(ns(&["mine"])).await.unwrap();
        assert!(client.namespaces().contains(&ns(&["mine"])));
        // The server accepted it into its announced index, which it can watch.
        assert!(server.announced().contains(&ns(&["mine"])));
    })
    .await;
}

/// Two sessions of one client are two peers to the server: what one publishes is not offered
/// by the other when the server asks it with SUBSCRIBE_NAMESPACE (found against moq-dev's
/// relay, which then routed SUBSCRIBEs to the session without the track).
#[tokio::test]
async fn a_client_s_sessions_do_not_share_namespaces() {
    if crate::common::memory_only() {
        return; // the endpoint's client: sockets by nature
    }
    timeout(async {
        let srv = TestServer::start(SessionConfig::default());
        let client = srv.client(Version::ALL.to_vec(), SessionConfig::default());
        let url = srv.url(Transport::Quic);
        let (a, a_srv) = tokio::join!(client.connect(&url), srv.server.accept());
        let (b, b_srv) = tokio::join!(client.connect(&url), srv.server.accept());
        let (a, a_srv, b, b_srv) = (a.unwrap(), a_srv.unwrap(), b.unwrap(), b_srv.unwrap());
        let _p = a.publish_namespace(ns(&["only", "a"])).await.unwrap();
        let mut from_a = a_srv.subscribe_namespace(ns(&["only"])).await.unwrap();
        assert_eq!(
            next(&mut from_a).await,
            NamespaceEvent::Added(ns(&["only", "a"]))
        );
        // b knows nothing under the prefix: the first thing it offers is what it publishes
        // later (existing namespaces would have come first).
        let mut from_b = b_srv.subscribe_namespace(ns(&["only"])).await.unwrap();
        let _q = b.publish_namespace(ns(&["only", "b"])).await.unwrap();
        assert_eq!(
            next(&mut from_b).await,
            NamespaceEvent::Added(ns(&["only", "b"]))
        );
    })
    .await;
}

#[tokio::test]
async fn prefix_overlap_in_one_session() {
    for version in Version::ALL {
        case(format!("{version:?}"), async {
            let (client, _server, _srv) = pair(Transport::Quic, *version).await;
            let a = client.subscribe_namespace(ns(&["a"])).await.unwrap();
            // Equal, a prefix of, and an extension of an established one all overlap.
            let mut overlapping_prefixes = vec![ns(&["a"]), ns(&["a", "b"])];
            // An empty prefix exists from draft-16 (draft-14 §9.22: N of 0 is a violation).
            if version.allows_empty_prefix() {
                overlapping_prefixes.push(TrackNamespace::empty());
            }
            for overlapping in overlapping_prefixes {
                let err = client
                    .subscribe_namespace(overlapping.clone())
                    .await
                    .unwrap_err();
                assert_eq!(
                    rejected_code(err),
                    RequestErrorCode::PREFIX_OVERLAP,
                    "{overlapping}"
                );
            }
            // Disjoint siblings and whole-field differences do not.
            let _b = client.subscribe_namespace(ns(&["b"])).await.unwrap();
            let _ab = client.subscribe_namespace(ns(&["ab"])).await.unwrap();
            // Once the first ends its prefix is free again.
            drop(a);
            let mut retry = None;
            for _ in 0..50 {
                match client.subscribe_namespace(ns(&["a", "b"])).await {
                    Ok(s) => {
                        retry = Some(s);
                        break;
                    }
                    Err(e) => {
                        assert_eq!(rejected_code(e), RequestErrorCode::PREFIX_OVERLAP);
                        // The cancellation reaches the server asynchronously; give it a turn.
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                    }
                }
            }
            assert!(retry.is_some(), "prefix was not released");
        })
        .await;
    }
}

#[tokio::test]
async fn overlap_is_per_session() {
    timeout(async {
        let mut srv = TestServer::start(SessionConfig::default());
        let (c1, _) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let (c2, _) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let _s1 = c1.subscribe_namespace(ns(&["a"])).await.unwrap();
        let _s2 = c2.subscribe_namespace(ns(&["a"])).await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn update_prefix_rechecks_overlap_and_moves() {
    timeout(async {
        let (client, server, _srv) = pair(Transport::Quic, Version::Draft19).await;
        let _r1 = server.namespaces().publish(ns(&["a", "1"]));
        let _r2 = server.namespaces().publish(ns(&["b", "2"]));
        let mut sa = client.subscribe_namespace(ns(&["a"])).await.unwrap();
        let _sc = client.subscribe_namespace(ns(&["c"])).await.unwrap();
        assert_eq!(next(&mut sa).await, NamespaceEvent::Added(ns(&["a", "1"])));
        // Moving onto (c, x) overlaps (c): REQUEST_ERROR PREFIX_OVERLAP, and the stream ends.
        let err = sa.update_prefix(ns(&["c", "x"])).await.unwrap_err();
        assert_eq!(rejected_code(err), RequestErrorCode::PREFIX_OVERLAP);

        let mut sb = client.subscribe_namespace(ns(&["z"])).await.unwrap();
        sb.update_prefix(ns(&["b"])).await.unwrap();
        assert_eq!(sb.prefix(), ns(&["b"]));
        assert_eq!(next(&mut sb).await, NamespaceEvent::Added(ns(&["b", "2"])));
    })
    .await;
}

/// draft-19 §6.2: a PUBLISH_NAMESPACE for a namespace inside an active SUBSCRIBE_NAMESPACE
/// prefix is valid and travels on its own request stream; its lifetime is independent (the
/// namespace subscription outlives its withdrawal), and a SUBSCRIBE for a track of the
/// withdrawn namespace is answered, not a protocol error.
#[tokio::test]
async fn publish_namespace_inside_an_active_prefix() {
    timeout(async {
        let (client, server, _srv) = pair(Transport::Quic, Version::Draft19).await;
        let mut sub = client.subscribe_namespace(ns(&["a"])).await.unwrap();
        let (_, mut announced) = client.announced().watch(&TrackNamespace::empty(), 16);
        let published = server.publish_namespace(ns(&["a", "x"])).await.unwrap();
        assert_eq!(
            announced.next().await,
            Some(NamespaceEvent::Added(ns(&["a", "x"])))
        );
        // The server publishes (a, x) itself, so the namespace subscription reports it too.
        assert_eq!(next(&mut sub).await, NamespaceEvent::Added(ns(&["a", "x"])));
        published.withdraw();
        assert_eq!(
            announced.next().await,
            Some(NamespaceEvent::Removed(ns(&["a", "x"])))
        );
        assert_eq!(
            next(&mut sub).await,
            NamespaceEvent::Removed(ns(&["a", "x"]))
        );
        let _y = server.namespaces().publish(ns(&["a", "y"]));
        assert_eq!(
            next(&mut sub).await,
            NamespaceEvent::Added(ns(&["a", "y"])),
            "the namespace subscription is still active"
        );
        let name = moq_core::FullTrackName::new(ns(&["a", "x"]), "t").unwrap();
        let err = client
            .subscribe(name, Parameters::default())
            .await
            .unwrap_err();
        assert_eq!(rejected_code(err), RequestErrorCode::DOES_NOT_EXIST);
        assert!(client.close_reason().is_none());
        assert!(server.close_reason().is_none());
    })
    .await;
}
