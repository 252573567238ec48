//! A watch's task: its sharded subscriptions (one connection per node holding a channel it
//! follows), the changes they carry, sweeping the namespaces of relays whose lease ended in
//! the shards it follows, and reconnection with a resync after a message may have been lost.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use moq_core::TrackNamespace;
use redis::{PushInfo, Value};
use tokio::sync::mpsc;

use super::{Inner, PRUNE_MIN, Subscription};
use crate::registry::NamespaceChange;
use crate::registry::common::decode_namespace;

/// Follows the changes under `prefix` until `tx`'s reader goes away, reconnecting (and
/// reporting what changed meanwhile) whenever the store is lost.
pub(super) async fn watch_task(
    inner: Arc<Inner>,
    prefix: TrackNamespace,
    subscription: Subscription,
    tx: mpsc::Sender<NamespaceChange>,
) {
    let Ok(shards) = inner.shards_of(&prefix) else {
        return;
    };
    let mut known: HashSet<TrackNamespace> = HashSet::new();
    let mut next = Some(subscription);
    let prune_every = (inner.config.lease / 4).max(PRUNE_MIN);
    let mut backoff = Duration::from_millis(50);
    loop {
        let pubsub = match next.take() {
            Some(pubsub) => Some(pubsub),
            None => inner.subscribe(&prefix).await.ok(),
        };
        // Subscribed first, then scanned: a change between the two is seen twice at worst,
        // and `known` drops the repeat.
        let synced = match pubsub {
            Some(pubsub) => match inner.scan(&prefix).await {
                Ok(now) => Some((pubsub, now)),
                Err(_) => None,
            },
            None => None,
        };
        let Some((pubsub, now)) = synced else {
            tokio::select! {
                _ = tx.closed() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(inner.config.lease.max(Duration::from_millis(100)));
            continue;
        };
        backoff = Duration::from_millis(50);
        let now: HashSet<TrackNamespace> = now.into_iter().collect();
        let gone: Vec<TrackNamespace> = known.difference(&now).cloned().collect();
        for namespace in gone {
            if !apply(&mut known, NamespaceChange::Removed(namespace), &tx).await {
                return;
            }
        }
        let mut added: Vec<TrackNamespace> = now.into_iter().collect();
        added.sort_by(|a, b| a.fields().cmp(b.fields()));
        for namespace in added {
            if !apply(&mut known, NamespaceChange::Added(namespace), &tx).await {
                return;
            }
        }
        let mut subscription = pubsub;
        let mut prune_at = tokio::time::Instant::now();
        let mut pruned = prune_at;
        loop {
            tokio::select! {
                _ = tx.closed() => return,
                message = subscription.messages.recv() => {
                    // A connection closed, a channel left its node, or a message did not fit:
                    // scan again.
                    if subscription.lost.load(Ordering::Acquire) {
                        break;
                    }
                    let Some(message) = message else { break };
                    let Some(change) = payload(&message).and_then(parse_change) else { continue };
                    let namespace = match &change {
                        NamespaceChange::Added(n) | NamespaceChange::Removed(n) => n,
                    };
                    if !prefix.is_prefix_of(namespace) {
                        continue;
                    }
                    // A new relay lease may end before the next sweep: sweep soon to learn when.
                    if matches!(change, NamespaceChange::Added(_)) {
                        prune_at = prune_at.min(pruned + PRUNE_MIN);
                    }
                    if !apply(&mut known, change, &tx).await {
                        return;
                    }
                }
                _ = tokio::time::sleep_until(prune_at) => {
                    // A silent connection is a lost one.
                    if subscription.lost.load(Ordering::Acquire)
                        || inner.bounded(subscription.ping()).await.is_err()
                    {
                        break;
                    }
                    // Sweep again when the next relay lease ends, or after a quarter lease
                    // (to check the connection), at most every PRUNE_MIN.
                    let wait = match inner.sweep(&shards).await {
                        Ok(next) => next.map_or(prune_every, |n| n.min(prune_every)),
                        Err(e) => {
                            tracing::debug!(%prefix, error = %e, "registry: sweep failed");
                            prune_every
                        }
                    };
                    pruned = tokio::time::Instant::now();
                    prune_at = pruned + wait.max(PRUNE_MIN);
                }
            }
        }
        tracing::warn!(%prefix, "registry: watch lost its store connection; reconnecting");
    }
}

/// Sends `change` if it changes `known`; false once the reader is gone.
async fn apply(
    known: &mut HashSet<TrackNamespace>,
    change: NamespaceChange,
    tx: &mpsc::Sender<NamespaceChange>,
) -> bool {
    let new = match &change {
        NamespaceChange::Added(n) => known.insert(n.clone()),
        NamespaceChange::Removed(n) => known.remove(n),
    };
    !new || tx.send(change).await.is_ok()
}

/// A sharded message's payload: `smessage <channel> <payload>`.
fn payload(message: &PushInfo) -> Option<&[u8]> {
    match message.data.get(1) {
        Some(Value::BulkString(bytes)) => Some(bytes),
        _ => None,
    }
}

/// `+<ns>` or `-<ns>` from a channel.
fn parse_change(payload: &[u8]) -> Option<NamespaceChange> {
    let (sign, member) = payload.split_first()?;
    let namespace = decode_namespace(member)?;
    match sign {
        b'+' => Some(NamespaceChange::Added(namespace)),
        b'-' => Some(NamespaceChange::Removed(namespace)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse() {
        let a = TrackNamespace::from_strs(["a"]).unwrap();
        assert_eq!(
            parse_change(b"+61."),
            Some(NamespaceChange::Added(a.clone()))
        );
        assert_eq!(parse_change(b"-61."), Some(NamespaceChange::Removed(a)));
        assert_eq!(parse_change(b"*61."), None);
        assert_eq!(parse_change(b""), None);
    }
}
