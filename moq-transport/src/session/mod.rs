//! A MOQT session: SETUP, the control streams, request streams and their dispatch.
//!
//! One driver (a few tasks) per session accepts the peer's streams and datagrams; every request
//! runs on its own bidirectional stream in its own task. State shared between them is small and
//! behind short locks. When the session ends, for whatever reason, the reason is broadcast and
//! every request and handle built on it ends with that error.

mod auth;
mod config;
mod driver;
mod ids;
mod setup;
pub(crate) mod stream;

pub use auth::{AllowAll, AuthRequest, Authorizer, RequestKind, ResolvedToken, SessionInfo};
pub use config::{Limits, SessionConfig};
pub use setup::IMPLEMENTATION;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::{RequestErrorCode, SessionErrorCode, StreamResetCode};
use moq_core::message::FetchType;
use moq_core::message::{Goaway, Parameters, RequestError, SetupOptions};
use moq_core::{AuthToken, FullTrackName, TrackNamespace, Version};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::Error;
use crate::namespace::{
    NamespaceIndex, NamespaceSubscription, PrefixTrie, PublishedNamespace, publish_namespace,
    subscribe_namespace,
};
use crate::track::{
    AliasTable, FetchResponse, Incoming, IncomingRequests, PublishOptions, PublishedTrack,
    Subscription, TrackStatusInfo, TrackSubscription,
};
use crate::track::{JoinState, Sink};
use crate::transport::{Connection, TransportKind};
use auth::TokenCache;
use ids::PeerRequestIds;
use stream::{Reader, Writer};

/// Which end of the connection this is. Clients use even Request IDs, servers odd ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The side that opened the connection.
    Client,
    /// The side that accepted it.
    Server,
}

impl Role {
    /// The parity of this role's Request IDs (draft-19 §10.1).
    pub const fn request_id_parity(self) -> u64 {
        match self {
            Role::Client => 0,
            Role::Server => 1,
        }
    }

    /// The other side.
    pub const fn peer(self) -> Role {
        match self {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        }
    }
}

/// A GOAWAY received on the control stream (draft-19 §3.6, §10.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoawayInfo {
    /// Where to reconnect; empty means the current URI.
    pub new_session_uri: String,
    /// How long the peer waits before closing; zero if it gave none.
    pub timeout: Duration,
}

/// Where the session's peer asked to connect; known to a server from PATH / AUTHORITY or the
/// WebTransport CONNECT request, and sent by a raw-QUIC client.
#[derive(Clone, Debug, Default)]
pub struct Destination {
    /// Path and query.
    pub path: Option<String>,
    /// Host and port.
    pub authority: Option<String>,
}

/// An incoming PUBLISH_NAMESPACE we accepted, so it can be revoked.
#[derive(Debug)]
struct Announced {
    namespace: TrackNamespace,
    revoke: mpsc::Sender<StreamResetCode>,
}

