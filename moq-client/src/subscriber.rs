//! The subscribing side: namespace discovery and tracks as [`futures::Stream`]s, FETCH and
//! TRACK_STATUS. With a reconnecting client they survive reconnects: subscriptions are renewed
//! on the new session without the application doing anything.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use moq_core::message::{FetchType, Parameters};
use moq_core::{AuthToken, FullTrackName, GroupOrder, Location, LocationFilter, TrackNamespace};
use moq_transport::WeakSession;
use moq_transport::namespace::NamespaceEvent;
use moq_transport::track::{
    FetchItem, IncomingPublish, IncomingSubgroup, Object, TrackEvent, TrackStatusInfo,
};
use tokio::sync::{mpsc, watch};

use crate::Error;

/// Where a [`Subscriber`] gets its session: one fixed session, or the latest of a reconnecting
/// client. It holds the session weakly: the streams it serves do not keep a session open that
/// the application dropped.
#[derive(Clone, Debug)]
pub(crate) struct SessionSource {
    /// The current session, `None` while (re)connecting.
    pub(crate) current: watch::Receiver<Option<WeakSession>>,
    /// True if a lost session is replaced (reconnecting client).
    pub(crate) reconnects: bool,
}

impl SessionSource {
    /// The current session, waiting for one while reconnecting. A fixed session that ended
    /// yields its error.
    pub(crate) async fn session(&self) -> Result<moq_transport::Session, Error> {
        let mut rx = self.current.clone();
        loop {
            let s = rx.borrow_and_update().as_ref().map(WeakSession::upgrade);
            match s {
                Some(Some(s)) => match s.close_reason() {
                    None => return Ok(s),
                    Some(e) if !self.reconnects => return Err(e.into()),
                    Some(_) => {}
                },
                Some(None) if !self.reconnects => return Err(dropped()),
                _ => {}
            }
            if rx.changed().await.is_err() {
                return Err(dropped());
            }
        }
    }
}

/// The error of a stream whose session or client the application dropped.
fn dropped() -> Error {
    moq_transport::Error::Closed {
        code: moq_core::codes::SessionErrorCode::NO_ERROR,
        reason: "client dropped".into(),
    }
    .into()
}

/// Options of a subscription.
///
/// ```
/// use moq_client::SubscribeOptions;
/// let opts = SubscribeOptions::default().priority(10).latest_group();
/// assert_eq!(opts.to_parameters().subscriber_priority, Some(10));
/// ```
#[derive(Clone, Debug, Default)]
pub struct SubscribeOptions {
    /// SUBSCRIBER_PRIORITY (0 highest; default 128).
    pub priority: Option<u8>,
    /// GROUP_ORDER; default: the publisher's.
    pub group_order: Option<GroupOrder>,
    /// LOCATION_FILTER; default ([`None`]): everything from now on, sent as LargestObject.
    /// Use [`SubscribeOptions::from`] with `Location::new(0, 0)` for everything the publisher
    /// still has (the equivalent of an unfiltered subscription, draft-19 §5.1.2).
    pub filter: Option<LocationFilter>,
    /// FORWARD; default true.
    pub forward: Option<bool>,
    /// OBJECT_DELIVERY_TIMEOUT.
    pub delivery_timeout: Option<Duration>,
    /// RENDEZVOUS_TIMEOUT: how long a relay may hold the SUBSCRIBE for a publisher to appear.
    pub rendezvous_timeout: Option<Duration>,
    /// AUTHORIZATION_TOKEN.
    pub token: Option<AuthToken>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl SubscribeOptions {
    /// Sets the subscriber priority.
    pub fn priority(mut self, p: u8) -> Self {
        self.priority = Some(p);
        self
    }

    /// Sets the group order.
    pub fn group_order(mut self, o: GroupOrder) -> Self {
        self.group_order = Some(o);
        self
    }

    /// Starts at the next group (NextGroupStart).
    pub fn next_group(mut self) -> Self {
        self.filter = Some(LocationFilter::NextGroupStart);
        self
    }

    /// Starts after the largest object published so far (LargestObject): what is published
    /// from now on. This is the default.
    pub fn latest_group(mut self) -> Self {
        self.filter = Some(LocationFilter::LargestObject);
        self
    }

    /// Starts at `start` (AbsoluteStart).
    pub fn from(mut self, start: Location) -> Self {
        self.filter = Some(LocationFilter::AbsoluteStart(start));
        self
    }

    /// Sets FORWARD.
    pub fn forward(mut self, f: bool) -> Self {
        self.forward = Some(f);
        self
    }

    /// Sets RENDEZVOUS_TIMEOUT.
    pub fn rendezvous(mut self, d: Duration) -> Self {
        self.rendezvous_timeout = Some(d);
        self
    }

    /// Sets AUTHORIZATION_TOKEN.
    pub fn token(mut self, t: AuthToken) -> Self {
        self.token = Some(t);
        self
    }

    /// The SUBSCRIBE parameters. Without a filter, LargestObject is sent: an unfiltered
    /// SUBSCRIBE would ask for every object the publisher still has (draft-19 §5.1.2).
    pub fn to_parameters(&self) -> Parameters {
        Parameters {
            subscriber_priority: self.priority,
            group_order: self.group_order,
            location_filter: Some(self.filter.unwrap_or(LocationFilter::LargestObject)),
            forward: self.forward,
            object_delivery_timeout: self.delivery_timeout.map(ms),
            rendezvous_timeout: self.rendezvous_timeout.map(ms),
            authorization_tokens: self.token.clone().into_iter().collect(),
            ..Default::default()
        }
    }
}

/// Namespaces under a prefix as they come and go: first the current set, then live changes.
/// Ends with an error when the session ends (a reconnecting client reports every namespace
/// removed, then re-subscribes and reports them again).
#[derive(Debug)]
pub struct NamespaceStream {
    rx: mpsc::Receiver<Result<NamespaceEvent, Error>>,
}

impl NamespaceStream {
    /// The next event.
    pub async fn next(&mut self) -> Option<Result<NamespaceEvent, Error>> {
        self.rx.recv().await
    }
}

impl futures::Stream for NamespaceStream {
    type Item = Result<NamespaceEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// One group's objects: a subgroup stream, or a single object that came as a datagram.
#[derive(Debug)]
pub struct GroupStream {
    group: u64,
    inner: GroupInner,
}

#[derive(Debug)]
enum GroupInner {
    Stream(IncomingSubgroup),
    Datagram(Option<Object>),
}

impl GroupStream {
    /// The Group ID.
    pub fn group(&self) -> u64 {
        self.group
    }

