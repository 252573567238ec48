//! Reserved namespaces (draft-19 §3.2.1-2; draft-22 §2.4.3, §6.5): from draft-18 on, a raw
//! peer's request naming a namespace whose first field is exactly "." or ".session" (no
//! session-level track or namespace is defined) is refused with REQUEST_ERROR DOES_NOT_EXIST
//! by the session itself, for every request kind, and never reaches the application or the
//! session's namespace indexes. Before draft-18 these are ordinary names.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::raw::{MsgReader, RawConn, encode};
use common::{TestServer, timeout};
use moq_core::codes::RequestErrorCode;
use moq_core::message::{
    Fetch, FetchType, Message, Parameters, Publish, PublishNamespace, Subscribe,
    SubscribeNamespace, SubscribeTracks, TrackStatus,
};
use moq_core::{FullTrackName, Location, Properties, TrackNamespace, Version};
use moq_transport::{Session, SessionConfig};

fn ns(f: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(f.iter().copied()).unwrap()
}

/// One request of each kind on a reserved name, with Request ID `id` (also the PUBLISH's
/// Track Alias).
fn requests(id: &mut u64, v: Version) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let params = Parameters::default;
    // Tracks: under ".", under an unknown ".session" namespace, and ".session"'s empty name.
    let tracks = [
        (ns(&["."]), "t"),
        (ns(&[".", "x"]), "t"),
        (ns(&[".session", "x"]), "t"),
        (ns(&[".session"]), "t"),
        (ns(&[".session"]), ""),
    ];
    for (n, name) in tracks {
        let track = FullTrackName::new(n, name).unwrap();
        let mut next = || {
            let i = *id;
            *id += 2;
            i
        };
        out.push((
            format!("SUBSCRIBE {track}"),
            encode(
                Subscribe {
                    request_id: next(),
                    track: track.clone(),
                    params: params(),
                },
                v,
            ),
        ));
        out.push((
            format!("FETCH {track}"),
            encode(
                Fetch {
                    request_id: next(),
                    fetch_type: FetchType::Standalone {
                        track: track.clone(),
                        start: Location::new(0, 0),
                        end: Location::new(1, 0),
                    },
                    params: params(),
                },
                v,
            ),
        ));
        out.push((
            format!("TRACK_STATUS {track}"),
            encode(
                TrackStatus {
                    request_id: next(),
                    track: track.clone(),
                    params: params(),
                },
                v,
            ),
        ));
        let request_id = next();
        out.push((
            format!("PUBLISH {track}"),
            encode(
                Publish {
                    request_id,
                    track: track.clone(),
                    track_alias: request_id,
                    params: params(),
                    track_properties: Properties::new(),
                },
                v,
            ),
        ));
    }
    // Namespaces and prefixes.
    for n in [
        ns(&["."]),
        ns(&[".", "x"]),
        ns(&[".session"]),
        ns(&[".session", "x"]),
    ] {
        let mut next = || {
            let i = *id;
            *id += 2;
            i
        };
        out.push((
            format!("PUBLISH_NAMESPACE {n}"),
            encode(
                PublishNamespace {
                    request_id: next(),
                    namespace: n.clone(),
                    params: params(),
                },
                v,
            ),
        ));
        out.push((
            format!("SUBSCRIBE_NAMESPACE {n}"),
            encode(
                SubscribeNamespace {
                    request_id: next(),
                    prefix: n.clone(),
                    params: params(),
                },
                v,
            ),
        ));
        out.push((
            format!("SUBSCRIBE_TRACKS {n}"),
            encode(
                SubscribeTracks {
                    request_id: next(),
                    prefix: n.clone(),
                    params: params(),
                },
                v,
            ),
        ));
    }
    out
}

/// A server session that takes track requests and counts those handed to it.
async fn counting_server(v: Version) -> (RawConn, Session, Arc<AtomicUsize>, TestServer) {
    let mut srv = TestServer::start(SessionConfig::default().with_requests());
    let (raw, _, session) = RawConn::to_server(&mut srv, v).await;
    let seen = Arc::new(AtomicUsize::new(0));
    let incoming = session.incoming();
    let count = seen.clone();
    session.spawn(async move {
        while let Some(req) = incoming.next().await {
            count.fetch_add(1, Ordering::SeqCst);
            drop(req);
        }
    });
    (raw, session, seen, srv)
}

async fn first_answer(resp: &mut MsgReader) -> Message {
    resp.expect().await
}

#[tokio::test]
async fn reserved_namespaces_do_not_exist() {
    for &v in Version::ALL.iter().filter(|v| v.has_reserved_namespaces()) {
        let (raw, session, seen, srv) = timeout(counting_server(v)).await;
        let mut id = 0;
        for (what, bytes) in requests(&mut id, v) {
            timeout(async {
                let (_send, mut resp) = raw.open_request(&bytes).await;
                match first_answer(&mut resp).await {
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
        assert!(raw.is_open(), "the session survives at {v}");
        assert_eq!(seen.load(Ordering::SeqCst), 0, "handed to the app at {v}");
        assert!(srv.sessions[0].announced().is_empty(), "announced at {v}");
        drop(session);
    }
}

/// Before draft-18 nothing is reserved: "." is an ordinary name.
#[tokio::test]
async fn dot_is_an_ordinary_name_before_draft_18() {
    for &v in Version::ALL
        .iter()
        .filter(|v| !v.has_reserved_namespaces() && !v.single_control_stream())
    {
        timeout(async {
            let (raw, _session, _seen, srv) = counting_server(v).await;
            let bytes = encode(
                PublishNamespace {
                    request_id: 0,
                    namespace: ns(&[".", "x"]),
                    params: Parameters::default(),
                },
                v,
            );
            let (_send, mut resp) = raw.open_request(&bytes).await;
            let m = first_answer(&mut resp).await;
            assert!(matches!(m, Message::RequestOk(_)), "{}", m.name());
            assert!(srv.sessions[0].announced().contains(&ns(&[".", "x"])));
        })
        .await;
    }
}
