//! Section 3: discovery scaling. T namespaces are published in our relay, then a subscriber's
//! SUBSCRIBE_NAMESPACE for a prefix matching exactly 100 of them is timed until all 100
//! NAMESPACE messages arrived; the cost per match should not grow with T.
//!
//! Namespaces are `moq-bench/g<k>/n<j>` (j < 100): the prefix `moq-bench/g<k>` matches 100.
//! Each PUBLISH_NAMESPACE keeps its request stream open while the namespace is published, and
//! a QUIC connection allows 1024 concurrent bidirectional streams (our transport config), so
//! at most 1000 namespaces are published per session: T/1000 publisher sessions.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use futures::StreamExt;
use moq_core::{TrackNamespace, Version};
use moq_transport::Session;
use moq_transport::namespace::{NamespaceEvent, PublishedNamespace};
use tokio::task::JoinHandle;

use crate::procfs;
use crate::relays::{RelayCommand, RelayProcess, transport_client};

/// Where the relay under test runs.
#[derive(Clone, Debug)]
pub enum RelayTarget {
    /// A child process (its RSS is the relay's alone).
    Process(RelayCommand),
    /// The `moq_relay` library in this process (RSS deltas then include the clients).
    InProcess,
}

/// What section 3 runs.
#[derive(Clone, Debug)]
pub struct DiscoveryConfig {
    /// Total namespaces to publish, one run each on a fresh relay.
    pub totals: Vec<usize>,
    /// Namespaces per publisher session (at most 1000, see the module docs).
    pub per_session: usize,
    /// Namespaces matching the queried prefix.
    pub matches: usize,
    /// Timed SUBSCRIBE_NAMESPACE queries per total (different prefixes; at most T/100).
    pub queries: usize,
    /// The draft spoken.
    pub version: Version,
    /// The relay.
    pub target: RelayTarget,
    /// Where relay logs go.
    pub workdir: PathBuf,
}

impl DiscoveryConfig {
    /// The default run: 1k, 10k, 100k namespaces; 10 queries of 100 matches each.
    pub fn full(target: RelayTarget, workdir: PathBuf) -> Self {
        DiscoveryConfig {
            totals: vec![1_000, 10_000, 100_000],
            per_session: 1000,
            matches: 100,
            queries: 10,
            version: Version::Draft19,
            target,
            workdir,
        }
    }

    /// A smoke run: 1k and 5k namespaces, 5 queries.
    pub fn quick(target: RelayTarget, workdir: PathBuf) -> Self {
        DiscoveryConfig {
            totals: vec![1_000, 5_000],
            queries: 5,
            ..Self::full(target, workdir)
        }
    }
}

/// One total.
#[derive(Clone, Debug)]
pub struct DiscoveryRow {
    /// Namespaces published.
    pub total: usize,
    /// Publisher sessions.
    pub sessions: usize,
    /// Seconds to publish them all (every PUBLISH_NAMESPACE answered).
    pub publish_seconds: f64,
    /// Resident memory growth of the relay (or of this process, in-process), KiB.
    pub rss_delta_kib: i64,
    /// Median time from sending SUBSCRIBE_NAMESPACE to the last of the matching NAMESPACEs.
    pub median_ms: f64,
    /// Fastest query.
    pub min_ms: f64,
    /// Slowest query.
    pub max_ms: f64,
    /// Namespaces matching each query.
    pub matches: usize,
}

impl DiscoveryRow {
    /// Median microseconds per matching namespace.
    pub fn us_per_match(&self) -> f64 {
        self.median_ms * 1000.0 / self.matches.max(1) as f64
    }
}

/// The result of section 3.
#[derive(Clone, Debug)]
pub struct DiscoveryReport {
    /// Where the relay ran.
    pub target: String,
    /// The draft spoken.
    pub version: Version,
    /// One row per total.
    pub rows: Vec<DiscoveryRow>,
}

