//! Loopback helpers for the moq-client tests: a [`Server`] on an ephemeral 127.0.0.1 port with a
//! generated certificate, pinned clients, timeouts and small readers.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use moq_client::{
    Certificate, Client, FetchConsumer, FullTrackName, GroupConsumer, Location, Publisher,
    Reconnecting, Server, Session, Status, TrackConsumer, TrackNamespace, Version,
};
use tokio::sync::mpsc;

/// Every test gets this long.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `f` with the test timeout.
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

/// Raw QUIC or WebTransport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Quic,
    WebTransport,
}

/// Both transports.
pub const TRANSPORTS: [Transport; 2] = [Transport::Quic, Transport::WebTransport];

/// Every (transport, version) combination.
pub fn combinations() -> Vec<(Transport, Version)> {
    TRANSPORTS
        .iter()
        .flat_map(|t| Version::ALL.iter().map(move |v| (*t, *v)))
        .collect()
}

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A namespace from string fields.
pub fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

/// A track `name` in namespace `fields`.
pub fn track(fields: &[&str], name: &str) -> FullTrackName {
    FullTrackName::new(ns(fields), name.as_bytes().to_vec()).unwrap()
}

/// A moq-client [`Server`] on 127.0.0.1:0 whose accepted sessions are kept alive (as a server
/// application would) and handed to the test through [`TestServer::next_session`].
pub struct TestServer {
    pub port: u16,
    pub fingerprint: String,
    pub publisher: Publisher,
    sessions: mpsc::UnboundedReceiver<Session>,
    server: std::sync::Arc<Server>,
    _accept: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self._accept.abort();
    }
}

impl TestServer {
    /// A server with a default publisher.
    pub fn start() -> Self {
        Self::start_with(Publisher::default())
    }

    /// A server serving `publisher` on every session.
    pub fn start_with(publisher: Publisher) -> Self {
        init_tracing();
        let server = Server::builder()
            .bind("127.0.0.1:0".parse().unwrap())
            .generate_certificate(&["localhost"])
            .publisher(publisher)
            .build()
            .unwrap();
        Self::serving(server)
    }

