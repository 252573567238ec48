//! Client and server builders, sessions, and the reconnecting client.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use moq_core::{AuthToken, Version};
use moq_transport::endpoint::{self, ClientConfig, QuicSettings, ServerConfig};
use moq_transport::tls::{Certificate, ClientTls, parse_fingerprint};
use moq_transport::{SessionConfig, WeakSession};
use tokio::sync::watch;

use crate::error::Error;
use crate::options::Backoff;
use crate::produce::TrackProducer;
use crate::publisher::Publisher;
use crate::serve::serve_subscription;
use crate::subscriber::{SessionSource, Subscriber, Tasks};
use moq_transport::track::PublishOptions;

/// A MOQT session with its publishing and subscribing sides.
///
/// Dropping every clone closes the session (streams made from it then end with an error).
/// Clones share the session.
#[must_use = "dropping every clone of a Session closes it"]
#[derive(Clone, Debug)]
pub struct Session {
    transport: moq_transport::Session,
    publisher: Publisher,
    subscriber: Subscriber,
}

/// Serves `publisher` on `transport` (announcing its namespaces, answering requests) as one of
/// the session's own tasks, which ends with the session and does not keep it open.
fn serve(transport: &moq_transport::Session, publisher: &Publisher, subscriber: &Subscriber) {
    let (publisher, subscriber) = (publisher.clone(), subscriber.clone());
    let session = transport.downgrade();
    transport.spawn(async move { publisher.serve(session, Some(subscriber)).await });
}

impl Session {
    pub(crate) fn attach(transport: moq_transport::Session, publisher: Publisher) -> Session {
        let source = SessionSource {
            current: watch::channel(Some(transport.downgrade())).1,
            reconnects: false,
            tasks: Tasks::default(),
        };
        let subscriber = Subscriber::new(source);
        serve(&transport, &publisher, &subscriber);
        Session {
            transport,
            publisher,
            subscriber,
        }
    }

    /// The publishing side.
    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    /// The subscribing side.
    pub fn subscriber(&self) -> &Subscriber {
        &self.subscriber
    }

    /// The underlying transport session (for lower-level requests).
    pub fn transport(&self) -> &moq_transport::Session {
        &self.transport
    }

    /// The negotiated version.
    pub fn version(&self) -> Version {
        self.transport.version()
    }

    /// Tasks the session still runs: the transport's (accept loops, one per stream and
    /// request, serving) and its subscriber's (one per subscription, discovery and join);
    /// zero once it has closed and they have stopped.
    pub fn task_count(&self) -> usize {
        self.transport.task_count() + self.subscriber.source.tasks.len()
    }

    /// Resolves once the session has closed and every one of its tasks has stopped (see
    /// [`Session::task_count`]).
    ///
    /// Cancel safe.
    pub async fn stopped(&self) {
        self.transport.stopped().await;
        self.subscriber.source.tasks.stopped().await;
    }

    /// Offers `track` to the peer with PUBLISH, without waiting to be asked (draft-19 §5.1),
    /// and serves it on this session until the track ends or the peer stops it. Returns once
    /// the peer accepted it (PUBLISH_OK); a refusal is [`Error::rejection`].
    ///
    /// Cancel safe: dropping the future before it resolves cancels the PUBLISH.
    pub async fn publish(&self, track: &TrackProducer) -> Result<(), Error> {
        let cache = track.cache().clone();
        let options = PublishOptions {
            largest: cache.largest(),
            track_properties: cache.properties(),
            ..Default::default()
        };
        let published = self
            .transport
            .publish(cache.name().clone(), options)
            .await?;
        published.accepted().await?;
        let serve = self.publisher.serve_options();
        self.transport.spawn(async move {
            let _ = serve_subscription(cache, published.into_writer(), serve, None).await;
        });
        Ok(())
    }

    /// Closes the session now (NO_ERROR): what is still in flight is lost. See
    /// [`Session::close_gracefully`].
    pub fn close(&self) {
        self.transport
            .close(moq_core::codes::SessionErrorCode::NO_ERROR, "closed");
    }

