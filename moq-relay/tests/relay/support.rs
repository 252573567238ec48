//! Helpers shared by the relay tests: relays, clients and raw moq-transport sessions to them,
//! names, and the requests a raw session answers by hand.

use std::time::Duration;

use moq_client::{
    Client, FullTrackName, Location, NamespaceEvent, Publisher, Session, TrackNamespace, Version,
};
use moq_core::codes::RequestErrorCode;
use moq_core::data::SubgroupId;
use moq_core::message::{Parameters, RequestError};
use moq_core::{AuthToken, Properties};
use moq_relay::{Relay, RelayConfig};
use moq_transport::track::{
    Incoming, IncomingSubgroup, IncomingSubscribe, SubscribeResponse, TrackEvent,
};
use moq_transport::{AuthRequest, Authorizer, RequestKind, SessionInfo};

pub(crate) const TIMEOUT: Duration = Duration::from_secs(20);

pub(crate) async fn timeout<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("test timed out")
}

pub(crate) fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

pub(crate) fn relay() -> Relay {
    relay_with(|_| {})
}

/// A relay with its development configuration changed by `f`.
pub(crate) fn relay_with(f: impl FnOnce(&mut RelayConfig)) -> Relay {
    init_tracing();
    let mut config = RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap();
    f(&mut config);
    let relay = Relay::bind(config).unwrap();
    relay.spawn();
    relay
}

pub(crate) fn url(relay: &Relay, webtransport: bool) -> String {
    let scheme = if webtransport { "https" } else { "moqt" };
    format!("{scheme}://localhost:{}/", relay.local_addr().port())
}

pub(crate) fn client(relay: &Relay) -> Client {
    Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .build()
        .unwrap()
}

pub(crate) fn client_with(relay: &Relay, publisher: Publisher, version: Version) -> Client {
    Client::builder()
        .fingerprint(&relay.fingerprint())
        .unwrap()
        .publisher(publisher)
        .versions(vec![version])
        .build()
        .unwrap()
}

pub(crate) async fn connect(relay: &Relay, webtransport: bool) -> Session {
    client(relay)
        .connect(&url(relay, webtransport))
        .await
        .unwrap()
}

pub(crate) fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

pub(crate) fn track(n: &TrackNamespace, name: &str) -> FullTrackName {
    FullTrackName::new(n.clone(), name.as_bytes().to_vec()).unwrap()
}

pub(crate) async fn announce(
    session: &Session,
    namespace: &TrackNamespace,
) -> moq_client::NamespaceHandle {
    let h = session
        .publisher()
        .publish_namespace(namespace.clone())
        .unwrap();
    h.announced().await.unwrap();
    h
}

/// An application-private Track / Object Property (draft-19 §15.8: 0x78-0x7F), integer-valued.
pub(crate) const APP_INT: u64 = 0x7A;
/// An application-private Property with a byte value.
const APP_BYTES: u64 = 0x79;

