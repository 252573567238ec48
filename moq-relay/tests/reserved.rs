//! Reserved namespaces at the relay (draft-19 §3.2.1-2; draft-22 §2.4.3, §6.5), from a raw
//! QUIC peer at every draft that has them: each request kind naming a namespace whose first
//! field is "." or ".session" gets REQUEST_ERROR DOES_NOT_EXIST, and none is forwarded to a
//! publisher whose namespace would otherwise cover it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use moq_core::codes::RequestErrorCode;
use moq_core::message::{
    Fetch, FetchType, Message, MessageReader, Parameters, Publish, PublishNamespace, Setup,
    SetupOptions, Subscribe, SubscribeNamespace, SubscribeTracks, TrackStatus,
};
use moq_core::{FullTrackName, Location, Properties, TrackNamespace, Version};
use moq_relay::{Relay, RelayConfig};
use moq_transport::SessionConfig;
use moq_transport::endpoint::{Client, ClientConfig, transport_config};
use moq_transport::tls::{ClientTls, parse_fingerprint};
use quinn::crypto::rustls::QuicClientConfig;

/// Each request's answer must come within this.
const CASE: Duration = Duration::from_secs(5);

async fn case<F: std::future::Future>(f: F) -> F::Output {
    common::timeout_after(CASE, f).await
}

fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

/// A raw MOQT client (drafts 17 on: a request per bidirectional stream).
struct Raw {
    conn: quinn::Connection,
    _control: quinn::SendStream,
    _endpoint: quinn::Endpoint,
    version: Version,
}

impl Raw {
    async fn connect(relay: &Relay, version: Version) -> Raw {
        let fp = parse_fingerprint(&relay.fingerprint()).unwrap();
        let tls = ClientTls::pinned(fp)
            .client_config(&[version.alpn()])
            .unwrap();
        let mut cfg = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
        cfg.transport_config(Arc::new(transport_config()));
        let endpoint = quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let conn = endpoint
            .connect_with(cfg, relay.local_addr(), "localhost")
            .unwrap()
            .await
            .unwrap();
        let mut control = conn.open_uni().await.unwrap();
        let setup = Message::from(Setup {
            options: SetupOptions::default(),
        });
        control
            .write_all(&setup.encode_to_vec(version).unwrap())
            .await
            .unwrap();
        // The relay's SETUP.
        let recv = conn.accept_uni().await.unwrap();
        let first = Self::first_message(recv, version).await;
        assert!(matches!(first, Message::Setup(_)), "{}", first.name());
        Raw {
            conn,
            _control: control,
            _endpoint: endpoint,
            version,
        }
    }

    async fn first_message(mut recv: quinn::RecvStream, v: Version) -> Message {
        let mut msgs = MessageReader::new(v);
        loop {
            if let Some(m) = msgs.next_message().unwrap() {
                return m;
            }
            let chunk = recv
                .read_chunk(64 * 1024, true)
                .await
                .unwrap()
                .expect("stream ended");
            msgs.push(&chunk.bytes);
        }
    }

    /// Sends `msg` on a request stream of its own; returns the first answer.
    async fn request(&self, msg: Message) -> Message {
        let (mut send, recv) = self.conn.open_bi().await.unwrap();
        send.write_all(&msg.encode_to_vec(self.version).unwrap())
            .await
            .unwrap();
        let answer = Self::first_message(recv, self.version).await;
        drop(send);
        answer
    }
}

