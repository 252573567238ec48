//! The single control stream of drafts 14-16: what a message carries there besides its body.
//!
//! Drafts 14-16 send every request's messages on one bidirectional control stream, so answers,
//! updates and cancellations name the request they belong to: by Request ID (SUBSCRIBE_OK,
//! REQUEST_ERROR, PUBLISH_DONE, UNSUBSCRIBE, the Existing Request ID of REQUEST_UPDATE, ...) or,
//! in draft-14, by Track Namespace (PUBLISH_NAMESPACE_DONE, PUBLISH_NAMESPACE_CANCEL,
//! UNSUBSCRIBE_NAMESPACE). The message types above keep the newest drafts' model; this module
//! adds the [`Address`] a frame carries and the family's own messages (CLIENT_SETUP,
//! MAX_REQUEST_ID, UNSUBSCRIBE, ...). [`Message::decode_addressed`] and
//! [`Message::encode_addressed`] translate between the two.

use bytes::{Buf, BufMut, Bytes};

use super::setup::SetupOptions;
use super::{ControlMessage, Message, body_done};
use crate::Version;
use crate::codes::RequestErrorCode;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};
use crate::types::location::{decode_reason, encode_reason};
use crate::types::namespace::TrackNamespace;

/// Which request a message on a draft-14..16 control stream belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Address {
    /// By Request ID: the request this message answers, updates or ends.
    Request(u64),
    /// By Track Namespace (draft-14's PUBLISH_NAMESPACE_DONE and _CANCEL, and the prefix of
    /// UNSUBSCRIBE_NAMESPACE).
    Namespace(TrackNamespace),
}

/// The kinds of request, for naming an answer after its request (draft-14 has a *_OK and an
/// *_ERROR per kind).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RequestType {
    /// SUBSCRIBE.
    Subscribe,
    /// PUBLISH.
    Publish,
    /// FETCH.
    Fetch,
    /// TRACK_STATUS.
    TrackStatus,
    /// PUBLISH_NAMESPACE.
    PublishNamespace,
    /// SUBSCRIBE_NAMESPACE.
    SubscribeNamespace,
    /// SUBSCRIBE_TRACKS (SUBSCRIBE_NAMESPACE with Subscribe Options PUBLISH in draft-16).
    SubscribeTracks,
    /// REQUEST_UPDATE (SUBSCRIBE_UPDATE in draft-14).
    RequestUpdate,
}

/// What a draft-14..16 control stream frame carries around a message's body.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Envelope {
    /// The request the message belongs to; required for the messages that carry one there.
    pub address: Option<Address>,
    /// For an answer (REQUEST_OK, REQUEST_ERROR, ...): the kind of the request it answers, which
    /// names the message in draft-14 (SUBSCRIBE_ERROR, FETCH_ERROR, PUBLISH_NAMESPACE_OK, ...)
    /// and selects its error code registry.
    pub answers: Option<RequestType>,
}

/// CLIENT_SETUP (drafts 14-16, type 0x20): the first message on the control stream, from the
/// client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientSetup {
    /// Supported versions, as SETUP numbers (0xff000000 + draft), in preference order; only
    /// in draft-14 (from draft-15 ALPN selects the version and the list is gone).
    pub versions: Vec<u64>,
    /// The setup parameters.
    pub options: SetupOptions,
}

/// SERVER_SETUP (drafts 14-16, type 0x21): the server's answer to CLIENT_SETUP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerSetup {
    /// The selected version as a SETUP number; only in draft-14.
    pub version: Option<u64>,
    /// The setup parameters.
    pub options: SetupOptions,
}

/// MAX_REQUEST_ID (drafts 14-16, type 0x15): the peer may use Request IDs below this.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MaxRequestId {
    /// One past the largest Request ID the receiver may use.
    pub request_id: u64,
}

/// REQUESTS_BLOCKED (drafts 14-16, type 0x1A): the sender has requests to send but the
/// peer's MAX_REQUEST_ID stops it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestsBlocked {
    /// The MAX_REQUEST_ID the sender is blocked at.
    pub maximum_request_id: u64,
}

/// UNSUBSCRIBE (drafts 14-16, type 0x0A): the subscriber ends the subscription named by its
/// address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unsubscribe;

/// FETCH_CANCEL (drafts 14-16, type 0x17): the requester cancels the FETCH named by its address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FetchCancel;

/// PUBLISH_NAMESPACE_DONE (drafts 14-16, type 0x09): the publisher withdraws the namespace
/// named by its address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishNamespaceDone;

/// PUBLISH_NAMESPACE_CANCEL (drafts 14-16, type 0x0C): the receiver of a PUBLISH_NAMESPACE no
/// longer routes to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishNamespaceCancel {
    /// Why.
    pub code: RequestErrorCode,
    /// A diagnostic reason.
    pub reason: String,
}

