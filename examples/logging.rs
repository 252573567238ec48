//! Logging for applications that use the library: moq-client and moq-relay report through
//! [`tracing`](https://docs.rs/tracing) and print nothing until the application installs a
//! subscriber. This one installs `tracing-subscriber`'s formatter filtered by `RUST_LOG`
//! (default here: `info` for the MOQT crates, `warn` for the rest), starts an embedded relay
//! and connects to it, so the relay's and the session's log lines show on stderr.
//! Self-contained: copy it into a new crate (dependencies: moq-client, moq-relay, tokio,
//! anyhow, tracing-subscriber with the `env-filter` feature).
//!
//! ```text
//! cargo run --example logging
//! RUST_LOG=moq_transport=debug cargo run --example logging
//! ```

use moq_client::Client;
use moq_relay::{Relay, RelayConfig};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The crates log under their own names: moq_core, moq_transport, moq_client, moq_relay.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new("warn,moq_transport=info,moq_client=info,moq_relay=info")
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();

    let relay = Relay::bind(RelayConfig::development("127.0.0.1:0".parse()?)?)?;
    relay.spawn();
    let url = format!("moqt://localhost:{}", relay.local_addr().port());
    let client = Client::builder()
        .fingerprint(&relay.fingerprint())?
        .build()?;
    let session = client.connect(&url).await?;
    tracing::info!(version = ?session.version(), "connected to the embedded relay");
    session
        .close_gracefully(std::time::Duration::from_secs(1))
        .await?;
    Ok(())
}
