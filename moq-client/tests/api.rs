//! The application API end to end over loopback raw QUIC and WebTransport, draft-18 and -19:
//! publishers on either side of the connection, namespace discovery, subscriptions served from
//! the cache, FETCH, TRACK_STATUS, RENDEZVOUS_TIMEOUT, cache bounds, session end, cancellation
//! by drop, and the reconnecting client (reconnect and GOAWAY migration).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{
    TestServer, Transport, case, combinations, eventually, expected, fetch_all, ids, loc, ns,
    read_group, read_groups, timeout, track, wait_status, write_group,
};
use moq_client::model::DirectoryOptions;
use moq_client::{
    Backoff, CacheLimits, Error, NamespaceEvent, Properties, Publisher, ServeOptions, Status,
    SubscribeOptions, TrackOptions, Version,
};
use moq_core::codes::RequestErrorCode;
use moq_core::property;

fn rejected_with(err: Error, code: RequestErrorCode) {
    assert_eq!(err.rejection(), Some(code), "{err:?}");
}

/// A server-side publisher: the client discovers its namespace, subscribes to its track (live
/// and from the cache), and sees the track end when the producer is dropped.
#[tokio::test]
async fn server_publisher_discovery_and_subscribe() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let room = ns(&["live", "room"]);
            let _announced = srv.publisher.publish_namespace(room.clone()).unwrap();
            let name = track(&["live", "room"], "video");
            let video = srv.publisher.create_track(name.clone()).unwrap();
            let (client, _server_session) = srv.connect(transport, version).await;

            let mut rooms = client
                .subscriber()
                .subscribe_namespace(ns(&["live"]))
                .await
                .unwrap();
            assert_eq!(
                rooms.next().await.unwrap().unwrap(),
                NamespaceEvent::Added(room.clone()),
                "{transport:?} {version}"
            );

            // Group 0 is cached before anyone subscribes.
            write_group(&video, 2);
            let mut live = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            assert_eq!(live.info().unwrap().largest, Some(loc(0, 1)));
            write_group(&video, 3);
            write_group(&video, 3);
            let got = read_groups(&mut live, 2).await;
            assert_eq!(
                got,
                vec![(1, expected(1, 3)), (2, expected(2, 3))],
                "default options: what is written after subscribing ({transport:?} {version})"
            );

            // draft-18 allows one subscription per track in a session (DUPLICATE_SUBSCRIPTION),
            // so there the next two subscriptions use sessions of their own.
            let mut kept = Vec::new();
            let (second, third) = if version.allows_duplicate_subscriptions() {
                (client.clone(), client.clone())
            } else {
                let err = client
                    .subscriber()
                    .subscribe(name.clone(), SubscribeOptions::default())
                    .await
                    .unwrap_err();
                rejected_with(err, RequestErrorCode::DUPLICATE_SUBSCRIPTION);
                let (a, a_srv) = srv.connect(transport, version).await;
                let (b, b_srv) = srv.connect(transport, version).await;
                kept.extend([a_srv, b_srv]);
                (a, b)
            };

            // An absolute start before the Largest Object still gets only what is published
            // after the SUBSCRIBE (draft-19 §10.7: the cached groups 0..2 are FETCH's) ...
            let mut all = second
                .subscriber()
                .subscribe(
                    name.clone(),
                    SubscribeOptions::default().start_at(loc(0, 0)),
                )
                .await
                .unwrap();
            // ... and one ahead of it starts where it says, in the middle of a group.
            let mut mid = third
                .subscriber()
                .subscribe(
                    name.clone(),
                    SubscribeOptions::default().start_at(loc(4, 1)),
                )
                .await
                .unwrap();
            write_group(&video, 2);
            write_group(&video, 2);
            let got = read_groups(&mut all, 2).await;
            assert_eq!(got, vec![(3, expected(3, 2)), (4, expected(4, 2))]);
            let got = read_groups(&mut mid, 1).await;
            assert_eq!(got, vec![(4, expected(4, 2)[1..].to_vec())]);
            assert_eq!(ids(&read_groups(&mut live, 2).await), vec![3, 4]);

            // Dropping the producer ends the track: PUBLISH_DONE TRACK_ENDED, then None.
            drop(video);
            for s in [&mut live, &mut all, &mut mid] {
                assert!(s.next_group().await.is_none(), "{transport:?} {version}");
            }
        })
        .await;
    }
}

