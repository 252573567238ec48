//! SUBSCRIBE_NAMESPACE, both sides (draft-19 §6.1, §10.16-§10.18).

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use moq_core::TrackNamespace;
use moq_core::codes::StreamResetCode;
use moq_core::message::{
    Message, Namespace, NamespaceDone, ParamContext, Parameters, RequestOk, SubscribeNamespace,
};
use tokio::sync::{mpsc, watch};

use super::cluster::{Received, cluster_params, received_route, withheld};
use super::state::NamespaceState;
use crate::error::Error;
use crate::index::{Change, NamespaceEvent, NamespaceIndex, NamespaceRoute};
use crate::request::{Event, Feed, Request, RequestHandle};
use crate::session::ClusterLink;
use crate::session::{GoawayInfo, RequestKind};

/// The namespaces a peer knows under a prefix, as they come and go (SUBSCRIBE_NAMESPACE).
///
/// Yields [`NamespaceEvent::Added`] for each NAMESPACE and [`NamespaceEvent::Removed`] for each
/// NAMESPACE_DONE, with full namespaces (prefix and suffix joined). If the peer ends the
/// response stream (FIN or reset) every active namespace is reported removed (draft-19 §10.18)
/// and the stream ends; if the session ends it yields that error, then ends.
///
/// Dropping it cancels the SUBSCRIBE_NAMESPACE: RESET_STREAM and STOP_SENDING on its request
/// stream (draft-19 §6.1), UNSUBSCRIBE_NAMESPACE on drafts 14-16. Events queued and not read
/// are discarded.
///
/// Implements [`futures::Stream`].
#[derive(Debug)]
#[must_use = "dropping it cancels the SUBSCRIBE_NAMESPACE"]
pub struct NamespaceSubscription {
    prefix: watch::Receiver<TrackNamespace>,
    request: RequestHandle,
    events: Feed<Advertised>,
}

/// One change a [`NamespaceSubscription`] reads, with the route the NAMESPACE advertised
/// ([`NamespaceSubscription::next_advertised`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Advertised {
    /// What changed.
    pub event: NamespaceEvent,
    /// On a session that negotiated the MoQ Cluster extension (draft-lcurley-moq-cluster),
    /// the route an added namespace is reached through: its HOP_PATH and its ROUTE_COST plus
    /// the link's cost (the peer's RELAY_COST, else 1). `None` otherwise and on removals.
    pub route: Option<NamespaceRoute>,
    /// True for a repeated NAMESPACE of a namespace already added: the peer changed its
    /// route (draft-lcurley-moq-cluster-01 Updating an Advertisement: a repeat replaces the
    /// advertisement).
    pub update: bool,
}

impl NamespaceSubscription {
    /// The current prefix.
    pub fn prefix(&self) -> TrackNamespace {
        self.prefix.borrow().clone()
    }

    /// The SUBSCRIBE_NAMESPACE's Request ID.
    pub fn request_id(&self) -> u64 {
        self.request.id()
    }

    /// The next change; `None` once the subscription has ended.
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Result<NamespaceEvent, Error>> {
        loop {
            match self.events.next().await? {
                Ok(a) if a.update => continue,
                r => return Some(r.map(|a| a.event)),
            }
        }
    }

    /// The next change with the route its NAMESPACE advertised, updates of a namespace's
    /// route included (which [`NamespaceSubscription::next`] leaves out). A NAMESPACE whose
    /// HOP_PATH holds this endpoint's own Hop ID is not reported (a namespace it replaces is
    /// reported removed): it looped back.
    ///
    /// Cancel safe.
    pub async fn next_advertised(&mut self) -> Option<Result<Advertised, Error>> {
        self.events.next().await
    }

