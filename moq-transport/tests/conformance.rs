//! Session rules that independent black-box checks found broken (issue 33), each over raw QUIC
//! on loopback against one of our servers, at every draft the rule exists in, one timeout per
//! case.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::time::Duration;

use common::TestServer;
use common::raw::{RawConn, encode};
use moq_core::codes::SessionErrorCode;
use moq_core::message::{Parameters, RequestUpdate, TrackStatus};
use moq_core::{FullTrackName, TrackNamespace, Version};
use moq_transport::SessionConfig;
use moq_transport::track::{Incoming, TrackStatusInfo};

/// The longest one case may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one case, failing the test after [`CASE_TIMEOUT`].
async fn case<F: std::future::Future>(what: impl std::fmt::Display, f: F) -> F::Output {
    match tokio::time::timeout(CASE_TIMEOUT, f).await {
        Ok(out) => out,
        Err(_) => panic!("{what}: timed out"),
    }
}

fn name() -> FullTrackName {
    FullTrackName::new(TrackNamespace::from_strs(["a"]).unwrap(), "t").unwrap()
}

/// draft-22 §9.5 (draft-19 §10.9, draft-21 §9.5): "An endpoint that receives a REQUEST_UPDATE
/// other than in the two cases above MUST close the session with a PROTOCOL_VIOLATION", and the
/// sender of TRACK_STATUS "cannot send REQUEST_UPDATE" (§9.13). A TRACK_STATUS with a
/// REQUEST_UPDATE right behind it, in one write, closes the session every time, whether the
/// session answers the TRACK_STATUS itself (no application takes requests: at once) or the
/// application answers it at once; never a TRACK_STATUS_OK or REQUEST_ERROR with the update left
/// unread. At every draft with a stream per request (17 on); 5 rounds each.
#[tokio::test]
async fn request_update_behind_track_status_in_one_write_closes() {
    common::init_tracing();
    let versions = Version::ALL.iter().filter(|v| !v.single_control_stream());
    for &v in versions {
        for app_answers in [false, true] {
            for round in 0..5 {
                case(
                    format!("{v} app_answers={app_answers} round {round}"),
                    async {
                        let config = if app_answers {
                            SessionConfig::default().with_requests()
                        } else {
                            SessionConfig::default()
                        };
                        let mut srv = TestServer::start_with(config, vec![v]);
                        let (raw, _, session) = RawConn::to_server(&mut srv, v).await;
                        if app_answers {
                            let session = session.clone();
                            tokio::spawn(async move {
                                while let Some(r) = session.incoming().next().await {
                                    if let Incoming::TrackStatus(s) = r {
                                        s.accept(TrackStatusInfo {
                                            largest: None,
                                            expires: None,
                                            track_properties: Default::default(),
                                        });
                                    }
                                }
                            });
                        }
                        let status = TrackStatus {
                            request_id: 0,
                            track: name(),
                            params: Parameters::default(),
                        };
                        let update = RequestUpdate {
                            request_id: 2,
                            params: Parameters::default(),
                        };
                        let mut bytes = encode(status, v);
                        bytes.extend(encode(update, v));
                        let _request = raw.open_request(&bytes).await;
                        let (code, reason) = raw.closed().await;
                        assert_eq!(code, SessionErrorCode::PROTOCOL_VIOLATION, "{v}: {reason}");
                        assert!(reason.contains("REQUEST_UPDATE"), "{v}: {reason}");
                    },
                )
                .await;
            }
        }
    }
}

/// draft-19 §10.13 (FETCH_OK in draft-14 and draft-16): an End Location smaller than the Start
/// Location of the corresponding FETCH closes the session with PROTOCOL_VIOLATION, for an
/// Absolute Joining FETCH too, whose start ({Joining Start, 0}) the requester knows: a publisher
/// that answers one starting at group 2 with an end of {1, 5} (exclusive: before {2, 0}) is
/// closed on. At every draft with Joining FETCH (until 19), over raw QUIC.
#[tokio::test]
async fn joining_fetch_ok_ending_before_the_start_closes() {
    use moq_core::Location;
    use moq_core::message::FetchType;
    use moq_transport::track::{FetchEnd, SubscribeResponse};
    common::init_tracing();
    for &v in Version::ALL.iter().filter(|v| v.fetch_has_type()) {
        case(v, async {
            let mut srv = TestServer::start(SessionConfig::default().with_requests());
            let (client, server) = srv
                .connect(common::Transport::Quic, vec![v], SessionConfig::default())
                .await;
            let answer = {
                let server = server.clone();
                tokio::spawn(async move {
                    let mut writer = None;
                    while let Some(r) = server.incoming().next().await {
                        match r {
                            Incoming::Subscribe(s) => {
                                let response = SubscribeResponse {
                                    largest: Some(Location::new(3, 0)),
                                    ..Default::default()
                                };
                                writer = Some(s.accept(response).await.unwrap());
                            }
                            Incoming::Fetch(f) => {
                                assert_eq!(f.start(), Location::new(2, 0));
                                let end = FetchEnd {
                                    end_of_track: false,
                                    end: Location::new(1, 5),
                                    track_properties: Default::default(),
                                };
                                let _ = f.accept(end).await;
                            }
                            _ => {}
                        }
                    }
                    drop(writer);
                })
            };
            let sub = client
                .subscribe(name(), Parameters::default())
                .await
                .unwrap();
            let request = FetchType::AbsoluteJoining {
                joining_request_id: sub.request_id(),
                joining_start: 2,
            };
            let res = client.fetch(request, Parameters::default()).await;
            let err = res.expect_err("FETCH_OK before the start accepted");
            assert_eq!(
                err.session_code(),
                SessionErrorCode::PROTOCOL_VIOLATION,
                "{v}: {err}"
            );
            assert!(err.to_string().contains("End Location"), "{v}: {err}");
            answer.abort();
        })
        .await;
    }
}

