//! Drafts 14-16: the one bidirectional control stream, against a raw peer over loopback QUIC.
//!
//! The raw side writes and reads the draft-14/16 wire (CLIENT_SETUP, per-request answers
//! addressed by Request ID or namespace, MAX_REQUEST_ID); our side is a `Session` that runs the
//! same request machinery as for the newer drafts, on virtual streams.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::raw::{RawConn, RawServer, SingleControl, encode, raw_setup};
use common::{TestServer, timeout};
use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::{
    Address, ClientSetup, MaxRequestId, Message, PublishNamespace, PublishNamespaceCancel,
    PublishNamespaceDone, RequestOk, RequestType, ServerSetup, Subscribe, SubscribeNamespace,
    UnsubscribeNamespace,
};
use moq_core::{FullTrackName, TrackNamespace, Version};
use moq_transport::namespace::{NamespaceEvent, NamespaceIndex};
use moq_transport::{Error, Session, SessionConfig};

const V14: Version = Version::Draft14;
const V16: Version = Version::Draft16;

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

/// A server like a relay: what one client announces, every client can discover.
fn relay_config() -> SessionConfig {
    let shared = NamespaceIndex::new();
    SessionConfig::default()
        .with_namespaces(shared.clone())
        .with_announced(shared)
}

/// A raw client that completed SETUP with `srv` at `v`, and the server's session.
async fn raw_client(srv: &mut TestServer, v: Version) -> (RawConn, SingleControl, Session) {
    let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), v).await;
    let versions = if v.setup_has_versions() {
        vec![v.setup_number()]
    } else {
        Vec::new()
    };
    let ((ctl, server), session) =
        tokio::join!(raw.single_setup(versions, raw_setup()), srv.server.accept());
    assert_eq!(
        server.version,
        v.setup_has_versions().then(|| v.setup_number())
    );
    let session = session.expect("server closed");
    srv.sessions.push(session.clone());
    (raw, ctl, session)
}

fn subscribe_namespace(id: u64, prefix: &[&str]) -> SubscribeNamespace {
    SubscribeNamespace {
        request_id: id,
        prefix: ns(prefix),
        params: Default::default(),
    }
}

#[tokio::test]
async fn draft14_negotiates_its_version_in_client_setup() {
    timeout(async {
        let srv = TestServer::start(relay_config());
        // An older draft first: the server selects draft-14 (draft-14 §9.3.1).
        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), V14).await;
        let ((_ctl, server), session) = tokio::join!(
            raw.single_setup(vec![0xff00_000d, V14.setup_number()], raw_setup()),
            srv.server.accept()
        );
        assert_eq!(server.version, Some(V14.setup_number()));
        assert!(server.max_request_id.is_some_and(|m| m > 0));
        assert_eq!(session.unwrap().version(), V14);

        // No version in common: VERSION_NEGOTIATION_FAILED.
        let raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), V14).await;
        let (mut send, _recv) = raw.conn.open_bi().await.unwrap();
        let setup = ClientSetup {
            versions: vec![0xff00_000d],
            max_request_id: None,
            options: raw_setup(),
        };
        send.write_all(&encode(setup, V14)).await.unwrap();
        assert_eq!(
            raw.closed_code().await,
            SessionErrorCode::VERSION_NEGOTIATION_FAILED
        );
    })
    .await;
}

