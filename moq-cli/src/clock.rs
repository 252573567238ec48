//! `moq clock publish|subscribe`: a clock track, one group per minute whose first object is
//! the minute (`12:34:`) and whose next objects are the seconds (`56`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use moq_client::cli::Connection;
use moq_client::{
    FullTrackName, GroupProducer, JoinFrom, NamespaceEvent, ObjectConsumer, Publisher,
    SubscribeOptions, Subscriber, TrackNamespace, TrackOptions,
};

/// Publish or read a clock.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// Publish the clock, or print it.
    #[arg(value_enum)]
    role: Role,
    /// The clock's namespace, as slash-separated fields.
    #[arg(long, default_value = "clock")]
    namespace: TrackNamespace,
    /// The clock's track.
    #[arg(long, default_value = "seconds")]
    track: String,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Role {
    Publish,
    Subscribe,
}

/// Runs the clock until Ctrl-C.
pub(crate) async fn run(connection: Connection, args: Args) -> anyhow::Result<()> {
    let name = FullTrackName::new(args.namespace.clone(), args.track.clone())?;
    let publisher = connection.publisher().clone();
    let subscriber = connection.subscriber().clone();
    let work = async move {
        match args.role {
            Role::Publish => publish(&publisher, args.namespace, name).await,
            Role::Subscribe => subscribe(&subscriber, args.namespace, &name).await,
        }
    };
    connection.run(work).await.unwrap_or(Ok(()))
}

/// Publishes the clock, one group per minute (numbered from the wall clock, so a restarted
/// publisher continues above its predecessor).
async fn publish(
    publisher: &Publisher,
    ns: TrackNamespace,
    name: FullTrackName,
) -> anyhow::Result<()> {
    let announced = publisher.publish_namespace(ns.clone())?;
    let track = publisher.create_track_with(name, TrackOptions::default().groups_from_clock())?;
    announced
        .announced()
        .await
        .with_context(|| format!("PUBLISH_NAMESPACE {ns} refused"))?;
    eprintln!("publishing the clock as {ns}");
    loop {
        // One group per minute, written by its own task.
        let group = track.append_group()?;
        let id = group.id();
        tokio::spawn(async move {
            if let Err(e) = minute(group).await {
                eprintln!("clock group {id}: {e}");
            }
        });
        tokio::time::sleep(Duration::from_secs(60 - now() % 60)).await;
    }
}

/// Prints the clock (`HH:MM:SS` lines) while its namespace is announced; waits again when it is
/// withdrawn or the connection is lost.
async fn subscribe(
    subscriber: &Subscriber,
    ns: TrackNamespace,
    name: &FullTrackName,
) -> anyhow::Result<()> {
    let mut online = subscriber
        .subscribe_namespace(ns.clone())
        .await
        .with_context(|| format!("SUBSCRIBE_NAMESPACE {ns} refused"))?;
    eprintln!("waiting for the clock {ns}");
    let mut clock: Option<ObjectConsumer> = None;
    loop {
        tokio::select! {
            Some(event) = online.next() => match event? {
                NamespaceEvent::Added(_) => {
                    let joined = subscriber
                        .join(name.clone(), SubscribeOptions::default(), JoinFrom::CurrentGroup)
                        .await;
                    clock = joined
                        .inspect_err(|e| eprintln!("cannot join the clock: {e}"))
                        .ok();
                }
                NamespaceEvent::Removed(_) => clock = None,
            },
            Some(r) = async { Some(read(clock.as_mut()?).await) } => {
                if let Err(e) = r {
                    eprintln!("clock lost: {e}");
                }
                clock = None;
            }
            else => anyhow::bail!("discovery ended"),
        }
    }
}

/// Writes the minute, then each second until the minute is over.
async fn minute(mut group: GroupProducer) -> anyhow::Result<()> {
    let start = now();
    group.write(format!("{:02}:{:02}:", start / 3600 % 24, start / 60 % 60))?;
    for second in start % 60..60 {
        group.write(format!("{second:02}"))?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(group.finish()?)
}

/// Prints the clock until the track ends: each minute's first object is the minute.
async fn read(clock: &mut ObjectConsumer) -> anyhow::Result<()> {
    let mut base = String::new();
    while let Some(object) = clock.next().await {
        let object = object?;
        let text = String::from_utf8_lossy(&object.payload);
        match object.location.object {
            0 => base = text.into_owned(),
            _ => println!("{base}{text}"),
        }
    }
    Ok(())
}

/// Seconds since the epoch, UTC.
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
