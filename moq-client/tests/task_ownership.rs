//! Every task moq-client runs for a session is owned: once the session is closed none is left
//! for it (the transport's, the subscriber's, the serving ones), and a closed reconnecting
//! client leaves none either.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{TestServer, Transport, case, track, write_group};
use moq_client::{Backoff, JoinFrom, Location, Publisher, SubscribeOptions, Version};

/// A client session with subscriptions, a join, a fetch, a namespace discovery and a
/// subscription it serves: after `close`, `stopped` resolves and no task is left, although
/// the application still holds every stream.
#[tokio::test]
async fn a_closed_session_leaves_no_task() {
    for transport in [Transport::Quic, Transport::WebTransport] {
        case(format!("{transport:?}"), async {
            let mut srv = TestServer::start();
            let name = track(&["tasks"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            write_group(&t, 3);
            let mine = Publisher::default();
            let served = mine.create_track(track(&["mine"], "m")).unwrap();
            write_group(&served, 2);
            let client = srv.client_with(Version::Draft19, mine);
            let (session, server) = srv.connect_with(&client, transport).await;
            let sub = session.subscriber();
            let options = SubscribeOptions::default;
            let live = sub.subscribe(name.clone(), options()).await.unwrap();
            let joined = sub
                .join(name.clone(), options(), JoinFrom::GroupsBefore(1))
                .await
                .unwrap();
            let fetched = sub
                .fetch(name.clone(), Location::new(0, 0), Location::new(1, 0))
                .await
                .unwrap();
            let found = sub
                .subscribe_namespace(name.namespace.clone())
                .await
                .unwrap();
            // The server subscribes to the client's track: the client serves it.
            let mut theirs = server
                .subscriber()
                .subscribe(served.name().clone(), options())
                .await
                .unwrap();
            write_group(&served, 2);
            assert!(theirs.next_group().await.unwrap().is_ok());
            assert!(session.task_count() > 0);

            session.close();
            session.stopped().await;
            assert_eq!(session.task_count(), 0);
            server.stopped().await;
            assert_eq!(server.task_count(), 0);
            drop((live, joined, fetched, found));
        })
        .await;
    }
}

/// A reconnecting client with a subscription, closed: its reconnecting task and its
/// subscriber's tasks have stopped when `close` returns, and the server sees the session end.
#[tokio::test]
async fn a_closed_reconnecting_client_leaves_no_task() {
    case("quic".into(), async {
        let mut srv = TestServer::start();
        let name = track(&["r"], "t");
        let t = srv.publisher.create_track(name.clone()).unwrap();
        write_group(&t, 1);
        let client = srv.client(Version::Draft19);
        let r = client.reconnecting(&srv.url(Transport::Quic), Backoff::default());
        r.connected().await.unwrap();
        let server = srv.next_session().await;
        let stream = r
            .subscriber()
            .subscribe(name, SubscribeOptions::default())
            .await
            .unwrap();
        assert!(r.task_count() >= 2);
        r.close().await;
        assert_eq!(r.task_count(), 0);
        assert!(server.closed().await.is_session_error());
        drop(stream);
    })
    .await;
}

/// Waiting for Ctrl-C spawns no task: `cli::Interrupts` holds the listener, owned by whoever
/// waits (issue 35: `cli::interrupted` spawned a process-wide task that outlived everything).
#[tokio::test]
async fn waiting_for_ctrl_c_spawns_no_task() {
    use futures::FutureExt;
    let metrics = tokio::runtime::Handle::current().metrics();
    let before = metrics.num_alive_tasks();
    let mut interrupts = moq_client::cli::Interrupts::listen();
    assert!(interrupts.interrupted().now_or_never().is_none());
    assert_eq!(metrics.num_alive_tasks(), before, "a task was left");
    drop(interrupts);
    assert_eq!(metrics.num_alive_tasks(), before);
}
