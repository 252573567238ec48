//! Loopback helpers: a server and client on 127.0.0.1 with a generated certificate.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod raw;

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use moq_core::Version;
use moq_transport::endpoint::{Client, ClientConfig, Server, ServerConfig};
use moq_transport::tls::{Certificate, ClientTls};
use moq_transport::transport::{TransportKind, memory};
use moq_transport::{Destination, Role, Session, SessionConfig};

/// Every test gets this long.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `f` with a timeout.
pub async fn timeout<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("test timed out")
}

/// Runs one case of a sweep (one draft, one transport, ...) with the test timeout, which bounds
/// a case and never a whole sweep: a sweep of 27 cases on a loaded machine is slow, one case is
/// not. A timeout names the case.
pub async fn case<F: Future>(name: String, f: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, f).await {
        Ok(out) => out,
        Err(_) => panic!("case {name}: timed out after {TIMEOUT:?}"),
    }
}

/// Raw QUIC, WebTransport, QMux over WebSocket (`ws://`, or `wss://` over TLS), or the
/// in-memory pair (no socket).
#[allow(clippy::enum_variant_names)] // WebTransport is the transport's name
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Quic,
    WebTransport,
    WebSocket,
    SecureWebSocket,
    Memory,
}

/// The transports over QUIC (tests of QUIC itself: stream credit, certificates).
pub const SOCKET_TRANSPORTS: [Transport; 2] = [Transport::Quic, Transport::WebTransport];

/// Every transport over a socket (SETUP and version negotiation over each).
pub const URL_TRANSPORTS: [Transport; 4] = [
    Transport::Quic,
    Transport::WebTransport,
    Transport::WebSocket,
    Transport::SecureWebSocket,
];

/// True when `MOQT_TEST_TRANSPORT=memory`: every session the tests make through
/// [`TestServer::connect`] is an in-memory pair, and no socket is opened.
pub fn memory_only() -> bool {
    std::env::var("MOQT_TEST_TRANSPORT").is_ok_and(|t| t == "memory")
}

