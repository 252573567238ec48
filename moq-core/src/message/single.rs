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

use super::namespace::decode_subscribe_namespace_with_options;
use super::setup::{SetupOptions, SetupRole};
use super::{
    ControlMessage, Kind, MAX_MESSAGE_LEN, Message, RequestError, RequestOk, RequestUpdate, Row,
    body_done, put_int, row_of, wire_row,
};
use crate::Version;
use crate::codes::RequestErrorCode;
pub use crate::codes::RequestType;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::kvp::{decode_kvps, encode_kvps};
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
    /// in draft-14 (from draft-15 ALPN selects the version and the list is gone). Encoding
    /// an empty list under draft-14 offers the version being encoded.
    pub versions: Vec<u64>,
    /// MAX_REQUEST_ID (setup parameter 0x02, drafts 14-16 §9.3.2.3): the initial Maximum
    /// Request ID the peer may use, plus one; absent means 0.
    pub max_request_id: Option<u64>,
    /// The setup parameters.
    pub options: SetupOptions,
}

/// SERVER_SETUP (drafts 14-16, type 0x21): the server's answer to CLIENT_SETUP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerSetup {
    /// The selected version as a SETUP number; only in draft-14. Encoding `None` under
    /// draft-14 selects the version being encoded.
    pub version: Option<u64>,
    /// MAX_REQUEST_ID (setup parameter 0x02, drafts 14-16): see [`ClientSetup`].
    pub max_request_id: Option<u64>,
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
        put_int(buf, self.request_id, v)
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
        put_int(buf, self.maximum_request_id, v)
    }
}

impl ControlMessage for PublishNamespaceCancel {
    const TYPE: u64 = 0x0C;
    const NAME: &'static str = "PUBLISH_NAMESPACE_CANCEL";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        // draft-14 §9.27: the codes of PUBLISH_NAMESPACE_ERROR; draft-16 §9.24: those of the
        // REQUEST_ERROR answering PUBLISH_NAMESPACE.
        let kind = Some(RequestType::PublishNamespace);
        let code = RequestErrorCode::from_wire(buf.get_varint(v)?, kind, v);
        let reason = decode_reason(buf, v)?;
        body_done(buf, Self::NAME)?;
        Ok(PublishNamespaceCancel { code, reason })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        let kind = Some(RequestType::PublishNamespace);
        put_int(buf, self.code.to_wire(kind, v), v)?;
        encode_reason(&self.reason, buf, v)
    }
}

