//! The route registry on a Valkey or Redis server (one node; the two speak the same protocol).
//!
//! What is stored, under a key prefix (`moq:` by default), with `<ns>` a namespace encoded as
//! each field's hex followed by `.` and `<f>` its first field so encoded:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `ns:<ns>` | string, expires with the lease | `<epoch>\n<relay id>\n<address>` |
//! | `idx:<f>` | sorted set | `<ns>` scored by its lease's end (ms, the store's clock) |
//! | `lex:<f>` | sorted set | `<ns>` scored 0, for prefix ranges (`ZRANGE BYLEX`) |
//! | `epoch` | integer | the last epoch handed out (`INCR`) |
//! | `relay:<id>` | string, expires with the lease | `<address>\n<region>\n<load>` |
//! | `relays` | sorted set | relay ids scored by their lease's end |
//!
//! and the channel `ch:<f>` carries `+<ns>` and `-<ns>` for every registration and removal
//! under `<f>`. A namespace costs its `ns:` key and one member of each of its `idx:` and
//! `lex:` sets: 566 bytes of the store's memory for a three-field name (tests/registry_scale.rs;
//! 406 without `lex:`, whose prefix scans read the whole first field: 0.46 ms instead of
//! 190-310 ms for one room among 100,000). Every write is one Lua script, so it is atomic,
//! and every script takes the time from the store (`TIME`), so leases do not depend on the
//! relays' clocks. A lease that runs out takes the `ns:` key with it; the `idx:` and `lex:`
//! members stay until a watcher prunes them, which publishes its removal. A watcher prunes when the earliest lease in
//! its index ends (at most every 25 ms, at least every quarter of its own lease), so watchers
//! see an expiry within a few tens of milliseconds of the lease's end.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use moq_core::TrackNamespace;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::{AsyncCommands, Client, FromRedisValue, RedisError, Script, ScriptInvocation};
use tokio::sync::mpsc;

mod watch;

use self::watch::watch_task;
use super::common::{LookupCache, decode_namespace, encode_field, encode_namespace};
use super::{NamespaceWatch, Origin, Registry, RegistryError, RelayInfo, RelayRef};

/// How a [`RedisRegistry`] reaches its store and keeps its entries. Its `Debug` shows no
/// password.
#[derive(Clone)]
pub struct RedisRegistryConfig {
    /// The store's URL: `redis://[user][:password@]host[:port][/db]` (Valkey speaks the
    /// same protocol).
    pub url: String,
    /// A password used when the URL has none.
    pub password: Option<String>,
    /// Put before every key and channel, so several clusters can share a store.
    pub key_prefix: String,
    /// How long a registration or heartbeat lasts without a refresh.
    pub lease: Duration,
    /// The longest a call waits for the store (each round trip of a scan has its own).
    pub timeout: Duration,
    /// How long a lookup's answer is reused; zero disables the cache.
    pub cache_ttl: Duration,
    /// At most this many lookups are cached.
    pub cache_capacity: usize,
}

impl RedisRegistryConfig {
    /// The defaults for a store at `url`: prefix `moq:`, a 10 s lease, a 2 s timeout, lookups
    /// cached 1 s, at most 65,536 of them.
    pub fn new(url: impl Into<String>) -> Self {
        RedisRegistryConfig {
            url: url.into(),
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
        let url = url::Url::parse(&self.url).map_or_else(
            |_| "(unparsable)".to_string(),
            |mut u| {
                if u.password().is_some() {
                    let _ = u.set_password(Some("***"));
                }
                u.to_string()
            },
        );
        f.debug_struct("RedisRegistryConfig")
            .field("url", &url)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("key_prefix", &self.key_prefix)
            .field("lease", &self.lease)
            .field("timeout", &self.timeout)
            .field("cache_ttl", &self.cache_ttl)
            .field("cache_capacity", &self.cache_capacity)
            .finish()
    }
}

/// The store's clock in milliseconds, as `now`, at the top of every script.
macro_rules! script {
    ($body:literal) => {
        concat!(
            "local t = redis.call('TIME')\n",
            "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n",
            $body
        )
    };
}

// KEYS: ns key, epoch counter, index, lex index. ARGV: relay id, address, lease ms, member,
// channel.
const REGISTER: &str = script!(
    "local epoch = redis.call('INCR', KEYS[2])
local value = epoch .. '\\n' .. ARGV[1] .. '\\n' .. ARGV[2]
local existed = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], value, 'PX', ARGV[3])
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[3]), ARGV[4])
redis.call('ZADD', KEYS[4], 0, ARGV[4])
if existed == 0 then redis.call('PUBLISH', ARGV[5], '+' .. ARGV[4]) end
return value"
);

