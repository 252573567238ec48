//! The relay's metrics, kept with the `metrics` crate in a recorder of the relay's own (two
//! relays in one process count apart) and rendered in the Prometheus text format by
//! `metrics-exporter-prometheus` (feature `prometheus`, part of `http`; without it the metrics
//! are not kept: [`Metrics::render`] is empty and [`Metrics::value`] 0).
//!
//! | name | type | labels |
//! |---|---|---|
//! | `moq_relay_sessions_total` | counter | `version`, `transport` |
//! | `moq_relay_sessions_active` | gauge | `version`, `transport` |
//! | `moq_relay_requests_total` | counter | `kind`, `outcome` (`ok` or the error code) |
//! | `moq_relay_request_seconds` | histogram | `kind`: time to answer a request (SUBSCRIBE's is the subscribe latency) |
//! | `moq_relay_objects_received_total`, `moq_relay_bytes_received_total` | counter | `namespace` if opted in |
//! | `moq_relay_objects_forwarded_total`, `moq_relay_bytes_forwarded_total` | counter | |
//! | `moq_relay_object_delivery_seconds` | histogram | from an object's arrival to its forwarding |
//! | `moq_relay_objects_duplicate_total` | counter | |
//! | `moq_relay_subgroups_dropped_total` | counter | slow subscribers |
//! | `moq_relay_backlog_bytes` | gauge | payload bytes subscriptions still have to send |
//! | `moq_relay_subscriptions_too_far_behind_total` | counter | ended with TOO_FAR_BEHIND |
//! | `moq_relay_cache_requests_total` | counter | `result` (`hit`, `miss`): FETCH from cache or upstream |
//! | `moq_relay_subscriptions_active` | gauge | downstream |
//! | `moq_relay_upstream_subscriptions_active` | gauge | |
//! | `moq_relay_cluster_link_up` | gauge | `peer`: 1 while a link this relay dials is up, else 0 |
//! | `moq_relay_cluster_link_failures_total` | counter | `peer`, `cause` (`certificate`, `token`, `unreachable`, `closed`, `other`): failed dials, lost links, refused views |

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use metrics::{Counter, Gauge, Key, Label, Level, Metadata, Recorder, Unit};
#[cfg(feature = "prometheus")]
use metrics_exporter_prometheus::{
    Matcher, PrometheusBuilder, PrometheusHandle, PrometheusRecorder,
};
use moq_client::model::ServeStats;
use moq_core::codes::RequestErrorCode;
use moq_core::{TrackNamespace, Version};
use moq_transport::RequestObserver;
use moq_transport::transport::TransportKind;

/// Latency buckets, seconds: 100 µs to 10 s.
#[cfg(feature = "prometheus")]
const BUCKETS: [f64; 14] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 10.0,
];

static METADATA: Metadata<'static> = Metadata::new(module_path!(), Level::INFO, None);

/// The relay's metrics. Cheap to read at any time; histograms are drained into their
/// buckets at each render and at least every [`Metrics::UPKEEP`], so they hold bounded memory.
pub struct Metrics {
    #[cfg(feature = "prometheus")]
    recorder: PrometheusRecorder,
    #[cfg(not(feature = "prometheus"))]
    recorder: metrics::NoopRecorder,
    #[cfg(feature = "prometheus")]
    handle: PrometheusHandle,
    per_namespace: bool,
    objects_received: Counter,
    bytes_received: Counter,
    duplicates: Counter,
    cache_hit: Counter,
    cache_miss: Counter,
    subscriptions: Gauge,
    upstreams: Gauge,
    forwarded_objects: Counter,
    forwarded_bytes: Counter,
    dropped: Counter,
    backlog: Gauge,
    too_far_behind: Counter,
    /// Forwarding statistics (objects, bytes, drops, delivery latency), fed by the serving
    /// code and copied into the metrics at render.
    pub serve: Arc<ServeStats>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics")
            .field("per_namespace", &self.per_namespace)
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(false)
    }
}

fn key(name: &'static str, labels: Vec<Label>) -> Key {
    Key::from_parts(name, labels)
}

impl Metrics {
    /// How often histograms are drained when nobody scrapes.
    pub const UPKEEP: Duration = Duration::from_secs(5);