pub(crate) struct SessionInner {
    pub(crate) conn: Arc<dyn Connection>,
    pub(crate) version: Version,
    pub(crate) role: Role,
    pub(crate) config: SessionConfig,
    close_tx: watch::Sender<Option<Error>>,
    /// The reason the session ended, set before the connection is closed.
    close_reason: OnceLock<Error>,
    next_request_id: AtomicU64,
    peer_ids: Mutex<PeerRequestIds>,
    /// Prefixes of the peer's live SUBSCRIBE_NAMESPACE requests (one overlap space).
    pub(crate) namespace_prefixes: Mutex<PrefixTrie<()>>,
    /// Prefixes of the peer's live SUBSCRIBE_TRACKS requests (the other overlap space).
    #[allow(dead_code)]
    pub(crate) track_prefixes: Mutex<PrefixTrie<()>>,
    announced: Mutex<HashMap<u64, Announced>>,
    keys: AtomicU64,
    tokens: Mutex<TokenCache>,
    info: OnceLock<SessionInfo>,
    peer_setup: OnceLock<SetupOptions>,
    setup_done: watch::Sender<bool>,
    setup_tx: Mutex<Option<SetupSender>>,
    pub(crate) control_seen: AtomicBool,
    control_writer: tokio::sync::Mutex<Option<Writer>>,
    goaway_sent: AtomicBool,
    goaway_received: watch::Sender<Option<GoawayInfo>>,
    pub(crate) open_requests: AtomicUsize,
    pub(crate) pending_streams: Arc<tokio::sync::Semaphore>,
    /// Subscriber side: Track Alias -> subscriptions, and fetches awaiting their stream.
    pub(crate) aliases: Mutex<AliasTable>,
    /// Bumped whenever an alias is registered, so held streams look again.
    pub(crate) alias_generation: watch::Sender<u64>,
    /// Streams held for an unknown alias.
    pub(crate) parked_streams: AtomicUsize,
    /// Publisher side: the next Track Alias we hand out.
    next_alias: AtomicU64,
    /// Publisher side: subscriptions by Request ID, for Joining FETCH.
    joins: Mutex<HashMap<u64, watch::Receiver<JoinState>>>,
    /// Bumped whenever a subscription is recorded in `joins`, so a Joining FETCH that overtook
    /// its SUBSCRIBE (they travel on separate streams) can wait for it.
    joins_changed: watch::Sender<u64>,
    /// Requests for the application, if it takes them.
    incoming_tx: Option<mpsc::Sender<Incoming>>,
    incoming_rx: Arc<tokio::sync::Mutex<mpsc::Receiver<Incoming>>>,
}

/// Hands the peer's SETUP (and its control stream) from the driver to the handshake.
type SetupSender = oneshot::Sender<Result<(SetupOptions, Reader), Error>>;

impl std::fmt::Debug for SessionInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionInner")
            .field("version", &self.version)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes a subscription from the Joining FETCH table when its request ends.
pub(crate) struct JoinGuard<'a>(&'a SessionInner, u64);

impl Drop for JoinGuard<'_> {
    fn drop(&mut self) {
        lock(&self.0.joins).remove(&self.1);
    }
}

/// Counts a live request for GOAWAY_TIMEOUT; decrements on drop.
pub(crate) struct RequestGuard(Arc<SessionInner>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.0.open_requests.fetch_sub(1, Ordering::Relaxed);
    }
}

impl SessionInner {
    /// Passes on an error from reading a response: one that breaks the session (a malformed
    /// message, a violation) closes it first (draft-19 §10.2.1: e.g. a Message Parameter not
    /// allowed in the message is a PROTOCOL_VIOLATION).
    pub(crate) fn fail(&self, err: Error) -> Error {
        if err.is_session_error() {
            self.close(err.clone());
        }
        err
    }

