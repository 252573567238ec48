//! Keys: loading them (JWK, JWKS, moq-token's base64url JWK, PEM public keys, a directory of
//! any of these), verifying tokens with them, and, for the `token` subcommand, generating keys
//! and signing tokens.

use std::path::Path;
use std::time::SystemTime;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use super::claims::{Claims, Grant};

/// Why a token was not accepted. Each maps to the error code the draft names.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a JWT, or its header or claims do not parse (MALFORMED_AUTH_TOKEN).
    #[error("malformed token: {0}")]
    Malformed(String),
    /// Past its `exp` (EXPIRED_AUTH_TOKEN).
    #[error("token expired")]
    Expired,
    /// Signed by no key we hold, not valid yet, or granting nothing here (UNAUTHORIZED).
    #[error("unauthorized: {0}")]
    Unauthorized(String),
}

/// Why a key could not be loaded or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Reading a key file or directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The contents are not a key we understand.
    #[error("{0}")]
    Invalid(String),
}

fn invalid(e: impl std::fmt::Display) -> KeyError {
    KeyError::Invalid(e.to_string())
}

/// A JSON Web Key as moq-dev's `moq-token` writes it (RFC 7517, private parts included when
/// the key can sign). `kty` defaults to `oct`, as moq-token's older keys leave it out.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
pub struct Jwk {
    /// Key type: `oct`, `EC`, `OKP` or `RSA`.
    #[serde(default = "oct")]
    pub kty: String,
    /// The algorithm (`HS256`, `ES256`, `EdDSA`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alg: Option<String>,
    /// The key ID that tokens name in their header.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kid: Option<String>,
    /// What the key may do (`sign`, `verify`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_ops: Option<Vec<String>>,
    /// The curve of an `EC` or `OKP` key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub crv: Option<String>,
    /// An HMAC secret, base64url.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k: Option<String>,
    /// Public key: the x coordinate (EC) or the key (OKP), base64url.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// Public key: the y coordinate (EC), base64url.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub y: Option<String>,
    /// Private key (EC scalar or OKP seed), base64url.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub d: Option<String>,
    /// RSA modulus, base64url.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<String>,
    /// RSA exponent, base64url.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub e: Option<String>,
    /// moq-token's key scope: the most any token this key signs may grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<Claims>,
}

fn oct() -> String {
    "oct".to_string()
}

/// A key set file: `{"keys": [...]}`.
#[derive(Deserialize)]
struct JwkSet {
    keys: Vec<Jwk>,
}

/// One verification key.
struct VerifyKey {
    kid: Option<String>,
    /// The algorithm the key is for, or `None` (a PEM key: any of its family).
    alg: Option<Algorithm>,
    key: DecodingKey,
    /// The key's scope, applied on top of what its tokens grant.
    scope: Option<Grant>,
}

/// The keys tokens are verified with. `kid` in a token's header selects a key; a token with
/// no `kid` is tried against every key of its algorithm.
#[derive(Default)]
pub struct KeySet {
    keys: Vec<VerifyKey>,
}

impl std::fmt::Debug for KeySet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<_> = self.keys.iter().map(|k| &k.kid).collect();
        f.debug_struct("KeySet").field("kids", &kids).finish()
    }
}

fn algorithm(name: &str) -> Result<Algorithm, KeyError> {
    name.parse::<Algorithm>()
        .map_err(|_| KeyError::Invalid(format!("unsupported algorithm {name:?}")))
}

fn decode_b64(field: &Option<String>, what: &str) -> Result<Vec<u8>, KeyError> {
    let s = field
        .as_deref()
        .ok_or_else(|| KeyError::Invalid(format!("JWK without `{what}`")))?;
    B64.decode(s.trim_end_matches('='))
        .map_err(|e| KeyError::Invalid(format!("JWK `{what}`: {e}")))
}

impl Jwk {
    /// Parses a key as moq-token writes it: JSON, or base64url of the JSON.
    pub fn parse(text: &str) -> Result<Jwk, KeyError> {
        let text = text.trim();
        if text.starts_with('{') {
            return serde_json::from_str(text).map_err(invalid);
        }
        let json = B64.decode(text.trim_end_matches('=')).map_err(invalid)?;
        serde_json::from_slice(&json).map_err(invalid)
    }

