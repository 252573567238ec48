//! The interop test cases (moq-interop-runner TEST-CASES.md and the data-plane and
//! namespace-discovery proposals), each a sequence of MOQT requests against a relay.

use std::time::{Duration, Instant};

use bytes::Bytes;
use moq_client::{
    Client, FullTrackName, Location, LocationFilter, NamespaceEvent, Publisher, SubscribeOptions,
    TrackNamespace,
};
use moq_core::codes::{PublishDoneCode, SessionErrorCode};
use moq_core::data::SubgroupId;
use moq_core::message::{FetchType, Parameters};
use moq_transport::Error;
use moq_transport::track::{FetchItem, TrackEvent};

/// What a failed case expected and what happened.
#[derive(Debug)]
pub(crate) struct Failure {
    /// What the case expected.
    pub(crate) expected: String,
    /// What it got.
    pub(crate) received: String,
}

impl Failure {
    fn new(expected: impl Into<String>, received: impl std::fmt::Display) -> Self {
        Failure {
            expected: expected.into(),
            received: received.to_string(),
        }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::new("no error", e)
    }
}

impl From<moq_client::Error> for Failure {
    fn from(e: moq_client::Error) -> Self {
        Failure::new("no error", e)
    }
}

impl From<moq_core::NameError> for Failure {
    fn from(e: moq_core::NameError) -> Self {
        Failure::new("valid names", e)
    }
}

/// How to reach the relay.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    /// The relay URL (`moqt://` raw QUIC, `https://` WebTransport, `ws://` / `wss://` QMux
    /// over WebSocket).
    pub(crate) url: String,
    /// The client to connect with.
    pub(crate) client: Client,
}

impl Target {
    async fn session(&self) -> Result<moq_client::Session, Failure> {
        self.client
            .connect(&self.url)
            .await
            .map_err(|e| Failure::new("SETUP", e))
    }

    /// A session with its own publisher (so two sessions of one case do not share tracks).
    async fn session_with(&self, publisher: Publisher) -> Result<moq_client::Session, Failure> {
        let c = self.client.with_publisher(publisher);
        c.connect(&self.url)
            .await
            .map_err(|e| Failure::new("SETUP", e))
    }
}

/// Every case, in the runner's order.
pub(crate) const CASES: &[&str] = &[
    "setup-only",
    "announce-only",
    "publish-namespace-done",
    "subscribe-error",
    "announce-subscribe",
    "subscribe-before-announce",
    "publish-track-only",
    "publish-track-subscribe",
    "rendezvous-timeout",
    "data-subgroup-basic",
    "subscribe-namespace-lifecycle",
    "namespace-discovery",
    "fetch",
    "join",
];

/// Each case's timeout.
pub(crate) fn timeout(case: &str) -> Duration {
    match case {
        "setup-only" | "announce-only" | "publish-namespace-done" | "subscribe-error" => {
            Duration::from_secs(3)
        }
        "announce-subscribe" => Duration::from_secs(4),
        "fetch" | "join" => Duration::from_secs(15),
        "subscribe-before-announce" => Duration::from_secs(5),
        _ => Duration::from_secs(10),
    }
}

/// A namespace no other run uses.
fn unique(fields: &[&str]) -> Result<TrackNamespace, Failure> {
    let run = format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    );
    let mut f: Vec<String> = fields.iter().map(|s| s.to_string()).collect();
    f.push(run);
    Ok(TrackNamespace::from_strs(f)?)
}

fn ns(fields: &[&str]) -> Result<TrackNamespace, Failure> {
    Ok(TrackNamespace::from_strs(fields.iter().copied())?)
}

/// Whether the version has RENDEZVOUS_TIMEOUT (from draft-17).
fn has_rendezvous(v: moq_client::Version) -> bool {
    use moq_core::message::{ParamContext, param, param_allowed};
    param_allowed(param::RENDEZVOUS_TIMEOUT, ParamContext::Subscribe, v)
}

/// Why `case` cannot run at `draft`, if it cannot (reported as a TAP SKIP).
pub(crate) fn unsupported(case: &str, draft: u32) -> Option<&'static str> {
    let v = moq_client::Version::from_draft(draft)?;
    match case {
        "rendezvous-timeout" if !has_rendezvous(v) => Some("RENDEZVOUS_TIMEOUT is from draft-17"),
        _ => None,
    }
}

