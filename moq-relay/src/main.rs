//! The `moq-relay` binary.
//!
//! ```text
//! # Development: a generated certificate, no authorization.
//! moq-relay --bind [::]:4443 --tls-generate localhost --http 127.0.0.1:4480 --auth-disabled
//! curl http://127.0.0.1:4480/certificate.sha256
//!
//! # Production: a certificate, a key to verify tokens with, an anonymous public prefix.
//! moq-relay token generate --algorithm ES256 --out relay.jwk --public relay.pub.jwk
//! moq-relay --tls-cert cert.pem --tls-key key.pem --auth-key relay.pub.jwk --auth-public demo
//! moq-relay token sign --key relay.jwk --root room --publish alice --subscribe '**'
//! ```
//!
//! Every setting is a flag, an environment variable (`MOQ_RELAY_` and the flag's name) and a
//! key of the `--config` TOML file, from the one definition below; flags and variables win
//! over the file. Logging follows `RUST_LOG` (e.g. `RUST_LOG=moq_relay=debug`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use moq_core::Version;
use moq_relay::auth::{Claims, Jwk, KeySet, TokenAuth};
use moq_relay::{Relay, RelayConfig};
use moq_transport::tls::Certificate;
use serde::{Deserialize, Serialize};

/// A Media over QUIC Transport relay (drafts 14-22, raw QUIC and WebTransport).
#[derive(Debug, Parser)]
#[command(version, about, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// TOML file with any of the settings (keys as the flags, with `_` for `-`).
    #[arg(long, env = "MOQ_RELAY_CONFIG")]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: Settings,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Keys and tokens for `--auth-key`.
    #[command(subcommand)]
    Token(TokenCommand),
}

#[derive(Debug, Subcommand)]
enum TokenCommand {
    /// Generates a signing key (a JWK, as moq-dev's `moq-token` writes them).
    Generate {
        /// HS256 (a shared secret), ES256 or EdDSA.
        #[arg(long, default_value = "HS256")]
        algorithm: String,
        /// The key ID tokens name.
        #[arg(long)]
        id: Option<String>,
        /// Where to write the key (it signs: keep it secret).
        #[arg(long)]
        out: PathBuf,
        /// Where to write the public half (ES256, EdDSA): what the relay verifies with.
        #[arg(long)]
        public: Option<PathBuf>,
    },
    /// Signs a token and prints it.
    Sign {
        /// The signing key (a JWK file).
        #[arg(long)]
        key: PathBuf,
        /// The path the patterns are relative to.
        #[arg(long, default_value = "")]
        root: String,
        /// Patterns the holder may publish under (repeatable; `**` is everything).
        #[arg(long)]
        publish: Vec<String>,
        /// Patterns the holder may subscribe to and discover (repeatable).
        #[arg(long)]
        subscribe: Vec<String>,
        /// Seconds until the token expires (none: never).
        #[arg(long)]
        expires_in: Option<u64>,
    },
    /// Verifies a token against keys, printing what it grants.
    Verify {
        /// A key file or directory (as `--auth-key`).
        #[arg(long, required = true)]
        key: Vec<PathBuf>,
        /// The token.
        token: String,
    },
}

/// Log line format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line.
    Json,
}

