//! SETUP: building ours and checking the peer's (draft-19 §3.3, §10.3).

use bytes::Bytes;
use moq_core::Version;
use moq_core::codes::SessionErrorCode;
use moq_core::message::{Setup, SetupOptions};

use super::config::SessionConfig;
use super::core::Role;
use crate::error::Error;
use crate::transport::TransportKind;

/// Our SETUP. PATH and AUTHORITY are sent only by a raw-QUIC client (draft-19 §10.3.1.1-2).
pub(crate) fn local_setup(
    config: &SessionConfig,
    role: Role,
    kind: TransportKind,
    version: Version,
    path: Option<&str>,
    authority: Option<&str>,
) -> Setup {
    let raw_client = role == Role::Client && kind == TransportKind::RawQuic;
    let options = SetupOptions {
        path: path
            .filter(|_| raw_client)
            .map(|p| Bytes::copy_from_slice(p.as_bytes())),
        authority: authority
            .filter(|_| raw_client)
            .map(|a| Bytes::copy_from_slice(a.as_bytes())),
        authorization_tokens: config.setup_tokens.clone(),
        max_auth_token_cache_size: Some(config.max_auth_token_cache_size).filter(|x| *x > 0),
        max_filter_ranges: Some(config.max_filter_ranges)
            .filter(|x| *x > 0 && version.has_range_filters()),
        implementation: config.implementation.clone(),
        max_request_updates: Some(config.max_request_updates)
            .filter(|x| *x > 0 && version.has_max_request_updates()),
        // draft-lcurley-moq-cluster-01 Setup Negotiation: the options exist where SETUP is
        // Key-Value-Pairs (17 on).
        hop_id: config
            .cluster_hop
            .filter(|_| version.has_cluster_extension()),
        relay_cost: config
            .relay_cost
            .filter(|_| config.cluster_hop.is_some() && version.has_cluster_extension()),
        unknown: Vec::new(),
    };
    Setup { options }
}

/// Checks the peer's SETUP options against who sent them and over what (draft-19 §10.3.1).
/// Returns the path and authority a client asked for.
pub(crate) fn check_peer_setup(
    setup: &SetupOptions,
    our_role: Role,
    kind: TransportKind,
) -> Result<(Option<String>, Option<String>), Error> {
    let path = setup
        .path
        .as_ref()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    let authority = setup
        .authority
        .as_ref()
        .map(|a| String::from_utf8_lossy(a).into_owned());
    let from_server = our_role == Role::Client;
    // The URL carries the path and authority over WebTransport, and over a WebSocket just the
    // same (QMux over WebSocket is a WebTransport stand-in): there too they are not sent.
    let url_borne = kind != TransportKind::RawQuic;
    // draft-19 §10.3.1.2: PATH from a server or over WebTransport is INVALID_PATH.
    if setup.path.is_some() && (from_server || url_borne) {
        return Err(Error::violation(
            SessionErrorCode::INVALID_PATH,
            "PATH sent by a server or over WebTransport",
        ));
    }
    // draft-19 §10.3.1.1: AUTHORITY from a server or over WebTransport is INVALID_AUTHORITY.
    if setup.authority.is_some() && (from_server || url_borne) {
        return Err(Error::violation(
            SessionErrorCode::INVALID_AUTHORITY,
            "AUTHORITY sent by a server or over WebTransport",
        ));
    }
    if let Some(p) = &setup.path {
        // draft-19 §10.3.1.2: a PATH that is not path-abempty [ "?" query ] is MALFORMED_PATH.
        if !is_valid_path(p) {
            return Err(Error::violation(
                SessionErrorCode::MALFORMED_PATH,
                "PATH is not path-abempty [?query]",
            ));
        }
    }
    if let Some(a) = &setup.authority {
        // draft-19 §10.3.1.1: an AUTHORITY that is not an RFC 3986 authority is MALFORMED_AUTHORITY.
        if !is_valid_authority(a) {
            return Err(Error::violation(
                SessionErrorCode::MALFORMED_AUTHORITY,
                "AUTHORITY is not a valid authority",
            ));
        }
    }
    Ok((path, authority))
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}