/// Runs one case.
pub(crate) async fn run(case: &str, t: &Target) -> Result<(), Failure> {
    match case {
        "setup-only" => setup_only(t).await,
        "announce-only" => announce(t, false).await,
        "publish-namespace-done" => announce(t, true).await,
        "subscribe-error" => subscribe_error(t).await,
        "announce-subscribe" => announce_subscribe(t).await,
        "subscribe-before-announce" => subscribe_before_announce(t).await,
        "publish-track-only" => publish_track_only(t).await,
        "publish-track-subscribe" => publish_track_subscribe(t).await,
        "rendezvous-timeout" => rendezvous_timeout(t).await,
        "data-subgroup-basic" => data_subgroup_basic(t).await,
        "subscribe-namespace-lifecycle" => subscribe_namespace_lifecycle(t).await,
        "namespace-discovery" => namespace_discovery(t).await,
        "fetch" => fetch(t).await,
        "join" => join(t).await,
        other => Err(Failure::new("a known case", other)),
    }
}

async fn setup_only(t: &Target) -> Result<(), Failure> {
    let s = t.session().await?;
    s.transport().close(SessionErrorCode::NO_ERROR, "done");
    Ok(())
}

async fn announce(t: &Target, withdraw: bool) -> Result<(), Failure> {
    let s = t.session().await?;
    let p = s
        .transport()
        .publish_namespace(ns(&["moq-test", "interop"])?)
        .await
        .map_err(|e| Failure::new("PUBLISH_NAMESPACE_OK", e))?;
    if withdraw {
        // Withdrawn by cancelling the request stream.
        p.withdraw();
        tokio::task::yield_now().await;
    }
    s.transport().close(SessionErrorCode::NO_ERROR, "done");
    Ok(())
}

async fn subscribe_error(t: &Target) -> Result<(), Failure> {
    let s = t.session().await?;
    let track = FullTrackName::new(ns(&["nonexistent", "namespace"])?, "test-track")?;
    match s.transport().subscribe(track, Parameters::default()).await {
        Err(Error::Rejected(_)) => Ok(()),
        Err(e) => Err(Failure::new("REQUEST_ERROR", e)),
        Ok(_) => Err(Failure::new("REQUEST_ERROR", "SUBSCRIBE_OK")),
    }
}

async fn announce_subscribe(t: &Target) -> Result<(), Failure> {
    let namespace = ns(&["moq-test", "interop"])?;
    let name = FullTrackName::new(namespace.clone(), "test-track")?;
    let publisher = Publisher::default();
    let _track = publisher.create_track(name.clone())?;
    let p = t.session_with(publisher).await?;
    let h = p.publisher().publish_namespace(namespace)?;
    h.announced()
        .await
        .map_err(|e| Failure::new("PUBLISH_NAMESPACE_OK", e))?;
    let s = t.session_with(Publisher::default()).await?;
    let _subscription = s
        .transport()
        .subscribe(name, Parameters::default())
        .await
        .map_err(|e| Failure::new("SUBSCRIBE_OK", e))?;
    Ok(())
}

async fn subscribe_before_announce(t: &Target) -> Result<(), Failure> {
    let namespace = ns(&["moq-test", "interop"])?;
    let name = FullTrackName::new(namespace.clone(), "test-track")?;
    let s = t.session_with(Publisher::default()).await?;
    let subscribe = s.transport().subscribe(name.clone(), Parameters::default());
    let publish = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let publisher = Publisher::default();
        let track = publisher.create_track(name.clone())?;
        let p = t.session_with(publisher).await?;
        let h = p.publisher().publish_namespace(namespace.clone())?;
        h.announced()
            .await
            .map_err(|e| Failure::new("PUBLISH_NAMESPACE_OK", e))?;
        Ok::<_, Failure>((p, h, track))
    };
    let (sub, publisher) = tokio::join!(subscribe, publish);
    let _keep = publisher?;
    // Either outcome is graceful: SUBSCRIBE_OK once the publisher came, or REQUEST_ERROR.
    match sub {
        Ok(_) | Err(Error::Rejected(_)) => Ok(()),
        Err(e) => Err(Failure::new("SUBSCRIBE_OK or REQUEST_ERROR", e)),
    }
}