    /// Waits, at most `timeout`, until the peer has acknowledged every stream this side
    /// finished, then closes the session (NO_ERROR). [`Error::Timeout`] if the peer had not
    /// acknowledged everything by then (the session is closed all the same). Finish or flush
    /// the tracks first ([`TrackProducer::finish`]) so that their last groups count.
    ///
    /// Cancel safe: dropped early, the session stays open.
    pub async fn close_gracefully(&self, timeout: std::time::Duration) -> Result<(), Error> {
        let acked = tokio::time::timeout(timeout, self.transport.acknowledged()).await;
        self.close();
        acked.map_err(|_| Error::Timeout)
    }

    /// Resolves when the session ends.
    ///
    /// Cancel safe.
    pub async fn closed(&self) -> Error {
        self.transport.closed().await.into()
    }
}

/// Builds a [`Client`].
///
/// ```no_run
/// # async fn run() -> Result<(), moq_client::Error> {
/// let client = moq_client::Client::builder()
///     .fingerprint("4af7fe029cf78c23f5d9aaa503391fc9954b940fc12e12021d2020dcc9185323")?
///     .build()?;
/// let session = client.connect("moqt://localhost:4443").await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ClientBuilder {
    tls: ClientTls,
    versions: Option<Vec<Version>>,
    session: SessionConfig,
    publisher: Option<Publisher>,
    quic: QuicSettings,
    connect_timeout: Duration,
    websocket_fallback: Option<Duration>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            tls: ClientTls::default(),
            versions: None,
            session: SessionConfig::default(),
            publisher: None,
            quic: QuicSettings::default(),
            connect_timeout: ClientBuilder::DEFAULT_CONNECT_TIMEOUT,
            websocket_fallback: None,
        }
    }
}

impl ClientBuilder {
    /// How long a QUIC handshake may take before [`crate::ConnectError::Unreachable`]: 5 s.
    pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

    setters! {
        /// Gives up connecting when no QUIC server has answered after `timeout`, with
        /// [`Error::Connect`]([`crate::ConnectError::Unreachable`]) (default
        /// [`ClientBuilder::DEFAULT_CONNECT_TIMEOUT`], 5 s).
        connect_timeout(timeout: Duration) { connect_timeout = timeout }

        /// For `https://` (and development `http://`) URLs, also tries QMux over WebSocket
        /// (`wss://`, `ws://`: same host, port and path) when QUIC has not set the session up
        /// after `head_start`; the first set up wins, the other attempt is abandoned (moq-dev's
        /// clients give WebTransport a head start the same way), and if both fail the error is
        /// [`crate::ConnectError::FallbackFailed`] with both reasons. Needs the `websocket`
        /// feature: without it, connecting fails when the fallback would be tried.
        websocket_fallback(head_start: Duration) { websocket_fallback = Some(head_start) }

        /// Trusts any server. For development only. (Without it, or
        /// [`ClientBuilder::fingerprint`], a self-signed certificate is refused with
        /// [`crate::ConnectError::UnknownIssuer`].)
        insecure() { tls.insecure = true }

        /// Offers only `versions`, most preferred first (default: every supported draft,
        /// [`Version::ALL`], newest first).
        versions(versions: Vec<Version>) { versions = Some(versions) }

        /// Uses `publisher` (shared with other sessions) instead of a new one.
        publisher(publisher: Publisher) { publisher = Some(publisher) }

        /// Replaces the QUIC settings: congestion control, and how soon a silent peer is given
        /// up (`QuicSettings::default().with_idle_timeout(..)`).
        quic(quic: QuicSettings) { quic = quic }

        /// Replaces the session configuration.
        session_config(config: SessionConfig) { session = config }
    }

    /// Trusts the server whose certificate has this SHA-256 fingerprint (hex, colons allowed).
    /// A server presenting another certificate is refused with
    /// [`crate::ConnectError::FingerprintMismatch`], which shows the fingerprint it presented.
    pub fn fingerprint(mut self, hex: &str) -> Result<Self, Error> {
        self.tls.fingerprints.push(parse_fingerprint(hex)?);
        Ok(self)
    }

