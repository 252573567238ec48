//! `moq`: Media over QUIC Transport from the command line.
//!
//! ```text
//! ffmpeg -re -i clip.mp4 -c copy -f mp4 -movflags cmaf+separate_moof+delay_moov+skip_trailer - \
//!     | moq --url http://localhost:4443 publish live/demo
//! moq --url http://localhost:4443 subscribe live/demo | ffplay -
//! printf 'hello\nworld\n' | moq publish chat/room --format lines
//! moq subscribe chat/room lines
//! moq discover live
//! moq clock publish
//! ```
//!
//! Data goes to stdout; progress and the connection's status go to stderr. The connection
//! flags (`--url`, `--fingerprint`, `--insecure`, `--draft`, `--token`, `--connect-timeout`,
//! or `MOQ_URL`, ...) are [`moq_client::cli::ClientOptions`]. A failure exits non-zero with a
//! one-line error; Ctrl-C closes the session and exits 0.

mod clock;
mod discover;
mod publish;
mod subscribe;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use moq_client::cli::{self, ClientOptions};

/// Media over QUIC Transport from the command line: publish stdin, subscribe to stdout,
/// discover namespaces, a clock. Data on stdout; status on stderr.
#[derive(Parser, Debug)]
#[command(name = "moq", version)]
struct Cli {
    #[command(flatten)]
    client: ClientOptions,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Publish a broadcast read from stdin: fragmented MP4 (as ffmpeg writes it) or lines.
    Publish(publish::Args),
    /// Write a broadcast (fragmented MP4) or a track's objects (one per line) to stdout.
    Subscribe(subscribe::Args),
    /// Print namespaces under a prefix as they appear (+) and go away (-).
    Discover(discover::Args),
    /// Publish or read a clock: a group per minute, an object per second.
    Clock(clock::Args),
}

fn main() -> ExitCode {
    let args = Cli::parse();
    cli::init_logging("warn");
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("moq: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(run(args));
    // A read of stdin still blocked in its thread must not hold the exit.
    runtime.shutdown_timeout(Duration::from_millis(200));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("moq: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Cli) -> anyhow::Result<()> {
    let connection = args.client.reconnecting().await?;
    match args.command {
        Command::Publish(a) => publish::run(connection, a).await,
        Command::Subscribe(a) => subscribe::run(connection, a).await,
        Command::Discover(a) => discover::run(connection, a).await,
        Command::Clock(a) => clock::run(connection, a).await,
    }
}
