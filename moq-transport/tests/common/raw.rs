//! Raw MOQT peers for misbehaviour tests: a bare quinn client or server that writes whatever
//! bytes a test asks for, facing one of our `Session`s over loopback.
//!
//! Nothing here checks the protocol on the sending side: tests build well-formed messages with
//! the moq-core encoders ([`encode`]) and malformed ones by hand ([`frame`], [`put_vi`],
//! [`put_namespace`]). The close code our side chose is read with [`RawConn::closed_code`].
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use moq_core::Version;
use moq_core::codes::SessionErrorCode;
use moq_core::coding::Vi64;
use moq_core::message::{
    Address, ClientSetup, Envelope, Message, MessageReader, ServerSetup, Setup, SetupOptions,
};
use moq_transport::endpoint::{Client, ClientConfig, transport_config};
use moq_transport::tls::{Certificate, ClientTls, server_config};
use moq_transport::{Error, Session, SessionConfig};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};

use super::{TestServer, init_tracing};

/// The MOQT_IMPLEMENTATION a raw peer announces.
pub const RAW_IMPLEMENTATION: &str = "raw-test-peer";

/// SETUP options of a raw peer: only MOQT_IMPLEMENTATION.
pub fn raw_setup() -> SetupOptions {
    SetupOptions {
        implementation: Some(RAW_IMPLEMENTATION.into()),
        ..Default::default()
    }
}

/// Encodes a well-formed control message with its framing.
pub fn encode(msg: impl Into<Message>, v: Version) -> Vec<u8> {
    msg.into().encode_to_vec(v).unwrap()
}

/// Appends a vi64.
pub fn put_vi(buf: &mut Vec<u8>, x: u64) {
    Vi64::encode(x, buf);
}

/// A vi64 on its own.
pub fn vi(x: u64) -> Vec<u8> {
    let mut out = Vec::new();
    put_vi(&mut out, x);
    out
}

/// Appends a Track Namespace: Number of Fields, then each field length-prefixed.
pub fn put_namespace(buf: &mut Vec<u8>, fields: &[&[u8]]) {
    put_vi(buf, fields.len() as u64);
    for f in fields {
        put_vi(buf, f.len() as u64);
        buf.extend_from_slice(f);
    }
}

/// Frames `body` as a control message: Type (vi64), Length (16 bits), Body.
pub fn frame(ty: u64, body: &[u8]) -> Vec<u8> {
    let len = u16::try_from(body.len()).expect("body fits in a frame");
    frame_with_len(ty, len, body)
}

