//! Draft-19 data-plane vectors: SUBGROUP_HEADER (§11.4.2, the examples of §11.6), OBJECT_DATAGRAM
//! (§11.3.1), FETCH_HEADER and fetch objects (§11.4.4).

use bytes::{Bytes, BytesMut};
use moq_core::data::{
    Datagram, DatagramBody, FetchEvent, FetchHeader, FetchObject, FetchReader, FetchWriter,
    ObjectDatagram, ObjectStatus, RangeEnd, StreamType, SubgroupEvent, SubgroupHeader, SubgroupId,
    SubgroupReader, SubgroupWriter,
};
use moq_core::{GroupOrder, KeyValuePair, KvpValue, Location, Properties};

use crate::support::{D18, D19, cat};

// ---------------------------------------------------------------------------------------------
// SUBGROUP_HEADER (§11.4.2): the two examples of §11.6

#[test]
fn subgroup_example_1() {
    let bytes = cat(&[
        &[0x14, 0x02, 0x00, 0x00, 0x00], // Type 0x14, Alias 2, Group 0, Subgroup 0, Priority 0
        &[0x00, 0x04],                   // Object ID Delta 0 (ID 0), Payload Length 4
        b"abcd",
        &[0x00, 0x04], // Object ID Delta 0 (ID 1), Payload Length 4
        b"efgh",
    ]);
    let header = SubgroupHeader {
        track_alias: 2,
        group: 0,
        subgroup: SubgroupId::Explicit(0),
        priority: Some(0),
        properties: false,
        end_of_group: false,
        first_object: false,
    };
    let objects = [
        (0, Properties::new(), b"abcd"),
        (1, Properties::new(), b"efgh"),
    ];
    check_subgroup(&bytes, header, &objects);
}

/// The draft's text gives "Properties Length = 33" and "Length = 21" for this example, but the
/// pairs it lists (type 4 = 2186796243, type 77 = "traceID:123456") take 1 + 5 + 1 + 1 + 14 =
/// 22 bytes, and the string is 14 bytes long. The bytes below follow the structure.
#[test]
fn subgroup_example_2() {
    let bytes = cat(&[
        &[0x35, 0x02, 0x00, 0x00], // Type 0x35 (no priority), Alias 2, Group 0, Subgroup 0
        &[0x00],                   // Object ID Delta 0 (ID 0)
        &[0x16],                   // Properties Length 22
        &[0x04, 0xF0, 0x82, 0x57, 0xDC, 0xD3], // Type 4 = 2186796243 (5-byte vi64)
        &[0x49, 0x0E],             // Delta 73 -> Type 77, Length 14
        b"traceID:123456",
        &[0x04], // Payload Length 4
        b"abcd",
        &[0x00, 0x00, 0x04], // Delta 0 (ID 1), Properties Length 0, Payload Length 4
        b"efgh",
    ]);
    let header = SubgroupHeader {
        track_alias: 2,
        group: 0,
        subgroup: SubgroupId::Explicit(0),
        priority: None,
        properties: true,
        end_of_group: false,
        first_object: false,
    };
    let props = Properties::from_pairs([
        KeyValuePair {
            key: 4,
            value: KvpValue::Int(2_186_796_243),
        },
        KeyValuePair {
            key: 77,
            value: KvpValue::Bytes(Bytes::from_static(b"traceID:123456")),
        },
    ])
    .unwrap();
    let objects = [(0, props, b"abcd"), (1, Properties::new(), b"efgh")];
    check_subgroup(&bytes, header, &objects);
}

