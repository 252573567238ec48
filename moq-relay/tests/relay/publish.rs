//! RENDEZVOUS_TIMEOUT, PUBLISH and SUBSCRIBE_TRACKS through the relay: held SUBSCRIBEs, filters,
//! parameters and updates, PUBLISH_SKIPPED, FORWARD 0 (draft-19 §6.1, §9.5, §10.2.6, §10.19,
//! §10.20).

use std::time::Duration;

use moq_client::{SubscribeOptions, TrackNamespace, Version};
use moq_core::codes::RequestErrorCode;
use moq_core::data::SubgroupId;
use moq_core::message::Parameters;
use moq_core::{Properties, RangeFilter, RangeFilterKind, RangeFilterParam};
use moq_relay::{Relay, RelayConfig};
use moq_transport::track::{Incoming, PublishOptions, TrackEvent};

use crate::common::{case, read_objects};
use crate::support::{
    APP_INT, Policy, announce, connect, next_payload, next_stream, ns, rejected, relay, round_trip,
    timeout, token, track, transport_session, transport_session_with, until, write_first_object,
};

#[tokio::test]
async fn rendezvous_holds_a_subscribe_until_a_publisher_appears() {
    timeout(async {
        let relay = relay();
        let n = ns(&["later"]);
        let name = track(&n, "t");
        let s = connect(&relay, false).await;
        let subscribe = s.subscriber().subscribe(
            name.clone(),
            SubscribeOptions::default().rendezvous(Duration::from_secs(10)),
        );
        let publish = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let p = connect(&relay, true).await;
            let producer = p.publisher().create_track(name.clone()).unwrap();
            let h = announce(&p, &n).await;
            (p, producer, h)
        };
        let (sub, (_p, producer, _h)) = tokio::join!(subscribe, publish);
        let mut sub = sub.unwrap();
        let mut w = producer.append_group().unwrap();
        w.write("hi").unwrap();
        w.finish().unwrap();
        assert_eq!(read_objects(&mut sub, 1).await, vec![(0, "hi".to_string())]);
        // A short rendezvous with nobody: TIMEOUT.
        let err = s
            .subscriber()
            .subscribe(
                track(&ns(&["never"]), "t"),
                SubscribeOptions::default().rendezvous(Duration::from_millis(100)),
            )
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::TIMEOUT);
    })
    .await;
}

/// A publisher that announced the namespace but has not created the track yet: the relay's
/// upstream SUBSCRIBE carries the rendezvous time, so the publisher holds it too.
#[tokio::test]
async fn rendezvous_passes_upstream_to_an_announced_publisher() {
    timeout(async {
        let relay = relay();
        let n = ns(&["announced-early"]);
        let name = track(&n, "t");
        let p = connect(&relay, true).await;
        let _h = announce(&p, &n).await;
        let before = p.transport().open_requests();
        let s = connect(&relay, false).await;
        let pending = {
            let sub = s.subscriber().clone();
            let name = name.clone();
            tokio::spawn(async move {
                sub.subscribe(
                    name,
                    SubscribeOptions::default().rendezvous(Duration::from_secs(10)),
                )
                .await
            })
        };
        // No signal for "the upstream SUBSCRIBE is held": poll the publisher's request count.
        while p.transport().open_requests() <= before {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!pending.is_finished(), "answered before the track existed");
        let producer = p.publisher().create_track(name.clone()).unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        let mut w = producer.append_group().unwrap();
        w.write("late").unwrap();
        w.finish().unwrap();
        assert_eq!(
            read_objects(&mut sub, 1).await,
            vec![(0, "late".to_string())]
        );
    })
    .await;
}

#[tokio::test]
async fn publish_reaches_subscribe_tracks() {
    timeout(async {
        let relay = relay();
        let n = ns(&["pushed"]);
        let name = track(&n, "t");
        let viewer = connect(&relay, false).await;
        let mut tracks = viewer
            .subscriber()
            .subscribe_tracks(n.clone())
            .await
            .unwrap();
        // A publisher PUBLISHes a track to the relay.
        let p = connect(&relay, true).await;
        let published = p
            .transport()
            .publish(name.clone(), Default::default())
            .await
            .unwrap();
        published.accepted().await.unwrap();
        let writer = published.writer().clone();
        // The relay PUBLISHes it to the SUBSCRIBE_TRACKS subscriber.
        let incoming = match tracks.next().await.unwrap().unwrap() {
            moq_client::TrackOffer::Published(t) => t,
            other => panic!("{other:?}"),
        };
        assert_eq!(incoming.name(), &name);
        let mut sub = incoming.accept(Default::default()).await.unwrap();
        let mut s = writer
            .open_subgroup(0, moq_core::data::SubgroupId::Zero, None, true)
            .await
            .unwrap();
        s.write_object(0, bytes::Bytes::from_static(b"pushed"))
            .await
            .unwrap();
        s.finish();
        assert_eq!(
            read_objects(&mut sub, 1).await,
            vec![(0, "pushed".to_string())]
        );
    })
    .await;
}