    /// The next object; `None` when the group's stream ended.
    pub async fn next_object(&mut self) -> Option<Result<Object, Error>> {
        match &mut self.inner {
            GroupInner::Stream(s) => s.next_object().await.map_err(Error::from).transpose(),
            GroupInner::Datagram(o) => o.take().map(Ok),
        }
    }
}

/// A subscribed track: a stream of [`GroupStream`]s. Ends when the publisher ends the track;
/// yields an error if the subscription fails and cannot be renewed. Dropping it unsubscribes.
#[derive(Debug)]
pub struct TrackStream {
    rx: mpsc::Receiver<Result<GroupStream, Error>>,
    info: watch::Receiver<Option<moq_transport::track::SubscriptionInfo>>,
}

impl TrackStream {
    /// The next group.
    pub async fn next(&mut self) -> Option<Result<GroupStream, Error>> {
        self.rx.recv().await
    }

    /// What the latest SUBSCRIBE_OK said.
    pub fn info(&self) -> Option<moq_transport::track::SubscriptionInfo> {
        self.info.borrow().clone()
    }
}

impl futures::Stream for TrackStream {
    type Item = Result<GroupStream, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// The subscribing side of a session (or of a reconnecting client). Cheap to clone.
#[derive(Clone, Debug)]
pub struct Subscriber {
    pub(crate) source: SessionSource,
    publishes: Arc<tokio::sync::Mutex<mpsc::Receiver<IncomingPublish>>>,
    publish_tx: mpsc::Sender<IncomingPublish>,
}

impl Subscriber {
    pub(crate) fn new(source: SessionSource) -> Self {
        let (tx, rx) = mpsc::channel(64);
        Subscriber {
            source,
            publishes: Arc::new(tokio::sync::Mutex::new(rx)),
            publish_tx: tx,
        }
    }

    /// Hands a PUBLISH from the peer to [`Subscriber::next_publish`].
    pub(crate) fn offer(&self, p: IncomingPublish) {
        if let Err(e) = self.publish_tx.try_send(p) {
            let p = match e {
                mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p) => p,
            };
            p.reject(moq_core::message::RequestError::new(
                moq_core::codes::RequestErrorCode::EXCESSIVE_LOAD,
                "too many PUBLISHes waiting",
            ));
        }
    }

    /// The next PUBLISH the peer sent (for example because of [`Subscriber::subscribe_tracks`]).
    pub async fn next_publish(&self) -> Option<IncomingPublish> {
        self.publishes.lock().await.recv().await
    }