fn check_subgroup(bytes: &[u8], header: SubgroupHeader, objects: &[(u64, Properties, &[u8; 4])]) {
    for v in [D18, D19] {
        assert_eq!(
            StreamType::peek(bytes, v).unwrap(),
            Some(StreamType::Subgroup(bytes[0]))
        );
        let mut buf = BytesMut::from(bytes);
        assert_eq!(SubgroupHeader::decode(&mut buf, v).unwrap(), header);
        let mut r = SubgroupReader::new(header, v);
        for (id, props, payload) in objects {
            match r.next(&mut buf).unwrap() {
                Some(SubgroupEvent::Object(o)) => {
                    assert_eq!(o.id, *id);
                    assert_eq!(&o.properties, props);
                    assert_eq!(o.status, ObjectStatus::Normal);
                    assert_eq!(o.payload_len, 4);
                }
                other => panic!("expected an object, got {other:?}"),
            }
            assert_eq!(
                r.next(&mut buf).unwrap(),
                Some(SubgroupEvent::Payload {
                    data: Bytes::copy_from_slice(&payload[..]),
                    last: true
                })
            );
        }
        assert_eq!(r.next(&mut buf).unwrap(), None);
        r.finish(&buf).unwrap();
        assert_eq!(r.subgroup_id(), Some(0));

        let mut w = SubgroupWriter::new(header, v);
        let mut out = Vec::new();
        w.encode_header(&mut out).unwrap();
        for (id, props, payload) in objects {
            w.encode_object(&mut out, *id, props, ObjectStatus::Normal, &payload[..])
                .unwrap();
        }
        assert_eq!(out, bytes);
    }
}

// ---------------------------------------------------------------------------------------------
// OBJECT_DATAGRAM (§11.3.1)

#[test]
fn object_datagrams() {
    let cases = [
        (
            // Type 0x00: Object ID and Priority present, payload.
            vec![0x00, 0x01, 0x02, 0x03, 0x80, b'h', b'i'],
            ObjectDatagram {
                track_alias: 1,
                group: 2,
                object: 3,
                priority: Some(0x80),
                properties: Properties::new(),
                end_of_group: false,
                body: DatagramBody::Payload(Bytes::from_static(b"hi")),
            },
        ),
        (
            // Type 0x2D: STATUS | DEFAULT_PRIORITY | ZERO_OBJECT_ID | PROPERTIES, Normal status.
            vec![0x2D, 0x01, 0x02, 0x02, 0x3C, 0x01, 0x00],
            ObjectDatagram {
                track_alias: 1,
                group: 2,
                object: 0,
                priority: None,
                properties: Properties::new().with_int(0x3C, 1).unwrap(),
                end_of_group: false,
                body: DatagramBody::Status(ObjectStatus::Normal),
            },
        ),
        (
            // Type 0x0E: DEFAULT_PRIORITY | ZERO_OBJECT_ID | END_OF_GROUP, payload "x".
            vec![0x0E, 0x05, 0x06, b'x'],
            ObjectDatagram {
                track_alias: 5,
                group: 6,
                object: 0,
                priority: None,
                properties: Properties::new(),
                end_of_group: true,
                body: DatagramBody::Payload(Bytes::from_static(b"x")),
            },
        ),
        (
            // Type 0x24: STATUS | ZERO_OBJECT_ID, priority 7, End of Track.
            vec![0x24, 0x05, 0x06, 0x07, 0x04],
            ObjectDatagram {
                track_alias: 5,
                group: 6,
                object: 0,
                priority: Some(7),
                properties: Properties::new(),
                end_of_group: false,
                body: DatagramBody::Status(ObjectStatus::EndOfTrack),
            },
        ),
    ];
    for v in [D18, D19] {
        for (bytes, d) in &cases {
            assert_eq!(
                Datagram::decode(Bytes::copy_from_slice(bytes), v).unwrap(),
                Datagram::Object(d.clone())
            );
            assert_eq!(&d.encode_to_bytes(v).unwrap()[..], &bytes[..]);
        }
        // PADDING datagram: type 0x132B3E29 (5-byte vi64) then zeros.
        let pad = [0xF0, 0x13, 0x2B, 0x3E, 0x29, 0x00, 0x00];
        assert_eq!(
            Datagram::decode(Bytes::copy_from_slice(&pad), v).unwrap(),
            Datagram::Padding
        );
        assert_eq!(&Datagram::padding(7, v)[..], &pad[..]);
    }
}

// ---------------------------------------------------------------------------------------------
// FETCH_HEADER and fetch objects (§11.4.4)

fn fetch_obj(g: u64, o: u64, subgroup: Option<u64>, priority: u8, len: u64) -> FetchEvent {
    FetchEvent::Object(FetchObject {
        location: Location::new(g, o),
        subgroup,
        priority,
        properties: Properties::new(),
        payload_len: len,
    })
}

