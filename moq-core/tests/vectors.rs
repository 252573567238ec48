//! Fixed wire vectors written by hand from the draft-19 text (§10, §11; draft-18 for GOAWAY's
//! Request ID) and, for drafts 20-22, taken from the peers' encoders; not produced by ours. Each vector is checked both ways: decoding the bytes
//! gives the expected value, and encoding the value gives the bytes.
//!
//! Reminder of the vi64 encoding used throughout: values below 128 take one byte; below 16384
//! two bytes `10xxxxxx xxxxxxxx`; so SETUP's type 0x2F00 is `AF 00` and 0x9D is `80 9D`.
//!
//! The tests are in `tests/vectors/`, one module per concern, declared here with `#[path]` like
//! every split moq-core test binary's: under a `main.rs` proptest would keep a module's
//! regressions in `tests/proptest-regressions/`, not beside the module.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "vectors/control.rs"]
mod control;
#[path = "vectors/data.rs"]
mod data;
#[path = "vectors/later_drafts.rs"]
mod later_drafts;
#[path = "vectors/support.rs"]
mod support;
