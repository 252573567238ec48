//! SETUP over raw QUIC and WebTransport, for every supported version, and version negotiation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{SOCKET_TRANSPORTS, TestServer, Transport, URL_TRANSPORTS, case, pair, timeout};
use moq_core::Version;
use moq_core::codes::SessionErrorCode;
use moq_transport::transport::TransportKind;
use moq_transport::{Error, IMPLEMENTATION, Role, SessionConfig};

#[tokio::test]
async fn setup_every_version_over_every_transport() {
    for transport in URL_TRANSPORTS {
        for version in Version::ALL {
            case(format!("{transport:?} {version:?}"), async {
                let (client, server, _srv) = pair(transport, *version).await;
                assert_eq!(client.version(), *version);
                assert_eq!(server.version(), *version);
                assert_eq!(client.role(), Role::Client);
                assert_eq!(server.role(), Role::Server);
                let kind = match transport {
                    Transport::Quic => TransportKind::RawQuic,
                    Transport::WebTransport => TransportKind::WebTransport,
                    Transport::WebSocket | Transport::SecureWebSocket => TransportKind::WebSocket,
                    Transport::Memory => TransportKind::RawQuic,
                };
                assert_eq!(client.transport(), kind);
                assert_eq!(server.transport(), kind);
                // Each side saw the other's MOQT_IMPLEMENTATION.
                assert_eq!(
                    client.info().peer_implementation.as_deref(),
                    Some(IMPLEMENTATION)
                );
                assert_eq!(
                    server.info().peer_implementation.as_deref(),
                    Some(IMPLEMENTATION)
                );
                // The server learns the path: from PATH on raw QUIC, from the CONNECT URL on
                // WebTransport; AUTHORITY / the URL's authority likewise.
                assert_eq!(server.info().path.as_deref(), Some("/moq?room=1"));
                assert!(
                    server
                        .info()
                        .authority
                        .as_deref()
                        .unwrap()
                        .starts_with("localhost:")
                );
                // Raw-QUIC-only options are sent only over raw QUIC.
                assert_eq!(
                    server.peer_setup().path.is_some(),
                    transport == Transport::Quic
                );
                assert!(client.peer_setup().path.is_none());
                if version.has_max_request_updates() {
                    assert_eq!(server.peer_setup().max_request_updates, Some(16));
                } else {
                    assert_eq!(server.peer_setup().max_request_updates, None);
                }
                client.close(SessionErrorCode::NO_ERROR, "done");
                let err = server.closed().await;
                assert!(
                    matches!(
                        err,
                        Error::ClosedByPeer {
                            code: SessionErrorCode::NO_ERROR,
                            ..
                        }
                    ),
                    "{transport:?} {version}: {err:?}"
                );
            })
            .await;
        }
    }
}

#[tokio::test]
async fn server_chooses_by_its_preference() {
    for transport in URL_TRANSPORTS {
        case(format!("{transport:?}"), async {
            // The client prefers 18, the server prefers 19: the server's preference wins.
            let mut srv = TestServer::start(SessionConfig::default());
            let (c, s) = srv
                .connect(
                    transport,
                    vec![Version::Draft18, Version::Draft19],
                    SessionConfig::default(),
                )
                .await;
            assert_eq!(c.version(), Version::Draft19, "{transport:?}");
            assert_eq!(s.version(), Version::Draft19, "{transport:?}");

            // A server that only speaks 18 gets 18.
            let mut srv = TestServer::start_with(SessionConfig::default(), vec![Version::Draft18]);
            let (c, _s) = srv
                .connect(transport, Version::ALL.to_vec(), SessionConfig::default())
                .await;
            assert_eq!(c.version(), Version::Draft18, "{transport:?}");

            // No common version: the client cannot connect.
            let srv = TestServer::start_with(SessionConfig::default(), vec![Version::Draft18]);
            let client = srv.client(vec![Version::Draft19], SessionConfig::default());
            assert!(
                client.connect(&srv.url(transport)).await.is_err(),
                "{transport:?}"
            );
        })
        .await;
    }
}

#[tokio::test]
async fn wrong_fingerprint_is_refused() {
    let srv = TestServer::start(SessionConfig::default());
    let client = moq_transport::endpoint::Client::new(moq_transport::endpoint::ClientConfig {
        tls: moq_transport::tls::ClientTls::pinned([7u8; 32]),
        ..Default::default()
    })
    .unwrap();
    for transport in SOCKET_TRANSPORTS {
        case(format!("{transport:?}"), async {
            let err = client.connect(&srv.url(transport)).await.unwrap_err();
            assert!(matches!(err, Error::Connect(_)), "{err:?}");
        })
        .await;
    }
    // Without pinning, web PKI roots do not trust a self-signed certificate either.
    timeout(async {
        let client = moq_transport::endpoint::Client::new(Default::default()).unwrap();
        assert!(client.connect(&srv.url(Transport::Quic)).await.is_err());
    })
    .await;
}