/// A raw moq-transport session to the relay over raw QUIC, offering only `version`.
async fn transport_session_at(relay: &Relay, version: Version) -> moq_transport::Session {
    transport_session_with(relay, false, vec![version]).await
}

/// A TRACK_PROPERTY_FILTER (0x29) on APP_INT = 1 (SetID 0, one range [1, 1]).
fn app_int_is_one() -> Parameters {
    Parameters {
        range_filters: vec![RangeFilterParam {
            kind: RangeFilterKind::TrackProperty,
            filter: Some(RangeFilter {
                set_id: 0,
                property_type: Some(APP_INT),
                ranges: vec![moq_core::FilterRange {
                    start: 1,
                    end: Some(1),
                }],
            }),
        }],
        ..Default::default()
    }
}

/// draft-19 §6.1, §6.3, §9.5, §9.6: SUBSCRIBE_TRACKS with a zero-field prefix covers every
/// namespace; the relay PUBLISHes matching tracks with their properties, but never the
/// subscriber's own tracks, and not those whose Track Properties fail its TRACK_PROPERTY_FILTER.
#[tokio::test]
async fn subscribe_tracks_skips_own_and_filtered_tracks() {
    timeout(async {
        let relay = relay();
        let viewer = transport_session(&relay, false).await;
        let _tracks = viewer
            .subscribe_tracks(TrackNamespace::empty(), app_int_is_one())
            .await
            .unwrap();
        let props = |v: u64| Properties::new().with_int(APP_INT, v).unwrap();
        // The viewer's own track passes the filter but is its own.
        let own = viewer
            .publish(
                track(&ns(&["mine"]), "own"),
                PublishOptions {
                    track_properties: props(1),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        own.accepted().await.unwrap();
        let publisher = transport_session(&relay, true).await;
        let mut kept = Vec::new();
        for (name, value) in [("filtered", 2), ("passes", 1)] {
            let p = publisher
                .publish(
                    track(&ns(&["other"]), name),
                    PublishOptions {
                        track_properties: props(value),
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            p.accepted().await.unwrap();
            kept.push(p);
        }
        // The first (and only) PUBLISH the viewer gets is the one that passes.
        match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => {
                assert_eq!(p.track(), &track(&ns(&["other"]), "passes"));
                assert_eq!(p.info().track_properties, props(1));
            }
            other => panic!("{other:?}"),
        }
    })
    .await;
}

/// draft-19 §9.5, §10.2.6: a SUBSCRIBE held for a publisher (RENDEZVOUS_TIMEOUT) proceeds when
/// the track is PUBLISHed, and that PUBLISH is not also forwarded to the same subscriber through
/// its SUBSCRIBE_TRACKS.
#[tokio::test]
async fn held_subscribe_takes_the_publish() {
    timeout(async {
        let relay = relay();
        let n = ns(&["held"]);
        let viewer = transport_session(&relay, false).await;
        let _tracks = viewer
            .subscribe_tracks(n.clone(), Parameters::default())
            .await
            .unwrap();
        let pending = {
            let s = viewer.clone();
            let params = Parameters {
                rendezvous_timeout: Some(10_000),
                ..Default::default()
            };
            let name = track(&n, "t");
            tokio::spawn(async move { s.subscribe(name, params).await })
        };
        // Held by the relay.
        until(|| relay.metrics().value("moq_relay_subscriptions_active") > 0).await;
        let publisher = transport_session(&relay, true).await;
        let t = publisher
            .publish(track(&n, "t"), PublishOptions::default())
            .await
            .unwrap();
        t.accepted().await.unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        let u = publisher
            .publish(track(&n, "u"), PublishOptions::default())
            .await
            .unwrap();
        u.accepted().await.unwrap();
        // The only PUBLISH the viewer gets is for u.
        match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => assert_eq!(p.track(), &track(&n, "u")),
            other => panic!("{other:?}"),
        }
        // And t's objects arrive on the SUBSCRIBE.
        write_first_object(t.writer(), b"t0").await;
        let TrackEvent::Subgroup(mut g) = sub.next().await.unwrap().unwrap() else {
            panic!("datagram")
        };
        assert_eq!(&g.next_object().await.unwrap().unwrap().payload[..], b"t0");
    })
    .await;
}

/// A SUBSCRIBE held for its publisher starts where the track stood when the publisher answered:
/// an object the publisher sends right after PUBLISH_OK reaches it, even when the relay ingests
/// it before it answers the SUBSCRIBE (it once started after that object).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_subscribe_gets_the_first_object() {
    timeout(async {
        let relay = relay();
        let n = ns(&["held-first"]);
        for round in 0..5 {
            let name = track(&n, &format!("t{round}"));
            let viewer = transport_session(&relay, false).await;
            let before = relay.metrics().value("moq_relay_subscriptions_active");
            let pending = {
                let s = viewer.clone();
                let params = Parameters {
                    rendezvous_timeout: Some(10_000),
                    ..Default::default()
                };
                let name = name.clone();
                tokio::spawn(async move { s.subscribe(name, params).await })
            };
            // Held by the relay.
            until(|| relay.metrics().value("moq_relay_subscriptions_active") > before).await;
            let publisher = transport_session(&relay, true).await;
            let t = publisher
                .publish(name, PublishOptions::default())
                .await
                .unwrap();
            t.accepted().await.unwrap();
            write_first_object(t.writer(), b"first").await;
            let mut sub = pending.await.unwrap().unwrap();
            let TrackEvent::Subgroup(mut g) = sub.next().await.unwrap().unwrap() else {
                panic!("datagram")
            };
            let o = g.next_object().await.unwrap().unwrap();
            assert_eq!(
                (o.location.object, &o.payload[..]),
                (0, &b"first"[..]),
                "round {round}"
            );
        }
    })
    .await;
}

/// draft-19 §10.19.1: SUBSCRIBE_TRACKS's parameters are the default parameters of the
/// subscriptions its PUBLISHes create: GROUP_ORDER is carried in the PUBLISH, and the others
/// (here an OBJECTID range filter keeping objects 0 and 1) are applied by the relay.
#[tokio::test]
async fn subscribe_tracks_parameters_shape_the_publish() {
    timeout(async {
        let relay = relay();
        let n = ns(&["shaped"]);
        let viewer = transport_session(&relay, false).await;
        let defaults = Parameters {
            group_order: Some(moq_core::GroupOrder::Descending),
            range_filters: vec![RangeFilterParam {
                kind: RangeFilterKind::ObjectId,
                filter: Some(RangeFilter {
                    set_id: 0,
                    property_type: None,
                    ranges: vec![moq_core::FilterRange {
                        start: 0,
                        end: Some(1),
                    }],
                }),
            }],
            ..Default::default()
        };
        let _tracks = viewer.subscribe_tracks(n.clone(), defaults).await.unwrap();
        let publisher = transport_session(&relay, true).await;
        let published = publisher
            .publish(track(&n, "t"), PublishOptions::default())
            .await
            .unwrap();
        published.accepted().await.unwrap();
        let incoming = match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            incoming.params().group_order,
            Some(moq_core::GroupOrder::Descending)
        );
        let mut sub = incoming.accept(Parameters::default()).await.unwrap();
        let mut s = published
            .writer()
            .open_subgroup(0, SubgroupId::Zero, None, true)
            .await
            .unwrap();
        for i in 0..4 {
            s.write_object(i, bytes::Bytes::from(format!("o{i}")))
                .await
                .unwrap();
        }
        s.finish();
        let mut down = next_stream(&mut sub).await;
        assert_eq!(next_payload(&mut down).await.1, b"o0");
        assert_eq!(next_payload(&mut down).await.1, b"o1");
        // Objects 2 and 3 do not pass the filter: the stream ends after object 1.
        assert!(down.next_object().await.unwrap().is_none());
    })
    .await;
}

