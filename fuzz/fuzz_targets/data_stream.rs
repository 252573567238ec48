//! Unidirectional data streams: `StreamType::peek`, then the subgroup reader (header, objects,
//! `finish`) and the fetch reader (in the group order the input picks), fed in chunks. What a
//! reader decodes is written again with `SubgroupWriter` / `FetchWriter` and must read back the
//! same.
//!
//! Input: byte 0 picks the version (bit 0), the fetch group order (bit 1) and the chunk size
//! (bits 2-7); the rest is the stream.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use moq_core::data::{
    FetchEvent, FetchHeader, FetchObject, FetchReader, FetchWriter, ObjectStatus, RangeEnd,
    StreamType, SubgroupEvent, SubgroupHeader, SubgroupObject, SubgroupReader, SubgroupWriter,
};
use moq_core::{DecodeError, GroupOrder, Location, Version};

/// An object with its payload, or a fetch End of Range.
#[derive(Debug, PartialEq, Eq)]
enum Entry<O> {
    Object(O, Vec<u8>),
    End(RangeEnd, Location),
}

/// Reads a subgroup stream; returns the header and the complete objects, or `None` if the
/// header does not decode.
fn read_subgroup(
    data: &[u8],
    chunk: usize,
    v: Version,
) -> Option<(SubgroupHeader, Vec<Entry<SubgroupObject>>)> {
    let mut buf = BytesMut::new();
    let mut reader: Option<SubgroupReader> = None;
    let mut out: Vec<Entry<SubgroupObject>> = Vec::new();
    let mut open = false;
    for part in data.chunks(chunk) {
        buf.extend_from_slice(part);
        if reader.is_none() {
            let mut cur = &buf[..];
            match SubgroupHeader::decode(&mut cur, v) {
                Ok(h) => {
                    let used = buf.len() - cur.len();
                    let _ = buf.split_to(used);
                    reader = Some(SubgroupReader::new(h, v));
                }
                Err(DecodeError::Short) => continue,
                Err(_) => return None,
            }
        }
        let r = reader.as_mut()?;
        loop {
            match r.next(&mut buf) {
                Ok(Some(SubgroupEvent::Object(o))) => {
                    assert!(!open, "object header inside a payload");
                    open = o.payload_len > 0;
                    out.push(Entry::Object(o, Vec::new()));
                }
                Ok(Some(SubgroupEvent::Payload { data, last })) => {
                    assert!(open && !data.is_empty());
                    if let Some(Entry::Object(o, p)) = out.last_mut() {
                        p.extend_from_slice(&data);
                        assert_eq!(last, p.len() as u64 == o.payload_len);
                    }
                    open = !last;
                }
                Ok(None) => break,
                Err(_) => break,
            }
        }
    }
    let r = reader?;
    let _ = r.finish(&buf);
    // Keep only complete objects.
    if open {
        out.pop();
    }
    Some((*r.header(), out))
}

fn subgroup(data: &[u8], chunk: usize, v: Version) {
    let Some((header, entries)) = read_subgroup(data, chunk, v) else {
        return;
    };
    let mut w = SubgroupWriter::new(header, v);
    let mut bytes = Vec::new();
    w.encode_header(&mut bytes).expect("header re-encodes");
    for e in &entries {
        if let Entry::Object(o, payload) = e {
            assert!(o.status == ObjectStatus::Normal || payload.is_empty());
            w.encode_object(&mut bytes, o.id, &o.properties, o.status, payload)
                .expect("decoded object re-encodes");
        }
    }
    let (h2, again) = read_subgroup(&bytes, bytes.len().max(1), v).expect("re-encoded header");
    assert_eq!(h2, header);
    assert_eq!(again, entries);
}

/// Reads a fetch stream's entries (complete objects and End of Range markers).
fn read_fetch(
    data: &[u8],
    chunk: usize,
    order: GroupOrder,
    v: Version,
) -> Option<(u64, Vec<Entry<FetchObject>>)> {
    let mut buf = BytesMut::new();
    let mut reader: Option<FetchReader> = None;
    let mut request_id = 0;
    let mut out: Vec<Entry<FetchObject>> = Vec::new();
    let mut open = false;
    for part in data.chunks(chunk) {
        buf.extend_from_slice(part);
        if reader.is_none() {
            let mut cur = &buf[..];
            match FetchHeader::decode(&mut cur, v) {
                Ok(h) => {
                    request_id = h.request_id;
                    let used = buf.len() - cur.len();
                    let _ = buf.split_to(used);
                    reader = Some(FetchReader::new(order, v));
                }
                Err(DecodeError::Short) => continue,
                Err(_) => return None,
            }
        }
        let r = reader.as_mut()?;
        loop {
            match r.next(&mut buf) {
                Ok(Some(FetchEvent::Object(o))) => {
                    assert!(!open);
                    open = o.payload_len > 0;
                    out.push(Entry::Object(o, Vec::new()));
                }
                Ok(Some(FetchEvent::Payload { data, last })) => {
                    assert!(open && !data.is_empty());
                    if let Some(Entry::Object(o, p)) = out.last_mut() {
                        p.extend_from_slice(&data);
                        assert_eq!(last, p.len() as u64 == o.payload_len);
                    }
                    open = !last;
                }
                Ok(Some(FetchEvent::EndOfRange { kind, location })) => {
                    assert!(!open);
                    out.push(Entry::End(kind, location));
                }
                Ok(None) => break,
                Err(_) => break,
            }
        }
    }
    let r = reader?;
    let _ = r.finish(&buf);
    if open {
        out.pop();
    }
    Some((request_id, out))
}

fn fetch(data: &[u8], chunk: usize, order: GroupOrder, v: Version) {
    let Some((request_id, entries)) = read_fetch(data, chunk, order, v) else {
        return;
    };
    // The reader accepts some sequences the writer will not produce (an object repeated, an
    // End of Range in the prior entry's group): re-encode the prefix the writer accepts.
    let mut w = FetchWriter::new(order, v);
    let mut bytes = Vec::new();
    FetchHeader { request_id }
        .encode(&mut bytes, v)
        .expect("header re-encodes");
    let mut written = 0;
    for e in &entries {
        let ok = match e {
            Entry::Object(o, payload) => {
                let ok = w.encode_object(&mut bytes, o).is_ok();
                if ok {
                    bytes.extend_from_slice(payload);
                }
                ok
            }
            Entry::End(kind, loc) => w.encode_end_of_range(&mut bytes, *kind, *loc).is_ok(),
        };
        if !ok {
            break;
        }
        written += 1;
    }
    let (rid, again) = read_fetch(&bytes, bytes.len().max(1), order, v).expect("re-encoded");
    assert_eq!(rid, request_id);
    assert_eq!(again, entries[..written]);
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let v = if first & 1 == 0 {
        Version::Draft18
    } else {
        Version::Draft19
    };
    let order = if first & 2 == 0 {
        GroupOrder::Ascending
    } else {
        GroupOrder::Descending
    };
    let chunk = usize::from(first >> 2).max(1);

    let _ = StreamType::peek(rest, v);
    // Run both readers whatever the type says, so each sees every input.
    subgroup(rest, chunk, v);
    fetch(rest, chunk, order, v);
});
