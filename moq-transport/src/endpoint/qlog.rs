//! Per-connection qlog traces of a server's connections (the `qlog` feature).

use std::net::SocketAddr;
use std::sync::Arc;

use super::settings::QuicSettings;
#[cfg(feature = "qlog")]
use super::settings::transport_config_with;
use crate::error::Error;

/// Per-connection qlog traces: each accepted connection gets the server's configuration with a
/// trace file of its own.
#[cfg(feature = "qlog")]
pub(super) struct Qlog {
    dir: std::path::PathBuf,
    server: quinn::ServerConfig,
    quic: QuicSettings,
}

#[cfg(feature = "qlog")]
impl Qlog {
    pub(super) fn new(
        dir: &std::path::Path,
        server: &quinn::ServerConfig,
        quic: QuicSettings,
    ) -> Result<Qlog, Error> {
        std::fs::create_dir_all(dir)
            .map_err(|e| Error::Invalid(format!("qlog dir {}: {e}", dir.display())))?;
        Ok(Qlog {
            dir: dir.to_path_buf(),
            server: server.clone(),
            quic,
        })
    }

    /// The server configuration for one connection from `remote`, tracing into a new file;
    /// `None` (trace nothing) if the file cannot be created.
    pub(super) fn for_connection(&self, remote: SocketAddr) -> Option<Arc<quinn::ServerConfig>> {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let name = format!("{millis}-{remote}.sqlog").replace([':', '[', ']'], "_");
        let path = self.dir.join(name);
        let file = match std::fs::File::create(&path) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "no qlog for this connection");
                return None;
            }
        };
        let mut qlog = quinn::QlogConfig::default();
        qlog.writer(Box::new(std::io::LineWriter::new(file)))
            .title(Some(format!("moq-transport server, peer {remote}")));
        let mut transport = transport_config_with(&self.quic);
        transport.qlog_stream(qlog.into_stream());
        let mut server = self.server.clone();
        server.transport_config(Arc::new(transport));
        Some(Arc::new(server))
    }
}

/// Without the `qlog` feature a trace directory is refused at bind.
#[cfg(not(feature = "qlog"))]
pub(super) struct Qlog;

#[cfg(not(feature = "qlog"))]
impl Qlog {
    pub(super) fn new(
        _dir: &std::path::Path,
        _server: &quinn::ServerConfig,
        _quic: QuicSettings,
    ) -> Result<Qlog, Error> {
        Err(Error::Invalid(
            "qlog_dir needs moq-transport's `qlog` feature".into(),
        ))
    }

    pub(super) fn for_connection(&self, _remote: SocketAddr) -> Option<Arc<quinn::ServerConfig>> {
        None
    }
}
