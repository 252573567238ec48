//! Token authorization through the relay, over raw QUIC and WebTransport: refusals with the
//! draft's codes, grants scoped to a namespace, discovery filtered by the subscriber's grant,
//! expiry closing the session, the public prefix, and tokens minted by moq-dev's tool.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use bytes::Bytes;
use moq_core::AuthToken;
use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::Parameters;
use moq_relay::auth::{Claims, Jwk, KeySet, TokenAuth};
use moq_relay::{Relay, RelayConfig};
use moq_transport::endpoint::{Client, ClientConfig};
use moq_transport::namespace::NamespaceEvent;
use moq_transport::tls::{ClientTls, parse_fingerprint};
use moq_transport::{Error, Session, SessionConfig};

mod common;
use common::{case, ns};

struct Setup {
    relay: Relay,
    key: Jwk,
}

/// A relay verifying with a fresh ES256 key (its public half only); `public` is open.
fn relay(public: &[&str]) -> Setup {
    let key = Jwk::generate(jsonwebtoken::Algorithm::ES256, Some("test".into())).unwrap();
    let mut keys = KeySet::new();
    keys.add_jwk(&key.public().unwrap()).unwrap();
    let public: Vec<String> = public.iter().map(|s| s.to_string()).collect();
    let mut config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
    config.authorizer = Arc::new(TokenAuth::new(keys, &public).unwrap());
    let relay = Relay::bind(config).unwrap();
    relay.spawn();
    Setup { relay, key }
}

impl Setup {
    fn token(&self, root: &str, publish: &[&str], subscribe: &[&str], ttl: Option<u64>) -> String {
        let v = |s: &[&str]| s.iter().map(|p| p.to_string()).collect();
        let mut claims = Claims::new(root, v(publish), v(subscribe));
        claims.exp = ttl.map(|t| claims.iat.unwrap() + t);
        self.key.sign(&claims).unwrap()
    }

    /// A session whose token rides in the URL (`?jwt=`), or in SETUP if `in_setup`.
    async fn connect(&self, webtransport: bool, token: Option<&str>, in_setup: bool) -> Session {
        self.try_connect(webtransport, token, in_setup)
            .await
            .unwrap()
    }

    async fn try_connect(
        &self,
        webtransport: bool,
        token: Option<&str>,
        in_setup: bool,
    ) -> Result<Session, Error> {
        let mut session = SessionConfig::default();
        let mut query = String::new();
        match (token, in_setup) {
            (Some(t), true) => {
                session = session.with_setup_token(AuthToken::UseValue {
                    token_type: 0,
                    value: Bytes::from(t.to_string()),
                })
            }
            (Some(t), false) => query = format!("?jwt={t}"),
            (None, _) => {}
        }
        let client = Client::new(ClientConfig {
            tls: ClientTls::pinned(parse_fingerprint(&self.relay.fingerprint()).unwrap()),
            session,
            ..Default::default()
        })
        .unwrap();
        let scheme = if webtransport { "https" } else { "moqt" };
        let port = self.relay.local_addr().port();
        client
            .connect(&format!("{scheme}://localhost:{port}/{query}"))
            .await
    }
}

fn refused(r: Result<impl Sized, Error>) -> RequestErrorCode {
    match r {
        Err(Error::Rejected(e)) => e.code,
        Err(e) => panic!("expected a REQUEST_ERROR, got {e}"),
        Ok(_) => panic!("expected a REQUEST_ERROR, got OK"),
    }
}

