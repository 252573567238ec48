//! The route registry on a Valkey or Redis server (one node; the two speak the same protocol).
//!
//! # Namespaces ride on their relay's lease
//!
//! A relay holds one lease, `relay:<id>`, and each namespace it registers is valid while that
//! lease is live and is the one it was registered under: a relay refreshes one key per half
//! lease ([`Registry::refresh_relay`], through the one [`Registration`] refresher it shares
//! across its registrations, or its heartbeat), not one per namespace. At a million
//! namespaces over a thousand relays and a 10 s lease that is about 200 refreshes a second
//! (a thousand relays every 5 s) instead of 200,000.
//!
//! Each lease has an identity, `<born>`: the store's clock in µs when it began. A lease that
//! runs out and starts again (a relay back after a partition, or a restarted relay with the
//! same id) gets a new one, so the namespaces of the old one stay dead. What is stored, under
//! a key prefix (`moq:` by default), with `<ns>` a namespace encoded as each field's hex
//! followed by `.` and `<f>` its first field so encoded:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `ns:<ns>` | string, no expiry | `<epoch>\n<born>\n<relay id>\n<address>` |
//! | `lex:<f>` | sorted set | `<ns>` scored 0, for prefix ranges (`ZRANGE BYLEX`) |
//! | `epoch` | integer | the last epoch handed out (`INCR`) |
//! | `relay:<id>` | string, expires with the lease | `<born>\n<address>\n<region>\n<load>` |
//! | `leases` | sorted set | `<born>:<id>` scored by that lease's end (ms), for the sweep |
//! | `rns:<born>:<id>` | set | the `<ns>` registered under that lease |
//! | `moved:<born>:<id>` | list | `<ns> <new value>` for each taken over from that lease |
//! | `relays` | sorted set | relay ids scored by their last heartbeat's lease end |
//!
//! and the channel `ch:<f>` carries `+<ns>` and `-<ns>` for every registration and removal
//! under `<f>`. A namespace is live when its `ns:` value's `<born>` is its relay's current
//! lease: `lookup` and `scan` check that (in one script each), so a namespace of a relay whose
//! lease ran out is never answered, even before it is swept.
//!
//! - **Register** creates the relay's lease if there is none (so registering needs no
//!   heartbeat first) or extends it, hands out a higher epoch, and writes the namespace. A
//!   previous owner whose lease is live is fenced: the namespace leaves its `rns:` set and is
//!   appended to its `moved:` list.
//! - **Refresh**: the relay's one call, `REFRESH_RELAY`, extends (or recreates) its lease and
//!   takes its `moved:` list: the registrations named there learn `Moved` with their new
//!   origin. When the lease's `<born>` differs from the one the refresher saw last (the lease
//!   ran out, or the store lost everything), each of the relay's registrations is checked on
//!   its own (`refresh(namespace, origin)`), and the lost ones are registered again.
//! - **Sweep**: a relay whose lease ended has its `rns:` set emptied (at most 1,000 a call):
//!   each namespace still under that lease is deleted and its removal published, so watchers
//!   see `Removed` for every namespace of a relay that died. Watchers sweep, when the earliest
//!   lease in `leases` ends (at most every 25 ms, at least every quarter of their own lease),
//!   so they see a relay's death within tens of milliseconds of its lease's end.
//!
//! Every write is one Lua script, so it is atomic, and every script takes the time from the
//! store (`TIME`), so leases do not depend on the relays' clocks. The scripts derive a
//! namespace's relay keys from its value, so they touch keys they were not passed: fine on one
//! node; a sharded store would need a relay's keys and its namespaces in one slot.
//!
//! A namespace costs its `ns:` key (no expiry), one member of `lex:<f>` and one of its
//! relay's `rns:` set (the figure per namespace is in docs/benchmarks.md, "Cluster scale").

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use moq_core::TrackNamespace;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSub};
use redis::{AsyncCommands, Client, FromRedisValue, RedisError, Script};
use tokio::sync::mpsc;

mod scripts;
mod watch;

use self::watch::watch_task;
#[cfg(doc)]
use super::Registration;
use super::common::{LookupCache, decode_namespace, encode_field, encode_namespace};
use super::{NamespaceWatch, Origin, Registry, RegistryError, RelayInfo, RelayLease, RelayRef};

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

/// A watch sweeps at most this often.
const PRUNE_MIN: Duration = Duration::from_millis(25);
/// Namespaces read per round trip of a scan.
const SCAN_PAGE: usize = 1000;
/// How many namespaces of dead relays one sweep removes at most.
const SWEEP_BATCH: usize = 1000;
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

struct Scripts {
    register: Script,
    register_many: Script,
    refresh: Script,
    refresh_relay: Script,
    unregister: Script,
    lookup: Script,
    scan_range: Script,
    sweep: Script,
    heartbeat: Script,
    live_relays: Script,
}

