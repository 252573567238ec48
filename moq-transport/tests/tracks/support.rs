//! Helpers shared by the track tests: session pairs that take requests, SUBSCRIBEs answered by
//! hand, and reading a subscription to its end.

use bytes::Bytes;
use moq_core::codes::PublishDoneCode;
use moq_core::message::Parameters;
use moq_core::{FullTrackName, Location, LocationFilter, TrackNamespace, Version};
use moq_transport::track::{Incoming, SubscribeResponse, Subscription, TrackEvent};
use moq_transport::{Error, Session, SessionConfig};

use crate::common::{TestServer, Transport};

pub(crate) fn track(name: &str) -> FullTrackName {
    FullTrackName::new(
        TrackNamespace::from_strs(["live", "room"]).unwrap(),
        name.as_bytes().to_vec(),
    )
    .unwrap()
}

/// A client (subscriber) and a server session that takes requests (publisher).
pub(crate) async fn pair_with_requests(
    transport: Transport,
    version: Version,
) -> (Session, Session, TestServer) {
    let mut srv = TestServer::start(SessionConfig::default().with_requests());
    let (c, s) = srv
        .connect(
            transport,
            vec![version],
            SessionConfig::default().with_requests(),
        )
        .await;
    (c, s, srv)
}

pub(crate) async fn next_subscribe(s: &Session) -> moq_transport::track::IncomingSubscribe {
    match s.incoming().next().await.expect("no request") {
        Incoming::Subscribe(r) => r,
        other => panic!("expected SUBSCRIBE, got {other:?}"),
    }
}

/// Subscribes and has the server accept with `response`.
pub(crate) async fn subscribe_accepted(
    client: &Session,
    server: &Session,
    t: FullTrackName,
    params: Parameters,
    response: SubscribeResponse,
) -> (Subscription, moq_transport::track::SubscriptionWriter) {
    let accept = async {
        let req = next_subscribe(server).await;
        req.accept(response).await.unwrap()
    };
    let (sub, writer) = tokio::join!(client.subscribe(t, params), accept);
    (sub.unwrap(), writer)
}

/// Subscribes with the Location Filter `filter`, accepted as is.
pub(crate) async fn filtered(
    client: &Session,
    server: &Session,
    t: FullTrackName,
    filter: LocationFilter,
) -> (Subscription, moq_transport::track::SubscriptionWriter) {
    let params = Parameters {
        location_filter: Some(filter),
        ..Default::default()
    };
    subscribe_accepted(client, server, t, params, SubscribeResponse::default()).await
}

/// Ends the track (PUBLISH_DONE, TRACK_ENDED).
pub(crate) async fn end(writer: &moq_transport::track::SubscriptionWriter) {
    writer
        .clone()
        .finish(PublishDoneCode::TRACK_ENDED, "")
        .await
        .unwrap();
}

/// Reads every object of every subgroup until the subscription ends.
pub(crate) async fn collect(sub: &mut Subscription) -> (Vec<(Location, Bytes)>, Option<Error>) {
    let mut out = Vec::new();
    loop {
        match sub.next().await {
            Some(Ok(TrackEvent::Subgroup(mut s))) => {
                while let Some(o) = s.next_object().await.unwrap() {
                    out.push((o.location, o.payload));
                }
            }
            Some(Ok(TrackEvent::Datagram(o))) => out.push((o.location, o.payload)),
            Some(Err(e)) => return (out, Some(e)),
            None => return (out, None),
        }
    }
}
