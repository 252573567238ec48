//! Section 4: relay resident memory per idle session and per subscription, measured on the
//! relay process (VmRSS deltas).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use futures::StreamExt;
use moq_client::{Session, SubscribeOptions, TrackConsumer};

use crate::fanout::{PublishModel, PublisherSide, VERSION, bench_track, follow, one_line};
use crate::latency::Recorder;
use crate::relays::{RelayCommand, RelayKind, RelayProcess, app_client};

/// What section 4 runs.
#[derive(Clone, Debug)]
pub struct MemoryConfig {
    /// Idle sessions to open.
    pub sessions: usize,
    /// Subscriptions to one track, one per session (at draft-18 a second subscription to a
    /// track in one session is a DUPLICATE_SUBSCRIPTION error): the idle sessions are used
    /// first, then more are opened (and measured before subscribing).
    pub subscriptions: usize,
    /// Sessions per client endpoint (UDP socket).
    pub sessions_per_client: usize,
    /// Wait before each reading.
    pub settle: Duration,
    /// The relays (ours first).
    pub relays: Vec<RelayCommand>,
    /// Where relay logs go.
    pub workdir: PathBuf,
}

impl MemoryConfig {
    /// The default run: 200 sessions, 1000 subscriptions.
    pub fn full(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        MemoryConfig {
            sessions: 200,
            subscriptions: 1000,
            sessions_per_client: 20,
            settle: Duration::from_secs(1),
            relays,
            workdir,
        }
    }

    /// A smoke run: 20 sessions, 100 subscriptions.
    pub fn quick(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        MemoryConfig {
            sessions: 20,
            subscriptions: 100,
            settle: Duration::from_millis(300),
            ..Self::full(relays, workdir)
        }
    }
}

/// One relay's figures.
#[derive(Clone, Debug)]
pub struct MemoryMeasurement {
    /// RSS after start, KiB.
    pub base_kib: u64,
    /// RSS growth from the idle sessions, KiB.
    pub sessions_kib: i64,
    /// RSS growth from the subscriptions, KiB.
    pub subscriptions_kib: i64,
    /// Sessions opened.
    pub sessions: usize,
    /// Subscriptions made.
    pub subscriptions: usize,
    /// How the track reached the relay.
    pub model: PublishModel,
}

impl MemoryMeasurement {
    /// KiB per idle session.
    pub fn per_session_kib(&self) -> f64 {
        self.sessions_kib as f64 / self.sessions.max(1) as f64
    }

    /// KiB per subscription.
    pub fn per_subscription_kib(&self) -> f64 {
        self.subscriptions_kib as f64 / self.subscriptions.max(1) as f64
    }
}

/// The result of section 4.
#[derive(Clone, Debug)]
pub struct MemoryReport {
    /// The configuration it ran with.
    pub config: MemoryConfig,
    /// One row per relay.
    pub rows: Vec<(RelayKind, Result<MemoryMeasurement, String>)>,
    /// Relays not run, and why.
    pub skipped: Vec<String>,
}

impl MemoryReport {
    /// The section as text.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "{} idle sessions; then {} subscriptions to one (idle) track, one per session \
             (the idle ones plus new ones, measured before subscribing); draft-18, raw QUIC; \
             relay VmRSS deltas\n",
            c.sessions, c.subscriptions
        );
        for s in &self.skipped {
            out.push_str(&format!("  skipped: {s}\n"));
        }
        out.push_str(&format!(
            "  {:<11} {:>10} {:>15} {:>20} {:>18}\n",
            "relay", "base MiB", "KiB / session", "KiB / subscription", "model"
        ));
        for (kind, r) in &self.rows {
            match r {
                Ok(m) => out.push_str(&format!(
                    "  {:<11} {:>10.1} {:>15.1} {:>20.2} {:>18}\n",
                    kind.label(),
                    m.base_kib as f64 / 1024.0,
                    m.per_session_kib(),
                    m.per_subscription_kib(),
                    m.model.label()
                )),
                Err(e) => out.push_str(&format!("  {:<11} n/a ({e})\n", kind.label())),
            }
        }
        let ours = self.rows.iter().find_map(|(k, r)| match r {
            Ok(m) if *k == RelayKind::Ours => Some(m),
            _ => None,
        });
        if let Some(ours) = ours {
            for (kind, r) in &self.rows {
                if let (Ok(m), false) = (r, *kind == RelayKind::Ours) {
                    out.push_str(&format!(
                        "  ours / {}: {:.2}x per session, {:.2}x per subscription\n",
                        kind.label(),
                        ours.per_session_kib() / m.per_session_kib(),
                        ours.per_subscription_kib() / m.per_subscription_kib()
                    ));
                }
            }
        }
        out
    }
}

