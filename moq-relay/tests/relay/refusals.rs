//! What the relay refuses: reserved namespaces, unauthorized requests (its Authorizer), and
//! malformed upstream tracks (draft-19 §2.4.2, §3.2.1, §9.1, §9.4, §9.5).

use moq_client::{Location, SubscribeOptions};
use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::data::{ObjectStatus, SubgroupId};
use moq_core::message::{FetchType, Parameters};
use moq_core::{AuthToken, Properties};
use moq_relay::{Relay, RelayConfig};
use moq_transport::Error;
use moq_transport::track::{PublishOptions, SubscribeResponse, TrackEvent};

use crate::support::{
    Policy, Routed, connect, init_tracing, next_payload, next_stream, next_subscribe, ns, rejected,
    relay, relay_knows, routed, timeout, token, track, transport_session,
};

#[tokio::test]
async fn reserved_namespaces_are_refused() {
    timeout(async {
        let relay = relay();
        let s = connect(&relay, false).await;
        for bad in [ns(&["."]), ns(&[".session", "x"])] {
            let err = s
                .transport()
                .publish_namespace(bad.clone())
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Invalid(_)), "{err:?}");
        }
        assert_eq!(
            rejected(
                s.subscriber()
                    .subscribe(track(&ns(&["."]), "x"), SubscribeOptions::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::DOES_NOT_EXIST
        );
    })
    .await;
}

/// draft-19 §9.4, §9.5: the relay checks every subscriber's and publisher's authorization per
/// request (through its Authorizer): PUBLISH_NAMESPACE and PUBLISH need the publisher's token,
/// a PUBLISH authorized for one track says nothing about another, and SUBSCRIBE, FETCH and
/// TRACK_STATUS under (private) need the subscriber's token; refused requests create no route.
#[tokio::test]
async fn relay_authorizes_publishers_and_subscribers() {
    timeout(async {
        init_tracing();
        let mut config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
        config.authorizer = std::sync::Arc::new(Policy);
        let relay = Relay::bind(config).unwrap();
        relay.spawn();
        let p = transport_session(&relay, false).await;
        let err = p.publish_namespace(ns(&["private"])).await.unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        let _ok = p
            .publish_namespace_with(ns(&["private"]), token("pub"))
            .await
            .unwrap();
        relay_knows(&relay, &ns(&["private"])).await;
        let publish = |name: &'static str, tokens: Vec<AuthToken>| {
            let p = p.clone();
            async move {
                p.publish(
                    track(&ns(&["pushed"]), name),
                    PublishOptions {
                        authorization_tokens: tokens,
                        ..Default::default()
                    },
                )
                .await
                .unwrap()
                .accepted()
                .await
            }
        };
        assert_eq!(
            rejected(publish("allowed", vec![]).await.unwrap_err()),
            RequestErrorCode::UNAUTHORIZED
        );
        assert_eq!(
            rejected(
                publish("other", vec![AuthToken::new("pub")])
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::UNAUTHORIZED
        );
        publish("allowed", vec![AuthToken::new("pub")])
            .await
            .unwrap();

        let s = transport_session(&relay, true).await;
        let name = track(&ns(&["private"]), "t");
        let err = s
            .subscribe(name.clone(), Parameters::default())
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        let request = FetchType::Standalone {
            track: name.clone(),
            start: Location::new(0, 0),
            end: Location::new(1, 0),
        };
        let err = s.fetch(request, Parameters::default()).await.unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        let err = s
            .track_status(name.clone(), Parameters::default())
            .await
            .unwrap_err();
        assert_eq!(rejected(err), RequestErrorCode::UNAUTHORIZED);
        // Refused before anything went upstream: nothing was fetched there, and the first
        // request the publisher sees is the authorized SUBSCRIBE below.
        assert_eq!(
            relay
                .metrics()
                .value("moq_relay_cache_requests_total{result=\"miss\"}"),
            0
        );
        // With the token the SUBSCRIBE is routed to the publisher.
        let pending = {
            let s = s.clone();
            tokio::spawn(async move { s.subscribe(name, token("key")).await })
        };
        let upstream = next_subscribe(&p).await;
        assert!(
            upstream.params().authorization_tokens.is_empty(),
            "parameters are hop-by-hop"
        );
        let _w = upstream.accept(SubscribeResponse::default()).await.unwrap();
        let _ = pending.await.unwrap().unwrap();
    })
    .await;
}

