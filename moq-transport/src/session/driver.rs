//! The session driver: accepts the peer's streams and datagrams and hands them up.
//!
//! The driver knows the control stream and how a request stream begins; what a request, a data
//! stream or a datagram means is for the layers above, reached through [`Dispatch`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use moq_core::AuthToken;
use moq_core::codes::StreamResetCode;
use moq_core::coding::Vi64;
use moq_core::data::{Datagram, ObjectDatagram, StreamType};
use moq_core::message::{
    Address, ControlMessage, Message, RequestError, RequestUpdate, SetupOptions, SubscribeTracks,
    peek_request_id,
};
use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::core::{REQUEST_PRIORITY, Role, SessionCore, going_away};
use crate::error::Error;
use crate::framing::{Frame, Reader, Writer};
use crate::mux::{Mux, request_namespace};
use crate::transport::{BoxRecvStream, BoxSendStream};

/// A future the driver runs for a stream, boxed at its own size: inline, every stream's
/// handler would be as large as the largest kind of request, and a PUBLISH_NAMESPACE lives as
/// long as the namespace is published.
pub(crate) type Serve = super::table::Entry;

/// How the peer opened a request: what its end tells the draft-14..16 mux.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Opened {
    /// On a bidirectional stream of its own.
    Stream,
    /// On the draft-14..16 control stream (a virtual stream, which the mux counts itself).
    Virtual,
}

/// A request's serving future as an entry of the session's request table, boxed once with
/// what its end does: `Err` is an error of the session's, which closes it (draft-19 §10.2.1);
/// a request on a stream of its own counts as done for the draft-14..16 mux. Two words more
/// than `serve`, where a wrapper boxed apart was a second allocation (a 32-byte chunk).
pub(crate) fn served(
    core: &Arc<SessionCore>,
    opened: Opened,
    serve: impl Future<Output = Result<(), Error>> + Send + 'static,
) -> Serve {
    let core = core.clone();
    Box::pin(serve.map(move |end| {
        if let Err(e) = end {
            core.fail(e);
        }
        if opened == Opened::Stream
            && let Some(mux) = core.mux()
        {
            mux.peer_request_done();
        }
    }))
}

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
    /// for GOAWAY) and its stream; the entry is made by [`served`].
    fn request(&self, msg: Message, writer: Writer, reader: Reader, opened: Opened) -> Serve;
    /// Reads a data stream; `buf` holds what was read past the stream type.
    fn data_stream(&self, ty: DataStream, recv: BoxRecvStream, buf: Bytes) -> Serve;
    /// Delivers an object datagram.
    fn datagram(&self, datagram: ObjectDatagram);
}

/// The peer's SETUP and its control stream, handed from the driver to the handshake.
type PeerSetup = Result<PeerControl, Error>;

/// The peer's SETUP as the driver read it.
pub(crate) struct PeerControl {
    /// Its options.
    pub(crate) options: SetupOptions,
    /// The control stream's reader, past SETUP.
    pub(crate) reader: Reader,
    /// Drafts 14-16, on the server: the send half of the one control stream, and the
    /// versions CLIENT_SETUP offered (draft-14) and the MAX_REQUEST_ID it granted.
    pub(crate) single: Option<(BoxSendStream, Vec<u64>, Option<u64>)>,
}

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
    // Entries of the session's request table, as the requests are: the session's one task
    // polls them (a wake-up polls only the entry woken), where each was a task of its own.
    core.serve(accept_uni(driver.clone()));
    core.serve(accept_bi(driver.clone()));
    core.serve(recv_datagrams(driver));
    rx
}

