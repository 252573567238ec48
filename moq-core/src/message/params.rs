//! Message Parameters (draft-19 §10.2) and the table of which message may carry which.
//!
//! Parameters are count-prefixed, delta-typed in ascending order, and every one must be known:
//! an unknown parameter, one in a message that may not carry it, or a repeat of one that may not
//! repeat, closes the session with PROTOCOL_VIOLATION.

use bytes::{Buf, BufMut};

use crate::coding::{BufExt, BufMutExt, Decode, DecodeError, Encode, EncodeError};
use crate::types::filter::{LocationFilter, RangeFilterKind, RangeFilterParam};
use crate::types::kvp::{KeyValuePair, KvpValue, Properties, encode_kvps};
use crate::types::location::{GroupOrder, Location, put_int};
use crate::types::namespace::TrackNamespace;
use crate::types::token::AuthToken;
use crate::{FilterEncoding, Version};

use super::cluster::{ClusterParams, HopPath};

/// Message Parameter types (draft-19 §15.7).
pub mod param {
    /// OBJECT_DELIVERY_TIMEOUT (varint ms).
    pub const OBJECT_DELIVERY_TIMEOUT: u64 = 0x02;
    /// AUTHORIZATION_TOKEN (length-prefixed Token).
    pub const AUTHORIZATION_TOKEN: u64 = 0x03;
    /// RENDEZVOUS_TIMEOUT (varint ms).
    pub const RENDEZVOUS_TIMEOUT: u64 = 0x04;
    /// SUBGROUP_DELIVERY_TIMEOUT (varint ms).
    pub const SUBGROUP_DELIVERY_TIMEOUT: u64 = 0x06;
    /// EXPIRES (varint ms).
    pub const EXPIRES: u64 = 0x08;
    /// LARGEST_OBJECT (Location).
    pub const LARGEST_OBJECT: u64 = 0x09;
    /// FILL_TIMEOUT (varint ms).
    pub const FILL_TIMEOUT: u64 = 0x0A;
    /// FORWARD (uint8, 0 or 1).
    pub const FORWARD: u64 = 0x10;
    /// SUBSCRIBER_PRIORITY (uint8).
    pub const SUBSCRIBER_PRIORITY: u64 = 0x20;
    /// LOCATION_FILTER (length-prefixed Location Filter); SUBSCRIPTION_FILTER in draft-18.
    pub const LOCATION_FILTER: u64 = 0x21;
    /// GROUP_ORDER (uint8, 1 or 2).
    pub const GROUP_ORDER: u64 = 0x22;
    /// FILL_PARAMETERS (length-prefixed Parameters of the fill fetch stream; from draft-20).
    pub const FILL_PARAMETERS: u64 = 0x23;
    /// NEW_GROUP_REQUEST (varint).
    pub const NEW_GROUP_REQUEST: u64 = 0x32;
    /// TRACK_NAMESPACE_PREFIX (Track Namespace).
    pub const TRACK_NAMESPACE_PREFIX: u64 = 0x34;
    /// INCLUDE_PROPERTIES (uint8, 0 or 1; from draft-20).
    pub const INCLUDE_PROPERTIES: u64 = 0x35;
    /// HOP_PATH (length-prefixed Hop IDs; MoQ Cluster extension, draft-17 on).
    pub const HOP_PATH: u64 = super::super::cluster::HOP_PATH;
    /// ROUTE_COST (varint; MoQ Cluster extension, draft-17 on).
    pub const ROUTE_COST: u64 = super::super::cluster::ROUTE_COST;
}

/// The message (or textual alias) a parameter block belongs to. The table of draft-19 §10.2 is
/// written against these; a wire message that plays several roles (REQUEST_OK,
/// REQUEST_UPDATE) is checked against the union when decoded and against its exact role by
/// [`Parameters::validate`] once the session knows the role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamContext {
    /// SUBSCRIBE.
    Subscribe,
    /// SUBSCRIBE_OK.
    SubscribeOk,
    /// PUBLISH.
    Publish,
    /// REQUEST_OK answering PUBLISH.
    PublishOk,
    /// FETCH.
    Fetch,
    /// FETCH_OK.
    FetchOk,
    /// TRACK_STATUS.
    TrackStatus,
    /// REQUEST_OK answering TRACK_STATUS.
    TrackStatusOk,
    /// PUBLISH_NAMESPACE.
    PublishNamespace,
    /// REQUEST_OK answering PUBLISH_NAMESPACE.
    PublishNamespaceOk,
    /// SUBSCRIBE_NAMESPACE.
    SubscribeNamespace,
    /// REQUEST_OK answering SUBSCRIBE_NAMESPACE.
    SubscribeNamespaceOk,
    /// SUBSCRIBE_TRACKS.
    SubscribeTracks,
    /// REQUEST_OK answering SUBSCRIBE_TRACKS.
    SubscribeTracksOk,
    /// REQUEST_UPDATE of a subscription (SUBSCRIBE, or PUBLISH from the subscriber).
    UpdateSubscription,
    /// REQUEST_UPDATE of a FETCH.
    UpdateFetch,
    /// REQUEST_UPDATE of a PUBLISH_NAMESPACE.
    UpdatePublishNamespace,
    /// REQUEST_UPDATE of a SUBSCRIBE_NAMESPACE.
    UpdateSubscribeNamespace,
    /// REQUEST_UPDATE of a SUBSCRIBE_TRACKS.
    UpdateSubscribeTracks,
    /// REQUEST_OK answering a REQUEST_UPDATE.
    RequestUpdateOk,
    /// Any REQUEST_OK, before its role is known.
    AnyRequestOk,
    /// Any REQUEST_UPDATE, before its role is known.
    AnyRequestUpdate,
    /// PUBLISH_STATE_NOTIFY (from draft-20).
    PublishStateNotify,
    /// Inside FILL_PARAMETERS: a scope of its own (draft-21 §9.20.16).
    Fill,
    /// The extended NAMESPACE of a session that negotiated the MoQ Cluster extension.
    Namespace,
}

impl ParamContext {
    const fn bit(self) -> u32 {
        match self {
            ParamContext::Subscribe => 1 << 0,
            ParamContext::SubscribeOk => 1 << 1,
            ParamContext::Publish => 1 << 2,
            ParamContext::PublishOk => 1 << 3,
            ParamContext::Fetch => 1 << 4,
            ParamContext::FetchOk => 1 << 5,
            ParamContext::TrackStatus => 1 << 6,
            ParamContext::TrackStatusOk => 1 << 7,
            ParamContext::PublishNamespace => 1 << 8,
            ParamContext::PublishNamespaceOk => 1 << 9,
            ParamContext::SubscribeNamespace => 1 << 10,
            ParamContext::SubscribeNamespaceOk => 1 << 11,
            ParamContext::SubscribeTracks => 1 << 12,
            ParamContext::SubscribeTracksOk => 1 << 13,
            ParamContext::UpdateSubscription => 1 << 14,
            ParamContext::UpdateFetch => 1 << 15,
            ParamContext::UpdatePublishNamespace => 1 << 16,
            ParamContext::UpdateSubscribeNamespace => 1 << 17,
            ParamContext::UpdateSubscribeTracks => 1 << 18,
            ParamContext::RequestUpdateOk => 1 << 19,
            ParamContext::PublishStateNotify => 1 << 20,
            ParamContext::Fill => 1 << 21,
            ParamContext::Namespace => 1 << 22,
            ParamContext::AnyRequestOk => {
                ParamContext::PublishOk.bit()
                    | ParamContext::TrackStatusOk.bit()
                    | ParamContext::PublishNamespaceOk.bit()
                    | ParamContext::SubscribeNamespaceOk.bit()
                    | ParamContext::SubscribeTracksOk.bit()
                    | ParamContext::RequestUpdateOk.bit()
            }
            ParamContext::AnyRequestUpdate => {
                ParamContext::UpdateSubscription.bit()
                    | ParamContext::UpdateFetch.bit()
                    | ParamContext::UpdatePublishNamespace.bit()
                    | ParamContext::UpdateSubscribeNamespace.bit()
                    | ParamContext::UpdateSubscribeTracks.bit()
            }
        }
    }

