//! What a [`RedisRegistry`](super::RedisRegistry) is told: its settings, and where its store
//! is (one node, or a Redis Cluster's seed nodes).

use std::time::Duration;

use crate::registry::RegistryError;

/// The URL scheme of a Redis Cluster: `redis+cluster://[user][:password@]host:port[,host:port...]`.
pub(super) const CLUSTER_SCHEME: &str = "redis+cluster://";

/// How a [`RedisRegistry`](super::RedisRegistry) reaches its store and keeps its entries.
/// Its `Debug` shows no password.
#[derive(Clone)]
pub struct RedisRegistryConfig {
    /// The store's URL: `redis://[user][:password@]host[:port][/db]` for one node (Valkey
    /// speaks the same protocol), or `redis+cluster://[user][:password@]host:port[,host:port...]`
    /// for a Redis Cluster, given by one or more of its nodes (the rest are learned from them).
    pub url: String,
    /// A password used when the URL has none.
    pub password: Option<String>,
    /// Put before every key and channel, so several clusters can share a store.
    pub key_prefix: String,
    /// How many shards the entries are spread over (each is one slot of a cluster: see the
    /// module docs): 1 by default on one node, 16 on a cluster. Every relay of a cluster must
    /// use the same; changing it makes what is stored unreachable until registered again.
    pub shards: u16,
    /// How long a registration or heartbeat lasts without a refresh.
    pub lease: Duration,
    /// The longest a call waits for the store (each round trip of a scan has its own).
    pub timeout: Duration,
    /// How long a lookup's answer is reused; zero disables the cache.
    pub cache_ttl: Duration,
    /// At most this many lookups are cached.
    pub cache_capacity: usize,
}

/// The most shards a registry may have (each costs a refresher one call per half lease).
pub(super) const MAX_SHARDS: u16 = 1024;

impl RedisRegistryConfig {
    /// The defaults for a store at `url`: prefix `moq:`, 1 shard (16 for a
    /// `redis+cluster://` URL), a 10 s lease, a 2 s timeout, lookups cached 1 s, at most
    /// 65,536 of them.
    pub fn new(url: impl Into<String>) -> Self {
        let url = url.into();
        RedisRegistryConfig {
            shards: if url.starts_with(CLUSTER_SCHEME) {
                16
            } else {
                1
            },
            url,
            password: None,
            key_prefix: "moq:".to_string(),
            lease: Duration::from_secs(10),
            timeout: Duration::from_secs(2),
            cache_ttl: Duration::from_secs(1),
            cache_capacity: 65_536,
        }
    }
}

impl std::fmt::Debug for RedisRegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Whatever is between the scheme and the last `@` may hold a password.
        let url = match self.url.split_once("://") {
            Some((scheme, rest)) => match rest.rsplit_once('@') {
                Some((_, hosts)) => format!("{scheme}://***@{hosts}"),
                None => self.url.clone(),
            },
            None => "(unparsable)".to_string(),
        };
        f.debug_struct("RedisRegistryConfig")
            .field("url", &url)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("key_prefix", &self.key_prefix)
            .field("shards", &self.shards)
            .field("lease", &self.lease)
            .field("timeout", &self.timeout)
            .field("cache_ttl", &self.cache_ttl)
            .field("cache_capacity", &self.cache_capacity)
            .finish()
    }
}

/// Where the store is: the node (or the cluster's seed nodes) to dial, as `redis://` URLs with
/// the password filled in.
pub(super) struct Address {
    /// One URL for a single node; the seeds of a cluster.
    pub(super) nodes: Vec<url::Url>,
    pub(super) cluster: bool,
}

impl Address {
    /// Reads `config.url` (and `config.password`, used when the URL has none).
    pub(super) fn parse(config: &RedisRegistryConfig) -> Result<Self, RegistryError> {
        let invalid = |e: String| RegistryError::Invalid(format!("registry URL: {e}"));
        let (texts, cluster) = match config.url.strip_prefix(CLUSTER_SCHEME) {
            Some(rest) => {
                // Credentials, then host:port pairs separated by commas, then an optional path.
                let (auth, hosts) = match rest.rsplit_once('@') {
                    Some((auth, hosts)) => (format!("{auth}@"), hosts),
                    None => (String::new(), rest),
                };
                let (hosts, path) = hosts.split_once('/').unwrap_or((hosts, ""));
                if !path.is_empty() {
                    return Err(invalid("a cluster has no database number".into()));
                }
                let urls: Vec<String> = (hosts.split(',').filter(|h| !h.is_empty()))
                    .map(|host| format!("redis://{auth}{host}"))
                    .collect();
                if urls.is_empty() {
                    return Err(invalid(format!("{CLUSTER_SCHEME} names no node")));
                }
                (urls, true)
            }
            None => (vec![config.url.clone()], false),
        };
        let mut nodes = Vec::with_capacity(texts.len());
        for text in texts {
            let mut url = url::Url::parse(&text).map_err(|e| invalid(format!("{text}: {e}")))?;
            if let Some(password) = &config.password
                && url.password().is_none()
            {
                url.set_password(Some(password))
                    .map_err(|()| invalid("the registry URL takes no password".into()))?;
            }
            nodes.push(url);
        }
        Ok(Address { nodes, cluster })
    }

    /// The URL of node `host:port` (a cluster's redirection names one), with the seeds'
    /// credentials.
    pub(super) fn node(&self, host_port: &str) -> Option<url::Url> {
        let mut url = self.nodes.first()?.clone();
        let (host, port) = host_port.rsplit_once(':')?;
        url.set_host(Some(host.trim_start_matches('[').trim_end_matches(']')))
            .ok()?;
        url.set_port(Some(port.parse().ok()?)).ok()?;
        Some(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_debug_hides_passwords() {
        let mut config = RedisRegistryConfig::new("redis://:hunter2@127.0.0.1:6379/0");
        config.password = Some("other-secret".into());
        let shown = format!("{config:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("other-secret"),
            "{shown}"
        );
        assert!(shown.contains("127.0.0.1:6379"), "{shown}");
    }

    #[test]
    fn cluster_urls_parse() {
        let mut config =
            RedisRegistryConfig::new("redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001");
        assert_eq!(config.shards, 16);
        let address = Address::parse(&config).unwrap();
        assert!(address.cluster);
        let nodes: Vec<String> = address.nodes.iter().map(ToString::to_string).collect();
        assert_eq!(
            nodes,
            ["redis://:pw@10.0.0.1:7000", "redis://:pw@10.0.0.2:7001"]
        );
        config.url = "redis+cluster://10.0.0.1:7000".into();
        config.password = Some("secret".into());
        let address = Address::parse(&config).unwrap();
        assert_eq!(address.nodes[0].password(), Some("secret"));
        config.url = "redis+cluster://".into();
        assert!(Address::parse(&config).is_err());
        config.url = "redis+cluster://h:1/2".into();
        assert!(Address::parse(&config).is_err());
        let single = RedisRegistryConfig::new("redis://127.0.0.1:6379/0");
        assert_eq!(single.shards, 1);
        assert!(!Address::parse(&single).unwrap().cluster);
    }
}