// KEYS: ns key, index. ARGV: the registration's value, lease ms, member.
// Returns {1, ''} when extended, {0, current value or ''} when the registration is not ours.
const REFRESH: &str = script!(
    "local current = redis.call('GET', KEYS[1])
if current ~= ARGV[1] then return {0, current or ''} end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
return {1, ''}"
);

// KEYS: ns key, index, lex index. ARGV: the registration's value, member, channel.
const UNREGISTER: &str = script!(
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('PUBLISH', ARGV[3], '-' .. ARGV[2])
return 1"
);

// KEYS: index, lex index. ARGV: channel, at most this many, the ns key prefix.
// Removes the members whose lease ended and publishes their removal; returns how many, and
// the ms until the next lease in the index ends (-1: none).
const PRUNE: &str = script!(
    "local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, member in ipairs(gone) do
  local left = redis.call('PTTL', ARGV[3] .. member)
  if left > 0 then
    redis.call('ZADD', KEYS[1], now + left, member)
  else
    redis.call('ZREM', KEYS[1], member)
    redis.call('ZREM', KEYS[2], member)
    redis.call('PUBLISH', ARGV[1], '-' .. member)
    n = n + 1
  end
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #first == 0 then return {n, -1} end
return {n, math.max(0, tonumber(first[2]) - now)}"
);

// KEYS: relay key, relays set. ARGV: relay id, value, lease ms.
const HEARTBEAT: &str = script!(
    "redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])
return 1"
);

// KEYS: relays set. Drops the relays whose lease ended; returns the others' ids.
const LIVE_RELAYS: &str = script!(
    "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGE', KEYS[1], 0, -1)"
);

/// A watch prunes its indexes at most this often.
const PRUNE_MIN: Duration = Duration::from_millis(25);
/// Namespaces read per round trip of a scan.
const SCAN_PAGE: usize = 1000;
/// How many expired members one prune removes at most.
const PRUNE_BATCH: usize = 1000;
/// Changes queued for a watch's reader.
const WATCH_QUEUE: usize = 1024;

/// A [`Registry`] on a Valkey or Redis server.
///
/// A cheap `Clone`: clones share one connection, which is made again by itself after the
/// store went away (each call meanwhile fails with [`RegistryError::Unavailable`] within the
/// timeout). Dropping the last clone closes it; watches have their own connections and end
/// when their [`NamespaceWatch`] is dropped.
#[derive(Clone)]
pub struct RedisRegistry {
    inner: Arc<Inner>,
}

struct Inner {
    config: RedisRegistryConfig,
    client: Client,
    connection: ConnectionManager,
    cache: LookupCache,
    register: Script,
    refresh: Script,
    unregister: Script,
    prune: Script,
    heartbeat: Script,
    live_relays: Script,
}

impl std::fmt::Debug for RedisRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRegistry")
            .field("key_prefix", &self.inner.config.key_prefix)
            .field("lease", &self.inner.config.lease)
            .finish_non_exhaustive()
    }
}

