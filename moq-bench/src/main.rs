//! `moq-bench`: prints the benchmark sections (raw, fanout, discovery, memory, cluster,
//! capacity, media; see the crate docs and `docs/benchmarks.md`).
//!
//! ```text
//! cargo build --release -p moq-relay -p moq-bench
//! target/release/moq-bench                      # everything, a few minutes
//! target/release/moq-bench --quick              # small sizes, a smoke test
//! target/release/moq-bench --sections raw,discovery
//! target/release/moq-bench --sections capacity  # relay capacity at 1000 subscribers
//! target/release/moq-bench --sections media     # 720p30 through a relay (needs ffmpeg)
//! ```

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use moq_bench::capacity::CapacityConfig;
use moq_bench::cluster_scale::ClusterScaleConfig;
use moq_bench::discovery::{DiscoveryConfig, RelayTarget};
use moq_bench::fanout::{FanoutConfig, PublishModel};
use moq_bench::media::{self, MediaConfig};
use moq_bench::memory::MemoryConfig;
use moq_bench::pin::Pinning;
use moq_bench::relays::{RelayCommand, RelayKind};
use moq_bench::throughput::ThroughputConfig;
use moq_bench::workers::{self, WorkersConfig};
use moq_bench::{capacity, cluster, discovery, fanout, machine, memory, ready, throughput};
use moq_core::Version;

