//! The relay's HTTP side (axum): what browsers and operators fetch next to the QUIC port.
//!
//! | path | answer |
//! |---|---|
//! | `GET /certificate.sha256`, `GET /fingerprint` | the SHA-256 of the certificate presented now, hex (what a browser pins with `serverCertificateHashes`; `@moq/net` fetches the first) |
//! | `GET /metrics` | Prometheus text ([`crate::Metrics`]) |
//! | `GET /health` | `ok` while the relay accepts sessions (else 503 `draining`), then one line per cluster link it dials: `link <peer> up`, or why not (`link <peer> down after 3 failed dials; error (certificate): ...`) |
//! | `GET /announced[?prefix=a/b]` | the namespaces the relay knows (the prefix in the path form of `TrackNamespace`, URL-encoded: a `/` inside a field is `%252F`), JSON, only those the caller's token (`?jwt=` or `Authorization: Bearer`) may see |
//! | `GET /`, `/app.js`, `/moq.js`, `/moq-wire.js`, `/moq-handles.js`, `/connect.js`, `/qmux.js`, `/player.js` | the relay's web page: discovery, a player for a broadcast (MSF catalog, LOC video and audio decoded with WebCodecs) and a track's objects live, over WebTransport, or over a WebSocket to this listener (QMux, `qmux.js`) when WebTransport is missing or blocked (`moq-relay/web/`, built into the binary) |
//! | `GET /connect.json` | `{"port": <the QUIC/WebTransport UDP port>, "fingerprint": "<hex>"}`, what the page connects with |
//! | a WebSocket upgrade at any path (`/` too) | with the `websocket` feature: a MOQT session over QMux over WebSocket, at the path a WebTransport session would use (the version by subprotocol `qmux-01.moqt-NN`: `moq_transport::endpoint::websocket`); an upgrade offering none of ours is answered 400, one while draining 503 |
//!
//! Every answer allows any origin (CORS), so a page served elsewhere can fetch the
//! fingerprint. Other methods get 405. [`serve`] answers plain HTTP (`ws://`); [`serve_tls`]
//! the same over TLS with the relay's certificate (`https://`, `wss://`; `--http-tls`).

use std::sync::Arc;

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use moq_core::TrackNamespace;
use serde::{Deserialize, Serialize};

use crate::Relay;
use crate::auth::TokenAuth;

#[derive(Clone)]
struct HttpState {
    relay: Relay,
    auth: Option<Arc<TokenAuth>>,
}

/// The HTTP routes of `relay`. With `auth`, `/announced` lists only what the caller's token
/// (or the public prefixes) may see; without, everything.
pub fn router(relay: Relay, auth: Option<Arc<TokenAuth>>) -> Router {
    Router::new()
        .route("/certificate.sha256", get(fingerprint))
        .route("/fingerprint", get(fingerprint))
        .route("/metrics", get(metrics))
        .route("/health", get(health))
        .route("/announced", get(announced))
        .route("/connect.json", get(connect))
        .route("/", get(root))
        .route("/index.html", get(|| page(PAGE_HTML)))
        .route("/app.js", get(|| page(PAGE_APP)))
        .route("/moq.js", get(|| page(PAGE_MOQ)))
        .route("/moq-wire.js", get(|| page(PAGE_MOQ_WIRE)))
        .route("/moq-handles.js", get(|| page(PAGE_MOQ_HANDLES)))
        .route("/connect.js", get(|| page(PAGE_CONNECT)))
        .route("/qmux.js", get(|| page(PAGE_QMUX)))
        .route("/player.js", get(|| page(PAGE_PLAYER)))
        .fallback(other)
        .layer(axum::middleware::map_response(cors))
        .with_state(HttpState { relay, auth })
}

/// Serves `router` on `listener` until the task is dropped. Each request knows its peer's
/// address (`ConnectInfo<SocketAddr>`), which a WebSocket session reports as its remote.
///
/// Cancel safety: dropping the future stops accepting; connections already served go on
/// until they end (each is a task of its own).
pub async fn serve(listener: tokio::net::TcpListener, router: Router) -> std::io::Result<()> {
    let service = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, service).await
}

/// Serves `router` over TLS on `listener` (`https://`, and `wss://` for WebSocket sessions),
/// presenting `cert` as it is at each handshake (the relay's: [`Relay::certificate`]), until
/// the task is dropped; each connection is a task of its own, as with [`serve`]. A connection
/// whose TLS handshake fails is dropped alone.
///
/// Cancel safety: as [`serve`].
#[cfg(feature = "websocket")]
pub async fn serve_tls(
    listener: tokio::net::TcpListener,
    router: Router,
    cert: &moq_transport::tls::ServerCert,
) -> std::io::Result<()> {
    let tls = cert
        .server_config(&["http/1.1"])
        .map_err(std::io::Error::other)?;
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    loop {
        let (tcp, remote) = listener.accept().await?;
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let service = hyper_util::service::TowerToHyperService::new(router);
            // As `serve` does: each request knows its peer.
            let service = hyper::service::service_fn(move |mut req| {
                req.extensions_mut()
                    .insert(axum::extract::ConnectInfo(remote));
                hyper::service::Service::call(&service, req)
            });
            let io = hyper_util::rt::TokioIo::new(tls);
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(io, service)
                .with_upgrades()
                .await;
        });
    }
}

/// `/`: the page, or a WebSocket session (a client given the relay's bare address).
async fn root(State(s): State<HttpState>, req: Request) -> Response {
    match is_upgrade(req.headers()) {
        true => websocket(s, req),
        false => page(PAGE_HTML).await.into_response(),
    }
}