impl ControlMessage for ClientSetup {
    const TYPE: u64 = 0x20;
    const NAME: &'static str = "CLIENT_SETUP";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let mut versions = Vec::new();
        if v.setup_has_versions() {
            // draft-14 §9.3: Number of Supported Versions, then the versions.
            let n = buf.get_varint(v)?;
            for _ in 0..n {
                versions.push(buf.get_varint(v)?);
            }
        }
        let (options, max_request_id) = decode_setup_params(buf, SetupRole::Client, v)?;
        Ok(ClientSetup {
            versions,
            max_request_id,
            options,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        if v.setup_has_versions() {
            let offered = [v.setup_number()];
            let versions = if self.versions.is_empty() {
                &offered[..]
            } else {
                &self.versions[..]
            };
            buf.put_varint(versions.len() as u64, v);
            for x in versions {
                put_int(buf, *x, v)?;
            }
        } else if !self.versions.is_empty() {
            return Err(EncodeError::NotInVersion(
                "CLIENT_SETUP Supported Versions",
                v,
            ));
        }
        encode_setup_params(
            &self.options,
            self.max_request_id,
            SetupRole::Client,
            buf,
            v,
        )
    }
}

impl ControlMessage for ServerSetup {
    const TYPE: u64 = 0x21;
    const NAME: &'static str = "SERVER_SETUP";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        // draft-14 §9.3: Selected Version.
        let version = if v.setup_has_versions() {
            Some(buf.get_varint(v)?)
        } else {
            None
        };
        let (options, max_request_id) = decode_setup_params(buf, SetupRole::Server, v)?;
        Ok(ServerSetup {
            version,
            max_request_id,
            options,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        match self.version {
            _ if v.setup_has_versions() => {
                put_int(buf, self.version.unwrap_or(v.setup_number()), v)?
            }
            Some(_) => {
                return Err(EncodeError::NotInVersion(
                    "SERVER_SETUP Selected Version",
                    v,
                ));
            }
            None => {}
        }
        encode_setup_params(
            &self.options,
            self.max_request_id,
            SetupRole::Server,
            buf,
            v,
        )
    }
}

/// `Number of Parameters, Setup Parameters` of CLIENT_SETUP / SERVER_SETUP (drafts 14-16
/// §9.3), read with the option codec SETUP shares.
fn decode_setup_params(
    buf: &mut Bytes,
    role: SetupRole,
    v: Version,
) -> Result<(SetupOptions, Option<u64>), DecodeError> {
    let count = buf.get_varint(v)?;
    let pairs = decode_kvps(buf, v)?;
    if pairs.len() as u64 != count {
        return Err(DecodeError::ProtocolViolation(
            "Number of Parameters does not match the setup parameters",
        ));
    }
    SetupOptions::from_pairs(pairs, role, v)
}

fn encode_setup_params(
    options: &SetupOptions,
    max_request_id: Option<u64>,
    role: SetupRole,
    buf: &mut Vec<u8>,
    v: Version,
) -> Result<(), EncodeError> {
    let pairs = options.to_pairs(max_request_id, role, v)?;
    buf.put_varint(pairs.len() as u64, v);
    encode_kvps(&pairs, buf, v)
}

/// How a message is addressed on a draft-14..16 control stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Addressing {
    /// It names no request, or opens one with its own Request ID.
    None,
    /// Its first field is the Request ID of the request it belongs to.
    RequestFirst,
    /// Its first field is a Track Namespace (draft-14/15 PUBLISH_NAMESPACE_DONE and _CANCEL,
    /// draft-14 UNSUBSCRIBE_NAMESPACE).
    NamespaceFirst,
    /// REQUEST_UPDATE: its own Request ID, then the Existing Request ID.
    RequestSecond,
}

fn addressing(row: Row, v: Version) -> Addressing {
    if !v.single_control_stream() {
        return Addressing::None;
    }
    match row {
        Row::Ok(_) | Row::Error(_) => Addressing::RequestFirst,
        Row::Plain(kind) => match kind {
            Kind::SubscribeOk
            | Kind::FetchOk
            | Kind::RequestOk
            | Kind::RequestError
            | Kind::PublishDone
            | Kind::Unsubscribe
            | Kind::FetchCancel => Addressing::RequestFirst,
            // draft-14 §9.26-§9.27 (and draft-15): by Track Namespace; draft-16 §9.22, §9.24:
            // by Request ID.
            Kind::PublishNamespaceDone | Kind::PublishNamespaceCancel => {
                if v.namespace_done_by_namespace() {
                    Addressing::NamespaceFirst
                } else {
                    Addressing::RequestFirst
                }
            }
            // draft-14 §9.31: by prefix; draft-15: by Request ID.
            Kind::UnsubscribeNamespace => {
                if v.unsubscribe_namespace_by_prefix() {
                    Addressing::NamespaceFirst
                } else {
                    Addressing::RequestFirst
                }
            }
            Kind::RequestUpdate => Addressing::RequestSecond,
            _ => Addressing::None,
        },
    }
}

/// Decodes the body of `row` (its address already read).
fn decode_row(row: Row, body: &mut Bytes, v: Version) -> Result<Message, DecodeError> {
    match row {
        Row::Plain(Kind::SubscribeNamespace) if v.has_subscribe_options() => {
            decode_subscribe_namespace_with_options(body, v)
        }
        Row::Plain(kind) => Message::decode_kind(kind, body, v),
        Row::Ok(kind) => RequestOk::decode_answer(kind, body, v).map(Message::RequestOk),
        Row::Error(kind) => {
            RequestError::decode_answer(Some(kind), body, v).map(Message::RequestError)
        }
    }
}

/// Encodes the body of `msg` as `row`.
fn encode_row(
    msg: &Message,
    row: Row,
    env: &Envelope,
    buf: &mut Vec<u8>,
    v: Version,
) -> Result<(), EncodeError> {
    match (msg, row) {
        (Message::RequestOk(m), Row::Ok(kind)) => m.encode_answer(kind, buf, v),
        (Message::RequestError(m), Row::Error(kind)) => m.encode_answer(Some(kind), buf, v),
        // REQUEST_ERROR from draft-15: one registry, but the kind is harmless to pass.
        (Message::RequestError(m), _) => m.encode_answer(env.answers, buf, v),
        (Message::RequestUpdate(m), _) if v.single_control_stream() => {
            let existing = request_address(env, "REQUEST_UPDATE")?;
            m.encode_with_existing(existing, buf, v)
        }
        (m, _) => m.encode_body(buf, v),
    }
}

/// The Request ID `env` addresses, required by `what`.
fn request_address(env: &Envelope, what: &'static str) -> Result<u64, EncodeError> {
    match &env.address {
        Some(Address::Request(id)) => Ok(*id),
        Some(Address::Namespace(_)) => Err(EncodeError::Invalid {
            field: what,
            reason: "addressed by Request ID in this version, not by namespace",
        }),
        None => Err(EncodeError::Invalid {
            field: what,
            reason: "needs Envelope::address (the Request ID it belongs to)",
        }),
    }
}

impl Message {
    /// Reads one framed message and the [`Address`] it carries on a draft-14..16 control
    /// stream: `Address::Request(id)` for answers, updates and cancellations (the Request ID
    /// that leads SUBSCRIBE_OK, REQUEST_OK, REQUEST_ERROR and draft-14's *_OK / *_ERROR,
    /// PUBLISH_DONE, UNSUBSCRIBE, FETCH_CANCEL, ...; REQUEST_UPDATE's Existing Request ID),
    /// `Address::Namespace(ns)` for draft-14/15 PUBLISH_NAMESPACE_DONE and _CANCEL and
    /// draft-14 UNSUBSCRIBE_NAMESPACE, and `None` for everything else (request messages carry
    /// their own Request ID). The message itself is the model's: a draft-14 SUBSCRIBE_ERROR is
    /// a [`RequestError`] with its code translated, TRACK_STATUS_OK and PUBLISH_OK are a
    /// [`RequestOk`], inline fields are parameters. Under newer versions the address is always
    /// `None`.
    ///
    /// A type that does not exist in `v` is [`DecodeError::UnknownMessageType`]; a body
    /// shorter than its fields or with bytes left over is a PROTOCOL_VIOLATION.
    pub fn decode_addressed<B: Buf>(
        buf: &mut B,
        v: Version,
    ) -> Result<(Message, Option<Address>), DecodeError> {
        let ty = buf.get_varint(v)?;
        // draft-14 §9, draft-16 §9: an unknown message type MUST close the session.
        let row = row_of(ty, v).ok_or(DecodeError::UnknownMessageType(ty))?;
        if buf.remaining() < 2 {
            return Err(DecodeError::Short);
        }
        let len = usize::from(buf.get_u16());
        let mut body = buf.get_exact(len)?;
        let decoded = (|| {
            let body = &mut body;
            Ok(match addressing(row.row, v) {
                Addressing::None => (decode_row(row.row, body, v)?, None),
                Addressing::RequestFirst => {
                    let id = body.get_varint(v)?;
                    (decode_row(row.row, body, v)?, Some(Address::Request(id)))
                }
                Addressing::NamespaceFirst => {
                    let ns = TrackNamespace::decode(body, v)?;
                    (decode_row(row.row, body, v)?, Some(Address::Namespace(ns)))
                }
                Addressing::RequestSecond => {
                    let request_id = body.get_varint(v)?;
                    let existing = body.get_varint(v)?;
                    let m = RequestUpdate::decode_fields(request_id, body, v)?;
                    (Message::RequestUpdate(m), Some(Address::Request(existing)))
                }
            })
        })();
        let (msg, address) = decoded.map_err(|e: DecodeError| e.in_complete(row.name))?;
        // draft-14 §9, draft-19 §10: a Length that does not match the body is a
        // PROTOCOL_VIOLATION.
        body_done(&body, row.name)?;
        Ok((msg, address))
    }