    /// Ends the session with `err`; the first reason wins and reaches every handle.
    ///
    /// The connection is closed before the reason is broadcast, so tasks that wake up and drop
    /// their streams cannot send a FIN that the peer would mistake for a graceful end.
    pub(crate) fn close(&self, err: Error) {
        if self.close_reason.set(err.clone()).is_err() {
            return;
        }
        match &err {
            Error::ClosedByPeer { .. } | Error::Transport(_) => {
                tracing::info!(error = %err, "session ended");
            }
            _ => {
                let code = err.session_code();
                if code == SessionErrorCode::NO_ERROR {
                    tracing::info!(error = %err, "closing session");
                } else {
                    tracing::warn!(code = ?code, error = %err, "closing session");
                }
                let mut reason = err.to_string();
                reason.truncate(1024);
                self.conn.close(code.0, &reason);
            }
        }
        self.close_tx.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(err);
                true
            } else {
                false
            }
        });
    }

    /// Resolves with the reason once the session has ended and its connection is closed (so
    /// streams dropped afterwards send nothing).
    pub(crate) async fn closed(&self) -> Error {
        let mut rx = self.close_tx.subscribe();
        let res = match rx.wait_for(|v| v.is_some()).await {
            Ok(v) => v.clone(),
            Err(_) => None,
        };
        // WebTransport closes asynchronously (a capsule, then the connection): wait briefly.
        let _ = tokio::time::timeout(Duration::from_secs(1), self.conn.closed()).await;
        res.unwrap_or(Error::Closed {
            code: SessionErrorCode::NO_ERROR,
            reason: "session dropped".into(),
        })
    }

    /// The reason the session ended, if it has.
    pub(crate) fn close_reason(&self) -> Option<Error> {
        self.close_reason.get().cloned()
    }

    /// `e`, or the session's close reason if `e` only reports the session going away.
    pub(crate) fn error(&self, e: Error) -> Error {
        match (&e, self.close_reason()) {
            (Error::Transport(_) | Error::ClosedByPeer { .. }, Some(reason)) => reason,
            _ => e,
        }
    }

    /// Records one of the peer's Request IDs, closing the session with INVALID_REQUEST_ID if it
    /// has the wrong parity or repeats (draft-19 §10.1).
    pub(crate) fn check_peer_request_id(&self, id: u64) -> Result<(), Error> {
        let res = lock(&self.peer_ids).check(id);
        if let Err(e) = &res {
            self.close(e.clone());
        }
        res
    }

    /// Our next Request ID (draft-19 §10.1: by parity, +2 each).
    pub(crate) fn next_request_id(&self) -> u64 {
        self.next_request_id.fetch_add(2, Ordering::Relaxed)
    }

    /// A process-unique key for local bookkeeping.
    pub(crate) fn next_key(&self) -> u64 {
        self.keys.fetch_add(1, Ordering::Relaxed)
    }

    /// Resolves AUTHORIZATION_TOKEN parameters; alias errors close the session.
    pub(crate) fn resolve_tokens(&self, tokens: &[AuthToken]) -> Result<Vec<ResolvedToken>, Error> {
        let res = lock(&self.tokens).resolve(tokens);
        if let Err(e) = &res {
            self.close(e.clone());
        }
        res
    }

    pub(crate) fn info(&self) -> Option<&SessionInfo> {
        self.info.get()
    }

    /// Runs the application's authorizer.
    pub(crate) async fn authorize(&self, req: &AuthRequest<'_>) -> Result<(), RequestError> {
        match self.info() {
            Some(info) => self.config.authorizer.authorize(info, req).await,
            None => Err(auth::unauthorized()),
        }
    }

    /// Whether we sent GOAWAY (new requests may be refused with GOING_AWAY).
    pub(crate) fn goaway_sent(&self) -> bool {
        self.goaway_sent.load(Ordering::Relaxed)
    }

    /// Counts a live request.
    pub(crate) fn request_guard(self: &Arc<Self>) -> RequestGuard {
        self.open_requests.fetch_add(1, Ordering::Relaxed);
        RequestGuard(self.clone())
    }

    /// Opens a request stream for a new request of ours. Refuses after the session ended or a
    /// GOAWAY arrived (draft-19 §10.4: SHOULD NOT initiate new requests).
    pub(crate) async fn open_request(&self) -> Result<(Writer, Reader), Error> {
        if let Some(e) = self.close_reason() {
            return Err(e);
        }
        if self.goaway_received.borrow().is_some() {
            return Err(Error::GoingAway);
        }
        let (send, recv) = tokio::select! {
            r = self.conn.open_bi() => r?,
            e = self.closed() => return Err(e),
        };
        let mut writer = Writer::new(send, self.version);
        // draft-19 §7.2: request streams go before object data.
        writer.set_priority(REQUEST_PRIORITY);
        Ok((writer, Reader::new(recv, self.version)))
    }

    /// Records an accepted PUBLISH_NAMESPACE so the application can revoke it.
    pub(crate) fn track_announced(
        &self,
        namespace: TrackNamespace,
    ) -> (u64, mpsc::Receiver<StreamResetCode>) {
        let (tx, rx) = mpsc::channel(1);
        let key = self.next_key();
        lock(&self.announced).insert(
            key,
            Announced {
                namespace,
                revoke: tx,
            },
        );
        (key, rx)
    }

    pub(crate) fn untrack_announced(&self, key: u64) {
        lock(&self.announced).remove(&key);
    }

    pub(crate) fn announced_count(&self) -> usize {
        lock(&self.announced).len()
    }

    /// Registers a subscription's data sink under its Track Alias; DUPLICATE_TRACK_ALIAS closes
    /// the session (draft-19 §11.1).
    pub(crate) fn register_sink(
        &self,
        alias: u64,
        track: &FullTrackName,
        sink: Arc<Sink>,
    ) -> Result<(), Error> {
        let res = lock(&self.aliases).register(alias, track, sink);
        match res {
            Ok(()) => {
                self.alias_generation.send_modify(|g| *g += 1);
                Ok(())
            }
            Err(e) => {
                self.close(e.clone());
                Err(e)
            }
        }
    }

    pub(crate) fn unregister_sink(&self, alias: u64, request_id: u64) {
        lock(&self.aliases).unregister(alias, request_id);
    }

    /// A fresh Track Alias for a subscription we publish.
    pub(crate) fn next_track_alias(&self) -> u64 {
        self.next_alias.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a subscription we publish, for Joining FETCH, until the guard drops. `None` if
    /// the version allows one subscription per track and this session already has one for the
    /// same track (the caller answers DUPLICATE_SUBSCRIPTION).
    pub(crate) fn track_join(
        &self,
        request_id: u64,
        state: watch::Receiver<JoinState>,
    ) -> Option<JoinGuard<'_>> {
        let mut joins = lock(&self.joins);
        if !self.version.allows_duplicate_subscriptions() {
            let track = &state.borrow().track;
            if joins.values().any(|j| j.borrow().track == *track) {
                return None;
            }
        }
        joins.insert(request_id, state);
        drop(joins);
        self.joins_changed.send_modify(|g| *g = g.wrapping_add(1));
        Some(JoinGuard(self, request_id))
    }

    /// The subscription `request_id` for a Joining FETCH, waiting up to `wait` for a SUBSCRIBE
    /// whose stream has not arrived yet.
    pub(crate) async fn join_state_within(
        &self,
        request_id: u64,
        wait: Duration,
    ) -> Option<watch::Receiver<JoinState>> {
        let mut changed = self.joins_changed.subscribe();
        let appeared = async {
            loop {
                if let Some(j) = self.join_state(request_id) {
                    return Some(j);
                }
                changed.changed().await.ok()?;
            }
        };
        tokio::time::timeout(wait, appeared).await.ok().flatten()
    }

    pub(crate) fn join_state(&self, request_id: u64) -> Option<watch::Receiver<JoinState>> {
        lock(&self.joins).get(&request_id).cloned()
    }

    /// Hands a request to the application; a REQUEST_ERROR to send if it cannot take it.
    pub(crate) fn deliver(&self, request: Incoming) -> Result<(), RequestError> {
        let Some(tx) = &self.incoming_tx else {
            return Err(RequestError::new(
                RequestErrorCode::DOES_NOT_EXIST,
                "no such track here",
            ));
        };
        tx.try_send(request).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => RequestError::new(
                RequestErrorCode::EXCESSIVE_LOAD,
                "too many requests waiting",
            ),
            mpsc::error::TrySendError::Closed(_) => RequestError::new(
                RequestErrorCode::GOING_AWAY,
                "the application stopped taking requests",
            ),
        })
    }

    /// The peer's MAX_FILTER_RANGES (0 if it sent none: no Range Filters allowed).
    pub(crate) fn peer_max_filter_ranges(&self) -> u64 {
        self.peer_setup
            .get()
            .and_then(|s| s.max_filter_ranges)
            .unwrap_or(0)
    }

    /// The peer's MAX_REQUEST_UPDATES (0 = unlimited).
    pub(crate) fn peer_max_request_updates(&self) -> u64 {
        self.peer_setup
            .get()
            .and_then(|s| s.max_request_updates)
            .unwrap_or(0)
    }

    /// Handles a GOAWAY from the control stream (draft-19 §10.4).
    pub(crate) fn on_goaway(&self, g: Goaway) -> Result<(), Error> {
        if self.goaway_received.borrow().is_some() {
            return Err(Error::protocol("second GOAWAY on the control stream"));
        }
        // draft-19 §10.4: a server receiving a non-empty New Session URI closes the session.
        if self.role == Role::Server && !g.new_session_uri.is_empty() {
            return Err(Error::protocol("client GOAWAY with a New Session URI"));
        }
        // draft-18 §10.4: the Request ID names one of ours, so it must have our parity.
        if let Some(id) = g.request_id
            && id % 2 != self.role.request_id_parity()
        {
            return Err(Error::violation(
                SessionErrorCode::INVALID_REQUEST_ID,
                "GOAWAY Request ID has the wrong parity",
            ));
        }
        let info = GoawayInfo {
            new_session_uri: String::from_utf8_lossy(&g.new_session_uri).into_owned(),
            timeout: Duration::from_millis(g.timeout_ms),
        };
        tracing::info!(uri = %info.new_session_uri, timeout = ?info.timeout, "GOAWAY received");
        self.goaway_received.send_replace(Some(info));
        Ok(())
    }
}

