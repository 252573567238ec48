//! What the example programs share: the connection flags, namespaces on the command line, and
//! a clean close. Each program uses part of it.
#![allow(dead_code)]

use std::time::Duration;

use anyhow::Context;
use moq_client::{Client, Session, TrackNamespace, Version};

/// Logs to stderr, filtered by RUST_LOG (default: warnings).
pub(crate) fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
}

/// How to reach the server (flattened into each program's flags).
#[derive(clap::Args, Debug)]
pub(crate) struct Connect {
    /// The server: `moqt://host:port` (raw QUIC) or `https://host:port` (WebTransport).
    #[arg(long, default_value = "moqt://localhost:4443")]
    pub(crate) url: String,
    /// Trust the server whose certificate has this SHA-256 fingerprint (hex).
    #[arg(long)]
    pub(crate) fingerprint: Option<String>,
    /// Trust any certificate (development only).
    #[arg(long)]
    pub(crate) insecure: bool,
    /// Offer only this draft (14, 15, 16, 18 to 22); default: all of them, the newest preferred.
    #[arg(long, value_parser = parse_draft)]
    pub(crate) draft: Option<Version>,
}

impl Connect {
    /// Logs to stderr (RUST_LOG, default warn), then connects; `None` if Ctrl-C came first.
    pub(crate) async fn session(&self) -> anyhow::Result<Option<(Client, Session)>> {
        let client = self.client()?;
        let session = tokio::select! {
            s = client.connect(&self.url) => s.with_context(|| format!("connecting to {}", self.url))?,
            _ = tokio::signal::ctrl_c() => return Ok(None),
        };
        println!("connected to {} ({})", self.url, session.version());
        Ok(Some((client, session)))
    }

    /// Logs to stderr (RUST_LOG, default warn) and builds the client these flags describe.
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        init_logging();
        let mut builder = Client::builder();
        if let Some(fp) = &self.fingerprint {
            builder = builder.fingerprint(fp)?;
        }
        if self.insecure {
            builder = builder.insecure();
        }
        if let Some(v) = self.draft {
            builder = builder.versions(vec![v]);
        }
        Ok(builder.build()?)
    }
}

fn parse_draft(s: &str) -> Result<Version, String> {
    let supported = || {
        let drafts: Vec<String> = Version::ALL.iter().map(|v| v.draft().to_string()).collect();
        drafts.join(", ")
    };
    s.parse()
        .ok()
        .and_then(Version::from_draft)
        .ok_or_else(|| format!("unsupported draft {s:?} ({})", supported()))
}

/// `a/b/c` as a namespace of three fields; `` as the empty prefix.
pub(crate) fn parse_namespace(s: &str) -> anyhow::Result<TrackNamespace> {
    let fields = s.split('/').filter(|f| !f.is_empty());
    TrackNamespace::from_strs(fields).with_context(|| format!("bad namespace {s:?}"))
}

/// A namespace as slash-separated fields.
pub(crate) fn slashed(ns: &TrackNamespace) -> String {
    let fields: Vec<_> = ns
        .fields()
        .iter()
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    fields.join("/")
}

/// Closes the session once the peer acknowledged what was sent (at most 2 s), and waits until
/// the close has reached the server, so it does not wait for an idle timeout.
pub(crate) async fn close(client: &Client, session: &Session) {
    if session
        .close_gracefully(Duration::from_secs(2))
        .await
        .is_err()
    {
        eprintln!("closing: the peer had not acknowledged everything");
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), client.wait_idle()).await;
}
