//! Benchmarks of the MOQT stack, as ratios measured within one run on one machine:
//!
//! 1. [`throughput`]: one raw quinn stream against our session carrying objects (one long
//!    subgroup, and one stream per object); [`ready`]: time to a usable session against a raw
//!    quinn handshake;
//! 2. [`fanout`]: one track fanned out to N subscriptions through our relay and third-party
//!    relays (CPU per delivered object, delivery latency);
//! 3. [`discovery`]: SUBSCRIBE_NAMESPACE cost per match as the number of published namespaces
//!    grows;
//! 4. [`memory`]: relay resident memory per idle session and per subscription;
//! 5. [`cluster`]: a cluster of our relays against one relay (objects per relay CPU second);
//! 6. [`capacity`]: the highest rate of objects our relay and third-party relays deliver to
//!    1000 subscribers with no loss and p99 latency under 100 ms;
//! 7. [`media`]: a 720p30 broadcast ingested from fMP4 through a relay to N subscribers
//!    (ingest-to-frame latency, relay CPU per second of video);
//! 8. [`workers`]: our relay with 1 and 2 tokio worker threads (CPU per object, capacity);
//! 9. [`cluster_scale`] (opt-in): the route registry at 1k, 100k and 1M namespaces (lookup and
//!    discovery times, store memory per namespace, a relay's memory).
//!
//! Sections 2, 6 and 8 pin the relay to one CPU and the bench to another ([`pin`]).
//!
//! The `moq-bench` binary runs them and prints the tables; see `docs/benchmarks.md`.

pub mod capacity;
pub mod cluster;
pub mod cluster_scale;
pub mod discovery;
pub mod fanout;
pub mod latency;
pub mod media;
pub mod memory;
pub mod pin;
pub mod procfs;
pub mod ready;
pub mod relays;
pub mod throughput;
pub mod workers;

/// The machine: logical CPUs and the CPU model from `/proc/cpuinfo`.
pub fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpus} logical CPUs, {model}")
}

/// What quinn-udp finds for a UDP socket on loopback here: the most datagrams one send may
/// carry (generic segmentation offload, GSO; 1 = none) and the most one receive may return
/// (GRO). quinn batches a connection's packets into one send up to the first.
pub fn udp_offload() -> String {
    let probe = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| quinn::udp::UdpSocketState::new((&s).into()));
    match probe {
        Ok(state) => format!(
            "loopback UDP (quinn-udp): GSO up to {} segments per send, GRO {} per receive",
            state.max_gso_segments(),
            state.gro_segments()
        ),
        Err(e) => format!("loopback UDP (quinn-udp): probe failed: {e}"),
    }
}
