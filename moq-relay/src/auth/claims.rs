//! The token payload: moq-dev's claims (`moq-token`, `moq-auth`), and the grant they make.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::pattern::{InvalidPattern, Pattern};

/// One prefix or a list (moq-token writes a single `put`/`get` prefix as a bare string).
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

/// The JSON claims of a token, as moq-dev's tools write them.
///
/// `root` is the path the grants are relative to; `publish` / `subscribe` are pattern lists
/// (`moq-auth`), `put` / `get` the older prefix lists (`moq-token`: a prefix `p` grants `p/**`).
/// One token never mixes the two forms. `exp`, `nbf` and `iat` are Unix seconds. `iss`, `sub`,
/// `jti` and `aud` are read and ignored; any other claim is refused, since it might have been
/// meant to narrow the grant.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Claims {
    /// The root the grants are relative to.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub root: String,
    /// Patterns the holder may publish under.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub publish: Vec<String>,
    /// Patterns the holder may subscribe to and discover.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscribe: Vec<String>,
    /// Legacy publish prefixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    put: Option<OneOrMany>,
    /// Legacy subscribe prefixes.
    #[serde(skip_serializing_if = "Option::is_none")]
    get: Option<OneOrMany>,
    /// Expiry, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exp: Option<u64>,
    /// Not valid before, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
    /// Issued at, Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    #[serde(skip_serializing)]
    iss: Option<serde::de::IgnoredAny>,
    #[serde(skip_serializing)]
    sub: Option<serde::de::IgnoredAny>,
    #[serde(skip_serializing)]
    jti: Option<serde::de::IgnoredAny>,
    #[serde(skip_serializing)]
    aud: Option<serde::de::IgnoredAny>,
}

impl Claims {
    /// Claims granting `publish` and `subscribe` patterns beneath `root`, issued now.
    ///
    /// When every pattern is a subtree (`p/**`, or `**`), they are written as the legacy
    /// `put` / `get` prefixes, which every moq-dev verifier reads (moq-auth does the same).
    pub fn new(root: impl Into<String>, publish: Vec<String>, subscribe: Vec<String>) -> Self {
        let prefix = |p: &String| match p.as_str() {
            "**" => Some(String::new()),
            p => p
                .strip_suffix("/**")
                .filter(|head| !head.contains('*'))
                .map(str::to_string),
        };
        let prefixes = |v: &[String]| v.iter().map(prefix).collect::<Option<Vec<_>>>();
        let mut claims = Claims {
            root: root.into(),
            iat: Some(unix(SystemTime::now())),
            ..Claims::default()
        };
        match (prefixes(&publish), prefixes(&subscribe)) {
            (Some(put), Some(get)) => {
                claims.put = (!put.is_empty()).then_some(OneOrMany::Many(put));
                claims.get = (!get.is_empty()).then_some(OneOrMany::Many(get));
            }
            _ => {
                claims.publish = publish;
                claims.subscribe = subscribe;
            }
        }
        claims
    }

    /// The grant, with every pattern parsed beneath `root`.
    pub fn grant(&self) -> Result<Grant, InvalidPattern> {
        if self.put.is_some() || self.get.is_some() {
            if !self.publish.is_empty() || !self.subscribe.is_empty() {
                return Err(InvalidPattern::mixed());
            }
            let subtrees = |p: &Option<OneOrMany>| -> Result<Vec<Pattern>, InvalidPattern> {
                p.clone()
                    .map(OneOrMany::into_vec)
                    .unwrap_or_default()
                    .iter()
                    .map(|prefix| Pattern::subtree(&self.root, prefix))
                    .collect()
            };
            return Ok(Grant {
                publish: subtrees(&self.put)?,
                subscribe: subtrees(&self.get)?,
                expires: self.expires(),
                limit: None,
            });
        }
        let parse = |v: &[String]| -> Result<Vec<Pattern>, InvalidPattern> {
            v.iter().map(|p| Pattern::parse(&self.root, p)).collect()
        };
        Ok(Grant {
            publish: parse(&self.publish)?,
            subscribe: parse(&self.subscribe)?,
            expires: self.expires(),
            limit: None,
        })
    }

