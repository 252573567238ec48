//! Subscriptions and the data plane over loopback QUIC and WebTransport, draft-18 and -19:
//! SUBSCRIBE / SUBSCRIBE_OK / PUBLISH_DONE, REQUEST_UPDATE, unsubscribe, subgroup streams,
//! datagrams, PUBLISH, FETCH (standalone and joining), TRACK_STATUS, SUBSCRIBE_TRACKS and
//! filters (draft-19 §5, §10.7-§10.20, §11).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../common/mod.rs"]
mod common;
mod fetch;
mod objects;
mod publish;
mod subscribe;
mod support;
