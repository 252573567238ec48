//! Namespace discovery between well-behaved peers over loopback QUIC and WebTransport:
//! PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE, NAMESPACE, NAMESPACE_DONE, PREFIX_OVERLAP,
//! authorization, withdrawal, revocation and session end (draft-19 §6, §9.5, §10.15-§10.18).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use async_trait::async_trait;
use common::{TestServer, Transport, case, pair, rejected_code, timeout, transports};
use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::{Parameters, RequestError};
use moq_core::{AuthToken, TrackNamespace, Version};
use moq_transport::namespace::{NamespaceEvent, NamespaceIndex, NamespaceSubscription};
use moq_transport::{AuthRequest, Authorizer, Error, RequestKind, SessionConfig, SessionInfo};

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

/// A server configured like a relay: what one client announces, every client can discover.
fn relay_config() -> SessionConfig {
    let shared = NamespaceIndex::new();
    SessionConfig::default()
        .with_namespaces(shared.clone())
        .with_announced(shared)
}

async fn next(sub: &mut NamespaceSubscription) -> NamespaceEvent {
    sub.next()
        .await
        .expect("subscription ended")
        .expect("subscription failed")
}

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
    if common::memory_only() {
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

/// Refuses SUBSCRIBE_NAMESPACE under "secret" and PUBLISH_NAMESPACE without the token "ok".
struct Policy;

#[async_trait]
impl Authorizer for Policy {
    async fn authorize(&self, _s: &SessionInfo, req: &AuthRequest<'_>) -> Result<(), RequestError> {
        let secret = req.namespace.field(0).is_some_and(|f| f == b"secret");
        match req.kind {
            RequestKind::SubscribeNamespace if secret => Err(RequestError::new(
                RequestErrorCode::UNAUTHORIZED,
                "no secrets",
            )),
            RequestKind::PublishNamespace if !req.tokens.iter().any(|t| &t.value[..] == b"ok") => {
                Err(RequestError::new(
                    RequestErrorCode::UNAUTHORIZED,
                    "token required",
                ))
            }
            _ => Ok(()),
        }
    }
}

#[tokio::test]
async fn authorization_hook() {
    timeout(async {
        let mut srv = TestServer::start(relay_config().with_authorizer(Policy));
        let (client, server) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let err = client
            .subscribe_namespace(ns(&["secret", "x"]))
            .await
            .unwrap_err();
        assert_eq!(rejected_code(err), RequestErrorCode::UNAUTHORIZED);
        let _open = client.subscribe_namespace(ns(&["public"])).await.unwrap();

        let err = client
            .publish_namespace(ns(&["public", "p"]))
            .await
            .unwrap_err();
        assert_eq!(rejected_code(err), RequestErrorCode::UNAUTHORIZED);
        assert!(!server.announced().contains(&ns(&["public", "p"])));
        let params = Parameters {
            authorization_tokens: vec![AuthToken::new("ok")],
            ..Default::default()
        };
        let _p = client
            .publish_namespace_with(ns(&["public", "p"]), params)
            .await
            .unwrap();
        assert!(server.announced().contains(&ns(&["public", "p"])));
    })
    .await;
}

#[tokio::test]
async fn token_aliases_are_resolved() {
    timeout(async {
        let mut srv = TestServer::start(relay_config().with_authorizer(Policy));
        let (client, _server) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let register = Parameters {
            authorization_tokens: vec![AuthToken::Register {
                alias: 7,
                token_type: 0,
                value: "ok".into(),
            }],
            ..Default::default()
        };
        let _a = client
            .publish_namespace_with(ns(&["one"]), register)
            .await
            .unwrap();
        let use_alias = Parameters {
            authorization_tokens: vec![AuthToken::UseAlias { alias: 7 }],
            ..Default::default()
        };
        let _b = client
            .publish_namespace_with(ns(&["two"]), use_alias)
            .await
            .unwrap();
        // An alias the server does not hold would close the session with
        // UNKNOWN_AUTH_TOKEN_ALIAS (draft-19 §10.2.2): our client refuses to send it (the
        // server's side of the rule: `mis::token_aliases_are_never_lost`).
        let unknown = Parameters {
            authorization_tokens: vec![AuthToken::UseAlias { alias: 8 }],
            ..Default::default()
        };
        let err = client
            .publish_namespace_with(ns(&["three"]), unknown)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        assert!(client.close_reason().is_none());
    })
    .await;
}

#[tokio::test]
async fn withdraw_and_revoke() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (client, server, _srv) = pair(transport, Version::Draft19).await;
            let (_, mut watch) = server.announced().watch(&TrackNamespace::empty(), 16);
            let p = client.publish_namespace(ns(&["w"])).await.unwrap();
            assert_eq!(watch.next().await, Some(NamespaceEvent::Added(ns(&["w"]))));
            // Withdrawn by the publisher cancelling its stream.
            p.withdraw();
            assert_eq!(
                watch.next().await,
                Some(NamespaceEvent::Removed(ns(&["w"])))
            );

            // Revoked by the receiver cancelling.
            let p = client.publish_namespace(ns(&["r"])).await.unwrap();
            assert_eq!(watch.next().await, Some(NamespaceEvent::Added(ns(&["r"]))));
            assert_eq!(
                server.revoke_namespace(&ns(&["r"]), StreamResetCode::EXPIRED_AUTH_TOKEN),
                1
            );
            let err = p.ended().await;
            assert!(
                matches!(err, Error::Cancelled(StreamResetCode::EXPIRED_AUTH_TOKEN)),
                "{err:?}"
            );
            assert!(!p.is_active());
            assert_eq!(
                watch.next().await,
                Some(NamespaceEvent::Removed(ns(&["r"])))
            );
        })
        .await;
    }
}

