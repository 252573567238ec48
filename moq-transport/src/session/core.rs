//! The session core: lifecycle and close, what SETUP settled, Request IDs, authorization tokens,
//! GOAWAY, and the task set. The request kinds and the data planes build on it; it knows none of
//! them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::{Goaway, Parameters, RequestError, RequestType, SetupOptions};
use moq_core::{AuthToken, TrackNamespace, Version};
use parking_lot::Mutex;
use tokio::sync::{Notify, Semaphore, oneshot};

use super::auth::{AuthRequest, ResolvedToken, SessionInfo, TokenCache, unauthorized};
use super::config::SessionConfig;
use super::finished::Finished;
use super::ids::PeerRequestIds;
use super::tasks::TaskSet;
use crate::error::Error;
use crate::framing::{Reader, Writer};
use crate::latch::{InPlace, wait_until};
use crate::mux::Mux;
use crate::transport::{BoxSendStream, Connection, TransportKind};

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

/// A GOAWAY received on the control stream or a request stream (draft-19 §3.6, §10.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GoawayInfo {
    /// Where to reconnect; empty means the current URI.
    pub new_session_uri: String,
    /// How long the peer waits before closing; zero if it gave none.
    pub timeout: Duration,
    /// draft-18, control stream: our requests from this Request ID on were not (or might not
    /// have been) processed; those still unanswered end with [`Error::GoingAway`], to be
    /// re-issued on a new session.
    pub unprocessed_from: Option<u64>,
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

/// Priority of control streams (draft-19 §7.2: highest).
pub(crate) const CONTROL_PRIORITY: i32 = i32::MAX;
/// Priority of request streams (draft-19 §7.2: below control, above data).
pub(crate) const REQUEST_PRIORITY: i32 = i32::MAX - 1;
/// How long a transport that closes gracefully (WebTransport's close capsule) may take before
/// the session's tasks are cancelled anyway.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The state every part of a session shares.
pub(crate) struct SessionCore {
    conn: Arc<dyn Connection>,
    version: Version,
    role: Role,
    config: SessionConfig,
    /// The reason the session ended, set before the connection is closed.
    reason: OnceLock<Error>,
    /// Set once `reason` is set.
    ended: InPlace<()>,
    tasks: TaskSet,
    next_request_id: AtomicU64,
    peer_ids: Mutex<PeerRequestIds>,
    tokens: Mutex<TokenCache>,
    /// What the peer's token cache holds of ours (set up at SETUP).
    sent_tokens: Mutex<TokenCache>,
    info: OnceLock<SessionInfo>,
    peer_setup: OnceLock<SetupOptions>,
    setup_done: InPlace<()>,
    pending_streams: Semaphore,
    /// The first peer Request ID our GOAWAY refuses (`u64::MAX` until we send one).
    goaway_from: AtomicU64,
    /// The peer's control-stream GOAWAY; a second is a violation, so it is set once.
    goaway_received: InPlace<GoawayInfo>,
    control: tokio::sync::Mutex<Option<Writer>>,
    /// Drafts 14-16: the one control stream every request runs on.
    mux: OnceLock<Mux>,
    open_requests: AtomicUsize,
    /// Finished data streams to watch until the peer acknowledges them (those with a
    /// delivery timeout, or still writing their header), for the watching task to take, and
    /// its signal. Not a channel: an unbounded mpsc allocates ~1 KB up front per session.
    finishing: Mutex<Vec<Finishing>>,
    finishing_queued: Notify,
    /// How many of them, and the signal that the count fell to zero. Not a `watch` channel:
    /// that allocates ~400 B per session (its eight receiver notifies).
    unacked: AtomicUsize,
    all_acked: Notify,
    /// The other finished data streams, not watched but held until acknowledged.
    finished: Finished,
}

/// A finished data stream's watch: resolves once the peer acknowledged it (or it was reset).
pub(crate) type Finishing = Pin<Box<dyn Future<Output = ()> + Send>>;

