//! Path patterns of token grants, matched against namespaces field by field.
//!
//! The grammar is moq-dev's (`moq-pattern`): `/`-separated segments, each a literal, `*` (one
//! whole field), `lit*lit` (one `*` inside a field) or `**` (zero or more fields, at most once
//! per pattern). `room/**` is `room` and everything under it, `**` is everything, and the
//! empty pattern is exactly the root. A namespace is a path whose segments are its fields, so
//! `("room", "a")` is `room/a`; a field is never split at a `/` of its own. Literal text is
//! read as in the path form of `TrackNamespace` (`Display`/`FromStr`): `%XX` is a byte, so
//! `a%2Fb` grants the one field `a/b`, as the relay's logs and `?prefix=` write it.

use std::fmt;

/// One segment of a [`Pattern`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    /// Exactly these bytes.
    Literal(Vec<u8>),
    /// One field that starts with the first part and ends with the second (`*` alone is
    /// both empty).
    Glob(Vec<u8>, Vec<u8>),
    /// `**`: zero or more fields.
    Rest,
}

impl Segment {
    fn matches(&self, field: &[u8]) -> bool {
        match self {
            Segment::Literal(l) => l == field,
            Segment::Glob(head, tail) => {
                field.len() >= head.len() + tail.len()
                    && field.starts_with(head)
                    && field.ends_with(tail)
            }
            Segment::Rest => true,
        }
    }
}

/// Why a pattern did not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid pattern {pattern:?}: {reason}")]
pub struct InvalidPattern {
    pattern: String,
    reason: &'static str,
}

impl InvalidPattern {
    /// A token that mixes the legacy `put`/`get` prefixes with `publish`/`subscribe`.
    pub(crate) fn mixed() -> Self {
        InvalidPattern {
            pattern: String::new(),
            reason: "mixes the legacy put/get claims with publish/subscribe",
        }
    }
}

/// A set of namespaces, as a token grants them (relative to nothing: the token's `root` is
/// already joined in front).
#[derive(Clone, PartialEq, Eq)]
pub struct Pattern {
    segments: Vec<Segment>,
    text: String,
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.text)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The bytes of one segment's literal text, `%XX` escapes decoded as in a namespace's path
/// form.
fn decode(text: &str) -> Result<Vec<u8>, moq_core::NameError> {
    let one = moq_core::TrackNamespace::parse_path(text)?;
    Ok(one.field(0).map(|f| f.to_vec()).unwrap_or_default())
}

/// The segments of a `/`-separated path, leading and trailing `/` ignored.
fn split(path: &str) -> impl Iterator<Item = &str> {
    path.split('/').filter(|s| !s.is_empty())
}

impl Pattern {
    /// Parses `pattern` beneath `root` (a literal path; empty for none).
    ///
    /// ```
    /// use moq_relay::auth::Pattern;
    /// let p = Pattern::parse("room", "a/**").unwrap();
    /// assert!(p.matches(&[b"room".as_slice(), b"a", b"cam"]));
    /// assert!(!p.matches(&[b"room".as_slice(), b"b"]));
    /// ```
    pub fn parse(root: &str, pattern: &str) -> Result<Pattern, InvalidPattern> {
        let invalid = |reason| InvalidPattern {
            pattern: pattern.to_string(),
            reason,
        };
        if pattern.starts_with('/') || pattern.ends_with('/') || pattern.contains("//") {
            return Err(invalid("empty segment"));
        }
        let literal =
            |s: &str| decode(s).map_err(|_| invalid("a '%' not followed by two hex digits"));
        let mut segments: Vec<Segment> = split(root)
            .map(|s| literal(s).map(Segment::Literal))
            .collect::<Result<_, _>>()?;
        for s in split(pattern) {
            let seg = match s {
                "**" if segments.contains(&Segment::Rest) => {
                    return Err(invalid("more than one `**`"));
                }
                "**" => Segment::Rest,
                s if s.contains("**") => return Err(invalid("`**` inside a segment")),
                s => match s.split_once('*') {
                    None => Segment::Literal(literal(s)?),
                    Some((_, tail)) if tail.contains('*') => {
                        return Err(invalid("more than one `*` in a segment"));
                    }
                    Some((head, tail)) => Segment::Glob(literal(head)?, literal(tail)?),
                },
            };
            segments.push(seg);
        }
        let text = split(root)
            .chain(split(pattern))
            .collect::<Vec<_>>()
            .join("/");
        Ok(Pattern { segments, text })
    }

