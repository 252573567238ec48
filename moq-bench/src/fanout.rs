//! Section 2: relay fan-out. One track published at a fixed rate through a relay process to N
//! subscriptions spread over several sessions; the relay's CPU time per delivered object and
//! the delivery latency, for our relay and third-party ones, all at draft-18 over raw QUIC with
//! the same clients (moq-client over moq-transport).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use futures::StreamExt;
use moq_client::{
    FullTrackName, NamespaceHandle, Session, SubscribeOptions, TrackConsumer, TrackNamespace,
    TrackProducer, Version,
};

use crate::latency::{self, Percentiles, Recorder};
use crate::pin::Pinning;
use crate::relays::{RelayCommand, RelayKind, RelayProcess, app_client};

/// The draft every relay is driven at in this section.
pub const VERSION: Version = Version::Draft18;

/// How the publisher offers the track to the relay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishModel {
    /// PUBLISH_NAMESPACE; the relay SUBSCRIBEs upstream when the first subscriber arrives.
    Namespace,
    /// PUBLISH of the track itself.
    Publish,
}

impl PublishModel {
    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            PublishModel::Namespace => "PUBLISH_NAMESPACE",
            PublishModel::Publish => "PUBLISH",
        }
    }
}

/// What section 2 runs.
#[derive(Clone, Debug)]
pub struct FanoutConfig {
    /// Objects per second.
    pub rate: u32,
    /// Object size in bytes.
    pub size: usize,
    /// Objects per group (each group is one subgroup stream per subscription).
    pub group_size: u64,
    /// Subscription counts to run.
    pub counts: Vec<usize>,
    /// Subscriptions per subscriber session. 1 by default: at draft-18 a second subscription
    /// to the same track in one session is a DUPLICATE_SUBSCRIPTION error (removed in
    /// draft-19), and Cloudflare's relay enforces it.
    pub subs_per_session: usize,
    /// Subscriber sessions sharing one client endpoint (UDP socket).
    pub sessions_per_client: usize,
    /// The window is lengthened until at least this many deliveries are expected (the CPU
    /// clock ticks at 10 ms).
    pub min_deliveries: u64,
    /// Publishing before the measurement window (not counted).
    pub warmup: Duration,
    /// The measurement window.
    pub duration: Duration,
    /// How long to wait for stragglers after the last object.
    pub drain: Duration,
    /// The relays to compare, ours first.
    pub relays: Vec<RelayCommand>,
    /// Forces one publishing model; `None` tries PUBLISH_NAMESPACE, then PUBLISH.
    pub model: Option<PublishModel>,
    /// Where relay logs and certificates go.
    pub workdir: PathBuf,
    /// Where the relay and the bench run (by default the relay on one CPU, the bench on
    /// another).
    pub pinning: Pinning,
}

impl FanoutConfig {
    /// The default run: 100 objects/s of 1 KiB, groups of 50, N = 10, 100, 1000 (one
    /// subscription per session, 50 sessions per UDP socket), 1 s warm-up, 5 s window (longer
    /// for small N, for at least 10 000 deliveries).
    pub fn full(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        FanoutConfig {
            rate: 100,
            size: 1024,
            group_size: 50,
            counts: vec![10, 100, 1000],
            subs_per_session: 1,
            sessions_per_client: 50,
            min_deliveries: 10_000,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(5),
            drain: Duration::from_secs(5),
            relays,
            model: None,
            workdir,
            pinning: Pinning::plan(false),
        }
    }

    /// A smoke run: N = 10, 20; 1 s window.
    pub fn quick(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        FanoutConfig {
            counts: vec![10, 20],
            min_deliveries: 0,
            warmup: Duration::from_millis(500),
            duration: Duration::from_secs(1),
            drain: Duration::from_secs(2),
            ..Self::full(relays, workdir)
        }
    }
}

/// One relay at one N.
#[derive(Clone, Debug)]
pub struct FanoutMeasurement {
    /// How the track reached the relay.
    pub model: PublishModel,
    /// Subscriber sessions.
    pub sessions: usize,
    /// Measured objects published.
    pub published: u64,
    /// Measured objects delivered, over all subscriptions.
    pub delivered: u64,
    /// Relay CPU seconds (user + system) over the window and drain.
    pub cpu_seconds: f64,
    /// Delivery latency.
    pub latency: Percentiles,
    /// The relay's resident memory at the end, KiB.
    pub rss_kib: u64,
    /// Wall time the measured objects took to publish (the window as it ran).
    pub window_elapsed: Duration,
    /// Relay CPU seconds over the window alone (no drain).
    pub window_relay_cpu_seconds: f64,
    /// This process's CPU seconds (publisher and every subscriber) over the window alone.
    pub window_bench_cpu_seconds: f64,
}

