//! A raw peer that gets namespace discovery wrong: NAMESPACE / NAMESPACE_DONE out of order,
//! REQUEST_OK twice or with contents, response streams ending, oversized prefixes, prefix updates,
//! cancelled PUBLISH_NAMESPACE (draft-19 §6, §10.15-§10.18).

use std::time::Duration;

use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::message::{
    Message, Namespace, NamespaceDone, Parameters, PublishNamespace, RequestError, RequestOk,
};
use moq_core::{Location, Properties};
use moq_transport::Error;
use moq_transport::namespace::{NamespaceEvent, NamespaceSubscription};

use crate::common::raw::{encode, frame, put_namespace, put_vi, vi};
use crate::common::{case, timeout};
use crate::support::{
    PROTOCOL_VIOLATION, SUBSCRIBE_NAMESPACE, V19, assert_closed_with, expect_close, ns, our_client,
    quic_code, raw_client,
};

async fn next_event(sub: &mut NamespaceSubscription) -> NamespaceEvent {
    sub.next()
        .await
        .expect("subscription ended")
        .expect("subscription failed")
}

/// draft-19 §10.18: a NAMESPACE_DONE for a suffix the publisher never sent in NAMESPACE closes
/// the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn namespace_done_before_its_namespace() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let (sub, _streams) = tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
            let (mut send, recv, first) = raw.accept_request().await;
            assert!(
                matches!(&first, Message::SubscribeNamespace(m) if m.request_id == 0),
                "{first:?}"
            );
            let mut bytes = encode(RequestOk::default(), V19);
            bytes.extend(encode(
                NamespaceDone {
                    suffix: ns(&["never"]),
                },
                V19,
            ));
            send.write_all(&bytes).await.unwrap();
            (send, recv)
        });
        let mut sub = sub.unwrap();
        let err = sub.next().await.expect("an error item").unwrap_err();
        assert_closed_with(&err, PROTOCOL_VIOLATION);
        assert!(sub.next().await.is_none());
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "NAMESPACE_DONE").await;
    })
    .await;
}

/// draft-19 §10.18: the first message on a SUBSCRIBE_NAMESPACE response stream must be
/// REQUEST_OK or REQUEST_ERROR; a NAMESPACE first closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn namespace_before_request_ok() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let (res, _streams) = tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
            let (mut send, recv, _) = raw.accept_request().await;
            let bytes = encode(
                Namespace {
                    suffix: ns(&["x"]),
                    cluster: None,
                },
                V19,
            );
            send.write_all(&bytes).await.unwrap();
            (send, recv)
        });
        assert_closed_with(&res.unwrap_err(), PROTOCOL_VIOLATION);
        expect_close(
            &raw,
            &session,
            PROTOCOL_VIOLATION,
            "NAMESPACE before the response",
        )
        .await;
    })
    .await;
}

/// draft-19 §6.2: PUBLISH_NAMESPACE gets exactly one REQUEST_OK or REQUEST_ERROR and the
/// publisher SHOULD close the session on more; ours closes it with PROTOCOL_VIOLATION on a
/// second REQUEST_OK with no REQUEST_UPDATE outstanding.
#[tokio::test]
async fn second_request_ok_for_publish_namespace() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let (res, _streams) = tokio::join!(session.publish_namespace(ns(&["p"])), async {
            let (mut send, recv, first) = raw.accept_request().await;
            assert!(
                matches!(&first, Message::PublishNamespace(m) if m.namespace == ns(&["p"])),
                "{first:?}"
            );
            let mut bytes = encode(RequestOk::default(), V19);
            bytes.extend(encode(RequestOk::default(), V19));
            send.write_all(&bytes).await.unwrap();
            (send, recv)
        });
        let published = res.unwrap();
        assert_closed_with(&published.ended().await, PROTOCOL_VIOLATION);
        assert!(!published.is_active());
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "second REQUEST_OK").await;
    })
    .await;
}

