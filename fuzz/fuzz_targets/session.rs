//! The session state machine: one of our `Session`s (server or client role, any supported
//! draft) over the in-memory transport, facing a scripted peer that sends what the input says:
//! control messages (built with moq-core's encoders, or raw bytes), request streams, data
//! streams and datagrams, resets and stops, while the application side subscribes, publishes,
//! answers incoming requests and drops its handles, and virtual time moves on.
//!
//! Checked, besides "never panics" (a panic in any task aborts, through libfuzzer's hook):
//! - bounded growth: once the input is consumed the session's task count and open requests
//!   are under a limit proportional to the number of actions;
//! - everything ends: once the peer is closed or dropped, `Session::closed` and
//!   `Session::stopped` resolve within a bounded virtual time, no task is left, and every
//!   application future and handle obtained during the run ends (`None` or an error).
//!
//! Time is tokio's paused clock on a current-thread runtime, so every timeout is virtual.
//!
//! Input (read with `arbitrary::Unstructured`): the version, our role, how SETUP goes (valid
//! unless the first byte says otherwise), then up to `MAX_ACTIONS` actions.

#![no_main]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use arbitrary::Unstructured;
use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use moq_core::codes::{PublishDoneCode, RequestErrorCode, RequestType, SessionErrorCode};
use moq_core::data::{
    DatagramBody, FetchHeader, FetchObject, FetchWriter, ObjectDatagram, ObjectStatus,
    SubgroupHeader, SubgroupId, SubgroupWriter,
};
use moq_core::message::{
    Address, ClientSetup, Envelope, Fetch, FetchCancel, FetchOk, FetchType, Goaway, MaxRequestId,
    Message, Namespace, NamespaceDone, Parameters, Publish, PublishDone, PublishNamespace,
    PublishNamespaceCancel, PublishNamespaceDone, PublishSkipped, PublishStateNotify, RequestError,
    RequestOk, RequestUpdate, RequestsBlocked, ServerSetup, Setup, SetupOptions, Subscribe,
    SubscribeNamespace, SubscribeOk, SubscribeTracks, TrackStatus, Unsubscribe,
    UnsubscribeNamespace,
};
use moq_core::{
    FullTrackName, GroupOrder, Location, LocationFilter, Properties, TrackNamespace, Version,
};
use moq_transport::namespace::{NamespaceSubscription, PublishedNamespace};
use moq_transport::track::{
    FetchEnd, FetchResponse, Incoming, PublishOptions, PublishedTrack, SubscribeResponse,
    Subscription, SubscriptionWriter, TrackStatusInfo, TrackSubscription, TracksResponder,
};
use moq_transport::transport::memory::{self, MemoryConnection};
use moq_transport::transport::{BoxRecvStream, BoxSendStream, Connection, TransportKind};
use moq_transport::{Destination, Role, Session, SessionConfig};
use parking_lot::Mutex;

/// Actions read from one input at most.
const MAX_ACTIONS: usize = 96;
/// How long one peer or application step may wait (virtual time).
const STEP: Duration = Duration::from_millis(5);
/// How long the session has to end once the peer is gone (virtual time). SETUP's timeout is
/// 10 s, so this is generous.
const END: Duration = Duration::from_secs(120);
/// Items drained from one handle at the end before it must have ended.
const MAX_DRAIN: usize = 100_000;

fuzz_target!(|data: &[u8]| {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("runtime: {e}"),
    };
    rt.block_on(run(data));
});

/// True when `SESSION_FUZZ_TRACE` is set: each run prints what it reached (to check that
/// the inputs get past SETUP and open requests), e.g. `SESSION_FUZZ_TRACE=1
/// fuzz/target/x86_64-unknown-linux-gnu/release/session corpus/session/*`.
fn trace() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("SESSION_FUZZ_TRACE").is_some())
}

/// Waits for `f` at most `d` (virtual): `None` if it did not finish.
async fn within<F: Future>(d: Duration, f: F) -> Option<F::Output> {
    tokio::time::timeout(d, f).await.ok()
}

/// Lets every task run until nothing is ready, then moves the clock by `d`.
async fn settle(d: Duration) {
    tokio::time::sleep(d).await;
}

/// A handle the application holds; each must end once the session has.
#[allow(clippy::large_enum_variant)] // a few per run
enum Handle {
    Namespaces(NamespaceSubscription),
    Published(PublishedNamespace),
    Subscription(Subscription),
    Fetch(FetchResponse),
    Tracks(TrackSubscription),
    Track(PublishedTrack),
    Writer(SubscriptionWriter),
    Responder(TracksResponder),
}

