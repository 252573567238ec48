//! The relay's WebSocket listener: MOQT over QMux over WebSocket on its HTTP side, at any
//! path. Clients over it publish, subscribe, discover and fetch like clients over QUIC (and
//! with them); bad input at the upgrade or in the byte stream ends that connection alone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::net::SocketAddr;

use futures::{SinkExt, StreamExt};
use moq_client::{
    Client, FullTrackName, Location, NamespaceEvent, Publisher, Session, SubscribeOptions,
    TrackNamespace, Version,
};
use moq_relay::Relay;
use moq_transport::endpoint::websocket::MAX_MESSAGE;
use qmux::ws::tokio_tungstenite::{self as tokio_ws, tungstenite};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tungstenite::Message;
use tungstenite::client::IntoClientRequest;

mod common;
use common::{case, read_objects, timeout};

/// A development relay with its HTTP side on a loopback TCP port.
fn ws_relay() -> (Relay, SocketAddr) {
    let relay = common::dev_relay();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let http = listener.local_addr().unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let router = moq_relay::http::router(relay.clone(), None);
    relay.spawn_task(async move {
        let _ = moq_relay::http::serve(listener, router).await;
    });
    (relay, http)
}

/// A development relay with its HTTP side over TLS (its certificate) on a loopback TCP port.
fn wss_relay() -> (Relay, SocketAddr) {
    let relay = common::dev_relay();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let https = listener.local_addr().unwrap();
    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
    let router = moq_relay::http::router(relay.clone(), None);
    let cert = relay.certificate().clone();
    relay.spawn_task(async move {
        let _ = moq_relay::http::serve_tls(listener, router, &cert).await;
    });
    (relay, https)
}

fn ws_url(http: SocketAddr) -> String {
    format!("ws://localhost:{}/moq", http.port())
}

fn client(version: Version) -> Client {
    Client::builder()
        .versions(vec![version])
        .publisher(Publisher::default())
        .build()
        .unwrap()
}

async fn connect(http: SocketAddr, version: Version) -> Session {
    client(version).connect(&ws_url(http)).await.unwrap()
}

fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

fn track(n: &TrackNamespace, name: &str) -> FullTrackName {
    FullTrackName::new(n.clone(), name.as_bytes().to_vec()).unwrap()
}

fn publish_groups(p: &moq_client::TrackProducer, groups: std::ops::Range<u64>) {
    for g in groups {
        let mut w = p.append_group().unwrap();
        w.write(format!("g{g}")).unwrap();
        w.finish().unwrap();
    }
}

/// Publisher and subscriber both over WebSocket, at drafts 14, 16, 19 and 22: the subscriber
/// discovers the publisher's namespace, receives what is published after it subscribed, and
/// fetches earlier groups; a subscriber over raw QUIC gets the same track. The relay counts
/// the sessions under transport "websocket".
#[tokio::test]
async fn publish_subscribe_discover_fetch_over_websocket() {
    let (relay, http) = ws_relay();
    for version in [
        Version::Draft14,
        Version::Draft16,
        Version::Draft19,
        Version::Draft22,
    ] {
        case(format!("{version:?}"), async {
            let n = ns(&["ws", &version.draft().to_string()]);
            let name = track(&n, "t");
            let p = connect(http, version).await;
            assert_eq!(p.version(), version);
            let h = p.publisher().publish_namespace(n.clone()).unwrap();
            h.announced().await.unwrap();
            let producer = p.publisher().create_track(name.clone()).unwrap();
            publish_groups(&producer, 0..3);

            let s = connect(http, version).await;
            let mut d = s
                .subscriber()
                .subscribe_namespace(ns(&["ws"]))
                .await
                .unwrap();
            loop {
                match d.next().await.unwrap().unwrap() {
                    NamespaceEvent::Added(got) if got == n => break,
                    NamespaceEvent::Added(_) => continue,
                    e => panic!("{e:?}"),
                }
            }
            let mut sub = s
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            let quic = common::client(&relay.fingerprint())
                .connect(&format!("moqt://localhost:{}/", relay.local_addr().port()))
                .await
                .unwrap();
            let mut over_quic = quic
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            publish_groups(&producer, 3..5);
            let live: Vec<u64> = read_objects(&mut sub, 2)
                .await
                .iter()
                .map(|o| o.0)
                .collect();
            assert_eq!(live, vec![3, 4]);
            let quic_live = read_objects(&mut over_quic, 2).await;
            assert_eq!(quic_live, vec![(3, "g3".into()), (4, "g4".into())]);
            let mut f = s
                .subscriber()
                .fetch(name.clone(), Location::new(1, 0), Location::new(2, 0))
                .await
                .unwrap();
            let mut fetched = Vec::new();
            while let Some(o) = f.next_object().await {
                let o = o.unwrap();
                fetched.push((o.location.group, o.payload.to_vec()));
            }
            assert_eq!(fetched, vec![(1, b"g1".to_vec()), (2, b"g2".to_vec())]);
            let total = relay.metrics().render();
            assert!(
                total.contains(&format!(
                    "moq_relay_sessions_active{{version=\"{version}\",transport=\"websocket\"}} 2"
                )),
                "{total}"
            );
        })
        .await;
    }
}

