//! Counters the relay keeps, rendered in the Prometheus text format.

use std::fmt::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use moq_client::serve::ServeStats;

/// The relay's counters. Cheap to read at any time.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Sessions accepted since start.
    pub sessions_total: AtomicU64,
    /// Sessions open now.
    pub sessions_active: AtomicU64,
    /// Downstream subscriptions open now.
    pub subscriptions_active: AtomicU64,
    /// Upstream subscriptions open now.
    pub upstream_active: AtomicU64,
    /// Objects received from upstream.
    pub objects_received: AtomicU64,
    /// Objects received twice (from two upstreams) and dropped.
    pub duplicates: AtomicU64,
    /// FETCH requests answered from the cache.
    pub fetch_cached: AtomicU64,
    /// FETCH requests forwarded upstream.
    pub fetch_upstream: AtomicU64,
    /// Forwarding statistics (objects, bytes, drops).
    pub serve: Arc<ServeStats>,
}

impl Metrics {
    /// The Prometheus text exposition of every counter.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let g = |v: &AtomicU64| v.load(Ordering::Relaxed);
        let rows: [(&str, &str, &str, u64); 11] = [
            (
                "moq_relay_sessions_total",
                "counter",
                "Sessions accepted.",
                g(&self.sessions_total),
            ),
            (
                "moq_relay_sessions_active",
                "gauge",
                "Sessions open.",
                g(&self.sessions_active),
            ),
            (
                "moq_relay_subscriptions_active",
                "gauge",
                "Downstream subscriptions open.",
                g(&self.subscriptions_active),
            ),
            (
                "moq_relay_upstream_subscriptions_active",
                "gauge",
                "Upstream subscriptions open.",
                g(&self.upstream_active),
            ),
            (
                "moq_relay_objects_received_total",
                "counter",
                "Objects received from upstream.",
                g(&self.objects_received),
            ),
            (
                "moq_relay_objects_duplicate_total",
                "counter",
                "Objects received twice and dropped.",
                g(&self.duplicates),
            ),
            (
                "moq_relay_objects_forwarded_total",
                "counter",
                "Objects forwarded downstream.",
                g(&self.serve.objects),
            ),
            (
                "moq_relay_bytes_forwarded_total",
                "counter",
                "Payload bytes forwarded downstream.",
                g(&self.serve.bytes),
            ),
            (
                "moq_relay_subgroups_dropped_total",
                "counter",
                "Subgroups dropped for slow subscribers.",
                g(&self.serve.dropped),
            ),
            (
                "moq_relay_fetch_cached_total",
                "counter",
                "FETCHes answered from cache.",
                g(&self.fetch_cached),
            ),
            (
                "moq_relay_fetch_upstream_total",
                "counter",
                "FETCHes forwarded upstream.",
                g(&self.fetch_upstream),
            ),
        ];
        for (name, kind, help, value) in rows {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        out
    }
}
