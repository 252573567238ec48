//! What a store-backed registry needs whatever the store: the key encoding of namespaces and
//! a bounded lookup cache.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use moq_core::TrackNamespace;
use parking_lot::Mutex;

use super::Origin;

/// A bounded cache of lookups, each kept for a short time.
pub(crate) struct LookupCache {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<Entries>,
}

struct Entries {
    map: HashMap<TrackNamespace, (Instant, Option<Origin>)>,
    /// When stale answers were last swept out (at most once a ttl: a sweep reads them all).
    swept: Instant,
}

impl LookupCache {
    pub(crate) fn new(ttl: Duration, capacity: usize) -> Self {
        LookupCache {
            ttl,
            capacity,
            entries: Mutex::new(Entries {
                map: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }

    /// The cached answer for `namespace`, if one is fresh.
    pub(crate) fn get(&self, namespace: &TrackNamespace) -> Option<Option<Origin>> {
        let entries = self.entries.lock();
        let (at, origin) = entries.map.get(namespace)?;
        (at.elapsed() < self.ttl).then(|| origin.clone())
    }

    pub(crate) fn put(&self, namespace: &TrackNamespace, origin: Option<Origin>) {
        if self.ttl.is_zero() || self.capacity == 0 {
            return;
        }
        let mut entries = self.entries.lock();
        let Entries { map, swept } = &mut *entries;
        if map.len() >= self.capacity && !map.contains_key(namespace) {
            let ttl = self.ttl;
            if swept.elapsed() >= ttl {
                map.retain(|_, (at, _)| at.elapsed() < ttl);
                *swept = Instant::now();
            }
            if map.len() >= self.capacity {
                // Full of fresh answers: drop one (any; they all expire within the ttl).
                if let Some(victim) = map.keys().next().cloned() {
                    map.remove(&victim);
                }
            }
        }
        map.insert(namespace.clone(), (Instant::now(), origin));
    }

    pub(crate) fn forget(&self, namespace: &TrackNamespace) {
        self.entries.lock().map.remove(namespace);
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.lock().map.len()
    }
}

/// A namespace as a store key fragment: each field in lowercase hex followed by `.`, so a
/// field-wise prefix is a string prefix and nothing else is (`(ab)` is `6162.`, which `(a)`'s
/// `61.` does not start).
pub(crate) fn encode_namespace(namespace: &TrackNamespace) -> String {
    let mut out = String::with_capacity(namespace.byte_len() * 2 + namespace.len());
    for field in namespace.fields() {
        encode_field(field, &mut out);
    }
    out
}

/// One field in lowercase hex, followed by `.`.
pub(crate) fn encode_field(field: &[u8], out: &mut String) {
    use std::fmt::Write as _;
    for byte in field {
        let _ = write!(out, "{byte:02x}");
    }
    out.push('.');
}

/// The namespace [`encode_namespace`] wrote, or `None` for anything else.
pub(crate) fn decode_namespace(encoded: &[u8]) -> Option<TrackNamespace> {
    let body = encoded.strip_suffix(b".")?;
    let mut fields = Vec::new();
    for hex in body.split(|b| *b == b'.') {
        let text = std::str::from_utf8(hex).ok()?;
        if text.len() % 2 != 0 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let field = (0..text.len())
            .step_by(2)
            .map(|i| {
                text.get(i..i + 2)
                    .and_then(|pair| u8::from_str_radix(pair, 16).ok())
            })
            .collect::<Option<Vec<u8>>>()?;
        fields.push(field);
    }
    TrackNamespace::new(fields).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(fields: &[&str]) -> TrackNamespace {
        TrackNamespace::from_strs(fields.iter().copied()).unwrap()
    }

    #[test]
    fn encoding_round_trips_and_keeps_prefixes_field_wise() {
        for n in [ns(&["a"]), ns(&["ab", "c"]), ns(&["x", "y", "z"])] {
            assert_eq!(decode_namespace(encode_namespace(&n).as_bytes()), Some(n));
        }
        let odd = TrackNamespace::new([&b"."[..], &[0xff, 0][..]]).unwrap();
        assert_eq!(encode_namespace(&odd), "2e.ff00.");
        assert_eq!(decode_namespace(b"2e.ff00."), Some(odd));
        assert!(encode_namespace(&ns(&["a", "b"])).starts_with(&encode_namespace(&ns(&["a"]))));
        assert!(!encode_namespace(&ns(&["ab"])).starts_with(&encode_namespace(&ns(&["a"]))));
        for bad in [
            &b""[..],
            b"6",
            b"61",
            b".",
            b"61..",
            b"6g.",
            b"616.",
            b"\xff\xfe.",
        ] {
            assert_eq!(decode_namespace(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn lookup_cache_is_bounded_and_short() {
        let cache = LookupCache::new(Duration::from_secs(60), 3);
        for i in 0..10 {
            cache.put(&ns(&[&i.to_string()]), None);
            assert!(cache.len() <= 3);
        }
        assert_eq!(cache.get(&ns(&["9"])), Some(None));
        cache.forget(&ns(&["9"]));
        assert_eq!(cache.get(&ns(&["9"])), None);
        let off = LookupCache::new(Duration::ZERO, 3);
        off.put(&ns(&["a"]), None);
        assert_eq!(off.get(&ns(&["a"])), None);
    }
}