/// Like [`frame`] but with a Length that need not match the body.
pub fn frame_with_len(ty: u64, len: u16, body: &[u8]) -> Vec<u8> {
    let mut out = vi(ty);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// Reads framed control messages from a quinn receive stream.
#[derive(Debug)]
pub struct MsgReader {
    /// The stream.
    pub recv: quinn::RecvStream,
    msgs: MessageReader,
    version: Version,
}

impl MsgReader {
    pub fn new(recv: quinn::RecvStream, v: Version) -> Self {
        MsgReader {
            recv,
            msgs: MessageReader::new(v),
            version: v,
        }
    }

    /// The next message; `Ok(None)` on a FIN at a message boundary, `Err` on a reset or a lost
    /// connection. Panics on bytes that do not decode: our side must never send those.
    pub async fn next(&mut self) -> Result<Option<Message>, quinn::ReadError> {
        loop {
            if let Some(m) = self
                .msgs
                .next_message()
                .expect("our side sent a bad message")
            {
                return Ok(Some(m));
            }
            match self.recv.read_chunk(64 * 1024, true).await? {
                Some(chunk) => self.msgs.push(&chunk.bytes),
                None => {
                    assert_eq!(self.msgs.buffered(), 0, "FIN inside a message");
                    return Ok(None);
                }
            }
        }
    }

    /// The next frame of a draft-14..16 control stream: its wire type, the message and the
    /// request it is addressed to. Panics on a FIN, a reset or bytes that do not decode.
    pub async fn expect_addressed(&mut self) -> (u64, Message, Option<Address>) {
        let v = self.version;
        let frame = self.expect_frame().await;
        let mut ty = &frame[..];
        let code = if v.quic_varints() {
            moq_core::coding::QuicVarInt::decode(&mut ty).unwrap()
        } else {
            Vi64::decode(&mut ty).unwrap()
        };
        let (m, a) =
            Message::decode_addressed(&mut &frame[..], v).expect("our side sent a bad message");
        (code, m, a)
    }

    /// The next message of a response stream of a session that negotiated the MoQ Cluster
    /// extension (NAMESPACE in its extended form). Panics on a FIN, a reset or bytes that do
    /// not decode.
    pub async fn expect_clustered(&mut self) -> Message {
        let mut frame = self.expect_frame().await;
        Message::decode_clustered(&mut frame, self.version).expect("our side sent a bad message")
    }

    /// The next whole frame. Panics on a FIN, a reset or a frame that cannot be delimited.
    async fn expect_frame(&mut self) -> Bytes {
        loop {
            if let Some(frame) = self.msgs.next_frame().expect("our side sent a bad frame") {
                return frame;
            }
            match self
                .recv
                .read_chunk(64 * 1024, true)
                .await
                .expect("stream failed")
            {
                Some(chunk) => self.msgs.push(&chunk.bytes),
                None => panic!("stream ended"),
            }
        }
    }

    /// The next message, which must exist.
    pub async fn expect(&mut self) -> Message {
        self.next()
            .await
            .expect("stream failed")
            .expect("stream ended")
    }
}

/// One raw connection, either end.
#[derive(Debug)]
pub struct RawConn {
    pub conn: quinn::Connection,
    pub version: Version,
    /// Our control stream, once opened.
    pub control: Option<quinn::SendStream>,
    /// The peer's control stream, after its SETUP was read.
    pub peer_control: Option<MsgReader>,
    /// Kept so the endpoint outlives the connection.
    _endpoint: quinn::Endpoint,
}

impl RawConn {
    /// Connects a raw client over QUIC to 127.0.0.1:`port`, offering `version`'s ALPN and
    /// trusting the certificate with `fingerprint`. Sends nothing.
    pub async fn connect(port: u16, fingerprint: [u8; 32], version: Version) -> RawConn {
        init_tracing();
        let tls = ClientTls::pinned(fingerprint)
            .client_config(&[version.alpn()])
            .unwrap();
        let mut cfg = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()));
        cfg.transport_config(Arc::new(transport_config()));
        let endpoint = quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let conn = endpoint
            .connect_with(
                cfg,
                SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                "localhost",
            )
            .unwrap()
            .await
            .unwrap();
        RawConn {
            conn,
            version,
            control: None,
            peer_control: None,
            _endpoint: endpoint,
        }
    }

    /// Connects a raw client to `srv` and exchanges SETUP (ours is [`raw_setup`]); returns the
    /// raw end, the server's SETUP options, and the server's session.
    pub async fn to_server(
        srv: &mut TestServer,
        version: Version,
    ) -> (RawConn, SetupOptions, Session) {
        let mut raw = RawConn::connect(srv.port(), srv.cert.fingerprint(), version).await;
        let (options, session) = tokio::join!(raw.handshake(raw_setup()), srv.server.accept());
        let session = session.expect("server closed");
        srv.sessions.push(session.clone());
        (raw, options, session)
    }

    /// Opens a unidirectional stream, writes `bytes` and keeps it as our control stream.
    pub async fn open_control(&mut self, bytes: &[u8]) {
        let s = self.open_uni(bytes).await;
        self.control = Some(s);
    }

    /// Opens our control stream with SETUP.
    pub async fn send_setup(&mut self, options: SetupOptions) {
        let bytes = encode(Setup { options }, self.version);
        self.open_control(&bytes).await;
    }

    /// Writes more bytes on our control stream.
    pub async fn write_control(&mut self, bytes: &[u8]) {
        self.control
            .as_mut()
            .expect("no control stream")
            .write_all(bytes)
            .await
            .unwrap();
    }

    /// Accepts the peer's control stream and reads its SETUP.
    pub async fn read_setup(&mut self) -> SetupOptions {
        let recv = self.conn.accept_uni().await.unwrap();
        let mut reader = MsgReader::new(recv, self.version);
        match reader.expect().await {
            Message::Setup(s) => {
                self.peer_control = Some(reader);
                s.options
            }
            m => panic!("control stream starts with {}", m.name()),
        }
    }

    /// Sends our SETUP, then reads the peer's.
    pub async fn handshake(&mut self, options: SetupOptions) -> SetupOptions {
        self.send_setup(options).await;
        self.read_setup().await
    }

    /// Drafts 14-16, as the client: opens the one bidirectional control stream with
    /// CLIENT_SETUP (`versions` only matter at draft-14; MAX_REQUEST_ID 1000) and reads
    /// SERVER_SETUP.
    pub async fn single_setup(
        &mut self,
        versions: Vec<u64>,
        options: SetupOptions,
    ) -> (SingleControl, ServerSetup) {
        let (mut send, recv) = self.conn.open_bi().await.unwrap();
        let setup = ClientSetup {
            versions,
            max_request_id: Some(1000),
            options,
        };
        let bytes = encode(setup, self.version);
        send.write_all(&bytes).await.unwrap();
        let mut reader = MsgReader::new(recv, self.version);
        match reader.expect_addressed().await {
            (_, Message::ServerSetup(s), _) => (
                SingleControl {
                    send,
                    reader,
                    version: self.version,
                },
                s,
            ),
            (_, m, _) => panic!("control stream starts with {}", m.name()),
        }
    }

    /// Drafts 14-16, as the server: accepts the client's control stream, reads CLIENT_SETUP
    /// and answers SERVER_SETUP granting `max_request_id` (selecting draft-14 when that is the
    /// version).
    pub async fn single_accept(&mut self, max_request_id: u64) -> SingleControl {
        let (mut send, recv) = self.conn.accept_bi().await.unwrap();
        let mut reader = MsgReader::new(recv, self.version);
        let (_, first, _) = reader.expect_addressed().await;
        assert!(matches!(first, Message::ClientSetup(_)), "{first:?}");
        let v = self.version;
        let setup = ServerSetup {
            version: v.setup_has_versions().then(|| v.setup_number()),
            max_request_id: Some(max_request_id),
            options: raw_setup(),
        };
        send.write_all(&encode(setup, v)).await.unwrap();
        SingleControl {
            send,
            reader,
            version: v,
        }
    }

    /// Opens a unidirectional stream and writes `bytes` on it.
    pub async fn open_uni(&self, bytes: &[u8]) -> quinn::SendStream {
        let mut s = self.conn.open_uni().await.unwrap();
        s.write_all(bytes).await.unwrap();
        s
    }

    /// Opens a request stream and writes `bytes` on it.
    pub async fn open_request(&self, bytes: &[u8]) -> (quinn::SendStream, MsgReader) {
        let (mut send, recv) = self.conn.open_bi().await.unwrap();
        send.write_all(bytes).await.unwrap();
        (send, MsgReader::new(recv, self.version))
    }

    /// Accepts the peer's next request stream and reads its first message.
    pub async fn accept_request(&self) -> (quinn::SendStream, MsgReader, Message) {
        let (send, recv) = self.conn.accept_bi().await.unwrap();
        let mut reader = MsgReader::new(recv, self.version);
        let first = reader.expect().await;
        (send, reader, first)
    }

    /// Sends a datagram.
    pub fn send_datagram(&self, bytes: &[u8]) {
        self.conn
            .send_datagram(Bytes::copy_from_slice(bytes))
            .unwrap();
    }

    /// Waits for the peer to close the connection and returns its MOQT session close code and
    /// reason phrase.
    pub async fn closed(&self) -> (SessionErrorCode, String) {
        match self.conn.closed().await {
            quinn::ConnectionError::ApplicationClosed(c) => (
                SessionErrorCode(c.error_code.into_inner()),
                String::from_utf8_lossy(&c.reason).into_owned(),
            ),
            e => panic!("expected an application close, got {e:?}"),
        }
    }

    /// Waits for the peer to close the connection and returns its MOQT session close code.
    pub async fn closed_code(&self) -> SessionErrorCode {
        self.closed().await.0
    }

    /// True while nobody has closed the connection.
    pub fn is_open(&self) -> bool {
        self.conn.close_reason().is_none()
    }
}

