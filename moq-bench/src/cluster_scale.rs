//! Section 9 (opt-in: `--sections cluster-scale`): the route registry at cluster scale (issue
//! 36). A Valkey/Redis server of its own holds 1k, 100k and 1M namespaces registered by 1,000
//! simulated origin relays (written in batches, one script call per origin and step, through
//! `RedisRegistry::register_many`, a `#[doc(hidden)]` helper for this section), grown step by
//! step. At each size it measures:
//!
//! - origin lookups of random namespaces (cache off): p50 and p99 of 10,000 (after 50 not
//!   timed);
//! - discovery of a narrow prefix (10 namespaces): the time from `watch(prefix)` (subscribe,
//!   then scan) until all 10 are reported, the median of 21; and the time from a `register`
//!   under that prefix until an open watch reports it, the median of 21;
//! - the store's `used_memory` per namespace (over the empty store);
//! - the resident memory of one of our relay binaries started with `--registry` on that store,
//!   after a few local subscribers each sent SUBSCRIBE_NAMESPACE for a narrow prefix and
//!   SUBSCRIBEs for tracks under it (each looked up in the registry; the namespaces are
//!   registered as the measured relay's own, so a lookup is answered DOES_NOT_EXIST without
//!   dialing a simulated origin, which has no process). It must not grow with the count.
//!
//! The store: `MOQ_REDIS_SERVER`, else `valkey-server` or `redis-server` on PATH
//! (scripts/install-redis.sh installs Debian's), on a free loopback port, without persistence.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use moq_client::SubscribeOptions;
use moq_core::{FullTrackName, TrackNamespace};
use moq_relay::registry::{
    NamespaceChange, RedisRegistry, RedisRegistryConfig, Registry, RelayRef,
};

use crate::fanout::VERSION;
use crate::relays::{RelayCommand, RelayProcess, app_client, transport_client};

/// What section 9 runs.
#[derive(Clone, Debug)]
pub struct ClusterScaleConfig {
    /// Our relay binary, for the memory of a relay on the registry (`None`: skipped).
    pub relay: Option<RelayCommand>,
    /// Namespace counts, ascending (the store grows from one to the next).
    pub sizes: Vec<usize>,
    /// Simulated origin relays the namespaces are spread over.
    pub origins: usize,
    /// Lookups timed per size.
    pub lookups: usize,
    /// Discoveries (and changes) timed per size.
    pub discoveries: usize,
    /// Local subscriber sessions on the measured relay.
    pub subscribers: usize,
    /// Where the relay's log goes.
    pub workdir: PathBuf,
}

impl ClusterScaleConfig {
    /// The figures in docs/benchmarks.md.
    pub fn full(relay: Option<RelayCommand>, workdir: PathBuf) -> Self {
        ClusterScaleConfig {
            relay,
            sizes: vec![1_000, 100_000, 1_000_000],
            origins: 1_000,
            lookups: 10_000,
            discoveries: 21,
            subscribers: 4,
            workdir,
        }
    }

    /// A short run (1k and 10k).
    pub fn quick(relay: Option<RelayCommand>, workdir: PathBuf) -> Self {
        ClusterScaleConfig {
            sizes: vec![1_000, 10_000],
            lookups: 200,
            discoveries: 5,
            ..Self::full(relay, workdir)
        }
    }
}

/// One size.
#[derive(Clone, Debug)]
pub struct ScaleRow {
    /// Namespaces in the store.
    pub namespaces: usize,
    /// Seconds to register the namespaces added at this step.
    pub register_s: f64,
    /// Lookup p50 and p99, ms.
    pub lookup_ms: (f64, f64),
    /// Narrow-prefix discovery (watch until all reported), median ms.
    pub discover_ms: f64,
    /// A registration reaching an open watch, median ms.
    pub change_ms: f64,
    /// The store's used_memory over the empty store, per namespace, bytes.
    pub store_bytes: f64,
    /// The measured relay's resident memory, KiB (`None`: no relay binary).
    pub relay_rss_kib: Option<u64>,
}