    /// Trusts an extra root certificate (DER).
    pub fn root(mut self, der: Vec<u8>) -> Self {
        self.tls.roots.push(der.into());
        self
    }

    /// Sends an AUTHORIZATION_TOKEN in SETUP.
    pub fn token(mut self, token: impl Into<bytes::Bytes>) -> Self {
        self.session.setup_tokens.push(AuthToken::new(token));
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client, Error> {
        let mut session = self.session;
        session.accept_requests = true;
        let transport = endpoint::Client::new(ClientConfig {
            tls: self.tls,
            versions: self.versions.unwrap_or_else(|| Version::ALL.to_vec()),
            session,
            share_indexes: false,
            quic: self.quic,
            ..Default::default()
        })?
        .with_connect_timeout(self.connect_timeout);
        let transport = match self.websocket_fallback {
            Some(head_start) => transport.with_websocket_fallback(head_start),
            None => transport,
        };
        Ok(Client {
            transport: Arc::new(transport),
            publisher: self.publisher.unwrap_or_default(),
        })
    }
}

/// Connects to MOQT servers and relays: `moqt://` (raw QUIC), `https://` (WebTransport), or
/// with the `websocket` feature `ws://` and `wss://` (QMux over WebSocket, for networks that
/// block QUIC; moq-relay serves it on its HTTP listener, at any path).
///
/// `http://host:port` is for development: raw QUIC to a server whose self-signed certificate
/// is trusted by the SHA-256 hash that `http://host:port/certificate.sha256` answers (TCP, on
/// the QUIC port's number, as moq-relay's HTTP side serves it with `--http` on that port),
/// fetched at each connection, so a server that generates a new certificate at each start
/// needs no copying of fingerprints. Whoever can answer that plain HTTP request is trusted:
/// never use it beyond development.
///
/// ```no_run
/// # async fn run() -> Result<(), moq_client::Error> {
/// // A relay started with `--tls-generate localhost --http 127.0.0.1:4443`.
/// let session = moq_client::Client::builder().build()?.connect("http://localhost:4443").await?;
/// # Ok(()) }
/// ```
///
/// Cheap to clone. Dropping it (every clone) does not affect the sessions it made: each keeps
/// what it needs of the endpoint.
#[derive(Clone, Debug)]
pub struct Client {
    transport: Arc<endpoint::Client>,
    publisher: Publisher,
}

impl Client {
    /// A builder.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The publisher shared by this client's sessions.
    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    /// This client with another publisher (same endpoint and settings).
    pub fn with_publisher(&self, publisher: Publisher) -> Client {
        Client {
            transport: self.transport.clone(),
            publisher,
        }
    }

    /// Resolves once every session this client opened has closed and told its peer: await
    /// it before the program exits.
    ///
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.transport.wait_idle().await;
    }

    /// Connects once.
    ///
    /// Cancel safe: dropping the future before it resolves abandons the connection attempt.
    pub async fn connect(&self, url: &str) -> Result<Session, Error> {
        let transport = self.transport.connect(url).await?;
        Ok(Session::attach(transport, self.publisher.clone()))
    }

    /// A client that stays connected: it reconnects with `backoff` when the session is lost,
    /// follows GOAWAY to the new URI, re-publishes namespaces and renews subscriptions.
    pub fn reconnecting(&self, url: &str, backoff: Backoff) -> Reconnecting {
        let (current_tx, current_rx) = watch::channel(None);
        let (status_tx, status_rx) = watch::channel(Status::Connecting);
        let subscriber = Subscriber::new(SessionSource {
            current: current_rx,
            reconnects: true,
            tasks: Tasks::default(),
        });
        let task = reconnect_loop(
            self.clone(),
            url.to_string(),
            backoff,
            current_tx,
            status_tx,
            subscriber.clone(),
        );
        let reconnect = Tasks::default();
        reconnect.spawn(task);
        Reconnecting {
            publisher: self.publisher.clone(),
            subscriber,
            status: status_rx,
            reconnect,
        }
    }
}

