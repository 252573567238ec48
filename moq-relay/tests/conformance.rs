//! Rules of the drafts that independent black-box checks found the relay breaking (issue 33),
//! each at every draft it exists in, over raw QUIC on loopback, with moq-transport sessions on
//! both sides of the relay so that what it sends and answers can be seen field by field.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use moq_core::data::SubgroupId;
use moq_core::message::{FetchType, Parameters};
use moq_core::{FullTrackName, Location, LocationFilter, TrackNamespace, Version};
use moq_relay::Relay;

mod common;
use common::{case, dev_relay as relay, raw_session as session_at};
use moq_transport::track::{
    FetchItem, Incoming, IncomingSubgroup, IncomingSubscribe, SubscribeResponse, Subscription,
    TrackEvent,
};

fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

fn track(n: &TrackNamespace, name: &str) -> FullTrackName {
    FullTrackName::new(n.clone(), name.as_bytes().to_vec()).unwrap()
}

/// Waits until the relay has `namespace` in its index (a route to its publisher exists).
async fn relay_knows(relay: &Relay, namespace: &TrackNamespace) {
    let (now, mut watch) = relay.namespaces().watch(namespace, 16);
    if now.contains(namespace) {
        return;
    }
    while let Some(ev) = watch.next().await {
        if ev == moq_transport::namespace::NamespaceEvent::Added(namespace.clone()) {
            return;
        }
    }
    panic!("namespace watch ended");
}

/// The next request a raw session receives, which must be a SUBSCRIBE.
async fn next_subscribe(s: &moq_transport::Session) -> IncomingSubscribe {
    match s.incoming().next().await.expect("no request") {
        Incoming::Subscribe(r) => r,
        other => panic!("expected SUBSCRIBE, got {other:?}"),
    }
}

/// The next subgroup stream of a raw subscription.
async fn next_stream(sub: &mut Subscription) -> IncomingSubgroup {
    match sub.next().await.unwrap().unwrap() {
        TrackEvent::Subgroup(g) => g,
        TrackEvent::Datagram(o) => panic!("a datagram: {o:?}"),
    }
}

/// A publisher of a track's namespace on the relay and a subscriber whose SUBSCRIBE the relay
/// forwarded to it (see [`forwarded`]). Every session stays open while this lives.
struct Forwarded {
    _publisher: moq_transport::Session,
    _announced: moq_transport::namespace::PublishedNamespace,
    _subscriber: moq_transport::Session,
    /// The publisher's writer for the relay's upstream subscription.
    writer: moq_transport::track::SubscriptionWriter,
    /// The subscriber's subscription.
    sub: Subscription,
}

/// A publisher of `name`'s namespace on `relay` and a subscriber whose SUBSCRIBE the relay
/// forwards to it, answered with `response`.
async fn forwarded(relay: &Relay, name: &FullTrackName, response: SubscribeResponse) -> Forwarded {
    let publisher = session_at(relay, Version::PREFERRED).await;
    let announced = publisher
        .publish_namespace(name.namespace.clone())
        .await
        .unwrap();
    relay_knows(relay, &name.namespace).await;
    let subscriber = session_at(relay, Version::PREFERRED).await;
    let pending = {
        let (a, name) = (subscriber.clone(), name.clone());
        tokio::spawn(async move { a.subscribe(name, Parameters::default()).await })
    };
    let writer = next_subscribe(&publisher)
        .await
        .accept(response)
        .await
        .unwrap();
    let sub = pending.await.unwrap().unwrap();
    Forwarded {
        _publisher: publisher,
        _announced: announced,
        _subscriber: subscriber,
        writer,
        sub,
    }
}

/// The locations of every object of a FETCH (or fill) response, in order.
async fn fetched(mut fetch: moq_transport::track::FetchResponse) -> Vec<Location> {
    let mut out = Vec::new();
    while let Some(item) = fetch.next().await {
        if let FetchItem::Object(o) = item.unwrap() {
            out.push(o.location);
        }
    }
    out
}