/// A client-side publisher: the server discovers and subscribes to what the client publishes,
/// and sees the namespace withdrawn when the handle is dropped.
#[tokio::test]
async fn client_publisher_served_to_server() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let (client, server) = srv.connect(transport, version).await;
            let (now, mut announced) = server.transport().announced().watch(&ns(&["meet"]), 16);
            assert!(now.is_empty());

            let room = ns(&["meet", "alice"]);
            let handle = client.publisher().publish_namespace(room.clone()).unwrap();
            handle.announced().await.unwrap();
            assert!(server.transport().announced().contains(&room));
            assert_eq!(
                announced.next().await,
                Some(NamespaceEvent::Added(room.clone()))
            );
            // The server can also discover it with SUBSCRIBE_NAMESPACE.
            let mut discovered = server
                .subscriber()
                .subscribe_namespace(ns(&["meet"]))
                .await
                .unwrap();
            assert_eq!(
                discovered.next().await.unwrap().unwrap(),
                NamespaceEvent::Added(room.clone())
            );

            let name = track(&["meet", "alice"], "chat");
            let chat = client.publisher().create_track(name.clone()).unwrap();
            let mut sub = server
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            write_group(&chat, 2);
            write_group(&chat, 1);
            assert_eq!(
                read_groups(&mut sub, 2).await,
                vec![(0, expected(0, 2)), (1, expected(1, 1))],
                "{transport:?} {version}"
            );

            // Withdraw: the server's index and its discovery both see it go.
            drop(handle);
            assert_eq!(
                announced.next().await,
                Some(NamespaceEvent::Removed(room.clone()))
            );
            assert!(!server.transport().announced().contains(&room));
            assert_eq!(
                discovered.next().await.unwrap().unwrap(),
                NamespaceEvent::Removed(room.clone())
            );
            drop(chat);
            assert!(sub.next_group().await.is_none());
        })
        .await;
    }
}

/// FETCH is answered from the cache and TRACK_STATUS reports the largest location and the
/// track's properties.
#[tokio::test]
async fn fetch_and_track_status() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let name = track(&["vod"], "movie");
            let props = Properties::new()
                .with_int(property::DEFAULT_PUBLISHER_PRIORITY, 7)
                .unwrap();
            let movie = srv
                .publisher
                .create_track_with(name.clone(), TrackOptions::default().priority(7))
                .unwrap();
            for _ in 0..4 {
                write_group(&movie, 3);
            }
            let (client, _server) = srv.connect(transport, version).await;
            let sub = client.subscriber();

            let status = sub.track_status(name.clone()).await.unwrap();
            assert_eq!(status.largest, Some(loc(3, 2)), "{transport:?} {version}");
            // Drafts 14-17 answer TRACK_STATUS without Track Properties (14 and 15 carry a few
            // of the track's values in their own fields).
            if version.request_ok_has_properties() {
                assert_eq!(status.properties, props);
                assert_eq!(status.priority, 7);
            }

            // Whole groups 1 and 2 (End Object 0 = the whole End Group).
            let objects =
                fetch_all(sub.fetch(name.clone(), loc(1, 0), loc(2, 0)).await.unwrap()).await;
            let got: Vec<_> = objects
                .iter()
                .map(|o| (o.location, o.payload.clone()))
                .collect();
            let want: Vec<_> = [1, 2]
                .into_iter()
                .flat_map(|g| expected(g, 3).into_iter().map(move |(o, p)| (loc(g, o), p)))
                .collect();
            assert_eq!(got, want, "{transport:?} {version}");
            // A partial range: {1,1} up to but excluding {2,2}.
            let objects =
                fetch_all(sub.fetch(name.clone(), loc(1, 1), loc(2, 2)).await.unwrap()).await;
            let got: Vec<_> = objects.iter().map(|o| o.location).collect();
            assert_eq!(got, vec![loc(1, 1), loc(1, 2), loc(2, 0), loc(2, 1)]);
            // Past the end: up to the largest object.
            let objects =
                fetch_all(sub.fetch(name.clone(), loc(3, 1), loc(9, 0)).await.unwrap()).await;
            let got: Vec<_> = objects.iter().map(|o| o.location).collect();
            assert_eq!(got, vec![loc(3, 1), loc(3, 2)]);

            let missing = track(&["vod"], "missing");
            rejected_with(
                sub.track_status(missing.clone()).await.unwrap_err(),
                RequestErrorCode::DOES_NOT_EXIST,
            );
            rejected_with(
                sub.fetch(missing, loc(0, 0), loc(1, 0)).await.unwrap_err(),
                RequestErrorCode::DOES_NOT_EXIST,
            );
        })
        .await;
    }
}