impl FanoutMeasurement {
    /// Relay CPU microseconds per delivered object.
    pub fn cpu_us_per_object(&self) -> f64 {
        if self.delivered == 0 {
            return f64::NAN;
        }
        self.cpu_seconds * 1e6 / self.delivered as f64
    }

    /// The window's wall time in seconds (never 0).
    pub fn window_secs(&self) -> f64 {
        self.window_elapsed.as_secs_f64().max(1e-9)
    }
}

/// One cell of the table.
#[derive(Clone, Debug)]
pub struct FanoutCase {
    /// Which relay.
    pub kind: RelayKind,
    /// N.
    pub subscriptions: usize,
    /// The measurement, or why there is none.
    pub outcome: Result<FanoutMeasurement, String>,
}

/// The result of section 2.
#[derive(Clone, Debug)]
pub struct FanoutReport {
    /// The configuration it ran with.
    pub config: FanoutConfig,
    /// Every cell.
    pub cases: Vec<FanoutCase>,
    /// Relays that were not run, and why.
    pub skipped: Vec<String>,
}

impl FanoutReport {
    fn get(&self, kind: RelayKind, n: usize) -> Option<&FanoutCase> {
        self.cases
            .iter()
            .find(|c| c.kind == kind && c.subscriptions == n)
    }

    /// The section as text.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "{} objects/s of {} B, groups of {} objects, {:.0} s window after {:.1} s warm-up; \
             draft-18 over raw QUIC (moqt://), same clients for every relay; {} \
             subscription(s) per subscriber session, {} sessions per client UDP socket; window \
             lengthened to >= {} deliveries; relay CPU = utime+stime of /proc/<pid>/stat \
             (CLK_TCK {}) over the window and the drain; relay, bench = share of one core over \
             the window (bench = publisher and all subscribers)\n",
            c.rate,
            c.size,
            c.group_size,
            c.duration.as_secs_f64(),
            c.warmup.as_secs_f64(),
            c.subs_per_session,
            c.sessions_per_client,
            c.min_deliveries,
            crate::procfs::clock_ticks(),
        );
        out.push_str(&format!("  {}\n", c.pinning.describe()));
        for r in &c.relays {
            out.push_str(&format!("  {}\n", r.describe()));
        }
        for s in &self.skipped {
            out.push_str(&format!("  skipped: {s}\n"));
        }
        out.push_str(&format!(
            "  {:<11} {:>5} {:>4} {:>17} {:>9} {:>12} {:>9} {:>9} {:>9} {:>6} {:>6}\n",
            "relay",
            "N",
            "sess",
            "model",
            "delivered",
            "CPU µs/obj",
            "p50 ms",
            "p99 ms",
            "RSS MiB",
            "relay",
            "bench"
        ));
        for case in &self.cases {
            match &case.outcome {
                Ok(m) => out.push_str(&format!(
                    "  {:<11} {:>5} {:>4} {:>17} {:>8.1}% {:>12.2} {:>9.2} {:>9.2} {:>9.1} \
                     {:>5.0}% {:>5.0}%\n",
                    case.kind.label(),
                    case.subscriptions,
                    m.sessions,
                    m.model.label(),
                    100.0 * m.delivered as f64
                        / (m.published as f64 * case.subscriptions as f64).max(1.0),
                    m.cpu_us_per_object(),
                    m.latency.p50_ms,
                    m.latency.p99_ms,
                    m.rss_kib as f64 / 1024.0,
                    100.0 * m.window_relay_cpu_seconds / m.window_secs(),
                    100.0 * m.window_bench_cpu_seconds / m.window_secs(),
                )),
                Err(e) => out.push_str(&format!(
                    "  {:<11} {:>5} n/a ({e})\n",
                    case.kind.label(),
                    case.subscriptions
                )),
            }
        }
        let others: Vec<RelayKind> = c
            .relays
            .iter()
            .map(|r| r.kind)
            .filter(|k| *k != RelayKind::Ours)
            .collect();
        if !others.is_empty() {
            out.push_str("  ours / theirs (below 1 = ours uses less CPU / has lower latency):\n");
            for k in others {
                for &n in &c.counts {
                    let (Some(ours), Some(theirs)) = (self.get(RelayKind::Ours, n), self.get(k, n))
                    else {
                        continue;
                    };
                    match (&ours.outcome, &theirs.outcome) {
                        (Ok(a), Ok(b)) => out.push_str(&format!(
                            "    vs {:<11} N={:<5} CPU/obj {:>5.2}x  p50 {:>5.2}x  p99 {:>5.2}x\n",
                            k.label(),
                            n,
                            a.cpu_us_per_object() / b.cpu_us_per_object(),
                            a.latency.p50_ms / b.latency.p50_ms,
                            a.latency.p99_ms / b.latency.p99_ms,
                        )),
                        _ => out.push_str(&format!(
                            "    vs {:<11} N={:<5} n/a (a side has no measurement)\n",
                            k.label(),
                            n
                        )),
                    }
                }
            }
        }
        out
    }
}

