//! The session driver: accepts the peer's streams and datagrams and dispatches them.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use moq_core::codes::{RequestErrorCode, StreamResetCode};
use moq_core::coding::Vi64;
use moq_core::data::{Datagram, StreamType};
use moq_core::message::{ControlMessage, Message, RequestError, RequestUpdate, peek_request_id};

use super::stream::{Frame, Reader, Writer};
use super::{SessionInner, going_away, lock};
use crate::error::Error;
use crate::namespace::{serve_publish_namespace, serve_subscribe_namespace};
use crate::track;
use crate::transport::{BoxRecvStream, BoxSendStream, TransportError};

/// Starts the tasks that watch the connection and accept the peer's streams and datagrams.
pub(super) fn spawn(inner: Arc<SessionInner>) {
    tokio::spawn(watch_connection(inner.clone()));
    tokio::spawn(accept_uni(inner.clone()));
    tokio::spawn(accept_bi(inner.clone()));
    tokio::spawn(recv_datagrams(inner));
}

/// Reads the control stream after SETUP: only GOAWAY may follow (draft-19 §10).
pub(super) fn spawn_control_reader(inner: Arc<SessionInner>, mut reader: Reader) {
    tokio::spawn(async move {
        loop {
            let res = tokio::select! {
                r = reader.next() => r,
                _ = inner.closed() => return,
            };
            let err = match res {
                Ok(Some(Message::Goaway(g))) => match inner.on_goaway(g) {
                    Ok(()) => continue,
                    Err(e) => e,
                },
                Ok(Some(Message::Setup(_))) => {
                    Error::protocol("second SETUP on the control stream")
                }
                Ok(Some(m)) => Error::protocol(format!("{} on the control stream", m.name())),
                // draft-19 §3.3: closing a control stream is a PROTOCOL_VIOLATION.
                Ok(None) => Error::protocol("the peer closed its control stream"),
                Err(Error::Cancelled(_)) => Error::protocol("the peer reset its control stream"),
                Err(e) => e,
            };
            inner.close(err);
            return;
        }
    });
}

async fn watch_connection(inner: Arc<SessionInner>) {
    tokio::select! {
        e = inner.conn.closed() => inner.close(e.into()),
        _ = inner.closed() => {}
    }
}

/// Ends the session because accepting failed (the connection is gone).
fn accept_failed(inner: &SessionInner, e: TransportError) {
    inner.close(e.into());
}

async fn accept_uni(inner: Arc<SessionInner>) {
    loop {
        let recv = tokio::select! {
            r = inner.conn.accept_uni() => r,
            _ = inner.closed() => return,
        };
        match recv {
            Ok(recv) => {
                tokio::spawn(handle_uni(inner.clone(), recv));
            }
            Err(e) => return accept_failed(&inner, e),
        }
    }
}

async fn accept_bi(inner: Arc<SessionInner>) {
    loop {
        let stream = tokio::select! {
            r = inner.conn.accept_bi() => r,
            _ = inner.closed() => return,
        };
        match stream {
            Ok((send, recv)) => {
                tokio::spawn(handle_bi(inner.clone(), send, recv));
            }
            Err(e) => return accept_failed(&inner, e),
        }
    }
}

/// Waits until SETUP is done, holding at most `max_pending_streams` streams meanwhile
/// (draft-19 §3.3: early streams SHOULD be buffered; a peer MAY reset them instead).
async fn wait_setup(inner: &SessionInner) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, ()> {
    if *inner.setup_done.borrow() {
        return Ok(None);
    }
    let permit = inner
        .pending_streams
        .clone()
        .try_acquire_owned()
        .map_err(|_| ())?;
    let mut rx = inner.setup_done.subscribe();
    tokio::select! {
        r = rx.wait_for(|done| *done) => r.map(|_| Some(permit)).map_err(|_| ()),
        _ = inner.closed() => Err(()),
    }
}

async fn handle_uni(inner: Arc<SessionInner>, mut recv: BoxRecvStream) {
    let v = inner.version;
    let mut buf = BytesMut::new();
    // Read until the stream type is known.
    let ty = loop {
        match StreamType::peek(&buf, v) {
            Ok(Some(t)) => break t,
            Ok(None) => {}
            Err(e) => return inner.close(e.into()),
        }
        let chunk = tokio::select! {
            r = recv.read_chunk(64 * 1024) => r,
            _ = inner.closed() => return,
        };
        match chunk {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            // A stream that ends or is reset before its type carries nothing.
            Ok(None) | Err(_) => return,
        }
    };
    match ty {
        StreamType::Control => {
            // draft-19 §3.3: one control stream per peer.
            if inner.control_seen.swap(true, Ordering::Relaxed) {
                return inner.close(Error::protocol("a second control stream"));
            }
            let mut reader = Reader::with_buffer(recv, v, &buf);
            let first = tokio::select! {
                r = reader.next() => r,
                _ = inner.closed() => return,
            };
            let res = match first {
                Ok(Some(Message::Setup(s))) => Ok((s.options, reader)),
                Ok(Some(m)) => Err(Error::protocol(format!(
                    "control stream starts with {}",
                    m.name()
                ))),
                Ok(None) | Err(Error::Cancelled(_)) => {
                    Err(Error::protocol("control stream closed before SETUP"))
                }
                Err(e) => Err(e),
            };
            if let Err(e) = &res {
                inner.close(e.clone());
            }
            if let Some(tx) = lock(&inner.setup_tx).take() {
                let _ = tx.send(res);
            }
        }
        StreamType::Padding => {
            // draft-19 §11.5.1: discard everything on a padding stream.
            while let Ok(Some(_)) = recv.read_chunk(64 * 1024).await {}
        }
        StreamType::Subgroup(_) | StreamType::Fetch => {
            let Ok(permit) = wait_setup(&inner).await else {
                recv.stop(StreamResetCode::EXCESSIVE_LOAD.0);
                return;
            };
            drop(permit);
            if ty == StreamType::Fetch {
                track::handle_fetch_stream(inner, recv, buf).await;
            } else {
                track::handle_subgroup_stream(inner, recv, buf).await;
            }
        }
    }
}