    /// Metrics; `per_namespace` labels the received-object counters with the namespace.
    pub fn new(per_namespace: bool) -> Metrics {
        #[cfg(feature = "prometheus")]
        let recorder = PrometheusBuilder::new()
            .set_buckets(&BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &BUCKETS))
            .unwrap_or_else(|_| PrometheusBuilder::new())
            .build_recorder();
        #[cfg(feature = "prometheus")]
        let handle = recorder.handle();
        #[cfg(not(feature = "prometheus"))]
        let recorder = metrics::NoopRecorder;
        let describe = |name: &'static str, unit: Unit, help: &'static str| {
            recorder.describe_counter(name.into(), Some(unit), help.into());
        };
        for (name, unit, help) in [
            (
                "moq_relay_sessions_total",
                Unit::Count,
                "Sessions accepted.",
            ),
            ("moq_relay_sessions_active", Unit::Count, "Sessions open."),
            (
                "moq_relay_requests_total",
                Unit::Count,
                "Peer requests answered, by kind and outcome.",
            ),
            (
                "moq_relay_request_seconds",
                Unit::Seconds,
                "Time to answer a peer's request.",
            ),
            (
                "moq_relay_objects_received_total",
                Unit::Count,
                "Objects received from upstream.",
            ),
            (
                "moq_relay_bytes_received_total",
                Unit::Bytes,
                "Payload bytes received from upstream.",
            ),
            (
                "moq_relay_objects_forwarded_total",
                Unit::Count,
                "Objects forwarded downstream.",
            ),
            (
                "moq_relay_bytes_forwarded_total",
                Unit::Bytes,
                "Payload bytes forwarded downstream.",
            ),
            (
                "moq_relay_object_delivery_seconds",
                Unit::Seconds,
                "From an object's arrival to its forwarding.",
            ),
            (
                "moq_relay_objects_duplicate_total",
                Unit::Count,
                "Objects received twice and dropped.",
            ),
            (
                "moq_relay_subgroups_dropped_total",
                Unit::Count,
                "Subgroups dropped for slow subscribers.",
            ),
            (
                "moq_relay_backlog_bytes",
                Unit::Bytes,
                "Payload bytes downstream subscriptions still have to send.",
            ),
            (
                "moq_relay_subscriptions_too_far_behind_total",
                Unit::Count,
                "Subscriptions ended with TOO_FAR_BEHIND (backlog over --max-backlog-bytes).",
            ),
            (
                "moq_relay_cache_requests_total",
                Unit::Count,
                "FETCHes answered from cache (hit) or upstream (miss).",
            ),
            (
                "moq_relay_subscriptions_active",
                Unit::Count,
                "Downstream subscriptions open.",
            ),
            (
                "moq_relay_upstream_subscriptions_active",
                Unit::Count,
                "Upstream subscriptions open.",
            ),
            (
                "moq_relay_cluster_link_up",
                Unit::Count,
                "1 while the cluster link this relay dials to the peer is up, else 0.",
            ),
            (
                "moq_relay_cluster_link_failures_total",
                Unit::Count,
                "Failed dials, lost links and refused views of cluster links, by cause.",
            ),
        ] {
            describe(name, unit, help);
        }
        let counter = |name, labels| recorder.register_counter(&key(name, labels), &METADATA);
        let gauge = |name| recorder.register_gauge(&key(name, vec![]), &METADATA);
        let result = |r: &'static str| vec![Label::new("result", r)];
        let serve =
            ServeStats {
                delivery: Some(recorder.register_histogram(
                    &key("moq_relay_object_delivery_seconds", vec![]),
                    &METADATA,
                )),
                ..ServeStats::default()
            };
        Metrics {
            objects_received: counter("moq_relay_objects_received_total", vec![]),
            bytes_received: counter("moq_relay_bytes_received_total", vec![]),
            duplicates: counter("moq_relay_objects_duplicate_total", vec![]),
            cache_hit: counter("moq_relay_cache_requests_total", result("hit")),
            cache_miss: counter("moq_relay_cache_requests_total", result("miss")),
            forwarded_objects: counter("moq_relay_objects_forwarded_total", vec![]),
            forwarded_bytes: counter("moq_relay_bytes_forwarded_total", vec![]),
            dropped: counter("moq_relay_subgroups_dropped_total", vec![]),
            backlog: gauge("moq_relay_backlog_bytes"),
            too_far_behind: counter("moq_relay_subscriptions_too_far_behind_total", vec![]),
            subscriptions: gauge("moq_relay_subscriptions_active"),
            upstreams: gauge("moq_relay_upstream_subscriptions_active"),
            serve: Arc::new(serve),
            per_namespace,
            recorder,
            #[cfg(feature = "prometheus")]
            handle,
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let s = &self.serve;
        self.forwarded_objects
            .absolute(s.objects.load(Ordering::Relaxed));
        self.forwarded_bytes
            .absolute(s.bytes.load(Ordering::Relaxed));
        self.dropped.absolute(s.dropped.load(Ordering::Relaxed));
        self.backlog.set(s.backlog.load(Ordering::Relaxed) as f64);
        self.too_far_behind
            .absolute(s.too_far_behind.load(Ordering::Relaxed));
        #[cfg(feature = "prometheus")]
        return self.handle.render();
        #[cfg(not(feature = "prometheus"))]
        String::new()
    }

