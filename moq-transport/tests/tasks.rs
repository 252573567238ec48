//! The session owns its tasks: once it closes, none is left alive, on either end, whoever
//! closed it and however (close, the peer's close, dropping the last handle).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{TestServer, Transport, case, transports};
use moq_core::codes::SessionErrorCode;
use moq_core::data::SubgroupId;
use moq_core::message::Parameters;
use moq_core::{FullTrackName, TrackNamespace, Version};
use moq_transport::track::{Incoming, SubscribeResponse, TrackEvent};
use moq_transport::{Session, SessionConfig};

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

/// How a test ends the session.
#[derive(Clone, Copy, Debug)]
enum End {
    /// The client calls `close`.
    ClientCloses,
    /// The server calls `close`: the client learns it from the peer.
    ServerCloses,
    /// The application drops every handle of the client.
    ClientDropped,
}

/// Sends on its channel when dropped.
struct DropSignal(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A pair of sessions with a little of everything running on both: a published namespace, a
/// namespace subscription, a subscription with an open subgroup stream and an application
/// task given to the session.
async fn busy_pair(transport: Transport) -> (Session, Session, TestServer) {
    let mut srv = TestServer::start(SessionConfig::default().with_requests());
    let (client, server) = srv
        .connect(
            transport,
            vec![Version::Draft19],
            SessionConfig::default().with_requests(),
        )
        .await;
    let _announced = client.publish_namespace(ns(&["a", "b"])).await.unwrap();
    let mut discovery = client.subscribe_namespace(ns(&["a"])).await.unwrap();
    let track = FullTrackName::new(ns(&["a", "b"]), "t").unwrap();
    let accept = async {
        match server.incoming().next().await.unwrap() {
            Incoming::Subscribe(r) => r.accept(SubscribeResponse::default()).await.unwrap(),
            other => panic!("{other:?}"),
        }
    };
    let (sub, writer) = tokio::join!(client.subscribe(track, Parameters::default()), accept);
    let mut sub = sub.unwrap();
    let mut subgroup = writer
        .open_subgroup(0, SubgroupId::Zero, None, false)
        .await
        .unwrap();
    subgroup
        .write_object(0, Bytes::from_static(b"x"))
        .await
        .unwrap();
    let Some(Ok(TrackEvent::Subgroup(mut stream))) = sub.next().await else {
        panic!("no subgroup");
    };
    stream.next_object().await.unwrap().unwrap();
    server.spawn(async move {
        // Handles moved into tasks end with the session too.
        let _keep = (discovery.next().await, sub, stream, subgroup, writer);
        std::future::pending::<()>().await;
    });
    (client, server, srv)
}

#[tokio::test]
async fn a_closed_session_leaves_no_task_alive() {
    for transport in transports() {
        for end in [End::ClientCloses, End::ServerCloses, End::ClientDropped] {
            case(format!("{transport:?} {end:?}"), async {
                let (client, server, _srv) = busy_pair(transport).await;
                // The application's own task, which would otherwise wait forever; it tells
                // when it is dropped, which shows on an end no handle is left to ask.
                let (tx, dropped) = tokio::sync::oneshot::channel();
                let guard = DropSignal(Some(tx));
                client.spawn(async move {
                    let _guard = guard;
                    std::future::pending::<()>().await;
                });
                assert!(client.task_count() > 3, "{transport:?} {end:?}");
                assert!(server.task_count() > 3, "{transport:?} {end:?}");
                let watch = client.downgrade();
                match end {
                    End::ClientCloses => client.close(SessionErrorCode::NO_ERROR, "done"),
                    End::ServerCloses => server.close(SessionErrorCode::NO_ERROR, "done"),
                    End::ClientDropped => drop(client),
                }
                for (side, session) in [("server", Some(server)), ("client", watch.upgrade())] {
                    let Some(session) = session else {
                        // Dropped, so closed: its tasks were dropped with it.
                        continue;
                    };
                    tokio::time::timeout(Duration::from_secs(2), session.stopped())
                        .await
                        .unwrap_or_else(|_| panic!("{transport:?} {end:?}: {side} tasks alive"));
                    assert_eq!(session.task_count(), 0, "{transport:?} {end:?} {side}");
                    assert!(session.close_reason().is_some());
                }
                tokio::time::timeout(Duration::from_secs(2), dropped)
                    .await
                    .unwrap_or_else(|_| panic!("{transport:?} {end:?}: the client's task lives"))
                    .unwrap();
            })
            .await;
        }
    }
}

/// Requests run as entries of the session's request table, not as a tokio task each: 32
/// published namespaces (a waiting request on both ends) add no task to the runtime, yet each
/// counts in `task_count`, and closing the session still ends them all.
#[tokio::test]
async fn requests_are_table_entries_not_tasks() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let mut srv = TestServer::start(SessionConfig::default().with_requests());
            let (client, server) = srv
                .connect(
                    transport,
                    vec![Version::Draft19],
                    SessionConfig::default().with_requests(),
                )
                .await;
            // The first request starts each end's table task.
            let first = client.publish_namespace(ns(&["first"])).await.unwrap();
            let metrics = tokio::runtime::Handle::current().metrics();
            let (tasks, counted) = (metrics.num_alive_tasks(), client.task_count());
            let mut held = Vec::new();
            for i in 0..32 {
                let name = format!("n{i}");
                held.push(client.publish_namespace(ns(&[&name])).await.unwrap());
            }
            let added = metrics.num_alive_tasks().saturating_sub(tasks);
            assert!(added < 8, "{transport:?}: {added} tasks for 64 requests");
            assert!(client.task_count() >= counted + 32, "{transport:?}");
            client.close(SessionErrorCode::NO_ERROR, "done");
            for session in [&client, &server] {
                tokio::time::timeout(Duration::from_secs(2), session.stopped())
                    .await
                    .unwrap_or_else(|_| panic!("{transport:?}: requests alive"));
                assert_eq!(session.task_count(), 0, "{transport:?}");
            }
            assert!(!first.is_active());
            assert!(held.iter().all(|h| !h.is_active()));
        })
        .await;
    }
}

/// A session runs one task of its own: the connection's watch beside its request table, whose
/// entries are its accept loops, its control stream and its requests. Over raw QUIC a pair of
/// idle sessions adds that task per end, quinn's driver per connection and the new client's
/// endpoint driver (where each end ran four tasks before), and closing both ends them.
#[tokio::test]
async fn an_idle_session_runs_one_task() {
    case("quic".to_string(), async {
        if common::memory_only() {
            return;
        }
        let mut srv = TestServer::start(SessionConfig::default());
        // The server's endpoint and its tasks, started by a first pair.
        let _first = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let metrics = tokio::runtime::Handle::current().metrics();
        let before = metrics.num_alive_tasks();
        let (client, server) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        let added = metrics.num_alive_tasks().saturating_sub(before);
        // 2 sessions + 2 quinn connection drivers + 1 client endpoint driver; one more for a
        // handshake task that may not have ended yet. Four tasks per session would make 11.
        assert!(added <= 6, "{added} tasks for a pair of idle sessions");
        client.close(SessionErrorCode::NO_ERROR, "done");
        for session in [&client, &server] {
            tokio::time::timeout(Duration::from_secs(2), session.stopped())
                .await
                .expect("the session's task ends");
            assert_eq!(session.task_count(), 0);
        }
    })
    .await;
}
