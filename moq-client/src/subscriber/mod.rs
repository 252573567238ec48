//! The subscribing side: namespace discovery and tracks as [`futures::Stream`]s, FETCH and
//! TRACK_STATUS. With a reconnecting client they survive reconnects: subscriptions are renewed
//! on the new session without the application doing anything.
//!
//! Inside: `source` (the session and the tasks) ← `pump` (a subscription's tasks: routing,
//! renewal, joins) ← `offers` (the peer's PUBLISHes) ← [`Subscriber`] here.

mod offers;
mod pump;
mod source;

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use moq_core::codes::RequestErrorCode;
use moq_core::message::{FetchType, Parameters};
use moq_core::{FullTrackName, Location, LocationFilter, TrackNamespace};
use moq_transport::namespace::NamespaceEvent;
use moq_transport::track::{IncomingPublish, JoiningStart};
use tokio::sync::mpsc;

use self::offers::Offers;
use self::pump::{
    Pumped, fill_gap, fill_start, going_away, join_objects, pump, pump_once, renew_subscription,
    restarted_below, retryable,
};
use crate::consume::{FetchConsumer, ObjectConsumer, TrackConsumer, TrackInfo};
use crate::error::Error;
use crate::options::{JoinFrom, SubscribeOptions};

pub use self::offers::{IncomingTrack, TrackOffer, TrackOffers};
pub(crate) use self::source::{SessionSource, Tasks};

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

impl Subscriber {
    pub(crate) fn new(source: SessionSource) -> Self {
        Subscriber {
            source,
            offers: Arc::new(Offers::new()),
        }
    }

    /// Hands a PUBLISH from the peer to the application, or refuses it (EXCESSIVE_LOAD) if
    /// too many are waiting.
    pub(crate) fn offer(&self, p: IncomingPublish) {
        self.offers.offer(p, &self.source.tasks);
    }

    /// The next track the peer PUBLISHed that no [`TrackOffers`] took; `None` once the
    /// subscriber is dropped.
    ///
    /// Cancel safe.
    pub async fn next_publish(&self) -> Option<IncomingTrack> {
        self.offers.next_general().await
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
        let tracks = self.offers.register(prefix.clone());
        let request = session
            .subscribe_tracks(prefix, Parameters::default())
            .await?;
        Ok(TrackOffers::new(request, tracks))
    }
}