    /// Moves the subscription to a new prefix with REQUEST_UPDATE and TRACK_NAMESPACE_PREFIX
    /// (draft-19 §10.9.2). On success every namespace under the old prefix is reported removed
    /// and those under the new one follow.
    ///
    /// Cancel safe: dropped before it resolves, the update is either not sent at all or sent
    /// with its answer still applied (the events follow the new prefix).
    pub async fn update_prefix(&self, prefix: TrackNamespace) -> Result<(), Error> {
        let params = Parameters {
            track_namespace_prefix: Some(prefix),
            ..Default::default()
        };
        self.request.update(params).await.map(|_| ())
    }

    /// A GOAWAY the peer sent on this request's stream.
    pub fn goaway(&self) -> Option<GoawayInfo> {
        self.request.goaway()
    }
}

impl futures::Stream for NamespaceSubscription {
    type Item = Result<NamespaceEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match std::task::ready!(self.events.poll_next(cx)) {
                Some(Ok(a)) if a.update => continue,
                r => return Poll::Ready(r.map(|r| r.map(|a| a.event))),
            }
        }
    }
}

/// Sends SUBSCRIBE_NAMESPACE and waits for REQUEST_OK.
pub(crate) async fn subscribe_namespace(
    state: &NamespaceState,
    prefix: TrackNamespace,
    params: Parameters,
) -> Result<NamespaceSubscription, Error> {
    let core = state.core();
    let mut req = Request::open(
        core,
        SubscribeNamespace {
            request_id: 0,
            prefix: prefix.clone(),
            params,
        },
    )
    .await?;
    // draft-19 §10.18: anything but REQUEST_OK / REQUEST_ERROR first is a PROTOCOL_VIOLATION.
    req.request_ok(ParamContext::SubscribeNamespaceOk).await?;
    // draft-lcurley-moq-cluster-01 Namespace Advertisements: NAMESPACE takes its extended form once
    // negotiated.
    let cluster = core.cluster();
    if cluster.is_some() {
        req.read_clustered();
    }
    let request = req.handle(ParamContext::UpdateSubscribeNamespace);
    let (events, feed) = req.feed(256);
    let (prefix_tx, prefix_rx) = watch::channel(prefix);
    core.serve(async move {
        let mut discovery = Discovery {
            events,
            prefix: prefix_tx,
            active: HashSet::new(),
            looped: HashSet::new(),
            cluster,
        };
        let end = discovery.run(&mut req).await;
        req.set_end(end);
    });
    Ok(NamespaceSubscription {
        prefix: prefix_rx,
        request,
        events: feed,
    })
}

/// The subscriber's side of an accepted SUBSCRIBE_NAMESPACE.
struct Discovery {
    events: mpsc::Sender<Advertised>,
    prefix: watch::Sender<TrackNamespace>,
    active: HashSet<TrackNamespace>,
    /// Namespaces whose last NAMESPACE looped back (MoQ Cluster extension): their
    /// NAMESPACE_DONE is no violation.
    looped: HashSet<TrackNamespace>,
    cluster: Option<ClusterLink>,
}

/// Why the subscriber's side stops.
enum Stop {
    /// The application dropped its handle.
    Dropped,
    /// A violation or the end of the session.
    Failed(Error),
}