async fn publish_track_only(t: &Target) -> Result<(), Failure> {
    let s = t.session().await?;
    // A namespace of this run: a publisher of an earlier case or run that is still ending at the
    // relay must not be the one this subscription reaches.
    let name = FullTrackName::new(unique(&["moq-test", "publish"])?, "published-track")?;
    let published = s.transport().publish(name, Default::default()).await?;
    published
        .accepted()
        .await
        .map_err(|e| Failure::new("PUBLISH_OK", e))?;
    let writer = published.into_writer();
    if writer.is_forwarding() {
        let mut sg = writer
            .open_subgroup(0, SubgroupId::Zero, None, false)
            .await?;
        sg.write_object(0, Bytes::from_static(b"moqt18-publish-track-only"))
            .await?;
        sg.finish();
    }
    writer.finish(PublishDoneCode::TRACK_ENDED, "").await?;
    Ok(())
}

async fn publish_track_subscribe(t: &Target) -> Result<(), Failure> {
    // A namespace of this run: a publisher of an earlier case or run that is still ending at the
    // relay must not be the one this subscription reaches.
    let name = FullTrackName::new(unique(&["moq-test", "publish"])?, "published-track")?;
    let sub_session = t.session_with(Publisher::default()).await?;
    // Before RENDEZVOUS_TIMEOUT (draft-17) the SUBSCRIBE can only follow the PUBLISH.
    let rendezvous = has_rendezvous(sub_session.version());
    let params = Parameters {
        rendezvous_timeout: rendezvous.then_some(5000),
        ..Default::default()
    };
    let subscribe = sub_session.transport().subscribe(name.clone(), params);
    let publish = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let p = t.session_with(Publisher::default()).await?;
        let published = p
            .transport()
            .publish(name.clone(), Default::default())
            .await?;
        published
            .accepted()
            .await
            .map_err(|e| Failure::new("PUBLISH_OK", e))?;
        Ok::<_, Failure>((p, published.into_writer()))
    };
    let (sub, publisher) = if rendezvous {
        tokio::join!(subscribe, publish)
    } else {
        let publisher = publish.await;
        (subscribe.await, publisher)
    };
    let (_p, writer) = publisher?;
    let mut sub = sub.map_err(|e| Failure::new("SUBSCRIBE_OK", e))?;
    // Published before the SUBSCRIBE (no rendezvous), the track may be accepted with Forward
    // State 0 and switched on when the subscriber comes (REQUEST_UPDATE / SUBSCRIBE_UPDATE).
    while !rendezvous && !writer.is_forwarding() {
        writer
            .params_changed()
            .await
            .map_err(|e| Failure::new("Forward State 1", e))?;
    }
    if !writer.is_forwarding() {
        return Err(Failure::new("Forward State 1", "0"));
    }
    let mut sg = writer
        .open_subgroup(0, SubgroupId::Zero, None, false)
        .await?;
    sg.write_object(0, Bytes::from_static(b"moqt18-publish-track-subscribe"))
        .await?;
    sg.finish();
    // PUBLISH_DONE once the object arrived (a relay that drops the streams it is still
    // forwarding at PUBLISH_DONE does not lose it), then the rest of the track.
    let mut writer = Some(writer);
    let mut objects = Vec::new();
    while let Some(ev) = sub.next().await {
        match ev? {
            TrackEvent::Subgroup(mut g) => {
                while let Some(o) = g.next_object().await? {
                    if o.status == moq_core::data::ObjectStatus::Normal {
                        objects.push(o);
                    }
                }
            }
            TrackEvent::Datagram(o) => objects.push(o),
        }
        if !objects.is_empty()
            && let Some(w) = writer.take()
        {
            w.finish(PublishDoneCode::TRACK_ENDED, "").await?;
        }
    }
    match objects.as_slice() {
        [o] if o.location == Location::new(0, 0)
            && &o.payload[..] == b"moqt18-publish-track-subscribe" => {}
        other => {
            let seen: Vec<String> = other
                .iter()
                .map(|o| format!("{} ({} bytes)", o.location, o.payload.len()))
                .collect();
            return Err(Failure::new(
                "one object {0, 0}",
                format!("{} objects: {}", other.len(), seen.join(", ")),
            ));
        }
    }
    match sub.publish_done() {
        Some(d) if d.status == PublishDoneCode::TRACK_ENDED => Ok(()),
        other => Err(Failure::new(
            "PUBLISH_DONE TRACK_ENDED",
            format!("{other:?}"),
        )),
    }
}

