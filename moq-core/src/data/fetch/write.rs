//! Encoding a fetch stream's entries.

use bytes::BufMut;

use super::super::{ObjectStatus, fits, put_int};
use super::entry::{
    DATAGRAM, FetchObject, GROUP_FIELD, OBJECT_FIELD, PRIORITY, PROPERTIES, Prior, RangeEnd,
};
use crate::Version;
use crate::coding::{BufMutExt, EncodeError, QuicVarInt};
use crate::types::location::{GroupOrder, Location};

/// Encodes the entries of one fetch stream, choosing the shortest serialization flags.
///
/// Entries must come in the FETCH's group order, objects ascending within a group, in every
/// version. An End of Range (from draft-16) that a version cannot write: Non-Existent is left
/// out before draft-16, where a gap in a fetch stream already says the objects do not exist
/// (draft-14 §9.16.3); Unknown and Timed-Out fail with [`EncodeError::NotInVersion`].
///
/// ```
/// use bytes::BytesMut;
/// use moq_core::{Version, Location, GroupOrder};
/// use moq_core::data::{FetchWriter, FetchReader, FetchObject, FetchEvent};
/// let v = Version::Draft19;
/// let mut w = FetchWriter::new(GroupOrder::Ascending, v);
/// let mut buf = Vec::new();
/// for (g, o) in [(0, 0), (0, 1), (2, 0)] {
///     let obj = FetchObject { location: Location::new(g, o), subgroup: Some(0), priority: 5, payload_len: 1, ..Default::default() };
///     w.encode_object(&mut buf, &obj).unwrap();
///     buf.push(b'x');
/// }
/// let mut r = FetchReader::new(GroupOrder::Ascending, v);
/// let mut bytes = BytesMut::from(&buf[..]);
/// let mut seen = Vec::new();
/// while let Some(ev) = r.next(&mut bytes).unwrap() {
///     if let FetchEvent::Object(o) = ev { seen.push(o.location); }
/// }
/// assert_eq!(seen, [Location::new(0, 0), Location::new(0, 1), Location::new(2, 0)]);
/// ```
#[derive(Debug)]
pub struct FetchWriter {
    version: Version,
    order: GroupOrder,
    /// What the next entry may refer to.
    prior: Prior,
    /// The location of the last entry given, written or not: the next must come after it.
    last: Option<Location>,
}

impl FetchWriter {
    /// A writer for a fetch whose groups go out in `order`.
    pub fn new(order: GroupOrder, version: Version) -> Self {
        FetchWriter {
            version,
            order,
            prior: Prior::default(),
            last: None,
        }
    }

    /// Checks `loc` comes after the last entry: groups in the fetch's order, objects ascending
    /// within a group (draft-19 §10.12.3, draft-14 §9.16.3).
    fn check_order(&self, loc: Location) -> Result<(), EncodeError> {
        let ok = match self.last {
            None => true,
            Some(p) if p.group == loc.group => loc.object > p.object,
            Some(p) => match self.order {
                GroupOrder::Ascending => loc.group > p.group,
                GroupOrder::Descending => loc.group < p.group,
            },
        };
        if ok {
            Ok(())
        } else {
            Err(EncodeError::Invalid {
                field: "fetch stream",
                reason: "locations must follow the group order, objects ascending within a group",
            })
        }
    }

    /// The flags and fields that place `loc` after the prior entry: `(flags, group, object)`
    /// where `group` / `object` are the Group ID and Object ID fields to write, if any (deltas
    /// from draft-18). `loc` has passed [`FetchWriter::check_order`].
    fn location_fields(&self, loc: Location) -> (u64, Option<u64>, Option<u64>) {
        let v = self.version;
        match self.prior.location() {
            None => (
                GROUP_FIELD | OBJECT_FIELD,
                Some(loc.group),
                Some(loc.object),
            ),
            Some(p) if p.group == loc.group => {
                if p.object.checked_add(1) == Some(loc.object) {
                    (0, None, None)
                } else if v.fetch_id_deltas() {
                    (OBJECT_FIELD, None, Some(loc.object - p.object))
                } else {
                    (OBJECT_FIELD, None, Some(loc.object))
                }
            }
            // Another group: its ID, and the Object ID absolute in every version (draft-16
            // would allow leaving out Object ID = prior + 1; it is written all the same).
            Some(p) => {
                let group = if !v.fetch_id_deltas() {
                    loc.group
                } else if loc.group > p.group {
                    loc.group - p.group - 1
                } else {
                    p.group - loc.group - 1
                };
                (GROUP_FIELD | OBJECT_FIELD, Some(group), Some(loc.object))
            }
        }
    }

