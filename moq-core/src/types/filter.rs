//! Location Filters (draft-19 §5.1.2) and Range Filters (§5.1.3).

use bytes::{Buf, BufMut};

use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, EncodeError};
use crate::types::location::{Location, put_int};
use crate::{FilterEncoding, Version};

/// Which objects of a subscription or FETCH pass, by location (draft-19 §5.1.2; draft-21
/// §3.3.1, §9.20.10).
///
/// One type for every version; a filter a version cannot express fails to encode there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocationFilter {
    /// No filter: every location (draft-20 Length 0, draft-22 type 0x0; drafts 18-19 send it
    /// as AbsoluteStart {0, 0}, which means the same). In REQUEST_UPDATE it removes the filter.
    All,
    /// Start at `{Largest.Group + 1, 0}`, open ended (draft-19 type 0x1; from draft-20 the
    /// relative StartGroup 0).
    NextGroupStart,
    /// Start at the Next Object `{Largest.Group, Largest.Object + 1}`, open ended (draft-19
    /// type 0x2 "Largest Object"; draft-20 StartGroup = StartObject = 0; draft-22 type 0x5).
    LargestObject,
    /// Start at `{Largest.Group + 1 - n, 0}` for `n >= 1` (1 = the current group), open ended
    /// (from draft-20; `n = 0` is [`LocationFilter::NextGroupStart`]).
    RelativeGroups(u64),
    /// Start at the given location, open ended (draft-19 type 0x3).
    AbsoluteStart(Location),
    /// Start at `start`, end with group `start.group + end_group_delta` (inclusive): the whole
    /// group, or up to object `end_object` of it (from draft-20).
    AbsoluteRange {
        /// The first location.
        start: Location,
        /// The last group is `start.group + end_group_delta`.
        end_group_delta: u64,
        /// The last object of the last group, if not the whole group (from draft-20).
        end_object: Option<u64>,
    },
}

impl LocationFilter {
    /// The last group that passes, if the filter has one.
    pub fn end_group(&self) -> Option<u64> {
        match self {
            LocationFilter::AbsoluteRange {
                start,
                end_group_delta,
                ..
            } => start.group.checked_add(*end_group_delta),
            _ => None,
        }
    }

    /// The last location that passes, if the filter has an end (an end group without an end
    /// object ends at Object ID `u64::MAX`).
    pub fn end(&self) -> Option<Location> {
        let g = self.end_group()?;
        match self {
            LocationFilter::AbsoluteRange {
                end_object: Some(o),
                ..
            } => Some(Location::new(g, *o)),
            _ => Some(Location::new(g, u64::MAX)),
        }
    }

    /// True if the start depends on the publisher's Largest Object.
    pub fn is_relative(&self) -> bool {
        matches!(
            self,
            LocationFilter::NextGroupStart
                | LocationFilter::LargestObject
                | LocationFilter::RelativeGroups(_)
        )
    }

    /// The start location given the publisher's Largest Object (`None` if no object yet).
    pub fn start(&self, largest: Option<Location>) -> Location {
        match (self, largest) {
            (LocationFilter::All, _) => Location::default(),
            (LocationFilter::NextGroupStart, Some(l)) => {
                Location::new(l.group.saturating_add(1), 0)
            }
            (LocationFilter::LargestObject, Some(l)) => {
                Location::new(l.group, l.object.saturating_add(1))
            }
            // draft-21 §9.20.10: clamped to [0, 2^64-1].
            (LocationFilter::RelativeGroups(n), Some(l)) => {
                Location::new(l.group.saturating_add(1).saturating_sub(*n), 0)
            }
            (
                LocationFilter::NextGroupStart
                | LocationFilter::LargestObject
                | LocationFilter::RelativeGroups(_),
                None,
            ) => Location::default(),
            (LocationFilter::AbsoluteStart(s), _) => *s,
            (LocationFilter::AbsoluteRange { start, .. }, _) => *start,
        }
    }

    /// The same filter in its simplest form (`RelativeGroups(0)` is NextGroupStart, an open
    /// start at {0, 0} is no filter).
    pub fn normalized(self) -> Self {
        match self {
            LocationFilter::RelativeGroups(0) => LocationFilter::NextGroupStart,
            LocationFilter::AbsoluteStart(s) if s == Location::default() => LocationFilter::All,
            f => f,
        }
    }

