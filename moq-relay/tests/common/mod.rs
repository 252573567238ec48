//! Helpers shared by the relay's integration tests: a timeout on every test, namespaces from
//! paths, and the `moq-relay` binary started on ephemeral ports.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use moq_core::TrackNamespace;

/// The longest any test here may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `f`, failing the test after [`TIMEOUT`]; installs a `RUST_LOG` tracing subscriber.
pub(crate) async fn timeout<F: std::future::Future>(f: F) -> F::Output {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("test timed out")
}

/// The namespace of a `/`-separated path.
pub(crate) fn ns(path: &str) -> TrackNamespace {
    TrackNamespace::from_strs(path.split('/').filter(|f| !f.is_empty())).unwrap()
}

/// Reads `n` objects (any groups), returning (group, payload) pairs in arrival order.
pub(crate) async fn read_objects(
    t: &mut moq_client::TrackConsumer,
    n: usize,
) -> Vec<(u64, String)> {
    let mut out = Vec::new();
    while out.len() < n {
        let mut g = t
            .next_group()
            .await
            .expect("track ended")
            .expect("track failed");
        while let Some(o) = g.next_object().await {
            let o = o.unwrap();
            out.push((
                o.location.group,
                String::from_utf8_lossy(&o.payload).into_owned(),
            ));
        }
    }
    out
}

/// The relay binary, started and read until it printed its address, fingerprint and (when
/// `--http` is given) its HTTP address; killed when dropped.
pub(crate) struct Binary {
    pub(crate) child: Child,
    pub(crate) port: u16,
    pub(crate) fingerprint: String,
    /// `http://host:port` of the HTTP side, if any.
    pub(crate) http: Option<String>,
}

impl Binary {
    /// `moq-relay --bind 127.0.0.1:0 ARGS` with `env`.
    #[allow(dead_code)] // not every test file starts one on an ephemeral port
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> Binary {
        Self::start_on("127.0.0.1:0", args, env)
    }

    /// `moq-relay --bind BIND ARGS` with `env`.
    pub(crate) fn start_on(bind: &str, args: &[&str], env: &[(&str, &str)]) -> Binary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_moq-relay"))
            .args(["--bind", bind])
            .args(args)
            .envs(env.iter().copied())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let wants_http = args.contains(&"--http");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut port, mut fingerprint, mut http) = (None, None, None);
        while port.is_none() || fingerprint.is_none() || (wants_http && http.is_none()) {
            let line = lines.next().expect("the relay exited").unwrap();
            if let Some(rest) = line.strip_prefix("moq-relay listening on ") {
                let addr = rest.split_whitespace().next().unwrap();
                port = Some(addr.rsplit(':').next().unwrap().parse().unwrap());
            }
            if let Some(rest) = line.strip_prefix("certificate sha-256 fingerprint: ") {
                fingerprint = Some(rest.trim().to_string());
            }
            if let Some(rest) = line.strip_prefix("http on ") {
                let addr: Vec<&str> = rest.split(':').take(2).collect();
                http = Some(format!("http://{}", addr.join(":")));
            }
        }
        // Keep reading so the relay never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        Binary {
            child,
            port: port.unwrap(),
            fingerprint: fingerprint.unwrap(),
            http,
        }
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
