//! Namespace discovery messages: PUBLISH_NAMESPACE, NAMESPACE, NAMESPACE_DONE,
//! SUBSCRIBE_NAMESPACE, SUBSCRIBE_TRACKS and PUBLISH_SKIPPED (draft-19 §10.15-§10.20).

use bytes::Bytes;

use super::cluster::ClusterParams;
use super::params::{ParamContext, Parameters};
use super::{ControlMessage, Message, body_done};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::namespace::{FullTrackName, TrackNamespace};

/// PUBLISH_NAMESPACE: the publisher has tracks in this namespace (draft-19 §10.15).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishNamespace {
    /// The Request ID.
    pub request_id: u64,
    /// The namespace.
    pub namespace: TrackNamespace,
    /// The parameters (authorization).
    pub params: Parameters,
}

impl ControlMessage for PublishNamespace {
    const TYPE: u64 = 0x06;
    const NAME: &'static str = "PUBLISH_NAMESPACE";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let request_id = super::get_request_id(buf, v)?;
        let namespace = TrackNamespace::decode(buf, v)?;
        let params = Parameters::decode(buf, ParamContext::PublishNamespace, v)?;
        body_done(buf, Self::NAME)?;
        Ok(PublishNamespace {
            request_id,
            namespace,
            params,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        super::put_request_id(buf, self.request_id, v)?;
        self.namespace.encode(buf, v)?;
        self.params.encode(buf, ParamContext::PublishNamespace, v)
    }
}

fn decode_suffix(
    buf: &mut Bytes,
    v: Version,
    name: &'static str,
) -> Result<TrackNamespace, DecodeError> {
    // A namespace equal to the prefix has an empty suffix: allowed wherever the prefix may be
    // empty (draft-16 §9.25; its field rule "1..32" leaves the exact match unsaid, and aiomoqt
    // sends 0 fields).
    let suffix = TrackNamespace::decode_prefix(buf, v)?;
    body_done(buf, name)?;
    Ok(suffix)
}

/// NAMESPACE: a namespace matching the SUBSCRIBE_NAMESPACE prefix exists; carries only the
/// fields after the prefix (draft-19 §10.16).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Namespace {
    /// The namespace with the prefix removed.
    pub suffix: TrackNamespace,
    /// HOP_PATH and ROUTE_COST of the extended form (MoQ Cluster extension): `Some` is
    /// written in the extended form (draft-17 on), `None` in the base one. Read only by
    /// [`Namespace::decode_extended`] and [`Message::decode_clustered`].
    pub cluster: Option<Box<ClusterParams>>,
}

impl Message {
    /// Reads one framed message of a session that negotiated the MoQ Cluster extension
    /// (draft-lcurley-moq-cluster): NAMESPACE in its extended form, with its
    /// [`Namespace::cluster`]; every other message as [`Message::decode`] reads it.
    pub fn decode_clustered(buf: &mut Bytes, v: Version) -> Result<Message, DecodeError> {
        let mut peek = buf.clone();
        if !v.has_cluster_extension() || peek.get_varint(v)? != Namespace::TYPE {
            return Message::decode(buf, v);
        }
        if peek.len() < 2 {
            return Err(DecodeError::Short);
        }
        let len = usize::from(bytes::Buf::get_u16(&mut peek));
        let mut body = peek.get_exact(len)?;
        let (n, _) =
            Namespace::decode_extended(&mut body, v).map_err(|e| e.in_complete(Namespace::NAME))?;
        *buf = peek;
        Ok(Message::Namespace(n))
    }
}