/// The result of section 9.
#[derive(Clone, Debug)]
pub struct ClusterScaleReport {
    /// The configuration.
    pub config: ClusterScaleConfig,
    /// The store server's version line.
    pub server: String,
    /// The relay's resident memory before any namespace, KiB.
    pub relay_rss_empty_kib: Option<u64>,
    /// Each size measured.
    pub rows: Vec<ScaleRow>,
    /// Why the run stopped early, if it did.
    pub error: Option<String>,
}

impl ClusterScaleReport {
    /// The section as text: a row per size, then the ratios to the first size.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "store: {}; namespaces (scale.example, room-<i/10>, cam-<i%10>) from {} simulated \
             origins; lookups of {} random namespaces (cache off); discovery of a 10-namespace \
             prefix, median of {}; relay: our binary with --registry, {} local subscribers\n\n",
            self.server, c.origins, c.lookups, c.discoveries, c.subscribers
        );
        let mib = |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.1}", k as f64 / 1024.0));
        if self.relay_rss_empty_kib.is_some() {
            out.push_str(&format!(
                "relay RSS before any namespace: {} MiB\n",
                mib(self.relay_rss_empty_kib)
            ));
        }
        out.push_str(
            "namespaces  register s  lookup p50 ms  p99 ms  discover ms  change ms  \
             store B/ns  (added)  relay RSS MiB\n",
        );
        let mut before: Option<&ScaleRow> = None;
        for r in &self.rows {
            // The bytes of the namespaces added at this step, over their count.
            let added = before.map_or(r.store_bytes, |b| {
                let total = |x: &ScaleRow| x.store_bytes * x.namespaces as f64;
                (total(r) - total(b)) / (r.namespaces - b.namespaces).max(1) as f64
            });
            out.push_str(&format!(
                "{:>10}  {:>10.1}  {:>13.3}  {:>6.3}  {:>11.2}  {:>9.2}  {:>10.0}  {:>7.0}  {:>13}\n",
                r.namespaces,
                r.register_s,
                r.lookup_ms.0,
                r.lookup_ms.1,
                r.discover_ms,
                r.change_ms,
                r.store_bytes,
                added,
                mib(r.relay_rss_kib),
            ));
            before = Some(r);
        }
        if let Some(base) = self.rows.first() {
            for r in self.rows.iter().skip(1) {
                let ratio = |a: f64, b: f64| a / b.max(1e-9);
                let rss = match (r.relay_rss_kib, base.relay_rss_kib) {
                    (Some(a), Some(b)) => format!("{:.2}", ratio(a as f64, b as f64)),
                    _ => "-".into(),
                };
                out.push_str(&format!(
                    "  {}/{}: lookup p50 {:.2}x p99 {:.2}x, discover {:.2}x, change {:.2}x, \
                     store B/ns {:.2}x, relay RSS {rss}x\n",
                    r.namespaces,
                    base.namespaces,
                    ratio(r.lookup_ms.0, base.lookup_ms.0),
                    ratio(r.lookup_ms.1, base.lookup_ms.1),
                    ratio(r.discover_ms, base.discover_ms),
                    ratio(r.change_ms, base.change_ms),
                    ratio(r.store_bytes, base.store_bytes),
                ));
            }
        }
        if let Some(e) = &self.error {
            out.push_str(&format!("stopped: {e}\n"));
        }
        out
    }
}

/// A store server of this section's own; killed when dropped.
struct Store {
    child: Child,
    url: String,
    version: String,
}

