//! The MoQ Cluster extension on links between relays (draft-lcurley-moq-cluster, issue 36
//! item 2): a link to an origin relay found through the registry declares this relay's Hop ID
//! (HOP_ID in SETUP), and the origin relay serves such a request one hop: never looked up in
//! its own registry and sent on to a third relay. And what moq-dev's relay declares when it
//! links to a server of ours (skipped without the peer binary). Raw QUIC.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use common::{case, ns};
use moq_client::{Client, Publisher, Session, SubscribeOptions};
use moq_core::{FullTrackName, Location, TrackNamespace, Version};
use moq_relay::cluster_ext::hop_id;
use moq_relay::registry::{NamespaceWatch, Origin, Registry, RegistryError, RelayInfo, RelayRef};
use moq_relay::{RegistryRouting, Relay, RelayConfig};
use moq_transport::tls::{Certificate, ClientTls};

/// A registry whose answers are fixed: each relay of a test gets its own, so one relay can
/// believe an origin is elsewhere than another does (what a publisher that just moved looks
/// like to two relays).
struct Fixed(HashMap<TrackNamespace, RelayRef>);

#[async_trait]
impl Registry for Fixed {
    fn lease(&self) -> Duration {
        Duration::from_secs(2)
    }
    async fn register(&self, _: &TrackNamespace, r: &RelayRef) -> Result<Origin, RegistryError> {
        Ok(Origin {
            relay: r.clone(),
            epoch: 1,
        })
    }
    async fn refresh(&self, _: &TrackNamespace, _: &Origin) -> Result<(), RegistryError> {
        Ok(())
    }
    async fn unregister(&self, _: &TrackNamespace, _: &Origin) -> Result<(), RegistryError> {
        Ok(())
    }
    async fn lookup(&self, ns: &TrackNamespace) -> Result<Option<Origin>, RegistryError> {
        Ok(self.0.get(ns).map(|r| Origin {
            relay: r.clone(),
            epoch: 1,
        }))
    }
    async fn scan(&self, _: &TrackNamespace) -> Result<Vec<TrackNamespace>, RegistryError> {
        Ok(Vec::new())
    }
    async fn watch(&self, _: &TrackNamespace) -> Result<NamespaceWatch, RegistryError> {
        Err(RegistryError::Unavailable(
            "a fixed registry has no watch".into(),
        ))
    }
    async fn heartbeat(&self, _: &RelayInfo) -> Result<(), RegistryError> {
        Ok(())
    }
    async fn relays(&self) -> Result<Vec<RelayInfo>, RegistryError> {
        Ok(Vec::new())
    }
}

/// A relay bound on an ephemeral port (not yet routing), and its registry name.
fn bind(id: &str, cert: &Certificate) -> (Relay, RelayRef) {
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
    config.publisher_wait = Duration::from_millis(200);
    let r = Relay::bind(config).unwrap();
    let me = RelayRef {
        id: id.into(),
        address: format!("moqt://localhost:{}/", r.local_addr().port()),
    };
    (r, me)
}

/// Starts `r` routing through a fixed registry that names `origin` for `room`.
fn route(r: &Relay, me: RelayRef, room: &TrackNamespace, origin: &RelayRef, cert: &Certificate) {
    let table = HashMap::from([(room.clone(), origin.clone())]);
    let mut routing = RegistryRouting::new(Arc::new(Fixed(table)), me);
    routing.tls = ClientTls {
        fingerprints: vec![cert.fingerprint()],
        ..Default::default()
    };
    assert!(r.route_through_registry(routing));
    r.spawn();
}

async fn connect(r: &Relay, version: Version) -> Session {
    Client::builder()
        .fingerprint(&r.fingerprint())
        .unwrap()
        .versions(vec![version])
        .publisher(Publisher::default())
        .build()
        .unwrap()
        .connect(&format!("moqt://localhost:{}/", r.local_addr().port()))
        .await
        .unwrap()
}

