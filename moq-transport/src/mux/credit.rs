//! Request ID flow control in both directions (draft-14 §9.5, §9.6): our next Request ID
//! within the peer's MAX_REQUEST_ID, and the MAX_REQUEST_ID we grant as the peer's requests
//! complete.

use moq_core::codes::SessionErrorCode;

use crate::error::Error;

/// TOO_MANY_REQUESTS (drafts 14-16 §13.1.1: a Request ID at or above MAX_REQUEST_ID).
const TOO_MANY_REQUESTS: SessionErrorCode = SessionErrorCode(0x7);

/// Request ID flow control in both directions.
#[derive(Debug)]
pub(super) struct Credit {
    /// Our next Request ID.
    next_id: u64,
    /// The peer's MAX_REQUEST_ID: ours must stay below it.
    peer_max: u64,
    /// The MAX_REQUEST_ID we told the peer we are blocked at, if we did.
    blocked_at: Option<u64>,
    /// The peer's parity.
    peer_parity: u64,
    /// How many of the peer's requests may be open at once.
    window: u64,
    /// The peer's requests that completed.
    completed: u64,
    /// The MAX_REQUEST_ID we granted.
    granted: u64,
}

impl Credit {
    /// `parity` is ours; `peer_max` the MAX_REQUEST_ID of the peer's SETUP; `window` how many
    /// of the peer's requests may be open at once (our SETUP granted
    /// [`Credit::initial_grant`]).
    pub(super) fn new(parity: u64, peer_max: u64, window: u64) -> Credit {
        Credit {
            next_id: parity,
            peer_max,
            blocked_at: None,
            peer_parity: 1 - parity,
            window,
            completed: 0,
            granted: Credit::initial_grant(window, parity),
        }
    }

    /// The MAX_REQUEST_ID for our SETUP (`peer parity + 2 * window`).
    pub(super) fn initial_grant(window: u64, parity: u64) -> u64 {
        (1 - parity) + 2 * window
    }

    fn grant_for(&self) -> u64 {
        self.peer_parity + 2 * (self.completed + self.window)
    }

    /// Whether the peer's MAX_REQUEST_ID allows one more Request ID of ours.
    pub(super) fn has_room(&self) -> bool {
        self.next_id < self.peer_max
    }

    /// Our next Request ID, not taken yet.
    pub(super) fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Takes our next Request ID; the caller checked [`Credit::has_room`].
    pub(super) fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 2;
        id
    }

    /// Out of room: the MAX_REQUEST_ID to send REQUESTS_BLOCKED for, once per limit
    /// (draft-14 §9.6).
    pub(super) fn blocked(&mut self) -> Option<u64> {
        if self.blocked_at == Some(self.peer_max) {
            return None;
        }
        self.blocked_at = Some(self.peer_max);
        Some(self.peer_max)
    }

    /// Checks the peer's new Request ID against the MAX_REQUEST_ID we granted (draft-14
    /// §9.5: at or above it is TOO_MANY_REQUESTS).
    pub(super) fn check_peer_id(&self, id: u64) -> Result<(), Error> {
        let granted = self.granted;
        if id >= granted {
            return Err(Error::violation(
                TOO_MANY_REQUESTS,
                format!("Request ID {id} at or above MAX_REQUEST_ID {granted}"),
            ));
        }
        Ok(())
    }

    /// The peer's MAX_REQUEST_ID: it may only grow (draft-14 §9.5).
    pub(super) fn raise_peer_max(&mut self, max: u64) -> Result<(), Error> {
        if max < self.peer_max {
            return Err(Error::protocol(format!(
                "MAX_REQUEST_ID went down from {} to {max}",
                self.peer_max
            )));
        }
        self.peer_max = max;
        Ok(())
    }

    /// A request of the peer's completed (unless `now`, for REQUESTS_BLOCKED): the new
    /// MAX_REQUEST_ID to grant, if any, in batches of a quarter window (or at once when `now`).
    pub(super) fn complete(&mut self, now: bool) -> Option<u64> {
        if !now {
            self.completed += 1;
        }
        let next = self.grant_for();
        let batch = 2 * (self.window / 4).max(1);
        (next > self.granted && (now || next - self.granted >= batch)).then(|| {
            self.granted = next;
            next
        })
    }
}