/// Checks `s` is made of `allowed` bytes and well-formed percent-encodings.
fn chars_ok(s: &[u8], allowed: impl Fn(u8) -> bool) -> bool {
    let mut i = 0;
    while let Some(&b) = s.get(i) {
        if b == b'%' {
            let hex = |j: usize| s.get(j).is_some_and(u8::is_ascii_hexdigit);
            if !(hex(i + 1) && hex(i + 2)) {
                return false;
            }
            i += 3;
        } else if allowed(b) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// RFC 3986 `path-abempty [ "?" query ]`.
pub(crate) fn is_valid_path(p: &[u8]) -> bool {
    let (path, query) = match p.iter().position(|&b| b == b'?') {
        Some(i) => (p.get(..i).unwrap_or_default(), p.get(i + 1..)),
        None => (p, None),
    };
    let pchar = |b: u8| is_unreserved(b) || is_sub_delim(b) || b == b':' || b == b'@';
    (path.is_empty() || path.first() == Some(&b'/'))
        && chars_ok(path, |b| pchar(b) || b == b'/')
        && query.is_none_or(|q| chars_ok(q, |b| pchar(b) || b == b'/' || b == b'?'))
}

/// RFC 3986 `authority` with a non-empty host (draft-19 §3.1.1).
pub(crate) fn is_valid_authority(a: &[u8]) -> bool {
    let hostport = match a.iter().rposition(|&b| b == b'@') {
        Some(i) => {
            let userinfo = a.get(..i).unwrap_or_default();
            if !chars_ok(userinfo, |b| {
                is_unreserved(b) || is_sub_delim(b) || b == b':'
            }) {
                return false;
            }
            a.get(i + 1..).unwrap_or_default()
        }
        None => a,
    };
    let (host, port) = if hostport.first() == Some(&b'[') {
        let Some(end) = hostport.iter().position(|&b| b == b']') else {
            return false;
        };
        let inside = hostport.get(1..end).unwrap_or_default();
        if inside.is_empty()
            || !inside
                .iter()
                .all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.'))
        {
            return false;
        }
        let rest = hostport.get(end + 1..).unwrap_or_default();
        match rest.split_first() {
            None => (inside, None),
            Some((b':', port)) => (inside, Some(port)),
            Some(_) => return false,
        }
    } else {
        match hostport.iter().rposition(|&b| b == b':') {
            Some(i) => (hostport.get(..i).unwrap_or_default(), hostport.get(i + 1..)),
            None => (hostport, None),
        }
    };
    !host.is_empty()
        && chars_ok(host, |b| is_unreserved(b) || is_sub_delim(b) || b == b':')
        && port.is_none_or(|p| p.iter().all(u8::is_ascii_digit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for ok in ["", "/", "/moq", "/a/b%20c", "/x?y=1&z", "/a:b@c"] {
            assert!(is_valid_path(ok.as_bytes()), "{ok}");
        }
        for bad in ["moq", "/a b", "/%zz", "/a#frag", "/\u{e9}"] {
            assert!(!is_valid_path(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn authorities() {
        for ok in [
            "example.com",
            "example.com:443",
            "127.0.0.1:4443",
            "[::1]:443",
            "user@host",
        ] {
            assert!(is_valid_authority(ok.as_bytes()), "{ok}");
        }
        for bad in ["", ":443", "host:44x", "[::1", "ho st", "[]:1"] {
            assert!(!is_valid_authority(bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn peer_setup_rules() {
        let with_path = SetupOptions {
            path: Some(Bytes::from_static(b"/x")),
            ..Default::default()
        };
        let err = |o: &SetupOptions, role, kind| {
            check_peer_setup(o, role, kind).unwrap_err().session_code()
        };
        assert_eq!(
            err(&with_path, Role::Client, TransportKind::RawQuic),
            SessionErrorCode::INVALID_PATH
        );
        assert_eq!(
            err(&with_path, Role::Server, TransportKind::WebTransport),
            SessionErrorCode::INVALID_PATH
        );
        assert!(check_peer_setup(&with_path, Role::Server, TransportKind::RawQuic).is_ok());
        let bad_path = SetupOptions {
            path: Some(Bytes::from_static(b"x y")),
            ..Default::default()
        };
        assert_eq!(
            err(&bad_path, Role::Server, TransportKind::RawQuic),
            SessionErrorCode::MALFORMED_PATH
        );
        let bad_auth = SetupOptions {
            authority: Some(Bytes::from_static(b":1")),
            ..Default::default()
        };
        assert_eq!(
            err(&bad_auth, Role::Server, TransportKind::RawQuic),
            SessionErrorCode::MALFORMED_AUTHORITY
        );
        assert_eq!(
            err(&bad_auth, Role::Client, TransportKind::RawQuic),
            SessionErrorCode::INVALID_AUTHORITY
        );
    }
}
