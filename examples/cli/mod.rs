//! What the example programs share: the connection flags, a client that stays connected (and
//! prints its status), namespaces on the command line, and a clean close. Each program uses
//! part of it.
#![allow(dead_code)]

use std::time::Duration;

use anyhow::Context;
use moq_client::{Backoff, Client, Reconnecting, Status, TrackNamespace, Version};

/// Resolves once the process has been interrupted (Ctrl-C, SIGINT), at any time since the
/// first call. The signal is caught by one task for the whole run, so one that arrives between
/// two waits (a `ctrl_c()` made afresh in each `select!` would miss it, and the process would
/// then ignore it) is still seen by the next.
pub(crate) async fn interrupted() {
    static INTERRUPTED: std::sync::OnceLock<tokio::sync::watch::Receiver<bool>> =
        std::sync::OnceLock::new();
    let mut rx = INTERRUPTED
        .get_or_init(|| {
            let (tx, rx) = tokio::sync::watch::channel(false);
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    let _ = tx.send(true);
                }
                // Keeps the sender: a failed handler means no interruption, not one.
                std::future::pending::<()>().await
            });
            rx
        })
        .clone();
    let _ = rx.wait_for(|i| *i).await;
}

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
    /// Offer only this draft (14 to 22); default: all of them, the newest preferred.
    #[arg(long, value_parser = parse_draft)]
    pub(crate) draft: Option<Version>,
}

impl Connect {
    /// Logs to stderr (RUST_LOG, default warn), builds the client these flags describe, and
    /// connects with a client that then stays connected to `--url`: it reconnects with backoff
    /// when the session is lost (a relay restart, say) or moves on GOAWAY, re-publishes its
    /// namespaces and renews its subscriptions (see [`print_status`]). The first connection
    /// must succeed, so that a wrong URL, certificate or draft fails at once; `None` if Ctrl-C
    /// came first.
    pub(crate) async fn reconnecting(&self) -> anyhow::Result<Option<(Client, Reconnecting)>> {
        let client = self.client()?;
        let mut reconnecting = client.reconnecting(&self.url, Backoff::default());
        let first = async {
            let mut status = reconnecting.status();
            loop {
                match status {
                    Status::Connected(url) => return Ok(url),
                    Status::Disconnected(why) => anyhow::bail!(why),
                    Status::Connecting | Status::Migrating(_) => {}
                }
                status = reconnecting
                    .next_status()
                    .await
                    .context("the client stopped")?;
            }
        };
        let url = tokio::select! {
            r = first => r.with_context(|| format!("connecting to {}", self.url))?,
            () = interrupted() => return Ok(None),
        };
        println!("connected to {url}");
        Ok(Some((client, reconnecting)))
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

/// Prints the client's status as it changes (lost, connected again, moving), for as long as
/// it runs; run it next to the program's work, in a `select!`.
pub(crate) async fn print_status(client: &mut Reconnecting) {
    let mut last = client.status();
    while let Some(status) = client.next_status().await {
        // Each attempt says Connecting again: said once.
        if status != last {
            print(&status);
            last = status;
        }
    }
}

/// Prints one status.
pub(crate) fn print(status: &Status) {
    match status {
        Status::Connecting => println!("connecting"),
        Status::Connected(url) => println!("connected to {url}"),
        Status::Disconnected(why) => println!("disconnected ({why}); reconnecting"),
        Status::Migrating(url) => println!("moving to {url} (GOAWAY)"),
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

/// `a/b/c` as a namespace of three fields; `` as the empty prefix (the path form of
/// [`TrackNamespace`], which its `Display` writes).
pub(crate) fn parse_namespace(s: &str) -> anyhow::Result<TrackNamespace> {
    s.parse().with_context(|| format!("bad namespace {s:?}"))
}

/// Stops `reconnecting` (closing its session) and waits, at most 1 s, until the close has
/// reached the server, so the server does not wait for an idle timeout.
pub(crate) async fn close(client: &Client, reconnecting: Reconnecting) {
    drop(reconnecting);
    let _ = tokio::time::timeout(Duration::from_secs(1), client.wait_idle()).await;
}
