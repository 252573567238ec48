//! The route registry on Valkey or Redis: one node, or a Redis Cluster (the two speak the
//! same protocol; Redis 7.0 or later, Valkey 7.2 or later: sharded pub/sub).
//!
//! # Shards
//!
//! Every key lives in one of `shards` shards (`RedisRegistryConfig::shards`: 1 on one node,
//! 16 by default on a cluster), named by a hash tag, `<prefix>{s<k>}:`, so a shard's keys are
//! in one slot of a cluster and every script runs on one node. A namespace belongs to the
//! shard of its first field (FNV-1a of the field, modulo `shards`): its entry, the prefix index
//! it is in, its channel and the lease of the relay that registered it are all there, so a
//! lookup is one script on one node (one round trip), a scan of a prefix reads one shard
//! (the empty prefix reads each), and a watch follows one sharded channel (the empty prefix
//! one per shard, on whichever nodes hold them).
//!
//! # Namespaces ride on their relay's lease
//!
//! A relay holds a lease in each shard it registered in, `lease:<id>`, and each namespace it
//! registers there is valid while that lease is live and is the one it was registered under:
//! a relay refreshes one key per shard per half lease ([`Registry::refresh_relay`], through
//! the one [`Registration`] refresher it shares across its registrations), not one per
//! namespace: at most `shards` calls, sent together, however many namespaces it holds. On one
//! node (one shard), a million namespaces over a thousand relays and a 10 s lease is about 200
//! refreshes a second (a thousand relays every 5 s) instead of 200,000.
//!
//! Each lease has an identity, `<born>`: the store's clock in µs when it began. A lease that
//! runs out and starts again (a relay back after a partition, or a restarted relay with the
//! same id) gets a new one, so the namespaces of the old one stay dead. What is stored, with
//! `<T>` a shard's base (`<prefix>{s<k>}:`, prefix `moq:` by default), `<ns>` a namespace
//! encoded as each field's hex followed by `.` and `<f>` its first field so encoded:
//!
//! | key | type | holds |
//! |---|---|---|
//! | `<T>ns:<ns>` | string, no expiry | `<epoch>\n<born>\n<relay id>\n<address>` |
//! | `<T>lex` | sorted set | the shard's `<ns>` scored 0, for prefix ranges (`ZRANGE BYLEX`) |
//! | `<T>epoch` | integer | the shard's last epoch handed out (`INCR`) |
//! | `<T>lease:<id>` | string, expires with the lease | `<born>` |
//! | `<T>leases` | sorted set | `<born>:<id>` scored by that lease's end (ms), for the sweep |
//! | `<T>rns:<born>:<id>` | set | the `<ns>` registered under that lease |
//! | `<T>moved:<born>:<id>` | list | `<ns> <new value>` for each taken over from that lease |
//! | `<prefix>{relays}:relay:<id>` | string, expires with the lease | `<address>\n<region>\n<load>` |
//! | `<prefix>{relays}:relays` | sorted set | relay ids scored by their last heartbeat's lease end |
//!
//! and the sharded channels (`SPUBLISH`) `<T>ch:<f>` and `<T>ch` carry `+<ns>` and `-<ns>` for
//! every registration and removal under `<f>` (the second, every one of the shard). A
//! namespace is live when its `ns:` value's `<born>` is its relay's current lease in its
//! shard: `lookup` and `scan` check that (in one script each), so a namespace of a relay whose
//! lease ran out is never answered, even before it is swept.
//!
//! - **Register** creates the relay's lease in the namespace's shard if there is none (so
//!   registering needs no heartbeat first) or extends it, hands out a higher epoch (epochs
//!   grow per shard, so a namespace's only grow), and writes the namespace. A previous owner
//!   whose lease is live is fenced: the namespace leaves its `rns:` set and is appended to its
//!   `moved:` list.
//! - **Refresh**: the relay's one call, `REFRESH_RELAY` in each of its shards, extends (or
//!   recreates) its lease there and takes its `moved:` list: the registrations named there
//!   learn `Moved` with their new origin. When a lease's `<born>` differs from the one the
//!   refresher saw last (the lease ran out, or the store lost it), each of the relay's
//!   registrations is checked on its own (`refresh(namespace, origin)`), and the lost ones are
//!   registered again.
//! - **Sweep**: a relay whose lease in a shard ended has its `rns:` set there emptied (at most
//!   1,000 a call): each namespace still under that lease is deleted and its removal
//!   published, so watchers see `Removed` for every namespace of a relay that died. Watchers
//!   sweep the shards they follow, when the earliest lease in `leases` ends (at most every 25
//!   ms, at least every quarter of their own lease), so they see a relay's death within tens of
//!   milliseconds of its lease's end.
//!
//! Every write is one Lua script, so it is atomic, and every script takes the time from the
//! store (`TIME`), so leases do not depend on the relays' clocks. A script's keys are passed
//! in `KEYS` where it can name them before it runs; the rest (a previous owner's, a dead
//! lease's) it builds from its shard's base, so they share the slot (`redis/scripts.rs`).
//!
//! A namespace costs its `ns:` key (no expiry), one member of its shard's `lex` and one of its
//! relay's `rns:` set (the figure per namespace is in docs/benchmarks.md, "Cluster scale").

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::try_join_all;
use moq_core::TrackNamespace;
use parking_lot::Mutex;
use redis::{AsyncCommands, FromRedisValue, RedisError, Script};
use tokio::sync::mpsc;

