//! The client's WebSocket fallback (`Client::with_websocket_fallback`): WebTransport first, QMux
//! over a WebSocket (`wss://`, same host and port number) after a head start, the first session
//! set up wins and the other attempt is abandoned. Over loopback, with ports that answer, stall
//! or are dead; what is asserted is which transport wins and what is left, not how fast.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, WsServer, timeout};
use moq_core::Version;
use moq_transport::endpoint::{Client, ClientConfig, Server, ServerConfig};
use moq_transport::tls::{Certificate, ClientTls};
use moq_transport::transport::TransportKind;
use moq_transport::{ConnectError, Error, SessionConfig};
use tokio::io::AsyncReadExt;

/// A client trusting `cert`, with the fallback after `head_start` and QUIC given `quic_timeout`.
fn client(cert: &Certificate, head_start: Duration, quic_timeout: Duration) -> Client {
    Client::new(ClientConfig {
        tls: ClientTls::pinned(cert.fingerprint()),
        versions: vec![Version::Draft19],
        ..Default::default()
    })
    .unwrap()
    .with_connect_timeout(quic_timeout)
    .with_websocket_fallback(head_start)
}

fn url(port: u16) -> String {
    format!("https://localhost:{port}/moq?room=1")
}

/// A UDP socket on `port` that reads nothing and answers nothing: QUIC blocked.
fn blackhole(port: u16) -> UdpSocket {
    UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], port))).unwrap()
}

/// (a) WebTransport reachable: the session is WebTransport, and a WebSocket attempt that had
/// started is closed, not left running. The QUIC server is bound only once the WebSocket
/// attempt has reached its TCP port (which accepts and never answers), so both attempts are
/// under way when QUIC wins.
#[tokio::test]
async fn webtransport_wins_and_the_websocket_attempt_is_closed() {
    timeout(async {
        let stall = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = stall.local_addr().unwrap().port();
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let client = client(&cert, Duration::ZERO, Duration::from_secs(60));
        let connecting = tokio::spawn(async move {
            let session = client.connect(&url(port)).await;
            (session, client)
        });

        // The WebSocket attempt connects to the stalling port; then QUIC gets its server.
        let (mut attempt, _) = stall.accept().await.unwrap();
        let mut config = ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], port)), cert);
        config.versions = vec![Version::Draft19];
        let server = Server::bind(config).unwrap();

        let (session, _client) = connecting.await.unwrap();
        let session = session.unwrap();
        assert_eq!(session.transport(), TransportKind::WebTransport);
        let accepted = server.accept().await.unwrap();
        assert_eq!(accepted.transport(), TransportKind::WebTransport);
        // The abandoned attempt's connection is closed: its TCP stream ends.
        let mut rest = Vec::new();
        let _ = attempt.read_to_end(&mut rest).await;
    })
    .await;
}

/// (b) WebTransport's UDP port blocked: the session is over the WebSocket, set up without
/// waiting for QUIC to give up (its timeout is far beyond the test's).
#[tokio::test]
async fn blocked_quic_falls_back_to_websocket() {
    timeout(async {
        let srv = TestServer::start_with(SessionConfig::default(), vec![Version::Draft19]);
        let tls = moq_transport::tls::server_config(&srv.cert, &["http/1.1"]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _udp = blackhole(port);
        let wss = WsServer::listen(
            listener,
            vec![Version::Draft19],
            SessionConfig::default(),
            Some(Arc::new(tls)),
        );
        let client = client(
            &srv.cert,
            Duration::from_millis(50),
            Duration::from_secs(60),
        );
        let url = url(port);
        let (session, accepted) = tokio::join!(client.connect(&url), wss.accept());
        assert_eq!(session.unwrap().transport(), TransportKind::WebSocket);
        assert_eq!(accepted.unwrap().transport(), TransportKind::WebSocket);
    })
    .await;
}

/// (c) Both dead (UDP blackholed, nothing on the TCP port): the error names both failures.
#[tokio::test]
async fn both_dead_names_both_failures() {
    timeout(async {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _udp = blackhole(port);
        drop(listener);
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let client = client(&cert, Duration::from_millis(50), Duration::from_millis(500));
        let err = client.connect(&url(port)).await.unwrap_err();
        match &err {
            Error::Connect(ConnectError::FallbackFailed { quic, websocket }) => {
                assert!(quic.contains("no QUIC server answered"), "{quic}");
                assert!(websocket.starts_with("wss://localhost"), "{websocket}");
                assert!(websocket.contains("refused"), "{websocket}");
            }
            e => panic!("{e:?}"),
        }
        let message = err.to_string();
        assert!(
            message.contains("over QUIC") && message.contains("over the WebSocket"),
            "{message}"
        );
    })
    .await;
}