/// draft-19 §10.2.1, §10.5: a REQUEST_OK answering SUBSCRIBE_NAMESPACE may carry only the
/// parameters listed for SUBSCRIBE_NAMESPACE_OK (not LARGEST_OBJECT) and no Track Properties
/// (those belong to TRACK_STATUS_OK); either closes the session with PROTOCOL_VIOLATION.
#[tokio::test]
async fn request_ok_with_contents_not_allowed_for_its_request() {
    timeout(async {
        let largest = RequestOk {
            params: Parameters {
                largest_object: Some(Location {
                    group: 1,
                    object: 0,
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let with_properties = RequestOk {
            track_properties: Properties::new().with_int(0x3e, 1).unwrap(),
            ..Default::default()
        };
        for (ok, hint) in [
            (largest, "0x9 may not appear"),
            (with_properties, "track properties"),
        ] {
            let (session, raw, _srv) = our_client(V19).await;
            let (res, _streams) = tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
                let (mut send, recv, _) = raw.accept_request().await;
                send.write_all(&encode(ok, V19)).await.unwrap();
                (send, recv)
            });
            assert_closed_with(&res.unwrap_err(), PROTOCOL_VIOLATION);
            expect_close(&raw, &session, PROTOCOL_VIOLATION, hint).await;
        }
    })
    .await;
}

/// draft-19 §10.18: a FIN or RESET_STREAM on the SUBSCRIBE_NAMESPACE response stream SHOULD count
/// as a NAMESPACE_DONE for every active namespace; the subscription then ends (after a reset,
/// with the reset code as its last item) and the session stays open.
#[tokio::test]
async fn response_stream_end_removes_every_namespace() {
    timeout(async {
        for reset in [true, false] {
            let (session, raw, _srv) = our_client(V19).await;
            let (sub, (mut send, _recv)) =
                tokio::join!(session.subscribe_namespace(ns(&["a"])), async {
                    let (mut send, recv, _) = raw.accept_request().await;
                    let mut bytes = encode(RequestOk::default(), V19);
                    bytes.extend(encode(Namespace { suffix: ns(&["x"]), cluster: None }, V19));
                    bytes.extend(encode(Namespace { suffix: ns(&["y"]), cluster: None }, V19));
                    send.write_all(&bytes).await.unwrap();
                    (send, recv)
                });
            let mut sub = sub.unwrap();
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Added(ns(&["a", "x"]))
            );
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Added(ns(&["a", "y"]))
            );
            // Both NAMESPACEs have been read, so a reset cannot discard them in flight.
            if reset {
                send.reset(quic_code(StreamResetCode::EXPIRED_AUTH_TOKEN))
                    .unwrap();
            } else {
                send.finish().unwrap();
            }
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Removed(ns(&["a", "x"]))
            );
            assert_eq!(
                next_event(&mut sub).await,
                NamespaceEvent::Removed(ns(&["a", "y"]))
            );
            if reset {
                let err = sub.next().await.expect("the reset code").unwrap_err();
                assert!(
                    matches!(err, Error::Cancelled(StreamResetCode::EXPIRED_AUTH_TOKEN)),
                    "{err:?}"
                );
            }
            assert!(sub.next().await.is_none(), "reset={reset}");

            // The session is still open: a new request gets its answer.
            assert!(session.close_reason().is_none(), "reset={reset}");
            let (res, _streams) = tokio::join!(session.subscribe_namespace(ns(&["b"])), async {
                let (mut send, recv, _) = raw.accept_request().await;
                let refusal = RequestError::new(RequestErrorCode::DOES_NOT_EXIST, "none");
                send.write_all(&encode(refusal, V19)).await.unwrap();
                send.finish().unwrap();
                (send, recv)
            });
            assert!(
                matches!(res, Err(Error::Rejected(ref e)) if e.code == RequestErrorCode::DOES_NOT_EXIST),
                "{res:?}"
            );
            assert!(raw.is_open());
        }
    })
    .await;
}

/// draft-19 §2.4.1, §10.18: a Track Namespace Prefix has at most 32 fields; 33 closes the
/// session with PROTOCOL_VIOLATION (32 is accepted).
#[tokio::test]
async fn prefix_of_33_fields() {
    timeout(async {
        let (raw, session, _srv) = raw_client(V19).await;
        let prefix = |id: u64, n: usize| {
            let mut body = vi(id);
            put_namespace(&mut body, &vec![&b"f"[..]; n]);
            put_vi(&mut body, 0);
            frame(SUBSCRIBE_NAMESPACE, &body)
        };
        let (_send, mut resp) = raw.open_request(&prefix(0, 32)).await;
        assert!(matches!(resp.expect().await, Message::RequestOk(_)));
        let _request = raw.open_request(&prefix(2, 33)).await;
        expect_close(&raw, &session, PROTOCOL_VIOLATION, "33 fields").await;
    })
    .await;
}