/// Reads the control stream after SETUP: only GOAWAY may follow (draft-19 §10).
pub(crate) fn read_control(core: &Arc<SessionCore>, mut reader: Reader) {
    let core2 = core.clone();
    core.serve(async move {
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
///
/// The set of handlers is made at the first stream, and dropped once that stream is handled
/// (in draft-17 and later, the peer's control stream): even empty, a set holds a node the size
/// of a handler, which a session that is sent no data stream (a relay's subscriber) would keep
/// for nothing. Made again at the next stream, it then stays.
///
/// One accept is kept across the loop's turns (the transport's accept is cancel-safe): made
/// anew each turn, a turn for a handler's end would also box and drop an accept.
async fn accept_uni(driver: Arc<Driver>) {
    let mut streams: Option<FuturesUnordered<_>> = None;
    let mut first = true;
    let mut accept = driver.core.conn().accept_uni();
    loop {
        let running = streams.as_ref().is_some_and(|s| !s.is_empty());
        tokio::select! {
            r = &mut accept => match r {
                Ok(recv) => {
                    accept = driver.core.conn().accept_uni();
                    streams
                        .get_or_insert_with(FuturesUnordered::new)
                        .push(handle_uni(driver.clone(), recv));
                }
                Err(e) => return driver.core.close(e.into()),
            },
            Some(()) = async { streams.as_mut()?.next().await }, if running => {
                if first && streams.as_ref().is_some_and(|s| s.is_empty()) {
                    first = false;
                    streams = None;
                }
            }
        }
    }
}

async fn accept_bi(driver: Arc<Driver>) {
    loop {
        match driver.core.conn().accept_bi().await {
            Ok((send, recv)) => driver.core.serve(handle_bi(driver.clone(), send, recv)),
            Err(e) => return driver.core.close(e.into()),
        }
    }
}

async fn handle_uni(driver: Arc<Driver>, mut recv: BoxRecvStream) {
    let core = &driver.core;
    let v = core.version();
    // What was read: the first chunk as it came (no copy; it usually holds the type and more),
    // chunks joined only when the type spans them.
    let mut buf = Bytes::new();
    // Read until the stream type is known.
    let ty = loop {
        match StreamType::peek(&buf, v) {
            Ok(Some(t)) => break t,
            Ok(None) => {}
            Err(e) => return core.close(e.into()),
        }
        match recv.read_chunk(64 * 1024).await {
            Ok(Some(c)) if buf.is_empty() => buf = c,
            Ok(Some(c)) => {
                let mut joined = BytesMut::with_capacity(buf.len() + c.len());
                joined.extend_from_slice(&buf);
                joined.extend_from_slice(&c);
                buf = joined.freeze();
            }
            // A stream that ends or is reset before its type carries nothing.
            Ok(None) | Err(_) => return,
        }
    };
    let ty = match ty {
        // Boxed: inline, every data stream's handler would be the control stream's size.
        StreamType::Control => return Box::pin(driver.control_stream(recv, buf)).await,
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
    async fn control_stream(&self, recv: BoxRecvStream, buf: Bytes) {
        // draft-19 §3.3: one control stream per peer.
        if self.control_seen.swap(true, Ordering::Relaxed) {
            return self.core.close(Error::protocol("a second control stream"));
        }
        let mut reader = Reader::with_buffer(recv, self.core.version(), &buf);
        let res = match reader.next().await {
            Ok(Some(Message::Setup(s))) => Ok(PeerControl {
                options: s.options,
                reader,
                single: None,
            }),
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

async fn handle_bi(driver: Arc<Driver>, send: BoxSendStream, recv: BoxRecvStream) {
    // Opening is an entry of its own, ended before serving: its largest step (reading the first
    // message) would otherwise size the state the request waits in for its whole life (a
    // namespace's or a subscription's), ~1 KB; and awaited here, this future (~70 bytes) would
    // wrap the serving one for that life.
    if let Some(serve) = Box::pin(open_request(&driver, send, recv)).await {
        driver.core.serve_entry(serve);
    }
}

/// Reads and checks a request stream's first message; the request's serving future, or `None`
/// when the stream carries no request to serve (answered, refused or the session closed here).
async fn open_request(
    driver: &Arc<Driver>,
    mut send: BoxSendStream,
    mut recv: BoxRecvStream,
) -> Option<Serve> {
    let core = &driver.core;
    let v = core.version();
    // draft-14 §3.3: the client's first bidirectional stream is the control stream.
    if v.single_control_stream()
        && core.role() == Role::Server
        && !driver.control_seen.swap(true, Ordering::Relaxed)
    {
        Box::pin(driver.single_control_stream(send, recv)).await;
        return None;
    }
    if core.wait_setup().await.is_err() {
        recv.stop(StreamResetCode::EXCESSIVE_LOAD.0);
        send.reset(StreamResetCode::EXCESSIVE_LOAD.0);
        return None;
    }
    let mut reader = Reader::new(recv, v);
    let mut writer = Writer::new(send, v);
    writer.set_priority(REQUEST_PRIORITY);
    let frame = match reader.next_frame().await {
        Ok(Frame::Bytes(b)) => b,
        // An empty stream carries no request.
        Ok(Frame::Fin) | Err(Error::Cancelled(_)) => return None,
        Ok(Frame::Message(_)) => return None,
        Err(e) => {
            core.close(e);
            return None;
        }
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
                    let _ = Box::pin(writer.send(RequestError::new(code, e.to_string()))).await;
                    writer.finish();
                }
                return None;
            }
            core.close(e.into());
            return None;
        }
    };
    // draft-19 §3.3: a request stream begins with one of seven request messages.
    let Some((request_id, params)) = msg.request() else {
        core.close(Error::protocol(format!(
            "request stream starts with {}",
            msg.name()
        )));
        return None;
    };
    if core.check_peer_request_id(request_id).is_err() {
        return None;
    }
    if core.version().single_control_stream()
        && !(core.version().subscribe_namespace_stream()
            && matches!(
                msg,
                Message::SubscribeNamespace(_) | Message::SubscribeTracks(_)
            ))
    {
        // draft-14 §3.3: requests go on the control stream (draft-16 §6.3: only
        // SUBSCRIBE_NAMESPACE opens a stream of its own).
        core.close(Error::protocol(format!(
            "{} on a bidirectional stream of its own",
            msg.name()
        )));
        return None;
    }
    if let Some(mux) = core.mux() {
        // draft-16 §6: SUBSCRIBE_NAMESPACE's own stream still takes a Request ID within
        // MAX_REQUEST_ID, and its answers name it.
        if let Err(e) = mux.check_peer_id(request_id) {
            core.close(e);
            return None;
        }
        writer.answering(request_id, msg.request_type());
    }
    tracing::debug!(request = msg.name(), request_id, "incoming request");
    if core.goaway_refuses(request_id) {
        // draft-19 §10.2.2: its token aliases are registered (or deleted) even though the
        // request fails; an alias error closes the session.
        if core.resolve_tokens(&params.authorization_tokens).is_err() {
            return None;
        }
        // draft-19 §10.4: after a GOAWAY new requests MAY be rejected with GOING_AWAY
        // (draft-18: those the GOAWAY's Request ID said were not processed).
        let _ = Box::pin(writer.send(going_away())).await;
        writer.finish();
        return None;
    }
    Some(driver.dispatch.request(msg, writer, reader, Opened::Stream))
}

impl Driver {
    /// Drafts 14-16, on the server: the client's control stream, which begins with
    /// CLIENT_SETUP; handed to the handshake with its send half.
    async fn single_control_stream(&self, send: BoxSendStream, recv: BoxRecvStream) {
        let mut reader = Reader::new(recv, self.core.version());
        let res = match reader.next().await {
            Ok(Some(Message::ClientSetup(s))) => Ok(PeerControl {
                options: s.options,
                reader,
                single: Some((send, s.versions, s.max_request_id)),
            }),
            Ok(Some(m)) => Err(Error::protocol(format!(
                "control stream starts with {}",
                m.name()
            ))),
            Ok(None) | Err(Error::Cancelled(_)) => {
                Err(Error::protocol("control stream closed before CLIENT_SETUP"))
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

/// Drafts 14-16: reads the one control stream after SETUP. Requests become virtual streams
/// served by `dispatch`; what belongs to a request goes to it through the mux; MAX_REQUEST_ID,
/// REQUESTS_BLOCKED and GOAWAY are the session's.
pub(crate) fn read_single_control(
    core: &Arc<SessionCore>,
    dispatch: Arc<dyn Dispatch>,
    mut reader: Reader,
) {
    let core2 = core.clone();
    core.serve(async move {
        let core = core2;
        let Some(mux) = core.mux().cloned() else {
            return core.close(Error::protocol("no control stream"));
        };
        let err = loop {
            let (msg, address) = match reader.next_addressed().await {
                Ok(Some(m)) => m,
                // draft-14 §3.3: closing the control stream is a PROTOCOL_VIOLATION.
                Ok(None) => break Error::protocol("the peer closed its control stream"),
                Err(Error::Cancelled(_)) => {
                    break Error::protocol("the peer reset its control stream");
                }
                Err(e) => break e,
            };
            if let Err(e) = on_single_control(&core, &dispatch, &mux, msg, address).await {
                break e;
            }
        };
        mux.close(err.clone());
        core.close(err);
    });
}

async fn on_single_control(
    core: &Arc<SessionCore>,
    dispatch: &Arc<dyn Dispatch>,
    mux: &Mux,
    msg: Message,
    address: Option<Address>,
) -> Result<(), Error> {
    match msg {
        Message::Goaway(g) => return core.on_goaway(g),
        Message::MaxRequestId(m) => return mux.on_max_request_id(m.request_id),
        Message::RequestsBlocked(_) => {
            mux.on_requests_blocked();
            return Ok(());
        }
        Message::ClientSetup(_) | Message::ServerSetup(_) => {
            return Err(Error::protocol(format!("second {}", msg.name())));
        }
        _ => {}
    }
    if let Message::RequestUpdate(u) = &msg {
        // draft-14 §9.1: an update takes a Request ID of its own, within MAX_REQUEST_ID (its
        // parity and freshness are checked by the request it updates, as on a stream).
        mux.check_peer_id(u.request_id)?;
    }
    if let Some(address) = address {
        return mux.deliver(msg, address).await;
    }
    let (Some((id, params)), Some(kind)) = (msg.request(), msg.request_type()) else {
        return Err(Error::protocol(format!(
            "{} on the control stream names no request",
            msg.name()
        )));
    };
    core.check_peer_request_id(id)?;
    mux.check_peer_id(id)?;
    if let Message::PublishNamespace(p) = &msg
        && !core.version().subscribe_namespace_stream()
        && mux.discovered(id, &p.namespace).await?
    {
        return Ok(());
    }
    tracing::debug!(request = msg.name(), request_id = id, "incoming request");
    let (w, r) = mux.accept(id, kind, request_namespace(&msg));
    let (mut writer, reader) = (Writer::virtual_stream(w), Reader::virtual_stream(r));
    if core.goaway_refuses(id) {
        // As on a request stream: tokens resolve, then GOING_AWAY (draft-14 §9.4).
        core.resolve_tokens(&params.authorization_tokens)?;
        writer.send(going_away()).await?;
        writer.finish();
        return Ok(());
    }
    let shadow = match &msg {
        // draft-14 §9.22: SUBSCRIBE_NAMESPACE also asks for the matching PUBLISHes, which the
        // newer drafts ask with SUBSCRIBE_TRACKS: both run, under one Request ID.
        Message::SubscribeNamespace(sn) if !core.version().subscribe_namespace_stream() => {
            let mut params = sn.params.clone();
            // Its token aliases were registered by the SUBSCRIBE_NAMESPACE itself.
            if params
                .authorization_tokens
                .iter()
                .any(|t| !matches!(t, AuthToken::UseValue { .. } | AuthToken::UseAlias { .. }))
            {
                params.authorization_tokens.clear();
            }
            Some(SubscribeTracks {
                request_id: id,
                prefix: sn.prefix.clone(),
                params,
            })
        }
        _ => None,
    };
    core.serve_entry(dispatch.request(msg, writer, reader, Opened::Virtual));
    if let Some(tracks) = shadow {
        let (w, r) = mux.accept_shadow(id);
        let (writer, reader) = (Writer::virtual_stream(w), Reader::virtual_stream(r));
        core.serve_entry(dispatch.request(tracks.into(), writer, reader, Opened::Virtual));
    }
    Ok(())
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
