//! How the registry reaches its store: one node (`redis://`), or a Redis Cluster
//! (`redis+cluster://` with one or more seed nodes), behind one [`Store`] connection that runs
//! every script; and the watches' pub/sub connections, one per node that holds a channel they
//! follow.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::{
    ConnectionLike, ConnectionManager, ConnectionManagerConfig, MultiplexedConnection,
};
use redis::cluster::{ClusterClientBuilder, ClusterConfig};
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, PushInfo, PushKind, RedisFuture, Value};
use tokio::sync::mpsc;

use super::config::Address;
use crate::registry::RegistryError;

/// The connection every registry call goes through: to one node, or to a cluster (which routes
/// each script to the node of its keys' slot and follows the cluster's changes).
#[derive(Clone)]
pub(super) enum Store {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Store {
    /// The connection for scripts, connecting lazily (and again by itself after a loss).
    pub(super) fn connect(address: &Address, timeout: Duration) -> Result<Store, RegistryError> {
        let invalid = |e: redis::RedisError| RegistryError::Invalid(format!("registry: {e}"));
        if address.cluster {
            let seeds: Vec<String> = address.nodes.iter().map(url::Url::to_string).collect();
            let client = ClusterClientBuilder::new(seeds)
                .retries(1)
                .build()
                .map_err(invalid)?;
            let config = ClusterConfig::new()
                .set_connection_timeout(timeout)
                .set_response_timeout(timeout);
            return Ok(Store::Cluster(
                client.get_pending_async_connection_with_config(config),
            ));
        }
        let node = (address.nodes.first())
            .ok_or_else(|| RegistryError::Invalid("registry URL: no node".into()))?;
        let client = Client::open(node.as_str()).map_err(invalid)?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(500));
        let connection =
            ConnectionManager::new_lazy_with_config(client, manager).map_err(invalid)?;
        Ok(Store::Single(connection))
    }
}

impl ConnectionLike for Store {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Store::Single(c) => c.req_packed_command(cmd),
            Store::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Store::Single(c) => c.req_packed_commands(cmd, offset, count),
            Store::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Store::Single(c) => c.get_db(),
            Store::Cluster(c) => c.get_db(),
        }
    }
}

/// A watch's sharded subscriptions: a RESP3 connection to each node holding one of its
/// channels, all feeding one bounded queue of messages. `lost` is set when a message may have
/// been missed (a connection closed, a channel left its node, the queue was full): the watch
/// then scans again.
pub(super) struct Subscription {
    nodes: HashMap<String, MultiplexedConnection>,
    pub(super) messages: mpsc::Receiver<PushInfo>,
    pub(super) lost: Arc<AtomicBool>,
}

impl Subscription {
    /// Subscribes (SSUBSCRIBE) to `channels` on the nodes that hold them: each is asked of the
    /// first node first, and of the node a cluster's MOVED answer names.
    pub(super) async fn open(
        address: &Address,
        channels: &[String],
        timeout: Duration,
        queue: usize,
    ) -> Result<Subscription, redis::RedisError> {
        let (tx, messages) = mpsc::channel(queue);
        let lost = Arc::new(AtomicBool::new(false));
        let flag = lost.clone();
        let sender = move |info: PushInfo| -> Result<(), ()> {
            let missed = match info.kind {
                PushKind::SMessage => false,
                PushKind::Disconnection | PushKind::SUnsubscribe => true,
                _ => return Ok(()),
            };
            if tx.try_send(info).is_err() || missed {
                flag.store(true, Ordering::Release);
            }
            Ok(())
        };
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_push_sender(sender);
        let mut subscription = Subscription {
            nodes: HashMap::new(),
            messages,
            lost,
        };
        let Some(first) = address.nodes.first() else {
            return Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "no node",
            )));
        };
        for channel in channels {
            let mut url = first.clone();
            // A cluster redirects at most a few times (MOVED, then maybe ASK).
            for hop in 0..4 {
                let con = subscription.connection(&url, &config).await?;
                match redis::cmd("SSUBSCRIBE").arg(channel).exec_async(con).await {
                    Ok(()) => break,
                    Err(e) if hop < 3 => {
                        let Some(next) = e.redirect_node().and_then(|(n, _)| address.node(n))
                        else {
                            return Err(e);
                        };
                        url = next;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(subscription)
    }

    /// The connection to the node at `url`, made if there is none.
    async fn connection(
        &mut self,
        url: &url::Url,
        config: &AsyncConnectionConfig,
    ) -> Result<&mut MultiplexedConnection, redis::RedisError> {
        let key = format!(
            "{}:{}",
            url.host_str().unwrap_or_default(),
            url.port().unwrap_or(6379)
        );
        if !self.nodes.contains_key(&key) {
            let mut resp3 = url.clone();
            resp3.query_pairs_mut().append_pair("protocol", "resp3");
            let client = Client::open(resp3.as_str())?;
            let con = client
                .get_multiplexed_async_connection_with_config(config)
                .await?;
            self.nodes.insert(key.clone(), con);
        }
        self.nodes
            .get_mut(&key)
            .ok_or_else(|| redis::RedisError::from((redis::ErrorKind::Io, "no connection")))
    }

    /// Pings every node: `Err` if one does not answer (its connection is lost).
    pub(super) async fn ping(&mut self) -> Result<(), redis::RedisError> {
        for con in self.nodes.values_mut() {
            redis::cmd("PING").exec_async(con).await?;
        }
        Ok(())
    }
}
