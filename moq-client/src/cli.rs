//! Command-line options for MOQT clients (feature `cli`): the flags every client program
//! needs to reach a relay, parsed with [clap](https://docs.rs/clap) and environment
//! variables, and a client built from them that stays connected and tells the user how the
//! connection is doing (on stderr, so stdout stays free for data).
//!
//! | flag | environment | meaning |
//! |---|---|---|
//! | `--url` | `MOQ_URL` | the relay: `moqt://host:port` (raw QUIC), `https://host:port[/path]` (WebTransport), or `http://host:port` (raw QUIC, the certificate pinned by the hash the server serves at `/certificate.sha256`; development only) |
//! | `--fingerprint` | `MOQ_FINGERPRINT` | trust the server whose certificate has this SHA-256 fingerprint (hex) |
//! | `--insecure` | `MOQ_INSECURE` | trust any certificate (development only) |
//! | `--draft` | `MOQ_DRAFT` | offer only this draft (14 to 22); default: all, the newest preferred |
//! | `--token` | `MOQ_TOKEN` | an authorization token (a JWT for moq-relay), sent in SETUP |
//! | `--connect-timeout` | `MOQ_CONNECT_TIMEOUT` | how long a QUIC handshake may take (`5s`, `500ms`, `1m`; default 5 s) |
//!
//! An application flattens [`ClientOptions`] into its own arguments and gets the same flags:
//!
#![cfg_attr(feature = "cli", doc = "```no_run")]
#![cfg_attr(not(feature = "cli"), doc = "```ignore")]
//! use clap::Parser;
//! use moq_client::{FullTrackName, SubscribeOptions, TrackNamespace};
//!
//! /// Prints a track's objects.
//! #[derive(Parser)]
//! struct Args {
//!     #[command(flatten)]
//!     client: moq_client::cli::ClientOptions,
//!     /// The track's namespace, as slash-separated fields.
//!     namespace: TrackNamespace,
//!     /// The track.
//!     track: String,
//! }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let args = Args::parse();
//!     // Connects once (the first connection must succeed), then stays connected, printing
//!     // the status on stderr.
//!     let connection = args.client.reconnecting().await?;
//!     let name = FullTrackName::new(args.namespace, args.track)?;
//!     let subscriber = connection.subscriber().clone();
//!     // Runs until the work ends or Ctrl-C (then `None`), and closes the session.
//!     let work = async move {
//!         let mut track = subscriber.subscribe(name, SubscribeOptions::default()).await?;
//!         while let Some(group) = track.next_group().await {
//!             let mut group = group?;
//!             while let Some(object) = group.next_object().await {
//!                 println!("{}", String::from_utf8_lossy(&object?.payload));
//!             }
//!         }
//!         Ok::<_, moq_client::Error>(())
//!     };
//!     connection.run(work).await.transpose()?;
//!     Ok(())
//! }
//! ```
//!
//! [`ClientOptions::connect`] connects once instead, and [`ClientOptions::builder`] gives the
//! [`ClientBuilder`] to adjust before building.

use std::future::Future;
use std::time::Duration;

use crate::client::{Client, ClientBuilder, Reconnecting, Session, Status};
use crate::error::Error;
use crate::options::Backoff;
use crate::publisher::Publisher;
use crate::subscriber::Subscriber;
use moq_core::Version;

