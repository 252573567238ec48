//! Section 1: loopback throughput of one raw quinn unidirectional stream against our session
//! carrying objects, on one long subgroup and with one subgroup (stream) per object.
//!
//! Both use `moq_transport::endpoint::transport_config()` and the same rustls configuration
//! (`moq_transport::tls`); sender and receiver run in this process. Each case writes as fast
//! as it can for a fixed time, then the receiver drains; the figure is bytes received over the
//! time from the first write to the last byte read.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use moq_core::codes::PublishDoneCode;
use moq_core::data::SubgroupId;
use moq_core::message::Parameters;
use moq_core::{FullTrackName, LocationFilter, TrackNamespace, Version};
use moq_transport::endpoint::{self, ClientConfig, ServerConfig, transport_config};
use moq_transport::tls::{Certificate, ClientTls};
use moq_transport::track::{Incoming, IncomingSubgroup, SubscribeResponse, TrackEvent};
use moq_transport::transport::credit;
use moq_transport::{Session, SessionConfig};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use tokio::sync::Notify;

/// What section 1 runs.
#[derive(Clone, Debug)]
pub struct ThroughputConfig {
    /// How long each case writes.
    pub duration: Duration,
    /// Rounds over all cases (interleaved); each figure is the median round.
    pub repeats: usize,
    /// Object sizes to try.
    pub sizes: Vec<usize>,
    /// The draft our session speaks.
    pub version: Version,
    /// The cases to run (`None`: all); the others report 0 (for profiling one case).
    pub cases: Option<Vec<Case>>,
}

/// One case of section 1 (`--raw-cases` names them in kebab case).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Case {
    /// Raw quinn, one stream, 64 KiB writes (the baseline every ratio divides by).
    Raw,
    /// Raw quinn, one stream per object-sized chunk.
    RawStreamPerObject,
    /// Raw quinn, one stream written in object-sized chunks.
    RawObjectWrites,
    /// Ours, one object per `write_object` on one subgroup.
    OneSubgroup,
    /// Ours, [`BATCH`] objects per `write_objects` on one subgroup.
    Batched,
    /// Ours, one subgroup stream per object.
    StreamPerObject,
}

impl ThroughputConfig {
    fn runs(&self, case: Case) -> bool {
        self.cases.as_ref().is_none_or(|c| c.contains(&case))
    }

    /// The default run: 1 KiB, 16 KiB and 64 KiB, draft-19; 3 rounds of 1 s per case.
    pub fn full() -> Self {
        ThroughputConfig {
            duration: Duration::from_secs(1),
            repeats: 3,
            sizes: vec![1024, 16 * 1024, 64 * 1024],
            version: Version::Draft19,
            cases: None,
        }
    }

    /// A smoke run: one round of 0.2 s per case.
    pub fn quick() -> Self {
        ThroughputConfig {
            duration: Duration::from_millis(200),
            repeats: 1,
            ..Self::full()
        }
    }
}

/// One measurement: bytes over seconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Rate {
    /// Payload bytes delivered.
    pub bytes: u64,
    /// Objects delivered (0 for the raw stream).
    pub objects: u64,
    /// From the first write to the last byte read.
    pub seconds: f64,
}

impl Rate {
    /// Megabytes (10^6) per second.
    pub fn mb_per_s(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / self.seconds / 1e6
        } else {
            0.0
        }
    }
}

/// One object size.
#[derive(Clone, Copy, Debug)]
pub struct SizeRow {
    /// The object size in bytes.
    pub size: usize,
    /// All objects on one subgroup stream.
    pub one_subgroup: Rate,
    /// All objects on one subgroup stream, [`BATCH`] per write
    /// (`SubgroupSender::write_objects`).
    pub one_subgroup_batched: Rate,
    /// One subgroup stream per object.
    pub stream_per_object: Rate,
    /// Raw quinn with one stream per object-sized chunk (what QUIC streams alone cost).
    pub raw_stream_per_object: Rate,
    /// Raw quinn with one stream written in object-sized chunks (what a write of that size
    /// alone costs).
    pub raw_object_writes: Rate,
}

