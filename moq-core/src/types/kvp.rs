//! Key-Value-Pairs (draft-19 §1.4.3; draft-14 and draft-16 §1.4.2) and the Properties built
//! from them (§2.5, §12), which drafts 14-16 call Extension Headers.

use bytes::{Buf, BufMut, Bytes};

use crate::Version;
use crate::coding::{BufExt, BufMutExt, DecodeError, EncodeError};

/// The largest value of an odd-typed (bytes) pair (draft-19 §1.4.3).
pub const MAX_KVP_VALUE_LEN: usize = u16::MAX as usize;

/// The value of a Key-Value-Pair: even types carry an integer, odd types carry bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum KvpValue {
    /// The value of an even type.
    Int(u64),
    /// The value of an odd type.
    Bytes(Bytes),
}

/// One Key-Value-Pair. The key's parity decides the value's shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KeyValuePair {
    /// The type.
    pub key: u64,
    /// The value.
    pub value: KvpValue,
}

impl KeyValuePair {
    /// An even-typed pair. Fails if `key` is odd.
    pub fn int(key: u64, value: u64) -> Result<Self, EncodeError> {
        if key % 2 == 1 {
            return Err(EncodeError::Invalid {
                field: "key-value pair",
                reason: "odd type carries bytes, not an integer",
            });
        }
        Ok(KeyValuePair {
            key,
            value: KvpValue::Int(value),
        })
    }

    /// An odd-typed pair. Fails if `key` is even or the value is longer than 65535 bytes.
    pub fn bytes(key: u64, value: impl Into<Bytes>) -> Result<Self, EncodeError> {
        let value = value.into();
        if key % 2 == 0 {
            return Err(EncodeError::Invalid {
                field: "key-value pair",
                reason: "even type carries an integer, not bytes",
            });
        }
        if value.len() > MAX_KVP_VALUE_LEN {
            return Err(EncodeError::TooLong {
                field: "key-value pair value",
                len: value.len(),
                max: MAX_KVP_VALUE_LEN,
            });
        }
        Ok(KeyValuePair {
            key,
            value: KvpValue::Bytes(value),
        })
    }

    fn check(&self) -> Result<(), EncodeError> {
        match &self.value {
            KvpValue::Int(v) => Self::int(self.key, *v).map(drop),
            KvpValue::Bytes(b) => Self::bytes(self.key, b.clone()).map(drop),
        }
    }
}

/// Reads Key-Value-Pairs until `buf` is empty. `buf` must hold exactly the pairs (the caller has
/// bounded it by a length), so a pair cut short is a formatting error, never "need more".
pub(crate) fn decode_kvps<B: Buf>(
    buf: &mut B,
    v: Version,
) -> Result<Vec<KeyValuePair>, DecodeError> {
    let mut out = Vec::new();
    let mut key = 0u64;
    let truncated = |e: DecodeError| match e {
        DecodeError::Short => DecodeError::KeyValueFormatting("truncated key-value pair"),
        e => e,
    };
    while buf.has_remaining() {
        let ty = buf.get_varint(v).map_err(truncated)?;
        key = if v.kvp_delta_types() {
            // draft-19 §1.4.3: a Delta Type past 2^64-1 is a PROTOCOL_VIOLATION.
            key.checked_add(ty).ok_or(DecodeError::TypeOverflow)?
        } else {
            // draft-14 §1.4.2: each pair carries its own type.
            ty
        };
        let value = if key % 2 == 0 {
            KvpValue::Int(buf.get_varint(v).map_err(truncated)?)
        } else {
            // draft-19 §1.4.3: a Length over 2^16-1 is a PROTOCOL_VIOLATION.
            KvpValue::Bytes(
                buf.get_len_prefixed(v, "key-value pair value", MAX_KVP_VALUE_LEN as u64)
                    .map_err(truncated)?,
            )
        };
        out.push(KeyValuePair { key, value });
    }
    Ok(out)
}

