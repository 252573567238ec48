//! The peer's stream limits start small (quinn allocates state for the whole limit up front)
//! and are raised as streams are used: far more requests and subgroup streams than the initial
//! limits can be open at once, over raw QUIC and WebTransport.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use common::{SOCKET_TRANSPORTS, TestServer, case};
use futures::StreamExt;
use moq_core::data::SubgroupId;
use moq_core::message::Parameters;
use moq_core::{FullTrackName, LocationFilter, TrackNamespace, Version};
use moq_transport::SessionConfig;
use moq_transport::track::{Incoming, SubscribeResponse, TrackEvent};
use moq_transport::transport::credit::{INITIAL_BIDI_STREAMS, INITIAL_UNI_STREAMS};

#[tokio::test]
async fn requests_beyond_the_initial_limit() {
    for transport in SOCKET_TRANSPORTS {
        case(format!("{transport:?}"), async {
            let mut srv = TestServer::start(SessionConfig::default());
            let (client, server) = srv
                .connect(transport, vec![Version::Draft19], SessionConfig::default())
                .await;
            // Every PUBLISH_NAMESPACE keeps its bidirectional stream open.
            let n = INITIAL_BIDI_STREAMS as usize * 4;
            let held: Vec<_> = futures::stream::iter(0..n)
                .map(|i| {
                    let client = client.clone();
                    async move {
                        let ns = TrackNamespace::from_strs(["many", &i.to_string()]).unwrap();
                        client.publish_namespace(ns).await.unwrap()
                    }
                })
                .buffer_unordered(n)
                .collect()
                .await;
            assert_eq!(held.len(), n);
            assert_eq!(server.announced().len(), n, "{transport:?}");
        })
        .await;
    }
}

#[tokio::test]
async fn subgroup_streams_beyond_the_initial_limit() {
    for transport in SOCKET_TRANSPORTS {
        case(format!("{transport:?}"), async {
            let mut srv = TestServer::start(SessionConfig::default().with_requests());
            let (client, server) = srv
                .connect(transport, vec![Version::Draft19], SessionConfig::default())
                .await;
            let track = FullTrackName::new(
                TrackNamespace::from_strs(["many"]).unwrap(),
                b"streams".to_vec(),
            )
            .unwrap();
            let params = Parameters {
                location_filter: Some(LocationFilter::LargestObject),
                ..Default::default()
            };
            let accept = async {
                let Some(Incoming::Subscribe(req)) = server.incoming().next().await else {
                    panic!("expected SUBSCRIBE");
                };
                req.accept(SubscribeResponse {
                    track_alias: None,
                    largest: None,
                    expires: None,
                    track_properties: Default::default(),
                })
                .await
                .unwrap()
            };
            let (sub, writer) = tokio::join!(client.subscribe(track, params), accept);
            let mut sub = sub.unwrap();
            // Open every subgroup, one object each, and finish none until all have arrived:
            // they are all open at once.
            let n = INITIAL_UNI_STREAMS as u64 * 4;
            let send = async {
                let mut open = Vec::new();
                for g in 0..n {
                    let mut sg = writer
                        .open_subgroup(g, SubgroupId::Zero, None, true)
                        .await
                        .unwrap();
                    sg.write_object(0, bytes::Bytes::from_static(b"x"))
                        .await
                        .unwrap();
                    open.push(sg);
                }
                open
            };
            let receive = async {
                let mut streams = Vec::new();
                while (streams.len() as u64) < n {
                    let Some(Ok(TrackEvent::Subgroup(mut s))) = sub.next().await else {
                        panic!("subscription ended");
                    };
                    let o = s.next_object().await.unwrap().unwrap();
                    assert_eq!(o.payload.as_ref(), b"x");
                    streams.push(s);
                }
                streams
            };
            let (open, received) = tokio::join!(send, receive);
            assert_eq!(received.len() as u64, n, "{transport:?}");
            for sg in open {
                sg.finish();
            }
        })
        .await;
    }
}