/// Benchmarks of moqt-rs: throughput against raw quinn, relay fan-out against moq-dev's and
/// Cloudflare's relays, discovery scaling, relay memory, a cluster of our relays, relay
/// capacity. Prints ratios measured in one run.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Sections to run: raw, fanout, discovery, memory, cluster, capacity, media, workers
    /// (comma-separated; default all of these), and cluster-scale (opt-in: needs a
    /// redis-server or valkey-server).
    #[arg(long, value_delimiter = ',')]
    sections: Option<Vec<Section>>,
    /// Small sizes: the whole run takes seconds (a smoke test, not a measurement).
    #[arg(long)]
    quick: bool,
    /// Our relay binary (default: moq-relay next to this program, else this program hosting
    /// the relay library).
    #[arg(long)]
    relay: Option<PathBuf>,
    /// moq-dev's moq-relay (default $MOQ_DEV_RELAY, else $MOQ_PEERS/cargo/bin/moq-relay).
    #[arg(long, env = "MOQ_DEV_RELAY")]
    moq_dev_relay: Option<PathBuf>,
    /// Cloudflare's moq-relay-ietf (default $MOQ_IETF_RELAY, else
    /// $MOQ_PEERS/cargo/bin/moq-relay-ietf).
    #[arg(long, env = "MOQ_IETF_RELAY")]
    ietf_relay: Option<PathBuf>,
    /// Compare against our relay only.
    #[arg(long)]
    ours_only: bool,
    /// Draft for sections 1 and 3 (section 2 and 4 use 18, which every relay speaks).
    #[arg(long, default_value_t = 19)]
    draft: u32,
    /// Section 1: seconds each case writes.
    #[arg(long)]
    raw_seconds: Option<f64>,
    /// Section 1: rounds (each figure is the median).
    #[arg(long)]
    raw_repeats: Option<usize>,
    /// Section 1: object sizes in bytes.
    #[arg(long, value_delimiter = ',')]
    raw_sizes: Option<Vec<usize>>,
    /// Section 1: only these cases (for profiling one; the others print 0): raw,
    /// raw-stream-per-object, raw-object-writes, one-subgroup, batched, stream-per-object.
    #[arg(long, value_delimiter = ',')]
    raw_cases: Option<Vec<throughput::Case>>,
    /// Section 2: objects per second.
    #[arg(long)]
    rate: Option<u32>,
    /// Section 2: object size in bytes (at least 17).
    #[arg(long)]
    size: Option<usize>,
    /// Section 2: objects per group.
    #[arg(long)]
    group_size: Option<u64>,
    /// Section 2: subscription counts.
    #[arg(long, value_delimiter = ',')]
    subscriptions: Option<Vec<usize>>,
    /// Section 2: subscriptions per subscriber session.
    #[arg(long)]
    subs_per_session: Option<usize>,
    /// Section 2: seconds in the measurement window.
    #[arg(long)]
    fanout_seconds: Option<f64>,
    /// Sections 2 and 6: publishing model (default: PUBLISH_NAMESPACE, else PUBLISH).
    #[arg(long)]
    model: Option<Model>,
    /// Section 3: namespace totals.
    #[arg(long, value_delimiter = ',')]
    namespaces: Option<Vec<usize>>,
    /// Section 3: run the relay in this process instead of as a child.
    #[arg(long)]
    discovery_in_process: bool,
    /// Section 4: idle sessions.
    #[arg(long)]
    idle_sessions: Option<usize>,
    /// Section 4: subscriptions.
    #[arg(long)]
    memory_subscriptions: Option<usize>,
    /// Section 6: subscribers (one subscription per session).
    #[arg(long)]
    capacity_subscribers: Option<usize>,
    /// Section 6: object size in bytes (at least 17).
    #[arg(long)]
    capacity_size: Option<usize>,
    /// Section 6: the ladder's first rate, objects/s.
    #[arg(long)]
    capacity_start_rate: Option<u32>,
    /// Section 6: a step passes only with p99 latency below this, ms.
    #[arg(long)]
    capacity_p99_ms: Option<f64>,
    /// Section 6: seconds in each step's measurement window.
    #[arg(long)]
    capacity_seconds: Option<f64>,
    /// Section 6: bisection steps after the ladder brackets the capacity.
    #[arg(long)]
    capacity_bisections: Option<usize>,
    /// Section 7: subscriber counts (default 1,100).
    #[arg(long, value_delimiter = ',')]
    media_subscribers: Option<Vec<usize>>,
    /// Section 8: our relay's tokio worker thread counts (default 1,2).
    #[arg(long, value_delimiter = ',')]
    worker_threads: Option<Vec<usize>>,
    /// Section 8: subscriber counts (default 100,1000).
    #[arg(long, value_delimiter = ',')]
    workers_subscribers: Option<Vec<usize>>,
    /// Section 6: at most this many steps per relay.
    #[arg(long)]
    capacity_max_steps: Option<usize>,
    /// Sections 2 and 6: do not pin the relay and the bench to separate CPUs (by default the
    /// relay runs on the first usable CPU, this process on the second).
    #[arg(long)]
    no_pin: bool,
    /// Section 9: namespace counts (default 1000,100000,1000000).
    #[arg(long, value_delimiter = ',')]
    cluster_scale_sizes: Option<Vec<usize>>,
    /// Internal: serve the moq_relay library on this address (used when the moq-relay binary
    /// was not built).
    #[arg(long, hide = true)]
    serve_relay: Option<std::net::SocketAddr>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Section {
    Raw,
    Fanout,
    Discovery,
    Memory,
    Cluster,
    Capacity,
    Media,
    Workers,
    /// Opt-in (not in the default list): needs a redis-server or valkey-server.
    ClusterScale,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Model {
    Namespace,
    Publish,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(addr) = args.serve_relay {
        return serve_relay(addr).await;
    }
    let sections = args.sections.clone().unwrap_or_else(|| {
        vec![
            Section::Raw,
            Section::Fanout,
            Section::Discovery,
            Section::Memory,
            Section::Cluster,
            Section::Capacity,
            Section::Media,
            Section::Workers,
        ]
    });
    let version = Version::from_draft(args.draft).context("unsupported --draft")?;
    let workdir = std::env::temp_dir().join(format!("moq-bench-{}", std::process::id()));
    std::fs::create_dir_all(&workdir)?;
    let result = run(&args, &sections, version, &workdir).await;
    let _ = std::fs::remove_dir_all(&workdir);
    result
}

async fn run(args: &Args, sections: &[Section], version: Version, workdir: &Path) -> Result<()> {
    let started = Instant::now();
    let command: Vec<String> = std::env::args().collect();
    println!("{}", command.join(" "));
    println!("machine: {}", machine());
    println!("{}", moq_bench::udp_offload());
    if let Some(rev) = git_revision() {
        println!("source: {rev}");
    }
    let (relays, skipped) = relay_commands(args)?;

    if sections.contains(&Section::Raw) {
        let t = Instant::now();
        let mut cfg = if args.quick {
            ThroughputConfig::quick()
        } else {
            ThroughputConfig::full()
        };
        cfg.version = version;
        if let Some(s) = args.raw_seconds {
            cfg.duration = Duration::from_secs_f64(s);
        }
        if let Some(r) = args.raw_repeats {
            cfg.repeats = r;
        }
        if let Some(s) = &args.raw_sizes {
            cfg.sizes = s.clone();
        }
        if let Some(c) = &args.raw_cases {
            cfg.cases = Some(c.clone());
        }
        heading("1. Throughput against raw quinn (loopback)");
        let report = throughput::run(&cfg).await?;
        print!("{}", report.render());
        if args.raw_cases.is_none() {
            let rounds = if args.quick { 5 } else { 50 };
            print!("{}", ready::run(rounds, version).await?.render());
        }
        took(t);
    }

    if sections.contains(&Section::Fanout) {
        let t = Instant::now();
        let mut cfg = if args.quick {
            FanoutConfig::quick(relays.clone(), workdir.to_path_buf())
        } else {
            FanoutConfig::full(relays.clone(), workdir.to_path_buf())
        };
        if let Some(v) = args.rate {
            cfg.rate = v;
        }
        if let Some(v) = args.size {
            cfg.size = v;
        }
        if let Some(v) = args.group_size {
            cfg.group_size = v;
        }
        if let Some(v) = &args.subscriptions {
            cfg.counts = v.clone();
        }
        if let Some(v) = args.subs_per_session {
            cfg.subs_per_session = v;
        }
        if let Some(v) = args.fanout_seconds {
            cfg.duration = Duration::from_secs_f64(v);
        }
        cfg.model = args.model.map(PublishModel::from);
        cfg.pinning = Pinning::plan(args.no_pin);
        heading("2. Relay fan-out");
        let report = fanout::run(&cfg, skipped.clone()).await;
        print!("{}", report.render());
        took(t);
    }

    if sections.contains(&Section::Discovery) {
        let t = Instant::now();
        let target = match relays.iter().find(|r| r.kind == RelayKind::Ours) {
            Some(r) if !args.discovery_in_process => RelayTarget::Process(r.clone()),
            _ => RelayTarget::InProcess,
        };
        let mut cfg = if args.quick {
            DiscoveryConfig::quick(target, workdir.to_path_buf())
        } else {
            DiscoveryConfig::full(target, workdir.to_path_buf())
        };
        cfg.version = version;
        if let Some(v) = &args.namespaces {
            cfg.totals = v.clone();
        }
        heading("3. Discovery scaling (our relay)");
        let report = discovery::run(&cfg).await?;
        print!("{}", report.render());
        took(t);
    }

    if sections.contains(&Section::Memory) {
        let t = Instant::now();
        let mut cfg = if args.quick {
            MemoryConfig::quick(relays.clone(), workdir.to_path_buf())
        } else {
            MemoryConfig::full(relays.clone(), workdir.to_path_buf())
        };
        if let Some(v) = args.idle_sessions {
            cfg.sessions = v;
        }
        if let Some(v) = args.memory_subscriptions {
            cfg.subscriptions = v;
        }
        heading("4. Relay memory");
        let report = memory::run(&cfg, skipped.clone()).await;
        print!("{}", report.render());
        took(t);
    }
    if sections.contains(&Section::Cluster) {
        let t = Instant::now();
        match relays
            .iter()
            .find(|r| r.kind == RelayKind::Ours && !r.self_hosted)
        {
            Some(ours) => {
                let cfg = if args.quick {
                    cluster::ClusterConfig::quick(ours.clone(), workdir.to_path_buf())
                } else {
                    cluster::ClusterConfig::full(ours.clone(), workdir.to_path_buf())
                };
                heading("5. A cluster of our relays");
                print!("{}", cluster::run(&cfg).await?.render());
            }
            None => println!(
                "5. skipped: needs the moq-relay binary (cargo build --release -p moq-relay)"
            ),
        }
        took(t);
    }
    if sections.contains(&Section::Capacity) {
        let t = Instant::now();
        let mut cfg = if args.quick {
            CapacityConfig::quick(relays.clone(), workdir.to_path_buf())
        } else {
            CapacityConfig::full(relays.clone(), workdir.to_path_buf())
        };
        if let Some(v) = args.capacity_subscribers {
            cfg.subscribers = v;
        }
        if let Some(v) = args.capacity_size {
            cfg.step.size = v;
        }
        if let Some(v) = args.capacity_start_rate {
            cfg.start_rate = v;
        }
        if let Some(v) = args.capacity_p99_ms {
            cfg.p99_limit = Duration::try_from_secs_f64(v / 1e3).context("--capacity-p99-ms")?;
        }
        if let Some(v) = args.capacity_seconds {
            cfg.step.duration = Duration::try_from_secs_f64(v).context("--capacity-seconds")?;
        }
        if let Some(v) = args.capacity_bisections {
            cfg.bisections = v;
        }
        if let Some(v) = args.capacity_max_steps {
            cfg.max_steps = v;
        }
        cfg.step.model = args.model.map(PublishModel::from);
        cfg.step.pinning = Pinning::plan(args.no_pin);
        heading("6. Relay capacity");
        let report = capacity::run(&cfg, skipped.clone()).await;
        print!("{}", report.render());
        took(t);
    }
    if sections.contains(&Section::Media) {
        let t = Instant::now();
        let mut cfg = if args.quick {
            MediaConfig::quick(relays.clone(), workdir.to_path_buf())
        } else {
            MediaConfig::full(relays.clone(), workdir.to_path_buf())
        };
        if let Some(v) = &args.media_subscribers {
            cfg.counts = v.clone();
        }
        heading("7. Media: 720p30 from fMP4 through a relay");
        print!("{}", media::run(&cfg, skipped.clone()).await?.render());
        took(t);
    }
    if sections.contains(&Section::Workers) {
        let t = Instant::now();
        heading("8. Our relay with 1 and 2 worker threads");
        match relays
            .iter()
            .find(|r| r.kind == RelayKind::Ours && !r.self_hosted)
        {
            Some(ours) => {
                let mut cfg = if args.quick {
                    WorkersConfig::quick(ours.clone(), workdir.to_path_buf())
                } else {
                    WorkersConfig::full(ours.clone(), workdir.to_path_buf())
                };
                if let Some(v) = &args.worker_threads {
                    cfg.threads = v.clone();
                }
                if let Some(v) = &args.workers_subscribers {
                    cfg.counts = v.clone();
                }
                if let Some(v) = args.rate {
                    cfg.fanout.rate = v;
                }
                cfg.fanout.model = args.model.map(PublishModel::from);
                cfg.fanout.pinning = Pinning::plan(args.no_pin);
                cfg.capacity.step.model = cfg.fanout.model;
                print!("{}", workers::run(&cfg).await.render());
            }
            None => println!(
                "8. skipped: needs the moq-relay binary (cargo build --release -p moq-relay)"
            ),
        }
        took(t);
    }
    if sections.contains(&Section::ClusterScale) {
        let t = Instant::now();
        let ours = relays
            .iter()
            .find(|r| r.kind == RelayKind::Ours && !r.self_hosted)
            .cloned();
        let mut cfg = if args.quick {
            ClusterScaleConfig::quick(ours, workdir.to_path_buf())
        } else {
            ClusterScaleConfig::full(ours, workdir.to_path_buf())
        };
        if let Some(v) = &args.cluster_scale_sizes {
            cfg.sizes = v.clone();
        }
        heading("9. The route registry at cluster scale");
        if cfg.relay.is_none() {
            println!(
                "(no relay column: needs the moq-relay binary, cargo build --release -p moq-relay)"
            );
        }
        print!("{}", moq_bench::cluster_scale::run(&cfg).await?.render());
        took(t);
    }
    println!("\ntotal {:.0} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// `git describe --always --dirty` of the working directory, if it is a checkout.
fn git_revision() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let rev = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !rev.is_empty()).then_some(rev)
}

fn heading(title: &str) {
    println!("\n== {title} ==");
}

fn took(t: Instant) {
    println!("  ({:.1} s)", t.elapsed().as_secs_f64());
}

/// Our relay and the third-party ones that are installed; messages for those skipped.
fn relay_commands(args: &Args) -> Result<(Vec<RelayCommand>, Vec<String>)> {
    let me = std::env::current_exe().context("locating this program")?;
    let mut relays = Vec::new();
    let mut skipped = Vec::new();
    match &args.relay {
        Some(p) if p.is_file() => relays.push(RelayCommand::new(RelayKind::Ours, p)),
        Some(p) => bail!("--relay {}: no such file", p.display()),
        None => {
            let sibling = me.with_file_name("moq-relay");
            if sibling.is_file() {
                relays.push(RelayCommand::new(RelayKind::Ours, sibling));
            } else {
                let mut c = RelayCommand::new(RelayKind::Ours, &me);
                c.self_hosted = true;
                relays.push(c);
            }
        }
    }
    if args.ours_only {
        return Ok((relays, skipped));
    }
    let peers = std::env::var_os("MOQ_PEERS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/moq-peers")))
        .unwrap_or_default();
    for (kind, flag, file) in [
        (RelayKind::MoqDev, &args.moq_dev_relay, "moq-relay"),
        (RelayKind::Cloudflare, &args.ietf_relay, "moq-relay-ietf"),
    ] {
        let path = flag
            .clone()
            .unwrap_or_else(|| peers.join("cargo/bin").join(file));
        if path.is_file() {
            relays.push(RelayCommand::new(kind, path));
        } else {
            skipped.push(format!(
                "{}: {} not found (run scripts/install-peers.sh)",
                kind.label(),
                path.display()
            ));
        }
    }
    Ok((relays, skipped))
}

/// Runs the relay library as the `moq-relay` binary does (generated certificate, default
/// settings) until killed.
async fn serve_relay(addr: std::net::SocketAddr) -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let relay = moq_relay::Relay::bind(moq_relay::RelayConfig::development(addr)?)?;
    println!("certificate sha-256 fingerprint: {}", relay.fingerprint());
    relay.run().await;
    Ok(())
}

impl From<Model> for PublishModel {
    fn from(m: Model) -> Self {
        match m {
            Model::Namespace => PublishModel::Namespace,
            Model::Publish => PublishModel::Publish,
        }
    }
}