/// A raw WebSocket to the relay offering `protocols`.
async fn raw_ws(
    http: SocketAddr,
    protocols: &str,
) -> Result<
    (
        tokio_ws::WebSocketStream<tokio::net::TcpStream>,
        tungstenite::handshake::client::Response,
    ),
    tungstenite::Error,
> {
    let mut request = ws_url(http).into_client_request().unwrap();
    request.headers_mut().insert(
        tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL,
        protocols.parse().unwrap(),
    );
    let tcp = tokio::net::TcpStream::connect(http).await.unwrap();
    let config = tungstenite::protocol::WebSocketConfig::default().max_message_size(None);
    tokio_ws::client_async_with_config(request, tcp, Some(config)).await
}

/// Every message the relay sends until it ends the connection (an error or a close ends it
/// too): the WebSocket must end, not hang.
async fn read_to_end(ws: &mut tokio_ws::WebSocketStream<tokio::net::TcpStream>) -> Vec<Message> {
    let mut got = Vec::new();
    while let Some(Ok(m)) = ws.next().await {
        got.push(m);
    }
    got
}

/// A session over WebSocket that keeps receiving: each call publishes one more group and
/// checks it arrives.
struct Watch {
    producer: moq_client::TrackProducer,
    sub: moq_client::TrackConsumer,
    next: u64,
    _sessions: (Session, Session, moq_client::NamespaceHandle),
}

impl Watch {
    async fn new(http: SocketAddr) -> Watch {
        let n = ns(&["alive"]);
        let name = track(&n, "t");
        let p = connect(http, Version::Draft19).await;
        let h = p.publisher().publish_namespace(n.clone()).unwrap();
        h.announced().await.unwrap();
        let producer = p.publisher().create_track(name.clone()).unwrap();
        let s = connect(http, Version::Draft18).await;
        let sub = s
            .subscriber()
            .subscribe(name, SubscribeOptions::default())
            .await
            .unwrap();
        Watch {
            producer,
            sub,
            next: 0,
            _sessions: (p, s, h),
        }
    }

    async fn still_flows(&mut self) {
        publish_groups(&self.producer, self.next..self.next + 1);
        let got = read_objects(&mut self.sub, 1).await;
        assert_eq!(got, vec![(self.next, format!("g{}", self.next))]);
        self.next += 1;
    }
}