/// RENDEZVOUS_TIMEOUT holds a SUBSCRIBE until the track appears; without the track it ends
/// with TIMEOUT, and without the parameter an unknown track is DOES_NOT_EXIST.
#[tokio::test]
async fn rendezvous_timeout() {
    use moq_core::message::{ParamContext, param, param_allowed};
    // RENDEZVOUS_TIMEOUT exists from draft-17.
    let has_rendezvous =
        |v: &Version| param_allowed(param::RENDEZVOUS_TIMEOUT, ParamContext::Subscribe, *v);
    for version in Version::ALL.iter().copied().filter(has_rendezvous) {
        case(format!("{version:?}"), async {
            let mut srv = TestServer::start();
            let (client, server) = srv.connect(Transport::Quic, version).await;
            let name = track(&["late"], "show");
            let before = server.transport().open_requests();
            let pending = {
                let sub = client.subscriber().clone();
                let name = name.clone();
                tokio::spawn(async move {
                    sub.subscribe(
                        name,
                        SubscribeOptions::default().rendezvous(Duration::from_secs(5)),
                    )
                    .await
                })
            };
            // The SUBSCRIBE reached the server (it counts as an open request there) and is held.
            eventually("the SUBSCRIBE arrives", || {
                server.transport().open_requests() > before
            })
            .await;
            assert!(!pending.is_finished(), "answered before the track existed");
            let show = srv.publisher.create_track(name.clone()).unwrap();
            let mut stream = pending.await.unwrap().unwrap();
            write_group(&show, 2);
            let mut g = stream.next_group().await.unwrap().unwrap();
            assert_eq!(g.id(), 0);
            assert_eq!(read_group(&mut g).await, expected(0, 2));

            // A short rendezvous and no track: TIMEOUT.
            let err = client
                .subscriber()
                .subscribe(
                    track(&["late"], "never"),
                    SubscribeOptions::default().rendezvous(Duration::from_millis(100)),
                )
                .await
                .unwrap_err();
            rejected_with(err, RequestErrorCode::TIMEOUT);
            // No rendezvous: DOES_NOT_EXIST at once.
            let err = client
                .subscriber()
                .subscribe(track(&["late"], "never"), SubscribeOptions::default())
                .await
                .unwrap_err();
            rejected_with(err, RequestErrorCode::DOES_NOT_EXIST);
        })
        .await;
    }
}

