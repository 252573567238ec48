//! The `moq-relay` binary as an operator runs it: `curl` on every HTTP path, a certificate
//! swapped on disk, refusing to start open, keys and tokens from `moq-relay token`, and
//! settings from the environment and a TOML file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use moq_core::codes::RequestErrorCode;
use moq_transport::endpoint::{Client, ClientConfig, QuicSettings};
use moq_transport::namespace::NamespaceEvent;
use moq_transport::tls::{ClientTls, parse_fingerprint};
use moq_transport::{Error, Session};

mod common;
use common::{Binary, FileCertRelay, ns, timeout, workdir, write_cert};

const RELAY: &str = env!("CARGO_BIN_EXE_moq-relay");

fn run(args: &[&str]) -> Output {
    Command::new(RELAY).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

struct Relay {
    /// The process (killed on drop).
    bin: Binary,
    port: u16,
    http: String,
}

impl Relay {
    fn start(args: &[&str], env: &[(&str, &str)]) -> Relay {
        let args: Vec<&str> = ["--http", "127.0.0.1:0"]
            .iter()
            .copied()
            .chain(args.iter().copied())
            .collect();
        let bin = Binary::start(&args, env);
        Relay {
            port: bin.port,
            http: bin.http.clone().unwrap(),
            bin,
        }
    }

    /// `curl -s` on `path`: (status, body).
    fn curl(&self, path: &str, extra: &[&str]) -> (u16, String) {
        let out = Command::new("curl")
            .args(["-s", "-w", "\n%{http_code}"])
            .args(extra)
            .arg(format!("{}{path}", self.http))
            .output()
            .expect("curl");
        let text = String::from_utf8(out.stdout).unwrap();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.trim().parse().unwrap(), body.to_string())
    }

    async fn connect(&self, fingerprint: &str, query: &str) -> Result<Session, Error> {
        let client = Client::new(ClientConfig {
            tls: ClientTls::pinned(parse_fingerprint(fingerprint).unwrap()),
            ..Default::default()
        })
        .unwrap();
        client
            .connect(&format!("moqt://localhost:{}/{query}", self.port))
            .await
    }
}

/// Each line of Prometheus text is a comment or `name{labels} value`.
fn assert_prometheus(text: &str) {
    for line in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        value
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("value of {line:?}"));
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':'),
            "{line}"
        );
    }
}

