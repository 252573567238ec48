//! A lossy UDP path for tests: a proxy between clients and a server that drops, duplicates
//! and reorders datagrams, each with its own probability, drawn from a seeded xorshift so a
//! failing run can be repeated. Each client address gets its own socket towards the server
//! (the server sees one peer per client, as through a NAT); both directions are impaired.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// The largest datagram forwarded (QUIC's are at most ~1,500 bytes on loopback).
const MAX_DATAGRAM: usize = 65_535;
/// Datagrams queued per direction of a flow; more are dropped (and counted as dropped).
const QUEUE: usize = 1024;
/// Clients served at once; datagrams from more are dropped.
const MAX_FLOWS: usize = 256;
/// How long a datagram held back for reordering waits for one to overtake it.
const HOLD: Duration = Duration::from_millis(5);

/// What the path does to each datagram, in each direction; probabilities in 0..=1.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Impairment {
    /// Dropped.
    pub(crate) drop: f64,
    /// Sent twice.
    pub(crate) duplicate: f64,
    /// Held back and sent after the next one (or after a few milliseconds).
    pub(crate) reorder: f64,
    /// The RNG's seed (each direction of each flow derives its own from it).
    pub(crate) seed: u64,
}

/// Datagrams counted by the proxy, both directions together.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Received from either side.
    pub(crate) received: AtomicU64,
    /// Dropped on purpose (or because a queue was full).
    pub(crate) dropped: AtomicU64,
    /// Sent an extra time.
    pub(crate) duplicated: AtomicU64,
    /// Sent after a later datagram.
    pub(crate) reordered: AtomicU64,
}

impl Stats {
    /// `received / dropped / duplicated / reordered` for a test's figures.
    pub(crate) fn summary(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "{} datagrams: {} dropped, {} duplicated, {} reordered",
            get(&self.received),
            get(&self.dropped),
            get(&self.duplicated),
            get(&self.reordered)
        )
    }
}

/// xorshift64*: small, fast, and enough to pick which datagram to impair.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // splitmix64 of the seed: never zero, and nearby seeds give unrelated streams.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One direction of one flow: what to send for each datagram received.
#[derive(Debug)]
struct Shaper {
    rng: Rng,
    impairment: Impairment,
    held: Option<Vec<u8>>,
    stats: Arc<Stats>,
}

impl Shaper {
    /// The datagrams to send now, in order, for `d`.
    fn shape(&mut self, d: Vec<u8>) -> Vec<Vec<u8>> {
        let i = self.impairment;
        let r = self.rng.unit();
        let mut out = Vec::new();
        if r < i.drop {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return out;
        }
        if r < i.drop + i.duplicate {
            self.stats.duplicated.fetch_add(1, Ordering::Relaxed);
            out.push(d.clone());
        } else if r < i.drop + i.duplicate + i.reorder && self.held.is_none() {
            self.stats.reordered.fetch_add(1, Ordering::Relaxed);
            self.held = Some(d);
            return out;
        }
        out.push(d);
        out.extend(self.held.take());
        out
    }
}

/// Forwards what arrives on `rx` to `to` through `socket`, shaped.
async fn pump(
    mut rx: mpsc::Receiver<Vec<u8>>,
    socket: Arc<UdpSocket>,
    to: SocketAddr,
    mut shaper: Shaper,
) {
    loop {
        let next = if shaper.held.is_some() {
            match tokio::time::timeout(HOLD, rx.recv()).await {
                Ok(d) => d,
                // Nothing overtook the held datagram: send it now.
                Err(_) => {
                    if let Some(h) = shaper.held.take() {
                        let _ = socket.send_to(&h, to).await;
                    }
                    continue;
                }
            }
        } else {
            rx.recv().await
        };
        let Some(d) = next else { return };
        for out in shaper.shape(d) {
            let _ = socket.send_to(&out, to).await;
        }
    }
}

/// The proxy; it stops (with every flow) when dropped.
#[derive(Debug)]
pub(crate) struct Proxy {
    addr: SocketAddr,
    stats: Arc<Stats>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    /// A proxy on 127.0.0.1 (an ephemeral port) to `server`.
    pub(crate) async fn start(server: SocketAddr, impairment: Impairment) -> Proxy {
        let listen = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
        let addr = listen.local_addr().unwrap();
        let stats = Arc::new(Stats::default());
        let task = tokio::spawn(run(listen, server, impairment, stats.clone()));
        Proxy { addr, stats, task }
    }

    /// The address clients connect to.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the proxy did so far.
    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The proxy's loop: a flow per client address, two shaped directions per flow. The flows'
/// tasks live in a `JoinSet` owned here, so aborting this task ends them all.
async fn run(
    listen: Arc<UdpSocket>,
    server: SocketAddr,
    impairment: Impairment,
    stats: Arc<Stats>,
) {
    let mut tasks = JoinSet::new();
    let mut flows: HashMap<SocketAddr, mpsc::Sender<Vec<u8>>> = HashMap::new();
    let mut buf = vec![0u8; MAX_DATAGRAM];
    loop {
        let Ok((n, client)) = listen.recv_from(&mut buf).await else {
            return;
        };
        stats.received.fetch_add(1, Ordering::Relaxed);
        let d = buf.get(..n).unwrap_or_default().to_vec();
        if !flows.contains_key(&client) && flows.len() < MAX_FLOWS {
            let index = flows.len() as u64;
            let shaper = |direction: u64| Shaper {
                rng: Rng::new(impairment.seed ^ (index << 1 | direction)),
                impairment,
                held: None,
                stats: stats.clone(),
            };
            let socket = Arc::new(UdpSocket::bind("127.0.0.1:0").await.unwrap());
            let (up_tx, up_rx) = mpsc::channel(QUEUE);
            let (down_tx, down_rx) = mpsc::channel(QUEUE);
            tasks.spawn(pump(up_rx, socket.clone(), server, shaper(0)));
            tasks.spawn(pump(down_rx, listen.clone(), client, shaper(1)));
            let stats = stats.clone();
            tasks.spawn(async move {
                let mut buf = vec![0u8; MAX_DATAGRAM];
                while let Ok((n, _)) = socket.recv_from(&mut buf).await {
                    stats.received.fetch_add(1, Ordering::Relaxed);
                    let d = buf.get(..n).unwrap_or_default().to_vec();
                    if down_tx.try_send(d).is_err() {
                        stats.dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
            flows.insert(client, up_tx);
        }
        let Some(up) = flows.get(&client) else {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        if up.try_send(d).is_err() {
            stats.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}
