//! An in-memory transport: a connected pair of [`Connection`]s with no sockets.
//!
//! It is for testing MOQT sessions and applications without QUIC:
//! [`pair`](crate::transport::memory::pair) gives a client end and a server end, and
//! everything one end sends the other receives, in the same process.
//!
//! The pair behaves like the quinn adapter ([`quic`](crate::transport::quic)) as seen through
//! the traits:
//!
//! - streams are accepted in opening order, and opening waits while the peer has too many
//!   opened streams it has not accepted yet (like running out of stream credit);
//! - writes wait while a stream's buffer is full (flow control), so a slow reader costs bounded
//!   memory;
//! - FIN, RESET_STREAM and STOP_SENDING carry their codes to the other half, a reset discards
//!   the data not read yet, and [`SendStream::poll_stopped`] resolves on STOP_SENDING, or once the
//!   reader has everything up to the FIN, or after a reset;
//! - dropping a send half that was neither finished nor reset finishes it, and dropping a receive
//!   half before the FIN or a reset stops it with code 0;
//! - datagrams are refused above the maximum size and silently dropped when the peer's queue is
//!   full;
//! - the first close wins: the peer sees [`TransportError::ClosedByPeer`], we see
//!   [`TransportError::ClosedLocally`], and every pending and later operation fails with it;
//! - a connection end is closed with code 0 once every handle to it is dropped: its clones and
//!   its streams (quinn streams keep their connection alive too).
//!
//! One difference: the peer can accept a stream as soon as it is opened, where quinn announces
//! it only with its first frame (data, FIN or reset).
//!
//! Inside, one concern a file, each importing only those before it: `pipe` (one direction of
//! one stream), `link` (the state both ends share), `stream` (the two stream halves),
//! `connection` (an end as a [`Connection`], and [`pair`](crate::transport::memory::pair)).

mod connection;
mod link;
mod pipe;
mod stream;

pub use connection::{MemoryConnection, pair, pair_with};
pub use link::MemoryLimits;
pub use stream::{MemoryRecv, MemorySend};

#[cfg(test)]
mod tests;
