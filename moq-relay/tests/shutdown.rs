//! Shutting the relay down: `Relay::shutdown` with and without open sessions, and the binary
//! draining on SIGINT and SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use moq_core::codes::SessionErrorCode;
use moq_relay::{Relay, RelayConfig};
use moq_transport::Error;
use moq_transport::endpoint::{Client, ClientConfig};
use moq_transport::tls::{ClientTls, parse_fingerprint};

mod common;
use common::timeout;

fn client(fingerprint: &str) -> Client {
    Client::new(ClientConfig {
        tls: ClientTls::pinned(parse_fingerprint(fingerprint).unwrap()),
        ..Default::default()
    })
    .unwrap()
}

/// `shutdown` returns within 2 s and `run` ends, with no session and with sessions that do not
/// leave on GOAWAY (they are closed when the grace period ends).
#[tokio::test]
async fn shutdown_completes_with_and_without_sessions() {
    timeout(async {
        for sessions in [0, 3] {
            let relay =
                Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap())
                    .unwrap();
            let run = relay.spawn();
            let client = client(&relay.fingerprint());
            let port = relay.local_addr().port();
            let mut open = Vec::new();
            for i in 0..sessions {
                // Raw QUIC and WebTransport (whose close is a capsule, not the QUIC close).
                let scheme = if i % 2 == 0 { "moqt" } else { "https" };
                let url = format!("{scheme}://localhost:{port}/");
                let session = client.connect(&url).await.unwrap();
                // A request kept open through the drain.
                let discovery = session
                    .subscribe_namespace(common::ns("anything"))
                    .await
                    .unwrap();
                open.push((session, discovery));
            }
            let started = Instant::now();
            let shutdown = tokio::spawn({
                let relay = relay.clone();
                async move {
                    tokio::time::timeout(
                        Duration::from_secs(2),
                        relay.shutdown(Duration::from_millis(500)),
                    )
                    .await
                }
            });
            while relay.is_accepting() {
                tokio::task::yield_now().await;
            }
            // A client arriving during the drain is refused at once.
            let refused = client
                .connect(&format!("moqt://localhost:{port}/"))
                .await
                .map(|_| ());
            assert!(matches!(refused, Err(Error::Connect(_))), "{refused:?}");
            assert!(started.elapsed() < Duration::from_millis(500));
            shutdown
                .await
                .unwrap()
                .expect("shutdown took longer than 2 s");
            tokio::time::timeout(Duration::from_secs(2), run)
                .await
                .expect("run did not end")
                .unwrap();
            assert!(started.elapsed() < Duration::from_secs(2));
            for (s, _discovery) in &open {
                // Each one saw GOAWAY, then the relay closed it with GOAWAY_TIMEOUT (draft-19
                // §3.6: a request was still open), over WebTransport too.
                assert!(s.goaway_received().is_some());
                match s.closed().await {
                    Error::ClosedByPeer { code, .. } => {
                        assert_eq!(
                            code,
                            SessionErrorCode::GOAWAY_TIMEOUT,
                            "{:?}",
                            s.transport()
                        )
                    }
                    other => panic!("{:?}: {other:?}", s.transport()),
                }
            }
        }
    })
    .await;
}

/// The relay binary on an ephemeral port with a one-second drain.
struct Binary(common::Binary);

impl std::ops::Deref for Binary {
    type Target = common::Binary;
    fn deref(&self) -> &common::Binary {
        &self.0
    }
}

impl std::ops::DerefMut for Binary {
    fn deref_mut(&mut self) -> &mut common::Binary {
        &mut self.0
    }
}

/// The relay the binary names in GOAWAY (`--successor`).
const SUCCESSOR: &str = "moqt://next.example.com:4443/";

impl Binary {
    fn start() -> Binary {
        Binary(common::Binary::start(
            &[
                "--tls-generate",
                "localhost",
                "--drain",
                "1",
                "--auth-disabled",
                "--successor",
                SUCCESSOR,
            ],
            &[],
        ))
    }
}

/// On SIGINT and on SIGTERM the binary sends GOAWAY naming its `--successor`, waits out its
/// drain time for a client that stays, closes the session and exits, within the drain time
/// plus a margin.
#[tokio::test]
async fn binary_drains_and_exits_on_sigint_and_sigterm() {
    timeout(async {
        for signal in ["INT", "TERM"] {
            let mut relay = Binary::start();
            let session = client(&relay.fingerprint)
                .connect(&format!("moqt://localhost:{}/", relay.port))
                .await
                .unwrap();
            let started = Instant::now();
            relay.signal(signal);
            let goaway = session.wait_goaway().await;
            let goaway = goaway.unwrap_or_else(|| panic!("SIG{signal}: no GOAWAY"));
            assert_eq!(goaway.new_session_uri, SUCCESSOR, "SIG{signal}");
            session.closed().await;
            let status = relay.exited_within(Duration::from_secs(3)).await;
            assert!(status.success(), "SIG{signal}: {status}");
            assert!(started.elapsed() < Duration::from_secs(3));
        }
        // With no session the binary exits at once.
        let mut relay = Binary::start();
        relay.signal("TERM");
        relay.exited_within(Duration::from_secs(2)).await;
    })
    .await;
}
