//! What a newcomer meets in the first hour, over loopback QUIC: connect errors that say what
//! was tried and what to do, the documented defaults of the builders, and connecting by
//! `http://` to a development server whose certificate hash is fetched and pinned.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

mod common;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use moq_client::{
    Client, ClientBuilder, ConnectError, Error, FullTrackName, NamespaceEvent, RenewRetry,
    ServeOptions, Server, TrackNamespace, Version,
};

/// Runs one case with a timeout of its own.
async fn case<F: Future>(what: &str, limit: Duration, f: F) -> F::Output {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("{what}: timed out"))
}

/// A UDP port on which nothing answers: a socket that is bound and never read.
fn silent_port() -> (std::net::UdpSocket, SocketAddr) {
    let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = socket.local_addr().unwrap();
    (socket, addr)
}

/// A server on an ephemeral loopback port accepting only `versions`, its sessions kept open.
fn server(versions: Vec<Version>) -> (Server, SocketAddr) {
    common::init_tracing();
    let server = Server::builder()
        .bind("127.0.0.1:0".parse().unwrap())
        .generate_certificate(&["localhost"])
        .versions(versions)
        .build()
        .unwrap();
    let addr = server.local_addr().unwrap();
    (server, addr)
}

/// Accepts and keeps `server`'s sessions until the task is aborted.
fn keep_accepting(server: Server) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut kept = Vec::new();
        while let Some(s) = server.accept().await {
            kept.push(s);
        }
    })
}

/// A relay that is not running: the connect timeout is an option, and the error names the
/// address tried, the time given, and the likely cause.
#[tokio::test]
async fn nothing_answering_is_named_within_the_connect_timeout() {
    let (_socket, addr) = silent_port();
    let client = Client::builder()
        .insecure()
        .connect_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = case(
        "silent port",
        Duration::from_secs(5),
        client.connect(&format!("moqt://{addr}")),
    )
    .await
    .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "{err}");
    match &err {
        Error::Connect(ConnectError::Unreachable { addr: a, timeout }) => {
            assert_eq!(*a, addr);
            assert_eq!(*timeout, Duration::from_millis(300));
        }
        e => panic!("expected Unreachable, got {e:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!("no QUIC server answered at {addr} within 0.3 s; is a relay running there?")
    );
}

/// The default connect timeout is the one documented (and shorter than the idle timeout that
/// bounded a handshake before).
#[tokio::test]
async fn the_default_connect_timeout_is_as_documented() {
    assert_eq!(
        ClientBuilder::DEFAULT_CONNECT_TIMEOUT,
        Duration::from_secs(5)
    );
    let (_socket, addr) = silent_port();
    let client = Client::builder().insecure().build().unwrap();
    let err = case(
        "silent port, default timeout",
        Duration::from_secs(8),
        client.connect(&format!("moqt://{addr}")),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Connect(ConnectError::Unreachable { timeout, .. })
                if timeout == ClientBuilder::DEFAULT_CONNECT_TIMEOUT
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("within 5 s"), "{err}");
}

/// A self-signed certificate and no pin: the error points at `fingerprint()` and
/// `insecure()`.
#[tokio::test]
async fn an_unknown_issuer_points_at_fingerprint_and_insecure() {
    let (server, addr) = server(Version::ALL.to_vec());
    let _accepting = keep_accepting(server);
    let client = Client::builder().build().unwrap();
    let url = format!("moqt://localhost:{}", addr.port());
    let err = case(
        "unknown issuer",
        Duration::from_secs(5),
        client.connect(&url),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, Error::Connect(ConnectError::UnknownIssuer { .. })),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("ClientBuilder::fingerprint") && text.contains("ClientBuilder::insecure"),
        "{text}"
    );
}

/// A pin that does not match: the error shows the fingerprint the server presented.
#[tokio::test]
async fn a_fingerprint_mismatch_shows_the_fingerprint_received() {
    let (server, addr) = server(Version::ALL.to_vec());
    let presented = server.fingerprint().to_string();
    let _accepting = keep_accepting(server);
    let client = Client::builder()
        .fingerprint(&"ab".repeat(32))
        .unwrap()
        .build()
        .unwrap();
    let url = format!("moqt://localhost:{}", addr.port());
    let err = case("mismatch", Duration::from_secs(5), client.connect(&url))
        .await
        .unwrap_err();
    match &err {
        Error::Connect(ConnectError::FingerprintMismatch { received, .. }) => {
            assert_eq!(*received, presented)
        }
        e => panic!("expected FingerprintMismatch, got {e:?}"),
    }
    assert!(err.to_string().contains(&presented), "{err}");
}

