//! The application API end to end over loopback raw QUIC and WebTransport, draft-18 and -19:
//! publishers on either side of the connection, namespace discovery, subscriptions served from
//! the cache, FETCH, TRACK_STATUS, RENDEZVOUS_TIMEOUT, cache bounds, session end, cancellation
//! by drop, and the reconnecting client (reconnect and GOAWAY migration).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../common/mod.rs"]
mod common;
mod lifetime;
mod serving;