/// Seed 002 (draft-14 §9.22-9.25) on its own wire: SUBSCRIBE_NAMESPACE is answered
/// SUBSCRIBE_NAMESPACE_OK and followed by a PUBLISH_NAMESPACE per matching namespace and per
/// later change; an overlapping prefix is SUBSCRIBE_NAMESPACE_ERROR NAMESPACE_PREFIX_OVERLAP;
/// UNSUBSCRIBE_NAMESPACE ends it; a prefix of 0 fields closes the session.
#[tokio::test]
async fn seed002_subscribe_namespace_on_the_draft14_wire() {
    timeout(async {
        let mut srv = TestServer::start(relay_config());
        let (publisher, _) = srv
            .connect(common::Transport::Quic, vec![V14], SessionConfig::default())
            .await;
        let p100 = ns(&["example.com", "meeting=123", "participant=100"]);
        let p200 = ns(&["example.com", "meeting=123", "participant=200"]);
        let _a = publisher.publish_namespace(p100.clone()).await.unwrap();
        let _b = publisher.publish_namespace(p200.clone()).await.unwrap();

        let (raw, mut ctl, _session) = raw_client(&mut srv, V14).await;
        ctl.send(
            subscribe_namespace(0, &["example.com", "meeting=123"]),
            None,
            None,
        )
        .await;
        // SUBSCRIBE_NAMESPACE_OK (0x12) for Request ID 0.
        let (ty, msg, addr) = ctl.next().await;
        assert_eq!((ty, addr), (0x12, Some(Address::Request(0))), "{msg:?}");
        // Then PUBLISH_NAMESPACE for each match, as requests of the server (odd IDs).
        let mut seen = Vec::new();
        for _ in 0..2 {
            let (ty, msg, _) = ctl.next().await;
            let Message::PublishNamespace(p) = msg else {
                panic!("expected PUBLISH_NAMESPACE, got {msg:?}")
            };
            assert_eq!(ty, 0x06);
            assert_eq!(p.request_id % 2, 1);
            // Accept it (PUBLISH_NAMESPACE_OK, 0x07).
            ctl.send(
                RequestOk::default(),
                Some(Address::Request(p.request_id)),
                Some(RequestType::PublishNamespace),
            )
            .await;
            seen.push(p.namespace);
        }
        seen.sort_by_key(|n| format!("{n}"));
        assert_eq!(seen, vec![p100.clone(), p200.clone()]);

        // A prefix that is a prefix of, extends or equals an active one (draft-14 §9.22).
        for (id, prefix) in [
            (2, &["example.com"][..]),
            (4, &["example.com", "meeting=123", "participant=100"][..]),
            (6, &["example.com", "meeting=123"][..]),
        ] {
            ctl.send(subscribe_namespace(id, prefix), None, None).await;
            let (ty, msg, addr) = ctl.next().await;
            let Message::RequestError(e) = msg else {
                panic!("expected SUBSCRIBE_NAMESPACE_ERROR, got {msg:?}")
            };
            // SUBSCRIBE_NAMESPACE_ERROR (0x13), NAMESPACE_PREFIX_OVERLAP.
            assert_eq!((ty, addr), (0x13, Some(Address::Request(id))));
            assert_eq!(e.code, RequestErrorCode::PREFIX_OVERLAP);
        }

        // A withdrawn namespace is PUBLISH_NAMESPACE_DONE, named by its namespace at draft-14.
        drop(_a);
        let (ty, msg, addr) = ctl.next().await;
        assert!(matches!(msg, Message::PublishNamespaceDone(_)), "{msg:?}");
        assert_eq!((ty, addr), (0x09, Some(Address::Namespace(p100.clone()))));

        // UNSUBSCRIBE_NAMESPACE (by prefix at draft-14): nothing more for that prefix, and the
        // prefix is free again.
        ctl.send(
            UnsubscribeNamespace,
            Some(Address::Namespace(ns(&["example.com", "meeting=123"]))),
            None,
        )
        .await;
        ctl.send(subscribe_namespace(8, &["example.com"]), None, None)
            .await;
        let (ty, _, addr) = ctl.next().await;
        assert_eq!((ty, addr), (0x12, Some(Address::Request(8))));
        let (_, msg, _) = ctl.next().await;
        assert!(
            matches!(&msg, Message::PublishNamespace(p) if p.namespace == p200),
            "{msg:?}"
        );

        // A prefix of 0 fields is a PROTOCOL_VIOLATION at draft-14.
        let mut bad = Vec::new();
        let empty = Message::from(subscribe_namespace(10, &[]));
        // The encoder refuses it too, so build it under draft-16 rules and re-type it.
        empty
            .encode_addressed(&Default::default(), &mut bad, V16)
            .unwrap();
        ctl.write(&bad).await;
        assert_eq!(
            raw.closed_code().await,
            SessionErrorCode::PROTOCOL_VIOLATION
        );
    })
    .await;
}