impl Namespace {
    /// Reads the body of a NAMESPACE in the extended form that a session which negotiated the
    /// MoQ Cluster extension (draft-lcurley-moq-cluster, draft-17 on) uses: the suffix, then
    /// Message Parameters (HOP_PATH, ROUTE_COST; see [`crate::message::cluster`]).
    pub fn decode_extended(
        buf: &mut Bytes,
        v: Version,
    ) -> Result<(Namespace, Parameters), DecodeError> {
        if !v.has_cluster_extension() {
            return Err(DecodeError::InvalidValue {
                field: "extended NAMESPACE before draft-17",
                value: v.draft().into(),
            });
        }
        let suffix = TrackNamespace::decode_prefix(buf, v)?;
        let params = Parameters::decode(buf, ParamContext::Namespace, v)?;
        body_done(buf, "NAMESPACE")?;
        let cluster = params.cluster.clone();
        Ok((Namespace { suffix, cluster }, params))
    }

    /// Writes the body of an extended NAMESPACE (see [`Namespace::decode_extended`]).
    pub fn encode_extended(
        &self,
        params: &Parameters,
        buf: &mut Vec<u8>,
        v: Version,
    ) -> Result<(), EncodeError> {
        if !v.has_cluster_extension() {
            return Err(EncodeError::NotInVersion("extended NAMESPACE", v));
        }
        self.suffix.encode_prefix(buf, v)?;
        params.encode(buf, ParamContext::Namespace, v)
    }
}

impl ControlMessage for Namespace {
    const TYPE: u64 = 0x08;
    const NAME: &'static str = "NAMESPACE";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        Ok(Namespace {
            suffix: decode_suffix(buf, v, Self::NAME)?,
            cluster: None,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        match &self.cluster {
            Some(c) => {
                let params = Parameters {
                    cluster: Some(c.clone()),
                    ..Default::default()
                };
                self.encode_extended(&params, buf, v)
            }
            None => self.suffix.encode_prefix(buf, v),
        }
    }
}

/// NAMESPACE_DONE: a namespace previously sent in NAMESPACE is gone (draft-19 §10.17).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespaceDone {
    /// The namespace with the prefix removed.
    pub suffix: TrackNamespace,
}

impl ControlMessage for NamespaceDone {
    const TYPE: u64 = 0x0E;
    const NAME: &'static str = "NAMESPACE_DONE";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        Ok(NamespaceDone {
            suffix: decode_suffix(buf, v, Self::NAME)?,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        self.suffix.encode_prefix(buf, v)
    }
}

fn decode_prefix_request(
    buf: &mut Bytes,
    ctx: ParamContext,
    v: Version,
    name: &'static str,
) -> Result<(u64, TrackNamespace, Parameters), DecodeError> {
    let request_id = super::get_request_id(buf, v)?;
    // draft-19 §10.18: 0 to 32 fields; more than 32 is a PROTOCOL_VIOLATION. draft-14 §9.28:
    // "an N of 0 or more than 32 ... MUST close the session"; draft-16 §9.25: 0 to 32.
    let prefix = TrackNamespace::decode_prefix(buf, v)?;
    if v.has_subscribe_options() {
        // Read by decode_subscribe_namespace_with_options; a body read here directly names
        // the variant its options give.
        let options = buf.get_varint(v)?;
        let expected = if ctx == ParamContext::SubscribeTracks {
            0
        } else {
            1
        };
        if options != expected && !(options == 2 && expected == 1) {
            return Err(DecodeError::UnexpectedMessage(name));
        }
    }
    let params = Parameters::decode(buf, ctx, v)?;
    body_done(buf, name)?;
    Ok((request_id, prefix, params))
}

fn encode_prefix_request(
    buf: &mut Vec<u8>,
    request_id: u64,
    prefix: &TrackNamespace,
    params: &Parameters,
    ctx: ParamContext,
    v: Version,
) -> Result<(), EncodeError> {
    super::put_request_id(buf, request_id, v)?;
    prefix.encode_prefix(buf, v)?;
    if v.has_subscribe_options() {
        // draft-16 §9.25: PUBLISH (0x00) for SUBSCRIBE_TRACKS, NAMESPACE (0x01) for
        // SUBSCRIBE_NAMESPACE.
        buf.put_varint(u64::from(ctx != ParamContext::SubscribeTracks), v);
    }
    params.encode(buf, ctx, v)
}