    /// The algorithm, from `alg` or else from the key type.
    pub fn algorithm(&self) -> Result<Algorithm, KeyError> {
        match (&self.alg, self.kty.as_str(), self.crv.as_deref()) {
            (Some(a), _, _) => algorithm(a),
            (None, "oct", _) => Ok(Algorithm::HS256),
            (None, "OKP", _) => Ok(Algorithm::EdDSA),
            (None, "EC", Some("P-384")) => Ok(Algorithm::ES384),
            (None, "EC", _) => Ok(Algorithm::ES256),
            (None, "RSA", _) => Ok(Algorithm::RS256),
            (None, kty, _) => Err(KeyError::Invalid(format!("unsupported key type {kty:?}"))),
        }
    }

    fn decoding_key(&self) -> Result<DecodingKey, KeyError> {
        match self.kty.as_str() {
            "oct" => Ok(DecodingKey::from_secret(&decode_b64(&self.k, "k")?)),
            "EC" => DecodingKey::from_ec_components(
                self.x.as_deref().unwrap_or_default(),
                self.y.as_deref().unwrap_or_default(),
            )
            .map_err(invalid),
            "OKP" => DecodingKey::from_ed_components(self.x.as_deref().unwrap_or_default())
                .map_err(invalid),
            "RSA" => DecodingKey::from_rsa_components(
                self.n.as_deref().unwrap_or_default(),
                self.e.as_deref().unwrap_or_default(),
            )
            .map_err(invalid),
            kty => Err(KeyError::Invalid(format!("unsupported key type {kty:?}"))),
        }
    }

    /// The key that signs with this JWK (an HMAC secret, or a private `d`).
    pub fn encoding_key(&self) -> Result<EncodingKey, KeyError> {
        match (self.kty.as_str(), self.crv.as_deref()) {
            ("oct", _) => Ok(EncodingKey::from_secret(&decode_b64(&self.k, "k")?)),
            ("EC", Some("P-256") | None) => {
                let d = decode_b64(&self.d, "d")?;
                let point = [
                    &[4u8][..],
                    &decode_b64(&self.x, "x")?,
                    &decode_b64(&self.y, "y")?,
                ]
                .concat();
                Ok(EncodingKey::from_ec_der(&pkcs8::p256(&d, &point)?))
            }
            ("OKP", Some("Ed25519") | None) => {
                let seed = decode_b64(&self.d, "d")?;
                let public = decode_b64(&self.x, "x")?;
                Ok(EncodingKey::from_ed_der(&pkcs8::ed25519(&seed, &public)?))
            }
            (kty, crv) => Err(KeyError::Invalid(format!(
                "cannot sign with a {kty} key (curve {crv:?})"
            ))),
        }
    }

    /// The same key without its private parts (`None` for an HMAC key, which has none).
    pub fn public(&self) -> Option<Jwk> {
        (self.kty != "oct").then(|| Jwk {
            d: None,
            key_ops: Some(vec!["verify".to_string()]),
            ..self.clone()
        })
    }

    /// Generates a key: `HS256` (a 32-byte secret), `ES256` or `EdDSA`.
    pub fn generate(alg: Algorithm, kid: Option<String>) -> Result<Jwk, KeyError> {
        use ring::rand::SecureRandom;
        use ring::signature::{self, KeyPair};
        let rng = ring::rand::SystemRandom::new();
        let mut jwk = Jwk {
            alg: Some(format!("{alg:?}")),
            kid,
            key_ops: Some(vec!["sign".to_string(), "verify".to_string()]),
            ..Jwk::default()
        };
        match alg {
            Algorithm::HS256 => {
                let mut secret = [0u8; 32];
                rng.fill(&mut secret).map_err(invalid)?;
                jwk.kty = oct();
                jwk.k = Some(B64.encode(secret));
            }
            Algorithm::ES256 => {
                let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
                let doc = signature::EcdsaKeyPair::generate_pkcs8(alg, &rng).map_err(invalid)?;
                let pair = signature::EcdsaKeyPair::from_pkcs8(alg, doc.as_ref(), &rng)
                    .map_err(invalid)?;
                let point = pair.public_key().as_ref();
                let d = pkcs8::p256_scalar(doc.as_ref())?;
                jwk.kty = "EC".to_string();
                jwk.crv = Some("P-256".to_string());
                jwk.x = Some(B64.encode(point.get(1..33).unwrap_or_default()));
                jwk.y = Some(B64.encode(point.get(33..65).unwrap_or_default()));
                jwk.d = Some(B64.encode(d));
            }
            Algorithm::EdDSA => {
                let doc = signature::Ed25519KeyPair::generate_pkcs8(&rng).map_err(invalid)?;
                let pair = signature::Ed25519KeyPair::from_pkcs8(doc.as_ref()).map_err(invalid)?;
                jwk.kty = "OKP".to_string();
                jwk.crv = Some("Ed25519".to_string());
                jwk.x = Some(B64.encode(pair.public_key().as_ref()));
                jwk.d = Some(B64.encode(pkcs8::ed25519_seed(doc.as_ref())?));
            }
            other => {
                return Err(KeyError::Invalid(format!(
                    "generating {other:?} keys is not supported (HS256, ES256, EdDSA)"
                )));
            }
        }
        Ok(jwk)
    }

