//! SUBSCRIBE and its lifetime: SUBSCRIBE_OK / PUBLISH_DONE, rejection, unsubscribe, REQUEST_UPDATE,
//! EXPIRES and delivery timeouts, duplicates, session end and a dropped writer (draft-19 §8,
//! §10.7-§10.9, §10.11).

use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::{PublishDoneCode, RequestErrorCode, StreamResetCode};
use moq_core::data::SubgroupId;
use moq_core::message::{Parameters, RequestError};
use moq_core::{FullTrackName, Location, Properties, TrackNamespace, Version, property};
use moq_transport::track::{Incoming, SubscribeResponse, Subscription};
use moq_transport::{Error, Session, SessionConfig};

use crate::common::{TestServer, Transport, case, rejected_code, timeout, transports};
use crate::support::{collect, next_subscribe, pair_with_requests, subscribe_accepted, track};

/// Sessions at draft-19 over `transport` and a subscription to `name` with default
/// parameters, accepted as is. The sessions are returned to be kept alive.
async fn plain_subscription(
    transport: Transport,
    name: &str,
) -> (
    Subscription,
    moq_transport::track::SubscriptionWriter,
    (Session, Session, TestServer),
) {
    let (client, server, srv) = pair_with_requests(transport, Version::Draft19).await;
    let (sub, writer) = subscribe_accepted(
        &client,
        &server,
        track(name),
        Parameters::default(),
        SubscribeResponse::default(),
    )
    .await;
    (sub, writer, (client, server, srv))
}

#[tokio::test]
async fn subscribe_objects_and_publish_done() {
    for transport in transports() {
        for version in Version::ALL {
            case(format!("{transport:?} {version:?}"), async {
                let (client, server, _srv) = pair_with_requests(transport, *version).await;
                let t = track("video");
                let props = Properties::new()
                    .with_int(property::DEFAULT_PUBLISHER_PRIORITY, 7)
                    .unwrap();
                let response = SubscribeResponse {
                    largest: Some(Location::new(4, 2)),
                    track_properties: props.clone(),
                    ..Default::default()
                };
                let (mut sub, writer) = subscribe_accepted(
                    &client,
                    &server,
                    t.clone(),
                    Parameters::default(),
                    response,
                )
                .await;
                assert_eq!(writer.track(), &t);
                assert_eq!(sub.info().largest, Some(Location::new(4, 2)));
                // Drafts 14-15 have no Track Properties in SUBSCRIBE_OK (only its own fields).
                if version.has_track_extensions() {
                    assert_eq!(sub.info().track_properties, props);
                    assert_eq!(sub.info().publisher_priority(), 7);
                }
                assert_eq!(sub.info().track_alias, writer.track_alias());

                for g in 5..8u64 {
                    let mut s = writer
                        .open_subgroup(g, SubgroupId::Zero, None, true)
                        .await
                        .unwrap();
                    for o in 0..3u64 {
                        s.write_object(o, Bytes::from(format!("{g}.{o}")))
                            .await
                            .unwrap();
                    }
                    s.finish();
                }
                writer
                    .clone()
                    .finish(PublishDoneCode::TRACK_ENDED, "bye")
                    .await
                    .unwrap();
                let (objects, err) = collect(&mut sub).await;
                assert!(err.is_none(), "{err:?}");
                assert_eq!(objects.len(), 9, "{transport:?} {version}");
                let mut sorted = objects.clone();
                sorted.sort_by_key(|(l, _)| *l);
                assert_eq!(sorted[0], (Location::new(5, 0), Bytes::from("5.0")));
                let done = sub.publish_done().unwrap();
                assert_eq!(done.status, PublishDoneCode::TRACK_ENDED);
                assert_eq!(done.stream_count, 3, "exact Stream Count");
                assert_eq!(writer.largest(), Some(Location::new(7, 2)));
            })
            .await;
        }
    }
}

