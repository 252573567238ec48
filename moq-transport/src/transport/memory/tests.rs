use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;

use super::*;
use crate::transport::{BoxRecvStream, Connection, TransportError, TransportKind};

/// Runs a test body with a deadline.
async fn timed<F: Future<Output = ()>>(body: F) {
    tokio::time::timeout(Duration::from_secs(5), body)
        .await
        .expect("test timed out");
}

fn raw() -> (MemoryConnection, MemoryConnection) {
    pair("moqt-19", TransportKind::RawQuic)
}

fn limited(limits: MemoryLimits) -> (MemoryConnection, MemoryConnection) {
    pair_with("moqt-19", TransportKind::RawQuic, limits)
}

/// Reads everything up to the FIN.
async fn read_to_end(recv: &mut BoxRecvStream) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = recv.read_chunk(usize::MAX).await.unwrap() {
        out.extend_from_slice(&chunk);
    }
    out
}

/// True if the future is still waiting after one poll.
fn pending<F: Future + Unpin>(f: &mut F) -> bool {
    f.now_or_never().is_none()
}

#[tokio::test]
async fn reports_protocol_kind_and_no_address() {
    timed(async {
        let (client, server) = pair("moqt-19", TransportKind::WebTransport);
        for end in [&client, &server] {
            assert_eq!(end.protocol().as_deref(), Some("moqt-19"));
            assert_eq!(end.kind(), TransportKind::WebTransport);
            assert_eq!(end.remote_addr(), None);
            assert_eq!(end.max_datagram_size(), Some(1200));
        }
    })
    .await;
}

#[tokio::test]
async fn bidi_round_trip_both_directions() {
    timed(async {
        let (client, server) = raw();
        for (opener, acceptor) in [(&client, &server), (&server, &client)] {
            let (mut send, mut recv) = opener.open_bi().await.unwrap();
            send.write_all(b"ping").await.unwrap();
            send.finish().unwrap();
            let (mut peer_send, mut peer_recv) = acceptor.accept_bi().await.unwrap();
            assert_eq!(read_to_end(&mut peer_recv).await, b"ping");
            peer_send
                .write_chunk(Bytes::from_static(b"pong"))
                .await
                .unwrap();
            peer_send.finish().unwrap();
            assert_eq!(read_to_end(&mut recv).await, b"pong");
        }
    })
    .await;
}

#[tokio::test]
async fn uni_round_trip_both_directions() {
    timed(async {
        let (client, server) = raw();
        for (opener, acceptor) in [(&client, &server), (&server, &client)] {
            let mut send = opener.open_uni().await.unwrap();
            let mut chunks = [Bytes::from_static(b"a"), Bytes::from_static(b"bc")];
            send.write_all_chunks(&mut chunks).await.unwrap();
            send.finish().unwrap();
            let mut recv = acceptor.accept_uni().await.unwrap();
            assert_eq!(read_to_end(&mut recv).await, b"abc");
        }
    })
    .await;
}

#[tokio::test]
async fn streams_are_accepted_in_opening_order() {
    timed(async {
        let (client, server) = raw();
        let mut first = client.open_uni().await.unwrap();
        let mut second = client.open_uni().await.unwrap();
        second.write_all(b"2").await.unwrap();
        first.write_all(b"1").await.unwrap();
        drop((first, second));
        let mut a = server.accept_uni().await.unwrap();
        let mut b = server.accept_uni().await.unwrap();
        assert_eq!(read_to_end(&mut a).await, b"1");
        assert_eq!(read_to_end(&mut b).await, b"2");
    })
    .await;
}

#[tokio::test]
async fn fin_after_data_and_read_max() {
    timed(async {
        let (client, server) = raw();
        let mut send = client.open_uni().await.unwrap();
        send.write_all(b"hello").await.unwrap();
        send.write_all(b"world").await.unwrap();
        send.finish().unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        assert_eq!(
            recv.read_chunk(3).await.unwrap().as_deref(),
            Some(&b"hel"[..])
        );
        assert_eq!(
            recv.read_chunk(3).await.unwrap().as_deref(),
            Some(&b"lo"[..])
        );
        assert_eq!(
            recv.read_chunk(10).await.unwrap().as_deref(),
            Some(&b"world"[..])
        );
        assert_eq!(recv.read_chunk(10).await.unwrap(), None);
        assert_eq!(recv.read_chunk(10).await.unwrap(), None);
    })
    .await;
}

