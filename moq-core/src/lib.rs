//! Sans-IO wire types and codec for Media over QUIC Transport (MOQT).
//!
//! `moq-core` knows bytes and nothing else: no sockets, no runtime. It encodes and decodes every
//! control message, data stream and datagram of draft-ietf-moq-transport-14 to -22, selected by
//! a [`Version`] chosen during the handshake.
//!
//! - [`coding`]: the variable-length integers, [`Encode`] / [`Decode`], [`DecodeError`].
//! - [`message`]: control messages, their parameters, and [`message::MessageReader`] for streams.
//! - [`data`]: subgroup and fetch streams, datagrams, padding.
//! - [`codes`]: session, request, PUBLISH_DONE and stream reset codes.
//!
//! ```
//! use moq_core::{Version, TrackNamespace};
//! use moq_core::message::{Message, SubscribeNamespace};
//!
//! let v = Version::Draft19;
//! let msg = Message::from(SubscribeNamespace {
//!     request_id: 0,
//!     prefix: TrackNamespace::from_strs(["example.com", "meeting"]).unwrap(),
//!     params: Default::default(),
//! });
//! let bytes = msg.encode_to_vec(v).unwrap();
//! assert_eq!(Message::decode(&mut &bytes[..], v).unwrap(), msg);
//! ```

pub mod codes;
pub mod coding;
pub mod data;
pub mod message;
mod types;
mod version;

pub use coding::{Decode, DecodeError, Encode, EncodeError};
pub use types::fields::Fields;
pub use types::filter::{
    FilterRange, LocationFilter, RangeFilter, RangeFilterKind, RangeFilterParam,
};
pub use types::kvp::{KeyValuePair, KvpValue, MAX_KVP_VALUE_LEN, Properties, property};
pub use types::location::{GroupOrder, Location, MAX_REASON_LEN};
pub use types::namespace::{FullTrackName, NameError, Rendered, TrackNamespace};
pub use types::token::AuthToken;
pub use version::{FilterEncoding, Version};
