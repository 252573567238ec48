//! Client and server endpoints over quinn: raw QUIC (`moqt://`, version by ALPN) and
//! WebTransport (`https://`, version by `WT-Available-Protocols`) on the same UDP port.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use moq_core::Version;
use moq_core::codes::SessionErrorCode;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use tokio::sync::mpsc;
use url::{Position, Url};
use web_transport_quinn as wt;

use parking_lot::Mutex;

use crate::Session;
use crate::error::{ConnectError, Error};
use crate::index::NamespaceIndex;
use crate::session::{Destination, Role, SessionConfig};
use crate::tls::{Certificate, ClientTls, ServerCert};
use crate::transport::quic::{QuicConnection, negotiated_alpn};
use crate::transport::{Connection, credit};

/// The ALPN token of HTTP/3, which carries WebTransport.
pub const H3_ALPN: &str = "h3";

/// QUIC transport settings for MOQT: datagrams on, room for many streams, keep-alive.
///
/// The peer's stream limits start at [`credit::INITIAL_BIDI_STREAMS`] and
/// [`credit::INITIAL_UNI_STREAMS`]; sessions raise them as streams are used, up to
/// [`credit::MAX_BIDI_STREAMS`] and [`credit::MAX_UNI_STREAMS`] (quinn allocates per-stream
/// state for the whole limit up front).
pub fn transport_config() -> quinn::TransportConfig {
    transport_config_with(&QuicSettings::default())
}

/// The QUIC settings of an endpoint's connections that applications choose.
///
/// A dead peer is noticed after `idle_timeout` without a packet from it; `keep_alive` makes
/// an idle but live connection send often enough that it never times out. QUIC uses the
/// smaller of the two sides' idle timeouts (RFC 9000 §10.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuicSettings {
    /// The congestion controller.
    pub congestion: Congestion,
    /// How often an otherwise idle connection sends a PING.
    pub keep_alive: Duration,
    /// How long a connection lives without hearing from the peer.
    pub idle_timeout: Duration,
}

impl QuicSettings {
    /// These settings with idle timeout `timeout`, and keep-alives at a third of it (at
    /// most as far apart as the default's) so a live connection never times out.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self.keep_alive = (timeout / 3).min(QuicSettings::default().keep_alive);
        self
    }
}

impl Default for QuicSettings {
    fn default() -> Self {
        QuicSettings {
            congestion: Congestion::default(),
            // A dead peer is noticed within 9 s; a live idle one sends a PING every 2 s.
            keep_alive: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(9),
        }
    }
}

/// The congestion controller of an endpoint's connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Congestion {
    /// CUBIC (RFC 9438), quinn's default.
    #[default]
    Cubic,
    /// NewReno (RFC 9002).
    NewReno,
    /// BBR (quinn's experimental BBRv1).
    Bbr,
}

impl std::str::FromStr for Congestion {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "cubic" => Ok(Congestion::Cubic),
            "newreno" | "reno" => Ok(Congestion::NewReno),
            "bbr" => Ok(Congestion::Bbr),
            _ => Err(Error::Invalid(format!(
                "congestion control {s:?}: cubic, new-reno or bbr"
            ))),
        }
    }
}

/// [`transport_config`] with `settings`.
pub fn transport_config_with(settings: &QuicSettings) -> quinn::TransportConfig {
    use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};
    let mut t = quinn::TransportConfig::default();
    match settings.congestion {
        Congestion::Cubic => t.congestion_controller_factory(Arc::new(CubicConfig::default())),
        Congestion::NewReno => t.congestion_controller_factory(Arc::new(NewRenoConfig::default())),
        Congestion::Bbr => t.congestion_controller_factory(Arc::new(BbrConfig::default())),
    };
    t.max_concurrent_bidi_streams(credit::INITIAL_BIDI_STREAMS.into());
    t.max_concurrent_uni_streams(credit::INITIAL_UNI_STREAMS.into());
    t.keep_alive_interval(Some(settings.keep_alive));
    // An idle timeout beyond QUIC's varint range is no timeout at all.
    t.max_idle_timeout(settings.idle_timeout.try_into().ok());
    t.stream_receive_window((4u32 << 20).into());
    t.receive_window((32u32 << 20).into());
    t.send_window(32 << 20);
    t.datagram_receive_buffer_size(Some(1 << 20));
    t.datagram_send_buffer_size(1 << 20);
    t
}

