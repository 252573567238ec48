use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_core::data::ObjectStatus;
use moq_core::{FullTrackName, Location, Properties, TrackNamespace, property};

use super::*;

fn track() -> TrackCache {
    let name = FullTrackName::new(TrackNamespace::from_strs(["t"]).unwrap(), "x").unwrap();
    TrackCache::new(
        name,
        Properties::new(),
        CacheLimits {
            max_groups: 3,
            ..Default::default()
        },
    )
}

fn object(id: u64) -> CachedObject {
    CachedObject {
        id,
        status: ObjectStatus::Normal,
        properties: Properties::new(),
        payload: Bytes::from_static(b"x"),
        received: Instant::now(),
        end_of_group: false,
    }
}

/// Writes objects 0..n of a new subgroup 0 of `group`; finished if `finish`.
fn write(t: &TrackCache, group: u64, n: u64, finish: bool) {
    let sg = t.subgroup(group, 0, 128, true, true).unwrap();
    for id in 0..n {
        assert!(t.append(&sg, object(id)));
    }
    if finish {
        sg.finish();
    }
}

/// draft-19 §10.2.18: a NEW_GROUP_REQUEST is taken only for a DYNAMIC_GROUPS track, when it
/// is 0 or above the largest group, and not while one as large (or 0) is outstanding,
/// which lasts until the largest group moves on.
#[test]
fn new_group_requests_follow_the_relay_rules() {
    let t = track();
    write(&t, 0, 1, true);
    assert!(!t.request_new_group(0), "no dynamic groups");
    let dynamic = Properties::new()
        .with_int(property::DYNAMIC_GROUPS, 1)
        .unwrap();
    t.set_properties(dynamic);
    assert!(t.request_new_group(1));
    assert!(!t.request_new_group(1), "as large is outstanding");
    assert!(!t.request_new_group(0), "one is outstanding");
    assert!(t.request_new_group(2), "larger than the outstanding one");
    write(&t, 1, 1, true);
    assert!(!t.request_new_group(1), "not above the largest group");
    assert!(t.request_new_group(0), "the largest group moved on");
}

/// draft-19 §12.3: MAX_CACHE_DURATION learned after the track was created (a relay gets
/// it with SUBSCRIBE_OK) bounds what is served, checked when serving.
#[test]
fn max_cache_duration_learned_later_bounds_serving() {
    let t = track();
    write(&t, 0, 2, true);
    write(&t, 1, 2, true);
    assert_eq!(t.groups().len(), 2);
    let props = Properties::new()
        .with_int(property::MAX_CACHE_DURATION, 1)
        .unwrap();
    t.set_properties(props);
    std::thread::sleep(Duration::from_millis(5));
    assert!(t.groups().is_empty(), "every group is older than 1 ms");
    assert!(!t.covers(Location::new(1, 0), Location::new(1, 2)));
}

#[test]
fn covers_only_what_is_stored() {
    let t = track();
    assert!(!t.covers(Location::new(0, 0), Location::new(1, 0)));
    write(&t, 0, 2, true);
    // Group 0; and a range past the largest location is capped at it.
    assert!(t.covers(Location::new(0, 0), Location::new(0, 2)));
    assert!(t.covers(Location::new(0, 1), Location::new(5, 0)));
    // The upstream announced more than arrived: not covered until it is stored.
    t.observe_largest(Location::new(2, 0));
    assert!(!t.covers(Location::new(0, 0), Location::new(2, 1)));
    assert!(t.covers(Location::new(0, 0), Location::new(0, 2)));
    write(&t, 2, 1, false);
    assert!(t.covers(Location::new(0, 0), Location::new(2, 1)));
}

#[tokio::test]
async fn readers_follow_live_and_cache_is_bounded() {
    let t = track();
    let mut r = t.reader(0);
    for _ in 0..5 {
        write(&t, t.next_group_id(), 1, true);
    }
    assert_eq!(t.groups().len(), 3);
    assert_eq!(t.evicted_below(), 2);
    let first = r.next().await.unwrap();
    assert_eq!(first.group, 2, "evicted subgroups are skipped");
    assert_eq!(t.largest(), Some(Location::new(4, 0)));
    let mut late = t.reader(3);
    assert_eq!(late.next().await.unwrap().group, 3);
    t.end();
    assert_eq!(late.next().await.unwrap().group, 4);
    assert!(late.next().await.is_none());
}