/// Writes Key-Value-Pairs, which must already be sorted by key. Until draft-16 a type or an
/// integer value over 2^62-1 does not fit a QUIC varint and fails.
pub(crate) fn encode_kvps<'a, B: BufMut>(
    pairs: impl IntoIterator<Item = &'a KeyValuePair>,
    buf: &mut B,
    v: Version,
) -> Result<(), EncodeError> {
    let mut prev = 0u64;
    for p in pairs {
        p.check()?;
        if v.quic_varints() {
            let too_big = |x: u64| x > crate::coding::QuicVarInt::MAX;
            if too_big(p.key) || matches!(p.value, KvpValue::Int(x) if too_big(x)) {
                return Err(EncodeError::Invalid {
                    field: "key-value pair",
                    reason: "larger than 2^62-1, the largest QUIC varint (until draft-16)",
                });
            }
        }
        let delta = p.key.checked_sub(prev).ok_or(EncodeError::Invalid {
            field: "key-value pairs",
            reason: "not sorted by type",
        })?;
        buf.put_varint(if v.kvp_delta_types() { delta } else { p.key }, v);
        match &p.value {
            KvpValue::Int(x) => buf.put_varint(*x, v),
            KvpValue::Bytes(b) => {
                buf.put_len_prefixed(b, v, "key-value pair value", MAX_KVP_VALUE_LEN)?
            }
        }
        prev = p.key;
    }
    Ok(())
}

/// Well-known Property types (draft-19 §12, §15.8; Extension Header types in drafts 14-16,
/// draft-14 §11, draft-16 §11, with the same numbers).
pub mod property {
    /// OBJECT_DELIVERY_TIMEOUT, ms (Track, Object); DELIVERY_TIMEOUT (Track) in draft-16.
    pub const OBJECT_DELIVERY_TIMEOUT: u64 = 0x02;
    /// MAX_CACHE_DURATION, ms (Track).
    pub const MAX_CACHE_DURATION: u64 = 0x04;
    /// SUBGROUP_DELIVERY_TIMEOUT, ms (Track, Object).
    pub const SUBGROUP_DELIVERY_TIMEOUT: u64 = 0x06;
    /// IMMUTABLE_PROPERTIES, nested pairs (Track, Object); IMMUTABLE_EXTENSIONS in
    /// drafts 14-16.
    pub const IMMUTABLE_PROPERTIES: u64 = 0x0B;
    /// DEFAULT_PUBLISHER_PRIORITY, 0-255 (Track).
    pub const DEFAULT_PUBLISHER_PRIORITY: u64 = 0x0E;
    /// DEFAULT_PUBLISHER_GROUP_ORDER, 1 or 2 (Track).
    pub const DEFAULT_PUBLISHER_GROUP_ORDER: u64 = 0x22;
    /// DYNAMIC_GROUPS, 0 or 1 (Track).
    pub const DYNAMIC_GROUPS: u64 = 0x30;
    /// PRIOR_GROUP_ID_GAP (Object).
    pub const PRIOR_GROUP_ID_GAP: u64 = 0x3C;
    /// PRIOR_OBJECT_ID_GAP (Object).
    pub const PRIOR_OBJECT_ID_GAP: u64 = 0x3E;

    /// True for the Mandatory Track Property range 0x4000-0x7FFF (draft-19 §2.5.1).
    pub const fn is_mandatory(key: u64) -> bool {
        key >= 0x4000 && key <= 0x7FFF
    }
}

/// A set of Track or Object Properties (draft-19 §2.5): Key-Value-Pairs kept sorted by type.
/// Drafts 14-16 call them Extension Headers (Track Extensions from draft-16).
///
/// Unknown properties are kept as they are so a relay can forward and cache them unchanged.
/// Lookups search both the mutable list and the contents of IMMUTABLE_PROPERTIES (§12.6).
///
/// One value serves every version. The nested pairs of IMMUTABLE_PROPERTIES are held in the
/// newest draft's encoding whatever version they were read in, and are re-encoded for the
/// version written (drafts 14-16 use QUIC varints, 14-15 absolute types): a relay can pass
/// them between versions without knowing either. Properties read from the wire remember the
/// version they were read in, whose rules [`Properties::validate_object`] and
/// [`Properties::validate_track`] apply (properties built here follow the newest draft's);
/// equality ignores that origin.
///
/// ```
/// use moq_core::{Properties, property};
/// let props = Properties::new()
///     .with_int(property::DEFAULT_PUBLISHER_PRIORITY, 7).unwrap()
///     .with_bytes(0x79, &b"app"[..]).unwrap();
/// assert_eq!(props.get_int(property::DEFAULT_PUBLISHER_PRIORITY), Some(7));
/// ```
#[derive(Clone, Debug, Default)]
pub struct Properties {
    /// The pairs, sorted by type (stably: repeated types keep their order).
    pairs: Vec<KeyValuePair>,
    /// The version these were read in; `None` if built locally.
    origin: Option<Version>,
    /// The IMMUTABLE_PROPERTIES value did not parse in the encoding of `origin`: it is kept
    /// as received, written back unchanged, and makes the properties malformed.
    raw_immutable: bool,
}