/// Drafts 16-17's SUBSCRIBE_NAMESPACE (0x11) with its Subscribe Options (§9.25): PUBLISH (0x00)
/// asks for the tracks, [`SubscribeTracks`] in the model; NAMESPACE (0x01) and both (0x02)
/// are a [`SubscribeNamespace`] (the model has no "both": the PUBLISH half of 0x02 is not
/// kept). Any other value is a PROTOCOL_VIOLATION.
pub(crate) fn decode_subscribe_namespace_with_options(
    buf: &mut Bytes,
    v: Version,
) -> Result<Message, DecodeError> {
    let mut peek = buf.clone();
    super::get_request_id(&mut peek, v)?;
    TrackNamespace::decode_prefix(&mut peek, v)?;
    match peek.get_varint(v)? {
        0 => SubscribeTracks::decode_body(buf, v).map(Message::SubscribeTracks),
        1 | 2 => SubscribeNamespace::decode_body(buf, v).map(Message::SubscribeNamespace),
        x => Err(DecodeError::InvalidValue {
            field: "Subscribe Options",
            value: x,
        }),
    }
}

/// SUBSCRIBE_NAMESPACE: ask for NAMESPACE / NAMESPACE_DONE for namespaces under a prefix
/// (draft-19 §10.18). A zero-field prefix means every namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscribeNamespace {
    /// The Request ID.
    pub request_id: u64,
    /// The Track Namespace Prefix.
    pub prefix: TrackNamespace,
    /// The parameters (authorization).
    pub params: Parameters,
}

impl ControlMessage for SubscribeNamespace {
    const TYPE: u64 = 0x50;
    const NAME: &'static str = "SUBSCRIBE_NAMESPACE";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let (request_id, prefix, params) =
            decode_prefix_request(buf, ParamContext::SubscribeNamespace, v, Self::NAME)?;
        Ok(SubscribeNamespace {
            request_id,
            prefix,
            params,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        encode_prefix_request(
            buf,
            self.request_id,
            &self.prefix,
            &self.params,
            ParamContext::SubscribeNamespace,
            v,
        )
    }
}

/// SUBSCRIBE_TRACKS: ask for a PUBLISH for every track under a prefix (draft-19 §10.19).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscribeTracks {
    /// The Request ID.
    pub request_id: u64,
    /// The Track Namespace Prefix.
    pub prefix: TrackNamespace,
    /// The parameters: defaults for the resulting subscriptions, and track filters.
    pub params: Parameters,
}

impl ControlMessage for SubscribeTracks {
    const TYPE: u64 = 0x51;
    const NAME: &'static str = "SUBSCRIBE_TRACKS";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let (request_id, prefix, params) =
            decode_prefix_request(buf, ParamContext::SubscribeTracks, v, Self::NAME)?;
        Ok(SubscribeTracks {
            request_id,
            prefix,
            params,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        encode_prefix_request(
            buf,
            self.request_id,
            &self.prefix,
            &self.params,
            ParamContext::SubscribeTracks,
            v,
        )
    }
}

/// PUBLISH_SKIPPED (PUBLISH_BLOCKED in draft-18): the publisher will not send a PUBLISH for this
/// track on this SUBSCRIBE_TRACKS (draft-19 §10.20).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PublishSkipped {
    /// The namespace with the prefix removed.
    pub suffix: TrackNamespace,
    /// The track name.
    pub name: Bytes,
}

impl ControlMessage for PublishSkipped {
    const TYPE: u64 = 0x0F;
    const NAME: &'static str = "PUBLISH_SKIPPED";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let ns = TrackNamespace::decode(buf, v)?;
        let t = FullTrackName::decode_name(ns, buf, v)?;
        body_done(buf, Self::NAME)?;
        Ok(PublishSkipped {
            suffix: t.namespace,
            name: t.name,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        self.suffix.encode(buf, v)?;
        buf.put_len_prefixed(&self.name, v, "track name", TrackNamespace::MAX_LEN)
    }
}
