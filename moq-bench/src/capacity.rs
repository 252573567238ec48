//! Section 6: relay capacity. The highest rate of objects one track can carry through a relay
//! to N subscribers (1000 by default, 1 KiB objects) with no loss and p99 delivery latency
//! under a limit, for our relay and third-party ones. Each step is section 2's fan-out
//! measurement ([`crate::fanout`]) at one rate on a fresh relay process; the rates form a
//! ladder: double while steps pass (halve while they fail), then bisect between the highest
//! pass and the lowest failure above it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::fanout::{self, FanoutConfig, FanoutMeasurement};
use crate::relays::{RelayCommand, RelayKind};

/// What section 6 runs.
#[derive(Clone, Debug)]
pub struct CapacityConfig {
    /// Each step's fan-out measurement (section 2's configuration): object size, group size,
    /// sessions per socket, warm-up, window (`duration`), drain, publishing model and workdir.
    /// Its rate, counts and relays are set per step.
    pub step: FanoutConfig,
    /// Subscriptions to the track, one per subscriber session.
    pub subscribers: usize,
    /// A step passes only if its p99 delivery latency is below this.
    pub p99_limit: Duration,
    /// The first rate tried, objects/s.
    pub start_rate: u32,
    /// The ladder halves no lower than this, objects/s.
    pub min_rate: u32,
    /// The ladder doubles no higher than this, objects/s.
    pub max_rate: u32,
    /// Bisection steps once a pass and a failure above it are known.
    pub bisections: usize,
    /// At most this many steps per relay.
    pub max_steps: usize,
    /// The relays to compare, ours first.
    pub relays: Vec<RelayCommand>,
}

impl CapacityConfig {
    /// The default run: 1000 subscribers, 1 KiB objects in groups of 50, p99 under 100 ms;
    /// from 100 objects/s, doubling or halving (10 to 12 800), then 4 bisections, at most 10
    /// steps per relay; 1 s warm-up, 5 s window, 3 s drain per step (about 10 s a step at
    /// 1000 subscribers on 2 cores, relay start and sessions included).
    pub fn full(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        CapacityConfig {
            step: FanoutConfig {
                min_deliveries: 0,
                drain: Duration::from_secs(3),
                ..FanoutConfig::full(Vec::new(), workdir)
            },
            subscribers: 1000,
            p99_limit: Duration::from_millis(100),
            start_rate: 100,
            min_rate: 10,
            max_rate: 12_800,
            bisections: 4,
            max_steps: 10,
            relays,
        }
    }

    /// A smoke run: 20 subscribers, at most three steps with a 1 s window (one bisection).
    pub fn quick(relays: Vec<RelayCommand>, workdir: PathBuf) -> Self {
        let full = Self::full(relays, workdir);
        CapacityConfig {
            step: FanoutConfig {
                warmup: Duration::from_millis(500),
                duration: Duration::from_secs(1),
                drain: Duration::from_secs(2),
                ..full.step.clone()
            },
            subscribers: 20,
            bisections: 1,
            max_steps: 3,
            ..full
        }
    }

    /// Section 2's configuration for one step at `rate`.
    fn fanout(&self, rate: u32) -> FanoutConfig {
        FanoutConfig {
            rate,
            counts: vec![self.subscribers],
            subs_per_session: 1,
            ..self.step.clone()
        }
    }
}

/// Why a step passed or failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every subscriber received every object of the window, p99 under the limit.
    Pass,
    /// Some objects of the window did not arrive by the end of the drain.
    Loss,
    /// Everything arrived, but p99 was at or over the limit.
    Latency,
    /// Both loss and p99 at or over the limit.
    LossAndLatency,
    /// No measurement: the relay refused, failed or exited (see the step's error).
    Error,
}

impl Verdict {
    /// A short label.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Loss => "FAIL loss",
            Verdict::Latency => "FAIL p99",
            Verdict::LossAndLatency => "FAIL loss+p99",
            Verdict::Error => "FAIL error",
        }
    }
}

