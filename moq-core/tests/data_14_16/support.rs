//! Helpers shared by the draft-14/16 data-plane tests: headers and objects, writing and reading
//! streams in pieces.

use bytes::{Bytes, BytesMut};
use moq_core::coding::QuicVarInt;
use moq_core::data::{
    DEFAULT_PUBLISHER_PRIORITY, DatagramBody, FetchEvent, FetchHeader, FetchObject, FetchReader,
    FetchWriter, ObjectDatagram, ObjectStatus, RangeEnd, SubgroupEvent, SubgroupHeader,
    SubgroupReader, SubgroupWriter,
};
use moq_core::{
    DecodeError, EncodeError, GroupOrder, KeyValuePair, Location, Properties, Version, property,
};
use proptest::collection::vec;
use proptest::prelude::*;

pub(crate) const D14: Version = Version::Draft14;
pub(crate) const D15: Version = Version::Draft15;
pub(crate) const D16: Version = Version::Draft16;
pub(crate) const D18: Version = Version::Draft18;
pub(crate) const D19: Version = Version::Draft19;
/// The versions this file is about.
pub(crate) const OLD: [Version; 3] = [D14, D15, D16];

pub(crate) fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// Splits `data` into pieces of the sizes in `sizes` (cycled); one piece if `sizes` is empty.
fn chunks<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = if sizes.is_empty() {
            rest.len()
        } else {
            sizes[i % sizes.len()].clamp(1, rest.len())
        };
        let (a, b) = rest.split_at(n);
        out.push(a);
        rest = b;
        i += 1;
    }
    out
}

pub(crate) fn qvi(x: u64) -> Vec<u8> {
    let mut out = Vec::new();
    QuicVarInt::encode(x, &mut out).unwrap();
    out
}

// ---------------------------------------------------------------------------------------------
// Predicates

/// The lowest and highest supported draft for which `f` holds.
pub(crate) fn span(f: fn(Version) -> bool) -> (Option<u32>, Option<u32>) {
    let on = Version::ALL.iter().copied().filter(|v| f(*v));
    let drafts: Vec<u32> = on.map(Version::draft).collect();
    (drafts.iter().copied().min(), drafts.iter().copied().max())
}

// ---------------------------------------------------------------------------------------------
// Subgroup streams

/// One object of a subgroup stream, payload included.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Obj {
    pub(crate) id: u64,
    pub(crate) properties: Properties,
    pub(crate) status: ObjectStatus,
    pub(crate) payload: Vec<u8>,
}

pub(crate) fn obj(id: u64, properties: Properties, status: ObjectStatus, payload: &[u8]) -> Obj {
    Obj {
        id,
        properties,
        status,
        payload: payload.to_vec(),
    }
}

/// Writes a subgroup stream.
pub(crate) fn write_subgroup(h: SubgroupHeader, objs: &[Obj], v: Version) -> Vec<u8> {
    let mut w = SubgroupWriter::new(h, v);
    let mut bytes = Vec::new();
    w.encode_header(&mut bytes).unwrap();
    for o in objs {
        w.encode_object(&mut bytes, o.id, &o.properties, o.status, &o.payload)
            .unwrap();
    }
    assert_eq!(w.last_object(), objs.last().map(|o| o.id));
    bytes
}

/// What reading a subgroup stream gave.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ReadSubgroup {
    pub(crate) header: SubgroupHeader,
    pub(crate) objects: Vec<Obj>,
    pub(crate) subgroup_id: Option<u64>,
    pub(crate) last_object: Option<u64>,
}

/// Reads a subgroup stream fed in pieces of `sizes`, checking the events' order.
pub(crate) fn read_subgroup(
    bytes: &[u8],
    v: Version,
    sizes: &[usize],
) -> Result<ReadSubgroup, DecodeError> {
    let mut pending = BytesMut::new();
    let mut reader: Option<SubgroupReader> = None;
    let mut got: Vec<(Obj, u64)> = Vec::new();
    let mut open = false;
    for chunk in chunks(bytes, sizes) {
        pending.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &pending[..];
            match SubgroupHeader::decode(&mut cur, v) {
                Ok(h) => {
                    let used = pending.len() - cur.len();
                    let _ = pending.split_to(used);
                    reader = Some(SubgroupReader::new(h, v));
                }
                Err(DecodeError::Short) => continue,
                Err(e) => return Err(e),
            }
        }
        let r = reader.as_mut().unwrap();
        while let Some(ev) = r.next(&mut pending)? {
            match ev {
                SubgroupEvent::Object(o) => {
                    assert!(!open, "object inside a payload");
                    open = o.payload_len > 0;
                    got.push((obj(o.id, o.properties, o.status, b""), o.payload_len));
                }
                SubgroupEvent::Payload { data, last } => {
                    assert!(open && !data.is_empty());
                    let (cur, len) = got.last_mut().unwrap();
                    cur.payload.extend_from_slice(&data);
                    assert_eq!(last, cur.payload.len() as u64 == *len);
                    open = !last;
                }
            }
        }
    }
    let r = reader.ok_or(DecodeError::Short)?;
    r.finish(&pending)?;
    Ok(ReadSubgroup {
        header: *r.header(),
        objects: got.into_iter().map(|(o, _)| o).collect(),
        subgroup_id: r.subgroup_id(),
        last_object: r.last_object(),
    })
}

/// The header as a reader under `v` sees it after `h` was written: draft-14 writes an
/// inherited priority as 128, and no version before draft-18 has FIRST_OBJECT.
pub(crate) fn as_read(h: SubgroupHeader, v: Version) -> SubgroupHeader {
    SubgroupHeader {
        priority: match h.priority {
            None if !v.has_default_priority() => Some(DEFAULT_PUBLISHER_PRIORITY),
            p => p,
        },
        first_object: h.first_object && v.has_first_object_bit(),
        ..h
    }
}

