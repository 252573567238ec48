//! The relay facing publishers that are not ours, played by a raw QUIC peer (moq-transport's
//! test peer, `moq-transport/tests/common/raw.rs`) that writes what other implementations
//! write: objects at or before the Largest Location of its SUBSCRIBE_OK (Cloudflare's
//! moq-transport 0.17 publishes the first object before it answers, and sends it anyway).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::time::Duration;

use moq_client::{FullTrackName, Location, TrackNamespace, Version};
use moq_core::Properties;
use moq_core::codes::PublishDoneCode;
use moq_core::data::{ObjectStatus, SubgroupHeader, SubgroupId, SubgroupWriter};
use moq_core::message::{
    Address, Message, Parameters, Publish, PublishDone, PublishNamespace, RequestType, SubscribeOk,
};
use moq_relay::Relay;
use moq_transport::track::TrackEvent;

// moq-transport's raw peers, with what their module takes from its parent (`TestServer`,
// `init_tracing`).
#[path = "../../moq-transport/tests/common/raw.rs"]
mod raw;

/// Unused here: the server of the raw peers' own tests (`RawConn::to_server` takes one).
#[allow(dead_code)]
struct TestServer {
    server: moq_transport::endpoint::Server,
    cert: moq_transport::tls::Certificate,
    sessions: Vec<moq_transport::Session>,
}

#[allow(dead_code)]
impl TestServer {
    fn port(&self) -> u16 {
        self.server.local_addr().unwrap().port()
    }
}

mod common;
use common::{dev_relay as relay, init_tracing, raw_session as session_at};

use raw::{MsgReader, RawConn, SingleControl, encode, raw_setup};

/// Each case gets this long.
const TIMEOUT: Duration = Duration::from_secs(20);

async fn timeout<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(TIMEOUT, f)
        .await
        .expect("test timed out")
}

fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

/// A raw publisher connected to the relay at one version, its namespace announced.
struct RawPublisher {
    raw: RawConn,
    /// Drafts 14-16: the one control stream.
    control: Option<SingleControl>,
    /// Drafts 17 on: the request stream of the PUBLISH_NAMESPACE, kept open.
    _announced: Option<(quinn::SendStream, MsgReader)>,
}

impl RawPublisher {
    async fn announce(relay: &Relay, v: Version, namespace: &TrackNamespace) -> RawPublisher {
        let fingerprint = moq_transport::tls::parse_fingerprint(&relay.fingerprint()).unwrap();
        let mut raw = RawConn::connect(relay.local_addr().port(), fingerprint, v).await;
        let announce = PublishNamespace {
            request_id: 0,
            namespace: namespace.clone(),
            params: Parameters::default(),
        };
        if v.single_control_stream() {
            // Supported Versions only at draft-14 (ALPN from draft-15).
            let versions = if v.setup_has_versions() {
                vec![v.setup_number()]
            } else {
                Vec::new()
            };
            let (mut control, _) = raw.single_setup(versions, raw_setup()).await;
            control.send(announce, None, None).await;
            loop {
                let (_, msg, addr) = control.next().await;
                if addr == Some(Address::Request(0)) {
                    assert!(matches!(msg, Message::RequestOk(_)), "{msg:?}");
                    break;
                }
            }
            RawPublisher {
                raw,
                control: Some(control),
                _announced: None,
            }
        } else {
            raw.handshake(raw_setup()).await;
            let (send, mut reader) = raw.open_request(&encode(announce, v)).await;
            let answer = reader.expect().await;
            assert!(matches!(answer, Message::RequestOk(_)), "{answer:?}");
            RawPublisher {
                raw,
                control: None,
                _announced: Some((send, reader)),
            }
        }
    }

    /// A raw publisher that PUBLISHes `track` with Track Alias `alias` (no LARGEST_OBJECT:
    /// nothing published yet) once the relay accepted it.
    async fn publish(relay: &Relay, v: Version, track: &FullTrackName, alias: u64) -> RawPublisher {
        let fingerprint = moq_transport::tls::parse_fingerprint(&relay.fingerprint()).unwrap();
        let mut raw = RawConn::connect(relay.local_addr().port(), fingerprint, v).await;
        let publish = Publish {
            request_id: 0,
            track: track.clone(),
            track_alias: alias,
            params: Parameters::default(),
            track_properties: Properties::new(),
        };
        if v.single_control_stream() {
            let versions = if v.setup_has_versions() {
                vec![v.setup_number()]
            } else {
                Vec::new()
            };
            let (mut control, _) = raw.single_setup(versions, raw_setup()).await;
            control.send(publish, None, None).await;
            loop {
                let (_, msg, addr) = control.next().await;
                if addr == Some(Address::Request(0)) {
                    assert!(!matches!(msg, Message::RequestError(_)), "{msg:?}");
                    break;
                }
            }
            RawPublisher {
                raw,
                control: Some(control),
                _announced: None,
            }
        } else {
            raw.handshake(raw_setup()).await;
            let (send, mut reader) = raw.open_request(&encode(publish, v)).await;
            let answer = reader.expect().await;
            assert!(!matches!(answer, Message::RequestError(_)), "{answer:?}");
            RawPublisher {
                raw,
                control: None,
                _announced: Some((send, reader)),
            }
        }
    }