    /// Signs `claims`, naming this key's `kid` in the header.
    pub fn sign(&self, claims: &Claims) -> Result<String, KeyError> {
        let mut header = Header::new(self.algorithm()?);
        header.kid = self.kid.clone();
        jsonwebtoken::encode(&header, claims, &self.encoding_key()?).map_err(invalid)
    }
}

/// PKCS#8 documents for the two curves whose private keys a JWK carries as raw bytes (the
/// layouts are fixed-size, RFC 5915 / RFC 8410 v2, byte for byte what `ring` generates).
mod pkcs8 {
    use super::KeyError;

    const P256_HEAD: [u8; 36] = [
        0x30, 0x81, 0x87, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d,
        0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x04, 0x6d, 0x30,
        0x6b, 0x02, 0x01, 0x01, 0x04, 0x20,
    ];
    const P256_MID: [u8; 5] = [0xa1, 0x44, 0x03, 0x42, 0x00];
    const ED25519_HEAD: [u8; 16] = [
        0x30, 0x51, 0x02, 0x01, 0x01, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    const ED25519_MID: [u8; 3] = [0x81, 0x21, 0x00];

    fn sized(v: &[u8], n: usize, what: &str) -> Result<(), KeyError> {
        match v.len() == n {
            true => Ok(()),
            false => Err(KeyError::Invalid(format!(
                "{what} is {} bytes, not {n}",
                v.len()
            ))),
        }
    }

    pub(super) fn p256(d: &[u8], point: &[u8]) -> Result<Vec<u8>, KeyError> {
        sized(d, 32, "P-256 private key")?;
        sized(point, 65, "P-256 public key")?;
        Ok([&P256_HEAD[..], d, &P256_MID, point].concat())
    }

    pub(super) fn ed25519(seed: &[u8], public: &[u8]) -> Result<Vec<u8>, KeyError> {
        sized(seed, 32, "Ed25519 private key")?;
        sized(public, 32, "Ed25519 public key")?;
        Ok([&ED25519_HEAD[..], seed, &ED25519_MID, public].concat())
    }

    fn field<'a>(doc: &'a [u8], head: &[u8], what: &str) -> Result<&'a [u8], KeyError> {
        match doc.strip_prefix(head).and_then(|rest| rest.get(..32)) {
            Some(v) => Ok(v),
            None => Err(KeyError::Invalid(format!(
                "unexpected {what} PKCS#8 layout"
            ))),
        }
    }

    pub(super) fn p256_scalar(doc: &[u8]) -> Result<&[u8], KeyError> {
        field(doc, &P256_HEAD, "P-256")
    }

    pub(super) fn ed25519_seed(doc: &[u8]) -> Result<&[u8], KeyError> {
        field(doc, &ED25519_HEAD, "Ed25519")
    }
}

impl KeySet {
    /// An empty set (no token verifies).
    pub fn new() -> Self {
        KeySet::default()
    }

    /// Whether the set holds no key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Adds a JWK.
    pub fn add_jwk(&mut self, jwk: &Jwk) -> Result<(), KeyError> {
        let scope = match &jwk.scope {
            Some(c) => Some(c.grant().map_err(invalid)?),
            None => None,
        };
        self.keys.push(VerifyKey {
            kid: jwk.kid.clone(),
            alg: Some(jwk.algorithm()?),
            key: jwk.decoding_key()?,
            scope,
        });
        Ok(())
    }

    /// Adds the key or keys in `text`: a JWK, a JWK set, moq-token's base64url JWK, or a PEM
    /// public key (EC, Ed25519 or RSA; `kid` is then the file's stem).
    pub fn add_text(&mut self, text: &str, kid: Option<&str>) -> Result<(), KeyError> {
        let trimmed = text.trim();
        if trimmed.starts_with("-----BEGIN") {
            let pem = trimmed.as_bytes();
            let key = DecodingKey::from_ec_pem(pem)
                .or_else(|_| DecodingKey::from_ed_pem(pem))
                .or_else(|_| DecodingKey::from_rsa_pem(pem))
                .map_err(|e| KeyError::Invalid(format!("PEM public key: {e}")))?;
            self.keys.push(VerifyKey {
                kid: kid.map(str::to_string),
                alg: None,
                key,
                scope: None,
            });
            return Ok(());
        }
        if trimmed.starts_with('{') {
            let value: serde_json::Value = serde_json::from_str(trimmed).map_err(invalid)?;
            if value.get("keys").is_some() {
                let set: JwkSet = serde_json::from_value(value).map_err(invalid)?;
                return set.keys.iter().try_for_each(|k| self.add_jwk(k));
            }
        }
        self.add_jwk(&Jwk::parse(trimmed)?)
    }

