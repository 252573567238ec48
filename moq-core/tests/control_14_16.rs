//! Control messages of drafts 14, 15 and 16 (the single control stream): byte vectors written
//! by hand from the draft texts' layouts and checked against aiomoqt's encoders (draft-14 and
//! draft-16 profiles), round trips of every message through `encode_addressed` /
//! `decode_addressed` with their addresses, and rejections.
//!
//! Reminder of the QUIC varint (RFC 9000 §16) these drafts use: below 64 one byte, below 16384
//! two bytes `01xxxxxx`, below 2^30 four bytes `10xxxxxx`, else eight bytes `11xxxxxx`; so 100
//! is `40 64`, 500 is `41 F4` and 0xff00000E is `C0 00 00 00 FF 00 00 0E`.
//!
//! The tests are in `tests/control_14_16/`, one module per concern, declared here with `#[path]` like
//! every split moq-core test binary's: under a `main.rs` proptest would keep a module's
//! regressions in `tests/proptest-regressions/`, not beside the module.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

#[path = "control_14_16/namespace_fetch.rs"]
mod namespace_fetch;
#[path = "control_14_16/no_panic.rs"]
mod no_panic;
#[path = "control_14_16/rejections.rs"]
mod rejections;
#[path = "control_14_16/round_trips.rs"]
mod round_trips;
#[path = "control_14_16/setup_subscribe.rs"]
mod setup_subscribe;
#[path = "control_14_16/support.rs"]
mod support;