/// The two extension headers of the second example of draft-14 §10.5 / draft-16 §10.5.
pub(crate) fn example_properties() -> Properties {
    Properties::new()
        .with_int(4, 2_186_796_243)
        .unwrap()
        .with_bytes(77, &b"traceID:123456"[..])
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Datagrams

pub(crate) fn datagram(
    object: u64,
    priority: Option<u8>,
    properties: Properties,
    end_of_group: bool,
    body: DatagramBody,
) -> ObjectDatagram {
    ObjectDatagram {
        track_alias: 1,
        group: 2,
        object,
        priority,
        properties,
        end_of_group,
        body,
    }
}

pub(crate) fn hi() -> DatagramBody {
    DatagramBody::Payload(Bytes::from_static(b"hi"))
}

// ---------------------------------------------------------------------------------------------
// Fetch streams

/// One entry of a fetch stream as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    Object(FetchObject, Vec<u8>),
    End(RangeEnd, Location),
}

pub(crate) fn fobj(
    g: u64,
    o: u64,
    subgroup: Option<u64>,
    priority: u8,
    properties: Properties,
    payload: &[u8],
) -> Entry {
    Entry::Object(
        FetchObject {
            location: Location::new(g, o),
            subgroup,
            priority,
            properties,
            payload_len: payload.len() as u64,
        },
        payload.to_vec(),
    )
}

pub(crate) fn write_fetch(
    order: GroupOrder,
    request_id: u64,
    entries: &[Entry],
    v: Version,
) -> Result<Vec<u8>, EncodeError> {
    let mut bytes = Vec::new();
    FetchHeader { request_id }.encode(&mut bytes, v)?;
    let mut w = FetchWriter::new(order, v);
    for e in entries {
        match e {
            Entry::Object(o, payload) => {
                w.encode_object(&mut bytes, o)?;
                bytes.extend_from_slice(payload);
            }
            Entry::End(kind, loc) => w.encode_end_of_range(&mut bytes, *kind, *loc)?,
        }
    }
    Ok(bytes)
}

/// Reads a fetch stream fed in pieces of `sizes`.
pub(crate) fn read_fetch(
    bytes: &[u8],
    order: GroupOrder,
    v: Version,
    sizes: &[usize],
) -> Result<(u64, Vec<Entry>), DecodeError> {
    let mut pending = BytesMut::new();
    let mut reader: Option<FetchReader> = None;
    let mut request_id = None;
    let mut got: Vec<Entry> = Vec::new();
    let mut open = false;
    for chunk in chunks(bytes, sizes) {
        pending.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &pending[..];
            match FetchHeader::decode(&mut cur, v) {
                Ok(h) => {
                    request_id = Some(h.request_id);
                    let used = pending.len() - cur.len();
                    let _ = pending.split_to(used);
                    reader = Some(FetchReader::new(order, v));
                }
                Err(DecodeError::Short) => continue,
                Err(e) => return Err(e),
            }
        }
        let r = reader.as_mut().unwrap();
        while let Some(ev) = r.next(&mut pending)? {
            match ev {
                FetchEvent::Object(o) => {
                    assert!(!open);
                    open = o.payload_len > 0;
                    got.push(Entry::Object(o, Vec::new()));
                }
                FetchEvent::Payload { data, last } => {
                    assert!(open && !data.is_empty());
                    let Some(Entry::Object(o, p)) = got.last_mut() else {
                        panic!("payload without an object");
                    };
                    p.extend_from_slice(&data);
                    assert_eq!(last, p.len() as u64 == o.payload_len);
                    open = !last;
                }
                FetchEvent::EndOfRange { kind, location } => {
                    assert!(!open);
                    got.push(Entry::End(kind, location));
                }
            }
        }
    }
    let r = reader.ok_or(DecodeError::Short)?;
    r.finish(&pending)?;
    Ok((request_id.unwrap_or_default(), got))
}

// ---------------------------------------------------------------------------------------------
// Properties (Extension Headers)

pub(crate) fn imm(pairs: &[KeyValuePair], v: Version) -> Bytes {
    // The nested pairs as `v` writes them, built through a Properties of their own.
    let mut out = Vec::new();
    Properties::from_pairs(pairs.iter().cloned())
        .unwrap()
        .encode_all(&mut out, v)
        .unwrap();
    out.into()
}

/// A `u64` that fits a QUIC varint, spread over its four lengths.
pub(crate) fn qvarint() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..0x40,
        2 => 0x40u64..0x4000,
        1 => 0x4000u64..0x4000_0000,
        1 => 0x4000_0000u64..=QuicVarInt::MAX,
        1 => Just(QuicVarInt::MAX),
    ]
}

pub(crate) fn kvp() -> impl Strategy<Value = KeyValuePair> {
    prop_oneof![
        (0u64..0x100, qvarint()).prop_map(|(k, x)| KeyValuePair::int(k & !1, x).unwrap()),
        // Not IMMUTABLE_PROPERTIES (0x0B), whose value must hold pairs.
        (0u64..0x4000, vec(any::<u8>(), 0..16)).prop_map(|(k, b)| {
            let k = if k | 1 == property::IMMUTABLE_PROPERTIES {
                0x0D
            } else {
                k | 1
            };
            KeyValuePair::bytes(k, b).unwrap()
        }),
    ]
}

pub(crate) fn properties() -> impl Strategy<Value = Properties> {
    vec(kvp(), 0..5).prop_map(|p| Properties::from_pairs(p).unwrap())
}
