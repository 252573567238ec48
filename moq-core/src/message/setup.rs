//! SETUP (draft-19 §10.3) and GOAWAY (§10.4).

use bytes::{Buf, Bytes};

use super::params::check_ints_fit;
use super::{ControlMessage, body_done};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};
use crate::types::kvp::{KeyValuePair, KvpValue, decode_kvps, encode_kvps};
use crate::types::location::lossy_text;
use crate::types::token::AuthToken;

/// Setup Option types (draft-19 §15.4). The namespace is the same in every version.
pub mod setup_option {
    /// PATH (bytes; client, raw QUIC only).
    pub const PATH: u64 = 0x01;
    /// AUTHORIZATION_TOKEN (Token; may repeat).
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// MAX_AUTH_TOKEN_CACHE_SIZE (varint bytes).
    pub const MAX_AUTH_TOKEN_CACHE_SIZE: u64 = 0x04;
    /// AUTHORITY (bytes; client, raw QUIC only).
    pub const AUTHORITY: u64 = 0x05;
    /// MAX_FILTER_RANGES (varint; draft-19).
    pub const MAX_FILTER_RANGES: u64 = 0x06;
    /// MOQT_IMPLEMENTATION (UTF-8).
    pub const MOQT_IMPLEMENTATION: u64 = 0x07;
    /// MAX_REQUEST_UPDATES (varint; draft-19).
    pub const MAX_REQUEST_UPDATES: u64 = 0x08;
    /// HOP_ID (varint; MoQ Cluster extension, draft-17 on): see [`crate::message::cluster`].
    pub const HOP_ID: u64 = super::super::cluster::HOP_ID;
    /// RELAY_COST (varint; MoQ Cluster extension, draft-17 on).
    pub const RELAY_COST: u64 = super::super::cluster::RELAY_COST;
}

/// The Setup Options of a SETUP message, typed; unknown options (GREASE among them) are kept in
/// `unknown` and otherwise ignored (draft-19 §10.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetupOptions {
    /// PATH (0x01): path-abempty and optional `?query` of the `moqt://` URI.
    pub path: Option<Bytes>,
    /// AUTHORITY (0x05): authority of the `moqt://` URI.
    pub authority: Option<Bytes>,
    /// AUTHORIZATION_TOKEN (0x03), in order.
    pub authorization_tokens: Vec<AuthToken>,
    /// MAX_AUTH_TOKEN_CACHE_SIZE (0x04); absent means 0.
    pub max_auth_token_cache_size: Option<u64>,
    /// MAX_FILTER_RANGES (0x06, draft-19); absent means 0.
    pub max_filter_ranges: Option<u64>,
    /// MOQT_IMPLEMENTATION (0x07).
    pub implementation: Option<String>,
    /// MAX_REQUEST_UPDATES (0x08, draft-19); absent or 0 means unlimited.
    pub max_request_updates: Option<u64>,
    /// HOP_ID (0x40B54, MoQ Cluster extension, draft-17 on): the sender's Hop ID; present
    /// means the sender speaks the extension (0: it names no hop).
    pub hop_id: Option<u64>,
    /// RELAY_COST (0x40B56, MoQ Cluster extension, draft-17 on): what pulling from the
    /// sender costs; absent means [`super::cluster::DEFAULT_COST`].
    pub relay_cost: Option<u64>,
    /// Options this crate does not understand, including GREASE.
    pub unknown: Vec<KeyValuePair>,
}

/// SETUP: the first message on each control stream; its type 0x2F00 is also the control
/// stream's type (draft-19 §3.3, §10.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Setup {
    /// The options.
    pub options: SetupOptions,
}

/// Who sends a set of setup options: draft-14 gives AUTHORITY and MOQT_IMPLEMENTATION the
/// same number, told apart by the sender (the server never sends AUTHORITY, §9.3.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetupRole {
    /// SETUP, sent by either side (draft-17 on).
    Either,
    /// CLIENT_SETUP.
    Client,
    /// SERVER_SETUP.
    Server,
}

/// The setup parameter MAX_REQUEST_ID (drafts 14-16 §9.3.2.3).
const MAX_REQUEST_ID: u64 = 0x02;

