//! The publisher's side of a subscription: subgroup streams and datagrams (draft-19 §11).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
mod writer;

use crate::error::Error;
use crate::latch::wait_until;
use crate::session::SessionCore;
pub use fetch::{FetchEnd, FetchWriter};
pub use fill::Fill;
pub(crate) use shared::{TaskStep, WriterShared};
pub use shared::{TrackLargest, WriterChange};
pub use subgroup::SubgroupSender;
pub use writer::SubscriptionWriter;

/// The publisher's record of a subscription, for Joining FETCH (draft-19 §5.2). Not a
/// `watch` channel (~420 B per subscription), and no `Notify` of its own (~70 B): a FETCH
/// waiting for it is woken through the session's [`SendState`], by the [`JoinGuard`] that
/// changes it.
#[derive(Debug)]
pub(crate) struct JoinRecord {
    pub(crate) track: FullTrackName,
    state: Mutex<JoinState>,
}

/// Where a subscription a Joining FETCH can name stands.
#[derive(Clone, Copy, Debug)]
enum JoinState {
    /// Arrived, its admission (authorization, the duplicate check) not done yet: a FETCH that
    /// names it waits as for a Pending one, and no other SUBSCRIBE counts it as a duplicate.
    Admitting,
    /// Not answered yet (draft-19 §5.1: Pending, for the subscriber).
    Pending,
    /// Established; again when Forward went from 0 to 1.
    Established(JoinPoint),
    /// The subscription's request is over: a FETCH waiting for it gives up.
    Ended,
}

impl JoinRecord {
    /// `Some(point)` once the subscription is established, `Some(None)` if it ended first,
    /// `None` while Pending.
    fn established_now(&self) -> Option<Option<JoinPoint>> {
        match *self.state.lock() {
            JoinState::Admitting | JoinState::Pending => None,
            JoinState::Established(p) => Some(Some(p)),
            JoinState::Ended => Some(None),
        }
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
    /// Shared with each record's [`JoinGuard`], which owns its entry.
    joins: Arc<Joins>,
}

/// The subscriptions a Joining FETCH can name, by Request ID.
#[derive(Debug, Default)]
struct Joins {
    records: Mutex<HashMap<u64, Arc<JoinRecord>>>,
    /// Notified whenever a subscription is recorded, so a Joining FETCH that overtook its
    /// SUBSCRIBE (they travel on separate streams) can wait for it, and whenever a record
    /// changes (admitted, established, ended), so one can wait for that. Not a watch channel:
    /// that is an allocation of ~390 B per session.
    changed: Notify,
}

impl SendState {
    pub(crate) fn new(core: Arc<SessionCore>) -> Self {
        SendState {
            core,
            next_alias: AtomicU64::new(0),
            joins: Arc::default(),
        }
    }

    /// A fresh Track Alias for a subscription we publish.
    pub(crate) fn next_track_alias(&self) -> u64 {
        self.next_alias.fetch_add(1, Ordering::Relaxed)
    }

    /// Records a subscription we publish, for Joining FETCH, until the guard drops. `None` if
    /// the version allows one subscription per track and this session already has one for the
    /// same track (the caller answers DUPLICATE_SUBSCRIPTION).
    pub(crate) fn track_join(&self, request_id: u64, track: FullTrackName) -> Option<JoinGuard> {
        let join = self.track_arrived(request_id, track);
        self.admit(&join).then_some(join)
    }

    /// Records a subscription as it arrives, before its admission: a Joining FETCH that comes
    /// meanwhile (it travels on a stream of its own and may be read first) finds it and waits
    /// for it rather than being refused. [`SendState::admit`] once admitted; dropping the
    /// guard (refused) removes the record.
    pub(crate) fn track_arrived(&self, request_id: u64, track: FullTrackName) -> JoinGuard {
        let record = Arc::new(JoinRecord {
            track,
            state: Mutex::new(JoinState::Admitting),
        });
        self.joins.records.lock().insert(request_id, record.clone());
        self.joins.changed.notify_waiters();
        JoinGuard {
            joins: self.joins.clone(),
            id: request_id,
            record,
        }
    }

    /// Admits the subscription `join` (Pending from now on); `false` if the version allows one
    /// subscription per track and another admitted one of this session has the same track
    /// (the caller answers DUPLICATE_SUBSCRIPTION and drops the guard).
    pub(crate) fn admit(&self, join: &JoinGuard) -> bool {
        let records = self.joins.records.lock();
        // draft-18 §5.1: at most one subscription per track and role in a session.
        if !self.core.version().allows_duplicate_subscriptions()
            && records.iter().any(|(&other, j)| {
                other != join.id
                    && j.track == join.record.track
                    && !matches!(*j.state.lock(), JoinState::Admitting)
            })
        {
            return false;
        }
        *join.record.state.lock() = JoinState::Pending;
        true
    }

    /// Resolves once the subscription `record` is established; `None` if its request ended
    /// first.
    ///
    /// Cancel safe.
    pub(crate) async fn established(&self, record: &JoinRecord) -> Option<JoinPoint> {
        wait_until(&self.joins.changed, || record.established_now()).await
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
                let changed = self.joins.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if let Some(j) = self.joins.records.lock().get(&request_id).cloned() {
                    return Some(j);
                }
                changed.await;
            }
        };
        tokio::time::timeout(wait, appeared).await.ok().flatten()
    }
}

/// A subscription's entry in the Joining FETCH table: changes its record and wakes a FETCH
/// waiting for it. Dropping it (the subscription's request ended, or it was refused) removes
/// the entry, and a FETCH still waiting for it gives up.
#[derive(Debug)]
pub(crate) struct JoinGuard {
    joins: Arc<Joins>,
    id: u64,
    record: Arc<JoinRecord>,
}

impl JoinGuard {
    /// Records the subscription as established (again when Forward goes from 0 to 1).
    pub(crate) fn establish(&self, point: JoinPoint) {
        self.set(JoinState::Established(point));
    }

    fn set(&self, state: JoinState) {
        *self.record.state.lock() = state;
        self.joins.changed.notify_waiters();
    }
}

impl Drop for JoinGuard {
    fn drop(&mut self) {
        self.joins.records.lock().remove(&self.id);
        self.set(JoinState::Ended);
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
