//! The one request machinery: a request from either end, the stream it travels on, and the
//! application's handle on it. The seven request kinds ([`crate::namespace`] and
//! [`crate::track`]) plug into it with their first message, their answer and their state after
//! it.

mod exchange;
mod handle;
mod stream;

pub(crate) use exchange::{Decision, Event, Parked, Request, Visibility, not_answered};
pub(crate) use handle::{Feed, RequestHandle};
pub(crate) use stream::RequestStream;
