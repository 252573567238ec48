//! Malformed tracks (draft-19 §2.4.2): the rules an object received for a track keeps, given
//! what was seen of the track before it, and the bounded record a subscriber keeps to apply
//! them. A cache applies the same rules to what it holds (see
//! [`crate::cache::TrackCache::check`]).

use std::collections::{BTreeMap, VecDeque};

use moq_core::data::ObjectStatus;
use moq_core::{Location, Properties, property};
use moq_transport::track::Object;
use parking_lot::Mutex;
use tokio::sync::watch;

/// What made a track malformed (draft-19 §2.4.2): the track is not served on, and the object
/// that showed it is not cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed track: {}", self.0)
    }
}

impl std::error::Error for Malformed {}

/// What was seen of a track before an object arrived, where the object arrives.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Seen {
    /// The publisher priority of the subgroup's earlier objects (`None`: a datagram, or the
    /// subgroup's first object).
    pub(crate) priority: Option<u8>,
    /// The subgroup's final object: its last before a stream carrying it ended with FIN.
    pub(crate) subgroup_final: Option<u64>,
    /// The group's final object, once known.
    pub(crate) group_final: Option<u64>,
    /// The largest Object ID received in the group.
    pub(crate) group_largest: Option<u64>,
    /// The track's final object (END_OF_TRACK), once known.
    pub(crate) track_final: Option<Location>,
    /// The largest location received in the track.
    pub(crate) track_largest: Option<Location>,
}

/// Checks one object at `at` with publisher priority `priority` against what was `seen`
/// (draft-19 §2.4.2, conditions 1, 2, 4 and 5; §2.5.1 and §12.6 for its properties).
pub(crate) fn check(
    seen: &Seen,
    at: Location,
    priority: u8,
    status: ObjectStatus,
    properties: &Properties,
) -> Result<(), Malformed> {
    // draft-19 §2.5.1, §12.6: a Mandatory Track Property on an object, nested Immutable
    // Properties, repeated gap properties.
    if properties.validate_object().is_err() {
        return Err(Malformed("invalid object properties"));
    }
    // draft-19 §12.8, §12.9: a gap reaching below Group / Object ID 0.
    if properties
        .get_int(property::PRIOR_GROUP_ID_GAP)
        .is_some_and(|g| g > at.group)
        || properties
            .get_int(property::PRIOR_OBJECT_ID_GAP)
            .is_some_and(|g| g > at.object)
    {
        return Err(Malformed("a prior gap larger than its ID"));
    }
    if seen.priority.is_some_and(|p| p != priority) {
        return Err(Malformed("publisher priority changed within a subgroup"));
    }
    if seen.subgroup_final.is_some_and(|f| at.object > f) {
        return Err(Malformed("an object after the end of its subgroup"));
    }
    if seen.group_final.is_some_and(|f| at.object > f) {
        return Err(Malformed("an object after the end of its group"));
    }
    if seen.track_final.is_some_and(|f| at > f) {
        return Err(Malformed("an object after the end of the track"));
    }
    // An end that comes after objects beyond it were received is as wrong.
    if status == ObjectStatus::EndOfGroup && seen.group_largest.is_some_and(|l| l > at.object) {
        return Err(Malformed("END_OF_GROUP before objects already received"));
    }
    if status == ObjectStatus::EndOfTrack && seen.track_largest.is_some_and(|l| l > at) {
        return Err(Malformed("END_OF_TRACK before objects already received"));
    }
    Ok(())
}

/// How many recent groups a subscriber remembers the ends and subgroups of.
const GROUPS: usize = 64;
/// How many subgroups of one group a subscriber remembers.
const SUBGROUPS: usize = 256;

#[derive(Debug, Default)]
struct GroupSeen {
    end: Option<u64>,
    largest: Option<u64>,
    /// Subgroup ID -> (priority, final object once a FIN ended a stream of it).
    subgroups: BTreeMap<u64, (u8, Option<u64>)>,
}

#[derive(Debug, Default)]
struct State {
    /// The recent groups by ID, ascending: the one an object is for is almost always the
    /// last (the newest), found without a search.
    groups: VecDeque<(u64, GroupSeen)>,
    track_final: Option<Location>,
    largest: Option<Location>,
}

impl State {
    /// Group `id`, remembered from now on if it was not (always `Some`).
    fn group(&mut self, id: u64) -> Option<&mut GroupSeen> {
        let at = match self.groups.back() {
            Some((last, _)) if *last == id => self.groups.len() - 1,
            Some((last, _)) if *last < id => self.insert(self.groups.len(), id),
            None => self.insert(0, id),
            _ => match self.groups.binary_search_by_key(&id, |(g, _)| *g) {
                Ok(at) => at,
                Err(at) => self.insert(at, id),
            },
        };
        self.groups.get_mut(at).map(|(_, g)| g)
    }

