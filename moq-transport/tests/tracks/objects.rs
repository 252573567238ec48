//! The data plane: subgroup streams and datagrams, location filters, objects written together,
//! small and large objects, delivery timeouts, priorities between groups (draft-19 §5.1, §7, §8,
//! §11).

use std::time::Duration;

use bytes::Bytes;
use moq_core::data::SubgroupId;
use moq_core::message::Parameters;
use moq_core::{GroupOrder, Location, LocationFilter, Version};
use moq_transport::track::{SubscribeResponse, TrackEvent};

use crate::common::{Transport, case, timeout, transports};
use crate::support::{collect, end, filtered, pair_with_requests, subscribe_accepted, track};

#[tokio::test]
async fn datagrams_are_delivered() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let (mut sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("d"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            let obj = moq_transport::track::Object {
                location: Location::new(1, 2),
                priority: 3,
                payload: Bytes::from_static(b"hello"),
                ..Default::default()
            };
            // Datagrams are unreliable; on loopback they arrive. Send a few, take the first.
            for _ in 0..3 {
                assert!(writer.send_datagram(&obj).unwrap());
            }
            match sub.next().await.unwrap().unwrap() {
                TrackEvent::Datagram(o) => {
                    assert_eq!(o.location, Location::new(1, 2));
                    assert_eq!(o.priority, 3);
                    assert_eq!(&o.payload[..], b"hello");
                    assert_eq!(o.subgroup, None);
                }
                other => panic!("{other:?}"),
            }
        })
        .await;
    }
}

#[tokio::test]
async fn location_filter_is_enforced_by_the_publisher() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let filter = LocationFilter::AbsoluteRange {
            end_object: None,
            start: Location::new(2, 1),
            end_group_delta: 1,
        };
        let (mut sub, writer) = filtered(&client, &server, track("f"), filter).await;
        for g in 0..5u64 {
            let mut s = writer
                .open_subgroup(g, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            for o in 0..2u64 {
                s.write_object(o, Bytes::from_static(b"x")).await.unwrap();
            }
            s.finish();
        }
        end(&writer).await;
        let (objects, err) = collect(&mut sub).await;
        assert!(err.is_none());
        let mut locs: Vec<Location> = objects.into_iter().map(|(l, _)| l).collect();
        locs.sort();
        assert_eq!(
            locs,
            vec![
                Location::new(2, 1),
                Location::new(3, 0),
                Location::new(3, 1)
            ]
        );
    })
    .await;
}

/// Objects written several at once (`SubgroupSender::write_objects`) arrive like objects
/// written one by one, in order and filtered alike: a batch that straddles the filter's start
/// sends only what passes, and the stream does not claim FIRST_OBJECT (draft-19 §2.2).
#[tokio::test]
async fn objects_written_together_arrive_and_are_filtered() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let filter = LocationFilter::AbsoluteStart(Location::new(1, 2));
            let (mut sub, writer) = filtered(&client, &server, track("batched"), filter).await;
            for g in 0..3u64 {
                let mut s = writer
                    .open_subgroup(g, SubgroupId::Zero, None, false)
                    .await
                    .unwrap();
                s.write_objects((0..5u64).map(|o| (o, Bytes::from(format!("{g}.{o}")))))
                    .await
                    .unwrap();
                s.write_objects([(5, Bytes::new())]).await.unwrap();
                s.finish();
            }
            end(&writer).await;
            let mut got = Vec::new();
            let mut first_objects = Vec::new();
            loop {
                match sub.next().await {
                    Some(Ok(TrackEvent::Subgroup(mut s))) => {
                        first_objects.push((s.group(), s.first_object()));
                        while let Some(o) = s.next_object().await.unwrap() {
                            got.push((o.location, o.payload));
                        }
                    }
                    Some(Ok(TrackEvent::Datagram(_))) => panic!("no datagrams were sent"),
                    Some(Err(e)) => panic!("{transport:?}: {e:?}"),
                    None => break,
                }
            }
            got.sort_by_key(|(l, _)| *l);
            let mut want = Vec::new();
            for g in 1..3u64 {
                let from = if g == 1 { 2 } else { 0 };
                for o in from..5u64 {
                    want.push((Location::new(g, o), Bytes::from(format!("{g}.{o}"))));
                }
                want.push((Location::new(g, 5), Bytes::new()));
            }
            assert_eq!(got, want, "{transport:?}");
            first_objects.sort();
            // Group 0's objects were all before the start: its stream is its header alone, and
            // does not claim the group's first object either.
            assert_eq!(
                first_objects,
                vec![(0, false), (1, false), (2, true)],
                "{transport:?}"
            );
        })
        .await;
    }
}