    /// A name for error messages.
    pub const fn name(self) -> &'static str {
        match self {
            ParamContext::Subscribe => "SUBSCRIBE",
            ParamContext::SubscribeOk => "SUBSCRIBE_OK",
            ParamContext::Publish => "PUBLISH",
            ParamContext::PublishOk => "PUBLISH_OK",
            ParamContext::Fetch => "FETCH",
            ParamContext::FetchOk => "FETCH_OK",
            ParamContext::TrackStatus => "TRACK_STATUS",
            ParamContext::TrackStatusOk => "TRACK_STATUS_OK",
            ParamContext::PublishNamespace => "PUBLISH_NAMESPACE",
            ParamContext::PublishNamespaceOk => "PUBLISH_NAMESPACE_OK",
            ParamContext::SubscribeNamespace => "SUBSCRIBE_NAMESPACE",
            ParamContext::SubscribeNamespaceOk => "SUBSCRIBE_NAMESPACE_OK",
            ParamContext::SubscribeTracks => "SUBSCRIBE_TRACKS",
            ParamContext::SubscribeTracksOk => "SUBSCRIBE_TRACKS_OK",
            ParamContext::UpdateSubscription => "REQUEST_UPDATE (subscription)",
            ParamContext::UpdateFetch => "REQUEST_UPDATE (fetch)",
            ParamContext::UpdatePublishNamespace => "REQUEST_UPDATE (publish namespace)",
            ParamContext::UpdateSubscribeNamespace => "REQUEST_UPDATE (subscribe namespace)",
            ParamContext::UpdateSubscribeTracks => "REQUEST_UPDATE (subscribe tracks)",
            ParamContext::RequestUpdateOk => "REQUEST_UPDATE_OK",
            ParamContext::AnyRequestOk => "REQUEST_OK",
            ParamContext::AnyRequestUpdate => "REQUEST_UPDATE",
            ParamContext::PublishStateNotify => "PUBLISH_STATE_NOTIFY",
            ParamContext::Fill => "FILL_PARAMETERS",
            ParamContext::Namespace => "NAMESPACE",
        }
    }
}

use ParamContext as C;

/// Where each parameter may appear in `version`, as a mask of [`ParamContext`] bits; 0 means the
/// parameter does not exist in that version (draft-19 §10.2.x and draft-21 §9.20.x, each
/// parameter's "MAY appear in").
const fn allowed_mask(ty: u64, v: Version) -> u32 {
    if v.params_are_kvps() {
        return kvp_allowed_mask(ty, v);
    }
    // Parameters valid on a subscription are also valid in SUBSCRIBE_TRACKS (draft-19 §10.19.1).
    const SUB_LIKE: u32 = C::Subscribe.bit() | C::SubscribeTracks.bit();
    // Until draft-19 the subscriber's choices for a PUBLISH travel in PUBLISH_OK; from draft-20
    // the publisher's initial values travel in PUBLISH and PUBLISH_OK carries none (draft-21
    // §9.8), and PUBLISH_STATE_NOTIFY reports the publisher's state.
    let (publish, notify, fill) = if v.has_fill() {
        (C::Publish.bit(), C::PublishStateNotify.bit(), C::Fill.bit())
    } else {
        (C::PublishOk.bit(), 0, 0)
    };
    match ty {
        // Draft-17 has DELIVERY_TIMEOUT (0x02) alone, and no FILL_TIMEOUT or
        // TRACK_NAMESPACE_PREFIX (NOTES B.5).
        param::SUBGROUP_DELIVERY_TIMEOUT | param::FILL_TIMEOUT | param::TRACK_NAMESPACE_PREFIX
            if !v.has_draft18_parameters() =>
        {
            0
        }
        param::OBJECT_DELIVERY_TIMEOUT | param::SUBGROUP_DELIVERY_TIMEOUT => {
            SUB_LIKE | publish | C::UpdateSubscription.bit()
        }
        param::AUTHORIZATION_TOKEN => {
            C::Publish.bit()
                | C::Subscribe.bit()
                | C::AnyRequestUpdate.bit()
                | C::SubscribeNamespace.bit()
                | C::SubscribeTracks.bit()
                | C::PublishNamespace.bit()
                | C::TrackStatus.bit()
                | C::Fetch.bit()
        }
        // draft-19 §10.2.6 lists SUBSCRIBE; §10.19.1 makes every SUBSCRIBE parameter valid in
        // SUBSCRIBE_TRACKS too.
        param::RENDEZVOUS_TIMEOUT => SUB_LIKE,
        // draft-19 §10.2.7 lists no TRACK_STATUS_OK, but §10.14 gives TRACK_STATUS_OK "the same
        // parameters ... it would have set in a SUBSCRIBE_OK": accepted there, never sent there
        // (see moq-transport track/status.rs), so peers of either reading keep working.
        param::EXPIRES => {
            C::TrackStatusOk.bit()
                | C::SubscribeOk.bit()
                | C::Publish.bit()
                | C::PublishOk.bit()
                | C::SubscribeNamespaceOk.bit()
                | C::SubscribeTracksOk.bit()
                | C::PublishNamespaceOk.bit()
                | C::RequestUpdateOk.bit()
        }
        param::LARGEST_OBJECT => {
            C::SubscribeOk.bit()
                | C::Publish.bit()
                | C::RequestUpdateOk.bit()
                | C::TrackStatusOk.bit()
                | notify
        }
        param::FILL_TIMEOUT => C::Fetch.bit() | fill,
        // draft-21 §9.20.19: also in a REQUEST_UPDATE of SUBSCRIBE_TRACKS.
        param::FORWARD if v.has_fill() => {
            SUB_LIKE
                | C::UpdateSubscription.bit()
                | C::UpdateSubscribeTracks.bit()
                | C::Publish.bit()
                | notify
        }
        param::FORWARD => {
            SUB_LIKE | C::UpdateSubscription.bit() | C::Publish.bit() | C::PublishOk.bit()
        }
        param::SUBSCRIBER_PRIORITY => {
            SUB_LIKE
                | C::Fetch.bit()
                | C::UpdateSubscription.bit()
                | C::UpdateFetch.bit()
                | publish
                | fill
        }
        param::LOCATION_FILTER if v.has_fill() => {
            SUB_LIKE | C::Fetch.bit() | publish | C::UpdateSubscription.bit() | notify | fill
        }
        param::LOCATION_FILTER => SUB_LIKE | C::PublishOk.bit() | C::UpdateSubscription.bit(),
        // draft-19 §10.19.1: a PUBLISH resulting from SUBSCRIBE_TRACKS carries its GROUP_ORDER
        // (§10.2.9 does not list PUBLISH; draft-21 §9.20.9 does, for every PUBLISH).
        param::GROUP_ORDER => {
            if v.group_order_in_publish_ok() {
                C::Subscribe.bit() | C::PublishOk.bit() | C::Fetch.bit()
            } else {
                SUB_LIKE | C::Fetch.bit() | C::Publish.bit() | fill
            }
        }
        param::FILL_PARAMETERS if v.has_fill() => C::Subscribe.bit() | C::UpdateSubscription.bit(),
        0x25..=0x28 if v.has_fill() => {
            SUB_LIKE | C::Fetch.bit() | C::UpdateSubscription.bit() | fill
        }
        0x25..=0x28 if v.has_range_filters() => {
            SUB_LIKE | C::Fetch.bit() | C::PublishOk.bit() | C::UpdateSubscription.bit()
        }
        0x29 if v.has_range_filters() => C::SubscribeTracks.bit() | C::UpdateSubscribeTracks.bit(),
        param::NEW_GROUP_REQUEST if v.has_fill() => SUB_LIKE | C::UpdateSubscription.bit(),
        param::NEW_GROUP_REQUEST => SUB_LIKE | C::PublishOk.bit() | C::UpdateSubscription.bit(),
        param::TRACK_NAMESPACE_PREFIX => {
            C::UpdateSubscribeNamespace.bit() | C::UpdateSubscribeTracks.bit()
        }
        param::INCLUDE_PROPERTIES if v.has_fill() => {
            C::Subscribe.bit() | C::TrackStatus.bit() | C::Fetch.bit() | C::SubscribeTracks.bit()
        }
        // draft-lcurley-moq-cluster-01 IANA Considerations: on every advertisement
        // (PUBLISH_NAMESPACE, the extended NAMESPACE) and on the REQUEST_UPDATE that re-routes a
        // PUBLISH_NAMESPACE.
        param::HOP_PATH | param::ROUTE_COST if v.has_cluster_extension() => {
            C::PublishNamespace.bit() | C::UpdatePublishNamespace.bit() | C::Namespace.bit()
        }
        _ => 0,
    }
}

