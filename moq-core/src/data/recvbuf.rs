//! What the data-stream readers decode from: a [`BytesMut`] the caller fills, or a [`RecvBuf`]
//! that keeps the chunks the transport received, so that payload is handed out as slices of
//! them without a copy.

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};

use crate::coding::DecodeError;

/// Bytes received on a stream and not yet decoded, as [`SubgroupReader`](super::SubgroupReader)
/// and [`FetchReader`](super::FetchReader) consume them.
pub trait DecodeBuf {
    /// Decodes one value from the front with `decode` and consumes its bytes; `Ok(None)` (and
    /// nothing consumed) if `decode` needs more bytes than there are ([`DecodeError::Short`]).
    fn decode_front<T>(
        &mut self,
        decode: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError>;

    /// Takes up to `max` bytes from the front, without copying; `None` if there are none.
    fn take_front(&mut self, max: usize) -> Option<Bytes>;

    /// The first contiguous bytes (empty only if there are no bytes at all).
    fn front(&self) -> &[u8];

    /// Takes the next piece of a payload that has `remaining` bytes still to come, without
    /// copying: the piece, and how many bytes of the payload are left after it. `None` if
    /// there are no bytes.
    fn take_payload(&mut self, remaining: u64) -> Option<(Bytes, u64)> {
        let max = usize::try_from(remaining).unwrap_or(usize::MAX);
        let data = self.take_front(max)?;
        let left = remaining.saturating_sub(data.len() as u64);
        Some((data, left))
    }
}

impl DecodeBuf for BytesMut {
    fn decode_front<T>(
        &mut self,
        mut decode: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        let mut cur = &self[..];
        match decode(&mut cur) {
            Ok(v) => {
                let used = self.len() - cur.len();
                self.advance(used);
                Ok(Some(v))
            }
            Err(DecodeError::Short) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn take_front(&mut self, max: usize) -> Option<Bytes> {
        let n = max.min(self.len());
        (n > 0).then(|| self.split_to(n).freeze())
    }

    fn front(&self) -> &[u8] {
        self
    }
}

/// The smallest prefix of a new chunk copied to complete a value split across chunks; it
/// doubles while the value is still short.
const FIRST_CARRY: usize = 64;

/// A receive buffer that keeps the transport's chunks, as many as were pushed: payload inside a
/// chunk is handed out as a slice of it (no copy), and pushing a chunk copies nothing, so a
/// reader may push every chunk the transport has ready before it decodes. Only a value (an
/// object's header) split across chunks is copied, the bytes it needs and at most about as
/// many again.
#[derive(Debug, Default)]
pub struct RecvBuf {
    /// Bytes from earlier chunks, before `chunks`: a value that was short.
    carry: BytesMut,
    /// The received chunks after `carry`, in order, their consumed fronts cut off; none is
    /// empty.
    chunks: VecDeque<Bytes>,
}

impl RecvBuf {
    /// An empty buffer.
    pub fn new() -> Self {
        RecvBuf::default()
    }

    /// Appends a received chunk (no copy).
    pub fn push(&mut self, chunk: Bytes) {
        if !chunk.is_empty() {
            self.chunks.push_back(chunk);
        }
    }

    /// The bytes held.
    pub fn len(&self) -> usize {
        self.carry.len() + self.chunks.iter().map(Bytes::len).sum::<usize>()
    }

    /// True if no bytes are held.
    pub fn is_empty(&self) -> bool {
        self.carry.is_empty() && self.chunks.is_empty()
    }

    /// Completes the carried start of a value with prefixes of the chunks, doubling the prefix
    /// while the value is still short; a chunk that belongs to the value whole is moved into
    /// the carry and the next one is tried.
    fn decode_carried<T>(
        &mut self,
        decode: &mut impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        loop {
            let old = self.carry.len();
            let mut want = old.max(FIRST_CARRY);
            let Some(chunk) = self.chunks.front_mut() else {
                // No chunk to complete it with: the carry may hold a whole value still.
                let mut cur = &self.carry[..];
                return match decode(&mut cur) {
                    Ok(v) => {
                        let used = old - cur.len();
                        self.carry.advance(used);
                        Ok(Some(v))
                    }
                    Err(DecodeError::Short) => Ok(None),
                    Err(e) => Err(e),
                };
            };
            loop {
                let take = want.min(chunk.len());
                self.carry
                    .extend_from_slice(chunk.get(..take).unwrap_or_default());
                let mut cur = &self.carry[..];
                match decode(&mut cur) {
                    Ok(v) => {
                        let used = self.carry.len() - cur.len();
                        if used >= old {
                            // The value ends in the copied prefix: the rest stays in the chunk.
                            chunk.advance((used - old).min(chunk.len()));
                            self.carry.clear();
                            if chunk.is_empty() {
                                self.chunks.pop_front();
                            }
                        } else {
                            self.carry.truncate(old);
                            self.carry.advance(used);
                        }
                        return Ok(Some(v));
                    }
                    Err(DecodeError::Short) if take < chunk.len() => {
                        self.carry.truncate(old);
                        want = want.saturating_mul(2);
                    }
                    Err(DecodeError::Short) => {
                        // All of the chunk belongs to the value: on to the next one.
                        self.chunks.pop_front();
                        break;
                    }
                    Err(e) => {
                        self.carry.truncate(old);
                        return Err(e);
                    }
                }
            }
        }
    }
}

impl From<BytesMut> for RecvBuf {
    fn from(carry: BytesMut) -> Self {
        RecvBuf {
            carry,
            chunks: VecDeque::new(),
        }
    }
}

impl DecodeBuf for RecvBuf {
    fn decode_front<T>(
        &mut self,
        mut decode: impl FnMut(&mut &[u8]) -> Result<T, DecodeError>,
    ) -> Result<Option<T>, DecodeError> {
        if !self.carry.is_empty() {
            return self.decode_carried(&mut decode);
        }
        let Some(chunk) = self.chunks.front_mut() else {
            return match decode(&mut &[][..]) {
                Ok(v) => Ok(Some(v)),
                Err(DecodeError::Short) => Ok(None),
                Err(e) => Err(e),
            };
        };
        let mut cur = &chunk[..];
        match decode(&mut cur) {
            Ok(v) => {
                let used = chunk.len() - cur.len();
                chunk.advance(used);
                if chunk.is_empty() {
                    self.chunks.pop_front();
                }
                Ok(Some(v))
            }
            Err(DecodeError::Short) => {
                // The start of a value, split across chunks: carried, and completed by the
                // next chunk if there is one already.
                self.carry.extend_from_slice(chunk);
                self.chunks.pop_front();
                self.decode_carried(&mut decode)
            }
            Err(e) => Err(e),
        }
    }

    fn take_front(&mut self, max: usize) -> Option<Bytes> {
        if !self.carry.is_empty() {
            return self.carry.take_front(max);
        }
        let chunk = self.chunks.front_mut()?;
        let n = max.min(chunk.len());
        if n == 0 {
            return None;
        }
        if n == chunk.len() {
            return self.chunks.pop_front();
        }
        Some(chunk.split_to(n))
    }

    fn front(&self) -> &[u8] {
        if self.carry.is_empty() {
            self.chunks.front().map_or(&[][..], |c| &c[..])
        } else {
            &self.carry
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Properties;
    use crate::Version;
    use crate::data::{
        ObjectStatus, SubgroupEvent, SubgroupHeader, SubgroupId, SubgroupReader, SubgroupWriter,
    };

    /// Objects as (Object ID, payload).
    type Objects = Vec<(u64, Vec<u8>)>;

    /// A subgroup stream's bytes (after the header) and its objects.
    fn stream(v: Version) -> (SubgroupHeader, Vec<u8>, Objects) {
        let header = SubgroupHeader {
            track_alias: 7,
            group: 3,
            subgroup: SubgroupId::Explicit(1),
            priority: Some(0),
            properties: true,
            end_of_group: false,
            first_object: false,
        };
        let mut w = SubgroupWriter::new(header, v);
        let mut buf = Vec::new();
        let mut objects = Vec::new();
        let sizes = [0usize, 1, 5, 200, 3, 0, 70, 1];
        for (i, size) in sizes.iter().enumerate() {
            let id = i as u64 * 2;
            let payload: Vec<u8> = (0..*size).map(|b| (b + i) as u8).collect();
            w.encode_object(
                &mut buf,
                id,
                &Properties::default(),
                ObjectStatus::Normal,
                &payload,
            )
            .unwrap();
            objects.push((id, payload));
        }
        (header, buf, objects)
    }

    /// Decodes `chunks` through a [`RecvBuf`], assembling payloads; also returns how many
    /// payload events were not slices of a received chunk.
    fn decode(header: &SubgroupHeader, v: Version, chunks: &[Bytes]) -> (Objects, usize) {
        let mut r = SubgroupReader::new(*header, v);
        let mut buf = RecvBuf::new();
        let mut out: Objects = Vec::new();
        let mut copied = 0;
        for chunk in chunks {
            buf.push(chunk.clone());
            while let Some(ev) = r.next(&mut buf).unwrap() {
                match ev {
                    SubgroupEvent::Object(o) => out.push((o.id, Vec::new())),
                    SubgroupEvent::Payload { data, .. } => {
                        let inside = chunks.iter().any(|c| {
                            let range = c.as_ptr_range();
                            range.contains(&data.as_ptr()) && data.len() <= c.len()
                        });
                        if !inside {
                            copied += 1;
                        }
                        out.last_mut().unwrap().1.extend_from_slice(&data);
                    }
                }
            }
        }
        assert!(r.finish(buf.front()).is_ok(), "ends at an object boundary");
        assert!(buf.is_empty());
        (out, copied)
    }

    /// A subgroup stream fed in two chunks split at every position, and in chunks of every
    /// size from 1 to 9 bytes, decodes the same objects; fed whole, no payload is copied.
    #[test]
    fn every_split_decodes_the_same_objects() {
        for v in [Version::Draft14, Version::Draft16, Version::Draft19] {
            let (header, bytes, objects) = stream(v);
            let whole = Bytes::from(bytes.clone());
            let (got, copied) = decode(&header, v, std::slice::from_ref(&whole));
            assert_eq!(got, objects, "{v:?} whole");
            assert_eq!(copied, 0, "{v:?}: payload in one chunk is never copied");
            for at in 0..=bytes.len() {
                let chunks = [whole.slice(..at), whole.slice(at..)];
                let (got, _) = decode(&header, v, &chunks);
                assert_eq!(got, objects, "{v:?} split at {at}");
            }
            for size in 1..10 {
                let chunks: Vec<Bytes> = bytes.chunks(size).map(Bytes::copy_from_slice).collect();
                let (got, _) = decode(&header, v, &chunks);
                assert_eq!(got, objects, "{v:?} chunks of {size}");
            }
        }
    }

    /// Chunks pushed all at once before any decoding (as a reader that takes every chunk the
    /// transport has ready does) decode the same objects, in chunks of every size from 1 to 9
    /// bytes and split in two at every position; no chunk is copied on push.
    #[test]
    fn chunks_pushed_together_decode_the_same_objects() {
        for v in [Version::Draft14, Version::Draft16, Version::Draft19] {
            let (header, bytes, objects) = stream(v);
            let whole = Bytes::from(bytes.clone());
            let mut splits: Vec<Vec<Bytes>> = (1..10)
                .map(|size| bytes.chunks(size).map(Bytes::copy_from_slice).collect())
                .collect();
            splits.extend((0..=bytes.len()).map(|at| vec![whole.slice(..at), whole.slice(at..)]));
            for chunks in splits {
                let mut r = SubgroupReader::new(header, v);
                let mut buf = RecvBuf::new();
                for c in &chunks {
                    buf.push(c.clone());
                }
                assert_eq!(buf.len(), bytes.len());
                let mut got: Objects = Vec::new();
                while let Some(ev) = r.next(&mut buf).unwrap() {
                    match ev {
                        SubgroupEvent::Object(o) => got.push((o.id, Vec::new())),
                        SubgroupEvent::Payload { data, .. } => {
                            got.last_mut().unwrap().1.extend_from_slice(&data)
                        }
                    }
                }
                assert!(r.finish(buf.front()).is_ok(), "ends at an object boundary");
                assert!(buf.is_empty());
                assert_eq!(got, objects, "{v:?} in {} chunks", chunks.len());
            }
        }
    }

    /// A carry that holds more than one value yields them all before it needs a chunk.
    #[test]
    fn carry_with_two_values_needs_no_chunk() {
        let mut b = RecvBuf::from(BytesMut::from(&[1u8, 2, 3, 4][..]));
        let two = |cur: &mut &[u8]| {
            if cur.len() < 2 {
                return Err(DecodeError::Short);
            }
            let v = cur[..2].to_vec();
            cur.advance(2);
            Ok(v)
        };
        assert_eq!(b.decode_front(two).unwrap(), Some(vec![1, 2]));
        assert_eq!(b.decode_front(two).unwrap(), Some(vec![3, 4]));
        assert_eq!(b.decode_front(two).unwrap(), None);
        assert!(b.is_empty());
    }

    /// A value longer than the first carried prefix still completes across chunks, and what
    /// follows it stays in the chunk.
    #[test]
    fn long_value_across_chunks() {
        let mut b = RecvBuf::new();
        let data: Vec<u8> = (0..=255u8).collect();
        let need = |n: usize| {
            move |cur: &mut &[u8]| {
                if cur.len() < n {
                    return Err(DecodeError::Short);
                }
                let v = cur[..n].to_vec();
                cur.advance(n);
                Ok(v)
            }
        };
        b.push(Bytes::copy_from_slice(&data[..10]));
        assert_eq!(b.decode_front(need(150)).unwrap(), None);
        let rest = Bytes::copy_from_slice(&data[10..]);
        b.push(rest.clone());
        assert_eq!(
            b.decode_front(need(150)).unwrap(),
            Some(data[..150].to_vec())
        );
        assert_eq!(b.len(), 106);
        let tail = b.take_front(usize::MAX).unwrap();
        assert_eq!(&tail[..], &data[150..]);
        assert_eq!(
            tail.as_ptr(),
            rest[140..].as_ptr(),
            "left in the chunk, not copied"
        );
    }
}
