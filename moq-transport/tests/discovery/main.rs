//! Namespace discovery between well-behaved peers over loopback QUIC and WebTransport:
//! PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE, NAMESPACE, NAMESPACE_DONE, PREFIX_OVERLAP,
//! authorization, withdrawal, revocation and session end (draft-19 §6, §9.5, §10.15-§10.18).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod authorization;
#[path = "../common/mod.rs"]
mod common;
mod lifecycle;
mod matching;
mod support;