/// The version a WebTransport session runs when the CONNECT names none: one that negotiates
/// in CLIENT_SETUP (draft-14) if configured, else the most preferred.
fn in_band_or_first(versions: &[Version]) -> Version {
    versions
        .iter()
        .copied()
        .find(|v| v.setup_has_versions())
        .or(versions.first().copied())
        .unwrap_or(Version::PREFERRED)
}

fn alpns(versions: &[Version]) -> Vec<&'static str> {
    versions.iter().map(|v| v.alpn()).collect()
}

/// How a [`Client`] connects.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Whom to trust.
    pub tls: ClientTls,
    /// Versions to offer, most preferred first.
    pub versions: Vec<Version>,
    /// The configuration of each session.
    pub session: SessionConfig,
    /// Whether every session uses `session`'s namespace indexes as given. When false (the
    /// default) each connection gets fresh ones: a namespace published on one session is not
    /// offered to the peer of another (two sessions to one relay are two different peers).
    pub share_indexes: bool,
    /// Congestion control, keep-alive and idle timeout.
    pub quic: QuicSettings,
    /// Bytes of UDP receive and send buffer asked of the kernel for the client's socket, so
    /// that many sessions opened at once do not lose their handshakes at it (0 keeps the
    /// system default; the kernel may grant less, which is logged at debug level).
    pub udp_buffer: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            tls: ClientTls::default(),
            versions: Version::ALL.to_vec(),
            session: SessionConfig::default(),
            share_indexes: false,
            quic: QuicSettings::default(),
            udp_buffer: DEFAULT_UDP_BUFFER,
        }
    }
}

/// Opens MOQT sessions to servers.
///
/// Dropping it does not affect the sessions it made: each keeps its connection, and the
/// client's UDP socket stays bound until the last of them has closed.
///
/// ```no_run
/// # async fn run() -> Result<(), moq_transport::Error> {
/// use moq_transport::endpoint::{Client, ClientConfig};
/// use moq_transport::tls::{ClientTls, parse_fingerprint};
/// let config = ClientConfig {
///     tls: ClientTls::pinned(parse_fingerprint("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")?),
///     ..Default::default()
/// };
/// let session = Client::new(config)?.connect("moqt://localhost:4443").await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    quic: quinn::ClientConfig,
    h3: quinn::ClientConfig,
    endpoints: Mutex<HashMap<bool, quinn::Endpoint>>,
    connect_timeout: Option<Duration>,
}

impl Client {
    /// A client; no socket is bound until the first connection.
    pub fn new(config: ClientConfig) -> Result<Client, Error> {
        if config.versions.is_empty() {
            return Err(Error::Invalid("no versions to offer".into()));
        }
        let quic = quinn_client_config(&config, &config.tls, &alpns(&config.versions))?;
        let h3 = quinn_client_config(&config, &config.tls, &[H3_ALPN])?;
        Ok(Client {
            config,
            quic,
            h3,
            endpoints: Mutex::new(HashMap::new()),
            connect_timeout: None,
        })
    }