/// The result of section 1.
#[derive(Clone, Debug)]
pub struct ThroughputReport {
    /// One raw quinn unidirectional stream.
    pub raw: Rate,
    /// Our session, per object size.
    pub rows: Vec<SizeRow>,
    /// The draft our session spoke.
    pub version: Version,
    /// Rounds; each figure is the median.
    pub repeats: usize,
}

impl ThroughputReport {
    /// The section as text.
    pub fn render(&self) -> String {
        let raw = self.raw.mb_per_s();
        let mut out = String::new();
        out.push_str(&format!(
            "raw quinn, one unidirectional stream (64 KiB writes): {raw:.0} MB/s\n"
        ));
        out.push_str(&format!(
            "our session ({}, raw QUIC), subscriber reads whole objects:\n",
            self.version
        ));
        out.push_str(&format!(
            "  {:>7}  {:>22}  {:>22}  {:>27}  {:>27}\n",
            "object",
            "one subgroup",
            "one stream per object",
            "raw quinn, stream/object",
            "raw quinn, object writes"
        ));
        for r in &self.rows {
            let a = r.one_subgroup.mb_per_s();
            let b = r.stream_per_object.mb_per_s();
            let c = r.raw_stream_per_object.mb_per_s();
            let d = r.raw_object_writes.mb_per_s();
            out.push_str(&format!(
                "  {:>7}  {:>7.0} MB/s ({:>5.2}x)  {:>7.0} MB/s ({:>5.2}x)  {:>7.0} MB/s (ours {:>4.2}x)  {:>7.0} MB/s (ours {:>4.2}x)\n",
                size_label(r.size),
                a,
                ratio(a, raw),
                b,
                ratio(b, raw),
                c,
                ratio(b, c),
                d,
                ratio(a, d),
            ));
        }
        for r in &self.rows {
            let a = r.one_subgroup_batched.mb_per_s();
            out.push_str(&format!(
                "  {:>7}  one subgroup, {BATCH} objects per write: {:.0} MB/s ({:.2}x)\n",
                size_label(r.size),
                a,
                ratio(a, raw),
            ));
        }
        out.push_str(&format!(
            "  (x = ours / raw quinn, one stream; then raw quinn with one stream per object, and \
             ours per object / it; last, raw quinn writing object-sized chunks on one stream, \
             and ours on one subgroup / it; medians of {} interleaved rounds)\n",
            self.repeats
        ));
        out
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// "1 KiB", "64 KiB", "300 B".
pub fn size_label(n: usize) -> String {
    if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// Runs section 1.
pub async fn run(cfg: &ThroughputConfig) -> Result<ThroughputReport> {
    let pair = SessionPair::connect(cfg.version).await?;
    let mut raw = Vec::new();
    // Per size, each round's: one subgroup, stream per object, raw stream per object, raw
    // object-sized writes.
    type Rounds = (Vec<Rate>, Vec<Rate>, Vec<Rate>, Vec<Rate>, Vec<Rate>);
    let mut ours: Vec<Rounds> = cfg.sizes.iter().map(|_| Default::default()).collect();
    let mut case = 0u64;
    for _ in 0..cfg.repeats.max(1) {
        if cfg.runs(Case::Raw) {
            raw.push(
                raw_quinn(cfg.duration, RawShape::OneStream(64 * 1024))
                    .await
                    .context("raw quinn stream")?,
            );
        }
        for (&size, (one, batched, per, raw_per, raw_writes)) in
            cfg.sizes.iter().zip(ours.iter_mut())
        {
            if cfg.runs(Case::RawStreamPerObject) {
                raw_per.push(
                    raw_quinn(cfg.duration, RawShape::StreamPer(size))
                        .await
                        .with_context(|| format!("raw quinn, {} per stream", size_label(size)))?,
                );
            }
            if cfg.runs(Case::RawObjectWrites) {
                raw_writes.push(
                    raw_quinn(cfg.duration, RawShape::OneStream(size))
                        .await
                        .with_context(|| format!("raw quinn, {} writes", size_label(size)))?,
                );
            }
            if cfg.runs(Case::OneSubgroup) {
                one.push(
                    pair.transfer(case, size, Shape::OneSubgroup(1), cfg.duration)
                        .await
                        .with_context(|| format!("{} objects on one subgroup", size_label(size)))?,
                );
            }
            if cfg.runs(Case::Batched) {
                batched.push(
                    pair.transfer(case + 1, size, Shape::OneSubgroup(BATCH), cfg.duration)
                        .await
                        .with_context(|| {
                            format!("{} objects, {BATCH} per write", size_label(size))
                        })?,
                );
            }
            if cfg.runs(Case::StreamPerObject) {
                per.push(
                    pair.transfer(case + 2, size, Shape::StreamPerObject, cfg.duration)
                        .await
                        .with_context(|| {
                            format!("{} objects, one stream each", size_label(size))
                        })?,
                );
            }
            case += 3;
        }
    }
    pair.close();
    let rows = cfg
        .sizes
        .iter()
        .zip(ours)
        .map(
            |(&size, (one, batched, per, raw_per, raw_writes))| SizeRow {
                size,
                one_subgroup: median(one),
                one_subgroup_batched: median(batched),
                stream_per_object: median(per),
                raw_stream_per_object: median(raw_per),
                raw_object_writes: median(raw_writes),
            },
        )
        .collect();
    Ok(ThroughputReport {
        raw: median(raw),
        rows,
        version: cfg.version,
        repeats: cfg.repeats.max(1),
    })
}

/// Objects per write in the batched case.
pub const BATCH: usize = 16;

/// How a case sends its objects.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// All on one subgroup stream, this many per write.
    OneSubgroup(usize),
    /// One subgroup stream (group) each.
    StreamPerObject,
}

/// The median by throughput.
fn median(mut rates: Vec<Rate>) -> Rate {
    rates.sort_by(|a, b| a.mb_per_s().total_cmp(&b.mb_per_s()));
    rates.get(rates.len() / 2).copied().unwrap_or_default()
}

const RAW_ALPN: &str = "moq-bench-raw";

pub(crate) fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// Raw quinn endpoints with our transport and TLS configuration: a client, and a server
/// whose address it dials.
pub(crate) struct RawEndpoints {
    pub(crate) client: quinn::Endpoint,
    pub(crate) server: quinn::Endpoint,
}

impl RawEndpoints {
    /// With `all_streams`, the stream limits are the most our sessions grow to (for
    /// throughput); otherwise what they start with (quinn allocates every stream the limit
    /// allows at once, which a handshake pays for).
    pub(crate) fn new(all_streams: bool) -> Result<RawEndpoints> {
        let cert = Certificate::generate(&["localhost".to_string()])?;
        let transport = || {
            let mut t = transport_config();
            if all_streams {
                t.max_concurrent_uni_streams(credit::MAX_UNI_STREAMS.into());
                t.max_concurrent_bidi_streams(credit::MAX_BIDI_STREAMS.into());
            }
            Arc::new(t)
        };
        let tls = moq_transport::tls::server_config(&cert, &[RAW_ALPN])?;
        let mut server_cfg = quinn::ServerConfig::with_crypto(Arc::new(
            QuicServerConfig::try_from(tls).map_err(|e| anyhow!("{e}"))?,
        ));
        server_cfg.transport_config(transport());
        let server = quinn::Endpoint::server(server_cfg, loopback())?;
        let tls = ClientTls::pinned(cert.fingerprint()).client_config(&[RAW_ALPN])?;
        let mut client_cfg = quinn::ClientConfig::new(Arc::new(
            QuicClientConfig::try_from(tls).map_err(|e| anyhow!("{e}"))?,
        ));
        client_cfg.transport_config(transport());
        let mut client = quinn::Endpoint::client(loopback())?;
        client.set_default_client_config(client_cfg);
        Ok(RawEndpoints { client, server })
    }

    /// One connection: (client side, server side), once both sides finished the handshake.
    pub(crate) async fn connect(&self) -> Result<(quinn::Connection, quinn::Connection)> {
        let addr = self.server.local_addr()?;
        let accept = async {
            let incoming = self.server.accept().await.context("no connection")?;
            anyhow::Ok(incoming.await?)
        };
        let (c, s) = tokio::join!(self.client.connect(addr, "localhost")?, accept);
        Ok((c?, s?))
    }
}

/// A raw quinn connection with our transport and TLS configuration.
async fn raw_pair() -> Result<(quinn::Connection, quinn::Connection, quinn::Endpoint)> {
    let endpoints = RawEndpoints::new(true)?;
    let (c, s) = endpoints.connect().await?;
    Ok((c, s, endpoints.server))
}

/// What raw quinn writes.
#[derive(Clone, Copy, Debug)]
pub enum RawShape {
    /// One unidirectional stream, written in chunks of this many bytes.
    OneStream(usize),
    /// One stream per chunk of this many bytes.
    StreamPer(usize),
}

/// Raw quinn for `duration`, writing `shape`.
pub async fn raw_quinn(duration: Duration, shape: RawShape) -> Result<Rate> {
    let stream_per = match shape {
        RawShape::StreamPer(n) => Some(n),
        RawShape::OneStream(_) => None,
    };
    let (client, server, server_endpoint) = raw_pair().await?;
    let counter = Arc::new(Counter::default());
    let reader = {
        let counter = counter.clone();
        tokio::spawn(async move {
            while let Ok(mut recv) = server.accept_uni().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut bytes = 0u64;
                    while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX, true).await {
                        bytes += chunk.bytes.len() as u64;
                        if stream_per.is_none() {
                            counter.add(chunk.bytes.len() as u64);
                        }
                    }
                    if stream_per.is_some() {
                        counter.add(bytes);
                    }
                });
            }
        })
    };
    let chunk = Bytes::from(vec![
        0x5au8;
        match shape {
            RawShape::OneStream(n) | RawShape::StreamPer(n) => n,
        }
    ]);
    let start = Instant::now();
    let deadline = start + duration;
    let mut written = 0u64;
    let mut objects = 0u64;
    match stream_per {
        None => {
            let mut send = client.open_uni().await?;
            while Instant::now() < deadline {
                send.write_chunk(chunk.clone()).await?;
                written += chunk.len() as u64;
            }
            send.finish()?;
        }
        Some(_) => {
            while Instant::now() < deadline {
                let mut send = client.open_uni().await?;
                send.write_chunk(chunk.clone()).await?;
                send.finish()?;
                written += chunk.len() as u64;
                objects += 1;
            }
        }
    }
    let done = tokio::time::timeout(Duration::from_secs(60), counter.wait_for(written)).await;
    let end = Instant::now();
    reader.abort();
    client.close(0u32.into(), b"done");
    server_endpoint.close(0u32.into(), b"done");
    if done.is_err() {
        bail!(
            "raw quinn delivered {} of {written} bytes within 60 s",
            counter.bytes.load(Ordering::SeqCst)
        );
    }
    Ok(Rate {
        bytes: written,
        objects,
        seconds: end.duration_since(start).as_secs_f64(),
    })
}