#[tokio::test]
async fn reserved_namespaces() {
    timeout(async {
        let (client, _server, _srv) = pair(Transport::Quic, Version::Draft19).await;
        assert!(matches!(
            client.publish_namespace(ns(&["."])).await,
            Err(Error::Invalid(_))
        ));
        assert!(matches!(
            client.publish_namespace(ns(&[".session", "x"])).await,
            Err(Error::Invalid(_))
        ));
    })
    .await;
}

#[tokio::test]
async fn session_end_ends_every_handle() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let mut srv = TestServer::start(relay_config());
            let (client, server) = srv
                .connect(transport, vec![Version::Draft19], SessionConfig::default())
                .await;
            let _reg = server.namespaces().publish(ns(&["n", "1"]));
            let mut sub = client.subscribe_namespace(ns(&["n"])).await.unwrap();
            let published = client.publish_namespace(ns(&["p"])).await.unwrap();
            assert_eq!(next(&mut sub).await, NamespaceEvent::Added(ns(&["n", "1"])));
            server.close(SessionErrorCode::INTERNAL_ERROR, "shutting down");
            // The discovery stream yields the session's error, then ends.
            let err = sub.next().await.expect("an error item").unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::ClosedByPeer {
                        code: SessionErrorCode::INTERNAL_ERROR,
                        ..
                    }
                ),
                "{err:?}"
            );
            assert!(sub.next().await.is_none());
            assert!(matches!(
                published.ended().await,
                Error::ClosedByPeer { .. }
            ));
            // New requests fail at once.
            assert!(client.subscribe_namespace(ns(&["q"])).await.is_err());
        })
        .await;
    }
}

#[tokio::test]
async fn a_slow_namespace_subscriber_is_reset_not_buffered() {
    timeout(async {
        let mut config = SessionConfig::default();
        config.limits.namespace_queue = 4;
        let mut srv = TestServer::start(config);
        let (client, server) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let mut sub = client.subscribe_namespace(ns(&["many"])).await.unwrap();
        // Register far more namespaces than the queue holds, without yielding.
        let regs: Vec<_> = (0..200)
            .map(|i| server.namespaces().publish(ns(&["many", &i.to_string()])))
            .collect();
        // The response stream is reset (draft-19 §10.18): every namespace seen is then reported
        // removed, and the subscription ends with the reset code.
        let mut added = std::collections::HashSet::new();
        let end = loop {
            match sub.next().await {
                Some(Ok(NamespaceEvent::Added(n))) => assert!(added.insert(n)),
                Some(Ok(NamespaceEvent::Removed(n))) => {
                    assert!(added.remove(&n), "removed before added")
                }
                Some(Err(e)) => break e,
                None => panic!("ended without an error"),
            }
        };
        assert!(
            matches!(end, Error::Cancelled(StreamResetCode::TOO_FAR_BEHIND)),
            "{end:?}"
        );
        assert!(
            added.is_empty(),
            "every active namespace was reported removed"
        );
        assert!(added.len() < regs.len());
        assert!(client.close_reason().is_none(), "the session survives");
    })
    .await;
}

