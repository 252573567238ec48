//! What the `moq` tests share: a relay in this process, the `moq` binary started against it,
//! its stderr collected (and waited on line by line), and a timeout for each case.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

/// The longest one case may take.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs one case with [`TIMEOUT`]; a timeout names the case.
pub(crate) async fn case<F: std::future::Future>(name: &str, f: F) -> F::Output {
    match tokio::time::timeout(TIMEOUT, f).await {
        Ok(out) => out,
        Err(_) => panic!("case {name}: timed out after {TIMEOUT:?}"),
    }
}

/// A relay on an ephemeral loopback port with the development configuration, running.
pub(crate) fn relay() -> moq_relay::Relay {
    let config = moq_relay::RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
    let relay = moq_relay::Relay::bind(config).unwrap();
    relay.spawn();
    relay
}

/// How the `moq` processes reach the relay.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Transport {
    /// moqt:// (raw QUIC).
    Quic,
    /// https:// (WebTransport).
    WebTransport,
}

/// The connection flags for `relay`: URL, pinned fingerprint, and `--draft` if given.
pub(crate) fn flags(
    relay: &moq_relay::Relay,
    transport: Transport,
    draft: Option<u64>,
) -> Vec<String> {
    let port = relay.local_addr().port();
    let url = match transport {
        Transport::Quic => format!("moqt://localhost:{port}"),
        Transport::WebTransport => format!("https://localhost:{port}/"),
    };
    let mut flags = vec![
        "--url".to_string(),
        url,
        "--fingerprint".to_string(),
        relay.fingerprint(),
    ];
    if let Some(d) = draft {
        flags.extend(["--draft".to_string(), d.to_string()]);
    }
    flags
}

/// A running `moq`: its stderr is collected line by line (and echoed to the test's output).
pub(crate) struct Moq {
    pub(crate) child: Child,
    name: String,
    stderr: watch::Receiver<Vec<String>>,
}

/// `moq ARGS`, stdout and stdin as given, killed when dropped.
pub(crate) fn moq(name: &str, args: &[String], stdin: Stdio, stdout: Stdio) -> Moq {
    let mut child = Command::new(env!("CARGO_BIN_EXE_moq"))
        .args(args)
        .env_remove("MOQ_URL")
        .env_remove("MOQ_FINGERPRINT")
        .env_remove("RUST_BACKTRACE")
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start moq ({name}): {e}"));
    let (tx, rx) = watch::channel(Vec::new());
    let mut reader = BufReader::new(child.stderr.take().unwrap()).lines();
    let tag = name.to_string();
    tokio::spawn(async move {
        while let Ok(Some(line)) = reader.next_line().await {
            eprintln!("[{tag}] {line}");
            tx.send_modify(|v| v.push(line));
        }
    });
    Moq {
        child,
        name: name.to_string(),
        stderr: rx,
    }
}

impl Moq {
    /// Waits until a line of stderr contains `text`.
    pub(crate) async fn stderr_line(&mut self, text: &str) {
        let found = self
            .stderr
            .wait_for(|lines| lines.iter().any(|l| l.contains(text)))
            .await
            .is_ok();
        if !found {
            panic!(
                "{}: stderr ended without a line containing {text:?}: {:?}",
                self.name,
                self.stderr.borrow()
            );
        }
    }

    /// Everything it wrote to stderr so far.
    pub(crate) fn stderr(&self) -> Vec<String> {
        self.stderr.borrow().clone()
    }

    /// Waits for the exit; its code and stderr (all of it).
    pub(crate) async fn exit(mut self) -> (Option<i32>, Vec<String>) {
        let status = self.child.wait().await.unwrap();
        // Stderr ends with the process.
        let _ = self.stderr.wait_for(|_| false).await;
        (status.code(), self.stderr())
    }
}

/// `s` as an owned argument list.
pub(crate) fn args(s: &[&str]) -> Vec<String> {
    s.iter().map(|a| a.to_string()).collect()
}
