//! The session driver: accepts the peer's streams and datagrams and hands them up.
//!
//! The driver knows the control stream and how a request stream begins; what a request, a data
//! stream or a datagram means is for the layers above, reached through [`Dispatch`].

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::BytesMut;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use moq_core::codes::StreamResetCode;
use moq_core::coding::Vi64;
use moq_core::data::{Datagram, ObjectDatagram, StreamType};
use moq_core::message::{
    ControlMessage, Message, RequestError, RequestUpdate, SetupOptions, peek_request_id,
};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::core::{REQUEST_PRIORITY, SessionCore, going_away};
use crate::error::Error;
use crate::framing::{Frame, Reader, Writer};
use crate::transport::{BoxRecvStream, BoxSendStream};

/// A future the driver runs for a stream, boxed at its own size: inline, every stream's task
/// would be as large as the largest kind of request, and a PUBLISH_NAMESPACE lives as long as
/// the namespace is published.
pub(crate) type Serve = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A data stream the peer opened, its type read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DataStream {
    /// A subgroup stream (draft-19 §11.4.2).
    Subgroup,
    /// A fetch stream (draft-19 §11.4.4).
    Fetch,
}

/// What the layers above the core do with what the peer sends.
pub(crate) trait Dispatch: Send + Sync + 'static {
    /// Serves a request the peer opened: its first message (Request ID checked, not refused
    /// for GOAWAY) and its stream.
    fn request(&self, msg: Message, writer: Writer, reader: Reader) -> Serve;
    /// Reads a data stream; `buf` holds what was read past the stream type.
    fn data_stream(&self, ty: DataStream, recv: BoxRecvStream, buf: BytesMut) -> Serve;
    /// Delivers an object datagram.
    fn datagram(&self, datagram: ObjectDatagram);
}

/// The peer's SETUP and its control stream, handed from the driver to the handshake.
type PeerSetup = Result<(SetupOptions, Reader), Error>;

/// Where the handshake waits for the peer's SETUP.
pub(crate) type SetupReceiver = oneshot::Receiver<PeerSetup>;

struct Driver {
    core: Arc<SessionCore>,
    dispatch: Arc<dyn Dispatch>,
    setup: Mutex<Option<oneshot::Sender<PeerSetup>>>,
    control_seen: AtomicBool,
}

/// Starts accepting the peer's streams and datagrams; returns where the peer's SETUP arrives.
pub(crate) fn start(core: &Arc<SessionCore>, dispatch: Arc<dyn Dispatch>) -> SetupReceiver {
    let (tx, rx) = oneshot::channel();
    let driver = Arc::new(Driver {
        core: core.clone(),
        dispatch,
        setup: Mutex::new(Some(tx)),
        control_seen: AtomicBool::new(false),
    });
    core.spawn(accept_uni(driver.clone()));
    core.spawn(accept_bi(driver.clone()));
    core.spawn(recv_datagrams(driver));
    rx
}

/// Reads the control stream after SETUP: only GOAWAY may follow (draft-19 §10).
pub(crate) fn read_control(core: &Arc<SessionCore>, mut reader: Reader) {
    let core2 = core.clone();
    core.spawn(async move {
        let core = core2;
        let err = loop {
            match reader.next().await {
                Ok(Some(Message::Goaway(g))) => match core.on_goaway(g) {
                    Ok(()) => continue,
                    Err(e) => break e,
                },
                Ok(Some(Message::Setup(_))) => {
                    break Error::protocol("second SETUP on the control stream");
                }
                Ok(Some(m)) => {
                    break Error::protocol(format!("{} on the control stream", m.name()));
                }
                // draft-19 §3.3: closing a control stream is a PROTOCOL_VIOLATION.
                Ok(None) => break Error::protocol("the peer closed its control stream"),
                Err(Error::Cancelled(_)) => {
                    break Error::protocol("the peer reset its control stream");
                }
                Err(e) => break e,
            }
        };
        core.close(err);
    });
}

/// Accepts the peer's unidirectional streams and runs their handlers inside this one task: a
/// data stream's handler is short (its header, then a hand-off to a subscription or fetch),
/// and a task of its own per stream cost about a tenth of the throughput with one stream per
/// small object (moq-bench section 1).
async fn accept_uni(driver: Arc<Driver>) {
    let mut streams = FuturesUnordered::new();
    loop {
        tokio::select! {
            r = driver.core.conn().accept_uni() => match r {
                Ok(recv) => streams.push(handle_uni(driver.clone(), recv)),
                Err(e) => return driver.core.close(e.into()),
            },
            Some(()) = streams.next(), if !streams.is_empty() => {}
        }
    }
}