    /// Sends an OBJECT_DATAGRAM as Cloudflare's moq-transport 0.17 writes one: the Object ID
    /// and the Publisher Priority always on the wire (type 0x00, or 0x20 with a status), even
    /// for object 0 (IDs here are below 64: one byte in every draft's integers).
    fn send_datagram(&self, alias: u64, group: u64, object: u64, status: Option<ObjectStatus>) {
        let mut d = vec![if status.is_some() { 0x20 } else { 0x00 }];
        d.extend([alias, group, object].map(|x| u8::try_from(x).unwrap()));
        d.push(128);
        match status {
            Some(s) => d.push(u8::try_from(s.value()).unwrap()),
            None => d.extend_from_slice(format!("{group}.{object}").as_bytes()),
        }
        self.raw.send_datagram(&d);
    }

    /// Ends the PUBLISHed track: PUBLISH_DONE TRACK_ENDED, no data stream opened.
    async fn publish_done(&mut self) {
        let done = PublishDone {
            status: PublishDoneCode::TRACK_ENDED,
            stream_count: 0,
            reason: String::new(),
        };
        let v = self.raw.version;
        match (&mut self.control, &mut self._announced) {
            (Some(control), _) => control.send(done, Some(Address::Request(0)), None).await,
            (None, Some((send, _))) => send.write_all(&encode(done, v)).await.unwrap(),
            (None, None) => unreachable!("a publisher has a control or request stream"),
        }
    }

    /// Reads the relay's upstream SUBSCRIBE and answers SUBSCRIBE_OK with `largest` and Track
    /// Alias `alias`; returns the request stream (drafts 17 on), to keep open.
    async fn answer_subscribe(
        &mut self,
        alias: u64,
        largest: Option<Location>,
    ) -> Option<quinn::SendStream> {
        let v = self.raw.version;
        let ok = SubscribeOk {
            track_alias: alias,
            params: Parameters {
                largest_object: largest,
                ..Default::default()
            },
            track_properties: Properties::new(),
        };
        match &mut self.control {
            Some(control) => {
                let id = loop {
                    if let (_, Message::Subscribe(s), _) = control.next().await {
                        break s.request_id;
                    }
                };
                control
                    .send(ok, Some(Address::Request(id)), Some(RequestType::Subscribe))
                    .await;
                None
            }
            None => {
                let (mut send, _reader, first) = self.raw.accept_request().await;
                assert!(matches!(first, Message::Subscribe(_)), "{first:?}");
                send.write_all(&encode(ok, v)).await.unwrap();
                Some(send)
            }
        }
    }

    /// Sends objects `ids` of group `group` on one subgroup stream (Subgroup ID 0), then FIN.
    async fn send_subgroup(&self, alias: u64, group: u64, ids: std::ops::Range<u64>) {
        let v = self.raw.version;
        let header = SubgroupHeader {
            track_alias: alias,
            group,
            subgroup: SubgroupId::Zero,
            priority: Some(128),
            properties: false,
            end_of_group: false,
            first_object: v.has_first_object_bit() && ids.start == 0,
        };
        let mut w = SubgroupWriter::new(header, v);
        let mut bytes = Vec::new();
        w.encode_header(&mut bytes).unwrap();
        for id in ids {
            let payload = format!("{group}.{id}");
            w.encode_object(
                &mut bytes,
                id,
                &Properties::new(),
                ObjectStatus::Normal,
                payload.as_bytes(),
            )
            .unwrap();
        }
        let mut s = self.raw.open_uni(&bytes).await;
        s.finish().unwrap();
    }
}

/// The objects of a subscription's streams until `n` arrived, by location.
async fn read_objects(sub: &mut moq_transport::track::Subscription, n: usize) -> Vec<Location> {
    let mut got = Vec::new();
    while got.len() < n {
        match sub.next().await.unwrap().unwrap() {
            TrackEvent::Subgroup(mut s) => {
                while let Some(o) = s.next_object().await.unwrap() {
                    assert_eq!(
                        o.payload,
                        format!("{}.{}", o.location.group, o.location.object)
                    );
                    got.push(o.location);
                }
            }
            TrackEvent::Datagram(o) => got.push(o.location),
        }
    }
    got.sort();
    got
}