impl PartialEq for Properties {
    fn eq(&self, other: &Self) -> bool {
        self.pairs == other.pairs && self.raw_immutable == other.raw_immutable
    }
}

impl Eq for Properties {}

impl std::hash::Hash for Properties {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.pairs.hash(state);
        self.raw_immutable.hash(state);
    }
}

/// How a version writes Key-Value-Pairs: (QUIC varints, delta types).
const fn kvp_form(v: Version) -> (bool, bool) {
    (v.quic_varints(), v.kvp_delta_types())
}

/// The encoding IMMUTABLE_PROPERTIES' nested pairs are held in.
const CANONICAL: Version = Version::PREFERRED;

/// Re-encodes nested pairs read in `from` for `to`, sorted by type; `None` if they do not
/// parse in `from` or cannot be written in `to`.
fn transcode(raw: &Bytes, from: Version, to: Version) -> Option<Bytes> {
    let mut inner = decode_kvps(&mut raw.clone(), from).ok()?;
    inner.sort_by_key(|p| p.key);
    let mut out = Vec::new();
    encode_kvps(&inner, &mut out, to).ok()?;
    (out.len() <= MAX_KVP_VALUE_LEN).then(|| out.into())
}

impl Properties {
    /// No properties.
    pub const fn new() -> Self {
        Properties {
            pairs: Vec::new(),
            origin: None,
            raw_immutable: false,
        }
    }

    /// The version whose rules apply: the one read in, or the newest for local ones.
    fn rules(&self) -> Version {
        self.origin.unwrap_or(CANONICAL)
    }

    /// From pairs in any order (sorted stably by type).
    pub fn from_pairs(pairs: impl IntoIterator<Item = KeyValuePair>) -> Result<Self, EncodeError> {
        let mut v: Vec<KeyValuePair> = pairs.into_iter().collect();
        for p in &v {
            p.check()?;
        }
        v.sort_by_key(|p| p.key);
        Ok(Properties {
            pairs: v,
            ..Properties::new()
        })
    }

    /// Adds an even-typed property.
    pub fn with_int(self, key: u64, value: u64) -> Result<Self, EncodeError> {
        self.with(KeyValuePair::int(key, value)?)
    }

    /// Adds an odd-typed property.
    pub fn with_bytes(self, key: u64, value: impl Into<Bytes>) -> Result<Self, EncodeError> {
        self.with(KeyValuePair::bytes(key, value)?)
    }

    /// Adds a pair after any others of the same type.
    pub fn with(mut self, pair: KeyValuePair) -> Result<Self, EncodeError> {
        pair.check()?;
        let at = self.pairs.partition_point(|p| p.key <= pair.key);
        self.pairs.insert(at, pair);
        Ok(self)
    }

    /// Removes every property of type `key`.
    pub fn remove(&mut self, key: u64) {
        self.pairs.retain(|p| p.key != key);
        if key == property::IMMUTABLE_PROPERTIES {
            self.raw_immutable = false;
        }
    }

