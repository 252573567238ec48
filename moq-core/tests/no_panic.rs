//! Decoders never panic on hostile input, under both versions: arbitrary bytes, bytes behind a
//! valid header or frame, and mutated encodings of valid messages go through `Message::decode`,
//! `MessageReader` (in arbitrary chunks), `Datagram::decode`, `StreamType::peek`, the subgroup
//! reader (with `finish`) and the fetch reader. Whatever control message still decodes must
//! re-encode and decode to the same value.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

mod common;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;

use common::{chunks, version, versioned_message};
use moq_core::GroupOrder;
use moq_core::Version;
use moq_core::coding::Vi64;
use moq_core::data::{
    Datagram, FetchHeader, FetchReader, StreamType, SubgroupHeader, SubgroupReader,
};
use moq_core::message::{Message, MessageReader, frame_len, peek_request_id};

/// Upper bound on events read from one stream; readers always make progress, so this is only a
/// guard against a reader that loops without consuming.
const MAX_EVENTS: usize = 100_000;

/// A decoded message must survive encode then decode unchanged.
fn reencodes(msg: &Message, v: Version) {
    let bytes = msg
        .encode_to_vec(v)
        .unwrap_or_else(|e| panic!("decoded {msg:?} but cannot encode it: {e}"));
    assert_eq!(&Message::decode(&mut &bytes[..], v).unwrap(), msg);
}