struct Inner {
    config: RedisRegistryConfig,
    client: Client,
    connection: ConnectionManager,
    cache: LookupCache,
    scripts: Scripts,
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
                scripts: Scripts {
                    register: Script::new(scripts::REGISTER),
                    register_many: Script::new(scripts::REGISTER_MANY),
                    refresh: Script::new(scripts::REFRESH),
                    refresh_relay: Script::new(scripts::REFRESH_RELAY),
                    unregister: Script::new(scripts::UNREGISTER),
                    lookup: Script::new(scripts::LOOKUP),
                    scan_range: Script::new(scripts::SCAN_RANGE),
                    sweep: Script::new(scripts::SWEEP),
                    heartbeat: Script::new(scripts::HEARTBEAT),
                    live_relays: Script::new(scripts::LIVE_RELAYS),
                },
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

    /// For benchmarks (moq-bench's `cluster-scale` section), not a relay: registers every one
    /// of `namespaces` as `relay`'s in one script call (as many [`Registry::register`] calls
    /// would, with their epochs and notifications, but without their answers). Keep a batch
    /// to a few thousand: the store does nothing else while it runs. Cancel-safe like every
    /// call (one atomic step).
    #[doc(hidden)]
    pub async fn register_many(
        &self,
        namespaces: &[TrackNamespace],
        relay: &RelayRef,
    ) -> Result<usize, RegistryError> {
        check_relay(relay)?;
        let inner = &self.inner;
        let mut call = inner.scripts.register_many.prepare_invoke();
        call.arg(&inner.config.key_prefix)
            .arg(&relay.id)
            .arg(&relay.address)
            .arg(inner.lease_ms());
        for namespace in namespaces {
            Inner::first(namespace)?;
            call.arg(encode_namespace(namespace));
        }
        let n: usize = inner.invoke(call).await?;
        for namespace in namespaces {
            inner.cache.forget(namespace);
        }
        Ok(n)
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

    /// `script` with the key prefix as its first argument, ready for the rest.
    fn script<'a>(&self, script: &'a Script) -> redis::ScriptInvocation<'a> {
        let mut call = script.prepare_invoke();
        call.arg(&self.config.key_prefix);
        call
    }

    /// Runs a prepared script, bounded like every call.
    async fn invoke<T: FromRedisValue>(
        &self,
        call: redis::ScriptInvocation<'_>,
    ) -> Result<T, RegistryError> {
        let mut con = self.connection.clone();
        self.bounded(async move { call.invoke_async(&mut con).await })
            .await
    }

    /// `call`, failing with [`RegistryError::Unavailable`] after the timeout.
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

    /// The live namespaces of the first field `first` that start with `member_prefix`: a
    /// range of the lex index (O(log N + M), so a narrow prefix is cheap however many
    /// namespaces share its first field), each checked against its relay's lease in the
    /// script that reads the page.
    async fn scan_range(
        &self,
        first: &str,
        member_prefix: &str,
        out: &mut BTreeSet<String>,
    ) -> Result<(), RegistryError> {
        // Members are ASCII: every one under the prefix sorts below prefix + 0xff.
        let mut max = format!("({member_prefix}").into_bytes();
        max.push(0xff);
        let mut min = format!("[{member_prefix}").into_bytes();
        loop {
            let mut call = self.script(&self.scripts.scan_range);
            call.arg(first).arg(&min).arg(&max).arg(SCAN_PAGE);
            let (read, last, live): (usize, String, Vec<String>) = self.invoke(call).await?;
            out.extend(live);
            if read < SCAN_PAGE {
                return Ok(());
            }
            min = format!("({last}").into_bytes();
        }
    }

    /// Every first field with a lex index (for the empty prefix).
    async fn first_fields(&self) -> Result<Vec<String>, RegistryError> {
        let lex = self.key("lex", "");
        let pattern = format!("{}*", glob_escape(&lex));
        let mut firsts = BTreeSet::new();
        let mut cursor = 0u64;
        loop {
            let mut con = self.connection.clone();
            let cmd = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .clone();
            let (next, page): (u64, Vec<String>) = self
                .bounded(async move { cmd.query_async(&mut con).await })
                .await?;
            firsts.extend(
                page.iter()
                    .filter_map(|k| k.strip_prefix(&lex))
                    .map(str::to_string),
            );
            if next == 0 {
                return Ok(firsts.into_iter().collect());
            }
            cursor = next;
        }
    }

    async fn scan(&self, prefix: &TrackNamespace) -> Result<Vec<TrackNamespace>, RegistryError> {
        let mut members = BTreeSet::new();
        if prefix.is_empty() {
            for first in self.first_fields().await? {
                self.scan_range(&first, "", &mut members).await?;
            }
        } else {
            let first = Self::first(prefix)?;
            self.scan_range(&first, &encode_namespace(prefix), &mut members)
                .await?;
        }
        let mut out: Vec<TrackNamespace> = members
            .iter()
            .filter_map(|m| decode_namespace(m.as_bytes()))
            .collect();
        out.sort_by(|a, b| a.fields().cmp(b.fields()));
        Ok(out)
    }

    /// Removes the namespaces of relays whose lease ended (publishing each removal). Returns
    /// how long until the next relay lease ends, if one does (zero: more to sweep).
    async fn sweep(&self) -> Result<Option<Duration>, RegistryError> {
        let mut call = self.script(&self.scripts.sweep);
        call.arg(SWEEP_BATCH);
        let (_removed, wait): (u64, i64) = self.invoke(call).await?;
        Ok(u64::try_from(wait).ok().map(Duration::from_millis))
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

    /// The live registration of `namespace`, or `None`, uncached.
    async fn lookup(&self, namespace: &TrackNamespace) -> Result<Option<Origin>, RegistryError> {
        let mut call = self.script(&self.scripts.lookup);
        call.arg(encode_namespace(namespace));
        let value: Option<Vec<u8>> = self.invoke(call).await?;
        value.map(|v| parse_origin(&v)).transpose()
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
        check_relay(relay)?;
        Inner::first(namespace)?;
        let inner = &self.inner;
        let mut call = inner.script(&inner.scripts.register);
        call.arg(&relay.id)
            .arg(&relay.address)
            .arg(inner.lease_ms())
            .arg(encode_namespace(namespace));
        let value: Vec<u8> = inner.invoke(call).await?;
        inner.cache.forget(namespace);
        parse_origin(&value)
    }

    async fn refresh(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError> {
        Inner::first(namespace)?;
        let inner = &self.inner;
        let mut call = inner.script(&inner.scripts.refresh);
        call.arg(origin.epoch)
            .arg(&origin.relay.id)
            .arg(inner.lease_ms())
            .arg(encode_namespace(namespace));
        let (ok, current): (i64, Vec<u8>) = inner.invoke(call).await?;
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

    async fn refresh_relay(
        &self,
        relay: &RelayRef,
        generation: Option<&str>,
        seen: u64,
    ) -> Result<Option<RelayLease>, RegistryError> {
        check_relay(relay)?;
        let inner = &self.inner;
        let mut call = inner.script(&inner.scripts.refresh_relay);
        call.arg(&relay.id)
            .arg(&relay.address)
            .arg(inner.lease_ms())
            .arg(seen)
            .arg(generation.unwrap_or_default());
        let (generation, moved): (String, Vec<Vec<u8>>) = inner.invoke(call).await?;
        let mut out = Vec::with_capacity(moved.len());
        for entry in moved {
            let bad = || RegistryError::Protocol("a moved entry".into());
            let at = entry.iter().position(|b| *b == b' ').ok_or_else(bad)?;
            let (member, value) = entry.split_at(at);
            let namespace = decode_namespace(member).ok_or_else(bad)?;
            let origin = parse_origin(value.get(1..).unwrap_or_default())?;
            inner.cache.forget(&namespace);
            out.push((namespace, origin));
        }
        Ok(Some(RelayLease {
            generation,
            moved: out,
        }))
    }

    async fn unregister(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError> {
        Inner::first(namespace)?;
        let inner = &self.inner;
        let mut call = inner.script(&inner.scripts.unregister);
        call.arg(origin.epoch)
            .arg(&origin.relay.id)
            .arg(encode_namespace(namespace));
        inner.invoke::<i64>(call).await?;
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
        let origin = inner.lookup(namespace).await?;
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
        check_relay(&relay.relay)?;
        check_text("region", &relay.region, true)?;
        let inner = &self.inner;
        let mut call = inner.script(&inner.scripts.heartbeat);
        call.arg(&relay.relay.id)
            .arg(&relay.relay.address)
            .arg(&relay.region)
            .arg(relay.load)
            .arg(inner.lease_ms());
        inner.invoke::<i64>(call).await.map(drop)
    }

    async fn relays(&self) -> Result<Vec<RelayInfo>, RegistryError> {
        let inner = &self.inner;
        let ids: Vec<String> = inner
            .invoke(inner.script(&inner.scripts.live_relays))
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
            let mut parts = value.splitn(4, '\n');
            let (Some(_born), Some(address), Some(region), Some(load)) =
                (parts.next(), parts.next(), parts.next(), parts.next())
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

/// An `ns:` value, `<epoch>\n<born>\n<relay id>\n<address>`, as the origin it names.
fn parse_origin(value: &[u8]) -> Result<Origin, RegistryError> {
    let bad =
        || RegistryError::Protocol(format!("origin entry {:?}", String::from_utf8_lossy(value)));
    let text = std::str::from_utf8(value).map_err(|_| bad())?;
    let mut parts = text.splitn(4, '\n');
    let (Some(epoch), Some(_born), Some(id), Some(address)) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
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

/// A relay's id and address, as the store keeps them.
fn check_relay(relay: &RelayRef) -> Result<(), RegistryError> {
    check_text("relay id", &relay.id, false)?;
    check_text("relay address", &relay.address, false)
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
    fn origin_values_parse() {
        let origin = Origin {
            relay: RelayRef {
                id: "relay-a".into(),
                address: "moqt://a:4443".into(),
            },
            epoch: 7,
        };
        assert_eq!(
            parse_origin(b"7\n1765000000000000\nrelay-a\nmoqt://a:4443"),
            Ok(origin)
        );
        assert!(matches!(
            parse_origin(b"x\n1\ny\nz"),
            Err(RegistryError::Protocol(_))
        ));
        assert!(matches!(
            parse_origin(b"1\n2\ny"),
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