impl Discovery {
    async fn run(&mut self, req: &mut Request) -> Result<(), Error> {
        loop {
            let step = match req.next().await {
                Event::Message(m) => self.on_message(req, m).await,
                Event::Updated(u) => {
                    let moved = match (&u.answer, &u.params.track_namespace_prefix) {
                        (Ok(_), Some(p)) => Some(p.clone()),
                        _ => None,
                    };
                    // draft-19 §10.9.2: the namespaces that follow are relative to the new
                    // prefix. Those still under it stay active (a later NAMESPACE_DONE for one
                    // is valid); the others are gone.
                    let gone = moved.map(|p| {
                        let mut gone: Vec<TrackNamespace> = self
                            .active
                            .iter()
                            .filter(|n| !p.is_prefix_of(n))
                            .cloned()
                            .collect();
                        gone.sort();
                        for n in &gone {
                            self.active.remove(n);
                        }
                        self.looped.retain(|n| p.is_prefix_of(n));
                        self.prefix.send_replace(p);
                        gone
                    });
                    u.reply();
                    self.removed(gone.unwrap_or_default()).await
                }
                // draft-19 §10.18: a FIN or a reset counts as NAMESPACE_DONE for each active one.
                Event::Fin => {
                    req.finish();
                    let gone = self.take_active();
                    let _ = self.removed(gone).await;
                    return Ok(());
                }
                Event::Ended(e @ Error::Cancelled(_)) => {
                    let gone = self.take_active();
                    let _ = self.removed(gone).await;
                    return Err(e);
                }
                Event::Ended(e) => return Err(e),
                Event::Update(_) => Ok(()),
                Event::Dropped => Err(Stop::Dropped),
            };
            match step {
                Ok(()) => {}
                // Cancelled by the application (draft-19 §6.1: reset / STOP_SENDING).
                Err(Stop::Dropped) => return Err(req.dropped()),
                Err(Stop::Failed(e)) => return Err(e),
            }
        }
    }

    async fn on_message(&mut self, req: &Request, m: Message) -> Result<(), Stop> {
        let prefix = self.prefix.borrow().clone();
        match m {
            Message::Namespace(n) => {
                let full = prefix
                    .join(&n.suffix)
                    .map_err(|e| Stop::Failed(req.violation(format!("NAMESPACE suffix: {e}"))))?;
                let route = match received_route(self.cluster, n.cluster.as_deref()) {
                    Ok(route) => route,
                    Err(Received::Violation(why)) => {
                        return Err(Stop::Failed(req.violation(why.to_string())));
                    }
                    // draft-lcurley-moq-cluster-01 Relay Behavior: dropped; a repeat that loops
                    // retracts what the namespace's earlier NAMESPACE advertised.
                    Err(Received::Looped) => {
                        self.looped.insert(full.clone());
                        if self.active.remove(&full) {
                            self.emit(NamespaceEvent::Removed(full), None, false)
                                .await?;
                        }
                        return Ok(());
                    }
                };
                self.looped.remove(&full);
                let update = !self.active.insert(full.clone());
                // Without the extension a repeat says nothing new.
                if !update || route.is_some() {
                    self.emit(NamespaceEvent::Added(full), route, update)
                        .await?;
                }
                Ok(())
            }
            Message::NamespaceDone(n) => match prefix.join(&n.suffix).ok() {
                Some(full) if self.active.remove(&full) => {
                    self.emit(NamespaceEvent::Removed(full), None, false).await
                }
                Some(full) if self.looped.remove(&full) => Ok(()),
                // draft-19 §10.18: NAMESPACE_DONE before its NAMESPACE is a PROTOCOL_VIOLATION.
                _ => Err(Stop::Failed(req.violation(format!(
                    "NAMESPACE_DONE for {} before its NAMESPACE",
                    n.suffix
                )))),
            },
            m => Err(Stop::Failed(req.unexpected(&m))),
        }
    }

    fn take_active(&mut self) -> Vec<TrackNamespace> {
        self.looped.clear();
        let mut gone: Vec<TrackNamespace> = self.active.drain().collect();
        gone.sort();
        gone
    }

    async fn removed(&self, gone: Vec<TrackNamespace>) -> Result<(), Stop> {
        for ns in gone {
            self.emit(NamespaceEvent::Removed(ns), None, false).await?;
        }
        Ok(())
    }

    async fn emit(
        &self,
        event: NamespaceEvent,
        route: Option<NamespaceRoute>,
        update: bool,
    ) -> Result<(), Stop> {
        let a = Advertised {
            event,
            route,
            update,
        };
        self.events.send(a).await.map_err(|_| Stop::Dropped)
    }
}

