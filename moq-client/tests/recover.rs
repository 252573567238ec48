//! Clients that recover, over loopback QUIC: a reconnecting subscriber whose server restarts
//! without the track renews its subscription with backoff until the track is back (and gives
//! up after its bound with the refusal), and a subscriber that never reads is ended with
//! TOO_FAR_BEHIND before it pins more than the serve backlog bound, while another keeps
//! receiving.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::{TestServer, Transport, case, eventually, timeout, track, wait_status};
use moq_client::model::ServeStats;
use moq_client::{
    Backoff, CacheLimits, Certificate, FullTrackName, GroupConsumer, Publisher, Reconnecting,
    RenewRetry, ServeOptions, Status, SubscribeOptions, TrackConsumer, TrackOptions, TrackProducer,
    Version,
};
use moq_core::codes::{PublishDoneCode, RequestErrorCode, StreamResetCode};
use moq_core::message::Parameters;
use moq_transport::track::TrackEvent;
use tokio::sync::mpsc;
use tracing_subscriber::layer::SubscriberExt;

/// The client's "renewal refused; retrying" events, each as its fields. Installed as this
/// thread's dispatcher: a `#[tokio::test]` runs every task of the test on this thread.
struct Refusals(mpsc::UnboundedSender<String>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Refusals {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Fields(String);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        let mut fields = Fields(String::new());
        event.record(&mut fields);
        if fields.0.contains("renewal refused") {
            let _ = self.0.send(fields.0);
        }
    }
}

/// Watches for refused renewals on this thread while the guard lives.
fn watch_refusals() -> (
    mpsc::UnboundedReceiver<String>,
    tracing::subscriber::DefaultGuard,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let guard = tracing::subscriber::set_default(tracing_subscriber::registry().with(Refusals(tx)));
    (rx, guard)
}

/// Quick reconnects, for tests.
const BACKOFF: Backoff = Backoff {
    min: Duration::from_millis(20),
    max: Duration::from_millis(200),
};

/// Writes a finished group of one object "`tag`"; returns its ID.
fn write_tagged(track: &TrackProducer, tag: &str) -> u64 {
    let mut g = track.append_group().unwrap();
    let id = g.id();
    g.write(tag.to_string()).unwrap();
    g.finish().unwrap();
    id
}

/// The next group of `stream`, which must come without an error: (ID, payloads).
async fn next_group(stream: &mut TrackConsumer) -> (u64, Vec<Bytes>) {
    let mut g: GroupConsumer = stream
        .next_group()
        .await
        .expect("track ended early")
        .expect("an error reached the consumer");
    let mut objects = Vec::new();
    while let Some(o) = g.next_object().await {
        objects.push(o.expect("object failed").payload);
    }
    (g.id(), objects)
}

/// A server on an ephemeral port with a certificate the test keeps (to restart it on the same
/// port, where the client's pin still holds), publishing `name` with clock-numbered groups.
async fn first_server(name: &FullTrackName) -> (TestServer, Certificate, TrackProducer) {
    let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
    let srv = TestServer::start_at(0, cert.clone(), Publisher::default()).await;
    let options = TrackOptions::default().groups_from_clock();
    let producer = srv
        .publisher
        .create_track_with(name.clone(), options)
        .unwrap();
    (srv, cert, producer)
}

/// Connects `r`'s client, subscribes to `name` with `options` and reads one group; returns the
/// stream, the server's session and the group's ID.
async fn subscribed(
    srv: &mut TestServer,
    r: &mut Reconnecting,
    producer: &TrackProducer,
    name: &FullTrackName,
    options: SubscribeOptions,
) -> (TrackConsumer, moq_client::Session, u64) {
    wait_status(r, |s| matches!(s, Status::Connected(_))).await;
    let session = srv.next_session().await;
    let mut stream = r
        .subscriber()
        .subscribe(name.clone(), options)
        .await
        .unwrap();
    let id = write_tagged(producer, "before");
    assert_eq!(
        next_group(&mut stream).await,
        (id, vec![Bytes::from("before")])
    );
    (stream, session, id)
}

/// Stops `srv` (closing its sessions, so the client notices at once) and starts it again on the
/// same port with the same certificate and `publisher`, which has no track yet.
async fn restart(
    srv: TestServer,
    session: moq_client::Session,
    cert: Certificate,
    r: &mut Reconnecting,
) -> TestServer {
    let port = srv.port;
    drop(session);
    srv.stop();
    wait_status(r, |s| matches!(s, Status::Disconnected(_))).await;
    TestServer::start_at(port, cert, Publisher::default()).await
}

