//! Typed options: what an application sets on a track it publishes or subscribes to. The
//! wire's properties and parameters are an implementation detail.

use std::time::Duration;

use moq_core::message::Parameters;
use moq_core::{AuthToken, GroupOrder, Location, LocationFilter, Properties, property};

use crate::cache::CacheLimits;
use crate::error::Error;

/// How a track is published.
///
/// ```
/// use std::time::Duration;
/// use moq_client::{GroupOrder, TrackOptions};
/// let options = TrackOptions::default()
///     .priority(7)
///     .group_order(GroupOrder::Descending)
///     .delivery_timeout(Duration::from_millis(500));
/// assert_eq!(options.to_properties().unwrap().get_int(moq_core::property::DEFAULT_PUBLISHER_PRIORITY), Some(7));
/// ```
#[derive(Clone, Debug, Default)]
pub struct TrackOptions {
    /// Publisher priority of its objects, 0 highest (default 128; DEFAULT_PUBLISHER_PRIORITY).
    pub priority: Option<u8>,
    /// The order groups are sent in when several are in flight (default ascending;
    /// DEFAULT_PUBLISHER_GROUP_ORDER).
    pub group_order: Option<GroupOrder>,
    /// An object not delivered this long after it was written is dropped
    /// (OBJECT_DELIVERY_TIMEOUT, draft-19 §8).
    pub delivery_timeout: Option<Duration>,
    /// A subgroup not fully delivered this long after it was finished is abandoned
    /// (SUBGROUP_DELIVERY_TIMEOUT).
    pub subgroup_delivery_timeout: Option<Duration>,
    /// Objects are not served from a cache after this long (MAX_CACHE_DURATION, draft-19
    /// §12.3); also bounds this publisher's own cache.
    pub cache_duration: Option<Duration>,
    /// How much of the track this publisher keeps for late subscribers and FETCH (default:
    /// the publisher's).
    pub cache: Option<CacheLimits>,
    /// Further track properties (extensions), sent as they are.
    pub properties: Properties,
    /// Number the track's first group (by [`crate::TrackProducer::append_group`]) from the
    /// wall clock, in milliseconds since the UNIX epoch, instead of from 0; later groups follow
    /// it one by one. A publisher that restarts then continues above the groups its
    /// predecessor published, so a relay that still serves the old ones to subscribers
    /// delivers the new ones to them at once (see docs/reliability.md). Off by default.
    pub groups_from_clock: bool,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl TrackOptions {
    setters! {
        /// Sets the publisher priority.
        priority(priority: u8) { priority = Some(priority) }

        /// Sets the group order.
        group_order(order: GroupOrder) { group_order = Some(order) }

        /// Sets the object delivery timeout.
        delivery_timeout(timeout: Duration) { delivery_timeout = Some(timeout) }

        /// Sets the subgroup delivery timeout.
        subgroup_delivery_timeout(timeout: Duration) { subgroup_delivery_timeout = Some(timeout) }

        /// Sets the cache duration.
        cache_duration(duration: Duration) { cache_duration = Some(duration) }

        /// Sets this publisher's cache limits for the track.
        cache(limits: CacheLimits) { cache = Some(limits) }

        /// Numbers the first group from the wall clock (see [`TrackOptions::groups_from_clock`]).
        groups_from_clock() { groups_from_clock = true }
    }

    /// Adds an extension property.
    pub fn property(mut self, key: u64, value: u64) -> Result<Self, Error> {
        self.properties = self
            .properties
            .with_int(key, value)
            .map_err(|e| Error::Invalid(e.to_string()))?;
        Ok(self)
    }

    /// The track properties these options stand for.
    pub fn to_properties(&self) -> Result<Properties, Error> {
        let mut p = self.properties.clone();
        let mut set = |key, value: Option<u64>| -> Result<(), Error> {
            if let Some(v) = value {
                p = std::mem::take(&mut p)
                    .with_int(key, v)
                    .map_err(|e| Error::Invalid(e.to_string()))?;
            }
            Ok(())
        };
        set(
            property::DEFAULT_PUBLISHER_PRIORITY,
            self.priority.map(u64::from),
        )?;
        set(
            property::DEFAULT_PUBLISHER_GROUP_ORDER,
            self.group_order.map(|o| u64::from(o.value())),
        )?;
        set(
            property::OBJECT_DELIVERY_TIMEOUT,
            self.delivery_timeout.map(ms),
        )?;
        set(
            property::SUBGROUP_DELIVERY_TIMEOUT,
            self.subgroup_delivery_timeout.map(ms),
        )?;
        set(property::MAX_CACHE_DURATION, self.cache_duration.map(ms))?;
        Ok(p)
    }
}

/// How a track is subscribed to (SUBSCRIBE, or the answer to a peer's PUBLISH).
///
/// ```
/// use std::time::Duration;
/// use moq_client::{Location, LocationFilter, SubscribeOptions};
/// let options = SubscribeOptions::default()
///     .priority(10)
///     .start_at(Location::new(4, 0))
///     .delivery_timeout(Duration::from_secs(2));
/// assert_eq!(options.filter, Some(LocationFilter::AbsoluteStart(Location::new(4, 0))));
/// ```
#[derive(Clone, Debug, Default)]
pub struct SubscribeOptions {
    /// Subscriber priority, 0 highest (default 128; SUBSCRIBER_PRIORITY).
    pub priority: Option<u8>,
    /// The order groups are delivered in when several are in flight (default: the
    /// publisher's; GROUP_ORDER).
    pub group_order: Option<GroupOrder>,
    /// Where the subscription starts (and ends). Default ([`None`]): after the largest object
    /// published so far, that is what is published from now on (LargestObject). A SUBSCRIBE
    /// only ever delivers objects published after it is answered (draft-19 §10.7), so a
    /// start before that point does not bring the past back: fetch it with
    /// [`crate::Subscriber::fetch`], or read past and live as one stream with
    /// [`crate::Subscriber::join`] and a [`JoinFrom`] (a Joining FETCH joins the past to the
    /// subscription without duplicates). A start further on skips what comes before it.
    pub filter: Option<LocationFilter>,
    /// Whether the publisher sends objects at all (default true; FORWARD).
    pub forward: Option<bool>,
    /// An object not delivered this long after it was sent is dropped
    /// (OBJECT_DELIVERY_TIMEOUT).
    pub delivery_timeout: Option<Duration>,
    /// How long a relay may hold the SUBSCRIBE for a publisher of the track to appear
    /// (RENDEZVOUS_TIMEOUT).
    pub rendezvous_timeout: Option<Duration>,
    /// An authorization token for this request (AUTHORIZATION_TOKEN).
    pub token: Option<AuthToken>,
    /// With a reconnecting client, how a subscription whose renewal on a new session is
    /// refused for now (DOES_NOT_EXIST, TIMEOUT, GOING_AWAY: a relay that restarted before
    /// the publisher came back) is retried. Default: waits doubling from 100 ms to 2 s, for up
    /// to 30 s ([`RenewRetry::default`]).
    pub retry: RenewRetry,
}

/// How a reconnecting client retries renewing a subscription that the new session refused
/// with DOES_NOT_EXIST, TIMEOUT or GOING_AWAY (or a GOAWAY of its own). Any other refusal ends
/// the subscription at once, with that refusal; so does the first SUBSCRIBE's refusal, which
/// [`crate::Subscriber::subscribe`] returns. The consumer sees no error while it retries.
///
/// ```
/// use std::time::Duration;
/// use moq_client::{Backoff, RenewRetry, SubscribeOptions};
/// let retry = RenewRetry {
///     backoff: Backoff { min: Duration::from_millis(50), max: Duration::from_secs(1) },
///     limit: Duration::from_secs(10),
/// };
/// let options = SubscribeOptions::default().retry(retry);
/// assert_eq!(options.retry.limit, Duration::from_secs(10));
/// assert_eq!(RenewRetry::never().limit, Duration::ZERO);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenewRetry {
    /// The waits between attempts: doubling from `min` up to `max`.
    pub backoff: Backoff,
    /// How long after the first refusal attempts go on. An attempt whose wait would end
    /// later is not made: the subscription ends with the last refusal. Zero: not retried.
    pub limit: Duration,
}

