//! The tracks the peer PUBLISHes: routed to the [`TrackOffers`] of the longest matching
//! prefix, else to [`Subscriber::next_publish`](crate::Subscriber::next_publish), for the
//! application to take or refuse.

use moq_core::codes::RequestErrorCode;
use moq_core::message::RequestError;
use moq_core::{FullTrackName, TrackNamespace};
use moq_transport::track::{IncomingPublish, TrackSubscription};
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::pump::pump_once;
use super::source::Tasks;
use crate::consume::{TrackConsumer, TrackInfo};
use crate::error::Error;
use crate::options::SubscribeOptions;

/// Where the peer's PUBLISHes go: to the [`TrackOffers`] of the longest matching prefix, else
/// to [`Subscriber::next_publish`](crate::Subscriber::next_publish).
#[derive(Debug)]
pub(super) struct Offers {
    general_rx: tokio::sync::Mutex<mpsc::Receiver<IncomingTrack>>,
    general_tx: mpsc::Sender<IncomingTrack>,
    by_prefix: Mutex<Vec<(TrackNamespace, mpsc::Sender<IncomingTrack>)>>,
}

/// PUBLISHes waiting for the application, per destination, before more are refused.
const PENDING_PUBLISHES: usize = 64;

impl Offers {
    pub(super) fn new() -> Offers {
        let (tx, rx) = mpsc::channel(PENDING_PUBLISHES);
        Offers {
            general_rx: tokio::sync::Mutex::new(rx),
            general_tx: tx,
            by_prefix: Mutex::new(Vec::new()),
        }
    }

    /// Hands a PUBLISH from the peer to the application, its subscription to run in `tasks`
    /// once accepted, or refuses it (EXCESSIVE_LOAD) if too many are waiting.
    pub(super) fn offer(&self, p: IncomingPublish, tasks: &Tasks) {
        let ns = p.track().namespace.clone();
        let tx = {
            let mut by_prefix = self.by_prefix.lock();
            by_prefix.retain(|(_, tx)| !tx.is_closed());
            by_prefix
                .iter()
                .filter(|(prefix, _)| prefix.is_prefix_of(&ns))
                .max_by_key(|(prefix, _)| prefix.len())
                .map(|(_, tx)| tx.clone())
        };
        let tx = tx.unwrap_or_else(|| self.general_tx.clone());
        let offered = IncomingTrack {
            inner: Box::new(p),
            tasks: tasks.clone(),
        };
        if let Err(e) = tx.try_send(offered) {
            let (mpsc::error::TrySendError::Full(t) | mpsc::error::TrySendError::Closed(t)) = e;
            t.reject(
                RequestErrorCode::EXCESSIVE_LOAD,
                "too many PUBLISHes waiting",
            );
        }
    }

    /// The next track no [`TrackOffers`] took; `None` once the subscriber is dropped.
    ///
    /// Cancel safe.
    pub(super) async fn next_general(&self) -> Option<IncomingTrack> {
        self.general_rx.lock().await.recv().await
    }

    /// Where the tracks under `prefix` go from now on.
    pub(super) fn register(&self, prefix: TrackNamespace) -> mpsc::Receiver<IncomingTrack> {
        let (tx, rx) = mpsc::channel(PENDING_PUBLISHES);
        self.by_prefix.lock().push((prefix, tx));
        rx
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
    /// The offers of `request`, arriving on `tracks`.
    pub(super) fn new(
        request: TrackSubscription,
        tracks: mpsc::Receiver<IncomingTrack>,
    ) -> TrackOffers {
        TrackOffers {
            request: Some(request),
            tracks,
        }
    }

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