    /// Adds a key file, or every `.jwk`, `.json`, `.jwks` and `.pem` file of a directory.
    pub fn add_path(&mut self, path: &Path) -> Result<(), KeyError> {
        let io = |source| KeyError::Io {
            path: path.display().to_string(),
            source,
        };
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)
                .map_err(io)?
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .filter(|p| {
                    p.extension().is_some_and(|e| {
                        ["jwk", "json", "jwks", "pem"].contains(&&*e.to_string_lossy())
                    })
                })
                .collect();
            entries.sort();
            return entries.iter().try_for_each(|p| self.add_path(p));
        }
        let text = std::fs::read_to_string(path).map_err(io)?;
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        self.add_text(&text, stem.as_deref())
            .map_err(|e| KeyError::Invalid(format!("{}: {e}", path.display())))
    }

    /// Verifies `token` and returns its grant. `exp` and `nbf` are checked against `now`.
    pub fn verify(&self, token: &str, now: SystemTime) -> Result<Grant, TokenError> {
        let malformed = |e: &dyn std::fmt::Display| TokenError::Malformed(e.to_string());
        let header = jsonwebtoken::decode_header(token).map_err(|e| malformed(&e))?;
        let candidates = self.keys.iter().filter(|k| match (&header.kid, &k.kid) {
            (Some(want), Some(have)) => want == have,
            (Some(_), None) => true,
            (None, _) => true,
        });
        let mut validation = Validation::new(header.alg);
        validation.required_spec_claims.clear();
        // exp and nbf are checked below, exactly and with our codes.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let mut last = TokenError::Unauthorized(match &header.kid {
            Some(kid) => format!("no key {kid:?}"),
            None => "no key for the token's algorithm".to_string(),
        });
        for k in candidates {
            if k.alg.is_some_and(|a| a != header.alg) {
                continue;
            }
            match jsonwebtoken::decode::<Claims>(token, &k.key, &validation) {
                Ok(data) => {
                    let claims = data.claims;
                    if claims.expires().is_some_and(|exp| exp <= now) {
                        return Err(TokenError::Expired);
                    }
                    if claims.not_before().is_some_and(|nbf| nbf > now) {
                        return Err(TokenError::Unauthorized("token not valid yet".into()));
                    }
                    let mut grant = claims.grant().map_err(|e| malformed(&e))?;
                    if let Some(scope) = &k.scope {
                        grant = grant.within(scope);
                    }
                    return Ok(grant);
                }
                Err(e) => {
                    use jsonwebtoken::errors::ErrorKind as K;
                    last = match e.kind() {
                        K::InvalidToken | K::Base64(_) | K::Json(_) | K::Utf8(_) => {
                            return Err(malformed(&e));
                        }
                        _ => TokenError::Unauthorized(e.to_string()),
                    };
                }
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_sign_verify() {
        for alg in [Algorithm::HS256, Algorithm::ES256, Algorithm::EdDSA] {
            let key = Jwk::generate(alg, Some("k".into())).unwrap();
            let claims = Claims::new("r", vec!["a".into()], vec![]);
            let token = key.sign(&claims).unwrap();
            let mut keys = KeySet::new();
            keys.add_jwk(&key.public().unwrap_or_else(|| key.clone()))
                .unwrap();
            let grant = keys.verify(&token, SystemTime::now()).unwrap();
            assert!(grant.may_publish(&[b"r", b"a"]), "{alg:?}");
            // A token signed by another key of the same kid fails the signature.
            let other = Jwk::generate(alg, Some("k".into())).unwrap();
            let forged = other.sign(&claims).unwrap();
            assert!(matches!(
                keys.verify(&forged, SystemTime::now()),
                Err(TokenError::Unauthorized(_))
            ));
        }
        assert!(matches!(
            KeySet::new().verify("x.y", SystemTime::now()),
            Err(TokenError::Malformed(_))
        ));
    }

    #[test]
    fn ring_layouts() {
        let rng = ring::rand::SystemRandom::new();
        let doc = ring::signature::Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let head: Vec<String> = doc
            .as_ref()
            .iter()
            .take(20)
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(
            pkcs8::ed25519_seed(doc.as_ref()).is_ok(),
            "{}",
            head.join(" ")
        );
    }
}
