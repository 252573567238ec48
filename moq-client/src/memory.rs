//! Sessions connected in memory, for testing an application without sockets, certificates or
//! a relay (feature `memory`).
//!
//! Both ends are ordinary [`Session`]s over moq-transport's in-memory transport, which behaves
//! like QUIC as the session sees it (stream credit, flow control, resets, close codes), so
//! what works here works over the network. The crate documentation's *Testing an
//! application* shows a whole test.

use std::sync::Arc;

use moq_core::Version;
use moq_transport::transport::TransportKind;
use moq_transport::transport::memory;
use moq_transport::{Destination, Role, SessionConfig};

use crate::client::Session;
use crate::error::Error;
use crate::publisher::Publisher;

/// A client session and the server session it is connected to, in memory, speaking the
/// preferred draft; each serves its publisher.
///
/// Cancel safe: dropping the future before it resolves abandons both sessions.
pub async fn pair(client: Publisher, server: Publisher) -> Result<(Session, Session), Error> {
    pair_with(client, server, Version::PREFERRED).await
}

/// [`pair`] speaking `version`.
///
/// Cancel safe: dropping the future before it resolves abandons both sessions.
pub async fn pair_with(
    client: Publisher,
    server: Publisher,
    version: Version,
) -> Result<(Session, Session), Error> {
    let (c, s) = memory::pair(version.alpn(), TransportKind::RawQuic);
    // Each end's publisher answers the peer's requests.
    let config = || SessionConfig::default().with_requests();
    let destination = Destination {
        path: Some("/".into()),
        authority: Some("memory".into()),
    };
    let (c, s) = tokio::join!(
        moq_transport::Session::establish(Arc::new(c), Role::Client, config(), destination),
        moq_transport::Session::establish(
            Arc::new(s),
            Role::Server,
            config(),
            Destination::default()
        ),
    );
    Ok((Session::attach(c?, client), Session::attach(s?, server)))
}