/// Announcing a namespace and creating its tracks may happen in any order: a SUBSCRIBE for a
/// track of an announced namespace that does not exist yet waits (a bounded, configurable time)
/// for it, then DOES_NOT_EXIST; outside announced namespaces it is refused at once.
#[tokio::test]
async fn announce_before_creating_the_track() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let publisher = Publisher::with_options(
                CacheLimits::default(),
                DirectoryOptions {
                    rendezvous: Duration::from_millis(300),
                    ..Default::default()
                },
            );
            let mut srv = TestServer::start_with(publisher);
            let _room = srv.publisher.publish_namespace(ns(&["room"])).unwrap();
            let (client, server) = srv.connect(transport, version).await;
            let name = track(&["room"], "chat");
            let before = server.transport().open_requests();
            let pending = {
                let sub = client.subscriber().clone();
                let name = name.clone();
                tokio::spawn(async move { sub.subscribe(name, SubscribeOptions::default()).await })
            };
            eventually("the SUBSCRIBE arrives", || {
                server.transport().open_requests() > before
            })
            .await;
            // Created after the SUBSCRIBE arrived: it is served, not refused.
            let chat = srv.publisher.create_track(name.clone()).unwrap();
            let mut stream = pending.await.unwrap().unwrap();
            let id = write_group(&chat, 1);
            let mut g = stream.next_group().await.unwrap().unwrap();
            assert_eq!(read_group(&mut g).await, expected(id, 1));

            // Never created: DOES_NOT_EXIST once the publisher's rendezvous time has passed.
            let started = tokio::time::Instant::now();
            let err = client
                .subscriber()
                .subscribe(track(&["room"], "never"), SubscribeOptions::default())
                .await
                .unwrap_err();
            rejected_with(err, RequestErrorCode::DOES_NOT_EXIST);
            assert!(started.elapsed() >= Duration::from_millis(300));
            // Not under an announced namespace: refused at once.
            let err = client
                .subscriber()
                .subscribe(track(&["elsewhere"], "x"), SubscribeOptions::default())
                .await
                .unwrap_err();
            rejected_with(err, RequestErrorCode::DOES_NOT_EXIST);
        })
        .await;
    }
}

/// Application mistakes are typed errors a caller can match on.
#[tokio::test]
async fn producer_errors_are_typed() {
    let limits = CacheLimits {
        max_groups: 2,
        ..Default::default()
    };
    let publisher = Publisher::new(limits, ServeOptions::default());
    let name = track(&["errors"], "t");
    let t = publisher.create_track(name.clone()).unwrap();
    assert!(matches!(
        publisher.create_track(name.clone()),
        Err(Error::TrackExists(n)) if n == name
    ));
    let dot = moq_client::FullTrackName::new(ns(&["."]), "x").unwrap();
    assert!(matches!(
        publisher.create_track(dot),
        Err(Error::Reserved(_))
    ));
    assert!(matches!(
        publisher.publish_namespace(ns(&[".session"])),
        Err(Error::Reserved(_))
    ));

    let mut g = t.create_group(5).unwrap();
    assert!(matches!(t.create_group(5), Err(Error::GroupExists(5))));
    assert_eq!(g.write("a").unwrap(), 0);
    let mut sub = g.subgroup(1, None).unwrap();
    assert!(matches!(g.subgroup(1, None), Err(Error::SubgroupExists(1))));
    sub.write(3, "x").unwrap();
    assert!(matches!(sub.write(2, "y"), Err(Error::ObjectOrder(2))));
    sub.finish().unwrap();
    g.finish().unwrap();
    for _ in 0..3 {
        write_group(&t, 1);
    }
    assert!(matches!(t.create_group(0), Err(Error::GroupTooOld(0))));
    let mut open = t.append_group().unwrap();
    drop(t);
    assert!(matches!(open.write("late"), Err(Error::TrackEnded)));
}

/// Finishing a track resolves once every subscriber has its objects and the end of the track;
/// flushing once what was written so far is delivered. Nothing here sleeps.
#[tokio::test]
async fn awaiting_delivery() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let name = track(&["deliver"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            let (client, _server) = srv.connect(transport, version).await;
            let mut stream = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            t.subscribed().await;
            // With nothing written, flushing is done at once.
            t.flush(Duration::from_secs(5)).await.unwrap();
            let first = write_group(&t, 20);
            t.flush(Duration::from_secs(5)).await.unwrap();
            let second = write_group(&t, 20);
            t.finish(Duration::from_secs(5)).await.unwrap();
            // Everything arrived and the track ended: the stream ends, no error.
            let got = read_groups(&mut stream, 2).await;
            assert_eq!(
                got,
                vec![(first, expected(first, 20)), (second, expected(second, 20))]
            );
            assert!(
                stream.next_group().await.is_none(),
                "{transport:?} {version}"
            );
        })
        .await;
    }
}

