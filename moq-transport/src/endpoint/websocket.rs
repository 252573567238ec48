//! MOQT over QMux over a WebSocket (the `websocket` feature): the fallback for networks and
//! browsers where QUIC or WebTransport does not work.
//!
//! The version is negotiated the way WebTransport negotiates it (draft-19 §3.1.2), through
//! the WebSocket subprotocol list: a client offers `qmux-01.moqt-NN` for every version it
//! speaks, most preferred first (draft-14's is `qmux-01.moq-00`, and SETUP picks the draft,
//! as it does over raw QUIC), and the server answers with the one of its most preferred
//! version (RFC 6455 §4.2.2: exactly one of those offered). A server also accepts
//! `qmux-00.` before the versions up to draft-17, which clients of moq-dev's `qmux` 0.4 offer.
//! An upgrade that offers none of ours is refused with 400 (no session starts).
//!
//! The server side is independent of any HTTP server: [`upgrade`] checks a request's headers
//! and picks the subprotocol, the HTTP server answers 101 with [`Upgrade::response_headers`],
//! and [`Upgrade::accept`] runs the session on the upgraded connection. The client side is
//! [`crate::endpoint::Client::connect`] with a `ws://` or `wss://` URL.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use moq_core::Version;
use qmux::ws::tokio_tungstenite::{self as tokio_ws, tungstenite};
use tokio::io::{AsyncRead, AsyncWrite};
use tungstenite::client::IntoClientRequest;
use tungstenite::http::{HeaderMap, HeaderValue, StatusCode, header};
use tungstenite::protocol::{Role as WsRole, WebSocketConfig};
use url::Url;

use super::settings::QuicSettings;
use crate::Session;
use crate::error::{ConnectError, Error};
use crate::session::{Destination, Role, SessionConfig};
use crate::tls::ClientTls;
use crate::transport::credit::{MAX_BIDI_STREAMS, MAX_UNI_STREAMS};
use crate::transport::qmux::{QmuxConnection, lingering};

/// The QMux draft a client offers, as a subprotocol prefix (draft-ietf-quic-qmux-01).
pub const QMUX_PREFIX: &str = "qmux-01.";
/// The older QMux draft a server also accepts for versions up to draft-17.
const QMUX00_PREFIX: &str = "qmux-00.";

/// The largest WebSocket message (and frame) accepted: each message is one QMux record, at
/// most 16382 bytes (the QMux record size advertised), so anything much larger is refused
/// before it is buffered.
pub const MAX_MESSAGE: usize = 64 * 1024;
/// The QMux record size advertised (qmux's default, draft-ietf-quic-qmux-01's minimum).
const MAX_RECORD: u64 = 16_382;

/// The subprotocols a client offers for `versions`, most preferred first.
///
/// ```
/// use moq_transport::endpoint::websocket::subprotocols;
/// use moq_core::Version;
/// assert_eq!(subprotocols(&[Version::Draft19, Version::Draft14]), ["qmux-01.moqt-19", "qmux-01.moq-00"]);
/// ```
pub fn subprotocols(versions: &[Version]) -> Vec<String> {
    versions
        .iter()
        .map(|v| format!("{QMUX_PREFIX}{}", v.alpn()))
        .collect()
}

/// The version a subprotocol names, if it is one of `versions` on a QMux draft we speak.
pub fn subprotocol_version(subprotocol: &str, versions: &[Version]) -> Option<Version> {
    let (alpn, old) = match subprotocol.strip_prefix(QMUX_PREFIX) {
        Some(alpn) => (alpn, false),
        None => (subprotocol.strip_prefix(QMUX00_PREFIX)?, true),
    };
    let v = Version::from_alpn(alpn.as_bytes())?;
    (versions.contains(&v) && !(old && v > Version::Draft17)).then_some(v)
}

/// Our most preferred version among the `offered` subprotocols (draft-19 §3.1.2, as for
/// WebTransport), with the subprotocol that names it (`qmux-01.` before `qmux-00.`).
pub fn select_subprotocol<'a>(
    offered: impl IntoIterator<Item = &'a str>,
    versions: &[Version],
) -> Option<(String, Version)> {
    let mut best: Option<(usize, bool, &str, Version)> = None;
    for p in offered {
        let Some(v) = subprotocol_version(p, versions) else {
            continue;
        };
        let rank = versions.iter().position(|x| *x == v).unwrap_or(usize::MAX);
        let old = p.starts_with(QMUX00_PREFIX);
        if best.is_none_or(|(r, o, _, _)| (rank, old) < (r, o)) {
            best = Some((rank, old, p, v));
        }
    }
    best.map(|(_, _, p, v)| (p.to_string(), v))
}

