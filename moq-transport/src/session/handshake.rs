//! Starting a session: the driver, then the SETUP exchange (draft-19 §3.3, §10.3).

use std::sync::Arc;

use super::auth::SessionInfo;
use super::core::{CONTROL_PRIORITY, Destination, Role, SessionCore};
use super::driver::{self, Dispatch};
use super::setup::{check_peer_setup, local_setup};
use crate::error::Error;
use crate::framing::Writer;

/// Starts the driver and runs SETUP. On failure the session is closed with the error.
///
/// A client sends `destination` as PATH and AUTHORITY on raw QUIC; a server passes what the
/// WebTransport CONNECT asked for (or nothing on raw QUIC, where PATH and AUTHORITY arrive in
/// SETUP).
pub(crate) async fn establish(
    core: &Arc<SessionCore>,
    dispatch: Arc<dyn Dispatch>,
    destination: Destination,
) -> Result<(), Error> {
    let res = tokio::select! {
        r = handshake(core, dispatch, destination) => r,
        e = core.closed() => Err(e),
    };
    match res {
        Ok(()) => {
            tracing::debug!(version = %core.version(), role = ?core.role(), kind = ?core.kind(), "session established");
            Ok(())
        }
        Err(e) => {
            core.close(e.clone());
            Err(core.error(e))
        }
    }
}

async fn handshake(
    core: &Arc<SessionCore>,
    dispatch: Arc<dyn Dispatch>,
    destination: Destination,
) -> Result<(), Error> {
    let setup = driver::start(core, dispatch);
    let version = core.version();
    let kind = core.kind();
    // draft-19 §3.3: each side opens its control stream with SETUP; it may be pipelined.
    let ours = local_setup(
        core.config(),
        core.role(),
        kind,
        version,
        destination.path.as_deref(),
        destination.authority.as_deref(),
    );
    let mut writer = Writer::new(core.conn().open_uni().await?, version);
    writer.set_priority(CONTROL_PRIORITY);
    writer.send(ours).await?;
    core.set_control(writer).await;

    let timeout = core.config().limits.setup_timeout;
    let (peer, control) = match tokio::time::timeout(timeout, setup).await {
        Ok(Ok(r)) => r?,
        Ok(Err(_)) => return Err(core.closed().await),
        Err(_) => return Err(Error::Timeout("waiting for the peer's SETUP")),
    };
    let (path, authority) = check_peer_setup(&peer, core.role(), kind)?;
    let setup_tokens = core.resolve_setup_tokens(&peer.authorization_tokens)?;
    let info = SessionInfo {
        version,
        transport: kind,
        path: path.or(destination.path),
        authority: authority.or(destination.authority),
        peer_implementation: peer.implementation.clone(),
        setup_tokens,
        remote: core.conn().remote_addr(),
    };
    if core.role() == Role::Server {
        core.config()
            .authorizer
            .authorize_session(&info)
            .await
            .map_err(|code| Error::violation(code, "session refused"))?;
    }
    tracing::debug!(peer = ?info.peer_implementation, path = ?info.path, "peer SETUP");
    core.established(info, peer);
    driver::read_control(core, control);
    Ok(())
}
