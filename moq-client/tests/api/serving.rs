//! Publishing and subscribing through the API: publishers on either side, discovery, FETCH and
//! TRACK_STATUS, RENDEZVOUS_TIMEOUT, typed producer errors, delivery, withdrawal,
//! NEW_GROUP_REQUEST.

use std::time::Duration;

use moq_client::model::DirectoryOptions;
use moq_client::{
    CacheLimits, Error, NamespaceEvent, Properties, Publisher, ServeOptions, SubscribeOptions,
    TrackOptions, Version,
};
use moq_core::codes::RequestErrorCode;
use moq_core::property;

use crate::common::{
    TestServer, Transport, case, combinations, eventually, expected, fetch_all, ids, loc, ns,
    read_group, read_groups, timeout, track, write_group,
};

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