#[tokio::test]
async fn rejection_and_no_handler() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let reject = async {
            next_subscribe(&server)
                .await
                .reject(RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "nope"))
        };
        let (sub, ()) = tokio::join!(client.subscribe(track("x"), Parameters::default()), reject);
        assert_eq!(
            rejected_code(sub.unwrap_err()),
            RequestErrorCode::DOES_NOT_EXIST
        );
        // A session that does not take requests refuses them (the server-side default).
        let mut srv = TestServer::start(SessionConfig::default());
        let (client, _server) = srv
            .connect(
                Transport::Quic,
                vec![Version::Draft19],
                SessionConfig::default(),
            )
            .await;
        assert_eq!(
            rejected_code(
                client
                    .subscribe(track("x"), Parameters::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
        // Reserved namespaces do not exist (draft-19 §3.2.1).
        let dot = FullTrackName::new(TrackNamespace::from_strs(["."]).unwrap(), "t").unwrap();
        assert_eq!(
            rejected_code(
                client
                    .subscribe(dot, Parameters::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
    })
    .await;
}

#[tokio::test]
async fn unsubscribe_reaches_the_publisher() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (sub, writer, _sessions) = plain_subscription(transport, "a").await;
            drop(sub);
            let err = writer.cancelled().await;
            assert!(
                matches!(err, Error::Cancelled(StreamResetCode::CANCELLED)),
                "{err:?}"
            );
            assert!(
                writer
                    .open_subgroup(0, SubgroupId::Zero, None, false)
                    .await
                    .is_err()
            );
        })
        .await;
    }
}

#[tokio::test]
async fn request_update_changes_forward_and_answers_once() {
    // Draft-14's SUBSCRIBE_UPDATE has no answer to carry LARGEST_OBJECT.
    for version in Version::ALL.iter().filter(|v| v.update_is_answered()) {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, *version).await;
            let (sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("u"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            writer.observe(Location::new(3, 1));
            let largest = sub
                .update(Parameters {
                    forward: Some(false),
                    subscriber_priority: Some(9),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(
                largest,
                Some(Location::new(3, 1)),
                "REQUEST_UPDATE_OK carries LARGEST_OBJECT"
            );
            let p = writer.params();
            assert!(!p.forward);
            assert_eq!(p.subscriber_priority, 9);
            assert!(!writer.is_forwarding());
        })
        .await;
    }
}

#[tokio::test]
async fn session_end_ends_subscriptions_and_writers() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let (mut sub, writer) = subscribe_accepted(
            &client,
            &server,
            track("e"),
            Parameters::default(),
            SubscribeResponse::default(),
        )
        .await;
        client.close(moq_core::codes::SessionErrorCode::NO_ERROR, "bye");
        let (_, err) = collect(&mut sub).await;
        assert!(matches!(err, Some(Error::Closed { .. })), "{err:?}");
        assert!(sub.next().await.is_none());
        let e = writer.cancelled().await;
        assert!(e.is_session_error(), "{e:?}");
    })
    .await;
}

/// draft-19 §10.2.15 (EXPIRES): the publisher's EXPIRES in SUBSCRIBE_OK reaches the subscriber;
/// draft-19 §8, §10.2.4 (OBJECT_DELIVERY_TIMEOUT): the subscriber's timeout reaches the
/// publisher, which resets the subgroup stream with DELIVERY_TIMEOUT instead of sending an
/// object older than it.
#[tokio::test]
async fn expires_and_object_delivery_timeout() {
    use std::time::{Duration, Instant};
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let params = Parameters {
            object_delivery_timeout: Some(100),
            ..Default::default()
        };
        let response = SubscribeResponse {
            expires: Some(Duration::from_secs(30)),
            ..Default::default()
        };
        let (sub, writer) =
            subscribe_accepted(&client, &server, track("late"), params, response).await;
        assert_eq!(sub.info().expires, Some(Duration::from_secs(30)));
        assert_eq!(
            writer.params().object_delivery_timeout,
            Some(Duration::from_millis(100))
        );
        let mut s = writer
            .open_subgroup(0, SubgroupId::Zero, None, false)
            .await
            .unwrap();
        let props = Properties::new();
        let fresh = Some(Instant::now());
        s.write(
            0,
            &props,
            moq_core::data::ObjectStatus::Normal,
            Bytes::from_static(b"on time"),
            fresh,
        )
        .await
        .unwrap();
        let stale = Instant::now().checked_sub(Duration::from_secs(1));
        let err = s
            .write(
                1,
                &props,
                moq_core::data::ObjectStatus::Normal,
                Bytes::from_static(b"late"),
                stale,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::Cancelled(StreamResetCode::DELIVERY_TIMEOUT)),
            "{err:?}"
        );
    })
    .await;
}

