//! Groups and their subgroups: objects in Object ID order, how each subgroup ended, and the
//! streams writing into it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use moq_core::data::ObjectStatus;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::object::{CachedObject, SubgroupEnd};

#[derive(Debug)]
struct SubgroupInner {
    objects: Vec<CachedObject>,
    end: SubgroupEnd,
    /// Ended by a stream's FIN (not completed by inference, see [`Subgroup::complete`]).
    fin: bool,
    bytes: usize,
}

/// One subgroup: objects in increasing Object ID order.
#[derive(Debug)]
pub struct Subgroup {
    /// Group ID.
    pub group: u64,
    /// Subgroup ID.
    pub id: u64,
    /// Publisher priority.
    pub priority: u8,
    /// Whether this subgroup holds the group's last object.
    pub end_of_group: bool,
    /// Whether the cache holds it from the first object ever published in it (what a stream
    /// forwarded from its start says with FIRST_OBJECT, draft-19 §2.2).
    pub from_first: bool,
    inner: Mutex<SubgroupInner>,
    changed: watch::Sender<u64>,
    /// Streams writing into it now (see [`Subgroup::writing`]).
    writers: AtomicUsize,
    /// Its group's final Object ID, shared by the group's subgroups (`u64::MAX`: not known).
    group_end: Arc<AtomicU64>,
    /// Told of each append and of the end by the caller itself (see [`Follower`]).
    followers: Followers,
}

/// What follows a subgroup as it grows and is told so by the appending call itself, on the
/// appender's stack, with no task woken: a subscriber's subgroup stream that the objects are
/// written to as they come (`serve`'s direct writes). A follower must not append to, end or
/// follow a subgroup from these calls. Appenders on several threads may call it at once, and
/// one that looked at the list before the end may call [`Follower::appended`] after
/// [`Follower::ended`].
pub(crate) trait Follower: Send + Sync {
    /// Objects were appended to `sg` (read them with [`Subgroup::get`]).
    fn appended(&self, sg: &Subgroup);
    /// `sg` ended (finished or reset).
    fn ended(&self);
}

/// A subgroup's followers, each held weakly: one dropped is forgotten at the next call.
///
/// The list is shared copy-on-write: a call takes a snapshot under the lock (one reference
/// count) and tells the followers with the lock released, so that a follower registering, a
/// second upstream appending or the end never waits for the writes to a thousand streams
/// (a multi-threaded relay's worker would block for milliseconds). Appenders telling at
/// once is harmless: each follower writes from a position of its own, under a lock of its
/// own. A registration while a snapshot is out copies the list.
#[derive(Default)]
struct Followers(Mutex<Arc<Vec<Weak<dyn Follower>>>>);

impl Followers {
    /// Calls `f` for each follower still alive, then forgets the dropped ones.
    fn each(&self, f: impl Fn(&dyn Follower)) {
        let list = {
            let list = self.0.lock();
            if list.is_empty() {
                return;
            }
            list.clone()
        };
        let mut dropped = false;
        for w in list.iter() {
            match w.upgrade() {
                Some(follower) => f(&*follower),
                None => dropped = true,
            }
        }
        drop(list);
        if dropped {
            Arc::make_mut(&mut *self.0.lock()).retain(|w| w.strong_count() > 0);
        }
    }

    /// Adds a follower, unless `open` says no more will be told.
    fn add(&self, follower: Weak<dyn Follower>, open: impl FnOnce() -> bool) {
        let mut list = self.0.lock();
        if open() {
            Arc::make_mut(&mut *list).push(follower);
        }
    }

    /// Empties the list, returning what it held.
    fn take(&self) -> Arc<Vec<Weak<dyn Follower>>> {
        std::mem::take(&mut *self.0.lock())
    }
}

impl std::fmt::Debug for Followers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Followers({})", self.0.lock().len())
    }
}

impl Subgroup {
    fn new(
        group: u64,
        id: u64,
        priority: u8,
        end_of_group: bool,
        from_first: bool,
        group_end: Arc<AtomicU64>,
    ) -> Self {
        Subgroup {
            group_end,
            group,
            id,
            priority,
            end_of_group,
            from_first,
            inner: Mutex::new(SubgroupInner {
                objects: Vec::new(),
                end: SubgroupEnd::Open,
                fin: false,
                bytes: 0,
            }),
            changed: watch::channel(0).0,
            writers: AtomicUsize::new(0),
            followers: Followers::default(),
        }
    }

