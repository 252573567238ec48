//! Session ready: how long a client waits from dialing until it can use the session, for a
//! raw quinn connection (the QUIC handshake) and for our sessions over raw QUIC and over
//! WebTransport (the handshake, WebTransport's CONNECT where used, and SETUP both ways).
//!
//! Every round dials each of the three once, one after the other, on loopback with the same
//! transport and TLS configuration; each figure is the median round.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use moq_core::Version;
use moq_transport::endpoint::{self, ClientConfig, ServerConfig};
use moq_transport::tls::{Certificate, ClientTls};

use crate::throughput::{RawEndpoints, loopback};

/// The result: median times to a usable connection or session.
#[derive(Clone, Debug)]
pub struct ReadyReport {
    /// Raw quinn: from `connect` to the client's established connection.
    pub raw: Duration,
    /// Ours over raw QUIC: from `connect` to the session after SETUP both ways.
    pub quic: Duration,
    /// Ours over WebTransport.
    pub webtransport: Duration,
    /// Rounds; each figure is the median.
    pub rounds: usize,
    /// The draft our sessions spoke.
    pub version: Version,
}

impl ReadyReport {
    /// The figures as text.
    pub fn render(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let ratio = |d: Duration| ms(d) / ms(self.raw).max(f64::MIN_POSITIVE);
        format!(
            "session ready ({}, median of {} rounds): raw quinn handshake {:.2} ms; ours over raw \
             QUIC {:.2} ms ({:.2}x), over WebTransport {:.2} ms ({:.2}x)\n",
            self.version,
            self.rounds,
            ms(self.raw),
            ms(self.quic),
            ratio(self.quic),
            ms(self.webtransport),
            ratio(self.webtransport),
        )
    }
}

/// Dials `rounds` times each: raw quinn, ours over raw QUIC, ours over WebTransport.
pub async fn run(rounds: usize, version: Version) -> Result<ReadyReport> {
    let raw = RawEndpoints::new(false)?;
    let cert = Certificate::generate(&["localhost".to_string()])?;
    let fingerprint = cert.fingerprint();
    let mut config = ServerConfig::new(loopback(), cert);
    config.versions = vec![version];
    let server = endpoint::Server::bind(config)?;
    let port = server.local_addr()?.port();
    // The server side takes each session and holds it until the client closes it.
    let accepting = tokio::spawn(async move {
        while let Some(session) = server.accept().await {
            tokio::spawn(async move {
                let _ = session.closed().await;
            });
        }
    });
    let client = endpoint::Client::new(ClientConfig {
        tls: ClientTls::pinned(fingerprint),
        versions: vec![version],
        ..Default::default()
    })?;
    let (mut raws, mut quics, mut wts) = (Vec::new(), Vec::new(), Vec::new());
    // Raw quinn's server side likewise: what the client waits for is its own handshake.
    let raw_server = raw.server.clone();
    let raw_accepting = tokio::spawn(async move {
        while let Some(incoming) = raw_server.accept().await {
            tokio::spawn(async move {
                if let Ok(c) = incoming.await {
                    let _ = c.closed().await;
                }
            });
        }
    });
    let raw_addr = raw.server.local_addr()?;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        let c = raw
            .client
            .connect(raw_addr, "localhost")?
            .await
            .context("raw quinn handshake")?;
        raws.push(t.elapsed());
        c.close(0u32.into(), b"done");
        for (scheme, out) in [("moqt", &mut quics), ("https", &mut wts)] {
            let t = Instant::now();
            let session = client
                .connect(&format!("{scheme}://127.0.0.1:{port}/"))
                .await
                .with_context(|| format!("{scheme} session"))?;
            out.push(t.elapsed());
            session.close(moq_core::codes::SessionErrorCode::NO_ERROR, "done");
        }
    }
    accepting.abort();
    raw_accepting.abort();
    Ok(ReadyReport {
        raw: median(raws),
        quic: median(quics),
        webtransport: median(wts),
        rounds: rounds.max(1),
        version,
    })
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}