/// Keys and a token from `moq-relay token`; curl on every path; the certificate swapped on
/// disk reaches the next connection while the session before it goes on.
#[tokio::test]
async fn operator_paths_tokens_and_certificate_reload() {
    timeout(async {
        let dir = workdir("operator");
        let fp1 = write_cert(&dir);
        let (key, public) = (dir.join("relay.jwk"), dir.join("relay.pub.jwk"));
        let (k, p) = (key.to_str().unwrap(), public.to_str().unwrap());
        stdout(&run(&[
            "token",
            "generate",
            "--algorithm",
            "EdDSA",
            "--id",
            "k1",
            "--out",
            k,
            "--public",
            p,
        ]));
        let token = stdout(&run(&[
            "token",
            "sign",
            "--key",
            k,
            "--root",
            "room",
            "--publish",
            "a",
            "--subscribe",
            "**",
        ]));
        let token = token.trim();
        let verified = stdout(&run(&["token", "verify", "--key", p, token]));
        assert!(verified.contains("room/a"), "{verified}");

        let cert = dir.join("cert.pem");
        let keypem = dir.join("key.pem");
        let relay = Relay::start(
            &[
                "--tls-cert",
                cert.to_str().unwrap(),
                "--tls-key",
                keypem.to_str().unwrap(),
                "--auth-key",
                p,
                "--auth-public",
                "demo",
            ],
            &[],
        );
        // The fingerprint paths, exactly the certificate's.
        for path in ["/certificate.sha256", "/fingerprint"] {
            assert_eq!(relay.curl(path, &[]), (200, fp1.clone()));
        }
        assert_eq!(relay.curl("/health", &[]), (200, "ok\n".to_string()));
        assert_eq!(relay.curl("/nope", &[]).0, 404);
        assert_eq!(relay.curl("/metrics", &["-X", "POST"]).0, 405);
        // The web page and what it connects with (the page itself is checked in Chromium by
        // the interop matrix's `page` row).
        assert_eq!(
            relay.curl("/connect.json", &[]),
            (
                200,
                format!(r#"{{"port":{},"fingerprint":"{fp1}"}}"#, relay.port)
            )
        );
        let (code, html) = relay.curl("/", &[]);
        assert_eq!(code, 200);
        assert!(html.contains(r#"id="namespaces""#), "{html}");
        for script in [
            "/app.js",
            "/moq.js",
            "/moq-wire.js",
            "/moq-handles.js",
            "/connect.js",
            "/qmux.js",
            "/player.js",
        ] {
            assert_eq!(relay.curl(script, &[]).0, 200, "{script}");
        }

        // A session with the token publishes room/a; another namespace is refused.
        let session = relay.connect(&fp1, &format!("?jwt={token}")).await.unwrap();
        let _a = session.publish_namespace(ns("room/a")).await.unwrap();
        match session.publish_namespace(ns("room/b")).await {
            Err(Error::Rejected(e)) => assert_eq!(e.code, RequestErrorCode::UNAUTHORIZED),
            r => panic!("{:?}", r.map(|_| ())),
        }
        let anon = relay.connect(&fp1, "").await.unwrap();
        let _d = anon.publish_namespace(ns("demo/x")).await.unwrap();

        // /announced: the token sees everything, the anonymous caller only the public prefix.
        let (code, all) = relay.curl(&format!("/announced?jwt={token}"), &[]);
        assert_eq!(code, 200);
        assert!(
            all.contains(r#"["room","a"]"#) && all.contains(r#"["demo","x"]"#),
            "{all}"
        );
        let (_, public) = relay.curl("/announced", &[]);
        assert!(
            !public.contains("room") && public.contains(r#"["demo","x"]"#),
            "{public}"
        );
        let bearer = format!("Authorization: Bearer {token}");
        let (_, by_header) = relay.curl("/announced?prefix=room", &["-H", &bearer]);
        assert!(
            by_header.contains(r#"["room","a"]"#) && !by_header.contains("demo"),
            "{by_header}"
        );

        let (code, metrics) = relay.curl("/metrics", &[]);
        assert_eq!(code, 200);
        assert_prometheus(&metrics);
        assert!(
            metrics.contains("moq_relay_sessions_active{version=\""),
            "{metrics}"
        );
        assert!(metrics.contains("outcome=\"UNAUTHORIZED\""), "{metrics}");
        assert!(
            metrics.contains("moq_relay_request_seconds_bucket"),
            "{metrics}"
        );

        // A new certificate on disk: served to the next connection, the open session goes on.
        let fp2 = write_cert(&dir);
        assert_ne!(fp1, fp2);
        let started = Instant::now();
        while relay.curl("/certificate.sha256", &[]).1 != fp2 {
            assert!(started.elapsed() < Duration::from_secs(10), "no reload");
            // The relay polls the files; no signal reaches a test from it.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let fresh = relay.connect(&fp2, &format!("?jwt={token}")).await.unwrap();
        drop(fresh);
        assert!(
            relay.connect(&fp1, "").await.is_err(),
            "the old certificate is still served"
        );
        let _still = session
            .subscribe_namespace(ns("room"))
            .await
            .expect("the session from before the swap goes on");
    })
    .await;
}

/// Without a key or a public prefix the relay refuses to start; settings come from the
/// environment and from a TOML file, flags on top.
#[tokio::test]
async fn refuses_to_run_open_and_reads_env_and_file() {
    timeout(async {
        let refused = run(&["--bind", "127.0.0.1:0", "--tls-generate", "localhost"]);
        assert!(!refused.status.success());
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains("--auth-disabled"),
            "{}",
            String::from_utf8_lossy(&refused.stderr)
        );
        let dir = workdir("settings");
        let file = dir.join("relay.toml");
        std::fs::write(
            &file,
            "tls_generate = [\"localhost\"]\nauth_public = [\"demo\"]\ncongestion = \"bbr\"\n",
        )
        .unwrap();
        let relay = Relay::start(
            &["--config", file.to_str().unwrap()],
            &[("MOQ_RELAY_LOG_FORMAT", "json")],
        );
        let (_, fp) = relay.curl("/fingerprint", &[]);
        let anon = relay.connect(&fp, "").await.unwrap();
        let _d = anon.publish_namespace(ns("demo/x")).await.unwrap();
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "no_such_setting = 1\n").unwrap();
        let out = run(&["--config", bad.to_str().unwrap()]);
        assert!(!out.status.success());
    })
    .await;
}

/// Two relay processes linked with the cluster flags: a namespace published on A is known
/// to B (`/announced`, which never lists the cluster's own entries).
#[tokio::test]
async fn cluster_flags_link_two_processes() {
    timeout(async {
        let a = Relay::start(
            &[
                "--tls-generate",
                "localhost",
                "--auth-disabled",
                "--cluster",
                "--cluster-node",
                "A",
            ],
            &[],
        );
        let (_, fp) = a.curl("/fingerprint", &[]);
        let peer = format!("moqt://localhost:{}", a.port);
        let b = Relay::start(
            &[
                "--tls-generate",
                "localhost",
                "--auth-disabled",
                "--cluster-node",
                "B",
            ],
            &[
                ("MOQ_RELAY_CLUSTER_PEER", &peer),
                ("MOQ_RELAY_CLUSTER_FINGERPRINT", &fp),
            ],
        );
        let publisher = a.connect(&fp, "").await.unwrap();
        let _h = publisher.publish_namespace(ns("room/live")).await.unwrap();
        let started = Instant::now();
        loop {
            let (_, listed) = b.curl("/announced", &[]);
            if listed.contains(r#"["room","live"]"#) {
                assert!(!listed.contains("moq-cluster"), "{listed}");
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "B never learned: {listed}"
            );
            // The HTTP side has no push; poll.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// The chain of docs/relay.md's example started with self-signed certificates and no
/// `--cluster-fingerprint`: the links cannot be made, and each dialing relay says why at
/// WARN (naming the peer and the certificate), in `/health`'s body and in `/metrics`. Before,
/// nothing at any level said so (the failed dial was a DEBUG line).
#[tokio::test]
async fn a_cluster_link_that_cannot_be_made_says_why() {
    timeout(async {
        let common = ["--tls-generate", "localhost", "--auth-disabled"];
        let info = [("RUST_LOG", "info")];
        let a = Relay::start(
            &[&common[..], &["--cluster", "--cluster-node", "A"]].concat(),
            &info,
        );
        let peer_a = format!("moqt://localhost:{}", a.port);
        let b = Relay::start(
            &[
                &common[..],
                &["--cluster-node", "B", "--cluster-peer", &peer_a],
            ]
            .concat(),
            &info,
        );
        let peer_b = format!("moqt://localhost:{}", b.port);
        let c = Relay::start(
            &[
                &common[..],
                &["--cluster-node", "C", "--cluster-peer", &peer_b],
            ]
            .concat(),
            &info,
        );
        for (dialer, peer) in [(&b, &peer_a), (&c, &peer_b)] {
            let started = Instant::now();
            loop {
                let warned = dialer
                    .bin
                    .log_lines(&["WARN", peer.as_str(), "certificate"]);
                let (status, health) = dialer.curl("/health", &[]);
                let (_, metrics) = dialer.curl("/metrics", &[]);
                let down = format!("link {peer} down after ");
                let gauge = format!("moq_relay_cluster_link_up{{peer=\"{peer}\"}} 0");
                let failures = "moq_relay_cluster_link_failures_total{";
                if !warned.is_empty()
                    && health.contains(&down)
                    && health.contains("(certificate)")
                    && metrics.contains(&gauge)
                    && metrics.lines().any(|l| {
                        l.starts_with(failures)
                            && l.contains(peer.as_str())
                            && l.contains("certificate")
                    })
                {
                    // The relay still serves its own clients: healthy, with the reason below.
                    assert_eq!(status, 200);
                    assert!(health.starts_with("ok\n"), "{health}");
                    assert!(warned[0].contains("--cluster-fingerprint"), "{}", warned[0]);
                    eprintln!("{health}{}", warned[0]);
                    break;
                }
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "no reason given for the link to {peer}: WARN {warned:?}, /health {health:?}"
                );
                // The log and the HTTP side have no push; poll.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    })
    .await;
}

/// A relay process killed outright (SIGKILL: no GOAWAY, no close) takes its publisher's
/// namespace with it: a discovery subscriber on a peer relay sees NAMESPACE_DONE once the
/// link's idle timeout (`--idle-timeout 2`) passes, long before the 30 s default would.
#[tokio::test]
async fn a_killed_relay_is_withdrawn_within_the_idle_timeout() {
    timeout(async {
        let quick = [
            "--tls-generate",
            "localhost",
            "--auth-disabled",
            "--idle-timeout",
            "2",
        ];
        let mut a = Relay::start(
            &[&quick[..], &["--cluster", "--cluster-node", "A"]].concat(),
            &[],
        );
        let (_, fp_a) = a.curl("/fingerprint", &[]);
        let peer = format!("moqt://localhost:{}", a.port);
        let b = Relay::start(
            &[
                &quick[..],
                &["--cluster-node", "B", "--cluster-peer", &peer],
            ]
            .concat(),
            &[("MOQ_RELAY_CLUSTER_FINGERPRINT", &fp_a)],
        );
        let (_, fp_b) = b.curl("/fingerprint", &[]);
        let publisher = a.connect(&fp_a, "").await.unwrap();
        let room = ns("room/live");
        let _h = publisher.publish_namespace(room.clone()).await.unwrap();
        let viewer = b.connect(&fp_b, "").await.unwrap();
        let mut found = viewer.subscribe_namespace(ns("room")).await.unwrap();
        let mut next = async || match found.next().await {
            Some(Ok(ev)) => ev,
            other => panic!("discovery ended: {other:?}"),
        };
        assert_eq!(next().await, NamespaceEvent::Added(room.clone()));

        a.bin.child.kill().unwrap();
        let killed = Instant::now();
        assert_eq!(next().await, NamespaceEvent::Removed(room));
        let took = killed.elapsed();
        eprintln!(
            "relay SIGKILLed: its namespace withdrawn on the peer after {took:?} (idle timeout 2 s)"
        );
        // The idle timeout, not the 30 s default, let B notice.
        assert!(took < Duration::from_secs(10), "withdrawn after {took:?}");
        // And B says so: the link is lost (nothing answers), at WARN and in /health (written
        // as the link's session ends, which its withdrawals may overtake).
        let down = format!("link {peer} down");
        loop {
            let lost = b.bin.log_lines(&["WARN", "lost", &peer, "unreachable"]);
            let (_, health) = b.curl("/health", &[]);
            if !lost.is_empty() && health.contains(&down) {
                break;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(10),
                "no WARN line about the lost link to {peer} ({lost:?}), or /health {health:?}"
            );
            // The log and the HTTP side have no push; poll.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

/// A relay restarted on the same address with the same certificate answers its predecessor's
/// connections with a stateless reset (RFC 9000 §10.3; the key is derived from the
/// certificate's): a client whose own idle timeout is a minute learns of the restart at its
/// next packet, within a second or two, not at the timeout.
#[tokio::test]
async fn a_restarted_relay_resets_the_old_connections() {
    timeout(async {
        let relay = FileCertRelay::new("reset");
        let fingerprint = relay.fingerprint.clone();
        let mut first = relay.start();
        let port = first.port;
        let client = Client::new(ClientConfig {
            tls: ClientTls::pinned(parse_fingerprint(&fingerprint).unwrap()),
            quic: QuicSettings {
                keep_alive: Duration::from_millis(300),
                idle_timeout: Duration::from_secs(60),
                ..Default::default()
            },
            ..Default::default()
        })
        .unwrap();
        let session = client
            .connect(&format!("moqt://localhost:{port}/"))
            .await
            .unwrap();
        first.child.kill().unwrap();
        first.child.wait().unwrap();
        let _second = relay.restart_on(port);
        let restarted = Instant::now();
        let why = session.closed().await;
        let took = restarted.elapsed();
        eprintln!("relay restarted on its certificate: old connection reset {took:?} after the restart ({why:?})");
        assert!(
            took < Duration::from_secs(5),
            "closed after {took:?}: {why:?}"
        );
        assert!(format!("{why:?}").contains("reset"), "{why:?}");
    })
    .await;
}
