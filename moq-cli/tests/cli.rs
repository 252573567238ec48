//! The `moq` binary against a relay in this process: lines published from stdin and printed
//! by a subscriber, discovery of a namespace that comes and goes, the clock, and failures
//! that exit non-zero with one line on stderr.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::process::Stdio;

use common::{Transport, args, case, flags, moq, relay};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Lines written to `moq publish --format lines` reach `moq subscribe NS lines`, in order and
/// one per line, and the subscriber exits 0 when the publisher's input ends.
async fn lines_round_trip(transport: Transport, draft: Option<u64>) {
    let relay = relay();
    let connect = flags(&relay, transport, draft);
    let sub_args = [connect.clone(), args(&["subscribe", "test/chat", "lines"])].concat();
    let mut sub = moq("subscribe", &sub_args, Stdio::null(), Stdio::piped());
    sub.stderr_line("waiting for test/chat").await;
    let pub_args = [
        connect,
        args(&[
            "publish",
            "test/chat",
            "--format",
            "lines",
            "--group-size",
            "2",
        ]),
    ]
    .concat();
    let mut publisher = moq("publish", &pub_args, Stdio::piped(), Stdio::null());
    let mut input = publisher.child.stdin.take().unwrap();
    let sent = ["one", "two", "three", "", "five with spaces"];
    for line in sent {
        input
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
    }
    input.flush().await.unwrap();
    let mut out = BufReader::new(sub.child.stdout.take().unwrap()).lines();
    let mut received = Vec::new();
    while received.len() < sent.len() {
        let line = out
            .next_line()
            .await
            .unwrap()
            .expect("subscriber's stdout ended");
        received.push(line);
    }
    assert_eq!(received, sent);
    // The end of the input ends the track: both exit 0.
    drop(input);
    let (code, stderr) = publisher.exit().await;
    assert_eq!(code, Some(0), "publisher: {stderr:?}");
    assert!(
        stderr.iter().any(|l| l.contains("published 5 lines")),
        "{stderr:?}"
    );
    assert_eq!(
        out.next_line().await.unwrap(),
        None,
        "nothing after the lines"
    );
    let (code, stderr) = sub.exit().await;
    assert_eq!(code, Some(0), "subscriber: {stderr:?}");
}

#[tokio::test]
async fn lines_round_trip_quic() {
    case("quic", lines_round_trip(Transport::Quic, None)).await;
}

#[tokio::test]
async fn lines_round_trip_webtransport_draft14() {
    case(
        "webtransport draft-14",
        lines_round_trip(Transport::WebTransport, Some(14)),
    )
    .await;
}

#[tokio::test]
async fn lines_round_trip_quic_draft22() {
    case("quic draft-22", lines_round_trip(Transport::Quic, Some(22))).await;
}

/// `moq discover PREFIX` prints `+ NS` when a publisher appears under the prefix and `- NS`
/// when it goes, and exits 0 after `--count` events.
#[tokio::test]
async fn discover_sees_a_namespace_come_and_go() {
    case("discover", async {
        let relay = relay();
        let connect = flags(&relay, Transport::Quic, None);
        let d_args = [connect.clone(), args(&["discover", "test", "--count", "2"])].concat();
        let mut discover = moq("discover", &d_args, Stdio::null(), Stdio::piped());
        discover.stderr_line("watching namespaces").await;
        let mut out = BufReader::new(discover.child.stdout.take().unwrap()).lines();

        let pub_args = [
            connect,
            args(&["publish", "test/room", "--format", "lines"]),
        ]
        .concat();
        let mut publisher = moq("publish", &pub_args, Stdio::piped(), Stdio::null());
        assert_eq!(
            out.next_line().await.unwrap().as_deref(),
            Some("+ test/room")
        );
        // The publisher's input ends: it withdraws its namespace and exits.
        drop(publisher.child.stdin.take());
        let (code, stderr) = publisher.exit().await;
        assert_eq!(code, Some(0), "publisher: {stderr:?}");
        assert_eq!(
            out.next_line().await.unwrap().as_deref(),
            Some("- test/room")
        );
        let (code, stderr) = discover.exit().await;
        assert_eq!(code, Some(0), "discover: {stderr:?}");
    })
    .await;
}

/// `moq clock publish` and `moq clock subscribe`: the subscriber prints HH:MM:SS lines.
#[tokio::test]
async fn clock_publish_and_subscribe() {
    case("clock", async {
        let relay = relay();
        let connect = flags(&relay, Transport::WebTransport, None);
        let mut publisher = moq(
            "clock publish",
            &[connect.clone(), args(&["clock", "publish"])].concat(),
            Stdio::null(),
            Stdio::null(),
        );
        publisher.stderr_line("publishing the clock").await;
        let mut sub = moq(
            "clock subscribe",
            &[connect, args(&["clock", "subscribe"])].concat(),
            Stdio::null(),
            Stdio::piped(),
        );
        let mut out = BufReader::new(sub.child.stdout.take().unwrap()).lines();
        let line = out.next_line().await.unwrap().expect("a time");
        let fields: Vec<&str> = line.split(':').collect();
        assert_eq!(fields.len(), 3, "{line:?}");
        assert!(
            fields
                .iter()
                .all(|f| f.len() == 2 && f.parse::<u8>().is_ok()),
            "{line:?}"
        );
    })
    .await;
}