/// draft-19 §10.7 ("Subscribe only requests newly published or received Objects"), §5.1.2 (an
/// object smaller than the Largest Object that arrives after the SUBSCRIBE passes every filter
/// but Largest Object), §10.2.16 (a relay's LARGEST_OBJECT is at least its upstream's): a
/// publisher answers the relay's upstream SUBSCRIBE with LARGEST_OBJECT {0, 0} and then sends
/// object {0, 0} on the subscription (Cloudflare's moq-test-client does, in interop case
/// `data-subgroup-basic`). The downstream subscriber, whose SUBSCRIBE caused the upstream one,
/// gets SUBSCRIBE_OK with LARGEST_OBJECT {0, 0} and every object, {0, 0} included: it was
/// received after its SUBSCRIBE. (It was dropped: the relay started the subscription after the
/// upstream's Largest Location, although the object had not arrived yet.) At every draft.
#[tokio::test]
async fn objects_the_upstream_sends_at_or_before_its_largest_reach_a_waiting_subscriber() {
    let relay = relay();
    for v in Version::ALL.iter().copied() {
        timeout(async {
            let n = ns(&["raw-largest", &v.draft().to_string()]);
            let name = FullTrackName::new(n.clone(), b"t".to_vec()).unwrap();
            let mut publisher = RawPublisher::announce(&relay, v, &n).await;
            let subscriber = session_at(&relay, v).await;
            let pending = {
                let (s, name) = (subscriber.clone(), name.clone());
                tokio::spawn(async move { s.subscribe(name, Default::default()).await })
            };
            let _stream = publisher
                .answer_subscribe(7, Some(Location::new(0, 0)))
                .await;
            let mut sub = pending.await.unwrap().unwrap();
            assert_eq!(sub.info().largest, Some(Location::new(0, 0)), "{v}");
            publisher.send_subgroup(7, 0, 0..3).await;
            publisher.send_subgroup(7, 1, 0..2).await;
            assert_eq!(
                read_objects(&mut sub, 5).await,
                [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)].map(|(g, o)| Location::new(g, o)),
                "{v}"
            );
        })
        .await;
    }
}

/// draft-19 §10.11 (PUBLISH_DONE once every data stream is closed: datagrams have none), §9.5,
/// §11.3.1: a track PUBLISHed with datagrams only (as Cloudflare's moq-test-client sends them:
/// explicit Object ID and priority; with and without End of Group status objects) reaches a
/// subscriber through the relay, which waited for it with RENDEZVOUS_TIMEOUT (from draft-17;
/// before, it subscribes after the PUBLISH), and its end does too: PUBLISH_DONE TRACK_ENDED
/// after the last datagram. (The relay's subscription never ended: the cache's datagram
/// subgroups stayed open after the track's end, so interop cases `moq-test-datagram` and
/// `moq-test-datagram-eog` timed out.) At every draft.
#[tokio::test]
async fn a_published_datagram_track_ends_downstream_with_publish_done() {
    let relay = relay();
    for v in Version::ALL.iter().copied() {
        for eog in [false, true] {
            timeout(async {
                let n = ns(&["raw-datagrams", &v.draft().to_string(), &eog.to_string()]);
                let name = FullTrackName::new(n, b"t".to_vec()).unwrap();
                let subscriber = session_at(&relay, v).await;
                let subscribe = {
                    let (s, name) = (subscriber.clone(), name.clone());
                    // draft-19 §10.2.4: RENDEZVOUS_TIMEOUT holds the SUBSCRIBE for the PUBLISH.
                    let params = Parameters {
                        rendezvous_timeout: (v.draft() >= 17).then_some(10_000),
                        ..Default::default()
                    };
                    async move { s.subscribe(name, params).await.unwrap() }
                };
                let (mut publisher, mut sub) = if v.draft() >= 17 {
                    let before = relay.metrics().value("moq_relay_subscriptions_active");
                    let pending = tokio::spawn(subscribe);
                    while relay.metrics().value("moq_relay_subscriptions_active") == before {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    let publisher = RawPublisher::publish(&relay, v, &name, 0).await;
                    (publisher, pending.await.unwrap())
                } else {
                    let publisher = RawPublisher::publish(&relay, v, &name, 0).await;
                    (publisher, subscribe.await)
                };
                let mut sent = Vec::new();
                for group in 0..3 {
                    for object in 0..5 {
                        let status = (eog && object == 4).then_some(ObjectStatus::EndOfGroup);
                        publisher.send_datagram(0, group, object, status);
                        sent.push((Location::new(group, object), status.is_some()));
                        // Paced as the peer paces them (20 ms), so none is lost on loopback.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                publisher.publish_done().await;
                let mut got = Vec::new();
                while let Some(ev) = sub.next().await {
                    match ev.unwrap() {
                        TrackEvent::Datagram(o) => {
                            let eog = o.status == ObjectStatus::EndOfGroup;
                            if !eog {
                                assert_eq!(
                                    o.payload,
                                    format!("{}.{}", o.location.group, o.location.object)
                                );
                            }
                            assert_eq!(o.priority, 128, "{v}");
                            got.push((o.location, eog));
                        }
                        TrackEvent::Subgroup(_) => panic!("a subgroup stream ({v})"),
                    }
                }
                got.sort();
                assert_eq!(got, sent, "{v} eog={eog}");
                let done = sub.publish_done().expect("PUBLISH_DONE");
                assert_eq!(done.status, PublishDoneCode::TRACK_ENDED, "{v}");
            })
            .await;
        }
    }
}
