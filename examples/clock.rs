//! A clock, published or read, with the program shape of moq-dev's `moq-clock` so the two
//! APIs can be compared side by side: one group per minute whose first object is the minute
//! ("12:34:") and whose next objects are the seconds ("56"). Both roles stay connected and
//! print the client's status as it changes. The publisher keeps its namespace announced
//! across reconnects and numbers its groups from the wall clock, so a restarted publisher
//! continues above its predecessor; the subscriber waits for the namespace to be announced,
//! joins the clock at the start of the current minute while it is, and waits again when it is
//! withdrawn or the connection is lost (a joined clock is not renewed: it is joined again
//! once the namespace is back).
//!
//! ```text
//! cargo run --example clock -- --url moqt://localhost:4443 --fingerprint <HEX> publish
//! cargo run --example clock -- --url moqt://localhost:4443 --fingerprint <HEX> subscribe
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Parser;
use moq_client::cli;
use moq_client::{
    FullTrackName, GroupProducer, JoinFrom, NamespaceEvent, ObjectConsumer, SubscribeOptions,
    Subscriber, TrackNamespace, TrackOptions,
};

#[derive(Parser)]
struct Args {
    #[command(flatten)]
    connect: cli::ClientOptions,
    /// The clock's namespace, as slash-separated fields.
    #[arg(long, default_value = "clock")]
    namespace: TrackNamespace,
    /// The clock's track.
    #[arg(long, default_value = "seconds")]
    track: String,
    #[command(subcommand)]
    role: Role,
}

#[derive(clap::Subcommand)]
enum Role {
    Publish,
    Subscribe,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    cli::init_logging("warn");
    // Connected (status on stderr) until Ctrl-C; closed at the end of `run`.
    let connection = args.connect.reconnecting().await?;
    let ns = args.namespace.clone();
    let name = FullTrackName::new(ns.clone(), args.track.clone())?;
    let publisher = connection.publisher().clone();
    let subscriber = connection.subscriber().clone();
    let work = async {
        match args.role {
            Role::Publish => publish(&publisher, ns, name).await,
            Role::Subscribe => subscribe(&subscriber, ns, &name).await,
        }
    };
    connection.run(work).await.unwrap_or(Ok(()))
}

/// Publishes the clock, one group per minute, until Ctrl-C.
async fn publish(
    publisher: &moq_client::Publisher,
    ns: moq_client::TrackNamespace,
    name: FullTrackName,
) -> anyhow::Result<()> {
    let _announced = publisher.publish_namespace(ns)?;
    let options = TrackOptions::default().groups_from_clock();
    let track = publisher.create_track_with(name, options)?;
    loop {
        // One group per minute, written by its own task.
        tokio::spawn(minute(track.append_group()?));
        tokio::time::sleep(Duration::from_secs(60 - now() % 60)).await;
    }
}

/// Reads the clock while its namespace is announced, until Ctrl-C.
async fn subscribe(
    subscriber: &Subscriber,
    ns: moq_client::TrackNamespace,
    name: &FullTrackName,
) -> anyhow::Result<()> {
    let mut online = subscriber.subscribe_namespace(ns).await?;
    // The clock being read, dropped (unsubscribed) when the namespace goes away.
    let mut clock: Option<ObjectConsumer> = None;
    loop {
        tokio::select! {
            Some(event) = online.next() => match event? {
                NamespaceEvent::Added(_) => {
                    clock = join(subscriber, name)
                        .await
                        .inspect_err(|e| println!("cannot join the clock: {e}"))
                        .ok();
                }
                NamespaceEvent::Removed(_) => clock = None,
            },
            Some(r) = async { Some(read(clock.as_mut()?).await) } => {
                // Lost with the session (or ended): joined again when the namespace is back.
                if let Err(e) = r {
                    println!("clock lost: {e}");
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

/// Joins the clock at the start of the current minute.
async fn join(subscriber: &Subscriber, name: &FullTrackName) -> anyhow::Result<ObjectConsumer> {
    let options = SubscribeOptions::default();
    Ok(subscriber
        .join(name.clone(), options, JoinFrom::CurrentGroup)
        .await?)
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