/// The relay's settings: each field is a flag, an environment variable and a TOML key.
#[derive(Debug, Default, clap::Args, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Settings {
    /// UDP address for raw QUIC and WebTransport [default: 0.0.0.0:4443].
    #[arg(long, env = "MOQ_RELAY_BIND")]
    bind: Option<SocketAddr>,
    /// Certificate chain (PEM); reloaded when the file changes or on SIGHUP.
    #[arg(long, env = "MOQ_RELAY_TLS_CERT")]
    tls_cert: Option<PathBuf>,
    /// Private key (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "MOQ_RELAY_TLS_KEY")]
    tls_key: Option<PathBuf>,
    /// Generate a self-signed certificate for these host names (development).
    #[arg(long, env = "MOQ_RELAY_TLS_GENERATE", value_delimiter = ',')]
    tls_generate: Option<Vec<String>>,
    /// TCP address of the HTTP side: /certificate.sha256 /fingerprint /metrics /health
    /// /announced.
    #[arg(long, env = "MOQ_RELAY_HTTP")]
    http: Option<SocketAddr>,
    /// Serve the HTTP side over TLS with the relay's certificate: https:// and wss:// (MOQT
    /// over QMux over a secure WebSocket).
    #[arg(long, env = "MOQ_RELAY_HTTP_TLS")]
    http_tls: bool,
    /// Draft versions to accept, most preferred first (e.g. 19,18) [default: all].
    #[arg(long, env = "MOQ_RELAY_VERSIONS", value_delimiter = ',')]
    versions: Option<Vec<u32>>,
    /// Groups kept per track.
    #[arg(long, env = "MOQ_RELAY_CACHE_GROUPS")]
    cache_groups: Option<usize>,
    /// Payload bytes kept per track.
    #[arg(long, env = "MOQ_RELAY_CACHE_BYTES")]
    cache_bytes: Option<usize>,
    /// Seconds a group is kept.
    #[arg(long, env = "MOQ_RELAY_CACHE_SECONDS")]
    cache_seconds: Option<u64>,
    /// Payload bytes a subscriber's streams may still have to send before its subscription
    /// ends with TOO_FAR_BEHIND [default: 32 MiB].
    #[arg(long, env = "MOQ_RELAY_MAX_BACKLOG_BYTES")]
    max_backlog_bytes: Option<u64>,
    /// The longest RENDEZVOUS_TIMEOUT honoured, in milliseconds.
    #[arg(long, env = "MOQ_RELAY_MAX_RENDEZVOUS_MS")]
    max_rendezvous_ms: Option<u64>,
    /// Seconds a track whose publisher died (its session lost, not closed) waits for a new
    /// publisher before its subscribers get PUBLISH_DONE; 0 ends it at once [default: 10].
    #[arg(long, env = "MOQ_RELAY_PUBLISHER_WAIT", value_name = "SECONDS")]
    publisher_wait: Option<f64>,
    /// Write a qlog trace of every QUIC connection into this directory.
    #[arg(long, env = "MOQ_RELAY_QLOG_DIR")]
    qlog_dir: Option<PathBuf>,
    /// On SIGINT or SIGTERM: seconds to wait, after GOAWAY, for clients to leave before the
    /// remaining sessions are closed [default: 2].
    #[arg(long, env = "MOQ_RELAY_DRAIN", value_name = "SECONDS")]
    drain: Option<f64>,
    /// The URI named in GOAWAY when draining, where clients should reconnect (another relay)
    /// [default: with --registry the least loaded live relay of --region (else of any
    /// region), else the first --cluster-peer, else none: the same URI].
    #[arg(long, env = "MOQ_RELAY_SUCCESSOR", value_name = "URL")]
    successor: Option<String>,
    /// Congestion control: cubic, new-reno or bbr [default: cubic].
    #[arg(long, env = "MOQ_RELAY_CONGESTION")]
    congestion: Option<String>,
    /// QUIC ACK frequency asked of peers that support the extension (quinn-based ones): ACK
    /// after more than this many ack-eliciting packets (or the peer's max ACK delay), or
    /// `off` to ask nothing [default: 9].
    #[arg(long, env = "MOQ_RELAY_ACK_THRESHOLD", value_name = "PACKETS|off")]
    ack_threshold: Option<String>,
    /// Seconds between keep-alive PINGs on an idle connection [default: 2, or a third of
    /// --idle-timeout when that is shorter].
    #[arg(long, env = "MOQ_RELAY_KEEP_ALIVE", value_name = "SECONDS")]
    keep_alive: Option<f64>,
    /// Seconds without a packet from the peer before a connection (a client's or a cluster
    /// link's) is given up as dead [default: 9].
    #[arg(long, env = "MOQ_RELAY_IDLE_TIMEOUT", value_name = "SECONDS")]
    idle_timeout: Option<f64>,
    /// Bytes of UDP receive and send buffer to ask the kernel for, for bursts of handshakes;
    /// 0 keeps the system default [default: 4194304].
    #[arg(long, env = "MOQ_RELAY_UDP_BUFFER", value_name = "BYTES")]
    udp_buffer: Option<usize>,
    /// Keys that verify tokens: a JWK, a JWK set, a PEM public key, or a directory of them
    /// (repeatable).
    #[arg(long, env = "MOQ_RELAY_AUTH_KEY", value_delimiter = ',')]
    auth_key: Vec<PathBuf>,
    /// A namespace prefix anyone may publish and subscribe under without a token (`a/b`;
    /// repeatable; `""` opens everything).
    #[arg(long, env = "MOQ_RELAY_AUTH_PUBLIC", value_delimiter = ',')]
    auth_public: Vec<String>,
    /// Tokio worker threads running the relay [default: one per CPU]. Every session's QUIC
    /// connection is driven by the one UDP endpoint whichever the count (see
    /// docs/benchmarks.md, "Past one machine: N cores").
    #[arg(long, env = "MOQ_RELAY_WORKER_THREADS", value_name = "N")]
    worker_threads: Option<usize>,
    /// Run with no authorization at all (development). Without a key or a public prefix the
    /// relay refuses to start unless this is given.
    #[arg(long, env = "MOQ_RELAY_AUTH_DISABLED")]
    auth_disabled: bool,
    /// Label the received-object metrics by namespace.
    #[arg(long, env = "MOQ_RELAY_METRICS_PER_NAMESPACE")]
    metrics_per_namespace: bool,
    /// Log format.
    #[arg(long, env = "MOQ_RELAY_LOG_FORMAT", value_enum)]
    log_format: Option<LogFormat>,
    /// A relay to link with (`moqt://host:port`; repeatable). Each pair of relays is linked
    /// once: list the peer on one side only.
    #[arg(long, env = "MOQ_RELAY_CLUSTER_PEER", value_delimiter = ',')]
    cluster_peer: Vec<String>,
    /// This relay's name in the cluster (unique) [default: the bind address].
    #[arg(long, env = "MOQ_RELAY_CLUSTER_NODE")]
    cluster_node: Option<String>,
    /// The token the links present to their peers (publish and subscribe `**`).
    #[arg(long, env = "MOQ_RELAY_CLUSTER_TOKEN")]
    cluster_token: Option<String>,
    /// Trust the peers' certificates by these SHA-256 fingerprints (repeatable) instead of the
    /// web PKI.
    #[arg(long, env = "MOQ_RELAY_CLUSTER_FINGERPRINT", value_delimiter = ',')]
    cluster_fingerprint: Vec<String>,
    /// Join a cluster without dialing anyone (peers dial this relay).
    #[arg(long, env = "MOQ_RELAY_CLUSTER")]
    cluster: bool,
    /// A route registry on Valkey or Redis (`redis://[:password@]host:port[/db]`), or on a
    /// Redis Cluster (`redis+cluster://[:password@]host:port[,host:port...]`, one or more of
    /// its nodes): the relay heartbeats its id, address, region and load there, and registers
    /// the namespaces its publishers announce (lookups through it: issue 36).
    #[arg(long, env = "MOQ_RELAY_REGISTRY", value_name = "URL")]
    registry: Option<String>,
    /// The registry's password, when its URL has none.
    #[arg(long, env = "MOQ_RELAY_REGISTRY_PASSWORD", hide_env_values = true)]
    registry_password: Option<String>,
    /// Seconds a registration or heartbeat lasts in the registry without a refresh (each is
    /// refreshed at half of it): a relay that dies drops out of the cluster (its namespaces,
    /// its subscriptions elsewhere) within it. Every relay of a cluster should use the same
    /// [default: 10].
    #[arg(long, env = "MOQ_RELAY_REGISTRY_LEASE", value_name = "SECONDS")]
    registry_lease: Option<f64>,
    /// Seconds a registry call may wait for the store before it fails [default: 2].
    #[arg(long, env = "MOQ_RELAY_REGISTRY_TIMEOUT", value_name = "SECONDS")]
    registry_timeout: Option<f64>,
    /// How many shards (hash slots of a cluster) the registry's entries are spread over, from
    /// 1 to 1024; every relay of a cluster must use the same [default: 1, with a
    /// `redis+cluster://` registry 16].
    #[arg(long, env = "MOQ_RELAY_REGISTRY_SHARDS", value_name = "N")]
    registry_shards: Option<u16>,
    /// This relay's id in the registry [default: --cluster-node, else the bind address].
    #[arg(long, env = "MOQ_RELAY_RELAY_ID")]
    relay_id: Option<String>,
    /// This relay's region tag in the registry: a draining relay names the least loaded live
    /// relay of its region in GOAWAY.
    #[arg(long, env = "MOQ_RELAY_REGION")]
    region: Option<String>,
    /// The URL other relays dial to reach this one, and a draining relay names in GOAWAY
    /// (`https://` for WebTransport clients: the same host, port and path)
    /// [default: moqt://<bind address>].
    #[arg(long, env = "MOQ_RELAY_ADVERTISE", value_name = "URL")]
    advertise: Option<String>,
    /// A relay of another implementation to take namespaces from, as a client
    /// (`moqt://host:port`; repeatable): what it announces is routed to it.
    #[arg(long, env = "MOQ_RELAY_CLUSTER_UPSTREAM", value_delimiter = ',')]
    cluster_upstream: Vec<String>,
    /// What pulling from this relay costs the relays linked to it (RELAY_COST of the MoQ
    /// Cluster extension) [default: unset, which they count as 1].
    #[arg(long, env = "MOQ_RELAY_RELAY_COST", value_name = "N")]
    relay_cost: Option<u64>,
}