    /// Gives up a QUIC handshake that has not completed after `timeout`, with
    /// [`ConnectError::Unreachable`]. Without it, a server that does not answer is given up
    /// after the idle timeout ([`QuicSettings::idle_timeout`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    fn endpoint(&self, remote: &SocketAddr) -> Result<quinn::Endpoint, Error> {
        let v6 = remote.is_ipv6();
        let mut eps = self.endpoints.lock();
        if let Some(ep) = eps.get(&v6) {
            return Ok(ep.clone());
        }
        let bind = if v6 {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0)
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)
        };
        let bind_error = |e: std::io::Error| {
            Error::from(ConnectError::Bind {
                addr: bind,
                reason: e.to_string(),
            })
        };
        let socket = std::net::UdpSocket::bind(bind).map_err(bind_error)?;
        if self.config.udp_buffer > 0
            && let Some((receive, send)) = size_udp_buffers(&socket, self.config.udp_buffer)
        {
            tracing::debug!(
                asked = self.config.udp_buffer,
                receive,
                send,
                "client UDP buffers capped"
            );
        }
        let runtime = quinn::default_runtime()
            .ok_or_else(|| Error::Invalid("Client::connect needs a Tokio runtime".into()))?;
        let ep = quinn::Endpoint::new(quinn::EndpointConfig::default(), None, socket, runtime)
            .map_err(bind_error)?;
        eps.insert(v6, ep.clone());
        Ok(ep)
    }

    /// Resolves once every connection this client made has closed and told its peer, so a
    /// program can exit without leaving a server to notice by timeout (quinn's
    /// `Endpoint::wait_idle`).
    ///
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        let endpoints: Vec<quinn::Endpoint> = self.endpoints.lock().values().cloned().collect();
        for e in endpoints {
            e.wait_idle().await;
        }
    }

    /// Connects to `url` and runs SETUP. `moqt://host:port/path?query` is raw QUIC (PATH and
    /// AUTHORITY go in SETUP); `https://host:port/path` is WebTransport. The port defaults to 443.
    ///
    /// `http://host:port/path?query`, **for development only**, is raw QUIC to a server whose
    /// certificate is trusted by the SHA-256 hash that `GET http://host:port/certificate.sha256`
    /// answers (TCP, on the QUIC port's number, as moq-relay's HTTP side serves it; the port
    /// defaults to 80): a self-signed certificate that a restart regenerates needs no copying.
    /// Anyone who can answer that plain HTTP request is trusted, so never use it beyond
    /// development. The hash is fetched again at each connection.
    ///
    /// Cancel safe: dropped before it resolves, the connection being set up is closed.
    pub async fn connect(&self, url: &str) -> Result<Session, Error> {
        let url = Url::parse(url).map_err(|e| Error::Invalid(format!("url {url:?}: {e}")))?;
        let (webtransport, fetch_hash) = match url.scheme() {
            "moqt" => (false, false),
            "https" => (true, false),
            "http" => (false, true),
            s => {
                return Err(Error::Invalid(format!(
                    "unsupported scheme {s:?} (use moqt://, https://, or http:// for a \
                     development server that serves /certificate.sha256)"
                )));
            }
        };
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| Error::Invalid("url has no host".into()))?;
        let port = url.port_or_known_default().unwrap_or(443);
        let server_name = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let remote = tokio::net::lookup_host((server_name.as_str(), port))
            .await
            .map_err(|e| ConnectError::Resolve {
                host: host.to_string(),
                reason: e.to_string(),
            })?
            .next()
            .ok_or_else(|| ConnectError::Resolve {
                host: host.to_string(),
                reason: "no address".into(),
            })?;
        let endpoint = self.endpoint(&remote)?;
        // Without a connect timeout, quinn gives a silent server the idle timeout.
        let idle = self.config.quic.idle_timeout;
        let cfg = if fetch_hash {
            let authority = url[Position::BeforeHost..Position::AfterPort].to_string();
            let limit = self.connect_timeout.unwrap_or(idle);
            let hash = crate::devcert::fetch(remote, &authority, limit).await?;
            let tls = ClientTls::pinned(hash);
            quinn_client_config(&self.config, &tls, &alpns(&self.config.versions))?
        } else if webtransport {
            self.h3.clone()
        } else {
            self.quic.clone()
        };
        let connecting = endpoint
            .connect_with(cfg, remote, &server_name)
            .map_err(|e| ConnectError::Failed {
                addr: remote,
                reason: e.to_string(),
            })?;
        let conn = match self.connect_timeout {
            Some(limit) => tokio::time::timeout(limit, connecting).await.map_err(|_| {
                ConnectError::Unreachable {
                    addr: remote,
                    timeout: limit,
                }
            })?,
            None => connecting.await,
        }
        .map_err(|e| handshake_error(remote, e, idle, &self.config.versions))?;
        let (conn, destination): (Arc<dyn Connection>, Destination) = if webtransport {
            // Draft-14 is negotiated in CLIENT_SETUP, not named here (its peers answer an
            // unknown protocol with 400): offered alone, the CONNECT names none.
            let named = self
                .config
                .versions
                .iter()
                .filter(|v| !v.setup_has_versions());
            let request = wt::proto::ConnectRequest::new(url.clone())
                .with_protocols(named.map(|v| v.alpn().to_string()));
            let session = wt::Session::connect(conn, request)
                .await
                .map_err(|e| ConnectError::WebTransport(format!("CONNECT: {e}")))?;
            // A server that ignores WT-Available-Protocols predates them (draft-14 negotiates
            // in CLIENT_SETUP), or gets our most preferred version.
            let fallback = Some(in_band_or_first(&self.config.versions).alpn().to_string());
            let conn = QuicConnection::webtransport(session).with_fallback_protocol(fallback);
            (Arc::new(conn), Destination::default())
        } else {
            require_datagrams(&conn)?;
            // draft-19 §10.3.1.1-2: AUTHORITY is the URI's authority, PATH its path and query.
            let authority = url[Position::BeforeUsername..Position::AfterPort].to_string();
            let path = url[Position::BeforePath..Position::AfterQuery].to_string();
            (
                Arc::new(QuicConnection::raw(conn)),
                Destination {
                    path: Some(path),
                    authority: Some(authority),
                },
            )
        };
        let mut config = self.config.session.clone();
        if !self.config.share_indexes {
            config.namespaces = NamespaceIndex::new();
            config.announced = NamespaceIndex::new();
        }
        Session::establish(conn, Role::Client, config, destination).await
    }
}