/// No token: PUBLISH_NAMESPACE is UNAUTHORIZED. A token for `room/a` publishes there and
/// nowhere else, from the URL or from SETUP, and a request's own token decides for it.
#[tokio::test]
async fn publish_needs_a_grant_for_the_namespace() {
    let s = relay(&[]);
    for wt in [false, true] {
        case(format!("{wt:?}"), async {
            let anon = s.connect(wt, None, false).await;
            assert_eq!(
                refused(anon.publish_namespace(ns("room/a")).await),
                RequestErrorCode::UNAUTHORIZED
            );
            let token = s.token("room", &["a"], &[], None);
            for in_setup in [false, true] {
                let alice = s.connect(wt, Some(&token), in_setup).await;
                let _ok = alice.publish_namespace(ns("room/a")).await.unwrap();
                assert_eq!(
                    refused(alice.publish_namespace(ns("room/b")).await),
                    RequestErrorCode::UNAUTHORIZED
                );
                // `a` is exact: nothing beneath it.
                assert_eq!(
                    refused(alice.publish_namespace(ns("room/a/x")).await),
                    RequestErrorCode::UNAUTHORIZED
                );
            }
            // A request's AUTHORIZATION_TOKEN grants that request on a session without one.
            let mut params = Parameters::default();
            params.authorization_tokens.push(AuthToken::UseValue {
                token_type: 0,
                value: Bytes::from(s.token("room", &["b"], &[], None)),
            });
            let _ok = anon
                .publish_namespace_with(ns("room/b"), params)
                .await
                .unwrap();
            // A malformed token in a request is MALFORMED_AUTH_TOKEN (draft-19 §10.2.2).
            let mut params = Parameters::default();
            params.authorization_tokens.push(AuthToken::UseValue {
                token_type: 0,
                value: Bytes::from_static(b"not-a-jwt"),
            });
            assert_eq!(
                refused(anon.publish_namespace_with(ns("room/c"), params).await),
                RequestErrorCode::MALFORMED_AUTH_TOKEN
            );
        })
        .await;
    }
}

/// A subscriber allowed `room/a/**` may SUBSCRIBE_NAMESPACE `room` but only ever learns
/// `room/a` namespaces: `room/b`, announced before and after, never reaches it.
#[tokio::test]
async fn discovery_reveals_only_what_the_grant_allows() {
    let s = relay(&[]);
    for wt in [false, true] {
        case(format!("{wt:?}"), async {
            let r = if wt { "wt" } else { "quic" };
            let ns = |p: &str| ns(&format!("{r}/{p}"));
            let publisher = s
                .connect(wt, Some(&s.token("", &["**"], &[], None)), false)
                .await;
            let _b1 = publisher.publish_namespace(ns("room/b/1")).await.unwrap();
            let _a1 = publisher.publish_namespace(ns("room/a/1")).await.unwrap();
            let viewer = s
                .connect(
                    wt,
                    Some(&s.token(&format!("{r}/room"), &[], &["a/**"], None)),
                    false,
                )
                .await;
            // Nothing under `other` is visible to it: refused outright.
            assert_eq!(
                refused(viewer.subscribe_namespace(ns("other")).await),
                RequestErrorCode::UNAUTHORIZED
            );
            let mut found = viewer.subscribe_namespace(ns("room")).await.unwrap();
            let _b2 = publisher.publish_namespace(ns("room/b/2")).await.unwrap();
            let _a2 = publisher.publish_namespace(ns("room/a/2")).await.unwrap();
            let mut seen = Vec::new();
            while seen.len() < 2 {
                match found.next().await.unwrap().unwrap() {
                    NamespaceEvent::Added(n) => seen.push(n),
                    NamespaceEvent::Removed(n) => panic!("unexpected removal of {n}"),
                }
            }
            seen.sort();
            assert_eq!(seen, vec![ns("room/a/1"), ns("room/a/2")]);
            // A subscribe for the namespace it cannot see is refused too.
            assert_eq!(
                refused(
                    viewer
                        .subscribe(
                            moq_core::FullTrackName::new(ns("room/b/1"), "t").unwrap(),
                            Default::default()
                        )
                        .await
                ),
                RequestErrorCode::UNAUTHORIZED
            );
        })
        .await;
    }
}

/// A session whose token expires is closed with EXPIRED_AUTH_TOKEN; a token already expired
/// is refused at SETUP with the same code.
#[tokio::test]
async fn expiry_closes_the_session() {
    let s = relay(&[]);
    for wt in [false, true] {
        case(format!("expires, webtransport {wt}"), async {
            // `exp` has one-second resolution: 2 s from now is 1-2 s away.
            let session = s
                .connect(wt, Some(&s.token("", &["**"], &["**"], Some(2))), false)
                .await;
            let _ok = session.publish_namespace(ns("live")).await.unwrap();
            let err = session.closed().await;
            assert_eq!(
                err.session_code(),
                SessionErrorCode::EXPIRED_AUTH_TOKEN,
                "{err}"
            );
        })
        .await;
    }
    let mut claims = Claims::new("", vec!["**".into()], vec![]);
    claims.exp = Some(1);
    let stale = s.key.sign(&claims).unwrap();
    for in_setup in [false, true] {
        case(format!("expired, in setup {in_setup}"), async {
            let err = match s.try_connect(false, Some(&stale), in_setup).await {
                Ok(session) => session.closed().await,
                Err(e) => e,
            };
            assert_eq!(
                err.session_code(),
                SessionErrorCode::EXPIRED_AUTH_TOKEN,
                "{err}"
            );
        })
        .await;
    }
}

