//! Authorization: the hook an application supplies, and the per-session token alias cache
//! (draft-19 §10.2.2, §10.3.1.3).

use std::collections::HashMap;
use std::net::SocketAddr;

use async_trait::async_trait;
use bytes::Bytes;
use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::RequestError;
use moq_core::{AuthToken, TrackNamespace, Version};

use crate::error::Error;
use crate::transport::TransportKind;

/// A token with any alias resolved: what an [`Authorizer`] checks.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResolvedToken {
    /// The Token Type (0 = defined out of band).
    pub token_type: u64,
    /// The Token Value.
    pub value: Bytes,
}

impl ResolvedToken {
    fn new(token_type: u64, value: &Bytes) -> Self {
        ResolvedToken {
            token_type,
            value: value.clone(),
        }
    }
}

/// What kind of request is being authorized.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RequestKind {
    /// PUBLISH_NAMESPACE: the peer wants to publish under a namespace.
    PublishNamespace,
    /// SUBSCRIBE_NAMESPACE: the peer wants to discover namespaces under a prefix.
    SubscribeNamespace,
    /// SUBSCRIBE_TRACKS: the peer wants PUBLISHes for tracks under a prefix.
    SubscribeTracks,
    /// SUBSCRIBE.
    Subscribe,
    /// PUBLISH.
    Publish,
    /// FETCH.
    Fetch,
    /// TRACK_STATUS.
    TrackStatus,
}

/// A request to authorize.
#[derive(Clone, Debug)]
pub struct AuthRequest<'a> {
    /// The request type.
    pub kind: RequestKind,
    /// The namespace, or the prefix for SUBSCRIBE_NAMESPACE / SUBSCRIBE_TRACKS.
    pub namespace: &'a TrackNamespace,
    /// The track name, for track requests.
    pub track_name: Option<&'a [u8]>,
    /// The AUTHORIZATION_TOKEN parameters, aliases resolved.
    pub tokens: &'a [ResolvedToken],
}

/// Who the peer is, as far as the session knows.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// The negotiated version.
    pub version: Version,
    /// Raw QUIC or WebTransport.
    pub transport: TransportKind,
    /// The path the client asked for: the PATH option (raw QUIC) or the CONNECT URL's path and
    /// query (WebTransport).
    pub path: Option<String>,
    /// The authority the client asked for (AUTHORITY option or the CONNECT URL's host).
    pub authority: Option<String>,
    /// The peer's MOQT_IMPLEMENTATION.
    pub peer_implementation: Option<String>,
    /// Tokens from the peer's SETUP, resolved.
    pub setup_tokens: Vec<ResolvedToken>,
    /// The peer's address, when known.
    pub remote: Option<SocketAddr>,
    /// The peer's Hop ID when the session negotiated the MoQ Cluster extension
    /// (draft-lcurley-moq-cluster: both ends declared a HOP_ID in SETUP, draft-17 on); `None`
    /// otherwise. A session with one is a link between relays.
    pub cluster_peer: Option<u64>,
}

/// The application's authorization policy. Every method defaults to "allow".
///
/// ```
/// use async_trait::async_trait;
/// use moq_transport::{Authorizer, AuthRequest, RequestKind, SessionInfo};
/// use moq_core::{codes::RequestErrorCode, message::RequestError};
///
/// /// Only clients that present the token "let-me-in" may publish.
/// struct Policy;
///
/// #[async_trait]
/// impl Authorizer for Policy {
///     async fn authorize(&self, _s: &SessionInfo, req: &AuthRequest<'_>) -> Result<(), RequestError> {
///         if req.kind == RequestKind::PublishNamespace && !req.tokens.iter().any(|t| &t.value[..] == b"let-me-in") {
///             return Err(RequestError::new(RequestErrorCode::UNAUTHORIZED, "token required"));
///         }
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait Authorizer: Send + Sync + 'static {
    /// Decides whether a session may be established (server side, after SETUP). Rejecting
    /// closes the session with the returned code (e.g. UNAUTHORIZED, INVALID_PATH).
    async fn authorize_session(&self, _session: &SessionInfo) -> Result<(), SessionErrorCode> {
        Ok(())
    }

    /// Decides whether a request may proceed; an error is sent as REQUEST_ERROR.
    async fn authorize(
        &self,
        _session: &SessionInfo,
        _req: &AuthRequest<'_>,
    ) -> Result<(), RequestError> {
        Ok(())
    }

    /// Whether the peer may learn that `namespace` exists: a NAMESPACE answering its
    /// SUBSCRIBE_NAMESPACE, a PUBLISH offered for its SUBSCRIBE_TRACKS. `tokens` are the
    /// request's own. A namespace it may not see is left out, as if it did not exist.
    fn visible(
        &self,
        _session: &SessionInfo,
        _tokens: &[ResolvedToken],
        _namespace: &TrackNamespace,
    ) -> bool {
        true
    }

    /// When the session's authorization runs out (server side, asked once after
    /// [`authorize_session`](Self::authorize_session) admitted it): the session is closed
    /// then with EXPIRED_AUTH_TOKEN. `None`: never.
    fn session_expiry(&self, _session: &SessionInfo) -> Option<std::time::SystemTime> {
        None
    }
}

/// Allows everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct AllowAll;

#[async_trait]
impl Authorizer for AllowAll {}

/// Size of one cache entry: 16 bytes plus the value (draft-19 §10.3.1.3).
fn entry_size(value: &Bytes) -> u64 {
    16 + value.len() as u64
}

