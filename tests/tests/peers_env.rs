//! scripts/peers.env is sourced before the interop matrix runs our example programs, which read
//! their connection flags from the environment too (`moq_client::cli::ClientOptions`: MOQ_URL,
//! MOQ_TOKEN, ...). A variable of the same name in peers.env is handed to every one of them:
//! `MOQ_TOKEN` (the path of moq-dev's token tool) was sent in SETUP as a token, and moq-dev's
//! relay refused the clock programs as UNAUTHORIZED. No name may be shared.

use clap::Args;
use moq_client::cli::ClientOptions;

#[test]
fn peers_env_sets_none_of_the_client_options_variables() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/peers.env");
    let text = std::fs::read_to_string(path).expect("scripts/peers.env");
    let exported: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("export "))
        .filter_map(|l| l.split('=').next())
        .collect();
    let command = ClientOptions::augment_args(clap::Command::new("check"));
    let names: Vec<String> = command
        .get_arguments()
        .filter_map(|a| a.get_env())
        .map(|e| e.to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n == "MOQ_TOKEN"), "read {names:?}");
    for name in &names {
        assert!(
            !exported.contains(&name.as_str()),
            "scripts/peers.env exports {name}, which ClientOptions reads"
        );
    }
}
