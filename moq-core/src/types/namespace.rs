//! Track Namespace, Track Name and Full Track Name (draft-19 §2.4.1, §1.5).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use bytes::{Buf, BufMut, Bytes};

use super::fields::{self, Fields, Packer};
use crate::Version;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};

/// Why a namespace or track name is not valid.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameError {
    /// More than 32 fields.
    #[error("track namespace has {0} fields (at most 32)")]
    TooManyFields(usize),
    /// A field of zero length.
    #[error("track namespace field {0} is empty")]
    EmptyField(usize),
    /// Namespace or full track name longer than 4096 bytes.
    #[error("{what} is {len} bytes (at most 4096)")]
    TooLong {
        /// "track namespace" or "full track name".
        what: &'static str,
        /// The length.
        len: usize,
    },
    /// A rendered name (draft-19 §1.5) that does not parse.
    #[error("invalid rendered name: {0}")]
    InvalidRendering(&'static str),
    /// A name in the path form (`chat/room1`, see [`TrackNamespace`]) that does not parse.
    #[error("invalid name {text:?}: {reason}")]
    InvalidPath {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl From<NameError> for DecodeError {
    fn from(e: NameError) -> Self {
        match e {
            NameError::TooManyFields(n) => DecodeError::TooManyNamespaceFields(n as u64),
            NameError::EmptyField(i) => DecodeError::EmptyNamespaceField(i),
            NameError::TooLong { what, len } => DecodeError::NameTooLong { what, len },
            NameError::InvalidRendering(r) => DecodeError::ProtocolViolation(r),
            NameError::InvalidPath { reason, .. } => DecodeError::ProtocolViolation(reason),
        }
    }
}

/// An ordered tuple of 0 to 32 non-empty byte fields, at most 4096 bytes in all.
///
/// Comparison is field by field and byte-exact. A namespace is cheap to clone: its fields are
/// one reference-counted allocation.
///
/// # The path form
///
/// Where a person types or reads a namespace (`Display`, `FromStr`, command-line flags,
/// moq-relay's `?prefix=`, logs) it is a path: the fields joined by `/`, as in `chat/room1`.
/// Within a field, `/`, `%`, whitespace, control characters and bytes that are not UTF-8 are
/// written `%XX` (the byte in hex, as in URLs), so every namespace has one path that parses
/// back to it. Parsing accepts either case of hex and ignores leading and trailing `/`; an
/// empty field inside (`a//b`) is an error, and the empty string is the zero-field namespace.
/// The draft's rendered form (draft-19 §1.5, `chat-room1`) is [`TrackNamespace::rendered`]
/// and [`TrackNamespace::parse_rendered`].
///
/// ```
/// use moq_core::TrackNamespace;
/// let ns: TrackNamespace = "example.com/meeting=123".parse().unwrap();
/// assert_eq!(ns, TrackNamespace::from_strs(["example.com", "meeting=123"]).unwrap());
/// let prefix: TrackNamespace = "example.com".parse().unwrap();
/// assert!(prefix.is_prefix_of(&ns));
/// assert_eq!(ns.strip_prefix(&prefix).unwrap().to_string(), "meeting=123");
/// assert_eq!(ns.rendered().to_string(), "example.2ecom-meeting.3d123");
/// // A field with a slash, a space and a byte that is not UTF-8.
/// let odd = TrackNamespace::new([&b"a/b c"[..], &[0xff][..]]).unwrap();
/// assert_eq!(odd.to_string(), "a%2Fb%20c/%FF");
/// assert_eq!(odd.to_string().parse::<TrackNamespace>().unwrap(), odd);
/// ```
///
/// The fields are shared: a clone is a reference count, not a copy (a relay clones a namespace
/// into each index, route and discovery answer that holds it). They are kept in one
/// allocation (count, ends, bytes), copied out of the frame they were read from. Ordered field
/// by field (its `Ord` is beside [`Fields`]).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct TrackNamespace(Arc<[u8]>);

impl TrackNamespace {
    /// At most this many fields (draft-19 §2.4.1).
    pub const MAX_FIELDS: usize = 32;
    /// At most this many bytes across all fields, and in a Full Track Name.
    pub const MAX_LEN: usize = 4096;

    /// A namespace from its fields, checked against the draft's limits.
    pub fn new<I, F>(fields: I) -> Result<Self, NameError>
    where
        I: IntoIterator<Item = F>,
        F: AsRef<[u8]>,
    {
        let fields: Vec<F> = fields.into_iter().collect();
        Self::check(fields.iter().map(AsRef::as_ref))?;
        Ok(Self::pack(fields.iter().map(AsRef::as_ref)))
    }

    /// Packs fields already checked.
    fn pack<'a>(fields: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Self {
        let mut p = Packer::new(fields.len(), fields.clone().map(<[u8]>::len).sum());
        fields.for_each(|f| p.push(f));
        TrackNamespace(p.finish())
    }

    /// A namespace from UTF-8 fields.
    pub fn from_strs<I, S>(fields: I) -> Result<Self, NameError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::new(
            fields
                .into_iter()
                .map(|s| Bytes::copy_from_slice(s.as_ref().as_bytes())),
        )
    }

    /// The zero-field namespace; as a prefix it matches every namespace.
    pub fn empty() -> Self {
        TrackNamespace::default()
    }

    fn check<'a>(fields: impl ExactSizeIterator<Item = &'a [u8]> + Clone) -> Result<(), NameError> {
        // draft-19 §2.4.1: 0..=32 fields, each at least one byte, at most 4096 bytes in all.
        if fields.len() > Self::MAX_FIELDS {
            return Err(NameError::TooManyFields(fields.len()));
        }
        if let Some(i) = fields.clone().position(<[u8]>::is_empty) {
            return Err(NameError::EmptyField(i));
        }
        let len: usize = fields.map(<[u8]>::len).sum();
        if len > Self::MAX_LEN {
            return Err(NameError::TooLong {
                what: "track namespace",
                len,
            });
        }
        Ok(())
    }

    /// The fields, first to last.
    pub fn fields(&self) -> Fields<'_> {
        Fields::new(&self.0)
    }

    /// Field `i` (from 0), if there is one.
    pub fn field(&self, i: usize) -> Option<&[u8]> {
        (i < self.len()).then(|| fields::field(&self.0, i))
    }

    /// The first `n` fields (all of them if there are fewer).
    pub fn prefix(&self, n: usize) -> TrackNamespace {
        if n >= self.len() {
            return self.clone();
        }
        Self::pack(self.fields().take(n))
    }

    /// Number of fields.
    pub fn len(&self) -> usize {
        fields::count(&self.0)
    }

    /// True for the zero-field namespace.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of the field lengths.
    pub fn byte_len(&self) -> usize {
        self.fields().map(<[u8]>::len).sum()
    }

    /// Namespace Prefix Matching (draft-19 §9.5): true if every field of `self` equals the field
    /// at the same position of `other`, whole-field and byte-exact. `(a)` is a prefix of `(a, b)`
    /// but not of `(ab)`; every namespace is a prefix of itself.
    pub fn is_prefix_of(&self, other: &TrackNamespace) -> bool {
        self.len() <= other.len() && self.fields().zip(other.fields()).all(|(a, b)| a == b)
    }

    /// True if one of the two is a field-wise prefix of the other (the PREFIX_OVERLAP test).
    pub fn overlaps(&self, other: &TrackNamespace) -> bool {
        self.is_prefix_of(other) || other.is_prefix_of(self)
    }

    /// The fields after `prefix`, or `None` if `prefix` is not a prefix of `self`.
    pub fn strip_prefix(&self, prefix: &TrackNamespace) -> Option<TrackNamespace> {
        if !prefix.is_prefix_of(self) {
            return None;
        }
        Some(Self::pack(self.fields().skip(prefix.len())))
    }

    /// `self` followed by the fields of `suffix`, checked against the limits.
    pub fn join(&self, suffix: &TrackNamespace) -> Result<TrackNamespace, NameError> {
        let all: Vec<&[u8]> = self.fields().chain(suffix.fields()).collect();
        Self::check(all.iter().copied())?;
        Ok(Self::pack(all.into_iter()))
    }

    /// `self` with one more field appended.
    pub fn child(&self, field: impl Into<Bytes>) -> Result<TrackNamespace, NameError> {
        let field = field.into();
        Self::new(self.fields().chain(std::iter::once(&field[..])))
    }

    /// The first field starts with "." (draft-19 §3.2.1: reserved).
    pub fn is_reserved(&self) -> bool {
        self.field(0).is_some_and(|f| f.first() == Some(&b'.'))
    }

    /// The first field is exactly "." (draft-19 §3.2.1: never used; requests get DOES_NOT_EXIST).
    pub fn is_dot(&self) -> bool {
        self.field(0) == Some(b".")
    }

    /// The first field is ".session" (draft-19 §3.2.2: session-level, never forwarded).
    pub fn is_session_level(&self) -> bool {
        self.field(0) == Some(b".session")
    }

    /// The rendered form of draft-19 §1.5 (fields joined by `-`, bytes other than
    /// `[A-Za-z0-9_]` as `.xx`), for logs that must match other implementations'. `Display`
    /// is the path form.
    pub fn rendered(&self) -> Rendered<'_> {
        Rendered {
            namespace: self,
            name: None,
        }
    }

    /// Parses the path form (see [`TrackNamespace`]), as `FromStr` does.
    pub fn parse_path(s: &str) -> Result<Self, NameError> {
        let trimmed = s.trim_matches('/');
        if trimmed.is_empty() {
            return Ok(TrackNamespace::empty());
        }
        Self::new(
            trimmed
                .split('/')
                .map(|f| parse_path_field(s, f))
                .collect::<Result<Vec<_>, _>>()?,
        )
    }

    /// Parses the rendered form of draft-19 §1.5 (fields joined by `-`).
    pub fn parse_rendered(s: &str) -> Result<Self, NameError> {
        if s.is_empty() {
            return Ok(TrackNamespace::empty());
        }
        Self::new(
            s.split('-')
                .map(parse_rendered_field)
                .collect::<Result<Vec<_>, _>>()?,
        )
    }
}