/// (a) The server restarts and comes back without the track: the renewed SUBSCRIBE is refused
/// with DOES_NOT_EXIST and retried with backoff, without an error reaching the consumer; once
/// the track is back, the groups continue, none twice. The publisher's PUBLISH_DONE
/// (TRACK_ENDED) then ends the consumer.
#[tokio::test]
async fn renewal_refused_until_the_track_is_back() {
    let (mut refusals, _guard) = watch_refusals();
    for (transport, version) in [
        (Transport::Quic, Version::Draft19),
        (Transport::WebTransport, Version::Draft14),
        (Transport::Quic, *Version::ALL.first().unwrap()),
    ] {
        case(format!("{transport:?} {version:?}"), async {
            let name = track(&["radio"], "news");
            let (mut srv, cert, producer) = first_server(&name).await;
            let client = srv.client(version);
            let mut r = client.reconnecting(&srv.url(transport), BACKOFF);
            let retry = RenewRetry {
                backoff: Backoff {
                    min: Duration::from_millis(20),
                    max: Duration::from_millis(100),
                },
                limit: Duration::from_secs(20),
            };
            let options = SubscribeOptions::default().retry(retry);
            let (mut stream, session, before) =
                subscribed(&mut srv, &mut r, &producer, &name, options).await;
            drop(producer);
            let mut srv = restart(srv, session, cert, &mut r).await;
            wait_status(&mut r, |s| matches!(s, Status::Connected(_))).await;
            let _session = srv.next_session().await;

            // The renewal is refused: the track is not there yet.
            let refused = refusals.recv().await.unwrap();
            assert!(refused.contains("DOES_NOT_EXIST"), "{refused}");
            // ... and the consumer has seen nothing of it.
            assert!(
                futures::FutureExt::now_or_never(stream.next_group()).is_none(),
                "{transport:?} {version}"
            );

            // The publisher comes back: its clock-numbered groups are above the old ones.
            let options = TrackOptions::default().groups_from_clock();
            let producer = srv
                .publisher
                .create_track_with(name.clone(), options)
                .unwrap();
            let first = write_tagged(&producer, "after");
            assert!(first > before);
            assert_eq!(
                next_group(&mut stream).await,
                (first, vec![Bytes::from("after")]),
                "{transport:?} {version}"
            );
            let second = write_tagged(&producer, "later");
            assert_eq!(
                next_group(&mut stream).await,
                (second, vec![Bytes::from("later")])
            );

            // The track ends (PUBLISH_DONE TRACK_ENDED): so does the renewed subscription.
            producer.finish(Duration::from_secs(2)).await.unwrap();
            assert!(
                stream.next_group().await.is_none(),
                "{transport:?} {version}"
            );
            // ... and says why.
            assert_eq!(
                stream.publish_done().map(|d| d.status),
                Some(moq_client::PublishDoneCode::TRACK_ENDED)
            );
            while refusals.try_recv().is_ok() {}
        })
        .await;
    }
}

/// (b) The server comes back without the track and never gets it: the renewal is retried
/// until its bound, then the consumer gets the refusal (DOES_NOT_EXIST) and ends.
#[tokio::test]
async fn renewal_gives_up_after_its_bound() {
    let (mut refusals, _guard) = watch_refusals();
    timeout(async {
        let name = track(&["radio"], "gone");
        let (mut srv, cert, producer) = first_server(&name).await;
        let client = srv.client(Version::Draft19);
        let mut r = client.reconnecting(&srv.url(Transport::Quic), BACKOFF);
        let retry = RenewRetry {
            backoff: Backoff {
                min: Duration::from_millis(20),
                max: Duration::from_millis(80),
            },
            limit: Duration::from_millis(400),
        };
        let options = SubscribeOptions::default().retry(retry);
        let (mut stream, session, _) =
            subscribed(&mut srv, &mut r, &producer, &name, options).await;
        drop(producer);
        let mut srv = restart(srv, session, cert, &mut r).await;
        wait_status(&mut r, |s| matches!(s, Status::Connected(_))).await;
        let _session = srv.next_session().await;

        let refused_at = std::time::Instant::now();
        let err = stream
            .next_group()
            .await
            .expect("the consumer ended without the refusal")
            .expect_err("no group can come");
        assert_eq!(
            err.rejection(),
            Some(RequestErrorCode::DOES_NOT_EXIST),
            "{err:?}"
        );
        assert!(stream.next_group().await.is_none());
        // Retried (20, 40, 80, 80 ... ms apart) until the next wait would pass 400 ms.
        let mut retries = 0;
        while refusals.try_recv().is_ok() {
            retries += 1;
        }
        assert!(retries >= 3, "retried {retries} times");
        assert!(refused_at.elapsed() >= Duration::from_millis(250));
    })
    .await;
}