/// One rate tried on one relay.
#[derive(Clone, Debug)]
pub struct CapacityStep {
    /// Objects per second published.
    pub rate: u32,
    /// The fan-out measurement, or why there is none.
    pub outcome: Result<FanoutMeasurement, String>,
    /// The verdict.
    pub verdict: Verdict,
    /// Objects of the window not delivered (over all subscribers).
    pub lost: u64,
    /// Wall time of the whole step (relay start, sessions, warm-up, window, drain).
    pub took: Duration,
}

impl CapacityStep {
    /// Judges `outcome` at `rate` against `cfg`: no loss (delivered == published x
    /// subscribers) and p99 under the limit.
    pub fn judge(
        cfg: &CapacityConfig,
        rate: u32,
        outcome: Result<FanoutMeasurement, String>,
        took: Duration,
    ) -> CapacityStep {
        let (verdict, lost) = match &outcome {
            Err(_) => (Verdict::Error, 0),
            Ok(m) => {
                let expected = m.published.saturating_mul(cfg.subscribers as u64);
                let lost = expected.saturating_sub(m.delivered);
                let complete = m.published > 0 && m.delivered == expected;
                let fast = m.latency.p99_ms < cfg.p99_limit.as_secs_f64() * 1e3;
                let verdict = match (complete, fast) {
                    (true, true) => Verdict::Pass,
                    (false, true) => Verdict::Loss,
                    (true, false) => Verdict::Latency,
                    (false, false) => Verdict::LossAndLatency,
                };
                (verdict, lost)
            }
        };
        CapacityStep {
            rate,
            outcome,
            verdict,
            lost,
            took,
        }
    }

    /// True if the step passed.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }
}

/// The highest passing rate among `steps`, and the lowest failing rate above it (above 0 when
/// none passed).
pub fn bracket(steps: &[CapacityStep]) -> (Option<u32>, Option<u32>) {
    let pass = steps.iter().filter(|s| s.passed()).map(|s| s.rate).max();
    let fail = steps
        .iter()
        .filter(|s| !s.passed() && s.rate > pass.unwrap_or(0))
        .map(|s| s.rate)
        .min();
    (pass, fail)
}

/// The rate of the next step after `steps`, or `None` when the ladder is done: the start rate
/// first; then double while every step passed, halve while every step failed; once a pass and
/// a failure above it are known, `cfg.bisections` midpoints between them.
pub fn next_rate(cfg: &CapacityConfig, steps: &[CapacityStep]) -> Option<u32> {
    let min = cfg.min_rate.max(1);
    let max = cfg.max_rate.max(min);
    if steps.len() >= cfg.max_steps {
        return None;
    }
    if steps.is_empty() {
        return Some(cfg.start_rate.clamp(min, max));
    }
    // Steps run since the bracket first closed.
    let closed_at = (1..=steps.len()).find(|&i| {
        let (p, f) = bracket(steps.get(..i).unwrap_or_default());
        p.is_some() && f.is_some()
    });
    let bisected = closed_at.map_or(0, |i| steps.len() - i);
    match bracket(steps) {
        (Some(pass), None) => (pass < max).then(|| pass.saturating_mul(2).min(max)),
        (None, Some(fail)) => (fail > min).then(|| (fail / 2).max(min)),
        (Some(pass), Some(fail)) => {
            (bisected < cfg.bisections && fail - pass > 1).then(|| pass + (fail - pass) / 2)
        }
        (None, None) => None,
    }
}

/// One relay's ladder.
#[derive(Clone, Debug)]
pub struct RelayCapacity {
    /// Which relay.
    pub kind: RelayKind,
    /// The steps, in the order they ran.
    pub steps: Vec<CapacityStep>,
}

impl RelayCapacity {
    /// The highest passing rate, objects/s per subscriber.
    pub fn capacity(&self) -> Option<u32> {
        bracket(&self.steps).0
    }