/// wss:// to a TLS WebSocket server with a self-signed certificate: refused, with an error that
/// says why and what to do, when the certificate is not the pinned one or is trusted by
/// nobody; SETUP and a close with its code when it is pinned.
#[tokio::test]
async fn wss_checks_the_certificate() {
    use moq_transport::ConnectError;
    use moq_transport::endpoint::{Client, ClientConfig};
    use moq_transport::tls::ClientTls;
    timeout(async {
        let mut srv = TestServer::start(SessionConfig::default());
        let url = srv.url(Transport::SecureWebSocket);
        let client = |tls| {
            Client::new(ClientConfig {
                tls,
                ..Default::default()
            })
            .unwrap()
        };

        let err = client(ClientTls::pinned([7u8; 32]))
            .connect(&url)
            .await
            .unwrap_err();
        match &err {
            Error::Connect(ConnectError::FingerprintMismatch { received, .. }) => {
                assert_eq!(*received, srv.cert.fingerprint_hex())
            }
            e => panic!("{e:?}"),
        }
        let err = client(ClientTls::default())
            .connect(&url)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Connect(ConnectError::UnknownIssuer { .. })),
            "{err:?}"
        );
        assert!(
            err.to_string().contains("pin its SHA-256 fingerprint"),
            "{err}"
        );

        let (c, s) = srv
            .connect(
                Transport::SecureWebSocket,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        assert_eq!(c.transport(), TransportKind::WebSocket);
        s.close(SessionErrorCode::GOAWAY_TIMEOUT, "bye");
        let err = c.closed().await;
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
    })
    .await;
}