    /// When the token expires, if it does.
    pub fn expires(&self) -> Option<SystemTime> {
        self.exp.map(|s| UNIX_EPOCH + Duration::from_secs(s))
    }

    /// When the token becomes valid, if not at once.
    pub fn not_before(&self) -> Option<SystemTime> {
        self.nbf.map(|s| UNIX_EPOCH + Duration::from_secs(s))
    }
}

/// Seconds since the Unix epoch.
pub(crate) fn unix(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What a verified token allows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    /// Namespaces the holder may publish (PUBLISH_NAMESPACE, PUBLISH).
    pub publish: Vec<Pattern>,
    /// Namespaces the holder may subscribe to, fetch, ask the status of, and discover.
    pub subscribe: Vec<Pattern>,
    /// When the grant ends.
    pub expires: Option<SystemTime>,
    /// A ceiling on top (the signing key's scope): what it does not allow is not allowed.
    pub limit: Option<Box<Grant>>,
}

impl Grant {
    /// Everything, both ways (the public prefix `""`).
    pub fn public(prefixes: &[String]) -> Result<Grant, InvalidPattern> {
        let patterns = prefixes
            .iter()
            .map(|p| Pattern::subtree("", p))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Grant {
            publish: patterns.clone(),
            subscribe: patterns,
            expires: None,
            limit: None,
        })
    }

    /// This grant, allowing only what `scope` allows too.
    pub fn within(mut self, scope: &Grant) -> Grant {
        self.limit = Some(Box::new(scope.clone()));
        self
    }

    fn limited(&self, f: impl Fn(&Grant) -> bool) -> bool {
        f(self) && self.limit.as_deref().is_none_or(f)
    }

    /// Whether the grant allows publishing `ns`.
    pub fn may_publish(&self, ns: &[&[u8]]) -> bool {
        self.limited(|g| g.publish.iter().any(|p| p.matches(ns)))
    }

    /// Whether the grant allows subscribing to (and seeing) `ns`.
    pub fn may_subscribe(&self, ns: &[&[u8]]) -> bool {
        self.limited(|g| g.subscribe.iter().any(|p| p.matches(ns)))
    }

    /// Whether discovery under `prefix` can reveal anything this grant may see.
    pub fn may_discover(&self, prefix: &[&[u8]]) -> bool {
        self.limited(|g| g.subscribe.iter().any(|p| p.reaches_under(prefix)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms() {
        let legacy: Claims =
            serde_json::from_str(r#"{"root":"demo","put":"alice","get":[""],"exp":9999999999}"#)
                .unwrap();
        let g = legacy.grant().unwrap();
        assert!(g.may_publish(&[b"demo", b"alice", b"cam"]));
        assert!(!g.may_publish(&[b"demo", b"bob"]));
        assert!(g.may_subscribe(&[b"demo", b"bob"]));
        assert!(g.expires.is_some());
        let patterns: Claims =
            serde_json::from_str(r#"{"root":"room","publish":["a"],"subscribe":["*"]}"#).unwrap();
        let g = patterns.grant().unwrap();
        assert!(g.may_publish(&[b"room", b"a"]));
        assert!(!g.may_publish(&[b"room", b"a", b"x"]));
        assert!(g.may_subscribe(&[b"room", b"b"]));
        assert!(
            serde_json::from_str::<Claims>(r#"{"put":["a"],"publish":["b"]}"#)
                .unwrap()
                .grant()
                .is_err()
        );
        assert!(serde_json::from_str::<Claims>(r#"{"rooot":"x"}"#).is_err());
        assert!(serde_json::from_str::<Claims>(r#"{"iss":"me","sub":"you"}"#).is_ok());
        // Subtree grants are written the legacy way, exact ones as patterns; same grant.
        let c = Claims::new("r", vec!["a/**".into()], vec!["**".into()]);
        let json = serde_json::to_string(&c).unwrap();
        assert!(
            json.contains(r#""put":["a"]"#) && json.contains(r#""get":[""]"#),
            "{json}"
        );
        assert!(c.grant().unwrap().may_publish(&[b"r", b"a", b"x"]));
        let json = serde_json::to_string(&Claims::new("r", vec!["a".into()], vec![])).unwrap();
        assert!(json.contains(r#""publish":["a"]"#), "{json}");
    }
}