impl SetupOptions {
    /// The options given by `pairs` under `v`, and MAX_REQUEST_ID where the version has it
    /// (shared by SETUP, CLIENT_SETUP and SERVER_SETUP).
    pub(crate) fn from_pairs(
        pairs: Vec<KeyValuePair>,
        role: SetupRole,
        v: Version,
    ) -> Result<(SetupOptions, Option<u64>), DecodeError> {
        let mut o = SetupOptions::default();
        let mut max_request_id = None;
        let mut seen = Vec::new();
        for kvp in pairs {
            // The option each key means in `v`.
            let key = match kvp.key {
                // draft-14 §9.3.2.6 gives MOQT_IMPLEMENTATION AUTHORITY's number 0x05: from the
                // server (which MUST NOT send AUTHORITY) it is the implementation.
                setup_option::AUTHORITY
                    if v.implementation_option_is_0x05() && role == SetupRole::Server =>
                {
                    setup_option::MOQT_IMPLEMENTATION
                }
                k => k,
            };
            let known = match key {
                MAX_REQUEST_ID => v.has_max_request_id(),
                setup_option::MAX_FILTER_RANGES => v.has_range_filters(),
                setup_option::MAX_REQUEST_UPDATES => v.has_max_request_updates(),
                // Before draft-17 the cluster options are unknown ones (kept, ignored).
                setup_option::HOP_ID | setup_option::RELAY_COST => v.has_cluster_extension(),
                setup_option::PATH
                | setup_option::AUTHORIZATION_TOKEN
                | setup_option::MAX_AUTH_TOKEN_CACHE_SIZE
                | setup_option::AUTHORITY
                | setup_option::MOQT_IMPLEMENTATION => true,
                _ => false,
            };
            if !known {
                // draft-19 §10.3 (draft-14 §9.3): unknown Setup Options MUST be ignored,
                // duplicates allowed.
                o.unknown.push(kvp);
                continue;
            }
            if key != setup_option::AUTHORIZATION_TOKEN {
                if seen.contains(&key) {
                    return Err(DecodeError::DuplicateParameter(kvp.key));
                }
                seen.push(key);
            }
            match (key, kvp.value) {
                (setup_option::PATH, KvpValue::Bytes(b)) => o.path = Some(b),
                (setup_option::AUTHORITY, KvpValue::Bytes(b)) => o.authority = Some(b),
                (setup_option::AUTHORIZATION_TOKEN, KvpValue::Bytes(b)) => o
                    .authorization_tokens
                    .push(AuthToken::decode_all(&mut b.clone(), v)?),
                (setup_option::MAX_AUTH_TOKEN_CACHE_SIZE, KvpValue::Int(x)) => {
                    o.max_auth_token_cache_size = Some(x)
                }
                (setup_option::MAX_FILTER_RANGES, KvpValue::Int(x)) => {
                    o.max_filter_ranges = Some(x)
                }
                (setup_option::MOQT_IMPLEMENTATION, KvpValue::Bytes(b)) => {
                    // No longer than on the wire, so the SETUP still fits when re-encoded.
                    o.implementation = Some(lossy_text(&b, b.len()))
                }
                (setup_option::MAX_REQUEST_UPDATES, KvpValue::Int(x)) => {
                    o.max_request_updates = Some(x)
                }
                (setup_option::HOP_ID, KvpValue::Int(x)) => o.hop_id = Some(x),
                (setup_option::RELAY_COST, KvpValue::Int(x)) => o.relay_cost = Some(x),
                (MAX_REQUEST_ID, KvpValue::Int(x)) => max_request_id = Some(x),
                // Parity fixes the shape, so a known key cannot carry the other shape.
                _ => return Err(DecodeError::KeyValueFormatting("setup option")),
            }
        }
        Ok((o, max_request_id))
    }