    /// Writes the framed message with what `env` says about it: under drafts 14-16 the
    /// [`Address`] goes where [`Message::decode_addressed`] reads it (an [`EncodeError`] if the
    /// message needs one and `env` has none, or the wrong kind), and `env.answers` names the
    /// answer (draft-14's SUBSCRIBE_ERROR, FETCH_ERROR, PUBLISH_NAMESPACE_OK, ...; PUBLISH_OK
    /// for a REQUEST_OK answering PUBLISH until draft-17) and selects its code registry.
    /// Under newer versions `env` is not used and this is [`Message::encode`].
    pub fn encode_addressed<B: BufMut>(
        &self,
        env: &Envelope,
        buf: &mut B,
        v: Version,
    ) -> Result<(), EncodeError> {
        let row = wire_row(self, env, v)?;
        let mut body = Vec::new();
        match addressing(row.row, v) {
            Addressing::None | Addressing::RequestSecond => {}
            Addressing::RequestFirst => put_int(&mut body, request_address(env, row.name)?, v)?,
            Addressing::NamespaceFirst => match &env.address {
                Some(Address::Namespace(ns)) => ns.encode(&mut body, v)?,
                _ => {
                    return Err(EncodeError::Invalid {
                        field: row.name,
                        reason: "needs Envelope::address with the Track Namespace it names",
                    });
                }
            },
        }
        encode_row(self, row.row, env, &mut body, v)?;
        if body.len() > MAX_MESSAGE_LEN {
            return Err(EncodeError::MessageTooLong {
                message: row.name,
                len: body.len(),
            });
        }
        buf.put_varint(row.code, v);
        buf.put_u16(body.len() as u16);
        buf.put_slice(&body);
        Ok(())
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