/// Polls `cond` until it holds: for relay states that send no signal (a held SUBSCRIBE, a
/// publisher let go), seen through the relay's counters.
pub(crate) async fn until(mut cond: impl FnMut() -> bool) {
    while !cond() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The relay's count `m` now.
/// Writes object {0, 0} on a stream of its own and finishes it.
pub(crate) async fn write_first_object(
    w: &moq_transport::track::SubscriptionWriter,
    payload: &'static [u8],
) {
    let mut s = w
        .open_subgroup(0, SubgroupId::Zero, None, false)
        .await
        .unwrap();
    s.write_object(0, bytes::Bytes::from_static(payload))
        .await
        .unwrap();
    s.finish();
}

/// A moq-transport session to the relay that takes requests itself (SUBSCRIBE, FETCH, PUBLISH
/// ...), offering every version (the relay picks draft-19).
pub(crate) async fn transport_session(relay: &Relay, webtransport: bool) -> moq_transport::Session {
    transport_session_with(relay, webtransport, Version::ALL.to_vec()).await
}

pub(crate) async fn transport_session_with(
    relay: &Relay,
    webtransport: bool,
    versions: Vec<Version>,
) -> moq_transport::Session {
    let client = moq_transport::endpoint::Client::new(moq_transport::endpoint::ClientConfig {
        tls: moq_transport::tls::ClientTls::pinned(
            moq_transport::tls::parse_fingerprint(&relay.fingerprint()).unwrap(),
        ),
        versions,
        session: moq_transport::SessionConfig::default().with_requests(),
        share_indexes: false,
        ..Default::default()
    })
    .unwrap();
    client.connect(&url(relay, webtransport)).await.unwrap()
}

/// Waits until the relay has `namespace` in its index (a route to its publisher exists).
pub(crate) async fn relay_knows(relay: &Relay, namespace: &TrackNamespace) {
    let (now, mut watch) = relay.namespaces().watch(namespace, 16);
    if now.contains(namespace) {
        return;
    }
    while let Some(ev) = watch.next().await {
        if ev == NamespaceEvent::Added(namespace.clone()) {
            return;
        }
    }
    panic!("namespace watch ended");
}

/// The next request a raw session receives, which must be a FETCH.
pub(crate) async fn next_fetch(s: &moq_transport::Session) -> moq_transport::track::IncomingFetch {
    match s.incoming().next().await.expect("no request") {
        Incoming::Fetch(f) => f,
        other => panic!("expected FETCH, got {other:?}"),
    }
}

pub(crate) async fn next_subscribe(s: &moq_transport::Session) -> IncomingSubscribe {
    match s.incoming().next().await.expect("no request") {
        Incoming::Subscribe(r) => r,
        other => panic!("expected SUBSCRIBE, got {other:?}"),
    }
}

pub(crate) fn rejected(e: impl Into<moq_client::Error>) -> RequestErrorCode {
    let e = e.into();
    e.rejection()
        .unwrap_or_else(|| panic!("expected REQUEST_ERROR, got {e:?}"))
}

/// Track properties the publishers below send: a known one and two the relay does not know.
pub(crate) fn track_props() -> Properties {
    Properties::new()
        .with_int(moq_core::property::DEFAULT_PUBLISHER_PRIORITY, 9)
        .unwrap()
        .with_bytes(APP_BYTES, &b"origin-a"[..])
        .unwrap()
        .with_int(APP_INT, 1)
        .unwrap()
}

/// Object `i` of the test subgroup: binary payloads of varying length (some empty), properties
/// on every third.
pub(crate) fn test_object(i: u64) -> (Properties, bytes::Bytes) {
    let props = if i % 3 == 0 {
        Properties::new()
            .with_int(APP_INT, i)
            .unwrap()
            .with_bytes(APP_BYTES, vec![0xFF, 0x00, i as u8])
            .unwrap()
    } else {
        Properties::new()
    };
    let payload: Vec<u8> = (0..(i * 37) % 300).map(|b| (b * 7 + i) as u8).collect();
    (props, payload.into())
}

/// A round trip on `session`'s connection to the relay: anything the relay sent before its
/// answer has had time to arrive (used before checking that something did not happen).
pub(crate) async fn round_trip(session: &moq_transport::Session) {
    // Answered with REQUEST_OK the first time, PREFIX_OVERLAP later: either is a round trip.
    let _ = session.subscribe_namespace(ns(&["round-trip"])).await;
}

/// Publishing needs the token "pub" and, for PUBLISH, the track name "allowed"; anything under
/// (private) needs the token "key".
pub(crate) struct Policy;

impl Policy {
    fn decide(req: &AuthRequest<'_>) -> Result<(), RequestError> {
        let has = |t: &[u8]| req.tokens.iter().any(|x| &x.value[..] == t);
        let private = req.namespace.field(0).is_some_and(|f| f == b"private");
        let ok = match req.kind {
            RequestKind::PublishNamespace => has(b"pub"),
            RequestKind::Publish => has(b"pub") && req.track_name == Some(&b"allowed"[..]),
            _ => !private || has(b"key"),
        };
        if ok {
            Ok(())
        } else {
            Err(RequestError::new(RequestErrorCode::UNAUTHORIZED, "policy"))
        }
    }
}

/// The trait is declared with `async_trait`; written out here without the macro.
impl Authorizer for Policy {
    fn authorize<'a, 'b, 'c, 'd, 'r>(
        &'a self,
        _session: &'b SessionInfo,
        req: &'c AuthRequest<'d>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RequestError>> + Send + 'r>>
    where
        'a: 'r,
        'b: 'r,
        'c: 'r,
        'd: 'r,
        Self: 'r,
    {
        Box::pin(std::future::ready(Policy::decide(req)))
    }
}

pub(crate) fn token(t: &'static str) -> Parameters {
    Parameters {
        authorization_tokens: vec![AuthToken::new(t)],
        ..Default::default()
    }
}

/// A track routed through the relay: its publisher announced the namespace and answered the
/// relay's upstream SUBSCRIBE with `response`; a subscriber SUBSCRIBEd through the relay.
/// Bind every field (`_name`, not `_` or `..`): a dropped session closes.
pub(crate) struct Routed {
    pub(crate) _publisher: moq_transport::Session,
    pub(crate) _announced: moq_transport::namespace::PublishedNamespace,
    pub(crate) subscriber: moq_transport::Session,
    pub(crate) writer: moq_transport::track::SubscriptionWriter,
    pub(crate) sub: moq_transport::track::Subscription,
}

pub(crate) async fn routed(
    relay: &Relay,
    name: &FullTrackName,
    response: SubscribeResponse,
) -> Routed {
    let n = &name.namespace;
    let publisher = transport_session(relay, false).await;
    let announced = publisher.publish_namespace(n.clone()).await.unwrap();
    relay_knows(relay, n).await;
    let subscriber = transport_session(relay, false).await;
    let pending = {
        let (s, name) = (subscriber.clone(), name.clone());
        tokio::spawn(async move { s.subscribe(name, Parameters::default()).await })
    };
    let writer = next_subscribe(&publisher)
        .await
        .accept(response)
        .await
        .unwrap();
    let sub = pending.await.unwrap().unwrap();
    Routed {
        _publisher: publisher,
        _announced: announced,
        subscriber,
        writer,
        sub,
    }
}

/// The next subgroup stream of a raw subscription.
pub(crate) async fn next_stream(sub: &mut moq_transport::track::Subscription) -> IncomingSubgroup {
    match sub.next().await.unwrap().unwrap() {
        TrackEvent::Subgroup(g) => g,
        TrackEvent::Datagram(o) => panic!("a datagram: {o:?}"),
    }
}

/// The payload of a stream's next object.
pub(crate) async fn next_payload(s: &mut IncomingSubgroup) -> (Location, Vec<u8>) {
    let o = s.next_object().await.unwrap().unwrap();
    (o.location, o.payload.to_vec())
}
