//! Control messages (draft-19 §10): framing, the message type table, and one type per message.
//!
//! Every message on a control or request stream is `Type (vi64), Length (16), Body`. The Length
//! must match the body exactly: a body shorter than its fields or with bytes left over is a
//! PROTOCOL_VIOLATION, as is an unknown message type.
//!
//! ```
//! use moq_core::{Version, TrackNamespace};
//! use moq_core::message::{Message, Namespace};
//! let v = Version::Draft19;
//! let msg: Message = Namespace { suffix: TrackNamespace::from_strs(["room1"]).unwrap() }.into();
//! let bytes = msg.encode_to_vec(v).unwrap();
//! assert_eq!(bytes, [0x08, 0x00, 0x07, 0x01, 0x05, b'r', b'o', b'o', b'm', b'1']);
//! let mut buf = &bytes[..];
//! assert_eq!(Message::decode(&mut buf, v).unwrap(), msg);
//! ```

mod fetch;
mod namespace;
mod params;
mod request;
mod setup;
mod single;
mod subscribe;

pub use fetch::{Fetch, FetchOk, FetchType, OPEN_END};
pub use namespace::{
    Namespace, NamespaceDone, PublishNamespace, PublishSkipped, SubscribeNamespace, SubscribeTracks,
};
pub use params::{ParamContext, Parameters, param, param_allowed};
pub use request::{PublishStateNotify, Redirect, RequestError, RequestOk, RequestUpdate};
pub use setup::{Goaway, MAX_URI_LEN, Setup, SetupOptions, setup_option};
pub use single::{
    Address, ClientSetup, Envelope, FetchCancel, MaxRequestId, PublishNamespaceCancel,
    PublishNamespaceDone, RequestType, RequestsBlocked, ServerSetup, Unsubscribe,
    UnsubscribeNamespace,
};
pub use subscribe::{Publish, PublishDone, Subscribe, SubscribeOk, TrackStatus};

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::Version;
use crate::coding::{BufExt, DecodeError, EncodeError, Vi64};

/// One control message body type: its type code, its name, and its body codec.
///
/// [`Message`] adds the framing (type and 16-bit length) around the body.
pub trait ControlMessage: Sized + Into<Message> {
    /// The message type code (the same in every supported version).
    const TYPE: u64;
    /// The draft's name for the message.
    const NAME: &'static str;

    /// Reads the body. `buf` holds exactly the body; the caller rejects leftover bytes.
    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError>;

    /// Writes the body (no type, no length).
    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError>;
}

/// A message that opens a request (draft-19 §3.3: SUBSCRIBE, PUBLISH, FETCH, TRACK_STATUS,
/// PUBLISH_NAMESPACE, SUBSCRIBE_NAMESPACE, SUBSCRIBE_TRACKS): it begins with a Request ID and
/// carries Message Parameters, checked against its own context.
pub trait RequestMessage: ControlMessage {
    /// The context its parameters are checked against.
    const PARAMS: ParamContext;
    /// The Request ID.
    fn request_id(&self) -> u64;
    /// Sets the Request ID.
    fn set_request_id(&mut self, id: u64);
    /// The Message Parameters.
    fn params(&self) -> &Parameters;
}

macro_rules! request_messages {
    ($( $variant:ident ),* $(,)?) => {
        $(
            impl RequestMessage for $variant {
                const PARAMS: ParamContext = ParamContext::$variant;

                fn request_id(&self) -> u64 {
                    self.request_id
                }

                fn set_request_id(&mut self, id: u64) {
                    self.request_id = id;
                }

                fn params(&self) -> &Parameters {
                    &self.params
                }
            }
        )*

        impl Message {
            /// The Request ID and parameters of a message that opens a request (see
            /// [`RequestMessage`]); `None` for every other message.
            ///
            /// ```
            /// use moq_core::message::{Message, Subscribe, RequestOk};
            /// use moq_core::{FullTrackName, TrackNamespace};
            /// let track = FullTrackName::new(TrackNamespace::from_strs(["a"]).unwrap(), "t").unwrap();
            /// let sub = Message::from(Subscribe { request_id: 4, track, params: Default::default() });
            /// assert_eq!(sub.request().map(|(id, _)| id), Some(4));
            /// assert!(Message::from(RequestOk::default()).request().is_none());
            /// ```
            pub fn request(&self) -> Option<(u64, &Parameters)> {
                match self {
                    $( Message::$variant(m) => Some((m.request_id, &m.params)), )*
                    _ => None,
                }
            }
        }
    };
}

