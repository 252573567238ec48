//! What the data plane carries and how a subscription filters it: objects, a subscription's
//! parameters and filters (draft-19 §5.1), and stream priorities (§7.2).

use std::time::Duration;

use bytes::Bytes;
use moq_core::codes::RequestErrorCode;
use moq_core::data::ObjectStatus;
use moq_core::message::{Parameters, RequestError};

use crate::session::SessionCore;
use moq_core::{
    GroupOrder, Location, LocationFilter, Properties, RangeFilter, RangeFilterKind,
    RangeFilterParam,
};

/// One object as the data plane carries it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Object {
    /// Group and Object ID.
    pub location: Location,
    /// The Subgroup ID; `None` for an object sent as a datagram.
    pub subgroup: Option<u64>,
    /// The publisher priority (0 highest).
    pub priority: u8,
    /// Normal, End of Group or End of Track.
    pub status: ObjectStatus,
    /// Object Properties.
    pub properties: Properties,
    /// The payload (empty unless the status is Normal).
    pub payload: Bytes,
    /// A datagram's END_OF_GROUP: the last object of its group (draft-19 §11.3.1). Objects
    /// on a subgroup stream say it with the stream's header instead, and a FETCH does not
    /// carry it.
    pub end_of_group: bool,
}

/// The publisher's view of one subscription's parameters, as SUBSCRIBE / PUBLISH_OK /
/// REQUEST_UPDATE left them (draft-19 §5.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubscriptionParams {
    /// Forward State: objects are sent only when true.
    pub forward: bool,
    /// Subscriber priority (0 highest, default 128).
    pub subscriber_priority: u8,
    /// The group order the subscriber asked for, if any.
    pub group_order: Option<GroupOrder>,
    /// The Location Filter as sent; `None` means unfiltered.
    pub location_filter: Option<LocationFilter>,
    /// Where the filter starts, resolved against the Largest Object when it was set.
    pub start: Location,
    /// The last group that passes, if the filter has an end.
    pub end_group: Option<u64>,
    /// The Largest Location when the subscription was established (SUBSCRIBE_OK's, or the
    /// PUBLISH's), on the publisher's side: a subscription carries only what is published
    /// after it, whatever its filter; earlier objects are FETCH's (draft-19 §10.7, §5.1.2).
    pub established: Option<Location>,
    /// Range Filters on objects (SUBGROUP, OBJECTID, PRIORITY, OBJECT_PROPERTY).
    pub range_filters: Vec<RangeFilterParam>,
    /// The subscriber's OBJECT_DELIVERY_TIMEOUT.
    pub object_delivery_timeout: Option<Duration>,
    /// The subscriber's SUBGROUP_DELIVERY_TIMEOUT.
    pub subgroup_delivery_timeout: Option<Duration>,
    /// NEW_GROUP_REQUEST, if the subscriber asked for a new group.
    pub new_group_request: Option<u64>,
}

impl Default for SubscriptionParams {
    fn default() -> Self {
        SubscriptionParams {
            forward: true,
            subscriber_priority: 128,
            group_order: None,
            location_filter: None,
            start: Location::default(),
            end_group: None,
            established: None,
            range_filters: Vec::new(),
            object_delivery_timeout: None,
            subgroup_delivery_timeout: None,
            new_group_request: None,
        }
    }
}

/// A duration parameter in milliseconds; 0 (or absent) means none.
pub(crate) fn ms(v: Option<u64>) -> Option<Duration> {
    v.filter(|x| *x > 0).map(Duration::from_millis)
}

impl SubscriptionParams {
    /// The parameters a SUBSCRIBE (or PUBLISH_OK) set, with `largest` the publisher's Largest
    /// Object at that time (draft-19 §5.1.2 resolves relative filters against it).
    pub fn from_request(params: &Parameters, largest: Option<Location>) -> Self {
        let mut s = SubscriptionParams::default();
        s.apply(params, largest);
        s
    }

