//! `moq-interop-client`: the MOQT interop test client of this stack, following the
//! moq-interop-runner test-client interface (TAP version 14 on stdout; exit 0 pass, 1 fail,
//! 127 unsupported).
//!
//! ```text
//! moq-interop-client -r moqt://localhost:4443 --tls-disable-verify          # every case
//! moq-interop-client -r https://relay:4443 -t announce-subscribe
//! moq-interop-client -r ws://relay:4443 -t fetch     # QMux over WebSocket (the relay's HTTP side)
//! RELAY_URL=moqt://localhost:4443 TESTCASE=fetch MOQT_DRAFT=draft-18 moq-interop-client
//! moq-interop-client -l
//! ```

mod cases;

use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use moq_client::{Client, Version};

/// MOQT interop test client (moq-interop-runner interface).
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Relay URL: https:// for WebTransport, moqt:// for raw QUIC, ws:// or wss:// for QMux
    /// over WebSocket (env RELAY_URL).
    #[arg(short, long)]
    relay: Option<String>,
    /// Run one case (env TESTCASE); all by default.
    #[arg(short, long)]
    test: Option<String>,
    /// List the cases, one per line.
    #[arg(short, long)]
    list: bool,
    /// Verbose logging to stderr (env VERBOSE=1).
    #[arg(short, long)]
    verbose: bool,
    /// Do not verify the relay's certificate (env TLS_DISABLE_VERIFY=1).
    #[arg(long)]
    tls_disable_verify: bool,
    /// Trust the relay's certificate by its SHA-256 fingerprint instead.
    #[arg(long)]
    fingerprint: Option<String>,
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for c in cases::CASES {
            println!("{c}");
        }
        return ExitCode::SUCCESS;
    }
    if args.verbose || env_flag("VERBOSE") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "debug".into()),
            )
            .with_writer(std::io::stderr)
            .try_init();
    }
    let url = args
        .relay
        .or_else(|| std::env::var("RELAY_URL").ok())
        .unwrap_or_else(|| "https://localhost:4443".to_string());
    let test = args
        .test
        .or_else(|| std::env::var("TESTCASE").ok().filter(|t| !t.is_empty()));
    // MOQT_DRAFT confines the client to one draft (e.g. draft-18).
    let versions = match std::env::var("MOQT_DRAFT").ok().filter(|d| !d.is_empty()) {
        None => Version::ALL.to_vec(),
        Some(d) => {
            let n = d.trim_start_matches("draft-").parse::<u32>().ok();
            match n.and_then(Version::from_draft) {
                Some(v) => vec![v],
                None => {
                    println!(
                        "TAP version 14\n# moq-interop-client {}\n# {d} is not supported\n1..0 # SKIP {d} not supported",
                        env!("CARGO_PKG_VERSION")
                    );
                    return ExitCode::from(127);
                }
            }
        }
    };
    let selected: Vec<&str> = match &test {
        None => cases::CASES.to_vec(),
        Some(t) => match cases::CASES.iter().find(|c| *c == t) {
            Some(c) => vec![*c],
            None => {
                println!("TAP version 14\n1..1\nok 1 - {t} # SKIP not implemented");
                return ExitCode::from(127);
            }
        },
    };
    let mut builder = Client::builder().versions(versions);
    if args.tls_disable_verify || env_flag("TLS_DISABLE_VERIFY") {
        builder = builder.insecure();
    }
    if let Some(fp) = &args.fingerprint {
        builder = match builder.fingerprint(fp) {
            Ok(b) => b,
            Err(e) => {
                println!("TAP version 14\nBail out! {e}");
                return ExitCode::FAILURE;
            }
        };
    }
    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => {
            println!("TAP version 14\nBail out! {e}");
            return ExitCode::FAILURE;
        }
    };
    let target = cases::Target {
        url: url.clone(),
        client,
    };
    println!("TAP version 14");
    println!(
        "# moq-interop-client {} (moqt-rs)",
        env!("CARGO_PKG_VERSION")
    );
    println!("# Relay: {url}");
    let draft = cases::negotiated_draft(&target).await;
    match draft {
        Some(d) => println!("# Draft: draft-{d}"),
        None => println!("# Draft: unknown (SETUP failed)"),
    }
    println!("1..{}", selected.len());
    let mut failed = false;
    for (i, case) in selected.iter().enumerate() {
        let n = i + 1;
        if let Some(why) = draft.and_then(|d| cases::unsupported(case, d)) {
            println!("ok {n} - {case} # SKIP {why}");
            continue;
        }
        let start = Instant::now();
        let res = tokio::time::timeout(cases::timeout(case), cases::run(case, &target)).await;
        let ms = start.elapsed().as_millis();
        match res {
            Ok(Ok(())) => {
                println!("ok {n} - {case}\n  ---\n  duration_ms: {ms}\n  ...");
            }
            Ok(Err(f)) => {
                failed = true;
                println!(
                    "not ok {n} - {case}\n  ---\n  duration_ms: {ms}\n  expected: {}\n  received: {}\n  ...",
                    yaml(&f.expected),
                    yaml(&f.received)
                );
            }
            Err(_) => {
                failed = true;
                println!(
                    "not ok {n} - {case}\n  ---\n  duration_ms: {ms}\n  received: timeout\n  message: \"no result after {} ms\"\n  ...",
                    cases::timeout(case).as_millis()
                );
            }
        }
    }
    // The sessions' close reaches the relay before the process exits: otherwise the relay
    // holds them (and what they publish) until its idle timeout, and a case run next by
    // another process meets this one's publishers.
    let _ = tokio::time::timeout(CLOSE_WAIT, target.client.wait_idle()).await;
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// How long the sessions may take to close before the process exits.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// A YAML scalar: quoted and escaped.
fn yaml(s: &str) -> String {
    format!(
        "\"{}\"",
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', " ")
    )
}