request_messages!(
    Subscribe,
    Publish,
    Fetch,
    TrackStatus,
    PublishNamespace,
    SubscribeNamespace,
    SubscribeTracks,
);

/// The largest control message body (draft-19 §10: a 16-bit Length).
pub const MAX_MESSAGE_LEN: usize = u16::MAX as usize;

macro_rules! messages {
    ($( $variant:ident ),* $(,)?) => {
        /// Any control message.
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Message {
            $(
                #[doc = concat!("A ", stringify!($variant), " message.")]
                $variant($variant),
            )*
        }

        $(
            impl From<$variant> for Message {
                fn from(m: $variant) -> Message {
                    Message::$variant(m)
                }
            }
        )*

        impl Message {
            /// The draft's name of this message.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Message::$variant(_) => <$variant as ControlMessage>::NAME, )*
                }
            }

            /// The message type code.
            pub fn type_code(&self) -> u64 {
                match self {
                    $( Message::$variant(_) => <$variant as ControlMessage>::TYPE, )*
                }
            }

            fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
                match self {
                    $( Message::$variant(m) => m.encode_body(buf, v), )*
                }
            }

            /// Decodes a body of type `ty` under `v`, or reports an unknown type.
            fn decode_typed(ty: u64, body: &mut Bytes, v: Version) -> Result<Message, DecodeError> {
                $(
                    if ty == <$variant as ControlMessage>::TYPE && message_exists(ty, v) {
                        return Ok(Message::$variant(<$variant as ControlMessage>::decode_body(body, v)?));
                    }
                )*
                Err(DecodeError::UnknownMessageType(ty))
            }

            /// The name of message type `ty` under `v`, if it exists.
            pub fn name_of(ty: u64, v: Version) -> Option<&'static str> {
                $(
                    if ty == <$variant as ControlMessage>::TYPE && message_exists(ty, v) {
                        return Some(<$variant as ControlMessage>::NAME);
                    }
                )*
                None
            }
        }
    };
}

messages!(
    Setup,
    Goaway,
    Subscribe,
    SubscribeOk,
    RequestUpdate,
    Publish,
    PublishDone,
    Fetch,
    FetchOk,
    TrackStatus,
    PublishNamespace,
    Namespace,
    NamespaceDone,
    SubscribeNamespace,
    SubscribeTracks,
    PublishSkipped,
    RequestOk,
    RequestError,
    PublishStateNotify,
    ClientSetup,
    ServerSetup,
    MaxRequestId,
    RequestsBlocked,
    Unsubscribe,
    FetchCancel,
    PublishNamespaceDone,
    PublishNamespaceCancel,
    UnsubscribeNamespace,
);

/// The per-version message table: the message types that do not exist in every supported
/// version, each with the first and last draft that has it. Every other type exists in every
/// supported version.
const RANGES: &[(u64, u32, u32)] = &[
    // PUBLISH_STATE_NOTIFY (draft-21 §9.10).
    (<PublishStateNotify as ControlMessage>::TYPE, 20, u32::MAX),
    // The single control stream's own messages (draft-14 §9; MAX_REQUEST_ID ... gone in 17).
    (<ClientSetup as ControlMessage>::TYPE, 0, 16),
    (<ServerSetup as ControlMessage>::TYPE, 0, 16),
    (<MaxRequestId as ControlMessage>::TYPE, 0, 16),
    (<RequestsBlocked as ControlMessage>::TYPE, 0, 16),
    (<Unsubscribe as ControlMessage>::TYPE, 0, 16),
    (<FetchCancel as ControlMessage>::TYPE, 0, 16),
    (<PublishNamespaceDone as ControlMessage>::TYPE, 0, 16),
    (<PublishNamespaceCancel as ControlMessage>::TYPE, 0, 16),
    (<UnsubscribeNamespace as ControlMessage>::TYPE, 0, 15),
];

