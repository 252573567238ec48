//! A real three-master Redis Cluster on loopback per test (the same `redis-server` as
//! [`super::store`], each node with `--cluster-enabled yes`, joined by
//! `redis-cli --cluster create`), killed and its files removed when its guard drops.
#![allow(clippy::indexing_slicing)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use moq_relay::registry::{RedisRegistry, RedisRegistryConfig};

use super::store::{script_calls, server_binary, spawn_server};

/// Three master nodes of one cluster, every slot assigned; killed when dropped.
pub(crate) struct ClusterStore {
    pub(crate) ports: Vec<u16>,
    children: Vec<Child>,
    dir: PathBuf,
}

/// A loopback port free now whose cluster bus port (+10000) is free too.
fn cluster_port() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// `redis-cli` (or `valkey-cli`) beside the server binary, else on PATH.
fn cli_binary(server: &std::path::Path) -> PathBuf {
    for name in ["redis-cli", "valkey-cli"] {
        let beside = server.with_file_name(name);
        if beside.is_file() {
            return beside;
        }
    }
    PathBuf::from("redis-cli")
}

impl ClusterStore {
    /// Starts three masters and joins them; `None` when the registry tests are told to skip.
    pub(crate) fn start() -> Option<ClusterStore> {
        let binary = server_binary()?;
        let dir = std::env::temp_dir().join(format!(
            "moq-cluster-{}-{}",
            std::process::id(),
            cluster_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cluster = ClusterStore {
            ports: Vec::new(),
            children: Vec::new(),
            dir,
        };
        for _ in 0..3 {
            let port = cluster_port();
            let mut args: Vec<String> = ["--port", &port.to_string()]
                .into_iter()
                .chain(["--cluster-enabled", "yes", "--cluster-node-timeout", "2000"])
                .map(str::to_string)
                .collect();
            let conf = cluster.dir.join(format!("nodes-{port}.conf"));
            args.push("--cluster-config-file".into());
            args.push(conf.display().to_string());
            args.push("--dir".into());
            args.push(cluster.dir.display().to_string());
            let child = spawn_server(&binary, &args);
            cluster.ports.push(port);
            cluster.children.push(child);
        }
        let nodes: Vec<String> = (cluster.ports.iter())
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        let out = Command::new(cli_binary(&binary))
            .args(["--cluster", "create"])
            .args(&nodes)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        cluster.wait_ok();
        Some(cluster)
    }

    /// Waits until every node says the cluster is ok (each knows every slot's master).
    fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        for port in &self.ports {
            loop {
                let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
                let mut con = client.get_connection().unwrap();
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).unwrap();
                if info.contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster did not come up");
                // The nodes gossip the new slots; nothing to wait on from here.
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// `redis+cluster://` naming the first node only: the others are learned from it.
    pub(crate) fn url(&self) -> String {
        format!("redis+cluster://127.0.0.1:{}", self.ports[0])
    }

    pub(crate) fn registry(&self, lease_ms: u64) -> RedisRegistry {
        let mut config = RedisRegistryConfig::new(self.url());
        config.lease = Duration::from_millis(lease_ms);
        config.timeout = Duration::from_millis(1000);
        config.cache_ttl = Duration::ZERO;
        RedisRegistry::new(config).unwrap()
    }

    /// The port of the master holding `key`'s slot.
    pub(crate) fn node_of(&self, key: &str) -> u16 {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}", self.ports[0])).unwrap();
        let mut con = client.get_connection().unwrap();
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(&mut con)
            .unwrap();
        let ranges: Vec<(i64, i64, (String, i64))> = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query::<Vec<redis::Value>>(&mut con)
            .unwrap()
            .into_iter()
            .map(|range| {
                let redis::Value::Array(parts) = range else {
                    panic!("CLUSTER SLOTS: {range:?}")
                };
                let start: i64 = redis::from_redis_value(parts[0].clone()).unwrap();
                let end: i64 = redis::from_redis_value(parts[1].clone()).unwrap();
                let redis::Value::Array(master) = parts[2].clone() else {
                    panic!("CLUSTER SLOTS master: {:?}", parts[2])
                };
                let host: String = redis::from_redis_value(master[0].clone()).unwrap();
                let port: i64 = redis::from_redis_value(master[1].clone()).unwrap();
                (start, end, (host, port))
            })
            .collect();
        let (_, _, (_, port)) = ranges
            .into_iter()
            .find(|(start, end, _)| (*start..=*end).contains(&slot))
            .expect("every slot is assigned");
        u16::try_from(port).unwrap()
    }

    /// How many scripts each node ran since the last call (`INFO commandstats`, reset), by
    /// port.
    pub(crate) fn scripts_run(&self) -> Vec<(u16, u64)> {
        (self.ports.iter())
            .map(|&port| {
                let client = redis::Client::open(format!("redis://127.0.0.1:{port}")).unwrap();
                let mut con = client.get_connection().unwrap();
                let info: String = redis::cmd("INFO")
                    .arg("commandstats")
                    .query(&mut con)
                    .unwrap();
                let () = redis::cmd("CONFIG")
                    .arg("RESETSTAT")
                    .query(&mut con)
                    .unwrap();
                let calls = script_calls(&info);
                (port, calls)
            })
            .collect()
    }
}

impl Drop for ClusterStore {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
