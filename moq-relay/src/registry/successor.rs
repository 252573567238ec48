//! Choosing a draining relay's successor among the live relays ([`Registry::relays`]).
//!
//! [`Registry::relays`]: super::Registry::relays

use super::RelayInfo;

/// The load a draining relay reports in its heartbeats: it is never chosen as a successor.
pub const DRAINING_LOAD: u64 = u64::MAX;

/// The relay a draining relay `me` (with region tag `region`) names in GOAWAY: among `relays`
/// other than `me` and not draining ([`DRAINING_LOAD`]), the least loaded of those with the
/// same region tag, else the least loaded of any region; ties go to the lowest relay id. An
/// empty `region` has no neighbours of its own: every relay is as near. `None` when no other
/// live relay is listed.
pub fn choose_successor<'a>(
    relays: &'a [RelayInfo],
    me: &str,
    region: &str,
) -> Option<&'a RelayInfo> {
    let candidates = || {
        relays
            .iter()
            .filter(|r| r.relay.id != me && r.load != DRAINING_LOAD)
    };
    let least = |it: &mut dyn Iterator<Item = &'a RelayInfo>| {
        it.min_by(|a, b| (a.load, &a.relay.id).cmp(&(b.load, &b.relay.id)))
    };
    let near = (!region.is_empty())
        .then(|| least(&mut candidates().filter(|r| r.region == region)))
        .flatten();
    near.or_else(|| least(&mut candidates()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RelayRef;

    fn info(id: &str, region: &str, load: u64) -> RelayInfo {
        RelayInfo {
            relay: RelayRef {
                id: id.into(),
                address: format!("moqt://{id}.test:4443"),
            },
            region: region.into(),
            load,
        }
    }

    fn chosen(relays: &[RelayInfo], me: &str, region: &str) -> Option<String> {
        choose_successor(relays, me, region).map(|r| r.relay.id.clone())
    }

    #[test]
    fn the_least_loaded_of_the_same_region_wins() {
        let relays = [
            info("a", "x", 1),
            info("b", "x", 7),
            info("c", "x", 3),
            info("d", "y", 0),
        ];
        // Not itself, though it is the least loaded of its region.
        assert_eq!(chosen(&relays, "a", "x").as_deref(), Some("c"));
        // Region y has only d.
        assert_eq!(chosen(&relays, "d", "y").as_deref(), Some("a"));
        assert_eq!(chosen(&relays, "e", "y").as_deref(), Some("d"));
    }

    #[test]
    fn no_neighbour_means_the_least_loaded_anywhere() {
        let relays = [info("a", "x", 5), info("b", "y", 2), info("c", "z", 4)];
        assert_eq!(chosen(&relays, "a", "x").as_deref(), Some("b"));
        assert_eq!(chosen(&relays, "q", "w").as_deref(), Some("b"));
        // An untagged relay has no region to prefer.
        let mixed = [info("a", "", 5), info("b", "", 9), info("c", "y", 1)];
        assert_eq!(chosen(&mixed, "a", "").as_deref(), Some("c"));
    }

    #[test]
    fn ties_go_to_the_lowest_id_and_draining_relays_are_skipped() {
        let relays = [
            info("m", "x", 2),
            info("k", "x", 2),
            info("z", "x", 2),
            info("a", "x", DRAINING_LOAD),
        ];
        assert_eq!(chosen(&relays, "me", "x").as_deref(), Some("k"));
        // Only draining relays besides itself, or nobody: no successor.
        let draining = [info("a", "x", DRAINING_LOAD), info("me", "x", 0)];
        assert_eq!(chosen(&draining, "me", "x"), None);
        assert_eq!(chosen(&[], "me", "x"), None);
        // A draining relay of the region does not hide a live one elsewhere.
        let elsewhere = [info("a", "x", DRAINING_LOAD), info("b", "y", 9)];
        assert_eq!(chosen(&elsewhere, "me", "x").as_deref(), Some("b"));
    }
}