impl std::fmt::Debug for SessionCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionCore")
            .field("version", &self.version)
            .field("role", &self.role)
            .field("transport", &self.conn.kind())
            .finish_non_exhaustive()
    }
}

impl SessionCore {
    /// The core of a session on `conn`, whose version is the protocol the connection
    /// negotiated (ALPN or `WT-Protocol`). Starts the task that watches the connection.
    pub(crate) fn start(
        conn: Arc<dyn Connection>,
        role: Role,
        config: SessionConfig,
    ) -> Result<Arc<SessionCore>, Error> {
        let protocol = conn.protocol();
        let version = protocol
            .as_deref()
            .and_then(|p| Version::from_alpn(p.as_bytes()))
            .ok_or_else(|| {
                Error::from(crate::error::ConnectError::NoCommonVersion {
                    peer: "the peer".into(),
                    offered: format!("{protocol:?}"),
                })
            })?;
        let core = Arc::new(SessionCore {
            finishing: Mutex::new(Vec::new()),
            finishing_queued: Notify::new(),
            unacked: AtomicUsize::new(0),
            all_acked: Notify::new(),
            finished: Finished::default(),
            conn,
            version,
            role,
            peer_ids: Mutex::new(PeerRequestIds::new(
                role.peer().request_id_parity(),
                config.limits.request_id_window,
            )),
            tokens: Mutex::new(TokenCache::new(config.max_auth_token_cache_size)),
            sent_tokens: Mutex::new(TokenCache::default()),
            pending_streams: Semaphore::new(config.limits.max_pending_streams),
            config,
            reason: OnceLock::new(),
            ended: InPlace::default(),
            tasks: TaskSet::default(),
            next_request_id: AtomicU64::new(role.request_id_parity()),
            info: OnceLock::new(),
            peer_setup: OnceLock::new(),
            setup_done: InPlace::default(),
            goaway_from: AtomicU64::new(u64::MAX),
            goaway_received: InPlace::default(),
            control: tokio::sync::Mutex::new(None),
            mux: OnceLock::new(),
            open_requests: AtomicUsize::new(0),
        });
        // The session's one task: the connection's watch beside the request table.
        core.tasks.start(watch_connection(core.clone()));
        // An entry of the request table, not a task of its own: it waits for most of its life.
        core.tasks.serve(watch_finishing(core.clone()));
        Ok(core)
    }

    pub(crate) fn conn(&self) -> &Arc<dyn Connection> {
        &self.conn
    }

    pub(crate) fn version(&self) -> Version {
        self.version
    }

    pub(crate) fn role(&self) -> Role {
        self.role
    }

    pub(crate) fn kind(&self) -> TransportKind {
        self.conn.kind()
    }

    pub(crate) fn config(&self) -> &SessionConfig {
        &self.config
    }

    // Lifecycle.

    /// Ends the session with `err`; the first reason wins and reaches every handle.
    ///
    /// The connection is closed first, then the reason is published; the session's tasks are
    /// cancelled once the connection has closed (at once for raw QUIC; WebTransport first sends
    /// its close capsule), so no task that wakes up can send a FIN the peer would mistake for a
    /// graceful end.
    pub(crate) fn close(&self, err: Error) {
        if self.reason.set(err.clone()).is_err() {
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
        self.ended.set(());
    }

    /// Closes the session if `err` ends it (a malformed message, a violation; draft-19
    /// §10.2.1), and passes it on.
    pub(crate) fn fail(&self, err: Error) -> Error {
        if err.is_session_error() {
            self.close(err.clone());
        }
        err
    }

    /// Resolves with the reason once the session has ended.
    pub(crate) async fn closed(&self) -> Error {
        self.ended.wait().await;
        self.gone()
    }

    /// The reason the session ended, if it has.
    pub(crate) fn close_reason(&self) -> Option<Error> {
        self.reason.get().cloned()
    }

    /// Why something built on the session ended without saying why itself: the session's
    /// reason, or [`Error::EndedEarly`] while the session lives.
    pub(crate) fn gone(&self) -> Error {
        self.close_reason().unwrap_or(Error::EndedEarly)
    }

    /// `e`, or the session's reason if `e` only reports the session going away.
    pub(crate) fn error(&self, e: Error) -> Error {
        match (&e, self.close_reason()) {
            (Error::Transport(_) | Error::ClosedByPeer { .. }, Some(reason)) => reason,
            _ => e,
        }
    }

    /// Runs `task` as one of the session's tasks: it is dropped when the session closes.
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn(task);
    }

