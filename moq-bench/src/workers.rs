//! Section 8: our relay with 1 and 2 tokio worker threads (`moq-relay --worker-threads`).
//! For each thread count and each N: section 2's fan-out at its rate (relay CPU per delivered
//! object, latency) and section 6's capacity ladder at N subscribers. With one worker the
//! relay runs on one CPU and the bench on another (as sections 2 and 6); with more, the relay
//! may use every CPU while the bench keeps its one, so what the extra workers gain shows as
//! relay CPU above 100 % of a core and as capacity.

use std::path::PathBuf;

use crate::capacity::{self, CapacityConfig, RelayCapacity};
use crate::fanout::{self, FanoutConfig, FanoutMeasurement};
use crate::pin::{self, Pinning};
use crate::relays::RelayCommand;

/// What section 8 runs.
#[derive(Clone, Debug)]
pub struct WorkersConfig {
    /// Our relay binary (not self-hosted: the flag is the binary's).
    pub relay: RelayCommand,
    /// Worker thread counts.
    pub threads: Vec<usize>,
    /// Subscriber counts (one subscription per session).
    pub counts: Vec<usize>,
    /// The fan-out measurement (its rate, object size, window); `counts` and `relays` are set
    /// per case.
    pub fanout: FanoutConfig,
    /// The capacity ladder; `subscribers` and `relays` are set per case.
    pub capacity: CapacityConfig,
}

impl WorkersConfig {
    /// The default run: 1 and 2 workers at N = 100 and 1000; section 2's fan-out at 100
    /// objects/s and section 6's ladder (at most 8 steps each).
    pub fn full(relay: RelayCommand, workdir: PathBuf) -> Self {
        WorkersConfig {
            relay,
            threads: vec![1, 2],
            counts: vec![100, 1000],
            fanout: FanoutConfig::full(Vec::new(), workdir.clone()),
            capacity: CapacityConfig {
                max_steps: 8,
                ..CapacityConfig::full(Vec::new(), workdir)
            },
        }
    }

    /// A smoke run: N = 10, 1 s windows, two ladder steps.
    pub fn quick(relay: RelayCommand, workdir: PathBuf) -> Self {
        let mut capacity = CapacityConfig::quick(Vec::new(), workdir.clone());
        capacity.max_steps = 2;
        WorkersConfig {
            relay,
            threads: vec![1, 2],
            counts: vec![10],
            fanout: FanoutConfig::quick(Vec::new(), workdir),
            capacity,
        }
    }

    /// Where the relay and the bench run with `threads` workers: the base pinning (relay on
    /// one CPU, bench on another) for one worker; the relay on every usable CPU for more.
    fn pinning(&self, threads: usize) -> Pinning {
        let base = self.fanout.pinning.clone();
        if threads <= 1 {
            return base;
        }
        match pin::allowed_cpus() {
            Ok(all) => base.with_relay(all),
            Err(_) => base,
        }
    }
}

/// One thread count at one N.
#[derive(Clone, Debug)]
pub struct WorkersCase {
    /// Tokio worker threads of the relay.
    pub threads: usize,
    /// Subscribers.
    pub subscribers: usize,
    /// Where the relay and the bench ran.
    pub pinning: Pinning,
    /// Section 2's measurement at the fan-out rate.
    pub fanout: Result<FanoutMeasurement, String>,
    /// Section 6's ladder.
    pub capacity: RelayCapacity,
}

/// The result of section 8.
#[derive(Clone, Debug)]
pub struct WorkersReport {
    /// The configuration it ran with.
    pub config: WorkersConfig,
    /// Every case.
    pub cases: Vec<WorkersCase>,
}

/// Runs section 8: every thread count at every N, each measurement on fresh relay processes.
pub async fn run(cfg: &WorkersConfig) -> WorkersReport {
    let mut cases = Vec::new();
    for &threads in &cfg.threads {
        let mut relay = cfg.relay.clone();
        relay
            .extra
            .extend(["--worker-threads".to_string(), threads.to_string()]);
        let pinning = cfg.pinning(threads);
        for &n in &cfg.counts {
            let fan = FanoutConfig {
                pinning: pinning.clone(),
                ..cfg.fanout.clone()
            };
            let mut model = fan.model;
            let fanout = fanout::run_relay_case(&fan, &relay, n, &mut model)
                .await
                .map_err(|e| fanout::one_line(&e));
            let mut cap = cfg.capacity.clone();
            cap.subscribers = n;
            cap.relays = vec![relay.clone()];
            cap.step.pinning = pinning.clone();
            cap.step.model = model;
            let capacity = capacity::run(&cap, Vec::new())
                .await
                .relays
                .into_iter()
                .next()
                .unwrap_or_else(|| RelayCapacity {
                    kind: relay.kind,
                    steps: Vec::new(),
                });
            cases.push(WorkersCase {
                threads,
                subscribers: n,
                pinning: pinning.clone(),
                fanout,
                capacity,
            });
        }
    }
    WorkersReport {
        config: cfg.clone(),
        cases,
    }
}

impl WorkersReport {
    fn get(&self, threads: usize, n: usize) -> Option<&WorkersCase> {
        self.cases
            .iter()
            .find(|c| c.threads == threads && c.subscribers == n)
    }

