//! [`Session`], the application's handle on a session, and the table that routes what the peer
//! sends to the request kinds and the data plane.

use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::{SessionErrorCode, StreamResetCode};
use moq_core::data::ObjectDatagram;
use moq_core::message::{FetchType, Message, Parameters, SetupOptions};
use moq_core::{FullTrackName, TrackNamespace, Version};

use crate::error::Error;
use crate::framing::{Reader, Writer};
use crate::index::NamespaceIndex;
use crate::namespace::{self, NamespaceState, NamespaceSubscription, PublishedNamespace};
use crate::request::{Request, RequestStream};
use crate::session::{
    self, DataStream, Destination, Dispatch, GoawayInfo, Opened, Role, Serve, SessionConfig,
    SessionCore, SessionInfo,
};
use crate::track::{
    self, FetchResponse, IncomingRequests, PublishOptions, PublishedTrack, Subscription,
    TrackState, TrackStatusInfo, TrackSubscription,
};
use crate::transport::{BoxRecvStream, Connection, TransportKind};

/// Everything a session is: its core and the state of its request kinds.
#[derive(Debug)]
struct Shared {
    core: Arc<SessionCore>,
    namespaces: Arc<NamespaceState>,
    tracks: Arc<TrackState>,
}

impl Dispatch for Shared {
    fn request(&self, msg: Message, writer: Writer, reader: Reader, opened: Opened) -> Serve {
        let core = &self.core;
        let stream = RequestStream::new(writer, reader);
        let req = match Request::accept(core, stream, &msg) {
            Some(Ok(req)) => req,
            // A token alias error closed the session; the driver hands over requests only.
            _ => return session::served(core, opened, std::future::ready(Ok(()))),
        };
        let (ns, tracks) = (self.namespaces.clone(), self.tracks.clone());
        // Each kind's future is boxed at its own size, with what its end does (the session
        // closes with its error if it is one).
        match msg {
            Message::PublishNamespace(m) => session::served(
                core,
                opened,
                namespace::serve_publish_namespace(
                    ns,
                    m.namespace,
                    m.params.cluster,
                    Box::new(req),
                ),
            ),
            Message::SubscribeNamespace(m) => session::served(
                core,
                opened,
                namespace::serve_subscribe_namespace(ns, Box::new(m), Box::new(req)),
            ),
            Message::Subscribe(m) => session::served(
                core,
                opened,
                track::serve_subscribe(tracks, Box::new(m), Box::new(req)),
            ),
            Message::Publish(m) => {
                session::served(core, opened, track::serve_publish(tracks, m, req))
            }
            Message::Fetch(m) => session::served(core, opened, track::serve_fetch(tracks, m, req)),
            Message::TrackStatus(m) => {
                session::served(core, opened, track::serve_track_status(tracks, m, req))
            }
            Message::SubscribeTracks(m) => session::served(
                core,
                opened,
                track::serve_subscribe_tracks(tracks, ns, Box::new(m), Box::new(req)),
            ),
            // The driver hands over request messages only.
            _ => session::served(core, opened, std::future::ready(Ok(()))),
        }
    }

    fn data_stream(&self, ty: DataStream, recv: BoxRecvStream, buf: Bytes) -> Serve {
        let state = self.tracks.recv.clone();
        match ty {
            DataStream::Subgroup => Box::pin(async move { state.subgroup_stream(recv, buf).await }),
            DataStream::Fetch => Box::pin(async move { state.fetch_stream(recv, buf).await }),
        }
    }

    fn datagram(&self, datagram: ObjectDatagram) {
        self.tracks.recv.datagram(datagram);
    }
}

/// The application's count of a session: when the last [`Session`] clone drops, the session
/// closes. Internal references (its tasks, the handles of its requests) do not count.
#[derive(Debug)]
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.core.close(Error::Closed {
            code: SessionErrorCode::NO_ERROR,
            reason: "session dropped".into(),
        });
    }
}

/// Closes a session whose [`Session::establish`] was dropped before it resolved.
struct Abandoned(Option<Arc<SessionCore>>);

impl Abandoned {
    /// SETUP completed (or failed and closed the session): nothing to close.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        if let Some(core) = self.0.take() {
            core.close(Error::Closed {
                code: SessionErrorCode::NO_ERROR,
                reason: "session setup abandoned".into(),
            });
        }
    }
}

