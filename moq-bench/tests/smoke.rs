//! Smoke test of the benchmark library at tiny sizes: section 1 (throughput against raw quinn)
//! and section 3 (discovery scaling, relay in-process) complete and report numbers. Nothing
//! here asserts on timing.
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