/// The transports one test body runs over: raw QUIC, WebTransport, WebSocket (`ws://`; `wss://`
/// differs only below the WebSocket, and runs in setup.rs) and the in-memory pair, or only the
/// in-memory pair (see [`memory_only`]).
pub fn transports() -> Vec<Transport> {
    if memory_only() {
        vec![Transport::Memory]
    } else {
        vec![
            Transport::Quic,
            Transport::WebTransport,
            Transport::WebSocket,
            Transport::Memory,
        ]
    }
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A server on an ephemeral loopback port, bound when first used.
pub struct LazyServer {
    config: ServerConfig,
    server: OnceLock<Server>,
}

impl LazyServer {
    pub fn get(&self) -> &Server {
        self.server
            .get_or_init(|| Server::bind(self.config.clone()).unwrap())
    }

    pub async fn accept(&self) -> Option<Session> {
        self.get().accept().await
    }
}

/// A WebSocket server on a loopback TCP port: `websocket::accept` on every connection (after a
/// TLS handshake with `tls`, if given), the sessions queued for [`WsServer::accept`]; its
/// accept loop ends when it is dropped.
pub struct WsServer {
    pub addr: std::net::SocketAddr,
    sessions: tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Session>>,
    task: tokio::task::AbortHandle,
}

impl Drop for WsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl WsServer {
    pub fn bind(
        versions: Vec<Version>,
        session: SessionConfig,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> WsServer {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        Self::listen(listener, versions, session, tls)
    }

    /// [`WsServer::bind`] on `listener`.
    pub fn listen(
        listener: std::net::TcpListener,
        versions: Vec<Version>,
        session: SessionConfig,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> WsServer {
        let tls = tls.map(tokio_rustls::TlsAcceptor::from);
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        let task = tokio::spawn(async move {
            let mut handshakes = tokio::task::JoinSet::new();
            loop {
                let (tcp, remote) = tokio::select! {
                    a = listener.accept() => a.unwrap(),
                    Some(_) = handshakes.join_next() => continue,
                };
                let (versions, session, tx) = (versions.clone(), session.clone(), tx.clone());
                let tls = tls.clone();
                handshakes.spawn(async move {
                    let settings = moq_transport::endpoint::QuicSettings::default();
                    use moq_transport::endpoint::websocket::accept;
                    let remote = Some(remote);
                    let accepted = match tls {
                        None => accept(tcp, remote, &versions, &settings, session).await,
                        Some(tls) => match tls.accept(tcp).await {
                            Ok(tls) => accept(tls, remote, &versions, &settings, session).await,
                            Err(_) => return,
                        },
                    };
                    if let Ok(s) = accepted {
                        let _ = tx.send(s).await;
                    }
                });
            }
        })
        .abort_handle();
        WsServer {
            addr,
            sessions: tokio::sync::Mutex::new(rx),
            task,
        }
    }

    pub async fn accept(&self) -> Option<Session> {
        self.sessions.lock().await.recv().await
    }
}

/// A server: QUIC and WebTransport on a loopback port and WebSocket on a TCP one (each bound
/// when first used), or the server end of in-memory pairs, with one session configuration.
pub struct TestServer {
    pub server: LazyServer,
    pub ws: OnceLock<WsServer>,
    pub wss: OnceLock<WsServer>,
    pub cert: Certificate,
    /// Accepted sessions, kept alive like a server application would.
    pub sessions: Vec<Session>,
    session: SessionConfig,
    versions: Vec<Version>,
}

impl TestServer {
    pub fn start(session: SessionConfig) -> Self {
        Self::start_with(session, Version::ALL.to_vec())
    }

    pub fn start_with(session: SessionConfig, versions: Vec<Version>) -> Self {
        init_tracing();
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
        config.session = session.clone();
        config.versions = versions.clone();
        TestServer {
            server: LazyServer {
                config,
                server: OnceLock::new(),
            },
            ws: OnceLock::new(),
            wss: OnceLock::new(),
            cert,
            sessions: Vec::new(),
            session,
            versions,
        }
    }

    /// The WebSocket server (binds it).
    pub fn ws(&self) -> &WsServer {
        self.ws
            .get_or_init(|| WsServer::bind(self.versions.clone(), self.session.clone(), None))
    }

    /// The WebSocket server over TLS with the server's certificate (binds it).
    pub fn wss(&self) -> &WsServer {
        self.wss.get_or_init(|| {
            let tls = moq_transport::tls::server_config(&self.cert, &["http/1.1"]).unwrap();
            let tls = Some(Arc::new(tls));
            WsServer::bind(self.versions.clone(), self.session.clone(), tls)
        })
    }

    /// The UDP port (binds the server).
    pub fn port(&self) -> u16 {
        self.server.get().local_addr().unwrap().port()
    }

    pub fn url(&self, transport: Transport) -> String {
        match transport {
            Transport::Quic => format!("moqt://localhost:{}/moq?room=1", self.port()),
            Transport::WebTransport => format!("https://localhost:{}/moq?room=1", self.port()),
            Transport::WebSocket => format!("ws://localhost:{}/moq?room=1", self.ws().addr.port()),
            Transport::SecureWebSocket => {
                format!("wss://localhost:{}/moq?room=1", self.wss().addr.port())
            }
            Transport::Memory => panic!("an in-memory pair has no URL"),
        }
    }

    pub fn client(&self, versions: Vec<Version>, session: SessionConfig) -> Client {
        Client::new(ClientConfig {
            tls: ClientTls::pinned(self.cert.fingerprint()),
            versions,
            session,
            share_indexes: false,
            ..Default::default()
        })
        .unwrap()
    }

    /// Connects a client and returns both ends (over the in-memory pair whatever `transport`
    /// says, when [`memory_only`]).
    pub async fn connect(
        &mut self,
        transport: Transport,
        versions: Vec<Version>,
        session: SessionConfig,
    ) -> (Session, Session) {
        if transport == Transport::Memory || memory_only() {
            return self.connect_memory(versions, session).await;
        }
        let client = self.client(versions, session);
        let url = self.url(transport);
        let accept = async {
            match transport {
                Transport::WebSocket => self.ws().accept().await,
                Transport::SecureWebSocket => self.wss().accept().await,
                _ => self.server.accept().await,
            }
        };
        let (c, s) = tokio::join!(client.connect(&url), accept);
        let s = s.unwrap();
        self.sessions.push(s.clone());
        (c.unwrap(), s)
    }
}

impl TestServer {
    /// Both ends of a session over an in-memory pair that negotiated the client's most
    /// preferred version the server accepts, as a raw QUIC client to `/moq?room=1`.
    async fn connect_memory(
        &mut self,
        versions: Vec<Version>,
        session: SessionConfig,
    ) -> (Session, Session) {
        init_tracing();
        let version = versions
            .into_iter()
            .find(|v| self.versions.contains(v))
            .expect("no common version");
        let limits = memory::MemoryLimits::default();
        let (c, s) = memory_pair_with(version, limits, session, self.session.clone()).await;
        self.sessions.push(s.clone());
        (c, s)
    }
}

/// Both ends of a session at `version` over an in-memory pair with `limits`, as a raw QUIC
/// client (`client` its configuration) to `/moq?room=1` and a server (`server`).
pub async fn memory_pair_with(
    version: Version,
    limits: memory::MemoryLimits,
    client: SessionConfig,
    server: SessionConfig,
) -> (Session, Session) {
    init_tracing();
    let (c, s) = memory::pair_with(version.alpn(), TransportKind::RawQuic, limits);
    let destination = Destination {
        path: Some("/moq?room=1".into()),
        authority: Some("localhost".into()),
    };
    let (c, s) = tokio::join!(
        Session::establish(Arc::new(c), Role::Client, client, destination),
        Session::establish(Arc::new(s), Role::Server, server, Destination::default()),
    );
    (c.unwrap(), s.unwrap())
}

/// A connected pair with default configs.
pub async fn pair(transport: Transport, version: Version) -> (Session, Session, TestServer) {
    let mut server = TestServer::start(SessionConfig::default());
    let (c, s) = server
        .connect(transport, vec![version], SessionConfig::default())
        .await;
    (c, s, server)
}

/// The REQUEST_ERROR code of a refused request (panics on any other error).
pub fn rejected_code(e: moq_transport::Error) -> moq_core::codes::RequestErrorCode {
    match e {
        moq_transport::Error::Rejected(r) => r.code,
        e => panic!("expected a REQUEST_ERROR, got {e:?}"),
    }
}