impl Default for RenewRetry {
    fn default() -> Self {
        RenewRetry {
            backoff: Backoff {
                min: Duration::from_millis(100),
                max: Duration::from_secs(2),
            },
            limit: Duration::from_secs(30),
        }
    }
}

impl RenewRetry {
    /// No retry: the first refusal ends the subscription.
    pub fn never() -> Self {
        RenewRetry {
            limit: Duration::ZERO,
            ..Default::default()
        }
    }
}

impl SubscribeOptions {
    setters! {
        /// Sets the subscriber priority.
        priority(priority: u8) { priority = Some(priority) }

        /// Sets the group order.
        group_order(order: GroupOrder) { group_order = Some(order) }

        /// Starts at the beginning of the next group (NextGroupStart).
        next_group() { filter = Some(LocationFilter::NextGroupStart) }

        /// Starts after the largest object published so far (LargestObject), the default.
        latest() { filter = Some(LocationFilter::LargestObject) }

        /// Starts at `start` (AbsoluteStart).
        start_at(start: Location) { filter = Some(LocationFilter::AbsoluteStart(start)) }

        /// Delivers the objects from `start` up to the end of group `end_group`, inclusive
        /// (AbsoluteRange). An `end_group` before `start`'s group is taken as `start`'s group.
        range(start: Location, end_group: u64) {
            filter = Some(LocationFilter::AbsoluteRange {
                end_object: None,
                start,
                end_group_delta: end_group.saturating_sub(start.group),
            })
        }

        /// Sets whether objects are forwarded.
        forward(forward: bool) { forward = Some(forward) }

        /// Sets the object delivery timeout.
        delivery_timeout(timeout: Duration) { delivery_timeout = Some(timeout) }

        /// Sets the rendezvous timeout.
        rendezvous(timeout: Duration) { rendezvous_timeout = Some(timeout) }

        /// Sets the authorization token.
        token(token: AuthToken) { token = Some(token) }

        /// Sets how a refused renewal is retried (see [`SubscribeOptions::retry`]).
        retry(retry: RenewRetry) { retry = retry }
    }

