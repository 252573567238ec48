//! A namespace's fields in one allocation: the count, each field's end, then the bytes.
//!
//! `[n: u8][end of field i: u16 little-endian, n times][the fields' bytes]`; an empty buffer is
//! the zero-field namespace. One allocation of 16 + 1 + 2n + bytes where `Arc<[Bytes]>` was
//! 16 + 32n and kept alive the whole frame the fields were read from (issue 35).

use std::iter::FusedIterator;
use std::sync::Arc;

/// Builds a packed buffer; the caller checked the limits (at most 255 fields, 65,535 bytes).
pub(crate) struct Packer {
    buf: Vec<u8>,
    n: usize,
    pushed: usize,
}

impl Packer {
    /// A buffer for `n` fields of about `bytes` bytes in all.
    pub(crate) fn new(n: usize, bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(1 + 2 * n + bytes);
        if n > 0 {
            buf.push(n as u8);
            buf.resize(1 + 2 * n, 0);
        }
        Packer { buf, n, pushed: 0 }
    }

    /// Appends the next field.
    pub(crate) fn push(&mut self, field: &[u8]) {
        if self.pushed >= self.n {
            return;
        }
        self.buf.extend_from_slice(field);
        let end = ((self.buf.len() - (1 + 2 * self.n)) as u16).to_le_bytes();
        let at = 1 + 2 * self.pushed;
        if let Some(slot) = self.buf.get_mut(at..at + 2) {
            slot.copy_from_slice(&end);
        }
        self.pushed += 1;
    }

    /// The packed buffer.
    pub(crate) fn finish(self) -> Arc<[u8]> {
        self.buf.into()
    }
}

/// Number of fields in a packed buffer.
pub(crate) fn count(packed: &[u8]) -> usize {
    packed.first().map_or(0, |&n| n as usize)
}

/// Field `i` of a packed buffer (empty if there is none).
pub(crate) fn field(packed: &[u8], i: usize) -> &[u8] {
    let n = count(packed);
    if i >= n {
        return &[];
    }
    let end = |j: usize| {
        packed
            .get(1 + 2 * j..3 + 2 * j)
            .and_then(|b| <[u8; 2]>::try_from(b).ok())
            .map_or(0, |b| u16::from_le_bytes(b) as usize)
    };
    let start = if i == 0 { 0 } else { end(i - 1) };
    let data = 1 + 2 * n;
    packed.get(data + start..data + end(i)).unwrap_or_default()
}

/// The fields of a [`crate::TrackNamespace`], first to last, as byte slices
/// ([`crate::TrackNamespace::fields`]).
#[derive(Clone, Debug)]
pub struct Fields<'a> {
    packed: &'a [u8],
    front: usize,
    back: usize,
}

impl<'a> Fields<'a> {
    pub(crate) fn new(packed: &'a [u8]) -> Self {
        Fields {
            packed,
            front: 0,
            back: count(packed),
        }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        (self.front < self.back).then(|| {
            self.front += 1;
            field(self.packed, self.front - 1)
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.back - self.front;
        (n, Some(n))
    }

    fn nth(&mut self, n: usize) -> Option<&'a [u8]> {
        self.front = self.front.saturating_add(n).min(self.back);
        self.next()
    }
}

impl<'a> DoubleEndedIterator for Fields<'a> {
    fn next_back(&mut self) -> Option<&'a [u8]> {
        (self.front < self.back).then(|| {
            self.back -= 1;
            field(self.packed, self.back)
        })
    }
}

impl ExactSizeIterator for Fields<'_> {}

impl FusedIterator for Fields<'_> {}

impl PartialOrd for crate::TrackNamespace {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for crate::TrackNamespace {
    /// Field by field, each byte-wise (a prefix sorts first), as `[Bytes]` compared.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.fields().cmp(other.fields())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_reads_back() {
        let mut p = Packer::new(3, 6);
        for f in [&b"a"[..], b"bc", b"def"] {
            p.push(f);
        }
        let packed = p.finish();
        assert_eq!(packed.len(), 1 + 6 + 6);
        let all: Vec<&[u8]> = Fields::new(&packed).collect();
        assert_eq!(all, [&b"a"[..], b"bc", b"def"]);
        let back: Vec<&[u8]> = Fields::new(&packed).rev().collect();
        assert_eq!(back, [&b"def"[..], b"bc", b"a"]);
        assert_eq!(Fields::new(&packed).nth(1), Some(&b"bc"[..]));
        assert_eq!(Fields::new(&[]).len(), 0);
        assert_eq!(field(&packed, 3), b"");
    }

    /// Order is field by field: `(a, z)` sorts before `(ab)` (joined bytes would not), a
    /// prefix before what extends it; equal fields are equal however they were made.
    #[test]
    fn namespace_order_and_equality_are_field_wise() {
        use crate::TrackNamespace;
        let ns = |f: &[&str]| TrackNamespace::from_strs(f.iter().copied()).unwrap();
        assert!(ns(&["a", "z"]) < ns(&["ab"]));
        assert!(ns(&["a"]) < ns(&["a", "b"]));
        assert!(TrackNamespace::empty() < ns(&["a"]));
        assert_eq!(ns(&["a", "b"]), ns(&["a"]).child("b").unwrap());
        assert_eq!(ns(&["a", "b"]).prefix(1), ns(&["a"]));
        assert_eq!(ns(&["a", "b"]).prefix(0), TrackNamespace::empty());
        assert_ne!(ns(&["ab"]), ns(&["a", "b"]));
        assert_eq!(ns(&["x", "y"]).field(1), Some(&b"y"[..]));
        assert_eq!(ns(&["x", "y"]).field(2), None);
        // One pointer and a length, as `Arc<[Bytes]>` was.
        assert_eq!(std::mem::size_of::<TrackNamespace>(), 16);
    }
}
