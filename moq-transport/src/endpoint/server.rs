//! The server endpoint: accepts raw QUIC and WebTransport sessions on one UDP port.

use std::net::SocketAddr;
use std::sync::Arc;

use moq_core::Version;
use quinn::crypto::rustls::QuicServerConfig;
use tokio::sync::mpsc;
use url::Position;
use web_transport_quinn as wt;

use super::qlog::Qlog;
use super::settings::{
    DEFAULT_UDP_BUFFER, H3_ALPN, QuicSettings, alpns, in_band_or_first, require_datagrams,
    size_udp_buffers, transport_config_with,
};
use crate::Session;
use crate::error::{ConnectError, Error};
use crate::session::{Destination, Role, SessionConfig};
use crate::tls::{Certificate, ServerCert};
use crate::transport::quic::{QuicConnection, negotiated_alpn};

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
/// Dropping it stops accepting: its accept loop and the handshakes in progress end (their
/// connections close), and the endpoint takes no new connection. Sessions already accepted are
/// not affected; the UDP socket stays bound until the last of them has closed. Call
/// [`Server::close`] to close every connection as well.
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
    /// The accept loop, which owns the handshakes in progress.
    accepting: tokio::task::AbortHandle,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Nobody takes new sessions any more: stop taking connections too.
        self.endpoint.set_server_config(None);
        self.accepting.abort();
    }
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
        let accepting = tokio::spawn(accept_loop(
            endpoint.clone(),
            Arc::new(config),
            qlog,
            tx,
            refusing.clone(),
        ))
        .abort_handle();
        Ok(Server {
            endpoint,
            sessions: tokio::sync::Mutex::new(rx),
            cert,
            refusing,
            accepting,
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

    /// The certificate presented, as [`Server::set_certificate`] replaces it: for a TLS
    /// listener beside the server (a WebSocket one) that should present the same.
    pub fn certificate(&self) -> &ServerCert {
        &self.cert
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

/// Accepts connections until the endpoint closes. The handshakes are this loop's own: when it
/// is aborted (the [`Server`] dropped), they end with it.
async fn accept_loop(
    endpoint: quinn::Endpoint,
    config: Arc<ServerConfig>,
    qlog: Option<Qlog>,
    tx: mpsc::Sender<Session>,
    refusing: Arc<std::sync::atomic::AtomicBool>,
) {
    let mut handshakes = tokio::task::JoinSet::new();
    loop {
        let incoming = tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => incoming,
                None => break,
            },
            Some(_) = handshakes.join_next() => continue,
        };
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
        handshakes.spawn(async move {
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
    // The endpoint closed: the handshakes in progress end with it.
    handshakes.shutdown().await;
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