async fn rendezvous_timeout(t: &Target) -> Result<(), Failure> {
    let s = t.session().await?;
    let name = FullTrackName::new(unique(&["moq-test", "rendezvous"])?, "nobody")?;
    let params = Parameters {
        rendezvous_timeout: Some(500),
        ..Default::default()
    };
    let start = Instant::now();
    match s.transport().subscribe(name, params).await {
        Err(Error::Rejected(_)) => Ok(()),
        Err(e) => Err(Failure::new("REQUEST_ERROR (TIMEOUT)", e)),
        Ok(_) => Err(Failure::new(
            "REQUEST_ERROR (TIMEOUT)",
            format!("SUBSCRIBE_OK after {:?}", start.elapsed()),
        )),
    }
}

fn canonical_payload(group: u64, object: u64) -> Bytes {
    let len = if object == 0 { 64 } else { 32 };
    Bytes::from(vec![(group * 5 + object) as u8; len])
}

async fn data_subgroup_basic(t: &Target) -> Result<(), Failure> {
    let namespace = unique(&["moq-interop", "data-subgroup-basic"])?;
    let name = FullTrackName::new(namespace.clone(), "track")?;
    let publisher = Publisher::default();
    let track = publisher.create_track(name.clone())?;
    let p = t.session_with(publisher).await?;
    let h = p.publisher().publish_namespace(namespace)?;
    h.announced()
        .await
        .map_err(|e| Failure::new("PUBLISH_NAMESPACE_OK", e))?;
    let s = t.session_with(Publisher::default()).await?;
    let mut sub = s
        .transport()
        .subscribe(name.clone(), Parameters::default())
        .await
        .map_err(|e| Failure::new("SUBSCRIBE_OK", e))?;
    // Groups 0..3 of five objects each, written once the relay's SUBSCRIBE reached the
    // publisher (a relay may answer SUBSCRIBE_OK before it subscribes upstream), so the
    // subscription (Largest Object filter) sees all of them.
    track.subscribed().await;
    for g in 0..3u64 {
        let mut w = track.create_group(g)?;
        for o in 0..5u64 {
            w.write(canonical_payload(g, o))?;
        }
        w.finish()?;
    }
    // The track ends (PUBLISH_DONE) once the objects arrived: a relay that drops the streams
    // it is still forwarding at PUBLISH_DONE (Cloudflare's 0.7.x) does not lose them.
    let mut track = Some(track);
    let mut got = std::collections::BTreeMap::new();
    while got.len() < 15 {
        let Some(ev) = sub.next().await else { break };
        match ev? {
            TrackEvent::Subgroup(mut g) => {
                if g.subgroup_id() != Some(0) {
                    return Err(Failure::new("subgroup 0", format!("{:?}", g.subgroup_id())));
                }
                while let Some(o) = g.next_object().await? {
                    // An End of Group / End of Track marker is not an object of the track.
                    if o.status != moq_core::data::ObjectStatus::Normal {
                        continue;
                    }
                    if got.insert(o.location, o.payload).is_some() {
                        return Err(Failure::new("no duplicate", o.location));
                    }
                }
            }
            TrackEvent::Datagram(o) => {
                return Err(Failure::new(
                    "subgroup streams",
                    format!("datagram {}", o.location),
                ));
            }
        }
    }
    for g in 0..3u64 {
        for o in 0..5u64 {
            let loc = Location::new(g, o);
            match got.get(&loc) {
                Some(p) if *p == canonical_payload(g, o) => {}
                Some(_) => {
                    return Err(Failure::new(format!("payload of {loc}"), "different bytes"));
                }
                None => return Err(Failure::new(format!("object {loc}"), "missing")),
            }
        }
    }
    if got.len() != 15 {
        return Err(Failure::new("15 objects", got.len()));
    }
    drop(track.take());
    drop(h);
    Ok(())
}

