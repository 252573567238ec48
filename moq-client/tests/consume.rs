//! The consuming side end to end over loopback raw QUIC and WebTransport: reads that are
//! cancelled half way lose nothing, a joined track is one stream with no gap and no duplicate
//! across group boundaries, FETCH is a stream with its End of Range markers, groups span their
//! subgroups, and a peer's PUBLISH is taken with typed options.
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
    TestServer, Transport, case, combinations, expected, loc, read_group, timeout, track,
    write_group,
};
use futures::FutureExt;
use moq_client::{
    CacheLimits, FetchItem, JoinFrom, Location, Object, Publisher, RangeEnd, ServeOptions,
    SubscribeOptions, TrackProducer, Version,
};

/// A payload of `len` bytes that names its location.
fn big(group: u64, object: u64, len: usize) -> Bytes {
    let mut v = format!("{group}.{object}:").into_bytes();
    v.resize(len, b'x');
    Bytes::from(v)
}

/// Polls a fresh read once at a time, dropping it whenever it is not ready at once, and counts
/// the drops. A read that is not cancel safe loses data here.
macro_rules! impatient {
    ($read:expr, $drops:expr) => {
        loop {
            if let Some(v) = $read.now_or_never() {
                break v;
            }
            $drops += 1;
            tokio::task::yield_now().await;
        }
    };
}

/// Large objects read through futures dropped mid-object: every object arrives whole and in
/// order, through the group, the subgroup and the FETCH readers alike.
#[tokio::test]
async fn cancelled_reads_lose_nothing() {
    const LEN: usize = 300_000;
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let name = track(&["cancel"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            let (client, _server) = srv.connect(transport, version).await;
            let mut track = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            t.subscribed().await;
            let mut drops = 0;
            for g in 0..2u64 {
                let mut w = t.append_group().unwrap();
                for o in 0..3 {
                    w.write(big(g, o, LEN)).unwrap();
                }
                w.finish().unwrap();
                let mut group = impatient!(track.next_group(), drops).unwrap().unwrap();
                assert_eq!(group.id(), g);
                let mut got = Vec::new();
                if g == 0 {
                    while let Some(o) = impatient!(group.next_object(), drops) {
                        got.push(o.unwrap());
                    }
                } else {
                    let mut sub = group.next_subgroup().await.unwrap();
                    while let Some(o) = impatient!(sub.next_object(), drops) {
                        got.push(o.unwrap());
                    }
                }
                let want: Vec<_> = (0..3).map(|o| (loc(g, o), big(g, o, LEN))).collect();
                let got: Vec<_> = got.into_iter().map(|o| (o.location, o.payload)).collect();
                assert!(got == want, "{transport:?} {version}: group {g} damaged");
            }
            let mut fetch = client
                .subscriber()
                .fetch(name.clone(), loc(0, 0), loc(1, 0))
                .await
                .unwrap();
            let mut got = Vec::new();
            while let Some(o) = impatient!(fetch.next_object(), drops) {
                got.push(o.unwrap().payload);
            }
            let want: Vec<_> = (0..2)
                .flat_map(|g| (0..3).map(move |o| big(g, o, LEN)))
                .collect();
            assert!(got == want, "{transport:?} {version}: fetch damaged");
            assert!(
                drops > 0,
                "no read was ever cancelled: the test proves nothing"
            );
        })
        .await;
    }
}