    fn check_end(start: Location, end_group_delta: u64) -> Result<(), DecodeError> {
        // draft-19 §5.1.2, draft-21 §9.20.10: an End Group past 2^64-1 is a PROTOCOL_VIOLATION.
        start
            .group
            .checked_add(end_group_delta)
            .map(|_| ())
            .ok_or(DecodeError::Overflow("location filter end group"))
    }

    /// Decodes the value of a LOCATION_FILTER parameter under `v`: for drafts 18-21 `buf` holds
    /// exactly the length-prefixed value; for draft-22 the value is read from `buf` (it has no
    /// length).
    pub fn decode_value<B: Buf>(buf: &mut B, v: Version) -> Result<Self, DecodeError> {
        let invalid = |ty| DecodeError::InvalidValue {
            field: "location filter type",
            value: ty,
        };
        match v.filter_encoding() {
            FilterEncoding::FilterType => {
                let ty = buf.get_varint(v)?;
                Ok(match ty {
                    0x1 => LocationFilter::NextGroupStart,
                    0x2 => LocationFilter::LargestObject,
                    0x3 => LocationFilter::AbsoluteStart(Location::decode(buf, v)?),
                    0x4 => {
                        let start = Location::decode(buf, v)?;
                        let end_group_delta = if v.filter_end_group_is_delta() {
                            buf.get_varint(v)?
                        } else {
                            // draft-16 §5.1.2 (draft-14 §9.7): the End Group itself, which MUST
                            // be at least the Start Location's group.
                            let end = buf.get_varint(v)?;
                            end.checked_sub(start.group)
                                .ok_or(DecodeError::InvalidValue {
                                    field: "End Group (before the Start Location's group)",
                                    value: end,
                                })?
                        };
                        Self::check_end(start, end_group_delta)?;
                        LocationFilter::AbsoluteRange {
                            start,
                            end_group_delta,
                            end_object: None,
                        }
                    }
                    // draft-19 §5.1.2: any other filter type is a PROTOCOL_VIOLATION.
                    _ => return Err(invalid(ty)),
                })
            }
            FilterEncoding::Length => {
                // draft-21 §9.20.10: the Length says how many of the four fields are present.
                let mut f = [0u64; 4];
                let mut n = 0;
                while buf.has_remaining() {
                    let slot = f.get_mut(n).ok_or(DecodeError::InvalidValue {
                        field: "location filter fields",
                        value: n as u64 + 1,
                    })?;
                    *slot = buf.get_varint(v)?;
                    n += 1;
                }
                let [g, o, delta, end] = f;
                Self::from_fields(n, g, o, delta, end)
            }
            FilterEncoding::LocationType => {
                // draft-22: the Location Filter Type names the fields; any other type is a
                // PROTOCOL_VIOLATION.
                let ty = buf.get_varint(v)?;
                let n = match ty {
                    0x0..=0x4 => ty as usize,
                    0x5 => return Ok(LocationFilter::LargestObject),
                    _ => return Err(invalid(ty)),
                };
                let mut f = [0u64; 4];
                for slot in f.iter_mut().take(n) {
                    *slot = buf.get_varint(v)?;
                }
                let [g, o, delta, end] = f;
                if n == 2 {
                    // {0, 0} is a real absolute start in draft-22.
                    return Ok(LocationFilter::AbsoluteStart(Location::new(g, o)).normalized());
                }
                Self::from_fields(n, g, o, delta, end)
            }
        }
    }

    /// The filter the first `n` of (StartGroup, StartObject, EndGroupDelta, EndObject) give
    /// (draft-21 §9.20.10).
    fn from_fields(n: usize, g: u64, o: u64, delta: u64, end: u64) -> Result<Self, DecodeError> {
        let start = Location::new(g, o);
        Ok(match n {
            0 => LocationFilter::All,
            1 => LocationFilter::RelativeGroups(g).normalized(),
            2 if g == 0 && o == 0 => LocationFilter::LargestObject,
            2 => LocationFilter::AbsoluteStart(start),
            _ => {
                Self::check_end(start, delta)?;
                LocationFilter::AbsoluteRange {
                    start,
                    end_group_delta: delta,
                    end_object: (n == 4).then_some(end),
                }
            }
        })
    }