/// A quinn client configuration trusting as `tls` says, offering `alpn`, with `config`'s QUIC
/// settings.
fn quinn_client_config(
    config: &ClientConfig,
    tls: &ClientTls,
    alpn: &[&str],
) -> Result<quinn::ClientConfig, Error> {
    let tls = tls.client_config(alpn)?;
    let quic = QuicClientConfig::try_from(tls).map_err(|e| Error::Invalid(format!("tls: {e}")))?;
    let mut c = quinn::ClientConfig::new(Arc::new(quic));
    c.transport_config(Arc::new(transport_config_with(&config.quic)));
    Ok(c)
}

/// Why a QUIC handshake to `addr` failed, in words that say what to do.
fn handshake_error(
    addr: SocketAddr,
    e: quinn::ConnectionError,
    idle: Duration,
    offered: &[Version],
) -> ConnectError {
    match e {
        quinn::ConnectionError::TimedOut => ConnectError::Unreachable {
            addr,
            timeout: idle,
        },
        quinn::ConnectionError::TransportError(t) => {
            if t.reason.contains("UnknownIssuer") {
                return ConnectError::UnknownIssuer { addr };
            }
            if let Some(received) = crate::tls::unpinned_fingerprint(&t.reason) {
                return ConnectError::FingerprintMismatch { addr, received };
            }
            ConnectError::Tls {
                addr,
                reason: t.to_string(),
            }
        }
        // TLS alert no_application_protocol (RFC 8446 §6.2, RFC 7301 §3.2): no common ALPN.
        quinn::ConnectionError::ConnectionClosed(c)
            if c.error_code == quinn::TransportErrorCode::crypto(120) =>
        {
            ConnectError::NoCommonVersion {
                peer: addr.to_string(),
                offered: format!("{:?}", alpns(offered)),
            }
        }
        quinn::ConnectionError::ConnectionClosed(c) => ConnectError::Refused {
            addr,
            reason: c.to_string(),
        },
        quinn::ConnectionError::ApplicationClosed(c) => ConnectError::Refused {
            addr,
            reason: c.to_string(),
        },
        e => ConnectError::Failed {
            addr,
            reason: e.to_string(),
        },
    }
}

/// How a [`Server`] listens.
#[derive(Clone)]
pub struct ServerConfig {
    /// The UDP address to bind.
    pub bind: SocketAddr,
    /// The certificate to present.
    pub certificate: Certificate,
    /// Versions to accept, most preferred first.
    pub versions: Vec<Version>,
    /// Accept WebTransport (HTTP/3) on the same port.
    pub webtransport: bool,
    /// The configuration of each session. Its indexes are shared by every session (clones
    /// share them), so namespaces one session knows are known to all.
    pub session: SessionConfig,
    /// Sessions that finished their handshake and wait for [`Server::accept`].
    pub accept_queue: usize,
    /// Adjusts `session` for each new session (e.g. to give it its own index); `None` uses
    /// `session` as is.
    pub per_session: Option<PerSession>,
    /// Writes a qlog trace (JSON-SEQ, `<time>-<peer address>.sqlog`) of every QUIC connection
    /// into this directory. Needs the crate's `qlog` feature; [`Server::bind`] fails without it.
    pub qlog_dir: Option<std::path::PathBuf>,
    /// Bytes asked of the kernel for the UDP socket's receive and send buffers, so a burst of
    /// handshakes (a reconnect storm) is not dropped at the socket; 0 keeps the system's
    /// default. Linux grants at most `net.core.rmem_max` / `wmem_max` (a warning says so).
    pub udp_buffer: usize,
    /// Congestion control, keep-alive and idle timeout of every connection.
    pub quic: QuicSettings,
}

