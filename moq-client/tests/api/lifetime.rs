//! How handles and sessions end: cache bounds, session end, cancellation by drop, the reconnecting
//! client (reconnect and GOAWAY migration).

use std::time::Duration;

use bytes::Bytes;
use moq_client::{
    Backoff, CacheLimits, NamespaceEvent, Publisher, ServeOptions, Status, SubscribeOptions,
    Version,
};

use crate::common::{
    TestServer, Transport, case, combinations, eventually, expected, fetch_all, ids, loc, ns,
    read_groups, timeout, track, wait_status, write_group,
};

/// The cache keeps at most `max_groups`; a subscription from an evicted group starts at the
/// oldest cached one, and FETCH returns only what is cached.
#[tokio::test]
async fn cache_bound() {
    timeout(async {
        let limits = CacheLimits {
            max_groups: 3,
            ..Default::default()
        };
        let mut srv = TestServer::start_with(Publisher::new(limits, ServeOptions::default()));
        let name = track(&["cam"], "feed");
        let feed = srv.publisher.create_track(name.clone()).unwrap();
        for _ in 0..6 {
            write_group(&feed, 2);
        }

        let (client, _server) = srv.connect(Transport::Quic, Version::Draft19).await;
        let mut stream = client
            .subscriber()
            .subscribe(
                name.clone(),
                SubscribeOptions::default().start_at(loc(1, 0)),
            )
            .await
            .unwrap();
        // draft-19 §10.7: the subscription carries only what is published after it; the
        // cached groups 3..5 are FETCH's.
        write_group(&feed, 2);
        let got = read_groups(&mut stream, 1).await;
        assert_eq!(ids(&got), vec![6], "no cached group is replayed");
        assert_eq!(got[0].1, expected(6, 2));

        let objects = fetch_all(
            client
                .subscriber()
                .fetch(name.clone(), loc(0, 0), loc(6, 0))
                .await
                .unwrap(),
        )
        .await;
        let groups: Vec<u64> = objects.iter().map(|o| o.location.group).collect();
        assert_eq!(
            groups,
            vec![4, 4, 5, 5, 6, 6],
            "only cached groups are fetched"
        );
    })
    .await;
}

/// Closing the session on the server ends the client's streams with an error, then `None`.
#[tokio::test]
async fn session_end_ends_streams() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let room = ns(&["live", "room"]);
            let _announced = srv.publisher.publish_namespace(room.clone()).unwrap();
            let name = track(&["live", "room"], "audio");
            let audio = srv.publisher.create_track(name.clone()).unwrap();
            let (client, server) = srv.connect(transport, version).await;
            let mut rooms = client
                .subscriber()
                .subscribe_namespace(ns(&["live"]))
                .await
                .unwrap();
            assert_eq!(
                rooms.next().await.unwrap().unwrap(),
                NamespaceEvent::Added(room.clone())
            );
            let mut stream = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            write_group(&audio, 1);
            assert_eq!(ids(&read_groups(&mut stream, 1).await), vec![0]);

            server.close();
            let err = loop {
                match rooms.next().await {
                    Some(Ok(NamespaceEvent::Removed(n))) => assert_eq!(n, room),
                    Some(Ok(ev)) => panic!("unexpected {ev:?}"),
                    Some(Err(e)) => break e,
                    None => {
                        panic!("namespace stream ended without an error ({transport:?} {version})")
                    }
                }
            };
            assert!(err.is_session_error(), "{err:?}");
            assert!(rooms.next().await.is_none());
            let err = match stream.next_group().await {
                Some(Err(e)) => e,
                other => panic!("expected an error, got {other:?} ({transport:?} {version})"),
            };
            assert!(err.is_session_error(), "{err:?}");
            assert!(stream.next_group().await.is_none());
            assert!(client.closed().await.is_session_error());
            // New requests on the ended session fail at once.
            assert!(
                client
                    .subscriber()
                    .subscribe(name.clone(), SubscribeOptions::default())
                    .await
                    .is_err()
            );
        })
        .await;
    }
}