    /// Encodes the value of a LOCATION_FILTER parameter under `v` (see
    /// [`LocationFilter::decode_value`]; the caller adds the length prefix up to draft-21).
    pub fn encode_value<B: BufMut>(&self, buf: &mut B, v: Version) -> Result<(), EncodeError> {
        let cannot = |reason| EncodeError::Invalid {
            field: "location filter",
            reason,
        };
        if let LocationFilter::AbsoluteRange {
            start,
            end_group_delta,
            ..
        } = self
            && start.group.checked_add(*end_group_delta).is_none()
        {
            return Err(cannot("end group overflows"));
        }
        let fields: &[u64] = match (self.normalized(), v.filter_encoding()) {
            (_, FilterEncoding::FilterType) => {
                let (ty, fields): (u64, Vec<u64>) = match self.normalized() {
                    LocationFilter::NextGroupStart => (0x1, vec![]),
                    LocationFilter::LargestObject => (0x2, vec![]),
                    LocationFilter::All => (0x3, vec![0, 0]),
                    LocationFilter::AbsoluteStart(s) => (0x3, vec![s.group, s.object]),
                    LocationFilter::AbsoluteRange {
                        start,
                        end_group_delta,
                        end_object: None,
                    } => {
                        // Until draft-16 the End Group itself (checked above not to overflow).
                        let end = if v.filter_end_group_is_delta() {
                            end_group_delta
                        } else {
                            start.group.saturating_add(end_group_delta)
                        };
                        (0x4, vec![start.group, start.object, end])
                    }
                    LocationFilter::RelativeGroups(_) => {
                        return Err(cannot("a relative start group needs draft-20"));
                    }
                    LocationFilter::AbsoluteRange { .. } => {
                        return Err(cannot("an end object needs draft-20"));
                    }
                };
                buf.put_varint(ty, v);
                for f in fields {
                    put_int(buf, f, v)?;
                }
                return Ok(());
            }
            (LocationFilter::All, _) => &[],
            (LocationFilter::NextGroupStart, _) => &[0],
            (LocationFilter::RelativeGroups(n), _) => &[n],
            (LocationFilter::LargestObject, FilterEncoding::Length) => &[0, 0],
            (LocationFilter::LargestObject, _) => {
                buf.put_varint(0x5, v);
                return Ok(());
            }
            (LocationFilter::AbsoluteStart(s), _) => &[s.group, s.object],
            (
                LocationFilter::AbsoluteRange {
                    start,
                    end_group_delta,
                    end_object: None,
                },
                _,
            ) => &[start.group, start.object, end_group_delta],
            (
                LocationFilter::AbsoluteRange {
                    start,
                    end_group_delta,
                    end_object: Some(e),
                },
                _,
            ) => &[start.group, start.object, end_group_delta, e],
        };
        if v.filter_encoding() == FilterEncoding::LocationType {
            buf.put_varint(fields.len() as u64, v);
        }
        for f in fields {
            buf.put_varint(*f, v);
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

    /// Encodes `f` as a LOCATION_FILTER value under `v`.
    fn value(f: LocationFilter, v: Version) -> Vec<u8> {
        let mut buf = Vec::new();
        f.encode_value(&mut buf, v).unwrap();
        buf
    }

    fn decode(bytes: &[u8], v: Version) -> Result<LocationFilter, DecodeError> {
        LocationFilter::decode_value(&mut &bytes[..], v)
    }

    #[test]
    fn location_filter_rules() {
        let range = LocationFilter::AbsoluteRange {
            start: Location::new(5, 1),
            end_group_delta: 2,
            end_object: None,
        };
        assert_eq!(value(range, V), [4, 5, 1, 2]);
        assert!(matches!(
            decode(&[0x05], V),
            Err(DecodeError::InvalidValue { .. })
        ));
        let mut over = vec![4u8];
        crate::coding::Vi64::encode(u64::MAX, &mut over);
        over.push(0);
        over.push(1);
        assert!(matches!(decode(&over, V), Err(DecodeError::Overflow(_))));
        assert_eq!(
            LocationFilter::NextGroupStart.start(Some(Location::new(3, 7))),
            Location::new(4, 0)
        );
        assert_eq!(
            LocationFilter::LargestObject.start(None),
            Location::new(0, 0)
        );
        // draft-21 §9.20.10: relative starts are clamped at 0.
        assert_eq!(
            LocationFilter::RelativeGroups(1).start(Some(Location::new(3, 7))),
            Location::new(3, 0)
        );
        assert_eq!(
            LocationFilter::RelativeGroups(9).start(Some(Location::new(3, 7))),
            Location::new(0, 0)
        );
        // Filters draft-19 cannot express.
        let mut buf = Vec::new();
        assert!(
            LocationFilter::RelativeGroups(2)
                .encode_value(&mut buf, V)
                .is_err()
        );
        let to_object = LocationFilter::AbsoluteRange {
            start: Location::new(5, 1),
            end_group_delta: 2,
            end_object: Some(3),
        };
        assert!(to_object.encode_value(&mut buf, V).is_err());
    }

    /// draft-21 §9.20.10 (drafts 20 and 21): the number of fields says what they are.
    #[test]
    fn location_filter_by_length() {
        let v = Version::Draft20;
        let cases: [(LocationFilter, &[u8]); 7] = [
            (LocationFilter::All, &[]),
            (LocationFilter::NextGroupStart, &[0]),
            (LocationFilter::RelativeGroups(1), &[1]),
            (LocationFilter::LargestObject, &[0, 0]),
            (LocationFilter::AbsoluteStart(Location::new(4, 2)), &[4, 2]),
            (
                LocationFilter::AbsoluteRange {
                    start: Location::new(0, 0),
                    end_group_delta: 3,
                    end_object: None,
                },
                &[0, 0, 3],
            ),
            (
                LocationFilter::AbsoluteRange {
                    start: Location::new(5, 1),
                    end_group_delta: 2,
                    end_object: Some(7),
                },
                &[5, 1, 2, 7],
            ),
        ];
        for (f, bytes) in cases {
            assert_eq!(value(f, v), bytes, "{f:?}");
            assert_eq!(decode(bytes, v).unwrap(), f, "{bytes:?}");
            assert_eq!(decode(bytes, Version::Draft21).unwrap(), f);
        }
        // An open start at {0, 0} is no filter; five fields are a violation; so is an end group
        // past 2^64-1.
        assert_eq!(
            value(LocationFilter::AbsoluteStart(Location::new(0, 0)), v),
            [] as [u8; 0]
        );
        assert!(decode(&[1, 2, 3, 4, 5], v).is_err());
        let mut over = Vec::new();
        crate::coding::Vi64::encode(u64::MAX, &mut over);
        over.extend([0, 1]);
        assert!(matches!(decode(&over, v), Err(DecodeError::Overflow(_))));
    }

    /// Draft-22: an explicit Location Filter Type names the fields; {0, 0} is a real absolute
    /// start and Next Object has a type of its own.
    #[test]
    fn location_filter_by_type() {
        let v = Version::Draft22;
        let cases: [(LocationFilter, &[u8]); 6] = [
            (LocationFilter::All, &[0]),
            (LocationFilter::RelativeGroups(1), &[1, 1]),
            (
                LocationFilter::AbsoluteStart(Location::new(4, 2)),
                &[2, 4, 2],
            ),
            (
                LocationFilter::AbsoluteRange {
                    start: Location::new(5, 1),
                    end_group_delta: 2,
                    end_object: None,
                },
                &[3, 5, 1, 2],
            ),
            (
                LocationFilter::AbsoluteRange {
                    start: Location::new(5, 1),
                    end_group_delta: 2,
                    end_object: Some(7),
                },
                &[4, 5, 1, 2, 7],
            ),
            (LocationFilter::LargestObject, &[5]),
        ];
        for (f, bytes) in cases {
            assert_eq!(value(f, v), bytes, "{f:?}");
            assert_eq!(decode(bytes, v).unwrap(), f, "{bytes:?}");
        }
        assert_eq!(decode(&[1, 0], v).unwrap(), LocationFilter::NextGroupStart);
        assert_eq!(decode(&[2, 0, 0], v).unwrap(), LocationFilter::All);
        assert!(matches!(
            decode(&[6], v),
            Err(DecodeError::InvalidValue { .. })
        ));
    }
}