/// Why a WebSocket upgrade was refused; [`UpgradeError::status`] is the answer to send.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpgradeError {
    /// Not a WebSocket upgrade request (RFC 6455 §4.2.1): what is missing.
    #[error("not a WebSocket upgrade: {0}")]
    NotWebSocket(&'static str),
    /// A WebSocket version other than 13 (RFC 6455 §4.2.2: answered 426 with the one we
    /// speak).
    #[error("WebSocket version {0:?} (13 is spoken)")]
    Version(String),
    /// No offered subprotocol names a QMux draft and a MOQT version we speak.
    #[error("no MOQT-over-QMux subprotocol in common (offered {offered:?})")]
    NoSubprotocol {
        /// What the client offered.
        offered: Vec<String>,
    },
}

impl UpgradeError {
    /// The HTTP status to refuse the upgrade with.
    pub fn status(&self) -> StatusCode {
        match self {
            UpgradeError::Version(_) => StatusCode::UPGRADE_REQUIRED,
            _ => StatusCode::BAD_REQUEST,
        }
    }
}

/// A WebSocket upgrade request checked and a version chosen: answer it with
/// [`Upgrade::response_headers`] (status 101), then run the session with [`Upgrade::accept`].
#[derive(Clone, Debug)]
pub struct Upgrade {
    accept_key: String,
    subprotocol: String,
    version: Version,
}

fn header_values<'a>(headers: &'a HeaderMap, name: &header::HeaderName) -> Vec<&'a str> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .collect()
}

/// Checks the headers of a `GET` upgrade request (RFC 6455 §4.2.1) and picks the version
/// from its `Sec-WebSocket-Protocol` offers (see the module docs).
pub fn upgrade(headers: &HeaderMap, versions: &[Version]) -> Result<Upgrade, UpgradeError> {
    let has = |name: &header::HeaderName, token: &str| {
        header_values(headers, name)
            .iter()
            .any(|v| v.eq_ignore_ascii_case(token))
    };
    if !has(&header::UPGRADE, "websocket") {
        return Err(UpgradeError::NotWebSocket("Upgrade: websocket"));
    }
    if !has(&header::CONNECTION, "upgrade") {
        return Err(UpgradeError::NotWebSocket("Connection: Upgrade"));
    }
    let version = header_values(headers, &header::SEC_WEBSOCKET_VERSION);
    if version != ["13"] {
        return Err(UpgradeError::Version(version.join(",")));
    }
    let key = headers
        .get(header::SEC_WEBSOCKET_KEY)
        .map(HeaderValue::as_bytes)
        .filter(|k| !k.is_empty())
        .ok_or(UpgradeError::NotWebSocket("Sec-WebSocket-Key"))?;
    let offered = header_values(headers, &header::SEC_WEBSOCKET_PROTOCOL);
    let (subprotocol, version) =
        select_subprotocol(offered.iter().copied(), versions).ok_or_else(|| {
            UpgradeError::NoSubprotocol {
                offered: offered.iter().map(|s| s.to_string()).collect(),
            }
        })?;
    Ok(Upgrade {
        accept_key: tungstenite::handshake::derive_accept_key(key),
        subprotocol,
        version,
    })
}

/// The WebSocket settings of both ends: messages of at most [`MAX_MESSAGE`] bytes.
fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
}

/// The QMux session settings: stream limits like QUIC's ceiling (qmux raises the peer's
/// limit as streams end), and windows that keep a loopback or LAN link busy.
fn qmux_config(settings: &QuicSettings) -> qmux::Config {
    let mut c = qmux::Config::default();
    c.max_streams_bidi = MAX_BIDI_STREAMS.into();
    c.max_streams_uni = MAX_UNI_STREAMS.into();
    c.max_data = 16 << 20;
    c.max_stream_data_bidi_local = 1 << 20;
    c.max_stream_data_bidi_remote = 1 << 20;
    c.max_stream_data_uni = 1 << 20;
    c.max_record_size = MAX_RECORD;
    c.max_datagram_frame_size = MAX_RECORD;
    c.max_idle_timeout = u64::try_from(settings.idle_timeout.as_millis()).unwrap_or(0);
    c
}