/// Groups written at once right after SUBSCRIBE_OK all belong to the subscription (draft-19
/// §10.7) and come to the subscriber in the order they were written: the publisher opens
/// their streams in the track's order. Opened by one task per subgroup, they took the order
/// the tasks happened to run in; on a multi-threaded runtime (as applications run) the task
/// spawned last often runs first, and the subscriber's first group was the last one written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_written_at_once_arrive_in_order() {
    for &version in Version::ALL {
        timeout(async {
            let mut srv = TestServer::start();
            let name = track(&["in-order"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            let (client, _server) = srv.connect(Transport::Quic, version).await;
            let mut track = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            for _ in 0..3 {
                write_group(&t, 1);
            }
            for g in 0..3 {
                let mut group = track.next_group().await.unwrap().unwrap();
                assert_eq!(group.id(), g, "{version}: group {g} comes next");
                assert_eq!(read_group(&mut group).await, expected(g, 1), "{version}");
            }
        })
        .await;
    }
}

/// Objects of a joined track until it ends.
async fn joined(mut objects: moq_client::ObjectConsumer) -> Vec<Object> {
    let mut out = Vec::new();
    while let Some(o) = objects.next().await {
        out.push(o.unwrap());
    }
    out
}

/// Joining mid-group yields the start of the current group (and one before, when asked), then
/// what follows live, across group boundaries, with no gap and no duplicate.
#[tokio::test]
async fn join_starts_at_the_current_group() {
    for (transport, version) in combinations() {
        for back in [0, 1] {
            case(format!("{transport:?} {version:?} {back:?}"), async {
                let mut srv = TestServer::start();
                let name = track(&["join"], "t");
                let t = srv.publisher.create_track(name.clone()).unwrap();
                write_group(&t, 4);
                let mut current = t.append_group().unwrap();
                current.write("1.0").unwrap();
                current.write("1.1").unwrap();
                let (client, _server) = srv.connect(transport, version).await;
                let objects = client
                    .subscriber()
                    .join(
                        name.clone(),
                        SubscribeOptions::default(),
                        JoinFrom::GroupsBefore(back),
                    )
                    .await
                    .unwrap();
                let reader = tokio::spawn(joined(objects));
                current.write("1.2").unwrap();
                current.finish().unwrap();
                write_group(&t, 3);
                t.finish(Duration::from_secs(5)).await.unwrap();
                let got: Vec<_> = reader
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|o| (o.location, o.payload))
                    .collect();
                let mut want: Vec<_> = Vec::new();
                if back == 1 {
                    want.extend(expected(0, 4).into_iter().map(|(o, p)| (loc(0, o), p)));
                }
                want.extend((0..3).map(|o| (loc(1, o), Bytes::from(format!("1.{o}")))));
                want.extend(expected(2, 3).into_iter().map(|(o, p)| (loc(2, o), p)));
                assert_eq!(got, want, "{transport:?} {version} back {back}");
            })
            .await;
        }
    }
}

/// Joining while the publisher writes as fast as it can: the joined stream is contiguous from
/// the start of the group it joined to the last object written.
#[tokio::test]
async fn join_while_writing_has_no_gap_and_no_duplicate() {
    const PER_GROUP: u64 = 4;
    const GROUPS: u64 = 40;
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let name = track(&["join-race"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            let (client, _server) = srv.connect(transport, version).await;
            let writer = tokio::spawn(write_groups(t, PER_GROUP, GROUPS));
            // Join once something is there, while the writer goes on.
            let objects = loop {
                let status = client.subscriber().track_status(name.clone()).await;
                if status.is_ok_and(|s| s.largest.is_some()) {
                    break client
                        .subscriber()
                        .join(
                            name.clone(),
                            SubscribeOptions::default(),
                            JoinFrom::CurrentGroup,
                        )
                        .await
                        .unwrap();
                }
                tokio::task::yield_now().await;
            };
            let got = joined(objects).await;
            writer.await.unwrap();
            let first = got.first().expect("nothing joined").location;
            assert_eq!(first.object, 0, "joined mid-group: {first}");
            let want: Vec<Location> = (first.group..GROUPS)
                .flat_map(|g| (0..PER_GROUP).map(move |o| loc(g, o)))
                .collect();
            let got: Vec<Location> = got.iter().map(|o| o.location).collect();
            assert_eq!(got, want, "{transport:?} {version}");
        })
        .await;
    }
}

/// Writes `groups` groups of `per_group` objects, yielding between objects, then ends the
/// track once delivered.
async fn write_groups(t: TrackProducer, per_group: u64, groups: u64) {
    for _ in 0..groups {
        let mut g = t.append_group().unwrap();
        for _ in 0..per_group {
            g.write("x").unwrap();
            tokio::task::yield_now().await;
        }
        g.finish().unwrap();
    }
    t.finish(Duration::from_secs(5)).await.unwrap();
}

