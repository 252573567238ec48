//! Client and server endpoints over quinn: raw QUIC (`moqt://`, version by ALPN) and
//! WebTransport (`https://`, version by `WT-Available-Protocols`) on the same UDP port.
//!
//! Inside: `settings` (QUIC settings, ALPNs, UDP buffers) ← `client` and `server`; `qlog` (the
//! per-connection traces) ← `server`.

mod client;
mod qlog;
mod server;
mod settings;

pub use client::{Client, ClientConfig};
pub use server::{PerSession, Server, ServerConfig};
pub use settings::{
    Congestion, DEFAULT_ACK_ELICITING_THRESHOLD, DEFAULT_UDP_BUFFER, H3_ALPN, QuicSettings,
    transport_config, transport_config_with,
};