#[tokio::test]
async fn goaway_on_the_control_stream() {
    timeout(async {
        let (client, server, _srv) = pair(Transport::Quic, Version::Draft19).await;
        let _sub = client.subscribe_namespace(ns(&["g"])).await.unwrap();
        server
            .goaway(
                "moqt://elsewhere.example:4443/moq",
                std::time::Duration::from_millis(200),
            )
            .await
            .unwrap();
        let info = client.wait_goaway().await.unwrap();
        assert_eq!(info.new_session_uri, "moqt://elsewhere.example:4443/moq");
        assert_eq!(info.timeout, std::time::Duration::from_millis(200));
        // No new requests after GOAWAY (draft-19 §10.4).
        assert!(matches!(
            client.subscribe_namespace(ns(&["h"])).await,
            Err(Error::GoingAway)
        ));
        // A request is still open, so the server closes with GOAWAY_TIMEOUT.
        let err = client.closed().await;
        assert!(
            matches!(
                err,
                Error::ClosedByPeer {
                    code: SessionErrorCode::GOAWAY_TIMEOUT,
                    ..
                }
            ),
            "{err:?}"
        );
        // A client's GOAWAY may not carry a URI.
        let (client, _server, _srv) = pair(Transport::Quic, Version::Draft19).await;
        assert!(
            client
                .goaway("moqt://x", std::time::Duration::ZERO)
                .await
                .is_err()
        );
        client.goaway("", std::time::Duration::ZERO).await.unwrap();
        assert!(
            client.goaway("", std::time::Duration::ZERO).await.is_err(),
            "only one GOAWAY"
        );
    })
    .await;
}

#[tokio::test]
async fn requests_after_our_goaway_are_refused_with_going_away() {
    timeout(async {
        let (client, server, _srv) = pair(Transport::Quic, Version::Draft19).await;
        server.goaway("", std::time::Duration::ZERO).await.unwrap();
        // The client may not have processed the GOAWAY yet; either way the request fails.
        match client.subscribe_namespace(ns(&["late"])).await {
            Err(Error::Rejected(e)) => assert_eq!(e.code, RequestErrorCode::GOING_AWAY),
            Err(Error::GoingAway) => {}
            other => panic!("{other:?}"),
        }
    })
    .await;
}

