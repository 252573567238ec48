//! TLS configuration with rustls: web PKI roots by default, generated development certificates,
//! pinning by SHA-256 fingerprint, and an explicit insecure switch. Never insecure by default.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::error::Error;

/// The crypto provider every config here uses (ring).
///
/// Key exchange is classical (X25519, P-256, P-384): ring has no post-quantum group, which is
/// why rustls 0.23.48 deprecated `ring::default_provider`. ring stays the project's one crypto
/// stack (quinn and web-transport-quinn are built on it too); post-quantum key exchange would
/// take rustls' aws-lc-rs provider.
pub fn provider() -> Arc<CryptoProvider> {
    // Deprecated only from rustls 0.23.48 on, and only for the reason above; allowed here so a
    // build against any 0.23 release is warning-free (scripts/fresh-deps.sh checks the newest).
    #[allow(deprecated)]
    let ring = rustls::crypto::ring::default_provider();
    Arc::new(ring)
}

/// The SHA-256 fingerprint of a DER certificate.
pub fn fingerprint(cert: &[u8]) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a hex fingerprint (colons allowed, as browsers print them).
pub fn parse_fingerprint(s: &str) -> Result<[u8; 32], Error> {
    let clean: String = s.chars().filter(|c| *c != ':').collect();
    let bad = || Error::Invalid(format!("fingerprint {s:?} is not 32 hex bytes"));
    if clean.len() != 64 || !clean.is_ascii() {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        let pair = clean.get(2 * i..2 * i + 2).ok_or_else(bad)?;
        *b = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// A certificate chain and its private key, for a server.
#[derive(Debug)]
pub struct Certificate {
    /// The chain, leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's private key.
    pub key: PrivateKeyDer<'static>,
}

impl Clone for Certificate {
    fn clone(&self) -> Self {
        Certificate {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
        }
    }
}

impl Certificate {
    /// A self-signed certificate for `hosts`, valid for 14 days (the limit browsers accept for
    /// `serverCertificateHashes`). For development: pin its [`Certificate::fingerprint`].
    ///
    /// ```
    /// let cert = moq_transport::tls::Certificate::generate(&["localhost".to_string()]).unwrap();
    /// assert_eq!(cert.fingerprint_hex().len(), 64);
    /// ```
    pub fn generate(hosts: &[String]) -> Result<Certificate, Error> {
        let mut params = rcgen::CertificateParams::new(hosts.to_vec())
            .map_err(|e| Error::Invalid(format!("certificate names: {e}")))?;
        let now = std::time::SystemTime::now();
        params.not_before = (now - std::time::Duration::from_secs(3600)).into();
        params.not_after = (now + std::time::Duration::from_secs(14 * 24 * 3600 - 7200)).into();
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| Error::Invalid(format!("key generation: {e}")))?;
        let cert = params
            .self_signed(&key)
            .map_err(|e| Error::Invalid(format!("self-signing: {e}")))?;
        Ok(Certificate {
            chain: vec![cert.der().clone()],
            key: PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        })
    }

    /// Loads a PEM certificate chain and private key (PKCS#8, PKCS#1 or SEC1).
    pub fn load_pem(cert: &Path, key: &Path) -> Result<Certificate, Error> {
        use rustls::pki_types::pem::PemObject;
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| Error::Invalid(format!("{}: {e}", cert.display())))?;
        let key = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| Error::Invalid(format!("{}: {e}", key.display())))?;
        if chain.is_empty() {
            return Err(Error::Invalid(format!(
                "{}: no certificate",
                cert.display()
            )));
        }
        Ok(Certificate { chain, key })
    }

    /// SHA-256 of the leaf certificate.
    pub fn fingerprint(&self) -> [u8; 32] {
        fingerprint(self.chain.first().map(|c| c.as_ref()).unwrap_or_default())
    }

    /// SHA-256 of the leaf certificate, hex.
    pub fn fingerprint_hex(&self) -> String {
        hex(&self.fingerprint())
    }
}

/// How a client decides to trust a server.
#[derive(Clone, Default)]
pub struct ClientTls {
    /// Extra trusted roots, added to the web PKI roots.
    pub roots: Vec<CertificateDer<'static>>,
    /// If non-empty, trust exactly the leaf certificates with these SHA-256 fingerprints
    /// (the signature is still checked). For self-signed development servers.
    pub fingerprints: Vec<[u8; 32]>,
    /// Accept any certificate. For development only; must be asked for explicitly.
    pub insecure: bool,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientTls")
            .field("extra_roots", &self.roots.len())
            .field(
                "fingerprints",
                &self.fingerprints.iter().map(|f| hex(f)).collect::<Vec<_>>(),
            )
            .field("insecure", &self.insecure)
            .finish()
    }
}

impl ClientTls {
    /// Trust a server by the fingerprint of its certificate.
    pub fn pinned(fingerprint: [u8; 32]) -> Self {
        ClientTls {
            fingerprints: vec![fingerprint],
            ..Default::default()
        }
    }

