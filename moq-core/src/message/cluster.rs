//! The MoQ Cluster extension (draft-lcurley-moq-cluster, "MoQ Cluster Extension", L. Curley):
//! the code points and the two value shapes it adds to the codec.
//!
//! Each endpoint declares its own Hop ID in SETUP (HOP_ID), which is also what negotiates the
//! extension; RELAY_COST prices pulling from the sender. Each namespace advertisement
//! (PUBLISH_NAMESPACE, and NAMESPACE in an extended form that appends Message Parameters)
//! carries HOP_PATH, the Hop IDs it traversed with the original publisher first, and
//! ROUTE_COST, the accumulated cost of that path. Code points and value shapes are those of
//! draft -01 as deployed (moq-dev's moq-net 0.3.18); -00's abstract gives the semantics.
//! The extension negotiates only where SETUP is a Key-Value-Pair block (draft-17 on,
//! [`Version::has_cluster_extension`]); earlier drafts keep the options as unknown ones.
//!
//! Where the rows live: the Setup Options in [`super::SetupOptions`] (`hop_id`,
//! `relay_cost`), the Message Parameters in [`super::Parameters`] (`cluster`, read with
//! `hop_path()` / `route_cost()`) with their rows in the parameter table, and the extended
//! NAMESPACE here.

use bytes::{Buf, Bytes};

use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError};

/// HOP_ID Setup Option (even: a varint): the sender's own Hop ID; sending it is what
/// negotiates the extension. 0 speaks the extension but names no hop.
pub const HOP_ID: u64 = 0x40B54;
/// RELAY_COST Setup Option (even: a varint): what subscribing from the sender costs.
pub const RELAY_COST: u64 = 0x40B56;
/// HOP_PATH Message Parameter (odd: a Length, then the Hop IDs as varints filling it).
pub const HOP_PATH: u64 = 0x40B57;
/// ROUTE_COST Message Parameter (even: a varint): the accumulated cost of the path.
pub const ROUTE_COST: u64 = 0x40B58;
/// The cost of a link nobody priced: an unpriced mesh's route cost is its hop count.
pub const DEFAULT_COST: u64 = 1;
/// The Hop ID that names no hop (a bridge from a peer that does not speak the extension).
pub const UNKNOWN_HOP: u64 = 0;

/// The MoQ Cluster Message Parameters of one message ([`super::Parameters::cluster`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClusterParams {
    /// HOP_PATH (0x40B57): the relays an advertisement went through, publisher first.
    pub hop_path: Option<HopPath>,
    /// ROUTE_COST (0x40B58): the path's accumulated cost; absent on an advertisement means 0.
    pub route_cost: Option<u64>,
}

/// The ordered Hop IDs an advertisement traversed, the original publisher first.
///
/// Never empty, and no non-zero Hop ID appears twice (0 names no hop, so it may repeat):
/// [`HopPath::new`] and the decoder both enforce it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct HopPath(Vec<u64>);

impl HopPath {
    /// A path of `hops`, or `None` if it is empty or names a non-zero hop twice.
    ///
    /// ```
    /// use moq_core::message::cluster::HopPath;
    /// assert!(HopPath::new(vec![7, 0, 9, 0]).is_some());
    /// assert!(HopPath::new(vec![7, 9, 7]).is_none());
    /// assert!(HopPath::new(vec![]).is_none());
    /// ```
    pub fn new(hops: Vec<u64>) -> Option<HopPath> {
        (!hops.is_empty() && first_repeat(&hops).is_none()).then_some(HopPath(hops))
    }

    /// The Hop IDs, publisher first.
    pub fn hops(&self) -> &[u64] {
        &self.0
    }

    /// True if the path went through `hop` (never for [`UNKNOWN_HOP`]): a receiver whose own
    /// Hop ID is in the path is looking at its own advertisement come back.
    pub fn contains(&self, hop: u64) -> bool {
        holds(&self.0, hop)
    }

    /// The path a relay forwards: this one with `hop` (its own Hop ID) appended, or `None`
    /// if the path already names `hop` (a loop, which is not forwarded).
    pub fn appended(&self, hop: u64) -> Option<HopPath> {
        if self.contains(hop) {
            return None;
        }
        let mut hops = self.0.clone();
        hops.push(hop);
        Some(HopPath(hops))
    }

    /// Reads the entries of a HOP_PATH value: varints filling `body` exactly.
    pub(crate) fn decode_entries(body: &mut Bytes, v: Version) -> Result<HopPath, DecodeError> {
        let mut hops = Vec::new();
        while body.has_remaining() {
            hops.push(body.get_varint(v)?);
        }
        // draft-lcurley-moq-cluster-01 HOP_PATH Parameter: the path always names at least the
        // original publisher.
        if hops.is_empty() {
            return Err(DecodeError::InvalidValue {
                field: "HOP_PATH (empty)",
                value: 0,
            });
        }
        // draft-lcurley-moq-cluster-01 HOP_PATH Parameter: a non-zero Hop ID twice in one path MUST
        // close the session (PROTOCOL_VIOLATION): no conforming sender builds it.
        if let Some(hop) = first_repeat(&hops) {
            return Err(DecodeError::InvalidValue {
                field: "HOP_PATH (repeated Hop ID)",
                value: hop,
            });
        }
        Ok(HopPath(hops))
    }

    /// Writes the entries (no count, no Length: the parameter's Length frames them).
    pub(crate) fn encode_entries(&self, buf: &mut Vec<u8>, v: Version) {
        for hop in &self.0 {
            buf.put_varint(*hop, v);
        }
    }
}

/// Whether the Hop IDs `hops` name `hop` (never [`UNKNOWN_HOP`], which names no hop:
/// draft-lcurley-moq-cluster-01 The Reserved Hop ID 0, "0 in a HOP_PATH is never a loop").
///
/// ```
/// use moq_core::message::cluster::holds;
/// assert!(holds(&[0, 7], 7));
/// assert!(!holds(&[0, 7], 0) && !holds(&[0, 7], 9));
/// ```
pub fn holds(hops: &[u64], hop: u64) -> bool {
    hop != UNKNOWN_HOP && hops.contains(&hop)
}

/// The first non-zero Hop ID that appears twice.
fn first_repeat(hops: &[u64]) -> Option<u64> {
    hops.iter().enumerate().find_map(|(i, h)| {
        (*h != UNKNOWN_HOP && hops.get(i + 1..).is_some_and(|rest| rest.contains(h))).then_some(*h)
    })
}