/// Dropping a TrackStream or a NamespaceStream cancels the request at the publisher: the
/// server's count of open requests goes back down. (There is no public signal for the
/// publisher's serving task itself; the open-request count is the observable effect.)
#[tokio::test]
async fn drop_cancels() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let _announced = srv.publisher.publish_namespace(ns(&["x"])).unwrap();
            let name = track(&["x"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            let (client, server) = srv.connect(transport, version).await;
            let server_t = server.transport().clone();

            let mut stream = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            write_group(&t, 1);
            read_groups(&mut stream, 1).await;
            let open = server_t.open_requests();
            drop(stream);
            eventually("the SUBSCRIBE is cancelled", || {
                server_t.open_requests() == open - 1
            })
            .await;

            let mut rooms = client
                .subscriber()
                .subscribe_namespace(ns(&["x"]))
                .await
                .unwrap();
            rooms.next().await.unwrap().unwrap();
            let open = server_t.open_requests();
            drop(rooms);
            // (At drafts 14-15 a SUBSCRIBE_NAMESPACE also runs as SUBSCRIBE_TRACKS: two
            // requests end.)
            eventually("the SUBSCRIBE_NAMESPACE is cancelled", || {
                server_t.open_requests() < open
            })
            .await;

            // The other direction: the server subscribes to the client's publisher.
            let name = track(&["y"], "t");
            let y = client.publisher().create_track(name.clone()).unwrap();
            let client_t = client.transport().clone();
            let mut stream = server
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            write_group(&y, 1);
            read_groups(&mut stream, 1).await;
            let open = client_t.open_requests();
            drop(stream);
            eventually("the server's SUBSCRIBE is cancelled", || {
                client_t.open_requests() == open - 1
            })
            .await;
        })
        .await;
    }
}

/// The reconnecting client: connects, reconnects after the server closes the session, and its
/// subscription keeps delivering without the application re-subscribing.
#[tokio::test]
async fn reconnecting_client_renews_subscriptions() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let room = ns(&["radio"]);
            let _announced = srv.publisher.publish_namespace(room.clone()).unwrap();
            let name = track(&["radio"], "news");
            let news = srv.publisher.create_track(name.clone()).unwrap();
            let backoff = Backoff {
                min: Duration::from_millis(20),
                max: Duration::from_millis(200),
            };
            let client = srv.client(version);
            let mut r = client.reconnecting(&srv.url(transport), backoff);
            assert_eq!(r.status(), Status::Connecting);
            let s = wait_status(&mut r, |s| matches!(s, Status::Connected(_))).await;
            assert_eq!(s, Status::Connected(srv.url(transport)));
            let first = srv.next_session().await;

            let mut stream = r
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            let mut rooms = r
                .subscriber()
                .subscribe_namespace(ns(&["radio"]))
                .await
                .unwrap();
            assert_eq!(
                rooms.next().await.unwrap().unwrap(),
                NamespaceEvent::Added(room.clone())
            );
            write_group(&news, 1);
            assert_eq!(ids(&read_groups(&mut stream, 1).await), vec![0]);

            // The server drops the session: the client reconnects.
            first.close();
            wait_status(&mut r, |s| matches!(s, Status::Disconnected(_))).await;
            // Written while no session is up: the renewed subscription gets only new objects
            // (draft-19 §10.7), so this group arrives through the gap-filling Joining FETCH.
            write_group(&news, 2);
            wait_status(&mut r, |s| matches!(s, Status::Connected(_))).await;
            let _second = srv.next_session().await;
            let got = read_groups(&mut stream, 1).await;
            assert_eq!(got, vec![(1, expected(1, 2))], "{transport:?} {version}");
            write_group(&news, 1);
            assert_eq!(ids(&read_groups(&mut stream, 1).await), vec![2]);

            // Discovery: every namespace is reported removed with the old session, then
            // found again on the new one.
            assert_eq!(
                rooms.next().await.unwrap().unwrap(),
                NamespaceEvent::Removed(room.clone())
            );
            assert_eq!(
                rooms.next().await.unwrap().unwrap(),
                NamespaceEvent::Added(room.clone())
            );
        })
        .await;
    }
}

