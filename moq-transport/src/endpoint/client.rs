//! The client endpoint: connects to `moqt://`, `https://` and (for development) `http://`
//! URLs, and with the `websocket` feature to `ws://` and `wss://` ones.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use moq_core::Version;
use parking_lot::Mutex;
use quinn::crypto::rustls::QuicClientConfig;
use url::{Position, Url};
use web_transport_quinn as wt;

use super::settings::{
    DEFAULT_UDP_BUFFER, H3_ALPN, QuicSettings, alpns, in_band_or_first, require_datagrams,
    size_udp_buffers, transport_config_with,
};
use crate::Session;
use crate::error::{ConnectError, Error};
use crate::index::NamespaceIndex;
use crate::session::{Destination, Role, SessionConfig};
use crate::tls::ClientTls;
use crate::transport::Connection;
use crate::transport::quic::QuicConnection;

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
    /// The head start of WebTransport (and `http://`'s raw QUIC) over the WebSocket tried
    /// after it (`None`: no WebSocket fallback).
    websocket_fallback: Option<Duration>,
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
            websocket_fallback: None,
        })
    }

    /// Gives up a QUIC handshake that has not completed after `timeout`, with
    /// [`ConnectError::Unreachable`]. Without it, a server that does not answer is given up
    /// after the idle timeout ([`QuicSettings::idle_timeout`]).
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// For `https://` (and development `http://`) URLs: if the session over QUIC is not set up
    /// within `head_start`, a session over QMux over WebSocket to the same host, port and path
    /// (`wss://`, `ws://` for `http://`) is tried too, and the first set up wins (the other
    /// attempt is abandoned, and closed if it had connected); the connection fails if both
    /// fail, with [`ConnectError::FallbackFailed`], which gives both reasons. For
    /// networks that block UDP, and servers that take WebSocket on a TCP port of the QUIC
    /// port's number (moq-relay with `--http` there, moq-dev's relay). Needs the `websocket`
    /// feature (without it the fallback is an error).
    pub fn with_websocket_fallback(mut self, head_start: Duration) -> Self {
        self.websocket_fallback = Some(head_start);
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
    /// `ws://host:port/path?query` and `wss://...` (the `websocket` feature) are MOQT over
    /// QMux over a WebSocket, for where QUIC is blocked: the upgrade offers `qmux-01.moqt-NN`
    /// for every configured version (see [`crate::endpoint`]'s `websocket` module), `wss://`
    /// trusting certificates as [`ClientConfig::tls`] says; the port defaults to 80 / 443.
    ///
    /// Cancel safe: dropped before it resolves, the connection being set up is closed.
    pub async fn connect(&self, url: &str) -> Result<Session, Error> {
        let url = Url::parse(url).map_err(|e| Error::Invalid(format!("url {url:?}: {e}")))?;
        let fallback = match url.scheme() {
            "https" => Some("wss"),
            "http" => Some("ws"),
            _ => None,
        };
        match (self.websocket_fallback, fallback) {
            (Some(head_start), Some(scheme)) => self.race(&url, scheme, head_start).await,
            _ => self.connect_url(&url).await,
        }
    }

    /// QUIC first, then a WebSocket `head_start` later; the first session set up wins.
    async fn race(&self, url: &Url, scheme: &str, head_start: Duration) -> Result<Session, Error> {
        let mut ws_url = url.clone();
        ws_url
            .set_scheme(scheme)
            .map_err(|()| Error::Invalid(format!("{url} as {scheme}://")))?;
        let quic = self.connect_url(url);
        let ws = async {
            tokio::time::sleep(head_start).await;
            self.connect_websocket(&ws_url).await
        };
        tokio::pin!(quic, ws);
        let (mut quic_failed, mut ws_failed) = (None, None);
        loop {
            tokio::select! {
                r = &mut quic, if quic_failed.is_none() => match r {
                    Ok(s) => return Ok(s),
                    Err(e) => quic_failed = Some(e),
                },
                r = &mut ws, if ws_failed.is_none() => match r {
                    Ok(s) => {
                        tracing::info!(%ws_url, "connected over the WebSocket fallback");
                        return Ok(s);
                    }
                    Err(e) => {
                        tracing::debug!(%ws_url, error = %e, "WebSocket fallback failed");
                        ws_failed = Some(e);
                    }
                },
            }
            if let (Some(quic), Some(websocket)) = (&quic_failed, &ws_failed) {
                return Err(ConnectError::FallbackFailed {
                    quic: quic.to_string(),
                    websocket: format!("{ws_url}: {websocket}"),
                }
                .into());
            }
        }
    }

    async fn connect_url(&self, url: &Url) -> Result<Session, Error> {
        let url = url.clone();
        let (webtransport, fetch_hash) = match url.scheme() {
            "moqt" => (false, false),
            "https" => (true, false),
            "http" => (false, true),
            "ws" | "wss" => return self.connect_websocket(&url).await,
            s => {
                return Err(Error::Invalid(format!(
                    "unsupported scheme {s:?} (use moqt://, https://, ws://, wss://, or http:// \
                     for a development server that serves /certificate.sha256)"
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
        let remote = super::settings::resolve(host, port).await?;
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
        Session::establish(conn, Role::Client, self.session_config(), destination).await
    }

    /// The configuration of a new session (fresh indexes unless shared).
    fn session_config(&self) -> SessionConfig {
        let mut config = self.config.session.clone();
        if !self.config.share_indexes {
            config.namespaces = NamespaceIndex::new();
            config.announced = NamespaceIndex::new();
        }
        config
    }

    /// A session over QMux over a WebSocket (`ws://`, `wss://`).
    #[cfg(feature = "websocket")]
    async fn connect_websocket(&self, url: &Url) -> Result<Session, Error> {
        let dial = super::websocket::Dial {
            tls: &self.config.tls,
            versions: &self.config.versions,
            settings: &self.config.quic,
            timeout: self.connect_timeout,
        };
        let conn = super::websocket::connect(url, dial).await?;
        // As over WebTransport, the URL carried the path and authority.
        let destination = Destination::default();
        Session::establish(
            Arc::new(conn),
            Role::Client,
            self.session_config(),
            destination,
        )
        .await
    }

    #[cfg(not(feature = "websocket"))]
    async fn connect_websocket(&self, url: &Url) -> Result<Session, Error> {
        Err(Error::Invalid(format!(
            "{}:// needs moq-transport's `websocket` feature",
            url.scheme()
        )))
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