async fn handle_bi(inner: Arc<SessionInner>, send: BoxSendStream, mut recv: BoxRecvStream) {
    let Ok(_permit) = wait_setup(&inner).await else {
        recv.stop(StreamResetCode::EXCESSIVE_LOAD.0);
        let mut send = send;
        send.reset(StreamResetCode::EXCESSIVE_LOAD.0);
        return;
    };
    let v = inner.version;
    let mut reader = Reader::new(recv, v);
    let mut writer = Writer::new(send, v);
    writer.set_priority(super::REQUEST_PRIORITY);
    let frame = tokio::select! {
        r = reader.next_frame() => r,
        _ = inner.closed() => return,
    };
    let frame = match frame {
        Ok(Frame::Bytes(b)) => b,
        // An empty stream carries no request.
        Ok(Frame::Fin) | Err(Error::Cancelled(_)) => return,
        Err(e) => return inner.close(e),
    };
    let msg = match Message::decode(&mut frame.clone(), v) {
        Ok(m) => m,
        Err(e) => {
            // A request-level error (INVALID_FILTER) rejects only this request, if the stream
            // begins with a request at all (draft-19 §3.3: REQUEST_UPDATE never does).
            let mut ty: &[u8] = frame.as_ref();
            let starts_request = Vi64::decode(&mut ty).is_ok_and(|t| t != RequestUpdate::TYPE);
            if let (true, Some(code), Some(id)) =
                (starts_request, e.request_code(), peek_request_id(&frame, v))
            {
                if inner.check_peer_request_id(id).is_ok() {
                    let _ = writer.send(RequestError::new(code, e.to_string())).await;
                    writer.finish();
                }
                return;
            }
            return inner.close(e.into());
        }
    };
    // draft-19 §3.3: a request stream begins with one of seven request messages.
    let request_id = match &msg {
        Message::Subscribe(m) => m.request_id,
        Message::Publish(m) => m.request_id,
        Message::Fetch(m) => m.request_id,
        Message::TrackStatus(m) => m.request_id,
        Message::PublishNamespace(m) => m.request_id,
        Message::SubscribeNamespace(m) => m.request_id,
        Message::SubscribeTracks(m) => m.request_id,
        m => {
            return inner.close(Error::protocol(format!(
                "request stream starts with {}",
                m.name()
            )));
        }
    };
    if inner.check_peer_request_id(request_id).is_err() {
        return;
    }
    let _guard = inner.request_guard();
    tracing::debug!(request = msg.name(), request_id, "incoming request");
    if inner.goaway_sent() {
        // draft-19 §10.4: after a GOAWAY new requests MAY be rejected with GOING_AWAY.
        let _ = writer.send(going_away()).await;
        writer.finish();
        return;
    }
    // Each request's future is boxed at its own size: inline, the task would be as large as
    // the largest of them (about 6 KB) for every request, and a PUBLISH_NAMESPACE lives as
    // long as the namespace is published.
    let res = match msg {
        Message::PublishNamespace(m) => {
            Box::pin(serve_publish_namespace(&inner, m, writer, reader)).await
        }
        Message::SubscribeNamespace(m) => {
            Box::pin(serve_subscribe_namespace(&inner, m, writer, reader)).await
        }
        Message::Subscribe(m) => Box::pin(track::serve_subscribe(&inner, m, writer, reader)).await,
        Message::Publish(m) => Box::pin(track::serve_publish(&inner, m, writer, reader)).await,
        Message::Fetch(m) => Box::pin(track::serve_fetch(&inner, m, writer, reader)).await,
        Message::TrackStatus(m) => {
            Box::pin(track::serve_track_status(&inner, m, writer, reader)).await
        }
        Message::SubscribeTracks(m) => {
            Box::pin(track::serve_subscribe_tracks(&inner, m, writer, reader)).await
        }
        other => {
            let _ = writer
                .send(RequestError::new(
                    RequestErrorCode::NOT_SUPPORTED,
                    other.name(),
                ))
                .await;
            writer.finish();
            Ok(())
        }
    };
    if let Err(e) = res
        && e.is_session_error()
    {
        inner.close(e);
    }
}

async fn recv_datagrams(inner: Arc<SessionInner>) {
    loop {
        let d = tokio::select! {
            r = inner.conn.recv_datagram() => r,
            _ = inner.closed() => return,
        };
        let Ok(d) = d else { return };
        match Datagram::decode(d, inner.version) {
            // draft-19 §11: an unknown datagram type closes the session.
            Err(e) => return inner.close(e.into()),
            // draft-19 §11.5.2: padding is discarded.
            Ok(Datagram::Padding) => {}
            Ok(Datagram::Object(d)) => track::handle_datagram(&inner, d),
        }
    }
}