    /// The pairs, sorted by type.
    pub fn pairs(&self) -> &[KeyValuePair] {
        &self.pairs
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The first integer value of type `key`, searching immutable properties too.
    pub fn get_int(&self, key: u64) -> Option<u64> {
        self.find(key).find_map(|p| match p.value {
            KvpValue::Int(v) => Some(v),
            KvpValue::Bytes(_) => None,
        })
    }

    /// DEFAULT_PUBLISHER_PRIORITY, or 128 when absent (draft-19 §12.2).
    pub fn publisher_priority(&self) -> u8 {
        self.get_int(property::DEFAULT_PUBLISHER_PRIORITY)
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(128)
    }

    /// DEFAULT_PUBLISHER_GROUP_ORDER, or Ascending when absent (draft-19 §12.2).
    pub fn publisher_group_order(&self) -> crate::GroupOrder {
        match self.get_int(property::DEFAULT_PUBLISHER_GROUP_ORDER) {
            Some(2) => crate::GroupOrder::Descending,
            _ => crate::GroupOrder::Ascending,
        }
    }

    /// The first bytes value of type `key`, searching immutable properties too.
    pub fn get_bytes(&self, key: u64) -> Option<Bytes> {
        self.find(key).find_map(|p| match p.value {
            KvpValue::Bytes(b) => Some(b),
            KvpValue::Int(_) => None,
        })
    }

    /// Every pair of type `key`: the mutable ones, then those inside IMMUTABLE_PROPERTIES.
    pub fn find(&self, key: u64) -> impl Iterator<Item = KeyValuePair> + '_ {
        let direct = self.pairs.iter().filter(move |p| p.key == key).cloned();
        let nested = self
            .immutable()
            .into_iter()
            .flatten()
            .filter(move |p| p.key == key);
        direct.chain(nested)
    }

    /// The pairs inside IMMUTABLE_PROPERTIES, if present and well-formed.
    pub fn immutable(&self) -> Option<Vec<KeyValuePair>> {
        if self.raw_immutable {
            return None;
        }
        let raw = self.immutable_raw()?;
        decode_kvps(&mut raw.clone(), CANONICAL).ok()
    }

    /// The value of the first IMMUTABLE_PROPERTIES pair.
    fn immutable_raw(&self) -> Option<Bytes> {
        self.pairs.iter().find_map(|p| match (&p.value, p.key) {
            (KvpValue::Bytes(b), property::IMMUTABLE_PROPERTIES) => Some(b.clone()),
            _ => None,
        })
    }

