//! Fetching a development server's certificate hash over plain HTTP, for `http://host:port`
//! URLs: `GET /certificate.sha256` on the TCP port of the same number as the QUIC one, as
//! moq-relay's HTTP side serves it (and as moq-dev's native client and `@moq/net` fetch it).
//!
//! Trusting what an unauthenticated HTTP answer says is for development only: anyone on the
//! path can answer it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::error::ConnectError;
use crate::tls::parse_fingerprint;

/// The largest answer read (a hash is 64 bytes; headers are short).
const MAX_ANSWER: usize = 16 * 1024;

/// `GET /certificate.sha256` from `addr` (`authority` for the Host header), within `timeout`.
pub(crate) async fn fetch(
    addr: SocketAddr,
    authority: &str,
    timeout: Duration,
) -> Result<[u8; 32], ConnectError> {
    let url = format!("http://{authority}/certificate.sha256");
    let failed = |reason: String| ConnectError::CertificateHash {
        url: url.clone(),
        reason,
    };
    let answer = tokio::time::timeout(timeout, get(addr, authority))
        .await
        .map_err(|_| failed(format!("no answer from {addr} within {timeout:?}")))?
        .map_err(|e| failed(format!("{addr}: {e}")))?;
    let body = parse(&answer).map_err(|e| failed(e.to_string()))?;
    parse_fingerprint(body.trim()).map_err(|_| failed(format!("not a SHA-256 hash: {body:?}")))
}

/// Sends the request (HTTP/1.0: the server closes the connection after its answer) and reads
/// the whole answer, at most [`MAX_ANSWER`] bytes.
async fn get(addr: SocketAddr, authority: &str) -> std::io::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!(
        "GET /certificate.sha256 HTTP/1.0\r\nHost: {authority}\r\nAccept: text/plain\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    stream
        .take(MAX_ANSWER as u64 + 1)
        .read_to_end(&mut answer)
        .await?;
    if answer.len() > MAX_ANSWER {
        return Err(std::io::Error::other("answer too long"));
    }
    Ok(answer)
}

/// The body of a `200` answer.
fn parse(answer: &[u8]) -> Result<&str, &'static str> {
    let text = std::str::from_utf8(answer).map_err(|_| "the answer is not text")?;
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("the answer is not HTTP")?;
    let status = head.lines().next().unwrap_or_default();
    let mut parts = status.split_whitespace();
    if !parts.next().is_some_and(|v| v.starts_with("HTTP/")) {
        return Err("the answer is not HTTP");
    }
    if parts.next() != Some("200") {
        return Err("the server did not answer 200 OK (does it serve /certificate.sha256?)");
    }
    if head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    }) {
        return Err("a chunked answer to an HTTP/1.0 request");
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        let hash = "ab".repeat(32);
        let ok = format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n{hash}\n");
        assert_eq!(parse(ok.as_bytes()).map(str::trim), Ok(hash.as_str()));
        assert!(parse(b"HTTP/1.1 404 Not Found\r\n\r\n").is_err());
        assert!(parse(b"SSH-2.0-OpenSSH\r\n").is_err());
        assert!(parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n").is_err());
    }
}
