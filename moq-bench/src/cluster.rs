//! Section 5: a cluster of our relays on one machine. One publisher on the first relay, N
//! subscriptions spread evenly over K relays linked in a star (every other relay dials the
//! first); objects delivered per relay CPU second (summed over the K processes) and delivery
//! latency, one relay versus three.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use moq_client::{Session, SubscribeOptions, TrackConsumer};

use crate::fanout::{Pacer, PublishModel, PublisherSide, VERSION, bench_track, follow, one_line};
use crate::latency::{Percentiles, Recorder};
use crate::relays::{RelayCommand, RelayProcess, app_client};

/// What section 5 runs.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Our relay.
    pub relay: RelayCommand,
    /// Relay counts to compare.
    pub sizes: Vec<usize>,
    /// Subscriptions, spread over the relays.
    pub subscriptions: usize,
    /// Objects per second.
    pub rate: u32,
    /// Object size in bytes (at least 17).
    pub size: usize,
    /// Measurement window.
    pub duration: Duration,
    /// Warm-up before the window.
    pub warmup: Duration,
    /// Where the relays' logs and certificate go.
    pub workdir: PathBuf,
}

impl ClusterConfig {
    /// The figures in docs/benchmarks.md.
    pub fn full(relay: RelayCommand, workdir: PathBuf) -> Self {
        ClusterConfig {
            relay,
            sizes: vec![1, 3],
            subscriptions: 200,
            rate: 50,
            size: 1024,
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(2),
            workdir,
        }
    }

    /// A short run.
    pub fn quick(relay: RelayCommand, workdir: PathBuf) -> Self {
        ClusterConfig {
            subscriptions: 60,
            duration: Duration::from_secs(3),
            warmup: Duration::from_secs(1),
            ..Self::full(relay, workdir)
        }
    }
}

/// One cluster size.
#[derive(Clone, Debug)]
pub struct ClusterMeasurement {
    /// Relays.
    pub relays: usize,
    /// Measured objects published.
    pub published: u64,
    /// Measured objects delivered, over all subscriptions.
    pub delivered: u64,
    /// CPU seconds of all relays over the window.
    pub cpu_seconds: f64,
    /// Delivery latency.
    pub latency: Percentiles,
}

/// The result of section 5.
#[derive(Clone, Debug)]
pub struct ClusterReport {
    /// The configuration.
    pub config: ClusterConfig,
    /// Each size, or why it failed.
    pub cases: Vec<(usize, Result<ClusterMeasurement, String>)>,
}

impl ClusterReport {
    /// The section as text.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "{} subscriptions spread over the relays, one publisher on the first; {} objects/s of \
             {} B, {:.0} s window; relays linked in a star; draft-18 clients over raw QUIC\n\n",
            c.subscriptions,
            c.rate,
            c.size,
            c.duration.as_secs_f64()
        );
        out.push_str(
            "relays  delivered/published  relay CPU s  objects per relay CPU s  p50 ms  p99 ms\n",
        );
        let mut base = None;
        for (k, r) in &self.cases {
            match r {
                Ok(m) => {
                    let per_cpu = m.delivered as f64 / m.cpu_seconds.max(1e-9);
                    base.get_or_insert(per_cpu);
                    out.push_str(&format!(
                        "{k:>6}  {:>9}/{:<9}  {:>11.2}  {:>15.0} ({:.2}x)  {:>6.1}  {:>6.1}\n",
                        m.delivered,
                        m.published * c.subscriptions as u64,
                        m.cpu_seconds,
                        per_cpu,
                        per_cpu / base.unwrap_or(per_cpu),
                        m.latency.p50_ms,
                        m.latency.p99_ms,
                    ));
                }
                Err(e) => out.push_str(&format!("{k:>6}  failed: {e}\n")),
            }
        }
        out
    }
}