/// Three relays: B has the publisher; A's registry names B the origin, C's names A (A's view
/// is newer: the publisher moved from A to B). A client's SUBSCRIBE on A is routed to B; the
/// same SUBSCRIBE on C reaches A over an origin link that declared C's Hop ID, and A refuses
/// it rather than send it on to B (no C -> A -> B chain), also once A has its own link to B
/// (SUBSCRIBE, TRACK_STATUS, FETCH). Draft-17 on, where SETUP carries HOP_ID.
#[tokio::test]
async fn a_request_from_an_origin_link_is_not_routed_through_the_registry_again() {
    for v in [Version::Draft17, Version::Draft19, Version::Draft22] {
        case(format!("{v:?}"), async {
            let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
            let room = ns("hop/room");
            let [(a, a_me), (b, b_me), (c, c_me)] = ["A", "B", "C"].map(|id| bind(id, &cert));
            route(&a, a_me.clone(), &room, &b_me, &cert);
            route(&b, b_me.clone(), &room, &b_me, &cert);
            route(&c, c_me, &room, &a_me, &cert);
            let publisher = connect(&b, v).await;
            let h = publisher
                .publisher()
                .publish_namespace(room.clone())
                .unwrap();
            h.announced().await.unwrap();
            let track = FullTrackName::new(room.clone(), "t").unwrap();
            let producer = publisher.publisher().create_track(track.clone()).unwrap();

            // On C: C -> A over an origin link; A does not go on to B.
            let on_c = connect(&c, v).await;
            let refused = on_c
                .subscriber()
                .subscribe(track.clone(), SubscribeOptions::default())
                .await;
            assert!(
                refused.is_err(),
                "{v:?}: C -> A -> B chain served the subscription"
            );
            assert_eq!(c.origin_links(), 1, "C linked to A");
            assert_eq!(a.origin_links(), 0, "A dialed no one for C's request");

            // A client of A is still routed through A's registry to B.
            let on_a = connect(&a, v).await;
            let mut t = on_a
                .subscriber()
                .subscribe(track.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            let mut g = producer.append_group().unwrap();
            g.write("hello").unwrap();
            g.finish().unwrap();
            assert_eq!(common::read_objects(&mut t, 1).await[0].1, "hello");
            assert_eq!(a.origin_links(), 1, "A linked to B for its own client");

            // A now has a route to B, over its origin link: C's requests still stop at A.
            let again = on_c
                .subscriber()
                .subscribe(track.clone(), SubscribeOptions::default())
                .await;
            assert!(
                again.is_err(),
                "{v:?}: C -> A -> B over A's link served the subscription"
            );
            let status = on_c.subscriber().track_status(track.clone()).await;
            assert!(status.is_err(), "{v:?}: C -> A -> B answered TRACK_STATUS");
            let fetched = on_c
                .subscriber()
                .fetch(track.clone(), Location::new(0, 0), Location::new(1, 0))
                .await;
            assert!(fetched.is_err(), "{v:?}: C -> A -> B served the FETCH");
            assert_eq!(a.origin_links(), 1, "A opened no other link for C");
        })
        .await;
    }
}

#[test]
fn hop_ids_are_stable_non_zero_and_62_bit() {
    assert_eq!(hop_id("relay-a"), hop_id("relay-a"));
    assert_ne!(hop_id("relay-a"), hop_id("relay-b"));
    for id in [
        "",
        "A",
        "moqt://127.0.0.1:4443",
        "a-much-longer-relay-name.example.com",
    ] {
        let h = hop_id(id);
        assert!(h > 0 && h < 1 << 62, "{id}: {h:#x}");
    }
}

/// moq-dev's moq-relay (0.17.10, moq-net 0.3.18; $MOQ_DEV_RELAY from scripts/peers.env) dials
/// a moq-transport server of ours as its cluster peer with `--cluster-id 4242`: its SETUP
/// carries HOP_ID 4242 from draft-17 (and nothing below), which our codec reads typed.
#[tokio::test]
async fn moq_dev_relay_declares_its_hop_id() {
    let Some(bin) = moq_dev_relay() else {
        eprintln!("MOQ_DEV_RELAY not set or missing: moq-dev's relay not installed, skipped");
        return;
    };
    for (draft, expect) in [(16, None), (17, Some(4242)), (19, Some(4242))] {
        case(format!("draft-{draft}"), async {
            let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
            let mut config =
                moq_transport::endpoint::ServerConfig::new("127.0.0.1:0".parse().unwrap(), cert);
            config.webtransport = false;
            let server = moq_transport::endpoint::Server::bind(config).unwrap();
            let port = server.local_addr().unwrap().port();
            let listen = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let listen_port = listen.local_addr().unwrap().port();
            drop(listen);
            let mut child = std::process::Command::new(&bin)
                .args([
                    "--listen",
                    &format!("127.0.0.1:{listen_port}"),
                    "--listen-tls-generate",
                    "localhost",
                    "--auth-public",
                    "**",
                    "--cluster-id",
                    "4242",
                    "--cluster-connect",
                    &format!("moqt://localhost:{port}"),
                    "--connect-version",
                    &format!("moq-transport-{draft}"),
                    "--connect-tls-insecure",
                ])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            let session = server.accept().await.expect("moq-dev's relay linked");
            let declared = session.peer_setup().hop_id;
            let version = session.version();
            let _ = child.kill();
            let _ = child.wait();
            assert_eq!(version.draft(), draft);
            assert_eq!(declared, expect, "draft-{draft}: HOP_ID moq-dev declared");
        })
        .await;
    }
}

/// moq-dev's relay binary: $MOQ_DEV_RELAY, else where scripts/peers.env puts it.
fn moq_dev_relay() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("MOQ_DEV_RELAY")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(std::path::Path::new(&home).join(".cache/moq-peers/cargo/bin/moq-relay"))
        })?;
    path.exists().then_some(path)
}