/// `ServerConfig::qlog_dir`: every accepted connection, raw QUIC or WebTransport, leaves a qlog
/// trace (JSON-SEQ) of its own in the directory.
#[cfg(feature = "qlog")]
#[tokio::test]
async fn qlog_trace_per_connection() {
    use moq_transport::endpoint::{Client, ClientConfig, Server, ServerConfig};
    use moq_transport::tls::{Certificate, ClientTls};
    timeout(async {
        let dir = std::env::temp_dir().join(format!("moq-qlog-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
        config.qlog_dir = Some(dir.clone());
        let server = Server::bind(config).unwrap();
        let port = server.local_addr().unwrap().port();
        let client = Client::new(ClientConfig {
            tls: ClientTls::pinned(cert.fingerprint()),
            ..Default::default()
        })
        .unwrap();
        for url in [
            format!("moqt://localhost:{port}"),
            format!("https://localhost:{port}"),
        ] {
            let (c, s) = tokio::join!(client.connect(&url), server.accept());
            let (c, s) = (c.unwrap(), s.unwrap());
            c.close(SessionErrorCode::NO_ERROR, "done");
            s.closed().await;
        }
        let mut traces: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect();
        traces.sort();
        assert_eq!(traces.len(), 2, "one trace per connection");
        for t in &traces {
            assert!(t.contains("\"qlog_version\""), "{t:.200}");
            assert!(t.contains("packet_received"), "{t:.200}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await;
}

/// `Session::establish` dropped before SETUP completes closes the session it started: its
/// tasks hold the connection, which would otherwise stay open until the peer closed it (and
/// `Client::connect`, which says it is cancel safe, would leak a connection per cancelled
/// attempt).
#[tokio::test]
async fn establish_dropped_before_setup_closes_the_connection() {
    use std::sync::Arc;
    use std::time::Duration;

    use moq_transport::transport::{Connection, memory};
    use moq_transport::{Destination, Session};

    // The server end never answers SETUP.
    let (client, server) = memory::pair("moqt-19", TransportKind::RawQuic);
    let conn: Arc<dyn Connection> = Arc::new(client);
    let establish = Session::establish(
        conn,
        Role::Client,
        SessionConfig::default(),
        Destination::default(),
    );
    let abandoned = tokio::time::timeout(Duration::from_millis(50), establish).await;
    assert!(abandoned.is_err(), "SETUP cannot complete");
    // The peer sees the connection close.
    timeout(server.closed()).await;
}

/// Dropping a `Server` stops accepting: its accept loop ends (no task of the endpoint is left
/// once nothing else uses it), a new connection is not taken, and a session accepted before
/// the drop goes on.
#[tokio::test]
async fn a_dropped_server_takes_no_new_connection() {
    use std::time::Duration;

    use moq_transport::endpoint::{Client, ClientConfig, QuicSettings, Server, ServerConfig};
    use moq_transport::tls::{Certificate, ClientTls};
    let alive = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    timeout(async {
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let bind = || ServerConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());

        // Alone, a dropped server leaves no task behind (its accept loop and quinn's driver).
        let idle = alive();
        let server = Server::bind(bind()).unwrap();
        assert!(alive() > idle);
        drop(server);
        while alive() != idle {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }

        let server = Server::bind(bind()).unwrap();
        let port = server.local_addr().unwrap().port();
        let client = Client::new(ClientConfig {
            tls: ClientTls::pinned(cert.fingerprint()),
            quic: QuicSettings::default().with_idle_timeout(Duration::from_secs(1)),
            ..Default::default()
        })
        .unwrap();
        let url = format!("moqt://localhost:{port}");
        let (c, s) = tokio::join!(client.connect(&url), server.accept());
        let (before, accepted) = (c.unwrap(), s.unwrap());
        drop(server);
        assert!(
            client.connect(&url).await.is_err(),
            "a dropped server completed a new session"
        );
        // The session accepted before the drop is still open: closing it from one end reaches
        // the other.
        before.close(SessionErrorCode::NO_ERROR, "done");
        accepted.closed().await;
    })
    .await;
}

/// The ACK frequency extension (draft-ietf-quic-ack-frequency, issue 35): with the default
/// `QuicSettings` a sender asks its quinn peer (which advertises min_ack_delay) for an
/// ACK_FREQUENCY, and that peer then ACKs a paced stream of packets well under half as often
/// as without (once per packet pair, RFC 9000 §13.2.2). Raw quinn endpoints with this crate's
/// transport config, so what is counted is the config alone.
#[tokio::test]
async fn default_quic_settings_ask_quinn_peers_for_fewer_acks() {
    use moq_transport::endpoint::QuicSettings;
    let off = QuicSettings {
        ack_eliciting_threshold: None,
        ..Default::default()
    };
    let without = case("ack frequency off".into(), paced_acks(off)).await;
    let with = case(
        "ack frequency default".into(),
        paced_acks(QuicSettings::default()),
    )
    .await;
    eprintln!(
        "ACKs for 100 paced packets: {} with, {} without",
        with.1, without.1
    );
    assert_eq!(without.0, 0, "no ACK_FREQUENCY frame when off");
    assert!(with.0 >= 1, "the default sends ACK_FREQUENCY");
    assert!(
        with.1 * 2 < without.1,
        "ACKs for the same packets: {} with, {} without",
        with.1,
        without.1
    );
}

/// A server with `settings` sends 100 packets 2 ms apart on a stream to a default client;
/// returns the ACK_FREQUENCY frames the server sent and the ACK frames the client sent.
async fn paced_acks(settings: moq_transport::endpoint::QuicSettings) -> (u64, u64) {
    use moq_transport::endpoint::{QuicSettings, transport_config_with};
    use moq_transport::tls::{Certificate, ClientTls, server_config};
    use std::sync::Arc;
    let cert = Certificate::generate(&["localhost".into()]).unwrap();
    let tls = server_config(&cert, &["test"]).unwrap();
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
    let mut server_config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server_config.transport_config(Arc::new(transport_config_with(&settings)));
    let server = quinn::Endpoint::server(server_config, "127.0.0.1:0".parse().unwrap()).unwrap();
    let tls = ClientTls::pinned(cert.fingerprint())
        .client_config(&["test"])
        .unwrap();
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
    let mut client_config = quinn::ClientConfig::new(Arc::new(crypto));
    client_config.transport_config(Arc::new(transport_config_with(&QuicSettings::default())));
    let mut client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    client.set_default_client_config(client_config);
    let addr = server.local_addr().unwrap();
    let (c, s) = tokio::join!(
        async { client.connect(addr, "localhost").unwrap().await.unwrap() },
        async { server.accept().await.unwrap().await.unwrap() }
    );
    let reading = tokio::spawn({
        let c = c.clone();
        async move {
            let mut stream = c.accept_uni().await.unwrap();
            stream.read_to_end(1 << 20).await.unwrap().len()
        }
    });
    let mut stream = s.open_uni().await.unwrap();
    // A sender of paced objects, as a relay is to each subscriber: one packet each.
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(2));
    for _ in 0..100 {
        tick.tick().await;
        stream.write_all(&[7u8; 1000]).await.unwrap();
    }
    stream.finish().unwrap();
    assert_eq!(reading.await.unwrap(), 100_000);
    let sent = s.stats().frame_tx.ack_frequency;
    let acks = c.stats().frame_tx.acks;
    c.close(0u32.into(), b"done");
    server.wait_idle().await;
    (sent, acks)
}