/// How to reach a MOQT server: the flags (and environment variables) of a client program.
/// Flatten it into a clap `Parser` (`#[command(flatten)]`); see the [module docs](self).
#[derive(clap::Args, Clone, Debug)]
pub struct ClientOptions {
    /// The relay: moqt://host:port (raw QUIC), https://host:port (WebTransport),
    /// ws://host:port or wss://host:port (QMux over WebSocket, where QUIC is blocked: a
    /// moq-relay's HTTP listener), or http://host:port (raw QUIC; pins the certificate hash
    /// the server serves at /certificate.sha256 — development only).
    #[arg(
        long,
        global = true,
        env = "MOQ_URL",
        default_value = "moqt://localhost:4443"
    )]
    pub url: String,
    /// Trust the server whose certificate has this SHA-256 fingerprint (hex).
    #[arg(long, global = true, env = "MOQ_FINGERPRINT")]
    pub fingerprint: Option<String>,
    /// Trust any certificate (development only).
    #[arg(long, global = true, env = "MOQ_INSECURE")]
    pub insecure: bool,
    /// Offer only this draft (14 to 22); default: all of them, the newest preferred.
    #[arg(long, global = true, env = "MOQ_DRAFT", value_parser = parse_draft)]
    pub draft: Option<Version>,
    /// An authorization token (a JWT for moq-relay), sent in SETUP.
    #[arg(long, global = true, env = "MOQ_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// How long a QUIC handshake may take: 5s, 500ms, 1m (a bare number is seconds).
    #[arg(long, global = true, env = "MOQ_CONNECT_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// For an https:// or http:// URL, also try QMux over WebSocket (wss:// / ws://, same
    /// host, port and path) if QUIC has not connected after this head start (e.g. 500ms);
    /// the first to connect wins. Off by default.
    #[arg(long, global = true, env = "MOQ_WEBSOCKET_FALLBACK", value_parser = parse_duration)]
    pub websocket_fallback: Option<Duration>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            url: "moqt://localhost:4443".to_string(),
            fingerprint: None,
            insecure: false,
            draft: None,
            token: None,
            connect_timeout: ClientBuilder::DEFAULT_CONNECT_TIMEOUT,
            websocket_fallback: None,
        }
    }
}

/// Why [`ClientOptions::reconnecting`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CliError {
    /// The client could not be built (a malformed fingerprint, say).
    #[error(transparent)]
    Client(#[from] Error),
    /// The first connection failed.
    #[error("cannot connect to {url}: {reason}")]
    Connect {
        /// The URL.
        url: String,
        /// Why, as the client reported it.
        reason: String,
    },
}

impl ClientOptions {
    /// The builder these options describe, to adjust before [`ClientBuilder::build`].
    pub fn builder(&self) -> Result<ClientBuilder, Error> {
        let mut builder = Client::builder().connect_timeout(self.connect_timeout);
        if let Some(head_start) = self.websocket_fallback {
            builder = builder.websocket_fallback(head_start);
        }
        if let Some(fp) = &self.fingerprint {
            builder = builder.fingerprint(fp)?;
        }
        if self.insecure {
            builder = builder.insecure();
        }
        if let Some(v) = self.draft {
            builder = builder.versions(vec![v]);
        }
        if let Some(token) = &self.token {
            builder = builder.token(token.clone());
        }
        Ok(builder)
    }

    /// The client these options describe.
    pub fn client(&self) -> Result<Client, Error> {
        self.builder()?.build()
    }

    /// Connects once to `--url` (a session that ends when the connection does).
    ///
    /// Cancel safe: dropping the future before it resolves abandons the attempt.
    pub async fn connect(&self) -> Result<Session, Error> {
        self.client()?.connect(&self.url).await
    }

    /// Connects to `--url` with a client that then stays connected: it reconnects with backoff
    /// when the session is lost (a relay restart, say) or moves on GOAWAY, re-publishes its
    /// namespaces and renews its subscriptions. The first connection must succeed, so that a
    /// wrong URL, certificate or draft fails at once ([`CliError::Connect`]). Prints
    /// `connected to URL` on stderr; [`Connection::run`] prints the later changes.
    ///
    /// Cancel safe: dropping the future before it resolves stops the client.
    pub async fn reconnecting(&self) -> Result<Connection, CliError> {
        self.reconnecting_with(self.client()?).await
    }

