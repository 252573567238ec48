//! One negative test per rejection rule of draft-19 (and draft-18 where it differs): each feeds
//! hand-built bytes and asserts the exact `DecodeError` and the session close code (or, for Range
//! Filters, the INVALID_FILTER request code) it maps to.
//!
//! The tests are in `tests/rejections/`, one module per concern, declared here with `#[path]` like
//! every split moq-core test binary's: under a `main.rs` proptest would keep a module's
//! regressions in `tests/proptest-regressions/`, not beside the module.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "rejections/data_streams.rs"]
mod data_streams;
#[path = "rejections/fields.rs"]
mod fields;
#[path = "rejections/names_and_framing.rs"]
mod names_and_framing;
#[path = "rejections/parameters.rs"]
mod parameters;
#[path = "rejections/support.rs"]
mod support;
