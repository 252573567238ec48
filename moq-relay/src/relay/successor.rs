//! Whom a draining relay names in GOAWAY (draft-19 §10.4, the New Session URI): a configured
//! successor, else the relay a route registry chooses (`registry::choose_successor`), else the
//! first cluster peer, else none (the same URI).
//!
//! A relay chosen from the registry is named by the address it advertises, in the scheme of
//! each session's own transport: `moqt://` for raw QUIC, `https://` for WebTransport, with the
//! same authority, path and query. Our relays serve both on one UDP port, so one advertised
//! address stands for both.

use std::sync::Arc;
use std::time::Duration;

use moq_transport::transport::TransportKind;

use crate::registry::{DRAINING_LOAD, Registry, RelayInfo, RelayRef, choose_successor};

/// The New Session URI of the relay's GOAWAY.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum NewUri {
    /// The same URI for every session (a configured successor or cluster peer, or empty: the
    /// same URI as now).
    Exact(String),
    /// A relay's advertised address, given to each session in its transport's scheme.
    Relay(String),
}

impl NewUri {
    /// The URI a session over `transport` is sent.
    pub(super) fn for_transport(&self, transport: TransportKind) -> String {
        match self {
            NewUri::Exact(uri) => uri.clone(),
            NewUri::Relay(address) => in_scheme(address, transport),
        }
    }
}

/// `address` with the scheme of `transport`. draft-19 §3.1.1: "A moqt URI can be converted to
/// an https URI by replacing the scheme", so the rest is kept. draft-19 §10.4: "The new
/// session URI SHOULD use the same scheme as the current URI". An address of any other scheme
/// is left as it is.
pub(super) fn in_scheme(address: &str, transport: TransportKind) -> String {
    let rest = address
        .strip_prefix("moqt://")
        .or_else(|| address.strip_prefix("https://"));
    match (rest, transport) {
        (Some(rest), TransportKind::RawQuic) => format!("moqt://{rest}"),
        (Some(rest), TransportKind::WebTransport) => format!("https://{rest}"),
        // The secure WebSocket at the same authority and path, as browsers turn https:// into
        // wss:// (the relay's HTTP side on the QUIC port's number, behind TLS).
        (Some(rest), TransportKind::WebSocket) => format!("wss://{rest}"),
        (None, _) => address.to_string(),
    }
}

/// Where a draining relay finds its successor: a registry, this relay as it heartbeats there,
/// and its region tag.
pub(super) struct SuccessorSource {
    pub(super) registry: Arc<dyn Registry>,
    pub(super) me: RelayRef,
    pub(super) region: String,
}

impl std::fmt::Debug for SuccessorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SuccessorSource")
            .field("me", &self.me)
            .field("region", &self.region)
            .finish_non_exhaustive()
    }
}

impl SuccessorSource {
    /// Marks this relay as draining in the registry (so no other draining relay chooses it)
    /// and returns the address of the relay [`choose_successor`] picks among the live ones;
    /// `None` when the store does not answer within `limit` (or the registry's own timeout,
    /// whichever is first) or lists no other live relay. Cancel-safe.
    pub(super) async fn choose(&self, limit: Duration) -> Option<String> {
        let draining = RelayInfo {
            relay: self.me.clone(),
            region: self.region.clone(),
            load: DRAINING_LOAD,
        };
        let both =
            async { futures::join!(self.registry.heartbeat(&draining), self.registry.relays()) };
        let relays = match tokio::time::timeout(limit, both).await {
            Ok((_, Ok(relays))) => relays,
            Ok((_, Err(e))) => {
                tracing::warn!(error = %e, "registry: no successor chosen");
                return None;
            }
            Err(_) => {
                tracing::warn!(?limit, "registry: no successor chosen in time");
                return None;
            }
        };
        let chosen = choose_successor(&relays, &self.me.id, &self.region)?;
        tracing::info!(relay = %chosen.relay.id, region = %chosen.region, load = chosen.load, "GOAWAY successor chosen from the registry");
        Some(chosen.relay.address.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_takes_each_sessions_scheme() {
        use TransportKind::{RawQuic, WebSocket, WebTransport};
        for address in ["moqt://b.test:4443/x?y=1", "https://b.test:4443/x?y=1"] {
            assert_eq!(in_scheme(address, RawQuic), "moqt://b.test:4443/x?y=1");
            assert_eq!(
                in_scheme(address, WebTransport),
                "https://b.test:4443/x?y=1"
            );
        }
        assert_eq!(
            in_scheme("moqt://b.test:4443/x", WebSocket),
            "wss://b.test:4443/x"
        );
        assert_eq!(in_scheme("other://b", WebTransport), "other://b");
        let exact = NewUri::Exact("moqt://c.test".into());
        assert_eq!(exact.for_transport(WebTransport), "moqt://c.test");
        let relay = NewUri::Relay("moqt://c.test:1".into());
        assert_eq!(relay.for_transport(WebTransport), "https://c.test:1");
    }
}
