//! Drop and cancel: what a dropped handle or a cancelled future leaves behind. Every request
//! gets an answer (a fill never opened), a stream ended early never looks complete, and a
//! cancelled update or GOAWAY still takes effect whole (issue 35).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{TestServer, Transport, case, memory_pair_with, timeout, transports};
use futures::FutureExt;
use moq_core::data::RangeEnd;
use moq_core::message::Parameters;
use moq_core::{FullTrackName, Location, LocationFilter, TrackNamespace, Version};
use moq_transport::track::{
    FetchItem, FetchResponse, Incoming, SubscribeResponse, Subscription, SubscriptionWriter,
};
use moq_transport::transport::memory::MemoryLimits;
use moq_transport::{Session, SessionConfig};

fn track(name: &str) -> FullTrackName {
    FullTrackName::new(
        TrackNamespace::from_strs(["live", "room"]).unwrap(),
        name.as_bytes().to_vec(),
    )
    .unwrap()
}

/// A subscription to `name` asking for the fill of the Largest Object's group (4.0 to 4.2),
/// accepted by `server`.
async fn subscribed_with_fill(
    client: &Session,
    server: &Session,
    name: &str,
) -> (Subscription, SubscriptionWriter) {
    let params = Parameters {
        location_filter: Some(LocationFilter::LargestObject),
        fill: Some(Box::new(Parameters {
            location_filter: Some(LocationFilter::RelativeGroups(1)),
            ..Default::default()
        })),
        ..Default::default()
    };
    let accept = async {
        let req = match server.incoming().next().await.expect("no request") {
            Incoming::Subscribe(r) => r,
            other => panic!("expected SUBSCRIBE, got {other:?}"),
        };
        let response = SubscribeResponse {
            largest: Some(Location::new(4, 2)),
            ..Default::default()
        };
        req.accept(response).await.unwrap()
    };
    let (sub, writer) = tokio::join!(client.subscribe(track(name), params), accept);
    (sub.unwrap(), writer)
}

/// The answer to a fill never delivered: the fill fetch stream with one End of Unknown Range
/// over the whole range (4.0 to 4.2), then its end.
async fn assert_unknown_range(mut fill: FetchResponse) {
    let item = fill.next().await.expect("an answer").unwrap();
    assert!(
        matches!(
            item,
            FetchItem::EndOfRange {
                kind: RangeEnd::Unknown,
                location
            } if location == Location::new(4, 2)
        ),
        "{item:?}"
    );
    assert!(fill.next().await.is_none());
}

/// draft-21 §3.4.1: every fill gets an answer. A `Fill` dropped without being opened, and one
/// never taken from a subscription that is finished, open the fill fetch stream with an
/// End of Unknown Range over the range and a FIN, instead of leaving the subscriber waiting
/// until the session ends; the stream counts in PUBLISH_DONE's Stream Count.
#[tokio::test]
async fn a_fill_dropped_unopened_is_answered() {
    for transport in transports() {
        for version in [Version::Draft20, Version::Draft22] {
            case(format!("{transport:?} {version:?}"), async {
                let mut srv = TestServer::start(SessionConfig::default().with_requests());
                let config = SessionConfig::default().with_requests();
                let (client, server) = srv.connect(transport, vec![version], config).await;
                // Taken, then dropped.
                let (mut sub, writer) = subscribed_with_fill(&client, &server, "taken").await;
                drop(writer.take_fill().expect("a fill"));
                assert_unknown_range(sub.take_fill().expect("a fill fetch stream")).await;
                writer
                    .finish(moq_core::codes::PublishDoneCode::TRACK_ENDED, "")
                    .await
                    .unwrap();
                while sub.next().await.is_some() {}
                assert_eq!(sub.publish_done().unwrap().stream_count, 1);
                // Never taken: answered when the subscription is finished.
                let (mut sub, writer) = subscribed_with_fill(&client, &server, "untaken").await;
                writer
                    .finish(moq_core::codes::PublishDoneCode::TRACK_ENDED, "")
                    .await
                    .unwrap();
                assert_unknown_range(sub.take_fill().expect("a fill fetch stream")).await;
                while sub.next().await.is_some() {}
                assert_eq!(sub.publish_done().unwrap().stream_count, 1);
            })
            .await;
        }
    }
}