#[tokio::test]
async fn finish_twice_and_write_after_finish_fail() {
    timed(async {
        let (client, _server) = raw();
        let mut send = client.open_uni().await.unwrap();
        send.finish().unwrap();
        assert_eq!(send.finish(), Err(TransportError::StreamClosed));
        assert_eq!(
            send.write_all(b"x").await,
            Err(TransportError::StreamClosed)
        );
    })
    .await;
}

#[tokio::test]
async fn reset_code_reaches_the_reader() {
    timed(async {
        let (client, server) = raw();
        let mut send = client.open_uni().await.unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        let mut read = recv.read_chunk(10);
        assert!(pending(&mut read));
        send.write_all(b"discarded").await.unwrap();
        assert_eq!(read.await.unwrap().as_deref(), Some(&b"discarded"[..]));
        send.write_all(b"unread").await.unwrap();
        send.reset(7);
        assert_eq!(recv.read_chunk(10).await, Err(TransportError::Reset(7)));
        assert_eq!(recv.read_chunk(10).await, Err(TransportError::Reset(7)));
        assert_eq!(
            send.write_all(b"x").await,
            Err(TransportError::StreamClosed)
        );
        assert_eq!(send.finish(), Err(TransportError::StreamClosed));
        assert_eq!(send.stopped().await, Ok(None));
    })
    .await;
}

#[tokio::test]
async fn reset_after_finish_reaches_a_reader_that_has_not_read_the_fin() {
    timed(async {
        let (client, server) = raw();
        let mut send = client.open_uni().await.unwrap();
        send.write_all(b"data").await.unwrap();
        send.finish().unwrap();
        send.reset(3);
        let mut recv = server.accept_uni().await.unwrap();
        assert_eq!(recv.read_chunk(10).await, Err(TransportError::Reset(3)));

        let mut send = client.open_uni().await.unwrap();
        send.write_all(b"data").await.unwrap();
        send.finish().unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        assert_eq!(read_to_end(&mut recv).await, b"data");
        send.reset(3);
        assert_eq!(recv.read_chunk(10).await, Ok(None));
    })
    .await;
}

#[tokio::test]
async fn stop_code_reaches_the_writer() {
    timed(async {
        let (client, server) = raw();
        let (mut send, _recv) = client.open_bi().await.unwrap();
        send.write_all(b"x").await.unwrap();
        let (_peer_send, mut peer_recv) = server.accept_bi().await.unwrap();
        let mut stopped = send.stopped();
        assert!(pending(&mut stopped));
        drop(stopped);
        peer_recv.stop(9);
        assert_eq!(send.stopped().await, Ok(Some(9)));
        assert_eq!(send.write_all(b"y").await, Err(TransportError::Stopped(9)));
        assert_eq!(
            peer_recv.read_chunk(10).await,
            Err(TransportError::StreamClosed)
        );
    })
    .await;
}

#[tokio::test]
async fn stop_wakes_a_blocked_writer() {
    timed(async {
        let (client, server) = limited(MemoryLimits {
            stream_buffer: 4,
            ..MemoryLimits::default()
        });
        let mut send = client.open_uni().await.unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        let (write, ()) = tokio::join!(
            // Polled first: the write fills the buffer and waits.
            send.write_all(b"too long"),
            async { recv.stop(11) }
        );
        assert_eq!(write, Err(TransportError::Stopped(11)));
    })
    .await;
}

#[tokio::test]
async fn stopped_is_none_once_the_reader_has_the_fin() {
    timed(async {
        let (client, server) = raw();
        let mut send = client.open_uni().await.unwrap();
        send.write_all(b"abc").await.unwrap();
        send.finish().unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        let stopped = send.stopped();
        tokio::pin!(stopped);
        assert!(futures::poll!(stopped.as_mut()).is_pending());
        assert_eq!(
            recv.read_chunk(10).await.unwrap().as_deref(),
            Some(&b"abc"[..])
        );
        assert!(futures::poll!(stopped.as_mut()).is_pending());
        assert_eq!(recv.read_chunk(10).await.unwrap(), None);
        assert_eq!(stopped.await, Ok(None));
    })
    .await;
}