async fn accept_bi(driver: Arc<Driver>) {
    loop {
        match driver.core.conn().accept_bi().await {
            Ok((send, recv)) => driver.core.spawn(handle_bi(driver.clone(), send, recv)),
            Err(e) => return driver.core.close(e.into()),
        }
    }
}

async fn handle_uni(driver: Arc<Driver>, mut recv: BoxRecvStream) {
    let core = &driver.core;
    let v = core.version();
    let mut buf = BytesMut::new();
    // Read until the stream type is known.
    let ty = loop {
        match StreamType::peek(&buf, v) {
            Ok(Some(t)) => break t,
            Ok(None) => {}
            Err(e) => return core.close(e.into()),
        }
        match recv.read_chunk(64 * 1024).await {
            Ok(Some(c)) => buf.extend_from_slice(&c),
            // A stream that ends or is reset before its type carries nothing.
            Ok(None) | Err(_) => return,
        }
    };
    let ty = match ty {
        StreamType::Control => return driver.control_stream(recv, buf).await,
        StreamType::Padding => {
            // draft-19 §11.5.1: discard everything on a padding stream.
            while let Ok(Some(_)) = recv.read_chunk(64 * 1024).await {}
            return;
        }
        StreamType::Subgroup(_) => DataStream::Subgroup,
        StreamType::Fetch => DataStream::Fetch,
    };
    if core.wait_setup().await.is_err() {
        recv.stop(StreamResetCode::EXCESSIVE_LOAD.0);
        return;
    }
    driver.dispatch.data_stream(ty, recv, buf).await;
}

impl Driver {
    /// The peer's control stream: SETUP first, handed to the handshake.
    async fn control_stream(&self, recv: BoxRecvStream, buf: BytesMut) {
        // draft-19 §3.3: one control stream per peer.
        if self.control_seen.swap(true, Ordering::Relaxed) {
            return self.core.close(Error::protocol("a second control stream"));
        }
        let mut reader = Reader::with_buffer(recv, self.core.version(), &buf);
        let res = match reader.next().await {
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
            self.core.close(e.clone());
        }
        if let Some(tx) = self.setup.lock().take() {
            let _ = tx.send(res);
        }
    }
}

async fn handle_bi(driver: Arc<Driver>, mut send: BoxSendStream, mut recv: BoxRecvStream) {
    let core = &driver.core;
    if core.wait_setup().await.is_err() {
        recv.stop(StreamResetCode::EXCESSIVE_LOAD.0);
        send.reset(StreamResetCode::EXCESSIVE_LOAD.0);
        return;
    }
    let v = core.version();
    let mut reader = Reader::new(recv, v);
    let mut writer = Writer::new(send, v);
    writer.set_priority(REQUEST_PRIORITY);
    let frame = match reader.next_frame().await {
        Ok(Frame::Bytes(b)) => b,
        // An empty stream carries no request.
        Ok(Frame::Fin) | Err(Error::Cancelled(_)) => return,
        Err(e) => return core.close(e),
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
                if core.check_peer_request_id(id).is_ok() {
                    let _ = writer.send(RequestError::new(code, e.to_string())).await;
                    writer.finish();
                }
                return;
            }
            return core.close(e.into());
        }
    };
    // draft-19 §3.3: a request stream begins with one of seven request messages.
    let Some((request_id, params)) = msg.request() else {
        return core.close(Error::protocol(format!(
            "request stream starts with {}",
            msg.name()
        )));
    };
    if core.check_peer_request_id(request_id).is_err() {
        return;
    }
    tracing::debug!(request = msg.name(), request_id, "incoming request");
    if core.goaway_refuses(request_id) {
        // draft-19 §10.2.2: its token aliases are registered (or deleted) even though the
        // request fails; an alias error closes the session.
        if core.resolve_tokens(&params.authorization_tokens).is_err() {
            return;
        }
        // draft-19 §10.4: after a GOAWAY new requests MAY be rejected with GOING_AWAY
        // (draft-18: those the GOAWAY's Request ID said were not processed).
        let _ = writer.send(going_away()).await;
        writer.finish();
        return;
    }
    driver.dispatch.request(msg, writer, reader).await;
}

async fn recv_datagrams(driver: Arc<Driver>) {
    let core = &driver.core;
    loop {
        let Ok(d) = core.conn().recv_datagram().await else {
            return;
        };
        match Datagram::decode(d, core.version()) {
            // draft-19 §11: an unknown datagram type closes the session.
            Err(e) => return core.close(e.into()),
            // draft-19 §11.5.2: padding is discarded.
            Ok(Datagram::Padding) => {}
            Ok(Datagram::Object(d)) => driver.dispatch.datagram(d),
        }
    }
}