/// (c) A subscriber that never reads (its streams are held, not read: no flow control credit
/// comes back) of a track of large objects is ended with PUBLISH_DONE TOO_FAR_BEHIND and its
/// in-flight streams reset with TOO_FAR_BEHIND, once the bytes written to the track but not
/// to its streams pass `max_backlog_bytes`; what the server held for it never went far past
/// the bound, and is given back. Another subscriber keeps receiving every group.
#[tokio::test]
async fn slow_subscriber_too_far_behind() {
    const OBJECT: usize = 256 << 10;
    const LIMIT: u64 = 4 << 20;
    // Past the loopback windows the slow connection absorbs (32 MiB) and the bound.
    const GROUPS: u64 = 64;
    tokio::time::timeout(Duration::from_secs(30), async {
        let stats = Arc::new(ServeStats::default());
        let serve = ServeOptions {
            max_backlog_bytes: LIMIT,
            stats: Some(stats.clone()),
            ..Default::default()
        };
        let mut srv = TestServer::start_with(Publisher::new(CacheLimits::default(), serve));
        let name = track(&["big"], "video");
        let producer = srv.publisher.create_track(name.clone()).unwrap();
        let (slow, _slow_server) = srv.connect(Transport::Quic, Version::Draft19).await;
        let (fast, _fast_server) = srv.connect(Transport::Quic, Version::Draft19).await;

        // The slow subscriber keeps every subgroup stream it is given, unread (the test holds
        // them), and watches for the end of its subscription.
        let mut sub = slow
            .transport()
            .subscribe(name.clone(), Parameters::default())
            .await
            .unwrap();
        let (held_tx, mut held_rx) = mpsc::unbounded_channel();
        let slow_task = tokio::spawn(async move {
            while let Some(ev) = sub.next().await {
                if let Ok(TrackEvent::Subgroup(s)) = ev {
                    let _ = held_tx.send(s);
                }
            }
            sub.publish_done()
        });
        let mut fast = fast
            .subscriber()
            .subscribe(name.clone(), SubscribeOptions::default())
            .await
            .unwrap();

        let payload = Bytes::from(vec![7u8; OBJECT]);
        let mut after = 0;
        for _ in 0..GROUPS {
            let mut g = producer.append_group().unwrap();
            let id = g.id();
            for _ in 0..4 {
                g.write(payload.clone()).unwrap();
            }
            g.finish().unwrap();
            let (got, objects) = next_group(&mut fast).await;
            assert_eq!((got, objects.len()), (id, 4));
            assert!(objects.iter().all(|o| o.len() == OBJECT));
            if stats.too_far_behind.load(Ordering::Relaxed) > 0 {
                after += 1;
            }
        }
        assert_eq!(stats.too_far_behind.load(Ordering::Relaxed), 1);
        assert!(
            after > 8,
            "the fast subscriber kept receiving ({after} groups after)"
        );
        // The bound held: passed by one object at most (the one that crossed it).
        let peak = stats.backlog_peak.load(Ordering::Relaxed);
        assert!(peak > LIMIT && peak <= LIMIT + OBJECT as u64, "peak {peak}");
        // Everything held for the slow subscriber was given back; the fast one holds nothing.
        eventually("the backlog is given back", || {
            stats.backlog.load(Ordering::Relaxed) == 0
        })
        .await;

        // The slow subscriber reads at last: the streams in flight when it was ended were
        // reset with TOO_FAR_BEHIND (draft-21 §12.5) ...
        let mut held = Vec::new();
        while let Ok(s) = held_rx.try_recv() {
            held.push(s);
        }
        let mut reset = None;
        for s in held.iter_mut().rev() {
            loop {
                match s.next_object().await {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        reset = Some(e);
                        break;
                    }
                }
            }
            if reset.is_some() {
                break;
            }
        }
        assert!(
            matches!(
                reset,
                Some(moq_transport::Error::Cancelled(
                    StreamResetCode::TOO_FAR_BEHIND
                ))
            ),
            "{reset:?}"
        );
        // ... and once it lets the others go (their flow control credit with them), the
        // PUBLISH_DONE that was waiting behind them arrives: TOO_FAR_BEHIND.
        drop(held);
        drop(held_rx);
        let done = slow_task.await.unwrap();
        let done = done.expect("the slow subscription ended without PUBLISH_DONE");
        assert_eq!(done.status, PublishDoneCode::TOO_FAR_BEHIND);
    })
    .await
    .expect("test timed out");
}
