//! Who may announce and discover: the authorization hook, token aliases, reserved namespaces,
//! tokens kept across updates (draft-19 §3.2.1, §10.2.2).

use moq_core::codes::RequestErrorCode;
use moq_core::message::Parameters;
use moq_core::{AuthToken, TrackNamespace, Version};
use moq_transport::namespace::NamespaceEvent;
use moq_transport::{Error, SessionConfig};

use crate::common::{TestServer, Transport, case, pair, rejected_code, timeout, transports};
use crate::support::{Policy, ns, relay_config};

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