/// A MOQT session. Cheap to clone; every clone is the same session.
///
/// The session ends when [`Session::close`] is called, when the peer closes it, when the peer
/// breaks a protocol rule (the session is closed with the code the draft names), or when the
/// connection fails. Every handle built on it then ends with the same [`Error`].
///
/// Dropping a clone does nothing while another lives. Dropping the last clone closes the
/// session with NO_ERROR (CONNECTION_CLOSE on the QUIC connection or WebTransport session):
/// the handles of its requests (subscriptions, announcements, ...), [`WeakSession`]s and tasks
/// given to [`Session::spawn`] do not keep it open. Each of its tasks is dropped when it
/// closes, and every request handle then ends with the session's error.
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
#[derive(Clone, Debug)]
pub struct Session {
    owner: Arc<Owner>,
}

/// A reference to a [`Session`] that does not keep it open (see [`Session::downgrade`]).
/// Dropping it does nothing.
#[derive(Clone, Debug)]
pub struct WeakSession {
    owner: Weak<Owner>,
}

impl WeakSession {
    /// The session, unless the application dropped its last handle.
    pub fn upgrade(&self) -> Option<Session> {
        self.owner.upgrade().map(|owner| Session { owner })
    }
}

impl Session {
    /// Runs the SETUP exchange on an established connection and starts the session.
    ///
    /// The version is the one the connection negotiated (ALPN or `WT-Protocol`). A client sends
    /// `destination` as PATH and AUTHORITY on raw QUIC; a server passes what the WebTransport
    /// CONNECT asked for (or nothing on raw QUIC, where PATH and AUTHORITY arrive in SETUP).
    ///
    /// Cancel safe: dropped before it resolves, the session it started is closed (NO_ERROR),
    /// which closes `conn`.
    pub async fn establish(
        conn: Arc<dyn Connection>,
        role: Role,
        config: SessionConfig,
        destination: Destination,
    ) -> Result<Session, Error> {
        let core = SessionCore::start(conn, role, config)?;
        let shared = Arc::new(Shared {
            namespaces: Arc::new(NamespaceState::new(core.clone())),
            tracks: Arc::new(TrackState::new(core.clone())),
            core: core.clone(),
        });
        // The session's tasks hold it: abandoned before SETUP completes, it is closed here,
        // or its connection would stay open until the peer closed it.
        let abandoned = Abandoned(Some(core.clone()));
        session::establish(&core, shared.clone(), destination).await?;
        abandoned.disarm();
        Ok(Session {
            owner: Arc::new(Owner(shared)),
        })
    }

    fn shared(&self) -> &Shared {
        &self.owner.0
    }

    fn core(&self) -> &Arc<SessionCore> {
        &self.shared().core
    }

    /// A reference that does not keep the session open: for the application's own tasks that
    /// should end with the session rather than hold it.
    pub fn downgrade(&self) -> WeakSession {
        WeakSession {
            owner: Arc::downgrade(&self.owner),
        }
    }

