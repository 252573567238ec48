//! Helpers shared by the round-trip tests.

use moq_core::data::ObjectStatus;
use proptest::prelude::*;

pub(crate) fn object_status() -> impl Strategy<Value = ObjectStatus> {
    prop_oneof![
        3 => Just(ObjectStatus::Normal),
        1 => Just(ObjectStatus::EndOfGroup),
        1 => Just(ObjectStatus::EndOfTrack),
    ]
}