/// Failures exit 1 with one line on stderr saying what went wrong: nothing listening, a
/// certificate that is not the pinned one, an unsupported draft (clap's usage error, 2).
#[tokio::test]
async fn failures_exit_non_zero_with_one_line() {
    case("failures", async {
        let unreachable = args(&[
            "--url",
            "moqt://localhost:1",
            "--connect-timeout",
            "500ms",
            "discover",
        ]);
        let (code, stderr) = moq("unreachable", &unreachable, Stdio::null(), Stdio::null())
            .exit()
            .await;
        assert_eq!(code, Some(1));
        assert_eq!(stderr.len(), 1, "{stderr:?}");
        assert!(
            stderr[0].starts_with("moq: error: cannot connect to moqt://localhost:1"),
            "{stderr:?}"
        );

        let relay = relay();
        let port = relay.local_addr().port();
        let wrong = args(&[
            "--url",
            &format!("moqt://localhost:{port}"),
            "--fingerprint",
            &"00".repeat(32),
            "discover",
        ]);
        let (code, stderr) = moq("wrong fingerprint", &wrong, Stdio::null(), Stdio::null())
            .exit()
            .await;
        assert_eq!(code, Some(1));
        assert_eq!(stderr.len(), 1, "{stderr:?}");
        assert!(stderr[0].contains("not pinned"), "{stderr:?}");

        let (code, stderr) = moq(
            "draft",
            &args(&["--draft", "13", "discover"]),
            Stdio::null(),
            Stdio::null(),
        )
        .exit()
        .await;
        assert_eq!(code, Some(2));
        assert!(
            stderr.iter().any(|l| l.contains("unsupported draft")),
            "{stderr:?}"
        );
    })
    .await;
}

/// `--url http://host:port` fetches the relay's certificate hash from
/// `/certificate.sha256` (TCP, the QUIC port's number) and pins it: no `--fingerprint`.
#[tokio::test]
async fn http_url_pins_the_served_certificate() {
    case("http url", async {
        let relay = relay();
        let port = relay.local_addr().port();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        tokio::spawn(moq_relay::http::serve(
            listener,
            moq_relay::http::router(relay.clone(), None),
        ));
        let url = args(&["--url", &format!("http://localhost:{port}")]);
        let mut discover = moq(
            "discover",
            &[url.clone(), args(&["discover", "--count", "1"])].concat(),
            Stdio::null(),
            Stdio::piped(),
        );
        discover.stderr_line("watching namespaces").await;
        let mut out = BufReader::new(discover.child.stdout.take().unwrap()).lines();
        let _publisher = moq(
            "publish",
            &[
                url,
                args(&["publish", "pinned/by/hash", "--format", "lines"]),
            ]
            .concat(),
            Stdio::piped(),
            Stdio::null(),
        );
        assert_eq!(
            out.next_line().await.unwrap().as_deref(),
            Some("+ pinned/by/hash")
        );
        let (code, stderr) = discover.exit().await;
        assert_eq!(code, Some(0), "discover: {stderr:?}");
    })
    .await;
}

/// Ctrl-C (SIGINT) closes the session and exits 0, whether waiting for a namespace or
/// publishing lines.
#[tokio::test]
async fn ctrl_c_closes_and_exits_0() {
    case("ctrl-c", async {
        let relay = relay();
        let connect = flags(&relay, Transport::Quic, None);
        let mut sub = moq(
            "subscribe",
            &[
                connect.clone(),
                args(&["subscribe", "nobody/here", "lines"]),
            ]
            .concat(),
            Stdio::null(),
            Stdio::null(),
        );
        sub.stderr_line("waiting for nobody/here").await;
        let mut publisher = moq(
            "publish",
            &[
                connect,
                args(&["publish", "test/sigint", "--format", "lines"]),
            ]
            .concat(),
            Stdio::piped(),
            Stdio::null(),
        );
        publisher
            .stderr_line("published namespace test/sigint")
            .await;
        for p in [&sub, &publisher] {
            let pid = p.child.id().unwrap().to_string();
            let status = tokio::process::Command::new("kill")
                .args(["-INT", &pid])
                .status()
                .await
                .unwrap();
            assert!(status.success());
        }
        let (code, stderr) = sub.exit().await;
        assert_eq!(code, Some(0), "subscribe: {stderr:?}");
        let (code, stderr) = publisher.exit().await;
        assert_eq!(code, Some(0), "publish: {stderr:?}");
    })
    .await;
}
