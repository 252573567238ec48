//! The application side: the handles it holds, what it does with them, and its requests (`app_act`).

use super::*;

/// A handle the application holds; each must end once the session has.
#[allow(clippy::large_enum_variant)] // a few per run
pub(crate) enum Handle {
    Namespaces(NamespaceSubscription),
    Published(PublishedNamespace),
    Subscription(Subscription),
    Fetch(FetchResponse),
    Tracks(TrackSubscription),
    Track(PublishedTrack),
    Writer(SubscriptionWriter),
    Responder(TracksResponder),
}

impl Handle {
    /// Takes what the handle has (at most a few items, each waited for `STEP`); true if it
    /// ended (returned `None` or an error).
    pub(crate) async fn poll(&mut self, items: usize) -> bool {
        for _ in 0..items {
            let ended = match self {
                Handle::Namespaces(h) => match within(STEP, h.next()).await {
                    None => return false,
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Subscription(h) => match within(STEP, h.next()).await {
                    None => return false,
                    Some(Some(Ok(moq_transport::track::TrackEvent::Subgroup(mut g)))) => {
                        // Read the subgroup's objects too: its stream must end as well.
                        let mut n = 0;
                        while n < 64 {
                            match within(STEP, g.next_object()).await {
                                Some(Ok(Some(_))) => n += 1,
                                _ => break,
                            }
                        }
                        false
                    }
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Fetch(h) => match within(STEP, h.next()).await {
                    None => return false,
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Tracks(h) => match within(STEP, h.next_skipped()).await {
                    None => return false,
                    Some(r) => !matches!(r, Some(Ok(_))),
                },
                Handle::Published(h) => return within(STEP, h.ended()).await.is_some(),
                Handle::Track(h) => return within(STEP, h.accepted()).await.is_some(),
                Handle::Writer(h) => return within(STEP, h.cancelled()).await.is_some(),
                Handle::Responder(h) => return within(STEP, h.ended()).await.is_some(),
            };
            if ended {
                return true;
            }
        }
        false
    }

    /// Uses the handle as an application would (publishes objects, updates a request), each
    /// step bounded by `STEP`: a step cut short is a future dropped mid-way, which must be
    /// harmless too.
    pub(crate) async fn exercise(&mut self, u: &mut Unstructured<'_>) {
        match self {
            Handle::Writer(w) => send_objects(u, w).await,
            Handle::Track(t) => send_objects(u, t.writer()).await,
            Handle::Subscription(h) => {
                let p = params(u);
                let _ = within(STEP, h.update(p)).await;
            }
            Handle::Namespaces(h) => {
                let ns = namespace(u);
                let _ = within(STEP, h.update_prefix(ns)).await;
            }
            Handle::Published(h) => {
                let p = params(u);
                let _ = within(STEP, h.update(p)).await;
            }
            Handle::Tracks(h) => {
                let p = params(u);
                let _ = within(STEP, h.update(p)).await;
            }
            Handle::Responder(h) => {
                let t = track(u);
                let _ = within(STEP, h.skipped(&t)).await;
            }
            Handle::Fetch(_) => {}
        }
    }

    /// Waits for the handle to end, draining what it still yields; panics if it does not.
    pub(crate) async fn must_end(mut self, what: usize) {
        let end = async {
            for _ in 0..MAX_DRAIN {
                if self.poll(1).await {
                    return;
                }
                // Nothing came within STEP: wait on (the clock moves on when idle).
            }
            panic!("handle {what} still yields after {MAX_DRAIN} items");
        };
        if within(END, end).await.is_none() {
            panic!("handle {what} did not end after the session closed");
        }
    }
}

/// Publishes a few objects on a subscription: on a subgroup stream or as datagrams.
pub(crate) async fn send_objects(u: &mut Unstructured<'_>, w: &SubscriptionWriter) {
    let group = small(u, 8);
    if flag(u) {
        for id in 0..small(u, 3) {
            let obj = moq_transport::track::Object {
                location: Location { group, object: id },
                payload: Bytes::from(bytes(u, 16)),
                end_of_group: flag(u),
                ..Default::default()
            };
            let _ = w.send_datagram(&obj);
        }
        return;
    }
    let eog = flag(u);
    let n = small(u, 3);
    let Some(Ok(mut g)) = within(STEP, w.open_subgroup(group, SubgroupId::Zero, None, eog)).await
    else {
        return;
    };
    for id in 0..n {
        let payload = Bytes::from(bytes(u, 16));
        if within(STEP, g.write_object(id, payload)).await.is_none() {
            break;
        }
    }
}

/// What the application holds, shared with its tasks.
#[derive(Default)]
pub(crate) struct App {
    pub(crate) handles: Mutex<Vec<Handle>>,
}

impl App {
    pub(crate) fn push(&self, h: Handle) {
        self.handles.lock().push(h);
    }
}

/// Runs an application request as a task of its own; what it obtains joins `app`.
pub(crate) fn spawn_app<F, T>(
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
    app: &Arc<App>,
    f: F,
    wrap: fn(T) -> Handle,
) where
    F: Future<Output = Result<T, moq_transport::Error>> + Send + 'static,
    T: Send + 'static,
{
    let app = app.clone();
    tasks.push(tokio::spawn(async move {
        if let Ok(h) = f.await {
            app.push(wrap(h));
        }
    }));
}

/// One application action.
pub(crate) async fn app_act(
    u: &mut Unstructured<'_>,
    session: &Session,
    app: &Arc<App>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let s = session.clone();
    let choice = small(u, 13);
    if trace() {
        eprintln!("  app action {choice}");
    }
    match choice {
        0 => {
            let (t, p) = (track(u), params(u));
            spawn_app(
                tasks,
                app,
                async move { s.subscribe(t, p).await },
                Handle::Subscription,
            );
        }
        1 => {
            let ns = namespace(u);
            spawn_app(
                tasks,
                app,
                async move { s.subscribe_namespace(ns).await },
                Handle::Namespaces,
            );
        }
        2 => {
            let ns = namespace(u);
            spawn_app(
                tasks,
                app,
                async move { s.publish_namespace(ns).await },
                Handle::Published,
            );
        }
        3 => {
            let req = FetchType::Standalone {
                track: track(u),
                start: location(u),
                end: location(u),
            };
            let p = params(u);
            spawn_app(
                tasks,
                app,
                async move { s.fetch(req, p).await },
                Handle::Fetch,
            );
        }
        4 => {
            let (t, p) = (track(u), params(u));
            tasks.push(tokio::spawn(async move {
                let _ = s.track_status(t, p).await;
            }));
        }
        5 => {
            let (ns, p) = (namespace(u), params(u));
            spawn_app(
                tasks,
                app,
                async move { s.subscribe_tracks(ns, p).await },
                Handle::Tracks,
            );
        }
        6 => {
            let t = track(u);
            let options = PublishOptions {
                track_alias: flag(u).then(|| small(u, 4)),
                largest: flag(u).then(|| location(u)),
                ..Default::default()
            };
            spawn_app(
                tasks,
                app,
                async move { s.publish(t, options).await },
                Handle::Track,
            );
        }
        7 | 8 => {
            // Answer the peer's next request: accept or reject.
            let accept = flag(u);
            let largest = flag(u).then(|| location(u));
            let app2 = app.clone();
            tasks.push(tokio::spawn(async move {
                let Some(Some(req)) = within(STEP, s.incoming().next()).await else {
                    return;
                };
                let no = || RequestError::new(RequestErrorCode(0x4), "no");
                match req {
                    Incoming::Subscribe(r) if accept => {
                        let resp = SubscribeResponse {
                            largest,
                            ..Default::default()
                        };
                        if let Ok(w) = r.accept(resp).await {
                            if let Ok(mut g) =
                                w.open_subgroup(0, SubgroupId::Zero, None, false).await
                            {
                                let _ = g.write_object(0, Bytes::from_static(b"obj")).await;
                            }
                            app2.push(Handle::Writer(w));
                        }
                    }
                    Incoming::Fetch(r) if accept => {
                        let end = FetchEnd {
                            end_of_track: false,
                            end: largest.unwrap_or_default(),
                            track_properties: Properties::default(),
                        };
                        let _ = r.accept(end).await;
                    }
                    Incoming::TrackStatus(r) if accept => r.accept(TrackStatusInfo {
                        largest,
                        expires: None,
                        track_properties: Properties::default(),
                    }),
                    Incoming::Publish(r) if accept => {
                        if let Ok(sub) = r.accept(Parameters::default()).await {
                            app2.push(Handle::Subscription(sub));
                        }
                    }
                    Incoming::SubscribeTracks(r) if accept => {
                        if let Ok(resp) = r.accept().await {
                            app2.push(Handle::Responder(resp));
                        }
                    }
                    Incoming::Subscribe(r) => r.reject(no()),
                    Incoming::Fetch(r) => r.reject(no()),
                    Incoming::TrackStatus(r) => r.reject(no()),
                    Incoming::Publish(r) => r.reject(no()),
                    Incoming::SubscribeTracks(r) => r.reject(no()),
                    _ => {}
                }
            }));
        }
        9 => {
            // Drop or poll one of the handles.
            let drop_it = flag(u);
            let taken = {
                let mut handles = app.handles.lock();
                let n = handles.len();
                (n > 0).then(|| handles.swap_remove(u.choose_index(n).unwrap_or(0)))
            };
            if let Some(mut h) = taken.filter(|_| !drop_it)
                && !h.poll(4).await
            {
                app.push(h);
            }
        }
        11 | 12 => {
            // Use one of the handles.
            let taken = {
                let mut handles = app.handles.lock();
                let n = handles.len();
                (n > 0).then(|| handles.swap_remove(u.choose_index(n).unwrap_or(0)))
            };
            if let Some(mut h) = taken {
                h.exercise(u).await;
                app.push(h);
            }
        }
        10 => {
            let uri = if flag(u) { "" } else { "moqt://other/moq" };
            let timeout = Duration::from_millis(small(u, 5_000));
            tasks.push(tokio::spawn(async move {
                let _ = s.goaway(uri, timeout).await;
            }));
        }
        _ => {
            if u.ratio(1, 8).unwrap_or(false) {
                session.close(SessionErrorCode::NO_ERROR, "fuzz app closes");
            }
        }
    }
}