/// No version in common over raw QUIC (no common ALPN) is a variant of its own.
#[tokio::test]
async fn no_common_version_is_a_variant() {
    let (server, addr) = server(vec![Version::Draft22]);
    let fingerprint = server.fingerprint().to_string();
    let _accepting = keep_accepting(server);
    let client = Client::builder()
        .fingerprint(&fingerprint)
        .unwrap()
        .versions(vec![Version::Draft19])
        .build()
        .unwrap();
    let url = format!("moqt://localhost:{}", addr.port());
    let err = case(
        "no common version",
        Duration::from_secs(5),
        client.connect(&url),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, Error::Connect(ConnectError::NoCommonVersion { .. })),
        "{err:?}"
    );
}

/// `ClientBuilder::versions` documents the default: every supported draft, newest first. A
/// default client reaches a server that accepts only one draft, for each draft, and a default
/// server and client agree on the newest.
#[tokio::test]
async fn the_default_versions_are_every_draft_newest_first() {
    for &version in Version::ALL {
        case(&format!("{version}"), Duration::from_secs(5), async {
            let (server, addr) = server(vec![version]);
            let fingerprint = server.fingerprint().to_string();
            let _accepting = keep_accepting(server);
            let client = Client::builder()
                .fingerprint(&fingerprint)
                .unwrap()
                .build()
                .unwrap();
            let session = client
                .connect(&format!("moqt://localhost:{}", addr.port()))
                .await
                .unwrap();
            assert_eq!(session.version(), version);
        })
        .await;
    }
    case("newest", Duration::from_secs(5), async {
        // A server with the default versions too.
        let server = Server::builder()
            .bind("127.0.0.1:0".parse().unwrap())
            .build()
            .unwrap();
        let addr = server.local_addr().unwrap();
        let fingerprint = server.fingerprint().to_string();
        let _accepting = keep_accepting(server);
        let client = Client::builder()
            .fingerprint(&fingerprint)
            .unwrap()
            .build()
            .unwrap();
        let session = client
            .connect(&format!("moqt://localhost:{}", addr.port()))
            .await
            .unwrap();
        assert_eq!(Some(&session.version()), Version::ALL.first());
    })
    .await;
}

/// Serves `GET /certificate.sha256` with `fingerprint` on TCP 127.0.0.1:`port`, as
/// moq-relay's HTTP side does on the QUIC port's number, from a thread of its own (left
/// blocked in accept when the test ends). Returns how many requests it answered so far.
fn serve_certificate_hash(port: u16, fingerprint: String) -> std::sync::Arc<AtomicUsize> {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let served = std::sync::Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let answer = if request.starts_with(b"GET /certificate.sha256 ") {
                count.fetch_add(1, Ordering::SeqCst);
                format!("HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\n{fingerprint}")
            } else {
                "HTTP/1.0 404 Not Found\r\n\r\n".to_string()
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    served
}

/// `http://host:port` fetches the development server's certificate hash from
/// `/certificate.sha256` and pins it, at every connection: a client with no pin and no
/// `insecure()` connects, and connects again to a server with another certificate.
#[tokio::test]
async fn an_http_url_fetches_and_pins_the_certificate_hash() {
    let client = Client::builder().build().unwrap();
    for attempt in 0..2 {
        case(
            &format!("server {attempt}"),
            Duration::from_secs(5),
            async {
                let (server, addr) = server(Version::ALL.to_vec());
                let served = serve_certificate_hash(addr.port(), server.fingerprint().to_string());
                let _accepting = keep_accepting(server);
                let session = client
                    .connect(&format!("http://localhost:{}/moq", addr.port()))
                    .await
                    .unwrap();
                assert_eq!(Some(&session.version()), Version::ALL.first());
                assert_eq!(served.load(Ordering::SeqCst), 1);
                // The same server by moqt:// is not trusted: the pin was for that connection.
                let err = client
                    .connect(&format!("moqt://localhost:{}/moq", addr.port()))
                    .await
                    .unwrap_err();
                assert!(
                    matches!(err, Error::Connect(ConnectError::UnknownIssuer { .. })),
                    "{err:?}"
                );
            },
        )
        .await;
    }
}

/// A server that does not serve the hash: the error says what was fetched and why.
#[tokio::test]
async fn an_http_url_without_a_hash_says_what_was_fetched() {
    let (server, addr) = server(Version::ALL.to_vec());
    let _accepting = keep_accepting(server);
    // Something answers on TCP, but not with a hash.
    let listener = std::net::TcpListener::bind(("127.0.0.1", addr.port())).unwrap();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.0 404 Not Found\r\n\r\n");
        }
    });
    let client = Client::builder().build().unwrap();
    let err = case(
        "404",
        Duration::from_secs(5),
        client.connect(&format!("http://localhost:{}", addr.port())),
    )
    .await
    .unwrap_err();
    match &err {
        Error::Connect(ConnectError::CertificateHash { url, .. }) => assert_eq!(
            *url,
            format!("http://localhost:{}/certificate.sha256", addr.port())
        ),
        e => panic!("expected CertificateHash, got {e:?}"),
    }
    assert!(err.to_string().contains("200 OK"), "{err}");
}