/// The state of a [`Reconnecting`] client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    /// Connecting (or reconnecting).
    Connecting,
    /// Connected to this URL.
    Connected(String),
    /// Disconnected; will retry after the backoff.
    Disconnected(String),
    /// Moving to another URL after a GOAWAY.
    Migrating(String),
}

/// A client that stays connected. Its [`Publisher`] and [`Subscriber`] outlive sessions.
/// Dropping it stops reconnecting and closes the session (the reconnecting task holds the
/// only handle on it).
#[must_use = "dropping a Reconnecting client stops it and closes its session"]
#[derive(Debug)]
pub struct Reconnecting {
    publisher: Publisher,
    subscriber: Subscriber,
    status: watch::Receiver<Status>,
    /// The reconnecting task, which holds the only handle on the session.
    reconnect: Tasks,
}

impl Drop for Reconnecting {
    fn drop(&mut self) {
        self.reconnect.cancel();
    }
}

impl Reconnecting {
    /// The publishing side (namespaces are re-published on every new session).
    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    /// The subscribing side (subscriptions are renewed on every new session).
    pub fn subscriber(&self) -> &Subscriber {
        &self.subscriber
    }

    /// The current status.
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Waits for the next status change and returns it.
    ///
    /// Cancel safe.
    pub async fn next_status(&mut self) -> Option<Status> {
        self.status.changed().await.ok()?;
        Some(self.status.borrow_and_update().clone())
    }

    /// Stops reconnecting and closes the session, then waits until the reconnecting task and
    /// the subscriber's tasks (subscriptions, discovery, joins) have stopped: they end with
    /// the client's error. Dropping the client does the same without waiting.
    ///
    /// Cancel safe: dropping the future before it resolves leaves the client stopped, its
    /// tasks ending on their own.
    pub async fn close(&self) {
        self.reconnect.cancel();
        self.reconnect.stopped().await;
        self.subscriber.source.tasks.stopped().await;
    }

    /// Tasks the client still runs: its reconnecting task and its subscriber's.
    pub fn task_count(&self) -> usize {
        self.reconnect.len() + self.subscriber.source.tasks.len()
    }

    /// Waits until connected.
    ///
    /// Cancel safe.
    pub async fn connected(&self) -> Result<(), Error> {
        let mut rx = self.status.clone();
        rx.wait_for(|s| matches!(s, Status::Connected(_)))
            .await
            .map(|_| ())
            .map_err(|_| Error::from(moq_transport::Error::EndedEarly))
    }
}

async fn reconnect_loop(
    client: Client,
    mut url: String,
    backoff: Backoff,
    current: watch::Sender<Option<WeakSession>>,
    status: watch::Sender<Status>,
    subscriber: Subscriber,
) {
    let mut wait = backoff.min;
    let mut session: Option<moq_transport::Session> = None;
    loop {
        let Some(s) = &session else {
            status.send_replace(Status::Connecting);
            session = connect_current(&client, &url, &current, &status, &subscriber).await;
            if session.is_some() {
                wait = backoff.min;
            } else {
                tokio::time::sleep(wait).await;
                wait = backoff.next(wait);
            }
            continue;
        };
        tokio::select! {
            e = s.closed() => {
                tracing::info!(error = %e, "session lost; reconnecting");
                status.send_replace(Status::Disconnected(e.to_string()));
                session = None;
                tokio::time::sleep(wait).await;
            }
            g = s.wait_goaway() => {
                let Some(g) = g else { continue };
                if !g.new_session_uri.is_empty() {
                    url = g.new_session_uri.clone();
                }
                status.send_replace(Status::Migrating(url.clone()));
                // Make before break: connect to the new URI, then let the old session go.
                let old = session.take();
                session = connect_current(&client, &url, &current, &status, &subscriber).await;
                if let Some(old) = old {
                    old.close(moq_core::codes::SessionErrorCode::NO_ERROR, "migrated");
                }
            }
        }
    }
}