/// The public prefix needs no token, both ways; outside it a token is still needed.
#[tokio::test]
async fn public_prefix_is_open() {
    let s = relay(&["demo"]);
    for wt in [false, true] {
        case(format!("{wt:?}"), async {
            let anon = s.connect(wt, None, false).await;
            let _ok = anon.publish_namespace(ns("demo/clock")).await.unwrap();
            let mut found = anon.subscribe_namespace(ns("demo")).await.unwrap();
            match found.next().await.unwrap().unwrap() {
                NamespaceEvent::Added(n) => assert_eq!(n, ns("demo/clock")),
                e => panic!("{e:?}"),
            }
            assert_eq!(
                refused(anon.publish_namespace(ns("private")).await),
                RequestErrorCode::UNAUTHORIZED
            );
        })
        .await;
    }
}

fn data(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/moq-token")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(data(name))
        .unwrap()
        .trim()
        .to_string()
}

/// Keys and tokens minted by moq-dev's `moq-token` verify here, with the grants it meant
/// (`put`/`get` prefixes under a root), and its expired token is EXPIRED_AUTH_TOKEN.
#[test]
fn moq_token_fixtures_verify() {
    use moq_relay::auth::TokenError;
    let mut keys = KeySet::new();
    keys.add_path(&data("")).unwrap();
    assert_eq!(keys.len(), 3);
    let now = std::time::SystemTime::now();
    for t in ["es.token", "ed.token"] {
        let g = keys.verify(&read(t), now).unwrap();
        assert!(g.may_publish(&[b"room", b"alice"]) && g.may_publish(&[b"room", b"alice", b"cam"]));
        assert!(!g.may_publish(&[b"room", b"bob"]));
        assert!(g.may_subscribe(&[b"room", b"bob"]) && !g.may_subscribe(&[b"other"]));
    }
    assert!(
        keys.verify(&read("hs.token"), now)
            .unwrap()
            .may_publish(&[b"demo", b"x"])
    );
    assert_eq!(
        keys.verify(&read("es-expired.token"), now).unwrap_err(),
        TokenError::Expired
    );
}

/// With moq-dev's tool installed ($MOQ_TOKEN_TOOL, from scripts/peers.env): tokens it mints now
/// verify here, and tokens we mint verify with it, for each algorithm.
#[test]
fn moq_token_tool_both_ways() {
    let Some(tool) =
        std::env::var_os("MOQ_TOKEN_TOOL").filter(|t| std::path::Path::new(t).exists())
    else {
        eprintln!(
            "MOQ_TOKEN_TOOL not set or missing: moq-dev's tool not installed, live check skipped"
        );
        return;
    };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("moq-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&tool)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    for alg in ["HS256", "ES256", "EdDSA"] {
        let key = dir.join(format!("{alg}.jwk"));
        let public = dir.join(format!("{alg}.pub.jwk"));
        let (k, p) = (key.to_str().unwrap(), public.to_str().unwrap());
        let mut generate = vec!["generate", "--algorithm", alg, "--id", alg, "--out", k];
        if alg != "HS256" {
            generate.extend(["--public", p]);
        }
        run(&generate);
        let verify_with = if alg == "HS256" { &key } else { &public };
        // Theirs, verified here.
        let token = run(&[
            "sign",
            "--key",
            k,
            "--root",
            "room",
            "--publish",
            "alice",
            "--subscribe",
            "",
        ]);
        let mut keys = KeySet::new();
        keys.add_path(verify_with).unwrap();
        let g = keys.verify(&token, std::time::SystemTime::now()).unwrap();
        assert!(
            g.may_publish(&[b"room", b"alice"]) && !g.may_publish(&[b"room", b"bob"]),
            "{alg}"
        );
        // Ours, with their key, verified by their tool.
        let jwk = Jwk::parse(&std::fs::read_to_string(&key).unwrap()).unwrap();
        let ours = jwk
            .sign(&Claims::new(
                "room",
                vec!["alice/**".into()],
                vec!["**".into()],
            ))
            .unwrap();
        let tfile = dir.join(format!("{alg}.ours.token"));
        std::fs::write(&tfile, &ours).unwrap();
        let payload = run(&[
            "verify",
            "--key",
            verify_with.to_str().unwrap(),
            "--in",
            tfile.to_str().unwrap(),
        ]);
        assert!(payload.contains("alice"), "{alg}: {payload}");
    }
}