    /// Discovers namespaces under `prefix` (SUBSCRIBE_NAMESPACE); the zero-field prefix means
    /// all of them.
    pub async fn subscribe_namespace(
        &self,
        prefix: TrackNamespace,
    ) -> Result<NamespaceStream, Error> {
        let (tx, rx) = mpsc::channel::<Result<NamespaceEvent, Error>>(256);
        let session = self.source.session().await?;
        let first = session.subscribe_namespace(prefix.clone()).await?;
        let source = self.source.clone();
        tokio::spawn(async move {
            let mut sub = first;
            loop {
                let mut active = std::collections::HashSet::new();
                loop {
                    // Dropping the NamespaceStream cancels the SUBSCRIBE_NAMESPACE at once.
                    let ev = tokio::select! {
                        ev = sub.next() => ev,
                        _ = tx.closed() => return,
                    };
                    let Some(ev) = ev else { break };
                    match &ev {
                        Ok(NamespaceEvent::Added(n)) => {
                            active.insert(n.clone());
                        }
                        Ok(NamespaceEvent::Removed(n)) => {
                            active.remove(n);
                        }
                        Err(_) if source.reconnects => break,
                        Err(_) => {}
                    }
                    if tx.send(ev.map_err(Error::from)).await.is_err() {
                        return;
                    }
                }
                if !source.reconnects {
                    return;
                }
                for n in active {
                    if tx.send(Ok(NamespaceEvent::Removed(n))).await.is_err() {
                        return;
                    }
                }
                // Renew on the next session.
                sub = loop {
                    let s = tokio::select! {
                        s = source.session() => s,
                        _ = tx.closed() => return,
                    };
                    let s = match s {
                        Ok(s) => s,
                        Err(e) => {
                            // The client was dropped: no session will come.
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    };
                    let renewed = tokio::select! {
                        r = s.subscribe_namespace(prefix.clone()) => r,
                        _ = tx.closed() => return,
                    };
                    match renewed {
                        Ok(sub) => break sub,
                        Err(e) if e.is_session_error() => continue,
                        Err(e) => {
                            let _ = tx.send(Err(e.into())).await;
                            return;
                        }
                    }
                };
            }
        });
        Ok(NamespaceStream { rx })
    }

    /// Subscribes to `track`. Returns after SUBSCRIBE_OK.
    pub async fn subscribe(
        &self,
        track: FullTrackName,
        options: SubscribeOptions,
    ) -> Result<TrackStream, Error> {
        let session = self.source.session().await?;
        let first = session
            .subscribe(track.clone(), options.to_parameters())
            .await?;
        let (tx, rx) = mpsc::channel::<Result<GroupStream, Error>>(64);
        let (info_tx, info_rx) = watch::channel(Some(first.info().clone()));
        let source = self.source.clone();
        tokio::spawn(async move {
            let mut sub = first;
            let mut last_group: Option<u64> = None;
            loop {
                let ended_ok = loop {
                    let ev = tokio::select! {
                        ev = sub.next() => ev,
                        _ = tx.closed() => return,
                    };
                    let g = match ev {
                        Some(Ok(TrackEvent::Subgroup(s))) => GroupStream {
                            group: s.group(),
                            inner: GroupInner::Stream(s),
                        },
                        Some(Ok(TrackEvent::Datagram(o))) => GroupStream {
                            group: o.location.group,
                            inner: GroupInner::Datagram(Some(o)),
                        },
                        Some(Err(e)) => {
                            if source.reconnects && e.is_session_error() {
                                break false;
                            }
                            let _ = tx.send(Err(e.into())).await;
                            return;
                        }
                        None => break true,
                    };
                    last_group = Some(last_group.map_or(g.group, |l| l.max(g.group)));
                    if tx.send(Ok(g)).await.is_err() {
                        return;
                    }
                };
                if ended_ok || !source.reconnects {
                    return;
                }
                // Renew on the next session, after the last group seen.
                let mut opts = options.clone();
                if let Some(g) = last_group {
                    opts.filter = Some(LocationFilter::AbsoluteStart(Location::new(g + 1, 0)));
                }
                sub = loop {
                    let s = tokio::select! {
                        s = source.session() => s,
                        _ = tx.closed() => return,
                    };
                    let s = match s {
                        Ok(s) => s,
                        Err(e) => {
                            // The client was dropped: no session will come.
                            let _ = tx.send(Err(e)).await;
                            return;
                        }
                    };
                    let renewed = tokio::select! {
                        r = s.subscribe(track.clone(), opts.to_parameters()) => r,
                        _ = tx.closed() => return,
                    };
                    match renewed {
                        Ok(sub) => break sub,
                        Err(e) if e.is_session_error() => continue,
                        Err(e) => {
                            let _ = tx.send(Err(e.into())).await;
                            return;
                        }
                    }
                };
                info_tx.send_replace(Some(sub.info().clone()));
            }
        });
        Ok(TrackStream { rx, info: info_rx })
    }

    /// Fetches a range of past objects, in ascending group order.
    pub async fn fetch(
        &self,
        track: FullTrackName,
        start: Location,
        end: Location,
    ) -> Result<Vec<Object>, Error> {
        let session = self.source.session().await?;
        let mut resp = session
            .fetch(
                FetchType::Standalone { track, start, end },
                Parameters::default(),
            )
            .await?;
        let mut out = Vec::new();
        while let Some(item) = resp.next().await {
            if let FetchItem::Object(o) = item? {
                out.push(o);
            }
        }
        Ok(out)
    }

    /// A track's state (TRACK_STATUS).
    pub async fn track_status(&self, track: FullTrackName) -> Result<TrackStatusInfo, Error> {
        let session = self.source.session().await?;
        Ok(session.track_status(track, Parameters::default()).await?)
    }

    /// Asks for a PUBLISH of every track under `prefix` (SUBSCRIBE_TRACKS); they arrive through
    /// [`Subscriber::next_publish`].
    pub async fn subscribe_tracks(
        &self,
        prefix: TrackNamespace,
    ) -> Result<moq_transport::track::TrackSubscription, Error> {
        let session = self.source.session().await?;
        Ok(session
            .subscribe_tracks(prefix, Parameters::default())
            .await?)
    }
}