/// One request of each kind for each reserved name; Request IDs from 0, stepping by 2.
fn requests() -> Vec<(String, Message)> {
    let mut out: Vec<(String, Message)> = Vec::new();
    let mut id = 0;
    let mut next = || {
        let i = id;
        id += 2;
        i
    };
    let params = Parameters::default;
    for (n, name) in [
        (ns(&[".session", "x"]), "t"),
        (ns(&[".session"]), ""),
        (ns(&[".session"]), "t"),
        (ns(&["."]), "t"),
    ] {
        let track = FullTrackName::new(n, name).unwrap();
        out.push((
            format!("SUBSCRIBE {track}"),
            Subscribe {
                request_id: next(),
                track: track.clone(),
                params: params(),
            }
            .into(),
        ));
        out.push((
            format!("FETCH {track}"),
            Fetch {
                request_id: next(),
                fetch_type: FetchType::Standalone {
                    track: track.clone(),
                    start: Location::new(0, 0),
                    end: Location::new(1, 0),
                },
                params: params(),
            }
            .into(),
        ));
        out.push((
            format!("TRACK_STATUS {track}"),
            TrackStatus {
                request_id: next(),
                track: track.clone(),
                params: params(),
            }
            .into(),
        ));
        let request_id = next();
        out.push((
            format!("PUBLISH {track}"),
            Publish {
                request_id,
                track: track.clone(),
                track_alias: request_id,
                params: params(),
                track_properties: Properties::new(),
            }
            .into(),
        ));
    }
    for n in [ns(&[".session", "x"]), ns(&[".session"]), ns(&["."])] {
        out.push((
            format!("PUBLISH_NAMESPACE {n}"),
            PublishNamespace {
                request_id: next(),
                namespace: n.clone(),
                params: params(),
            }
            .into(),
        ));
        out.push((
            format!("SUBSCRIBE_NAMESPACE {n}"),
            SubscribeNamespace {
                request_id: next(),
                prefix: n.clone(),
                params: params(),
            }
            .into(),
        ));
        out.push((
            format!("SUBSCRIBE_TRACKS {n}"),
            SubscribeTracks {
                request_id: next(),
                prefix: n.clone(),
                params: params(),
            }
            .into(),
        ));
    }
    out
}

#[tokio::test]
async fn reserved_requests_are_refused_and_never_forwarded() {
    for &v in Version::ALL.iter().filter(|v| v.has_reserved_namespaces()) {
        let relay =
            Relay::bind(RelayConfig::development("127.0.0.1:0".parse().unwrap()).unwrap()).unwrap();
        relay.spawn();
        // A publisher of the empty namespace, a prefix of every namespace (draft-19 §9.5),
        // that counts the requests the relay forwards to it.
        let forwarded = Arc::new(AtomicUsize::new(0));
        let publisher = case(async {
            let client = Client::new(ClientConfig {
                tls: ClientTls::pinned(parse_fingerprint(&relay.fingerprint()).unwrap()),
                versions: vec![v],
                session: SessionConfig::default().with_requests(),
                ..Default::default()
            })
            .unwrap();
            let url = format!("moqt://localhost:{}/", relay.local_addr().port());
            let session = client.connect(&url).await.unwrap();
            let incoming = session.incoming();
            let count = forwarded.clone();
            session.spawn(async move {
                while let Some(req) = incoming.next().await {
                    count.fetch_add(1, Ordering::SeqCst);
                    drop(req);
                }
            });
            let announced = session
                .publish_namespace(TrackNamespace::empty())
                .await
                .unwrap();
            (session, announced)
        })
        .await;
        let raw = case(Raw::connect(&relay, v)).await;
        for (what, msg) in requests() {
            case(async {
                match raw.request(msg).await {
                    Message::RequestError(e) => assert_eq!(
                        e.code,
                        RequestErrorCode::DOES_NOT_EXIST,
                        "{what} at {v}: {}",
                        e.reason
                    ),
                    m => panic!("{what} at {v}: answered {}", m.name()),
                }
            })
            .await;
        }
        assert_eq!(forwarded.load(Ordering::SeqCst), 0, "forwarded at {v}");
        assert!(
            relay
                .namespaces()
                .matching(&TrackNamespace::empty())
                .iter()
                .all(|n| !n.is_reserved()),
            "announced at {v}"
        );
        drop(publisher);
    }
}
