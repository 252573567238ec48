//! Subscriptions and the data plane (draft-19 §5, §7, §8, §11): SUBSCRIBE, PUBLISH, FETCH,
//! TRACK_STATUS, SUBSCRIBE_TRACKS, subgroup streams and datagrams.

mod fetch;
mod incoming;
mod params;
mod publish;
mod recv;
mod response;
mod send;
mod state;
mod status;
mod subscribe;
mod subscription;
mod tracks;

pub use fetch::FetchRequest;
pub use incoming::{
    Incoming, IncomingFetch, IncomingPublish, IncomingRequests, IncomingSubscribe,
    IncomingSubscribeTracks, IncomingTrackStatus, SubscribeResponse, TrackStatusInfo,
    TracksResponder,
};
pub use params::{
    Object, ObjectMeta, SubscriptionParams, fill_range, last_covered, stream_priority,
};
pub use publish::{PublishOptions, PublishedTrack};
pub use recv::{IncomingSubgroup, TrackEvent};
pub use response::{FetchItem, FetchResponse};
pub use send::{
    FetchEnd, FetchWriter, Fill, SubgroupSender, SubscriptionWriter, TrackLargest, WriterChange,
};
pub use subscription::{JoiningStart, Subscription, SubscriptionInfo};
pub use tracks::TrackSubscription;

pub(crate) use fetch::{fetch, serve_fetch};
pub(crate) use publish::{publish, serve_publish};
pub(crate) use state::TrackState;
pub(crate) use status::{serve_track_status, track_status};
pub(crate) use subscribe::{serve_subscribe, subscribe};
pub(crate) use tracks::{serve_subscribe_tracks, subscribe_tracks};
