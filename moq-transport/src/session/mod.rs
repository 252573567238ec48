//! The session core: SETUP, the control stream, the driver that accepts the peer's streams,
//! request IDs, tokens and authorization, GOAWAY, and the set of tasks a session owns.
//!
//! Everything above it (the request kinds, both data planes, the [`crate::Session`] facade)
//! builds on [`core::SessionCore`]; the core reaches them only through
//! [`driver::Dispatch`].

mod auth;
mod config;
mod core;
mod driver;
mod finished;
mod handshake;
mod ids;
mod setup;
mod table;
mod tasks;

pub use self::core::{Destination, GoawayInfo, Role};
pub use auth::{AllowAll, AuthRequest, Authorizer, RequestKind, ResolvedToken, SessionInfo};
pub use config::{IMPLEMENTATION, Limits, RequestObserver, SessionConfig};

pub(crate) use self::core::{ClusterLink, SessionCore};
pub(crate) use driver::{DataStream, Dispatch, Opened, Serve, served};
pub(crate) use handshake::establish;