    /// Applies the parameters of a REQUEST_UPDATE: omitted ones keep their value
    /// (draft-19 §10.9); a Range Filter with Length 0 removes that filter.
    pub fn apply(&mut self, params: &Parameters, largest: Option<Location>) {
        if let Some(f) = params.forward {
            self.forward = f;
        }
        if let Some(p) = params.subscriber_priority {
            self.subscriber_priority = p;
        }
        if let Some(g) = params.group_order {
            self.group_order = Some(g);
        }
        if let Some(f) = params.location_filter {
            self.location_filter = Some(f);
            self.start = f.start(largest);
            self.end_group = f.end_group();
        }
        RangeFilterParam::apply_update(&mut self.range_filters, &params.range_filters);
        if params.object_delivery_timeout.is_some() {
            self.object_delivery_timeout = ms(params.object_delivery_timeout);
        }
        if params.subgroup_delivery_timeout.is_some() {
            self.subgroup_delivery_timeout = ms(params.subgroup_delivery_timeout);
        }
        if params.new_group_request.is_some() {
            self.new_group_request = params.new_group_request;
        }
    }

    /// True if the location passes the Location Filter (draft-19 §5.1.2) and comes after the
    /// subscription was established (§10.7: only newly published objects).
    pub fn in_range(&self, loc: Location) -> bool {
        loc >= self.first() && self.end_group.is_none_or(|end| loc.group <= end)
    }

    /// The first location that may be sent: the filter's start, or the one after the Largest
    /// Location at establishment if that is later (draft-19 §10.7).
    pub fn first(&self) -> Location {
        let after =
            self.established
                .map_or(Location::default(), |l| match l.object.checked_add(1) {
                    Some(o) => Location::new(l.group, o),
                    None => Location::new(l.group.saturating_add(1), 0),
                });
        self.start.max(after)
    }

    /// True if an object passes every filter: Forward AND Location AND Range Filters
    /// (draft-19 §5.1.4).
    pub fn passes(&self, obj: ObjectMeta<'_>) -> bool {
        self.forward && self.in_range(obj.location) && self.passes_range_filters(obj)
    }

    /// True if an object passes the Range Filters on objects (SUBGROUP, OBJECTID, PRIORITY,
    /// OBJECT_PROPERTY; draft-19 §5.1.3).
    pub fn passes_range_filters(&self, obj: ObjectMeta<'_>) -> bool {
        Self::object_passes(&self.range_filters, obj)
    }

    /// True if an object passes `filters`' Range Filters on objects; a FETCH's too (draft-19
    /// §5.1.3, §10.12).
    pub fn object_passes(filters: &[RangeFilterParam], obj: ObjectMeta<'_>) -> bool {
        sets_pass(filters, false, |kind, f| match kind {
            RangeFilterKind::Subgroup => obj.subgroup.is_some_and(|s| f.matches(s)),
            RangeFilterKind::ObjectId => f.matches(obj.location.object),
            RangeFilterKind::Priority => f.matches(obj.priority.into()),
            RangeFilterKind::ObjectProperty => property_matches(f, obj.properties),
            RangeFilterKind::TrackProperty => true,
        })
    }

    /// True if the track's properties pass the TRACK_PROPERTY_FILTERs (draft-19 §6.3).
    pub fn track_passes(filters: &[RangeFilterParam], track_properties: &Properties) -> bool {
        sets_pass(filters, true, |_, f| property_matches(f, track_properties))
    }
}

/// The fields of an object that a subscription's filters look at.
#[derive(Clone, Copy, Debug)]
pub struct ObjectMeta<'a> {
    /// Group and Object ID.
    pub location: Location,
    /// The Subgroup ID; `None` for a datagram.
    pub subgroup: Option<u64>,
    /// The publisher priority.
    pub priority: u8,
    /// Object Properties.
    pub properties: &'a Properties,
}

impl Object {
    /// The fields filters look at.
    pub fn meta(&self) -> ObjectMeta<'_> {
        ObjectMeta {
            location: self.location,
            subgroup: self.subgroup,
            priority: self.priority,
            properties: &self.properties,
        }
    }
}

/// Range Filters of one family (on the track's properties, or on objects): those with one
/// SetID are ANDed, the sets are ORed (draft-19 §5.1.3); none at all passes everything.
fn sets_pass(
    filters: &[RangeFilterParam],
    track: bool,
    passes: impl Fn(RangeFilterKind, &RangeFilter) -> bool,
) -> bool {
    let active: Vec<(RangeFilterKind, &RangeFilter)> = filters
        .iter()
        .filter(|p| (p.kind == RangeFilterKind::TrackProperty) == track)
        .filter_map(|p| p.filter.as_ref().map(|f| (p.kind, f)))
        .collect();
    if active.is_empty() {
        return true;
    }
    let mut sets: Vec<u8> = active.iter().map(|(_, f)| f.set_id).collect();
    sets.sort_unstable();
    sets.dedup();
    sets.into_iter().any(|set| {
        active
            .iter()
            .filter(|(_, f)| f.set_id == set)
            .all(|(kind, f)| passes(*kind, f))
    })
}