    /// Reads properties filling all of `buf`.
    ///
    /// Until draft-15 a pair's type is absolute and the pairs may come in any order: they are
    /// sorted by type (stably). The pairs nested in IMMUTABLE_PROPERTIES are re-encoded in the
    /// newest draft's encoding (see [`Properties`]); if they do not parse, they are kept as
    /// they came and the properties are malformed ([`Properties::validate_object`]).
    pub fn decode_all<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        let mut pairs = decode_kvps(buf, v)?;
        if !v.kvp_delta_types() {
            // draft-14 §1.4.2: each pair carries its type; no order is required.
            pairs.sort_by_key(|p| p.key);
        }
        let mut raw_immutable = false;
        if kvp_form(v) != kvp_form(CANONICAL) {
            for p in &mut pairs {
                if let (property::IMMUTABLE_PROPERTIES, KvpValue::Bytes(raw)) = (p.key, &p.value) {
                    match transcode(raw, v, CANONICAL) {
                        Some(nested) => p.value = KvpValue::Bytes(nested),
                        None => raw_immutable = true,
                    }
                }
            }
        }
        Ok(Properties {
            pairs,
            origin: Some(v),
            raw_immutable,
        })
    }

    /// Writes the pairs (without any length prefix), the nested pairs of
    /// IMMUTABLE_PROPERTIES in `v`'s encoding. Until draft-16 a type or an integer over
    /// 2^62-1 cannot be written.
    pub fn encode_all<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        if self.raw_immutable
            || kvp_form(v) == kvp_form(CANONICAL)
            || self.immutable_raw().is_none()
        {
            return encode_kvps(&self.pairs, buf, v);
        }
        let pairs: Vec<KeyValuePair> = self
            .pairs
            .iter()
            .map(|p| match (p.key, &p.value) {
                (property::IMMUTABLE_PROPERTIES, KvpValue::Bytes(raw)) => {
                    // Nested pairs that do not parse (built so by hand) go out as they are.
                    let value = match decode_kvps(&mut raw.clone(), CANONICAL) {
                        Err(_) => raw.clone(),
                        Ok(inner) => {
                            let mut out = Vec::new();
                            encode_kvps(&inner, &mut out, v)?;
                            out.into()
                        }
                    };
                    KeyValuePair::bytes(p.key, value)
                }
                _ => Ok(p.clone()),
            })
            .collect::<Result<_, _>>()?;
        encode_kvps(&pairs, buf, v)
    }

    /// Number of bytes [`Properties::encode_all`] writes.
    pub fn encoded_len(&self, v: Version) -> usize {
        let mut buf = Vec::new();
        // Pairs were checked on insertion, so encoding cannot fail.
        let _ = self.encode_all(&mut buf, v);
        buf.len()
    }

    /// Reads Object Properties: `Properties Length (vi64)` then that many bytes of pairs.
    pub fn decode_prefixed<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        let len = buf.get_len(v)?;
        let mut body = buf.get_exact(len)?;
        Self::decode_all(&mut body, v)
    }

    /// Writes Object Properties with their length prefix.
    pub fn encode_prefixed<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        let mut tmp = Vec::new();
        self.encode_all(&mut tmp, v)?;
        buf.put_varint(tmp.len() as u64, v);
        buf.put_slice(&tmp);
        Ok(())
    }

    /// Checks the rules for Track Properties of draft-19 §12 (draft-16 §11 for Track
    /// Extensions): value ranges of the known properties (a violation is PROTOCOL_VIOLATION)
    /// and well-formed immutable properties. Properties read under draft-16 also may not have
    /// a DELIVERY_TIMEOUT of 0 (draft-16 §11: MUST close the session with a
    /// PROTOCOL_VIOLATION). Drafts 14-15 have no Track Extensions.
    pub fn validate_track(&self) -> Result<(), DecodeError> {
        let rules = self.rules();
        for p in self.pairs.iter().chain(self.immutable().iter().flatten()) {
            match (p.key, &p.value) {
                (property::DEFAULT_PUBLISHER_PRIORITY, KvpValue::Int(v)) if *v > 255 => {
                    return Err(DecodeError::InvalidValue {
                        field: "DEFAULT_PUBLISHER_PRIORITY",
                        value: *v,
                    });
                }
                (property::DEFAULT_PUBLISHER_GROUP_ORDER, KvpValue::Int(v))
                    if !(1..=2).contains(v) =>
                {
                    return Err(DecodeError::InvalidValue {
                        field: "DEFAULT_PUBLISHER_GROUP_ORDER",
                        value: *v,
                    });
                }
                (property::DYNAMIC_GROUPS, KvpValue::Int(v)) if *v > 1 => {
                    return Err(DecodeError::InvalidValue {
                        field: "DYNAMIC_GROUPS",
                        value: *v,
                    });
                }
                (property::OBJECT_DELIVERY_TIMEOUT, KvpValue::Int(0))
                    if rules.zero_delivery_timeout_invalid() =>
                {
                    return Err(DecodeError::InvalidValue {
                        field: "DELIVERY_TIMEOUT",
                        value: 0,
                    });
                }
                _ => {}
            }
        }
        self.validate_immutable()
    }

    /// Checks Object Properties: no Mandatory Track Property (draft-19 §2.5.1; from draft-18,
    /// before which 0x4000-0x7FFF are ordinary types), at most one of each prior gap
    /// (draft-19 §12.8-§12.9, draft-14 §11.1 and §11.3), and immutable properties that parse
    /// and do not nest (draft-19 §12.6, draft-14 §11.2). A violation means the track is
    /// malformed.
    pub fn validate_object(&self) -> Result<(), DecodeError> {
        if self.rules().has_mandatory_track_properties()
            && self.pairs.iter().any(|p| property::is_mandatory(p.key))
        {
            return Err(DecodeError::ProtocolViolation(
                "mandatory track property on an object",
            ));
        }
        let gaps = |key| self.pairs.iter().filter(|p| p.key == key).count();
        if gaps(property::PRIOR_GROUP_ID_GAP) > 1 || gaps(property::PRIOR_OBJECT_ID_GAP) > 1 {
            return Err(DecodeError::ProtocolViolation(
                "prior gap property repeated",
            ));
        }
        self.validate_immutable()
    }

    fn validate_immutable(&self) -> Result<(), DecodeError> {
        let mut imm = self
            .pairs
            .iter()
            .filter(|p| p.key == property::IMMUTABLE_PROPERTIES);
        let Some(first) = imm.next() else {
            return Ok(());
        };
        if imm.next().is_some() {
            return Err(DecodeError::ProtocolViolation(
                "IMMUTABLE_PROPERTIES repeated",
            ));
        }
        // draft-14 §11.2: "A Key-Value-Pair cannot be parsed" makes the track malformed.
        if self.raw_immutable {
            return Err(DecodeError::KeyValueFormatting(
                "IMMUTABLE_PROPERTIES do not parse",
            ));
        }
        let KvpValue::Bytes(raw) = &first.value else {
            return Ok(());
        };
        let inner = decode_kvps(&mut raw.clone(), CANONICAL)?;
        if inner
            .iter()
            .any(|p| p.key == property::IMMUTABLE_PROPERTIES)
        {
            return Err(DecodeError::ProtocolViolation(
                "nested IMMUTABLE_PROPERTIES",
            ));
        }
        Ok(())
    }

    /// The first Mandatory Track Property type not in `understood`, if any (draft-19 §2.5.1).
    /// Properties read before draft-18 have none: the range is ordinary there.
    pub fn unknown_mandatory(&self, understood: &[u64]) -> Option<u64> {
        if !self.rules().has_mandatory_track_properties() {
            return None;
        }
        self.pairs
            .iter()
            .map(|p| p.key)
            .find(|k| property::is_mandatory(*k) && !understood.contains(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version::Draft19;

    /// The second example of draft-19 §11.6: two properties, 33 bytes in all.
    #[test]
    fn draft_example_properties() {
        let props = Properties::new()
            .with_int(4, 2_186_796_243)
            .unwrap()
            .with_bytes(77, &b"traceID:123456"[..])
            .unwrap();
        let mut buf = Vec::new();
        props.encode_all(&mut buf, V).unwrap();
        // type 4 (delta 4), 5-byte varint; delta 73, length 14, 14 bytes.
        assert_eq!(buf[0], 4);
        assert_eq!(buf[6], 73);
        assert_eq!(buf[7], 14);
        let back = Properties::decode_all(&mut &buf[..], V).unwrap();
        assert_eq!(back, props);
    }

    #[test]
    fn rejects_overflow_and_long_values() {
        // Delta that overflows: first key u64::MAX (even? no, odd) then delta 1.
        let mut buf = Vec::new();
        crate::coding::Vi64::encode(u64::MAX - 1, &mut buf);
        crate::coding::Vi64::encode(0, &mut buf);
        crate::coding::Vi64::encode(2, &mut buf);
        crate::coding::Vi64::encode(0, &mut buf);
        assert_eq!(
            Properties::decode_all(&mut &buf[..], V),
            Err(DecodeError::TypeOverflow)
        );
        let mut buf = vec![0x01];
        crate::coding::Vi64::encode(65536, &mut buf);
        assert!(matches!(
            Properties::decode_all(&mut &buf[..], V),
            Err(DecodeError::TooLong { .. })
        ));
        assert!(matches!(
            Properties::decode_all(&mut &[0x01u8, 0x05, 0x00][..], V),
            Err(DecodeError::KeyValueFormatting(_))
        ));
    }

    #[test]
    fn immutable_lookup_and_nesting() {
        let mut inner = Vec::new();
        encode_kvps(&[KeyValuePair::int(0x3C, 2).unwrap()], &mut inner, V).unwrap();
        let props = Properties::new()
            .with_bytes(property::IMMUTABLE_PROPERTIES, inner.clone())
            .unwrap();
        assert_eq!(props.get_int(0x3C), Some(2));
        assert!(props.validate_object().is_ok());
        let mut nested = Vec::new();
        encode_kvps(
            &[KeyValuePair::bytes(property::IMMUTABLE_PROPERTIES, inner).unwrap()],
            &mut nested,
            V,
        )
        .unwrap();
        let bad = Properties::new()
            .with_bytes(property::IMMUTABLE_PROPERTIES, nested)
            .unwrap();
        assert!(bad.validate_object().is_err());
        let mandatory = Properties::new().with_int(0x4000, 1).unwrap();
        assert!(mandatory.validate_object().is_err());
        assert_eq!(mandatory.unknown_mandatory(&[]), Some(0x4000));
    }
}
