//! Location Filters (draft-19 §5.1.2) and Range Filters (§5.1.3).

use bytes::{Buf, BufMut};

use crate::Version;
use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::location::Location;

/// Which objects of a subscription pass, by location (draft-19 §5.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocationFilter {
    /// 0x1: start at `{Largest.Group + 1, 0}`, open ended.
    NextGroupStart,
    /// 0x2: start at `{Largest.Group, Largest.Object + 1}`, open ended.
    LargestObject,
    /// 0x3: start at the given location, open ended.
    AbsoluteStart(Location),
    /// 0x4: start at `start`, end with group `start.group + end_group_delta` (inclusive).
    AbsoluteRange {
        /// The first location.
        start: Location,
        /// The last group is `start.group + end_group_delta`.
        end_group_delta: u64,
    },
}

impl LocationFilter {
    /// The wire Filter Type.
    pub const fn filter_type(&self) -> u64 {
        match self {
            LocationFilter::NextGroupStart => 0x1,
            LocationFilter::LargestObject => 0x2,
            LocationFilter::AbsoluteStart(_) => 0x3,
            LocationFilter::AbsoluteRange { .. } => 0x4,
        }
    }

    /// The last group that passes, if the filter has one.
    pub fn end_group(&self) -> Option<u64> {
        match self {
            LocationFilter::AbsoluteRange {
                start,
                end_group_delta,
            } => start.group.checked_add(*end_group_delta),
            _ => None,
        }
    }

    /// The start location given the publisher's Largest Object (`None` if no object yet).
    pub fn start(&self, largest: Option<Location>) -> Location {
        match (self, largest) {
            (LocationFilter::NextGroupStart, Some(l)) => {
                Location::new(l.group.saturating_add(1), 0)
            }
            (LocationFilter::LargestObject, Some(l)) => {
                Location::new(l.group, l.object.saturating_add(1))
            }
            (LocationFilter::NextGroupStart | LocationFilter::LargestObject, None) => {
                Location::default()
            }
            (LocationFilter::AbsoluteStart(s), _) => *s,
            (LocationFilter::AbsoluteRange { start, .. }, _) => *start,
        }
    }
}

impl Decode for LocationFilter {
    fn decode<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        let ty = buf.get_varint(v)?;
        Ok(match ty {
            0x1 => LocationFilter::NextGroupStart,
            0x2 => LocationFilter::LargestObject,
            0x3 => LocationFilter::AbsoluteStart(Location::decode(buf, v)?),
            0x4 => {
                let start = Location::decode(buf, v)?;
                let end_group_delta = buf.get_varint(v)?;
                // draft-19 §5.1.2: an End Group past 2^64-1 is a PROTOCOL_VIOLATION.
                start
                    .group
                    .checked_add(end_group_delta)
                    .ok_or(DecodeError::Overflow("location filter end group"))?;
                LocationFilter::AbsoluteRange {
                    start,
                    end_group_delta,
                }
            }
            // draft-19 §5.1.2: any other filter type is a PROTOCOL_VIOLATION.
            _ => {
                return Err(DecodeError::InvalidValue {
                    field: "location filter type",
                    value: ty,
                });
            }
        })
    }
}

impl Encode for LocationFilter {
    fn encode<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        buf.put_varint(self.filter_type(), v);
        match self {
            LocationFilter::NextGroupStart | LocationFilter::LargestObject => {}
            LocationFilter::AbsoluteStart(s) => s.encode(buf, v)?,
            LocationFilter::AbsoluteRange {
                start,
                end_group_delta,
            } => {
                if start.group.checked_add(*end_group_delta).is_none() {
                    return Err(EncodeError::Invalid {
                        field: "location filter",
                        reason: "end group overflows",
                    });
                }
                start.encode(buf, v)?;
                buf.put_varint(*end_group_delta, v);
            }
        }
        Ok(())
    }
}

/// The five Range Filter parameters (draft-19 §5.1.3, types 0x25-0x29).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RangeFilterKind {
    /// SUBGROUP_FILTER (0x25): ranges of Subgroup ID.
    Subgroup,
    /// OBJECTID_FILTER (0x26): ranges of Object ID.
    ObjectId,
    /// PRIORITY_FILTER (0x27): ranges of Publisher Priority.
    Priority,
    /// OBJECT_PROPERTY_FILTER (0x28): ranges of an Object Property's value.
    ObjectProperty,
    /// TRACK_PROPERTY_FILTER (0x29): ranges of a Track Property's value.
    TrackProperty,
}

impl RangeFilterKind {
    /// All kinds in parameter-type order.
    pub const ALL: [RangeFilterKind; 5] = [
        RangeFilterKind::Subgroup,
        RangeFilterKind::ObjectId,
        RangeFilterKind::Priority,
        RangeFilterKind::ObjectProperty,
        RangeFilterKind::TrackProperty,
    ];