    /// The lowest failing rate above the capacity (above 0 if no step passed).
    pub fn first_failure(&self) -> Option<u32> {
        bracket(&self.steps).1
    }
}

/// The result of section 6.
#[derive(Clone, Debug)]
pub struct CapacityReport {
    /// The configuration it ran with.
    pub config: CapacityConfig,
    /// Every relay's ladder, ours first.
    pub relays: Vec<RelayCapacity>,
    /// Relays that were not run, and why.
    pub skipped: Vec<String>,
}

impl CapacityReport {
    /// The ladder of `kind`, if it ran.
    pub fn get(&self, kind: RelayKind) -> Option<&RelayCapacity> {
        self.relays.iter().find(|r| r.kind == kind)
    }

    /// The section as text.
    pub fn render(&self) -> String {
        let c = &self.config;
        let n = c.subscribers as u64;
        let mut out = format!(
            "{} subscribers (one subscription per session, {} sessions per client UDP socket) \
             to one track of {} B objects in groups of {}; draft-18 over raw QUIC, same clients \
             for every relay, fresh relay per step; a step passes when every subscriber \
             receives every object of its {:.0} s window (after {:.1} s warm-up, within a {:.0} \
             s drain) and p99 < {:.0} ms; ladder from {} objects/s, doubling while passing / \
             halving while failing ({}..{}), then {} bisection(s), at most {} steps per relay\n",
            c.subscribers,
            c.step.sessions_per_client,
            c.step.size,
            c.step.group_size,
            c.step.duration.as_secs_f64(),
            c.step.warmup.as_secs_f64(),
            c.step.drain.as_secs_f64(),
            c.p99_limit.as_secs_f64() * 1e3,
            c.start_rate,
            c.min_rate,
            c.max_rate,
            c.bisections,
            c.max_steps,
        );
        out.push_str(&format!("  {}\n", c.step.pinning.describe()));
        for r in &c.relays {
            out.push_str(&format!("  {}\n", r.describe()));
        }
        for s in &self.skipped {
            out.push_str(&format!("  skipped: {s}\n"));
        }
        out.push_str(&format!(
            "  {:<11} {:>15} {:>14} {:>20}\n",
            "relay", "capacity obj/s", "deliveries/s", "first failure above"
        ));
        for r in &self.relays {
            let fail = r.first_failure().map_or_else(
                || "none".to_string(),
                |f| {
                    let why = r
                        .steps
                        .iter()
                        .find(|s| s.rate == f && !s.passed())
                        .map_or("", |s| s.verdict.label());
                    format!("{f} ({why})")
                },
            );
            match r.capacity() {
                Some(cap) => out.push_str(&format!(
                    "  {:<11} {:>15} {:>14} {:>20}\n",
                    r.kind.label(),
                    cap,
                    u64::from(cap) * n,
                    fail
                )),
                None => out.push_str(&format!(
                    "  {:<11} {:>15} {:>14} {:>20}\n",
                    r.kind.label(),
                    "none passed",
                    "-",
                    fail
                )),
            }
        }
        out.push_str(&format!(
            "  steps, in the order run (CPU = share of one core over the window; bench = \
             publisher and all subscribers):\n  {:<11} {:>6} {:>7} {:>9} {:>9} {:>8} {:>8} \
             {:>6} {:>6} {:>5}  verdict\n",
            "relay",
            "rate",
            "sent/s",
            "delivered",
            "lost",
            "p50 ms",
            "p99 ms",
            "relay",
            "bench",
            "s"
        ));
        for r in &self.relays {
            for s in &r.steps {
                match &s.outcome {
                    Ok(m) => {
                        let secs = m.window_secs();
                        out.push_str(&format!(
                            "  {:<11} {:>6} {:>7.0} {:>8.2}% {:>9} {:>8.1} {:>8.1} {:>5.0}% \
                             {:>5.0}% {:>5.0}  {}\n",
                            r.kind.label(),
                            s.rate,
                            m.published as f64 / secs,
                            100.0 * m.delivered as f64 / (m.published as f64 * n as f64).max(1.0),
                            s.lost,
                            m.latency.p50_ms,
                            m.latency.p99_ms,
                            100.0 * m.window_relay_cpu_seconds / secs,
                            100.0 * m.window_bench_cpu_seconds / secs,
                            s.took.as_secs_f64(),
                            s.verdict.label(),
                        ));
                    }
                    Err(e) => out.push_str(&format!(
                        "  {:<11} {:>6} {:>5.0}s {}: {e}\n",
                        r.kind.label(),
                        s.rate,
                        s.took.as_secs_f64(),
                        s.verdict.label(),
                    )),
                }
            }
        }
        let ours = self.get(RelayKind::Ours);
        for other in self.relays.iter().filter(|r| r.kind != RelayKind::Ours) {
            let k = other.kind.label();
            let line = match (ours.and_then(RelayCapacity::capacity), other.capacity()) {
                (Some(a), Some(b)) => format!(
                    "ours / {k}: {:.2}x capacity ({a} / {b} objects/s)",
                    f64::from(a) / f64::from(b)
                ),
                (Some(a), None) => match other.first_failure() {
                    Some(f) => format!(
                        "ours / {k}: > {:.2}x capacity ({k} passed no step; failed at {f} \
                         objects/s)",
                        f64::from(a) / f64::from(f)
                    ),
                    None => format!("ours / {k}: n/a ({k} ran no step)"),
                },
                (None, _) => format!("ours / {k}: n/a (ours passed no step)"),
            };
            out.push_str(&format!("  {line}\n"));
        }
        out
    }
}