/// Builds each session's configuration from the server's (see [`ServerConfig::per_session`]).
pub type PerSession = Arc<dyn Fn(SessionConfig) -> SessionConfig + Send + Sync>;

impl ServerConfig {
    /// A server on `bind` presenting `certificate`, with defaults for the rest.
    pub fn new(bind: SocketAddr, certificate: Certificate) -> Self {
        ServerConfig {
            bind,
            certificate,
            versions: Version::ALL.to_vec(),
            webtransport: true,
            session: SessionConfig::default(),
            accept_queue: 128,
            udp_buffer: DEFAULT_UDP_BUFFER,
            per_session: None,
            qlog_dir: None,
            quic: QuicSettings::default(),
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("bind", &self.bind)
            .field("versions", &self.versions)
            .field("webtransport", &self.webtransport)
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl ServerConfig {
    fn session_config(&self) -> SessionConfig {
        match &self.per_session {
            Some(f) => f(self.session.clone()),
            None => self.session.clone(),
        }
    }
}

/// [`ServerConfig::udp_buffer`]'s and [`ClientConfig::udp_buffer`]'s default: 4 MiB each way.
pub const DEFAULT_UDP_BUFFER: usize = 4 << 20;

/// Asks for `bytes` of receive and send buffer on `socket`; returns what the kernel granted
/// (receive, send) if it granted less.
fn size_udp_buffers(socket: &std::net::UdpSocket, bytes: usize) -> Option<(usize, usize)> {
    let sock = socket2::SockRef::from(socket);
    let _ = sock.set_recv_buffer_size(bytes);
    let _ = sock.set_send_buffer_size(bytes);
    let (receive, send) = (
        sock.recv_buffer_size().unwrap_or(0),
        sock.send_buffer_size().unwrap_or(0),
    );
    // Linux reports twice what was granted (its bookkeeping share): compare halves there.
    let granted = |reported: usize| match cfg!(target_os = "linux") {
        true => reported / 2,
        false => reported,
    };
    let (receive, send) = (granted(receive), granted(send));
    (receive < bytes || send < bytes).then_some((receive, send))
}

/// The server's endpoint keys, derived from its certificate's private key: the stateless
/// reset key (RFC 9000 §10.3) and the key its connection IDs are hashed with. A relay
/// restarted with the same certificate recognizes its predecessor's connection IDs and resets
/// those connections at their next packet, so their clients notice at once instead of at the
/// idle timeout. (A generated certificate gives each process keys of its own.)
fn endpoint_config(certificate: &Certificate) -> quinn::EndpointConfig {
    let derive = |label: &[u8]| {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(b"moq-transport endpoint key v1\0");
        ctx.update(label);
        ctx.update(certificate.key.secret_der());
        ctx.finish()
    };
    let reset = derive(b"stateless reset\0");
    let mut config = quinn::EndpointConfig::new(Arc::new(ring::hmac::Key::new(
        ring::hmac::HMAC_SHA256,
        reset.as_ref(),
    )));
    let mut cid_key = [0u8; 8];
    cid_key.copy_from_slice(
        derive(b"connection id\0")
            .as_ref()
            .get(..8)
            .unwrap_or(&[0; 8]),
    );
    let cid_key = u64::from_le_bytes(cid_key);
    config.cid_generator(move || {
        Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
    });
    config
}

/// Accepts MOQT sessions over raw QUIC and WebTransport on one UDP port.
///
/// Dropping it does not close the endpoint: the port stays bound, connections are still
/// accepted and run through SETUP, and each new session, with nobody to take it, is then
/// dropped, which closes it (NO_ERROR). Sessions already accepted are not affected. Call
/// [`Server::close`] to stop accepting (it also closes every connection).
///
/// ```no_run
/// # async fn run() -> Result<(), moq_transport::Error> {
/// use moq_transport::endpoint::{Server, ServerConfig};
/// use moq_transport::tls::Certificate;
/// let cert = Certificate::generate(&["localhost".into()])?;
/// println!("fingerprint {}", cert.fingerprint_hex());
/// let server = Server::bind(ServerConfig::new("[::]:4443".parse().unwrap(), cert))?;
/// while let Some(session) = server.accept().await {
///     tokio::spawn(async move { session.closed().await });
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Server {
    endpoint: quinn::Endpoint,
    sessions: tokio::sync::Mutex<mpsc::Receiver<Session>>,
    cert: ServerCert,
    /// Set by [`Server::refuse_new`].
    refusing: Arc<std::sync::atomic::AtomicBool>,
}

impl Server {
    /// Binds and starts accepting.
    pub fn bind(config: ServerConfig) -> Result<Server, Error> {
        if config.versions.is_empty() {
            return Err(Error::Invalid("no versions to accept".into()));
        }
        let mut alpn = alpns(&config.versions);
        if config.webtransport {
            alpn.push(H3_ALPN);
        }
        let cert = ServerCert::new(&config.certificate)?;
        let tls = cert.server_config(&alpn)?;
        let quic =
            QuicServerConfig::try_from(tls).map_err(|e| Error::Invalid(format!("tls: {e}")))?;
        let mut server = quinn::ServerConfig::with_crypto(Arc::new(quic));
        server.transport_config(Arc::new(transport_config_with(&config.quic)));
        let qlog = match &config.qlog_dir {
            Some(dir) => Some(Qlog::new(dir, &server, config.quic)?),
            None => None,
        };
        let bind_error = |e: std::io::Error| {
            Error::from(ConnectError::Bind {
                addr: config.bind,
                reason: e.to_string(),
            })
        };
        let socket = std::net::UdpSocket::bind(config.bind).map_err(bind_error)?;
        if config.udp_buffer > 0
            && let Some((receive, send)) = size_udp_buffers(&socket, config.udp_buffer)
        {
            tracing::warn!(
                asked = config.udp_buffer,
                receive,
                send,
                "the kernel capped the UDP buffers (raise net.core.rmem_max and wmem_max)"
            );
        }
        let runtime = quinn::default_runtime()
            .ok_or_else(|| Error::Invalid("Server::bind needs a Tokio runtime".into()))?;
        let endpoint = quinn::Endpoint::new(
            endpoint_config(&config.certificate),
            Some(server),
            socket,
            runtime,
        )
        .map_err(bind_error)?;
        let (tx, rx) = mpsc::channel(config.accept_queue.max(1));
        let refusing = Arc::new(std::sync::atomic::AtomicBool::new(false));
        tokio::spawn(accept_loop(
            endpoint.clone(),
            Arc::new(config),
            qlog,
            tx,
            refusing.clone(),
        ));
        Ok(Server {
            endpoint,
            sessions: tokio::sync::Mutex::new(rx),
            cert,
            refusing,
        })
    }

    /// Refuses every new connection from now on (QUIC CONNECTION_REFUSED, at once), for a
    /// drain: clients that reconnect go elsewhere instead of back to a server that is leaving.
    /// Open sessions are untouched.
    pub fn refuse_new(&self) {
        self.refusing
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Presents `cert` from the next handshake on; open sessions keep theirs.
    pub fn set_certificate(&self, cert: &Certificate) -> Result<(), Error> {
        self.cert.set(cert)
    }

    /// SHA-256 of the certificate presented now.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.cert.fingerprint()
    }

    /// The next session that completed SETUP; `None` once the server is closed (by
    /// [`Server::close`], which may be called while another task waits here).
    ///
    /// Cancel safe. Several tasks may accept at once; each session goes to one of them.
    pub async fn accept(&self) -> Option<Session> {
        self.sessions.lock().await.recv().await
    }

    /// The bound address.
    pub fn local_addr(&self) -> Result<SocketAddr, Error> {
        self.endpoint
            .local_addr()
            .map_err(|e| Error::Invalid(format!("local address: {e}")))
    }

    /// Resolves once every connection has finished closing, so that peers were told: call it
    /// after [`Server::close`] before the process exits (quinn's `Endpoint::wait_idle`).
    ///
    /// Cancel safe.
    pub async fn wait_idle(&self) {
        self.endpoint.wait_idle().await;
    }

    /// Stops accepting and closes every connection with `code`: the endpoint's accept loop
    /// ends, [`Server::accept`] returns `None`, and every session, accepted or not, ends.
    pub fn close(&self, code: u64, reason: &str) {
        self.endpoint.close(
            quinn::VarInt::from_u64(code).unwrap_or(quinn::VarInt::MAX),
            reason.as_bytes(),
        );
    }
}

/// Per-connection qlog traces: each accepted connection gets the server's configuration with a
/// trace file of its own.
#[cfg(feature = "qlog")]
struct Qlog {
    dir: std::path::PathBuf,
    server: quinn::ServerConfig,
    quic: QuicSettings,
}

#[cfg(feature = "qlog")]
impl Qlog {
    fn new(
        dir: &std::path::Path,
        server: &quinn::ServerConfig,
        quic: QuicSettings,
    ) -> Result<Qlog, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Invalid(format!("qlog dir {}: {e}", dir.display())))?;
        Ok(Qlog {
            dir: dir.to_path_buf(),
            server: server.clone(),
            quic,
        })
    }

    /// The server configuration for one connection from `remote`, tracing into a new file;
    /// `None` (trace nothing) if the file cannot be created.
    fn for_connection(&self, remote: SocketAddr) -> Option<Arc<quinn::ServerConfig>> {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let name = format!("{millis}-{remote}.sqlog").replace([':', '[', ']'], "_");
        let path = self.dir.join(name);
        let file = match std::fs::File::create(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "no qlog for this connection");
                return None;
            }
        };
        let mut qlog = quinn::QlogConfig::default();
        qlog.writer(Box::new(std::io::LineWriter::new(file)))
            .title(Some(format!("moq-transport server, peer {remote}")));
        let mut transport = transport_config_with(&self.quic);
        transport.qlog_stream(qlog.into_stream());
        let mut server = self.server.clone();
        server.transport_config(Arc::new(transport));
        Some(Arc::new(server))
    }
}