/// GOAWAY with a new URI: the reconnecting client migrates to the second server, re-publishes
/// its namespaces there, and its subscription continues from the new server.
#[tokio::test]
async fn goaway_migrates_to_new_server() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut a = TestServer::start();
            let mut b = TestServer::start();
            let name = track(&["tv"], "ch1");
            let on_a = a.publisher.create_track(name.clone()).unwrap();
            let on_b = b.publisher.create_track(name.clone()).unwrap();

            // One client trusted by both servers.
            let client = moq_client::Client::builder()
                .fingerprint(&a.fingerprint)
                .unwrap()
                .fingerprint(&b.fingerprint)
                .unwrap()
                .versions(vec![version])
                .build()
                .unwrap();
            let mine = ns(&["studio", "42"]);
            let handle = client.publisher().publish_namespace(mine.clone()).unwrap();
            let mut r = client.reconnecting(
                &a.url(transport),
                Backoff {
                    min: Duration::from_millis(20),
                    max: Duration::from_millis(200),
                },
            );
            r.connected().await.unwrap();
            let session_a = a.next_session().await;
            handle.announced().await.unwrap();
            assert!(session_a.transport().announced().contains(&mine));

            let mut stream = r
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            write_group(&on_a, 1);
            assert_eq!(ids(&read_groups(&mut stream, 1).await), vec![0]);

            // Server A sends GOAWAY pointing at B. (Status is a watch: wait for Migrating while
            // the GOAWAY goes out, so it is seen before the move completes.)
            let b_url = b.url(transport);
            let goaway = session_a.transport().goaway(&b_url, Duration::from_secs(5));
            let (sent, migrating) = tokio::join!(
                goaway,
                wait_status(&mut r, |s| matches!(s, Status::Migrating(_)))
            );
            sent.unwrap();
            assert_eq!(migrating, Status::Migrating(b_url.clone()));
            let connected = wait_status(&mut r, |s| matches!(s, Status::Connected(_))).await;
            assert_eq!(connected, Status::Connected(b_url.clone()));
            let session_b = b.next_session().await;
            let (now_b, mut watch_b) = session_b.transport().announced().watch(&mine, 16);

            // The namespace is re-published on B.
            if !now_b.contains(&mine) {
                assert_eq!(
                    watch_b.next().await,
                    Some(NamespaceEvent::Added(mine.clone())),
                    "re-published on B ({transport:?} {version})"
                );
            }
            // The old session is closed by the client after the move.
            assert!(session_a.closed().await.is_session_error());
            // B's track continues the numbering; the renewed subscription delivers from it.
            drop(on_a);
            let mut g = on_b.create_group(1).unwrap();
            g.write("from b").unwrap();
            g.finish().unwrap();
            let got = read_groups(&mut stream, 1).await;
            assert_eq!(
                got,
                vec![(1, vec![(0, Bytes::from("from b"))])],
                "{transport:?}"
            );
        })
        .await;
    }
}

/// Dropping the last handle of a session closes it, even while streams made from it live.
#[tokio::test]
async fn dropping_the_session_closes_it() {
    timeout(async {
        let mut srv = TestServer::start();
        let name = track(&["d"], "t");
        let _t = srv.publisher.create_track(name.clone()).unwrap();
        let (client, server) = srv.connect(Transport::Quic, Version::Draft19).await;
        let mut stream = client
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        let mut rooms = client
            .subscriber()
            .subscribe_namespace(ns(&["d"]))
            .await
            .unwrap();
        drop(client);
        assert!(server.closed().await.is_session_error());
        assert!(matches!(stream.next_group().await, Some(Err(_))));
        assert!(stream.next_group().await.is_none());
        assert!(matches!(rooms.next().await, Some(Err(_))));
        assert!(rooms.next().await.is_none());
    })
    .await;
}

/// Dropping a reconnecting client closes its session; its streams end with an error.
#[tokio::test]
async fn dropping_reconnecting_closes_it() {
    timeout(async {
        let mut srv = TestServer::start();
        let name = track(&["d"], "t");
        let _t = srv.publisher.create_track(name.clone()).unwrap();
        let client = srv.client(Version::Draft19);
        let r = client.reconnecting(&srv.url(Transport::Quic), Backoff::default());
        r.connected().await.unwrap();
        let server = srv.next_session().await;
        let mut stream = r
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        drop(r);
        assert!(server.closed().await.is_session_error());
        assert!(matches!(stream.next_group().await, Some(Err(_))));
        assert!(stream.next_group().await.is_none());
    })
    .await;
}