/// A PROPERTY filter: the property is present and its value in range.
fn property_matches(f: &RangeFilter, properties: &Properties) -> bool {
    f.property_type
        .and_then(|t| properties.get_int(t))
        .is_some_and(|v| f.matches(v))
}

/// The last location a range covers, given the FETCH encoding of its end (the last object plus
/// one; object 0 = the whole group, whose last location is Object ID `u64::MAX`).
///
/// ```
/// use moq_core::Location;
/// use moq_transport::track::last_covered;
/// assert_eq!(last_covered(Location::new(3, 5)), Location::new(3, 4));
/// assert_eq!(last_covered(Location::new(3, 0)), Location::new(3, u64::MAX));
/// ```
pub fn last_covered(end: Location) -> Location {
    if end.object == 0 {
        Location::new(end.group, u64::MAX)
    } else {
        Location::new(end.group, end.object - 1)
    }
}

impl SubscriptionParams {
    /// The subscription's parameters a FILL_PARAMETERS inherits where it says nothing
    /// (draft-21 §9.20.16): Location Filter, Range Filters, priority and group order.
    pub(crate) fn fill_defaults(&self) -> Parameters {
        Parameters {
            location_filter: self.location_filter,
            range_filters: self.range_filters.clone(),
            subscriber_priority: Some(self.subscriber_priority),
            group_order: self.group_order,
            ..Default::default()
        }
    }
}

/// The fill range a FILL_PARAMETERS asks for (draft-21 §3.4, from draft-20), as the first and
/// the last location (inclusive): its own LOCATION_FILTER, else the subscription's, evaluated
/// with FETCH rules against the publisher's Largest Object; no filter is the whole track.
/// `None` when the range is empty (nothing published, or it starts after the Largest Object):
/// then no fill fetch stream is opened.
///
/// ```
/// use moq_core::{Location, LocationFilter, message::Parameters};
/// use moq_transport::track::fill_range;
/// let fill = Parameters { location_filter: Some(LocationFilter::RelativeGroups(2)), ..Default::default() };
/// let largest = Some(Location::new(7, 3));
/// assert_eq!(fill_range(&fill, None, largest), Some((Location::new(6, 0), Location::new(7, 3))));
/// let next = Parameters { location_filter: Some(LocationFilter::LargestObject), ..Default::default() };
/// assert_eq!(fill_range(&next, None, largest), None);
/// ```
pub fn fill_range(
    fill: &Parameters,
    subscription: Option<LocationFilter>,
    largest: Option<Location>,
) -> Option<(Location, Location)> {
    let largest = largest?;
    let filter = fill.location_filter.or(subscription);
    let start = filter.map_or(Location::default(), |f| f.start(Some(largest)));
    let end = filter
        .and_then(|f| f.end())
        .map_or(largest, |e| e.min(largest));
    (start <= end).then_some((start, end))
}

/// The Track Properties an answer (SUBSCRIBE_OK, FETCH_OK, TRACK_STATUS_OK) carries for a
/// request with `request`'s parameters: none if it asked with INCLUDE_PROPERTIES 0 (draft-21
/// §9.20.22, from draft-20: the field stays, empty).
pub(crate) fn answer_properties(request: &Parameters, props: Properties) -> Properties {
    if request.include_properties == Some(false) {
        Properties::default()
    } else {
        props
    }
}

/// INVALID_FILTER for more Range Filter ranges than we allow (draft-19 §10.3.1.6), or any on a
/// version without Range Filters.
pub(crate) fn filter_budget(core: &SessionCore, params: &Parameters) -> Option<RequestError> {
    ranges_budget(core, params.filter_range_count())
}

/// [`filter_budget`] for `n` ranges in all.
pub(crate) fn ranges_budget(core: &SessionCore, n: usize) -> Option<RequestError> {
    let n = n as u64;
    let version = core.version();
    (n > core.config().max_filter_ranges || (n > 0 && !version.has_range_filters()))
        .then(|| RequestError::new(RequestErrorCode::INVALID_FILTER, "too many filter ranges"))
}