/// WebSocket pings: as often as QUIC's keep-alive, and a peer silent for the idle timeout is
/// gone (a WebSocket has no idle timeout of its own).
fn keep_alive(settings: &QuicSettings) -> qmux::ws::KeepAlive {
    qmux::ws::KeepAlive::new(settings.keep_alive, settings.idle_timeout)
}

impl Upgrade {
    /// The chosen subprotocol, e.g. `qmux-01.moqt-19`.
    pub fn subprotocol(&self) -> &str {
        &self.subprotocol
    }

    /// The MOQT version it names.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The headers of the 101 answer: `Upgrade`, `Connection`, `Sec-WebSocket-Accept` and
    /// `Sec-WebSocket-Protocol` (RFC 6455 §4.2.2).
    pub fn response_headers(&self) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        for (name, value) in [
            (header::SEC_WEBSOCKET_ACCEPT, &self.accept_key),
            (header::SEC_WEBSOCKET_PROTOCOL, &self.subprotocol),
        ] {
            if let Ok(v) = HeaderValue::from_str(value) {
                h.insert(name, v);
            }
        }
        h
    }

    /// Runs the server's side of a session on `io`, the connection upgraded after the 101:
    /// QMux, then SETUP. `destination` is the request's path and authority (as over
    /// WebTransport, they come from the URL); `settings` gives the keep-alive and idle timeout.
    ///
    /// Cancel safety: dropping the future before it resolves drops `io`, which ends the
    /// connection; no session is left behind.
    pub async fn accept<IO>(
        self,
        io: IO,
        remote: Option<SocketAddr>,
        settings: &QuicSettings,
        config: SessionConfig,
        destination: Destination,
    ) -> Result<Session, Error>
    where
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let ws =
            tokio_ws::WebSocketStream::from_raw_socket(io, WsRole::Server, Some(ws_config())).await;
        let session = (settings, config, destination);
        serve(ws, &self.subprotocol, remote, session).await
    }
}

/// An upgraded WebSocket as tungstenite's messages in and out, whoever did the upgrade.
trait WsSocket:
    futures::Stream<Item = Result<tungstenite::Message, tungstenite::Error>>
    + futures::Sink<tungstenite::Message, Error = tungstenite::Error>
    + Unpin
    + Send
    + 'static
{
}

impl<S> WsSocket for S where
    S: futures::Stream<Item = Result<tungstenite::Message, tungstenite::Error>>
        + futures::Sink<tungstenite::Message, Error = tungstenite::Error>
        + Unpin
        + Send
        + 'static
{
}

/// QMux on an upgraded WebSocket, then the server's SETUP with `(settings, config,
/// destination)`.
async fn serve<S>(
    ws: S,
    subprotocol: &str,
    remote: Option<SocketAddr>,
    (settings, config, destination): (&QuicSettings, SessionConfig, Destination),
) -> Result<Session, Error>
where
    S: WsSocket,
{
    let conn = qmux_connection(ws, subprotocol, settings, Role::Server, remote);
    Session::establish(Arc::new(conn), Role::Server, config, destination).await
}

/// QMux as `role` on an upgraded WebSocket whose subprotocol is `subprotocol`.
fn qmux_connection<S>(
    ws: S,
    subprotocol: &str,
    settings: &QuicSettings,
    role: Role,
    remote: Option<SocketAddr>,
) -> QmuxConnection
where
    S: WsSocket,
{
    let (ws, local_close) = lingering(ws);
    let upgraded = qmux::ws::Upgraded::new(ws)
        .with_alpn(subprotocol)
        .with_keep_alive(keep_alive(settings))
        .with_session_config(qmux_config(settings));
    let session = match role {
        Role::Server => upgraded.accept(),
        Role::Client => upgraded.connect(),
    };
    QmuxConnection::with_close(session, remote, local_close)
}