/// draft-22 §9.2 (draft-19 §10.4): "If a server receives a GOAWAY with a non-zero New Session
/// URI Length it MUST close the session with a PROTOCOL_VIOLATION", on a request stream too
/// (GOAWAY on request streams from draft-18): a client answering our server's SUBSCRIBE with a
/// GOAWAY to another URI is closed on, never moved. At drafts 18-22.
#[tokio::test]
async fn client_goaway_with_a_uri_on_a_request_stream() {
    use moq_core::message::Goaway;
    common::init_tracing();
    for &v in Version::ALL.iter().filter(|v| v.draft() >= 18) {
        case(v, async {
            let mut srv = TestServer::start_with(SessionConfig::default(), vec![v]);
            let (raw, _, session) = RawConn::to_server(&mut srv, v).await;
            let pending = {
                let s = session.clone();
                tokio::spawn(async move { s.subscribe(name(), Parameters::default()).await })
            };
            let (mut send, _reader, _first) = raw.accept_request().await;
            let goaway = Goaway {
                new_session_uri: bytes::Bytes::from_static(b"moqt://elsewhere.example/"),
                timeout_ms: 0,
                request_id: None,
            };
            send.write_all(&encode(goaway, v)).await.unwrap();
            let (code, reason) = raw.closed().await;
            assert_eq!(code, SessionErrorCode::PROTOCOL_VIOLATION, "{v}: {reason}");
            assert!(reason.contains("New Session URI"), "{v}: {reason}");
            let err = pending.await.unwrap().unwrap_err();
            assert_eq!(err.session_code(), SessionErrorCode::PROTOCOL_VIOLATION);
        })
        .await;
    }
}

/// draft-22 §6.2 (draft-14 on, "Session establishment"): "The QUIC DATAGRAM extension MUST be
/// supported and negotiated in the QUIC connection used for MOQT". A raw QUIC client whose
/// transport parameters lack max_datagram_frame_size gets no session: our server closes the
/// connection with PROTOCOL_VIOLATION (the draft names no code) before any MOQT stream, and
/// accepts no session. At every draft (each is offered alone by ALPN).
#[tokio::test]
async fn a_client_without_quic_datagrams_is_refused() {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::sync::Arc;
    common::init_tracing();
    for &v in Version::ALL {
        case(v, async {
            let srv = TestServer::start_with(SessionConfig::default(), vec![v]);
            let tls = moq_transport::tls::ClientTls::pinned(srv.cert.fingerprint())
                .client_config(&[v.alpn()])
                .unwrap();
            let quic = quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap();
            let mut cfg = quinn::ClientConfig::new(Arc::new(quic));
            let mut transport = moq_transport::endpoint::transport_config();
            // No max_datagram_frame_size transport parameter: DATAGRAM not negotiated.
            transport.datagram_receive_buffer_size(None);
            cfg.transport_config(Arc::new(transport));
            let endpoint =
                quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
            let server = SocketAddr::from((Ipv4Addr::LOCALHOST, srv.port()));
            let conn = endpoint
                .connect_with(cfg, server, "localhost")
                .unwrap()
                .await
                .unwrap();
            match conn.closed().await {
                quinn::ConnectionError::ApplicationClosed(c) => {
                    let code = SessionErrorCode(c.error_code.into_inner());
                    assert_eq!(code, SessionErrorCode::PROTOCOL_VIOLATION, "{v}");
                    let reason = String::from_utf8_lossy(&c.reason);
                    assert!(reason.contains("DATAGRAM"), "{v}: {reason}");
                }
                e => panic!("{v}: expected an application close, got {e:?}"),
            }
        })
        .await;
    }
}

/// The same rule from the client's side: our client refuses a raw QUIC server that does not
/// negotiate QUIC DATAGRAM (`connect` fails, the connection is closed with
/// PROTOCOL_VIOLATION). At every draft.
#[tokio::test]
async fn a_server_without_quic_datagrams_is_refused() {
    use std::sync::Arc;
    common::init_tracing();
    for &v in Version::ALL {
        case(v, async {
            let raw = common::raw::RawServer::start(&[v]);
            let tls = moq_transport::tls::server_config(&raw.cert, &[v.alpn()]).unwrap();
            let quic = quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap();
            let mut cfg = quinn::ServerConfig::with_crypto(Arc::new(quic));
            let mut transport = moq_transport::endpoint::transport_config();
            transport.datagram_receive_buffer_size(None);
            cfg.transport_config(Arc::new(transport));
            raw.endpoint.set_server_config(Some(cfg));
            let client = raw.client(vec![v]);
            let url = raw.url();
            let (res, conn) = tokio::join!(client.connect(&url), async {
                raw.endpoint.accept().await.unwrap().await.unwrap()
            });
            let err = res.expect_err("a session without QUIC DATAGRAM");
            assert!(err.to_string().contains("DATAGRAM"), "{v}: {err}");
            match conn.closed().await {
                quinn::ConnectionError::ApplicationClosed(c) => {
                    let code = SessionErrorCode(c.error_code.into_inner());
                    assert_eq!(code, SessionErrorCode::PROTOCOL_VIOLATION, "{v}");
                }
                e => panic!("{v}: expected an application close, got {e:?}"),
            }
        })
        .await;
    }
}