/// The aliases the peer registered with us, bounded by our MAX_AUTH_TOKEN_CACHE_SIZE; or, as
/// the mirror of the peer's cache, those we registered with it, bounded by its own.
#[derive(Clone, Debug, Default)]
pub(crate) struct TokenCache {
    max: u64,
    used: u64,
    aliases: HashMap<u64, ResolvedToken>,
}

impl TokenCache {
    pub(crate) fn new(max: u64) -> Self {
        TokenCache {
            max,
            used: 0,
            aliases: HashMap::new(),
        }
    }

    /// Resolves tokens from a SETUP: DELETE or USE_ALIAS there from a client is a
    /// PROTOCOL_VIOLATION; a REGISTER that does not fit is used as a plain value
    /// (draft-19 §10.2.2, §10.3.1.4).
    pub(crate) fn resolve_setup(
        &mut self,
        tokens: &[AuthToken],
        from_client: bool,
    ) -> Result<Vec<ResolvedToken>, Error> {
        let mut out = Vec::new();
        for t in tokens {
            match t {
                AuthToken::Delete { .. } | AuthToken::UseAlias { .. } if from_client => {
                    return Err(Error::protocol("DELETE or USE_ALIAS token in SETUP"));
                }
                AuthToken::Register {
                    token_type, value, ..
                } if self.used + entry_size(value) > self.max => {
                    out.push(ResolvedToken::new(*token_type, value));
                }
                t => out.extend(self.resolve_one(t)?),
            }
        }
        Ok(out)
    }

    /// Resolves the tokens of a request, registering and deleting aliases as asked. Session
    /// errors: DUPLICATE_AUTH_TOKEN_ALIAS, AUTH_TOKEN_CACHE_OVERFLOW, UNKNOWN_AUTH_TOKEN_ALIAS.
    pub(crate) fn resolve(&mut self, tokens: &[AuthToken]) -> Result<Vec<ResolvedToken>, Error> {
        let mut out = Vec::new();
        for t in tokens {
            out.extend(self.resolve_one(t)?);
        }
        Ok(out)
    }

    fn register(&mut self, alias: u64, token: ResolvedToken) -> Result<(), Error> {
        if self.aliases.contains_key(&alias) {
            // draft-19 §10.2.2: re-registering a live alias closes the session.
            return Err(Error::violation(
                SessionErrorCode::DUPLICATE_AUTH_TOKEN_ALIAS,
                format!("token alias {alias} registered twice"),
            ));
        }
        let size = entry_size(&token.value);
        if self.used + size > self.max {
            // draft-19 §10.2.2: a registration past MAX_AUTH_TOKEN_CACHE_SIZE closes the session.
            return Err(Error::violation(
                SessionErrorCode::AUTH_TOKEN_CACHE_OVERFLOW,
                "authorization token cache is full",
            ));
        }
        self.used += size;
        self.aliases.insert(alias, token);
        Ok(())
    }

    fn resolve_one(&mut self, t: &AuthToken) -> Result<Option<ResolvedToken>, Error> {
        Ok(match t {
            AuthToken::Delete { alias } => {
                if let Some(old) = self.aliases.remove(alias) {
                    self.used -= entry_size(&old.value);
                }
                None
            }
            AuthToken::Register {
                alias,
                token_type,
                value,
            } => {
                let r = ResolvedToken::new(*token_type, value);
                self.register(*alias, r.clone())?;
                Some(r)
            }
            AuthToken::UseAlias { alias } => {
                Some(self.aliases.get(alias).cloned().ok_or_else(|| {
                    // draft-19 §10.2.2: an alias that is not registered.
                    Error::violation(
                        SessionErrorCode::UNKNOWN_AUTH_TOKEN_ALIAS,
                        format!("token alias {alias} is not registered"),
                    )
                })?)
            }
            AuthToken::UseValue { token_type, value } => {
                Some(ResolvedToken::new(*token_type, value))
            }
        })
    }
}

/// The REQUEST_ERROR for a request an [`Authorizer`] refused without saying why.
pub(crate) fn unauthorized() -> RequestError {
    RequestError::new(RequestErrorCode::UNAUTHORIZED, "unauthorized")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_lifecycle() {
        let mut c = TokenCache::new(100);
        let reg = AuthToken::Register {
            alias: 1,
            token_type: 0,
            value: Bytes::from_static(b"abc"),
        };
        assert_eq!(c.resolve(std::slice::from_ref(&reg)).unwrap().len(), 1);
        assert_eq!(
            c.resolve(std::slice::from_ref(&reg))
                .unwrap_err()
                .session_code(),
            SessionErrorCode::DUPLICATE_AUTH_TOKEN_ALIAS
        );
        let used = c.resolve(&[AuthToken::UseAlias { alias: 1 }]).unwrap();
        assert_eq!(&used[0].value[..], b"abc");
        c.resolve(&[AuthToken::Delete { alias: 1 }]).unwrap();
        assert_eq!(
            c.resolve(&[AuthToken::UseAlias { alias: 1 }])
                .unwrap_err()
                .session_code(),
            SessionErrorCode::UNKNOWN_AUTH_TOKEN_ALIAS
        );
        let big = AuthToken::Register {
            alias: 2,
            token_type: 0,
            value: Bytes::from(vec![0u8; 90]),
        };
        assert_eq!(
            c.resolve(std::slice::from_ref(&big))
                .unwrap_err()
                .session_code(),
            SessionErrorCode::AUTH_TOKEN_CACHE_OVERFLOW
        );
        // In SETUP, an oversize REGISTER is used as a value instead.
        assert_eq!(c.resolve_setup(&[big], true).unwrap().len(), 1);
        assert!(
            c.resolve_setup(&[AuthToken::UseAlias { alias: 9 }], true)
                .is_err()
        );
    }
}
