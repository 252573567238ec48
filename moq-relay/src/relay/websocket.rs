//! Sessions over QMux over WebSocket: the HTTP side answers the upgrade, the relay runs the
//! session like one it accepted over QUIC (same configuration: authorization, limits,
//! metrics, routing).

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use moq_transport::Destination;
use moq_transport::endpoint::websocket::Upgrade;
use tokio::io::{AsyncRead, AsyncWrite};

use super::Relay;
use super::state::owner_id;

/// How long an upgraded connection has to finish QMux and SETUP (SETUP's own timeout is the
/// session's; this bounds a peer that never starts).
const HANDSHAKE: Duration = Duration::from_secs(10);

impl Relay {
    /// The MOQT versions the relay accepts, most preferred first.
    pub fn versions(&self) -> &[moq_core::Version] {
        &self.inner.config.versions
    }

    /// Serves a session on a WebSocket upgrade the HTTP side answered (101) for `upgrade`:
    /// once `upgraded` yields the connection, QMux and SETUP run on it and the session is
    /// served like one accepted over QUIC, as one of the relay's tasks. `destination` is the
    /// request's path and authority. Nothing is served while the relay drains
    /// ([`Relay::is_accepting`]): the HTTP side refuses the upgrade then.
    pub fn accept_websocket<U, IO, E>(
        &self,
        upgraded: U,
        upgrade: Upgrade,
        remote: Option<SocketAddr>,
        destination: Destination,
    ) where
        U: Future<Output = Result<IO, E>> + Send + 'static,
        IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
        E: std::fmt::Display,
    {
        let inner = self.inner.clone();
        self.inner.tasks.spawn(async move {
            let io = match upgraded.await {
                Ok(io) => io,
                Err(e) => {
                    tracing::debug!(?remote, error = %e, "WebSocket upgrade failed");
                    return;
                }
            };
            // Like the QUIC server's sessions: each registers its peer's announcements in
            // an index of its own.
            let config = inner
                .session_config
                .clone()
                .with_announced(inner.index.owned_by(owner_id(&inner.next_id)));
            let settings = inner.config.quic;
            let accept = upgrade.accept(io, remote, &settings, config, destination);
            let session = match tokio::time::timeout(HANDSHAKE, accept).await {
                Ok(Ok(session)) => session,
                Ok(Err(e)) => {
                    tracing::debug!(?remote, error = %e, "WebSocket session handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(?remote, "WebSocket session handshake timed out");
                    return;
                }
            };
            inner.serve_accepted(session)
        });
    }
}