    /// Runs a request's `task` as an entry of the session's request table (one task polls
    /// them all): it is dropped when the session closes, as a task would be.
    pub(crate) fn serve(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tasks.serve(task);
    }

    /// [`SessionCore::serve`] for a task boxed already (not boxed again).
    pub(crate) fn serve_entry(&self, entry: super::table::Entry) {
        self.tasks.serve_entry(entry);
    }

    pub(crate) fn tasks(&self) -> &TaskSet {
        &self.tasks
    }

    /// Watches a finished data stream until the peer acknowledged it: `watch` resolves then
    /// (or once the stream was reset). Every such watch of the session runs in one task, so a
    /// stream per object costs no task of its own.
    pub(crate) fn after_finish(&self, watch: impl Future<Output = ()> + Send + 'static) {
        // Once the session ended its watching task is gone (or going): nothing to wait for.
        if self.close_reason().is_some() {
            return;
        }
        self.unacked.fetch_add(1, Ordering::AcqRel);
        self.finishing.lock().push(Box::pin(watch));
        // One waiter, the watching task; a permit is kept while it is busy.
        self.finishing_queued.notify_one();
    }

    /// Holds a finished data stream until the peer acknowledged it, for
    /// [`Self::acknowledged`]; nothing watches it meanwhile.
    pub(crate) fn finished(&self, stream: BoxSendStream) {
        self.finished.push(stream);
    }

    /// Resolves once the peer has acknowledged every data stream finished before the call
    /// (or stopped it, or the connection failed).
    ///
    /// Cancel safe.
    pub(crate) async fn acknowledged(&self) {
        self.finished.wait().await;
        wait_until(&self.all_acked, || {
            (self.unacked.load(Ordering::Acquire) == 0).then_some(())
        })
        .await;
    }

    // SETUP.

    /// Records what SETUP settled; streams held until now are released.
    pub(crate) fn established(&self, info: SessionInfo, peer: SetupOptions) {
        // The peer's cache starts with what our SETUP registered, if it fit (§10.2.2).
        let mut sent = TokenCache::new(peer.max_auth_token_cache_size.unwrap_or(0));
        let _ = sent.resolve_setup(&self.config.setup_tokens, self.role == Role::Client);
        *self.sent_tokens.lock() = sent;
        let _ = self.info.set(info);
        let _ = self.peer_setup.set(peer);
        self.setup_done.set(());
    }

    /// Waits until SETUP is done, holding at most `max_pending_streams` streams meanwhile
    /// (draft-19 §3.3: early streams SHOULD be buffered; a peer MAY reset them instead).
    /// `Err` if the stream should be refused.
    pub(crate) async fn wait_setup(&self) -> Result<(), ()> {
        if self.setup_done.get().is_some() {
            return Ok(());
        }
        let _permit = self.pending_streams.try_acquire().map_err(|_| ())?;
        self.setup_done.wait().await;
        Ok(())
    }

    pub(crate) fn info(&self) -> Option<&SessionInfo> {
        self.info.get()
    }

    pub(crate) fn peer_setup(&self) -> Option<&SetupOptions> {
        self.peer_setup.get()
    }

    /// The MoQ Cluster extension on this session, once SETUP is done: on when both ends
    /// declared a HOP_ID (draft-lcurley-moq-cluster-01 Setup Negotiation: "sending it is what
    /// negotiates the extension"; draft-17 on).
    pub(crate) fn cluster(&self) -> Option<ClusterLink> {
        cluster_link(&self.config, self.version, self.peer_setup()?)
    }