/// Answers a SUBSCRIBE_NAMESPACE from the peer from the session's namespace index.
pub(crate) async fn serve_subscribe_namespace(
    state: Arc<NamespaceState>,
    msg: Box<SubscribeNamespace>,
    mut req: Box<Request>,
) -> Result<(), Error> {
    // The message and the request come boxed, and every step but waiting is boxed when it
    // runs: inline, the largest step would size the state the subscription waits in for its
    // whole life (5.4 KB before).
    let core = state.core();
    req.take_updates(ParamContext::UpdateSubscribeNamespace);
    let mut prefix = msg.prefix;
    let refusal = state.subscriptions.check_room();
    // draft-19 §10.18: the publisher MUST ensure the subscriber is authorized.
    let admitted = Box::pin(req.authorize(refusal, RequestKind::SubscribeNamespace, &prefix, None))
        .await
        .and_then(|()| state.subscriptions.take(&prefix));
    let mut slot = match admitted {
        Ok(slot) => slot,
        // draft-19 §10.18: on error the stream is closed with a FIN.
        Err(e) => return Box::pin((*req).refuse(e)).await,
    };
    let index = &core.config().namespaces;
    let queue = core.config().limits.namespace_queue;
    let observer = core.config().observer.as_ref();
    // Held while the subscription lives on `prefix` (RequestObserver::discovering).
    let mut _discovering = observer.and_then(|o| o.discovering(&prefix));
    let (now, mut watch) = index.watch(&prefix, queue);
    let mut shown = Shown::new(core.cluster());
    // draft-19 §10.18: REQUEST_OK first, then a NAMESPACE for each known match.
    Box::pin(req.send(RequestOk::default())).await?;
    Box::pin(send_snapshot(&mut req, &prefix, now, index, &mut shown)).await?;
    tracing::debug!(%prefix, "SUBSCRIBE_NAMESPACE accepted");
    loop {
        tokio::select! {
            ev = watch.next_change() => {
                let msg: Option<Message> = match ev {
                    Some(Change::Event(NamespaceEvent::Added(ns) | NamespaceEvent::Removed(ns)) | Change::Rerouted(ns)) if !req.visible(&ns) => continue,
                    Some(Change::Event(NamespaceEvent::Added(ns))) => shown.known(&ns, &prefix, index, false),
                    Some(Change::Rerouted(ns)) => shown.known(&ns, &prefix, index, true),
                    Some(Change::Event(NamespaceEvent::Removed(ns))) => shown.removed(&ns, &prefix),
                    None => {
                        // We fell behind the index: reset rather than queue without bound
                        // (draft-19 §10.18 allows resetting a blocked response stream).
                        tracing::debug!(%prefix, "namespace subscription fell behind; resetting");
                        req.cancel(StreamResetCode::TOO_FAR_BEHIND);
                        return Ok(());
                    }
                };
                if let Some(msg) = msg {
                    Box::pin(req.send(msg)).await?;
                }
            }
            ev = req.next() => match ev {
                // draft-19 §10.9.1: a failed update closes the stream.
                Event::Update(Err(e)) => {
                    Box::pin(req.answer_update(Err(e))).await?;
                    return Ok(());
                }
                Event::Update(Ok(u)) => {
                    let new_prefix = u.params.track_namespace_prefix.clone().unwrap_or_else(|| prefix.clone());
                    let mut answer =
                        Box::pin(req.authorize(None, RequestKind::SubscribeNamespace, &new_prefix, None))
                            .await;
                    if answer.is_ok() && new_prefix != prefix {
                        // draft-19 §10.9.2: the new prefix re-checks PREFIX_OVERLAP.
                        answer = slot.move_to(&new_prefix);
                    }
                    if !Box::pin(req.answer_update(answer.map(|()| RequestOk::default()))).await? {
                        return Ok(());
                    }
                    if new_prefix != prefix {
                        prefix = new_prefix;
                        _discovering = observer.and_then(|o| o.discovering(&prefix));
                        let (now, w) = index.watch(&prefix, queue);
                        watch = w;
                        shown.moved_to(&prefix);
                        Box::pin(send_snapshot(&mut req, &prefix, now, index, &mut shown)).await?;
                    }
                }
                Event::Message(m) => return Err(req.unexpected(&m)),
                Event::Ended(_) => return Ok(()),
                // draft-18 §6.1: the subscriber's FIN cancels, freeing the prefix.
                Event::Fin if core.version().fin_cancels_discovery() => {
                    req.finish();
                    return Ok(());
                }
                // A FIN from the subscriber is not a cancellation (draft-19 §3.3.2).
                Event::Fin | Event::Dropped | Event::Updated(_) => {}
            },
        }
    }
}