/// Priority of control streams (draft-19 §7.2: highest).
pub(crate) const CONTROL_PRIORITY: i32 = i32::MAX;
/// Priority of request streams (draft-19 §7.2: below control, above data).
pub(crate) const REQUEST_PRIORITY: i32 = i32::MAX - 1;

/// A MOQT session. Cheap to clone; every clone is the same session.
///
/// The session ends when [`Session::close`] is called, when the peer closes it, when the peer
/// breaks a protocol rule (the session is closed with the code the draft names), or when the
/// connection fails. Every handle built on it then ends with the same [`Error`]. Dropping the
/// last clone closes the session with NO_ERROR.
///
/// ```no_run
/// # async fn example(session: moq_transport::Session) -> Result<(), moq_transport::Error> {
/// use moq_core::TrackNamespace;
/// // Announce a namespace, then discover what the peer knows under a prefix.
/// let _announcement = session.publish_namespace(TrackNamespace::from_strs(["chat", "room1"]).unwrap()).await?;
/// let mut discovery = session.subscribe_namespace(TrackNamespace::from_strs(["chat"]).unwrap()).await?;
/// while let Some(event) = discovery.next().await {
///     println!("{:?}", event?);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Session {
    pub(crate) inner: Arc<SessionInner>,
    _owner: Arc<Owner>,
}

