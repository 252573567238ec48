//! Shutting the relay down: `Relay::shutdown` with and without open sessions, the binary
//! draining on SIGINT and SIGTERM, and the relay's tasks: none left after a shutdown, none of
//! a session's after it closes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use moq_client::SubscribeOptions;
use moq_core::FullTrackName;
use moq_core::codes::SessionErrorCode;
use moq_relay::cluster::ClusterConfig;
use moq_relay::{Relay, RelayConfig};
use moq_transport::Error;
use moq_transport::endpoint::{Client, ClientConfig};
use moq_transport::tls::{Certificate, ClientTls, parse_fingerprint};

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

/// A relay of a cluster named `node`, running, with the shared certificate.
fn cluster_relay(node: &str, cert: &Certificate) -> Relay {
    let mut config = RelayConfig::new("127.0.0.1:0".parse().unwrap(), cert.clone());
    let mut c = ClusterConfig::new(node.to_string(), vec![]);
    c.tls = ClientTls::pinned(cert.fingerprint());
    config.cluster = Some(c);
    let relay = Relay::bind(config).unwrap();
    relay.spawn();
    relay
}

fn url(relay: &Relay) -> String {
    format!("moqt://localhost:{}/", relay.local_addr().port())
}

/// A moq-client session to `relay` that can publish.
async fn connect(relay: &Relay) -> moq_client::Session {
    moq_client::Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .publisher(moq_client::Publisher::default())
        .build()
        .unwrap()
        .connect(&url(relay))
        .await
        .unwrap()
}

/// Publishes track `t` of `room` on `session` and writes one group into it.
async fn publish_one(
    session: &moq_client::Session,
    room: &str,
) -> (moq_client::NamespaceHandle, moq_client::TrackProducer) {
    let h = session
        .publisher()
        .publish_namespace(common::ns(room))
        .unwrap();
    h.announced().await.unwrap();
    let name = FullTrackName::new(common::ns(room), "t").unwrap();
    let producer = session.publisher().create_track(name).unwrap();
    (h, producer)
}

/// Subscribes to track `t` of `room` on `session` and reads one object of it, written by
/// `producer` once the subscription is up.
async fn subscribe_one(
    session: &moq_client::Session,
    room: &str,
    producer: &moq_client::TrackProducer,
) -> moq_client::TrackConsumer {
    let name = FullTrackName::new(common::ns(room), "t").unwrap();
    let mut t = session
        .subscriber()
        .subscribe(name, SubscribeOptions::default())
        .await
        .unwrap();
    let mut g = producer.append_group().unwrap();
    g.write("frame").unwrap();
    g.finish().unwrap();
    assert_eq!(common::read_objects(&mut t, 1).await.len(), 1);
    t
}

/// After `Relay::shutdown` with live sessions, subscriptions (served from an upstream
/// subscription of each relay), a cluster link and its peer, no task of either relay is left
/// (`task_count() == 0`) and every session has stopped (`Session::stopped`).
#[tokio::test]
async fn shutdown_leaves_no_task_of_the_relay() {
    timeout(async {
        let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
        let (a, b) = (cluster_relay("A", &cert), cluster_relay("B", &cert));
        b.connect_peer(url(&a).trim_end_matches('/'));
        // A publisher on A; subscribers on A and on B (B's upstream goes over its link to A).
        let publisher = connect(&a).await;
        let (_h, producer) = publish_one(&publisher, "tasks/room").await;
        while !b.namespaces().contains(&common::ns("tasks/room")) {
            // The index has no per-namespace signal to wait on from outside.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (on_a, on_b) = (connect(&a).await, connect(&b).await);
        let _sub_a = subscribe_one(&on_a, "tasks/room", &producer).await;
        let _sub_b = subscribe_one(&on_b, "tasks/room", &producer).await;
        assert!(a.task_count() > 3 && b.task_count() > 3);
        let grace = Duration::from_millis(200);
        tokio::join!(a.shutdown(grace), b.shutdown(grace));
        assert_eq!(a.task_count(), 0, "tasks of A left");
        assert_eq!(b.task_count(), 0, "tasks of B left");
        for s in [&publisher, &on_a, &on_b] {
            s.transport().stopped().await;
        }
    })
    .await;
}

/// Each session's relay-side tasks (serving it, its upstream subscriptions and PUBLISHes) are
/// gone once it closes: the relay is back to the tasks it runs with no session.
#[tokio::test]
async fn a_closed_session_leaves_no_relay_task() {
    timeout(async {
        let relay = common::dev_relay();
        let idle = relay.task_count();
        let publisher = connect(&relay).await;
        let (h, producer) = publish_one(&publisher, "closing/room").await;
        let subscriber = connect(&relay).await;
        let sub = subscribe_one(&subscriber, "closing/room", &producer).await;
        assert!(relay.task_count() > idle);
        for (s, rest) in [(subscriber, 1), (publisher, 0)] {
            s.close();
            s.transport().stopped().await;
            // The relay's count has no signal to wait on: looked at until it drops.
            while relay.sessions() != rest {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        drop((h, producer, sub));
        while relay.task_count() != idle {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        relay.shutdown(Duration::ZERO).await;
        assert_eq!(relay.task_count(), 0);
    })
    .await;
}

/// A session a client opens is served by one task of the relay's (its serving loop), which
/// ends with the session: its registration goes when it closes, and the relay's count is back
/// where it was.
#[tokio::test]
async fn an_idle_session_adds_one_relay_task_that_ends_with_it() {
    timeout(async {
        let relay = common::dev_relay();
        let idle = relay.task_count();
        let session = connect(&relay).await;
        // Registered by its serving task; no signal to wait on: looked at until it is.
        while relay.sessions() != 1 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(relay.task_count(), idle + 1);
        session.close();
        session.transport().stopped().await;
        while relay.sessions() != 0 || relay.task_count() != idle {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        relay.shutdown(Duration::ZERO).await;
        assert_eq!(relay.task_count(), 0);
    })
    .await;
}