    /// Checks the parameters of a request or REQUEST_UPDATE we are about to send against the
    /// peer's limits, so that our own message never closes the session: its MAX_FILTER_RANGES
    /// (draft-19 §10.3.1.6), and its token cache (§10.2.2, §10.3.1.4: a REGISTER past its
    /// MAX_AUTH_TOKEN_CACHE_SIZE or of an alias it holds, a USE_ALIAS of one it does not).
    /// The aliases are recorded as the peer will.
    pub(crate) fn check_outgoing(&self, params: &Parameters) -> Result<(), Error> {
        let n = params.filter_range_count() as u64;
        let max = self.peer_max_filter_ranges();
        if n > max {
            return Err(Error::Invalid(format!(
                "{n} filter ranges, the peer allows {max}"
            )));
        }
        if params.authorization_tokens.is_empty() {
            return Ok(());
        }
        let mut sent = self.sent_tokens.lock();
        let mut next = sent.clone();
        next.resolve(&params.authorization_tokens)
            .map_err(|e| Error::Invalid(format!("authorization token: {e}")))?;
        *sent = next;
        Ok(())
    }

    /// The peer's MAX_FILTER_RANGES (0 if it sent none: no Range Filters allowed).
    pub(crate) fn peer_max_filter_ranges(&self) -> u64 {
        self.peer_setup()
            .and_then(|s| s.max_filter_ranges)
            .unwrap_or(0)
    }

    /// The peer's MAX_REQUEST_UPDATES (0 = unlimited).
    pub(crate) fn peer_max_request_updates(&self) -> u64 {
        self.peer_setup()
            .and_then(|s| s.max_request_updates)
            .unwrap_or(0)
    }

    // Request IDs, tokens, authorization.

    /// Our next Request ID (draft-19 §10.1: by parity, +2 each); on a draft-14..16 session,
    /// once the peer's MAX_REQUEST_ID allows it (draft-14 §9.5).
    pub(crate) async fn next_request_id(&self) -> Result<u64, Error> {
        match self.mux.get() {
            Some(mux) => mux.allocate().await,
            None => Ok(self.next_request_id.fetch_add(2, Ordering::Relaxed)),
        }
    }

    /// The draft-14..16 control stream's mux, once SETUP is done.
    pub(crate) fn mux(&self) -> Option<&Mux> {
        self.mux.get()
    }

    /// Keeps the draft-14..16 control stream's mux.
    pub(crate) fn set_mux(&self, mux: Mux) {
        let _ = self.mux.set(mux);
    }

    /// Whether the peer's request `id` has arrived (it may have ended since).
    pub(crate) fn peer_request_seen(&self, id: u64) -> bool {
        self.peer_ids.lock().seen(id)
    }

    /// Records one of the peer's Request IDs, closing the session with INVALID_REQUEST_ID if it
    /// has the wrong parity or repeats (draft-19 §10.1).
    pub(crate) fn check_peer_request_id(&self, id: u64) -> Result<(), Error> {
        let res = self.peer_ids.lock().check(id);
        res.map_err(|e| self.fail(e))
    }

    /// Resolves AUTHORIZATION_TOKEN parameters; alias errors close the session.
    pub(crate) fn resolve_tokens(&self, tokens: &[AuthToken]) -> Result<Vec<ResolvedToken>, Error> {
        let res = self.tokens.lock().resolve(tokens);
        res.map_err(|e| self.fail(e))
    }

    /// Resolves the tokens of the peer's SETUP (draft-19 §10.3.1.4).
    pub(crate) fn resolve_setup_tokens(
        &self,
        tokens: &[AuthToken],
    ) -> Result<Vec<ResolvedToken>, Error> {
        let from_client = self.role == Role::Server;
        self.tokens.lock().resolve_setup(tokens, from_client)
    }