    /// Inserts group `id` at `at` (its place in the order), first forgetting the oldest if
    /// `GROUPS` are remembered; returns where it is.
    fn insert(&mut self, mut at: usize, id: u64) -> usize {
        if self.groups.len() >= GROUPS {
            // The oldest is forgotten; an object of it arriving later is not checked against it.
            self.groups.pop_front();
            at = at.saturating_sub(1);
        }
        self.groups.insert(at, (id, GroupSeen::default()));
        at
    }
}

/// What a subscriber saw of one track, as far as the rules of draft-19 §2.4.2 need it (the
/// ends and priorities of its recent groups and subgroups, not its objects: a duplicate with
/// another payload or another Forwarding Preference is found by a cache, which holds them).
#[derive(Debug)]
pub struct TrackCheck {
    state: Mutex<State>,
    found: watch::Sender<Option<Malformed>>,
}

impl Default for TrackCheck {
    fn default() -> Self {
        Self::new()
    }
}

impl TrackCheck {
    /// Nothing seen yet.
    pub fn new() -> Self {
        TrackCheck {
            state: Mutex::new(State::default()),
            found: watch::channel(None).0,
        }
    }

    fn fail(&self, why: Malformed) -> Malformed {
        self.found.send_if_modified(|f| {
            let first = f.is_none();
            f.get_or_insert(why);
            first
        });
        why
    }

    /// An object received in `subgroup` (`None`: a datagram); `Err` (and the track is
    /// malformed from now on) if it breaks a rule.
    pub fn object(&self, subgroup: Option<u64>, o: &Object) -> Result<(), Malformed> {
        let at = o.location;
        let mut state = self.state.lock();
        let (track_final, track_largest) = (state.track_final, state.largest);
        // Always there: the group was just remembered.
        let Some(g) = state.group(at.group) else {
            return Ok(());
        };
        let sg = subgroup.and_then(|id| g.subgroups.get(&id).copied());
        let seen = Seen {
            priority: sg.map(|(p, _)| p),
            subgroup_final: sg.and_then(|(_, f)| f),
            group_final: g.end,
            group_largest: g.largest,
            track_final,
            track_largest,
        };
        if let Err(why) = check(&seen, at, o.priority, o.status, &o.properties) {
            return Err(self.fail(why));
        }
        g.largest = g.largest.max(Some(at.object));
        if o.status == ObjectStatus::EndOfGroup || o.end_of_group {
            g.end = Some(g.end.map_or(at.object, |e| e.min(at.object)));
        }
        if let Some(id) = subgroup
            && sg.is_none()
            && g.subgroups.len() < SUBGROUPS
        {
            g.subgroups.insert(id, (o.priority, None));
        }
        if o.status == ObjectStatus::EndOfTrack {
            state.track_final = Some(state.track_final.map_or(at, |f| f.min(at)));
        }
        state.largest = state.largest.max(Some(at));
        Ok(())
    }

    /// A stream of `subgroup` in `group` ended with FIN after `last` (its last object, if it
    /// carried any); `end_of_group` if its header said it carries the group's last object.
    /// draft-19 §2.4.2 condition 3: two streams of one subgroup that end at different objects.
    pub fn fin(
        &self,
        group: u64,
        subgroup: u64,
        end_of_group: bool,
        last: Option<u64>,
    ) -> Result<(), Malformed> {
        let Some(last) = last else { return Ok(()) };
        let mut state = self.state.lock();
        let Some(g) = state.group(group) else {
            return Ok(());
        };
        if let Some((_, fin)) = g.subgroups.get_mut(&subgroup) {
            if fin.is_some_and(|f| f != last) {
                return Err(self.fail(Malformed("a subgroup ended at two different objects")));
            }
            *fin = Some(last);
        }
        if end_of_group {
            if g.largest.is_some_and(|l| l > last) {
                return Err(self.fail(Malformed("an object after the end of its group")));
            }
            g.end = Some(g.end.map_or(last, |e| e.min(last)));
        }
        Ok(())
    }