/// draft-19 §10.9.2: after a TRACK_NAMESPACE_PREFIX update is accepted, NAMESPACE_DONE
/// suffixes are relative to the new prefix; one for a namespace announced under the old
/// prefix and still under the new one is valid (it was active), not a PROTOCOL_VIOLATION.
/// Namespaces outside the new prefix are reported removed at the move.
#[tokio::test]
async fn namespace_done_after_a_prefix_update() {
    timeout(async {
        let (session, raw, _srv) = our_client(V19).await;
        let pending = {
            let s = session.clone();
            tokio::spawn(async move { s.subscribe_namespace(ns(&["a"])).await })
        };
        let (mut send, mut reader, _first) = raw.accept_request().await;
        let ok = RequestOk {
            params: Parameters::default(),
            track_properties: Properties::new(),
        };
        send.write_all(&encode(ok.clone(), V19)).await.unwrap();
        let mut sub = pending.await.unwrap().unwrap();
        for suffix in [ns(&["b", "c"]), ns(&["x"])] {
            send.write_all(&encode(
                Namespace {
                    suffix,
                    cluster: None,
                },
                V19,
            ))
            .await
            .unwrap();
        }
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Added(ns(&["a", "b", "c"]))
        );
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Added(ns(&["a", "x"]))
        );
        let update = {
            let new = ns(&["a", "b"]);
            let answer = async {
                assert!(matches!(reader.expect().await, Message::RequestUpdate(_)));
                send.write_all(&encode(ok.clone(), V19)).await.unwrap();
            };
            let (r, ()) = tokio::join!(sub.update_prefix(new), answer);
            r
        };
        update.unwrap();
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Removed(ns(&["a", "x"]))
        );
        let done = NamespaceDone { suffix: ns(&["c"]) };
        send.write_all(&encode(done, V19)).await.unwrap();
        assert_eq!(
            next_event(&mut sub).await,
            NamespaceEvent::Removed(ns(&["a", "b", "c"]))
        );
        assert!(session.close_reason().is_none() && raw.is_open());
    })
    .await;
}

/// draft-19 §3.3.3: a peer cancels its accepted PUBLISH_NAMESPACE by terminating the directions
/// still open: RESET_STREAM on its half (with STOP_SENDING on ours), or, after it finished its
/// half with a FIN, STOP_SENDING alone. Either way our side ends the request and the namespace
/// leaves the session's `announced` index. (Our side watches STOP_SENDING
/// only once the peer's half ended: while it is open, the reset is what it reads.)
#[tokio::test]
async fn publish_namespace_cancelled_by_reset_or_by_stop_after_fin() {
    for fin_first in [false, true] {
        case(format!("fin_first={fin_first}"), async {
            let (raw, session, _srv) = raw_client(V19).await;
            let name = ns(&["cancel"]);
            let (_, mut watch) = session.announced().watch(&name, 8);
            let first = PublishNamespace {
                request_id: 0,
                namespace: name.clone(),
                params: Default::default(),
            };
            let (mut send, mut resp) = raw.open_request(&encode(first, V19)).await;
            assert!(matches!(resp.expect().await, Message::RequestOk(_)));
            assert_eq!(
                watch.next().await,
                Some(NamespaceEvent::Added(name.clone()))
            );
            let code = StreamResetCode::CANCELLED;
            if fin_first {
                send.finish().unwrap();
                // Let the FIN be read before the STOP_SENDING (a FIN alone ends nothing).
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert!(
                    session.announced().contains(&name),
                    "a FIN alone ends nothing"
                );
            } else {
                send.reset(quic_code(code)).unwrap();
            }
            resp.recv.stop(quic_code(code)).unwrap();
            assert_eq!(
                watch.next().await,
                Some(NamespaceEvent::Removed(name.clone()))
            );
            assert!(raw.is_open(), "cancelling a request keeps the session");
        })
        .await;
    }
}
