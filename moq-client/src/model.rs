//! What a relay shares with this crate's publishers: the model of tracks behind the session
//! API. An application never needs it: [`Publisher`](crate::Publisher) and
//! [`Subscriber`](crate::Subscriber) are built on it. A relay (`moq-relay`) builds on it
//! directly, with its own upstream behind the same directory.
//!
//! - The **track cache** ([`TrackCache`]): a track's groups, subgroups and objects as they
//!   arrive, bounded by [`CacheLimits`], read by every subscription served from it. A subgroup
//!   ([`Subgroup`]) takes its objects ([`CachedObject`]) in order and ends in one way
//!   ([`SubgroupEnd`]), held open by each stream [`Writing`] it; objects that came as datagrams live in the subgroup
//!   [`DATAGRAM_SUBGROUP`].
//! - The **malformed-track rules** (draft-19 §2.4.2): [`TrackCache::check`] for objects going
//!   into a cache, [`TrackCheck`] for a stream of objects that is not cached (a FETCH piped
//!   through), each giving the [`Malformed`] reason.
//! - The **directory** ([`Directory`]): answers a session's SUBSCRIBE, FETCH, TRACK_STATUS and
//!   SUBSCRIBE_TRACKS from the tracks it holds, asking its [`Upstream`] for the others (which
//!   answers with a [`Source`] and a [`Hold`] kept while it is served); [`Peer`] names the
//!   asking session.
//! - **Serving** from a cache: [`serve_fetch`] and [`serve_fill`] (waiting for what is still
//!   to come), [`serve_fetch_now`] and [`serve_fill_now`] (what is there now, the rest a
//!   Timed-Out range), within [`ServeOptions`] (defaults [`DEFAULT_FILL_TIMEOUT`],
//!   [`DEFAULT_MAX_BACKLOG_BYTES`]), counted in [`ServeStats`].

pub use crate::cache::{
    CacheLimits, CachedObject, DATAGRAM_SUBGROUP, Subgroup, SubgroupEnd, TrackCache, Writing,
};
pub use crate::directory::{Directory, DirectoryOptions, Hold, Peer, Source, Upstream};
pub use crate::malformed::{Malformed, TrackCheck};
pub use crate::serve::{
    DEFAULT_FILL_TIMEOUT, DEFAULT_MAX_BACKLOG_BYTES, ServeOptions, ServeStats, serve_fetch,
    serve_fetch_now, serve_fill, serve_fill_now,
};

use moq_transport::track::TrackStatusInfo;

impl TrackCache {
    /// The TRACK_STATUS answer for this track as it stands now (draft-19 §9.6).
    pub fn status(&self) -> TrackStatusInfo {
        crate::directory::status_of(self)
    }
}