    /// The section as text.
    pub fn render(&self) -> String {
        let c = &self.config;
        let mut out = format!(
            "our relay with --worker-threads {}; fan-out: {} objects/s of {} B (section 2's \
             measurement); capacity: section 6's ladder (p99 < {:.0} ms, no loss, at most {} \
             steps); relay CPU = share of one core over the window (above 100 % = more than one \
             core)\n  {}\n",
            pin::list(&c.threads),
            c.fanout.rate,
            c.fanout.size,
            c.capacity.p99_limit.as_secs_f64() * 1e3,
            c.capacity.max_steps,
            c.relay.describe(),
        );
        for &t in &c.threads {
            if let Some(case) = self.cases.iter().find(|x| x.threads == t) {
                out.push_str(&format!("  {t} worker(s): {}\n", case.pinning.describe()));
            }
        }
        out.push_str(&format!(
            "  {:>7} {:>5} {:>11} {:>8} {:>8} {:>7} {:>7} {:>9} {:>12} {:>8}\n",
            "workers",
            "N",
            "CPU µs/obj",
            "p50 ms",
            "p99 ms",
            "relay",
            "bench",
            "capacity",
            "deliveries/s",
            "at cap"
        ));
        for case in &self.cases {
            let (cap, deliveries, at_cap) = capacity_cells(case);
            match &case.fanout {
                Ok(m) => out.push_str(&format!(
                    "  {:>7} {:>5} {:>11.2} {:>8.2} {:>8.2} {:>6.0}% {:>6.0}% {:>9} {:>12} {:>8}\n",
                    case.threads,
                    case.subscribers,
                    m.cpu_us_per_object(),
                    m.latency.p50_ms,
                    m.latency.p99_ms,
                    100.0 * m.window_relay_cpu_seconds / m.window_secs(),
                    100.0 * m.window_bench_cpu_seconds / m.window_secs(),
                    cap,
                    deliveries,
                    at_cap,
                )),
                Err(e) => out.push_str(&format!(
                    "  {:>7} {:>5} fan-out n/a ({e}); capacity {cap}\n",
                    case.threads, case.subscribers
                )),
            }
        }
        out.push_str("  (at cap = relay CPU over the window of the highest passing step)\n");
        if let (Some(&one), true) = (c.threads.first(), c.threads.len() > 1) {
            for &t in c.threads.iter().skip(1) {
                for &n in &c.counts {
                    let (Some(a), Some(b)) = (self.get(t, n), self.get(one, n)) else {
                        continue;
                    };
                    let cpu = match (&a.fanout, &b.fanout) {
                        (Ok(x), Ok(y)) => {
                            format!("{:.2}x", x.cpu_us_per_object() / y.cpu_us_per_object())
                        }
                        _ => "n/a".into(),
                    };
                    let cap = match (a.capacity.capacity(), b.capacity.capacity()) {
                        (Some(x), Some(y)) => format!("{:.2}x", f64::from(x) / f64::from(y)),
                        _ => "n/a".into(),
                    };
                    out.push_str(&format!(
                        "  {t} / {one} worker(s), N={n}: CPU/obj {cpu}, capacity {cap}\n"
                    ));
                }
            }
        }
        out
    }
}

/// The capacity, deliveries/s and relay CPU at the capacity step, as table cells.
fn capacity_cells(case: &WorkersCase) -> (String, String, String) {
    let Some(cap) = case.capacity.capacity() else {
        return ("none".into(), "-".into(), "-".into());
    };
    let at = case
        .capacity
        .steps
        .iter()
        .find(|s| s.rate == cap && s.passed())
        .and_then(|s| s.outcome.as_ref().ok())
        .map_or_else(
            || "-".to_string(),
            |m| {
                format!(
                    "{:.0}%",
                    100.0 * m.window_relay_cpu_seconds / m.window_secs()
                )
            },
        );
    (
        cap.to_string(),
        (u64::from(cap) * case.subscribers as u64).to_string(),
        at,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;
    use crate::capacity::CapacityStep;
    use crate::fanout::PublishModel;
    use crate::latency::Percentiles;
    use crate::relays::RelayKind;

    fn measured(cpu: f64, relay_cpu: f64) -> FanoutMeasurement {
        FanoutMeasurement {
            model: PublishModel::Namespace,
            sessions: 100,
            published: 500,
            delivered: 50_000,
            cpu_seconds: cpu,
            latency: Percentiles {
                p50_ms: 1.0,
                p99_ms: 5.0,
                max_ms: 9.0,
            },
            rss_kib: 0,
            window_elapsed: Duration::from_secs(5),
            window_relay_cpu_seconds: relay_cpu,
            window_bench_cpu_seconds: 1.0,
        }
    }

    #[test]
    fn report_renders_each_case_and_the_ratios_to_one_worker() {
        let cfg = WorkersConfig::full(RelayCommand::new(RelayKind::Ours, "moq-relay"), "w".into());
        let case = |threads, rate, cpu, relay_cpu| {
            let step = CapacityStep::judge(
                &cfg.capacity,
                rate,
                Ok(FanoutMeasurement {
                    published: 100,
                    delivered: 100_000,
                    ..measured(cpu, relay_cpu)
                }),
                Duration::ZERO,
            );
            WorkersCase {
                threads,
                subscribers: 1000,
                pinning: Pinning::off("test"),
                fanout: Ok(measured(cpu, relay_cpu)),
                capacity: RelayCapacity {
                    kind: RelayKind::Ours,
                    steps: vec![step],
                },
            }
        };
        let report = WorkersReport {
            config: WorkersConfig {
                counts: vec![1000],
                ..cfg.clone()
            },
            cases: vec![case(1, 100, 0.5, 5.0), case(2, 110, 0.6, 6.0)],
        };
        let text = report.render();
        assert!(text.contains("--worker-threads 1,2"), "{text}");
        assert!(
            text.contains("2 / 1 worker(s), N=1000: CPU/obj 1.20x, capacity 1.10x"),
            "{text}"
        );
        assert!(text.contains("100000") && text.contains("120%"), "{text}");
    }
}
