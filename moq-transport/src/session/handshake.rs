//! Starting a session: the driver, then the SETUP exchange (draft-19 §3.3, §10.3).

use std::sync::Arc;

use super::auth::SessionInfo;
use super::core::{CONTROL_PRIORITY, Destination, Role, SessionCore};
use moq_core::codes::SessionErrorCode;
use moq_core::message::{ClientSetup, Message, ServerSetup, SetupOptions};

use super::driver::{self, Dispatch, SetupReceiver};
use super::setup::{check_peer_setup, local_setup};
use crate::error::Error;
use crate::framing::{Reader, Writer};
use crate::mux::Mux;

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
    let setup = driver::start(core, dispatch.clone());
    let version = core.version();
    let kind = core.kind();
    let ours = local_setup(
        core.config(),
        core.role(),
        kind,
        version,
        destination.path.as_deref(),
        destination.authority.as_deref(),
    );
    let timeout = core.config().limits.setup_timeout;
    let (peer, control) = if version.single_control_stream() {
        single_setup(core, ours.options, setup).await?
    } else {
        // draft-19 §3.3: each side opens its control stream with SETUP; it may be pipelined.
        let mut writer = Writer::new(core.conn().open_uni().await?, version);
        writer.set_priority(CONTROL_PRIORITY);
        writer.send(ours).await?;
        core.set_control(writer).await;
        let peer = match tokio::time::timeout(timeout, setup).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => return Err(core.closed().await),
            Err(_) => return Err(Error::Timeout("waiting for the peer's SETUP")),
        };
        (peer.options, peer.reader)
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
        cluster_peer: super::core::cluster_link(core.config(), version, &peer).map(|c| c.peer),
    };
    if core.role() == Role::Server {
        core.config()
            .authorizer
            .authorize_session(&info)
            .await
            .map_err(|code| Error::violation(code, "session refused"))?;
        if let Some(at) = core.config().authorizer.session_expiry(&info) {
            expire_at(core, at);
        }
    }
    tracing::debug!(peer = ?info.peer_implementation, path = ?info.path, "peer SETUP");
    core.established(info, peer);
    if version.single_control_stream() {
        driver::read_single_control(core, dispatch, control);
    } else {
        driver::read_control(core, control);
    }
    Ok(())
}

/// Drafts 14-16: the client opens the one bidirectional control stream with CLIENT_SETUP and
/// the server answers SERVER_SETUP on it (draft-14 §3.3, §9.3); both grant MAX_REQUEST_ID
/// there. Draft-14 negotiates its version in those messages (§9.3.1).
async fn single_setup(
    core: &Arc<SessionCore>,
    options: SetupOptions,
    setup: SetupReceiver,
) -> Result<(SetupOptions, Reader), Error> {
    let version = core.version();
    let parity = core.role().request_id_parity();
    let window = core.config().limits.max_peer_requests;
    let grant = Some(Mux::initial_grant(window, parity));
    let number = version.setup_number();
    let timeout = core.config().limits.setup_timeout;
    let spawn = |f| core.spawn(f);
    if core.role() == Role::Client {
        let (mut send, recv) = core.conn().open_bi().await?;
        send.set_priority(CONTROL_PRIORITY);
        let mux = Mux::new(version, send, parity, 0, window, spawn);
        let versions = if version.setup_has_versions() {
            vec![number]
        } else {
            Vec::new()
        };
        mux.send(
            ClientSetup {
                versions,
                max_request_id: grant,
                options,
            }
            .into(),
        )?;
        let mut reader = Reader::new(recv, version);
        let first = match tokio::time::timeout(timeout, reader.next()).await {
            Ok(r) => r?,
            Err(_) => return Err(Error::Timeout("waiting for SERVER_SETUP")),
        };
        let server = match first {
            Some(Message::ServerSetup(s)) => s,
            Some(m) => {
                return Err(Error::protocol(format!(
                    "control stream starts with {}",
                    m.name()
                )));
            }
            None => return Err(Error::protocol("control stream closed before SERVER_SETUP")),
        };
        // draft-14 §9.3.1: the server selects one of the versions offered.
        if version.setup_has_versions() && server.version != Some(number) {
            return Err(Error::violation(
                SessionErrorCode::VERSION_NEGOTIATION_FAILED,
                format!("SERVER_SETUP selected {:?}", server.version),
            ));
        }
        mux.on_max_request_id(server.max_request_id.unwrap_or(0))?;
        core.set_mux(mux);
        return Ok((server.options, reader));
    }
    let peer = match tokio::time::timeout(timeout, setup).await {
        Ok(Ok(r)) => r?,
        Ok(Err(_)) => return Err(core.closed().await),
        Err(_) => return Err(Error::Timeout("waiting for CLIENT_SETUP")),
    };
    let Some((mut send, versions, peer_max_request_id)) = peer.single else {
        return Err(Error::protocol("no CLIENT_SETUP"));
    };
    // draft-14 §9.3.1: no version in common is VERSION_NEGOTIATION_FAILED.
    if version.setup_has_versions() && !versions.contains(&number) {
        return Err(Error::violation(
            SessionErrorCode::VERSION_NEGOTIATION_FAILED,
            format!("CLIENT_SETUP offers {versions:x?}, not {number:#x}"),
        ));
    }
    send.set_priority(CONTROL_PRIORITY);
    let peer_max = peer_max_request_id.unwrap_or(0);
    let mux = Mux::new(version, send, parity, peer_max, window, spawn);
    let selected = version.setup_has_versions().then_some(number);
    mux.send(
        ServerSetup {
            version: selected,
            max_request_id: grant,
            options,
        }
        .into(),
    )?;
    core.set_mux(mux);
    Ok((peer.options, peer.reader))
}

/// Closes the session with EXPIRED_AUTH_TOKEN at `at` (draft-19 §3.5, §10.2.2: the session's
/// authorization token has expired).
fn expire_at(core: &Arc<SessionCore>, at: std::time::SystemTime) {
    let wait = at
        .duration_since(std::time::SystemTime::now())
        .unwrap_or_default();
    let weak = Arc::downgrade(core);
    core.spawn(async move {
        tokio::time::sleep(wait).await;
        if let Some(core) = weak.upgrade() {
            core.close(Error::violation(
                SessionErrorCode::EXPIRED_AUTH_TOKEN,
                "the session's authorization token expired",
            ));
        }
    });
}