    /// Runs the application's authorizer on a request of the peer.
    pub(crate) async fn authorize(&self, req: &AuthRequest<'_>) -> Result<(), RequestError> {
        match self.info() {
            Some(info) => self.config.authorizer.authorize(info, req).await,
            None => Err(unauthorized()),
        }
    }

    /// Whether the peer may learn that `namespace` exists, by the application's authorizer.
    pub(crate) fn visible(&self, tokens: &[ResolvedToken], namespace: &TrackNamespace) -> bool {
        self.info()
            .is_some_and(|info| self.config.authorizer.visible(info, tokens, namespace))
    }

    // Requests.

    /// Counts a live request (for GOAWAY_TIMEOUT, draft-19 §3.6) until
    /// [`SessionCore::close_request`].
    pub(crate) fn open_request(&self) {
        self.open_requests.fetch_add(1, Ordering::Relaxed);
    }

    /// A request counted by [`SessionCore::open_request`] ended.
    pub(crate) fn close_request(&self) {
        self.open_requests.fetch_sub(1, Ordering::Relaxed);
    }

    /// Closes the session as the end of a GOAWAY's timeout does: with GOAWAY_TIMEOUT if
    /// requests are still open (draft-19 §3.6, §10.4), else NO_ERROR.
    pub(crate) fn close_after_goaway(&self) {
        let code = if self.open_requests() > 0 {
            SessionErrorCode::GOAWAY_TIMEOUT
        } else {
            SessionErrorCode::NO_ERROR
        };
        self.close(Error::Closed {
            code,
            reason: "GOAWAY timeout".into(),
        });
    }

    /// Requests open in both directions.
    pub(crate) fn open_requests(&self) -> usize {
        self.open_requests.load(Ordering::Relaxed)
    }

    /// Opens a stream for a new request of ours. Refused after the session ended or a GOAWAY
    /// arrived (draft-19 §10.4: SHOULD NOT initiate new requests).
    ///
    /// Drafts 14-16 carry a request on the control stream (a virtual stream), except
    /// draft-16's SUBSCRIBE_NAMESPACE (and SUBSCRIBE_TRACKS, its PUBLISH form), which opens a
    /// stream of its own.
    pub(crate) async fn open_request_stream(
        &self,
        kind: Option<RequestType>,
    ) -> Result<(Writer, Reader), Error> {
        if let Some(e) = self.close_reason() {
            return Err(e);
        }
        if self.goaway_received.get().is_some() {
            return Err(Error::GoingAway);
        }
        let own_stream = matches!(
            kind,
            Some(RequestType::SubscribeNamespace | RequestType::SubscribeTracks)
        ) && self.version.subscribe_namespace_stream();
        if let Some(mux) = self.mux.get().filter(|_| !own_stream) {
            let (w, r) = mux.open();
            return Ok((Writer::virtual_stream(w), Reader::virtual_stream(r)));
        }
        let (send, recv) = self
            .conn
            .open_bi()
            .await
            .map_err(|e| self.error(e.into()))?;
        let mut writer = Writer::new(send, self.version);
        // draft-19 §7.2: request streams go before object data.
        writer.set_priority(REQUEST_PRIORITY);
        Ok((writer, Reader::new(recv, self.version)))
    }

    // GOAWAY.

    /// Keeps our control stream for GOAWAY.
    pub(crate) async fn set_control(&self, writer: Writer) {
        *self.control.lock().await = Some(writer);
    }

    /// Whether the peer's request `id` comes after our GOAWAY and is refused with GOING_AWAY
    /// (draft-19 §10.4: every new request may be; draft-18 §10.4: those at or above the
    /// Request ID our GOAWAY carried, so the ones below it are still processed).
    pub(crate) fn goaway_refuses(&self, id: u64) -> bool {
        id >= self.goaway_from.load(Ordering::Acquire)
    }

