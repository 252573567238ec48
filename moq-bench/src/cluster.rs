//! Section 5: a cluster of our relays on one machine. P publishers, one track each, spread
//! over K relays (publisher j on relay j mod K); N subscriptions spread evenly over the relays
//! (subscription i on relay i mod K reads track (i / K) mod P, so each relay's subscriptions
//! read every track); relays linked in a star (every other relay dials the first). Reports
//! objects delivered per relay CPU second (summed over the K processes), delivery latency, and each relay's CPU and upstream subscriptions (read from
//! its `/metrics`): one per track it carries, whatever its subscriber count.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use moq_client::{Session, SubscribeOptions, TrackConsumer};
use moq_core::{FullTrackName, TrackNamespace};

use crate::fanout::{Pacer, PublishModel, PublisherSide, VERSION, follow, one_line};
use crate::latency::{Percentiles, Recorder};
use crate::relays::{RelayCommand, RelayProcess, app_client, free_port};

/// What section 5 runs.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// Our relay.
    pub relay: RelayCommand,
    /// Relay counts to compare.
    pub sizes: Vec<usize>,
    /// Publishers (one track each), spread over the relays.
    pub publishers: usize,
    /// Subscriptions, spread over the relays and the tracks.
    pub subscriptions: usize,
    /// Objects per second, per track.
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
            sizes: vec![1, 3, 8],
            publishers: 4,
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
            sizes: vec![1, 3],
            subscriptions: 60,
            duration: Duration::from_secs(3),
            warmup: Duration::from_secs(1),
            ..Self::full(relay, workdir)
        }
    }
}

/// One relay of a cluster over the window.
#[derive(Clone, Debug)]
pub struct RelayFigures {
    /// CPU seconds over the window.
    pub cpu_seconds: f64,
    /// Upstream subscriptions at the end of the window (to its own publishers and over links).
    pub upstreams: u64,
}

/// One cluster size.
#[derive(Clone, Debug)]
pub struct ClusterMeasurement {
    /// Relays.
    pub relays: usize,
    /// Measured objects published, over all tracks.
    pub published: u64,
    /// Objects the subscriptions should have received.
    pub expected: u64,
    /// Measured objects delivered, over all subscriptions.
    pub delivered: u64,
    /// Each relay, the first (the star's hub) first.
    pub per_relay: Vec<RelayFigures>,
    /// Delivery latency.
    pub latency: Percentiles,
}

impl ClusterMeasurement {
    /// CPU seconds of all relays over the window.
    pub fn cpu_seconds(&self) -> f64 {
        self.per_relay.iter().map(|r| r.cpu_seconds).sum()
    }
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
            "{} publishers (one track each) and {} subscriptions spread over the relays; {} \
             objects/s of {} B per track, {:.0} s window; relays linked in a star; draft-18 \
             clients over raw QUIC\n\n",
            c.publishers,
            c.subscriptions,
            c.rate,
            c.size,
            c.duration.as_secs_f64()
        );
        out.push_str(
            "relays  delivered/expected  relay CPU s  objects per relay CPU s  p50 ms  p99 ms  \
             upstream subscriptions per relay\n",
        );
        let mut base = None;
        for (k, r) in &self.cases {
            match r {
                Ok(m) => {
                    let cpu = m.cpu_seconds();
                    let per_cpu = m.delivered as f64 / cpu.max(1e-9);
                    base.get_or_insert(per_cpu);
                    let upstreams: Vec<String> = m
                        .per_relay
                        .iter()
                        .map(|r| r.upstreams.to_string())
                        .collect();
                    out.push_str(&format!(
                        "{k:>6}  {:>8}/{:<9}  {:>11.2}  {:>15.0} ({:.2}x)  {:>6.1}  {:>6.1}  {}\n",
                        m.delivered,
                        m.expected,
                        cpu,
                        per_cpu,
                        per_cpu / base.unwrap_or(per_cpu),
                        m.latency.p50_ms,
                        m.latency.p99_ms,
                        upstreams.join(" "),
                    ));
                }
                Err(e) => out.push_str(&format!("{k:>6}  failed: {e}\n")),
            }
        }
        for (k, r) in &self.cases {
            if let Ok(m) = r
                && *k > 1
            {
                let cpu: Vec<String> = m
                    .per_relay
                    .iter()
                    .map(|r| format!("{:.2}", r.cpu_seconds))
                    .collect();
                out.push_str(&format!(
                    "  {k} relays, CPU s each (hub first): {}\n",
                    cpu.join(" ")
                ));
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

/// A relay of the cluster and the port of its HTTP side.
struct Member {
    process: RelayProcess,
    http: u16,
}

impl Member {
    /// The relay's upstream subscriptions, from its `/metrics`.
    fn upstreams(&self) -> Result<u64> {
        let text = http_get(self.http, "/metrics")?;
        let name = "moq_relay_upstream_subscriptions_active";
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)?
                    .split_whitespace()
                    .last()?
                    .parse()
                    .ok()
            })
            .with_context(|| format!("no {name} in /metrics"))
    }
}

/// GET `path` from the relay's HTTP side on loopback (HTTP/1.0: the body runs to the close).
fn http_get(port: u16, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (_, body) = text.split_once("\r\n\r\n").context("no HTTP body")?;
    Ok(body.to_string())
}