/// Withdrawing a namespace resolves once every session sent the withdrawal; the peer's
/// discovery then reports it gone. With no session attached it resolves at once.
#[tokio::test]
async fn withdrawing_a_namespace_resolves_once_sent() {
    timeout(async {
        let alone = Publisher::default();
        let h = alone.publish_namespace(ns(&["nobody"])).unwrap();
        h.withdraw(Duration::from_secs(5)).await.unwrap();
    })
    .await;
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let room = ns(&["w", "room"]);
            let h = srv.publisher.publish_namespace(room.clone()).unwrap();
            let (client, _server) = srv.connect(transport, version).await;
            let mut rooms = client
                .subscriber()
                .subscribe_namespace(ns(&["w"]))
                .await
                .unwrap();
            assert_eq!(
                rooms.next().await.unwrap().unwrap(),
                NamespaceEvent::Added(room.clone())
            );
            h.announced().await.unwrap();
            h.withdraw(Duration::from_secs(5)).await.unwrap();
            assert_eq!(
                rooms.next().await.unwrap().unwrap(),
                NamespaceEvent::Removed(room.clone()),
                "{transport:?} {version}"
            );
        })
        .await;
    }
}

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

/// A subscriber that arrives after a group was started but before its first object gets the
/// whole group: a started group is not yet a Largest Object.
#[tokio::test]
async fn subscribe_between_group_start_and_first_object() {
    timeout(async {
        let mut srv = TestServer::start();
        let name = track(&["s"], "t");
        let t = srv.publisher.create_track(name.clone()).unwrap();
        write_group(&t, 1);
        let (client, _server) = srv.connect(Transport::Quic, Version::Draft19).await;
        let mut g = t.append_group().unwrap();
        assert_eq!(g.id(), 1);
        assert_eq!(t.largest(), Some(loc(0, 0)), "no object of group 1 yet");
        let status = client
            .subscriber()
            .track_status(name.clone())
            .await
            .unwrap();
        assert_eq!(status.largest, Some(loc(0, 0)));
        let mut stream = client
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        assert_eq!(stream.info().unwrap().largest, Some(loc(0, 0)));
        g.write("1.0").unwrap();
        g.write("1.1").unwrap();
        g.finish().unwrap();
        // Consecutive empty groups still get fresh IDs.
        let g2 = t.append_group().unwrap();
        assert_eq!(g2.id(), 2);
        let g3 = t.append_group().unwrap();
        assert_eq!(g3.id(), 3);
        g2.finish().unwrap();
        g3.finish().unwrap();
        assert_eq!(read_groups(&mut stream, 1).await, vec![(1, expected(1, 2))]);
    })
    .await;
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

/// `Track::subscribed` resolves when a subscription starts being served, and the count falls
/// back when the subscriber leaves.
#[tokio::test]
async fn a_track_knows_when_it_is_subscribed() {
    timeout(async {
        let mut srv = TestServer::start();
        let (client, _server) = srv.connect(Transport::Quic, Version::Draft19).await;
        let name = track(&["watched"], "t");
        let producer = srv.publisher.create_track(name.clone()).unwrap();
        assert_eq!(producer.subscribers(), 0);
        let stream = client
            .subscriber()
            .subscribe(name, SubscribeOptions::default())
            .await
            .unwrap();
        producer.subscribed().await;
        assert_eq!(producer.subscribers(), 1);
        drop(stream);
        // The serving task notices the cancellation; no public signal for that, so poll.
        eventually("the subscriber left", || producer.subscribers() == 0).await;
    })
    .await;
}

/// draft-19 §10.2.18: a subscriber's NEW_GROUP_REQUEST reaches the original publisher of a
/// DYNAMIC_GROUPS track through `TrackProducer::new_group_requested`.
#[tokio::test]
async fn new_group_request_reaches_the_producer() {
    timeout(async {
        let mut srv = TestServer::start();
        let name = track(&["dyn"], "t");
        let options = TrackOptions::default()
            .property(property::DYNAMIC_GROUPS, 1)
            .unwrap();
        let feed = srv
            .publisher
            .create_track_with(name.clone(), options)
            .unwrap();
        write_group(&feed, 1);
        let (client, _server) = srv.connect(Transport::Quic, Version::Draft19).await;
        let params = moq_core::message::Parameters {
            new_group_request: Some(0),
            ..Default::default()
        };
        let _sub = client.transport().subscribe(name, params).await.unwrap();
        let asked = feed.new_group_requested(None).await;
        assert_eq!(asked.value, 0);
    })
    .await;
}