/// The rows of drafts 14-16 (draft-14 §9.2.1, draft-16 §9.2.2; draft-15 from draft-16 and the
/// notes' B.2): where each parameter of the model may appear. In draft-14 the values that
/// later became parameters (Subscriber Priority, Group Order, Forward, the filter, Expires,
/// Largest Location) are fields of the messages; the rows list where those fields map to.
/// SUBSCRIBE_TRACKS is draft-16's SUBSCRIBE_NAMESPACE with Subscribe Options PUBLISH.
const fn kvp_allowed_mask(ty: u64, v: Version) -> u32 {
    let d14 = v.inline_request_fields();
    match ty {
        param::OBJECT_DELIVERY_TIMEOUT => {
            C::Subscribe.bit() | C::PublishOk.bit() | C::UpdateSubscription.bit()
        }
        param::AUTHORIZATION_TOKEN => {
            C::Publish.bit()
                | C::Subscribe.bit()
                | C::SubscribeTracks.bit()
                | C::AnyRequestUpdate.bit()
                | C::SubscribeNamespace.bit()
                | C::PublishNamespace.bit()
                | C::TrackStatus.bit()
                | C::Fetch.bit()
        }
        param::EXPIRES if d14 => C::SubscribeOk.bit() | C::TrackStatusOk.bit(),
        param::EXPIRES => {
            C::SubscribeOk.bit()
                | C::Publish.bit()
                | C::PublishOk.bit()
                | C::TrackStatusOk.bit()
                | C::RequestUpdateOk.bit()
        }
        param::LARGEST_OBJECT if d14 => {
            C::SubscribeOk.bit() | C::Publish.bit() | C::TrackStatusOk.bit()
        }
        param::LARGEST_OBJECT => {
            C::SubscribeOk.bit()
                | C::Publish.bit()
                | C::TrackStatusOk.bit()
                | C::RequestUpdateOk.bit()
        }
        param::FORWARD if d14 => {
            C::Subscribe.bit() | C::UpdateSubscription.bit() | C::Publish.bit() | C::PublishOk.bit()
        }
        // draft-16 §9.2.2.8 (and draft-15, "Add Forward to SUBSCRIBE_NAMESPACE").
        param::FORWARD => {
            C::Subscribe.bit()
                | C::UpdateSubscription.bit()
                | C::Publish.bit()
                | C::PublishOk.bit()
                | C::SubscribeNamespace.bit()
                | C::SubscribeTracks.bit()
        }
        param::SUBSCRIBER_PRIORITY if d14 => {
            C::Subscribe.bit() | C::UpdateSubscription.bit() | C::PublishOk.bit() | C::Fetch.bit()
        }
        param::SUBSCRIBER_PRIORITY => {
            C::Subscribe.bit()
                | C::Fetch.bit()
                | C::UpdateSubscription.bit()
                | C::UpdateFetch.bit()
                | C::PublishOk.bit()
        }
        param::LOCATION_FILTER => {
            C::Subscribe.bit() | C::PublishOk.bit() | C::UpdateSubscription.bit()
        }
        param::GROUP_ORDER => C::Subscribe.bit() | C::PublishOk.bit() | C::Fetch.bit(),
        param::NEW_GROUP_REQUEST if v.has_new_group_request() => {
            C::Subscribe.bit() | C::PublishOk.bit() | C::UpdateSubscription.bit()
        }
        _ => 0,
    }
}

/// Whether a draft-14..16 Message Parameter type is one the version defines (draft-14 §9.2.1:
/// DELIVERY_TIMEOUT, AUTHORIZATION_TOKEN, MAX_CACHE_DURATION; draft-15 adds EXPIRES,
/// LARGEST_OBJECT, PUBLISHER_PRIORITY, FORWARD, SUBSCRIBER_PRIORITY, SUBSCRIPTION_FILTER,
/// GROUP_ORDER; draft-16 §13.2 moves MAX_CACHE_DURATION and PUBLISHER_PRIORITY to Track
/// Extensions and adds NEW_GROUP_REQUEST).
const fn kvp_param_known(ty: u64, v: Version) -> bool {
    match ty {
        param::OBJECT_DELIVERY_TIMEOUT | param::AUTHORIZATION_TOKEN => true,
        MAX_CACHE_DURATION => !v.has_track_extensions(),
        PUBLISHER_PRIORITY => !v.inline_request_fields() && !v.has_track_extensions(),
        param::EXPIRES
        | param::LARGEST_OBJECT
        | param::FORWARD
        | param::SUBSCRIBER_PRIORITY
        | param::LOCATION_FILTER
        | param::GROUP_ORDER => !v.inline_request_fields(),
        param::NEW_GROUP_REQUEST => v.has_new_group_request(),
        _ => false,
    }
}

/// MAX_CACHE_DURATION, a Message Parameter until draft-15 (draft-14 §9.2.1.3).
const MAX_CACHE_DURATION: u64 = 0x04;
/// PUBLISHER_PRIORITY, a Message Parameter in draft-15.
const PUBLISHER_PRIORITY: u64 = 0x0E;

/// The messages whose draft-14/15 parameters include the publisher's values for the track:
/// SUBSCRIBE_OK, PUBLISH, FETCH_OK and TRACK_STATUS_OK (a REQUEST_OK in draft-15).
const fn carries_track_values(ctx: ParamContext) -> bool {
    matches!(
        ctx,
        C::SubscribeOk | C::Publish | C::FetchOk | C::TrackStatusOk | C::AnyRequestOk
    )
}