    /// [`ClientOptions::reconnecting`] with a client of the application's own (built from
    /// [`ClientOptions::builder`] with more settings, say).
    ///
    /// Cancel safe: dropping the future before it resolves stops the client.
    pub async fn reconnecting_with(&self, client: Client) -> Result<Connection, CliError> {
        let mut reconnecting = client.reconnecting(&self.url, Backoff::default());
        let mut status = reconnecting.status();
        loop {
            match status {
                Status::Connected(url) => {
                    eprintln!("connected to {url}");
                    break;
                }
                Status::Disconnected(reason) => {
                    return Err(CliError::Connect {
                        url: self.url.clone(),
                        reason,
                    });
                }
                Status::Connecting | Status::Migrating(_) => {}
            }
            status = match reconnecting.next_status().await {
                Some(s) => s,
                None => {
                    return Err(CliError::Connect {
                        url: self.url.clone(),
                        reason: "the client stopped".to_string(),
                    });
                }
            };
        }
        Ok(Connection {
            client,
            reconnecting,
        })
    }
}

/// A client that stays connected (from [`ClientOptions::reconnecting`]), with the program's
/// run around it: status on stderr, Ctrl-C, and a close that reaches the server. Dropping it
/// closes the session at once (see [`Connection::close`] for one that reaches the server).
#[must_use = "dropping a Connection closes its session"]
#[derive(Debug)]
pub struct Connection {
    client: Client,
    reconnecting: Reconnecting,
}

impl Connection {
    /// The publishing side (namespaces are re-published on every new session).
    pub fn publisher(&self) -> &Publisher {
        self.reconnecting.publisher()
    }

    /// The subscribing side (subscriptions are renewed on every new session).
    pub fn subscriber(&self) -> &Subscriber {
        self.reconnecting.subscriber()
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The reconnecting client, for its status.
    pub fn reconnecting(&mut self) -> &mut Reconnecting {
        &mut self.reconnecting
    }

    /// Runs `work` while printing the connection's status changes on stderr, until `work`
    /// ends (`Some` of its output) or the process is interrupted (Ctrl-C: `None`); then
    /// closes the session, waiting at most 1 s for the close to reach the server.
    ///
    /// Not cancel safe: dropping the future drops `work` and closes the session at once.
    pub async fn run<F: Future>(mut self, work: F) -> Option<F::Output> {
        let mut interrupts = Interrupts::listen();
        let out = tokio::select! {
            out = work => Some(out),
            () = print_status(&mut self.reconnecting) => None,
            () = interrupts.interrupted() => None,
        };
        self.close().await;
        out
    }

    /// Closes the session and waits, at most 1 s, until the close has reached the server, so
    /// the server does not wait for an idle timeout.
    ///
    /// Cancel safe: dropping the future leaves the session closed, the close maybe not yet
    /// at the server.
    pub async fn close(self) {
        let Connection {
            client,
            reconnecting,
        } = self;
        drop(reconnecting);
        let _ = tokio::time::timeout(Duration::from_secs(1), client.wait_idle()).await;
    }
}

/// Prints `client`'s status on stderr as it changes (lost, connected again, moving), for as
/// long as it runs; run it next to the program's work, in a `select!`.
///
/// Cancel safe.
pub async fn print_status(client: &mut Reconnecting) {
    let mut last = client.status();
    while let Some(status) = client.next_status().await {
        // Each attempt says Connecting again: said once.
        if status != last {
            print(&status);
            last = status;
        }
    }
}

/// Prints one status on stderr.
pub fn print(status: &Status) {
    match status {
        Status::Connecting => eprintln!("connecting"),
        Status::Connected(url) => eprintln!("connected to {url}"),
        Status::Disconnected(why) => eprintln!("disconnected ({why}); reconnecting"),
        Status::Migrating(url) => eprintln!("moving to {url} (GOAWAY)"),
    }
}

/// Ctrl-C (SIGINT), for the code that runs the program to wait on. It holds the signal
/// listener itself: no task is spawned, and nothing of it outlives it.
///
/// Once interrupted it stays so: a signal that arrives between two waits is seen by the next,
/// and every later wait resolves at once. Dropping it stops listening. The first listener
/// installs tokio's process-wide handler: from then on Ctrl-C no longer ends the process by
/// itself (the program ends when it sees [`Interrupts::interrupted`] resolve), also after the
/// listener is dropped.
#[derive(Debug)]
pub struct Interrupts {
    /// The signal's listener; `None` if it could not be installed (no interruption then).
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
    #[cfg(windows)]
    signal: Option<tokio::signal::windows::CtrlC>,
    seen: bool,
}

impl Interrupts {
    /// Starts listening for Ctrl-C. Call it within a tokio runtime; the listener belongs to
    /// that runtime.
    pub fn listen() -> Self {
        Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
            #[cfg(windows)]
            signal: tokio::signal::windows::ctrl_c().ok(),
            seen: false,
        }
    }