    /// Tells `follower` of every append and of the end from now on, for as long as it lives.
    /// An object appended just before may not be told: the follower looks for it itself. A
    /// subgroup that ended already keeps no follower (there is nothing more to tell).
    pub(crate) fn follow(&self, follower: Weak<dyn Follower>) {
        // Read under the list's lock, which the end takes after setting the state: a follower
        // added here is told of an end that comes later.
        self.followers
            .add(follower, || self.state() == SubgroupEnd::Open);
    }

    /// Counts a stream writing into the subgroup (an upstream's subgroup stream, at a relay)
    /// for as long as the guard lives.
    pub fn writing(self: &Arc<Self>) -> Writing {
        self.writers.fetch_add(1, Ordering::Relaxed);
        Writing(self.clone())
    }

    /// Waits until the subgroup holds the objects before `id` as far as another stream can
    /// tell: its last object is at least `id - 1`, no other stream writes into it (the caller
    /// holds a [`Writing`] of its own), or it ended. A stream that begins inside the subgroup
    /// waits here before appending, so that an object another upstream is still delivering is
    /// not passed over (draft-19 §9.4: a relay never reorders or drops a subgroup's objects).
    ///
    /// Cancel safe.
    pub async fn caught_up(&self, id: u64) {
        let mut rx = self.changed.subscribe();
        loop {
            let done = self.last_id().is_some_and(|l| l.saturating_add(1) >= id)
                || self.writers.load(Ordering::Relaxed) <= 1
                || self.state() != SubgroupEnd::Open;
            if done || rx.changed().await.is_err() {
                return;
            }
        }
    }

    /// The object at position `i`, or how the subgroup stands if there is none yet.
    pub fn get(&self, i: usize) -> Result<CachedObject, SubgroupEnd> {
        let inner = self.inner.lock();
        inner.objects.get(i).cloned().ok_or(inner.end)
    }

    /// Waits until there is an object at position `i` or the subgroup ends.
    ///
    /// Cancel safe.
    pub async fn wait(&self, i: usize) -> Result<CachedObject, SubgroupEnd> {
        let mut rx = self.changed.subscribe();
        loop {
            match self.get(i) {
                Err(SubgroupEnd::Open) => {}
                other => return other,
            }
            if rx.changed().await.is_err() {
                return self.get(i);
            }
        }
    }

    /// Appends an object. Objects must have increasing IDs; one already present (a duplicate
    /// from a second upstream) is ignored, and so is anything after the subgroup ended.
    /// Returns whether it was added.
    pub fn append(&self, obj: CachedObject) -> bool {
        let mut inner = self.inner.lock();
        if inner.end != SubgroupEnd::Open || inner.objects.last().is_some_and(|l| l.id >= obj.id) {
            return false;
        }
        inner.bytes += obj.payload.len();
        if obj.status == ObjectStatus::EndOfGroup {
            self.group_end.fetch_min(obj.id, Ordering::Relaxed);
        }
        inner.objects.push(obj);
        drop(inner);
        self.changed.send_modify(|v| *v += 1);
        self.followers.each(|f| f.appended(self));
        true
    }

    /// The object with ID `id`, if stored.
    pub fn find(&self, id: u64) -> Option<CachedObject> {
        let inner = self.inner.lock();
        inner
            .objects
            .binary_search_by_key(&id, |o| o.id)
            .ok()
            .and_then(|i| inner.objects.get(i).cloned())
    }

    /// Marks the subgroup complete: a stream carrying it ended with FIN (or its producer
    /// closed it). Its last object is the subgroup's final object (draft-19 §2.4.2).
    pub fn finish(&self) {
        self.end(SubgroupEnd::Finished, true);
    }

    /// Marks the subgroup complete without a stream having ended it (what a FETCH filled in):
    /// no object after its last is refused for it.
    pub fn complete(&self) {
        self.end(SubgroupEnd::Finished, false);
    }

    /// The subgroup's final object: its last, once a stream's FIN ended it.
    pub fn final_object(&self) -> Option<u64> {
        let inner = self.inner.lock();
        if inner.fin {
            inner.objects.last().map(|o| o.id)
        } else {
            None
        }
    }

    /// Marks the subgroup abandoned.
    pub fn reset(&self) {
        self.end(SubgroupEnd::Reset, false);
    }

    fn end(&self, how: SubgroupEnd, fin: bool) {
        let mut inner = self.inner.lock();
        if inner.end == SubgroupEnd::Open {
            inner.end = how;
            inner.fin = fin;
            // The last object of a finished subgroup that carries the end of its group.
            if let (SubgroupEnd::Finished, true, Some(last)) =
                (how, self.end_of_group, inner.objects.last())
            {
                self.group_end.fetch_min(last.id, Ordering::Relaxed);
            }
            drop(inner);
            self.changed.send_modify(|v| *v += 1);
            // Told once, then forgotten: a cached subgroup holds no follower (nor the
            // allocation a weak reference keeps) after its end.
            let followers = self.followers.take();
            for f in followers.iter().filter_map(Weak::upgrade) {
                f.ended();
            }
        }
    }

