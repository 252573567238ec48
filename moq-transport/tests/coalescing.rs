//! Coalesced subgroup writes (`SubgroupSender`): bytes the transport could not take at once
//! are held and handed over without any further write, flush or finish, so live latency does
//! not depend on the next write; a lone object on an idle stream leaves with its write.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{TestServer, Transport, case, transports};
use moq_core::data::SubgroupId;
use moq_core::message::Parameters;
use moq_core::{FullTrackName, TrackNamespace, Version};
use moq_transport::track::{
    Incoming, SubscribeResponse, Subscription, SubscriptionWriter, TrackEvent,
};
use moq_transport::{Session, SessionConfig};

fn track(name: &str) -> FullTrackName {
    FullTrackName::new(
        TrackNamespace::from_strs(["live", "coalesce"]).unwrap(),
        name.as_bytes().to_vec(),
    )
    .unwrap()
}

/// A Draft-19 session pair over `transport` and one accepted subscription to `name`: the
/// test server and the client and server sessions (kept by the caller: dropping a session
/// closes it), the subscription and its writer.
async fn subscribed(
    transport: Transport,
    name: &str,
) -> (TestServer, [Session; 2], Subscription, SubscriptionWriter) {
    let mut srv = TestServer::start(SessionConfig::default().with_requests());
    let (client, server) = srv
        .connect(
            transport,
            vec![Version::Draft19],
            SessionConfig::default().with_requests(),
        )
        .await;
    let accept = async {
        match server.incoming().next().await.expect("no request") {
            Incoming::Subscribe(r) => r.accept(SubscribeResponse::default()).await,
            other => panic!("expected SUBSCRIBE, got {other:?}"),
        }
    };
    let (sub, writer) = tokio::join!(client.subscribe(track(name), Parameters::default()), accept);
    (srv, [client, server], sub.unwrap(), writer.unwrap())
}

/// 4 MiB of 1 KiB objects written as fast as the writes resolve (faster than the transport
/// takes them, so bytes are held), then nothing: the subscriber reads every object while the
/// sender is kept open, unfinished and unflushed. Then a lone object
/// after the backlog drained arrives on its own too, and `flush` resolves.
#[tokio::test]
async fn held_bytes_leave_without_a_further_write() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (_srv, _sessions, mut sub, writer) = subscribed(transport, "t").await;

            const N: u64 = 4096;
            let mut sg = writer
                .open_subgroup(0, SubgroupId::Zero, None, true)
                .await
                .unwrap();
            let payload = Bytes::from(vec![7u8; 1024]);
            let write = async {
                for id in 0..N {
                    sg.write_object(id, payload.clone()).await.unwrap();
                }
                // Neither finished nor flushed nor dropped after this: held bytes must still
                // arrive.
            };
            let read = async {
                let Some(Ok(TrackEvent::Subgroup(mut s))) = sub.next().await else {
                    panic!("no subgroup");
                };
                for id in 0..N {
                    let o = s.next_object().await.unwrap().expect("stream ended early");
                    assert_eq!(o.location.object, id);
                    assert_eq!(o.payload.len(), 1024);
                }
                s
            };
            let ((), mut s) = tokio::join!(write, read);
            // The backlog is gone: a lone object leaves with its write.
            sg.write_object(N, Bytes::from_static(b"lone"))
                .await
                .unwrap();
            let o = s.next_object().await.unwrap().expect("stream ended early");
            assert_eq!((o.location.object, &o.payload[..]), (N, &b"lone"[..]));
            sg.flush().await.unwrap();
            sg.finish();
            assert!(
                s.next_object().await.unwrap().is_none(),
                "FIN after the objects"
            );
        })
        .await;
    }
}