impl Store {
    fn start() -> Result<Store> {
        let binary = std::env::var_os("MOQ_REDIS_SERVER")
            .map(PathBuf::from)
            .or_else(|| {
                let path = std::env::var_os("PATH")?;
                ["valkey-server", "redis-server"].iter().find_map(|name| {
                    std::env::split_paths(&path)
                        .map(|d| d.join(name))
                        .find(|p| p.is_file())
                })
            })
            .context(
                "no valkey-server or redis-server on PATH (scripts/install-redis.sh, or \
                 MOQ_REDIS_SERVER=/path)",
            )?;
        let version = Command::new(&binary)
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let child = Command::new(&binary)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--loglevel", "warning"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Store {
            child,
            url: format!("redis://127.0.0.1:{port}"),
            version,
        })
    }

    /// `used_memory` from the server's INFO.
    async fn used_memory(&self) -> Result<u64> {
        let client = redis::Client::open(self.url.as_str())?;
        let mut con = client.get_multiplexed_async_connection().await?;
        let info: String = redis::cmd("INFO")
            .arg("memory")
            .query_async(&mut con)
            .await?;
        info.lines()
            .find_map(|l| l.strip_prefix("used_memory:")?.trim().parse().ok())
            .context("no used_memory in INFO")
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Namespace `i`: ten per room, so a room is a narrow prefix of ten.
fn namespace(i: usize) -> Result<TrackNamespace> {
    Ok(TrackNamespace::from_strs([
        "scale.example",
        &format!("room-{}", i / 10),
        &format!("cam-{}", i % 10),
    ])?)
}

fn room(r: usize) -> Result<TrackNamespace> {
    Ok(TrackNamespace::from_strs([
        "scale.example",
        &format!("room-{r}"),
    ])?)
}

fn origin(r: usize) -> RelayRef {
    RelayRef {
        id: format!("origin-{r:04}"),
        address: format!("moqt://origin-{r:04}.scale.example:4443"),
    }
}

/// The measured relay's id: the rooms its subscribers ask about are registered as its own.
const ME: &str = "bench-relay";

/// Runs section 9.
pub async fn run(cfg: &ClusterScaleConfig) -> Result<ClusterScaleReport> {
    let store = Store::start()?;
    let mut config = RedisRegistryConfig::new(store.url.clone());
    // The simulated origins do not refresh: leases outlast the run.
    config.lease = Duration::from_secs(3600);
    config.cache_ttl = Duration::ZERO;
    let registry = Arc::new(RedisRegistry::new(config)?);
    let deadline = Instant::now() + Duration::from_secs(10);
    while registry.ping().await.is_err() {
        if Instant::now() > deadline {
            bail!("{} did not answer within 10 s", store.url);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let empty = store.used_memory().await?;
    let relay = match &cfg.relay {
        Some(cmd) => {
            let mut cmd = cmd.clone();
            cmd.extra
                .extend(["--registry", &store.url, "--relay-id", ME].map(String::from));
            Some(RelayProcess::start(&cmd, &cfg.workdir).await?)
        }
        None => None,
    };
    let mut report = ClusterScaleReport {
        config: cfg.clone(),
        server: store.version.clone(),
        relay_rss_empty_kib: relay.as_ref().and_then(|r| r.rss_kib().ok()),
        rows: Vec::new(),
        error: None,
    };
    let mut have = 0;
    for &size in &cfg.sizes {
        match measure(cfg, &store, &registry, relay.as_ref(), have, size, empty).await {
            Ok(row) => {
                eprintln!("  cluster-scale {size}: done");
                report.rows.push(row);
                have = size;
            }
            Err(e) => {
                report.error = Some(format!("{size}: {e:#}"));
                break;
            }
        }
    }
    Ok(report)
}

async fn measure(
    cfg: &ClusterScaleConfig,
    store: &Store,
    registry: &Arc<RedisRegistry>,
    relay: Option<&RelayProcess>,
    from: usize,
    size: usize,
    empty: u64,
) -> Result<ScaleRow> {
    let t = Instant::now();
    // One batch per origin: namespace i is origin (i mod origins)'s.
    futures::stream::iter(0..cfg.origins)
        .map(|r| {
            let registry = registry.clone();
            async move {
                let start = from + (r + cfg.origins - from % cfg.origins) % cfg.origins;
                let names = (start..size)
                    .step_by(cfg.origins)
                    .map(namespace)
                    .collect::<Result<Vec<_>>>()?;
                for chunk in names.chunks(2000) {
                    registry.register_many(chunk, &origin(r)).await?;
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await?;
    let register_s = t.elapsed().as_secs_f64();
    let used = store.used_memory().await?;

    // Lookups of random namespaces (a fixed LCG: the same across runs).
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut lookups = Vec::with_capacity(cfg.lookups);
    // The first 50 warm up (the script is loaded, the connection made): not timed.
    for n in 0..cfg.lookups + 50 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let i = usize::try_from(seed >> 33).unwrap_or(0) % size;
        let ns = namespace(i)?;
        let t = Instant::now();
        let found = registry.lookup(&ns).await?;
        if n >= 50 {
            lookups.push(t.elapsed().as_secs_f64() * 1e3);
        }
        if found.is_none() {
            bail!("lookup of {ns}: not found");
        }
    }
    lookups.sort_by(f64::total_cmp);
    let pick = |q: f64| lookups.get(((lookups.len() as f64 * q) as usize).min(lookups.len() - 1));

    // Discovery of a narrow prefix, and one change reaching an open watch.
    let rooms = size / 10;
    let mut discover = Vec::new();
    let mut change = Vec::new();
    for k in 0..cfg.discoveries {
        let prefix = room(k * 7919 % rooms)?;
        let t = Instant::now();
        let mut watch = registry.watch(&prefix).await?;
        for _ in 0..10 {
            next_added(&mut watch).await?;
        }
        discover.push(t.elapsed().as_secs_f64() * 1e3);
        let extra = prefix.child(format!("extra-{k}").into_bytes())?;
        let t = Instant::now();
        let o = registry.register(&extra, &origin(k)).await?;
        next_added(&mut watch).await?;
        change.push(t.elapsed().as_secs_f64() * 1e3);
        registry.unregister(&extra, &o).await?;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };

    let relay_rss_kib = match relay {
        Some(relay) => Some(subscribe_around(cfg, registry, relay, size).await?),
        None => None,
    };
    Ok(ScaleRow {
        namespaces: size,
        register_s,
        lookup_ms: (
            pick(0.5).copied().unwrap_or(0.0),
            pick(0.99).copied().unwrap_or(0.0),
        ),
        discover_ms: median(&mut discover),
        change_ms: median(&mut change),
        store_bytes: used.saturating_sub(empty) as f64 / size as f64,
        relay_rss_kib,
    })
}

async fn next_added(watch: &mut moq_relay::registry::NamespaceWatch) -> Result<()> {
    match tokio::time::timeout(Duration::from_secs(10), watch.next()).await {
        Ok(Some(NamespaceChange::Added(_))) => Ok(()),
        Ok(other) => bail!("the watch reported {other:?}"),
        Err(_) => bail!("no change within 10 s"),
    }
}

/// The local subscribers' round on the measured relay; returns its RSS after it (sessions
/// still open).
async fn subscribe_around(
    cfg: &ClusterScaleConfig,
    registry: &Arc<RedisRegistry>,
    relay: &RelayProcess,
    size: usize,
) -> Result<u64> {
    // A room of the measured relay's own at this size (fresh, so its lookups miss the
    // relay's cache).
    let own = TrackNamespace::from_strs(["scale.example", &format!("own-{size}")])?;
    let me = RelayRef {
        id: ME.into(),
        address: relay.url(),
    };
    let names = (0..10)
        .map(|j| Ok(own.child(format!("cam-{j}").into_bytes())?))
        .collect::<Result<Vec<_>>>()?;
    registry.register_many(&names, &me).await?;
    let app = app_client(&[VERSION])?;
    let transport = transport_client(&[VERSION])?;
    let mut held = Vec::new();
    for s in 0..cfg.subscribers {
        let discovery = transport.connect(&relay.url()).await?;
        let watching = discovery
            .subscribe_namespace(room(s)?)
            .await
            .context("SUBSCRIBE_NAMESPACE")?;
        let session = app.connect(&relay.url()).await?;
        for ns in &names {
            let track = FullTrackName::new(ns.clone(), b"video".to_vec())?;
            // Looked up in the registry; the origin is this relay, with no publisher: refused.
            let refused = session
                .subscriber()
                .subscribe(track, SubscribeOptions::default())
                .await;
            if refused.is_ok() {
                bail!("SUBSCRIBE to {ns} was accepted");
            }
        }
        held.push((discovery, watching, session));
    }
    let rss = relay.rss_kib()?;
    for (discovery, _, session) in held {
        discovery.close(moq_core::codes::SessionErrorCode::NO_ERROR, "done");
        session.close();
    }
    Ok(rss)
}