    /// Resolves once the track was found malformed.
    ///
    /// Cancel safe.
    pub async fn found(&self) -> Malformed {
        let mut rx = self.found.subscribe();
        loop {
            if let Some(m) = *rx.borrow_and_update() {
                return m;
            }
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn obj(group: u64, id: u64, priority: u8, status: ObjectStatus) -> Object {
        Object {
            location: Location::new(group, id),
            subgroup: Some(0),
            priority,
            status,
            properties: Properties::default(),
            payload: Bytes::new(),
            end_of_group: false,
        }
    }

    #[test]
    fn each_condition_is_found() {
        let n = ObjectStatus::Normal;
        // 1: priority change within a subgroup.
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 0, 5, n)).unwrap();
        assert!(c.object(Some(0), &obj(1, 1, 6, n)).is_err());
        // Another subgroup may have another priority.
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 0, 5, n)).unwrap();
        c.object(Some(1), &obj(1, 1, 6, n)).unwrap();
        // 2 and 3: past a subgroup's FIN; two FINs at different objects.
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 0, 5, n)).unwrap();
        c.fin(1, 0, false, Some(0)).unwrap();
        assert!(c.object(Some(0), &obj(1, 1, 5, n)).is_err());
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 0, 5, n)).unwrap();
        c.fin(1, 0, false, Some(0)).unwrap();
        assert!(c.fin(1, 0, false, Some(3)).is_err());
        // 4: past END_OF_GROUP, and past the FIN of the subgroup that ends the group.
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 2, 5, ObjectStatus::EndOfGroup))
            .unwrap();
        assert!(c.object(Some(1), &obj(1, 3, 5, n)).is_err());
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 0, 5, n)).unwrap();
        c.fin(1, 0, true, Some(0)).unwrap();
        assert!(c.object(Some(1), &obj(1, 1, 5, n)).is_err());
        // 5: past END_OF_TRACK; an earlier group's late object is fine.
        let c = TrackCheck::new();
        c.object(Some(0), &obj(3, 0, 5, ObjectStatus::EndOfTrack))
            .unwrap();
        c.object(Some(0), &obj(2, 0, 5, n)).unwrap();
        assert!(c.object(Some(0), &obj(4, 0, 5, n)).is_err());
        // A gap larger than the ID.
        let mut gap = obj(1, 0, 5, n);
        gap.properties = Properties::new()
            .with_int(property::PRIOR_GROUP_ID_GAP, 2)
            .unwrap();
        assert!(TrackCheck::new().object(Some(0), &gap).is_err());
        // An end before objects already received.
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 4, 5, n)).unwrap();
        assert!(
            c.object(Some(1), &obj(1, 2, 5, ObjectStatus::EndOfGroup))
                .is_err()
        );
    }

    /// Groups that arrive out of order are each remembered in their place; past `GROUPS`
    /// the oldest is forgotten, whatever order the newer ones came in.
    #[test]
    fn groups_out_of_order_and_the_oldest_forgotten() {
        let n = ObjectStatus::Normal;
        let end = ObjectStatus::EndOfGroup;
        let c = TrackCheck::new();
        c.object(Some(0), &obj(10, 0, 5, end)).unwrap();
        c.object(Some(0), &obj(30, 0, 5, end)).unwrap();
        // Between the two: its own end, and the others' still apply.
        c.object(Some(0), &obj(20, 0, 5, end)).unwrap();
        assert!(c.object(Some(1), &obj(20, 1, 5, n)).is_err());
        assert!(c.object(Some(1), &obj(10, 1, 5, n)).is_err());
        assert!(c.object(Some(1), &obj(30, 1, 5, n)).is_err());
        // Before all of them.
        c.object(Some(0), &obj(5, 0, 5, end)).unwrap();
        assert!(c.object(Some(1), &obj(5, 1, 5, n)).is_err());
        // GROUPS newer groups, every other one out of order: the four old ones are forgotten.
        let base = 100;
        for i in (0..GROUPS as u64).step_by(2) {
            c.object(Some(0), &obj(base + i + 1, 0, 5, end)).unwrap();
            c.object(Some(0), &obj(base + i, 0, 5, end)).unwrap();
        }
        for old in [5, 10, 20, 30] {
            c.object(Some(1), &obj(old, 1, 5, n)).unwrap();
        }
        // A late object's group is remembered as the oldest, in place of the oldest before
        // it: group 5 pushed out group 100, then 10 pushed out 5, and so on. Groups 101 on
        // are still checked.
        for g in base + 1..base + GROUPS as u64 {
            assert!(c.object(Some(1), &obj(g, 1, 5, n)).is_err(), "group {g}");
        }
    }

    #[tokio::test]
    async fn found_resolves_with_the_first_reason() {
        let c = TrackCheck::new();
        c.object(Some(0), &obj(1, 0, 5, ObjectStatus::Normal))
            .unwrap();
        let _ = c.object(Some(0), &obj(1, 1, 6, ObjectStatus::Normal));
        let _ = c.fin(1, 0, false, Some(0));
        let m = tokio::time::timeout(std::time::Duration::from_secs(5), c.found())
            .await
            .unwrap();
        assert_eq!(m.0, "publisher priority changed within a subgroup");
    }
}