impl Settings {
    /// The file's settings with the command line's (and the environment's) on top: one
    /// struct, merged as data, so no setting is merged by hand.
    fn merged(self, file: Option<&Path>) -> anyhow::Result<Settings> {
        let Some(path) = file else {
            return Ok(self);
        };
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let base: toml::Table =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let mut merged = serde_json::to_value(base)?;
        let ours = serde_json::to_value(&self)?;
        if let (Some(m), Some(o)) = (merged.as_object_mut(), ours.as_object()) {
            for (k, v) in o {
                // Unset flags serialize as null, [] or false: they leave the file's value.
                let unset = v.is_null()
                    || v.as_array().is_some_and(Vec::is_empty)
                    || v.as_bool() == Some(false);
                if !unset {
                    m.insert(k.clone(), v.clone());
                }
            }
        }
        serde_json::from_value(merged).with_context(|| format!("settings in {}", path.display()))
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Command::Token(cmd)) = cli.command {
        return token(cmd);
    }
    let settings = cli.settings.merged(cli.config.as_deref())?;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    match settings.log_format.unwrap_or_default() {
        LogFormat::Plain => tracing_subscriber::fmt().with_env_filter(filter).init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_env_filter(filter)
            .init(),
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = settings.worker_threads {
        anyhow::ensure!(n > 0, "--worker-threads 0: at least one");
        runtime.worker_threads(n);
    }
    runtime.enable_all().build()?.block_on(run(settings))
}

fn load_certificate(s: &Settings) -> anyhow::Result<Certificate> {
    Ok(match (&s.tls_cert, &s.tls_key) {
        (Some(c), Some(k)) => Certificate::load_pem(c, k)?,
        (Some(_), None) | (None, Some(_)) => anyhow::bail!("give both --tls-cert and --tls-key"),
        (None, None) => {
            let hosts = s
                .tls_generate
                .as_ref()
                .context("give --tls-cert/--tls-key, or --tls-generate HOST for development")?;
            Certificate::generate(hosts)?
        }
    })
}

/// A positive number of seconds from a setting.
fn seconds(value: f64, name: &str) -> anyhow::Result<Duration> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .with_context(|| format!("{name} {value}: a positive number of seconds"))
}

