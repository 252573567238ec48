//! PUBLISH, TRACK_STATUS and SUBSCRIBE_TRACKS: accepted and rejected PUBLISH, publish state,
//! PUBLISH_SKIPPED (draft-19 §10.10, §10.14, §10.19, §10.20).

use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::data::SubgroupId;
use moq_core::message::{Parameters, RequestError};
use moq_core::{FullTrackName, Location, Properties, TrackNamespace, Version, property};
use moq_transport::track::{Incoming, SubscribeResponse, TrackStatusInfo};

use crate::common::{Transport, case, rejected_code, timeout};
use crate::support::{collect, pair_with_requests, subscribe_accepted, track};

#[tokio::test]
async fn publish_accepted_and_rejected() {
    for version in Version::ALL {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, *version).await;
            // The client publishes to the server.
            let published = client
                .publish(track("p"), Default::default())
                .await
                .unwrap();
            let incoming = match server.incoming().next().await.unwrap() {
                Incoming::Publish(p) => p,
                other => panic!("{other:?}"),
            };
            assert_eq!(incoming.track(), &track("p"));
            // Objects may flow before PUBLISH_OK.
            let writer = published.writer().clone();
            let mut s = writer
                .open_subgroup(0, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            s.write_object(0, Bytes::from_static(b"early"))
                .await
                .unwrap();
            s.finish();
            let mut sub = incoming.accept(Parameters::default()).await.unwrap();
            published.accepted().await.unwrap();
            writer
                .clone()
                .finish(PublishDoneCode::TRACK_ENDED, "")
                .await
                .unwrap();
            let (objects, err) = collect(&mut sub).await;
            assert!(err.is_none());
            assert_eq!(
                objects,
                vec![(Location::new(0, 0), Bytes::from_static(b"early"))]
            );

            // Rejected with UNINTERESTED.
            let published = client
                .publish(track("q"), Default::default())
                .await
                .unwrap();
            match server.incoming().next().await.unwrap() {
                Incoming::Publish(p) => {
                    p.reject(RequestError::new(RequestErrorCode::UNINTERESTED, "no"))
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(
                rejected_code(published.accepted().await.unwrap_err()),
                RequestErrorCode::UNINTERESTED
            );
            // draft-19 §5.1.1: no object is sent for a request that ended in error.
            let w = published.writer();
            assert!(
                w.open_subgroup(1, SubgroupId::Zero, None, false)
                    .await
                    .is_err()
            );
            let o = moq_transport::track::Object::default();
            assert!(w.send_datagram(&o).is_err());
        })
        .await;
    }
}

#[tokio::test]
async fn track_status() {
    for version in Version::ALL {
        case(format!("{version:?}"), async {
            let (client, server, _srv) =
                pair_with_requests(Transport::WebTransport, *version).await;
            let props = Properties::new()
                .with_int(property::MAX_CACHE_DURATION, 5000)
                .unwrap();
            let serve = async {
                match server.incoming().next().await.unwrap() {
                    Incoming::TrackStatus(t) => {
                        assert_eq!(t.track(), &track("s"));
                        // An EXPIRES from the application is not sent in TRACK_STATUS_OK
                        // (draft-19 §10.2.7 does not list it there); it once was, and our own
                        // requester closed the session over it.
                        t.accept(TrackStatusInfo {
                            largest: Some(Location::new(9, 9)),
                            expires: Some(Duration::from_secs(30)),
                            track_properties: props.clone(),
                        });
                    }
                    other => panic!("{other:?}"),
                }
            };
            let (info, ()) = tokio::join!(
                client.track_status(track("s"), Parameters::default()),
                serve
            );
            let info = info.unwrap();
            assert_eq!(info.largest, Some(Location::new(9, 9)));
            assert_eq!(info.expires, None);
            // draft-16's and draft-17's REQUEST_OK have no room for Track Properties (14 and 15
            // carry this one as a parameter, 18 on as a property).
            if !version.has_track_extensions() || version.request_ok_has_properties() {
                // (draft-14's TRACK_STATUS_OK also names the group order.)
                let cache = info.track_properties.get_int(property::MAX_CACHE_DURATION);
                assert_eq!(cache, Some(5000), "{version}");
            }
            assert!(client.close_reason().is_none(), "{version}");
            assert!(server.close_reason().is_none(), "{version}");
        })
        .await;
    }
}

