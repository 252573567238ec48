//! A raw QUIC session's streams are quinn's own (no web-transport-quinn wrapper): over real
//! QUIC on loopback, data, FIN, acknowledgement, STOP_SENDING and RESET_STREAM with their
//! codes (raw QUIC carries a code as is, wider than WebTransport's 32 bits), and opening a
//! stream without a future.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;

use common::timeout;
use moq_transport::endpoint::transport_config;
use moq_transport::tls::{Certificate, ClientTls, server_config};
use moq_transport::transport::quic::QuicConnection;
use moq_transport::transport::{Connection, TransportError, TransportKind};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

const ALPN: &str = "moqt-19";

/// A connected raw QUIC pair: (client, server).
async fn raw_pair() -> (QuicConnection, QuicConnection) {
    let cert = Certificate::generate(&["localhost".to_string()]).unwrap();
    let tls = server_config(&cert, &[ALPN]).unwrap();
    let mut server_cfg =
        quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap()));
    server_cfg.transport_config(Arc::new(transport_config()));
    let server = quinn::Endpoint::server(server_cfg, ([127, 0, 0, 1], 0).into()).unwrap();
    let tls = ClientTls::pinned(cert.fingerprint())
        .client_config(&[ALPN])
        .unwrap();
    let mut client_cfg =
        quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
    client_cfg.transport_config(Arc::new(transport_config()));
    let mut client = quinn::Endpoint::client(([127, 0, 0, 1], 0).into()).unwrap();
    client.set_default_client_config(client_cfg);
    let addr = server.local_addr().unwrap();
    let accept = async { server.accept().await.unwrap().await.unwrap() };
    let (c, s) = tokio::join!(
        async { client.connect(addr, "localhost").unwrap().await.unwrap() },
        accept
    );
    (QuicConnection::raw(c), QuicConnection::raw(s))
}

#[tokio::test]
async fn data_fin_and_acknowledgement() {
    timeout(async {
        let (client, server) = raw_pair().await;
        assert_eq!(client.kind(), TransportKind::RawQuic);
        // Credit is there: a stream opens without a future.
        let mut send = client
            .try_open_uni()
            .expect("a stream without waiting")
            .unwrap();
        send.write_all(b"hello").await.unwrap();
        send.finish().unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        let mut got = Vec::new();
        while let Some(chunk) = recv.read_chunk(64).await.unwrap() {
            got.extend_from_slice(&chunk);
        }
        assert_eq!(got, b"hello");
        assert_eq!(send.stopped().await, Ok(None), "acknowledged, not stopped");
    })
    .await;
}

#[tokio::test]
async fn stop_and_reset_carry_wide_codes() {
    timeout(async {
        let (client, server) = raw_pair().await;
        let wide = 0x1_2345_6789u64;

        let mut send = client.open_uni().await.unwrap();
        send.write_all(b"x").await.unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        assert!(recv.read_chunk(64).await.unwrap().is_some());
        recv.stop(wide);
        assert_eq!(send.stopped().await, Ok(Some(wide)));
        assert_eq!(
            send.write_all(b"more").await,
            Err(TransportError::Stopped(wide))
        );

        let mut send = client.open_uni().await.unwrap();
        send.write_all(b"y").await.unwrap();
        let mut recv = server.accept_uni().await.unwrap();
        assert!(recv.read_chunk(64).await.unwrap().is_some());
        send.reset(wide);
        assert_eq!(recv.read_chunk(64).await, Err(TransportError::Reset(wide)));
    })
    .await;
}

#[tokio::test]
async fn bidirectional_streams_and_the_peer_closing() {
    timeout(async {
        let (client, server) = raw_pair().await;
        let (mut send, _recv) = client.open_bi().await.unwrap();
        send.write_all(b"req").await.unwrap();
        let (mut back, mut recv) = server.accept_bi().await.unwrap();
        assert_eq!(&recv.read_chunk(64).await.unwrap().unwrap()[..], b"req");
        server.close(0x42, "bye");
        let closed = TransportError::ClosedByPeer {
            code: 0x42,
            reason: "bye".into(),
        };
        assert_eq!(client.closed().await, closed);
        assert_eq!(send.write_all(b"more").await, Err(closed));
        assert_eq!(
            back.write_all(b"late").await,
            Err(TransportError::ClosedLocally)
        );
    })
    .await;
}