impl DiscoveryReport {
    /// The section as text.
    pub fn render(&self) -> String {
        let mut out = format!(
            "relay: {}; {}, raw QUIC; at most 1000 namespaces per publisher session\n",
            self.target, self.version
        );
        out.push_str(&format!(
            "  {:>7} {:>5} {:>10} {:>11} {:>11} {:>11} {:>11} {:>11} {:>12}\n",
            "total",
            "sess",
            "publish s",
            "ns/s",
            "query p50",
            "query min",
            "query max",
            "µs/match",
            "RSS B/ns"
        ));
        for r in &self.rows {
            out.push_str(&format!(
                "  {:>7} {:>5} {:>10.2} {:>11.0} {:>8.2} ms {:>8.2} ms {:>8.2} ms {:>11.1} {:>12.0}\n",
                r.total,
                r.sessions,
                r.publish_seconds,
                r.total as f64 / r.publish_seconds.max(1e-9),
                r.median_ms,
                r.min_ms,
                r.max_ms,
                r.us_per_match(),
                r.rss_delta_kib as f64 * 1024.0 / r.total.max(1) as f64,
            ));
        }
        if let (Some(first), Some(last)) = (self.rows.first(), self.rows.last())
            && self.rows.len() > 1
        {
            out.push_str(&format!(
                "  cost per match {} / {}: {:.2}x (1 = flat)\n",
                last.total,
                first.total,
                last.us_per_match() / first.us_per_match().max(1e-9)
            ));
        }
        out
    }
}

/// The relay under test, wherever it runs.
enum Running {
    Process(RelayProcess),
    InProcess {
        relay: moq_relay::Relay,
        task: JoinHandle<()>,
    },
}

impl Running {
    async fn start(target: &RelayTarget, workdir: &std::path::Path) -> Result<Running> {
        match target {
            RelayTarget::Process(cmd) => {
                Ok(Running::Process(RelayProcess::start(cmd, workdir).await?))
            }
            RelayTarget::InProcess => {
                let config = moq_relay::RelayConfig::development(std::net::SocketAddr::from((
                    [127, 0, 0, 1],
                    0,
                )))?;
                let relay = moq_relay::Relay::bind(config)?;
                let task = relay.spawn();
                Ok(Running::InProcess { relay, task })
            }
        }
    }

    fn url(&self) -> String {
        match self {
            Running::Process(p) => p.url(),
            Running::InProcess { relay, .. } => {
                format!("moqt://127.0.0.1:{}/", relay.local_addr().port())
            }
        }
    }

    fn rss_kib(&self) -> Result<u64> {
        match self {
            Running::Process(p) => p.rss_kib(),
            Running::InProcess { .. } => procfs::self_rss_kib(),
        }
    }

