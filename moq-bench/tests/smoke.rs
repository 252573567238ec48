//! Smoke test of the benchmark library at tiny sizes: section 1 (throughput against raw quinn),
//! section 3 (discovery scaling, relay in-process), section 5 (a cluster of three of our
//! relay binaries) and section 6 (relay capacity, our relay hosted by the `moq-bench` binary)
//! complete and report numbers. Nothing here asserts on timing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use moq_bench::discovery::{self, DiscoveryConfig, RelayTarget};
use moq_bench::throughput::{self, ThroughputConfig};
use moq_core::Version;

async fn timeout<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("timed out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throughput_quick_reports_rates() {
    timeout(async {
        let cfg = ThroughputConfig {
            duration: Duration::from_millis(100),
            repeats: 1,
            sizes: vec![1024, 16 * 1024],
            version: Version::Draft18,
            cases: None,
        };
        let report = throughput::run(&cfg).await.unwrap();
        assert!(report.raw.bytes > 0 && report.raw.mb_per_s() > 0.0);
        assert_eq!(report.rows.len(), 2);
        for row in &report.rows {
            assert!(row.one_subgroup.objects > 0 && row.one_subgroup.mb_per_s() > 0.0);
            assert!(row.stream_per_object.objects > 0);
        }
        let text = report.render();
        assert!(text.contains("MB/s") && text.contains("16 KiB"), "{text}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_quick_reports_costs() {
    timeout(async {
        let cfg = DiscoveryConfig {
            totals: vec![200, 600],
            per_session: 200,
            matches: 100,
            queries: 3,
            version: Version::Draft19,
            target: RelayTarget::InProcess,
            workdir: std::env::temp_dir(),
        };
        let report = discovery::run(&cfg).await.unwrap();
        assert_eq!(report.rows.len(), 2);
        let last = report.rows.last().unwrap();
        assert_eq!((last.total, last.sessions), (600, 3));
        assert!(report.rows.iter().all(|r| r.median_ms > 0.0));
        let text = report.render();
        assert!(text.contains("cost per match 600 / 200"), "{text}");
    })
    .await;
}

/// Section 6 against our relay hosted by this package's `moq-bench` binary (`--serve-relay`,
/// the `moq_relay` library): two steps at 20 subscribers run and are judged. Whether a step
/// passes depends on the machine, so only the shape of the report is checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_quick_runs_a_ladder() {
    use moq_bench::capacity::{self, CapacityConfig, Verdict};
    use moq_bench::relays::{RelayCommand, RelayKind};

    let workdir = std::env::temp_dir().join(format!("moq-bench-capacity-{}", std::process::id()));
    let mut relay = RelayCommand::new(RelayKind::Ours, env!("CARGO_BIN_EXE_moq-bench"));
    relay.self_hosted = true;
    let mut cfg = CapacityConfig::quick(vec![relay], workdir.clone());
    cfg.start_rate = 50;
    cfg.max_steps = 2;
    let report = tokio::time::timeout(Duration::from_secs(120), capacity::run(&cfg, Vec::new()))
        .await
        .expect("timed out");
    let _ = std::fs::remove_dir_all(&workdir);
    let ours = report.relays.first().unwrap();
    assert_eq!(ours.steps.len(), 2);
    let first = ours.steps.first().unwrap();
    assert_eq!(first.rate, 50);
    for step in &ours.steps {
        assert_ne!(step.verdict, Verdict::Error, "{:?}", step.outcome);
        let m = step.outcome.as_ref().unwrap();
        assert_eq!(
            m.published,
            u64::from(step.rate) * cfg.step.duration.as_secs()
        );
        assert_eq!(m.sessions, 20);
    }
    // The second rate follows the first verdict: doubled after a pass, halved after a failure.
    let second = ours.steps.get(1).unwrap().rate;
    assert_eq!(second, if first.passed() { 100 } else { 25 });
    let text = report.render();
    assert!(
        text.contains("capacity obj/s") && text.contains("ours"),
        "{text}"
    );
}

/// The `moq-relay` binary of this build (next to `moq-bench`; `cargo test --workspace` builds
/// it), built here when missing (`cargo test -p moq-bench` alone).
fn relay_binary() -> std::path::PathBuf {
    let bench = std::path::PathBuf::from(env!("CARGO_BIN_EXE_moq-bench"));
    let relay = bench.with_file_name(format!("moq-relay{}", std::env::consts::EXE_SUFFIX));
    if !relay.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = std::process::Command::new(cargo);
        build.args(["build", "-p", "moq-relay", "--bin", "moq-relay"]);
        if bench.parent().is_some_and(|d| d.ends_with("release")) {
            build.arg("--release");
        }
        let status = build.status().expect("running cargo build -p moq-relay");
        assert!(status.success(), "cargo build -p moq-relay failed");
    }
    relay
}

/// Section 5 at N = 3 (the harness of issue 17 in the test command): three relay processes in
/// a star, four publishers and 24 subscriptions spread over them. Every object reaches every
/// subscription, and each relay holds exactly one upstream subscription per track, however
/// many of its subscribers read it; delivery latency is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_of_three_delivers_with_one_upstream_per_track() {
    use moq_bench::cluster::{self, ClusterConfig};
    use moq_bench::relays::{RelayCommand, RelayKind};

    let workdir = std::env::temp_dir().join(format!("moq-bench-cluster-{}", std::process::id()));
    let relay = RelayCommand::new(RelayKind::Ours, relay_binary());
    let cfg = ClusterConfig {
        sizes: vec![3],
        subscriptions: 24,
        rate: 20,
        duration: Duration::from_secs(2),
        warmup: Duration::from_millis(500),
        ..ClusterConfig::quick(relay, workdir.clone())
    };
    let report = tokio::time::timeout(Duration::from_secs(120), cluster::run(&cfg))
        .await
        .expect("timed out")
        .unwrap();
    let _ = std::fs::remove_dir_all(&workdir);
    let text = report.render();
    eprintln!("{text}");
    let (k, case) = report.cases.first().unwrap();
    assert_eq!(*k, 3);
    let m = case.as_ref().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.published, 4 * 40);
    assert_eq!(
        m.delivered, m.expected,
        "every object reaches every subscription"
    );
    assert_eq!(m.per_relay.len(), 3);
    for (i, r) in m.per_relay.iter().enumerate() {
        assert_eq!(
            r.upstreams, 4,
            "relay {i}: one upstream subscription per track"
        );
    }
    assert!(m.latency.p50_ms > 0.0 && m.latency.p99_ms >= m.latency.p50_ms);
    assert!(text.contains("upstream subscriptions per relay"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_scale_quick_reports_figures() {
    use moq_bench::cluster_scale::{self, ClusterScaleConfig};
    // Needs a redis-server or valkey-server (scripts/install-redis.sh); skipped without one.
    let on_path = std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .any(|d| d.join("redis-server").is_file() || d.join("valkey-server").is_file())
    });
    if !on_path && std::env::var_os("MOQ_REDIS_SERVER").is_none() {
        eprintln!("no redis-server: cluster-scale smoke test skipped");
        return;
    }
    timeout(async {
        let mut cfg = ClusterScaleConfig::quick(None, std::env::temp_dir());
        cfg.sizes = vec![1_000, 2_000];
        cfg.origins = 100;
        cfg.lookups = 50;
        cfg.discoveries = 2;
        let report = cluster_scale::run(&cfg).await.unwrap();
        assert_eq!(report.rows.len(), 2, "{:?}", report.error);
        assert!(
            report
                .rows
                .iter()
                .all(|r| r.lookup_ms.0 > 0.0 && r.store_bytes > 0.0)
        );
        let text = report.render();
        assert!(text.contains("2000/1000: lookup p50"), "{text}");
    })
    .await;
}
