//! The Authorization Token structure (draft-19 §10.2.2).

use bytes::{Buf, BufMut, Bytes};

use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};
use crate::types::location::put_int;

/// An authorization token, with its alias handling (draft-19 §10.2.2).
///
/// ```
/// use moq_core::AuthToken;
/// let t = AuthToken::UseValue { token_type: 0, value: "secret".into() };
/// assert_eq!(t.value().map(|v| &v[..]), Some(&b"secret"[..]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AuthToken {
    /// Retire a registered alias (Alias Type 0x0).
    Delete {
        /// The alias.
        alias: u64,
    },
    /// Register `alias` for this token and use it (Alias Type 0x1).
    Register {
        /// The alias.
        alias: u64,
        /// The Token Type.
        token_type: u64,
        /// The Token Value.
        value: Bytes,
    },
    /// Use a previously registered alias (Alias Type 0x2).
    UseAlias {
        /// The alias.
        alias: u64,
    },
    /// Use this token without an alias (Alias Type 0x3).
    UseValue {
        /// The Token Type.
        token_type: u64,
        /// The Token Value.
        value: Bytes,
    },
}

impl AuthToken {
    /// A plain token of type 0 (out-of-band defined), the common case.
    pub fn new(value: impl Into<Bytes>) -> Self {
        AuthToken::UseValue {
            token_type: 0,
            value: value.into(),
        }
    }

    /// The token value, where the structure carries one.
    pub fn value(&self) -> Option<&Bytes> {
        match self {
            AuthToken::Register { value, .. } | AuthToken::UseValue { value, .. } => Some(value),
            _ => None,
        }
    }

    /// The alias, where the structure carries one.
    pub fn alias(&self) -> Option<u64> {
        match self {
            AuthToken::Delete { alias }
            | AuthToken::Register { alias, .. }
            | AuthToken::UseAlias { alias } => Some(*alias),
            AuthToken::UseValue { .. } => None,
        }
    }

    /// Reads a token filling all of `buf`. Anything that cannot be decoded is a
    /// KEY_VALUE_FORMATTING_ERROR (draft-19 §10.2.2).
    pub fn decode_all<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        let bad = |_| DecodeError::KeyValueFormatting("authorization token");
        let alias_type = buf.get_varint(v).map_err(bad)?;
        let token = match alias_type {
            0 => AuthToken::Delete {
                alias: buf.get_varint(v).map_err(bad)?,
            },
            1 => AuthToken::Register {
                alias: buf.get_varint(v).map_err(bad)?,
                token_type: buf.get_varint(v).map_err(bad)?,
                value: buf.get_rest(),
            },
            2 => AuthToken::UseAlias {
                alias: buf.get_varint(v).map_err(bad)?,
            },
            3 => AuthToken::UseValue {
                token_type: buf.get_varint(v).map_err(bad)?,
                value: buf.get_rest(),
            },
            _ => {
                return Err(DecodeError::KeyValueFormatting(
                    "authorization token: unknown alias type",
                ));
            }
        };
        if buf.has_remaining() {
            return Err(DecodeError::KeyValueFormatting(
                "authorization token: trailing bytes",
            ));
        }
        Ok(token)
    }

    /// Writes the token structure (no length prefix). An alias or type of 2^62 or more fails
    /// under drafts 14-16 (QUIC varints).
    pub fn encode_all<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        match self {
            AuthToken::Delete { alias } => {
                buf.put_varint(0, v);
                put_int(buf, *alias, v)?;
            }
            AuthToken::Register {
                alias,
                token_type,
                value,
            } => {
                buf.put_varint(1, v);
                put_int(buf, *alias, v)?;
                put_int(buf, *token_type, v)?;
                buf.put_slice(value);
            }
            AuthToken::UseAlias { alias } => {
                buf.put_varint(2, v);
                put_int(buf, *alias, v)?;
            }
            AuthToken::UseValue { token_type, value } => {
                buf.put_varint(3, v);
                put_int(buf, *token_type, v)?;
                buf.put_slice(value);
            }
        }
        Ok(())
    }

    /// The token as bytes (no length prefix).
    pub fn to_bytes(&self, v: Version) -> Result<Bytes, EncodeError> {
        let mut buf = Vec::new();
        self.encode_all(&mut buf, v)?;
        Ok(buf.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version::Draft19;

    #[test]
    fn round_trip_all_alias_types() {
        for t in [
            AuthToken::Delete { alias: 5 },
            AuthToken::Register {
                alias: 1,
                token_type: 0,
                value: Bytes::from_static(b"jwt"),
            },
            AuthToken::UseAlias { alias: 300 },
            AuthToken::UseValue {
                token_type: 0x9D,
                value: Bytes::new(),
            },
        ] {
            let b = t.to_bytes(V).unwrap();
            assert_eq!(AuthToken::decode_all(&mut b.clone(), V).unwrap(), t);
        }
    }

    #[test]
    fn malformed_is_kvp_formatting() {
        for bad in [
            &[0x04u8][..],
            &[0x00][..],
            &[0x00, 0x01, 0x02][..],
            &[0x01, 0x01][..],
        ] {
            assert!(matches!(
                AuthToken::decode_all(&mut &bad[..], V),
                Err(DecodeError::KeyValueFormatting(_))
            ));
        }
    }
}
