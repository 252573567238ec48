//! The relay's side of the MoQ Cluster extension (draft-lcurley-moq-cluster; codec in
//! `moq_core::message::cluster`): this relay's Hop ID, and which sessions are relays.
//!
//! What the relay does with it today: links it dials to origin relays found through the
//! registry declare its Hop ID (HOP_ID in SETUP, from draft-17), and a relay does not route
//! through the registry what arrives from a session that declared one (one hop: a request
//! from another relay is served from here or refused, never sent on to a third relay).
//! On the flooded mesh, links where both ends declared a Hop ID carry each namespace's
//! HOP_PATH and ROUTE_COST (moq-transport's extended NAMESPACE), and a relay's request for a
//! namespace whose route runs through that relay is refused; links that did not negotiate
//! keep the mesh's own hop path (docs/relay.md, "Clustering").

use moq_transport::Session;

/// The largest Hop ID: a varint of 62 bits.
const MAX_HOP: u64 = (1 << 62) - 1;

/// This relay's Hop ID, derived from its id (`--relay-id`, else `--cluster-node`): the same
/// for the same id across restarts and relays, never 0 (which names no hop), below 2^62.
/// FNV-1a over the id's bytes; two ids colliding is a one-in-2^62 chance.
///
/// ```
/// use moq_relay::cluster_ext::hop_id;
/// assert_eq!(hop_id("relay-a"), hop_id("relay-a"));
/// assert_ne!(hop_id("relay-a"), hop_id("relay-b"));
/// assert!(hop_id("") > 0 && hop_id("relay-a") < 1 << 62);
/// ```
pub fn hop_id(relay_id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in relay_id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    match h & MAX_HOP {
        0 => 1,
        x => x,
    }
}

/// The Hop ID `session`'s peer declared in its SETUP, if it declared one (a relay speaking
/// the extension; 0 counts: it speaks it but names no hop).
pub fn peer_hop(session: &Session) -> Option<u64> {
    session.peer_setup().hop_id
}