/// Runs every control-plane decoder over `data`.
fn control(data: &[u8], sizes: &[usize], v: Version) {
    if let Ok(msg) = Message::decode(&mut &data[..], v) {
        reencodes(&msg, v);
    }
    let _ = frame_len(data, v);
    let _ = peek_request_id(data, v);
    let mut r = MessageReader::new(v);
    'feed: for chunk in chunks(data, sizes) {
        r.push(chunk);
        loop {
            match r.next_message() {
                Ok(Some(msg)) => reencodes(&msg, v),
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
    }
}

/// Runs every data-plane decoder over `data`.
fn data_plane(data: &[u8], sizes: &[usize], v: Version) {
    if let Ok(Datagram::Object(d)) = Datagram::decode(Bytes::copy_from_slice(data), v) {
        let again = d.encode_to_bytes(v).unwrap();
        assert_eq!(
            Datagram::decode(again, v).unwrap(),
            Datagram::Object(d.clone())
        );
    }
    let _ = StreamType::peek(data, v);
    subgroup(data, sizes, v);
    fetch(data, sizes, v, GroupOrder::Ascending);
    fetch(data, sizes, v, GroupOrder::Descending);
}

fn subgroup(data: &[u8], sizes: &[usize], v: Version) {
    let mut buf = BytesMut::new();
    let mut reader: Option<SubgroupReader> = None;
    let mut events = 0;
    for chunk in chunks(data, sizes) {
        buf.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &buf[..];
            match SubgroupHeader::decode(&mut cur, v) {
                Ok(h) => {
                    let used = buf.len() - cur.len();
                    let _ = buf.split_to(used);
                    reader = Some(SubgroupReader::new(h, v));
                }
                Err(moq_core::DecodeError::Short) => continue,
                Err(_) => return,
            }
        }
        let r = reader.as_mut().unwrap();
        loop {
            match r.next(&mut buf) {
                Ok(Some(_)) => {
                    events += 1;
                    assert!(events < MAX_EVENTS);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    if let Some(r) = reader {
        let _ = r.finish(&buf);
    }
}

fn fetch(data: &[u8], sizes: &[usize], v: Version, order: GroupOrder) {
    let mut buf = BytesMut::new();
    let mut reader: Option<FetchReader> = None;
    let mut events = 0;
    for chunk in chunks(data, sizes) {
        buf.extend_from_slice(chunk);
        if reader.is_none() {
            let mut cur = &buf[..];
            match FetchHeader::decode(&mut cur, v) {
                Ok(_) => {
                    let used = buf.len() - cur.len();
                    let _ = buf.split_to(used);
                    reader = Some(FetchReader::new(order, v));
                }
                Err(moq_core::DecodeError::Short) => continue,
                Err(_) => return,
            }
        }
        let r = reader.as_mut().unwrap();
        loop {
            match r.next(&mut buf) {
                Ok(Some(_)) => {
                    events += 1;
                    assert!(events < MAX_EVENTS);
                }
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
    if let Some(r) = reader {
        let _ = r.finish(&buf);
    }
}

/// Valid message type codes, so random bodies reach the body decoders.
const MESSAGE_TYPES: [u64; 18] = [
    0x2F00, 0x10, 0x03, 0x04, 0x02, 0x1D, 0x0B, 0x16, 0x18, 0x0D, 0x06, 0x08, 0x0E, 0x50, 0x51,
    0x0F, 0x07, 0x05,
];

/// A frame of a known type with a random body whose Length is right.
fn framed_garbage() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::sample::select(&MESSAGE_TYPES[..]),
        vec(any::<u8>(), 0..200),
    )
        .prop_map(|(ty, body)| {
            let mut out = Vec::new();
            Vi64::encode(ty, &mut out);
            out.extend_from_slice(&(body.len() as u16).to_be_bytes());
            out.extend_from_slice(&body);
            out
        })
}

/// A valid data stream or datagram header followed by random bytes; biased towards small
/// values so flags, deltas and lengths often make sense.
fn headed_garbage() -> impl Strategy<Value = Vec<u8>> {
    let body = vec(prop_oneof![4 => 0u8..8, 1 => any::<u8>()], 0..200);
    let subgroup_type =
        (0u8..0x80).prop_filter("valid", |t| SubgroupHeader::valid_type((*t).into()));
    prop_oneof![
        (subgroup_type, vec(0u8..4, 2..4), body.clone())
            .prop_map(|(t, h, b)| [vec![t], h, b].concat()),
        body.clone().prop_map(|b| [vec![0x05, 0x00], b].concat()),
        (0u8..0x30, body).prop_map(|(t, b)| [vec![t], b].concat()),
    ]
}

/// Byte edits applied to an encoding: (position, new byte), or a truncation.
#[derive(Clone, Debug)]
enum Edit {
    Set(usize, u8),
    Insert(usize, u8),
    Remove(usize),
    Truncate(usize),
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    vec(
        prop_oneof![
            4 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Set(i, b)),
            1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
            1 => any::<usize>().prop_map(Edit::Remove),
            1 => any::<usize>().prop_map(Edit::Truncate),
        ],
        1..4,
    )
}

fn apply(mut data: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        if data.is_empty() {
            break;
        }
        let n = data.len();
        match *e {
            Edit::Set(i, b) => data[i % n] = b,
            Edit::Insert(i, b) => data.insert(i % (n + 1), b),
            Edit::Remove(i) => {
                data.remove(i % n);
            }
            Edit::Truncate(i) => data.truncate(i % n),
        }
    }
    data
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn arbitrary_bytes(v in version(), data in vec(any::<u8>(), 0..300), sizes in vec(1usize..40, 0..6)) {
        control(&data, &sizes, v);
        data_plane(&data, &sizes, v);
    }

    #[test]
    fn framed_random_bodies(v in version(), data in framed_garbage(), sizes in vec(1usize..40, 0..6)) {
        control(&data, &sizes, v);
    }

    #[test]
    fn headed_random_streams(v in version(), data in headed_garbage(), sizes in vec(1usize..40, 0..6)) {
        data_plane(&data, &sizes, v);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Valid messages with a few bytes changed, inserted, removed or cut off.
    #[test]
    fn mutated_messages((v, msg) in versioned_message(), e in edits(), sizes in vec(1usize..64, 0..6)) {
        let data = apply(msg.encode_to_vec(v).unwrap(), &e);
        control(&data, &sizes, v);
        // The same bytes read under the other version.
        let other = if v == Version::Draft18 { Version::Draft19 } else { Version::Draft18 };
        control(&data, &sizes, other);
    }

    /// A valid message decoded under the other version either decodes to something that
    /// re-encodes, or is rejected; never a panic.
    #[test]
    fn cross_version((v, msg) in versioned_message()) {
        let data = msg.encode_to_vec(v).unwrap();
        let other = if v == Version::Draft18 { Version::Draft19 } else { Version::Draft18 };
        control(&data, &[], other);
    }
}

/// The extremes of the integer encoding in every data-plane position: 9-byte vi64s everywhere.
#[test]
fn extreme_varints_do_not_panic() {
    let max = {
        let mut b = Vec::new();
        Vi64::encode(u64::MAX, &mut b);
        b
    };
    for v in [Version::Draft18, Version::Draft19] {
        for t in [0x10u8, 0x12, 0x14, 0x15, 0x3D, 0x7D] {
            let mut data = vec![t];
            for _ in 0..12 {
                data.extend_from_slice(&max);
            }
            data_plane(&data, &[], v);
            data_plane(&data, &[1], v);
        }
        let mut fetch = vec![0x05];
        fetch.extend_from_slice(&max);
        for flags in [0x1Fu8, 0x3F, 0x7F, 0x0C, 0x04] {
            fetch.push(flags);
            for _ in 0..4 {
                fetch.extend_from_slice(&max);
            }
        }
        data_plane(&fetch, &[], v);
    }
}
