//! Every request gets an answer (draft-19 §3.3.2: the responder sends exactly one first
//! response): for each request kind, in each role, whatever the configuration — no handler,
//! a handler that drops requests, limits reached, going away — a raw peer that sends the
//! request receives REQUEST_OK / SUBSCRIBE_OK / FETCH_OK or a REQUEST_ERROR with the code the
//! draft names, never silence.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::raw::{RawConn, RawServer, encode, raw_setup};
use common::{TestServer, case};
use moq_core::codes::RequestErrorCode as Code;
use moq_core::message::{
    Fetch, FetchType, Message, Parameters, Publish, PublishNamespace, Subscribe,
    SubscribeNamespace, SubscribeTracks, TrackStatus,
};
use moq_core::{FullTrackName, Location, Properties, TrackNamespace, Version};
use moq_transport::Limits;
use moq_transport::{Session, SessionConfig};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Subscribe,
    Fetch,
    TrackStatus,
    Publish,
    PublishNamespace,
    SubscribeNamespace,
    SubscribeTracks,
}

const KINDS: [Kind; 7] = [
    Kind::Subscribe,
    Kind::Fetch,
    Kind::TrackStatus,
    Kind::Publish,
    Kind::PublishNamespace,
    Kind::SubscribeNamespace,
    Kind::SubscribeTracks,
];

/// The configurations a responder may be in.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Setup {
    /// The application takes no track requests.
    NoHandler,
    /// The application takes them and drops each unanswered.
    Drops,
    /// Every limit at zero.
    NoRoom,
    /// The responder sent GOAWAY.
    GoingAway,
}

fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

/// `kind`'s request with Request ID `id`, each on its own names so none collides.
fn request(kind: Kind, id: u64, v: Version) -> Vec<u8> {
    let n = ns(&["answers", &format!("{id}")]);
    let track = FullTrackName::new(n.clone(), "t").unwrap();
    let params = Parameters::default();
    match kind {
        Kind::Subscribe => encode(
            Subscribe {
                request_id: id,
                track,
                params,
            },
            v,
        ),
        Kind::Fetch => encode(
            Fetch {
                request_id: id,
                fetch_type: FetchType::Standalone {
                    track,
                    start: Location::new(0, 0),
                    end: Location::new(1, 0),
                },
                params,
            },
            v,
        ),
        Kind::TrackStatus => encode(
            TrackStatus {
                request_id: id,
                track,
                params,
            },
            v,
        ),
        Kind::Publish => encode(
            Publish {
                request_id: id,
                track,
                track_alias: id,
                params,
                track_properties: Properties::new(),
            },
            v,
        ),
        Kind::PublishNamespace => encode(
            PublishNamespace {
                request_id: id,
                namespace: n,
                params,
            },
            v,
        ),
        Kind::SubscribeNamespace => encode(
            SubscribeNamespace {
                request_id: id,
                prefix: n,
                params,
            },
            v,
        ),
        Kind::SubscribeTracks => encode(
            SubscribeTracks {
                request_id: id,
                prefix: n,
                params,
            },
            v,
        ),
    }
}

fn config(setup: Setup) -> SessionConfig {
    match setup {
        Setup::NoHandler | Setup::GoingAway => SessionConfig::default(),
        Setup::Drops => SessionConfig::default().with_requests(),
        Setup::NoRoom => SessionConfig::default()
            .with_requests()
            .with_limits(Limits {
                max_namespace_subscriptions: 0,
                max_track_subscriptions: 0,
                max_published_namespaces: 0,
                ..Limits::default()
            }),
    }
}

/// Puts our `session` in `setup` (its config is already [`config`]).
async fn prepare(session: &Session, setup: Setup) {
    match setup {
        Setup::GoingAway => session.goaway("", Duration::ZERO).await.unwrap(),
        Setup::Drops | Setup::NoRoom => {
            let incoming = session.incoming();
            session.spawn(async move { while incoming.next().await.is_some() {} });
        }
        Setup::NoHandler => {}
    }
}

/// The code the draft names for `kind` refused in `setup`; `None` where the request is
/// accepted.
fn expected(kind: Kind, setup: Setup) -> Option<Code> {
    use Kind as K;
    match (setup, kind) {
        // draft-19 §10.4: new requests after GOAWAY are refused with GOING_AWAY.
        (Setup::GoingAway, _) => Some(Code::GOING_AWAY),
        // Discovery is answered by the session itself.
        (Setup::NoHandler | Setup::Drops, K::SubscribeNamespace | K::PublishNamespace) => None,
        (Setup::NoRoom, K::SubscribeNamespace | K::PublishNamespace | K::SubscribeTracks) => {
            Some(Code::EXCESSIVE_LOAD)
        }
        (Setup::NoRoom, K::Subscribe | K::Fetch | K::TrackStatus | K::Publish) => {
            expected(kind, Setup::Drops)
        }
        // draft-19 §10.10: a PUBLISH nobody wants is UNINTERESTED.
        (_, K::Publish) => Some(Code::UNINTERESTED),
        (Setup::NoHandler, K::SubscribeTracks) => Some(Code::NOT_SUPPORTED),
        (Setup::Drops, K::SubscribeTracks) => Some(Code::NOT_SUPPORTED),
        (Setup::NoHandler, _) => Some(Code::DOES_NOT_EXIST),
        // Taken and dropped unanswered.
        (Setup::Drops, _) => Some(Code::INTERNAL_ERROR),
    }
}

/// Sends every kind of request from `raw` (IDs of `parity`) and checks each answer.
async fn check_all(raw: &RawConn, setup: Setup, parity: u64, role: &str) {
    let v = raw.version;
    for (i, kind) in KINDS.into_iter().enumerate() {
        let id = 2 * i as u64 + parity;
        let (_send, mut resp) = raw.open_request(&request(kind, id, v)).await;
        let got = match resp.expect().await {
            Message::RequestError(e) => Some(e.code),
            Message::RequestOk(_) | Message::SubscribeOk(_) | Message::FetchOk(_) => None,
            m => panic!("{role} {setup:?} {kind:?}: {}", m.name()),
        };
        assert_eq!(
            got,
            expected(kind, setup),
            "{role} {setup:?} {kind:?} at {v}"
        );
    }
}

#[tokio::test]
async fn every_request_gets_an_answer() {
    for v in [Version::Draft18, Version::Draft19] {
        for setup in [
            Setup::NoHandler,
            Setup::Drops,
            Setup::NoRoom,
            Setup::GoingAway,
        ] {
            case(format!("{v:?} {setup:?}"), async {
                // Our server answers a raw client (even Request IDs).
                let mut srv = TestServer::start(config(setup));
                let (raw, _, session) = RawConn::to_server(&mut srv, v).await;
                prepare(&session, setup).await;
                check_all(&raw, setup, 0, "server").await;

                // Our client answers a raw server (odd Request IDs).
                let raw_srv = RawServer::start(&[v]);
                let client = raw_srv.client_with(vec![v], config(setup));
                let (session, raw) = raw_srv.connect(&client, raw_setup()).await;
                let session = session.unwrap();
                prepare(&session, setup).await;
                check_all(&raw, setup, 1, "client").await;
            })
            .await;
        }
    }
}
