//! [`Fill`]: a fill fetch stream the subscriber asked for (draft-21 §3.4), and the answer it is
//! owed until the publisher opens it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use moq_core::data::RangeEnd;
use moq_core::{GroupOrder, Location};

use super::fetch::FetchWriter;
use crate::session::SessionCore;

/// A fill the subscriber asked for with FILL_PARAMETERS (draft-21 §3.4, from draft-20): the
/// range to deliver on a fill fetch stream, and how.
///
/// Deliver it with [`SubscriptionWriter::open_fill`](super::SubscriptionWriter::open_fill).
/// Every fill gets an answer: dropped without having been opened (the last of its clones; or
/// never taken, when the subscription is finished or its request ends), the subscription's
/// request task opens its fill fetch stream at once with one End of Unknown Range marker over
/// the whole range and a FIN, so the subscriber does not wait for it until the session ends,
/// and learns that none of the range was delivered. Clones share that one answer. The request
/// task stays until every fill of the subscription is opened or answered (or the session
/// ends): a fill held after its subscription ended is answered when it drops.
///
/// Not a reset (draft-21 §3.4.1's signal for a failed fill): without RESET_STREAM_AT, which
/// this transport layer does not have, a reset discards the FETCH_HEADER when it is not sent
/// yet (quinn drops unsent data, draft-21 §11.3.2), and the subscriber could not tell which
/// fill was refused. The marker is what a relay sends for a range it does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fill {
    /// The Request ID its FETCH_HEADER carries (the SUBSCRIBE's or the REQUEST_UPDATE's).
    pub request_id: u64,
    /// The first location of the range.
    pub start: Location,
    /// The last location of the range (inclusive).
    pub end: Location,
    /// The group order to send it in.
    pub group_order: GroupOrder,
    /// The subscriber priority of the fill stream.
    pub subscriber_priority: u8,
    /// The Range Filters its objects must pass.
    pub range_filters: Vec<moq_core::RangeFilterParam>,
    /// Its FILL_TIMEOUT (ms), if it gave one: a relay's budget for upstream fills.
    pub fill_timeout: Option<u64>,
    /// The answer owed to the subscriber, for a fill the publisher received.
    pub(super) owed: Owed,
}

impl Fill {
    /// The fill `fill` (a FILL_PARAMETERS) asks for on a subscription with `subscription`'s
    /// parameters, given the Largest Object in the answer; `None` if the range is empty. It
    /// owes nothing until [`Owed::new`] is given to it.
    pub(crate) fn new(
        request_id: u64,
        fill: &moq_core::message::Parameters,
        subscription: &moq_core::message::Parameters,
        largest: Option<Location>,
        group_order: GroupOrder,
    ) -> Option<Fill> {
        let (start, end) =
            crate::track::params::fill_range(fill, subscription.location_filter, largest)?;
        // draft-21 §9.20.16: what FILL_PARAMETERS omits is the subscription's.
        let filters = if fill.range_filters.is_empty() {
            &subscription.range_filters
        } else {
            &fill.range_filters
        };
        Some(Fill {
            request_id,
            start,
            end,
            group_order: fill
                .group_order
                .or(subscription.group_order)
                .unwrap_or(group_order),
            subscriber_priority: fill
                .subscriber_priority
                .or(subscription.subscriber_priority)
                .unwrap_or(128),
            range_filters: filters.clone(),
            fill_timeout: fill.fill_timeout,
            owed: Owed::default(),
        })
    }
}

/// The subscription a received [`Fill`] belongs to: it counts the fill's stream in
/// PUBLISH_DONE's Stream Count, and its request task answers a fill dropped unopened.
pub(super) trait FillOwner: Send + Sync + std::fmt::Debug {
    /// One more stream was opened for the subscription.
    fn count_stream(&self);
    /// A fill that owes an answer was made.
    fn owe(&self);
    /// A fill was opened: it owes nothing more.
    fn paid(&self);
    /// A fill was dropped unopened: the request task sends `answer`.
    fn unpaid(&self, answer: Unpaid);
}

/// The answer a received [`Fill`] owes the subscriber, shared by the fill's clones: opening
/// the fill pays it; if none of them did, the last one's drop hands it to the subscription's
/// request task, which sends it (nothing is spawned from a drop).
#[derive(Clone, Debug, Default)]
pub(super) struct Owed(Option<Arc<Debt>>);

/// Not part of a fill's value: two fills of the same range are equal.
impl PartialEq for Owed {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Owed {}

impl Owed {
    /// The answer owed for `fill` on the subscription `owner`, whose stream would have
    /// `priority`.
    pub(super) fn new(owner: &Arc<dyn FillOwner>, fill: &Fill, priority: i32) -> Owed {
        owner.owe();
        Owed(Some(Arc::new(Debt {
            owner: Arc::downgrade(owner),
            answer: Unpaid {
                request_id: fill.request_id,
                order: fill.group_order,
                // A marker covers what follows the previous entry up to its location: the
                // range's last object in ascending order, its first group in descending
                // order.
                marker: match fill.group_order {
                    GroupOrder::Descending => Location::new(fill.start.group, 0),
                    _ => fill.end,
                },
                priority,
            },
            paid: AtomicBool::new(false),
        })))
    }

    /// The fill's stream is opened: it answers the subscriber, whatever comes of it.
    pub(super) fn pay(&self) {
        if let Some(d) = &self.0
            && !d.paid.swap(true, Ordering::AcqRel)
            && let Some(owner) = d.owner.upgrade()
        {
            owner.paid();
        }
    }
}

#[derive(Debug)]
pub(super) struct Debt {
    owner: Weak<dyn FillOwner>,
    answer: Unpaid,
    paid: AtomicBool,
}

impl Drop for Debt {
    fn drop(&mut self) {
        if self.paid.load(Ordering::Acquire) {
            return;
        }
        // Gone with its subscription's state: its request task is over, and took the untaken
        // fill out before it ended (see `PublisherTask::run`).
        let Some(owner) = self.owner.upgrade() else {
            return;
        };
        // It counts in PUBLISH_DONE's Stream Count, as the subscriber counts it.
        owner.count_stream();
        owner.unpaid(self.answer.clone());
    }
}

/// The answer of a fill dropped unopened: its fill fetch stream with one End of Unknown Range
/// marker over the whole range, then a FIN (see [`Fill`]).
#[derive(Clone, Debug)]
pub(crate) struct Unpaid {
    request_id: u64,
    order: GroupOrder,
    marker: Location,
    priority: i32,
}

impl Unpaid {
    /// Opens the answer's stream on `core` and sends it; nothing if the session closed.
    ///
    /// Not cancel-safe: dropped once the stream is open, the stream is reset.
    pub(crate) async fn send(self, core: Arc<SessionCore>) {
        let Ok(mut stream) = core.conn().open_uni().await else {
            return;
        };
        stream.set_priority(self.priority);
        let started =
            FetchWriter::start(&core, stream, self.request_id, self.order, Vec::new(), None);
        let Ok(mut w) = started.await else {
            return;
        };
        // draft-21 §11.4.1: End of Unknown Range, the publisher does not say what the range
        // holds; then the FIN (§3.4.1), which now claims no object.
        if w.end_of_range(RangeEnd::Unknown, self.marker).await.is_ok() {
            w.finish();
        }
    }
}
