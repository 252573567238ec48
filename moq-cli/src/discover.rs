//! `moq discover [prefix]`: namespaces under a prefix, live.

use anyhow::bail;
use moq_client::cli::Connection;
use moq_client::{NamespaceEvent, TrackNamespace};

/// Print namespaces under a prefix as they appear and go away.
#[derive(clap::Args, Debug)]
pub(crate) struct Args {
    /// The prefix, as slash-separated fields; none (the default) means every namespace.
    #[arg(default_value = "")]
    prefix: TrackNamespace,
    /// Exit after this many events.
    #[arg(long)]
    count: Option<u64>,
}

/// Prints `+ NAMESPACE` and `- NAMESPACE` lines on stdout until Ctrl-C or `--count` events.
pub(crate) async fn run(connection: Connection, args: Args) -> anyhow::Result<()> {
    let subscriber = connection.subscriber().clone();
    let work = async move {
        let mut events = subscriber
            .subscribe_namespace(args.prefix.clone())
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "SUBSCRIBE_NAMESPACE {:?} refused: {e}",
                    args.prefix.to_string()
                )
            })?;
        eprintln!("watching namespaces under {:?}", args.prefix.to_string());
        let mut seen = 0u64;
        while args.count.is_none_or(|n| seen < n) {
            match events.next().await {
                Some(Ok(NamespaceEvent::Added(ns))) => println!("+ {ns}"),
                Some(Ok(NamespaceEvent::Removed(ns))) => println!("- {ns}"),
                Some(Err(e)) => bail!("discovery failed: {e}"),
                None => bail!("discovery ended"),
            }
            seen += 1;
        }
        Ok(())
    };
    connection.run(work).await.unwrap_or(Ok(()))
}