mod config;
mod scripts;
mod store;
mod watch;

pub use self::config::RedisRegistryConfig;
use self::config::{Address, MAX_SHARDS};
use self::store::{Store, Subscription};
use self::watch::watch_task;
#[cfg(doc)]
use super::Registration;
use super::common::{LookupCache, decode_namespace, encode_field, encode_namespace};
use super::{NamespaceWatch, Origin, Registry, RegistryError, RelayInfo, RelayLease, RelayRef};

/// A watch sweeps at most this often.
const PRUNE_MIN: Duration = Duration::from_millis(25);
/// Namespaces read per round trip of a scan.
const SCAN_PAGE: usize = 1000;
/// How many namespaces of dead relays one sweep removes at most.
const SWEEP_BATCH: usize = 1000;
/// Changes queued for a watch's reader, and messages queued for its task.
const WATCH_QUEUE: usize = 1024;

/// A [`Registry`] on a Valkey or Redis server, or a Redis Cluster.
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
    address: Address,
    store: Store,
    cache: LookupCache,
    scripts: Scripts,
    /// The shards each relay registered in through this registry: where its leases are.
    relay_shards: Mutex<HashMap<String, BTreeSet<u16>>>,
}

impl std::fmt::Debug for RedisRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisRegistry")
            .field("key_prefix", &self.inner.config.key_prefix)
            .field("shards", &self.inner.config.shards)
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
        if !(1..=MAX_SHARDS).contains(&config.shards) {
            return Err(RegistryError::Invalid(format!(
                "{} shards: from 1 to {MAX_SHARDS}",
                config.shards
            )));
        }
        let address = Address::parse(&config)?;
        let store = Store::connect(&address, config.timeout)?;
        Ok(RedisRegistry {
            inner: Arc::new(Inner {
                cache: LookupCache::new(config.cache_ttl, config.cache_capacity),
                config,
                address,
                store,
                relay_shards: Mutex::new(HashMap::new()),
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

    /// Asks the store for a PONG (each node of a cluster): `Ok` when it answers within the
    /// timeout. Cancel-safe.
    pub async fn ping(&self) -> Result<(), RegistryError> {
        let mut con = self.inner.store.clone();
        self.inner
            .bounded(async move { redis::cmd("PING").exec_async(&mut con).await })
            .await
    }

    /// The key of `namespace`'s entry: for tests and operators, to see which slot (and node)
    /// of a cluster holds it (`CLUSTER KEYSLOT`).
    #[doc(hidden)]
    pub fn entry_key(&self, namespace: &TrackNamespace) -> Result<String, RegistryError> {
        let (base, member) = self.inner.place(namespace)?;
        Ok(format!("{base}ns:{member}"))
    }

    /// For benchmarks (moq-bench's `cluster-scale` section), not a relay: registers every one
    /// of `namespaces` as `relay`'s with one script call per shard (as many
    /// [`Registry::register`] calls would, with their epochs and notifications, but without
    /// their answers). Keep a batch to a few thousand: a node does nothing else while it
    /// runs. Not cancel-safe across shards: dropped midway, some shards' part is registered.
    #[doc(hidden)]
    pub async fn register_many(
        &self,
        namespaces: &[TrackNamespace],
        relay: &RelayRef,
    ) -> Result<usize, RegistryError> {
        check_relay(relay)?;
        let inner = &self.inner;
        let mut by_shard: BTreeMap<u16, Vec<String>> = BTreeMap::new();
        for namespace in namespaces {
            let shard = inner.shard(&Inner::first(namespace)?);
            by_shard
                .entry(shard)
                .or_default()
                .push(encode_namespace(namespace));
        }
        let mut n = 0;
        for (shard, members) in by_shard {
            inner.note_shard(&relay.id, shard);
            let base = inner.base(shard);
            let mut call = inner.scripts.register_many.prepare_invoke();
            inner.registering(&mut call, &base, relay);
            for member in members {
                call.arg(member);
            }
            n += inner.invoke::<usize>(call).await?;
        }
        for namespace in namespaces {
            inner.cache.forget(namespace);
        }
        Ok(n)
    }
}

/// FNV-1a (32 bits): a hash every relay computes alike, whatever its build.
fn fnv1a(text: &str) -> u32 {
    text.bytes().fold(0x811c_9dc5, |hash, byte| {
        (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
    })
}

impl Inner {
    fn lease_ms(&self) -> u64 {
        u64::try_from(self.config.lease.as_millis()).unwrap_or(u64::MAX)
    }

    /// The first field of `namespace`, encoded (the shard and channel it belongs to).
    fn first(namespace: &TrackNamespace) -> Result<String, RegistryError> {
        let field = namespace
            .field(0)
            .ok_or_else(|| RegistryError::Invalid("the empty namespace".into()))?;
        let mut out = String::new();
        encode_field(field, &mut out);
        Ok(out)
    }

    /// The shard of the encoded first field `first`.
    fn shard(&self, first: &str) -> u16 {
        u16::try_from(fnv1a(first) % u32::from(self.config.shards)).unwrap_or(0)
    }

    /// Shard `shard`'s key base: the prefix and the shard's hash tag.
    fn base(&self, shard: u16) -> String {
        format!("{}{{s{shard}}}:", self.config.key_prefix)
    }

    /// The relay list's key base (one slot of its own).
    fn relays_base(&self) -> String {
        format!("{}{{relays}}:", self.config.key_prefix)
    }

    /// `namespace`'s shard base and its encoding.
    fn place(&self, namespace: &TrackNamespace) -> Result<(String, String), RegistryError> {
        let shard = self.shard(&Self::first(namespace)?);
        Ok((self.base(shard), encode_namespace(namespace)))
    }

    /// Remembers that `relay` has a lease in `shard`, for its refreshes.
    fn note_shard(&self, relay: &str, shard: u16) {
        let mut all = self.relay_shards.lock();
        if let Some(shards) = all.get_mut(relay) {
            shards.insert(shard);
        } else {
            all.insert(relay.to_string(), BTreeSet::from([shard]));
        }
    }

    /// A registering script's shard keys (after any of its own) and first arguments: the
    /// shard's base, `relay`'s id and address, the lease.
    fn registering(&self, call: &mut redis::ScriptInvocation<'_>, base: &str, relay: &RelayRef) {
        call.key(format!("{base}lex"))
            .key(format!("{base}epoch"))
            .key(format!("{base}lease:{}", relay.id))
            .key(format!("{base}leases"))
            .arg(base)
            .arg(&relay.id)
            .arg(&relay.address)
            .arg(self.lease_ms());
    }

    /// A call of `script` on `origin`'s registration of `namespace`, with the entry's key
    /// (before any of the script's own) and the first arguments of such a script: the shard's
    /// base, `origin`'s epoch and relay id. Answers it with the base and the entry's member.
    fn on_entry<'a>(
        &self,
        script: &'a Script,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(redis::ScriptInvocation<'a>, String, String), RegistryError> {
        let (base, member) = self.place(namespace)?;
        let mut call = script.prepare_invoke();
        call.key(format!("{base}ns:{member}"))
            .arg(&base)
            .arg(origin.epoch)
            .arg(&origin.relay.id);
        Ok((call, base, member))
    }

    /// Runs a prepared script, bounded like every call.
    async fn invoke<T: FromRedisValue>(
        &self,
        call: redis::ScriptInvocation<'_>,
    ) -> Result<T, RegistryError> {
        let mut con = self.store.clone();
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

    /// The live namespaces of shard `shard` that start with `member_prefix`: a range of its
    /// lex index (O(log N + M), so a narrow prefix is cheap however many namespaces share the
    /// shard), each checked against its relay's lease in the script that reads the page.
    async fn scan_range(
        &self,
        shard: u16,
        member_prefix: &str,
        out: &mut BTreeSet<String>,
    ) -> Result<(), RegistryError> {
        let base = self.base(shard);
        // Members are ASCII: every one under the prefix sorts below prefix + 0xff.
        let mut max = format!("({member_prefix}").into_bytes();
        max.push(0xff);
        let mut min = format!("[{member_prefix}").into_bytes();
        loop {
            let mut call = self.scripts.scan_range.prepare_invoke();
            call.key(format!("{base}lex"))
                .arg(&base)
                .arg(&min)
                .arg(&max)
                .arg(SCAN_PAGE);
            let (read, last, live): (usize, String, Vec<String>) = self.invoke(call).await?;
            out.extend(live);
            if read < SCAN_PAGE {
                return Ok(());
            }
            min = format!("({last}").into_bytes();
        }
    }

    /// The shards a watch or scan of `prefix` covers: its first field's, or all.
    fn shards_of(&self, prefix: &TrackNamespace) -> Result<Vec<u16>, RegistryError> {
        if prefix.is_empty() {
            Ok((0..self.config.shards).collect())
        } else {
            Ok(vec![self.shard(&Self::first(prefix)?)])
        }
    }

    async fn scan(&self, prefix: &TrackNamespace) -> Result<Vec<TrackNamespace>, RegistryError> {
        let member_prefix = encode_namespace(prefix);
        let mut members = BTreeSet::new();
        for shard in self.shards_of(prefix)? {
            self.scan_range(shard, &member_prefix, &mut members).await?;
        }
        let mut out: Vec<TrackNamespace> = members
            .iter()
            .filter_map(|m| decode_namespace(m.as_bytes()))
            .collect();
        out.sort_by(|a, b| a.fields().cmp(b.fields()));
        Ok(out)
    }

    /// Removes the namespaces in `shards` of relays whose lease there ended (publishing each
    /// removal). Returns how long until the next relay lease there ends, if one does (zero:
    /// more to sweep).
    async fn sweep(&self, shards: &[u16]) -> Result<Option<Duration>, RegistryError> {
        let calls = shards.iter().map(|&shard| {
            let base = self.base(shard);
            let mut call = self.scripts.sweep.prepare_invoke();
            call.key(format!("{base}leases"))
                .key(format!("{base}lex"))
                .arg(&base)
                .arg(SWEEP_BATCH);
            self.invoke::<(u64, i64)>(call)
        });
        let waits = try_join_all(calls).await?;
        Ok(waits
            .into_iter()
            .filter_map(|(_removed, wait)| u64::try_from(wait).ok())
            .min()
            .map(Duration::from_millis))
    }

    /// The sharded channels a watch of `prefix` follows: its first field's, or every shard's.
    fn channels(&self, prefix: &TrackNamespace) -> Result<Vec<String>, RegistryError> {
        if prefix.is_empty() {
            Ok((0..self.config.shards)
                .map(|shard| format!("{}ch", self.base(shard)))
                .collect())
        } else {
            let first = Self::first(prefix)?;
            Ok(vec![format!("{}ch:{first}", self.base(self.shard(&first)))])
        }
    }

    /// Subscriptions to the channels a watch of `prefix` covers.
    async fn subscribe(&self, prefix: &TrackNamespace) -> Result<Subscription, RegistryError> {
        let channels = self.channels(prefix)?;
        let timeout = self.config.timeout;
        self.bounded(Subscription::open(
            &self.address,
            &channels,
            timeout,
            WATCH_QUEUE,
        ))
        .await
    }

    /// The live registration of `namespace`, or `None`, uncached: one script on one node.
    async fn lookup(&self, namespace: &TrackNamespace) -> Result<Option<Origin>, RegistryError> {
        let (base, member) = self.place(namespace)?;
        let mut call = self.scripts.lookup.prepare_invoke();
        call.key(format!("{base}ns:{member}"))
            .arg(&base)
            .arg(&member);
        let value: Option<Vec<u8>> = self.invoke(call).await?;
        value.map(|v| parse_origin(&v)).transpose()
    }

    /// Extends `relay`'s lease in `shard` and reads the takeovers there above `seen` (the
    /// highest epoch seen under the lease `born`): (born, takeovers).
    async fn refresh_shard(
        &self,
        relay: &RelayRef,
        shard: u16,
        seen: (&str, u64),
    ) -> Result<(String, Vec<Vec<u8>>), RegistryError> {
        let base = self.base(shard);
        let mut call = self.scripts.refresh_relay.prepare_invoke();
        call.key(format!("{base}lease:{}", relay.id))
            .key(format!("{base}leases"))
            .arg(&base)
            .arg(&relay.id)
            .arg(self.lease_ms())
            .arg(seen.1)
            .arg(seen.0);
        self.invoke(call).await
    }
}

/// What `refresh_relay` answers as `seen`: per shard `<shard>:<born>:<epoch>`, comma-separated:
/// the highest takeover epoch listed under that lease.
fn parse_seen(seen: &str) -> HashMap<u16, (&str, u64)> {
    seen.split(',')
        .filter_map(|entry| {
            let mut parts = entry.splitn(3, ':');
            let shard = parts.next()?.parse().ok()?;
            let born = parts.next()?;
            let epoch = parts.next()?.parse().ok()?;
            Some((shard, (born, epoch)))
        })
        .collect()
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
        let inner = &self.inner;
        let shard = inner.shard(&Inner::first(namespace)?);
        let (base, member) = (inner.base(shard), encode_namespace(namespace));
        inner.note_shard(&relay.id, shard);
        let mut call = inner.scripts.register.prepare_invoke();
        call.key(format!("{base}ns:{member}"));
        inner.registering(&mut call, &base, relay);
        call.arg(&member);
        let value: Vec<u8> = inner.invoke(call).await?;
        inner.cache.forget(namespace);
        parse_origin(&value)
    }

    async fn refresh(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError> {
        let inner = &self.inner;
        let (mut call, base, member) = inner.on_entry(&inner.scripts.refresh, namespace, origin)?;
        call.key(format!("{base}lease:{}", origin.relay.id))
            .key(format!("{base}leases"))
            .arg(inner.lease_ms())
            .arg(&member);
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
        seen: &str,
    ) -> Result<Option<RelayLease>, RegistryError> {
        check_relay(relay)?;
        let _ = generation;
        let inner = &self.inner;
        let shards: Vec<u16> = (inner.relay_shards.lock().get(&relay.id))
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let seen = parse_seen(seen);
        // One script per shard the relay has a lease in, all sent at once.
        let answers = try_join_all(shards.iter().map(|&shard| {
            let seen = seen.get(&shard).copied().unwrap_or(("", 0));
            inner.refresh_shard(relay, shard, seen)
        }))
        .await?;
        let (mut generation, mut acked) = (Vec::new(), Vec::new());
        let mut out = Vec::new();
        for (&shard, (born, moved)) in shards.iter().zip(answers) {
            let mut high = match seen.get(&shard) {
                Some((b, epoch)) if *b == born => *epoch,
                _ => 0,
            };
            for entry in moved {
                let bad = || RegistryError::Protocol("a moved entry".into());
                let at = entry.iter().position(|b| *b == b' ').ok_or_else(bad)?;
                let (member, value) = entry.split_at(at);
                let namespace = decode_namespace(member).ok_or_else(bad)?;
                let origin = parse_origin(value.get(1..).unwrap_or_default())?;
                inner.cache.forget(&namespace);
                high = high.max(origin.epoch);
                out.push((namespace, origin));
            }
            generation.push(format!("{shard}:{born}"));
            acked.push(format!("{shard}:{born}:{high}"));
        }
        Ok(Some(RelayLease {
            generation: generation.join(","),
            moved: out,
            seen: acked.join(","),
        }))
    }

    async fn unregister(
        &self,
        namespace: &TrackNamespace,
        origin: &Origin,
    ) -> Result<(), RegistryError> {
        let inner = &self.inner;
        let (mut call, base, member) =
            inner.on_entry(&inner.scripts.unregister, namespace, origin)?;
        call.key(format!("{base}lex")).arg(&member);
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
        let subscription = self.inner.subscribe(prefix).await?;
        let (tx, rx) = mpsc::channel(WATCH_QUEUE);
        // Owned by the watch: dropping it aborts the task and closes its store connections.
        let task = tokio::spawn(watch_task(
            self.inner.clone(),
            prefix.clone(),
            subscription,
            tx,
        ));
        Ok(NamespaceWatch::new(rx).owning(task))
    }

    async fn heartbeat(&self, relay: &RelayInfo) -> Result<(), RegistryError> {
        check_relay(&relay.relay)?;
        check_text("region", &relay.region, true)?;
        let inner = &self.inner;
        let base = inner.relays_base();
        let mut call = inner.scripts.heartbeat.prepare_invoke();
        call.key(format!("{base}relay:{}", relay.relay.id))
            .key(format!("{base}relays"))
            .arg(&base)
            .arg(&relay.relay.id)
            .arg(&relay.relay.address)
            .arg(&relay.region)
            .arg(relay.load)
            .arg(inner.lease_ms());
        inner.invoke::<i64>(call).await.map(drop)
    }

    async fn relays(&self) -> Result<Vec<RelayInfo>, RegistryError> {
        let inner = &self.inner;
        let base = inner.relays_base();
        let mut call = inner.scripts.live_relays.prepare_invoke();
        call.key(format!("{base}relays")).arg(&base);
        let ids: Vec<String> = inner.invoke(call).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        // One slot (`{relays}`): one MGET, on a cluster too.
        let keys: Vec<String> = ids.iter().map(|id| format!("{base}relay:{id}")).collect();
        let mut con = inner.store.clone();
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

fn store_error(e: RedisError) -> RegistryError {
    // A cluster that is failing over or resharding answers CLUSTERDOWN, TRYAGAIN, MASTERDOWN.
    if e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_cluster_error()
    {
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
    fn texts_shards_and_seen() {
        assert!(check_text("id", "a\nb", false).is_err());
        assert!(check_text("id", "", false).is_err());
        assert!(check_text("region", "", true).is_ok());
        // The shard of a first field must not change between builds: relays agree on it.
        assert_eq!(fnv1a(""), 0x811c_9dc5);
        assert_eq!(fnv1a("61."), 0x7099_72f2);
        let seen = parse_seen("3:1765:7,0:1766:0,bad,4:x");
        assert_eq!(seen.get(&3), Some(&("1765", 7)));
        assert_eq!(seen.get(&0), Some(&("1766", 0)));
        assert_eq!(seen.len(), 2);
        assert!(parse_seen("").is_empty());
    }
}