/// FETCH is a stream: the groups the cache no longer has come as an End of Unknown Range
/// marker before the objects, and the range's end is known from FETCH_OK.
#[tokio::test]
async fn fetch_is_a_stream_with_end_of_range_markers() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let limits = CacheLimits {
                max_groups: 2,
                ..Default::default()
            };
            let mut srv = TestServer::start_with(Publisher::new(limits, ServeOptions::default()));
            let name = track(&["fetch"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            for _ in 0..4 {
                write_group(&t, 2);
            }
            let (client, _server) = srv.connect(transport, version).await;
            let mut fetch = client
                .subscriber()
                .fetch(name.clone(), loc(0, 0), loc(9, 0))
                .await
                .unwrap();
            assert_eq!(fetch.end(), (loc(3, 2), false), "{transport:?} {version}");
            let mut items = Vec::new();
            while let Some(item) = fetch.next().await {
                items.push(item.unwrap());
            }
            // Drafts 14-15 have no End of Range markers: the evicted groups are a gap.
            let mut want = Vec::new();
            if version.fetch_end_of_range() {
                want.push(FetchItem::EndOfRange {
                    kind: RangeEnd::Unknown,
                    location: Location::new(1, u64::MAX),
                });
            }
            for g in 2..4 {
                for (o, payload) in expected(g, 2) {
                    want.push(FetchItem::Object(Object {
                        location: loc(g, o),
                        subgroup: Some(0),
                        priority: 128,
                        status: moq_core::data::ObjectStatus::Normal,
                        properties: Default::default(),
                        payload,
                        end_of_group: false,
                    }));
                }
            }
            assert_eq!(items, want, "{transport:?} {version}");
        })
        .await;
    }
}

/// A group spans its subgroups: objects of two subgroups arrive through one group reader, and
/// a group can also be taken subgroup by subgroup.
#[tokio::test]
async fn a_group_spans_its_subgroups() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let name = track(&["subgroups"], "t");
            let t = srv.publisher.create_track(name.clone()).unwrap();
            let (client, _server) = srv.connect(transport, version).await;
            let mut track = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            t.subscribed().await;
            for _ in 0..2 {
                // An enhancement layer in subgroup 1, then the base layer in the first.
                let mut group = t.append_group().unwrap();
                let mut enhancement = group.subgroup(1, Some(200)).unwrap();
                for o in 0..3 {
                    enhancement.write(3 + o, format!("enh {o}")).unwrap();
                }
                enhancement.finish().unwrap();
                for o in 0..3 {
                    group.write(format!("base {o}")).unwrap();
                }
                group.finish().unwrap();
            }
            t.finish(Duration::from_secs(5)).await.unwrap();
            // The base layer continues the group's Object IDs: it carries the group's last
            // object (draft-19 §2.4.2).
            let want: Vec<_> = (6..9)
                .map(|o| (Some(0), o))
                .chain((3..6).map(|o| (Some(1), o)))
                .collect();
            // Group 0 object by object, across both subgroups.
            let mut group = track.next_group().await.unwrap().unwrap();
            assert_eq!(group.id(), 0);
            let mut got = Vec::new();
            while let Some(o) = group.next_object().await {
                let o = o.unwrap();
                got.push((o.subgroup, o.location.object));
            }
            got.sort();
            assert_eq!(got, want, "{transport:?} {version} group 0");
            // Group 1 subgroup by subgroup.
            let mut group = track.next_group().await.unwrap().unwrap();
            assert_eq!(group.id(), 1);
            let mut got = Vec::new();
            while let Some(mut s) = group.next_subgroup().await {
                let id = s.id();
                while let Some(o) = s.next_object().await {
                    got.push((id, o.unwrap().location.object));
                }
            }
            got.sort();
            assert_eq!(got, want, "{transport:?} {version} group 1");
            assert!(track.next_group().await.is_none());
        })
        .await;
    }
}