/// Renders bytes per draft-19 §1.5: `[A-Za-z0-9_]` as is, every other byte as `.xx`.
pub(crate) fn render_field(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b == b'_' {
            write!(f, "{}", b as char)?;
        } else {
            write!(f, ".{b:02x}")?;
        }
    }
    Ok(())
}

/// Parses one rendered field, enforcing the bijective rules of draft-19 §1.5.1.
pub(crate) fn parse_rendered_field(s: &str) -> Result<Bytes, NameError> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        if b == b'.' {
            let hex = |c: Option<u8>| match c {
                Some(c @ b'0'..=b'9') => Ok(c - b'0'),
                Some(c @ b'a'..=b'f') => Ok(c - b'a' + 10),
                Some(b'A'..=b'F') => Err(NameError::InvalidRendering("uppercase hex digit")),
                _ => Err(NameError::InvalidRendering(
                    "'.' not followed by two hex digits",
                )),
            };
            let v = (hex(bytes.next())? << 4) | hex(bytes.next())?;
            if v.is_ascii_alphanumeric() || v == b'_' {
                return Err(NameError::InvalidRendering("literal byte hex-encoded"));
            }
            out.push(v);
        } else if b.is_ascii_alphanumeric() || b == b'_' {
            out.push(b);
        } else {
            return Err(NameError::InvalidRendering("byte must be hex-encoded"));
        }
    }
    Ok(Bytes::from(out))
}

