//! The producing side of a track: a track, its groups, and (where the application asks for
//! them) a group's subgroups. What they write is kept in the track's cache and served to every
//! subscriber.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_core::data::ObjectStatus;
use moq_core::{FullTrackName, Location, Properties};

use crate::cache::{CachedObject, NewGroup, Subgroup, SubgroupEnd, TrackCache};
use crate::directory::TrackRegistration;
use crate::error::Error;

/// A track being published: write it group by group. Its objects are served to every
/// subscriber of every session the [`crate::Publisher`] serves, and kept in a bounded cache for
/// late subscribers and FETCH.
///
/// Dropping it ends the track (subscribers get PUBLISH_DONE with TRACK_ENDED); so does
/// [`TrackProducer::finish`], which also waits for the delivery.
#[must_use = "dropping a TrackProducer ends the track at once: hold it while the track is published"]
#[derive(Debug)]
pub struct TrackProducer {
    cache: TrackCache,
    _registration: TrackRegistration,
    /// The first group's ID from the wall clock (`TrackOptions::groups_from_clock`).
    from_clock: bool,
}

impl TrackProducer {
    /// Resolves when a subscriber asks for a new group (NEW_GROUP_REQUEST, draft-19
    /// §10.2.18), for a track created with DYNAMIC_GROUPS = 1: the publisher SHOULD end the
    /// current group and begin a new one as soon as practical. Pass the last request returned
    /// (`None` at first).
    ///
    /// Cancel safe.
    pub async fn new_group_requested(&self, seen: Option<NewGroup>) -> NewGroup {
        self.cache.new_group_requested(seen).await
    }

    pub(crate) fn new(
        cache: TrackCache,
        registration: TrackRegistration,
        from_clock: bool,
    ) -> Self {
        TrackProducer {
            cache,
            _registration: registration,
            from_clock,
        }
    }

    pub(crate) fn cache(&self) -> &TrackCache {
        &self.cache
    }

    /// The track's name.
    pub fn name(&self) -> &FullTrackName {
        self.cache.name()
    }

    /// The largest location written, if any.
    pub fn largest(&self) -> Option<Location> {
        self.cache.largest()
    }

    /// Starts the group after the largest one written or started (the first one: 0, or the
    /// wall clock's milliseconds with [`crate::TrackOptions::groups_from_clock`]).
    pub fn append_group(&self) -> Result<GroupProducer, Error> {
        let next = self.cache.next_group_id();
        let id = if self.from_clock && next == 0 {
            clock_ms()
        } else {
            next
        };
        self.create_group(id)
    }

    /// Starts group `id`: [`Error::GroupExists`] if it was started already,
    /// [`Error::GroupTooOld`] if the cache no longer holds groups that old,
    /// [`Error::TrackEnded`] after the track ended.
    pub fn create_group(&self, id: u64) -> Result<GroupProducer, Error> {
        if self.cache.is_ended() {
            return Err(Error::TrackEnded);
        }
        if self.cache.group(id).is_some() {
            return Err(Error::GroupExists(id));
        }
        let priority = self.cache.default_priority();
        let subgroup = self
            .cache
            .subgroup(id, 0, priority, true, true)
            .ok_or(Error::GroupTooOld(id))?;
        // The Largest Object moves with the first object written, not when the group starts
        // (draft-19 §5.1.2): a subscriber arriving now must not skip this group's object 0.
        Ok(GroupProducer {
            first: SubgroupProducer {
                cache: self.cache.clone(),
                subgroup,
            },
        })
    }

    /// How many subscriptions are served from this track right now.
    pub fn subscribers(&self) -> usize {
        self.cache.subscribers()
    }

    /// Resolves once at least one subscription is served from this track: a publisher can hold
    /// back work until someone listens.
    ///
    /// Cancel safe.
    pub async fn subscribed(&self) {
        self.cache.subscribed().await;
    }

    /// Resolves once every subscriber served now has been sent every object written so far
    /// and has acknowledged it, or a subscriber left; [`Error::Timeout`] after `timeout`.
    ///
    /// Cancel safe.
    pub async fn flush(&self, timeout: Duration) -> Result<(), Error> {
        tokio::time::timeout(timeout, self.cache.delivered())
            .await
            .map_err(|_| Error::Timeout)
    }

    /// Ends the track, then waits, at most `timeout`, until every subscriber was sent (and
    /// acknowledged) every object and the end of the track (PUBLISH_DONE with TRACK_ENDED).
    ///
    /// Not cancel safe in a useful sense: dropped early, the track has ended all the same.
    pub async fn finish(self, timeout: Duration) -> Result<(), Error> {
        self.cache.end();
        tokio::time::timeout(timeout, self.cache.served_out())
            .await
            .map_err(|_| Error::Timeout)
    }
}

impl Drop for TrackProducer {
    fn drop(&mut self) {
        self.cache.end();
    }
}