/// Runs section 2: every relay at every N, each case on a fresh relay process.
pub async fn run(cfg: &FanoutConfig, skipped: Vec<String>) -> FanoutReport {
    let mut cases = Vec::new();
    for relay in &cfg.relays {
        // The model that worked for this relay, once known.
        let mut model = cfg.model;
        for &n in &cfg.counts {
            let outcome = run_relay_case(cfg, relay, n, &mut model)
                .await
                .map_err(|e| one_line(&e));
            if let Err(e) = &outcome {
                eprintln!("  {} N={n}: {e}", relay.kind.label());
            }
            cases.push(FanoutCase {
                kind: relay.kind,
                subscriptions: n,
                outcome,
            });
        }
    }
    FanoutReport {
        config: cfg.clone(),
        cases,
        skipped,
    }
}

/// An error chain on one line, shortened.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut s = format!("{e:#}").replace('\n', " ");
    if s.len() > 160 {
        let mut cut = 157;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// The measurement window for N subscriptions: the configured one, lengthened until at least
/// `min_deliveries` deliveries are expected.
pub fn window(cfg: &FanoutConfig, n: usize) -> Duration {
    let needed = cfg.min_deliveries as f64 / (f64::from(cfg.rate.max(1)) * n.max(1) as f64);
    cfg.duration.max(Duration::from_secs_f64(needed))
}

/// One case on a fresh relay process: `n` subscriptions at `cfg.rate`, with the publishing
/// model in `model` (tried in turn and remembered when `None`).
pub(crate) async fn run_relay_case(
    cfg: &FanoutConfig,
    relay: &RelayCommand,
    n: usize,
    model: &mut Option<PublishModel>,
) -> Result<FanoutMeasurement> {
    let candidates = match *model {
        Some(m) => vec![m],
        None => vec![PublishModel::Namespace, PublishModel::Publish],
    };
    let mut errors = Vec::new();
    let relay = RelayCommand {
        cpus: cfg.pinning.relay.clone(),
        ..relay.clone()
    };
    // The bench's threads on their CPUs for the case; their own back when it ends.
    let _pinned = cfg.pinning.pin_bench()?;
    for m in candidates {
        let mut process = RelayProcess::start(&relay, &cfg.workdir).await?;
        let res = tokio::time::timeout(
            cfg.warmup + window(cfg, n) + cfg.drain + Duration::from_secs(90),
            measure(cfg, &mut process, n, m),
        )
        .await
        .unwrap_or_else(|_| Err(anyhow!("timed out")));
        match res {
            Ok(r) => {
                *model = Some(m);
                return Ok(r);
            }
            Err(e) => {
                let running = process.is_running();
                errors.push(format!("{}: {}", m.label(), one_line(&e)));
                if !running {
                    errors.push(format!("relay exited; log: {}", process.log_tail().trim()));
                    break;
                }
            }
        }
    }
    bail!("{}", errors.join("; "))
}

/// The publishing side of one case.
pub(crate) struct PublisherSide {
    pub(crate) session: Session,
    _namespace: Option<NamespaceHandle>,
    pub(crate) track: TrackProducer,
}

pub(crate) fn bench_track() -> Result<FullTrackName> {
    Ok(FullTrackName::new(
        TrackNamespace::from_strs(["moq-bench", "fanout"])?,
        b"objects".to_vec(),
    )?)
}

impl PublisherSide {
    pub(crate) async fn start(url: &str, model: PublishModel) -> Result<PublisherSide> {
        Self::start_named(url, model, bench_track()?).await
    }

    /// [`PublisherSide::start`] for the track `name`.
    pub(crate) async fn start_named(
        url: &str,
        model: PublishModel,
        name: FullTrackName,
    ) -> Result<PublisherSide> {
        let client = app_client(&[VERSION])?;
        let session = client.connect(url).await.context("publisher connect")?;
        let track = session.publisher().create_track(name.clone())?;
        match model {
            PublishModel::Namespace => {
                let ns = session
                    .publisher()
                    .publish_namespace(name.namespace.clone())?;
                tokio::time::timeout(Duration::from_secs(5), ns.announced())
                    .await
                    .context("PUBLISH_NAMESPACE unanswered")?
                    .context("PUBLISH_NAMESPACE")?;
                Ok(PublisherSide {
                    session,
                    _namespace: Some(ns),
                    track,
                })
            }
            PublishModel::Publish => {
                tokio::time::timeout(Duration::from_secs(5), session.publish(&track))
                    .await
                    .context("PUBLISH unanswered")?
                    .context("PUBLISH")?;
                Ok(PublisherSide {
                    session,
                    _namespace: None,
                    track,
                })
            }
        }
    }
}

/// Follows one subscription: every group's objects go to the recorder. Each subgroup is read
/// by a task of its own rather than through [`moq_client::GroupConsumer::next_object`], whose
/// wait on the group's next subgroup and on each subgroup being read costs a few percent of
/// the bench's core per object: at N = 1,000 that core is near saturation, and the bench is
/// there to measure the relay.
pub(crate) async fn follow(mut t: TrackConsumer, rec: Arc<Recorder>) {
    while let Some(Ok(mut g)) = t.next().await {
        let rec = rec.clone();
        tokio::spawn(async move {
            while let Some(mut sg) = g.next_subgroup().await {
                let rec = rec.clone();
                tokio::spawn(async move {
                    while let Some(Ok(o)) = sg.next_object().await {
                        rec.record(&o.payload);
                    }
                });
            }
        });
    }
}

/// Publishes objects at a fixed rate, continuing the track's groups across calls.
pub(crate) struct Pacer {
    tick: tokio::time::Interval,
    size: usize,
    group_size: u64,
    seq: u64,
    in_group: u64,
    group: Option<moq_client::GroupProducer>,
}

impl Pacer {
    pub(crate) fn new(rate: u32, size: usize, group_size: u64) -> Pacer {
        Pacer {
            tick: tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate.max(1)))),
            size,
            group_size: group_size.max(1),
            seq: 0,
            in_group: 0,
            group: None,
        }
    }

    /// Publishes `count` objects, one per tick.
    pub(crate) async fn publish(
        &mut self,
        track: &TrackProducer,
        count: u64,
        measured: bool,
    ) -> Result<()> {
        for _ in 0..count {
            self.tick.tick().await;
            let g = match &mut self.group {
                Some(g) => g,
                None => self.group.insert(track.append_group()?),
            };
            g.write(latency::payload(self.size, self.seq, measured))?;
            self.seq += 1;
            self.in_group += 1;
            if self.in_group >= self.group_size {
                self.in_group = 0;
                if let Some(g) = self.group.take() {
                    g.finish()?;
                }
            }
        }
        Ok(())
    }

    /// Ends the current group.
    pub(crate) fn finish(&mut self) {
        if let Some(g) = self.group.take() {
            // Fails only if the track ended already: nothing left to finish.
            let _ = g.finish();
        }
    }
}