/// Objects of every size class arrive whole and in order, written one by one and together:
/// small payloads are copied behind their header into shared chunks (one chunk per object,
/// several per batch up to 64 KiB), larger ones go as chunks of their own.
#[tokio::test]
async fn small_and_large_objects_arrive_whole() {
    let sizes = [0usize, 1, 1000, 4096, 4097, 70_000, 3, 0];
    let payload = |g: u64, o: u64, n: usize| -> Bytes {
        (0..n).map(|i| (i as u64 * 7 + g * 31 + o) as u8).collect()
    };
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let filter = LocationFilter::AbsoluteStart(Location::new(0, 0));
            let (mut sub, writer) = filtered(&client, &server, track("sizes"), filter).await;
            let mut want = Vec::new();
            for g in 0..3u64 {
                let mut s = writer
                    .open_subgroup(g, SubgroupId::Zero, None, false)
                    .await
                    .unwrap();
                // Group 0 one by one; group 1 in one batch; group 2 a batch of 100 small
                // objects (more than one 64 KiB chunk) between the sizes.
                let mut objects: Vec<(u64, Bytes)> = sizes
                    .iter()
                    .enumerate()
                    .map(|(o, &n)| (o as u64, payload(g, o as u64, n)))
                    .collect();
                if g == 2 {
                    let base = objects.len() as u64;
                    objects.extend((base..base + 100).map(|o| (o, payload(g, o, 1000))));
                }
                want.extend(
                    objects
                        .iter()
                        .map(|(o, p)| (Location::new(g, *o), p.clone())),
                );
                if g == 0 {
                    for (o, p) in objects {
                        s.write_object(o, p).await.unwrap();
                    }
                } else {
                    s.write_objects(objects).await.unwrap();
                }
                s.finish();
            }
            end(&writer).await;
            let mut got = Vec::new();
            while let Some(ev) = sub.next().await {
                match ev {
                    Ok(TrackEvent::Subgroup(mut s)) => {
                        while let Some(o) = s.next_object().await.unwrap() {
                            got.push((o.location, o.payload));
                        }
                    }
                    Ok(TrackEvent::Datagram(_)) => panic!("no datagrams were sent"),
                    Err(e) => panic!("{transport:?}: {e:?}"),
                }
            }
            got.sort_by_key(|(l, _)| *l);
            assert_eq!(got.len(), want.len(), "{transport:?}");
            assert!(got == want, "{transport:?}: payloads differ");
        })
        .await;
    }
}

/// draft-19 §8: OBJECT_DELIVERY_TIMEOUT applies to datagrams too: one whose first byte is
/// older than the subscriber's timeout is not sent; a fresh one is.
#[tokio::test]
async fn datagram_past_its_delivery_timeout_is_not_sent() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let params = Parameters {
            object_delivery_timeout: Some(100),
            ..Default::default()
        };
        let (mut sub, writer) = subscribe_accepted(
            &client,
            &server,
            track("dt"),
            params,
            SubscribeResponse::default(),
        )
        .await;
        let object = |o: u64| moq_transport::track::Object {
            location: Location::new(0, o),
            payload: Bytes::from(format!("o{o}")),
            ..Default::default()
        };
        let old = std::time::Instant::now()
            .checked_sub(Duration::from_secs(1))
            .unwrap();
        assert!(!writer.send_datagram_received(&object(0), old).unwrap());
        let fresh = std::time::Instant::now();
        assert!(writer.send_datagram_received(&object(1), fresh).unwrap());
        match sub.next().await.unwrap().unwrap() {
            TrackEvent::Datagram(o) => assert_eq!(o.location, Location::new(0, 1)),
            TrackEvent::Subgroup(_) => panic!("a subgroup"),
        }
    })
    .await;
}

/// draft-19 §7.2: with Descending group order a new group's stream has a higher send priority,
/// so its first object is not stuck behind the tail of the previous group under load.
#[tokio::test]
async fn new_group_is_not_stuck_behind_the_old_tail() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let params = Parameters {
            group_order: Some(GroupOrder::Descending),
            ..Default::default()
        };
        let (mut sub, writer) = subscribe_accepted(
            &client,
            &server,
            track("prio"),
            params,
            SubscribeResponse::default(),
        )
        .await;
        // Queue a large tail on group 1, then the first object of group 2.
        let tail = Bytes::from(vec![7u8; 16 << 20]);
        let mut old = writer
            .open_subgroup(1, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        let mut new = writer
            .open_subgroup(2, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        let send = async {
            old.write_object(0, tail).await.unwrap();
            old.finish();
        };
        let send_new = async {
            new.write_object(0, Bytes::from_static(b"keyframe"))
                .await
                .unwrap();
            new.finish();
        };
        // Read both streams as they come, recording the order in which objects complete.
        let (order_tx, mut order_rx) = tokio::sync::mpsc::unbounded_channel();
        let recv = async {
            let mut tasks = Vec::new();
            for _ in 0..2 {
                let Some(Ok(TrackEvent::Subgroup(mut s))) = sub.next().await else {
                    panic!("no subgroup")
                };
                let tx = order_tx.clone();
                tasks.push(tokio::spawn(async move {
                    while let Some(o) = s.next_object().await.unwrap() {
                        tx.send((o.location.group, o.payload.len())).unwrap();
                    }
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        };
        tokio::join!(send, send_new, recv);
        drop(order_tx);
        let first = order_rx.recv().await.unwrap();
        assert_eq!(
            first,
            (2, 8),
            "the new group's first object arrives before the old group's tail"
        );
        assert_eq!(order_rx.recv().await.unwrap(), (1, 16 << 20));
    })
    .await;
}
