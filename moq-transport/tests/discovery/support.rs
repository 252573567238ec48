//! Helpers shared by the discovery tests: namespaces, a relay-like session configuration, the next
//! namespace event.

use async_trait::async_trait;
use moq_core::TrackNamespace;
use moq_core::codes::RequestErrorCode;
use moq_core::message::RequestError;
use moq_transport::namespace::{NamespaceEvent, NamespaceIndex, NamespaceSubscription};
use moq_transport::{AuthRequest, Authorizer, RequestKind, SessionConfig, SessionInfo};

pub(crate) fn ns(fields: &[&str]) -> TrackNamespace {
    TrackNamespace::from_strs(fields.iter().copied()).unwrap()
}

/// A server configured like a relay: what one client announces, every client can discover.
pub(crate) fn relay_config() -> SessionConfig {
    let shared = NamespaceIndex::new();
    SessionConfig::default()
        .with_namespaces(shared.clone())
        .with_announced(shared)
}

pub(crate) async fn next(sub: &mut NamespaceSubscription) -> NamespaceEvent {
    sub.next()
        .await
        .expect("subscription ended")
        .expect("subscription failed")
}

/// Refuses SUBSCRIBE_NAMESPACE under "secret" and PUBLISH_NAMESPACE without the token "ok".
pub(crate) struct Policy;

#[async_trait]
impl Authorizer for Policy {
    async fn authorize(&self, _s: &SessionInfo, req: &AuthRequest<'_>) -> Result<(), RequestError> {
        let secret = req.namespace.field(0).is_some_and(|f| f == b"secret");
        match req.kind {
            RequestKind::SubscribeNamespace if secret => Err(RequestError::new(
                RequestErrorCode::UNAUTHORIZED,
                "no secrets",
            )),
            RequestKind::PublishNamespace if !req.tokens.iter().any(|t| &t.value[..] == b"ok") => {
                Err(RequestError::new(
                    RequestErrorCode::UNAUTHORIZED,
                    "token required",
                ))
            }
            _ => Ok(()),
        }
    }
}