    /// How the subgroup stands.
    pub fn state(&self) -> SubgroupEnd {
        self.inner.lock().end
    }

    /// The last Object ID, if any.
    pub fn last_id(&self) -> Option<u64> {
        self.inner.lock().objects.last().map(|o| o.id)
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.inner.lock().objects.len()
    }

    /// True if no object is here yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn bytes(&self) -> usize {
        self.inner.lock().bytes
    }
}

/// A stream writing into a subgroup (see [`Subgroup::writing`]). Dropping it stops counting that
/// stream as one writing into the subgroup.
#[derive(Debug)]
pub struct Writing(Arc<Subgroup>);

impl Drop for Writing {
    fn drop(&mut self) {
        self.0.writers.fetch_sub(1, Ordering::Relaxed);
        self.0.changed.send_modify(|v| *v += 1);
    }
}

/// One group: its subgroups, by Subgroup ID. Dropping it does nothing (the track keeps it).
#[derive(Debug)]
pub struct Group {
    /// Group ID.
    pub id: u64,
    subgroups: Mutex<BTreeMap<u64, Arc<Subgroup>>>,
    created: Instant,
    /// The final Object ID once known (`u64::MAX` until then), kept by its subgroups.
    end: Arc<AtomicU64>,
}

impl Group {
    /// An empty group `id`, created now.
    pub(super) fn new(id: u64) -> Group {
        Group {
            id,
            subgroups: Mutex::new(BTreeMap::new()),
            created: Instant::now(),
            end: Arc::new(AtomicU64::new(u64::MAX)),
        }
    }

    /// Whether the group is within `max_age` at `now` (any age if `None`).
    pub(super) fn within(&self, max_age: Option<Duration>, now: Instant) -> bool {
        max_age.is_none_or(|a| now.duration_since(self.created) <= a)
    }

    /// The subgroup `id`, and whether it was created now (else it was there already).
    pub(super) fn subgroup_or_insert(
        &self,
        id: u64,
        priority: u8,
        end_of_group: bool,
        from_first: bool,
    ) -> (Arc<Subgroup>, bool) {
        let mut subs = self.subgroups.lock();
        if let Some(s) = subs.get(&id) {
            return (s.clone(), false);
        }
        let s = Arc::new(Subgroup::new(
            self.id,
            id,
            priority,
            end_of_group,
            from_first,
            self.end.clone(),
        ));
        subs.insert(id, s.clone());
        (s, true)
    }

    /// The subgroups, by ID.
    pub fn subgroups(&self) -> Vec<Arc<Subgroup>> {
        self.subgroups.lock().values().cloned().collect()
    }

    /// The subgroup `id`, if present.
    pub fn subgroup(&self, id: u64) -> Option<Arc<Subgroup>> {
        self.subgroups.lock().get(&id).cloned()
    }

    /// Payload bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.subgroups.lock().values().map(|s| s.bytes()).sum()
    }

    /// The group's final Object ID, if known (draft-19 §2.4.2): an END_OF_GROUP status object,
    /// or the last object of a finished subgroup that carries the end of the group.
    pub fn final_object(&self) -> Option<u64> {
        Some(self.end.load(Ordering::Relaxed)).filter(|e| *e != u64::MAX)
    }

    /// The largest Object ID stored in the group.
    pub fn largest(&self) -> Option<u64> {
        self.subgroups
            .lock()
            .values()
            .filter_map(|s| s.last_id())
            .max()
    }

    /// True if a subgroup other than `subgroup` holds object `id`.
    pub(super) fn holds_elsewhere(&self, subgroup: u64, id: u64) -> bool {
        self.subgroups
            .lock()
            .values()
            .any(|s| s.id != subgroup && s.find(id).is_some())
    }

    /// Every object in the group, by Object ID (objects of all subgroups merged).
    pub fn objects(&self) -> Vec<(Arc<Subgroup>, CachedObject)> {
        let mut out = Vec::new();
        for sg in self.subgroups() {
            let mut i = 0;
            while let Ok(o) = sg.get(i) {
                out.push((sg.clone(), o));
                i += 1;
            }
        }
        out.sort_by_key(|(_, o)| o.id);
        out
    }
}