/// A stream's bursts one after another: what each burst leaves held leaves once its writes
/// stop. Four bursts of 1 KiB objects, each read whole by the subscriber before the next (no
/// flush, no finish in between), then FIN.
#[tokio::test]
async fn every_burst_leaves_without_a_further_write() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (_srv, _sessions, mut sub, writer) = subscribed(transport, "bursts").await;
            let mut sg = writer
                .open_subgroup(0, SubgroupId::Zero, None, true)
                .await
                .unwrap();
            let Some(Ok(TrackEvent::Subgroup(mut s))) = async {
                // The stream's first write opens it for the subscriber.
                sg.write_object(0, Bytes::from_static(b"first"))
                    .await
                    .unwrap();
                sub.next().await
            }
            .await
            else {
                panic!("no subgroup");
            };
            assert_eq!(s.next_object().await.unwrap().unwrap().location.object, 0);
            const BURST: u64 = 1024;
            let payload = Bytes::from(vec![3u8; 1024]);
            let mut next = 1;
            for _ in 0..4 {
                let ids = next..next + BURST;
                let write = async {
                    for id in ids.clone() {
                        sg.write_object(id, payload.clone()).await.unwrap();
                    }
                };
                let read = async {
                    for id in ids.clone() {
                        let o = s.next_object().await.unwrap().expect("stream ended early");
                        assert_eq!((o.location.object, o.payload.len()), (id, 1024));
                    }
                };
                tokio::join!(write, read);
                next += BURST;
            }
            sg.finish();
            assert!(
                s.next_object().await.unwrap().is_none(),
                "FIN after the objects"
            );
        })
        .await;
    }
}

/// More than the stream's flow-control window written back to back before the subscriber
/// reads: over QUIC the transport blocks, the writes wait once 128 KiB are held, and what is
/// held leaves when the window opens (a flusher waits for the transport, while the writer's
/// full chunks go from its own writes). Every object arrives whole and in order, each payload
/// its own (partly taken chunks are resumed where the transport stopped), with no flush or
/// finish before the reads.
#[tokio::test]
async fn writes_blocked_by_flow_control_leave_in_order() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (_srv, _sessions, mut sub, writer) = subscribed(transport, "blocked").await;
            // 6 MB: more than the stream window (4 MiB, `transport_config`) and the held
            // 128 KiB.
            const N: u64 = 6144;
            let payload = |id: u64| Bytes::from(vec![(id % 251) as u8; 1000 + (id % 48) as usize]);
            let mut sg = writer
                .open_subgroup(0, SubgroupId::Zero, None, true)
                .await
                .unwrap();
            let (done_tx, mut done_rx) = tokio::sync::oneshot::channel();
            let write = async {
                for id in 0..N {
                    sg.write_object(id, payload(id)).await.unwrap();
                }
                let _ = done_tx.send(());
            };
            let read = async {
                if transport == Transport::Quic {
                    // Nobody reads: the writes cannot all resolve (flow control).
                    let blocked =
                        tokio::time::timeout(Duration::from_millis(300), &mut done_rx).await;
                    assert!(blocked.is_err(), "6 MB written with nobody reading");
                }
                let Some(Ok(TrackEvent::Subgroup(mut s))) = sub.next().await else {
                    panic!("no subgroup");
                };
                for id in 0..N {
                    let o = s.next_object().await.unwrap().expect("stream ended early");
                    assert_eq!(o.location.object, id);
                    assert_eq!(o.payload, payload(id), "object {id}");
                }
                s
            };
            let ((), mut s) = tokio::join!(write, read);
            sg.flush().await.unwrap();
            sg.finish();
            assert!(
                s.next_object().await.unwrap().is_none(),
                "FIN after the objects"
            );
        })
        .await;
    }
}

/// The subscriber stops reading and the session closes while small objects are held: the
/// writer's writes and `flush` end with an error, none waits for ever (the flusher is a task
/// of the session's set, cancelled with it, and its end fails the held bytes).
#[tokio::test]
async fn held_bytes_end_with_an_error_when_the_session_closes() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (_srv, [_client, server], _sub, writer) = subscribed(transport, "t").await;
            let mut sg = writer
                .open_subgroup(0, SubgroupId::Zero, None, true)
                .await
                .unwrap();
            let payload = Bytes::from(vec![7u8; 1024]);
            // Nobody reads: the stream's flow control fills and writes start to wait.
            let mut failed = false;
            for id in 0..100_000u64 {
                let w = tokio::time::timeout(
                    std::time::Duration::from_millis(200),
                    sg.write_object(id, payload.clone()),
                )
                .await;
                match w {
                    Ok(Ok(())) => {}
                    Ok(Err(_)) => {
                        failed = true;
                        break;
                    }
                    // Blocked on held bytes: close the session under it.
                    Err(_) => break,
                }
            }
            assert!(!failed, "no write fails while the session is open");
            server.close(moq_core::codes::SessionErrorCode::NO_ERROR, "bye");
            let mut ended = false;
            for id in 0..100_000u64 {
                if sg.write_object(id, payload.clone()).await.is_err() {
                    ended = true;
                    break;
                }
            }
            assert!(ended, "writes end with an error once the session is closed");
            let f = sg.flush().await;
            assert!(f.is_err(), "flush too: {f:?}");
        })
        .await;
    }
}