async fn subscribe_namespace_lifecycle(t: &Target) -> Result<(), Failure> {
    let namespace = unique(&["moq-interop", "lifecycle"])?;
    let s = t.session_with(Publisher::default()).await?;
    let mut d = s
        .subscriber()
        .subscribe_namespace(namespace.clone())
        .await
        .map_err(|e| Failure::new("REQUEST_OK", e))?;
    let p = t.session_with(Publisher::default()).await?;
    let h = p
        .transport()
        .publish_namespace(namespace.clone())
        .await
        .map_err(|e| Failure::new("PUBLISH_NAMESPACE_OK", e))?;
    match d.next().await {
        Some(Ok(NamespaceEvent::Added(n))) if n == namespace => {}
        other => return Err(Failure::new("NAMESPACE", format!("{other:?}"))),
    }
    h.withdraw();
    match d.next().await {
        Some(Ok(NamespaceEvent::Removed(n))) if n == namespace => Ok(()),
        other => Err(Failure::new("NAMESPACE_DONE", format!("{other:?}"))),
    }
}

async fn namespace_discovery(t: &Target) -> Result<(), Failure> {
    let prefix = unique(&["moq-interop", "discovery"])?;
    let p = t.session_with(Publisher::default()).await?;
    let mut handles = Vec::new();
    for child in ["a", "b"] {
        let n = prefix.child(child)?;
        handles.push(
            p.transport()
                .publish_namespace(n)
                .await
                .map_err(|e| Failure::new("PUBLISH_NAMESPACE_OK", e))?,
        );
    }
    let s = t.session_with(Publisher::default()).await?;
    let mut d = s
        .subscriber()
        .subscribe_namespace(prefix.clone())
        .await
        .map_err(|e| Failure::new("REQUEST_OK", e))?;
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < 2 {
        match d.next().await {
            Some(Ok(NamespaceEvent::Added(n))) => {
                seen.insert(n);
            }
            other => return Err(Failure::new("two NAMESPACE", format!("{other:?}"))),
        }
    }
    let want: std::collections::BTreeSet<_> = [prefix.child("a")?, prefix.child("b")?]
        .into_iter()
        .collect();
    if seen != want {
        return Err(Failure::new(format!("{want:?}"), format!("{seen:?}")));
    }
    Ok(())
}

/// A publisher session with a track of three groups, announced under a unique namespace.
/// A live track with history at the relay, as the interop runner sets it up for `fetch` and
/// `join`: a publisher writing 50 objects a second, five per group, and a subscriber that has
/// seen three groups arrive through the relay.
struct History {
    _publisher: moq_client::Session,
    _announced: moq_client::NamespaceHandle,
    _viewer: moq_client::Session,
    _live: moq_client::TrackConsumer,
    writer: tokio::task::JoinHandle<()>,
    name: FullTrackName,
    /// A group the viewer saw whole, so the relay has all of it.
    whole_group: u64,
}

impl Drop for History {
    fn drop(&mut self) {
        self.writer.abort();
    }
}

/// Objects per group on the history track.
const HISTORY_GROUP: u64 = 5;

