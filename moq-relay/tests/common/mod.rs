//! Helpers shared by the relay's integration tests: a timeout on every test, namespaces from
//! paths, the `moq-relay` binary started on ephemeral ports and signalled, certificates on
//! disk, and a lossy UDP path ([`proxy`]).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "registry-redis")]
pub(crate) mod cluster_store;
pub(crate) mod proxy;
#[cfg(feature = "registry-redis")]
pub(crate) mod store;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use moq_core::TrackNamespace;

/// A UDP port free on loopback now, for a relay binary that must advertise its port before it
/// binds it.
pub(crate) fn free_port() -> u16 {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The longest any test here may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `f`, failing the test after [`TIMEOUT`]; installs a `RUST_LOG` tracing subscriber.
pub(crate) async fn timeout<F: std::future::Future>(f: F) -> F::Output {
    timeout_after(TIMEOUT, f).await
}

/// [`timeout`] with a limit of its own, for the few tests that need longer.
pub(crate) async fn timeout_after<F: std::future::Future>(limit: Duration, f: F) -> F::Output {
    init_tracing();
    tokio::time::timeout(limit, f)
        .await
        .expect("test timed out")
}

/// Runs one case of a sweep (one draft, one transport, ...) with [`TIMEOUT`], which bounds a
/// case and never a whole sweep. A timeout names the case.
pub(crate) async fn case<F: std::future::Future>(name: String, f: F) -> F::Output {
    init_tracing();
    match tokio::time::timeout(TIMEOUT, f).await {
        Ok(out) => out,
        Err(_) => panic!("case {name}: timed out after {TIMEOUT:?}"),
    }
}

/// A `RUST_LOG` tracing subscriber writing to the test's output (once per test binary).
pub(crate) fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// A relay on an ephemeral loopback port with the development configuration, running.
pub(crate) fn dev_relay() -> moq_relay::Relay {
    init_tracing();
    let config = moq_relay::RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
    let relay = moq_relay::Relay::bind(config).unwrap();
    relay.spawn();
    relay
}

/// A moq-transport session to `relay` over raw QUIC that takes requests itself, offering only
/// `version`: what the relay sends and answers, field by field.
pub(crate) async fn raw_session(
    relay: &moq_relay::Relay,
    version: moq_core::Version,
) -> moq_transport::Session {
    let client = moq_transport::endpoint::Client::new(moq_transport::endpoint::ClientConfig {
        tls: moq_transport::tls::ClientTls::pinned(
            moq_transport::tls::parse_fingerprint(&relay.fingerprint()).unwrap(),
        ),
        versions: vec![version],
        session: moq_transport::SessionConfig::default().with_requests(),
        share_indexes: false,
        ..Default::default()
    })
    .unwrap();
    let url = format!("moqt://localhost:{}/", relay.local_addr().port());
    client.connect(&url).await.unwrap()
}

/// A moq-client client pinned to `fingerprint`.
pub(crate) fn client(fingerprint: &str) -> moq_client::Client {
    moq_client::Client::builder()
        .fingerprint(fingerprint)
        .unwrap()
        .build()
        .unwrap()
}

/// The namespace of a `/`-separated path (its path form).
pub(crate) fn ns(path: &str) -> TrackNamespace {
    path.parse().unwrap()
}

/// A fresh directory under the target dir.
pub(crate) fn workdir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A relay with a certificate from files (so a restarted relay has the same keys, and resets
/// its predecessor's connections) and no authorization.
pub(crate) struct FileCertRelay {
    /// The certificate's fingerprint.
    pub(crate) fingerprint: String,
    args: Vec<String>,
    dir: PathBuf,
}

impl FileCertRelay {
    /// A certificate written under a fresh directory `name`.
    pub(crate) fn new(name: &str) -> Self {
        let dir = workdir(name);
        let fingerprint = write_cert(&dir);
        let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
        let args = [
            "--tls-cert".into(),
            path("cert.pem"),
            "--tls-key".into(),
            path("key.pem"),
        ]
        .into_iter()
        .chain(["--auth-disabled".to_string()])
        .collect();
        FileCertRelay {
            fingerprint,
            args,
            dir,
        }
    }

    /// The certificate's file (`--tls-cert`), for relays that share it.
    #[allow(dead_code)] // not every test file shares the files
    pub(crate) fn cert_path(&self) -> String {
        self.dir.join("cert.pem").to_str().unwrap().to_string()
    }

    /// The key's file (`--tls-key`).
    #[allow(dead_code)] // not every test file shares the files
    pub(crate) fn key_path(&self) -> String {
        self.dir.join("key.pem").to_str().unwrap().to_string()
    }

    /// The relay on an ephemeral port.
    pub(crate) fn start(&self) -> Binary {
        Binary::start(&self.arg_strs(), &[])
    }

    /// The relay again, on `port`.
    pub(crate) fn restart_on(&self, port: u16) -> Binary {
        Binary::start_on(&format!("127.0.0.1:{port}"), &self.arg_strs(), &[])
    }

    fn arg_strs(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }
}

/// Writes a self-signed certificate for localhost as `cert.pem` / `key.pem` in `dir`; returns
/// its fingerprint.
pub(crate) fn write_cert(dir: &Path) -> String {
    let c = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    // Write the key first: the relay reloads when either file changes, and must see a pair.
    let (cert_tmp, key_tmp) = (dir.join("cert.tmp"), dir.join("key.tmp"));
    std::fs::write(&cert_tmp, c.cert.pem()).unwrap();
    std::fs::write(&key_tmp, c.signing_key.serialize_pem()).unwrap();
    std::fs::rename(&key_tmp, dir.join("key.pem")).unwrap();
    std::fs::rename(&cert_tmp, dir.join("cert.pem")).unwrap();
    moq_transport::tls::hex(&moq_transport::tls::fingerprint(c.cert.der()))
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
    /// What the relay printed so far after its start lines (its log, on stdout, and stderr),
    /// line by line; stderr is also echoed to ours.
    log: std::sync::Arc<Log>,
}

/// The lines a relay binary printed, and a signal for each new one.
#[derive(Default)]
pub(crate) struct Log {
    lines: std::sync::Mutex<Vec<String>>,
    grew: tokio::sync::Notify,
}

impl Log {
    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
        self.grew.notify_waiters();
    }
}

impl Binary {
    /// `moq-relay --bind 127.0.0.1:0 ARGS` with `env`.
    #[allow(dead_code)] // not every test file starts one on an ephemeral port
    pub(crate) fn start(args: &[&str], env: &[(&str, &str)]) -> Binary {
        Self::start_on("127.0.0.1:0", args, env)
    }

    /// `moq-relay --bind BIND ARGS` with `env` (`RUST_LOG` is `warn` unless `env` sets it).
    pub(crate) fn start_on(bind: &str, args: &[&str], env: &[(&str, &str)]) -> Binary {
        let mut child = Command::new(env!("CARGO_BIN_EXE_moq-relay"))
            .args(["--bind", bind])
            .args(args)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = std::sync::Arc::new(Log::default());
        let err_log = log.clone();
        let err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
        std::thread::spawn(move || {
            for line in err_lines.map_while(Result::ok) {
                eprintln!("{line}");
                err_log.push(line);
            }
        });
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
        let out_log = log.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                out_log.push(line);
            }
        });
        Binary {
            child,
            port: port.unwrap(),
            fingerprint: fingerprint.unwrap(),
            http,
            log,
        }
    }

    /// The lines of the relay's log so far that contain every one of `words`.
    pub(crate) fn log_lines(&self, words: &[&str]) -> Vec<String> {
        self.log
            .lines
            .lock()
            .unwrap()
            .iter()
            .filter(|l| words.iter().all(|w| l.contains(w)))
            .cloned()
            .collect()
    }

    /// Waits until the relay's log has a line that contains every one of `words` (the
    /// caller's timeout bounds the wait).
    #[allow(dead_code)] // not every test file reads a log
    pub(crate) async fn logged(&self, words: &[&str]) {
        loop {
            let grew = self.log.grew.notified();
            if !self.log_lines(words).is_empty() {
                return;
            }
            grew.await;
        }
    }
}

impl Binary {
    /// Sends the signal `name` (`INT`, `TERM`, ...) to the process with `kill`.
    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit, at most `limit`.
    pub(crate) async fn exited_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the relay did not exit within {limit:?}"
            );
            // A child process has no signal to await here.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The next event of a discovery (SUBSCRIBE_NAMESPACE) stream, within `limit`; panics if the
/// stream ends or fails first.
pub(crate) async fn next_event(
    stream: &mut moq_client::NamespaceStream,
    limit: Duration,
) -> moq_client::NamespaceEvent {
    match tokio::time::timeout(limit, stream.next()).await {
        Ok(Some(Ok(ev))) => ev,
        Ok(other) => panic!("discovery ended: {other:?}"),
        Err(_) => panic!("no discovery event within {limit:?}"),
    }
}
