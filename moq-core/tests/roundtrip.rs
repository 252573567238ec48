//! Property-based round trips under draft-18 and draft-19: every control message (encode, decode,
//! re-encode to the same bytes, and byte-by-byte through `MessageReader`), every SUBGROUP_HEADER
//! type with its objects through `SubgroupWriter` / `SubgroupReader`, every OBJECT_DATAGRAM type,
//! and fetch streams in both group orders through `FetchWriter` / `FetchReader`.
//!
//! The tests are in `tests/roundtrip/`, one module per concern, declared here with `#[path]` like
//! every split moq-core test binary's: under a `main.rs` proptest would keep a module's
//! regressions in `tests/proptest-regressions/`, not beside the module.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod common;
#[path = "roundtrip/datagrams_fetch.rs"]
mod datagrams_fetch;
#[path = "roundtrip/messages.rs"]
mod messages;
#[path = "roundtrip/subgroups.rs"]
mod subgroups;
#[path = "roundtrip/support.rs"]
mod support;
#[path = "roundtrip/versions.rs"]
mod versions;