    /// Waits until the relay knows `total` namespaces (in-process) or its CPU has gone
    /// idle (a process: the index is updated by a task per session after REQUEST_OK).
    async fn settle(&self, total: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        match self {
            Running::InProcess { relay, .. } => {
                while relay.namespaces().len() < total {
                    if Instant::now() > deadline {
                        bail!("the relay indexed {} of {total}", relay.namespaces().len());
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            Running::Process(p) => {
                let tick = 1.0 / procfs::clock_ticks() as f64;
                let mut last = p.cpu_seconds()?;
                let mut quiet = 0;
                while quiet < 2 && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let now = p.cpu_seconds()?;
                    if now - last <= 2.0 * tick + 1e-9 {
                        quiet += 1;
                    } else {
                        quiet = 0;
                    }
                    last = now;
                }
            }
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::InProcess { task, .. } = self {
            task.abort();
        }
    }
}

fn namespace(group: usize, j: usize) -> Result<TrackNamespace> {
    Ok(TrackNamespace::from_strs([
        "moq-bench".to_string(),
        format!("g{group}"),
        format!("n{j}"),
    ])?)
}

fn prefix(group: usize) -> Result<TrackNamespace> {
    Ok(TrackNamespace::from_strs([
        "moq-bench".to_string(),
        format!("g{group}"),
    ])?)
}

/// Runs section 3.
pub async fn run(cfg: &DiscoveryConfig) -> Result<DiscoveryReport> {
    let mut rows = Vec::new();
    for &total in &cfg.totals {
        let row = run_total(cfg, total)
            .await
            .with_context(|| format!("{total} namespaces"))?;
        rows.push(row);
    }
    Ok(DiscoveryReport {
        target: match &cfg.target {
            RelayTarget::Process(c) => format!("child process, {}", c.describe()),
            RelayTarget::InProcess => {
                "moq_relay::Relay in this process (RSS includes the clients)".into()
            }
        },
        version: cfg.version,
        rows,
    })
}

async fn run_total(cfg: &DiscoveryConfig, total: usize) -> Result<DiscoveryRow> {
    let matches = cfg.matches.max(1);
    let per_session = cfg.per_session.clamp(matches, 1000);
    // Whole groups per session, so a group never spans sessions.
    let groups_per_session = (per_session / matches).max(1);
    let groups = total.div_ceil(matches);
    let sessions = groups.div_ceil(groups_per_session);
    let relay = Running::start(&cfg.target, &cfg.workdir).await?;
    let url = relay.url();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss0 = relay.rss_kib()?;

    let start = Instant::now();
    let published: Vec<Result<(Session, Vec<PublishedNamespace>)>> =
        futures::stream::iter(0..sessions)
            .map(|s| {
                let url = url.clone();
                let version = cfg.version;
                async move {
                    let client = transport_client(&[version])?;
                    let session = client.connect(&url).await.context("publisher connect")?;
                    let first = s * groups_per_session;
                    let last = ((s + 1) * groups_per_session).min(groups);
                    let mut names = Vec::new();
                    for g in first..last {
                        for j in 0..matches {
                            names.push(namespace(g, j)?);
                        }
                    }
                    let handles: Vec<Result<PublishedNamespace>> = futures::stream::iter(names)
                        .map(|ns| {
                            let session = session.clone();
                            async move {
                                session
                                    .publish_namespace(ns)
                                    .await
                                    .map_err(|e| anyhow!("PUBLISH_NAMESPACE: {e}"))
                            }
                        })
                        .buffer_unordered(64)
                        .collect()
                        .await;
                    let handles = handles.into_iter().collect::<Result<Vec<_>>>()?;
                    anyhow::Ok((session, handles))
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
    let published = published.into_iter().collect::<Result<Vec<_>>>()?;
    let publish_seconds = start.elapsed().as_secs_f64();
    let count: usize = published.iter().map(|(_, h)| h.len()).sum();
    if count != groups * matches {
        bail!("published {count} of {} namespaces", groups * matches);
    }
    relay.settle(count).await?;
    let rss1 = relay.rss_kib()?;

    // The subscriber: one session, one SUBSCRIBE_NAMESPACE at a time.
    let client = transport_client(&[cfg.version])?;
    let subscriber = client.connect(&url).await.context("subscriber connect")?;
    // Distinct prefixes: the relay may not have processed the cancellation of a previous
    // SUBSCRIBE_NAMESPACE yet, and the same prefix again would be a PREFIX_OVERLAP.
    let queries = cfg.queries.clamp(1, groups.max(1));
    let mut times = Vec::new();
    for q in 0..queries {
        let g = (q * groups / queries).min(groups.saturating_sub(1));
        let t = query(&subscriber, prefix(g)?, matches).await?;
        times.push(t);
    }
    subscriber.close(moq_core::codes::SessionErrorCode::NO_ERROR, "done");
    for (s, _) in &published {
        s.close(moq_core::codes::SessionErrorCode::NO_ERROR, "done");
    }
    drop(published);
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
    Ok(DiscoveryRow {
        total: count,
        sessions,
        publish_seconds,
        rss_delta_kib: rss1 as i64 - rss0 as i64,
        median_ms: median,
        min_ms: times.first().copied().unwrap_or(0.0),
        max_ms: times.last().copied().unwrap_or(0.0),
        matches,
    })
}

/// Sends SUBSCRIBE_NAMESPACE for `prefix` and returns the milliseconds until `expect`
/// namespaces were reported.
async fn query(session: &Session, prefix: TrackNamespace, expect: usize) -> Result<f64> {
    let start = Instant::now();
    let run = async {
        let mut sub = session.subscribe_namespace(prefix.clone()).await?;
        let mut seen = std::collections::HashSet::new();
        while seen.len() < expect {
            match sub.next().await {
                Some(Ok(NamespaceEvent::Added(ns))) => {
                    seen.insert(ns);
                }
                Some(Ok(NamespaceEvent::Removed(ns))) => {
                    seen.remove(&ns);
                }
                Some(Err(e)) => return Err(anyhow::Error::from(e)),
                None => bail!("the namespace subscription ended"),
            }
        }
        Ok(start.elapsed().as_secs_f64() * 1000.0)
    };
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .with_context(|| format!("SUBSCRIBE_NAMESPACE {prefix}: fewer than {expect} within 10 s"))?
}
