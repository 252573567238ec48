//! A real Valkey/Redis server per test (scripts/install-redis.sh installs it), killed when its
//! guard drops: for the route registry's tests.

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moq_relay::registry::{RedisRegistry, RedisRegistryConfig, Registry};

use super::{Binary, ns};

/// The store's server binary, or `None` when the tests are told to skip.
pub(crate) fn server_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("MOQ_REDIS_SERVER") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["valkey-server", "redis-server"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    if std::env::var("MOQ_SKIP_REGISTRY_TESTS").as_deref() == Ok("1") {
        eprintln!("MOQ_SKIP_REGISTRY_TESTS=1 and no redis-server: registry test skipped");
        return None;
    }
    panic!(
        "no valkey-server or redis-server on PATH: the registry tests need one \
         (scripts/install-redis.sh, apt-get install redis-server, or MOQ_REDIS_SERVER=/path); \
         MOQ_SKIP_REGISTRY_TESTS=1 skips them"
    );
}

/// A store server of this test's own; killed when dropped.
pub(crate) struct Store {
    binary: PathBuf,
    port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl Store {
    pub(crate) fn start() -> Option<Store> {
        Self::start_with(&[])
    }

    /// A server with these further arguments (e.g. `--requirepass`).
    pub(crate) fn start_with(args: &[&str]) -> Option<Store> {
        let binary = server_binary()?;
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut store = Store {
            binary,
            port,
            args: args.iter().map(|a| a.to_string()).collect(),
            child: None,
        };
        store.spawn();
        Some(store)
    }

    /// Starts the server and returns once it says it accepts connections.
    pub(crate) fn spawn(&mut self) {
        let mut args = vec!["--port".to_string(), self.port.to_string()];
        args.extend(self.args.iter().cloned());
        self.child = Some(spawn_server(&self.binary, &args));
    }

    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub(crate) fn registry(&self, lease_ms: u64) -> RedisRegistry {
        let mut config = RedisRegistryConfig::new(self.url());
        config.lease = Duration::from_millis(lease_ms);
        config.timeout = Duration::from_millis(500);
        config.cache_ttl = Duration::ZERO;
        RedisRegistry::new(config).unwrap()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `binary` on loopback without persistence, with `args` (its port among them); returns once
/// it says it accepts connections.
pub(crate) fn spawn_server(binary: &Path, args: &[String]) -> Child {
    let mut child = Command::new(binary)
        .args(["--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--loglevel", "notice"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    // The server's own signal that it is ready; its output ends if it exits instead.
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|line| line.contains("Ready to accept connections"));
    assert!(
        ready,
        "{} exited before accepting connections",
        binary.display()
    );
    // Keep draining its output so it never blocks on a full pipe.
    std::thread::spawn(move || lines.map_while(Result::ok).for_each(drop));
    child
}

/// How many scripts (EVALSHA, EVAL) a store's `INFO commandstats` counts.
pub(crate) fn script_calls(info: &str) -> u64 {
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Waits until `registry` names relay `id` the origin of the namespace of `path` (5 s at most).
pub(crate) async fn registered(registry: &RedisRegistry, path: &str, id: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if matches!(registry.lookup(&ns(path)).await, Ok(Some(o)) if o.relay.id == id) {
            return;
        }
        assert!(Instant::now() < deadline, "{path} not registered as {id}'s");
        // The store has no signal to wait on from here.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Store {
    /// The relay binary as origin relay `id` of this store's cluster: a generated certificate,
    /// no auth, a port of its own that it advertises; `extra` arguments after those.
    pub(crate) fn origin_binary(&self, id: &str, extra: &[&str]) -> Binary {
        let port = super::free_port();
        let advertise = format!("moqt://localhost:{port}");
        let url = self.url();
        let mut args = vec![
            "--tls-generate",
            "localhost",
            "--auth-disabled",
            "--registry",
            &url,
            "--relay-id",
            id,
            "--advertise",
            &advertise,
        ];
        args.extend_from_slice(extra);
        Binary::start_on(&format!("127.0.0.1:{port}"), &args, &[])
    }
}