/// A subgroup stream's first write goes to the transport as its header and payload, not copied
/// into a coalescing buffer: streams whose first write is one object (empty, small, over
/// 4 KiB) or a batch of objects (the first as chunks, the rest appended behind it) arrive
/// whole and in order, over every transport.
#[tokio::test]
async fn a_streams_first_write_arrives_whole_and_in_order() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (_srv, _sessions, mut sub, writer) = subscribed(transport, "first").await;
            let payload = |group: u64, id: u64, len: usize| {
                Bytes::from(
                    (0..len)
                        .map(|i| (i as u64 + group * 7 + id) as u8)
                        .collect::<Vec<_>>(),
                )
            };
            // Per group (stream): the payload sizes of its objects; the last group's first
            // write is a batch.
            let groups: [&[usize]; 4] = [&[0], &[1024], &[20_000], &[1024, 300, 5_000, 1024]];
            for (g, sizes) in groups.iter().enumerate() {
                let g = g as u64;
                let mut sg = writer
                    .open_subgroup(g, SubgroupId::Zero, None, true)
                    .await
                    .unwrap();
                if sizes.len() == 1 {
                    sg.write_object(0, payload(g, 0, sizes[0])).await.unwrap();
                } else {
                    let objects = sizes
                        .iter()
                        .enumerate()
                        .map(|(id, &len)| (id as u64, payload(g, id as u64, len)));
                    sg.write_objects(objects).await.unwrap();
                }
                sg.finish();
            }
            // Streams may be handed over in any order: each is checked by its group.
            let mut seen = Vec::new();
            for _ in 0..groups.len() {
                let Some(Ok(TrackEvent::Subgroup(mut s))) = sub.next().await else {
                    panic!("no subgroup");
                };
                let g = s.group();
                let sizes = groups[g as usize];
                for (id, &len) in sizes.iter().enumerate() {
                    let id = id as u64;
                    let o = s.next_object().await.unwrap().expect("stream ended early");
                    assert_eq!(o.location.object, id);
                    assert_eq!(o.payload, payload(g, id, len), "group {g} object {id}");
                }
                assert!(
                    s.next_object().await.unwrap().is_none(),
                    "FIN after the objects"
                );
                seen.push(g);
            }
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2, 3]);
        })
        .await;
    }
}

/// A backlog of objects of mixed sizes (empty, within one QUIC packet, split across packets:
/// up to 4 KiB assembled in a shared block, larger ones in an allocation of their own), read
/// by a subscriber that takes every chunk the transport has ready at once:
/// every object arrives whole, in order, with its own bytes, over every transport.
#[tokio::test]
async fn mixed_sizes_read_in_batches_arrive_whole() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (_srv, _sessions, mut sub, writer) = subscribed(transport, "mixed").await;
            const SIZES: [usize; 9] = [0, 1, 700, 1500, 3000, 4096, 4097, 9000, 70_000];
            const N: u64 = 900;
            let payload = |id: u64| {
                let size = SIZES[(id % SIZES.len() as u64) as usize];
                Bytes::from(
                    (0..size)
                        .map(|i| (i as u64 * 7 + id) as u8)
                        .collect::<Vec<_>>(),
                )
            };
            let mut sg = writer
                .open_subgroup(0, SubgroupId::Zero, None, true)
                .await
                .unwrap();
            let write = async {
                for id in 0..N {
                    sg.write_object(id, payload(id)).await.unwrap();
                }
                sg.flush().await.unwrap();
                sg.finish();
            };
            let read = async {
                let Some(Ok(TrackEvent::Subgroup(mut s))) = sub.next().await else {
                    panic!("no subgroup");
                };
                let mut got = Vec::new();
                while let Some(o) = s.next_object().await.unwrap() {
                    assert_eq!(o.location.object, got.len() as u64);
                    got.push(o.payload);
                }
                got
            };
            let ((), got) = tokio::join!(write, read);
            assert_eq!(got.len() as u64, N, "every object, then the FIN");
            for (id, p) in got.iter().enumerate() {
                assert_eq!(*p, payload(id as u64), "object {id}");
            }
        })
        .await;
    }
}