/// Writes one field (or track name) of the path form: UTF-8 text as it is, except `/`, `%`,
/// whitespace and control characters, and bytes that are not UTF-8, which are `%XX`.
fn write_path_field(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    let escape = |f: &mut fmt::Formatter<'_>, bytes: &[u8]| -> fmt::Result {
        bytes.iter().try_for_each(|b| write!(f, "%{b:02X}"))
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        let (text, bad) = match std::str::from_utf8(rest) {
            Ok(text) => (text, 0),
            Err(e) => {
                let valid = rest.get(..e.valid_up_to()).unwrap_or_default();
                let bad = e.error_len().unwrap_or(rest.len() - valid.len());
                (std::str::from_utf8(valid).unwrap_or_default(), bad)
            }
        };
        for c in text.chars() {
            if c == '/' || c == '%' || c.is_whitespace() || c.is_control() {
                escape(f, c.encode_utf8(&mut [0u8; 4]).as_bytes())?;
            } else {
                fmt::Write::write_char(f, c)?;
            }
        }
        let after = rest.get(text.len()..).unwrap_or_default();
        escape(f, after.get(..bad).unwrap_or_default())?;
        rest = after.get(bad..).unwrap_or_default();
    }
    Ok(())
}

/// Parses one field (or track name) of the path form `whole`: `%XX` is a byte, anything else
/// itself.
fn parse_path_field(whole: &str, field: &str) -> Result<Bytes, NameError> {
    let invalid = |reason| NameError::InvalidPath {
        text: whole.to_string(),
        reason,
    };
    let mut out = Vec::with_capacity(field.len());
    let mut bytes = field.bytes();
    while let Some(b) = bytes.next() {
        if b != b'%' {
            out.push(b);
            continue;
        }
        let hex = |c: Option<u8>| {
            c.and_then(|c| (c as char).to_digit(16))
                .map(|d| d as u8)
                .ok_or_else(|| invalid("'%' not followed by two hex digits"))
        };
        let high = hex(bytes.next())?;
        out.push((high << 4) | hex(bytes.next())?);
    }
    Ok(Bytes::from(out))
}

