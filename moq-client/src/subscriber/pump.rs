//! The tasks that carry a subscription's events to its consumer: routing them, renewing the
//! subscription on a new session (filling the gap by a Joining FETCH), and a join's objects.

use std::time::Instant;

use moq_core::codes::{PublishDoneCode, RequestErrorCode};
use moq_core::message::Parameters;
use moq_core::{FullTrackName, Location, LocationFilter};
use moq_transport::track::{
    FetchItem, FetchResponse, JoiningStart, Object, Subscription, TrackEvent,
};
use tokio::sync::mpsc;

use super::source::SessionSource;
use crate::consume::{GroupConsumer, Router, TrackConsumer};
use crate::error::Error;
use crate::malformed::Malformed;
use crate::options::{JoinFrom, SubscribeOptions};

/// How a subscription's events stopped.
pub(super) enum Pumped {
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
pub(super) fn retryable(e: &moq_transport::Error) -> bool {
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
pub(super) fn going_away(sub: &Subscription) -> bool {
    sub.publish_done()
        .is_some_and(|d| d.status == PublishDoneCode::GOING_AWAY)
}

/// Whether the publisher of `track` now numbers its groups below `last` (it restarted), as
/// TRACK_STATUS on the client's current session says; `false` if that cannot be learned.
pub(super) async fn restarted_below(
    source: &SessionSource,
    track: &FullTrackName,
    last: u64,
) -> bool {
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
pub(super) async fn renew_subscription(
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
pub(super) async fn pump(
    sub: &mut Subscription,
    router: &mut Router,
    last_group: &mut Option<u64>,
) -> Pumped {
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
pub(super) async fn fill_gap(
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
pub(super) async fn pump_once(mut sub: Subscription, mut router: Router) {
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
pub(super) async fn join_objects(
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

/// The LOCATION_FILTER of a join's fill (from draft-20): relative to the group after the
/// largest, so that it names the current group and those before it. Group 0 is named by the
/// largest relative start the encoding takes (it clamps at 0, draft-21 §9.20.10): an absolute
/// start at {0, 0} is the Next Object in drafts 20-21.
pub(super) fn fill_start(from: JoinFrom) -> LocationFilter {
    /// The largest QUIC varint: every group there is.
    const EVERY_GROUP: u64 = (1 << 62) - 1;
    match from {
        JoinFrom::CurrentGroup => LocationFilter::RelativeGroups(1),
        JoinFrom::GroupsBefore(n) => LocationFilter::RelativeGroups(n.saturating_add(1)),
        JoinFrom::Group(g) if g > 0 => LocationFilter::AbsoluteStart(Location::new(g, 0)),
        JoinFrom::Group(_) | JoinFrom::Oldest => LocationFilter::RelativeGroups(EVERY_GROUP),
    }
}
