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
//! let msg: Message = Namespace { suffix: TrackNamespace::from_strs(["room1"]).unwrap(), cluster: None }.into();
//! let bytes = msg.encode_to_vec(v).unwrap();
//! assert_eq!(bytes, [0x08, 0x00, 0x07, 0x01, 0x05, b'r', b'o', b'o', b'm', b'1']);
//! let mut buf = &bytes[..];
//! assert_eq!(Message::decode(&mut buf, v).unwrap(), msg);
//! ```

pub mod cluster;
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
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};

/// One control message body type: its type code, its name, and its body codec.
///
/// [`Message`] adds the framing (type and 16-bit length) around the body. Under drafts 14-16
/// the fields that name the request a message belongs to (its [`Address`]: the leading
/// Request ID of an answer, the Existing Request ID of REQUEST_UPDATE, draft-14's Track
/// Namespace of PUBLISH_NAMESPACE_DONE) are not part of the body here:
/// [`Message::decode_addressed`] and [`Message::encode_addressed`] handle them.
pub trait ControlMessage: Sized + Into<Message> {
    /// The message type code in the newest drafts; [`Message::name_of`] and
    /// [`Message::type_code_in`] give a version's own code and name.
    const TYPE: u64;
    /// The draft's name for the message (in the newest drafts).
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

            /// Sets the Request ID of a message that opens a request (see
            /// [`RequestMessage`]); does nothing to any other message.
            pub fn set_request_id(&mut self, id: u64) {
                match self {
                    $( Message::$variant(m) => m.request_id = id, )*
                    _ => {}
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

        /// Which [`Message`] variant, without its value: the rows of the type table.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub(crate) enum Kind {
            $( $variant, )*
        }

        impl Message {
            /// The draft's name of this message (in the newest drafts; [`Message::name_of`]
            /// gives a version's own name).
            pub fn name(&self) -> &'static str {
                match self {
                    $( Message::$variant(_) => <$variant as ControlMessage>::NAME, )*
                }
            }

            /// The message type code in the newest drafts (see [`Message::type_code_in`]).
            pub fn type_code(&self) -> u64 {
                match self {
                    $( Message::$variant(_) => <$variant as ControlMessage>::TYPE, )*
                }
            }

            pub(crate) fn kind(&self) -> Kind {
                match self {
                    $( Message::$variant(_) => Kind::$variant, )*
                }
            }

            pub(crate) fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
                match self {
                    $( Message::$variant(m) => m.encode_body(buf, v), )*
                }
            }

            /// Decodes a body of kind `kind` with its own codec.
            pub(crate) fn decode_kind(kind: Kind, body: &mut Bytes, v: Version) -> Result<Message, DecodeError> {
                match kind {
                    $( Kind::$variant => Ok(Message::$variant(<$variant as ControlMessage>::decode_body(body, v)?)), )*
                }
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

/// What a wire message type decodes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Row {
    /// A message of the model with its own codec.
    Plain(Kind),
    /// Draft-14's *_OK answering a request of this kind (and PUBLISH_OK until draft-17): a
    /// [`RequestOk`].
    Ok(RequestType),
    /// Draft-14's *_ERROR answering a request of this kind: a [`RequestError`].
    Error(RequestType),
}

/// One row of the per-version message type table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TypeRow {
    /// The wire type.
    pub(crate) code: u64,
    /// The first draft that has it.
    from: u32,
    /// The last draft that has it.
    until: u32,
    /// The version's name for it.
    pub(crate) name: &'static str,
    /// What it decodes to.
    pub(crate) row: Row,
}

const fn t(code: u64, from: u32, until: u32, name: &'static str, row: Row) -> TypeRow {
    TypeRow {
        code,
        from,
        until,
        name,
        row,
    }
}

/// Open-ended.
const LAST: u32 = u32::MAX;

use Row::{Error as Err_, Ok as Ok_, Plain as P};

