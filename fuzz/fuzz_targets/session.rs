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

// The target's parts, in fuzz_targets/session/ (one binary: cargo-fuzz builds this file).
#[path = "session/app.rs"]
mod app;
#[path = "session/input.rs"]
mod input;
#[path = "session/peer.rs"]
mod peer;

use app::*;
use input::*;
use peer::*;

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