/// Seed 001 (draft-16 §6.2, §9.20-9.23) on its own wire: exactly one REQUEST_OK or
/// REQUEST_ERROR answers PUBLISH_NAMESPACE; PUBLISH_NAMESPACE_DONE withdraws it;
/// PUBLISH_NAMESPACE_CANCEL revokes it and no PUBLISH_NAMESPACE_DONE follows.
#[tokio::test]
async fn seed001_publish_namespace_lifecycle_on_the_draft16_wire() {
    timeout(async {
        let mut srv = TestServer::start(relay_config());
        let (raw, mut ctl, session) = raw_client(&mut srv, V16).await;
        let room = ns(&["meet", "room1"]);
        let (_, mut watch) = session.announced().watch(&ns(&["meet"]), 16);
        ctl.send(
            PublishNamespace {
                request_id: 0,
                namespace: room.clone(),
                params: Default::default(),
            },
            None,
            None,
        )
        .await;
        let (ty, msg, addr) = ctl.next().await;
        assert_eq!((ty, addr), (0x07, Some(Address::Request(0))), "{msg:?}");
        assert_eq!(
            watch.next().await,
            Some(NamespaceEvent::Added(room.clone()))
        );
        // Withdrawn by PUBLISH_NAMESPACE_DONE (Request ID at draft-16).
        ctl.send(PublishNamespaceDone, Some(Address::Request(0)), None)
            .await;
        assert_eq!(
            watch.next().await,
            Some(NamespaceEvent::Removed(room.clone()))
        );

        // Revoked: PUBLISH_NAMESPACE_CANCEL with the code, for the request's ID.
        ctl.send(
            PublishNamespace {
                request_id: 2,
                namespace: room.clone(),
                params: Default::default(),
            },
            None,
            None,
        )
        .await;
        let (ty, _, addr) = ctl.next().await;
        assert_eq!((ty, addr), (0x07, Some(Address::Request(2))));
        assert_eq!(session.revoke_namespace(&room, StreamResetCode(0x4)), 1);
        let (ty, msg, addr) = ctl.next().await;
        assert_eq!((ty, addr), (0x0C, Some(Address::Request(2))));
        let Message::PublishNamespaceCancel(c) = msg else {
            panic!("{msg:?}")
        };
        assert_eq!(c.code, RequestErrorCode(0x4));
        drop(raw);
    })
    .await;
}

/// Seed 001 from the publisher's side: our PUBLISH_NAMESPACE waits for its one answer; a
/// second one closes the session; after PUBLISH_NAMESPACE_CANCEL we send no
/// PUBLISH_NAMESPACE_DONE.
#[tokio::test]
async fn seed001_our_publish_namespace_on_the_draft16_wire() {
    timeout(async {
        let raw_srv = RawServer::start(&[V16]);
        let client = raw_srv.client(vec![V16]);
        let url = raw_srv.url();
        let (session, (_raw, mut ctl)) = tokio::join!(client.connect(&url), async {
            let mut raw = raw_srv.accept().await;
            let ctl = raw.single_accept(100).await;
            (raw, ctl)
        });
        let session = session.unwrap();
        let spawn_publish = |name: &'static str| {
            let s = session.clone();
            tokio::spawn(async move { s.publish_namespace(ns(&["meet", name])).await })
        };
        let first = spawn_publish("room1");
        let (ty, msg, _) = ctl.next().await;
        assert_eq!(ty, 0x06);
        let Message::PublishNamespace(p) = msg else {
            panic!("{msg:?}")
        };
        // The request waits for its one answer.
        ctl.send(
            RequestOk::default(),
            Some(Address::Request(p.request_id)),
            None,
        )
        .await;
        let room1 = first.await.unwrap().unwrap();
        let second = spawn_publish("room2");
        let (_, msg, _) = ctl.next().await;
        let Message::PublishNamespace(p2) = msg else {
            panic!("{msg:?}")
        };
        ctl.send(
            RequestOk::default(),
            Some(Address::Request(p2.request_id)),
            None,
        )
        .await;
        let room2 = second.await.unwrap().unwrap();
        // Revoke room2: its handle ends, and dropping it sends no PUBLISH_NAMESPACE_DONE (the
        // next frame is the next request's).
        ctl.send(
            PublishNamespaceCancel {
                code: RequestErrorCode::UNAUTHORIZED,
                reason: "expired".into(),
            },
            Some(Address::Request(p2.request_id)),
            None,
        )
        .await;
        let _revoked: Error = room2.ended().await;
        drop(room2);
        let third = spawn_publish("room3");
        let (ty, msg, _) = ctl.next().await;
        assert_eq!(ty, 0x06, "{msg:?}");
        assert!(room1.is_active());
        // A second REQUEST_OK for the first one is a protocol violation (seed 001: SHOULD).
        ctl.send(
            RequestOk::default(),
            Some(Address::Request(p.request_id)),
            None,
        )
        .await;
        let _ = third.await;
        let err = session.closed().await;
        assert_eq!(
            err.session_code(),
            SessionErrorCode::PROTOCOL_VIOLATION,
            "{err}"
        );
    })
    .await;
}

