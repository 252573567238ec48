//! Token authorization: JWTs as moq-dev's tools mint them, verified with `jsonwebtoken`.
//!
//! A token grants `publish` and `subscribe` path patterns beneath a `root` (see [`Claims`]).
//! A namespace is a path whose segments are its fields. What a request needs:
//!
//! | request | needs |
//! |---|---|
//! | PUBLISH_NAMESPACE, PUBLISH | publish on the namespace |
//! | SUBSCRIBE, FETCH, TRACK_STATUS | subscribe on the namespace |
//! | SUBSCRIBE_NAMESPACE, SUBSCRIBE_TRACKS | subscribe on something at or beneath the prefix; each NAMESPACE is sent only for a namespace the subscriber may subscribe to |
//!
//! Where the token comes from, the narrowest source present decides: the request's own
//! AUTHORIZATION_TOKEN parameters (aliases resolved), else SETUP's, else the `jwt` query
//! parameter of the URL (`https://relay/?jwt=...`, `moqt://relay/?jwt=...`). With no token,
//! only the public prefixes are open. A token the session starts with must verify; the session
//! is closed with EXPIRED_AUTH_TOKEN when it expires.
//!
//! ```
//! use moq_relay::auth::{Claims, Jwk, KeySet, TokenAuth};
//!
//! let key = Jwk::generate(jsonwebtoken::Algorithm::HS256, Some("k1".into())).unwrap();
//! let token = key
//!     .sign(&Claims::new("room", vec!["a/**".into()], vec!["**".into()]))
//!     .unwrap();
//! let mut keys = KeySet::new();
//! keys.add_jwk(&key).unwrap();
//! let auth = TokenAuth::new(keys, &[]).unwrap();
//! let grant = auth.verify(token.as_bytes()).unwrap();
//! assert!(grant.may_publish(&[b"room".as_slice(), b"a"]));
//! assert!(!grant.may_publish(&[b"room".as_slice(), b"b"]));
//! ```

mod claims;
mod keys;
mod pattern;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use moq_core::TrackNamespace;
use moq_core::codes::{RequestErrorCode, SessionErrorCode};
use moq_core::message::RequestError;
use moq_transport::{AuthRequest, Authorizer, RequestKind, ResolvedToken, SessionInfo};
use parking_lot::Mutex;

pub use claims::{Claims, Grant};
/// The signature algorithm of a [`Jwk`] (for [`Jwk::generate`]), re-exported so that an
/// application needs no `jsonwebtoken` dependency of its own.
pub use jsonwebtoken::Algorithm;
pub use keys::{Jwk, KeyError, KeySet, TokenError};
pub use pattern::{InvalidPattern, Pattern};

/// Verified tokens remembered, so a request does not verify a signature again.
const CACHE_ENTRIES: usize = 4096;

/// The relay's [`Authorizer`]: JWTs verified against a [`KeySet`], plus public prefixes
/// open to anyone.
pub struct TokenAuth {
    keys: KeySet,
    public: Grant,
    cache: Mutex<HashMap<Bytes, Result<Arc<Grant>, TokenError>>>,
}

impl std::fmt::Debug for TokenAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuth")
            .field("keys", &self.keys)
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

impl TokenError {
    /// The REQUEST_ERROR code the draft names for this refusal (draft-19 §10.2.2, §10.4).
    pub fn request_code(&self) -> RequestErrorCode {
        match self {
            TokenError::Malformed(_) => RequestErrorCode::MALFORMED_AUTH_TOKEN,
            TokenError::Expired => RequestErrorCode::EXPIRED_AUTH_TOKEN,
            TokenError::Unauthorized(_) => RequestErrorCode::UNAUTHORIZED,
        }
    }

    /// The session close code for a SETUP or URL token refused (draft-19 §3.5).
    pub fn session_code(&self) -> SessionErrorCode {
        match self {
            TokenError::Malformed(_) => SessionErrorCode::MALFORMED_AUTH_TOKEN,
            TokenError::Expired => SessionErrorCode::EXPIRED_AUTH_TOKEN,
            TokenError::Unauthorized(_) => SessionErrorCode::UNAUTHORIZED,
        }
    }
}

/// The namespace as a path: its fields.
fn path(ns: &TrackNamespace) -> Vec<&[u8]> {
    ns.fields().collect()
}

/// The `jwt` query parameter of a session's path, if any.
fn url_token(session: &SessionInfo) -> Option<Bytes> {
    let (_, query) = session.path.as_deref()?.split_once('?')?;
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "jwt")
        .map(|(_, v)| Bytes::from(v.into_owned()))
}

