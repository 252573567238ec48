//! The `moq-relay` binary.
//!
//! ```text
//! # Development: a generated certificate, its fingerprint printed and served over HTTP.
//! moq-relay --bind [::]:4443 --tls-generate localhost --http 127.0.0.1:4480
//! curl http://127.0.0.1:4480/fingerprint
//! curl http://127.0.0.1:4480/metrics
//!
//! # Production: a certificate and key in PEM files, settings from a TOML file.
//! moq-relay --config relay.toml --tls-cert cert.pem --tls-key key.pem
//! ```
//!
//! Logging follows `RUST_LOG` (e.g. `RUST_LOG=moq_relay=debug,moq_transport=info`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use moq_core::Version;
use moq_relay::{Metrics, Relay, RelayConfig};
use moq_transport::tls::Certificate;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A Media over QUIC Transport relay (draft-19 and draft-18, raw QUIC and WebTransport).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// TOML file with any of the settings below (flags override it).
    #[arg(long)]
    config: Option<PathBuf>,
    /// UDP address for raw QUIC and WebTransport.
    #[arg(long)]
    bind: Option<SocketAddr>,
    /// Certificate chain (PEM).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Generate a self-signed certificate for these host names (development).
    #[arg(long, value_delimiter = ',')]
    tls_generate: Option<Vec<String>>,
    /// HTTP address serving /fingerprint and /metrics (Prometheus).
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Draft versions to accept, most preferred first (e.g. 19,18).
    #[arg(long, value_delimiter = ',')]
    versions: Option<Vec<u32>>,
    /// Groups kept per track.
    #[arg(long)]
    cache_groups: Option<usize>,
    /// Payload bytes kept per track.
    #[arg(long)]
    cache_bytes: Option<usize>,
    /// Seconds a group is kept.
    #[arg(long)]
    cache_seconds: Option<u64>,
    /// The longest RENDEZVOUS_TIMEOUT honoured, in milliseconds.
    #[arg(long)]
    max_rendezvous_ms: Option<u64>,
    /// Write a qlog trace of every QUIC connection into this directory.
    #[arg(long)]
    qlog_dir: Option<PathBuf>,
    /// On SIGINT or SIGTERM: seconds to wait, after GOAWAY, for clients to leave before the
    /// remaining sessions are closed (default 2).
    #[arg(long, value_name = "SECONDS")]
    drain: Option<f64>,
}

/// The TOML file's settings.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    bind: Option<SocketAddr>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_generate: Option<Vec<String>>,
    http: Option<SocketAddr>,
    versions: Option<Vec<u32>>,
    cache_groups: Option<usize>,
    cache_bytes: Option<usize>,
    cache_seconds: Option<u64>,
    max_rendezvous_ms: Option<u64>,
    qlog_dir: Option<PathBuf>,
    drain_seconds: Option<f64>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let file: FileConfig = match &args.config {
        Some(p) => toml::from_str(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        )
        .with_context(|| format!("parsing {}", p.display()))?,
        None => FileConfig::default(),
    };
    let bind = args
        .bind
        .or(file.bind)
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 4443)));
    let certificate = match (
        args.tls_cert.or(file.tls_cert),
        args.tls_key.or(file.tls_key),
    ) {
        (Some(c), Some(k)) => Certificate::load_pem(&c, &k)?,
        _ => {
            let hosts = args
                .tls_generate
                .or(file.tls_generate)
                .context("give --tls-cert/--tls-key, or --tls-generate HOST for development")?;
            Certificate::generate(&hosts)?
        }
    };
    let mut config = RelayConfig::new(bind, certificate);
    if let Some(v) = args.versions.or(file.versions) {
        config.versions = v
            .into_iter()
            .map(|d| Version::from_draft(d).with_context(|| format!("unsupported draft {d}")))
            .collect::<anyhow::Result<_>>()?;
    }
    if let Some(g) = args.cache_groups.or(file.cache_groups) {
        config.cache.max_groups = g;
    }
    if let Some(b) = args.cache_bytes.or(file.cache_bytes) {
        config.cache.max_bytes = b;
    }
    if let Some(s) = args.cache_seconds.or(file.cache_seconds) {
        config.cache.max_age = Some(Duration::from_secs(s));
    }
    if let Some(ms) = args.max_rendezvous_ms.or(file.max_rendezvous_ms) {
        config.max_rendezvous = Duration::from_millis(ms);
    }
    config.qlog_dir = args.qlog_dir.or(file.qlog_dir);
    let relay = Relay::bind(config)?;
    println!(
        "moq-relay listening on {} (udp: moqt:// and https://)",
        relay.local_addr()
    );
    println!("certificate sha-256 fingerprint: {}", relay.fingerprint());
    if let Some(http) = args.http.or(file.http) {
        let listener = tokio::net::TcpListener::bind(http)
            .await
            .with_context(|| format!("binding {http}"))?;
        println!("http on {http}: /fingerprint /metrics");
        tokio::spawn(serve_http(
            listener,
            relay.fingerprint().to_string(),
            relay.metrics().clone(),
        ));
    }
    let drain = Duration::from_secs_f64(args.drain.or(file.drain_seconds).unwrap_or(2.0).max(0.0));
    let run = relay.spawn();
    tokio::select! {
        _ = run => {}
        signal = shutdown_signal() => {
            println!("{signal}: draining for up to {drain:?}");
            relay.shutdown(drain).await;
        }
    }
    Ok(())
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM, naming it.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
        }
    }
    let _ = tokio::signal::ctrl_c().await;
    "SIGINT"
}

/// A minimal HTTP/1.1 responder for the fingerprint and the metrics.
async fn serve_http(listener: tokio::net::TcpListener, fingerprint: String, metrics: Arc<Metrics>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let fingerprint = fingerprint.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 2048];
            let n = match tokio::time::timeout(Duration::from_secs(5), conn.read(&mut buf)).await {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let request = String::from_utf8_lossy(buf.get(..n).unwrap_or_default());
            let path = request.split_whitespace().nth(1).unwrap_or("/");
            let (status, content_type, body) = match path {
                "/fingerprint" => ("200 OK", "text/plain", fingerprint),
                "/metrics" => ("200 OK", "text/plain; version=0.0.4", metrics.render()),
                _ => ("404 Not Found", "text/plain", "not found\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\naccess-control-allow-origin: *\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
        });
    }
}