/// The token authorizer the settings ask for; `None` with `--auth-disabled`.
fn authorizer(s: &Settings) -> anyhow::Result<Option<Arc<TokenAuth>>> {
    if s.auth_disabled {
        return Ok(None);
    }
    if s.auth_key.is_empty() && s.auth_public.is_empty() {
        anyhow::bail!(
            "no --auth-key and no --auth-public: refusing to run an open relay (give --auth-disabled for development)"
        );
    }
    let mut keys = KeySet::new();
    for k in &s.auth_key {
        keys.add_path(k)?;
    }
    Ok(Some(Arc::new(TokenAuth::new(keys, &s.auth_public)?)))
}

async fn run(s: Settings) -> anyhow::Result<()> {
    let bind = s
        .bind
        .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 4443)));
    let mut config = RelayConfig::new(bind, load_certificate(&s)?);
    if let Some(v) = &s.versions {
        config.versions = v
            .iter()
            .map(|d| Version::from_draft(*d).with_context(|| format!("unsupported draft {d}")))
            .collect::<anyhow::Result<_>>()?;
    }
    if let Some(g) = s.cache_groups {
        config.cache.max_groups = g;
    }
    if let Some(b) = s.cache_bytes {
        config.cache.max_bytes = b;
    }
    if let Some(secs) = s.cache_seconds {
        config.cache.max_age = Some(Duration::from_secs(secs));
    }
    if let Some(b) = s.max_backlog_bytes {
        config.serve.max_backlog_bytes = b;
    }
    if let Some(w) = s.publisher_wait {
        config.publisher_wait = Duration::try_from_secs_f64(w)
            .with_context(|| format!("--publisher-wait {w}: a number of seconds"))?;
    }
    config.successor = s.successor.clone();
    if let Some(ms) = s.max_rendezvous_ms {
        config.max_rendezvous = Duration::from_millis(ms);
    }
    if let Some(c) = &s.congestion {
        config.quic.congestion = c.parse()?;
    }
    // The idle timeout first: it brings the keep-alive under itself (a keep-alive as long
    // as the timeout races it), and an explicit --keep-alive still has the last word.
    if let Some(i) = s.idle_timeout {
        config.quic = config.quic.with_idle_timeout(seconds(i, "--idle-timeout")?);
    }
    if let Some(a) = &s.ack_threshold {
        config.quic.ack_eliciting_threshold = match a.as_str() {
            "off" => None,
            n => Some(
                n.parse()
                    .with_context(|| format!("--ack-threshold {n}: a number of packets, or off"))?,
            ),
        };
    }
    if let Some(k) = s.keep_alive {
        config.quic.keep_alive = seconds(k, "--keep-alive")?;
    }
    if config.quic.keep_alive >= config.quic.idle_timeout {
        tracing::warn!(
            keep_alive = ?config.quic.keep_alive,
            idle_timeout = ?config.quic.idle_timeout,
            "the keep-alive is not shorter than the idle timeout: idle but live connections will time out"
        );
    }
    if let Some(b) = s.udp_buffer {
        config.udp_buffer = b;
    }
    config.qlog_dir = s.qlog_dir.clone();
    config.metrics_per_namespace = s.metrics_per_namespace;
    if s.cluster || !s.cluster_peer.is_empty() || !s.cluster_upstream.is_empty() {
        let node = s.cluster_node.clone().unwrap_or_else(|| bind.to_string());
        let mut c = moq_relay::cluster::ClusterConfig::new(node, s.cluster_peer.clone());
        c.token = s.cluster_token.clone();
        c.upstreams = s.cluster_upstream.clone();
        c.tls = link_tls(&s)?;
        config.cluster = Some(c);
        // draft-lcurley-moq-cluster-01 Hop IDs: the Hop ID this relay declares on every session.
        let id = (s.relay_id.clone().or_else(|| s.cluster_node.clone()))
            .unwrap_or_else(|| bind.to_string());
        config.cluster_hop = Some(moq_relay::cluster_ext::hop_id(&id));
        config.relay_cost = s.relay_cost;
    }
    let auth = authorizer(&s)?;
    match &auth {
        Some(a) => config.authorizer = a.clone(),
        None => tracing::warn!("authorization disabled: anyone may publish and subscribe"),
    }
    let relay = Relay::bind(config)?;
    println!(
        "moq-relay listening on {} (udp: moqt:// and https://)",
        relay.local_addr()
    );
    println!("certificate sha-256 fingerprint: {}", relay.fingerprint());
    if let Some(http) = s.http {
        let listener = tokio::net::TcpListener::bind(http)
            .await
            .with_context(|| format!("binding {http}"))?;
        let (scheme, ws) = match s.http_tls {
            true => ("https", "wss"),
            false => ("http", "ws"),
        };
        println!(
            "{scheme} on {}: / (the web page) /certificate.sha256 /fingerprint /metrics /health /announced; {ws}:// (MOQT over QMux) at any path",
            listener.local_addr()?
        );
        let router = moq_relay::http::router(relay.clone(), auth.clone());
        let tls = s.http_tls.then(|| relay.certificate().clone());
        // The relay's tasks end with its shutdown.
        relay.spawn_task(async move {
            let served = match tls {
                Some(cert) => moq_relay::http::serve_tls(listener, router, &cert).await,
                None => moq_relay::http::serve(listener, router).await,
            };
            if let Err(e) = served {
                tracing::error!(error = %e, "http side stopped");
            }
        });
    }
    if let Some(url) = &s.registry {
        start_registry(&s, url, &relay, bind)?;
    }
    if let (Some(cert), Some(key)) = (s.tls_cert.clone(), s.tls_key.clone()) {
        relay.spawn_task(reload_certificates(relay.clone(), cert, key));
    }
    let drain = Duration::from_secs_f64(s.drain.unwrap_or(2.0).max(0.0));
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