impl TokenAuth {
    /// Verifies with `keys`; namespaces under each of `public` (`""`: everything) are open to
    /// anyone for publishing and subscribing.
    pub fn new(keys: KeySet, public: &[String]) -> Result<Self, InvalidPattern> {
        Ok(TokenAuth {
            keys,
            public: Grant::public(public)?,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Verifies one token (cached; expiry is checked at every use).
    pub fn verify(&self, token: &[u8]) -> Result<Arc<Grant>, TokenError> {
        let now = SystemTime::now();
        let cached = self.cache.lock().get(token).cloned();
        let result = match cached {
            Some(r) => r,
            None => {
                let r = match std::str::from_utf8(token) {
                    Ok(t) => self.keys.verify(t.trim(), now).map(Arc::new),
                    Err(_) => Err(TokenError::Malformed("not UTF-8".into())),
                };
                let mut cache = self.cache.lock();
                if cache.len() >= CACHE_ENTRIES {
                    cache.clear();
                }
                cache.insert(Bytes::copy_from_slice(token), r.clone());
                r
            }
        };
        match result {
            Ok(g) if g.expires.is_some_and(|e| e <= now) => Err(TokenError::Expired),
            r => r,
        }
    }

    /// The first token of `tokens` that verifies, else the first one's error.
    fn first_valid<'a>(
        &self,
        tokens: impl Iterator<Item = &'a Bytes>,
    ) -> Option<Result<Arc<Grant>, TokenError>> {
        let mut first_err = None;
        for t in tokens {
            match self.verify(t) {
                Ok(g) => return Some(Ok(g)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map(Err)
    }

    /// The session's own grant: SETUP's tokens, else the URL's; `None` when it has none.
    pub fn session_grant(&self, session: &SessionInfo) -> Option<Result<Arc<Grant>, TokenError>> {
        if !session.setup_tokens.is_empty() {
            return self.first_valid(session.setup_tokens.iter().map(|t| &t.value));
        }
        url_token(session).map(|t| self.verify(&t))
    }

    /// The grant that decides a request carrying `tokens`.
    fn grant(
        &self,
        session: &SessionInfo,
        tokens: &[ResolvedToken],
    ) -> Option<Result<Arc<Grant>, TokenError>> {
        match tokens.is_empty() {
            false => self.first_valid(tokens.iter().map(|t| &t.value)),
            true => self.session_grant(session),
        }
    }

    /// Whether the public prefixes alone, or `grant`, allow `check`.
    fn allows(
        &self,
        grant: Option<&Result<Arc<Grant>, TokenError>>,
        check: impl Fn(&Grant) -> bool,
    ) -> bool {
        check(&self.public) || matches!(grant, Some(Ok(g)) if check(g))
    }

    /// Whether a caller holding `token` (or none) may see `namespace`: what the relay's
    /// `/announced` lists.
    pub fn may_see(&self, token: Option<&[u8]>, namespace: &TrackNamespace) -> bool {
        let grant = token.map(|t| self.verify(t));
        self.allows(grant.as_ref(), |g| g.may_subscribe(&path(namespace)))
    }
}

#[async_trait]
impl Authorizer for TokenAuth {
    async fn authorize_session(&self, session: &SessionInfo) -> Result<(), SessionErrorCode> {
        // A session that presents a token must present a valid one (draft-19 §10.2.2).
        match self.session_grant(session) {
            Some(Err(e)) => {
                tracing::info!(remote = ?session.remote, error = %e, "session token refused");
                Err(e.session_code())
            }
            _ => Ok(()),
        }
    }

    async fn authorize(
        &self,
        session: &SessionInfo,
        req: &AuthRequest<'_>,
    ) -> Result<(), RequestError> {
        let grant = self.grant(session, req.tokens);
        let ns = path(req.namespace);
        let (allowed, need) = match req.kind {
            RequestKind::PublishNamespace | RequestKind::Publish => (
                self.allows(grant.as_ref(), |g| g.may_publish(&ns)),
                "publish",
            ),
            RequestKind::SubscribeNamespace | RequestKind::SubscribeTracks => (
                self.allows(grant.as_ref(), |g| g.may_discover(&ns)),
                "subscribe",
            ),
            _ => (
                self.allows(grant.as_ref(), |g| g.may_subscribe(&ns)),
                "subscribe",
            ),
        };
        match (allowed, grant) {
            (true, _) => Ok(()),
            // A token that failed says why, with its own code (draft-19 §10.4).
            (false, Some(Err(e))) => Err(RequestError::new(e.request_code(), e.to_string())),
            (false, _) => Err(RequestError::new(
                RequestErrorCode::UNAUTHORIZED,
                format!("no grant to {need} {}", req.namespace),
            )),
        }
    }

    fn visible(
        &self,
        session: &SessionInfo,
        tokens: &[ResolvedToken],
        namespace: &TrackNamespace,
    ) -> bool {
        let grant = self.grant(session, tokens);
        self.allows(grant.as_ref(), |g| g.may_subscribe(&path(namespace)))
    }

    fn session_expiry(&self, session: &SessionInfo) -> Option<SystemTime> {
        match self.session_grant(session) {
            Some(Ok(g)) => g.expires,
            _ => None,
        }
    }
}