/// Whether parameter `ty` is, in those messages, a value of the track, which draft-16 moved
/// to Track Extensions (draft-16 §11: DELIVERY_TIMEOUT 0x02, MAX_CACHE_DURATION 0x04,
/// DEFAULT_PUBLISHER_PRIORITY 0x0E, DEFAULT_PUBLISHER_GROUP_ORDER 0x22, each with the
/// parameter's number). The codec keeps such values in the message's Track Properties.
/// Draft-14's Group Order is a field, not a parameter.
const fn is_track_value(ty: u64, v: Version) -> bool {
    if v.has_track_extensions() {
        return false;
    }
    match ty {
        param::OBJECT_DELIVERY_TIMEOUT | MAX_CACHE_DURATION => true,
        PUBLISHER_PRIORITY | param::GROUP_ORDER => !v.inline_request_fields(),
        _ => false,
    }
}

/// A Track Namespace behind a Length that covers it exactly, and the bytes both take.
fn length_prefixed_namespace(bytes: &[u8], v: Version) -> Option<(TrackNamespace, usize)> {
    let mut cur = bytes;
    let len = usize::try_from(cur.get_varint(v).ok()?).ok()?;
    let header = bytes.len() - cur.len();
    let mut body = cur.get(..len)?;
    let ns = TrackNamespace::decode(&mut body, v).ok()?;
    body.is_empty().then_some((ns, header + len))
}

/// A uint8 parameter that may only be 0 or 1; any other value is a PROTOCOL_VIOLATION.
fn get_flag<B: Buf>(buf: &mut B, field: &'static str) -> Result<bool, DecodeError> {
    match buf.get_byte()? {
        0 => Ok(false),
        1 => Ok(true),
        x => Err(DecodeError::InvalidValue {
            field,
            value: x.into(),
        }),
    }
}

/// True if parameter `ty` may appear in `ctx` under `version`.
///
/// ```
/// use moq_core::{Version, message::{ParamContext, param}};
/// use moq_core::message::param_allowed;
/// assert!(param_allowed(param::FORWARD, ParamContext::Subscribe, Version::Draft19));
/// assert!(!param_allowed(param::FORWARD, ParamContext::Fetch, Version::Draft19));
/// assert!(!param_allowed(0x25, ParamContext::Subscribe, Version::Draft18));
/// ```
pub const fn param_allowed(ty: u64, ctx: ParamContext, version: Version) -> bool {
    allowed_mask(ty, version) & ctx.bit() != 0
}

/// The Message Parameters of one control message, typed. Absent parameters are `None` / empty.
///
/// ```
/// use moq_core::message::Parameters;
/// let p = Parameters { forward: Some(false), subscriber_priority: Some(10), ..Default::default() };
/// assert_eq!(p.forward, Some(false));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Parameters {
    /// OBJECT_DELIVERY_TIMEOUT (0x02), ms.
    pub object_delivery_timeout: Option<u64>,
    /// AUTHORIZATION_TOKEN (0x03); may repeat.
    pub authorization_tokens: Vec<AuthToken>,
    /// RENDEZVOUS_TIMEOUT (0x04), ms.
    pub rendezvous_timeout: Option<u64>,
    /// SUBGROUP_DELIVERY_TIMEOUT (0x06), ms.
    pub subgroup_delivery_timeout: Option<u64>,
    /// EXPIRES (0x08), ms.
    pub expires: Option<u64>,
    /// LARGEST_OBJECT (0x09).
    pub largest_object: Option<Location>,
    /// FILL_TIMEOUT (0x0A), ms.
    pub fill_timeout: Option<u64>,
    /// FORWARD (0x10).
    pub forward: Option<bool>,
    /// SUBSCRIBER_PRIORITY (0x20).
    pub subscriber_priority: Option<u8>,
    /// LOCATION_FILTER (0x21).
    pub location_filter: Option<LocationFilter>,
    /// GROUP_ORDER (0x22).
    pub group_order: Option<GroupOrder>,
    /// Range Filters (0x25-0x29); may repeat with different SetID / property type. Encoded
    /// in ascending type order, so decoding yields them sorted by kind.
    pub range_filters: Vec<RangeFilterParam>,
    /// NEW_GROUP_REQUEST (0x32).
    pub new_group_request: Option<u64>,
    /// TRACK_NAMESPACE_PREFIX (0x34).
    pub track_namespace_prefix: Option<TrackNamespace>,
    /// FILL_PARAMETERS (0x23, from draft-20): its presence asks for a fill fetch stream; the
    /// parameters inside override the subscription's for it (draft-21 §9.20.16). Not kept as
    /// subscription state.
    pub fill: Option<Box<Parameters>>,
    /// INCLUDE_PROPERTIES (0x35, from draft-20): whether the answer carries Track Properties.
    pub include_properties: Option<bool>,
    /// HOP_PATH (0x40B57) and ROUTE_COST (0x40B58), the MoQ Cluster extension's (draft-17
    /// on); boxed, as they are rare and every message holds a `Parameters`. `None` when both
    /// are absent. [`Parameters::hop_path`] and [`Parameters::route_cost`] read them.
    pub cluster: Option<Box<ClusterParams>>,
}

impl Parameters {
    /// Applies a REQUEST_UPDATE's parameters: those present replace these, absent ones keep
    /// their value (draft-19 §10.9); Range Filters are replaced kind by kind, and
    /// AUTHORIZATION_TOKENs only when the update carries some. FILL_PARAMETERS is not state
    /// (draft-21 §9.20.16) and is not taken.
    ///
    /// ```
    /// use moq_core::message::Parameters;
    /// let mut p = Parameters { forward: Some(false), subscriber_priority: Some(3), ..Default::default() };
    /// p.update_with(&Parameters { forward: Some(true), ..Default::default() });
    /// assert_eq!((p.forward, p.subscriber_priority), (Some(true), Some(3)));
    /// ```
    pub fn update_with(&mut self, update: &Parameters) {
        fn keep<T: Clone>(mine: &mut Option<T>, new: &Option<T>) {
            if new.is_some() {
                mine.clone_from(new);
            }
        }
        keep(
            &mut self.object_delivery_timeout,
            &update.object_delivery_timeout,
        );
        keep(&mut self.rendezvous_timeout, &update.rendezvous_timeout);
        keep(
            &mut self.subgroup_delivery_timeout,
            &update.subgroup_delivery_timeout,
        );
        keep(&mut self.expires, &update.expires);
        keep(&mut self.largest_object, &update.largest_object);
        keep(&mut self.fill_timeout, &update.fill_timeout);
        keep(&mut self.forward, &update.forward);
        keep(&mut self.subscriber_priority, &update.subscriber_priority);
        keep(&mut self.location_filter, &update.location_filter);
        keep(&mut self.group_order, &update.group_order);
        keep(&mut self.new_group_request, &update.new_group_request);
        keep(&mut self.include_properties, &update.include_properties);
        if let Some(u) = &update.cluster {
            let mine = self.cluster.get_or_insert_default();
            keep(&mut mine.hop_path, &u.hop_path);
            keep(&mut mine.route_cost, &u.route_cost);
        }
        keep(
            &mut self.track_namespace_prefix,
            &update.track_namespace_prefix,
        );
        if !update.authorization_tokens.is_empty() {
            self.authorization_tokens
                .clone_from(&update.authorization_tokens);
        }
        RangeFilterParam::apply_update(&mut self.range_filters, &update.range_filters);
    }

    /// HOP_PATH (MoQ Cluster extension), if present.
    pub fn hop_path(&self) -> Option<&HopPath> {
        self.cluster.as_ref().and_then(|c| c.hop_path.as_ref())
    }

    /// ROUTE_COST (MoQ Cluster extension), if present.
    pub fn route_cost(&self) -> Option<u64> {
        self.cluster.as_ref().and_then(|c| c.route_cost)
    }

