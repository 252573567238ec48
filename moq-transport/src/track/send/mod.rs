//! The publisher's side of a subscription: subgroup streams and datagrams (draft-19 §11).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use moq_core::codes::PublishDoneCode;
use moq_core::{FullTrackName, Location, Version};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot};

mod fetch;
mod fill;
mod outbox;
mod shared;
mod subgroup;

use crate::error::Error;
use crate::latch::wait_until;
use crate::session::SessionCore;
pub use fetch::{FetchEnd, FetchWriter};
pub use fill::Fill;
pub use shared::{SubscriptionWriter, WriterChange};
pub(crate) use shared::{TaskStep, WriterShared};
pub use subgroup::SubgroupSender;

/// The publisher's record of a subscription, for Joining FETCH (draft-19 §5.2). Not a
/// `watch` channel (~420 B per subscription): a mutex, a flag and one `Notify`.
#[derive(Debug)]
pub(crate) struct JoinRecord {
    pub(crate) track: FullTrackName,
    /// `None` while Pending (subscriber); then the Joining Location if Forward was 1.
    established: Mutex<Option<JoinPoint>>,
    /// Set when the subscription's request is over: a FETCH waiting for it gives up.
    ended: AtomicBool,
    changed: Notify,
}

impl JoinRecord {
    pub(crate) fn new(track: FullTrackName) -> Arc<Self> {
        Arc::new(JoinRecord {
            track,
            established: Mutex::new(None),
            ended: AtomicBool::new(false),
            changed: Notify::new(),
        })
    }

    /// Records the subscription as established (again when Forward goes from 0 to 1).
    pub(crate) fn establish(&self, point: JoinPoint) {
        *self.established.lock() = Some(point);
        self.changed.notify_waiters();
    }

    /// The subscription's request is over: a FETCH waiting for it gives up.
    fn end(&self) {
        self.ended.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Resolves once the subscription is established; `None` if it ended first.
    pub(crate) async fn established(&self) -> Option<JoinPoint> {
        wait_until(&self.changed, || match *self.established.lock() {
            Some(p) => Some(Some(p)),
            None => self.ended.load(Ordering::Acquire).then_some(None),
        })
        .await
    }
}

/// Where a Joining FETCH joins an established subscription.
#[derive(Clone, Copy, Debug)]
pub(crate) struct JoinPoint {
    pub(crate) forward: bool,
    pub(crate) joining: Option<Location>,
}

/// The publisher's side of a session's data plane: the Track Aliases it hands out and the
/// subscriptions a Joining FETCH can name.
#[derive(Debug)]
pub(crate) struct SendState {
    core: Arc<SessionCore>,
    next_alias: AtomicU64,
    joins: Mutex<HashMap<u64, Arc<JoinRecord>>>,
    /// Notified whenever a subscription is recorded in `joins`, so a Joining FETCH that
    /// overtook its SUBSCRIBE (they travel on separate streams) can wait for it. Not a watch
    /// channel: that is an allocation of ~390 B per session.
    joins_changed: Notify,
}

impl SendState {
    pub(crate) fn new(core: Arc<SessionCore>) -> Self {
        SendState {
            core,
            next_alias: AtomicU64::new(0),
            joins: Mutex::new(HashMap::new()),
            joins_changed: Notify::new(),
        }
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
        record: &Arc<JoinRecord>,
    ) -> Option<JoinGuard<'_>> {
        let mut joins = self.joins.lock();
        if !self.core.version().allows_duplicate_subscriptions()
            && joins.values().any(|j| j.track == record.track)
        {
            return None;
        }
        joins.insert(request_id, record.clone());
        drop(joins);
        self.joins_changed.notify_waiters();
        Some(JoinGuard(self, request_id, record.clone()))
    }

    /// The subscription `request_id` for a Joining FETCH, waiting up to `wait` for a SUBSCRIBE
    /// whose stream has not arrived yet.
    pub(crate) async fn join_state_within(
        &self,
        request_id: u64,
        wait: Duration,
    ) -> Option<Arc<JoinRecord>> {
        let appeared = async {
            loop {
                // Enabled before the table is looked at: a record made after the look wakes it.
                let changed = self.joins_changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if let Some(j) = self.joins.lock().get(&request_id).cloned() {
                    return Some(j);
                }
                changed.await;
            }
        };
        tokio::time::timeout(wait, appeared).await.ok().flatten()
    }
}

/// Removes a subscription from the Joining FETCH table when its request ends, and tells a
/// FETCH still waiting for it.
#[derive(Debug)]
pub(crate) struct JoinGuard<'a>(&'a SendState, u64, Arc<JoinRecord>);

impl Drop for JoinGuard<'_> {
    fn drop(&mut self) {
        self.0.joins.lock().remove(&self.1);
        self.2.end();
    }
}

/// Why the application ends a subscription: the PUBLISH_DONE it sends.
#[derive(Debug)]
pub(crate) struct Finish {
    pub(crate) status: PublishDoneCode,
    pub(crate) reason: String,
    pub(crate) stream_count: u64,
    pub(crate) sent: oneshot::Sender<Result<(), Error>>,
}

/// The Publisher Priority a subgroup header or datagram carries: `None` inherits the
/// subscription's (DEFAULT_PRIORITY, from draft-15). Drafts 14-16 always write it: draft-14
/// has no such form, and Cloudflare's deployed draft-16 stack (moq-transport 0.16.5) refuses the
/// DEFAULT_PRIORITY types 0x30-0x3D, while the explicit form is valid in every draft.
pub(super) fn written_priority(v: Version, priority: Option<u8>, effective: u8) -> Option<u8> {
    if v.quic_varints() {
        Some(effective)
    } else {
        priority
    }
}