/// Serves one connection that has not upgraded yet, with no HTTP server in front: reads
/// the upgrade request (any path), refuses it as [`upgrade`] says (the status and reason
/// are the answer), or answers 101 and runs the session. The destination is the request's
/// path and query and its `Host`.
///
/// Cancel safety: as [`Upgrade::accept`], dropping the future drops `io`.
// The callback's error type is tungstenite's, not ours.
#[allow(clippy::result_large_err)]
pub async fn accept<IO>(
    io: IO,
    remote: Option<SocketAddr>,
    versions: &[Version],
    settings: &QuicSettings,
    config: SessionConfig,
) -> Result<Session, Error>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    use tungstenite::handshake::server::{ErrorResponse, Request, Response};
    let chosen = Arc::new(parking_lot::Mutex::new(None));
    let slot = chosen.clone();
    let versions = versions.to_vec();
    // tungstenite's handshake callback fixes this signature (ErrorResponse unboxed).
    #[allow(clippy::result_large_err)]
    let callback =
        move |req: &Request, mut response: Response| -> Result<Response, ErrorResponse> {
            match upgrade(req.headers(), &versions) {
                Ok(up) => {
                    if let Ok(v) = HeaderValue::from_str(up.subprotocol()) {
                        response
                            .headers_mut()
                            .insert(header::SEC_WEBSOCKET_PROTOCOL, v);
                    }
                    let path = req.uri().path_and_query().map(|p| p.as_str().to_string());
                    let authority = req
                        .headers()
                        .get(header::HOST)
                        .and_then(|h| h.to_str().ok())
                        .map(str::to_string);
                    *slot.lock() = Some(Ok((up, Destination { path, authority })));
                    Ok(response)
                }
                Err(e) => {
                    let mut refused = ErrorResponse::new(Some(format!("{e}\n")));
                    *refused.status_mut() = e.status();
                    *slot.lock() = Some(Err(e));
                    Err(refused)
                }
            }
        };
    let ws = tokio_ws::accept_hdr_async_with_config(io, callback, Some(ws_config())).await;
    let (up, destination) = match (ws.is_ok(), chosen.lock().take()) {
        (true, Some(Ok(chosen))) => chosen,
        (_, Some(Err(e))) => return Err(ConnectError::WebSocket(e.to_string()).into()),
        _ => {
            let e = ws.err().map(|e| e.to_string()).unwrap_or_default();
            return Err(ConnectError::WebSocket(format!("upgrade: {e}")).into());
        }
    };
    let ws = ws.map_err(|e| ConnectError::WebSocket(format!("upgrade: {e}")))?;
    serve(
        ws,
        up.subprotocol(),
        remote,
        (settings, config, destination),
    )
    .await
}

/// How a client connects over a WebSocket.
pub(super) struct Dial<'a> {
    pub(super) tls: &'a ClientTls,
    pub(super) versions: &'a [Version],
    pub(super) settings: &'a QuicSettings,
    pub(super) timeout: Option<Duration>,
}

/// Connects to a `ws://` or `wss://` URL: TCP (and TLS, trusting as `dial.tls` says), the
/// upgrade offering [`subprotocols`], then QMux. SETUP is the caller's.
pub(super) async fn connect(url: &Url, dial: Dial<'_>) -> Result<QmuxConnection, Error> {
    let secure = url.scheme() == "wss";
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Error::Invalid("url has no host".into()))?;
    let server_name = host.trim_start_matches('[').trim_end_matches(']');
    let port = url
        .port_or_known_default()
        .unwrap_or(if secure { 443 } else { 80 });
    let remote = super::settings::resolve(host, port).await?;
    let limit = dial.timeout.unwrap_or(dial.settings.idle_timeout);
    let timed_out = || ConnectError::WebSocket(format!("no answer from {remote} within {limit:?}"));
    let failed = |reason: String| ConnectError::Failed {
        addr: remote,
        reason,
    };
    let tcp = tokio::time::timeout(limit, tokio::net::TcpStream::connect(remote))
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| failed(e.to_string()))?;
    // QMux frames are small and latency matters more than packet count.
    let _ = tcp.set_nodelay(true);
    let offered = subprotocols(dial.versions);
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| Error::Invalid(format!("url {url}: {e}")))?;
    let protocols = HeaderValue::from_str(&offered.join(", "))
        .map_err(|e| Error::Invalid(format!("subprotocols: {e}")))?;
    request
        .headers_mut()
        .insert(header::SEC_WEBSOCKET_PROTOCOL, protocols);
    let handshake = async {
        if secure {
            let tls = dial.tls.client_config(&["http/1.1"])?;
            let name = rustls::pki_types::ServerName::try_from(server_name.to_string())
                .map_err(|e| Error::Invalid(format!("server name {server_name}: {e}")))?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(tls))
                .connect(name, tcp)
                .await
                .map_err(|e| tls_error(remote, e))?;
            upgrade_client(request, tls, remote, &dial).await
        } else {
            upgrade_client(request, tcp, remote, &dial).await
        }
    };
    tokio::time::timeout(limit, handshake)
        .await
        .map_err(|_| timed_out())?
}