    /// Sets HOP_PATH and ROUTE_COST (MoQ Cluster extension); both `None` removes them.
    ///
    /// ```
    /// use moq_core::message::{Parameters, cluster::HopPath};
    /// let p = Parameters::default().with_cluster(HopPath::new(vec![7]), Some(1));
    /// assert_eq!((p.hop_path().map(|h| h.hops().to_vec()), p.route_cost()), (Some(vec![7]), Some(1)));
    /// ```
    pub fn with_cluster(mut self, hop_path: Option<HopPath>, route_cost: Option<u64>) -> Self {
        self.cluster = (hop_path.is_some() || route_cost.is_some()).then(|| {
            Box::new(ClusterParams {
                hop_path,
                route_cost,
            })
        });
        self
    }

    /// True if no parameter is present.
    pub fn is_empty(&self) -> bool {
        *self == Parameters::default()
    }

    /// The types present, ascending, one entry per instance.
    pub fn types(&self) -> Vec<u64> {
        let singles = [
            (
                self.object_delivery_timeout.is_some(),
                param::OBJECT_DELIVERY_TIMEOUT,
            ),
            (self.rendezvous_timeout.is_some(), param::RENDEZVOUS_TIMEOUT),
            (
                self.subgroup_delivery_timeout.is_some(),
                param::SUBGROUP_DELIVERY_TIMEOUT,
            ),
            (self.expires.is_some(), param::EXPIRES),
            (self.largest_object.is_some(), param::LARGEST_OBJECT),
            (self.fill_timeout.is_some(), param::FILL_TIMEOUT),
            (self.forward.is_some(), param::FORWARD),
            (
                self.subscriber_priority.is_some(),
                param::SUBSCRIBER_PRIORITY,
            ),
            (self.location_filter.is_some(), param::LOCATION_FILTER),
            (self.group_order.is_some(), param::GROUP_ORDER),
            (self.fill.is_some(), param::FILL_PARAMETERS),
            (self.new_group_request.is_some(), param::NEW_GROUP_REQUEST),
            (
                self.track_namespace_prefix.is_some(),
                param::TRACK_NAMESPACE_PREFIX,
            ),
            (self.include_properties.is_some(), param::INCLUDE_PROPERTIES),
            (self.hop_path().is_some(), param::HOP_PATH),
            (self.route_cost().is_some(), param::ROUTE_COST),
        ];
        let mut out: Vec<u64> = singles
            .iter()
            .filter(|(p, _)| *p)
            .map(|(_, t)| *t)
            .collect();
        out.extend(
            self.authorization_tokens
                .iter()
                .map(|_| param::AUTHORIZATION_TOKEN),
        );
        out.extend(self.range_filters.iter().map(|f| f.kind.param_type()));
        out.sort_unstable();
        out
    }

    /// Checks every parameter against the exact role `ctx` (draft-19 §10.2.1): a parameter in a
    /// message that may not carry it is a PROTOCOL_VIOLATION.
    pub fn validate(&self, ctx: ParamContext, version: Version) -> Result<(), DecodeError> {
        for ty in self.types() {
            if !param_allowed(ty, ctx, version) {
                return Err(DecodeError::ParameterNotAllowed {
                    param: ty,
                    message: ctx.name(),
                });
            }
        }
        if let Some(fill) = &self.fill {
            fill.validate(ParamContext::Fill, version)?;
        }
        self.check_filters()
    }

    /// draft-19 §5.1.3: the same (type, SetID, property type) may not repeat.
    fn check_filters(&self) -> Result<(), DecodeError> {
        let keys: Vec<_> = self
            .range_filters
            .iter()
            .filter_map(|p| {
                p.filter
                    .as_ref()
                    .map(|f| (p.kind, f.set_id, f.property_type))
            })
            .collect();
        for (i, k) in keys.iter().enumerate() {
            if keys.get(i + 1..).is_some_and(|rest| rest.contains(k)) {
                return Err(DecodeError::InvalidFilter(
                    "filter repeated with the same SetID",
                ));
            }
        }
        Ok(())
    }

    /// Total number of ranges across every Range Filter (compared to MAX_FILTER_RANGES).
    pub fn filter_range_count(&self) -> usize {
        RangeFilterParam::range_count(&self.range_filters)
    }

    /// Reads `Number of Parameters` and the parameters, checking each against `ctx`.
    ///
    /// Drafts 14-16 (Key-Value-Pairs): a parameter the version does not define is ignored
    /// until draft-15 and a PROTOCOL_VIOLATION from draft-16 (§9.2); one defined but not for
    /// this message is ignored (draft-14 §9.2.1, draft-16 §9.2.2). The track's own values of
    /// drafts 14-15 (see [`Parameters::decode_with_track`]) are not kept here.
    pub fn decode<B: Buf>(buf: &mut B, ctx: ParamContext, v: Version) -> Result<Self, DecodeError> {
        if v.params_are_kvps() {
            return Self::decode_with_track(buf, ctx, v).map(|(p, _)| p);
        }
        let count = buf.get_varint(v)?;
        let mut p = Parameters::default();
        let mut ty = 0u64;
        let mut last: Option<u64> = None;
        for _ in 0..count {
            let delta = buf.get_varint(v)?;
            // draft-19 §10.2: a Type past 2^64-1 is a PROTOCOL_VIOLATION.
            ty = ty.checked_add(delta).ok_or(DecodeError::TypeOverflow)?;
            let mask = allowed_mask(ty, v);
            // draft-19 §10.2: an unknown Message Parameter closes the session.
            if mask == 0 {
                return Err(DecodeError::UnknownParameter(ty));
            }
            // draft-19 §10.2.1: a parameter in a message not listed for it is a violation.
            if mask & ctx.bit() == 0 {
                return Err(DecodeError::ParameterNotAllowed {
                    param: ty,
                    message: ctx.name(),
                });
            }
            let repeatable =
                ty == param::AUTHORIZATION_TOKEN || RangeFilterKind::from_param_type(ty).is_some();
            if last == Some(ty) && !repeatable {
                return Err(DecodeError::DuplicateParameter(ty));
            }
            last = Some(ty);
            p.decode_value(ty, buf, v)?;
        }
        p.check_filters()?;
        Ok(p)
    }