    /// Resolves once the process has been interrupted (Ctrl-C, SIGINT) since
    /// [`Interrupts::listen`]; never if the listener could not be installed.
    ///
    /// Cancel safe: a signal is not lost when the future is dropped.
    pub async fn interrupted(&mut self) {
        #[cfg(any(unix, windows))]
        if !self.seen
            && let Some(s) = &mut self.signal
            && s.recv().await.is_some()
        {
            self.seen = true;
        }
        if !self.seen {
            std::future::pending::<()>().await;
        }
    }
}

/// Logs to stderr (coloured when it is a terminal), filtered by `RUST_LOG` (else `default`,
/// e.g. `"warn"`). Does nothing if a subscriber is installed already.
pub fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours for a terminal only, not in a file or a pipe.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Parses `--draft`: a draft number this crate supports (14 to 22).
///
/// ```
/// use moq_client::{Version, cli::parse_draft};
/// assert_eq!(parse_draft("18"), Ok(Version::from_draft(18).unwrap()));
/// assert!(parse_draft("13").is_err());
/// ```
pub fn parse_draft(s: &str) -> Result<Version, String> {
    let supported = || {
        let drafts: Vec<String> = Version::ALL.iter().map(|v| v.draft().to_string()).collect();
        drafts.join(", ")
    };
    s.trim()
        .parse()
        .ok()
        .and_then(Version::from_draft)
        .ok_or_else(|| format!("unsupported draft {s:?} (supported: {})", supported()))
}

/// Parses a duration: `5s`, `500ms`, `1.5s`, `2m`, or a bare number of seconds.
///
/// ```
/// use std::time::Duration;
/// use moq_client::cli::parse_duration;
/// assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
/// assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
/// assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
/// assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
/// assert!(parse_duration("soon").is_err());
/// ```
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let (number, unit) = match t.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let scale = match unit.trim() {
        "ms" => 0.001,
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("bad duration {s:?} (e.g. 5s, 500ms, 2m)")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("bad duration {s:?} (e.g. 5s, 500ms, 2m)"))?;
    Duration::try_from_secs_f64(value * scale).map_err(|e| format!("bad duration {s:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Args {
        #[command(flatten)]
        client: ClientOptions,
    }

    #[test]
    fn flags_parse() {
        let args = Args::try_parse_from([
            "app",
            "--url",
            "https://relay.example.com:443/moq",
            "--fingerprint",
            "aa:bb",
            "--draft",
            "14",
            "--token",
            "t",
            "--connect-timeout",
            "250ms",
            "--insecure",
        ])
        .unwrap();
        assert_eq!(args.client.url, "https://relay.example.com:443/moq");
        assert_eq!(args.client.fingerprint.as_deref(), Some("aa:bb"));
        assert_eq!(args.client.draft, Version::from_draft(14));
        assert_eq!(args.client.token.as_deref(), Some("t"));
        assert_eq!(args.client.connect_timeout, Duration::from_millis(250));
        assert!(args.client.insecure);
    }

    #[test]
    fn bad_draft_is_refused() {
        let e = Args::try_parse_from(["app", "--draft", "9"]).unwrap_err();
        assert!(e.to_string().contains("unsupported draft"), "{e}");
    }

    #[test]
    fn bad_fingerprint_is_an_error() {
        let options = ClientOptions {
            fingerprint: Some("not hex".into()),
            ..Default::default()
        };
        assert!(options.client().is_err());
    }
}