/// Starts `k` relays sharing one certificate, the others dialing the first.
async fn start(cfg: &ClusterConfig, k: usize) -> Result<Vec<Member>> {
    if cfg.relay.self_hosted {
        bail!("needs the moq-relay binary (cargo build --release -p moq-relay)");
    }
    let dir = cfg.workdir.join(format!("cluster-{k}"));
    std::fs::create_dir_all(&dir)?;
    let (cert, key) = crate::relays::write_pem(&dir)?;
    let fingerprint = moq_transport::tls::Certificate::load_pem(&cert, &key)?.fingerprint_hex();
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let mut relays: Vec<Member> = Vec::new();
    for i in 0..k {
        let http = free_port()?;
        let mut cmd = cfg.relay.clone();
        cmd.extra = vec![
            "--tls-cert".into(),
            cert.clone(),
            "--tls-key".into(),
            key.clone(),
            "--cluster-node".into(),
            format!("n{i}"),
            "--http".into(),
            format!("127.0.0.1:{http}"),
        ];
        match relays.first() {
            None => cmd.extra.push("--cluster".into()),
            Some(hub) => cmd.extra.extend([
                "--cluster-peer".into(),
                hub.process.url(),
                "--cluster-fingerprint".into(),
                fingerprint.clone(),
            ]),
        }
        let process = RelayProcess::start(&cmd, &dir).await?;
        relays.push(Member { process, http });
    }
    Ok(relays)
}

/// Track `j` of the section.
fn track(j: usize) -> Result<FullTrackName> {
    Ok(FullTrackName::new(
        TrackNamespace::from_strs(["moq-bench", "cluster", &j.to_string()])?,
        b"objects".to_vec(),
    )?)
}

/// Subscribes to `name`, waiting (up to 10 s) for the relay to learn it over its link.
async fn subscribe(s: &Session, name: &FullTrackName) -> Result<TrackConsumer> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match s
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
        {
            Ok(t) => return Ok(t),
            // A relay that has not learned the namespace over its link yet.
            Err(_) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => bail!("SUBSCRIBE: {e}"),
        }
    }
}

/// Every publisher writes `count` objects at once, each at its pacer's rate.
async fn pace(
    publishers: &[PublisherSide],
    pacers: &mut [Pacer],
    count: u64,
    measured: bool,
) -> Result<()> {
    let all = publishers
        .iter()
        .zip(pacers.iter_mut())
        .map(|(p, pacer)| pacer.publish(&p.track, count, measured));
    futures::future::try_join_all(all).await.map(|_| ())
}

async fn measure(cfg: &ClusterConfig, k: usize) -> Result<ClusterMeasurement> {
    let relays = start(cfg, k).await?;
    let urls: Vec<String> = relays.iter().map(|m| m.process.url()).collect();
    let names: Vec<FullTrackName> = (0..cfg.publishers.max(1))
        .map(track)
        .collect::<Result<_>>()?;
    let mut publishers = Vec::new();
    for (j, name) in names.iter().enumerate() {
        let url = urls.get(j % k).context("no relay")?;
        publishers
            .push(PublisherSide::start_named(url, PublishModel::Namespace, name.clone()).await?);
    }
    let client = app_client(&[VERSION])?;
    let connected: Vec<Result<Session>> =
        futures::stream::iter(urls.iter().cycle().take(cfg.subscriptions).cloned())
            .map(|url| {
                let client = client.clone();
                async move { Ok(client.connect(&url).await?) }
            })
            // In order: session i is on relay i mod k.
            .buffered(16)
            .collect()
            .await;
    let sessions: Vec<Session> = connected.into_iter().collect::<Result<_>>()?;
    let recorder = Arc::new(Recorder::default());
    let mut followers = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        // Subscription i, on relay i mod k, reads track (i / k) mod the tracks: every relay's
        // subscriptions read every track (with i mod the tracks, k = 8 and 4 tracks would give
        // each relay one).
        let name = names.get((i / k) % names.len()).context("no track")?;
        let t = subscribe(s, name).await?;
        followers.push(tokio::spawn(follow(t, recorder.clone())));
    }
    let mut pacers: Vec<Pacer> = publishers
        .iter()
        .map(|_| Pacer::new(cfg.rate, cfg.size, 1))
        .collect();
    let warm = (cfg.warmup.as_secs_f64() * f64::from(cfg.rate)).round() as u64;
    pace(&publishers, &mut pacers, warm, false).await?;
    let cpu = |rs: &[Member]| -> Result<Vec<f64>> {
        rs.iter().map(|r| r.process.cpu_seconds()).collect()
    };
    let cpu0 = cpu(&relays)?;
    let measured = (cfg.duration.as_secs_f64() * f64::from(cfg.rate)).round() as u64;
    pace(&publishers, &mut pacers, measured, true).await?;
    pacers.iter_mut().for_each(Pacer::finish);
    let expected = measured * cfg.subscriptions as u64;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && recorder.delivered() < expected {
        // The recorder has no signal to wait on; poll the count.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu1 = cpu(&relays)?;
    let per_relay = relays
        .iter()
        .zip(cpu0.iter().zip(&cpu1))
        .map(|(m, (a, b))| {
            Ok(RelayFigures {
                cpu_seconds: b - a,
                upstreams: m.upstreams()?,
            })
        })
        .collect::<Result<_>>()?;
    let delivered = recorder.delivered();
    for f in followers {
        f.abort();
    }
    for s in &sessions {
        s.close();
    }
    for p in &publishers {
        p.session.close();
    }
    Ok(ClusterMeasurement {
        relays: k,
        published: measured * names.len() as u64,
        expected,
        delivered,
        per_relay,
        latency: Percentiles::of(recorder.take()),
    })
}