    /// Reads the parameters and, for drafts 14-15, the values of the track that SUBSCRIBE_OK,
    /// PUBLISH, FETCH_OK and TRACK_STATUS_OK carry as parameters (DELIVERY_TIMEOUT,
    /// MAX_CACHE_DURATION, PUBLISHER_PRIORITY, GROUP_ORDER), as the Track Properties draft-16
    /// made of them. From draft-16 the properties are empty.
    pub fn decode_with_track<B: Buf>(
        buf: &mut B,
        ctx: ParamContext,
        v: Version,
    ) -> Result<(Self, Properties), DecodeError> {
        if !v.params_are_kvps() {
            return Ok((Self::decode(buf, ctx, v)?, Properties::new()));
        }
        let count = buf.get_varint(v)?;
        let mut p = Parameters::default();
        let mut track = Properties::new();
        let mut seen: Vec<u64> = Vec::new();
        let mut ty = 0u64;
        for _ in 0..count {
            let t = buf.get_varint(v)?;
            ty = if v.kvp_delta_types() {
                // draft-16 §1.4.2: a Delta Type past 2^64-1 is a PROTOCOL_VIOLATION.
                ty.checked_add(t).ok_or(DecodeError::TypeOverflow)?
            } else {
                t
            };
            // draft-14 §1.4.2: even types carry a varint, odd types a Length (at most
            // 2^16-1, else PROTOCOL_VIOLATION) and bytes.
            let value = if ty % 2 == 0 {
                KvpValue::Int(buf.get_varint(v)?)
            } else {
                KvpValue::Bytes(buf.get_len_prefixed(v, "parameter value", u16::MAX as u64)?)
            };
            if !kvp_param_known(ty, v) {
                // draft-14 §9.2: "Receivers ignore unrecognized parameters"; draft-16 §9.2: an
                // unknown Message Parameter MUST close the session with PROTOCOL_VIOLATION.
                if v.ignores_unknown_params() {
                    continue;
                }
                return Err(DecodeError::UnknownParameter(ty));
            }
            // draft-14 §9.2: duplicates of a parameter that may not repeat are a
            // PROTOCOL_VIOLATION.
            if ty != param::AUTHORIZATION_TOKEN {
                if seen.contains(&ty) {
                    return Err(DecodeError::DuplicateParameter(ty));
                }
                seen.push(ty);
            }
            if carries_track_values(ctx) && is_track_value(ty, v) {
                let KvpValue::Int(x) = value else {
                    return Err(DecodeError::KeyValueFormatting("parameter"));
                };
                let max = match ty {
                    PUBLISHER_PRIORITY => 255,
                    param::GROUP_ORDER => 2,
                    _ => u64::MAX,
                };
                if x > max || (ty == param::GROUP_ORDER && x == 0) {
                    return Err(DecodeError::InvalidValue {
                        field: "track parameter",
                        value: x,
                    });
                }
                track = track
                    .with(KeyValuePair {
                        key: ty,
                        value: KvpValue::Int(x),
                    })
                    .map_err(|_| DecodeError::KeyValueFormatting("parameter"))?;
                continue;
            }
            // draft-14 §9.2.1, draft-16 §9.2.2: a parameter in a message it is not defined
            // for "MUST be ignored".
            if allowed_mask(ty, v) & ctx.bit() == 0 {
                continue;
            }
            p.set_kvp(ty, value, v)?;
        }
        Ok((p, track))
    }

    /// Takes one draft-14..16 parameter value, checking its range.
    fn set_kvp(&mut self, ty: u64, value: KvpValue, v: Version) -> Result<(), DecodeError> {
        let invalid = |field, value| DecodeError::InvalidValue { field, value };
        match (ty, value) {
            (param::OBJECT_DELIVERY_TIMEOUT, KvpValue::Int(x)) => {
                // draft-16 §9.2.2.2: a DELIVERY_TIMEOUT of 0 MUST close the session.
                if x == 0 && v.delivery_timeout_nonzero() {
                    return Err(invalid("DELIVERY_TIMEOUT", x));
                }
                self.object_delivery_timeout = Some(x);
            }
            (param::AUTHORIZATION_TOKEN, KvpValue::Bytes(b)) => self
                .authorization_tokens
                .push(AuthToken::decode_all(&mut b.clone(), v)?),
            (param::EXPIRES, KvpValue::Int(x)) => self.expires = Some(x),
            (param::LARGEST_OBJECT, KvpValue::Bytes(b)) => {
                // draft-16 §9.2.2.7: a length-prefixed Location; anything else does not match
                // its serialization (KEY_VALUE_FORMATTING_ERROR, §1.4.2).
                let mut b = b.clone();
                let bad = |_| DecodeError::KeyValueFormatting("LARGEST_OBJECT");
                let l = Location::decode(&mut b, v).map_err(bad)?;
                if b.has_remaining() {
                    return Err(DecodeError::KeyValueFormatting("LARGEST_OBJECT"));
                }
                self.largest_object = Some(l);
            }
            // draft-16 §9.2.2.8: other than 0 or 1 MUST close with PROTOCOL_VIOLATION.
            (param::FORWARD, KvpValue::Int(x)) => match x {
                0 | 1 => self.forward = Some(x == 1),
                _ => return Err(invalid("FORWARD", x)),
            },
            // draft-16 §9.2.2.3: above 255 MUST close with PROTOCOL_VIOLATION.
            (param::SUBSCRIBER_PRIORITY, KvpValue::Int(x)) => {
                self.subscriber_priority =
                    Some(u8::try_from(x).map_err(|_| invalid("SUBSCRIBER_PRIORITY", x))?)
            }
            (param::LOCATION_FILTER, KvpValue::Bytes(b)) => {
                // draft-16 §9.2.2.5: a filter that does not fill the parameter's length MUST
                // close the session with PROTOCOL_VIOLATION.
                let mut b = b.clone();
                let f = LocationFilter::decode_value(&mut b, v)
                    .map_err(|e| e.in_complete("SUBSCRIPTION_FILTER"))?;
                if b.has_remaining() {
                    return Err(DecodeError::TrailingBytes {
                        message: "SUBSCRIPTION_FILTER",
                        extra: b.remaining(),
                    });
                }
                self.location_filter = Some(f);
            }
            // draft-16 §9.2.2.4: other than 1 or 2 MUST close with PROTOCOL_VIOLATION.
            (param::GROUP_ORDER, KvpValue::Int(x)) => {
                self.group_order = Some(GroupOrder::from_value(x)?)
            }
            (param::NEW_GROUP_REQUEST, KvpValue::Int(x)) => self.new_group_request = Some(x),
            _ => return Err(DecodeError::KeyValueFormatting("parameter")),
        }
        Ok(())
    }

    /// Writes the parameters and, for drafts 14-15 in SUBSCRIBE_OK, PUBLISH, FETCH_OK and
    /// TRACK_STATUS_OK, those Track Properties that the version carries as parameters (see
    /// [`Parameters::decode_with_track`]); the others have no place in those versions and
    /// are not sent. From draft-16 `track` is not written here.
    pub fn encode_with_track<B: BufMut>(
        &self,
        track: &Properties,
        buf: &mut B,
        ctx: ParamContext,
        v: Version,
    ) -> Result<(), EncodeError> {
        if !v.params_are_kvps() {
            return self.encode(buf, ctx, v);
        }
        for ty in self.types() {
            if !param_allowed(ty, ctx, v) || !kvp_param_known(ty, v) {
                return Err(not_allowed());
            }
        }
        let mut pairs: Vec<KeyValuePair> = Vec::new();
        let int = |key, x| KeyValuePair {
            key,
            value: KvpValue::Int(x),
        };
        if let Some(x) = self.object_delivery_timeout {
            if x == 0 && v.delivery_timeout_nonzero() {
                return Err(EncodeError::Invalid {
                    field: "DELIVERY_TIMEOUT",
                    reason: "0 is not allowed from draft-16",
                });
            }
            pairs.push(int(param::OBJECT_DELIVERY_TIMEOUT, x));
        }
        for t in &self.authorization_tokens {
            pairs.push(KeyValuePair::bytes(
                param::AUTHORIZATION_TOKEN,
                t.to_bytes(v)?,
            )?);
        }
        if let Some(x) = self.expires {
            pairs.push(int(param::EXPIRES, x));
        }
        if let Some(x) = self.largest_object {
            let mut b = Vec::new();
            x.encode(&mut b, v)?;
            pairs.push(KeyValuePair::bytes(param::LARGEST_OBJECT, b)?);
        }
        if let Some(x) = self.forward {
            pairs.push(int(param::FORWARD, x.into()));
        }
        if let Some(x) = self.subscriber_priority {
            pairs.push(int(param::SUBSCRIBER_PRIORITY, x.into()));
        }
        if let Some(x) = &self.location_filter {
            let mut b = Vec::new();
            x.encode_value(&mut b, v)?;
            pairs.push(KeyValuePair::bytes(param::LOCATION_FILTER, b)?);
        }
        if let Some(x) = self.group_order {
            pairs.push(int(param::GROUP_ORDER, x.value().into()));
        }
        if let Some(x) = self.new_group_request {
            pairs.push(int(param::NEW_GROUP_REQUEST, x));
        }
        if carries_track_values(ctx) {
            for p in track.pairs() {
                if !is_track_value(p.key, v) {
                    continue;
                }
                if pairs.iter().any(|q| q.key == p.key) {
                    return Err(EncodeError::Invalid {
                        field: "track properties",
                        reason: "a track value is given twice",
                    });
                }
                pairs.push(p.clone());
            }
        }
        pairs.sort_by_key(|p| p.key);
        check_ints_fit(&pairs, v)?;
        buf.put_varint(pairs.len() as u64, v);
        encode_kvps(&pairs, buf, v)
    }