/// UNSUBSCRIBE_NAMESPACE (drafts 14-15, type 0x14): the subscriber ends the namespace
/// subscription named by its address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnsubscribeNamespace;

macro_rules! empty_bodies {
    ($( $ty:ident = $code:expr, $name:expr; )*) => {
        $(
            impl ControlMessage for $ty {
                const TYPE: u64 = $code;
                const NAME: &'static str = $name;

                fn decode_body(buf: &mut Bytes, _v: Version) -> Result<Self, DecodeError> {
                    body_done(buf, Self::NAME)?;
                    Ok($ty)
                }

                fn encode_body(&self, _buf: &mut Vec<u8>, _v: Version) -> Result<(), EncodeError> {
                    Ok(())
                }
            }
        )*
    };
}

empty_bodies! {
    Unsubscribe = 0x0A, "UNSUBSCRIBE";
    FetchCancel = 0x17, "FETCH_CANCEL";
    PublishNamespaceDone = 0x09, "PUBLISH_NAMESPACE_DONE";
    UnsubscribeNamespace = 0x14, "UNSUBSCRIBE_NAMESPACE";
}

impl ControlMessage for MaxRequestId {
    const TYPE: u64 = 0x15;
    const NAME: &'static str = "MAX_REQUEST_ID";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let request_id = buf.get_varint(v)?;
        body_done(buf, Self::NAME)?;
        Ok(MaxRequestId { request_id })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.request_id, v);
        Ok(())
    }
}

impl ControlMessage for RequestsBlocked {
    const TYPE: u64 = 0x1A;
    const NAME: &'static str = "REQUESTS_BLOCKED";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let maximum_request_id = buf.get_varint(v)?;
        body_done(buf, Self::NAME)?;
        Ok(RequestsBlocked { maximum_request_id })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.maximum_request_id, v);
        Ok(())
    }
}

impl ControlMessage for PublishNamespaceCancel {
    const TYPE: u64 = 0x0C;
    const NAME: &'static str = "PUBLISH_NAMESPACE_CANCEL";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let code = RequestErrorCode(buf.get_varint(v)?);
        let reason = decode_reason(buf, v)?;
        body_done(buf, Self::NAME)?;
        Ok(PublishNamespaceCancel { code, reason })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.code.0, v);
        encode_reason(&self.reason, buf, v)
    }
}

impl ControlMessage for ClientSetup {
    const TYPE: u64 = 0x20;
    const NAME: &'static str = "CLIENT_SETUP";

    fn decode_body(_buf: &mut Bytes, _v: Version) -> Result<Self, DecodeError> {
        // Filled in with the draft-14..16 codec.
        Err(DecodeError::UnexpectedMessage(Self::NAME))
    }

    fn encode_body(&self, _buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        Err(EncodeError::NotInVersion(Self::NAME, v))
    }
}

impl ControlMessage for ServerSetup {
    const TYPE: u64 = 0x21;
    const NAME: &'static str = "SERVER_SETUP";

    fn decode_body(_buf: &mut Bytes, _v: Version) -> Result<Self, DecodeError> {
        // Filled in with the draft-14..16 codec.
        Err(DecodeError::UnexpectedMessage(Self::NAME))
    }

    fn encode_body(&self, _buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        Err(EncodeError::NotInVersion(Self::NAME, v))
    }
}

impl Message {
    /// Reads one framed message of a draft-14..16 control stream and the [`Address`] it
    /// carries (`None` for messages that name no request, and for request messages, which
    /// carry their own Request ID). Under newer versions this is [`Message::decode`].
    pub fn decode_addressed<B: Buf>(
        buf: &mut B,
        v: Version,
    ) -> Result<(Message, Option<Address>), DecodeError> {
        // Filled in with the draft-14..16 codec.
        Message::decode(buf, v).map(|m| (m, None))
    }

    /// Writes the framed message with what `env` says about it; under newer versions (or with
    /// an empty envelope, for messages that need none) this is [`Message::encode`].
    pub fn encode_addressed<B: BufMut>(
        &self,
        env: &Envelope,
        buf: &mut B,
        v: Version,
    ) -> Result<(), EncodeError> {
        // Filled in with the draft-14..16 codec.
        let _ = env;
        self.encode(buf, v)
    }

    /// The kind of request this message opens, if it opens one.
    pub fn request_type(&self) -> Option<RequestType> {
        Some(match self {
            Message::Subscribe(_) => RequestType::Subscribe,
            Message::Publish(_) => RequestType::Publish,
            Message::Fetch(_) => RequestType::Fetch,
            Message::TrackStatus(_) => RequestType::TrackStatus,
            Message::PublishNamespace(_) => RequestType::PublishNamespace,
            Message::SubscribeNamespace(_) => RequestType::SubscribeNamespace,
            Message::SubscribeTracks(_) => RequestType::SubscribeTracks,
            Message::RequestUpdate(_) => RequestType::RequestUpdate,
            _ => return None,
        })
    }
}
