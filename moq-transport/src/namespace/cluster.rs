//! The MoQ Cluster extension (draft-lcurley-moq-cluster) on namespace advertisements: what
//! ours carry, and what a received one says, checked against the session's negotiation.

use moq_core::message::cluster::{ClusterParams, HopPath};

use crate::index::NamespaceRoute;
use crate::session::ClusterLink;

/// What an advertisement we send carries under the MoQ Cluster extension: HOP_PATH is the
/// route's hops with `ours` appended (draft-lcurley-moq-cluster-01 Relay Behavior: a relay appends
/// its own Hop ID when it forwards; a namespace of its own publisher has it alone), ROUTE_COST the
/// route's cost (absent for 0, which is what absent means).
pub(crate) fn cluster_params(route: &NamespaceRoute, ours: u64) -> Option<Box<ClusterParams>> {
    let mut hops = route.hops.clone();
    hops.push(ours);
    let path = HopPath::new(hops).or_else(|| HopPath::new(vec![ours]))?;
    Some(Box::new(ClusterParams {
        hop_path: Some(path),
        route_cost: (route.cost > 0).then_some(route.cost),
    }))
}

/// Whether an advertisement of `route` is kept from the peer of `link`
/// (draft-lcurley-moq-cluster-01 Path Selection: a publisher MUST NOT advertise a path whose
/// HOP_PATH contains the Hop ID that peer declared; a peer that declared 0 excludes nothing).
pub(crate) fn withheld(route: &NamespaceRoute, link: ClusterLink) -> bool {
    route.runs_through(link.peer)
}

/// Why a received advertisement is not taken.
#[derive(Debug)]
pub(crate) enum Received {
    /// A PROTOCOL_VIOLATION: the session closes.
    Violation(&'static str),
    /// Its HOP_PATH holds our own Hop ID: dropped.
    Looped,
}

/// The route a received PUBLISH_NAMESPACE or NAMESPACE advertises, checked against the
/// session's negotiation of the MoQ Cluster extension: `None` on a session that did not
/// negotiate it.
pub(crate) fn received_route(
    link: Option<ClusterLink>,
    cluster: Option<&ClusterParams>,
) -> Result<Option<NamespaceRoute>, Received> {
    let path = cluster.and_then(|c| c.hop_path.as_ref());
    match (link, path) {
        (None, None) if cluster.is_none() => Ok(None),
        // draft-lcurley-moq-cluster-01 Namespace Advertisements: an endpoint MUST NOT send the
        // extension's parameters on a session that did not negotiate it.
        (None, _) => Err(Received::Violation(
            "MoQ Cluster parameters on a session that did not negotiate the extension",
        )),
        // draft-lcurley-moq-cluster-01 Setup Negotiation: on a session that negotiated it, every
        // advertisement MUST carry HOP_PATH.
        (Some(_), None) => Err(Received::Violation(
            "an advertisement without HOP_PATH on a session that negotiated the MoQ Cluster extension",
        )),
        // draft-lcurley-moq-cluster-01 Relay Behavior: a receiver drops an advertisement whose
        // HOP_PATH holds its own Hop ID (it looped back).
        (Some(link), Some(path)) if path.contains(link.ours) => Err(Received::Looped),
        (Some(link), Some(path)) => Ok(Some(NamespaceRoute {
            hops: path.hops().to_vec(),
            // The advertised cost plus what pulling over this link costs.
            cost: cluster
                .and_then(|c| c.route_cost)
                .unwrap_or(0)
                .saturating_add(link.link_cost),
        })),
    }
}