/// How links (cluster peers, origin relays found through the registry) trust certificates:
/// the `--cluster-fingerprint` pins, else the system roots.
fn link_tls(s: &Settings) -> anyhow::Result<moq_transport::tls::ClientTls> {
    if s.cluster_fingerprint.is_empty() {
        return Ok(Default::default());
    }
    let pins = s
        .cluster_fingerprint
        .iter()
        .map(|f| moq_transport::tls::parse_fingerprint(f))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(moq_transport::tls::ClientTls {
        fingerprints: pins,
        ..Default::default()
    })
}

/// Heartbeats this relay to the registry at `url` (its sessions are its load) and registers
/// the namespaces its publishers announce, until the relay stops. The store may be down: both
/// are tried again, and the relay runs regardless.
fn start_registry(s: &Settings, url: &str, relay: &Relay, bind: SocketAddr) -> anyhow::Result<()> {
    use moq_relay::register_local_namespaces;
    use moq_relay::registry::heartbeat_loop;
    use moq_relay::registry::{RedisRegistry, RedisRegistryConfig, Registry, RelayRef};
    let mut config = RedisRegistryConfig::new(url);
    config.password = s.registry_password.clone();
    if let Some(l) = s.registry_lease {
        config.lease = seconds(l, "--registry-lease")?;
    }
    if let Some(t) = s.registry_timeout {
        config.timeout = seconds(t, "--registry-timeout")?;
    }
    if let Some(n) = s.registry_shards {
        config.shards = n;
    }
    let registry = RedisRegistry::new(config).context("--registry")?;
    let id =
        (s.relay_id.clone().or_else(|| s.cluster_node.clone())).unwrap_or_else(|| bind.to_string());
    let address = (s.advertise.clone()).unwrap_or_else(|| format!("moqt://{bind}"));
    // The node(s) only: what is before an `@` may hold a password.
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let hosts = rest.rsplit_once('@').map_or(rest, |(_, hosts)| hosts);
    let hosts = hosts.split('/').next().unwrap_or_default();
    println!("registry at {hosts}: relay {id} ({address})");
    let me = RelayRef { id, address };
    let registry: Arc<dyn Registry> = Arc::new(registry);
    // A flooded cluster's learned namespaces share the relay's index: register only a relay's
    // own, so only outside such a cluster.
    if s.cluster || !s.cluster_peer.is_empty() || !s.cluster_upstream.is_empty() {
        tracing::warn!(
            "--registry with a --cluster*: namespaces are not registered, only heartbeats"
        );
    } else {
        let glue = register_local_namespaces(relay.clone(), registry.clone(), me.clone());
        relay.spawn_task(glue);
        // What no local publisher has is looked up there and taken from its origin relay.
        let mut routing = moq_relay::RegistryRouting::new(registry.clone(), me.clone());
        routing.token = s.cluster_token.clone();
        routing.tls = link_tls(s)?;
        relay.route_through_registry(routing);
    }
    // Draining without --successor, GOAWAY names the least loaded live relay of the region.
    let region = s.region.clone().unwrap_or_default();
    relay.successor_from_registry(registry.clone(), me.clone(), region.clone());
    let load = relay.clone();
    relay.spawn_task(heartbeat_loop(registry, me, region, move || {
        load.registry_load()
    }));
    Ok(())
}