    /// The value of a counter or gauge: `name` sums every series of that metric, and
    /// `name{label="v"}` is one series (reads the rendered text: for tests and tools).
    pub fn value(&self, name: &str) -> u64 {
        self.render()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| l.rsplit_once(' '))
            .filter(|(series, _)| {
                *series == name || (!name.contains('{') && series.starts_with(&format!("{name}{{")))
            })
            .filter_map(|(_, v)| v.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// Drains histograms into their buckets (run every [`Metrics::UPKEEP`]).
    pub fn upkeep(&self) {
        #[cfg(feature = "prometheus")]
        self.handle.run_upkeep();
    }

    fn session_labels(version: Version, transport: TransportKind) -> Vec<Label> {
        let transport = match transport {
            TransportKind::RawQuic => "quic",
            TransportKind::WebTransport => "webtransport",
            TransportKind::WebSocket => "websocket",
        };
        vec![
            Label::new("version", version.to_string()),
            Label::new("transport", transport),
        ]
    }

    /// A session was accepted; its gauge goes down when the returned guard drops.
    pub fn session(&self, version: Version, transport: TransportKind) -> SessionGauge {
        let labels = Self::session_labels(version, transport);
        self.recorder
            .register_counter(&key("moq_relay_sessions_total", labels.clone()), &METADATA)
            .increment(1);
        let gauge = self
            .recorder
            .register_gauge(&key("moq_relay_sessions_active", labels), &METADATA);
        gauge.increment(1.0);
        SessionGauge(gauge)
    }

    /// What counts the objects received for the track in `namespace`.
    pub fn received(&self, namespace: &TrackNamespace) -> Received {
        match self.per_namespace {
            false => Received {
                objects: self.objects_received.clone(),
                bytes: self.bytes_received.clone(),
            },
            true => {
                let labels = || vec![Label::new("namespace", namespace.to_string())];
                Received {
                    objects: self.recorder.register_counter(
                        &key("moq_relay_objects_received_total", labels()),
                        &METADATA,
                    ),
                    bytes: self.recorder.register_counter(
                        &key("moq_relay_bytes_received_total", labels()),
                        &METADATA,
                    ),
                }
            }
        }
    }

    /// An object received twice (from two upstreams) was dropped.
    pub fn duplicate(&self) {
        self.duplicates.increment(1);
    }

    /// A FETCH was answered from the cache (`hit`) or sent upstream.
    pub fn fetch(&self, hit: bool) {
        match hit {
            true => self.cache_hit.increment(1),
            false => self.cache_miss.increment(1),
        }
    }

    /// A downstream subscription opened (+1) or closed (-1).
    pub fn subscriptions(&self, delta: f64) {
        self.subscriptions.increment(delta);
    }

    /// An upstream subscription opened (+1) or closed (-1).
    pub fn upstreams(&self, delta: f64) {
        self.upstreams.increment(delta);
    }

    /// The cluster link this relay dials to `peer` is up or not.
    pub fn link_up(&self, peer: &str, up: bool) {
        let labels = vec![Label::new("peer", peer.to_string())];
        self.recorder
            .register_gauge(&key("moq_relay_cluster_link_up", labels), &METADATA)
            .set(if up { 1.0 } else { 0.0 });
    }

    /// A dial of the cluster link to `peer` failed, or the link was lost or refused, for `cause`
    /// (`certificate`, `token`, `unreachable`, `closed` or `other`: a cluster link cause's label).
    pub fn link_failure(&self, peer: &str, cause: &'static str) {
        let labels = vec![
            Label::new("peer", peer.to_string()),
            Label::new("cause", cause),
        ];
        self.recorder
            .register_counter(
                &key("moq_relay_cluster_link_failures_total", labels),
                &METADATA,
            )
            .increment(1);
    }
}

/// Counts the objects of one track as they arrive.
#[derive(Clone, Debug)]
pub struct Received {
    objects: Counter,
    bytes: Counter,
}

impl Received {
    /// One object of `len` payload bytes arrived.
    pub fn object(&self, len: usize) {
        self.objects.increment(1);
        self.bytes.increment(len as u64);
    }
}

/// Holds a session in the active-sessions gauge until dropped.
#[derive(Debug)]
pub struct SessionGauge(Gauge);

impl Drop for SessionGauge {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

impl RequestObserver for Metrics {
    fn answered(
        &self,
        _version: Version,
        kind: &'static str,
        outcome: Result<(), RequestErrorCode>,
        elapsed: Duration,
    ) {
        let outcome = match outcome {
            Ok(()) => "ok".to_string(),
            Err(code) => format!("{code:?}"),
        };
        let labels = vec![Label::new("kind", kind), Label::new("outcome", outcome)];
        self.recorder
            .register_counter(&key("moq_relay_requests_total", labels), &METADATA)
            .increment(1);
        self.recorder
            .register_histogram(
                &key("moq_relay_request_seconds", vec![Label::new("kind", kind)]),
                &METADATA,
            )
            .record(elapsed.as_secs_f64());
    }
}