/// Without the `qlog` feature a trace directory is refused at bind.
#[cfg(not(feature = "qlog"))]
struct Qlog;

#[cfg(not(feature = "qlog"))]
impl Qlog {
    fn new(
        _dir: &std::path::Path,
        _server: &quinn::ServerConfig,
        _quic: QuicSettings,
    ) -> Result<Qlog, Error> {
        Err(Error::Invalid(
            "qlog_dir needs moq-transport's `qlog` feature".into(),
        ))
    }

    fn for_connection(&self, _remote: SocketAddr) -> Option<Arc<quinn::ServerConfig>> {
        None
    }
}

async fn accept_loop(
    endpoint: quinn::Endpoint,
    config: Arc<ServerConfig>,
    qlog: Option<Qlog>,
    tx: mpsc::Sender<Session>,
    refusing: Arc<std::sync::atomic::AtomicBool>,
) {
    while let Some(incoming) = endpoint.accept().await {
        if refusing.load(std::sync::atomic::Ordering::Relaxed) {
            incoming.refuse();
            continue;
        }
        let config = config.clone();
        let tx = tx.clone();
        let remote = incoming.remote_address();
        let traced = qlog.as_ref().and_then(|q| q.for_connection(remote));
        let connecting = match traced {
            Some(server) => incoming.accept_with(server),
            None => incoming.accept(),
        };
        tokio::spawn(async move {
            let result = match connecting {
                Ok(connecting) => handshake(connecting, &config).await,
                Err(e) => Err(Error::from(ConnectError::Failed {
                    addr: remote,
                    reason: e.to_string(),
                })),
            };
            match result {
                Ok(session) => {
                    let _ = tx.send(session).await;
                }
                Err(e) => tracing::debug!(%remote, error = %e, "session handshake failed"),
            }
        });
    }
}

