//! What an application that embeds the relay pays: `moq-relay` with `default-features = false`
//! depends on no HTTP server, CLI parser, TOML reader, JWT library, Prometheus exporter or
//! second crypto stack, and on little more than `moq-client` does; the default features (the
//! binary) still have them all. Reads the dependency graph with `cargo tree` (offline, from the
//! lockfile; nothing is built).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::process::Command;

/// The crates `cargo tree -e normal` lists for `args`, by name.
fn crates(args: &[&str]) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .args(["-e", "normal", "--prefix", "none"])
        .args(args)
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "cargo tree {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// What only the binary's features bring.
const HEAVY: [&str; 10] = [
    "axum",
    "hyper",
    "clap",
    "toml",
    "jsonwebtoken",
    "aws-lc-rs",
    "aws-lc-sys",
    "metrics-exporter-prometheus",
    "tracing-subscriber",
    "anyhow",
];

#[test]
fn an_embedded_relay_costs_little_more_than_moq_client() {
    let embedded = crates(&["-p", "moq-relay", "--no-default-features"]);
    let client = crates(&["-p", "moq-client"]);
    let full = crates(&["-p", "moq-relay"]);
    for heavy in HEAVY {
        assert!(
            !embedded.contains(heavy),
            "moq-relay without default features depends on {heavy}"
        );
        assert!(full.contains(heavy), "the binary's features lost {heavy}");
    }
    let extra: Vec<&String> = embedded.difference(&client).collect();
    eprintln!(
        "crates: moq-client {}, moq-relay without default features {} (beyond moq-client: \
         {extra:?}), with them {}",
        client.len(),
        embedded.len(),
        full.len()
    );
    assert!(
        extra.len() <= 5,
        "moq-relay without default features needs {} crates moq-client does not: {extra:?}",
        extra.len()
    );
    // Token auth alone adds the JWT library but no HTTP server or CLI.
    let auth = crates(&[
        "-p",
        "moq-relay",
        "--no-default-features",
        "--features",
        "auth",
    ]);
    assert!(auth.contains("jsonwebtoken"));
    for heavy in ["axum", "hyper", "clap", "toml"] {
        assert!(!auth.contains(heavy), "the auth feature depends on {heavy}");
    }
}