/// The rendered form of draft-19 §1.5 of a namespace or full track name (see
/// [`TrackNamespace::rendered`], [`FullTrackName::rendered`]).
#[derive(Clone, Copy, Debug)]
pub struct Rendered<'a> {
    namespace: &'a TrackNamespace,
    name: Option<&'a [u8]>,
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.namespace.fields().enumerate() {
            if i > 0 {
                f.write_str("-")?;
            }
            render_field(f, field)?;
        }
        if let Some(name) = self.name {
            f.write_str("--")?;
            render_field(f, name)?;
        }
        Ok(())
    }
}

impl fmt::Display for TrackNamespace {
    /// The path form: `chat/room1` (see [`TrackNamespace`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, field) in self.fields().enumerate() {
            if i > 0 {
                f.write_str("/")?;
            }
            write_path_field(f, field)?;
        }
        Ok(())
    }
}

impl fmt::Debug for TrackNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TrackNamespace({self})")
    }
}

impl FromStr for TrackNamespace {
    type Err = NameError;

    /// Parses the path form, e.g. `example.com/meeting` (see [`TrackNamespace`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_path(s)
    }
}

impl TrackNamespace {
    /// Reads the Track Namespace Prefix of SUBSCRIBE_NAMESPACE, which may have zero fields
    /// where the version allows it (from draft-16, §9.25) even if other namespaces may not.
    pub(crate) fn decode_prefix<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        Self::decode_fields(
            buf,
            v,
            v.allows_empty_prefix() || v.allows_empty_namespace(),
        )
    }

    /// Writes a Track Namespace Prefix (see [`TrackNamespace::decode_prefix`]).
    pub(crate) fn encode_prefix<B: BufMut>(
        &self,
        buf: &mut B,
        v: Version,
    ) -> Result<(), EncodeError> {
        self.encode_fields(
            buf,
            v,
            v.allows_empty_prefix() || v.allows_empty_namespace(),
        )
    }

    fn decode_fields<B: Buf>(
        buf: &mut B,
        v: Version,
        allow_empty: bool,
    ) -> Result<Self, DecodeError> {
        let n = buf.get_varint(v)?;
        // draft-19 §2.4.1: more than 32 fields is a PROTOCOL_VIOLATION.
        if n > Self::MAX_FIELDS as u64 {
            return Err(DecodeError::TooManyNamespaceFields(n));
        }
        // draft-14 §2.4.1, draft-16 §2.4.1: "an N of 0 ... MUST close the session with a
        // Protocol Violation" (until draft-16, except where a prefix may be empty).
        if n == 0 && !allow_empty {
            return Err(DecodeError::ProtocolViolation(
                "track namespace with 0 fields",
            ));
        }
        let mut fields = Packer::new(n as usize, 0);
        let mut total = 0usize;
        for i in 0..n as usize {
            let field = buf.get_len_prefixed(v, "track namespace field", Self::MAX_LEN as u64)?;
            if field.is_empty() {
                // draft-19 §2.4.1: zero-length field is a PROTOCOL_VIOLATION.
                return Err(DecodeError::EmptyNamespaceField(i));
            }
            total += field.len();
            if total > Self::MAX_LEN {
                return Err(DecodeError::NameTooLong {
                    what: "track namespace",
                    len: total,
                });
            }
            fields.push(&field);
        }
        Ok(TrackNamespace(fields.finish()))
    }

    fn encode_fields<B: BufMut>(
        &self,
        buf: &mut B,
        v: Version,
        allow_empty: bool,
    ) -> Result<(), EncodeError> {
        if self.is_empty() && !allow_empty {
            return Err(EncodeError::NotInVersion(
                "a track namespace of 0 fields",
                v,
            ));
        }
        buf.put_varint(self.len() as u64, v);
        for f in self.fields() {
            buf.put_len_prefixed(f, v, "track namespace field", Self::MAX_LEN)?;
        }
        Ok(())
    }
}