/// Refuses a raw QUIC connection whose peer did not negotiate the QUIC DATAGRAM extension
/// (draft-22 §6.2, draft-14 on: it "MUST be supported and negotiated in the QUIC connection
/// used for MOQT"): the connection is closed with PROTOCOL_VIOLATION before any MOQT stream
/// (the draft names no code for it). Ours always offers it (`transport_config`), so quinn
/// reports no datagram size only when the peer's transport parameters lack
/// max_datagram_frame_size.
fn require_datagrams(conn: &quinn::Connection) -> Result<(), Error> {
    if conn.max_datagram_size().is_some() {
        return Ok(());
    }
    let code = SessionErrorCode::PROTOCOL_VIOLATION;
    let reason = "QUIC DATAGRAM extension not negotiated";
    conn.close(
        quinn::VarInt::from_u64(code.0).unwrap_or_default(),
        reason.as_bytes(),
    );
    Err(Error::protocol(reason))
}

async fn handshake(connecting: quinn::Connecting, config: &ServerConfig) -> Result<Session, Error> {
    let remote = connecting.remote_address();
    let conn = connecting.await.map_err(|e| ConnectError::Failed {
        addr: remote,
        reason: e.to_string(),
    })?;
    let alpn = negotiated_alpn(&conn).unwrap_or_default();
    if alpn == H3_ALPN {
        let request = wt::Request::accept(conn)
            .await
            .map_err(|e| ConnectError::WebTransport(e.to_string()))?;
        // draft-19 §3.1.2: pick our most preferred version among those offered.
        let offered = request.protocols.clone();
        let chosen = config
            .versions
            .iter()
            .find(|v| offered.iter().any(|p| p == v.alpn()))
            .copied();
        let chosen = match (chosen, offered.is_empty()) {
            (Some(v), _) => v,
            // A client that offers nothing negotiates in CLIENT_SETUP (draft-14; from
            // draft-15 WebTransport names the version), or gets our preferred version.
            (None, true) => in_band_or_first(&config.versions),
            (None, false) => {
                let _ = request.reject(http::StatusCode::BAD_REQUEST).await;
                return Err(ConnectError::NoCommonVersion {
                    peer: remote.to_string(),
                    offered: format!("{offered:?}"),
                }
                .into());
            }
        };
        let url = request.url.clone();
        let path = url[Position::BeforePath..Position::AfterQuery].to_string();
        let authority = url[Position::BeforeHost..Position::AfterPort].to_string();
        let response = if offered.is_empty() {
            wt::proto::ConnectResponse::OK
        } else {
            wt::proto::ConnectResponse::OK.with_protocol(chosen.alpn())
        };
        let session = request
            .respond(response)
            .await
            .map_err(|e| ConnectError::WebTransport(e.to_string()))?;
        let conn = QuicConnection::webtransport(session)
            .with_fallback_protocol(Some(chosen.alpn().to_string()));
        Session::establish(
            Arc::new(conn),
            Role::Server,
            config.session_config(),
            Destination {
                path: Some(path),
                authority: Some(authority),
            },
        )
        .await
    } else {
        require_datagrams(&conn)?;
        Session::establish(
            Arc::new(QuicConnection::raw(conn)),
            Role::Server,
            config.session_config(),
            Destination::default(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    /// The socket gets the asked buffers, up to what the kernel allows an unprivileged
    /// SO_RCVBUF (`net.core.rmem_max` / `wmem_max` on Linux).
    #[test]
    fn udp_buffers_are_sized() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let asked = 1 << 20;
        let _capped = super::size_udp_buffers(&socket, asked);
        let sock = socket2::SockRef::from(&socket);
        let cap = |name: &str| {
            std::fs::read_to_string(format!("/proc/sys/net/core/{name}"))
                .ok()
                .and_then(|s| s.trim().parse::<usize>().ok())
                .unwrap_or(usize::MAX)
        };
        let default = cap("rmem_default").min(212_992);
        // Linux reports twice what it granted.
        let scale = if cfg!(target_os = "linux") { 2 } else { 1 };
        for (got, max) in [
            (sock.recv_buffer_size().unwrap(), cap("rmem_max")),
            (sock.send_buffer_size().unwrap(), cap("wmem_max")),
        ] {
            assert!(got >= scale * asked.min(max), "{got} < {}", asked.min(max));
            assert!(
                got > default || max <= default / scale,
                "{got}: still the default"
            );
        }
    }
}