#[tokio::test]
async fn subscribe_tracks_and_publish_skipped() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let prefix = TrackNamespace::from_strs(["live"]).unwrap();
        let serve = async {
            match server.incoming().next().await.unwrap() {
                Incoming::SubscribeTracks(r) => r.accept().await.unwrap(),
                other => panic!("{other:?}"),
            }
        };
        let (ts, responder) = tokio::join!(
            client.subscribe_tracks(prefix.clone(), Parameters::default()),
            serve
        );
        let mut ts = ts.unwrap();
        assert!(responder.matches(&track("a")));
        responder.skipped(&track("a")).await.unwrap();
        assert_eq!(ts.next_skipped().await.unwrap().unwrap(), track("a"));
        // A PUBLISH for a matching track arrives on its own stream.
        let published = server
            .publish(track("b"), Default::default())
            .await
            .unwrap();
        match client.incoming().next().await.unwrap() {
            Incoming::Publish(p) => {
                assert_eq!(p.track(), &track("b"));
                let _sub = p.accept(Parameters::default()).await.unwrap();
            }
            other => panic!("{other:?}"),
        }
        published.accepted().await.unwrap();
        // Its own overlap space: a second overlapping SUBSCRIBE_TRACKS is refused, while a
        // SUBSCRIBE_NAMESPACE with the same prefix is fine.
        let _ns = client.subscribe_namespace(prefix.clone()).await.unwrap();
        assert_eq!(
            rejected_code(
                client
                    .subscribe_tracks(prefix.child("x").unwrap(), Parameters::default())
                    .await
                    .unwrap_err()
            ),
            RequestErrorCode::PREFIX_OVERLAP
        );
        // Cancelling reaches the responder.
        drop(ts);
        responder.ended().await;
    })
    .await;
}

/// draft-21 §9.10 (from draft-20): the publisher's PUBLISH_STATE_NOTIFY carries its Largest
/// Object and reaches the subscriber's `publisher_state`; before draft-20 there is none to send.
#[tokio::test]
async fn publish_state_notify_reaches_the_subscriber() {
    for version in [Version::Draft19, Version::Draft20, Version::Draft22] {
        case(format!("{version:?}"), async {
            let (client, server, _srv) = pair_with_requests(Transport::Quic, version).await;
            let (mut sub, writer) = subscribe_accepted(
                &client,
                &server,
                track("state"),
                Parameters::default(),
                SubscribeResponse::default(),
            )
            .await;
            let mut s = writer
                .open_subgroup(5, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            s.write_object(0, Bytes::from_static(b"x")).await.unwrap();
            let sent = writer.notify_state(Parameters::default());
            if version < Version::Draft20 {
                assert!(sent.is_err());
                return; // the next case
            }
            sent.unwrap();
            let state = sub.publisher_state_changed().await.unwrap();
            assert_eq!(state.largest_object, Some(Location::new(5, 0)));
            assert_eq!(
                sub.publisher_state().largest_object,
                Some(Location::new(5, 0))
            );
        })
        .await;
    }
}

/// PUBLISH_SKIPPED after a REQUEST_UPDATE moved the prefix names the track under the new prefix:
/// its suffix is relative to the prefix in effect (draft-19 §10.20, §10.9.2), on both sides.
#[tokio::test]
async fn publish_skipped_after_the_prefix_moved_names_the_new_prefix() {
    timeout(async {
        let (client, server, _srv) = pair_with_requests(Transport::Quic, Version::Draft19).await;
        let old = TrackNamespace::from_strs(["live", "a"]).unwrap();
        let new = TrackNamespace::from_strs(["live", "b", "c"]).unwrap();
        let serve = async {
            match server.incoming().next().await.unwrap() {
                Incoming::SubscribeTracks(r) => r.accept().await.unwrap(),
                other => panic!("{other:?}"),
            }
        };
        let (ts, responder) = tokio::join!(
            client.subscribe_tracks(old.clone(), Parameters::default()),
            serve
        );
        let mut ts = ts.unwrap();
        let under = |ns: &TrackNamespace, name: &str| {
            FullTrackName::new(ns.child("x").unwrap(), name.as_bytes().to_vec()).unwrap()
        };
        responder.skipped(&under(&old, "1")).await.unwrap();
        assert_eq!(ts.next_skipped().await.unwrap().unwrap(), under(&old, "1"));
        let params = Parameters {
            track_namespace_prefix: Some(new.clone()),
            ..Default::default()
        };
        ts.update(params).await.unwrap();
        assert_eq!(responder.prefix(), new);
        responder.skipped(&under(&new, "2")).await.unwrap();
        assert_eq!(ts.next_skipped().await.unwrap().unwrap(), under(&new, "2"));
    })
    .await;
}