/// MAX_REQUEST_ID (draft-14 §9.5): the server grants the window in SETUP and more as requests
/// complete; a request at or above the grant is TOO_MANY_REQUESTS.
#[tokio::test]
async fn max_request_id_is_granted_as_requests_complete() {
    timeout(async {
        let mut config = relay_config();
        config.limits.max_peer_requests = 2;
        let mut srv = TestServer::start(config);
        let (raw, mut ctl, _session) = raw_client(&mut srv, V16).await;
        let track = |n: &'static str| FullTrackName::new(ns(&["none"]), n).unwrap();
        // Two requests fit (IDs 0 and 2 below 4); both are refused at once (no such track),
        // which completes them and grants two more.
        for id in [0, 2] {
            ctl.send(
                Subscribe {
                    request_id: id,
                    track: track("t"),
                    params: Default::default(),
                },
                None,
                None,
            )
            .await;
        }
        let mut answers = 0;
        let mut max = None;
        // Grants grow as the two complete (a quarter window at a time), up to 0 + 2 * (2 + 2).
        while answers < 2 || max != Some(8) {
            match ctl.next().await {
                (_, Message::RequestError(_), Some(Address::Request(_))) => answers += 1,
                (_, Message::MaxRequestId(m), None) => max = Some(m.request_id),
                (_, m, a) => panic!("unexpected {m:?} {a:?}"),
            }
        }
        // ID 8 is at the grant: TOO_MANY_REQUESTS (0x7).
        ctl.send(
            Subscribe {
                request_id: 4,
                track: track("t"),
                params: Default::default(),
            },
            None,
            None,
        )
        .await;
        ctl.send(
            Subscribe {
                request_id: 6,
                track: track("t"),
                params: Default::default(),
            },
            None,
            None,
        )
        .await;
        ctl.send(
            Subscribe {
                request_id: 8,
                track: track("t"),
                params: Default::default(),
            },
            None,
            None,
        )
        .await;
        assert_eq!(raw.closed_code().await, SessionErrorCode(0x7));
    })
    .await;
}

/// Our requests wait for the peer's MAX_REQUEST_ID, say so with REQUESTS_BLOCKED, and go out in
/// Request ID order once granted (draft-14 §9.5, §9.6).
#[tokio::test]
async fn our_requests_wait_for_max_request_id() {
    timeout(async {
        let raw_srv = RawServer::start(&[V16]);
        let client = raw_srv.client(vec![V16]);
        let url = raw_srv.url();
        let (session, (_raw, mut ctl)) = tokio::join!(client.connect(&url), async {
            let mut raw = raw_srv.accept().await;
            let ctl = raw.single_accept(2).await;
            (raw, ctl)
        });
        let session = session.unwrap();
        let s2 = session.clone();
        let first = tokio::spawn(async move { s2.publish_namespace(ns(&["a"])).await });
        let (_, msg, _) = ctl.next().await;
        assert!(matches!(&msg, Message::PublishNamespace(p) if p.request_id == 0));
        let s3 = session.clone();
        let second = tokio::spawn(async move { s3.publish_namespace(ns(&["b"])).await });
        let (ty, msg, _) = ctl.next().await;
        assert_eq!(ty, 0x1A);
        assert!(
            matches!(&msg, Message::RequestsBlocked(b) if b.maximum_request_id == 2),
            "{msg:?}"
        );
        ctl.send(MaxRequestId { request_id: 4 }, None, None).await;
        let (_, msg, _) = ctl.next().await;
        assert!(matches!(&msg, Message::PublishNamespace(p) if p.request_id == 2));
        for id in [0, 2] {
            ctl.send(RequestOk::default(), Some(Address::Request(id)), None)
                .await;
        }
        let a = first.await.unwrap().unwrap();
        let b = second.await.unwrap().unwrap();
        assert!(a.is_active() && b.is_active());
        // Withdrawing one is PUBLISH_NAMESPACE_DONE for its Request ID.
        drop(a);
        let (ty, _, addr) = ctl.next().await;
        assert_eq!((ty, addr), (0x09, Some(Address::Request(0))));
        let _ = (ServerSetup::default(), Error::GoingAway);
    })
    .await;
}
