//! Loopback helpers: a server and client on 127.0.0.1 with a generated certificate.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

pub mod raw;

use std::future::Future;
use std::time::Duration;

use moq_core::Version;
use moq_transport::endpoint::{Client, ClientConfig, Server, ServerConfig};
use moq_transport::tls::{Certificate, ClientTls};
use moq_transport::{Session, SessionConfig};

/// Every test gets this long.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `f` with a timeout.
pub async fn timeout<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("test timed out")
}

/// Raw QUIC or WebTransport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Quic,
    WebTransport,
}

pub const TRANSPORTS: [Transport; 2] = [Transport::Quic, Transport::WebTransport];

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A server bound to an ephemeral loopback port.
pub struct TestServer {
    pub server: Server,
    pub cert: Certificate,
    pub port: u16,
    /// Accepted sessions, kept alive like a server application would.
    pub sessions: Vec<Session>,
}

impl TestServer {
    pub fn start(session: SessionConfig) -> Self {
        Self::start_with(session, Version::ALL.to_vec())
    }

    pub fn start_with(session: SessionConfig, versions: Vec<Version>) -> Self {
        init_tracing();
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
        config.session = session;
        config.versions = versions;
        let server = Server::bind(config).unwrap();
        let port = server.local_addr().unwrap().port();
        TestServer {
            server,
            cert,
            port,
            sessions: Vec::new(),
        }
    }

    pub fn url(&self, transport: Transport) -> String {
        match transport {
            Transport::Quic => format!("moqt://localhost:{}/moq?room=1", self.port),
            Transport::WebTransport => format!("https://localhost:{}/moq?room=1", self.port),
        }
    }

    pub fn client(&self, versions: Vec<Version>, session: SessionConfig) -> Client {
        Client::new(ClientConfig {
            tls: ClientTls::pinned(self.cert.fingerprint()),
            versions,
            session,
            share_indexes: false,
        })
        .unwrap()
    }

    /// Connects a client and returns both ends.
    pub async fn connect(
        &mut self,
        transport: Transport,
        versions: Vec<Version>,
        session: SessionConfig,
    ) -> (Session, Session) {
        let client = self.client(versions, session);
        let url = self.url(transport);
        let (c, s) = tokio::join!(client.connect(&url), self.server.accept());
        let s = s.unwrap();
        self.sessions.push(s.clone());
        (c.unwrap(), s)
    }
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