/// Runs section 5.
pub async fn run(cfg: &ClusterConfig) -> Result<ClusterReport> {
    let mut cases = Vec::new();
    for &k in &cfg.sizes {
        let r = measure(cfg, k).await.map_err(|e| one_line(&e));
        if let Err(e) = &r {
            eprintln!("  cluster of {k}: {e}");
        }
        cases.push((k, r));
    }
    Ok(ClusterReport {
        config: cfg.clone(),
        cases,
    })
}

/// Starts `k` relays sharing one certificate, the others dialing the first.
async fn start(cfg: &ClusterConfig, k: usize) -> Result<Vec<RelayProcess>> {
    let dir = cfg.workdir.join(format!("cluster-{k}"));
    std::fs::create_dir_all(&dir)?;
    let (cert, key) = crate::relays::write_pem(&dir)?;
    let fingerprint = moq_transport::tls::Certificate::load_pem(&cert, &key)?.fingerprint_hex();
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let mut relays: Vec<RelayProcess> = Vec::new();
    for i in 0..k {
        let mut cmd = cfg.relay.clone();
        cmd.extra = vec![
            "--tls-cert".into(),
            cert.clone(),
            "--tls-key".into(),
            key.clone(),
            "--cluster-node".into(),
            format!("n{i}"),
        ];
        match relays.first() {
            None => cmd.extra.push("--cluster".into()),
            Some(root) => cmd.extra.extend([
                "--cluster-peer".into(),
                root.url(),
                "--cluster-fingerprint".into(),
                fingerprint.clone(),
            ]),
        }
        relays.push(RelayProcess::start(&cmd, &dir).await?);
    }
    Ok(relays)
}

async fn measure(cfg: &ClusterConfig, k: usize) -> Result<ClusterMeasurement> {
    let relays = start(cfg, k).await?;
    let root = relays.first().context("no relay")?;
    let publisher = PublisherSide::start(&root.url(), PublishModel::Namespace).await?;
    let name = bench_track()?;
    let client = app_client(&[VERSION])?;
    let urls: Vec<String> = relays.iter().map(RelayProcess::url).collect();
    let connected: Vec<Result<Session>> =
        futures::stream::iter(urls.into_iter().cycle().take(cfg.subscriptions))
            .map(|url| {
                let client = client.clone();
                async move { Ok(client.connect(&url).await?) }
            })
            .buffer_unordered(16)
            .collect()
            .await;
    let sessions: Vec<Session> = connected.into_iter().collect::<Result<_>>()?;
    let recorder = Arc::new(Recorder::default());
    let mut followers = Vec::new();
    for s in &sessions {
        let deadline = Instant::now() + Duration::from_secs(10);
        let t: TrackConsumer = loop {
            match s
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
            {
                Ok(t) => break t,
                // A relay that has not learned the namespace over its link yet.
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => bail!("SUBSCRIBE: {e}"),
            }
        };
        followers.push(tokio::spawn(follow(t, recorder.clone())));
    }
    let mut pacer = Pacer::new(cfg.rate, cfg.size, 1);
    let warm = (cfg.warmup.as_secs_f64() * f64::from(cfg.rate)).round() as u64;
    pacer.publish(&publisher.track, warm, false).await?;
    let cpu = |rs: &[RelayProcess]| -> Result<f64> {
        rs.iter().map(|r| r.cpu_seconds()).sum::<Result<f64>>()
    };
    let cpu0 = cpu(&relays)?;
    let measured = (cfg.duration.as_secs_f64() * f64::from(cfg.rate)).round() as u64;
    pacer.publish(&publisher.track, measured, true).await?;
    pacer.finish();
    let expected = measured * cfg.subscriptions as u64;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && recorder.delivered() < expected {
        // The recorder has no signal to wait on; poll the count.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu1 = cpu(&relays)?;
    let delivered = recorder.delivered();
    for f in followers {
        f.abort();
    }
    for s in &sessions {
        s.close();
    }
    publisher.session.close();
    Ok(ClusterMeasurement {
        relays: k,
        published: measured,
        delivered,
        cpu_seconds: cpu1 - cpu0,
        latency: Percentiles::of(recorder.take()),
    })
}
