//! The relay's side of the registry, first step: the namespaces its own publishers announce
//! are registered as this relay's, and unregistered when the last publisher of one withdraws.
//! (Lookups on a SUBSCRIBE miss are `registry_routes.rs`, discovery through
//! [`Registry::watch`] is `registry_discovery.rs`.)

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use moq_core::TrackNamespace;
use moq_transport::namespace::NamespaceEvent;

use super::Relay;
use crate::registry::{Registration, RegistrationState, Registry, RegistryError, RelayRef};

/// Events the relay's index may queue for this follower before it starts over.
const QUEUE: usize = 4096;

/// Registers in `registry`, as `me`, every namespace a publisher of `relay` announces, and
/// keeps each registered (see [`Registration`]) until its last publisher withdraws. While the
/// store is unreachable, what could not be registered is tried again every half lease. A
/// namespace that another relay registered since (a publisher of it there) is left to that
/// relay, and registered here again within half a lease once that relay unregisters it.
///
/// For a relay that is not also in a flooded cluster (`--cluster-peer`): a cluster's learned
/// namespaces share the relay's index and would be registered as this relay's. Entries of the
/// cluster view itself, and namespaces known only from the registry (discovery for this
/// relay's subscribers, [`Relay::is_remote`]), are skipped. Never ends; drop it (or the task
/// running it) to stop, and the registrations are dropped (unregistered) with it.
/// Cancel-safe.
pub async fn register_local_namespaces(relay: Relay, registry: Arc<dyn Registry>, me: RelayRef) {
    let mut held: HashMap<TrackNamespace, Registration> = HashMap::new();
    let retry = registry.lease() / 2;
    loop {
        let (now, mut watch) = relay.namespaces().watch(&TrackNamespace::empty(), QUEUE);
        let mut wanted: BTreeSet<TrackNamespace> =
            now.into_iter().filter(|ns| !relay.is_remote(ns)).collect();
        // The index's state is taken again every half lease: a namespace known from the
        // registry that a publisher here took over (or let go) changes no count it reports.
        let look_again = tokio::time::Instant::now() + retry;
        loop {
            held.retain(|ns, _| wanted.contains(ns));
            // Every half lease at least: a registration may have moved since (it learns so at
            // its refresh), or the store may be back.
            reconcile(&registry, &me, &wanted, &mut held).await;
            let event = match tokio::time::timeout_at(look_again, watch.next()).await {
                Ok(event) => event,
                Err(_) => break,
            };
            match event {
                Some(NamespaceEvent::Added(ns)) if !relay.is_remote(&ns) => {
                    wanted.insert(ns);
                }
                Some(NamespaceEvent::Removed(ns)) => {
                    wanted.remove(&ns);
                }
                Some(_) => {}
                // Fell behind the index: take its state again.
                None => break,
            }
        }
    }
}

/// Registers what is wanted and not held, stopping at the first sign that the store is down.
/// A namespace another relay took over is taken back once that relay let it go (two relays
/// with publishers of one namespace: the last to register serves it, the other stands by).
async fn reconcile(
    registry: &Arc<dyn Registry>,
    me: &RelayRef,
    wanted: &BTreeSet<TrackNamespace>,
    held: &mut HashMap<TrackNamespace, Registration>,
) {
    let moved: Vec<TrackNamespace> = held
        .iter()
        .filter(|(_, r)| matches!(r.state(), RegistrationState::Moved(_)))
        .map(|(ns, _)| ns.clone())
        .collect();
    for ns in moved {
        match registry.lookup(&ns).await {
            Ok(None) => {
                held.remove(&ns);
            }
            Ok(Some(_)) => {}
            Err(_) => return,
        }
    }
    for ns in wanted {
        if held.contains_key(ns) {
            continue;
        }
        match Registration::start(registry.clone(), ns.clone(), me.clone()).await {
            Ok(registration) => {
                held.insert(ns.clone(), registration);
            }
            Err(RegistryError::Unavailable(e)) => {
                tracing::warn!(namespace = %ns, error = %e, "registry: cannot register yet");
                return;
            }
            Err(e) => {
                // Not storable (cannot happen for an announced namespace): tried again at the
                // next change only.
                tracing::warn!(namespace = %ns, error = %e, "registry: not registered");
            }
        }
    }
}