    /// Runs `task` as one of the session's tasks: it is dropped when the session closes (and
    /// does not keep the session open; give it a [`WeakSession`] if it needs one).
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.core().spawn(task);
    }

    /// Runs `task` as [`Session::spawn`] does (dropped when the session closes), but as an
    /// entry of the session's request table rather than a task of its own: polled by the one
    /// task that runs the session's requests, for about a sixth of a task's memory. For a
    /// future that spends its life waiting; one that panics ends alone.
    pub fn spawn_light(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.core().serve(task);
    }

    /// How many tasks the session runs (its accept loops, those given to [`Session::spawn`] or
    /// [`Session::spawn_light`], and one per open request, which runs as an entry of the
    /// session's request table rather than a task of its own); zero once it has closed and
    /// they have stopped.
    pub fn task_count(&self) -> usize {
        self.core().tasks().len()
    }

    /// Resolves once the session has closed and every one of its tasks has stopped.
    ///
    /// Cancel safe.
    pub async fn stopped(&self) {
        self.core().tasks().stopped().await;
    }

    /// The negotiated version.
    pub fn version(&self) -> Version {
        self.core().version()
    }

    /// Client or server.
    pub fn role(&self) -> Role {
        self.core().role()
    }

    /// Raw QUIC or WebTransport.
    pub fn transport(&self) -> TransportKind {
        self.core().kind()
    }

    /// What is known about the peer.
    pub fn info(&self) -> &SessionInfo {
        // Set before the session is handed out.
        static UNKNOWN: std::sync::OnceLock<SessionInfo> = std::sync::OnceLock::new();
        self.core().info().unwrap_or_else(|| {
            UNKNOWN.get_or_init(|| SessionInfo {
                version: Version::PREFERRED,
                transport: TransportKind::RawQuic,
                path: None,
                authority: None,
                peer_implementation: None,
                setup_tokens: Vec::new(),
                remote: None,
                cluster_peer: None,
            })
        })
    }

    /// The peer's SETUP options.
    pub fn peer_setup(&self) -> &SetupOptions {
        // Set before the session is handed out.
        static NONE: std::sync::OnceLock<SetupOptions> = std::sync::OnceLock::new();
        self.core()
            .peer_setup()
            .unwrap_or_else(|| NONE.get_or_init(SetupOptions::default))
    }

    /// The namespaces this endpoint knows (answers the peer's SUBSCRIBE_NAMESPACE).
    pub fn namespaces(&self) -> &NamespaceIndex {
        &self.core().config().namespaces
    }

    /// Where the peer's accepted PUBLISH_NAMESPACEs are registered; watch it to learn them.
    pub fn announced(&self) -> &NamespaceIndex {
        &self.core().config().announced
    }

    /// Announces `namespace` to the peer with PUBLISH_NAMESPACE and waits for its answer.
    /// While the returned handle lives the namespace is also registered as known locally.
    ///
    /// Cancel safe: dropped before the answer, the request is cancelled.
    pub async fn publish_namespace(
        &self,
        namespace: TrackNamespace,
    ) -> Result<PublishedNamespace, Error> {
        self.publish_namespace_with(namespace, Parameters::default())
            .await
    }

    /// [`Session::publish_namespace`] with parameters (AUTHORIZATION_TOKEN).
    ///
    /// Cancel safe, as [`Session::publish_namespace`].
    pub async fn publish_namespace_with(
        &self,
        namespace: TrackNamespace,
        params: Parameters,
    ) -> Result<PublishedNamespace, Error> {
        reissued(|| {
            namespace::publish_namespace(
                &self.shared().namespaces,
                namespace.clone(),
                params.clone(),
            )
        })
        .await
    }

    /// Asks the peer for the namespaces under `prefix` with SUBSCRIBE_NAMESPACE; the zero-field
    /// prefix asks for all of them. Waits for REQUEST_OK; a REQUEST_ERROR is returned as
    /// [`Error::Rejected`].
    ///
    /// Cancel safe: dropped before the answer, the request is cancelled.
    pub async fn subscribe_namespace(
        &self,
        prefix: TrackNamespace,
    ) -> Result<NamespaceSubscription, Error> {
        self.subscribe_namespace_with(prefix, Parameters::default())
            .await
    }

    /// [`Session::subscribe_namespace`] with parameters (AUTHORIZATION_TOKEN).
    ///
    /// Cancel safe, as [`Session::subscribe_namespace`].
    pub async fn subscribe_namespace_with(
        &self,
        prefix: TrackNamespace,
        params: Parameters,
    ) -> Result<NamespaceSubscription, Error> {
        reissued(|| {
            namespace::subscribe_namespace(
                &self.shared().namespaces,
                prefix.clone(),
                params.clone(),
            )
        })
        .await
    }

    /// Subscribes to `track` with SUBSCRIBE and waits for SUBSCRIBE_OK (draft-19 §5.1).
    ///
    /// Cancel safe: dropped before the answer, the request is cancelled.
    pub async fn subscribe(
        &self,
        track: FullTrackName,
        params: Parameters,
    ) -> Result<Subscription, Error> {
        reissued(|| track::subscribe(&self.shared().tracks, track.clone(), params.clone())).await
    }

    /// Starts a subscription of ours with PUBLISH; objects may be sent before the peer's
    /// answer (draft-19 §5.1). Returns once PUBLISH is sent; [`PublishedTrack::accepted`]
    /// waits for the answer.
    ///
    /// Cancel safe: dropped before it resolves, a PUBLISH already sent is cancelled (see
    /// [the crate docs](crate#handles-drop-and-cancel-safety)).
    pub async fn publish(
        &self,
        track: FullTrackName,
        options: PublishOptions,
    ) -> Result<PublishedTrack, Error> {
        track::publish(&self.shared().tracks, track, options).await
    }

    /// Fetches past objects with FETCH and waits for FETCH_OK (draft-19 §5.2).
    ///
    /// Cancel safe: dropped before the answer, the request is cancelled.
    pub async fn fetch(
        &self,
        request: FetchType,
        params: Parameters,
    ) -> Result<FetchResponse, Error> {
        reissued(|| track::fetch(&self.shared().tracks, request.clone(), params.clone())).await
    }

    /// Asks for a track's state with TRACK_STATUS (draft-19 §10.14).
    ///
    /// Cancel safe: dropped before the answer, the request is cancelled.
    pub async fn track_status(
        &self,
        track: FullTrackName,
        params: Parameters,
    ) -> Result<TrackStatusInfo, Error> {
        reissued(|| track::track_status(&self.shared().tracks, track.clone(), params.clone())).await
    }

    /// Asks the peer to PUBLISH every track under `prefix` with SUBSCRIBE_TRACKS; the
    /// PUBLISHes arrive through [`Session::incoming`] (draft-19 §6.1).
    ///
    /// Cancel safe: dropped before the answer, the request is cancelled.
    pub async fn subscribe_tracks(
        &self,
        prefix: TrackNamespace,
        params: Parameters,
    ) -> Result<TrackSubscription, Error> {
        reissued(|| track::subscribe_tracks(&self.shared().tracks, prefix.clone(), params.clone()))
            .await
    }

    /// The peer's requests for this side to answer: SUBSCRIBE, FETCH, TRACK_STATUS, PUBLISH and
    /// SUBSCRIBE_TRACKS. Empty unless [`SessionConfig::accept_requests`] is set; without it those
    /// requests are refused (DOES_NOT_EXIST, UNINTERESTED, NOT_SUPPORTED).
    pub fn incoming(&self) -> IncomingRequests {
        self.shared().tracks.incoming.requests(self.core())
    }

    /// Revokes our acceptance of every PUBLISH_NAMESPACE of `namespace` from the peer, by
    /// cancelling its request stream with `code` (draft-19 §6.2). Returns how many were revoked.
    pub fn revoke_namespace(&self, namespace: &TrackNamespace, code: StreamResetCode) -> usize {
        self.shared().namespaces.revoke(namespace, code)
    }

    /// Sends GOAWAY on the control stream (draft-19 §10.4). A server may name a new URI; a
    /// client's must be empty. After `timeout` (if non-zero) a server closes the session, with
    /// GOAWAY_TIMEOUT if requests are still open.
    ///
    /// Cancel safe: on the first poll GOAWAY counts as sent (a second call fails and the
    /// peer's new requests are refused) and its delivery is the session's, so a future dropped
    /// after that still sends it whole, and still has a server close after `timeout`; the
    /// future only waits for the message to be written. Dropped before its first poll,
    /// nothing happens.
    pub async fn goaway(&self, new_session_uri: &str, timeout: Duration) -> Result<(), Error> {
        self.core().send_goaway(new_session_uri, timeout).await
    }

    /// The GOAWAY the peer sent, if any.
    pub fn goaway_received(&self) -> Option<GoawayInfo> {
        self.core().goaway_received()
    }

    /// Resolves when the peer sends GOAWAY; `None` if the session ends first.
    ///
    /// Cancel safe.
    pub async fn wait_goaway(&self) -> Option<GoawayInfo> {
        self.core().wait_goaway().await
    }

    /// Resolves once the peer has acknowledged every data stream this side finished (streams
    /// still open are not waited for): what was sent has arrived. Bound it with a timeout
    /// before a graceful [`Session::close`].
    ///
    /// Cancel safe.
    pub async fn acknowledged(&self) {
        tokio::select! {
            _ = self.core().acknowledged() => {}
            _ = self.core().closed() => {}
        }
    }

    /// Closes the session with `code` and `reason` (CONNECTION_CLOSE, or the WebTransport
    /// session's close); every handle ends with [`Error::Closed`]. Nothing queued is flushed
    /// first: wait for [`Session::acknowledged`] before it for a graceful end.
    pub fn close(&self, code: SessionErrorCode, reason: &str) {
        self.core().close(Error::Closed {
            code,
            reason: reason.into(),
        });
    }

    /// Closes the session the way the end of a GOAWAY's timeout does (what a server calls when
    /// its own drain deadline passes first): GOAWAY_TIMEOUT if requests are still open, else
    /// NO_ERROR (draft-19 §3.6).
    pub fn close_after_goaway(&self) {
        self.core().close_after_goaway();
    }

    /// Resolves with the reason once the session has ended.
    ///
    /// Cancel safe.
    pub async fn closed(&self) -> Error {
        self.core().closed().await
    }

    /// The reason the session ended, if it has.
    pub fn close_reason(&self) -> Option<Error> {
        self.core().close_reason()
    }

    /// Number of requests currently open on this session, in both directions.
    pub fn open_requests(&self) -> usize {
        self.core().open_requests()
    }
}

/// How many times a request moved by GOAWAY without a URI is re-issued on the same session.
const MAX_REISSUES: usize = 3;

/// Runs a request; one the peer moves by GOAWAY on its stream without a New Session URI is
/// re-issued on this session (draft-19 §10.4: "re-issue that specific request on a session at
/// the specified URI (or the current session if no URI is provided)"), a few times at most.
/// One moved elsewhere is returned as [`Error::Moved`], for the caller to re-issue there.
async fn reissued<T, F, Fut>(mut request: F) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, Error>>,
{
    for _ in 0..MAX_REISSUES {
        match request().await {
            Err(Error::Moved {
                new_session_uri, ..
            }) if new_session_uri.is_empty() => {}
            r => return r,
        }
    }
    request().await
}