/// draft-18 §5.1: a second SUBSCRIBE to a track this session already subscribes to fails with
/// DUPLICATE_SUBSCRIPTION; draft-19 dropped the rule, so both are served there.
#[tokio::test]
async fn duplicate_subscriptions_by_version() {
    for version in [Version::Draft18, Version::Draft19] {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, version).await;
            let (first, _w1) = subscribe_accepted(
                &client,
                &server,
                track("dup"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            if version.allows_duplicate_subscriptions() {
                let (_second, _w2) = subscribe_accepted(
                    &client,
                    &server,
                    track("dup"),
                    Parameters::default(),
                    SubscribeResponse::default(),
                )
                .await;
                return; // the next case
            }
            // Refused by the session itself: the application never sees it.
            assert_eq!(
                rejected_code(
                    client
                        .subscribe(track("dup"), Parameters::default())
                        .await
                        .unwrap_err()
                ),
                RequestErrorCode::DUPLICATE_SUBSCRIPTION
            );
            drop(first);
        })
        .await;
    }
}

/// A writer's `params_changed` resolves once per change of the parameters (REQUEST_UPDATE,
/// draft-19 §10.9): after returning one it waits for the next, and a change made before the
/// call, after the writer last read the parameters, is not missed. (It used to resolve at once
/// forever after the first update, and moq-client's serving loop spun on it.)
#[tokio::test]
async fn params_changed_resolves_once_per_update() {
    for transport in transports() {
        case(format!("{transport:?}"), async {
            let (sub, writer, _sessions) = plain_subscription(transport, "params").await;
            assert_eq!(writer.params().subscriber_priority, 128);
            for priority in [10, 20] {
                let ask = Parameters {
                    subscriber_priority: Some(priority),
                    ..Default::default()
                };
                let (asked, changed) = tokio::join!(sub.update(ask), writer.params_changed());
                asked.unwrap();
                assert_eq!(changed.unwrap().subscriber_priority, priority);
                // Nothing signals "no change", so this looks for a bounded time.
                let again =
                    tokio::time::timeout(Duration::from_millis(100), writer.params_changed()).await;
                assert!(again.is_err(), "{transport:?}: resolved with no update");
            }
            // Updated after the writer last read the parameters, before the call.
            let ask = Parameters {
                subscriber_priority: Some(30),
                ..Default::default()
            };
            sub.update(ask).await.unwrap();
            let clone = writer.clone();
            assert_eq!(
                writer.params_changed().await.unwrap().subscriber_priority,
                30
            );
            // A clone starts from what its source had seen.
            assert_eq!(
                clone.params_changed().await.unwrap().subscriber_priority,
                30
            );
        })
        .await;
    }
}

/// draft-19 §10.11: a publisher that drops every writer of a subscription without finishing it
/// still ends it: once its open subgroup streams close, PUBLISH_DONE (TRACK_ENDED, the exact
/// Stream Count) follows, for a SUBSCRIBE and for a PUBLISH, over every transport.
#[tokio::test]
async fn dropped_writer_ends_the_subscription() {
    for transport in transports() {
        case(format!("{transport:?} SUBSCRIBE"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let (mut sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("w"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            let mut s = writer
                .open_subgroup(0, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            let clone = writer.clone();
            drop(writer);
            drop(clone);
            // The open subgroup stream lives on, and is delivered before PUBLISH_DONE.
            s.write_object(0, Bytes::from_static(b"last"))
                .await
                .unwrap();
            s.finish();
            let (objects, err) = collect(&mut sub).await;
            assert!(err.is_none(), "{err:?}");
            assert_eq!(
                objects,
                vec![(Location::new(0, 0), Bytes::from_static(b"last"))]
            );
            let done = sub.publish_done().expect("PUBLISH_DONE");
            assert_eq!(done.status, PublishDoneCode::TRACK_ENDED);
            assert_eq!(done.stream_count, 1);
        })
        .await;
        case(format!("{transport:?} PUBLISH"), async {
            let (client, server, _srv) = pair_with_requests(transport, Version::Draft19).await;
            let published = client
                .publish(track("p"), Default::default())
                .await
                .unwrap();
            let incoming = match server.incoming().next().await.unwrap() {
                Incoming::Publish(p) => p,
                other => panic!("{other:?}"),
            };
            let mut sub = incoming.accept(Parameters::default()).await.unwrap();
            published.accepted().await.unwrap();
            drop(published);
            let (objects, err) = collect(&mut sub).await;
            assert!(err.is_none(), "{err:?}");
            assert!(objects.is_empty());
            let done = sub.publish_done().expect("PUBLISH_DONE");
            assert_eq!(done.status, PublishDoneCode::TRACK_ENDED);
            assert_eq!(done.stream_count, 0);
        })
        .await;
    }
}
