//! How discovery ends: withdrawal and revocation, session end, a slow subscriber reset, GOAWAY, one
//! answer first for every discovery request (draft-19 §3.5, §3.6, §6, §10.17).

use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::Parameters;
use moq_core::{AuthToken, TrackNamespace, Version};
use moq_transport::namespace::NamespaceEvent;
use moq_transport::{Error, SessionConfig};

use crate::common::{TestServer, Transport, case, pair, timeout, transports};
use crate::support::{Policy, next, ns, relay_config};

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
    use crate::common::raw::{MsgReader, RawConn, encode};
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

    if crate::common::memory_only() {
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