/// A connected client session and the server session it reached.
struct SessionPair {
    client: Session,
    server: Session,
    _endpoint: endpoint::Server,
}

impl SessionPair {
    async fn connect(version: Version) -> Result<SessionPair> {
        let cert = Certificate::generate(&["localhost".to_string()])?;
        let fingerprint = cert.fingerprint();
        let mut config = ServerConfig::new(loopback(), cert);
        config.versions = vec![version];
        config.webtransport = false;
        config.session = SessionConfig::default().with_requests();
        let server = endpoint::Server::bind(config)?;
        let port = server.local_addr()?.port();
        let client = endpoint::Client::new(ClientConfig {
            tls: ClientTls::pinned(fingerprint),
            versions: vec![version],
            ..Default::default()
        })?;
        let url = format!("moqt://127.0.0.1:{port}/");
        let (client, server_session) = tokio::join!(client.connect(&url), server.accept());
        Ok(SessionPair {
            client: client?,
            server: server_session.context("server closed")?,
            _endpoint: server,
        })
    }

    fn close(&self) {
        self.client
            .close(moq_core::codes::SessionErrorCode::NO_ERROR, "done");
    }

    /// Subscribes to a fresh track and sends `size`-byte objects for `duration`, as `shape`
    /// says.
    async fn transfer(
        &self,
        case: u64,
        size: usize,
        shape: Shape,
        duration: Duration,
    ) -> Result<Rate> {
        let name = FullTrackName::new(
            TrackNamespace::from_strs(["bench", "throughput"])?,
            format!("case-{case}").into_bytes(),
        )?;
        let params = Parameters {
            location_filter: Some(LocationFilter::LargestObject),
            ..Default::default()
        };
        let subscribe = self.client.subscribe(name, params);
        let incoming = self.server.incoming();
        let accept = async {
            match incoming.next().await {
                Some(Incoming::Subscribe(req)) => Ok(req
                    .accept(SubscribeResponse {
                        track_alias: None,
                        largest: None,
                        expires: None,
                        track_properties: Default::default(),
                    })
                    .await?),
                Some(_) => bail!("unexpected request"),
                None => bail!("server session ended"),
            }
        };
        let (sub, writer) = tokio::join!(subscribe, accept);
        let mut sub = sub?;
        let writer = writer?;

        let counter = Arc::new(Counter::default());
        let reader = {
            let counter = counter.clone();
            tokio::spawn(async move {
                while let Some(ev) = sub.next().await {
                    match ev {
                        Ok(TrackEvent::Subgroup(s)) => {
                            tokio::spawn(read_subgroup(s, counter.clone()));
                        }
                        Ok(TrackEvent::Datagram(_)) => {}
                        Err(_) => break,
                    }
                }
            })
        };

        let payload = Bytes::from(vec![0xa5u8; size]);
        let start = Instant::now();
        let deadline = start + duration;
        let mut objects = 0u64;
        if let Shape::OneSubgroup(batch) = shape {
            let mut sg = writer
                .open_subgroup(0, SubgroupId::Zero, None, true)
                .await?;
            while Instant::now() < deadline {
                if batch > 1 {
                    let ids = objects..objects + batch as u64;
                    sg.write_objects(ids.map(|id| (id, payload.clone())))
                        .await?;
                    objects += batch as u64;
                } else {
                    sg.write_object(objects, payload.clone()).await?;
                    objects += 1;
                }
            }
            sg.finish();
        } else {
            let mut group = 0u64;
            while Instant::now() < deadline {
                let mut sg = writer
                    .open_subgroup(group, SubgroupId::Zero, None, true)
                    .await?;
                sg.write_object(0, payload.clone()).await?;
                sg.finish();
                group += 1;
                objects += 1;
            }
        }
        let total = objects * size as u64;
        let wait = counter.wait_for(total);
        let done = tokio::time::timeout(Duration::from_secs(60), wait).await;
        let received = counter.bytes.load(Ordering::SeqCst);
        let end = Instant::now();
        tokio::spawn(async move {
            let _ = writer.finish(PublishDoneCode::TRACK_ENDED, "").await;
        });
        reader.abort();
        if done.is_err() {
            bail!("received {received} of {total} bytes within 60 s");
        }
        Ok(Rate {
            bytes: total,
            objects,
            seconds: end.duration_since(start).as_secs_f64(),
        })
    }
}

