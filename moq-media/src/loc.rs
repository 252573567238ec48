//! LOC, the Low Overhead Media Container (draft-ietf-moq-loc, editor's copy of 2026-07-20):
//! one encoded frame per object, its metadata in Object Properties.
//!
//! The property IDs are those of that copy's IANA section ("MOQ Properties Registry"); they
//! moved between LOC drafts, so a peer that implements an older LOC draft reads other IDs.
//!
//! ```
//! use moq_media::loc::LocProperties;
//! let props = LocProperties { timestamp: Some(1_700_000_000_000_000), ..Default::default() }
//!     .keyframe();
//! let wire = props.to_properties().unwrap();
//! assert_eq!(LocProperties::from_properties(&wire), props);
//! assert!(props.is_keyframe());
//! ```

use bytes::Bytes;
use moq_client::Properties;

use crate::MediaError;

/// TIMESTAMP (LOC editor's copy 2026-07-20, §2.3.1.1): even, a vi64; wall-clock microseconds
/// since the Unix epoch unless TIMESCALE is present.
pub const TIMESTAMP: u64 = 0x10;
/// TIMESCALE (§2.3.1.2): even, Timestamp units per second.
pub const TIMESCALE: u64 = 0x08;
/// VIDEO_CONFIG (§2.3.2.1): odd, the codec's "extradata" (WebCodecs `description`).
pub const VIDEO_CONFIG: u64 = 0x0D;
/// VIDEO_FRAME_MARKING (§2.3.2.2): odd, RFC 9626 frame marking, 1-4 bytes.
pub const VIDEO_FRAME_MARKING: u64 = 0x09;
/// AUDIO_CONFIG (§2.3.3.1): odd, the codec's configuration (WebCodecs `description`).
pub const AUDIO_CONFIG: u64 = 0x0F;
/// AUDIO_LEVEL (§2.3.3.2): even, RFC 6464 level and voice activity in the low 8 bits.
pub const AUDIO_LEVEL: u64 = 0x0C;

/// RFC 9626's 1-byte frame marking: Start of frame.
pub const MARK_START: u8 = 0x80;
/// RFC 9626: End of frame.
pub const MARK_END: u8 = 0x40;
/// RFC 9626: Independent frame (a keyframe).
pub const MARK_INDEPENDENT: u8 = 0x20;
/// RFC 9626: Discardable frame.
pub const MARK_DISCARDABLE: u8 = 0x10;

/// The LOC properties of one object. Unknown properties are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LocProperties {
    /// TIMESTAMP: the presentation time, in TIMESCALE units, or wall-clock microseconds since
    /// the Unix epoch without TIMESCALE (what this crate writes).
    pub timestamp: Option<u64>,
    /// TIMESCALE: units per second of `timestamp`.
    pub timescale: Option<u64>,
    /// VIDEO_CONFIG: the decoder description (avcC / hvcC / av1C body).
    pub video_config: Option<Bytes>,
    /// AUDIO_CONFIG: the decoder description (AAC AudioSpecificConfig, Opus header).
    pub audio_config: Option<Bytes>,
    /// VIDEO_FRAME_MARKING: RFC 9626 bytes (the first: S E I D B TID).
    pub video_frame_marking: Option<Bytes>,
    /// AUDIO_LEVEL: RFC 6464 level (low 7 bits) and voice activity (bit 7).
    pub audio_level: Option<u8>,
}

impl LocProperties {
    /// With VIDEO_FRAME_MARKING saying "a whole independent frame" (S, E and I set).
    pub fn keyframe(mut self) -> Self {
        self.video_frame_marking = Some(Bytes::from_static(&[MARK_START
            | MARK_END
            | MARK_INDEPENDENT]));
        self
    }

    /// VIDEO_FRAME_MARKING has the I (independent) bit.
    pub fn is_keyframe(&self) -> bool {
        self.video_frame_marking
            .as_ref()
            .and_then(|m| m.first())
            .is_some_and(|b| b & MARK_INDEPENDENT != 0)
    }

    /// The presentation time in microseconds (TIMESTAMP scaled by TIMESCALE when present).
    pub fn timestamp_us(&self) -> Option<u64> {
        let ts = self.timestamp?;
        match self.timescale {
            None | Some(1_000_000) => Some(ts),
            Some(0) => None,
            Some(scale) => Some((u128::from(ts) * 1_000_000 / u128::from(scale)) as u64),
        }
    }

    /// Reads the LOC properties out of an object's properties (others are ignored).
    pub fn from_properties(props: &Properties) -> Self {
        LocProperties {
            timestamp: props.get_int(TIMESTAMP),
            timescale: props.get_int(TIMESCALE),
            video_config: props.get_bytes(VIDEO_CONFIG),
            audio_config: props.get_bytes(AUDIO_CONFIG),
            video_frame_marking: props.get_bytes(VIDEO_FRAME_MARKING),
            audio_level: props.get_int(AUDIO_LEVEL).map(|l| (l & 0xff) as u8),
        }
    }

    /// The object properties carrying these.
    pub fn to_properties(&self) -> Result<Properties, MediaError> {
        let mut p = Properties::new();
        if let Some(v) = self.timescale {
            p = p.with_int(TIMESCALE, v).map_err(bad)?;
        }
        if let Some(v) = &self.video_frame_marking {
            p = p.with_bytes(VIDEO_FRAME_MARKING, v.clone()).map_err(bad)?;
        }
        if let Some(v) = self.audio_level {
            p = p.with_int(AUDIO_LEVEL, u64::from(v)).map_err(bad)?;
        }
        if let Some(v) = &self.video_config {
            p = p.with_bytes(VIDEO_CONFIG, v.clone()).map_err(bad)?;
        }
        if let Some(v) = &self.audio_config {
            p = p.with_bytes(AUDIO_CONFIG, v.clone()).map_err(bad)?;
        }
        if let Some(v) = self.timestamp {
            p = p.with_int(TIMESTAMP, v).map_err(bad)?;
        }
        Ok(p)
    }
}

fn bad(e: impl std::fmt::Display) -> MediaError {
    MediaError::Object(format!("LOC property: {e}"))
}

/// One LOC object: its properties and its payload (one encoded frame, as in MP4: 4-byte
/// length-prefixed NAL units for H.264/H.265, a raw access unit for AAC, a raw Opus packet).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocFrame {
    /// The object's LOC properties.
    pub properties: LocProperties,
    /// The frame.
    pub payload: Bytes,
}

impl LocFrame {
    /// A frame with its properties.
    pub fn new(properties: LocProperties, payload: Bytes) -> Self {
        LocFrame {
            properties,
            payload,
        }
    }

    /// Reads a received object as a LOC frame.
    pub fn from_object(object: &moq_client::Object) -> Self {
        LocFrame {
            properties: LocProperties::from_properties(&object.properties),
            payload: object.payload.clone(),
        }
    }
}