/// Counts its wake-ups.
#[derive(Default)]
struct Wakes(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Wakes {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Wakes {
    fn count(&self) -> usize {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `TrackReader::poll_next` (the serving loop's poll, issue 35): pending until a subgroup
/// appears, then woken once for it and for the track's end; a dropped reader's slot is reused
/// and wakes nobody.
#[test]
fn a_polled_reader_is_woken_by_a_new_subgroup_and_by_the_end() {
    use std::task::{Context, Poll, Waker};
    let t = track();
    let wakes = std::sync::Arc::new(Wakes::default());
    let waker = Waker::from(wakes.clone());
    let mut cx = Context::from_waker(&waker);
    let mut r = t.reader(0);
    assert!(r.poll_next(&mut cx).is_pending());
    // Another reader's slot, freed and taken again.
    let mut gone = t.reader(0);
    assert!(gone.poll_next(&mut cx).is_pending());
    drop(gone);
    let mut again = t.reader(1);
    assert_eq!(wakes.count(), 0);
    write(&t, 0, 1, false);
    assert_eq!(wakes.count(), 1, "the one waiting reader is woken");
    let first = r.poll_next(&mut cx);
    assert!(matches!(&first, Poll::Ready(Some(sg)) if sg.group == 0));
    assert!(r.poll_next(&mut cx).is_pending());
    // Before its start group: not returned, still waiting.
    assert!(again.poll_next(&mut cx).is_pending());
    t.end();
    assert_eq!(
        wakes.count(),
        3,
        "both waiting readers are woken by the end"
    );
    assert!(matches!(r.poll_next(&mut cx), Poll::Ready(None)));
    assert!(matches!(again.poll_next(&mut cx), Poll::Ready(None)));
}

#[tokio::test]
async fn duplicates_are_ignored() {
    let t = track();
    let sg = t.subgroup(0, 0, 1, false, true).unwrap();
    let o = object;
    assert!(t.append(&sg, o(0)));
    assert!(t.append(&sg, o(1)));
    assert!(!t.append(&sg, o(1)), "same object from a second upstream");
    assert!(!t.append(&sg, o(0)));
    assert!(t.append(&sg, o(2)));
    sg.finish();
    assert!(!t.append(&sg, o(3)), "nothing after the end");
    assert_eq!(sg.wait(3).await, Err(SubgroupEnd::Finished));
    assert_eq!(sg.wait(2).await.unwrap().id, 2);
}

/// A subgroup's follower is told of each object appended and of the end by the appending
/// call itself, and forgotten once dropped.
#[test]
fn followers_are_told_of_appends_and_the_end() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Weak};

    #[derive(Default)]
    struct Count {
        appended: AtomicUsize,
        ended: AtomicUsize,
    }
    impl Follower for Count {
        fn appended(&self, sg: &Subgroup) {
            assert!(
                sg.get(self.appended.fetch_add(1, Ordering::Relaxed))
                    .is_ok()
            );
        }
        fn ended(&self) {
            self.ended.fetch_add(1, Ordering::Relaxed);
        }
    }

    let t = track();
    let sg = t.subgroup(0, 0, 128, true, true).unwrap();
    let (kept, dropped) = (Arc::new(Count::default()), Arc::new(Count::default()));
    for c in [&kept, &dropped] {
        let f: Arc<dyn Follower> = c.clone();
        sg.follow(Arc::downgrade(&f) as Weak<dyn Follower>);
    }
    assert!(t.append(&sg, object(0)));
    let gone = Arc::downgrade(&dropped);
    drop(dropped);
    assert!(gone.upgrade().is_none());
    assert!(t.append(&sg, object(1)));
    assert!(!t.append(&sg, object(1)), "a duplicate is not told");
    sg.finish();
    sg.finish();
    assert_eq!(kept.appended.load(Ordering::Relaxed), 2);
    assert_eq!(
        kept.ended.load(Ordering::Relaxed),
        1,
        "told of the end once"
    );
    // Forgotten after the end; one that comes later is not kept.
    assert_eq!(Arc::weak_count(&kept), 0);
    let f: Arc<dyn Follower> = kept.clone();
    sg.follow(Arc::downgrade(&f) as Weak<dyn Follower>);
    assert_eq!(Arc::weak_count(&kept), 0);
}

/// Followers are told with the list's lock released: while an appender writes to them (here
/// one follower blocks in the call), another thread registers a follower and ends the
/// subgroup without waiting, and the late follower is told of the end.
#[test]
fn followers_are_told_without_the_lock() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex, Weak};

    /// Blocks in its first `appended` until told to go on.
    struct Slow {
        inside: Mutex<Option<mpsc::Sender<()>>>,
        go: Mutex<mpsc::Receiver<()>>,
    }
    impl Follower for Slow {
        fn appended(&self, _: &Subgroup) {
            if let Some(inside) = self.inside.lock().unwrap().take() {
                inside.send(()).unwrap();
                self.go.lock().unwrap().recv().unwrap();
            }
        }
        fn ended(&self) {}
    }
    #[derive(Default)]
    struct Ends(AtomicUsize);
    impl Follower for Ends {
        fn appended(&self, _: &Subgroup) {}
        fn ended(&self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    let t = track();
    let sg = t.subgroup(0, 0, 128, true, true).unwrap();
    let (inside_tx, inside) = mpsc::channel();
    let (go, go_rx) = mpsc::channel();
    let slow: Arc<dyn Follower> = Arc::new(Slow {
        inside: Mutex::new(Some(inside_tx)),
        go: Mutex::new(go_rx),
    });
    sg.follow(Arc::downgrade(&slow));
    let appender = {
        let (t, sg) = (t.clone(), sg.clone());
        std::thread::spawn(move || t.append(&sg, object(0)))
    };
    inside
        .recv_timeout(Duration::from_secs(10))
        .expect("the appender tells the slow follower");
    // The appender is inside the slow follower's call: registering and ending do not wait.
    let late = Arc::new(Ends::default());
    let (done_tx, done) = mpsc::channel();
    let other = {
        let (sg, late) = (sg.clone(), late.clone());
        std::thread::spawn(move || {
            let f: Arc<dyn Follower> = late;
            sg.follow(Arc::downgrade(&f) as Weak<dyn Follower>);
            sg.finish();
            done_tx.send(()).unwrap();
            drop(f);
        })
    };
    let finished = done.recv_timeout(Duration::from_secs(10));
    go.send(()).unwrap();
    assert!(appender.join().unwrap());
    other.join().unwrap();
    finished.expect("follow and finish return while a follower is being told");
    assert_eq!(
        late.0.load(Ordering::Relaxed),
        1,
        "the late follower is told of the end"
    );
}