/// draft-21 §3.4.1: a FIN says every object of the fill range was delivered. `open_fill`
/// dropped while its FETCH_HEADER is being written (a 1-byte stream buffer holds the write)
/// resets that stream rather than finishing it, and the fill is still owed: dropping the
/// `Fill` then answers it. The session survives the reset stream.
#[tokio::test]
async fn open_fill_dropped_mid_header_resets_and_the_fill_is_still_answered() {
    timeout(async {
        let limits = MemoryLimits {
            stream_buffer: 1,
            ..MemoryLimits::default()
        };
        let config = SessionConfig::default().with_requests();
        let (client, server) =
            memory_pair_with(Version::Draft22, limits, config.clone(), config).await;
        let (mut sub, writer) = subscribed_with_fill(&client, &server, "mid").await;
        let fill = writer.take_fill().expect("a fill");
        assert!(
            writer.open_fill(&fill).now_or_never().is_none(),
            "the header write waits for the reader"
        );
        drop(fill);
        assert_unknown_range(sub.take_fill().expect("a fill fetch stream")).await;
        assert!(
            client.closed().now_or_never().is_none(),
            "the session is open"
        );
    })
    .await;
}

/// Nothing spawns from a drop (issue 35): a `Fill` dropped unopened is answered by its
/// subscription's request task, not by a task of its own (the session's task count does not
/// move), and the answer is the same; so is one held after the subscription was finished.
#[tokio::test]
async fn a_dropped_fill_spawns_no_task_and_is_answered_by_its_request() {
    timeout(async {
        let config = SessionConfig::default().with_requests();
        let (client, server) = memory_pair_with(
            Version::Draft22,
            MemoryLimits::default(),
            config.clone(),
            config,
        )
        .await;
        let (mut sub, writer) = subscribed_with_fill(&client, &server, "nospawn").await;
        let fill = writer.take_fill().expect("a fill");
        let tasks = server.task_count();
        drop(fill);
        assert_eq!(server.task_count(), tasks, "the drop spawned a task");
        assert_unknown_range(sub.take_fill().expect("a fill fetch stream")).await;
        // Held past the subscription's PUBLISH_DONE: the request task waits for it.
        let (mut sub, writer) = subscribed_with_fill(&client, &server, "held").await;
        let fill = writer.take_fill().expect("a fill");
        writer
            .finish(moq_core::codes::PublishDoneCode::TRACK_ENDED, "")
            .await
            .unwrap();
        drop(fill);
        assert_unknown_range(sub.take_fill().expect("a fill fetch stream")).await;
        while sub.next().await.is_some() {}
    })
    .await;
}

/// `TrackSubscription::update` dropped once its REQUEST_UPDATE is queued: the update goes out
/// and moves the prefix at the publisher (draft-19 §10.9.2), and `prefix()` says so too.
#[tokio::test]
async fn track_subscription_update_dropped_after_queueing_keeps_prefix_in_step() {
    timeout(async {
        let mut srv = TestServer::start(SessionConfig::default().with_requests());
        let config = SessionConfig::default().with_requests();
        let (client, server) = srv
            .connect(Transport::Memory, vec![Version::Draft19], config)
            .await;
        let old = TrackNamespace::from_strs(["live", "a"]).unwrap();
        let new = TrackNamespace::from_strs(["live", "b"]).unwrap();
        let accept = async {
            match server.incoming().next().await.expect("no request") {
                Incoming::SubscribeTracks(r) => r.accept().await.unwrap(),
                other => panic!("expected SUBSCRIBE_TRACKS, got {other:?}"),
            }
        };
        let (sub, responder) = tokio::join!(
            client.subscribe_tracks(old.clone(), Parameters::default()),
            accept
        );
        let mut sub = sub.unwrap();
        let params = Parameters {
            track_namespace_prefix: Some(new.clone()),
            ..Default::default()
        };
        assert!(
            sub.update(params).now_or_never().is_none(),
            "the answer is not in yet"
        );
        assert_eq!(sub.prefix(), &new);
        assert_eq!(responder.prefix_changed(&old).await, new);
    })
    .await;
}

/// `Session::goaway` dropped while GOAWAY is being written (a 1-byte stream buffer holds the
/// write): the message still reaches the peer whole (draft-19 §10.4), and it still counts as
/// sent (a second call fails).
#[tokio::test]
async fn goaway_dropped_mid_write_is_still_sent_whole() {
    timeout(async {
        let limits = MemoryLimits {
            stream_buffer: 1,
            ..MemoryLimits::default()
        };
        let config = SessionConfig::default();
        let (client, server) =
            memory_pair_with(Version::Draft19, limits, config.clone(), config).await;
        let uri = "moqt://elsewhere.example:4443/moq";
        let zero = std::time::Duration::ZERO;
        assert!(
            server.goaway(uri, zero).now_or_never().is_none(),
            "the write waits for the reader"
        );
        let info = client.wait_goaway().await.expect("GOAWAY");
        assert_eq!(info.new_session_uri, uri);
        assert!(server.goaway(uri, zero).await.is_err(), "only one GOAWAY");
    })
    .await;
}