    /// The request's parameters. A SUBSCRIBE without a filter is sent with LargestObject, which
    /// says explicitly what an unfiltered one means (draft-19 §5.1.2, §10.7).
    /// An answer to PUBLISH sends only the filter asked for.
    pub(crate) fn to_parameters(&self, default_filter: bool) -> Parameters {
        let filter = match self.filter {
            None if default_filter => Some(LocationFilter::LargestObject),
            f => f,
        };
        Parameters {
            subscriber_priority: self.priority,
            group_order: self.group_order,
            location_filter: filter,
            forward: self.forward,
            object_delivery_timeout: self.delivery_timeout.map(ms),
            rendezvous_timeout: self.rendezvous_timeout.map(ms),
            authorization_tokens: self.token.clone().into_iter().collect(),
            ..Default::default()
        }
    }
}

/// How long to wait between attempts (reconnecting, or renewing a subscription): doubling from
/// `min` up to `max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The first wait.
    pub min: Duration,
    /// The longest wait.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            min: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The wait after `wait`: twice as long, at most `max`.
    pub(crate) fn next(&self, wait: Duration) -> Duration {
        wait.saturating_mul(2).min(self.max)
    }
}

/// Where [`crate::Subscriber::join`] starts: how much of the past it fetches before the
/// objects published from now on.
///
/// Groups a publisher (or relay) no longer holds are not delivered; [`JoinFrom::Oldest`] asks
/// for everything it still has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum JoinFrom {
    /// The start of the group being published now (the default).
    #[default]
    CurrentGroup,
    /// The start of the group `n` groups before the current one (`GroupsBefore(0)` is
    /// [`JoinFrom::CurrentGroup`]).
    GroupsBefore(u64),
    /// The start of this group (the current group's start if it is later than that).
    Group(u64),
    /// The oldest group the publisher (or relay) still holds: everything it can give, then
    /// what follows.
    Oldest,
}

impl JoinFrom {
    /// The first group of the join, given the current (largest) group.
    pub(crate) fn first_group(self, current: u64) -> u64 {
        match self {
            JoinFrom::CurrentGroup => current,
            JoinFrom::GroupsBefore(n) => current.saturating_sub(n),
            JoinFrom::Group(g) => g.min(current),
            JoinFrom::Oldest => 0,
        }
    }
}
