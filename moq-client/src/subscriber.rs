//! The subscribing side: namespace discovery and tracks as [`futures::Stream`]s, FETCH and
//! TRACK_STATUS. With a reconnecting client they survive reconnects: subscriptions are renewed
//! on the new session without the application doing anything.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::message::{FetchType, Parameters, RequestError};
use moq_core::{FullTrackName, Location, LocationFilter, TrackNamespace};
use moq_transport::WeakSession;
use moq_transport::namespace::NamespaceEvent;
use moq_transport::track::{
    FetchItem, FetchResponse, IncomingPublish, JoiningStart, Object, Subscription, TrackEvent,
    TrackSubscription,
};
use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};

use crate::consume::{
    FetchConsumer, GroupConsumer, ObjectConsumer, Router, TrackConsumer, TrackInfo,
};
use crate::error::Error;
use crate::malformed::Malformed;
use crate::options::{JoinFrom, SubscribeOptions};

/// Where a [`Subscriber`] gets its session: one fixed session, or the latest of a reconnecting
/// client. It holds the session weakly: the streams it serves do not keep a session open that
/// the application dropped.
#[derive(Clone, Debug)]
pub(crate) struct SessionSource {
    /// The current session, `None` while (re)connecting.
    pub(crate) current: watch::Receiver<Option<WeakSession>>,
    /// True if a lost session is replaced (reconnecting client).
    pub(crate) reconnects: bool,
    /// The subscriber's tasks (one per subscription, discovery and join): they outlive a
    /// reconnecting client's sessions, and end on their own once the session (or client) is
    /// gone and their error delivered.
    pub(crate) tasks: Tasks,
}

/// Tasks that a handle owns: counted, cancelled by [`Tasks::cancel`], awaited by
/// [`Tasks::stopped`].
#[derive(Clone, Debug, Default)]
pub(crate) struct Tasks {
    tracker: tokio_util::task::TaskTracker,
    cancel: tokio_util::sync::CancellationToken,
}

impl Tasks {
    /// Runs `task` until it completes or the set is cancelled (after that, not at all).
    pub(crate) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        if !self.cancel.is_cancelled() {
            let run = self.cancel.clone().run_until_cancelled_owned(task);
            self.tracker.spawn(async move {
                run.await;
            });
        }
    }

    /// Cancels every task, now and to come.
    pub(crate) fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Tasks alive.
    pub(crate) fn len(&self) -> usize {
        self.tracker.len()
    }

    /// Resolves once no task is alive (those spawned meanwhile included).
    pub(crate) async fn stopped(&self) {
        // Closing only lets `wait` resolve once empty; tasks may still be spawned.
        self.tracker.close();
        self.tracker.wait().await;
    }
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

/// Namespaces under a prefix as they come and go: first the current set, then live changes.
/// Ends with an error when the session ends (a reconnecting client reports every namespace
/// removed, then re-subscribes and reports them again).
#[must_use = "dropping a NamespaceStream cancels the SUBSCRIBE_NAMESPACE"]
#[derive(Debug)]
pub struct NamespaceStream {
    rx: mpsc::Receiver<Result<NamespaceEvent, Error>>,
}