/// draft-19 §10.2.16 (draft-16 LARGEST OBJECT Parameter, draft-21 §9.20.18): "If Objects have been published on
/// this Track the Publisher MUST include" LARGEST_OBJECT, in REQUEST_UPDATE_OK too; a relay sets
/// it to the largest it received (§10.2.16). A subscriber that SUBSCRIBEd with FORWARD 0 before
/// anything was published, beside one that receives groups 0-2, turns Forward on: the answer
/// carries {2, 0}, and a Relative Joining FETCH of 1 group (until draft-19, §10.12.2), or the
/// update's fill of 1 group (from draft-20, draft-21 §3.4), brings groups 1 and 2. At every
/// draft whose update is answered (draft-15 on).
#[tokio::test]
async fn an_update_to_forward_carries_the_largest_object_and_joins() {
    for &v in Version::ALL.iter().filter(|v| v.update_is_answered()) {
        case(v.to_string(), async {
            let relay = relay();
            let name = track(&ns(&["largest", "update"]), "t");
            // A forwarding subscriber brings the upstream subscription.
            let f = forwarded(&relay, &name, SubscribeResponse::default()).await;
            let (writer, mut sub_a) = (&f.writer, f.sub);
            // One that does not forward, before anything is published.
            let b = session_at(&relay, v).await;
            let not_forwarding = Parameters {
                forward: Some(false),
                ..Default::default()
            };
            let sub_b = b.subscribe(name.clone(), not_forwarding).await.unwrap();
            assert_eq!(sub_b.info().largest, None, "{v}: nothing published yet");
            for g in 0..3u64 {
                let mut s = writer
                    .open_subgroup(g, SubgroupId::Zero, None, false)
                    .await
                    .unwrap();
                s.write_object(0, bytes::Bytes::from(format!("{g}")))
                    .await
                    .unwrap();
                s.finish();
                let mut down = next_stream(&mut sub_a).await;
                let o = down.next_object().await.unwrap().unwrap();
                assert_eq!(o.location, Location::new(g, 0));
            }
            // The fill's relative start counts the Largest Object's group as 1 (draft-21
            // §9.20.10): 2 is the Joining FETCH's "1 group back".
            let forward = Parameters {
                forward: Some(true),
                fill: v.has_fill().then(|| {
                    Box::new(Parameters {
                        location_filter: Some(LocationFilter::RelativeGroups(2)),
                        ..Default::default()
                    })
                }),
                ..Default::default()
            };
            let (largest, fill) = sub_b.update_with_fill(forward).await.unwrap();
            assert_eq!(largest, Some(Location::new(2, 0)), "{v}: LARGEST_OBJECT");
            let got = if v.fetch_has_type() {
                let request = FetchType::RelativeJoining {
                    joining_request_id: sub_b.request_id(),
                    joining_start: 1,
                };
                let response = b.fetch(request, Parameters::default()).await;
                fetched(response.unwrap_or_else(|e| panic!("{v}: joining FETCH: {e}"))).await
            } else {
                fetched(fill.unwrap_or_else(|| panic!("{v}: no fill"))).await
            };
            assert_eq!(
                got,
                vec![Location::new(1, 0), Location::new(2, 0)],
                "{v}: groups 1 and 2"
            );
        })
        .await;
    }
}

/// The next request a raw session receives, which must be a FETCH.
async fn next_fetch(s: &moq_transport::Session) -> moq_transport::track::IncomingFetch {
    match s.incoming().next().await.expect("no request") {
        Incoming::Fetch(f) => f,
        other => panic!("expected FETCH, got {other:?}"),
    }
}