    /// The legacy grant form (moq-token's `put`/`get`): the prefix `p` beneath `root` and
    /// everything under it, `p/**`; the empty prefix is `**`.
    pub fn subtree(root: &str, prefix: &str) -> Result<Pattern, InvalidPattern> {
        if prefix.contains('*') {
            return Err(InvalidPattern {
                pattern: prefix.to_string(),
                reason: "`*` in a prefix",
            });
        }
        let prefix = split(prefix).collect::<Vec<_>>().join("/");
        match prefix.is_empty() {
            true => Pattern::parse(root, "**"),
            false => Pattern::parse(root, &format!("{prefix}/**")),
        }
    }

    /// Whether the path `fields` is in the set.
    pub fn matches(&self, fields: &[&[u8]]) -> bool {
        match self.segments.iter().position(|s| *s == Segment::Rest) {
            None => {
                fields.len() == self.segments.len()
                    && self.segments.iter().zip(fields).all(|(s, f)| s.matches(f))
            }
            Some(rest) => {
                let (head, tail) = self.segments.split_at(rest);
                let tail = tail.get(1..).unwrap_or_default();
                fields.len() >= head.len() + tail.len()
                    && head.iter().zip(fields).all(|(s, f)| s.matches(f))
                    && tail
                        .iter()
                        .rev()
                        .zip(fields.iter().rev())
                        .all(|(s, f)| s.matches(f))
            }
        }
    }

    /// Whether some path at or beneath `prefix` is in the set: a SUBSCRIBE_NAMESPACE for
    /// `prefix` can reveal something.
    pub fn reaches_under(&self, prefix: &[&[u8]]) -> bool {
        let mut segments = self.segments.iter();
        for field in prefix {
            match segments.next() {
                // `**` takes the rest of the prefix; what follows it names fields beneath.
                Some(Segment::Rest) => return true,
                Some(s) if s.matches(field) => {}
                _ => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(s: &str) -> Vec<&[u8]> {
        split(s).map(str::as_bytes).collect()
    }

    #[test]
    fn grammar() {
        let m = |root: &str, p: &str, s: &str| Pattern::parse(root, p).unwrap().matches(&path(s));
        assert!(m("", "room/a", "room/a"));
        assert!(!m("", "room/a", "room/a/b"));
        assert!(m("", "room/**", "room"));
        assert!(m("", "room/**", "room/a/b"));
        assert!(!m("", "room/**", "roomy/a"));
        assert!(m("", "**", ""));
        assert!(m("demo", "", "demo"));
        assert!(!m("demo", "", "demo/x"));
        assert!(m("demo", "*/chat", "demo/alice/chat"));
        assert!(m("", "cam*", "camera"));
        assert!(m("", "*.mp4", "a.mp4"));
        assert!(!m("", "a*a", "a"));
        assert!(m("", "**/chat", "x/y/chat"));
        assert!(m("", "a/**/z", "a/z"));
        assert!(!m("", "a/**/z", "a/y"));
        // A field holding a `/` is granted by its path form.
        let p = Pattern::parse("", "a%2Fb/**").unwrap();
        assert!(p.matches(&[b"a/b".as_slice(), b"x"]));
        assert!(!p.matches(&path("a/b/x")));
        assert!(
            Pattern::parse("r%2F", "c*%25")
                .unwrap()
                .matches(&[b"r/".as_slice(), b"cat%"])
        );
        for bad in ["a//b", "/a", "a/", "**/**", "a**", "a*b*c", "a%zz"] {
            assert!(Pattern::parse("", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn legacy_prefixes() {
        let p = Pattern::subtree("demo", "room").unwrap();
        assert!(p.matches(&path("demo/room")));
        assert!(p.matches(&path("demo/room/x")));
        assert!(!p.matches(&path("demo/roomy")));
        assert!(
            Pattern::subtree("", "")
                .unwrap()
                .matches(&path("any/thing"))
        );
    }

    #[test]
    fn reach() {
        let p = Pattern::parse("", "room/a/**").unwrap();
        assert!(p.reaches_under(&path("")));
        assert!(p.reaches_under(&path("room")));
        assert!(p.reaches_under(&path("room/a/x")));
        assert!(!p.reaches_under(&path("room/b")));
        let exact = Pattern::parse("", "room/a").unwrap();
        assert!(exact.reaches_under(&path("room/a")));
        assert!(!exact.reaches_under(&path("room/a/x")));
    }
}
