//! The harness of `cluster_five.rs`: relay binaries sharing one `redis-server`, each
//! reached by clients over raw QUIC or WebTransport, and what the cases read from them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::free_port;
use crate::common::store::Store;
use crate::common::{self, Binary, ns, workdir};
use moq_client::{
    Client, NamespaceHandle, NamespaceStream, Publisher, Session, SubscribeOptions, TrackConsumer,
    TrackProducer,
};
use moq_core::FullTrackName;
use moq_relay::registry::{RedisRegistry, Registry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The lease every relay of these tests registers and heartbeats with.
pub(crate) const LEASE: Duration = Duration::from_secs(2);

/// The client transports every case runs over.
pub(crate) const SCHEMES: [&str; 2] = ["moqt", "https"];

/// One relay binary of a [`Cluster`].
pub(crate) struct Node {
    pub(crate) id: String,
    pub(crate) bin: Binary,
}

impl Node {
    pub(crate) fn port(&self) -> u16 {
        self.bin.port
    }

    /// The URL a client reaches this relay at over `scheme`.
    pub(crate) fn url(&self, scheme: &str) -> String {
        format!("{scheme}://localhost:{}/", self.port())
    }

    /// A client session to this relay over `scheme`, able to publish.
    pub(crate) async fn connect(&self, scheme: &str) -> Session {
        Client::builder()
            .fingerprint(&self.bin.fingerprint)
            .unwrap()
            .publisher(Publisher::default())
            .build()
            .unwrap()
            .connect(&self.url(scheme))
            .await
            .unwrap()
    }

    /// A publisher of `track` on this relay over `scheme`, its namespace announced.
    pub(crate) async fn publisher(&self, scheme: &str, track: &FullTrackName) -> Publishing {
        let (session, namespace) = self.announce(scheme, &track.namespace.to_string()).await;
        let producer = session.publisher().create_track(track.clone()).unwrap();
        Publishing {
            _namespace: namespace,
            producer,
            session,
        }
    }

    /// A session to this relay over `scheme` that announced (PUBLISH_NAMESPACE, answered)
    /// the namespace of `path`.
    pub(crate) async fn announce(&self, scheme: &str, path: &str) -> (Session, NamespaceHandle) {
        let session = self.connect(scheme).await;
        let namespace = session.publisher().publish_namespace(ns(path)).unwrap();
        namespace.announced().await.unwrap();
        (session, namespace)
    }

    /// A subscriber of `track` on this relay over `scheme`.
    pub(crate) async fn subscriber(
        &self,
        scheme: &str,
        track: &FullTrackName,
    ) -> (Session, TrackConsumer) {
        let session = self.connect(scheme).await;
        let consumer = session
            .subscriber()
            .subscribe(track.clone(), SubscribeOptions::default())
            .await
            .unwrap();
        (session, consumer)
    }

    /// SUBSCRIBE_NAMESPACE under `prefix` on this relay over `scheme` (for discovery across
    /// the cluster).
    pub(crate) async fn discovery(&self, scheme: &str, prefix: &str) -> (Session, NamespaceStream) {
        let session = self.connect(scheme).await;
        let stream = session
            .subscriber()
            .subscribe_namespace(ns(prefix))
            .await
            .unwrap();
        (session, stream)
    }

    /// The value of the gauge `name` (no labels) in this relay's `/metrics`.
    pub(crate) async fn gauge(&self, name: &str) -> u64 {
        let http = self.bin.http.as_deref().unwrap();
        let addr = http.strip_prefix("http://").unwrap();
        let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut body = String::new();
        tcp.read_to_string(&mut body).await.unwrap();
        body.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .map(|v| v.trim().parse::<f64>().unwrap() as u64)
            .unwrap_or_else(|| panic!("{}: no {name} in /metrics", self.id))
    }
}

/// A publisher's session, its announced namespace and its track.
pub(crate) struct Publishing {
    _namespace: NamespaceHandle,
    pub(crate) producer: TrackProducer,
    pub(crate) session: Session,
}

impl Publishing {
    /// Writes group `group` of one object.
    pub(crate) fn group(&self, group: u64) {
        let mut g = self.producer.create_group(group).unwrap();
        g.write(format!("g{group}")).unwrap();
        g.finish().unwrap();
    }
}

/// Relay binaries sharing a store, each with `/metrics` and a short lease.
pub(crate) struct Cluster {
    pub(crate) store: Store,
    pub(crate) nodes: Vec<Node>,
    /// The test's own view of the registry.
    pub(crate) registry: RedisRegistry,
}

impl Cluster {
    /// One relay binary per `(id, region)`, all sharing one certificate (so each links to the
    /// others by one pinned fingerprint) and the store. `None` when the registry tests are
    /// skipped (no redis-server, `MOQ_SKIP_REGISTRY_TESTS=1`).
    pub(crate) fn start(relays: &[(&str, &str)]) -> Option<Cluster> {
        let store = Store::start()?;
        // A directory of the cluster's own: the tests of this file run at once.
        static CLUSTERS: AtomicUsize = AtomicUsize::new(0);
        let n = CLUSTERS.fetch_add(1, Ordering::Relaxed);
        let dir = workdir(&format!("cluster-five-{n}"));
        let fingerprint = common::write_cert(&dir);
        let path = |f: &str| dir.join(f).to_str().unwrap().to_string();
        let (cert, key, url) = (path("cert.pem"), path("key.pem"), store.url());
        let lease = LEASE.as_secs_f64().to_string();
        let nodes = relays
            .iter()
            .map(|(id, region)| {
                // The relay advertises its port: chosen here, bound by the relay.
                let port = free_port();
                let advertise = format!("moqt://localhost:{port}");
                let args = [
                    "--tls-cert",
                    &cert,
                    "--tls-key",
                    &key,
                    "--auth-disabled",
                    "--http",
                    "127.0.0.1:0",
                    "--registry",
                    &url,
                    "--registry-lease",
                    &lease,
                    "--registry-timeout",
                    "0.5",
                    "--relay-id",
                    id,
                    "--region",
                    region,
                    "--advertise",
                    &advertise,
                    "--cluster-fingerprint",
                    &fingerprint,
                    // A dead link is noticed within the lease; a dead publisher's track waits
                    // briefly; a drain is short.
                    "--idle-timeout",
                    "1.5",
                    "--keep-alive",
                    "0.3",
                    "--publisher-wait",
                    "0.2",
                    "--drain",
                    "1",
                ];
                let log = std::env::var("RELAY_LOG").unwrap_or_else(|_| "warn".into());
                let bin =
                    Binary::start_on(&format!("127.0.0.1:{port}"), &args, &[("RUST_LOG", &log)]);
                Node {
                    id: id.to_string(),
                    bin,
                }
            })
            .collect();
        let registry = store.registry(LEASE.as_millis() as u64);
        Some(Cluster {
            store,
            nodes,
            registry,
        })
    }

    /// The five relays A-E, all of region `r`.
    pub(crate) fn five() -> Option<Cluster> {
        Self::start(&[("A", "r"), ("B", "r"), ("C", "r"), ("D", "r"), ("E", "r")])
    }

    pub(crate) fn node(&self, id: &str) -> &Node {
        self.nodes.iter().find(|n| n.id == id).unwrap()
    }

    pub(crate) fn node_mut(&mut self, id: &str) -> &mut Node {
        self.nodes.iter_mut().find(|n| n.id == id).unwrap()
    }

    /// Waits until the registry names `id` the origin of `path`.
    pub(crate) async fn registered(&self, path: &str, id: &str) {
        common::store::registered(&self.registry, path, id).await
    }

    /// Waits until relay `id`'s heartbeat reports a load of at least `load`.
    pub(crate) async fn load_reported(&self, id: &str, load: u64) {
        let deadline = Instant::now() + 3 * LEASE;
        loop {
            let relays = self.registry.relays().await.unwrap_or_default();
            if relays.iter().any(|r| r.relay.id == id && r.load >= load) {
                return;
            }
            assert!(Instant::now() < deadline, "{id} never reported load {load}");
            // Heartbeats come every half lease: nothing to await from here.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// The groups of the next `n` objects of `t` (one object per group here).
pub(crate) async fn groups(t: &mut TrackConsumer, n: usize) -> Vec<u64> {
    common::read_objects(t, n)
        .await
        .into_iter()
        .map(|(g, _)| g)
        .collect()
}

/// Waits until `t` ends (PUBLISH_DONE or an error), at most `limit`; false if it did not.
pub(crate) async fn ends_within(t: &mut TrackConsumer, limit: Duration) -> bool {
    tokio::time::timeout(limit, async {
        while let Some(Ok(_)) = t.next_group().await {}
    })
    .await
    .is_ok()
}