impl Decode for TrackNamespace {
    fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        Self::decode_fields(buf, v, v.allows_empty_namespace())
    }
}

impl Encode for TrackNamespace {
    fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        self.encode_fields(buf, v, v.allows_empty_namespace())
    }
}

/// A track's full name: its namespace and its name (draft-19 §2.4.1).
///
/// The name may be empty; namespace plus name is at most 4096 bytes.
///
/// Its path form (`Display`, `FromStr`) is the namespace's path form, `/`, and the name
/// escaped as a field is (see [`TrackNamespace`]): the last `/` separates the name, which may
/// be empty (`chat/room1/`); a track of the zero-field namespace is `/name`. The draft's
/// rendered form is [`FullTrackName::rendered`] and [`FullTrackName::parse_rendered`].
///
/// ```
/// use moq_core::{FullTrackName, TrackNamespace};
/// let t = FullTrackName::new(TrackNamespace::from_strs(["example.net", "team2"]).unwrap(), "report").unwrap();
/// assert_eq!(t.to_string(), "example.net/team2/report");
/// assert_eq!("example.net/team2/report".parse::<FullTrackName>().unwrap(), t);
/// assert_eq!(t.rendered().to_string(), "example.2enet-team2--report");
/// ```
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FullTrackName {
    /// The namespace.
    pub namespace: TrackNamespace,
    /// The track name; may be empty.
    pub name: Bytes,
}

impl FullTrackName {
    /// A full track name, checked against the 4096-byte limit.
    pub fn new(namespace: TrackNamespace, name: impl Into<Bytes>) -> Result<Self, NameError> {
        let t = FullTrackName {
            namespace,
            name: name.into(),
        };
        let len = t.byte_len();
        if len > TrackNamespace::MAX_LEN {
            return Err(NameError::TooLong {
                what: "full track name",
                len,
            });
        }
        Ok(t)
    }

    /// Namespace bytes plus name bytes.
    pub fn byte_len(&self) -> usize {
        self.namespace.byte_len() + self.name.len()
    }