    /// Writes one object's fields; the caller writes `payload_len` payload bytes next. Fails,
    /// writing nothing, for an object out of order or an ID that does not fit the version's
    /// integers (2^62-1 until draft-16).
    pub fn encode_object<B: BufMut>(
        &mut self,
        buf: &mut B,
        obj: &FetchObject,
    ) -> Result<(), EncodeError> {
        let v = self.version;
        self.check_order(obj.location)?;
        // draft-14 §10.4.4: "The Subgroup ID field of an object with a Forwarding Preference
        // of Datagram is set to the Object ID"; draft-16 has the DATAGRAM flag instead.
        let subgroup = match obj.subgroup {
            None if !v.fetch_end_of_range() => Some(obj.location.object),
            s => s,
        };
        fits(obj.location.group, v, "group ID")?;
        fits(obj.location.object, v, "object ID")?;
        fits(subgroup.unwrap_or(0), v, "subgroup ID")?;
        fits(obj.payload_len, v, "payload length")?;
        let props = if obj.properties.is_empty() {
            None
        } else {
            let mut tmp = Vec::new();
            obj.properties.encode_prefixed(&mut tmp, v)?;
            Some(tmp)
        };

        if !v.fetch_serialization_flags() {
            // draft-14 §10.4.4: every field, and an Extension Headers Length even if 0.
            buf.put_varint(obj.location.group, v);
            buf.put_varint(subgroup.unwrap_or(0), v);
            buf.put_varint(obj.location.object, v);
            buf.put_u8(obj.priority);
            match &props {
                Some(p) => buf.put_slice(p),
                None => buf.put_varint(0, v),
            }
        } else {
            let (mut flags, group_field, object_field) = self.location_fields(obj.location);
            let subgroup_field = match subgroup {
                None => {
                    flags |= DATAGRAM;
                    None
                }
                Some(0) => None,
                Some(s) if self.prior.subgroup() == Some(s) => {
                    flags |= 1;
                    None
                }
                Some(s) if self.prior.subgroup().and_then(|p| p.checked_add(1)) == Some(s) => {
                    flags |= 2;
                    None
                }
                Some(s) => {
                    flags |= 3;
                    Some(s)
                }
            };
            if self.prior.priority() != Some(obj.priority) {
                flags |= PRIORITY;
            }
            if props.is_some() {
                flags |= PROPERTIES;
            }
            if v.fetch_end_of_range() {
                buf.put_varint(flags, v);
            } else {
                // NOTES B.2: one byte in draft-15; no bit above 0x20 is set here.
                buf.put_u8(flags as u8);
            }
            if let Some(g) = group_field {
                buf.put_varint(g, v);
            }
            if let Some(s) = subgroup_field {
                buf.put_varint(s, v);
            }
            if let Some(o) = object_field {
                buf.put_varint(o, v);
            }
            if flags & PRIORITY != 0 {
                buf.put_u8(obj.priority);
            }
            if let Some(p) = &props {
                buf.put_slice(p);
            }
        }
        buf.put_varint(obj.payload_len, v);
        if obj.payload_len == 0 && v.fetch_object_status() {
            // draft-14 §10.2.1.1: "Zero-length objects explicitly encode the Normal status."
            buf.put_varint(ObjectStatus::Normal.value(), v);
        }
        self.prior.object(obj.location, subgroup, obj.priority);
        self.last = Some(obj.location);
        Ok(())
    }

    /// Writes an End of Range marker covering everything after the prior entry up to and
    /// including `location`.
    ///
    /// From draft-18 a marker carries a Group ID Delta (draft-19 §11.4.4.2), which cannot
    /// name the prior entry's own group; such a marker is refused: end ranges on another
    /// group. Before draft-16 there are no markers: a Non-Existent range is left out (nothing
    /// is written; a gap already says so, draft-14 §9.16.3), an Unknown one fails. Timed-Out
    /// exists from draft-20.
    pub fn encode_end_of_range<B: BufMut>(
        &mut self,
        buf: &mut B,
        kind: RangeEnd,
        location: Location,
    ) -> Result<(), EncodeError> {
        let v = self.version;
        self.check_order(location)?;
        let Some(flags) = kind.flags(v) else {
            return match kind {
                RangeEnd::NonExistent => {
                    self.last = Some(location);
                    Ok(())
                }
                RangeEnd::Unknown => Err(EncodeError::NotInVersion("End of Unknown Range", v)),
                RangeEnd::TimedOut => Err(EncodeError::NotInVersion("End of Timed-Out Range", v)),
            };
        };
        let (group, object) = if v.fetch_id_deltas() {
            let (fl, group, object) = self.location_fields(location);
            let (Some(group), Some(object)) = (group, object) else {
                return Err(EncodeError::Invalid {
                    field: "end of range",
                    reason: "an end of range in the prior entry's group cannot be encoded",
                });
            };
            debug_assert_eq!(fl, GROUP_FIELD | OBJECT_FIELD);
            (group, object)
        } else {
            // draft-16 §10.4.4.2: the Group ID and Object ID fields. A range to the end of a
            // group (Object ID 2^64-1) ends at the largest Object ID a QUIC varint can name.
            let object = if v.quic_varints() && location.object == u64::MAX {
                QuicVarInt::MAX
            } else {
                location.object
            };
            (location.group, object)
        };
        fits(group, v, "group ID")?;
        fits(object, v, "object ID")?;
        buf.put_varint(flags, v);
        put_int(buf, group, v, "group ID")?;
        put_int(buf, object, v, "object ID")?;
        self.last = Some(location);
        if v.fetch_id_deltas() {
            self.prior.range_end(location);
        } else {
            // draft-16 leaves open whether a marker is the "prior Object" the next object's
            // flags refer to; the next object is written in full, as the first would be.
            self.prior = Prior::default();
        }
        Ok(())
    }
}