/// The QUIC send priority of a data stream (higher is sent first), from the draft's
/// scheduling order (draft-19 §7.2): subscriber priority, then publisher priority, then group
/// order, then lowest Subgroup ID. Always below request and control streams.
///
/// Group IDs only count modulo 4096 and Subgroup IDs up to 7: enough to order the groups and
/// subgroups in flight at once.
pub fn stream_priority(
    subscriber: u8,
    publisher: u8,
    order: GroupOrder,
    group: u64,
    subgroup: u64,
) -> i32 {
    let sub = i32::from(255 - subscriber) << 23;
    let publ = i32::from(255 - publisher) << 15;
    let g = (group & 0xFFF) as i32;
    let g = match order {
        GroupOrder::Ascending => 0xFFF - g,
        GroupOrder::Descending => g,
    };
    let sg = 7 - subgroup.min(7) as i32;
    (sub | publ | (g << 3) | sg).min(i32::MAX - 2)
}

/// A duration in milliseconds for the wire.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use moq_core::FilterRange;

    fn meta(location: Location, priority: u8, properties: &Properties) -> ObjectMeta<'_> {
        ObjectMeta {
            location,
            subgroup: Some(0),
            priority,
            properties,
        }
    }

    #[test]
    fn priority_order() {
        let p = |s, p, o, g, sg| stream_priority(s, p, o, g, sg);
        // Subscriber priority dominates, then publisher priority.
        assert!(p(0, 255, GroupOrder::Ascending, 0, 0) > p(1, 0, GroupOrder::Ascending, 0, 0));
        assert!(p(5, 0, GroupOrder::Ascending, 9, 0) > p(5, 1, GroupOrder::Ascending, 0, 0));
        // Group order within a subscription.
        assert!(p(5, 5, GroupOrder::Descending, 10, 0) > p(5, 5, GroupOrder::Descending, 9, 0));
        assert!(p(5, 5, GroupOrder::Ascending, 9, 0) > p(5, 5, GroupOrder::Ascending, 10, 0));
        // Lowest subgroup first.
        assert!(p(5, 5, GroupOrder::Ascending, 9, 0) > p(5, 5, GroupOrder::Ascending, 9, 1));
        assert!(p(0, 0, GroupOrder::Descending, 4095, 0) < i32::MAX - 1);
    }

    #[test]
    fn filters_combine() {
        let mut s = SubscriptionParams::default();
        s.apply(
            &Parameters {
                location_filter: Some(LocationFilter::AbsoluteRange {
                    end_object: None,
                    start: Location::new(2, 1),
                    end_group_delta: 2,
                }),
                range_filters: vec![
                    RangeFilterParam {
                        kind: RangeFilterKind::ObjectId,
                        filter: Some(RangeFilter {
                            set_id: 0,
                            property_type: None,
                            ranges: vec![FilterRange {
                                start: 0,
                                end: Some(3),
                            }],
                        }),
                    },
                    RangeFilterParam {
                        kind: RangeFilterKind::Priority,
                        filter: Some(RangeFilter {
                            set_id: 1,
                            property_type: None,
                            ranges: vec![FilterRange {
                                start: 0,
                                end: Some(0),
                            }],
                        }),
                    },
                ],
                ..Default::default()
            },
            None,
        );
        let props = Properties::new();
        assert!(
            !s.passes(meta(Location::new(2, 0), 9, &props)),
            "before the start"
        );
        assert!(
            s.passes(meta(Location::new(2, 1), 9, &props)),
            "set 0 passes"
        );
        assert!(
            s.passes(meta(Location::new(3, 9), 0, &props)),
            "set 1 passes"
        );
        assert!(
            !s.passes(meta(Location::new(3, 9), 9, &props)),
            "neither set"
        );
        assert!(
            !s.passes(meta(Location::new(5, 0), 0, &props)),
            "after the end group"
        );
        // REQUEST_UPDATE removes a filter with Length 0 and leaves the rest.
        s.apply(
            &Parameters {
                range_filters: vec![RangeFilterParam {
                    kind: RangeFilterKind::ObjectId,
                    filter: None,
                }],
                forward: Some(false),
                ..Default::default()
            },
            None,
        );
        assert_eq!(s.range_filters.len(), 1);
        assert!(
            !s.passes(meta(Location::new(2, 1), 0, &props)),
            "forward 0 passes nothing"
        );
    }
}