    /// The rendered form of draft-19 §1.5 (`namespace--name`), for logs that must match other
    /// implementations'. `Display` is the path form.
    pub fn rendered(&self) -> Rendered<'_> {
        Rendered {
            namespace: &self.namespace,
            name: Some(&self.name),
        }
    }

    /// Parses `namespace--name` in the rendered form of draft-19 §1.5.
    pub fn parse_rendered(s: &str) -> Result<Self, NameError> {
        let (ns, name) = s.rsplit_once("--").ok_or(NameError::InvalidRendering(
            "missing '--' before the track name",
        ))?;
        FullTrackName::new(
            TrackNamespace::parse_rendered(ns)?,
            parse_rendered_field(name)?,
        )
    }

    /// Parses the path form `namespace/name` (see [`FullTrackName`]), as `FromStr` does.
    pub fn parse_path(s: &str) -> Result<Self, NameError> {
        let (ns, name) = s.rsplit_once('/').ok_or_else(|| NameError::InvalidPath {
            text: s.to_string(),
            reason: "no '/' before the track name",
        })?;
        FullTrackName::new(TrackNamespace::parse_path(ns)?, parse_path_field(s, name)?)
    }

    /// Decodes the `Track Name Length, Track Name` that follows a namespace already read.
    pub(crate) fn decode_name<B: Buf>(
        namespace: TrackNamespace,
        buf: &mut B,
        v: Version,
    ) -> Result<Self, DecodeError> {
        let name = buf.get_len_prefixed(v, "track name", TrackNamespace::MAX_LEN as u64)?;
        let len = namespace.byte_len() + name.len();
        // draft-19 §2.4.1: a Full Track Name over 4096 bytes is a PROTOCOL_VIOLATION.
        if len > TrackNamespace::MAX_LEN {
            return Err(DecodeError::NameTooLong {
                what: "full track name",
                len,
            });
        }
        Ok(FullTrackName { namespace, name })
    }
}

impl Decode for FullTrackName {
    fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        let ns = TrackNamespace::decode(buf, v)?;
        Self::decode_name(ns, buf, v)
    }
}

impl Encode for FullTrackName {
    fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        if self.byte_len() > TrackNamespace::MAX_LEN {
            return Err(EncodeError::TooLong {
                field: "full track name",
                len: self.byte_len(),
                max: TrackNamespace::MAX_LEN,
            });
        }
        self.namespace.encode(buf, v)?;
        buf.put_len_prefixed(&self.name, v, "track name", TrackNamespace::MAX_LEN)
    }
}

impl fmt::Display for FullTrackName {
    /// The path form: `chat/room1/messages` (see [`FullTrackName`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/", self.namespace)?;
        write_path_field(f, &self.name)
    }
}

impl fmt::Debug for FullTrackName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FullTrackName({self})")
    }
}

impl FromStr for FullTrackName {
    type Err = NameError;

    /// Parses the path form `namespace/name`, e.g. `chat/room1/messages` (see
    /// [`FullTrackName`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_path(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version::Draft19;

    fn ns(fields: &[&str]) -> TrackNamespace {
        TrackNamespace::from_strs(fields.iter().copied()).unwrap()
    }

    #[test]
    fn prefix_matching_is_field_wise() {
        let foo = ns(&["foo"]);
        let foobar = ns(&["foobar"]);
        let foo_bar = ns(&["foo", "bar"]);
        assert!(foo.is_prefix_of(&foo_bar));
        assert!(!foo.is_prefix_of(&foobar));
        assert!(foo_bar.is_prefix_of(&foo_bar));
        assert!(TrackNamespace::empty().is_prefix_of(&foo));
        assert!(foo.overlaps(&foo_bar) && foo_bar.overlaps(&foo));
        assert!(!ns(&["a", "b"]).overlaps(&ns(&["a", "c"])));
    }

    #[test]
    fn limits() {
        let fields: Vec<String> = (0..33).map(|i| i.to_string()).collect();
        assert_eq!(
            TrackNamespace::from_strs(&fields),
            Err(NameError::TooManyFields(33))
        );
        assert!(TrackNamespace::from_strs(&fields[..32]).is_ok());
        assert_eq!(
            TrackNamespace::from_strs(["a", ""]),
            Err(NameError::EmptyField(1))
        );
        let big = "x".repeat(4097);
        assert!(matches!(
            TrackNamespace::from_strs([big.as_str()]),
            Err(NameError::TooLong { .. })
        ));
        let ok = ns(&[&"x".repeat(4000)]);
        assert!(FullTrackName::new(ok, vec![0u8; 97]).is_err());
    }