    fn decode_value<B: Buf>(
        &mut self,
        ty: u64,
        buf: &mut B,
        v: Version,
    ) -> Result<(), DecodeError> {
        // Length-prefixed values must fill their length exactly.
        fn exact<T>(
            buf: &mut impl Buf,
            v: Version,
            what: &'static str,
            f: impl FnOnce(&mut bytes::Bytes) -> Result<T, DecodeError>,
        ) -> Result<T, DecodeError> {
            let mut body = buf.get_len_prefixed(v, what, u16::MAX as u64)?;
            let out = f(&mut body).map_err(|e| e.in_complete(what))?;
            if body.has_remaining() {
                return Err(DecodeError::TrailingBytes {
                    message: what,
                    extra: body.remaining(),
                });
            }
            Ok(out)
        }
        match ty {
            param::OBJECT_DELIVERY_TIMEOUT => {
                self.object_delivery_timeout = Some(buf.get_varint(v)?)
            }
            param::AUTHORIZATION_TOKEN => {
                let body = buf.get_len_prefixed(v, "authorization token", u16::MAX as u64)?;
                self.authorization_tokens
                    .push(AuthToken::decode_all(&mut body.clone(), v)?);
            }
            param::RENDEZVOUS_TIMEOUT => self.rendezvous_timeout = Some(buf.get_varint(v)?),
            param::SUBGROUP_DELIVERY_TIMEOUT => {
                self.subgroup_delivery_timeout = Some(buf.get_varint(v)?)
            }
            param::EXPIRES => self.expires = Some(buf.get_varint(v)?),
            param::LARGEST_OBJECT => self.largest_object = Some(Location::decode(buf, v)?),
            param::FILL_TIMEOUT => self.fill_timeout = Some(buf.get_varint(v)?),
            // draft-19 §10.2.17: FORWARD other than 0 or 1 is a PROTOCOL_VIOLATION.
            param::FORWARD => self.forward = Some(get_flag(buf, "FORWARD")?),
            param::SUBSCRIBER_PRIORITY => self.subscriber_priority = Some(buf.get_byte()?),
            param::LOCATION_FILTER => {
                self.location_filter = Some(match v.filter_encoding() {
                    // draft-22: a Location Filter Type instead of a Length.
                    FilterEncoding::LocationType => LocationFilter::decode_value(buf, v)?,
                    _ => exact(buf, v, "LOCATION_FILTER", |b| {
                        LocationFilter::decode_value(b, v)
                    })?,
                })
            }
            // draft-19 §10.2.9: GROUP_ORDER other than 1 or 2 is a PROTOCOL_VIOLATION.
            param::GROUP_ORDER => {
                self.group_order = Some(GroupOrder::from_value(buf.get_byte()?.into())?)
            }
            param::NEW_GROUP_REQUEST => self.new_group_request = Some(buf.get_varint(v)?),
            // draft-21 §9.20.16: a parameter list of its own scope; one not allowed inside is a
            // PROTOCOL_VIOLATION.
            param::FILL_PARAMETERS => {
                let inner = exact(buf, v, "FILL_PARAMETERS", |b| {
                    Parameters::decode(b, ParamContext::Fill, v)
                })?;
                self.fill = Some(Box::new(inner));
            }
            // draft-21 §9.20.22: other than 0 or 1 is a PROTOCOL_VIOLATION.
            param::INCLUDE_PROPERTIES => {
                self.include_properties = Some(get_flag(buf, "INCLUDE_PROPERTIES")?)
            }
            param::TRACK_NAMESPACE_PREFIX => {
                // draft-21 §9.20.21 gives it the Track Namespace encoding, no Length; aiomoqt
                // 0.13.3 length-prefixes it at draft-20. Both are taken at 20-21: a Length whose
                // bytes are exactly one Track Namespace is that prefix (docs/interop.md).
                if v.filter_encoding() == FilterEncoding::Length
                    && let Some((ns, used)) = length_prefixed_namespace(buf.chunk(), v)
                {
                    buf.advance(used);
                    self.track_namespace_prefix = Some(ns);
                } else {
                    self.track_namespace_prefix = Some(TrackNamespace::decode(buf, v)?)
                }
            }
            param::HOP_PATH => {
                let path = exact(buf, v, "HOP_PATH", |b| HopPath::decode_entries(b, v))?;
                self.cluster.get_or_insert_default().hop_path = Some(path);
            }
            param::ROUTE_COST => {
                self.cluster.get_or_insert_default().route_cost = Some(buf.get_varint(v)?)
            }
            _ => {
                let Some(kind) = RangeFilterKind::from_param_type(ty) else {
                    return Err(DecodeError::UnknownParameter(ty));
                };
                let f = exact(buf, v, "range filter", |b| {
                    RangeFilterParam::decode_body(kind, b, v)
                })?;
                self.range_filters.push(f);
            }
        }
        Ok(())
    }

