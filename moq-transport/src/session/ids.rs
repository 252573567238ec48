//! Request IDs: ours by parity, and the peer's checked for parity and duplicates
//! (draft-19 §10.1).

use std::collections::BTreeSet;

use moq_core::codes::SessionErrorCode;

use crate::error::Error;

/// Remembers the peer's Request IDs in a bounded window, since requests arrive on independent
/// streams and may come out of order.
///
/// IDs below the window (older than the `capacity` most recent) count as duplicates: a request
/// that late is not plausible, and remembering every ID forever would grow without bound.
#[derive(Debug)]
pub(crate) struct PeerRequestIds {
    parity: u64,
    /// Every sequence number below this is considered seen.
    floor: u64,
    seen: BTreeSet<u64>,
    capacity: usize,
}

impl PeerRequestIds {
    /// For a peer whose IDs have `parity` (0 for a client, 1 for a server).
    pub(crate) fn new(parity: u64, capacity: usize) -> Self {
        PeerRequestIds {
            parity,
            floor: 0,
            seen: BTreeSet::new(),
            capacity: capacity.max(1),
        }
    }

    /// The smallest peer Request ID not seen yet: every ID from it on is new (draft-18 §10.4,
    /// GOAWAY's "smallest Request ID that was not or might not have been processed").
    pub(crate) fn lowest_unseen(&self) -> u64 {
        self.floor * 2 + self.parity
    }

    /// Whether `id` (of the peer's parity) arrived already, or is below the window.
    pub(crate) fn seen(&self, id: u64) -> bool {
        let n = id / 2;
        id % 2 == self.parity && (n < self.floor || self.seen.contains(&n))
    }

    /// Records `id`; wrong parity or a duplicate is INVALID_REQUEST_ID (draft-19 §10.1).
    pub(crate) fn check(&mut self, id: u64) -> Result<(), Error> {
        if id % 2 != self.parity {
            return Err(Error::violation(
                SessionErrorCode::INVALID_REQUEST_ID,
                format!("request ID {id} has the wrong parity"),
            ));
        }
        let n = id / 2;
        if n < self.floor || !self.seen.insert(n) {
            return Err(Error::violation(
                SessionErrorCode::INVALID_REQUEST_ID,
                format!("request ID {id} is a duplicate"),
            ));
        }
        // Advance the floor over the contiguous run, then bound the set.
        while self.seen.first() == Some(&self.floor) {
            self.seen.pop_first();
            self.floor += 1;
        }
        while self.seen.len() > self.capacity {
            if let Some(oldest) = self.seen.pop_first() {
                self.floor = oldest + 1;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parity_duplicates_and_reordering() {
        let mut ids = PeerRequestIds::new(0, 4);
        for id in [4, 0, 2, 8, 6] {
            ids.check(id).unwrap();
        }
        assert!(
            ids.seen.is_empty(),
            "contiguous IDs collapse into the floor"
        );
        assert_eq!(ids.lowest_unseen(), 10);
        for bad in [1, 3, 0, 4, 8] {
            assert_eq!(
                ids.check(bad).unwrap_err().session_code(),
                SessionErrorCode::INVALID_REQUEST_ID
            );
        }
        // A gap that never fills: the window stays bounded.
        for id in (12..200).step_by(2) {
            ids.check(id).unwrap();
        }
        assert!(ids.seen.len() <= 4);
        assert!(ids.check(10).is_err(), "older than the window");
    }
}