/// draft-21 §9.12 (FETCH_OK in draft-14 and draft-16, draft-19 §10.13): "If End Location is smaller
/// than the Start Location in the corresponding FETCH the receiver MUST close the session with
/// a PROTOCOL_VIOLATION". The relay, receiving such a FETCH_OK from its upstream for the FETCH it
/// forwarded, closes the upstream session and refuses the downstream FETCH; it never forwards
/// the FETCH_OK. The End Location is one object before the start on the wire: {5, 2} for a
/// start of {5, 3}, exclusive until draft-19 (the model's {5, 2}), inclusive from draft-20 (the
/// model's {5, 3}). At every draft (the upstream session's).
#[tokio::test]
async fn an_upstream_fetch_ok_ending_before_the_start_closes_the_upstream() {
    for &v in Version::ALL {
        case(v.to_string(), async {
            let relay = relay();
            let n = ns(&["fetch", "end"]);
            let name = track(&n, "t");
            let publisher = session_at(&relay, v).await;
            let _announced = publisher.publish_namespace(n.clone()).await.unwrap();
            relay_knows(&relay, &n).await;
            let subscriber = session_at(&relay, Version::PREFERRED).await;
            let pending = {
                let (s, name) = (subscriber.clone(), name.clone());
                tokio::spawn(async move {
                    let request = FetchType::Standalone {
                        track: name,
                        start: Location::new(5, 3),
                        end: Location::new(6, 0),
                    };
                    s.fetch(request, Parameters::default()).await
                })
            };
            let f = next_fetch(&publisher).await;
            assert_eq!(f.start(), Location::new(5, 3), "{v}: forwarded as asked");
            // Accepted with an End Location before the start.
            let end = if v.fetch_has_type() {
                Location::new(5, 2)
            } else {
                Location::new(5, 3)
            };
            let _writer = f
                .accept(moq_transport::track::FetchEnd {
                    end_of_track: false,
                    end,
                    track_properties: Default::default(),
                })
                .await;
            let closed = publisher.closed().await;
            assert_eq!(
                closed.session_code(),
                moq_core::codes::SessionErrorCode::PROTOCOL_VIOLATION,
                "{v}: {closed}"
            );
            let answer = pending.await.unwrap();
            assert!(
                matches!(answer, Err(moq_transport::Error::Rejected(_))),
                "{v}: the downstream FETCH is refused, got {answer:?}"
            );
            assert!(subscriber.close_reason().is_none(), "{v}: downstream stays");
        })
        .await;
    }
}

/// A FETCH or fill response as (location, payload or marker kind).
async fn items(mut fetch: moq_transport::track::FetchResponse) -> Vec<(Location, String)> {
    let mut out = Vec::new();
    while let Some(item) = fetch.next().await {
        out.push(match item.unwrap() {
            FetchItem::Object(o) => (o.location, String::from_utf8_lossy(&o.payload).into_owned()),
            FetchItem::EndOfRange { kind, location } => (location, format!("{kind:?}")),
        });
    }
    out
}

/// draft-21 §9.20.6 (draft-19 §10.2.5): FILL_TIMEOUT 0 "indicates the subscriber only wants
/// Objects that are immediately available; the relay MUST NOT wait for upstream delivery and
/// MUST report any unavailable Objects as Timed-Out gaps" (from draft-20; "as Unknown gaps" in
/// drafts 18-19, which have no Timed-Out marker). The relay joined the track at group 10
/// (SUBSCRIBE_OK's Largest is {9, 0}), so groups 5-9 are unavailable to it: a FETCH of
/// {5, 0}..{10, 0} with FILL_TIMEOUT 0 gets one gap marker for them, then object {10, 0}, and the
/// publisher is not asked; from draft-20 a subscription's fill of the same range with
/// FILL_TIMEOUT 0 is served the same way (it was reset). At every draft with FILL_TIMEOUT (18
/// on): the downstream session's.
#[tokio::test]
async fn fill_timeout_zero_reports_timed_out_gaps() {
    use moq_core::data::RangeEnd;
    for &v in Version::ALL.iter().filter(|v| v.has_draft18_parameters()) {
        case(v.to_string(), async {
            let relay = relay();
            let name = track(&ns(&["fill", "zero"]), "t");
            let response = SubscribeResponse {
                largest: Some(Location::new(9, 0)),
                ..Default::default()
            };
            let f = forwarded(&relay, &name, response).await;
            let (writer, mut sub_a) = (&f.writer, f.sub);
            let mut ten = writer
                .open_subgroup(10, SubgroupId::Zero, None, false)
                .await
                .unwrap();
            ten.write_object(0, bytes::Bytes::from_static(b"ten"))
                .await
                .unwrap();
            let mut down = next_stream(&mut sub_a).await;
            down.next_object().await.unwrap().unwrap();

            let gap = if v.has_fill() {
                RangeEnd::TimedOut
            } else {
                RangeEnd::Unknown
            };
            let want = vec![
                (Location::new(9, u64::MAX), format!("{gap:?}")),
                (Location::new(10, 0), "ten".to_string()),
            ];
            let b = session_at(&relay, v).await;
            let request = FetchType::Standalone {
                track: name.clone(),
                start: Location::new(5, 0),
                end: Location::new(10, 1),
            };
            let now = Parameters {
                fill_timeout: Some(0),
                ..Default::default()
            };
            let fetch = b.fetch(request, now.clone()).await.unwrap();
            assert_eq!(items(fetch).await, want, "{v}: FETCH");
            if v.has_fill() {
                let params = Parameters {
                    fill: Some(Box::new(Parameters {
                        location_filter: Some(LocationFilter::AbsoluteStart(Location::new(5, 0))),
                        ..now
                    })),
                    ..Default::default()
                };
                let mut sub_b = b.subscribe(name.clone(), params).await.unwrap();
                let fill = sub_b.take_fill().expect("a fill");
                assert_eq!(items(fill).await, want, "{v}: fill");
            }
            let asked = "moq_relay_cache_requests_total{result=\"miss\"}";
            assert_eq!(
                relay.metrics().value(asked),
                0,
                "{v}: nothing asked upstream"
            );
            drop(ten);
        })
        .await;
    }
}