    /// Writes `Number of Parameters` and the parameters in ascending type order. Fails if a
    /// parameter may not appear in `ctx` under `version`.
    pub fn encode<B: BufMut>(
        &self,
        buf: &mut B,
        ctx: ParamContext,
        v: Version,
    ) -> Result<(), EncodeError> {
        if v.params_are_kvps() {
            return self.encode_with_track(&Properties::new(), buf, ctx, v);
        }
        let types = self.types();
        for ty in &types {
            if !param_allowed(*ty, ctx, v) {
                return Err(not_allowed());
            }
        }
        buf.put_varint(types.len() as u64, v);
        let mut prev = 0u64;
        let mut put_type = |buf: &mut B, ty: u64| {
            buf.put_varint(ty - prev, v);
            prev = ty;
        };
        fn prefixed<B: BufMut>(
            buf: &mut B,
            v: Version,
            f: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
        ) -> Result<(), EncodeError> {
            let mut tmp = Vec::new();
            f(&mut tmp)?;
            buf.put_len_prefixed(&tmp, v, "parameter value", u16::MAX as usize)
        }
        if let Some(x) = self.object_delivery_timeout {
            put_type(buf, param::OBJECT_DELIVERY_TIMEOUT);
            buf.put_varint(x, v);
        }
        for t in &self.authorization_tokens {
            put_type(buf, param::AUTHORIZATION_TOKEN);
            prefixed(buf, v, |b| t.encode_all(b, v))?;
        }
        if let Some(x) = self.rendezvous_timeout {
            put_type(buf, param::RENDEZVOUS_TIMEOUT);
            buf.put_varint(x, v);
        }
        if let Some(x) = self.subgroup_delivery_timeout {
            put_type(buf, param::SUBGROUP_DELIVERY_TIMEOUT);
            buf.put_varint(x, v);
        }
        if let Some(x) = self.expires {
            put_type(buf, param::EXPIRES);
            buf.put_varint(x, v);
        }
        if let Some(x) = self.largest_object {
            put_type(buf, param::LARGEST_OBJECT);
            x.encode(buf, v)?;
        }
        if let Some(x) = self.fill_timeout {
            put_type(buf, param::FILL_TIMEOUT);
            buf.put_varint(x, v);
        }
        if let Some(x) = self.forward {
            put_type(buf, param::FORWARD);
            buf.put_u8(x.into());
        }
        if let Some(x) = self.subscriber_priority {
            put_type(buf, param::SUBSCRIBER_PRIORITY);
            buf.put_u8(x);
        }
        if let Some(x) = &self.location_filter {
            put_type(buf, param::LOCATION_FILTER);
            match v.filter_encoding() {
                FilterEncoding::LocationType => x.encode_value(buf, v)?,
                _ => prefixed(buf, v, |b| x.encode_value(b, v))?,
            }
        }
        if let Some(x) = self.group_order {
            put_type(buf, param::GROUP_ORDER);
            buf.put_u8(x.value());
        }
        if let Some(x) = &self.fill {
            put_type(buf, param::FILL_PARAMETERS);
            prefixed(buf, v, |b| x.encode(b, ParamContext::Fill, v))?;
        }
        let mut filters: Vec<&RangeFilterParam> = self.range_filters.iter().collect();
        filters.sort_by_key(|f| f.kind);
        for f in filters {
            put_type(buf, f.kind.param_type());
            prefixed(buf, v, |b| f.encode_body(b, v))?;
        }
        if let Some(x) = self.new_group_request {
            put_type(buf, param::NEW_GROUP_REQUEST);
            buf.put_varint(x, v);
        }
        if let Some(x) = &self.track_namespace_prefix {
            put_type(buf, param::TRACK_NAMESPACE_PREFIX);
            x.encode(buf, v)?;
        }
        if let Some(x) = self.include_properties {
            put_type(buf, param::INCLUDE_PROPERTIES);
            buf.put_u8(x.into());
        }
        if let Some(x) = self.hop_path() {
            put_type(buf, param::HOP_PATH);
            prefixed(buf, v, |b| {
                x.encode_entries(b, v);
                Ok(())
            })?;
        }
        if let Some(x) = self.route_cost() {
            put_type(buf, param::ROUTE_COST);
            buf.put_varint(x, v);
        }
        Ok(())
    }
}

/// The error for a parameter a message or version does not allow.
fn not_allowed() -> EncodeError {
    EncodeError::Invalid {
        field: "parameters",
        reason: "a parameter is not allowed in this message or version",
    }
}

/// Fails if an integer value cannot be carried by the version's varint (2^62 and above with
/// the QUIC varints of drafts 14-16); [`encode_kvps`] would otherwise cut it.
pub(crate) fn check_ints_fit(pairs: &[KeyValuePair], v: Version) -> Result<(), EncodeError> {
    for p in pairs {
        if let KvpValue::Int(x) = p.value {
            put_int(&mut Vec::new(), x, v)?;
        }
        put_int(&mut Vec::new(), p.key, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::filter::{FilterRange, RangeFilter};

    const V: Version = Version::Draft19;

    fn round_trip(p: &Parameters, ctx: ParamContext) {
        let mut buf = Vec::new();
        p.encode(&mut buf, ctx, V).unwrap();
        let mut b = &buf[..];
        assert_eq!(&Parameters::decode(&mut b, ctx, V).unwrap(), p);
        assert!(b.is_empty());
    }

    #[test]
    fn subscribe_params_round_trip() {
        round_trip(
            &Parameters {
                object_delivery_timeout: Some(100),
                authorization_tokens: vec![AuthToken::new("a"), AuthToken::new("b")],
                forward: Some(false),
                subscriber_priority: Some(3),
                location_filter: Some(LocationFilter::NextGroupStart),
                group_order: Some(GroupOrder::Descending),
                range_filters: vec![
                    RangeFilterParam {
                        kind: RangeFilterKind::Subgroup,
                        filter: Some(RangeFilter {
                            set_id: 1,
                            property_type: None,
                            ranges: vec![FilterRange {
                                start: 0,
                                end: None,
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
                                end: Some(9),
                            }],
                        }),
                    },
                ],
                new_group_request: Some(0),
                ..Default::default()
            },
            ParamContext::Subscribe,
        );
    }

    #[test]
    fn hand_built_bytes() {
        // 2 params: FORWARD (0x10) = 0, SUBSCRIBER_PRIORITY (delta 0x10 -> 0x20) = 7.
        let bytes = [0x02, 0x10, 0x00, 0x10, 0x07];
        let p = Parameters::decode(&mut &bytes[..], ParamContext::Subscribe, V).unwrap();
        assert_eq!(p.forward, Some(false));
        assert_eq!(p.subscriber_priority, Some(7));
    }

    #[test]
    fn rejections() {
        let dec = |bytes: &[u8], ctx| Parameters::decode(&mut &bytes[..], ctx, V);
        // Unknown type 0x05.
        assert_eq!(
            dec(&[1, 0x05, 0], C::Subscribe),
            Err(DecodeError::UnknownParameter(5))
        );
        // FILL_TIMEOUT in SUBSCRIBE.
        assert!(matches!(
            dec(&[1, 0x0A, 0], C::Subscribe),
            Err(DecodeError::ParameterNotAllowed { .. })
        ));
        // FORWARD = 2.
        assert!(matches!(
            dec(&[1, 0x10, 2], C::Subscribe),
            Err(DecodeError::InvalidValue { .. })
        ));
        // GROUP_ORDER = 0.
        assert!(matches!(
            dec(&[1, 0x22, 0], C::Subscribe),
            Err(DecodeError::InvalidValue { .. })
        ));
        // FORWARD twice.
        assert_eq!(
            dec(&[2, 0x10, 1, 0, 1], C::Subscribe),
            Err(DecodeError::DuplicateParameter(0x10))
        );
        // Range filter in draft-18 is unknown.
        assert_eq!(
            Parameters::decode(&mut &[1u8, 0x25, 0][..], C::Subscribe, Version::Draft18),
            Err(DecodeError::UnknownParameter(0x25))
        );
        // Same filter type and SetID twice.
        assert!(matches!(
            dec(&[2, 0x26, 2, 0, 1, 0, 2, 0, 5], C::Subscribe),
            Err(DecodeError::InvalidFilter(_))
        ));
        // LOCATION_FILTER with trailing bytes inside its length.
        assert!(matches!(
            dec(&[1, 0x21, 2, 1, 0], C::Subscribe),
            Err(DecodeError::TrailingBytes { .. })
        ));
        // Token that cannot be decoded.
        assert!(matches!(
            dec(&[1, 0x03, 1, 9], C::Subscribe),
            Err(DecodeError::KeyValueFormatting(_))
        ));
    }

    #[test]
    fn version_tables() {
        assert!(param_allowed(
            param::GROUP_ORDER,
            C::PublishOk,
            Version::Draft18
        ));
        assert!(!param_allowed(
            param::GROUP_ORDER,
            C::PublishOk,
            Version::Draft19
        ));
        assert!(param_allowed(
            param::GROUP_ORDER,
            C::SubscribeTracks,
            Version::Draft19
        ));
        assert!(param_allowed(
            param::TRACK_NAMESPACE_PREFIX,
            C::AnyRequestUpdate,
            V
        ));
        assert!(!param_allowed(
            param::TRACK_NAMESPACE_PREFIX,
            C::UpdateSubscription,
            V
        ));
        assert!(param_allowed(param::LARGEST_OBJECT, C::AnyRequestOk, V));
        assert!(!param_allowed(
            param::LARGEST_OBJECT,
            C::PublishNamespaceOk,
            V
        ));
    }
}
