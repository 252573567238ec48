use super::*;
use crate::Version;
use crate::coding::DecodeError;
use crate::types::kvp::Properties;
use crate::types::location::{GroupOrder, Location};
use bytes::BytesMut;

const V: Version = Version::Draft19;

fn read_all(order: GroupOrder, bytes: &[u8]) -> Result<Vec<FetchEvent>, DecodeError> {
    let mut r = FetchReader::new(order, V);
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(ev) = r.next(&mut buf)? {
        out.push(ev);
    }
    r.finish(&buf)?;
    Ok(out)
}

fn obj(g: u64, o: u64, sg: Option<u64>, p: u8) -> FetchObject {
    FetchObject {
        location: Location::new(g, o),
        subgroup: sg,
        priority: p,
        properties: Properties::new(),
        payload_len: 0,
    }
}

#[test]
fn round_trip_both_orders() {
    for order in [GroupOrder::Ascending, GroupOrder::Descending] {
        let groups: Vec<u64> = match order {
            GroupOrder::Ascending => vec![1, 2, 5],
            GroupOrder::Descending => vec![5, 2, 1],
        };
        let mut objs = Vec::new();
        for g in &groups {
            objs.push(obj(*g, 0, Some(0), 1));
            objs.push(obj(*g, 1, Some(0), 1));
            objs.push(obj(*g, 3, Some(1), 2));
            objs.push(obj(*g, 4, None, 2));
            objs.push(obj(*g, 9, Some(7), 2));
        }
        let mut w = FetchWriter::new(order, V);
        let mut buf = Vec::new();
        FetchHeader { request_id: 4 }.encode(&mut buf, V).unwrap();
        for o in &objs {
            w.encode_object(&mut buf, o).unwrap();
        }
        let mut b = &buf[..];
        assert_eq!(FetchHeader::decode(&mut b, V).unwrap().request_id, 4);
        let events = read_all(order, b).unwrap();
        let got: Vec<FetchObject> = events
            .into_iter()
            .filter_map(|e| match e {
                FetchEvent::Object(o) => Some(o),
                _ => None,
            })
            .collect();
        assert_eq!(got, objs);
    }
}

#[test]
fn end_of_range_markers() {
    let mut w = FetchWriter::new(GroupOrder::Ascending, V);
    let mut buf = Vec::new();
    w.encode_object(&mut buf, &obj(1, 0, Some(0), 3)).unwrap();
    w.encode_end_of_range(&mut buf, RangeEnd::Unknown, Location::new(3, 4))
        .unwrap();
    w.encode_object(&mut buf, &obj(4, 0, Some(0), 3)).unwrap();
    let ev = read_all(GroupOrder::Ascending, &buf).unwrap();
    assert_eq!(
        ev[1],
        FetchEvent::EndOfRange {
            kind: RangeEnd::Unknown,
            location: Location::new(3, 4)
        }
    );
    assert!(
        matches!(&ev[2], FetchEvent::Object(o) if o.location == Location::new(4, 0) && o.priority == 3)
    );
    // As the first entry.
    let mut w = FetchWriter::new(GroupOrder::Ascending, V);
    let mut buf = Vec::new();
    w.encode_end_of_range(&mut buf, RangeEnd::NonExistent, Location::new(0, 7))
        .unwrap();
    assert_eq!(buf[..2], [0x80, 0x8C]);
    // An object after it may not refer to a prior subgroup or priority.
    buf.extend_from_slice(&[0x01, 0x00]); // flags: subgroup = prior, no priority
    assert!(matches!(
        read_all(GroupOrder::Ascending, &buf),
        Err(DecodeError::ProtocolViolation(_))
    ));
}

#[test]
fn rejections() {
    // First object without absolute IDs.
    assert!(matches!(
        read_all(GroupOrder::Ascending, &[0x10, 0x05, 0x00]),
        Err(DecodeError::ProtocolViolation(_))
    ));
    // Unknown flag value >= 128.
    assert!(matches!(
        read_all(GroupOrder::Ascending, &[0x80, 0x80]),
        Err(DecodeError::InvalidValue { .. })
    ));
    // Descending below zero: first at group 0, then a group delta.
    let bad = [0x1C, 0x00, 0x00, 0x01, 0x00, 0x08, 0x00, 0x00];
    assert!(matches!(
        read_all(GroupOrder::Descending, &bad),
        Err(DecodeError::Overflow(_))
    ));
    // FIN mid-payload.
    assert!(read_all(GroupOrder::Ascending, &[0x1C, 0x00, 0x00, 0x01, 0x02, b'a']).is_err());
}