    /// Sends GOAWAY on the control stream (draft-19 §10.4); see [`crate::Session::goaway`].
    pub(crate) async fn send_goaway(
        self: &Arc<Self>,
        new_session_uri: &str,
        timeout: Duration,
    ) -> Result<(), Error> {
        if self.role == Role::Client && !new_session_uri.is_empty() {
            return Err(Error::Invalid("a client's GOAWAY carries no URI".into()));
        }
        // draft-18 §10.4: the control-stream GOAWAY names the smallest peer Request ID not
        // (or maybe not) processed; draft-19 dropped the field and refuses every new request.
        let request_id = {
            let ids = self.peer_ids.lock();
            let from = if self.version.goaway_has_request_id() {
                ids.lowest_unseen()
            } else {
                0
            };
            // Set under the lock, so an ID is either seen before (processed) or refused.
            self.goaway_from
                .compare_exchange(u64::MAX, from, Ordering::AcqRel, Ordering::Acquire)
                .map_err(|_| Error::Invalid("GOAWAY already sent".into()))?;
            self.version.goaway_has_request_id().then_some(from)
        };
        let msg = Goaway {
            new_session_uri: Bytes::copy_from_slice(new_session_uri.as_bytes()),
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
            request_id,
        };
        if let Some(mux) = self.mux.get() {
            mux.send(msg.into())?;
            self.close_after(timeout);
            return Ok(());
        }
        // Written by a task of the session's, not by this future: a caller that stops waiting
        // leaves the GOAWAY neither unsent nor half written on the control stream.
        let (tx, rx) = oneshot::channel();
        let core = self.clone();
        self.spawn(async move {
            let sent = async {
                let mut w = core.control.lock().await;
                let w = w
                    .as_mut()
                    .ok_or(Error::Invalid("no control stream".into()))?;
                w.send(msg).await
            };
            let sent = sent.await;
            if sent.is_ok() {
                core.close_after(timeout);
            }
            let _ = tx.send(sent);
        });
        rx.await.unwrap_or_else(|_| Err(self.gone()))
    }

    /// After our GOAWAY: a server closes the session once `timeout` (if non-zero) has passed.
    fn close_after(self: &Arc<Self>, timeout: Duration) {
        if self.role == Role::Server && !timeout.is_zero() {
            let core = self.clone();
            self.spawn(async move {
                tokio::time::sleep(timeout).await;
                core.close_after_goaway();
            });
        }
    }

    /// The GOAWAY the peer sent on the control stream, if any.
    pub(crate) fn goaway_received(&self) -> Option<GoawayInfo> {
        self.goaway_received.get()
    }

    /// Resolves when the peer sends GOAWAY; `None` if the session ends first.
    pub(crate) async fn wait_goaway(&self) -> Option<GoawayInfo> {
        tokio::select! {
            g = self.goaway_received.wait() => Some(g),
            _ = self.closed() => None,
        }
    }

    /// Checks a GOAWAY the peer sent, on the control stream or a request stream: a server
    /// receiving a New Session URI closes the session (draft-19 §10.4). Only the draft-18
    /// control-stream form carries a Request ID; one on a request stream is a
    /// PROTOCOL_VIOLATION, its absence on the control stream is tolerated (moq-dev and aiomoqt
    /// tolerate it too) and means nothing is known to be unprocessed.
    pub(crate) fn check_goaway(&self, g: &Goaway, control: bool) -> Result<GoawayInfo, Error> {
        if self.role == Role::Server && !g.new_session_uri.is_empty() {
            return Err(Error::protocol("client GOAWAY with a New Session URI"));
        }
        if let Some(id) = g.request_id {
            if !control {
                return Err(Error::protocol(
                    "GOAWAY on a request stream with a Request ID",
                ));
            }
            // draft-18 §10.4: the Request ID names one of ours, so it must have our parity.
            if id % 2 != self.role.request_id_parity() {
                return Err(Error::violation(
                    SessionErrorCode::INVALID_REQUEST_ID,
                    "GOAWAY Request ID has the wrong parity",
                ));
            }
        }
        Ok(GoawayInfo {
            new_session_uri: String::from_utf8_lossy(&g.new_session_uri).into_owned(),
            timeout: Duration::from_millis(g.timeout_ms),
            unprocessed_from: g.request_id,
        })
    }