/// A raw server on an ephemeral loopback port, for our [`Client`] to connect to.
#[derive(Debug)]
pub struct RawServer {
    pub endpoint: quinn::Endpoint,
    pub cert: Certificate,
    pub port: u16,
}

impl RawServer {
    /// Listens on 127.0.0.1 offering `versions`' ALPNs in that preference order.
    pub fn start(versions: &[Version]) -> RawServer {
        init_tracing();
        let cert = Certificate::generate(&["localhost".into()]).unwrap();
        let alpns: Vec<&str> = versions.iter().map(|v| v.alpn()).collect();
        let tls = server_config(&cert, &alpns).unwrap();
        let mut cfg =
            quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls).unwrap()));
        cfg.transport_config(Arc::new(transport_config()));
        let endpoint =
            quinn::Endpoint::server(cfg, SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let port = endpoint.local_addr().unwrap().port();
        RawServer {
            endpoint,
            cert,
            port,
        }
    }

    /// The `moqt://` URL of this server.
    pub fn url(&self) -> String {
        format!("moqt://127.0.0.1:{}/moq", self.port)
    }

    /// One of our clients, pinned to this server's certificate.
    pub fn client(&self, versions: Vec<Version>) -> Client {
        self.client_with(versions, SessionConfig::default())
    }

    /// [`RawServer::client`] with a session configuration.
    pub fn client_with(&self, versions: Vec<Version>, session: SessionConfig) -> Client {
        Client::new(ClientConfig {
            tls: ClientTls::pinned(self.cert.fingerprint()),
            versions,
            session,
            share_indexes: false,
            ..Default::default()
        })
        .unwrap()
    }

    /// Accepts the next connection; sends nothing.
    pub async fn accept(&self) -> RawConn {
        let conn = self
            .endpoint
            .accept()
            .await
            .expect("endpoint closed")
            .await
            .unwrap();
        let alpn = conn
            .handshake_data()
            .unwrap()
            .downcast::<quinn::crypto::rustls::HandshakeData>()
            .unwrap()
            .protocol
            .expect("no ALPN");
        RawConn {
            conn,
            version: Version::from_alpn(&alpn).expect("a MOQT ALPN"),
            control: None,
            peer_control: None,
            _endpoint: self.endpoint.clone(),
        }
    }

    /// Connects `client` to this server, which answers with SETUP `options`; returns what
    /// `connect` returned and the raw end (whose `peer_control` holds the client's SETUP).
    pub async fn connect(
        &self,
        client: &Client,
        options: SetupOptions,
    ) -> (Result<Session, Error>, RawConn) {
        let url = self.url();
        tokio::join!(client.connect(&url), async {
            let mut raw = self.accept().await;
            raw.handshake(options).await;
            raw
        })
    }
}

/// Drafts 14-16: a raw end of the one bidirectional control stream.
#[derive(Debug)]
pub struct SingleControl {
    pub send: quinn::SendStream,
    pub reader: MsgReader,
    pub version: Version,
}

impl SingleControl {
    /// Sends `msg` addressed to `address` (`None` for requests and session messages), as the
    /// answer to a request of kind `answers`.
    pub async fn send(
        &mut self,
        msg: impl Into<Message>,
        address: Option<Address>,
        answers: Option<moq_core::message::RequestType>,
    ) {
        let mut bytes = Vec::new();
        msg.into()
            .encode_addressed(&Envelope { address, answers }, &mut bytes, self.version)
            .unwrap();
        self.send.write_all(&bytes).await.unwrap();
    }

    /// Writes raw bytes.
    pub async fn write(&mut self, bytes: &[u8]) {
        self.send.write_all(bytes).await.unwrap();
    }

    /// The next frame: its wire type, the message, its address.
    pub async fn next(&mut self) -> (u64, Message, Option<Address>) {
        self.reader.expect_addressed().await
    }
}