    #[test]
    fn rendering_round_trip() {
        let t = FullTrackName::parse_rendered("example.2enet-team2-project_x--report").unwrap();
        assert_eq!(t.namespace, ns(&["example.net", "team2", "project_x"]));
        assert_eq!(&t.name[..], b"report");
        assert_eq!(
            t.rendered().to_string(),
            "example.2enet-team2-project_x--report"
        );
        assert_eq!(
            t.namespace.rendered().to_string(),
            "example.2enet-team2-project_x"
        );
        for bad in ["a.61", "a.2E", "a.2", "a b"] {
            assert!(TrackNamespace::parse_rendered(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn path_form() {
        let room = ns(&["chat", "room1"]);
        assert_eq!("chat/room1".parse::<TrackNamespace>(), Ok(room.clone()));
        assert_eq!(room.to_string(), "chat/room1");
        // Leading and trailing slashes are ignored; the empty string is the empty namespace.
        assert_eq!("/chat/room1/".parse::<TrackNamespace>(), Ok(room.clone()));
        assert_eq!("".parse::<TrackNamespace>(), Ok(TrackNamespace::empty()));
        assert_eq!(TrackNamespace::empty().to_string(), "");
        assert!(matches!(
            "chat//room1".parse::<TrackNamespace>(),
            Err(NameError::EmptyField(1))
        ));
        for bad in ["a%", "a%2", "a%zz"] {
            assert!(
                matches!(
                    bad.parse::<TrackNamespace>(),
                    Err(NameError::InvalidPath { .. })
                ),
                "{bad}"
            );
        }
        // Lower-case hex parses too.
        assert_eq!("a%2fb".parse::<TrackNamespace>(), Ok(ns(&["a/b"])));

        let t = FullTrackName::new(room.clone(), "messages").unwrap();
        assert_eq!(t.to_string(), "chat/room1/messages");
        assert_eq!("chat/room1/messages".parse::<FullTrackName>(), Ok(t));
        let empty_name = FullTrackName::new(room, "").unwrap();
        assert_eq!(empty_name.to_string(), "chat/room1/");
        let root = FullTrackName::new(TrackNamespace::empty(), "t").unwrap();
        assert_eq!(root.to_string(), "/t");
        assert!("no-slash".parse::<FullTrackName>().is_err());
    }

    /// Every namespace and name, whatever its bytes, has one path form that parses back to
    /// it: `/`, `%`, whitespace, control characters and bytes that are not UTF-8 escaped.
    #[test]
    fn path_form_round_trips() {
        let fields: Vec<Vec<u8>> = vec![
            b"plain".to_vec(),
            b"a/b".to_vec(),
            b"100%".to_vec(),
            b"%2F".to_vec(),
            b"with space".to_vec(),
            b"tab\there\n".to_vec(),
            vec![0x00, 0x01, 0x7f],
            vec![0xff, 0xfe, b'x'],
            "caf\u{e9} \u{1F600}".as_bytes().to_vec(),
            vec![0xe2, 0x82],
            b"..".to_vec(),
            b"-".to_vec(),
            b"/".to_vec(),
            (0u8..=255).collect(),
        ];
        for f in &fields {
            let one = TrackNamespace::new([f.clone()]).unwrap();
            let text = one.to_string();
            assert!(
                !text.contains('/') && text.chars().all(|c| !c.is_control() && !c.is_whitespace()),
                "{text:?}"
            );
            assert_eq!(text.parse::<TrackNamespace>(), Ok(one.clone()), "{text:?}");
            let t = FullTrackName::new(one.clone(), f.clone()).unwrap();
            assert_eq!(t.to_string().parse::<FullTrackName>(), Ok(t.clone()));
        }
        let all = TrackNamespace::new(fields.clone()).unwrap();
        assert_eq!(all.to_string().parse::<TrackNamespace>(), Ok(all.clone()));
        // Readable text stays readable.
        assert_eq!(
            ns(&["caf\u{e9}", "a-b.c_d"]).to_string(),
            "caf\u{e9}/a-b.c_d"
        );
    }

    #[test]
    fn wire_bytes() {
        let mut buf = Vec::new();
        ns(&["ab", "c"]).encode(&mut buf, V).unwrap();
        assert_eq!(buf, [0x02, 0x02, b'a', b'b', 0x01, b'c']);
        assert_eq!(
            TrackNamespace::decode(&mut &[0x01u8, 0x00][..], V),
            Err(DecodeError::EmptyNamespaceField(0))
        );
        assert_eq!(
            TrackNamespace::decode(&mut &[0x21u8][..], V),
            Err(DecodeError::TooManyNamespaceFields(33))
        );
    }
}