    /// Resolves with [`Error::GoingAway`] once a control-stream GOAWAY says our request `id` was
    /// not processed (draft-18 §10.4); never otherwise.
    pub(crate) async fn unprocessed(&self, id: u64) -> Error {
        let g = self.goaway_received.wait().await;
        if g.unprocessed_from.is_none_or(|from| id < from) {
            std::future::pending::<()>().await;
        }
        Error::GoingAway
    }

    /// Handles a GOAWAY from the control stream (draft-19 §10.4).
    pub(crate) fn on_goaway(&self, g: Goaway) -> Result<(), Error> {
        if self.goaway_received.get().is_some() {
            return Err(Error::protocol("second GOAWAY on the control stream"));
        }
        let info = self.check_goaway(&g, true)?;
        tracing::info!(uri = %info.new_session_uri, timeout = ?info.timeout, "GOAWAY received");
        self.goaway_received.set(info);
        Ok(())
    }
}

/// The REQUEST_ERROR for a request refused because we are going away.
pub(crate) fn going_away() -> RequestError {
    RequestError::new(RequestErrorCode::GOING_AWAY, "going away")
}

/// Runs the watches of finished data streams ([`SessionCore::after_finish`]).
async fn watch_finishing(core: Arc<SessionCore>) {
    let mut watching = FuturesUnordered::new();
    loop {
        tokio::select! {
            () = core.finishing_queued.notified() => {
                // Taken whole, so an idle session holds no buffer.
                let queued = std::mem::take(&mut *core.finishing.lock());
                watching.extend(queued);
            }
            Some(()) = watching.next(), if !watching.is_empty() => {
                let before = core
                    .unacked
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        Some(n.saturating_sub(1))
                    })
                    .unwrap_or_default();
                if before <= 1 {
                    core.all_acked.notify_waiters();
                }
            }
        }
    }
}

/// Ends the session when the connection closes, and cancels the session's tasks once the
/// connection is closed, whoever closed it.
async fn watch_connection(core: Arc<SessionCore>) {
    let closed_by_us = tokio::select! {
        e = core.conn.closed() => {
            core.close(e.into());
            false
        }
        () = core.ended.wait() => true,
    };
    if closed_by_us {
        // WebTransport first delivers its close capsule; raw QUIC is closed already. Boxed: its
        // timer would otherwise size this watch, and the session's task, for the session's life.
        let _ = Box::pin(tokio::time::timeout(CLOSE_GRACE, core.conn.closed())).await;
    }
    core.tasks.cancel();
}

/// Both ends' MoQ Cluster declarations on a session that negotiated the extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClusterLink {
    /// Our Hop ID (appended to what we advertise; what we drop when it comes back).
    pub(crate) ours: u64,
    /// The peer's Hop ID (0: it speaks the extension but names no hop).
    pub(crate) peer: u64,
    /// What pulling from the peer costs: its RELAY_COST, else 1 (draft-lcurley-moq-cluster-01 Relay
    /// Cost: a direction nobody priced costs [`moq_core::message::cluster::DEFAULT_COST`]).
    pub(crate) link_cost: u64,
}

/// The extension's state given our config and the peer's SETUP.
pub(crate) fn cluster_link(
    config: &SessionConfig,
    version: Version,
    peer: &SetupOptions,
) -> Option<ClusterLink> {
    if !version.has_cluster_extension() {
        return None;
    }
    Some(ClusterLink {
        ours: config.cluster_hop?,
        peer: peer.hop_id?,
        link_cost: peer
            .relay_cost
            .unwrap_or(moq_core::message::cluster::DEFAULT_COST),
    })
}