/// Whether message type `ty` exists in `v` (see [`RANGES`]).
const fn message_exists(ty: u64, v: Version) -> bool {
    let mut rest = RANGES;
    while let [(t, from, until), tail @ ..] = rest {
        if *t == ty {
            return v.draft() >= *from && v.draft() <= *until;
        }
        rest = tail;
    }
    true
}

impl Message {
    /// Reads one framed message. [`DecodeError::Short`] means the frame is not complete yet (the
    /// cursor may have moved; retry from a saved position).
    pub fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Message, DecodeError> {
        let ty = buf.get_varint(v)?;
        let name = Message::name_of(ty, v).ok_or(DecodeError::UnknownMessageType(ty))?;
        if buf.remaining() < 2 {
            return Err(DecodeError::Short);
        }
        let len = usize::from(buf.get_u16());
        let mut body = buf.get_exact(len)?;
        let msg = Message::decode_typed(ty, &mut body, v).map_err(|e| e.in_complete(name))?;
        // draft-19 §10: a Length that does not match the body is a PROTOCOL_VIOLATION.
        if body.has_remaining() {
            return Err(DecodeError::TrailingBytes {
                message: name,
                extra: body.remaining(),
            });
        }
        Ok(msg)
    }

    /// Writes the framed message.
    pub fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        let mut body = Vec::new();
        self.encode_body(&mut body, v)?;
        if body.len() > MAX_MESSAGE_LEN {
            return Err(EncodeError::MessageTooLong {
                message: self.name(),
                len: body.len(),
            });
        }
        Vi64::encode(self.type_code(), buf);
        buf.put_u16(body.len() as u16);
        buf.put_slice(&body);
        Ok(())
    }

    /// Encodes the framed message into a new vector.
    pub fn encode_to_vec(&self, v: Version) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode(&mut out, v)?;
        Ok(out)
    }
}

/// Reads framed messages from a stream's bytes as they arrive.
///
/// Feed it with [`MessageReader::push`]; [`MessageReader::next_message`] returns `Ok(None)` until a whole
/// frame is buffered, and never loses its place. The buffer is bounded by one maximum frame.
///
/// ```
/// use moq_core::{Version, message::{Message, MessageReader, RequestOk}};
/// let v = Version::Draft19;
/// let bytes = Message::from(RequestOk::default()).encode_to_vec(v).unwrap();
/// let mut r = MessageReader::new(v);
/// r.push(&bytes[..2]);
/// assert_eq!(r.next_message().unwrap(), None);
/// r.push(&bytes[2..]);
/// assert!(matches!(r.next_message().unwrap(), Some(Message::RequestOk(_))));
/// ```
#[derive(Debug)]
pub struct MessageReader {
    version: Version,
    buf: BytesMut,
}

impl MessageReader {
    /// A reader for a stream of `version`.
    pub fn new(version: Version) -> Self {
        MessageReader {
            version,
            buf: BytesMut::new(),
        }
    }

    /// Appends bytes received from the stream.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes buffered and not yet consumed.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The bytes buffered and not yet consumed.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Mutable access to the buffer, for reading straight into it.
    pub fn buffer_mut(&mut self) -> &mut BytesMut {
        &mut self.buf
    }

    /// The next complete message, `Ok(None)` if more bytes are needed.
    pub fn next_message(&mut self) -> Result<Option<Message>, DecodeError> {
        let Some(len) = frame_len(&self.buf, self.version)? else {
            return Ok(None);
        };
        let mut frame = self.buf.split_to(len).freeze();
        Message::decode(&mut frame, self.version).map(Some)
    }

    /// The next complete frame as raw bytes without decoding its body, `Ok(None)` if more bytes
    /// are needed. The type has been checked to exist.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let Some(len) = frame_len(&self.buf, self.version)? else {
            return Ok(None);
        };
        Ok(Some(self.buf.split_to(len).freeze()))
    }
}