impl Handle {
    /// Takes what the handle has (at most a few items, each waited for `STEP`); true if it
    /// ended (returned `None` or an error).
    async fn poll(&mut self, items: usize) -> bool {
        for _ in 0..items {
            let ended = match self {
                Handle::Namespaces(h) => match within(STEP, h.next()).await {
                    None => return false,
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Subscription(h) => match within(STEP, h.next()).await {
                    None => return false,
                    Some(Some(Ok(moq_transport::track::TrackEvent::Subgroup(mut g)))) => {
                        // Read the subgroup's objects too: its stream must end as well.
                        let mut n = 0;
                        while n < 64 {
                            match within(STEP, g.next_object()).await {
                                Some(Ok(Some(_))) => n += 1,
                                _ => break,
                            }
                        }
                        false
                    }
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Fetch(h) => match within(STEP, h.next()).await {
                    None => return false,
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Tracks(h) => match within(STEP, h.next_skipped()).await {
                    None => return false,
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Published(h) => return within(STEP, h.ended()).await.is_some(),
                Handle::Track(h) => return within(STEP, h.accepted()).await.is_some(),
                Handle::Writer(h) => return within(STEP, h.cancelled()).await.is_some(),
                Handle::Responder(h) => return within(STEP, h.ended()).await.is_some(),
            };
            if ended {
                return true;
            }
        }
        false
    }

    /// Uses the handle as an application would (publishes objects, updates a request), each
    /// step bounded by `STEP`: a step cut short is a future dropped mid-way, which must be
    /// harmless too.
    async fn exercise(&mut self, u: &mut Unstructured<'_>) {
        match self {
            Handle::Writer(w) => send_objects(u, w).await,
            Handle::Track(t) => send_objects(u, t.writer()).await,
            Handle::Subscription(h) => {
                let p = params(u);
                let _ = within(STEP, h.update(p)).await;
            }
            Handle::Namespaces(h) => {
                let ns = namespace(u);
                let _ = within(STEP, h.update_prefix(ns)).await;
            }
            Handle::Published(h) => {
                let p = params(u);
                let _ = within(STEP, h.update(p)).await;
            }
            Handle::Tracks(h) => {
                let p = params(u);
                let _ = within(STEP, h.update(p)).await;
            }
            Handle::Responder(h) => {
                let t = track(u);
                let _ = within(STEP, h.skipped(&t)).await;
            }
            Handle::Fetch(_) => {}
        }
    }

    /// Waits for the handle to end, draining what it still yields; panics if it does not.
    async fn must_end(mut self, what: usize) {
        let end = async {
            for _ in 0..MAX_DRAIN {
                if self.poll(1).await {
                    return;
                }
                // Nothing came within STEP: wait on (the clock moves on when idle).
            }
            panic!("handle {what} still yields after {MAX_DRAIN} items");
        };
        if within(END, end).await.is_none() {
            panic!("handle {what} did not end after the session closed");
        }
    }
}

/// Publishes a few objects on a subscription: on a subgroup stream or as datagrams.
async fn send_objects(u: &mut Unstructured<'_>, w: &SubscriptionWriter) {
    let group = small(u, 8);
    if flag(u) {
        for id in 0..small(u, 3) {
            let obj = moq_transport::track::Object {
                location: Location { group, object: id },
                payload: Bytes::from(bytes(u, 16)),
                end_of_group: flag(u),
                ..Default::default()
            };
            let _ = w.send_datagram(&obj);
        }
        return;
    }
    let eog = flag(u);
    let n = small(u, 3);
    let Some(Ok(mut g)) = within(STEP, w.open_subgroup(group, SubgroupId::Zero, None, eog)).await
    else {
        return;
    };
    for id in 0..n {
        let payload = Bytes::from(bytes(u, 16));
        if within(STEP, g.write_object(id, payload)).await.is_none() {
            break;
        }
    }
}

/// What the application holds, shared with its tasks.
#[derive(Default)]
struct App {
    handles: Mutex<Vec<Handle>>,
}

impl App {
    fn push(&self, h: Handle) {
        self.handles.lock().push(h);
    }
}

/// The scripted peer: the raw other end of the connection.
struct Peer {
    conn: MemoryConnection,
    v: Version,
    /// Our session's role (the peer has the other).
    ours: Role,
    /// The peer's control stream (drafts 14-16: the send half of the one bidirectional one).
    control: Option<BoxSendStream>,
    /// Drafts 14-16: the receive half of the control stream.
    control_recv: Option<BoxRecvStream>,
    /// Request streams, opened by either side.
    requests: Vec<(BoxSendStream, BoxRecvStream)>,
    /// Data streams the peer opened, with the writer that frames their objects.
    data: Vec<(BoxSendStream, Option<SubgroupWriter>, Option<FetchWriter>)>,
    /// Unidirectional streams our session opened (its control stream, its data streams).
    incoming: Vec<BoxRecvStream>,
    /// The peer's next Request ID (its parity).
    next_id: u64,
}

fn version(u: &mut Unstructured<'_>) -> Version {
    let i = u.choose_index(Version::ALL.len()).unwrap_or(0);
    Version::ALL.get(i).copied().unwrap_or(Version::PREFERRED)
}

fn small(u: &mut Unstructured<'_>, max: u64) -> u64 {
    u.int_in_range(0..=max).unwrap_or(0)
}

fn bytes(u: &mut Unstructured<'_>, max: usize) -> Vec<u8> {
    let n = u.int_in_range(0..=max).unwrap_or(0);
    u.bytes(n.min(u.len()))
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

fn flag(u: &mut Unstructured<'_>) -> bool {
    u.arbitrary().unwrap_or(false)
}

/// A namespace from a small pool, so both sides meet on the same names.
fn namespace(u: &mut Unstructured<'_>) -> TrackNamespace {
    let fields: &[&str] = match small(u, 4) {
        0 => &[],
        1 => &["live"],
        2 => &["live", "a"],
        3 => &["live", "b"],
        _ => &["other", "x", "y"],
    };
    TrackNamespace::from_strs(fields.iter().copied()).unwrap_or_default()
}

fn track(u: &mut Unstructured<'_>) -> FullTrackName {
    let mut ns = namespace(u);
    if ns.is_empty() {
        ns = TrackNamespace::from_strs(["live"]).unwrap_or_default();
    }
    let name = ["video", "audio", ""][small(u, 2) as usize % 3];
    FullTrackName::new(ns.clone(), name).unwrap_or_else(|_| FullTrackName {
        namespace: ns,
        name: Bytes::new(),
    })
}

fn location(u: &mut Unstructured<'_>) -> Location {
    Location {
        group: small(u, 8),
        object: small(u, 8),
    }
}

/// A few parameters, each maybe present.
fn params(u: &mut Unstructured<'_>) -> Parameters {
    let mut p = Parameters::default();
    if !flag(u) {
        return p;
    }
    if flag(u) {
        p.forward = Some(flag(u));
    }
    if flag(u) {
        p.subscriber_priority = Some(small(u, 255) as u8);
    }
    if flag(u) {
        p.group_order = Some(if flag(u) {
            GroupOrder::Ascending
        } else {
            GroupOrder::Descending
        });
    }
    if flag(u) {
        p.largest_object = Some(location(u));
    }
    if flag(u) {
        p.expires = Some(small(u, 100_000));
    }
    if flag(u) {
        p.location_filter = Some(match small(u, 3) {
            0 => LocationFilter::All,
            1 => LocationFilter::NextGroupStart,
            2 => LocationFilter::LargestObject,
            _ => LocationFilter::AbsoluteStart(location(u)),
        });
    }
    if flag(u) {
        p.object_delivery_timeout = Some(small(u, 10_000));
    }
    if flag(u) {
        p.new_group_request = Some(small(u, 8));
    }
    if flag(u) {
        p.track_namespace_prefix = Some(namespace(u));
    }
    p
}

fn request_id(u: &mut Unstructured<'_>, next: &mut u64) -> u64 {
    if u.ratio(15, 16).unwrap_or(true) {
        let id = *next;
        *next += 2;
        id
    } else {
        small(u, 64)
    }
}

fn request_type(u: &mut Unstructured<'_>) -> RequestType {
    match small(u, 7) {
        0 => RequestType::Subscribe,
        1 => RequestType::Publish,
        2 => RequestType::Fetch,
        3 => RequestType::TrackStatus,
        4 => RequestType::PublishNamespace,
        5 => RequestType::SubscribeNamespace,
        6 => RequestType::SubscribeTracks,
        _ => RequestType::RequestUpdate,
    }
}

fn setup_options(u: &mut Unstructured<'_>, v: Version, client: bool) -> SetupOptions {
    let mut o = SetupOptions {
        implementation: Some("fuzz-peer".into()),
        ..Default::default()
    };
    // A client on raw QUIC names its path; a server must not.
    if client && !u.ratio(1, 16).unwrap_or(false) {
        o.path = Some(Bytes::from_static(b"/moq"));
        o.authority = Some(Bytes::from_static(b"localhost"));
    }
    if v.has_max_request_updates() && flag(u) {
        o.max_request_updates = Some(small(u, 8));
    }
    if flag(u) {
        o.max_auth_token_cache_size = Some(small(u, 4096));
    }
    o
}

/// A control or request message, structurally valid (it may still break the protocol).
fn message(u: &mut Unstructured<'_>, kind: u64, next_id: &mut u64) -> Message {
    match kind {
        0 => Subscribe {
            request_id: request_id(u, next_id),
            track: track(u),
            params: params(u),
        }
        .into(),
        1 => Publish {
            request_id: request_id(u, next_id),
            track: track(u),
            track_alias: small(u, 4),
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        2 => Fetch {
            request_id: request_id(u, next_id),
            fetch_type: if flag(u) {
                FetchType::Standalone {
                    track: track(u),
                    start: location(u),
                    end: location(u),
                }
            } else if flag(u) {
                FetchType::Relative {
                    track: track(u),
                    filter: LocationFilter::AbsoluteStart(location(u)),
                }
            } else {
                FetchType::RelativeJoining {
                    joining_request_id: small(u, 16),
                    joining_start: small(u, 4),
                }
            },
            params: params(u),
        }
        .into(),
        3 => TrackStatus {
            request_id: request_id(u, next_id),
            track: track(u),
            params: params(u),
        }
        .into(),
        4 => PublishNamespace {
            request_id: request_id(u, next_id),
            namespace: namespace(u),
            params: params(u),
        }
        .into(),
        5 => SubscribeNamespace {
            request_id: request_id(u, next_id),
            prefix: namespace(u),
            params: params(u),
        }
        .into(),
        6 => SubscribeTracks {
            request_id: request_id(u, next_id),
            prefix: namespace(u),
            params: params(u),
        }
        .into(),
        7 => RequestUpdate {
            request_id: small(u, 16),
            params: params(u),
        }
        .into(),
        8 => RequestOk {
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        9 => RequestError::new(RequestErrorCode(small(u, 0x20)), "no").into(),
        10 => SubscribeOk {
            track_alias: small(u, 4),
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        11 => FetchOk {
            end_of_track: flag(u),
            end_location: location(u),
            params: params(u),
            track_properties: Properties::default(),
        }
        .into(),
        12 => PublishDone {
            status: PublishDoneCode(small(u, 8)),
            stream_count: small(u, 8),
            reason: String::new(),
        }
        .into(),
        13 => Namespace {
            suffix: namespace(u),
            cluster: None,
        }
        .into(),
        14 => NamespaceDone {
            suffix: namespace(u),
        }
        .into(),
        15 => PublishSkipped {
            suffix: namespace(u),
            name: Bytes::from_static(b"video"),
        }
        .into(),
        16 => Goaway {
            // A client's GOAWAY has no URI (draft-19 §10.4): a URI, now and then, is a
            // violation whichever side sends it.
            new_session_uri: if u.ratio(7, 8).unwrap_or(true) {
                Bytes::new()
            } else {
                Bytes::from_static(b"moqt://elsewhere/moq")
            },
            timeout_ms: small(u, 10_000),
            request_id: flag(u).then(|| small(u, 16)),
        }
        .into(),
        17 => Setup {
            options: setup_options(u, Version::PREFERRED, false),
        }
        .into(),
        18 => MaxRequestId {
            request_id: small(u, 128),
        }
        .into(),
        19 => RequestsBlocked {
            maximum_request_id: small(u, 128),
        }
        .into(),
        20 => Unsubscribe.into(),
        21 => FetchCancel.into(),
        22 => PublishNamespaceDone.into(),
        23 => PublishNamespaceCancel {
            code: RequestErrorCode(small(u, 0x20)),
            reason: String::new(),
        }
        .into(),
        24 => UnsubscribeNamespace.into(),
        _ => PublishStateNotify { params: params(u) }.into(),
    }
}

/// Encodes a message with an envelope the input picks (drafts 14-16 address answers by
/// Request ID); falls back to raw bytes if the message has no encoding in this version.
fn encode(u: &mut Unstructured<'_>, msg: &Message, v: Version) -> Vec<u8> {
    let env = if v.single_control_stream() && flag(u) {
        Envelope {
            address: Some(if u.ratio(1, 8).unwrap_or(false) {
                Address::Namespace(namespace(u))
            } else {
                Address::Request(small(u, 16))
            }),
            answers: Some(request_type(u)),
        }
    } else {
        Envelope::default()
    };
    msg.encode_addressed_to_vec(&env, v)
        .or_else(|_| msg.encode_to_vec(v))
        .unwrap_or_default()
}

/// Where a message goes, which decides the kinds a well-behaved peer would send there (with
/// any kind now and then).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    /// The control stream.
    Control,
    /// The first message of a request stream the peer opens.
    Opening,
    /// A later message on a request stream: answers, updates, NAMESPACE, ...
    Request,
}

/// Message bytes for `place`: mostly an encoded message of a kind that belongs there,
/// sometimes any kind, sometimes raw bytes.
fn message_bytes(u: &mut Unstructured<'_>, v: Version, place: Place, next_id: &mut u64) -> Vec<u8> {
    if u.ratio(1, 64).unwrap_or(false) {
        return bytes(u, 64);
    }
    let any = u.ratio(1, 16).unwrap_or(false);
    let kind = if any {
        small(u, 25)
    } else {
        match place {
            // Drafts 14-16 carry every request on the control stream; later ones only GOAWAY.
            Place::Control if v.single_control_stream() => small(u, 25),
            Place::Control => 16,
            Place::Opening => small(u, 6),
            Place::Request => 7 + small(u, 8),
        }
    };
    let m = message(u, kind, next_id);
    let b = encode(u, &m, v);
    if b.is_empty() && place == Place::Opening {
        // The kind has no encoding in this version (FETCH's forms differ): open with a
        // SUBSCRIBE rather than with nothing.
        let m = message(u, 0, next_id);
        return encode(u, &m, v);
    }
    b
}

impl Peer {
    fn pick<T>(u: &mut Unstructured<'_>, list: &mut [T]) -> Option<usize> {
        if list.is_empty() {
            None
        } else {
            u.choose_index(list.len()).ok()
        }
    }

    /// Writes on a send half, waiting at most `STEP`.
    async fn write(s: &mut BoxSendStream, b: &[u8]) {
        let _ = within(STEP, s.write_all(b)).await;
    }

    /// The SETUP exchange as the peer: valid, or as `mode` spoils it.
    async fn setup(&mut self, u: &mut Unstructured<'_>, mode: u8) {
        let v = self.v;
        let client = self.ours == Role::Server;
        let grant = small(u, 64);
        let options = setup_options(u, v, client);
        // Mode: 0-239 valid; then raw bytes, nothing, or a wrong version offered.
        let raw = (240..248).contains(&mode);
        let silent = (248..252).contains(&mode);
        let wrong = mode >= 252;
        if silent {
            return;
        }
        let bytes_ = if raw {
            bytes(u, 64)
        } else if v.single_control_stream() {
            let number = if wrong { 0xff00_0001 } else { v.setup_number() };
            let m: Message = if client {
                ClientSetup {
                    versions: if v.setup_has_versions() {
                        vec![number]
                    } else {
                        Vec::new()
                    },
                    max_request_id: Some(grant),
                    options,
                }
                .into()
            } else {
                ServerSetup {
                    version: v.setup_has_versions().then_some(number),
                    max_request_id: Some(grant),
                    options,
                }
                .into()
            };
            m.encode_to_vec(v).unwrap_or_default()
        } else {
            let mut options = options;
            if wrong {
                options.path = Some(Bytes::from_static(b"not a path"));
            }
            Message::from(Setup { options })
                .encode_to_vec(v)
                .unwrap_or_default()
        };
        if v.single_control_stream() {
            let pair = if client {
                self.conn.open_bi().await
            } else {
                match within(END, self.conn.accept_bi()).await {
                    Some(r) => r,
                    None => return,
                }
            };
            if let Ok((mut send, recv)) = pair {
                Self::write(&mut send, &bytes_).await;
                self.control = Some(send);
                self.control_recv = Some(recv);
            }
        } else if let Ok(mut send) = self.conn.open_uni().await {
            Self::write(&mut send, &bytes_).await;
            self.control = Some(send);
        }
    }

    /// Reads what is there on a receive half, without waiting past `STEP`.
    async fn drain(r: &mut BoxRecvStream) {
        for _ in 0..8 {
            match within(STEP, r.read_chunk(64 * 1024)).await {
                Some(Ok(Some(_))) => {}
                _ => break,
            }
        }
    }

    async fn data_stream(&mut self, u: &mut Unstructured<'_>) {
        let v = self.v;
        let Ok(Ok(mut send)) = within(STEP, self.conn.open_uni()).await.ok_or(()) else {
            return;
        };
        let mut buf = Vec::new();
        let (mut sub, mut fetch) = (None, None);
        match small(u, 16) {
            0 => buf = bytes(u, 64),
            1 | 2 => {
                let _ = FetchHeader {
                    request_id: small(u, 16),
                }
                .encode(&mut buf, v);
                fetch = Some(FetchWriter::new(GroupOrder::Ascending, v));
            }
            _ => {
                let header = SubgroupHeader {
                    track_alias: small(u, 4),
                    group: small(u, 8),
                    subgroup: match small(u, 2) {
                        0 => SubgroupId::Zero,
                        1 => SubgroupId::FirstObject,
                        _ => SubgroupId::Explicit(small(u, 4)),
                    },
                    priority: flag(u).then(|| small(u, 255) as u8),
                    properties: flag(u),
                    end_of_group: flag(u),
                    first_object: flag(u),
                };
                let w = SubgroupWriter::new(header, v);
                let _ = w.encode_header(&mut buf);
                sub = Some(w);
            }
        }
        Self::objects(u, &mut buf, &mut sub, &mut fetch);
        Self::write(&mut send, &buf).await;
        self.data.push((send, sub, fetch));
    }

    /// Appends a few objects with the stream's writer (or raw bytes).
    fn objects(
        u: &mut Unstructured<'_>,
        buf: &mut Vec<u8>,
        sub: &mut Option<SubgroupWriter>,
        fetch: &mut Option<FetchWriter>,
    ) {
        for _ in 0..small(u, 3) {
            let payload = bytes(u, 16);
            let status = match small(u, 6) {
                0 => ObjectStatus::EndOfGroup,
                1 => ObjectStatus::EndOfTrack,
                _ => ObjectStatus::Normal,
            };
            if let Some(w) = sub.as_mut() {
                let id = small(u, 16);
                if w.encode_object(buf, id, &Properties::default(), status, &payload)
                    .is_err()
                {
                    buf.extend_from_slice(&payload);
                }
            } else if let Some(w) = fetch.as_mut() {
                let obj = FetchObject {
                    location: location(u),
                    subgroup: flag(u).then(|| small(u, 4)),
                    priority: small(u, 255) as u8,
                    properties: Properties::default(),
                    payload_len: payload.len() as u64,
                };
                if w.encode_object(buf, &obj).is_ok() {
                    buf.extend_from_slice(&payload);
                }
            } else {
                buf.extend_from_slice(&payload);
            }
        }
    }

    fn datagram(&self, u: &mut Unstructured<'_>) {
        let b = if u.ratio(1, 16).unwrap_or(false) {
            Bytes::from(bytes(u, 64))
        } else {
            let d = ObjectDatagram {
                track_alias: small(u, 4),
                group: small(u, 8),
                object: small(u, 8),
                priority: flag(u).then(|| small(u, 255) as u8),
                properties: Properties::default(),
                end_of_group: flag(u),
                body: if u.ratio(1, 5).unwrap_or(false) {
                    DatagramBody::Status(ObjectStatus::EndOfGroup)
                } else {
                    DatagramBody::Payload(Bytes::from(bytes(u, 32)))
                },
            };
            match d.encode_to_bytes(self.v) {
                Ok(b) => b,
                Err(_) => return,
            }
        };
        let _ = self.conn.send_datagram(b);
    }

    /// One peer action.
    async fn act(&mut self, u: &mut Unstructured<'_>) {
        let v = self.v;
        let mut choice = small(u, 19);
        // After SETUP, later drafts' control streams carry GOAWAY only: open a request
        // stream instead, mostly.
        if choice <= 1 && !v.single_control_stream() && u.ratio(3, 4).unwrap_or(true) {
            choice = 2;
        }
        if trace() {
            eprintln!("  peer action {choice}");
        }
        match choice {
            0 | 1 => {
                let b = message_bytes(u, v, Place::Control, &mut self.next_id);
                if let Some(c) = self.control.as_mut() {
                    Self::write(c, &b).await;
                }
            }
            2..=4 => {
                // A request stream of the peer's (drafts 14-16: mostly the control stream,
                // which carries their requests).
                let b = message_bytes(u, v, Place::Opening, &mut self.next_id);
                if v.single_control_stream() && u.ratio(3, 4).unwrap_or(false) {
                    if let Some(c) = self.control.as_mut() {
                        Self::write(c, &b).await;
                    }
                } else if let Some(Ok((mut send, recv))) = within(STEP, self.conn.open_bi()).await {
                    Self::write(&mut send, &b).await;
                    if u.ratio(1, 8).unwrap_or(false) {
                        let _ = send.finish();
                    }
                    self.requests.push((send, recv));
                }
            }
            5 => {
                // Our session's request stream, accepted.
                if let Some(Ok(pair)) = within(STEP, self.conn.accept_bi()).await {
                    self.requests.push(pair);
                }
            }
            6 | 7 => {
                // A message (an answer, mostly) on a request stream.
                let b = message_bytes(u, v, Place::Request, &mut self.next_id);
                if let Some((s, _)) =
                    Self::pick(u, &mut self.requests).and_then(|i| self.requests.get_mut(i))
                {
                    Self::write(s, &b).await;
                }
            }
            8 => {
                if let Some(i) = Self::pick(u, &mut self.requests) {
                    let how = small(u, 4);
                    let code = small(u, 0x20);
                    match how {
                        0 => {
                            if let Some((s, _)) = self.requests.get_mut(i) {
                                let _ = s.finish();
                            }
                        }
                        1 => {
                            if let Some((s, _)) = self.requests.get_mut(i) {
                                s.reset(code);
                            }
                        }
                        2 => {
                            if let Some((_, r)) = self.requests.get_mut(i) {
                                r.stop(code);
                            }
                        }
                        3 => {
                            if let Some((_, r)) = self.requests.get_mut(i) {
                                Self::drain(r).await;
                            }
                        }
                        _ => {
                            self.requests.swap_remove(i);
                        }
                    }
                }
            }
            9..=11 => self.data_stream(u).await,
            12 => {
                if let Some(i) = Self::pick(u, &mut self.data) {
                    let mut buf = Vec::new();
                    if let Some((s, sub, fetch)) = self.data.get_mut(i) {
                        Self::objects(u, &mut buf, sub, fetch);
                        Self::write(s, &buf).await;
                    }
                }
            }
            13 => {
                if let Some(i) = Self::pick(u, &mut self.data) {
                    let how = small(u, 2);
                    let code = small(u, 0x20);
                    if let Some((s, _, _)) = self.data.get_mut(i) {
                        match how {
                            0 => {
                                let _ = s.finish();
                            }
                            1 => s.reset(code),
                            _ => {}
                        }
                    }
                    if how == 2 {
                        self.data.swap_remove(i);
                    }
                }
            }
            14 | 15 => self.datagram(u),
            16 => {
                // Our session's unidirectional streams: accept, read, stop.
                if u.ratio(1, 2).unwrap_or(false) {
                    if let Some(Ok(r)) = within(STEP, self.conn.accept_uni()).await {
                        self.incoming.push(r);
                    }
                } else if let Some(i) = Self::pick(u, &mut self.incoming) {
                    let stop = flag(u);
                    if let Some(r) = self.incoming.get_mut(i) {
                        if stop {
                            r.stop(small(u, 0x10));
                        } else {
                            Self::drain(r).await;
                        }
                    }
                }
            }
            17 => {
                if let Some(r) = self.control_recv.as_mut() {
                    Self::drain(r).await;
                }
            }
            18 => {
                // Closing or resetting the control stream is a violation: rarely.
                let finish = flag(u);
                let code = small(u, 8);
                if let Some(c) = self
                    .control
                    .as_mut()
                    .filter(|_| u.ratio(1, 16).unwrap_or(false))
                {
                    if finish {
                        let _ = c.finish();
                    } else {
                        c.reset(code);
                    }
                }
            }
            _ => settle(Duration::from_millis(small(u, 20_000))).await,
        }
    }
}

/// Runs an application request as a task of its own; what it obtains joins `app`.
fn spawn_app<F, T>(
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    app: &Arc<App>,
    f: F,
    wrap: fn(T) -> Handle,
) where
    F: Future<Output = Result<T, moq_transport::Error>> + Send + 'static,
    T: Send + 'static,
{
    let app = app.clone();
    tasks.push(tokio::spawn(async move {
        if let Ok(h) = f.await {
            app.push(wrap(h));
        }
    }));
}

/// One application action.
async fn app_act(
    u: &mut Unstructured<'_>,
    session: &Session,
    app: &Arc<App>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let s = session.clone();
    let choice = small(u, 13);
    if trace() {
        eprintln!("  app action {choice}");
    }
    match choice {
        0 => {
            let (t, p) = (track(u), params(u));
            spawn_app(
                tasks,
                app,
                async move { s.subscribe(t, p).await },
                Handle::Subscription,
            );
        }
        1 => {
            let ns = namespace(u);
            spawn_app(
                tasks,
                app,
                async move { s.subscribe_namespace(ns).await },
                Handle::Namespaces,
            );
        }
        2 => {
            let ns = namespace(u);
            spawn_app(
                tasks,
                app,
                async move { s.publish_namespace(ns).await },
                Handle::Published,
            );
        }
        3 => {
            let req = FetchType::Standalone {
                track: track(u),
                start: location(u),
                end: location(u),
            };
            let p = params(u);
            spawn_app(
                tasks,
                app,
                async move { s.fetch(req, p).await },
                Handle::Fetch,
            );
        }
        4 => {
            let (t, p) = (track(u), params(u));
            tasks.push(tokio::spawn(async move {
                let _ = s.track_status(t, p).await;
            }));
        }
        5 => {
            let (ns, p) = (namespace(u), params(u));
            spawn_app(
                tasks,
                app,
                async move { s.subscribe_tracks(ns, p).await },
                Handle::Tracks,
            );
        }
        6 => {
            let t = track(u);
            let options = PublishOptions {
                track_alias: flag(u).then(|| small(u, 4)),
                largest: flag(u).then(|| location(u)),
                ..Default::default()
            };
            spawn_app(
                tasks,
                app,
                async move { s.publish(t, options).await },
                Handle::Track,
            );
        }
        7 | 8 => {
            // Answer the peer's next request: accept or reject.
            let accept = flag(u);
            let largest = flag(u).then(|| location(u));
            let app2 = app.clone();
            tasks.push(tokio::spawn(async move {
                let Some(Some(req)) = within(STEP, s.incoming().next()).await else {
                    return;
                };
                let no = || RequestError::new(RequestErrorCode(0x4), "no");
                match req {
                    Incoming::Subscribe(r) if accept => {
                        let resp = SubscribeResponse {
                            largest,
                            ..Default::default()
                        };
                        if let Ok(w) = r.accept(resp).await {
                            if let Ok(mut g) =
                                w.open_subgroup(0, SubgroupId::Zero, None, false).await
                            {
                                let _ = g.write_object(0, Bytes::from_static(b"obj")).await;
                            }
                            app2.push(Handle::Writer(w));
                        }
                    }
                    Incoming::Fetch(r) if accept => {
                        let end = FetchEnd {
                            end_of_track: false,
                            end: largest.unwrap_or_default(),
                            track_properties: Properties::default(),
                        };
                        let _ = r.accept(end).await;
                    }
                    Incoming::TrackStatus(r) if accept => r.accept(TrackStatusInfo {
                        largest,
                        expires: None,
                        track_properties: Properties::default(),
                    }),
                    Incoming::Publish(r) if accept => {
                        if let Ok(sub) = r.accept(Parameters::default()).await {
                            app2.push(Handle::Subscription(sub));
                        }
                    }
                    Incoming::SubscribeTracks(r) if accept => {
                        if let Ok(resp) = r.accept().await {
                            app2.push(Handle::Responder(resp));
                        }
                    }
                    Incoming::Subscribe(r) => r.reject(no()),
                    Incoming::Fetch(r) => r.reject(no()),
                    Incoming::TrackStatus(r) => r.reject(no()),
                    Incoming::Publish(r) => r.reject(no()),
                    Incoming::SubscribeTracks(r) => r.reject(no()),
                    _ => {}
                }
            }));
        }
        9 => {
            // Drop or poll one of the handles.
            let drop_it = flag(u);
            let taken = {
                let mut handles = app.handles.lock();
                let n = handles.len();
                (n > 0).then(|| handles.swap_remove(u.choose_index(n).unwrap_or(0)))
            };
            if let Some(mut h) = taken.filter(|_| !drop_it)
                && !h.poll(4).await
            {
                app.push(h);
            }
        }
        11 | 12 => {
            // Use one of the handles.
            let taken = {
                let mut handles = app.handles.lock();
                let n = handles.len();
                (n > 0).then(|| handles.swap_remove(u.choose_index(n).unwrap_or(0)))
            };
            if let Some(mut h) = taken {
                h.exercise(u).await;
                app.push(h);
            }
        }
        10 => {
            let uri = if flag(u) { "" } else { "moqt://other/moq" };
            let timeout = Duration::from_millis(small(u, 5_000));
            tasks.push(tokio::spawn(async move {
                let _ = s.goaway(uri, timeout).await;
            }));
        }
        _ => {
            if u.ratio(1, 8).unwrap_or(false) {
                session.close(SessionErrorCode::NO_ERROR, "fuzz app closes");
            }
        }
    }
}

async fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let v = version(&mut u);
    let ours = if flag(&mut u) {
        Role::Server
    } else {
        Role::Client
    };
    let mode: u8 = u.arbitrary().unwrap_or(0);
    let mut config = SessionConfig {
        accept_requests: flag(&mut u),
        ..Default::default()
    };
    config.limits.max_peer_requests = 1 + small(&mut u, 63);

    let (c, s) = memory::pair(v.alpn(), TransportKind::RawQuic);
    let (ours_conn, peer_conn) = if ours == Role::Client { (c, s) } else { (s, c) };
    let destination = if ours == Role::Client {
        Destination {
            path: Some("/moq".into()),
            authority: Some("localhost".into()),
        }
    } else {
        Destination::default()
    };
    let mut peer = Peer {
        conn: peer_conn,
        v,
        ours,
        control: None,
        control_recv: None,
        requests: Vec::new(),
        data: Vec::new(),
        incoming: Vec::new(),
        next_id: match ours {
            // The peer's Request IDs have the other role's parity (client even, server odd).
            Role::Server => 0,
            Role::Client => 1,
        },
    };
    let conn: Arc<dyn Connection> = Arc::new(ours_conn);
    let establish = Session::establish(conn, ours, config, destination);
    let (session, ()) = tokio::join!(within(END, establish), peer.setup(&mut u, mode));
    let session = match session {
        None => panic!("SETUP neither finished nor timed out"),
        Some(Err(e)) => {
            if trace() {
                eprintln!("{v} ours={ours:?} mode={mode}: SETUP failed: {e}");
            }
            finish_peer(&mut u, peer);
            return;
        }
        Some(Ok(s)) => s,
    };

    let app = Arc::new(App::default());
    let mut tasks = Vec::new();
    let mut actions = 0;
    while actions < MAX_ACTIONS && !u.is_empty() {
        actions += 1;
        if u.ratio(1, 4).unwrap_or(false) {
            app_act(&mut u, &session, &app, &mut tasks).await;
        } else {
            peer.act(&mut u).await;
        }
        settle(Duration::from_millis(1)).await;
    }
    settle(STEP).await;

    if trace() {
        eprintln!(
            "{v} ours={ours:?}: {actions} actions, {} tasks, {} open requests, {} handles, \
             {} peer requests, {} data streams, closed: {:?}",
            session.task_count(),
            session.open_requests(),
            app.handles.lock().len(),
            peer.requests.len(),
            peer.data.len(),
            session.close_reason()
        );
    }

    // Bounded: a few tasks per action at most (accept loops, one per stream and request).
    let limit = 16 + 6 * actions;
    let n = session.task_count();
    assert!(n <= limit, "{n} session tasks after {actions} actions");
    let open = session.open_requests();
    assert!(
        open <= limit,
        "{open} open requests after {actions} actions"
    );

    // The peer goes away; everything must end.
    finish_peer(&mut u, peer);
    if within(END, session.closed()).await.is_none() {
        panic!("session still open {END:?} after the peer left");
    }
    if within(END, session.stopped()).await.is_none() {
        panic!(
            "session closed but {} tasks still run after {END:?}",
            session.task_count()
        );
    }
    assert_eq!(session.task_count(), 0, "tasks left after stopped()");
    for (i, t) in tasks.into_iter().enumerate() {
        match within(END, t).await {
            None => panic!("application task {i} still waits after the session closed"),
            Some(Err(e)) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Some(_) => {}
        }
    }
    // The queue of the peer's requests ends too (what is left in it is refused as dropped).
    let incoming = session.incoming();
    let drained = within(END, async {
        for _ in 0..MAX_DRAIN {
            if incoming.next().await.is_none() {
                return true;
            }
        }
        false
    });
    if drained.await != Some(true) {
        panic!("incoming requests did not end after the session closed");
    }
    let handles = std::mem::take(&mut *app.handles.lock());
    for (i, h) in handles.into_iter().enumerate() {
        h.must_end(i).await;
    }
}

/// Closes the peer's end (with a code, or by dropping every handle to it).
fn finish_peer(u: &mut Unstructured<'_>, peer: Peer) {
    if flag(u) {
        peer.conn.close(small(u, 0x20), "fuzz peer leaves");
    }
    drop(peer);
}