/// draft-19 §10.9, §10.9.2, §10.19: a REQUEST_UPDATE of SUBSCRIBE_TRACKS takes effect for the
/// PUBLISHes still to come (here a new TRACK_PROPERTY_FILTER), and a new prefix is
/// authorized like the request was: (private) without the token is refused (UNAUTHORIZED),
/// which ends the request.
#[tokio::test]
async fn subscribe_tracks_updates_take_effect_or_are_refused() {
    timeout(async {
        let mut config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
        config.authorizer = std::sync::Arc::new(Policy);
        let relay = Relay::bind(config).unwrap();
        relay.spawn();
        let viewer = transport_session(&relay, false).await;
        let mut tracks = viewer
            .subscribe_tracks(ns(&["other"]), app_int_is_one())
            .await
            .unwrap();
        // The filter moves to APP_INT = 2.
        let mut two = app_int_is_one();
        if let Some(f) = two.range_filters[0].filter.as_mut() {
            f.ranges[0] = moq_core::FilterRange {
                start: 2,
                end: Some(2),
            };
        }
        tracks.update(two).await.unwrap();
        let publisher = transport_session(&relay, true).await;
        let props = |v: u64| Properties::new().with_int(APP_INT, v).unwrap();
        let mut kept = Vec::new();
        // The policy lets PUBLISH through only for the track name "allowed".
        for (name, value) in [("one", 1), ("two", 2)] {
            let p = publisher
                .publish(
                    track(&ns(&["other", name]), "allowed"),
                    PublishOptions {
                        track_properties: props(value),
                        authorization_tokens: token("pub").authorization_tokens,
                        ..Default::default()
                    },
                )
                .await
                .unwrap();
            p.accepted().await.unwrap();
            kept.push(p);
        }
        match viewer.incoming().next().await.unwrap() {
            Incoming::Publish(p) => {
                assert_eq!(p.track(), &track(&ns(&["other", "two"]), "allowed"))
            }
            other => panic!("{other:?}"),
        }
        // A prefix the viewer may not see.
        let err = tracks
            .update(Parameters {
                track_namespace_prefix: Some(ns(&["private"])),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
    })
    .await;
}

/// draft-19 §6.1, §10.20: when the relay cannot create the PUBLISH for a SUBSCRIBE_TRACKS
/// subscriber (here: the subscriber sent GOAWAY, so the relay starts no new request to it), it
/// says so with PUBLISH_SKIPPED instead of leaving the subscriber guessing.
#[tokio::test]
async fn publish_skipped_when_the_publish_cannot_be_created() {
    timeout(async {
        let relay = relay();
        let n = ns(&["skipped"]);
        let viewer = transport_session(&relay, false).await;
        let mut tracks = viewer
            .subscribe_tracks(n.clone(), Parameters::default())
            .await
            .unwrap();
        viewer.goaway("", Duration::ZERO).await.unwrap();
        round_trip(&viewer).await;
        let publisher = transport_session(&relay, true).await;
        let p = publisher
            .publish(track(&n, "t"), PublishOptions::default())
            .await
            .unwrap();
        p.accepted().await.unwrap();
        let skipped = tracks.next_skipped().await.unwrap().unwrap();
        assert_eq!(skipped, track(&n, "t"));
    })
    .await;
}

/// draft-21 §9.8 (from draft-20): PUBLISH_OK carries no parameter, so a PUBLISH sent with
/// FORWARD 0 stays unforwarded until the subscriber's REQUEST_UPDATE: the relay, which takes
/// every PUBLISHed track, asks for FORWARD 1 (aiomoqt's publish-track-subscribe).
#[tokio::test]
async fn a_publish_with_forward_zero_is_asked_to_forward() {
    let relay = relay();
    let n = ns(&["forward", "zero"]);
    for version in [Version::Draft19, Version::Draft20, Version::Draft22] {
        case(format!("{version:?}"), async {
            let publisher = transport_session_at(&relay, version).await;
            let options = PublishOptions {
                subscription: Parameters {
                    forward: Some(false),
                    ..Default::default()
                },
                ..Default::default()
            };
            let p = publisher
                .publish(track(&n, &format!("v{}", version.draft())), options)
                .await
                .unwrap();
            p.accepted().await.unwrap();
            let w = p.writer();
            while !w.params().forward {
                w.params_changed().await.unwrap();
            }
        })
        .await;
    }
}