/// The upgrade on an open byte stream, then QMux on the WebSocket with the subprotocol the
/// server chose.
async fn upgrade_client<S>(
    request: tungstenite::handshake::client::Request,
    stream: S,
    remote: SocketAddr,
    dial: &Dial<'_>,
) -> Result<QmuxConnection, Error>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (ws, response) = tokio_ws::client_async_with_config(request, stream, Some(ws_config()))
        .await
        .map_err(|e| match e {
            tungstenite::Error::Http(r) => ConnectError::Refused {
                addr: remote,
                reason: format!(
                    "WebSocket upgrade answered {}{}",
                    r.status(),
                    r.body()
                        .as_deref()
                        .map(|b| format!(": {}", String::from_utf8_lossy(b).trim()))
                        .unwrap_or_default()
                ),
            },
            e => ConnectError::WebSocket(format!("upgrade with {remote}: {e}")),
        })?;
    // tungstenite has checked that the server chose one of the offered subprotocols.
    let subprotocol = response
        .headers()
        .get(header::SEC_WEBSOCKET_PROTOCOL)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    if subprotocol_version(&subprotocol, dial.versions).is_none() {
        return Err(ConnectError::NoCommonVersion {
            peer: remote.to_string(),
            offered: format!(
                "{:?} (the server chose {subprotocol:?})",
                subprotocols(dial.versions)
            ),
        }
        .into());
    }
    Ok(qmux_connection(
        ws,
        &subprotocol,
        dial.settings,
        Role::Client,
        Some(remote),
    ))
}