/// One group of a track. [`GroupProducer::write`] appends objects with IDs 0, 1, 2, ... to the
/// group's first subgroup (Subgroup ID 0, which carries the group's last object: draft-19
/// §2.4.2); an application that splits a group into several subgroups opens more with
/// [`GroupProducer::subgroup`], writes them first, and ends the group with the first.
///
/// Dropping it without [`GroupProducer::finish`] abandons the first subgroup (its streams are
/// reset: subscribers see it incomplete).
#[must_use = "dropping a GroupProducer without finish() abandons the group"]
#[derive(Debug)]
pub struct GroupProducer {
    first: SubgroupProducer,
}

impl GroupProducer {
    /// The Group ID.
    pub fn id(&self) -> u64 {
        self.first.group()
    }

    /// Appends an object to the first subgroup with the next Object ID (one above the largest
    /// of the group, in any subgroup); returns its ID.
    pub fn write(&mut self, payload: impl Into<Bytes>) -> Result<u64, Error> {
        self.write_with(payload, Properties::new())
    }

    /// [`GroupProducer::write`] with Object Properties.
    pub fn write_with(
        &mut self,
        payload: impl Into<Bytes>,
        properties: Properties,
    ) -> Result<u64, Error> {
        let group = self.first.cache.group(self.id());
        let id = group.and_then(|g| g.largest()).map_or(0, |l| l + 1);
        self.first.write_with(id, payload, properties)?;
        Ok(id)
    }

    /// Opens subgroup `id` (not 0, the first) of this group, with `priority` (default: the
    /// track's). Its Object IDs are the application's, increasing within the subgroup.
    pub fn subgroup(&self, id: u64, priority: Option<u8>) -> Result<SubgroupProducer, Error> {
        let cache = &self.first.cache;
        let group = self.id();
        if cache.is_ended() {
            return Err(Error::TrackEnded);
        }
        if cache.group(group).is_some_and(|g| g.subgroup(id).is_some()) {
            return Err(Error::SubgroupExists(id));
        }
        let priority = priority.unwrap_or_else(|| cache.default_priority());
        let subgroup = cache
            .subgroup(group, id, priority, false, true)
            .ok_or(Error::GroupTooOld(group))?;
        Ok(SubgroupProducer {
            cache: cache.clone(),
            subgroup,
        })
    }

    /// Ends the group: every object of its first subgroup was written.
    pub fn finish(self) -> Result<(), Error> {
        self.first.finish()
    }

    /// Abandons the group: its first subgroup's streams are reset.
    pub fn abort(self) {
        self.first.abort();
    }
}

/// One subgroup of a group, written in increasing Object ID order. Dropping it without
/// [`SubgroupProducer::finish`] abandons it.
#[must_use = "dropping a SubgroupProducer without finish() abandons the subgroup"]
#[derive(Debug)]
pub struct SubgroupProducer {
    cache: TrackCache,
    subgroup: Arc<Subgroup>,
}

impl SubgroupProducer {
    /// The Group ID.
    pub fn group(&self) -> u64 {
        self.subgroup.group
    }

    /// The Subgroup ID.
    pub fn id(&self) -> u64 {
        self.subgroup.id
    }

    /// Appends object `id` (above the previous one of this subgroup, and not after the end of
    /// the group once its first subgroup finished).
    pub fn write(&mut self, id: u64, payload: impl Into<Bytes>) -> Result<(), Error> {
        self.write_with(id, payload, Properties::new())
    }

    /// [`SubgroupProducer::write`] with Object Properties.
    pub fn write_with(
        &mut self,
        id: u64,
        payload: impl Into<Bytes>,
        properties: Properties,
    ) -> Result<(), Error> {
        if self.cache.is_ended() {
            return Err(Error::TrackEnded);
        }
        if self.subgroup.state() != SubgroupEnd::Open {
            return Err(Error::Invalid(format!(
                "subgroup {} of group {} has ended",
                self.id(),
                self.group()
            )));
        }
        // draft-19 §2.4.2: an object after the group's final object makes the track malformed.
        let group = self.cache.group(self.group());
        if group
            .and_then(|g| g.final_object())
            .is_some_and(|end| id > end)
        {
            return Err(Error::Invalid(format!(
                "object {id} is after the end of group {}",
                self.group()
            )));
        }
        let added = self.cache.append(
            &self.subgroup,
            CachedObject {
                id,
                status: ObjectStatus::Normal,
                properties,
                payload: payload.into(),
                received: Instant::now(),
                end_of_group: false,
            },
        );
        if !added {
            return Err(Error::ObjectOrder(id));
        }
        Ok(())
    }

    /// Ends the subgroup: every object was written.
    pub fn finish(self) -> Result<(), Error> {
        if self.subgroup.state() != SubgroupEnd::Open {
            return Err(Error::Invalid("the subgroup has ended".into()));
        }
        self.subgroup.finish();
        Ok(())
    }

    /// Abandons the subgroup: its streams are reset.
    pub fn abort(self) {
        self.subgroup.reset();
    }
}

impl Drop for SubgroupProducer {
    fn drop(&mut self) {
        if self.subgroup.state() == SubgroupEnd::Open {
            self.subgroup.reset();
        }
    }
}

/// Milliseconds since the UNIX epoch (0 if the clock is before it).
fn clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