/// draft-19 §2.4.2: a subscriber that finds a track malformed (here: two streams of one
/// subgroup at different publisher priorities, from a raw publisher) cancels the subscription
/// and delivers the error to the application: the group's read and the track both end with
/// [`moq_client::Error::Malformed`], and the publisher sees its subscription end.
#[tokio::test]
async fn a_malformed_track_fails_the_consumer_and_cancels_the_subscription() {
    use moq_core::data::SubgroupId;
    use moq_transport::track::PublishOptions;
    let mut server = TestServer::start();
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let (c, s) = server.connect(transport, version).await;
            let name = track(&["malformed"], "t");
            let (published, incoming) = tokio::join!(
                c.transport()
                    .publish(name.clone(), PublishOptions::default()),
                s.subscriber().next_publish()
            );
            let mut consumer = incoming
                .unwrap()
                .accept(SubscribeOptions::default())
                .await
                .unwrap();
            let published = published.unwrap();
            published.accepted().await.unwrap();
            let w = published.writer();
            let mut first = w
                .open_subgroup(0, SubgroupId::Explicit(0), Some(10), false)
                .await
                .unwrap();
            first
                .write_object(0, Bytes::from_static(b"ok"))
                .await
                .unwrap();
            let mut group = consumer.next_group().await.unwrap().unwrap();
            let ok = group.next_object().await.unwrap().unwrap();
            assert_eq!(&ok.payload[..], b"ok");
            let mut second = w
                .open_subgroup(0, SubgroupId::Explicit(0), Some(20), false)
                .await
                .unwrap();
            second
                .write_object(1, Bytes::from_static(b"bad"))
                .await
                .unwrap();
            let err = group.next_object().await.unwrap().unwrap_err();
            assert!(matches!(err, moq_client::Error::Malformed(_)), "{err:?}");
            let err = consumer.next_group().await.unwrap().unwrap_err();
            assert!(matches!(err, moq_client::Error::Malformed(_)), "{err:?}");
            assert!(consumer.next_group().await.is_none());
            // The publisher's subscription is cancelled.
            w.cancelled().await;
        })
        .await;
    }
}

/// A track whose publisher declares Descending group order (as Cloudflare's draft-14 stack does
/// on every SUBSCRIBE_OK) but writes live groups one after another: a reader that takes the
/// groups in turn gets each one ended when the next starts, and never stalls at a boundary.
#[tokio::test]
async fn descending_track_read_group_by_group_does_not_stall() {
    for (transport, version) in combinations() {
        case(format!("{transport:?} {version:?}"), async {
            let mut srv = TestServer::start();
            let name = track(&["desc"], "t");
            let options = moq_client::TrackOptions {
                group_order: Some(moq_client::GroupOrder::Descending),
                ..Default::default()
            };
            let t = srv
                .publisher
                .create_track_with(name.clone(), options)
                .unwrap();
            let (client, _server) = srv.connect(transport, version).await;
            let mut track = client
                .subscriber()
                .subscribe(name.clone(), SubscribeOptions::default())
                .await
                .unwrap();
            t.subscribed().await;
            // Each group's one subgroup ends without saying it carried the group's last
            // object, the way a minute of a clock does.
            let start = |g: u64| {
                let w = t.create_group(g).unwrap();
                let mut sg = w.subgroup(1, None).unwrap();
                sg.write(0, format!("g{g}")).unwrap();
                sg.finish().unwrap();
                w
            };
            let mut open = vec![start(0)];
            for g in 0..3u64 {
                let mut group = track.next_group().await.unwrap().unwrap();
                assert_eq!(group.id(), g, "{transport:?} {version}");
                assert!(group.next_object().await.unwrap().is_ok());
                // The next group starts while this one is being read: this one ends.
                open.push(start(g + 1));
                assert!(
                    group.next_object().await.is_none(),
                    "{transport:?} {version}: group {g} never ended"
                );
            }
        })
        .await;
    }
}

/// A producer written from a thread of its own, outside any runtime, back to back (the
/// transport cannot take every write at once, so bytes are held for a task to hand over):
/// every object arrives, in order. The serving future writes them then, not the appender.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_on_a_thread_of_its_own_is_served() {
    const OBJECTS: u64 = 2_000;
    timeout(async {
        let mut srv = TestServer::start();
        let name = track(&["thread"], "t");
        let t = srv.publisher.create_track(name.clone()).unwrap();
        let (client, _server) = srv.connect(Transport::Quic, Version::Draft19).await;
        let mut track = client
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        let mut g = t.append_group().unwrap();
        g.write(big(0, 0, 100)).unwrap();
        let mut group = track.next_group().await.unwrap().unwrap();
        assert_eq!(
            group.next_object().await.unwrap().unwrap().payload,
            big(0, 0, 100)
        );
        let writer = std::thread::spawn(move || {
            for o in 1..OBJECTS {
                g.write(big(0, o, 100)).unwrap();
            }
            g.finish().unwrap();
        });
        for o in 1..OBJECTS {
            let got = group.next_object().await.unwrap().unwrap();
            assert_eq!(got.payload, big(0, o, 100), "object {o}");
        }
        writer.join().unwrap();
    })
    .await;
}