/// Runs section 4.
pub async fn run(cfg: &MemoryConfig, skipped: Vec<String>) -> MemoryReport {
    let mut rows = Vec::new();
    for relay in &cfg.relays {
        let r = measure_relay(cfg, relay).await.map_err(|e| one_line(&e));
        if let Err(e) = &r {
            eprintln!("  {}: {e}", relay.kind.label());
        }
        rows.push((relay.kind, r));
    }
    MemoryReport {
        config: cfg.clone(),
        rows,
        skipped,
    }
}

async fn measure_relay(cfg: &MemoryConfig, relay: &RelayCommand) -> Result<MemoryMeasurement> {
    let mut errors = Vec::new();
    for model in [PublishModel::Namespace, PublishModel::Publish] {
        let mut process = RelayProcess::start(relay, &cfg.workdir).await?;
        let res = tokio::time::timeout(Duration::from_secs(180), measure(cfg, &process, model))
            .await
            .unwrap_or_else(|_| Err(anyhow!("timed out")));
        match res {
            Ok(m) => return Ok(m),
            Err(e) => {
                errors.push(format!("{}: {}", model.label(), one_line(&e)));
                if !process.is_running() {
                    break;
                }
            }
        }
    }
    bail!("{}", errors.join("; "))
}

async fn measure(
    cfg: &MemoryConfig,
    relay: &RelayProcess,
    model: PublishModel,
) -> Result<MemoryMeasurement> {
    let url = relay.url();
    tokio::time::sleep(cfg.settle).await;
    let base = relay.rss_kib()?;

    let per_client = cfg.sessions_per_client.max(1);
    let total = cfg.sessions.max(cfg.subscriptions);
    let clients = (0..total.div_ceil(per_client))
        .map(|_| app_client(&[VERSION]))
        .collect::<Result<Vec<_>>>()?;
    let connect = |range: std::ops::Range<usize>| {
        let clients = &clients;
        let url = url.clone();
        async move {
            let connected: Vec<Result<Session>> = futures::stream::iter(range)
                .map(|i| {
                    let client = clients.get(i / per_client).cloned();
                    let url = url.clone();
                    async move {
                        let client = client.context("no client")?;
                        client
                            .connect(&url)
                            .await
                            .map_err(|e| anyhow!("connect: {e}"))
                    }
                })
                .buffer_unordered(16)
                .collect()
                .await;
            connected.into_iter().collect::<Result<Vec<_>>>()
        }
    };
    let mut sessions = connect(0..cfg.sessions).await?;
    tokio::time::sleep(cfg.settle).await;
    let with_sessions = relay.rss_kib()?;
    sessions.extend(connect(cfg.sessions..total).await?);

    // The track, and one subscription from another session so the relay holds it before the
    // measured subscriptions arrive.
    let publisher = PublisherSide::start(&url, model).await?;
    let probe_session = app_client(&[VERSION])?
        .connect(&url)
        .await
        .map_err(|e| anyhow!("connect: {e}"))?;
    let probe = tokio::time::timeout(
        Duration::from_secs(10),
        probe_session
            .subscriber()
            .subscribe(bench_track()?, SubscribeOptions::default()),
    )
    .await
    .context("SUBSCRIBE unanswered")?
    .context("SUBSCRIBE")?;
    tokio::time::sleep(cfg.settle).await;
    let before_subs = relay.rss_kib()?;

    let name = bench_track()?;
    let plan: Vec<Session> = sessions.iter().take(cfg.subscriptions).cloned().collect();
    let subscribed: Vec<Result<TrackConsumer>> = futures::stream::iter(plan)
        .map(|s| {
            let name = name.clone();
            async move {
                tokio::time::timeout(
                    Duration::from_secs(10),
                    s.subscriber().subscribe(name, SubscribeOptions::default()),
                )
                .await
                .context("SUBSCRIBE unanswered")?
                .map_err(|e| anyhow!("SUBSCRIBE: {e}"))
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let streams = subscribed.into_iter().collect::<Result<Vec<_>>>()?;
    let rec = Arc::new(Recorder::default());
    let followers: Vec<_> = streams
        .into_iter()
        .map(|t| tokio::spawn(follow(t, rec.clone())))
        .collect();
    tokio::time::sleep(cfg.settle).await;
    let with_subs = relay.rss_kib()?;

    for f in followers {
        f.abort();
    }
    drop(probe);
    probe_session.close();
    publisher.session.close();
    for s in &sessions {
        s.close();
    }
    Ok(MemoryMeasurement {
        base_kib: base,
        sessions_kib: with_sessions as i64 - base as i64,
        subscriptions_kib: with_subs as i64 - before_subs as i64,
        sessions: cfg.sessions,
        subscriptions: cfg.subscriptions,
        model,
    })
}