impl RedisRegistry {
    /// A registry on the store `config` names. Connects lazily: this fails only for a URL it
    /// cannot use, not for a store that is down (the first calls then fail instead). Must be
    /// called within a Tokio runtime.
    pub fn new(config: RedisRegistryConfig) -> Result<Self, RegistryError> {
        if config.lease < Duration::from_millis(10) || config.timeout.is_zero() {
            return Err(RegistryError::Invalid(
                "the lease must be at least 10 ms and the timeout above zero".into(),
            ));
        }
        let mut url = url::Url::parse(&config.url)
            .map_err(|e| RegistryError::Invalid(format!("registry URL {}: {e}", config.url)))?;
        if let Some(password) = &config.password
            && url.password().is_none()
        {
            url.set_password(Some(password)).map_err(|()| {
                RegistryError::Invalid("the registry URL takes no password".into())
            })?;
        }
        let client = Client::open(url.as_str())
            .map_err(|e| RegistryError::Invalid(format!("registry URL: {e}")))?;
        let manager = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(config.timeout))
            .set_response_timeout(Some(config.timeout))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(500));
        let connection = ConnectionManager::new_lazy_with_config(client.clone(), manager)
            .map_err(|e| RegistryError::Invalid(format!("registry connection: {e}")))?;
        Ok(RedisRegistry {
            inner: Arc::new(Inner {
                cache: LookupCache::new(config.cache_ttl, config.cache_capacity),
                config,
                client,
                connection,
                register: Script::new(REGISTER),
                refresh: Script::new(REFRESH),
                unregister: Script::new(UNREGISTER),
                prune: Script::new(PRUNE),
                heartbeat: Script::new(HEARTBEAT),
                live_relays: Script::new(LIVE_RELAYS),
            }),
        })
    }

    /// Asks the store for a PONG: `Ok` when it answers within the timeout. Cancel-safe.
    pub async fn ping(&self) -> Result<(), RegistryError> {
        let mut con = self.inner.connection.clone();
        self.inner
            .bounded(async move { redis::cmd("PING").query_async::<String>(&mut con).await })
            .await
            .map(drop)
    }
}

impl Inner {
    fn key(&self, kind: &str, rest: &str) -> String {
        format!("{}{kind}:{rest}", self.config.key_prefix)
    }

    fn lease_ms(&self) -> u64 {
        u64::try_from(self.config.lease.as_millis()).unwrap_or(u64::MAX)
    }

    /// The first field of `namespace`, encoded (the index and channel it belongs to).
    fn first(namespace: &TrackNamespace) -> Result<String, RegistryError> {
        let field = namespace
            .field(0)
            .ok_or_else(|| RegistryError::Invalid("the empty namespace".into()))?;
        let mut out = String::new();
        encode_field(field, &mut out);
        Ok(out)
    }

