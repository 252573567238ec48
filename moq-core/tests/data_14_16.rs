//! The data plane at drafts 14, 15 and 16: byte vectors written by hand from the draft-14 and
//! draft-16 texts (§10.3-§10.5; draft-15 from NOTES.md B.2: draft-14 plus its data-plane
//! changes) and checked against aiomoqt 0.13.3's encoders (its d14 and d16 profiles give the
//! same bytes where noted), round trips through the writers and readers with input fed in
//! pieces, the types and values each version refuses, and Properties (Extension Headers)
//! across versions.
//!
//! Reminder of the QUIC varint used until draft-16 (RFC 9000 §16): values below 64 take one
//! byte; below 16384 two bytes `01xxxxxx xxxxxxxx`; below 2^30 four bytes `10...`; then eight
//! bytes `11...`, up to 2^62-1.
//!
//! The tests are in `tests/data_14_16/`, one module per concern, declared here with `#[path]` like
//! every split moq-core test binary's: under a `main.rs` proptest would keep a module's
//! regressions in `tests/proptest-regressions/`, not beside the module.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "data_14_16/datagrams.rs"]
mod datagrams;
#[path = "data_14_16/fetch.rs"]
mod fetch;
#[path = "data_14_16/round_trips.rs"]
mod round_trips;
#[path = "data_14_16/subgroups.rs"]
mod subgroups;
#[path = "data_14_16/support.rs"]
mod support;
#[path = "data_14_16/varints_properties.rs"]
mod varints_properties;