/// The modification times of the certificate files, to notice a change.
fn modified(paths: &[&Path]) -> Vec<Option<SystemTime>> {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// Presents the certificate files anew when they change (checked every 2 s) or on SIGHUP;
/// sessions already open keep theirs. A pair that does not load is logged and skipped.
async fn reload_certificates(relay: Relay, cert: PathBuf, key: PathBuf) {
    let paths = [cert.as_path(), key.as_path()];
    let mut seen = modified(&paths);
    let mut hup = Hangup::new();
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        let asked = tokio::select! {
            _ = tick.tick() => false,
            _ = hup.recv() => true,
        };
        let now = modified(&paths);
        if !asked && now == seen {
            continue;
        }
        seen = now;
        match Certificate::load_pem(&cert, &key).and_then(|c| relay.set_certificate(&c)) {
            Ok(()) => tracing::info!(fingerprint = %relay.fingerprint(), "certificate reloaded"),
            Err(e) => tracing::warn!(error = %e, "certificate not reloaded"),
        }
    }
}

/// SIGHUP, received one at a time (never, where there is none).
struct Hangup {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Hangup {
    fn new() -> Self {
        Hangup {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok(),
        }
    }

    /// The next SIGHUP. Cancel safe.
    async fn recv(&mut self) {
        #[cfg(unix)]
        if let Some(s) = &mut self.signal
            && s.recv().await.is_some()
        {
            return;
        }
        std::future::pending().await
    }
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

fn token(cmd: TokenCommand) -> anyhow::Result<()> {
    match cmd {
        TokenCommand::Generate {
            algorithm,
            id,
            out,
            public,
        } => {
            let alg = algorithm
                .parse()
                .map_err(|_| anyhow::anyhow!("unknown algorithm {algorithm:?}"))?;
            let jwk = Jwk::generate(alg, id)?;
            write_new(&out, &serde_json::to_string(&jwk)?)?;
            println!("key written to {}", out.display());
            if let Some(p) = public {
                let half = jwk.public().context(
                    "an HS256 key has no public half: the relay verifies with the key itself",
                )?;
                std::fs::write(&p, serde_json::to_string(&half)?)
                    .with_context(|| format!("writing {}", p.display()))?;
                println!("public key written to {}", p.display());
            }
        }
        TokenCommand::Sign {
            key,
            root,
            publish,
            subscribe,
            expires_in,
        } => {
            let text = std::fs::read_to_string(&key)
                .with_context(|| format!("reading {}", key.display()))?;
            let jwk = Jwk::parse(&text)?;
            let mut claims = Claims::new(root, publish, subscribe);
            if let Some(secs) = expires_in {
                claims.exp = claims.iat.map(|now| now + secs);
            }
            claims.grant()?;
            println!("{}", jwk.sign(&claims)?);
        }
        TokenCommand::Verify { key, token } => {
            let mut keys = KeySet::new();
            for k in &key {
                keys.add_path(k)?;
            }
            let grant = keys.verify(token.trim(), SystemTime::now())?;
            println!("publish: {:?}", grant.publish);
            println!("subscribe: {:?}", grant.subscribe);
            if let Some(e) = grant.expires {
                println!("expires: {e:?}");
            }
        }
    }
    Ok(())
}

/// Writes a secret file readable by its owner only.
fn write_new(path: &Path, contents: &str) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    use std::io::Write;
    options
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()))
        .with_context(|| format!("writing {}", path.display()))
}