/// Closes the session when the last [`Session`] clone is dropped.
struct Owner(Arc<SessionInner>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close(Error::Closed {
            code: SessionErrorCode::NO_ERROR,
            reason: "session dropped".into(),
        });
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("version", &self.inner.version)
            .field("role", &self.inner.role)
            .field("transport", &self.inner.conn.kind())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Runs the SETUP exchange on an established connection and starts the session.
    ///
    /// The version is the one the connection negotiated (ALPN or `WT-Protocol`). A client sends
    /// `destination` as PATH and AUTHORITY on raw QUIC; a server passes what the WebTransport
    /// CONNECT asked for (or nothing on raw QUIC, where PATH and AUTHORITY arrive in SETUP).
    pub async fn establish(
        conn: Arc<dyn Connection>,
        role: Role,
        config: SessionConfig,
        destination: Destination,
    ) -> Result<Session, Error> {
        let protocol = conn.protocol();
        let version = protocol
            .as_deref()
            .and_then(|p| Version::from_alpn(p.as_bytes()))
            .ok_or_else(|| {
                Error::Connect(format!("no MOQT version negotiated (got {protocol:?})"))
            })?;
        let kind = conn.kind();
        let (setup_tx, setup_rx) = oneshot::channel();
        let (incoming_tx, incoming_rx) = mpsc::channel(config.request_queue.max(1));
        let incoming_tx = config.accept_requests.then_some(incoming_tx);
        let inner = Arc::new(SessionInner {
            conn: conn.clone(),
            version,
            role,
            peer_ids: Mutex::new(PeerRequestIds::new(
                role.peer().request_id_parity(),
                config.limits.request_id_window,
            )),
            tokens: Mutex::new(TokenCache::new(config.max_auth_token_cache_size)),
            pending_streams: Arc::new(tokio::sync::Semaphore::new(
                config.limits.max_pending_streams,
            )),
            config,
            close_tx: watch::channel(None).0,
            close_reason: OnceLock::new(),
            next_request_id: AtomicU64::new(role.request_id_parity()),
            namespace_prefixes: Mutex::new(PrefixTrie::new()),
            track_prefixes: Mutex::new(PrefixTrie::new()),
            announced: Mutex::new(HashMap::new()),
            keys: AtomicU64::new(0),
            info: OnceLock::new(),
            peer_setup: OnceLock::new(),
            setup_done: watch::channel(false).0,
            setup_tx: Mutex::new(Some(setup_tx)),
            control_seen: AtomicBool::new(false),
            control_writer: tokio::sync::Mutex::new(None),
            goaway_sent: AtomicBool::new(false),
            goaway_received: watch::channel(None).0,
            open_requests: AtomicUsize::new(0),
            aliases: Mutex::new(AliasTable::default()),
            alias_generation: watch::channel(0).0,
            parked_streams: AtomicUsize::new(0),
            next_alias: AtomicU64::new(0),
            joins: Mutex::new(HashMap::new()),
            joins_changed: watch::channel(0).0,
            incoming_tx,
            incoming_rx: Arc::new(tokio::sync::Mutex::new(incoming_rx)),
        });
        driver::spawn(inner.clone());

        match Self::handshake(&inner, setup_rx, kind, destination).await {
            Ok(()) => {
                inner.setup_done.send_replace(true);
                tracing::debug!(%version, ?role, ?kind, "session established");
                Ok(Session {
                    _owner: Arc::new(Owner(inner.clone())),
                    inner,
                })
            }
            Err(e) => {
                inner.close(e.clone());
                Err(e)
            }
        }
    }

    async fn handshake(
        inner: &Arc<SessionInner>,
        setup_rx: oneshot::Receiver<Result<(SetupOptions, Reader), Error>>,
        kind: TransportKind,
        destination: Destination,
    ) -> Result<(), Error> {
        let version = inner.version;
        // draft-19 §3.3: each side opens its control stream with SETUP; it may be pipelined.
        let ours = setup::local_setup(
            &inner.config,
            inner.role,
            kind,
            version,
            destination.path.as_deref(),
            destination.authority.as_deref(),
        );
        let send = tokio::select! {
            r = inner.conn.open_uni() => r?,
            e = inner.closed() => return Err(e),
        };
        let mut writer = Writer::new(send, version);
        writer.set_priority(CONTROL_PRIORITY);
        writer.send(ours).await?;
        *inner.control_writer.lock().await = Some(writer);

        let timeout = inner.config.limits.setup_timeout;
        let (peer, control) = tokio::select! {
            r = tokio::time::timeout(timeout, setup_rx) => match r {
                Ok(Ok(r)) => r?,
                Ok(Err(_)) => return Err(inner.closed().await),
                Err(_) => return Err(Error::Timeout("waiting for the peer's SETUP")),
            },
            e = inner.closed() => return Err(e),
        };
        let (path, authority) = setup::check_peer_setup(&peer, inner.role, kind)?;
        let setup_tokens = lock(&inner.tokens)
            .resolve_setup(&peer.authorization_tokens, inner.role == Role::Server)?;
        let info = SessionInfo {
            version,
            transport: kind,
            path: path.or(destination.path),
            authority: authority.or(destination.authority),
            peer_implementation: peer.implementation.clone(),
            setup_tokens,
            remote: inner.conn.remote_addr(),
        };
        if inner.role == Role::Server {
            inner
                .config
                .authorizer
                .authorize_session(&info)
                .await
                .map_err(|code| Error::violation(code, "session refused"))?;
        }
        tracing::debug!(peer = ?info.peer_implementation, path = ?info.path, "peer SETUP");
        let _ = inner.info.set(info);
        let _ = inner.peer_setup.set(peer);
        driver::spawn_control_reader(inner.clone(), control);
        Ok(())
    }

    /// The negotiated version.
    pub fn version(&self) -> Version {
        self.inner.version
    }

    /// Client or server.
    pub fn role(&self) -> Role {
        self.inner.role
    }

    /// Raw QUIC or WebTransport.
    pub fn transport(&self) -> TransportKind {
        self.inner.conn.kind()
    }

    /// What is known about the peer.
    pub fn info(&self) -> &SessionInfo {
        // Set before the session is handed out.
        self.inner
            .info
            .get_or_init(|| unreachable_info(self.inner.version))
    }

    /// The peer's SETUP options.
    pub fn peer_setup(&self) -> &SetupOptions {
        self.inner.peer_setup.get_or_init(SetupOptions::default)
    }

    /// The namespaces this endpoint knows (answers the peer's SUBSCRIBE_NAMESPACE).
    pub fn namespaces(&self) -> &NamespaceIndex {
        &self.inner.config.namespaces
    }

    /// Where the peer's accepted PUBLISH_NAMESPACEs are registered; watch it to learn them.
    pub fn announced(&self) -> &NamespaceIndex {
        &self.inner.config.announced
    }

    /// Announces `namespace` to the peer with PUBLISH_NAMESPACE and waits for its answer.
    /// While the returned handle lives the namespace is also registered as known locally.
    pub async fn publish_namespace(
        &self,
        namespace: TrackNamespace,
    ) -> Result<PublishedNamespace, Error> {
        self.publish_namespace_with(namespace, Parameters::default())
            .await
    }

    /// [`Session::publish_namespace`] with parameters (AUTHORIZATION_TOKEN).
    pub async fn publish_namespace_with(
        &self,
        namespace: TrackNamespace,
        params: Parameters,
    ) -> Result<PublishedNamespace, Error> {
        publish_namespace(self.inner.clone(), namespace, params).await
    }

    /// Asks the peer for the namespaces under `prefix` with SUBSCRIBE_NAMESPACE; the zero-field
    /// prefix asks for all of them. Waits for REQUEST_OK; a REQUEST_ERROR is returned as
    /// [`Error::Rejected`].
    pub async fn subscribe_namespace(
        &self,
        prefix: TrackNamespace,
    ) -> Result<NamespaceSubscription, Error> {
        self.subscribe_namespace_with(prefix, Parameters::default())
            .await
    }

    /// [`Session::subscribe_namespace`] with parameters (AUTHORIZATION_TOKEN).
    pub async fn subscribe_namespace_with(
        &self,
        prefix: TrackNamespace,
        params: Parameters,
    ) -> Result<NamespaceSubscription, Error> {
        subscribe_namespace(self.inner.clone(), prefix, params).await
    }

    /// Subscribes to `track` with SUBSCRIBE and waits for SUBSCRIBE_OK (draft-19 §5.1).
    pub async fn subscribe(
        &self,
        track: FullTrackName,
        params: Parameters,
    ) -> Result<Subscription, Error> {
        crate::track::subscribe(self.inner.clone(), track, params).await
    }

    /// Starts a subscription of ours with PUBLISH; objects may be sent before the peer's
    /// answer (draft-19 §5.1).
    pub async fn publish(
        &self,
        track: FullTrackName,
        options: PublishOptions,
    ) -> Result<PublishedTrack, Error> {
        crate::track::publish(self.inner.clone(), track, options).await
    }

    /// Fetches past objects with FETCH and waits for FETCH_OK (draft-19 §5.2).
    pub async fn fetch(
        &self,
        request: FetchType,
        params: Parameters,
    ) -> Result<FetchResponse, Error> {
        crate::track::fetch(self.inner.clone(), request, params).await
    }

    /// Asks for a track's state with TRACK_STATUS (draft-19 §10.14).
    pub async fn track_status(
        &self,
        track: FullTrackName,
        params: Parameters,
    ) -> Result<TrackStatusInfo, Error> {
        crate::track::track_status(self.inner.clone(), track, params).await
    }

    /// Asks the peer to PUBLISH every track under `prefix` with SUBSCRIBE_TRACKS; the
    /// PUBLISHes arrive through [`Session::incoming`] (draft-19 §6.1).
    pub async fn subscribe_tracks(
        &self,
        prefix: TrackNamespace,
        params: Parameters,
    ) -> Result<TrackSubscription, Error> {
        crate::track::subscribe_tracks(self.inner.clone(), prefix, params).await
    }

    /// The peer's requests for this side to answer: SUBSCRIBE, FETCH, TRACK_STATUS, PUBLISH and
    /// SUBSCRIBE_TRACKS. Empty unless [`SessionConfig::accept_requests`] is set; without it those
    /// requests are refused (DOES_NOT_EXIST, UNINTERESTED, NOT_SUPPORTED).
    pub fn incoming(&self) -> IncomingRequests {
        IncomingRequests {
            rx: self.inner.incoming_rx.clone(),
        }
    }

    /// Revokes our acceptance of every PUBLISH_NAMESPACE of `namespace` from the peer, by
    /// cancelling its request stream with `code` (draft-19 §6.2). Returns how many were revoked.
    pub fn revoke_namespace(&self, namespace: &TrackNamespace, code: StreamResetCode) -> usize {
        let announced = lock(&self.inner.announced);
        announced
            .values()
            .filter(|a| &a.namespace == namespace)
            .filter(|a| a.revoke.try_send(code).is_ok())
            .count()
    }

    /// Sends GOAWAY on the control stream (draft-19 §10.4). A server may name a new URI; a
    /// client's must be empty. After `timeout` (if non-zero) a server closes the session, with
    /// GOAWAY_TIMEOUT if requests are still open.
    pub async fn goaway(&self, new_session_uri: &str, timeout: Duration) -> Result<(), Error> {
        if self.inner.role == Role::Client && !new_session_uri.is_empty() {
            return Err(Error::Invalid("a client's GOAWAY carries no URI".into()));
        }
        if self.inner.goaway_sent.swap(true, Ordering::Relaxed) {
            return Err(Error::Invalid("GOAWAY already sent".into()));
        }
        let msg = Goaway {
            new_session_uri: Bytes::copy_from_slice(new_session_uri.as_bytes()),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            request_id: None,
        };
        {
            let mut w = self.inner.control_writer.lock().await;
            let w = w
                .as_mut()
                .ok_or(Error::Invalid("no control stream".into()))?;
            w.send(msg).await?;
        }
        if self.inner.role == Role::Server && !timeout.is_zero() {
            let inner = self.inner.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = tokio::time::sleep(timeout) => {}
                    _ = inner.closed() => return,
                }
                // draft-19 §3.6: close with GOAWAY_TIMEOUT if requests are still open.
                let code = if inner.open_requests.load(Ordering::Relaxed) > 0 {
                    SessionErrorCode::GOAWAY_TIMEOUT
                } else {
                    SessionErrorCode::NO_ERROR
                };
                inner.close(Error::Closed {
                    code,
                    reason: "GOAWAY timeout".into(),
                });
            });
        }
        Ok(())
    }

    /// The GOAWAY the peer sent, if any.
    pub fn goaway_received(&self) -> Option<GoawayInfo> {
        self.inner.goaway_received.borrow().clone()
    }

    /// Resolves when the peer sends GOAWAY; `None` if the session ends first.
    pub async fn wait_goaway(&self) -> Option<GoawayInfo> {
        let mut rx = self.inner.goaway_received.subscribe();
        tokio::select! {
            r = rx.wait_for(|g| g.is_some()) => r.ok().and_then(|g| g.clone()),
            _ = self.inner.closed() => None,
        }
    }

    /// Closes the session with `code` and `reason`; every handle ends with [`Error::Closed`].
    pub fn close(&self, code: SessionErrorCode, reason: &str) {
        self.inner.close(Error::Closed {
            code,
            reason: reason.into(),
        });
    }

    /// Resolves with the reason once the session has ended.
    pub async fn closed(&self) -> Error {
        self.inner.closed().await
    }

    /// The reason the session ended, if it has.
    pub fn close_reason(&self) -> Option<Error> {
        self.inner.close_reason()
    }

    /// Number of requests currently open on this session, in both directions.
    pub fn open_requests(&self) -> usize {
        self.inner.open_requests.load(Ordering::Relaxed)
    }

    /// The transport connection.
    pub fn connection(&self) -> &Arc<dyn Connection> {
        &self.inner.conn
    }
}

fn unreachable_info(version: Version) -> SessionInfo {
    SessionInfo {
        version,
        transport: TransportKind::RawQuic,
        path: None,
        authority: None,
        peer_implementation: None,
        setup_tokens: Vec::new(),
        remote: None,
    }
}

/// The REQUEST_ERROR for a request refused because we are going away.
pub(crate) fn going_away() -> RequestError {
    RequestError::new(RequestErrorCode::GOING_AWAY, "going away")
}
