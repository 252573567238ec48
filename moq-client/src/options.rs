//! Typed options: what an application sets on a track it publishes. The wire's properties
//! are an implementation detail.

use std::time::Duration;

use moq_core::{GroupOrder, Properties, property};

use crate::Error;
use crate::cache::CacheLimits;

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
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl TrackOptions {
    /// Sets the publisher priority.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = Some(priority);
        self
    }

    /// Sets the group order.
    pub fn group_order(mut self, order: GroupOrder) -> Self {
        self.group_order = Some(order);
        self
    }

    /// Sets the object delivery timeout.
    pub fn delivery_timeout(mut self, timeout: Duration) -> Self {
        self.delivery_timeout = Some(timeout);
        self
    }

    /// Sets the subgroup delivery timeout.
    pub fn subgroup_delivery_timeout(mut self, timeout: Duration) -> Self {
        self.subgroup_delivery_timeout = Some(timeout);
        self
    }

    /// Sets the cache duration.
    pub fn cache_duration(mut self, duration: Duration) -> Self {
        self.cache_duration = Some(duration);
        self
    }

    /// Sets this publisher's cache limits for the track.
    pub fn cache(mut self, limits: CacheLimits) -> Self {
        self.cache = Some(limits);
        self
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
            self.group_order.map(|o| match o {
                GroupOrder::Ascending => 1,
                GroupOrder::Descending => 2,
            }),
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