/// The message type table: every type of every supported version, with the drafts that have
/// it. Type numbers are reused across versions (notes B.0, "Codepoint reuse hazards"), so a
/// type means nothing without the version.
#[rustfmt::skip]
const TYPES: &[TypeRow] = &[
    // draft-14 §9, draft-16 §9, draft-19 §10.
    t(0x2F00, 17, LAST, "SETUP", P(Kind::Setup)),
    t(0x20, 0, 16, "CLIENT_SETUP", P(Kind::ClientSetup)),
    t(0x21, 0, 16, "SERVER_SETUP", P(Kind::ServerSetup)),
    t(0x10, 0, LAST, "GOAWAY", P(Kind::Goaway)),
    t(0x15, 0, 16, "MAX_REQUEST_ID", P(Kind::MaxRequestId)),
    t(0x1A, 0, 16, "REQUESTS_BLOCKED", P(Kind::RequestsBlocked)),
    t(0x03, 0, LAST, "SUBSCRIBE", P(Kind::Subscribe)),
    t(0x04, 0, LAST, "SUBSCRIBE_OK", P(Kind::SubscribeOk)),
    // draft-15 still names it SUBSCRIBE_UPDATE; draft-16 §9.11 REQUEST_UPDATE.
    t(0x02, 0, 15, "SUBSCRIBE_UPDATE", P(Kind::RequestUpdate)),
    t(0x02, 16, LAST, "REQUEST_UPDATE", P(Kind::RequestUpdate)),
    t(0x0A, 0, 16, "UNSUBSCRIBE", P(Kind::Unsubscribe)),
    t(0x0B, 0, LAST, "PUBLISH_DONE", P(Kind::PublishDone)),
    t(0x1D, 0, LAST, "PUBLISH", P(Kind::Publish)),
    t(0x1E, 0, 17, "PUBLISH_OK", Ok_(RequestType::Publish)),
    t(0x16, 0, LAST, "FETCH", P(Kind::Fetch)),
    t(0x18, 0, LAST, "FETCH_OK", P(Kind::FetchOk)),
    t(0x17, 0, 16, "FETCH_CANCEL", P(Kind::FetchCancel)),
    t(0x0D, 0, LAST, "TRACK_STATUS", P(Kind::TrackStatus)),
    t(0x06, 0, LAST, "PUBLISH_NAMESPACE", P(Kind::PublishNamespace)),
    t(0x09, 0, 16, "PUBLISH_NAMESPACE_DONE", P(Kind::PublishNamespaceDone)),
    t(0x0C, 0, 16, "PUBLISH_NAMESPACE_CANCEL", P(Kind::PublishNamespaceCancel)),
    t(0x11, 0, 17, "SUBSCRIBE_NAMESPACE", P(Kind::SubscribeNamespace)),
    t(0x14, 0, 15, "UNSUBSCRIBE_NAMESPACE", P(Kind::UnsubscribeNamespace)),
    // draft-14's answers, one pair per request kind (§9.9-§9.30).
    t(0x05, 0, 14, "SUBSCRIBE_ERROR", Err_(RequestType::Subscribe)),
    t(0x1F, 0, 14, "PUBLISH_ERROR", Err_(RequestType::Publish)),
    t(0x19, 0, 14, "FETCH_ERROR", Err_(RequestType::Fetch)),
    t(0x0E, 0, 14, "TRACK_STATUS_OK", Ok_(RequestType::TrackStatus)),
    t(0x0F, 0, 14, "TRACK_STATUS_ERROR", Err_(RequestType::TrackStatus)),
    t(0x07, 0, 14, "PUBLISH_NAMESPACE_OK", Ok_(RequestType::PublishNamespace)),
    t(0x08, 0, 14, "PUBLISH_NAMESPACE_ERROR", Err_(RequestType::PublishNamespace)),
    t(0x12, 0, 14, "SUBSCRIBE_NAMESPACE_OK", Ok_(RequestType::SubscribeNamespace)),
    t(0x13, 0, 14, "SUBSCRIBE_NAMESPACE_ERROR", Err_(RequestType::SubscribeNamespace)),
    // From draft-15 one REQUEST_OK and one REQUEST_ERROR (draft-16 §9.7, §9.8).
    t(0x07, 15, LAST, "REQUEST_OK", P(Kind::RequestOk)),
    t(0x05, 15, LAST, "REQUEST_ERROR", P(Kind::RequestError)),
    // draft-16 §9.21, §9.23.
    t(0x08, 16, LAST, "NAMESPACE", P(Kind::Namespace)),
    t(0x0E, 16, LAST, "NAMESPACE_DONE", P(Kind::NamespaceDone)),
    // PUBLISH_BLOCKED from draft-17, PUBLISH_SKIPPED from draft-19.
    t(0x0F, 17, LAST, "PUBLISH_SKIPPED", P(Kind::PublishSkipped)),
    // draft-19 §10.18-§10.19.
    t(0x50, 18, LAST, "SUBSCRIBE_NAMESPACE", P(Kind::SubscribeNamespace)),
    t(0x51, 18, LAST, "SUBSCRIBE_TRACKS", P(Kind::SubscribeTracks)),
    // draft-21 §9.10.
    t(0x22, 20, LAST, "PUBLISH_STATE_NOTIFY", P(Kind::PublishStateNotify)),
];

impl TypeRow {
    const fn exists_in(&self, v: Version) -> bool {
        v.draft() >= self.from && v.draft() <= self.until
    }
}

