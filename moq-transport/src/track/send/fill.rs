//! [`Fill`]: a fill fetch stream the subscriber asked for (draft-21 §3.4), and the answer it is
//! owed until the publisher opens it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use moq_core::data::RangeEnd;
use moq_core::{GroupOrder, Location};

use super::fetch::FetchWriter;
use crate::latch::Latch;
use crate::session::SessionCore;

/// A fill the subscriber asked for with FILL_PARAMETERS (draft-21 §3.4, from draft-20): the
/// range to deliver on a fill fetch stream, and how.
///
/// Deliver it with [`SubscriptionWriter::open_fill`](super::SubscriptionWriter::open_fill).
/// Every fill gets an answer: dropped without having been opened (the last of its clones; or
/// never taken, when the subscription is finished or its state dropped), its fill fetch stream is
/// opened at once with one End of Unknown Range marker over the whole range and a FIN, so the
/// subscriber does not wait for it until the session ends, and learns that none of the range
/// was delivered. Clones share that one answer.
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

/// Counts a stream in the subscription's PUBLISH_DONE Stream Count.
pub(super) trait CountStream: Send + Sync + std::fmt::Debug {
    /// One more stream was opened for the subscription.
    fn count_stream(&self);
}

/// The answer a received [`Fill`] owes the subscriber, shared by the fill's clones: opening
/// the fill pays it; if none of them did, the last one's drop sends it.
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
    /// The answer owed for the fill with `request_id` on `core`, whose stream would have
    /// `priority`; `counter` counts the stream if the subscription is still there.
    pub(super) fn new(
        core: &Arc<SessionCore>,
        counter: Weak<dyn CountStream>,
        fill: &Fill,
        priority: i32,
    ) -> Owed {
        Owed(Some(Arc::new(Debt {
            core: core.clone(),
            counter,
            request_id: fill.request_id,
            order: fill.group_order,
            // A marker covers what follows the previous entry up to its location: the
            // range's last object in ascending order, its first group in descending order.
            marker: match fill.group_order {
                GroupOrder::Descending => Location::new(fill.start.group, 0),
                _ => fill.end,
            },
            priority,
            paid: AtomicBool::new(false),
        })))
    }

    /// The fill's stream is opened: it answers the subscriber, whatever comes of it.
    pub(super) fn pay(&self) {
        if let Some(d) = &self.0 {
            d.paid.store(true, Ordering::Relaxed);
        }
    }
}

#[derive(Debug)]
pub(super) struct Debt {
    core: Arc<SessionCore>,
    counter: Weak<dyn CountStream>,
    request_id: u64,
    order: GroupOrder,
    marker: Location,
    priority: i32,
    paid: AtomicBool,
}

impl Drop for Debt {
    fn drop(&mut self) {
        // A session's tasks need its runtime; without one the session is gone too.
        if self.paid.load(Ordering::Relaxed) || tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        // It counts in PUBLISH_DONE's Stream Count, as the subscriber counts it.
        if let Some(c) = self.counter.upgrade() {
            c.count_stream();
        }
        let core = self.core.clone();
        let (request_id, order, marker) = (self.request_id, self.order, self.marker);
        let priority = self.priority;
        // A task of the session's: dropped with it, and nothing to do once it is closed.
        self.core.spawn(async move {
            let Ok(mut stream) = core.conn().open_uni().await else {
                return;
            };
            stream.set_priority(priority);
            let cancelled = Latch::default().subscribe();
            let started =
                FetchWriter::start(&core, stream, request_id, order, Vec::new(), cancelled);
            let Ok(mut w) = started.await else {
                return;
            };
            // draft-21 §11.4.1: End of Unknown Range, the publisher does not say what the range
            // holds; then the FIN (§3.4.1), which now claims no object.
            if w.end_of_range(RangeEnd::Unknown, marker).await.is_ok() {
                w.finish();
            }
        });
    }
}