    /// The parameter type.
    pub const fn param_type(self) -> u64 {
        match self {
            RangeFilterKind::Subgroup => 0x25,
            RangeFilterKind::ObjectId => 0x26,
            RangeFilterKind::Priority => 0x27,
            RangeFilterKind::ObjectProperty => 0x28,
            RangeFilterKind::TrackProperty => 0x29,
        }
    }

    /// The kind for a parameter type.
    pub fn from_param_type(ty: u64) -> Option<Self> {
        Self::ALL.iter().copied().find(|k| k.param_type() == ty)
    }

    /// True if the filter names a property type.
    pub const fn has_property_type(self) -> bool {
        matches!(
            self,
            RangeFilterKind::ObjectProperty | RangeFilterKind::TrackProperty
        )
    }
}

/// One inclusive range; `end == None` means "no end" (only the last range may omit it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FilterRange {
    /// First value that passes.
    pub start: u64,
    /// Last value that passes, or none.
    pub end: Option<u64>,
}

impl FilterRange {
    /// True if `x` is in the range.
    pub fn contains(&self, x: u64) -> bool {
        x >= self.start && self.end.is_none_or(|e| x <= e)
    }
}

/// The body of one Range Filter parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeFilter {
    /// Filters with the same SetID are ANDed; the sets are ORed.
    pub set_id: u8,
    /// The property type for OBJECT_PROPERTY_FILTER and TRACK_PROPERTY_FILTER (must be even).
    pub property_type: Option<u64>,
    /// The ranges, ascending and disjoint.
    pub ranges: Vec<FilterRange>,
}

impl RangeFilter {
    /// True if `x` passes any of the ranges.
    pub fn matches(&self, x: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(x))
    }
}

/// One Range Filter parameter: its kind and body, or `None` for Length 0, which removes that
/// filter in REQUEST_UPDATE (draft-19 §5.1.3).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RangeFilterParam {
    /// Which filter.
    pub kind: RangeFilterKind,
    /// The filter, or `None` to remove it.
    pub filter: Option<RangeFilter>,
}

impl RangeFilterParam {
    /// How many ranges `filters` carry in all (what MAX_FILTER_RANGES bounds, draft-19
    /// §10.3.1.6).
    ///
    /// ```
    /// assert_eq!(moq_core::RangeFilterParam::range_count(&[]), 0);
    /// ```
    pub fn range_count(filters: &[RangeFilterParam]) -> usize {
        filters
            .iter()
            .filter_map(|p| p.filter.as_ref())
            .map(|f| f.ranges.len())
            .sum()
    }

    /// Applies `update` to `current` as a REQUEST_UPDATE does: each kind present in `update`
    /// replaces that kind's filters (an empty one removes them), the other kinds stay
    /// (draft-19 §5.1.3, §10.9).
    pub fn apply_update(current: &mut Vec<RangeFilterParam>, update: &[RangeFilterParam]) {
        for kind in RangeFilterKind::ALL {
            if !update.iter().any(|f| f.kind == kind) {
                continue;
            }
            current.retain(|f| f.kind != kind);
            current.extend(
                update
                    .iter()
                    .filter(|f| f.kind == kind && f.filter.is_some())
                    .cloned(),
            );
        }
    }

    /// Reads the bytes inside the parameter's Length. Errors are request-level INVALID_FILTER
    /// except a body that is not even structurally present.
    pub(crate) fn decode_body<B: Buf>(
        kind: RangeFilterKind,
        buf: &mut B,
        v: Version,
    ) -> Result<Self, DecodeError> {
        if !buf.has_remaining() {
            return Ok(RangeFilterParam { kind, filter: None });
        }
        let short = |e: DecodeError| match e {
            DecodeError::Short => DecodeError::InvalidFilter("truncated range filter"),
            e => e,
        };
        let set_id = buf.get_byte().map_err(short)?;
        let property_type = if kind.has_property_type() {
            let t = buf.get_varint(v).map_err(short)?;
            // draft-19 §10.2.13-14: the property type MUST be even, else INVALID_FILTER.
            if t % 2 == 1 {
                return Err(DecodeError::InvalidFilter("property filter type is odd"));
            }
            Some(t)
        } else {
            None
        };
        let mut ranges = Vec::new();
        let mut prev_end = 0u64;
        let mut open = false;
        while buf.has_remaining() {
            if open {
                return Err(DecodeError::InvalidFilter(
                    "range after an open-ended range",
                ));
            }
            // draft-19 §5.1.3: a delta past 2^64-1 is rejected with INVALID_FILTER.
            let start = prev_end
                .checked_add(buf.get_varint(v).map_err(short)?)
                .ok_or(DecodeError::InvalidFilter("range start overflows"))?;
            let end = if buf.has_remaining() {
                let e = start
                    .checked_add(buf.get_varint(v).map_err(short)?)
                    .ok_or(DecodeError::InvalidFilter("range end overflows"))?;
                prev_end = e;
                Some(e)
            } else {
                open = true;
                None
            };
            if kind == RangeFilterKind::Priority && end.unwrap_or(start) > 255 {
                // draft-19 §10.2.12: priority values above 255 are INVALID_FILTER.
                return Err(DecodeError::InvalidFilter("priority above 255"));
            }
            ranges.push(FilterRange { start, end });
        }
        Ok(RangeFilterParam {
            kind,
            filter: Some(RangeFilter {
                set_id,
                property_type,
                ranges,
            }),
        })
    }

