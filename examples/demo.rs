//! The main demo: one process runs a server on loopback that indexes namespaces like a relay,
//! two publishers announce namespaces under one prefix, and a subscriber discovers them with
//! SUBSCRIBE_NAMESPACE, watching them come and go. Exits 0 when everything was seen.
//!
//! ```text
//! cargo run --example demo
//! ```

use std::time::Duration;

use anyhow::{Context, bail};
use moq_core::TrackNamespace;
use moq_transport::SessionConfig;
use moq_transport::endpoint::{Client, ClientConfig, Server, ServerConfig};
use moq_transport::namespace::{NamespaceEvent, NamespaceIndex};
use moq_transport::tls::{Certificate, ClientTls};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    tokio::time::timeout(Duration::from_secs(30), run())
        .await
        .context("demo timed out")?
}

async fn run() -> anyhow::Result<()> {
    // A server with one namespace index shared by every session: what one client announces,
    // any client can discover.
    let cert = Certificate::generate(&["localhost".into()])?;
    let shared = NamespaceIndex::new();
    let mut config = ServerConfig::new("127.0.0.1:0".parse()?, cert.clone());
    config.session = SessionConfig::default()
        .with_namespaces(shared.clone())
        .with_announced(shared);
    let mut server = Server::bind(config)?;
    let addr = server.local_addr()?;
    println!(
        "server listening on {addr} (certificate sha-256 {})",
        cert.fingerprint_hex()
    );
    tokio::spawn(async move {
        let mut sessions = Vec::new();
        while let Some(session) = server.accept().await {
            sessions.push(session);
        }
    });

    let client = Client::new(ClientConfig {
        tls: ClientTls::pinned(cert.fingerprint()),
        ..Default::default()
    })?;
    let quic = format!("moqt://localhost:{}/demo", addr.port());
    let webtransport = format!("https://localhost:{}/demo", addr.port());

    // The subscriber discovers everything under (demo, rooms).
    let prefix = TrackNamespace::from_strs(["demo", "rooms"])?;
    let subscriber = client.connect(&quic).await?;
    println!(
        "subscriber connected over raw QUIC ({})",
        subscriber.version()
    );
    let mut discovery = subscriber.subscribe_namespace(prefix.clone()).await?;

    // Two publishers, one over raw QUIC and one over WebTransport.
    let alice = client.connect(&quic).await?;
    let bob = client.connect(&webtransport).await?;
    println!("publishers connected over raw QUIC and WebTransport");
    let alice_room = alice.publish_namespace(prefix.child("alice")?).await?;
    let bob_room = bob.publish_namespace(prefix.child("bob")?).await?;

    let mut seen = Vec::new();
    while seen.len() < 2 {
        match discovery.next().await {
            Some(Ok(NamespaceEvent::Added(ns))) => {
                println!("discovered namespace {ns}");
                seen.push(ns);
            }
            Some(Ok(ev)) => bail!("unexpected {ev:?}"),
            Some(Err(e)) => return Err(e.into()),
            None => bail!("discovery ended early"),
        }
    }

    // Alice leaves: the subscriber sees NAMESPACE_DONE.
    drop(alice_room);
    match discovery.next().await {
        Some(Ok(NamespaceEvent::Removed(ns))) => println!("namespace gone: {ns}"),
        other => bail!("expected a removal, got {other:?}"),
    }
    drop(bob_room);
    match discovery.next().await {
        Some(Ok(NamespaceEvent::Removed(ns))) => println!("namespace gone: {ns}"),
        other => bail!("expected a removal, got {other:?}"),
    }
    println!("demo complete");
    Ok(())
}