/// draft-19 §6.1, §6.2, §10.9, §10.18, §10.19: every discovery request gets a single
/// REQUEST_OK or REQUEST_ERROR as the first message of its response stream, seen by a raw
/// client: a refused PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE or SUBSCRIBE_TRACKS gets
/// REQUEST_ERROR and FIN; an accepted PUBLISH_NAMESPACE exactly one REQUEST_OK (what follows
/// answers REQUEST_UPDATEs: one without a token keeps the request's token, one with a refused
/// token fails and closes the stream); an accepted SUBSCRIBE_NAMESPACE REQUEST_OK, then NAMESPACE.
#[tokio::test]
async fn discovery_requests_get_one_answer_first() {
    use common::raw::{MsgReader, RawConn, encode};
    use moq_core::message::{
        Message, Namespace, PublishNamespace, RequestUpdate, SubscribeNamespace, SubscribeTracks,
    };
    use moq_transport::track::Incoming;
    const V: Version = Version::Draft19;

    /// The response is REQUEST_ERROR with `code`, then FIN.
    async fn refused(mut r: MsgReader, code: RequestErrorCode) {
        match r.expect().await {
            Message::RequestError(e) => assert_eq!(e.code, code),
            m => panic!("expected REQUEST_ERROR, got {m:?}"),
        }
        assert!(r.next().await.unwrap().is_none(), "FIN after REQUEST_ERROR");
    }
    let token = |t: &'static str| Parameters {
        authorization_tokens: vec![AuthToken::new(t)],
        ..Default::default()
    };

    if common::memory_only() {
        return; // raw QUIC bytes: sockets by nature
    }
    timeout(async {
        let mut srv = TestServer::start(relay_config().with_authorizer(Policy).with_requests());
        let (raw, _, server) = RawConn::to_server(&mut srv, V).await;
        let _reg = server.namespaces().publish(ns(&["a", "1"]));

        // PUBLISH_NAMESPACE.
        let publish = |request_id, params| {
            encode(
                PublishNamespace {
                    request_id,
                    namespace: ns(&["p"]),
                    params,
                },
                V,
            )
        };
        let (_s, r) = raw.open_request(&publish(0, Parameters::default())).await;
        refused(r, RequestErrorCode::UNAUTHORIZED).await;
        let (mut send, mut r) = raw.open_request(&publish(2, token("ok"))).await;
        assert!(matches!(r.expect().await, Message::RequestOk(_)));
        let update = |request_id, params| encode(RequestUpdate { request_id, params }, V);
        send.write_all(&update(4, Parameters::default()))
            .await
            .unwrap();
        assert!(matches!(r.expect().await, Message::RequestOk(_)));
        send.write_all(&update(6, token("bad"))).await.unwrap();
        refused(r, RequestErrorCode::UNAUTHORIZED).await;

        // SUBSCRIBE_NAMESPACE.
        let subscribe = |request_id, prefix| {
            encode(
                SubscribeNamespace {
                    request_id,
                    prefix,
                    params: Parameters::default(),
                },
                V,
            )
        };
        let (_s8, mut r) = raw.open_request(&subscribe(8, ns(&["a"]))).await;
        assert!(matches!(r.expect().await, Message::RequestOk(_)));
        assert_eq!(
            r.expect().await,
            Message::Namespace(Namespace {
                suffix: ns(&["1"]),
                cluster: None
            })
        );
        let (_s, r10) = raw.open_request(&subscribe(10, ns(&["secret"]))).await;
        refused(r10, RequestErrorCode::UNAUTHORIZED).await;
        let (_s, r12) = raw.open_request(&subscribe(12, ns(&["a", "b"]))).await;
        refused(r12, RequestErrorCode::PREFIX_OVERLAP).await;

        // SUBSCRIBE_TRACKS.
        let tracks = |request_id, prefix| {
            encode(
                SubscribeTracks {
                    request_id,
                    prefix,
                    params: Parameters::default(),
                },
                V,
            )
        };
        let (_s14, mut r) = raw.open_request(&tracks(14, ns(&["t"]))).await;
        let _responder = match server.incoming().next().await.unwrap() {
            Incoming::SubscribeTracks(req) => req.accept().await.unwrap(),
            other => panic!("{other:?}"),
        };
        assert!(matches!(r.expect().await, Message::RequestOk(_)));
        let (_s, r16) = raw.open_request(&tracks(16, ns(&["t", "x"]))).await;
        refused(r16, RequestErrorCode::PREFIX_OVERLAP).await;
        assert!(raw.is_open());
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

/// An accepted PUBLISH_NAMESPACE keeps its tokens while it waits (parked, since issue 35's
/// sixth round): an update without tokens is authorized with the ones it was accepted with,
/// again and again, and one whose new token the authorizer refuses ends the announcement and
/// unregisters the namespace (draft-19 §10.9.1).
#[tokio::test]
async fn publish_namespace_updates_keep_their_tokens() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let mut srv = TestServer::start(relay_config().with_authorizer(Policy));
            let (client, server) = srv
                .connect(transport, vec![Version::Draft19], SessionConfig::default())
                .await;
            let (_, mut watch) = server.announced().watch(&TrackNamespace::empty(), 16);
            let token = |t: &'static str| Parameters {
                authorization_tokens: vec![AuthToken::new(t)],
                ..Default::default()
            };
            let p = client
                .publish_namespace_with(ns(&["u"]), token("ok"))
                .await
                .unwrap();
            assert_eq!(watch.next().await, Some(NamespaceEvent::Added(ns(&["u"]))));
            for _ in 0..3 {
                p.update(Parameters::default()).await.unwrap();
            }
            assert!(p.is_active());
            let err = p.update(token("bad")).await.unwrap_err();
            assert_eq!(rejected_code(err), RequestErrorCode::UNAUTHORIZED);
            assert!(matches!(p.ended().await, Error::Rejected(_)));
            assert_eq!(
                watch.next().await,
                Some(NamespaceEvent::Removed(ns(&["u"])))
            );
            assert!(!server.announced().contains(&ns(&["u"])));
        })
        .await;
    }
}