#[tokio::test]
async fn writes_wait_while_the_buffer_is_full() {
    timed(async {
        let (client, server) = limited(MemoryLimits {
            stream_buffer: 8,
            ..MemoryLimits::default()
        });
        let mut send = client.open_uni().await.unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        send.write_all(b"12345678").await.unwrap();
        let write = send.write_all(b"abcdefghij");
        tokio::pin!(write);
        assert!(futures::poll!(write.as_mut()).is_pending());
        assert_eq!(
            recv.read_chunk(5).await.unwrap().as_deref(),
            Some(&b"12345"[..])
        );
        // Room for 5 more bytes: the writer moves on but still has 7 to go.
        assert!(futures::poll!(write.as_mut()).is_pending());
        let reader = async {
            let mut got = Vec::new();
            while got.len() < 13 {
                got.extend_from_slice(&recv.read_chunk(100).await.unwrap().unwrap());
            }
            got
        };
        let (written, got) = tokio::join!(write.as_mut(), reader);
        written.unwrap();
        assert_eq!(got, b"678abcdefghij");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_task_resumes_when_the_reader_reads() {
    timed(async {
        let (client, server) = limited(MemoryLimits {
            stream_buffer: 16,
            ..MemoryLimits::default()
        });
        let writer = tokio::spawn(async move {
            let mut send = client.open_uni().await.unwrap();
            for _ in 0..100 {
                send.write_all(&[7; 10]).await.unwrap();
            }
            send.finish().unwrap();
            send.stopped().await
        });
        let mut recv = server.accept_uni().await.unwrap();
        let data = read_to_end(&mut recv).await;
        assert_eq!(data.len(), 1000);
        assert_eq!(writer.await.unwrap(), Ok(None));
    })
    .await;
}

#[tokio::test]
async fn datagrams_too_large_refused_and_overflow_dropped() {
    timed(async {
        let (client, server) = limited(MemoryLimits {
            datagram_queue: 2,
            max_datagram_size: Some(4),
            ..MemoryLimits::default()
        });
        assert!(matches!(
            client.send_datagram(Bytes::from_static(b"12345")),
            Err(TransportError::Datagram(_))
        ));
        for d in ["a", "b", "c"] {
            client.send_datagram(Bytes::from(d)).unwrap();
        }
        assert_eq!(server.recv_datagram().await.unwrap(), "a");
        assert_eq!(server.recv_datagram().await.unwrap(), "b");
        let mut next = server.recv_datagram();
        assert!(pending(&mut next));
        client.send_datagram(Bytes::from_static(b"d")).unwrap();
        assert_eq!(next.await.unwrap(), "d");
        server.send_datagram(Bytes::from_static(b"back")).unwrap();
        assert_eq!(client.recv_datagram().await.unwrap(), "back");

        let (client, _server) = limited(MemoryLimits {
            max_datagram_size: None,
            ..MemoryLimits::default()
        });
        assert_eq!(client.max_datagram_size(), None);
        assert!(matches!(
            client.send_datagram(Bytes::from_static(b"1")),
            Err(TransportError::Datagram(_))
        ));
    })
    .await;
}

#[tokio::test]
async fn close_is_seen_by_both_ends() {
    timed(async {
        let (client, server) = raw();
        let (mut c_send, mut c_recv) = client.open_bi().await.unwrap();
        c_send.write_all(b"buffered").await.unwrap();
        let (mut s_send, mut s_recv) = server.accept_bi().await.unwrap();
        let by_peer = TransportError::ClosedByPeer {
            code: 5,
            reason: "bye".into(),
        };
        let local = TransportError::ClosedLocally;

        // Pending operations on both ends are woken by the close.
        let s_closed = server.closed();
        let s_accept = server.accept_uni();
        let c_read = c_recv.read_chunk(10);
        let c_stopped = c_send.stopped();
        let closing = async {
            client.close(5, "bye");
            client.close(6, "second close is ignored");
            server.close(7, "so is the peer's");
        };
        let (s_closed, s_accept, c_read, c_stopped, ()) =
            tokio::join!(s_closed, s_accept, c_read, c_stopped, closing);
        assert_eq!(s_closed, by_peer);
        assert_eq!(s_accept.unwrap_err(), by_peer);
        assert_eq!(c_read, Err(local.clone()));
        assert_eq!(c_stopped, Err(local.clone()));

        // The peer: everything fails with ClosedByPeer, even data already buffered.
        assert_eq!(s_recv.read_chunk(10).await, Err(by_peer.clone()));
        assert_eq!(s_send.write_all(b"x").await, Err(by_peer.clone()));
        assert_eq!(s_send.finish(), Err(by_peer.clone()));
        assert_eq!(server.accept_bi().await.unwrap_err(), by_peer);
        assert_eq!(server.open_uni().await.unwrap_err(), by_peer);
        assert_eq!(server.recv_datagram().await, Err(by_peer.clone()));
        assert_eq!(server.send_datagram(Bytes::new()), Err(by_peer.clone()));

        // Our side: ClosedLocally.
        assert_eq!(client.closed().await, local);
        assert_eq!(client.open_bi().await.unwrap_err(), local);
        assert_eq!(client.accept_bi().await.unwrap_err(), local);
        assert_eq!(c_send.write_all(b"x").await, Err(local.clone()));
        assert_eq!(client.send_datagram(Bytes::new()), Err(local.clone()));
    })
    .await;
}

#[tokio::test]
async fn dropping_every_clone_closes_the_end() {
    timed(async {
        let (client, server) = raw();
        let other = client.clone();
        let closed = server.closed();
        tokio::pin!(closed);
        drop(client);
        assert!(futures::poll!(closed.as_mut()).is_pending());
        drop(other);
        assert_eq!(
            closed.await,
            TransportError::ClosedByPeer {
                code: 0,
                reason: String::new()
            }
        );
    })
    .await;
}

#[tokio::test]
async fn streams_keep_their_end_open() {
    timed(async {
        let (client, server) = raw();
        let mut send = client.open_uni().await.unwrap();
        drop(client);
        let mut recv = server.accept_uni().await.unwrap();
        send.write_all(b"still open").await.unwrap();
        send.finish().unwrap();
        assert_eq!(read_to_end(&mut recv).await, b"still open");
        assert_eq!(send.stopped().await, Ok(None));
        // The last handle to the client end: dropping it closes the connection.
        drop(send);
        assert_eq!(
            server.closed().await,
            TransportError::ClosedByPeer {
                code: 0,
                reason: String::new()
            }
        );
    })
    .await;
}

#[tokio::test]
async fn dropping_an_unfinished_send_half_finishes_it() {
    timed(async {
        let (client, server) = raw();
        let (mut send, _recv) = client.open_bi().await.unwrap();
        send.write_all(b"last words").await.unwrap();
        drop(send);
        let (_send, mut recv) = server.accept_bi().await.unwrap();
        assert_eq!(read_to_end(&mut recv).await, b"last words");
    })
    .await;
}

#[tokio::test]
async fn dropping_an_unread_recv_half_stops_with_zero() {
    timed(async {
        let (client, server) = raw();
        let mut send = client.open_uni().await.unwrap();
        send.write_all(b"unread").await.unwrap();
        let recv = server.accept_uni().await.unwrap();
        {
            let stopped = send.stopped();
            tokio::pin!(stopped);
            assert!(futures::poll!(stopped.as_mut()).is_pending());
            drop(recv);
            assert_eq!(stopped.await, Ok(Some(0)));
        }
        assert_eq!(send.write_all(b"x").await, Err(TransportError::Stopped(0)));

        // A recv half dropped after the FIN does not stop.
        let mut send = client.open_uni().await.unwrap();
        send.finish().unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        assert_eq!(recv.read_chunk(1).await, Ok(None));
        drop(recv);
        assert_eq!(send.stopped().await, Ok(None));
    })
    .await;
}

#[tokio::test]
async fn open_waits_while_the_peer_has_max_streams_unaccepted() {
    timed(async {
        let (client, server) = limited(MemoryLimits {
            max_bidi_streams: 2,
            max_uni_streams: 1,
            ..MemoryLimits::default()
        });
        let _a = client.open_bi().await.unwrap();
        let _b = client.open_bi().await.unwrap();
        let third = client.open_bi();
        tokio::pin!(third);
        assert!(futures::poll!(third.as_mut()).is_pending());
        // The other direction has its own limit.
        let _back = server.open_bi().await.unwrap();
        let _accepted = server.accept_bi().await.unwrap();
        let (mut send, _recv) = third.await.unwrap();
        send.write_all(b"third").await.unwrap();
        let _second = server.accept_bi().await.unwrap();
        let (_s, mut recv) = server.accept_bi().await.unwrap();
        drop(send);
        assert_eq!(read_to_end(&mut recv).await, b"third");

        let _u = client.open_uni().await.unwrap();
        let next = client.open_uni();
        tokio::pin!(next);
        assert!(futures::poll!(next.as_mut()).is_pending());
        let _accepted = server.accept_uni().await.unwrap();
        next.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn debug_output_names_the_end() {
    timed(async {
        let (client, server) = raw();
        let text = format!("{client:?}");
        assert!(text.contains("Client"), "{text}");
        let send = server.open_uni().await.unwrap();
        let recv = client.accept_uni().await.unwrap();
        assert!(format!("{send:?}").contains("SendStream"));
        assert!(format!("{recv:?}").contains("RecvStream"));
    })
    .await;
}