/// Connects the reconnecting client to `url`: a new session is served and becomes the
/// subscriber's current one, and `status` says Connected, or Disconnected with why not.
async fn connect_current(
    client: &Client,
    url: &str,
    current: &watch::Sender<Option<WeakSession>>,
    status: &watch::Sender<Status>,
    subscriber: &Subscriber,
) -> Option<moq_transport::Session> {
    match client.transport.connect(url).await {
        Ok(s) => {
            serve(&s, &client.publisher, subscriber);
            current.send_replace(Some(s.downgrade()));
            status.send_replace(Status::Connected(url.to_string()));
            Some(s)
        }
        Err(e) => {
            status.send_replace(Status::Disconnected(e.to_string()));
            None
        }
    }
}

/// Builds a [`Server`].
#[derive(Debug)]
pub struct ServerBuilder {
    bind: SocketAddr,
    certificate: Option<Certificate>,
    generate: Vec<String>,
    versions: Vec<Version>,
    publisher: Option<Publisher>,
    session: SessionConfig,
    quic: QuicSettings,
}

impl Default for ServerBuilder {
    fn default() -> Self {
        ServerBuilder {
            bind: SocketAddr::from(([0, 0, 0, 0], 4443)),
            certificate: None,
            generate: Vec::new(),
            versions: Version::ALL.to_vec(),
            publisher: None,
            session: SessionConfig::default(),
            quic: QuicSettings::default(),
        }
    }
}

impl ServerBuilder {
    setters! {
        /// The UDP address (default 0.0.0.0:4443).
        bind(addr: SocketAddr) { bind = addr }

        /// Presents `certificate`.
        certificate(certificate: Certificate) { certificate = Some(certificate) }

        /// Generates a self-signed development certificate for `hosts`.
        generate_certificate(hosts: &[&str]) {
            generate = hosts.iter().map(|h| h.to_string()).collect()
        }

        /// Accepts only `versions`, most preferred first.
        versions(versions: Vec<Version>) { versions = versions }

        /// Serves `publisher`'s namespaces and tracks to every session.
        publisher(publisher: Publisher) { publisher = Some(publisher) }

        /// Replaces the QUIC settings: congestion control, and how soon a silent peer is given
        /// up (`QuicSettings::default().with_idle_timeout(..)`).
        quic(quic: QuicSettings) { quic = quic }

        /// Replaces the session configuration.
        session_config(config: SessionConfig) { session = config }
    }

    /// Binds and starts accepting.
    pub fn build(self) -> Result<Server, Error> {
        let certificate = match self.certificate {
            Some(c) => c,
            None if !self.generate.is_empty() => Certificate::generate(&self.generate)?,
            None => Certificate::generate(&["localhost".to_string()])?,
        };
        let fingerprint = certificate.fingerprint_hex();
        let mut config = ServerConfig::new(self.bind, certificate);
        config.versions = self.versions;
        config.session = self.session;
        config.session.accept_requests = true;
        config.quic = self.quic;
        Ok(Server {
            transport: endpoint::Server::bind(config)?,
            publisher: self.publisher.unwrap_or_default(),
            fingerprint,
        })
    }
}

/// Accepts MOQT sessions (raw QUIC and WebTransport on one port) and serves its publisher's
/// tracks on all of them.
#[must_use = "dropping a Server stops accepting sessions"]
#[derive(Debug)]
pub struct Server {
    transport: endpoint::Server,
    publisher: Publisher,
    fingerprint: String,
}

impl Server {
    /// A builder.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The next session.
    ///
    /// Cancel safe.
    pub async fn accept(&self) -> Option<Session> {
        let s = self.transport.accept().await?;
        Some(Session::attach(s, self.publisher.clone()))
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        Ok(self.transport.local_addr()?)
    }

    /// The SHA-256 fingerprint of the certificate, hex.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// The publisher served to every session.
    pub fn publisher(&self) -> &Publisher {
        &self.publisher
    }

    /// Stops accepting and closes every session (NO_ERROR), at once: [`Server::accept`] then
    /// returns `None`, and the port is released once the peers were told (a server that
    /// restarts binds it again; its reconnecting clients come back and renew their
    /// subscriptions).
    pub fn close(&self) {
        self.transport.close(
            moq_core::codes::SessionErrorCode::NO_ERROR.0,
            "server closed",
        );
    }
}