async fn send_snapshot(
    req: &mut Request,
    prefix: &TrackNamespace,
    now: Vec<TrackNamespace>,
    index: &NamespaceIndex,
    shown: &mut Shown,
) -> Result<(), Error> {
    for ns in now {
        if !req.visible(&ns) {
            continue;
        }
        if let Some(m) = shown.known(&ns, prefix, index, false) {
            req.send(m).await?;
        }
    }
    Ok(())
}

/// What one SUBSCRIBE_NAMESPACE response stream tells its subscriber: a NAMESPACE for each
/// namespace known under the prefix and a NAMESPACE_DONE when it goes; under the MoQ Cluster
/// extension each NAMESPACE in the extended form, and none for a namespace whose route went
/// through the subscriber.
struct Shown {
    cluster: Option<ClusterLink>,
    /// Known namespaces not advertised (MoQ Cluster extension): their route goes through the
    /// subscriber. Their removal says nothing; a new route that does not advertises them.
    withheld: HashSet<TrackNamespace>,
}

impl Shown {
    fn new(cluster: Option<ClusterLink>) -> Self {
        Shown {
            cluster,
            withheld: HashSet::new(),
        }
    }

    /// What to send for `ns`, known in the index: newly (`rerouted` false) or with a new
    /// best route.
    fn known(
        &mut self,
        ns: &TrackNamespace,
        prefix: &TrackNamespace,
        index: &NamespaceIndex,
        rerouted: bool,
    ) -> Option<Message> {
        let suffix = ns.strip_prefix(prefix)?;
        let Some(link) = self.cluster else {
            // Without the extension a new route says nothing.
            return (!rerouted).then(|| {
                Namespace {
                    suffix,
                    cluster: None,
                }
                .into()
            });
        };
        let route = index.route(ns).unwrap_or_default();
        if withheld(&route, link) {
            // draft-lcurley-moq-cluster-01 Path Selection: never advertised to the peer
            // whose Hop ID the path holds; one advertised before is withdrawn.
            let was_shown = self.withheld.insert(ns.clone()) && rerouted;
            return was_shown.then(|| NamespaceDone { suffix }.into());
        }
        self.withheld.remove(ns);
        // draft-lcurley-moq-cluster-01 Namespace Advertisements: the extended NAMESPACE, with
        // HOP_PATH and ROUTE_COST; Updating an Advertisement: a repeat replaces the route.
        Some(
            Namespace {
                suffix,
                cluster: cluster_params(&route, link.ours),
            }
            .into(),
        )
    }

    /// What to send for `ns`, gone from the index: NAMESPACE_DONE, unless it was withheld.
    fn removed(&mut self, ns: &TrackNamespace, prefix: &TrackNamespace) -> Option<Message> {
        let suffix = ns.strip_prefix(prefix)?;
        (!self.withheld.remove(ns)).then(|| NamespaceDone { suffix }.into())
    }

    /// The subscription moved to `prefix`: what was withheld outside it is forgotten.
    fn moved_to(&mut self, prefix: &TrackNamespace) {
        self.withheld.retain(|ns| prefix.is_prefix_of(ns));
    }
}
