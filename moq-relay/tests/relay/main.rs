//! The relay over loopback QUIC and WebTransport with several sessions: discovery, routing by
//! namespace prefix, fan-out from one upstream subscription, two publishers of one namespace,
//! switchover without duplicates or gaps, FETCH from cache and upstream, RENDEZVOUS_TIMEOUT,
//! PUBLISH / SUBSCRIBE_TRACKS forwarding, reserved namespaces and GOAWAY (draft-19 §6, §9).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../common/mod.rs"]
mod common;
mod fetch;
mod fields;
mod publish;
mod refusals;
mod routing;
mod support;
mod upstreams;