async fn relay_history(t: &Target, case: &str) -> Result<History, Failure> {
    let namespace = unique(&["moq-interop", case])?;
    let name = FullTrackName::new(namespace.clone(), "track")?;
    let publisher = Publisher::default();
    let track = publisher.create_track(name.clone())?;
    let p = t.session_with(publisher).await?;
    let h = p.publisher().publish_namespace(namespace)?;
    h.announced()
        .await
        .map_err(|e| Failure::new("PUBLISH_NAMESPACE_OK", e))?;
    let writer = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(20));
        loop {
            let Ok(mut g) = track.append_group() else {
                return;
            };
            for o in 0..HISTORY_GROUP {
                tick.tick().await;
                let id = g.id();
                if g.write(canonical_payload(id, o)).is_err() {
                    return;
                }
            }
            if g.finish().is_err() {
                return;
            }
        }
    });
    let viewer = t.session_with(Publisher::default()).await?;
    let mut live = viewer
        .subscriber()
        .subscribe(name.clone(), SubscribeOptions::default())
        .await
        .map_err(|e| Failure::new("SUBSCRIBE_OK", e))?;
    let mut groups = Vec::new();
    while groups.len() < 3 {
        match live.next_group().await {
            Some(Ok(g)) => {
                if !groups.contains(&g.id()) {
                    groups.push(g.id());
                }
            }
            Some(Err(e)) => return Err(Failure::new("live objects", e)),
            None => return Err(Failure::new("live objects", "the subscription ended")),
        }
    }
    // The first group may have been joined part way; the second is whole.
    let whole_group = groups.get(1).copied().unwrap_or_default();
    Ok(History {
        _publisher: p,
        _announced: h,
        _viewer: viewer,
        _live: live,
        writer,
        name,
        whole_group,
    })
}

/// Reads a FETCH to its end: the Locations of its objects.
async fn fetched(resp: &mut moq_transport::track::FetchResponse) -> Result<Vec<Location>, Failure> {
    let mut got = Vec::new();
    while let Some(item) = resp.next().await {
        if let FetchItem::Object(o) = item?
            && o.status == moq_core::data::ObjectStatus::Normal
        {
            got.push(o.location);
        }
    }
    Ok(got)
}

async fn fetch(t: &Target) -> Result<(), Failure> {
    let history = relay_history(t, "fetch").await?;
    let g = history.whole_group;
    let s = t.session_with(Publisher::default()).await?;
    // The whole of group g: End {g, 0} with Object 0 means through the end of group g.
    let request = FetchType::Standalone {
        track: history.name.clone(),
        start: Location::new(g, 0),
        end: Location::new(g, 0),
    };
    let mut resp = s
        .transport()
        .fetch(request, Parameters::default())
        .await
        .map_err(|e| Failure::new("FETCH_OK", e))?;
    let got = fetched(&mut resp).await?;
    let want: Vec<Location> = (0..HISTORY_GROUP).map(|o| Location::new(g, o)).collect();
    if got != want {
        return Err(Failure::new(
            format!("objects {g}/0..{HISTORY_GROUP}"),
            format!("{got:?}"),
        ));
    }
    Ok(())
}

async fn join(t: &Target) -> Result<(), Failure> {
    let history = relay_history(t, "join").await?;
    let s = t.session_with(Publisher::default()).await?;
    let sub = s
        .transport()
        .subscribe(
            history.name.clone(),
            Parameters {
                location_filter: Some(LocationFilter::LargestObject),
                ..Default::default()
            },
        )
        .await
        .map_err(|e| Failure::new("SUBSCRIBE_OK", e))?;
    let Some(joining) = sub.info().largest else {
        return Err(Failure::new("SUBSCRIBE_OK with a Largest Location", "none"));
    };
    // A Relative Joining FETCH one group back: {J.group - 1, 0} up to the Joining Location
    // (from draft-20, which has no Joining FETCH, the same range as a standalone FETCH).
    let Some(request) = sub.joining_fetch(moq_transport::track::JoiningStart::Relative(1)) else {
        return Err(Failure::new("SUBSCRIBE_OK with a Largest Location", "none"));
    };
    let mut resp = s
        .transport()
        .fetch(request, Parameters::default())
        .await
        .map_err(|e| Failure::new("FETCH_OK", e))?;
    let got = fetched(&mut resp).await?;
    let first = Location::new(joining.group.saturating_sub(1), 0);
    if got.is_empty() || got.iter().any(|l| *l < first || *l > joining) {
        return Err(Failure::new(
            format!("objects {first} to {joining}"),
            format!("{got:?}"),
        ));
    }
    Ok(())
}

/// The draft a session negotiated, for the TAP header.
pub(crate) async fn negotiated_draft(t: &Target) -> Option<u32> {
    let s = t.session().await.ok()?;
    let d = s.version().draft();
    s.transport()
        .close(SessionErrorCode::NO_ERROR, "version probe");
    Some(d)
}
