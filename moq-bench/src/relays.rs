//! Relays run as child processes (ours and third-party ones), and the clients that talk to
//! them.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use moq_core::Version;
use moq_transport::endpoint::{self, ClientConfig};
use moq_transport::tls::ClientTls;

use crate::procfs;

/// Which relay implementation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RelayKind {
    /// This workspace's `moq-relay`.
    Ours,
    /// moq-dev's `moq-relay` (crates.io `moq-relay`).
    MoqDev,
    /// Cloudflare's `moq-relay-ietf`.
    Cloudflare,
}

impl RelayKind {
    /// A short column label.
    pub fn label(self) -> &'static str {
        match self {
            RelayKind::Ours => "ours",
            RelayKind::MoqDev => "moq-dev",
            RelayKind::Cloudflare => "cloudflare",
        }
    }
}

/// How to start one relay.
#[derive(Clone, Debug)]
pub struct RelayCommand {
    /// Which implementation.
    pub kind: RelayKind,
    /// The executable.
    pub program: PathBuf,
    /// For [`RelayKind::Ours`]: the program is `moq-bench` itself, started with
    /// `--serve-relay ADDR` (the same library and runtime as the `moq-relay` binary), because
    /// the binary was not built.
    pub self_hosted: bool,
    /// More arguments for our relay binary (a cluster's flags, a certificate).
    pub extra: Vec<String>,
    /// CPUs the relay process is started on (empty: wherever this process may run).
    pub cpus: Vec<usize>,
}

impl RelayCommand {
    /// A relay started from `program`.
    pub fn new(kind: RelayKind, program: impl Into<PathBuf>) -> Self {
        RelayCommand {
            kind,
            program: program.into(),
            self_hosted: false,
            extra: Vec::new(),
            cpus: Vec::new(),
        }
    }

    /// A description for the report.
    pub fn describe(&self) -> String {
        if self.self_hosted {
            format!(
                "{}: {} --serve-relay (moq_relay library; target/release/moq-relay not built)",
                self.kind.label(),
                self.program.display()
            )
        } else {
            format!("{}: {}", self.kind.label(), self.program.display())
        }
    }
}

/// A free UDP port on 127.0.0.1 (free when asked; a relay binds it right after).
pub fn free_port() -> Result<u16> {
    let s = UdpSocket::bind("127.0.0.1:0").context("binding a probe socket")?;
    Ok(s.local_addr()?.port())
}

/// A relay child process; killed when dropped.
#[derive(Debug)]
pub struct RelayProcess {
    kind: RelayKind,
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl RelayProcess {
    /// Starts the relay on a free loopback port with warning-level logs (to a file in
    /// `workdir`) and waits until it completes a MOQT handshake.
    pub async fn start(cmd: &RelayCommand, workdir: &Path) -> Result<RelayProcess> {
        std::fs::create_dir_all(workdir)
            .with_context(|| format!("creating {}", workdir.display()))?;
        let port = free_port()?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let log = workdir.join(format!("{}-{port}.log", cmd.kind.label()));
        let mut c = Command::new(&cmd.program);
        match (cmd.kind, cmd.self_hosted) {
            (RelayKind::Ours, true) => {
                c.arg("--serve-relay").arg(addr.to_string());
                c.env("RUST_LOG", "warn");
            }
            (RelayKind::Ours, false) => {
                c.args([
                    "--bind",
                    &addr.to_string(),
                    "--tls-generate",
                    "localhost",
                    "--auth-disabled",
                ]);
                c.args(&cmd.extra);
                c.env("RUST_LOG", "warn");
            }
            (RelayKind::MoqDev, _) => {
                c.args([
                    "--listen",
                    &addr.to_string(),
                    "--listen-tls-generate",
                    "localhost,127.0.0.1",
                    "--auth-public",
                    "**",
                    "--log-level",
                    "warn",
                ]);
            }
            (RelayKind::Cloudflare, _) => {
                let (cert, key) = write_pem(workdir)?;
                let coordinator = workdir.join(format!("coordinator-{port}.json"));
                c.arg("--bind")
                    .arg(addr.to_string())
                    .arg("--tls-cert")
                    .arg(cert)
                    .arg("--tls-key")
                    .arg(key)
                    .arg("--coordinator-file")
                    .arg(coordinator);
                c.env("RUST_LOG", "warn");
            }
        }
        let log_file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log_file));
        let child = crate::pin::spawn_on(&mut c, &cmd.cpus)
            .with_context(|| format!("starting {}", cmd.program.display()))?;
        let mut relay = RelayProcess {
            kind: cmd.kind,
            child,
            addr,
            log,
        };
        relay.wait_ready().await?;
        Ok(relay)
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let client = transport_client(Version::ALL)?;
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut last = String::new();
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited with {status} before accepting sessions; log:\n{}",
                    self.kind.label(),
                    self.log_tail()
                );
            }
            let attempt =
                tokio::time::timeout(Duration::from_secs(2), client.connect(&self.url())).await;
            match attempt {
                Ok(Ok(s)) => {
                    s.close(moq_core::codes::SessionErrorCode::NO_ERROR, "ready");
                    return Ok(());
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = "connect timed out".into(),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!(
            "{} did not accept a session within 20 s ({last}); log:\n{}",
            self.kind.label(),
            self.log_tail()
        )
    }

    /// Which implementation.
    pub fn kind(&self) -> RelayKind {
        self.kind
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The relay's UDP address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The raw-QUIC URL of the relay.
    pub fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/", self.addr.port())
    }

    /// CPU seconds (user + system) the relay has used so far.
    pub fn cpu_seconds(&self) -> Result<f64> {
        procfs::cpu_seconds(self.pid())
    }

    /// The relay's resident memory in KiB.
    pub fn rss_kib(&self) -> Result<u64> {
        procfs::rss_kib(self.pid())
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines the relay logged.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes a self-signed certificate and key for `localhost` / `127.0.0.1` as PEM files.
pub(crate) fn write_pem(dir: &Path) -> Result<(PathBuf, PathBuf)> {
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, ck.cert.pem())?;
    std::fs::write(&key, ck.signing_key.serialize_pem())?;
    Ok((cert, key))
}

/// A moq-transport client offering `versions` that accepts any server certificate (the
/// relays under test use generated ones; signatures are still checked).
pub fn transport_client(versions: &[Version]) -> Result<endpoint::Client> {
    Ok(endpoint::Client::new(ClientConfig {
        tls: ClientTls::insecure(),
        versions: versions.to_vec(),
        ..Default::default()
    })?)
}

/// A moq-client client offering `versions`, accepting any server certificate.
pub fn app_client(versions: &[Version]) -> Result<moq_client::Client> {
    Ok(moq_client::Client::builder()
        .insecure()
        .versions(versions.to_vec())
        .build()?)
}