/// Bytes and objects received so far; readers wake the waiter only once the target (known
/// when the writer stops) is reached, so counting costs two atomic adds per object.
#[derive(Debug)]
struct Counter {
    bytes: AtomicU64,
    objects: AtomicU64,
    target: AtomicU64,
    reached: Notify,
}

impl Default for Counter {
    fn default() -> Self {
        Counter {
            bytes: AtomicU64::new(0),
            objects: AtomicU64::new(0),
            target: AtomicU64::new(u64::MAX),
            reached: Notify::new(),
        }
    }
}

impl Counter {
    async fn wait_for(&self, bytes: u64) {
        let notified = self.reached.notified();
        self.target.store(bytes, Ordering::SeqCst);
        if self.bytes.load(Ordering::SeqCst) >= bytes {
            return;
        }
        notified.await;
    }

    fn add(&self, bytes: u64) {
        self.objects.fetch_add(1, Ordering::Relaxed);
        let now = self.bytes.fetch_add(bytes, Ordering::SeqCst) + bytes;
        if now >= self.target.load(Ordering::SeqCst) {
            self.reached.notify_waiters();
        }
    }
}

async fn read_subgroup(mut s: IncomingSubgroup, counter: Arc<Counter>) {
    while let Ok(Some(o)) = s.next_object().await {
        counter.add(o.payload.len() as u64);
    }
}