    /// `call`, failing with [`RegistryError::Unavailable`] after the timeout.
    /// One page of a cursor scan matching `pattern`: `ZSCAN` of the sorted set `key`, or
    /// `SCAN` of the key space when there is none.
    async fn scan_page(
        &self,
        key: Option<&str>,
        cursor: u64,
        pattern: &str,
    ) -> Result<(u64, Vec<String>), RegistryError> {
        let mut cmd = redis::cmd(if key.is_some() { "ZSCAN" } else { "SCAN" });
        if let Some(key) = key {
            cmd.arg(key);
        }
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000);
        let mut con = self.connection.clone();
        self.bounded(async move { cmd.query_async(&mut con).await })
            .await
    }

    /// Runs one of the per-namespace scripts: the namespace's own key first, then what `more`
    /// adds given the namespace's encoded first field and member; bounded like every call.
    async fn on_namespace<T: FromRedisValue>(
        &self,
        script: &Script,
        namespace: &TrackNamespace,
        more: impl FnOnce(&mut ScriptInvocation<'_>, &str, &str),
    ) -> Result<T, RegistryError> {
        let first = Inner::first(namespace)?;
        let member = encode_namespace(namespace);
        let mut con = self.connection.clone();
        let mut call = script.key(self.key("ns", &member));
        more(&mut call, &first, &member);
        self.bounded(async move { call.invoke_async(&mut con).await })
            .await
    }

    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, RedisError>>,
    ) -> Result<T, RegistryError> {
        match tokio::time::timeout(self.config.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(store_error(e)),
            Err(_) => Err(RegistryError::Unavailable(format!(
                "no answer within {:?}",
                self.config.timeout
            ))),
        }
    }

    /// The store's clock, in ms.
    async fn now_ms(&self) -> Result<u64, RegistryError> {
        let mut con = self.connection.clone();
        let (secs, micros): (u64, u64) = self
            .bounded(async move { redis::cmd("TIME").query_async(&mut con).await })
            .await?;
        Ok(secs.saturating_mul(1000).saturating_add(micros / 1000))
    }

    /// The live members of the index `idx` that start with `member_prefix`.
    async fn scan_index(
        &self,
        idx: &str,
        member_prefix: &str,
        now: u64,
        out: &mut BTreeSet<String>,
    ) -> Result<(), RegistryError> {
        let pattern = format!("{}*", glob_escape(member_prefix));
        let mut cursor = 0u64;
        loop {
            let (next, page) = self.scan_page(Some(idx), cursor, &pattern).await?;
            for pair in page.chunks(2) {
                if let [member, score] = pair
                    && score.parse::<f64>().is_ok_and(|s| s > now as f64)
                {
                    out.insert(member.clone());
                }
            }
            if next == 0 {
                return Ok(());
            }
            cursor = next;
        }
    }

    /// The live members of the first field `first`'s indexes that start with `member_prefix`:
    /// a range of the lex index (O(log N + M), so a narrow prefix is cheap however many
    /// namespaces share its first field), each checked against the expiry index.
    async fn scan_range(
        &self,
        first: &str,
        member_prefix: &str,
        now: u64,
        out: &mut BTreeSet<String>,
    ) -> Result<(), RegistryError> {
        let lex = self.key("lex", first);
        let idx = self.key("idx", first);
        // Members are ASCII: every one under the prefix sorts below prefix + 0xff.
        let mut max = format!("({member_prefix}").into_bytes();
        max.push(0xff);
        let mut min = format!("[{member_prefix}").into_bytes();
        loop {
            let mut con = self.connection.clone();
            let cmd = redis::cmd("ZRANGE")
                .arg(&lex)
                .arg(&min)
                .arg(&max)
                .arg("BYLEX")
                .arg("LIMIT")
                .arg(0)
                .arg(SCAN_PAGE)
                .clone();
            let page: Vec<String> = self
                .bounded(async move { cmd.query_async(&mut con).await })
                .await?;
            let Some(last) = page.last() else {
                return Ok(());
            };
            min = format!("({last}").into_bytes();
            let mut con = self.connection.clone();
            let cmd = redis::cmd("ZMSCORE").arg(&idx).arg(&page).clone();
            let scores: Vec<Option<f64>> = self
                .bounded(async move { cmd.query_async(&mut con).await })
                .await?;
            let full = page.len() >= SCAN_PAGE;
            for (member, score) in page.into_iter().zip(scores) {
                if score.is_some_and(|s| s > now as f64) {
                    out.insert(member);
                }
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Every index key (for the empty prefix).
    async fn index_keys(&self) -> Result<Vec<String>, RegistryError> {
        let pattern = format!("{}*", glob_escape(&self.key("idx", "")));
        let mut keys = BTreeSet::new();
        let mut cursor = 0u64;
        loop {
            let (next, page) = self.scan_page(None, cursor, &pattern).await?;
            keys.extend(page);
            if next == 0 {
                return Ok(keys.into_iter().collect());
            }
            cursor = next;
        }
    }

    async fn scan(&self, prefix: &TrackNamespace) -> Result<Vec<TrackNamespace>, RegistryError> {
        let now = self.now_ms().await?;
        let mut members = BTreeSet::new();
        if prefix.is_empty() {
            for idx in self.index_keys().await? {
                self.scan_index(&idx, "", now, &mut members).await?;
            }
        } else {
            let first = Self::first(prefix)?;
            self.scan_range(&first, &encode_namespace(prefix), now, &mut members)
                .await?;
        }
        let mut out: Vec<TrackNamespace> = members
            .iter()
            .filter_map(|m| decode_namespace(m.as_bytes()))
            .collect();
        out.sort_by(|a, b| a.fields().cmp(b.fields()));
        Ok(out)
    }

    /// Removes expired members of the indexes a watch of `prefix` covers, publishing each.
    /// Returns how long until the next lease there ends, if one does.
    async fn prune(&self, prefix: &TrackNamespace) -> Result<Option<Duration>, RegistryError> {
        let firsts = if prefix.is_empty() {
            let idx_prefix = self.key("idx", "");
            self.index_keys()
                .await?
                .into_iter()
                .filter_map(|k| k.strip_prefix(&idx_prefix).map(str::to_string))
                .collect()
        } else {
            vec![Self::first(prefix)?]
        };
        let mut next: Option<Duration> = None;
        for first in firsts {
            let mut con = self.connection.clone();
            let mut call = self.prune.key(self.key("idx", &first));
            call.key(self.key("lex", &first))
                .arg(self.key("ch", &first))
                .arg(PRUNE_BATCH)
                .arg(self.key("ns", ""));
            let (removed, wait): (u64, i64) = self
                .bounded(async move { call.invoke_async(&mut con).await })
                .await?;
            // A full batch: more may be waiting.
            let wait = if removed >= PRUNE_BATCH as u64 {
                0
            } else {
                wait
            };
            if let Ok(ms) = u64::try_from(wait) {
                let wait = Duration::from_millis(ms);
                next = Some(next.map_or(wait, |n| n.min(wait)));
            }
        }
        Ok(next)
    }

    /// A pub/sub connection subscribed to the channels a watch of `prefix` covers.
    async fn subscribe(&self, prefix: &TrackNamespace) -> Result<PubSub, RegistryError> {
        let mut pubsub = self.bounded(self.client.get_async_pubsub()).await?;
        if prefix.is_empty() {
            let pattern = format!("{}*", glob_escape(&self.key("ch", "")));
            self.bounded(pubsub.psubscribe(pattern)).await?;
        } else {
            let channel = self.key("ch", &Self::first(prefix)?);
            self.bounded(pubsub.subscribe(channel)).await?;
        }
        Ok(pubsub)
    }
}

#[async_trait]
impl Registry for RedisRegistry {
    fn lease(&self) -> Duration {
        self.inner.config.lease
    }

    async fn register(
        &self,
        namespace: &TrackNamespace,
        relay: &RelayRef,
    ) -> Result<Origin, RegistryError> {
        check_text("relay id", &relay.id, false)?;
        check_text("relay address", &relay.address, false)?;
        let inner = &self.inner;
        let value: Vec<u8> = inner
            .on_namespace(&inner.register, namespace, |call, first, member| {
                call.key(format!("{}epoch", inner.config.key_prefix))
                    .key(inner.key("idx", first))
                    .key(inner.key("lex", first))
                    .arg(&relay.id)
                    .arg(&relay.address)
                    .arg(inner.lease_ms())
                    .arg(member)
                    .arg(inner.key("ch", first));
            })
            .await?;
        inner.cache.forget(namespace);
        parse_origin(&value)
    }

    async fn refresh(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError> {
        let inner = &self.inner;
        let (ok, current): (i64, Vec<u8>) = inner
            .on_namespace(&inner.refresh, namespace, |call, first, member| {
                call.key(inner.key("idx", first))
                    .arg(origin_value(origin))
                    .arg(inner.lease_ms())
                    .arg(member);
            })
            .await?;
        if ok == 1 {
            return Ok(());
        }
        inner.cache.forget(namespace);
        let current = if current.is_empty() {
            None
        } else {
            Some(parse_origin(&current)?)
        };
        Err(RegistryError::Moved(current))
    }

    async fn unregister(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError> {
        let inner = &self.inner;
        inner
            .on_namespace::<i64>(&inner.unregister, namespace, |call, first, member| {
                call.key(inner.key("idx", first))
                    .key(inner.key("lex", first))
                    .arg(origin_value(origin))
                    .arg(member)
                    .arg(inner.key("ch", first));
            })
            .await?;
        inner.cache.forget(namespace);
        Ok(())
    }

    async fn lookup(&self, namespace: &TrackNamespace) -> Result<Option<Origin>, RegistryError> {
        let inner = &self.inner;
        if let Some(cached) = inner.cache.get(namespace) {
            return Ok(cached);
        }
        if namespace.is_empty() {
            return Ok(None);
        }
        let key = inner.key("ns", &encode_namespace(namespace));
        let mut con = inner.connection.clone();
        let value: Option<Vec<u8>> = inner.bounded(async move { con.get(key).await }).await?;
        let origin = value.map(|v| parse_origin(&v)).transpose()?;
        inner.cache.put(namespace, origin.clone());
        Ok(origin)
    }

    async fn scan(&self, prefix: &TrackNamespace) -> Result<Vec<TrackNamespace>, RegistryError> {
        self.inner.scan(prefix).await
    }

    async fn watch(&self, prefix: &TrackNamespace) -> Result<NamespaceWatch, RegistryError> {
        let pubsub = self.inner.subscribe(prefix).await?;
        let (tx, rx) = mpsc::channel(WATCH_QUEUE);
        tokio::spawn(watch_task(self.inner.clone(), prefix.clone(), pubsub, tx));
        Ok(NamespaceWatch::new(rx))
    }

    async fn heartbeat(&self, relay: &RelayInfo) -> Result<(), RegistryError> {
        check_text("relay id", &relay.relay.id, false)?;
        check_text("relay address", &relay.relay.address, false)?;
        check_text("region", &relay.region, true)?;
        let inner = &self.inner;
        let value = format!("{}\n{}\n{}", relay.relay.address, relay.region, relay.load);
        let mut con = inner.connection.clone();
        let mut call = inner.heartbeat.key(inner.key("relay", &relay.relay.id));
        call.key(format!("{}relays", inner.config.key_prefix))
            .arg(&relay.relay.id)
            .arg(value)
            .arg(inner.lease_ms());
        inner
            .bounded(async move { call.invoke_async::<i64>(&mut con).await })
            .await
            .map(drop)
    }

    async fn relays(&self) -> Result<Vec<RelayInfo>, RegistryError> {
        let inner = &self.inner;
        let mut con = inner.connection.clone();
        let call = inner
            .live_relays
            .key(format!("{}relays", inner.config.key_prefix));
        let ids: Vec<String> = inner
            .bounded(async move { call.invoke_async(&mut con).await })
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let keys: Vec<String> = ids.iter().map(|id| inner.key("relay", id)).collect();
        let mut con = inner.connection.clone();
        let values: Vec<Option<String>> =
            inner.bounded(async move { con.mget(keys).await }).await?;
        let mut out = Vec::with_capacity(ids.len());
        for (id, value) in ids.into_iter().zip(values) {
            // A relay whose key expired since the set was pruned is not live.
            let Some(value) = value else { continue };
            let mut parts = value.splitn(3, '\n');
            let (Some(address), Some(region), Some(load)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(RegistryError::Protocol(format!("relay entry {value:?}")));
            };
            let load = load
                .parse()
                .map_err(|_| RegistryError::Protocol(format!("relay load {load:?}")))?;
            out.push(RelayInfo {
                relay: RelayRef {
                    id,
                    address: address.to_string(),
                },
                region: region.to_string(),
                load,
            });
        }
        out.sort_by(|a, b| a.relay.id.cmp(&b.relay.id));
        Ok(out)
    }
}

/// What an `ns:` key holds for `origin`.
fn origin_value(origin: &Origin) -> String {
    format!(
        "{}\n{}\n{}",
        origin.epoch, origin.relay.id, origin.relay.address
    )
}

fn parse_origin(value: &[u8]) -> Result<Origin, RegistryError> {
    let bad =
        || RegistryError::Protocol(format!("origin entry {:?}", String::from_utf8_lossy(value)));
    let text = std::str::from_utf8(value).map_err(|_| bad())?;
    let mut parts = text.splitn(3, '\n');
    let (Some(epoch), Some(id), Some(address)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    Ok(Origin {
        relay: RelayRef {
            id: id.to_string(),
            address: address.to_string(),
        },
        epoch: epoch.parse().map_err(|_| bad())?,
    })
}

/// Relay ids, addresses and regions are stored newline-separated.
fn check_text(what: &str, text: &str, may_be_empty: bool) -> Result<(), RegistryError> {
    if text.contains('\n') || (!may_be_empty && text.is_empty()) || text.len() > 1024 {
        return Err(RegistryError::Invalid(format!(
            "{what} {text:?}: empty, over 1024 bytes or with a newline"
        )));
    }
    Ok(())
}

/// `text` with the store's glob characters escaped, for MATCH and PSUBSCRIBE patterns.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn store_error(e: RedisError) -> RegistryError {
    if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal() {
        RegistryError::Unavailable(e.to_string())
    } else {
        RegistryError::Protocol(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_values_round_trip() {
        let origin = Origin {
            relay: RelayRef {
                id: "relay-a".into(),
                address: "moqt://a:4443".into(),
            },
            epoch: 7,
        };
        assert_eq!(parse_origin(origin_value(&origin).as_bytes()), Ok(origin));
        assert!(matches!(
            parse_origin(b"x\ny\nz"),
            Err(RegistryError::Protocol(_))
        ));
        assert!(matches!(
            parse_origin(b"1\ny"),
            Err(RegistryError::Protocol(_))
        ));
    }

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
    fn globs_and_texts() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert!(check_text("id", "a\nb", false).is_err());
        assert!(check_text("id", "", false).is_err());
        assert!(check_text("region", "", true).is_ok());
    }
}