async fn measure(
    cfg: &FanoutConfig,
    relay: &mut RelayProcess,
    n: usize,
    model: PublishModel,
) -> Result<FanoutMeasurement> {
    let url = relay.url();
    let publisher = PublisherSide::start(&url, model).await?;
    let per = cfg.subs_per_session.max(1);
    let sessions = n.div_ceil(per);
    let name = bench_track()?;

    // Subscriber sessions, `sessions_per_client` to a client endpoint (UDP socket).
    let per_client = cfg.sessions_per_client.max(1);
    let clients = (0..sessions.div_ceil(per_client))
        .map(|_| app_client(&[VERSION]))
        .collect::<Result<Vec<_>>>()?;
    let connected: Vec<Result<Session>> = futures::stream::iter(0..sessions)
        .map(|i| {
            let url = url.clone();
            let client = clients.get(i / per_client).cloned();
            async move {
                let client = client.context("no client")?;
                client
                    .connect(&url)
                    .await
                    .map_err(|e| anyhow!("subscriber connect: {e}"))
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let subscribers: Vec<Session> = connected.into_iter().collect::<Result<_>>()?;

    // N subscriptions, `per` per session; one recorder per session.
    let recorders: Vec<Arc<Recorder>> = (0..sessions)
        .map(|_| Arc::new(Recorder::default()))
        .collect();
    let mut plan = Vec::new();
    for i in 0..n {
        let s = i / per;
        if let (Some(session), Some(rec)) = (subscribers.get(s), recorders.get(s)) {
            plan.push((session.clone(), rec.clone()));
        }
    }
    let subscribed: Vec<Result<(TrackConsumer, Arc<Recorder>)>> = futures::stream::iter(plan)
        .map(|(session, rec)| {
            let name = name.clone();
            async move {
                let t = tokio::time::timeout(
                    Duration::from_secs(10),
                    session
                        .subscriber()
                        .subscribe(name, SubscribeOptions::default()),
                )
                .await
                .context("SUBSCRIBE unanswered within 10 s")?
                .context("SUBSCRIBE")?;
                anyhow::Ok((t, rec))
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let mut followers = Vec::new();
    let mut errors: HashMap<String, usize> = HashMap::new();
    for s in subscribed {
        match s {
            Ok((t, rec)) => followers.push(tokio::spawn(follow(t, rec))),
            Err(e) => *errors.entry(one_line(&e)).or_default() += 1,
        }
    }
    if let Some((e, count)) = errors.into_iter().next() {
        bail!("{count} of {n} subscriptions failed: {e}");
    }

    let mut pacer = Pacer::new(cfg.rate, cfg.size, cfg.group_size);
    let warmup = (cfg.warmup.as_secs_f64() * f64::from(cfg.rate)).round() as u64;
    pacer.publish(&publisher.track, warmup, false).await?;
    let warm: u64 = recorders.iter().map(|r| r.warmup()).sum();
    if warmup > 0 && warm == 0 {
        // Give a slow start one more second before calling it broken.
        tokio::time::sleep(Duration::from_secs(1)).await;
        if recorders.iter().map(|r| r.warmup()).sum::<u64>() == 0 {
            bail!("no object reached any subscriber during the warm-up");
        }
    }

    let cpu0 = relay.cpu_seconds()?;
    let bench0 = crate::procfs::cpu_seconds(std::process::id())?;
    let started = Instant::now();
    let measured = (window(cfg, n).as_secs_f64() * f64::from(cfg.rate)).round() as u64;
    pacer.publish(&publisher.track, measured, true).await?;
    pacer.finish();
    let window_elapsed = started.elapsed();
    let window_relay_cpu_seconds = relay.cpu_seconds()? - cpu0;
    let window_bench_cpu_seconds = crate::procfs::cpu_seconds(std::process::id())? - bench0;
    let expected = measured * n as u64;
    let deadline = Instant::now() + cfg.drain;
    while Instant::now() < deadline {
        if recorders.iter().map(|r| r.delivered()).sum::<u64>() >= expected {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu1 = relay.cpu_seconds()?;
    let rss_kib = relay.rss_kib()?;
    let delivered: u64 = recorders.iter().map(|r| r.delivered()).sum();
    let mut all = Vec::new();
    for r in &recorders {
        all.extend(r.take());
    }
    for f in followers {
        f.abort();
    }
    for s in &subscribers {
        s.close();
    }
    publisher.session.close();
    if delivered == 0 {
        bail!("no measured object was delivered");
    }
    Ok(FanoutMeasurement {
        model,
        sessions,
        published: measured,
        delivered,
        cpu_seconds: cpu1 - cpu0,
        latency: Percentiles::of(all),
        rss_kib,
        window_elapsed,
        window_relay_cpu_seconds,
        window_bench_cpu_seconds,
    })
}