impl NamespaceStream {
    /// The next event.
    ///
    /// Cancel safe.
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

/// The subscribing side of a session (or of a reconnecting client). Cheap to clone; dropping a
/// clone does nothing else (its streams live on, each ended by dropping it).
#[derive(Clone, Debug)]
pub struct Subscriber {
    pub(crate) source: SessionSource,
    offers: Arc<Offers>,
}

/// Where the peer's PUBLISHes go: to the [`TrackOffers`] of the longest matching prefix, else
/// to [`Subscriber::next_publish`].
#[derive(Debug)]
struct Offers {
    general_rx: tokio::sync::Mutex<mpsc::Receiver<IncomingTrack>>,
    general_tx: mpsc::Sender<IncomingTrack>,
    by_prefix: Mutex<Vec<(TrackNamespace, mpsc::Sender<IncomingTrack>)>>,
}

/// PUBLISHes waiting for the application, per destination, before more are refused.
const PENDING_PUBLISHES: usize = 64;

impl Subscriber {
    pub(crate) fn new(source: SessionSource) -> Self {
        let (tx, rx) = mpsc::channel(PENDING_PUBLISHES);
        Subscriber {
            source,
            offers: Arc::new(Offers {
                general_rx: tokio::sync::Mutex::new(rx),
                general_tx: tx,
                by_prefix: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Hands a PUBLISH from the peer to the application, or refuses it (EXCESSIVE_LOAD) if
    /// too many are waiting.
    pub(crate) fn offer(&self, p: IncomingPublish) {
        let ns = p.track().namespace.clone();
        let tx = {
            let mut by_prefix = self.offers.by_prefix.lock();
            by_prefix.retain(|(_, tx)| !tx.is_closed());
            by_prefix
                .iter()
                .filter(|(prefix, _)| prefix.is_prefix_of(&ns))
                .max_by_key(|(prefix, _)| prefix.len())
                .map(|(_, tx)| tx.clone())
        };
        let tx = tx.unwrap_or_else(|| self.offers.general_tx.clone());
        let offered = IncomingTrack {
            inner: Box::new(p),
            tasks: self.source.tasks.clone(),
        };
        if let Err(e) = tx.try_send(offered) {
            let (mpsc::error::TrySendError::Full(t) | mpsc::error::TrySendError::Closed(t)) = e;
            t.reject(
                RequestErrorCode::EXCESSIVE_LOAD,
                "too many PUBLISHes waiting",
            );
        }
    }

    /// The next track the peer PUBLISHed that no [`TrackOffers`] took; `None` once the
    /// subscriber is dropped.
    ///
    /// Cancel safe.
    pub async fn next_publish(&self) -> Option<IncomingTrack> {
        self.offers.general_rx.lock().await.recv().await
    }

    /// Discovers namespaces under `prefix` (SUBSCRIBE_NAMESPACE); the zero-field prefix means
    /// all of them.
    ///
    /// Cancel safe: dropping the future before it resolves cancels the request.
    pub async fn subscribe_namespace(
        &self,
        prefix: TrackNamespace,
    ) -> Result<NamespaceStream, Error> {
        let (tx, rx) = mpsc::channel::<Result<NamespaceEvent, Error>>(256);
        let session = self.source.session().await?;
        let first = session.subscribe_namespace(prefix.clone()).await?;
        let source = self.source.clone();
        self.source.tasks.spawn(async move {
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

    /// Subscribes to `track`; returns after SUBSCRIBE_OK. Its groups follow as they start.
    /// With a reconnecting client the subscription is renewed on every new session, after the
    /// last group seen; what was published in between comes first, by a Joining FETCH. A
    /// renewal refused for now (DOES_NOT_EXIST, TIMEOUT, GOING_AWAY: a relay that restarted
    /// before the publisher came back) is retried as [`SubscribeOptions::retry`] says, without
    /// an error reaching the consumer; if it is still refused at the end, or refused for
    /// another reason, the consumer gets that refusal and ends. The first SUBSCRIBE is not
    /// retried: its refusal is returned here.
    ///
    /// The publisher's PUBLISH_DONE ends the consumer (`None` after the groups already handed
    /// out), whether the subscription was renewed or not: TRACK_ENDED says the track ended,
    /// and a subscription ended for another reason (SUBSCRIPTION_ENDED, TOO_FAR_BEHIND,
    /// EXPIRED, ...) is not renewed either. Only GOING_AWAY, with a reconnecting client, is
    /// renewed on the session that follows. A relay also ends a subscription with GOING_AWAY
    /// when the track's publisher restarted and numbers its groups anew: the renewal then
    /// starts over on the new numbering, its first groups fetched, and the consumer sees group
    /// IDs go down.
    ///
    /// ```no_run
    /// # async fn run(session: moq_client::Session, track: moq_client::FullTrackName) -> Result<(), moq_client::Error> {
    /// use moq_client::SubscribeOptions;
    /// let mut track = session.subscriber().subscribe(track, SubscribeOptions::default()).await?;
    /// while let Some(group) = track.next_group().await {
    ///     let mut group = group?;
    ///     while let Some(object) = group.next_object().await {
    ///         println!("{}/{}: {:?}", group.id(), object?.location.object, "...");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Cancel safe: dropping the future before it resolves cancels the request.
    pub async fn subscribe(
        &self,
        track: FullTrackName,
        options: SubscribeOptions,
    ) -> Result<TrackConsumer, Error> {
        let session = self.source.session().await?;
        let first = session
            .subscribe(track.clone(), options.to_parameters(true))
            .await?;
        let (consumer, mut router, info_tx) = TrackConsumer::new(&first);
        let source = self.source.clone();
        self.source.tasks.spawn(async move {
            let mut sub = first;
            let mut last_group: Option<u64> = None;
            loop {
                let lost = match pump(&mut sub, &mut router, &mut last_group).await {
                    // A publisher going away ends its subscriptions with GOING_AWAY: renewed
                    // on the session that replaces this one.
                    Pumped::Ended if source.reconnects && going_away(&sub) => {
                        moq_transport::Error::GoingAway
                    }
                    // draft-19 §10.11: PUBLISH_DONE (TRACK_ENDED, or any other status) ends
                    // the subscription, renewed or not: the publisher said it is over.
                    Pumped::Ended => return router.end(sub.publish_done()),
                    Pumped::Dropped => return,
                    Pumped::Malformed(why) => {
                        drop(sub);
                        return router.fail(why.into()).await;
                    }
                    Pumped::Failed(e) => e,
                };
                if !source.reconnects || !(lost.is_session_error() || retryable(&lost)) {
                    return router.fail(lost.into()).await;
                }
                // Renew on the next session, after the last group seen; unless the publisher
                // restarted and numbers its groups anew (a relay ends the old incarnation's
                // subscriptions with GOING_AWAY): then from the new incarnation's first group.
                let mut renew = options.clone();
                let mut restarted = false;
                if let Some(g) = last_group {
                    restarted = matches!(lost, moq_transport::Error::GoingAway)
                        && tokio::select! {
                            r = restarted_below(&source, &track, g) => r,
                            _ = router.closed() => return,
                        };
                    if !restarted {
                        renew.filter = Some(LocationFilter::AbsoluteStart(Location::new(g + 1, 0)));
                    }
                }
                let (session, renewed) =
                    match renew_subscription(&source, &track, &renew, &router).await {
                        Some(Ok(renewed)) => renewed,
                        Some(Err(e)) => return router.fail(e).await,
                        None => return,
                    };
                sub = renewed;
                if restarted {
                    tracing::debug!(track = ?track, "publisher restarted its group numbering");
                    router.restart();
                    last_group = None;
                }
                info_tx.send_replace(Some(TrackInfo::of(sub.info())));
                let from = match last_group {
                    Some(g) => Some(g + 1),
                    None if restarted => Some(0),
                    None => None,
                };
                if let Some(from) = from
                    && fill_gap(&session, &sub, from, &mut router).await.is_err()
                {
                    return;
                }
            }
        });
        Ok(consumer)
    }

    /// Joins `track` at the point `from` names (the start of its current group, of an earlier
    /// one, or the oldest group still held): SUBSCRIBE, then the past up to the subscription's
    /// start (a Joining FETCH, draft-19 §5.2; from draft-20 the subscription's fill, draft-21
    /// §3.4). One stream of objects in order, the past first, then what is published from now
    /// on, with no gap and no duplicate. A joined track is not renewed on reconnect: the
    /// stream ends with the session's error.
    ///
    /// The subscription starts after the largest object (where the past ends), so `options`
    /// may not set a [`SubscribeOptions::filter`] other than [`SubscribeOptions::latest`]:
    /// another is refused with [`Error::Invalid`] rather than replaced (use
    /// [`Subscriber::subscribe`] or [`Subscriber::fetch`] for a range of your own).
    ///
    /// ```no_run
    /// # async fn run(session: moq_client::Session, track: moq_client::FullTrackName) -> Result<(), moq_client::Error> {
    /// use moq_client::{JoinFrom, SubscribeOptions};
    /// let mut objects = session.subscriber().join(track, SubscribeOptions::default(), JoinFrom::CurrentGroup).await?;
    /// while let Some(object) = objects.next().await {
    ///     let object = object?;
    ///     println!("{:?}: {} bytes", object.location, object.payload.len());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// Cancel safe: dropping the future before it resolves cancels both requests.
    pub async fn join(
        &self,
        track: FullTrackName,
        options: SubscribeOptions,
        from: JoinFrom,
    ) -> Result<ObjectConsumer, Error> {
        if options
            .filter
            .is_some_and(|f| f != LocationFilter::LargestObject)
        {
            return Err(Error::Invalid(
                "join starts the subscription after the largest object; a filter of its own \
                 cannot be combined with it (use subscribe or fetch)"
                    .into(),
            ));
        }
        let session = self.source.session().await?;
        // The subscription starts after the largest object, where the past ends.
        let options = options.latest();
        let mut params = options.to_parameters(true);
        // From draft-20 the past comes on the subscription's fill fetch stream (draft-21
        // §3.5: Next Object, and a fill from where `from` says); until draft-19 by a Joining
        // FETCH.
        let fill = session.version().has_fill();
        if fill {
            params.fill = Some(Box::new(Parameters {
                location_filter: Some(fill_start(from)),
                ..Default::default()
            }));
        }
        let mut sub = session.subscribe(track.clone(), params).await?;
        let joining = match from {
            JoinFrom::CurrentGroup => JoiningStart::Relative(0),
            JoinFrom::GroupsBefore(n) => JoiningStart::Relative(n),
            // Not after the current group (a Joining FETCH starting after it is INVALID_RANGE).
            JoinFrom::Group(g) => {
                JoiningStart::Absolute(g.min(sub.info().largest.map_or(0, |l| l.group)))
            }
            JoinFrom::Oldest => JoiningStart::Absolute(0),
        };
        let fetch = match sub.joining_fetch(joining) {
            _ if fill => sub.take_fill(),
            Some(request) => match session.fetch(request, Parameters::default()).await {
                Ok(f) => Some(f),
                // The subscription ended before its Joining FETCH was resolved (a track whose
                // publisher finished it is answered SUBSCRIBE_OK, then PUBLISH_DONE at once):
                // the same range, as a standalone FETCH.
                Err(moq_transport::Error::Rejected(e))
                    if e.code == RequestErrorCode::INVALID_JOINING_REQUEST_ID =>
                {
                    match sub.info().largest {
                        Some(l) => Some(
                            session
                                .fetch(
                                    FetchType::Standalone {
                                        track: track.clone(),
                                        start: Location::new(from.first_group(l.group), 0),
                                        end: Location::new(l.group, l.object.saturating_add(1)),
                                    },
                                    Parameters::default(),
                                )
                                .await?,
                        ),
                        None => None,
                    }
                }
                Err(e) => return Err(e.into()),
            },
            // Nothing published yet: everything comes live.
            None => None,
        };
        let (live, router, _info) = TrackConsumer::new(&sub);
        self.source.tasks.spawn(pump_once(sub, router));
        let (tx, rx) = mpsc::channel(256);
        self.source.tasks.spawn(join_objects(fetch, live, tx));
        Ok(ObjectConsumer { objects: rx })
    }

    /// Fetches the objects from `start` up to `end` (the last object plus one; object 0 means
    /// the whole group) in ascending group order (FETCH, draft-19 §5.2), as a stream.
    ///
    /// Cancel safe: dropping the future before it resolves cancels the request.
    pub async fn fetch(
        &self,
        track: FullTrackName,
        start: Location,
        end: Location,
    ) -> Result<FetchConsumer, Error> {
        let session = self.source.session().await?;
        let inner = session
            .fetch(
                FetchType::Standalone { track, start, end },
                Parameters::default(),
            )
            .await?;
        Ok(FetchConsumer::new(inner))
    }

    /// What the publisher says of `track` now (TRACK_STATUS).
    ///
    /// Cancel safe: dropping the future before it resolves cancels the request.
    pub async fn track_status(&self, track: FullTrackName) -> Result<TrackInfo, Error> {
        let session = self.source.session().await?;
        let status = session
            .track_status(track.clone(), Parameters::default())
            .await?;
        Ok(TrackInfo::new(
            track,
            status.largest,
            status.expires,
            status.track_properties,
        ))
    }

    /// Asks the peer to PUBLISH every track under `prefix` (SUBSCRIBE_TRACKS); they arrive
    /// through the returned [`TrackOffers`]. Not renewed on reconnect.
    ///
    /// Cancel safe: dropping the future before it resolves cancels the request.
    pub async fn subscribe_tracks(&self, prefix: TrackNamespace) -> Result<TrackOffers, Error> {
        let session = self.source.session().await?;
        // Registered first: a PUBLISH may follow REQUEST_OK at once.
        let (tx, rx) = mpsc::channel(PENDING_PUBLISHES);
        self.offers.by_prefix.lock().push((prefix.clone(), tx));
        let request = session
            .subscribe_tracks(prefix, Parameters::default())
            .await?;
        Ok(TrackOffers {
            request: Some(request),
            tracks: rx,
        })
    }
}

/// How a subscription's events stopped.
enum Pumped {
    /// The publisher ended the track.
    Ended,
    /// The application dropped the consumer.
    Dropped,
    /// The subscription failed.
    Failed(moq_transport::Error),
    /// The track showed itself malformed (draft-19 §2.4.2): the subscription is cancelled
    /// (dropped) and not renewed.
    Malformed(Malformed),
}

/// Whether a renewal (or a subscription) refused or ended with this may succeed later, on the
/// same session after a while or on the next one: the track does not exist yet (a relay that
/// restarted before its publisher came back), no publisher appeared in time, or a GOAWAY.
fn retryable(e: &moq_transport::Error) -> bool {
    const LATER: [RequestErrorCode; 3] = [
        RequestErrorCode::DOES_NOT_EXIST,
        RequestErrorCode::TIMEOUT,
        RequestErrorCode::GOING_AWAY,
    ];
    match e {
        moq_transport::Error::Rejected(r) => LATER.contains(&r.code),
        moq_transport::Error::GoingAway | moq_transport::Error::Moved { .. } => true,
        _ => false,
    }
}

/// Whether the publisher ended `sub` with PUBLISH_DONE GOING_AWAY.
fn going_away(sub: &Subscription) -> bool {
    sub.publish_done()
        .is_some_and(|d| d.status == PublishDoneCode::GOING_AWAY)
}

/// Whether the publisher of `track` now numbers its groups below `last` (it restarted), as
/// TRACK_STATUS on the client's current session says; `false` if that cannot be learned.
async fn restarted_below(source: &SessionSource, track: &FullTrackName, last: u64) -> bool {
    let Ok(session) = source.session().await else {
        return false;
    };
    match session
        .track_status(track.clone(), Parameters::default())
        .await
    {
        Ok(status) => status.largest.is_some_and(|l| l.group < last),
        Err(_) => false,
    }
}

/// Subscribes to `track` again with `options` on the client's current session (waiting for
/// one), retrying the refusals that may pass ([`retryable`]) as `options.retry` says. The
/// session and the subscription; the refusal that ended the attempts; `None` once the
/// application dropped the track.
async fn renew_subscription(
    source: &SessionSource,
    track: &FullTrackName,
    options: &SubscribeOptions,
    router: &Router,
) -> Option<Result<(moq_transport::Session, Subscription), Error>> {
    let params = options.to_parameters(true);
    let retry = options.retry;
    let mut wait = retry.backoff.min;
    let mut first_refusal: Option<Instant> = None;
    loop {
        let s = tokio::select! {
            s = source.session() => s,
            _ = router.closed() => return None,
        };
        // The client was dropped: no session will come.
        let s = match s {
            Err(e) => return Some(Err(e)),
            Ok(s) => s,
        };
        let renewed = tokio::select! {
            r = s.subscribe(track.clone(), params.clone()) => r,
            _ = router.closed() => return None,
        };
        let refused = match renewed {
            Ok(sub) => return Some(Ok((s, sub))),
            // Lost again: renewed on the next session.
            Err(e) if e.is_session_error() => continue,
            Err(e) if retryable(&e) => e,
            Err(e) => return Some(Err(e.into())),
        };
        let since = *first_refusal.get_or_insert_with(Instant::now);
        if since.elapsed().saturating_add(wait) > retry.limit {
            return Some(Err(refused.into()));
        }
        tracing::debug!(
            track = ?track,
            error = %refused,
            retry_in = ?wait,
            "subscription renewal refused; retrying"
        );
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = router.closed() => return None,
        }
        wait = retry.backoff.next(wait);
    }
}

/// Routes a subscription's subgroups and datagrams into its groups until it stops.
async fn pump(sub: &mut Subscription, router: &mut Router, last_group: &mut Option<u64>) -> Pumped {
    loop {
        let ev = tokio::select! {
            ev = sub.next() => ev,
            _ = router.closed() => return Pumped::Dropped,
            why = router.malformed() => return Pumped::Malformed(why),
        };
        let ev = match ev {
            Some(Ok(ev)) => ev,
            Some(Err(e)) => return Pumped::Failed(e),
            None => return Pumped::Ended,
        };
        let group = match &ev {
            TrackEvent::Subgroup(s) => s.group(),
            TrackEvent::Datagram(o) => o.location.group,
        };
        *last_group = Some(last_group.map_or(group, |l| l.max(group)));
        if router.route(ev).await.is_err() {
            return Pumped::Dropped;
        }
    }
}

/// What was published while a renewed subscription was away: the renewed SUBSCRIBE carries
/// only what comes after it (draft-19 §10.7), so the groups from `from_group` up to its Largest
/// Location come by a Joining FETCH (§5.2), routed before the live objects. A refused or failed
/// FETCH leaves the gap. `Err` once the application dropped the track.
async fn fill_gap(
    session: &moq_transport::Session,
    sub: &Subscription,
    from_group: u64,
    router: &mut Router,
) -> Result<(), ()> {
    if sub
        .info()
        .largest
        .is_none_or(|l| l < Location::new(from_group, 0))
    {
        return Ok(());
    }
    let Some(request) = sub.joining_fetch(JoiningStart::Absolute(from_group)) else {
        return Ok(());
    };
    let fetch = tokio::select! {
        f = session.fetch(request, Parameters::default()) => f,
        _ = router.closed() => return Err(()),
    };
    let Ok(mut fetch) = fetch else {
        return Ok(());
    };
    loop {
        let item = tokio::select! {
            i = fetch.next() => i,
            _ = router.closed() => return Err(()),
        };
        match item {
            Some(Ok(FetchItem::Object(o))) => router.route(TrackEvent::Datagram(o)).await?,
            Some(Ok(FetchItem::EndOfRange { .. })) => {}
            None | Some(Err(_)) => {
                // The fetched groups hold all they will get from the FETCH.
                router.close_groups();
                return Ok(());
            }
        }
    }
}

/// Routes a subscription that is not renewed.
async fn pump_once(mut sub: Subscription, mut router: Router) {
    match pump(&mut sub, &mut router, &mut None).await {
        Pumped::Ended => router.end(sub.publish_done()),
        Pumped::Dropped => {}
        Pumped::Malformed(why) => {
            drop(sub);
            router.fail(why.into()).await
        }
        Pumped::Failed(e) => router.fail(e.into()).await,
    }
}

/// The objects of a join: the FETCH's first, then the live groups' from after the last
/// fetched location (a relay may deliver an object on both).
async fn join_objects(
    fetch: Option<FetchResponse>,
    mut live: TrackConsumer,
    tx: mpsc::Sender<Result<Object, Error>>,
) {
    let mut last: Option<Location> = None;
    if let Some(mut fetch) = fetch {
        loop {
            let item = tokio::select! {
                i = fetch.next() => i,
                _ = tx.closed() => return,
            };
            let object = match item {
                None => break,
                Some(Ok(FetchItem::Object(o))) => o,
                Some(Ok(FetchItem::EndOfRange { .. })) => continue,
                Some(Err(e)) => {
                    let _ = tx.send(Err(e.into())).await;
                    return;
                }
            };
            last = Some(object.location);
            if tx.send(Ok(object)).await.is_err() {
                return;
            }
        }
    }
    loop {
        let group = tokio::select! {
            g = live.next_group() => g,
            _ = tx.closed() => return,
        };
        let mut group: GroupConsumer = match group {
            None => return,
            Some(Ok(g)) => g,
            Some(Err(e)) => {
                let _ = tx.send(Err(e)).await;
                return;
            }
        };
        loop {
            let object = tokio::select! {
                o = group.next_object() => o,
                _ = tx.closed() => return,
            };
            let object = match object {
                None => break,
                Some(Ok(o)) => o,
                Some(Err(e)) if e.is_session_error() => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
                // A reset subgroup (a delivery timeout, say): the objects it had not carried
                // are lost; the others come.
                Some(Err(e)) => {
                    tracing::debug!(group = group.id(), error = %e, "joined subgroup reset");
                    continue;
                }
            };
            if last.is_some_and(|l| object.location <= l) {
                continue;
            }
            if tx.send(Ok(object)).await.is_err() {
                return;
            }
        }
    }
}

/// A track the peer PUBLISHed, for the application to take or refuse. Dropped unanswered, it
/// is refused.
#[must_use = "dropping an IncomingTrack unanswered refuses the track"]
#[derive(Debug)]
pub struct IncomingTrack {
    inner: Box<IncomingPublish>,
    /// Where its subscription's task runs once accepted.
    tasks: Tasks,
}

impl IncomingTrack {
    /// The track.
    pub fn name(&self) -> &FullTrackName {
        self.inner.track()
    }

    /// What the PUBLISH said of it.
    pub fn info(&self) -> TrackInfo {
        TrackInfo::of(self.inner.info())
    }

    /// Takes the track (PUBLISH_OK with `options`); its groups follow. Objects that arrived
    /// before are delivered too. Not renewed on reconnect.
    ///
    /// Not cancel safe: dropping the future before it resolves refuses the track.
    pub async fn accept(self, options: SubscribeOptions) -> Result<TrackConsumer, Error> {
        // Accepting a track asks for its objects: FORWARD 1 unless the options say otherwise
        // (from draft-20 the PUBLISH's own FORWARD stands until changed, draft-21 §9.8).
        let mut params = options.to_parameters(false);
        params.forward.get_or_insert(true);
        let sub = self.inner.accept(params).await?;
        let (consumer, router, _info) = TrackConsumer::new(&sub);
        self.tasks.spawn(pump_once(sub, router));
        Ok(consumer)
    }

    /// Refuses the track (REQUEST_ERROR with `code`; UNINTERESTED, usually).
    pub fn reject(self, code: RequestErrorCode, reason: &str) {
        self.inner.reject(RequestError::new(code, reason));
    }
}

/// A SUBSCRIBE_TRACKS the peer accepted: the tracks it PUBLISHes under the prefix, and those
/// it says it will not (PUBLISH_SKIPPED). Dropping it cancels the request.
#[must_use = "dropping TrackOffers cancels the SUBSCRIBE_TRACKS"]
#[derive(Debug)]
pub struct TrackOffers {
    request: Option<TrackSubscription>,
    tracks: mpsc::Receiver<IncomingTrack>,
}

/// One entry of [`TrackOffers`].
#[derive(Debug)]
pub enum TrackOffer {
    /// The peer PUBLISHed a track.
    Published(IncomingTrack),
    /// The peer will not PUBLISH this track (PUBLISH_SKIPPED).
    Skipped(FullTrackName),
}

impl TrackOffers {
    /// The next track offered or skipped; `None` once the request ended (an error first if
    /// it failed).
    ///
    /// Cancel safe.
    pub async fn next(&mut self) -> Option<Result<TrackOffer, Error>> {
        loop {
            let Some(request) = self.request.as_mut() else {
                return self
                    .tracks
                    .recv()
                    .await
                    .map(|t| Ok(TrackOffer::Published(t)));
            };
            tokio::select! {
                biased;
                Some(t) = self.tracks.recv() => return Some(Ok(TrackOffer::Published(t))),
                skipped = request.next_skipped() => match skipped {
                    Some(Ok(name)) => return Some(Ok(TrackOffer::Skipped(name))),
                    Some(Err(e)) => {
                        self.request = None;
                        self.tracks.close();
                        return Some(Err(e.into()));
                    }
                    // The request ended: what was offered before is still handed out.
                    None => {
                        self.request = None;
                        self.tracks.close();
                    }
                },
            }
        }
    }
}

/// The LOCATION_FILTER of a join's fill (from draft-20): relative to the group after the
/// largest, so that it names the current group and those before it. Group 0 is named by the
/// largest relative start the encoding takes (it clamps at 0, draft-21 §9.20.10): an absolute
/// start at {0, 0} is the Next Object in drafts 20-21.
fn fill_start(from: JoinFrom) -> LocationFilter {
    /// The largest QUIC varint: every group there is.
    const EVERY_GROUP: u64 = (1 << 62) - 1;
    match from {
        JoinFrom::CurrentGroup => LocationFilter::RelativeGroups(1),
        JoinFrom::GroupsBefore(n) => LocationFilter::RelativeGroups(n.saturating_add(1)),
        JoinFrom::Group(g) if g > 0 => LocationFilter::AbsoluteStart(Location::new(g, 0)),
        JoinFrom::Group(_) | JoinFrom::Oldest => LocationFilter::RelativeGroups(EVERY_GROUP),
    }
}