/// The ways a test publisher makes a track malformed after a good object 0 in subgroup (0, 3)
/// at priority 10 (draft-19 §2.4.2, §9.1).
#[derive(Clone, Copy, Debug)]
enum Breach {
    /// Condition 1: the same subgroup on a second stream at another priority.
    Priority,
    /// Condition 5: an object after END_OF_TRACK.
    AfterEndOfTrack,
    /// §9.1: the same object in another subgroup.
    OtherSubgroup,
    /// Condition 7, §9.1: the same object as a datagram.
    AsDatagram,
    /// Conditions 2 and 3: two streams of one subgroup end with FIN at different objects.
    TwoFins,
}

/// draft-19 §2.4.2, §9.1: a relay that finds an upstream track malformed, in each way of
/// [`Breach`], terminates its downstream subscriptions with PUBLISH_DONE MALFORMED_TRACK, does
/// not forward (or cache) the offending object, and refuses a FETCH of the track with
/// MALFORMED_TRACK.
#[tokio::test]
async fn a_malformed_track_ends_downstream() {
    timeout(async {
        let relay = relay();
        for breach in [
            Breach::Priority,
            Breach::AfterEndOfTrack,
            Breach::OtherSubgroup,
            Breach::AsDatagram,
            Breach::TwoFins,
        ] {
            let name = track(&ns(&["malformed", &format!("{breach:?}")]), "t");
            let Routed {
                subscriber,
                writer,
                mut sub,
                _publisher,
                _announced,
            } = routed(&relay, &name, SubscribeResponse::default()).await;
            let bad = bytes::Bytes::from_static(b"bad");
            let mut first = writer
                .open_subgroup(0, SubgroupId::Explicit(3), Some(10), false)
                .await
                .unwrap();
            first
                .write_object(0, bytes::Bytes::from_static(b"ok"))
                .await
                .unwrap();
            let mut down = next_stream(&mut sub).await;
            assert_eq!(next_payload(&mut down).await.1, b"ok");
            let other = |group, id, priority| {
                writer.open_subgroup(group, SubgroupId::Explicit(id), Some(priority), false)
            };
            match breach {
                Breach::Priority => {
                    let mut second = other(0, 3, 20).await.unwrap();
                    second.write_object(1, bad).await.unwrap();
                    second.finish();
                }
                Breach::AfterEndOfTrack => {
                    let props = Properties::default();
                    let end = ObjectStatus::EndOfTrack;
                    first
                        .write(1, &props, end, bytes::Bytes::new(), None)
                        .await
                        .unwrap();
                    let mut later = other(1, 0, 10).await.unwrap();
                    later.write_object(0, bad).await.unwrap();
                    later.finish();
                }
                Breach::OtherSubgroup => {
                    let mut second = other(0, 4, 10).await.unwrap();
                    second.write_object(0, bad).await.unwrap();
                    second.finish();
                }
                Breach::AsDatagram => {
                    writer
                        .send_datagram(&moq_transport::track::Object {
                            location: Location::new(0, 0),
                            subgroup: None,
                            priority: 10,
                            status: ObjectStatus::Normal,
                            properties: Properties::default(),
                            payload: bad,
                            end_of_group: false,
                        })
                        .unwrap();
                }
                Breach::TwoFins => {
                    first
                        .write_object(1, bytes::Bytes::from_static(b"ok"))
                        .await
                        .unwrap();
                    let mut second = other(0, 3, 10).await.unwrap();
                    second
                        .write_object(0, bytes::Bytes::from_static(b"ok"))
                        .await
                        .unwrap();
                    second.finish();
                }
            }
            first.finish();
            while let Some(ev) = sub.next().await {
                let payload = match ev {
                    Ok(TrackEvent::Subgroup(mut s)) => {
                        while let Ok(Some(o)) = s.next_object().await {
                            assert_ne!(&o.payload[..], b"bad", "{breach:?}: forwarded");
                        }
                        continue;
                    }
                    Ok(TrackEvent::Datagram(o)) => o.payload,
                    Err(_) => break,
                };
                assert_ne!(&payload[..], b"bad", "{breach:?}: forwarded");
            }
            let done = sub.publish_done().expect("PUBLISH_DONE");
            assert_eq!(done.status, PublishDoneCode::MALFORMED_TRACK, "{breach:?}");
            let fetch = FetchType::Standalone {
                track: name.clone(),
                start: Location::new(0, 0),
                end: Location::new(1, 0),
            };
            match subscriber.fetch(fetch, Parameters::default()).await {
                Err(Error::Rejected(e)) => {
                    assert_eq!(e.code, RequestErrorCode::MALFORMED_TRACK, "{breach:?}")
                }
                other => panic!("{breach:?}: FETCH of a malformed track: {other:?}"),
            }
        }
    })
    .await;
}
