//! Client and server endpoints over quinn: raw QUIC (`moqt://`, version by ALPN) and
//! WebTransport (`https://`, version by `WT-Available-Protocols`) on the same UDP port; with
//! the `websocket` feature, QMux over a WebSocket (`ws://`, `wss://`, version by subprotocol:
//! `websocket`), whose server side runs behind any HTTP server.
//!
//! Inside: `settings` (QUIC settings, ALPNs, UDP buffers) ← `client`, `server` and
//! `websocket`; `websocket` ← `client`; `qlog` (the per-connection traces) ← `server`.

mod client;
mod qlog;
mod server;
mod settings;
#[cfg(feature = "websocket")]
pub mod websocket;

pub use client::{Client, ClientConfig};
pub use server::{PerSession, Server, ServerConfig};
pub use settings::{
    Congestion, DEFAULT_ACK_ELICITING_THRESHOLD, DEFAULT_UDP_BUFFER, H3_ALPN, QuicSettings,
    transport_config, transport_config_with,
};