    /// Trust any server. Development only.
    pub fn insecure() -> Self {
        ClientTls {
            insecure: true,
            ..Default::default()
        }
    }

    /// A rustls client config offering `alpn`.
    pub fn client_config(&self, alpn: &[&str]) -> Result<rustls::ClientConfig, Error> {
        let provider = provider();
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| Error::Invalid(format!("tls: {e}")))?;
        let mut config = if self.insecure || !self.fingerprints.is_empty() {
            let verifier = Pinned {
                provider,
                fingerprints: self.fingerprints.clone(),
                any: self.insecure,
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(verifier))
                .with_no_client_auth()
        } else {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for r in &self.roots {
                roots
                    .add(r.clone())
                    .map_err(|e| Error::Invalid(format!("root: {e}")))?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
        Ok(config)
    }
}

/// A rustls server config for `cert` offering `alpn` in preference order.
pub fn server_config(cert: &Certificate, alpn: &[&str]) -> Result<rustls::ServerConfig, Error> {
    ServerCert::new(cert)?.server_config(alpn)
}

/// The certificate a server presents, replaceable while it runs: the next handshake gets the
/// new one, and connections already open keep theirs. Cheap to clone (clones share it).
#[derive(Clone)]
pub struct ServerCert {
    current: Arc<std::sync::RwLock<(Arc<rustls::sign::CertifiedKey>, [u8; 32])>>,
}

impl fmt::Debug for ServerCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerCert")
            .field("fingerprint", &hex(&self.fingerprint()))
            .finish()
    }
}

fn certified(cert: &Certificate) -> Result<Arc<rustls::sign::CertifiedKey>, Error> {
    let key = provider()
        .key_provider
        .load_private_key(cert.key.clone_key())
        .map_err(|e| Error::Invalid(format!("private key: {e}")))?;
    let certified = rustls::sign::CertifiedKey::new(cert.chain.clone(), key);
    // The key must belong to the leaf: a mismatch would fail every handshake.
    certified
        .keys_match()
        .map_err(|e| Error::Invalid(format!("certificate and key: {e}")))?;
    Ok(Arc::new(certified))
}

impl ServerCert {
    /// Presents `cert`.
    pub fn new(cert: &Certificate) -> Result<ServerCert, Error> {
        Ok(ServerCert {
            current: Arc::new(std::sync::RwLock::new((
                certified(cert)?,
                cert.fingerprint(),
            ))),
        })
    }

    /// Presents `cert` from the next handshake on.
    pub fn set(&self, cert: &Certificate) -> Result<(), Error> {
        let next = (certified(cert)?, cert.fingerprint());
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = next;
        Ok(())
    }

    /// SHA-256 of the leaf certificate presented now.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.current.read().unwrap_or_else(|e| e.into_inner()).1
    }

    /// A rustls server config presenting this certificate (and whatever [`ServerCert::set`]
    /// puts in its place), offering `alpn` in preference order.
    pub fn server_config(&self, alpn: &[&str]) -> Result<rustls::ServerConfig, Error> {
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| Error::Invalid(format!("tls: {e}")))?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(self.clone()));
        config.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
        config.max_early_data_size = 0;
        Ok(config)
    }
}

impl rustls::server::ResolvesServerCert for ServerCert {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .0
                .clone(),
        )
    }
}

/// How [`Pinned`] refuses a certificate, before its fingerprint.
const UNPINNED: &str = "server certificate fingerprint ";

/// The fingerprint a handshake error names as not pinned, if it is [`Pinned`]'s refusal.
pub(crate) fn unpinned_fingerprint(reason: &str) -> Option<String> {
    let at = reason.find(UNPINNED)? + UNPINNED.len();
    let hex = reason.get(at..at + 64)?;
    hex.bytes()
        .all(|b| b.is_ascii_hexdigit())
        .then(|| hex.to_string())
}

/// Trusts leaf certificates by fingerprint (or any, if `any`), still checking signatures.
#[derive(Debug)]
struct Pinned {
    provider: Arc<CryptoProvider>,
    fingerprints: Vec<[u8; 32]>,
    any: bool,
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.any || self.fingerprints.contains(&fingerprint(end_entity)) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "{UNPINNED}{} is not pinned",
                hex(&fingerprint(end_entity))
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints() {
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let hexed = cert.fingerprint_hex();
        assert_eq!(parse_fingerprint(&hexed).unwrap(), cert.fingerprint());
        let colons: Vec<String> = cert
            .fingerprint()
            .iter()
            .map(|b| format!("{b:02X}"))
            .collect();
        assert_eq!(
            parse_fingerprint(&colons.join(":")).unwrap(),
            cert.fingerprint()
        );
        assert!(parse_fingerprint("abc").is_err());
        assert!(!ClientTls::default().insecure, "never insecure by default");
    }
}