fn payload(b: &'static [u8]) -> FetchEvent {
    FetchEvent::Payload {
        data: Bytes::from_static(b),
        last: true,
    }
}

fn check_fetch(bytes: &[u8], request_id: u64, order: GroupOrder, events: &[FetchEvent]) {
    for v in [D18, D19] {
        assert_eq!(StreamType::peek(bytes, v).unwrap(), Some(StreamType::Fetch));
        let mut buf = BytesMut::from(bytes);
        assert_eq!(
            FetchHeader::decode(&mut buf, v).unwrap().request_id,
            request_id
        );
        let mut r = FetchReader::new(order, v);
        let mut got = Vec::new();
        while let Some(ev) = r.next(&mut buf).unwrap() {
            got.push(ev);
        }
        r.finish(&buf).unwrap();
        assert_eq!(got, events);

        let mut out = Vec::new();
        FetchHeader { request_id }.encode(&mut out, v).unwrap();
        let mut w = FetchWriter::new(order, v);
        for ev in events {
            match ev {
                FetchEvent::Object(o) => w.encode_object(&mut out, o).unwrap(),
                FetchEvent::Payload { data, .. } => out.extend_from_slice(data),
                FetchEvent::EndOfRange { kind, location } => {
                    w.encode_end_of_range(&mut out, *kind, *location).unwrap()
                }
            }
        }
        assert_eq!(out, bytes);
    }
}

#[test]
fn fetch_stream_ascending() {
    let bytes = cat(&[
        &[0x05, 0x07],                   // FETCH_HEADER, Request ID 7
        &[0x1C, 0x03, 0x00, 0x80, 0x01], // Group+Object+Priority: {3, 0}, prio 128, len 1
        b"a",
        &[0x00, 0x00],       // {3, 1}: prior + 1, subgroup 0, prior priority, len 0
        &[0x80, 0x8C],       // End of Non-Existent Range (2-byte vi64)
        &[0x01, 0x04],       //   Group 3 + 1 + 1 = 5, Object 4
        &[0x5C, 0x00, 0x00], // Datagram + Group + Object + Priority: {6, 0}
        &[0x09, 0x02],       //   priority 9, len 2
        b"zz",
        &[0x07, 0x05, 0x02, 0x00], // explicit subgroup 5, Object Delta 2: {6, 2}, len 0
        &[0x01, 0x00],             // prior subgroup (5), {6, 3}
        &[0x02, 0x00],             // prior subgroup + 1 (6), {6, 4}
    ]);
    let events = [
        fetch_obj(3, 0, Some(0), 128, 1),
        payload(b"a"),
        fetch_obj(3, 1, Some(0), 128, 0),
        FetchEvent::EndOfRange {
            kind: RangeEnd::NonExistent,
            location: Location::new(5, 4),
        },
        fetch_obj(6, 0, None, 9, 2),
        payload(b"zz"),
        fetch_obj(6, 2, Some(5), 9, 0),
        fetch_obj(6, 3, Some(5), 9, 0),
        fetch_obj(6, 4, Some(6), 9, 0),
    ];
    check_fetch(&bytes, 7, GroupOrder::Ascending, &events);
}

#[test]
fn fetch_stream_descending() {
    let bytes = [
        0x05, 0x00, // FETCH_HEADER, Request ID 0
        0x1C, 0x0A, 0x00, 0x01, 0x00, // {10, 0}, priority 1, len 0
        0x0C, 0x02, 0x05, 0x00, // Group 10 - (2 + 1) = 7, Object 5, len 0
        0x81, 0x0C, 0x00, 0x01, // End of Unknown Range (0x10C): Group 7 - 1 = 6, Object 1
    ];
    let events = [
        fetch_obj(10, 0, Some(0), 1, 0),
        fetch_obj(7, 5, Some(0), 1, 0),
        FetchEvent::EndOfRange {
            kind: RangeEnd::Unknown,
            location: Location::new(6, 1),
        },
    ];
    check_fetch(&bytes, 0, GroupOrder::Descending, &events);
}