    /// Writes the bytes inside the parameter's Length.
    pub(crate) fn encode_body<B: BufMut>(
        &self,
        buf: &mut B,
        v: Version,
    ) -> Result<(), EncodeError> {
        let Some(f) = &self.filter else {
            return Ok(());
        };
        buf.put_u8(f.set_id);
        match (self.kind.has_property_type(), f.property_type) {
            (true, Some(t)) => buf.put_varint(t, v),
            (false, None) => {}
            _ => {
                return Err(EncodeError::Invalid {
                    field: "range filter",
                    reason: "property type present exactly for property filters",
                });
            }
        }
        let mut prev_end = 0u64;
        let n = f.ranges.len();
        for (i, r) in f.ranges.iter().enumerate() {
            let bad = EncodeError::Invalid {
                field: "range filter",
                reason: "ranges must ascend, only the last may be open",
            };
            buf.put_varint(r.start.checked_sub(prev_end).ok_or(bad.clone())?, v);
            match r.end {
                Some(e) => {
                    buf.put_varint(e.checked_sub(r.start).ok_or(bad)?, v);
                    prev_end = e;
                }
                None if i + 1 == n => {}
                None => return Err(bad),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V: Version = Version::Draft19;

    /// draft-19 §5.1.3's example: ranges 3-5 and 10-15 encode as 3, 2, 5, 5.
    #[test]
    fn draft_example_ranges() {
        let p = RangeFilterParam {
            kind: RangeFilterKind::ObjectId,
            filter: Some(RangeFilter {
                set_id: 0,
                property_type: None,
                ranges: vec![
                    FilterRange {
                        start: 3,
                        end: Some(5),
                    },
                    FilterRange {
                        start: 10,
                        end: Some(15),
                    },
                ],
            }),
        };
        let mut buf = Vec::new();
        p.encode_body(&mut buf, V).unwrap();
        assert_eq!(buf, [0, 3, 2, 5, 5]);
        let back =
            RangeFilterParam::decode_body(RangeFilterKind::ObjectId, &mut &buf[..], V).unwrap();
        assert_eq!(back, p);
        assert!(p.filter.as_ref().unwrap().matches(12));
        assert!(!p.filter.as_ref().unwrap().matches(7));
    }

    #[test]
    fn filter_rejections() {
        let err = |kind, bytes: &[u8]| {
            RangeFilterParam::decode_body(kind, &mut &bytes[..], V).unwrap_err()
        };
        assert_eq!(
            err(RangeFilterKind::ObjectProperty, &[0, 3])
                .request_code()
                .map(|c| c.0),
            Some(0x36)
        );
        assert!(matches!(
            err(RangeFilterKind::Priority, &[0, 0x81, 0x00]),
            DecodeError::InvalidFilter(_)
        ));
        let mut over = vec![0u8];
        crate::coding::Vi64::encode(u64::MAX, &mut over);
        crate::coding::Vi64::encode(1, &mut over);
        assert!(matches!(
            err(RangeFilterKind::Subgroup, &over),
            DecodeError::InvalidFilter(_)
        ));
    }

    #[test]
    fn location_filter_rules() {
        let mut buf = Vec::new();
        LocationFilter::AbsoluteRange {
            start: Location::new(5, 1),
            end_group_delta: 2,
        }
        .encode(&mut buf, V)
        .unwrap();
        assert_eq!(buf, [4, 5, 1, 2]);
        assert!(matches!(
            LocationFilter::decode(&mut &[0x05u8][..], V),
            Err(DecodeError::InvalidValue { .. })
        ));
        let mut over = vec![4u8];
        crate::coding::Vi64::encode(u64::MAX, &mut over);
        over.push(0);
        over.push(1);
        assert!(matches!(
            LocationFilter::decode(&mut &over[..], V),
            Err(DecodeError::Overflow(_))
        ));
        assert_eq!(
            LocationFilter::NextGroupStart.start(Some(Location::new(3, 7))),
            Location::new(4, 0)
        );
        assert_eq!(
            LocationFilter::LargestObject.start(None),
            Location::new(0, 0)
        );
    }
}
