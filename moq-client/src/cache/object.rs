//! What a track's cache is made of and bounded by: objects, how a subgroup ended, the limits.

use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_core::Properties;
use moq_core::data::ObjectStatus;

/// The Subgroup ID under which objects that travel as datagrams are kept; they are served as
/// datagrams.
pub const DATAGRAM_SUBGROUP: u64 = u64::MAX;

/// How much of a track is kept in memory. The oldest groups go first; the group being written
/// is never evicted.
#[derive(Clone, Copy, Debug)]
pub struct CacheLimits {
    /// At most this many groups.
    pub max_groups: usize,
    /// At most this many payload bytes.
    pub max_bytes: usize,
    /// Groups older than this are dropped (MAX_CACHE_DURATION lowers it).
    pub max_age: Option<Duration>,
}

impl Default for CacheLimits {
    fn default() -> Self {
        CacheLimits {
            max_groups: 32,
            max_bytes: 64 << 20,
            max_age: Some(Duration::from_secs(60)),
        }
    }
}
/// One object in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CachedObject {
    /// Object ID.
    pub id: u64,
    /// Normal, End of Group or End of Track.
    pub status: ObjectStatus,
    /// Object Properties.
    pub properties: Properties,
    /// The payload.
    pub payload: Bytes,
    /// When its first byte was produced or received (for delivery timeouts and cache age).
    pub received: Instant,
    /// The last object of its group, as a datagram's END_OF_GROUP said (draft-19 §11.3.1);
    /// kept so that it is forwarded as it came (§9.1: a cache stores every field).
    pub end_of_group: bool,
}

impl From<moq_transport::track::Object> for CachedObject {
    /// The object as received now.
    fn from(o: moq_transport::track::Object) -> Self {
        CachedObject {
            id: o.location.object,
            status: o.status,
            properties: o.properties,
            payload: o.payload,
            received: Instant::now(),
            end_of_group: o.end_of_group,
        }
    }
}

/// How a subgroup ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubgroupEnd {
    /// Still being written.
    Open,
    /// Complete: every object is here.
    Finished,
    /// Abandoned: objects may be missing.
    Reset,
}