/// A TLS failure over TCP, in the words QUIC's have (see [`ConnectError`]).
fn tls_error(addr: SocketAddr, e: std::io::Error) -> ConnectError {
    let reason = e.to_string();
    if reason.contains("UnknownIssuer") {
        return ConnectError::UnknownIssuer { addr };
    }
    if let Some(received) = crate::tls::unpinned_fingerprint(&reason) {
        return ConnectError::FingerprintMismatch { addr, received };
    }
    ConnectError::Tls { addr, reason }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::transport::{Connection, TransportError};

    #[test]
    fn most_preferred_version_wins() {
        let ours = [Version::Draft22, Version::Draft19, Version::Draft14];
        let offered = [
            "qmux-01.moq-00",
            "qmux-01.moqt-19",
            "qmux-00.moqt-22",
            "webtransport",
        ];
        // qmux-00 is not accepted for draft-22: draft-19 over qmux-01 is the best.
        assert_eq!(
            select_subprotocol(offered, &ours),
            Some(("qmux-01.moqt-19".to_string(), Version::Draft19))
        );
        assert_eq!(
            select_subprotocol(["qmux-00.moq-00", "qmux-01.moq-00"], &ours),
            Some(("qmux-01.moq-00".to_string(), Version::Draft14))
        );
        assert_eq!(
            select_subprotocol(["qmux-00.moq-00"], &ours),
            Some(("qmux-00.moq-00".to_string(), Version::Draft14))
        );
        assert_eq!(
            select_subprotocol(["moqt-19", "qmux-01", "chat"], &ours),
            None
        );
        assert_eq!(select_subprotocol(["qmux-01.moqt-21"], &ours), None);
    }

    fn request(protocols: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, Upgrade"),
        );
        h.insert(
            header::SEC_WEBSOCKET_VERSION,
            HeaderValue::from_static("13"),
        );
        h.insert(
            header::SEC_WEBSOCKET_KEY,
            HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="),
        );
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_str(protocols).unwrap(),
        );
        h
    }

    #[test]
    fn upgrade_answers_rfc6455() {
        let up = upgrade(&request("chat, qmux-01.moqt-19"), Version::ALL).unwrap();
        let h = up.response_headers();
        // RFC 6455 §1.3's example key and answer.
        assert_eq!(
            h[header::SEC_WEBSOCKET_ACCEPT],
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert_eq!(h[header::SEC_WEBSOCKET_PROTOCOL], "qmux-01.moqt-19");
        assert_eq!(up.version(), Version::Draft19);

        let err = upgrade(&request("chat, webtransport"), Version::ALL).unwrap_err();
        assert_eq!(err.status(), StatusCode::BAD_REQUEST);
        assert!(matches!(err, UpgradeError::NoSubprotocol { .. }), "{err}");

        let mut old = request("qmux-01.moqt-19");
        old.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        assert_eq!(
            upgrade(&old, Version::ALL).unwrap_err().status(),
            StatusCode::UPGRADE_REQUIRED
        );
        let mut plain = request("qmux-01.moqt-19");
        plain.remove(header::UPGRADE);
        assert!(matches!(
            upgrade(&plain, Version::ALL),
            Err(UpgradeError::NotWebSocket(_))
        ));
    }

    /// Both ends of a QMux connection over a loopback WebSocket, as the endpoints make them.
    async fn qmux_pair() -> (QmuxConnection, QmuxConnection) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let settings = QuicSettings::default();
        let protocol = "qmux-01.moqt-19";
        let server = async {
            let (tcp, remote) = listener.accept().await.unwrap();
            let ws = tokio_ws::accept_async_with_config(tcp, Some(ws_config()))
                .await
                .unwrap();
            qmux_connection(ws, protocol, &settings, Role::Server, Some(remote))
        };
        let client = async {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let url = format!("ws://{addr}/");
            let (ws, _) = tokio_ws::client_async_with_config(url, tcp, Some(ws_config()))
                .await
                .unwrap();
            qmux_connection(ws, protocol, &settings, Role::Client, Some(addr))
        };
        tokio::join!(client, server)
    }

    /// Writes on a new unidirectional stream until the connection fails.
    async fn flood(conn: QmuxConnection) {
        let Ok(mut send) = conn.open_uni().await else {
            return;
        };
        let chunk = vec![7u8; 16 * 1024];
        while send.write_all(&chunk).await.is_ok() {}
    }

    /// Reads every stream the peer opens, to the end.
    async fn drain(conn: QmuxConnection) {
        while let Ok(mut recv) = conn.accept_uni().await {
            tokio::spawn(async move { while let Ok(Some(_)) = recv.read_chunk(1 << 20).await {} });
        }
    }

    fn closed_by_peer() -> TransportError {
        TransportError::ClosedByPeer {
            code: 0x1234,
            reason: "going".into(),
        }
    }

    /// A close made while the peer is sending reaches the peer with its code and reason (the
    /// closing socket reads until the peer's Close, so its close is not lost to a TCP reset),
    /// and everything the peer then does fails with them.
    #[tokio::test]
    async fn close_code_reaches_a_sending_peer() {
        tokio::time::timeout(Duration::from_secs(20), async {
            for _ in 0..10 {
                let (closer, peer) = qmux_pair().await;
                tokio::spawn(drain(closer.clone()));
                let writers: Vec<_> = (0..4).map(|_| tokio::spawn(flood(peer.clone()))).collect();
                // Wait until data flows.
                let _ = closer.accept_uni().await;
                closer.close(0x1234, "going");
                assert_eq!(peer.closed().await, closed_by_peer());
                assert_eq!(peer.accept_uni().await.err(), Some(closed_by_peer()));
                assert_eq!(peer.open_uni().await.err(), Some(closed_by_peer()));
                assert_eq!(closer.closed().await, TransportError::ClosedLocally);
                for w in writers {
                    w.await.unwrap();
                }
            }
        })
        .await
        .unwrap();
    }

    /// A close made while the closing side's writes fill the socket still reaches the peer with
    /// its code and reason.
    #[tokio::test]
    async fn close_code_survives_a_busy_writer() {
        tokio::time::timeout(Duration::from_secs(20), async {
            for _ in 0..10 {
                let (closer, peer) = qmux_pair().await;
                tokio::spawn(drain(peer.clone()));
                let writers: Vec<_> = (0..8)
                    .map(|_| tokio::spawn(flood(closer.clone())))
                    .collect();
                let _ = peer.accept_uni().await;
                closer.close(0x1234, "going");
                assert_eq!(peer.closed().await, closed_by_peer());
                for w in writers {
                    w.await.unwrap();
                }
            }
        })
        .await
        .unwrap();
    }

    /// The frame sent for a close qmux dropped is the one qmux would have sent.
    #[test]
    fn application_close_frame() {
        assert_eq!(
            &crate::transport::qmux::application_close(0x1234, "going")[..],
            [0x1d, 0x52, 0x34, 5, b'g', b'o', b'i', b'n', b'g']
        );
    }
}