    /// A server on 127.0.0.1:`port` presenting `certificate` (a restart of a server that
    /// clients pinned), serving `publisher`. Waits for the port while the previous server's
    /// socket is still being released (bounded by the test timeout).
    pub async fn start_at(port: u16, certificate: Certificate, publisher: Publisher) -> Self {
        init_tracing();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let built = Server::builder()
                .bind(([127, 0, 0, 1], port).into())
                .certificate(certificate.clone())
                .publisher(publisher.clone())
                .build();
            match built {
                Ok(server) => return Self::serving(server),
                Err(e) => assert!(tokio::time::Instant::now() < deadline, "bind {port}: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Accepts `server`'s sessions, keeping them for [`TestServer::next_session`].
    fn serving(server: Server) -> Self {
        let port = server.local_addr().unwrap().port();
        let fingerprint = server.fingerprint().to_string();
        let publisher = server.publisher().clone();
        let (tx, rx) = mpsc::unbounded_channel();
        let server = std::sync::Arc::new(server);
        let accepting = server.clone();
        let accept = tokio::spawn(async move {
            let server = accepting;
            while let Some(s) = server.accept().await {
                if tx.send(s).is_err() {
                    return;
                }
            }
        });
        TestServer {
            port,
            fingerprint,
            publisher,
            sessions: rx,
            server,
            _accept: accept,
        }
    }

    /// Stops the server: closes every session and the endpoint, which releases the port (see
    /// [`TestServer::start_at`] to start it again).
    pub fn stop(self) {
        self.server.close();
    }

    pub fn url(&self, transport: Transport) -> String {
        match transport {
            Transport::Quic => format!("moqt://localhost:{}/moq", self.port),
            Transport::WebTransport => format!("https://localhost:{}/moq", self.port),
        }
    }

    /// A client pinned to this server's certificate, offering only `version`.
    pub fn client(&self, version: Version) -> Client {
        self.client_with(version, Publisher::default())
    }

    /// A client pinned to this server's certificate, offering only `version`, publishing with
    /// `publisher`.
    pub fn client_with(&self, version: Version, publisher: Publisher) -> Client {
        Client::builder()
            .fingerprint(&self.fingerprint)
            .unwrap()
            .versions(vec![version])
            .publisher(publisher)
            .build()
            .unwrap()
    }

    /// The next session the server accepted.
    pub async fn next_session(&mut self) -> Session {
        self.sessions.recv().await.expect("server stopped")
    }

    /// Connects a client session and returns it with the server's end.
    pub async fn connect(&mut self, transport: Transport, version: Version) -> (Session, Session) {
        let client = self.client(version);
        self.connect_with(&client, transport).await
    }

    /// Connects `client` and returns its session with the server's end.
    pub async fn connect_with(
        &mut self,
        client: &Client,
        transport: Transport,
    ) -> (Session, Session) {
        let c = client.connect(&self.url(transport)).await.unwrap();
        let s = self.next_session().await;
        assert_eq!(c.version(), s.version());
        (c, s)
    }
}

/// Reads every object of one group: (Object ID, payload).
pub async fn read_group(g: &mut GroupConsumer) -> Vec<(u64, Bytes)> {
    let mut out = Vec::new();
    while let Some(o) = g.next_object().await {
        let o = o.unwrap();
        assert_eq!(o.location.group, g.id());
        out.push((o.location.object, o.payload));
    }
    out
}

/// Reads the next `n` groups of a track fully, sorted by group (streams of different groups
/// may arrive in any order).
pub async fn read_groups(stream: &mut TrackConsumer, n: usize) -> Vec<(u64, Vec<(u64, Bytes)>)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut g = stream
            .next_group()
            .await
            .expect("track ended early")
            .expect("track failed");
        let objects = read_group(&mut g).await;
        out.push((g.id(), objects));
    }
    out.sort_by_key(|(g, _)| *g);
    out
}

/// Every object of a FETCH, in order (End of Range markers skipped).
pub async fn fetch_all(mut f: FetchConsumer) -> Vec<moq_client::Object> {
    let mut out = Vec::new();
    while let Some(o) = f.next_object().await {
        out.push(o.expect("fetch failed"));
    }
    out
}

/// The group IDs of `groups`.
pub fn ids(groups: &[(u64, Vec<(u64, Bytes)>)]) -> Vec<u64> {
    groups.iter().map(|(g, _)| *g).collect()
}

/// Writes a finished group with `n` objects whose payloads are "group.object"; returns its ID.
pub fn write_group(track: &moq_client::TrackProducer, n: u64) -> u64 {
    let mut g = track.append_group().unwrap();
    let id = g.id();
    for o in 0..n {
        g.write(format!("{id}.{o}")).unwrap();
    }
    g.finish().unwrap();
    id
}

/// The payloads [`write_group`] writes.
pub fn expected(group: u64, n: u64) -> Vec<(u64, Bytes)> {
    (0..n)
        .map(|o| (o, Bytes::from(format!("{group}.{o}"))))
        .collect()
}

/// Waits until `f` holds. Only for state that has no signal to wait on (a counter); polls
/// every 10 ms, bounded by the test timeout.
pub async fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for the next status of `r` that matches `pred`, returning it.
pub async fn wait_status(r: &mut Reconnecting, pred: impl Fn(&Status) -> bool) -> Status {
    let now = r.status();
    if pred(&now) {
        return now;
    }
    loop {
        let s = r.next_status().await.expect("client stopped");
        if pred(&s) {
            return s;
        }
    }
}

/// Location shorthand.
pub fn loc(group: u64, object: u64) -> Location {
    Location::new(group, object)
}