/// One notation for names: what a person types (`chat/room1`) parses, crosses the wire, and
/// comes back from discovery written the same way; a field holding a `/` or bytes that are
/// not text round-trips escaped; the draft's rendered form is asked for by name.
#[tokio::test]
async fn names_are_typed_and_read_as_paths() {
    let cases: Vec<(&str, TrackNamespace)> = vec![
        (
            "chat/room1",
            TrackNamespace::from_strs(["chat", "room1"]).unwrap(),
        ),
        (
            "chat/a%2Fb/%FF%00",
            TrackNamespace::new([&b"chat"[..], b"a/b", &[0xff, 0x00]]).unwrap(),
        ),
    ];
    for (typed, fields) in cases {
        case(typed, Duration::from_secs(5), async {
            let (server, addr) = server(Version::ALL.to_vec());
            let fingerprint = server.fingerprint().to_string();
            let publisher = server.publisher().clone();
            let _accepting = keep_accepting(server);
            let ns: TrackNamespace = typed.parse().unwrap();
            assert_eq!(ns, fields);
            assert_eq!(ns.to_string(), typed);
            let _announced = publisher.publish_namespace(ns.clone()).unwrap();
            let name: FullTrackName = format!("{typed}/messages").parse().unwrap();
            assert_eq!(name, FullTrackName::new(ns.clone(), "messages").unwrap());

            let client = Client::builder()
                .fingerprint(&fingerprint)
                .unwrap()
                .build()
                .unwrap();
            let session = client
                .connect(&format!("moqt://localhost:{}", addr.port()))
                .await
                .unwrap();
            let mut found = session
                .subscriber()
                .subscribe_namespace("chat".parse().unwrap())
                .await
                .unwrap();
            match found.next().await.unwrap().unwrap() {
                NamespaceEvent::Added(got) => {
                    assert_eq!(got, fields);
                    assert_eq!(got.to_string(), typed);
                    assert_eq!(format!("{got}/messages"), name.to_string());
                }
                e => panic!("{e:?}"),
            }
        })
        .await;
    }
    let name: FullTrackName = "chat/room1/messages".parse().unwrap();
    assert_eq!(name.rendered().to_string(), "chat-room1--messages");
    assert_eq!(name.namespace.rendered().to_string(), "chat-room1");
}

/// The other defaults the builders' and options' docs state.
#[tokio::test]
async fn the_documented_defaults_hold() {
    // ServerBuilder::bind: "default 0.0.0.0:4443". Another program may hold the port: then
    // the error names it.
    match Server::builder().build() {
        Ok(server) => assert_eq!(
            server.local_addr().unwrap(),
            "0.0.0.0:4443".parse::<SocketAddr>().unwrap()
        ),
        Err(e) => assert!(e.to_string().contains("0.0.0.0:4443"), "{e}"),
    }
    // ServeOptions: "Default 64", "Default 32 MiB".
    let serve = ServeOptions::default();
    assert_eq!(serve.max_inflight, 64);
    assert_eq!(serve.max_backlog_bytes, 32 * 1024 * 1024);
    // SubscribeOptions::retry: "waits doubling from 100 ms to 2 s, for up to 30 s".
    let retry = RenewRetry::default();
    assert_eq!(retry.backoff.min, Duration::from_millis(100));
    assert_eq!(retry.backoff.max, Duration::from_secs(2));
    assert_eq!(retry.limit, Duration::from_secs(30));
}