/// draft-22 §9.4.1 (draft-19 §10.6.1; Redirect from draft-18): "If a server receives a Redirect
/// with a non-zero Connect URI Length it MUST close the session with a PROTOCOL_VIOLATION". A
/// publisher connected to the relay answers the relay's upstream SUBSCRIBE with REQUEST_ERROR
/// REDIRECT to another URI: the relay closes the publisher's session, and the subscriber gets
/// a REQUEST_ERROR that is not that REDIRECT. At every draft with Redirect (18 on); before 18,
/// and for a GOAWAY at every draft, see `client_goaway_with_a_uri_on_a_request_stream`.
#[tokio::test]
async fn a_redirect_from_a_publisher_closes_its_session() {
    use moq_core::codes::{RequestErrorCode, SessionErrorCode};
    use moq_core::message::{Redirect, RequestError};
    for &v in Version::ALL.iter().filter(|v| !v.translates_error_codes()) {
        case(v.to_string(), async {
            let relay = relay();
            let n = ns(&["redirect"]);
            let name = track(&n, "t");
            let publisher = session_at(&relay, v).await;
            let _announced = publisher.publish_namespace(n.clone()).await.unwrap();
            relay_knows(&relay, &n).await;
            let subscriber = session_at(&relay, Version::PREFERRED).await;
            let pending = {
                let (s, name) = (subscriber.clone(), name.clone());
                tokio::spawn(async move { s.subscribe(name, Parameters::default()).await })
            };
            let redirect = RequestError {
                code: RequestErrorCode::REDIRECT,
                retry_interval: 0,
                reason: "go elsewhere".into(),
                redirect: Some(Box::new(Redirect {
                    connect_uri: bytes::Bytes::from_static(b"moqt://elsewhere.example/"),
                    track: name.clone(),
                })),
            };
            next_subscribe(&publisher).await.reject(redirect);
            let closed = publisher.closed().await;
            assert_eq!(
                closed.session_code(),
                SessionErrorCode::PROTOCOL_VIOLATION,
                "{v}: {closed}"
            );
            match pending.await.unwrap() {
                Err(moq_transport::Error::Rejected(e)) => {
                    assert_ne!(e.code, RequestErrorCode::REDIRECT, "{v}: passed on: {e:?}");
                }
                other => panic!("{v}: expected a REQUEST_ERROR, got {other:?}"),
            }
            assert!(subscriber.close_reason().is_none(), "{v}: downstream stays");
        })
        .await;
    }
}
