//! An embedded relay that checks tokens: a relay inside the application, verifying JWTs
//! (the claims moq-dev's tools mint: a `root` namespace and the paths under it one may
//! publish or subscribe to). A publisher with a token for `example/auth/alice` announces its
//! namespace; one without a token is refused; a viewer with a subscribe-only token reads the
//! track. Self-contained: copy it into a new crate (dependencies: moq-client, moq-relay,
//! tokio, anyhow).
//!
//! ```text
//! cargo run --example auth
//! ```

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use moq_client::{Client, FullTrackName, RequestErrorCode, SubscribeOptions, TrackNamespace};
use moq_relay::auth::{Algorithm, Claims, Jwk, KeySet, TokenAuth};
use moq_relay::{Relay, RelayConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The signing key stays with whoever mints tokens; the relay only needs its public half.
    // (In production: load a JWK set with `KeySet`, or run the binary with `--auth-key`.)
    let key = Jwk::generate(Algorithm::ES256, Some("key-1".into()))?;
    let mut keys = KeySet::new();
    keys.add_jwk(&key.public().context("an ES256 key has a public half")?)?;
    let mut config = RelayConfig::development("127.0.0.1:0".parse()?)?;
    // No public prefixes: every request needs a token.
    config.authorizer = Arc::new(TokenAuth::new(keys, &[])?);
    let relay = Relay::bind(config)?;
    relay.spawn();
    let url = format!("moqt://localhost:{}", relay.local_addr().port());

    // Tokens: paths are relative to `root`; `**` is anything beneath.
    let alice = key.sign(&Claims::new(
        "example/auth",
        vec!["alice/**".into()],
        vec![],
    ))?;
    let viewer = key.sign(&Claims::new("example/auth", vec![], vec!["**".into()]))?;
    let client = |token: Option<&str>| {
        let builder = Client::builder().fingerprint(&relay.fingerprint());
        match token {
            Some(t) => builder.map(|b| b.token(t.to_string())),
            None => builder,
        }
        .and_then(|b| b.build())
    };

    // Without a token the announcement is refused (UNAUTHORIZED).
    let anonymous = client(None)?.connect(&url).await?;
    let ns = TrackNamespace::from_strs(["example", "auth", "alice"])?;
    let refused = anonymous.publisher().publish_namespace(ns.clone())?;
    match refused.announced().await {
        Err(e) if e.rejection() == Some(RequestErrorCode::UNAUTHORIZED) => {
            println!("anonymous publisher refused: {e}")
        }
        other => bail!("expected UNAUTHORIZED, got {other:?}"),
    }

    // With alice's token it is accepted.
    let publisher = client(Some(&alice))?.connect(&url).await?;
    let announced = publisher.publisher().publish_namespace(ns.clone())?;
    announced.announced().await?;
    let name = FullTrackName::new(ns, "chat")?;
    let track = publisher.publisher().create_track(name.clone())?;
    println!("alice announced {}", announced.namespace());

    // The viewer may subscribe (but not publish).
    let viewer = client(Some(&viewer))?.connect(&url).await?;
    let mut chat = viewer
        .subscriber()
        .subscribe(name, SubscribeOptions::default())
        .await?;
    let mut group = track.append_group()?;
    group.write("hello, authorized world")?;
    group.finish()?;
    let mut group = tokio::time::timeout(Duration::from_secs(5), chat.next_group())
        .await
        .context("no group")?
        .context("track ended")??;
    let object = group.next_object().await.context("empty group")??;
    println!("viewer read: {}", String::from_utf8_lossy(&object.payload));
    Ok(())
}