    /// The pairs for these options (and MAX_REQUEST_ID) under `v`, sorted by type.
    pub(crate) fn to_pairs(
        &self,
        max_request_id: Option<u64>,
        role: SetupRole,
        v: Version,
    ) -> Result<Vec<KeyValuePair>, EncodeError> {
        let o = self;
        let mut pairs = Vec::new();
        if let Some(p) = &o.path {
            pairs.push(KeyValuePair::bytes(setup_option::PATH, p.clone())?);
        }
        if let Some(x) = max_request_id {
            if !v.has_max_request_id() {
                return Err(EncodeError::NotInVersion(
                    "MAX_REQUEST_ID setup parameter",
                    v,
                ));
            }
            pairs.push(KeyValuePair::int(MAX_REQUEST_ID, x)?);
        }
        for t in &o.authorization_tokens {
            pairs.push(KeyValuePair::bytes(
                setup_option::AUTHORIZATION_TOKEN,
                t.to_bytes(v)?,
            )?);
        }
        if let Some(x) = o.max_auth_token_cache_size {
            pairs.push(KeyValuePair::int(
                setup_option::MAX_AUTH_TOKEN_CACHE_SIZE,
                x,
            )?);
        }
        if let Some(a) = &o.authority {
            if v.implementation_option_is_0x05() && role == SetupRole::Server {
                return Err(EncodeError::Invalid {
                    field: "AUTHORITY",
                    reason: "a draft-14 SERVER_SETUP's 0x05 is MOQT_IMPLEMENTATION (and the \
                             server MUST NOT send AUTHORITY)",
                });
            }
            pairs.push(KeyValuePair::bytes(setup_option::AUTHORITY, a.clone())?);
        }
        if let Some(x) = o.max_filter_ranges {
            if !v.has_range_filters() {
                return Err(EncodeError::NotInVersion("MAX_FILTER_RANGES", v));
            }
            pairs.push(KeyValuePair::int(setup_option::MAX_FILTER_RANGES, x)?);
        }
        if let Some(i) = &o.implementation {
            // Draft-14 too gets 0x07, the number from draft-15 on: its own 0x05 is AUTHORITY's
            // (notes B.0), deployed draft-14 peers (aiomoqt) send 0x07, and a strict draft-14
            // peer ignores it as an unknown setup parameter.
            pairs.push(KeyValuePair::bytes(
                setup_option::MOQT_IMPLEMENTATION,
                Bytes::copy_from_slice(i.as_bytes()),
            )?);
        }
        if let Some(x) = o.max_request_updates {
            if !v.has_max_request_updates() {
                return Err(EncodeError::NotInVersion("MAX_REQUEST_UPDATES", v));
            }
            pairs.push(KeyValuePair::int(setup_option::MAX_REQUEST_UPDATES, x)?);
        }
        for (x, key, name) in [
            (o.hop_id, setup_option::HOP_ID, "HOP_ID"),
            (o.relay_cost, setup_option::RELAY_COST, "RELAY_COST"),
        ] {
            if let Some(x) = x {
                if !v.has_cluster_extension() {
                    return Err(EncodeError::NotInVersion(name, v));
                }
                pairs.push(KeyValuePair::int(key, x)?);
            }
        }
        pairs.extend(o.unknown.iter().cloned());
        pairs.sort_by_key(|p| p.key);
        check_ints_fit(&pairs, v)?;
        Ok(pairs)
    }
}

impl ControlMessage for Setup {
    const TYPE: u64 = 0x2F00;
    const NAME: &'static str = "SETUP";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        let (options, _) = SetupOptions::from_pairs(decode_kvps(buf, v)?, SetupRole::Either, v)?;
        Ok(Setup { options })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        let pairs = self.options.to_pairs(None, SetupRole::Either, v)?;
        encode_kvps(&pairs, buf, v)
    }
}

/// The largest New Session URI / Connect URI, in bytes (draft-19 §10.4).
pub const MAX_URI_LEN: usize = 8192;

/// GOAWAY: the sender will close the session (on the control stream) or migrate one request (on
/// a request stream) (draft-19 §10.4).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Goaway {
    /// Where to reconnect; empty means the current URI. A client's must be empty.
    pub new_session_uri: Bytes,
    /// How long, in ms, the sender waits before closing; 0 means no specific timeout.
    pub timeout_ms: u64,
    /// draft-18 only, on the control stream: the smallest peer Request ID that was not or
    /// might not have been processed.
    pub request_id: Option<u64>,
}

impl ControlMessage for Goaway {
    const TYPE: u64 = 0x10;
    const NAME: &'static str = "GOAWAY";

    fn decode_body(buf: &mut Bytes, v: Version) -> Result<Self, DecodeError> {
        // draft-19 §10.4 (draft-14 §9.4): a URI longer than 8192 bytes is a PROTOCOL_VIOLATION.
        let new_session_uri = buf.get_len_prefixed(v, "new session URI", MAX_URI_LEN as u64)?;
        // Until draft-16 the URI is all (draft-16 §9.4): no Timeout, no Request ID.
        if !v.goaway_has_timeout() {
            body_done(buf, Self::NAME)?;
            return Ok(Goaway {
                new_session_uri,
                timeout_ms: 0,
                request_id: None,
            });
        }
        let timeout_ms = buf.get_varint(v)?;
        let request_id = if v.goaway_has_request_id() && buf.has_remaining() {
            Some(buf.get_varint(v)?)
        } else {
            None
        };
        body_done(buf, Self::NAME)?;
        Ok(Goaway {
            new_session_uri,
            timeout_ms,
            request_id,
        })
    }

    fn encode_body(&self, buf: &mut Vec<u8>, v: Version) -> Result<(), EncodeError> {
        buf.put_len_prefixed(&self.new_session_uri, v, "new session URI", MAX_URI_LEN)?;
        if !v.goaway_has_timeout() {
            // Until draft-16 there is no Timeout: an advisory value that is not sent (the peer
            // then behaves as for 0, "no specific timeout").
            if self.request_id.is_some() {
                return Err(EncodeError::NotInVersion("GOAWAY Request ID", v));
            }
            return Ok(());
        }
        buf.put_varint(self.timeout_ms, v);
        match self.request_id {
            Some(id) if v.goaway_has_request_id() => buf.put_varint(id, v),
            Some(_) => return Err(EncodeError::NotInVersion("GOAWAY Request ID", v)),
            None => {}
        }
        Ok(())
    }
}