/// The row of wire type `ty` in `v`.
pub(crate) fn row_of(ty: u64, v: Version) -> Option<&'static TypeRow> {
    TYPES.iter().find(|r| r.code == ty && r.exists_in(v))
}

/// The row that carries `row` in `v`.
pub(crate) fn row_for(row: Row, v: Version) -> Option<&'static TypeRow> {
    TYPES.iter().find(|r| r.row == row && r.exists_in(v))
}

/// Whether the message of `row` opens a request (its first field is its own Request ID).
const fn opens_request(row: Row) -> bool {
    matches!(
        row,
        Row::Plain(
            Kind::Subscribe
                | Kind::Publish
                | Kind::Fetch
                | Kind::TrackStatus
                | Kind::PublishNamespace
                | Kind::SubscribeNamespace
                | Kind::SubscribeTracks
                | Kind::RequestUpdate
        )
    )
}

impl Message {
    /// The name of message type `ty` under `v`, if it exists there (e.g. 0x05 is
    /// SUBSCRIBE_ERROR in draft-14 and REQUEST_ERROR from draft-15).
    ///
    /// ```
    /// use moq_core::{Version, message::Message};
    /// assert_eq!(Message::name_of(0x05, Version::Draft14), Some("SUBSCRIBE_ERROR"));
    /// assert_eq!(Message::name_of(0x05, Version::Draft16), Some("REQUEST_ERROR"));
    /// assert_eq!(Message::name_of(0x2F00, Version::Draft16), None);
    /// ```
    pub fn name_of(ty: u64, v: Version) -> Option<&'static str> {
        row_of(ty, v).map(|r| r.name)
    }

    /// The wire type and name of this message under `v` with what `env` says about it
    /// (draft-14 names an answer after the request it answers), or why it has none there.
    ///
    /// ```
    /// use moq_core::{Version, message::{Envelope, Message, RequestError, RequestType}};
    /// use moq_core::codes::RequestErrorCode;
    /// let err = Message::from(RequestError::new(RequestErrorCode::TIMEOUT, ""));
    /// let env = Envelope { answers: Some(RequestType::Fetch), ..Default::default() };
    /// assert_eq!(err.type_code_in(&env, Version::Draft14), Ok((0x19, "FETCH_ERROR")));
    /// assert_eq!(err.type_code_in(&env, Version::Draft16), Ok((0x05, "REQUEST_ERROR")));
    /// ```
    pub fn type_code_in(
        &self,
        env: &Envelope,
        v: Version,
    ) -> Result<(u64, &'static str), EncodeError> {
        wire_row(self, env, v).map(|r| (r.code, r.name))
    }
}

/// The row a message is sent as under `v`.
pub(crate) fn wire_row(
    msg: &Message,
    env: &Envelope,
    v: Version,
) -> Result<&'static TypeRow, EncodeError> {
    let missing = |what| EncodeError::Invalid {
        field: what,
        reason: "needs Envelope::answers under draft-14 (the answer is named after its request)",
    };
    let found = match msg {
        Message::RequestOk(_) => match env.answers {
            // PUBLISH_OK until draft-17 (draft-16 §9.14).
            Some(RequestType::Publish) if v.has_publish_ok() => {
                row_for(Row::Ok(RequestType::Publish), v)
            }
            _ if v.has_request_ok() => row_for(Row::Plain(Kind::RequestOk), v),
            Some(kind) => row_for(Row::Ok(kind), v),
            None => return Err(missing("REQUEST_OK")),
        },
        Message::RequestError(_) => match env.answers {
            _ if v.has_request_ok() => row_for(Row::Plain(Kind::RequestError), v),
            Some(kind) => row_for(Row::Error(kind), v),
            None => return Err(missing("REQUEST_ERROR")),
        },
        // Draft-16's SUBSCRIBE_NAMESPACE with Subscribe Options PUBLISH.
        Message::SubscribeTracks(_) if v.has_subscribe_options() => {
            row_for(Row::Plain(Kind::SubscribeNamespace), v)
        }
        m => row_for(Row::Plain(m.kind()), v),
    };
    found.ok_or(EncodeError::NotInVersion(msg.name(), v))
}

/// Writes a variable-length integer that must fit the version's encoding (see
/// [`crate::types::location::put_int`]).
pub(crate) use crate::types::location::put_int;