/// Runs section 6: every relay's ladder, each step on a fresh relay process.
pub async fn run(cfg: &CapacityConfig, skipped: Vec<String>) -> CapacityReport {
    let mut relays = Vec::new();
    for relay in &cfg.relays {
        // The publishing model that worked for this relay, once known.
        let mut model = cfg.step.model;
        let mut steps: Vec<CapacityStep> = Vec::new();
        while let Some(rate) = next_rate(cfg, &steps) {
            let started = Instant::now();
            let outcome =
                fanout::run_relay_case(&cfg.fanout(rate), relay, cfg.subscribers, &mut model)
                    .await
                    .map_err(|e| fanout::one_line(&e));
            let step = CapacityStep::judge(cfg, rate, outcome, started.elapsed());
            match &step.outcome {
                Ok(m) => eprintln!(
                    "  {} {rate} obj/s: {} (lost {}, p99 {:.1} ms, {:.0} s)",
                    relay.kind.label(),
                    step.verdict.label(),
                    step.lost,
                    m.latency.p99_ms,
                    step.took.as_secs_f64()
                ),
                Err(e) => eprintln!("  {} {rate} obj/s: {e}", relay.kind.label()),
            }
            steps.push(step);
        }
        relays.push(RelayCapacity {
            kind: relay.kind,
            steps,
        });
    }
    CapacityReport {
        config: cfg.clone(),
        relays,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::fanout::PublishModel;
    use crate::latency::Percentiles;

    fn cfg() -> CapacityConfig {
        CapacityConfig::full(Vec::new(), PathBuf::new())
    }

    fn measured(published: u64, delivered: u64, p99_ms: f64) -> FanoutMeasurement {
        FanoutMeasurement {
            model: PublishModel::Namespace,
            sessions: 1000,
            published,
            delivered,
            cpu_seconds: 1.0,
            latency: Percentiles {
                p50_ms: 1.0,
                p99_ms,
                max_ms: p99_ms,
            },
            rss_kib: 0,
            window_elapsed: Duration::from_secs(4),
            window_relay_cpu_seconds: 1.0,
            window_bench_cpu_seconds: 1.0,
        }
    }

    /// A ladder against a relay whose capacity is `cap` objects/s.
    fn ladder(cfg: &CapacityConfig, cap: u32) -> Vec<CapacityStep> {
        let mut steps = Vec::new();
        while let Some(rate) = next_rate(cfg, &steps) {
            let m = if rate <= cap {
                measured(400, 400_000, 50.0)
            } else {
                measured(400, 399_000, 50.0)
            };
            steps.push(CapacityStep::judge(cfg, rate, Ok(m), Duration::ZERO));
        }
        steps
    }

    fn rates(steps: &[CapacityStep]) -> Vec<u32> {
        steps.iter().map(|s| s.rate).collect()
    }

    #[test]
    fn verdicts_need_every_object_and_p99_under_the_limit() {
        let c = cfg();
        let judge = |m| CapacityStep::judge(&c, 100, Ok(m), Duration::ZERO);
        assert_eq!(judge(measured(400, 400_000, 99.9)).verdict, Verdict::Pass);
        let lossy = judge(measured(400, 399_999, 10.0));
        assert_eq!((lossy.verdict, lossy.lost), (Verdict::Loss, 1));
        assert_eq!(
            judge(measured(400, 400_000, 100.0)).verdict,
            Verdict::Latency
        );
        assert_eq!(
            judge(measured(400, 1, 500.0)).verdict,
            Verdict::LossAndLatency
        );
        assert_eq!(judge(measured(0, 0, 0.0)).verdict, Verdict::Loss);
        let err = CapacityStep::judge(&c, 100, Err("refused".into()), Duration::ZERO);
        assert_eq!(err.verdict, Verdict::Error);
    }

    #[test]
    fn ladder_doubles_then_bisects() {
        let steps = ladder(&cfg(), 700);
        assert_eq!(rates(&steps), vec![100, 200, 400, 800, 600, 700, 750, 725]);
        assert_eq!(bracket(&steps), (Some(700), Some(725)));
    }

    #[test]
    fn ladder_halves_then_bisects() {
        let steps = ladder(&cfg(), 60);
        assert_eq!(rates(&steps), vec![100, 50, 75, 62, 56, 59]);
        assert_eq!(bracket(&steps), (Some(59), Some(62)));
    }

    #[test]
    fn ladder_stops_at_its_bounds() {
        let c = cfg();
        assert_eq!(rates(&ladder(&c, 0)), vec![100, 50, 25, 12, 10]);
        let mut fast = cfg();
        fast.max_rate = 1000;
        assert_eq!(
            rates(&ladder(&fast, u32::MAX)),
            vec![100, 200, 400, 800, 1000]
        );
        let mut short = cfg();
        short.max_steps = 3;
        assert_eq!(rates(&ladder(&short, 700)), vec![100, 200, 400]);
    }

    #[test]
    fn report_renders_capacity_and_ratios() {
        let c = cfg();
        let step = |rate, ok| {
            let m = if ok {
                measured(400, 400_000, 20.0)
            } else {
                measured(400, 400_000, 300.0)
            };
            CapacityStep::judge(&c, rate, Ok(m), Duration::ZERO)
        };
        let report = CapacityReport {
            config: c.clone(),
            relays: vec![
                RelayCapacity {
                    kind: RelayKind::Ours,
                    steps: vec![step(100, true), step(200, false)],
                },
                RelayCapacity {
                    kind: RelayKind::MoqDev,
                    steps: vec![step(100, false), step(50, true)],
                },
                RelayCapacity {
                    kind: RelayKind::Cloudflare,
                    steps: vec![CapacityStep::judge(
                        &c,
                        100,
                        Err("relay exited".into()),
                        Duration::ZERO,
                    )],
                },
            ],
            skipped: Vec::new(),
        };
        let text = report.render();
        assert!(text.contains("ours / moq-dev: 2.00x capacity"), "{text}");
        assert!(
            text.contains("ours / cloudflare: > 1.00x capacity"),
            "{text}"
        );
        assert!(
            text.contains("FAIL p99") && text.contains("relay exited"),
            "{text}"
        );
        assert!(text.contains("100000"), "{text}");
    }
}