/// Any other path: a WebSocket session, or 404.
async fn other(State(s): State<HttpState>, req: Request) -> Response {
    match is_upgrade(req.headers()) {
        true => websocket(s, req),
        false => StatusCode::NOT_FOUND.into_response(),
    }
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
}

#[cfg(not(feature = "websocket"))]
fn websocket(_: HttpState, _: Request) -> Response {
    (
        StatusCode::NOT_IMPLEMENTED,
        "this relay was built without WebSocket sessions\n",
    )
        .into_response()
}

/// A WebSocket upgrade: checked and answered 101 here, the session run by the relay.
#[cfg(feature = "websocket")]
fn websocket(s: HttpState, mut req: Request) -> Response {
    use moq_transport::endpoint::websocket::{UpgradeError, upgrade};
    if req.method() != axum::http::Method::GET {
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let up = match upgrade(req.headers(), s.relay.versions()) {
        Ok(up) => up,
        Err(e) => {
            tracing::debug!(error = %e, "WebSocket upgrade refused");
            let mut res = (e.status(), format!("{e}\n")).into_response();
            if let UpgradeError::Version(_) = e {
                res.headers_mut().insert(
                    header::SEC_WEBSOCKET_VERSION,
                    HeaderValue::from_static("13"),
                );
            }
            return res;
        }
    };
    if !s.relay.is_accepting() {
        return (StatusCode::SERVICE_UNAVAILABLE, "draining\n").into_response();
    }
    let remote = req
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|c| c.0);
    // As over WebTransport, the URL names the path and authority (draft-19 §10.3.1).
    let destination = moq_transport::Destination {
        path: req.uri().path_and_query().map(|p| p.as_str().to_string()),
        authority: req
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string),
    };
    let upgraded = hyper::upgrade::on(&mut req);
    let headers = up.response_headers();
    let upgraded = async move { upgraded.await.map(hyper_util::rt::TokioIo::new) };
    s.relay.accept_websocket(upgraded, up, remote, destination);
    (StatusCode::SWITCHING_PROTOCOLS, headers).into_response()
}

async fn cors(mut res: Response) -> Response {
    res.headers_mut().insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    res
}

/// A file of the web page: its content type and text.
type PageFile = (&'static str, &'static str);

const PAGE_HTML: PageFile = (
    "text/html; charset=utf-8",
    include_str!("../web/index.html"),
);
const PAGE_APP: PageFile = ("text/javascript", include_str!("../web/app.js"));
const PAGE_MOQ: PageFile = ("text/javascript", include_str!("../web/moq.js"));
const PAGE_MOQ_WIRE: PageFile = ("text/javascript", include_str!("../web/moq-wire.js"));
const PAGE_MOQ_HANDLES: PageFile = ("text/javascript", include_str!("../web/moq-handles.js"));
const PAGE_CONNECT: PageFile = ("text/javascript", include_str!("../web/connect.js"));
const PAGE_QMUX: PageFile = ("text/javascript", include_str!("../web/qmux.js"));
const PAGE_PLAYER: PageFile = ("text/javascript", include_str!("../web/player.js"));

async fn page((content_type, text): PageFile) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, content_type)], text)
}

/// `/connect.json`'s answer.
#[derive(Serialize)]
struct Connect {
    /// The UDP port of QUIC and WebTransport.
    port: u16,
    /// The certificate's SHA-256, hex.
    fingerprint: String,
}

async fn connect(State(s): State<HttpState>) -> Json<Connect> {
    Json(Connect {
        port: s.relay.local_addr().port(),
        fingerprint: s.relay.fingerprint(),
    })
}

async fn fingerprint(State(s): State<HttpState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain")],
        s.relay.fingerprint(),
    )
}

async fn metrics(State(s): State<HttpState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        s.relay.metrics().render(),
    )
}

/// The status says whether the relay takes sessions (what a load balancer needs); a link that
/// is down does not change it (the relay still serves its own clients), but the body says so.
async fn health(State(s): State<HttpState>) -> impl IntoResponse {
    let (status, mut body) = match s.relay.is_accepting() {
        true => (StatusCode::OK, "ok\n".to_string()),
        false => (StatusCode::SERVICE_UNAVAILABLE, "draining\n".to_string()),
    };
    for link in s.relay.links() {
        body.push_str(&format!("{link}\n"));
    }
    (status, body)
}

#[derive(Deserialize)]
struct AnnouncedQuery {
    jwt: Option<String>,
    prefix: Option<String>,
}

/// `/announced`'s answer.
#[derive(Serialize)]
struct Announced {
    /// Each namespace as its fields (UTF-8, lossy).
    namespaces: Vec<Vec<String>>,
}

async fn announced(
    State(s): State<HttpState>,
    Query(q): Query<AnnouncedQuery>,
    headers: HeaderMap,
) -> Response {
    let prefix = match q.prefix.as_deref().map(str::parse::<TrackNamespace>) {
        None => TrackNamespace::empty(),
        Some(Ok(p)) => p,
        Some(Err(e)) => return (StatusCode::BAD_REQUEST, format!("prefix: {e}\n")).into_response(),
    };
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let token = q.jwt.or(bearer);
    let namespaces = s
        .relay
        .namespaces()
        .matching(&prefix)
        .into_iter()
        .filter(|ns| !s.relay.is_cluster_view(ns))
        .filter(|ns| match &s.auth {
            Some(auth) => auth.may_see(token.as_deref().map(str::as_bytes), ns),
            None => true,
        })
        .map(|ns| {
            ns.fields()
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect()
        })
        .collect();
    Json(Announced { namespaces }).into_response()
}