/// Bad input ends the connection it came on, with a reason, and nothing else: a subprotocol
/// that is not MOQT over QMux is refused at the upgrade (400, saying why); a WebSocket
/// message larger than allowed, a socket closed in the middle of a message, and bytes that
/// are not QMux frames each end their connection; a session over WebSocket meanwhile keeps
/// receiving.
#[tokio::test]
async fn bad_input_ends_only_its_connection() {
    let (relay, http) = ws_relay();
    let mut watch = timeout(Watch::new(http)).await;
    // The root path takes sessions too (a client given the relay's bare address).
    let _root =
        timeout(client(Version::Draft19).connect(&format!("ws://localhost:{}", http.port())))
            .await
            .unwrap();
    let sessions = relay.sessions();

    timeout(async {
        // Not MOQT over QMux: refused at the upgrade, no session.
        for offered in [
            "chat, webtransport",
            "qmux-01",
            "moqt-19",
            "qmux-01.moqt-99",
        ] {
            match raw_ws(http, offered).await {
                Err(tungstenite::Error::Http(r)) => {
                    assert_eq!(r.status(), 400, "{offered}");
                    let body = String::from_utf8_lossy(r.body().as_deref().unwrap_or_default())
                        .into_owned();
                    assert!(body.contains("no MOQT-over-QMux subprotocol"), "{body}");
                }
                other => panic!("{offered}: {other:?}"),
            }
        }
        watch.still_flows().await;

        // A message over the limit ends the connection before it is buffered.
        let (mut ws, response) = raw_ws(http, "qmux-01.moqt-19").await.unwrap();
        assert_eq!(
            response.headers()[tungstenite::http::header::SEC_WEBSOCKET_PROTOCOL],
            "qmux-01.moqt-19"
        );
        let big = vec![0u8; MAX_MESSAGE * 4];
        let _ = ws.send(Message::binary(big)).await;
        read_to_end(&mut ws).await;
        watch.still_flows().await;

        // A socket closed in the middle of a message.
        let (mut ws, _) = raw_ws(http, "qmux-01.moqt-19").await.unwrap();
        // A masked binary frame announcing 4096 bytes, of which 16 are sent.
        let mut partial = vec![0x82, 0xfe, 0x10, 0x00, 1, 2, 3, 4];
        partial.extend_from_slice(&[0x55; 16]);
        let tcp = ws.get_mut();
        tcp.write_all(&partial).await.unwrap();
        tcp.shutdown().await.unwrap();
        let mut rest = Vec::new();
        // The relay closes its end: the read reaches the end (or the connection is reset).
        let _ = tcp.read_to_end(&mut rest).await;
        watch.still_flows().await;

        // Bytes that are not QMux frames: QMux's CONNECTION_CLOSE, then the end.
        let (mut ws, _) = raw_ws(http, "qmux-01.moqt-19").await.unwrap();
        // A record of 3 bytes holding an unknown frame type (0x3fff, two-byte varint 0x7fff).
        let _ = ws.send(Message::binary(vec![0x03, 0x7f, 0xff, 0x00])).await;
        let got = read_to_end(&mut ws).await;
        let last = got
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Binary(b) => Some(b.clone()),
                _ => None,
            })
            .expect("no QMux record from the relay");
        // QMux's CONNECTION_CLOSE (0x1c) with its error code 1002 (varint 0x43ea) and the
        // reason.
        assert_eq!(last.get(..3), Some(&[0x1c, 0x43, 0xea][..]), "{last:?}");
        assert!(
            String::from_utf8_lossy(&last).contains("invalid frame type"),
            "{last:?}"
        );
        watch.still_flows().await;
    })
    .await;
    // None of them became a session; the others are still there.
    assert_eq!(relay.sessions(), sessions);
}

/// wss:// to the relay's HTTP side over TLS: a client that pins the relay's certificate
/// publishes and another subscribes, both over the secure WebSocket; a client that trusts only
/// the web PKI is refused, saying why.
#[tokio::test]
async fn publish_subscribe_over_wss() {
    let (relay, https) = wss_relay();
    timeout(async {
        let url = format!("wss://localhost:{}/moq", https.port());
        let pinned = || {
            Client::builder()
                .versions(vec![Version::Draft19])
                .publisher(Publisher::default())
                .fingerprint(&relay.fingerprint())
                .unwrap()
                .build()
                .unwrap()
        };
        let n = ns(&["wss"]);
        let name = track(&n, "t");
        let p = pinned().connect(&url).await.unwrap();
        assert_eq!(
            p.transport().transport(),
            moq_transport::transport::TransportKind::WebSocket
        );
        let h = p.publisher().publish_namespace(n.clone()).unwrap();
        h.announced().await.unwrap();
        let producer = p.publisher().create_track(name.clone()).unwrap();
        let s = pinned().connect(&url).await.unwrap();
        let mut sub = s
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        publish_groups(&producer, 0..2);
        let got = read_objects(&mut sub, 2).await;
        assert_eq!(got, vec![(0, "g0".into()), (1, "g1".into())]);

        let err = client(Version::Draft19).connect(&url).await.unwrap_err();
        assert!(
            matches!(
                err,
                moq_client::Error::Connect(moq_client::ConnectError::UnknownIssuer { .. })
            ),
            "{err:?}"
        );
    })
    .await;
}
