//! Misbehaving peers over loopback QUIC: one side is our `Session`, the other a raw quinn peer
//! (tests/common/raw.rs) that writes arbitrary bytes. Each test checks the session close code our
//! side chose, read on the raw side from the QUIC CONNECTION_CLOSE, and that our own handles end
//! with the same error; or, for request-level errors, that the session stays open.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../common/mod.rs"]
mod common;
mod control;
mod namespaces;
mod parameters;
mod requests;
mod support;