/// Reads a request's Request ID and, under draft-17, the Required Request ID Delta after it:
/// the request the sender needs processed first is Request ID - 2 x Delta, none for 0. A
/// Delta naming a Request ID below 0 closes the session with INVALID_REQUIRED_REQUEST_ID.
/// The requests of a session are handled in the order they arrive, so a valid one needs
/// nothing more.
pub(crate) fn get_request_id(buf: &mut Bytes, v: Version) -> Result<u64, DecodeError> {
    let request_id = buf.get_varint(v)?;
    if v.has_required_request_id() {
        let delta = buf.get_varint(v)?;
        if delta.checked_mul(2).is_none_or(|d| d > request_id) {
            return Err(DecodeError::InvalidRequiredRequestId { request_id, delta });
        }
    }
    Ok(request_id)
}

/// Writes a request's Request ID and, under draft-17, a Required Request ID Delta of 0: no
/// request of ours depends on another being processed first.
pub(crate) fn put_request_id(
    buf: &mut Vec<u8>,
    request_id: u64,
    v: Version,
) -> Result<(), EncodeError> {
    put_int(buf, request_id, v)?;
    if v.has_required_request_id() {
        buf.put_varint(0, v);
    }
    Ok(())
}

impl Message {
    /// Reads one framed message. [`DecodeError::Short`] means the frame is not complete yet (the
    /// cursor may have moved; retry from a saved position). Under drafts 14-16 this is
    /// [`Message::decode_addressed`] without the [`Address`].
    pub fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Message, DecodeError> {
        Message::decode_addressed(buf, v).map(|(m, _)| m)
    }

    /// Writes the framed message. Under drafts 14-16 this is [`Message::encode_addressed`]
    /// with an empty [`Envelope`], which fails for messages that need one.
    pub fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        self.encode_addressed(&Envelope::default(), buf, v)
    }

    /// Encodes the framed message into a new vector.
    pub fn encode_to_vec(&self, v: Version) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode(&mut out, v)?;
        Ok(out)
    }

    /// Encodes the framed message with its [`Envelope`] into a new vector.
    pub fn encode_addressed_to_vec(
        &self,
        env: &Envelope,
        v: Version,
    ) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::new();
        self.encode_addressed(env, &mut out, v)?;
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
        Ok(self.next_addressed()?.map(|(m, _)| m))
    }

    /// The next complete message and the [`Address`] it carries on a draft-14..16 control
    /// stream (see [`Message::decode_addressed`]), `Ok(None)` if more bytes are needed.
    pub fn next_addressed(&mut self) -> Result<Option<(Message, Option<Address>)>, DecodeError> {
        let Some(len) = frame_len(&self.buf, self.version)? else {
            return Ok(None);
        };
        let mut frame = self.take(len);
        Message::decode_addressed(&mut frame, self.version).map(Some)
    }

    /// The first `len` buffered bytes. Once nothing is left behind them the buffer is let go,
    /// so an idle stream keeps no allocation once the frame is dropped (a stream that waits for
    /// its next message for hours, a PUBLISH_NAMESPACE's, kept ~66 bytes: issue 35).
    fn take(&mut self, len: usize) -> Bytes {
        let frame = self.buf.split_to(len).freeze();
        if self.buf.is_empty() {
            self.buf = BytesMut::new();
        }
        frame
    }

    /// The next complete frame as raw bytes without decoding its body, `Ok(None)` if more bytes
    /// are needed. The type has been checked to exist.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, DecodeError> {
        let Some(len) = frame_len(&self.buf, self.version)? else {
            return Ok(None);
        };
        Ok(Some(self.take(len)))
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
/// one, in every version), so a request can be answered even when the rest of its body is
/// rejected. `None` for a message that does not open a request in `v`.
pub fn peek_request_id(frame: &[u8], v: Version) -> Option<u64> {
    let mut cur = frame;
    let ty = cur.get_varint(v).ok()?;
    let row = row_of(ty, v)?;
    if !opens_request(row.row) || cur.remaining() < 2 {
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

    /// A reader whose every byte was taken holds no buffer: the frames taken own it, and an idle
    /// stream's reader keeps nothing (before, the emptied buffer kept the whole allocation).
    #[test]
    fn a_drained_reader_lets_its_buffer_go() {
        let bytes = Message::from(RequestOk::default())
            .encode_to_vec(V)
            .unwrap();
        let mut r = MessageReader::new(V);
        // Read into a roomy buffer, as a stream's reader does.
        r.buffer_mut().reserve(1024);
        r.push(&bytes);
        r.push(&bytes[..1]);
        assert!(r.next_frame().unwrap().is_some());
        assert!(
            r.buffer_mut().capacity() > 0,
            "a partial frame stays buffered"
        );
        r.push(&bytes[1..]);
        let frame = r.next_frame().unwrap();
        assert!(frame.is_some());
        assert_eq!(
            r.buffer_mut().capacity(),
            0,
            "the rest of the allocation is let go"
        );
    }

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
            cluster: None,
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