/// The total length of the frame at the start of `buf`, or `None` if the header or body is not
/// complete. An unknown type is reported as soon as the type is readable.
pub fn frame_len(buf: &[u8], v: Version) -> Result<Option<usize>, DecodeError> {
    let mut cur = buf;
    let ty = match cur.get_varint(v) {
        Ok(ty) => ty,
        Err(DecodeError::Short) => return Ok(None),
        Err(e) => return Err(e),
    };
    if Message::name_of(ty, v).is_none() {
        return Err(DecodeError::UnknownMessageType(ty));
    }
    if cur.remaining() < 2 {
        return Ok(None);
    }
    let len = usize::from(cur.get_u16());
    let header = buf.len() - cur.len();
    if cur.remaining() < len {
        return Ok(None);
    }
    Ok(Some(header + len))
}

/// The Request ID at the start of a request message's body (every request message begins with
/// one), so a request can be answered even when the rest of its body is rejected.
pub fn peek_request_id(frame: &[u8], v: Version) -> Option<u64> {
    let mut cur = frame;
    let ty = cur.get_varint(v).ok()?;
    let is_request = [
        Subscribe::TYPE,
        Publish::TYPE,
        Fetch::TYPE,
        TrackStatus::TYPE,
        PublishNamespace::TYPE,
        SubscribeNamespace::TYPE,
        SubscribeTracks::TYPE,
        RequestUpdate::TYPE,
    ]
    .contains(&ty);
    if !is_request || cur.remaining() < 2 {
        return None;
    }
    cur.advance(2);
    cur.get_varint(v).ok()
}

/// Decodes and checks the trailing bytes of a body, shared by message helpers.
pub(crate) fn body_done(buf: &Bytes, message: &'static str) -> Result<(), DecodeError> {
    if buf.has_remaining() {
        Err(DecodeError::TrailingBytes {
            message,
            extra: buf.remaining(),
        })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version::Draft19;

    #[test]
    fn unknown_type_and_length_mismatch() {
        assert_eq!(
            Message::decode(&mut &[0x11u8, 0, 0][..], V),
            Err(DecodeError::UnknownMessageType(0x11))
        );
        // A frame whose body has not fully arrived.
        let partial = [0x08u8, 0x00, 0x0a, 0x01, 0x05, b'a'];
        assert_eq!(
            Message::decode(&mut &partial[..], V),
            Err(DecodeError::Short)
        );
        // NAMESPACE whose Length claims 4 bytes but its fields need 7.
        let bad = [0x08u8, 0x00, 0x04, 0x01, 0x05, b'a', b'b', b'c'];
        assert_eq!(
            Message::decode(&mut &bad[..], V),
            Err(DecodeError::BodyTooShort("NAMESPACE"))
        );
        let bad = [0x08u8, 0x00, 0x03, 0x01, 0x05, b'a'];
        assert_eq!(
            Message::decode(&mut &bad[..], V),
            Err(DecodeError::BodyTooShort("NAMESPACE"))
        );
        // NAMESPACE with one byte after its fields.
        let bad = [0x08u8, 0x00, 0x04, 0x01, 0x01, b'a', 0x00];
        assert_eq!(
            Message::decode(&mut &bad[..], V),
            Err(DecodeError::TrailingBytes {
                message: "NAMESPACE",
                extra: 1
            })
        );
    }

    #[test]
    fn reader_is_incremental() {
        let a = Message::from(Namespace {
            suffix: crate::TrackNamespace::from_strs(["a"]).unwrap(),
        })
        .encode_to_vec(V)
        .unwrap();
        let b = Message::from(NamespaceDone {
            suffix: crate::TrackNamespace::from_strs(["a"]).unwrap(),
        })
        .encode_to_vec(V)
        .unwrap();
        let all: Vec<u8> = a.iter().chain(b.iter()).copied().collect();
        let mut r = MessageReader::new(V);
        let mut got = Vec::new();
        for byte in all {
            r.push(&[byte]);
            while let Some(m) = r.next_message().unwrap() {
                got.push(m.name());
            }
        }
        assert_eq!(got, ["NAMESPACE", "NAMESPACE_DONE"]);
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn unknown_type_detected_before_body() {
        let mut r = MessageReader::new(V);
        r.push(&[0x11]);
        assert_eq!(r.next_message(), Err(DecodeError::UnknownMessageType(0x11)));
    }
}
