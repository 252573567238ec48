//! Tracks held in memory: groups, subgroups and objects as they are produced, a bounded cache
//! of recent groups, and readers that follow it live.
//!
//! The same structure serves a publishing application (it writes objects) and a relay (it
//! writes what arrives from upstream, deduplicating objects that arrive twice).
//!
//! Inside: `object` (objects, limits) ← `group` (groups and subgroups) ← `track` (the track's
//! cache, its serving and readers).

mod group;
mod object;
mod track;

pub(crate) use group::Follower;
pub use group::{Subgroup, Writing};
pub use object::{CacheLimits, CachedObject, DATAGRAM_SUBGROUP, SubgroupEnd};
pub(crate) use track::TrackReader;
pub use track::{NewGroup, TrackCache};

#[cfg(test)]
mod tests;
