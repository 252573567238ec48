//! The MOQT Streaming Format (MSF) catalog: a JSON document, published as the track named
//! `catalog` in a broadcast's namespace, that lists the broadcast's tracks and how to decode
//! them (draft-ietf-moq-msf, editor's copy of 2026-08-04, §5 "Catalog").
//!
//! [`Catalog::from_json`] parses an independent catalog and checks it;
//! [`Catalog::apply`] parses a delta update (`deltaUpdate`: add / remove / clone / update)
//! and applies it; [`Catalog::to_json`] writes one. Fields this crate does not know are
//! ignored when parsing (MSF §5: "A parser MUST ignore fields it does not understand") and
//! not written back.
//!
//! ```
//! use moq_media::catalog::Catalog;
//! let catalog = Catalog::from_json(br#"{
//!     "version": "draft-01",
//!     "tracks": [{"name": "video", "packaging": "loc", "isLive": true, "role": "video",
//!                 "codec": "avc1.64001f", "width": 1280, "height": 720}]
//! }"#).unwrap();
//! assert_eq!(catalog.tracks[0].codec.as_deref(), Some("avc1.64001f"));
//! assert!(Catalog::from_json(b"not json").is_err());
//! ```

use std::collections::HashSet;

use base64::Engine;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::MediaError;

/// The MSF version this crate writes (MSF §5.1.1 "MSF version": "draft-XX"; the examples of
/// the editor's copy of 2026-08-04 use "draft-01").
pub const MSF_VERSION: &str = "draft-01";

/// The name of the catalog track (MSF §5: "The top-level catalog track MUST have a
/// case-sensitive Track Name of \"catalog\"").
pub const CATALOG_TRACK: &str = "catalog";

/// `packaging` of a LOC track (MSF §5.2.4, Table 3).
pub const PACKAGING_LOC: &str = "loc";

/// `packaging` of a CMAF track (CMSF §3.5.1: "cmaf").
pub const PACKAGING_CMAF: &str = "cmaf";

/// An independent catalog: the root object of MSF §5.1.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Catalog {
    /// The MSF version, "draft-NN" (required; a JSON number, as CMSF's example writes it, is
    /// read as its decimal string).
    #[serde(deserialize_with = "string_or_number")]
    pub version: String,
    /// When this catalog was generated, in wall-clock milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_at: Option<u64>,
    /// The broadcast is complete: no new tracks or content will follow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_complete: Option<bool>,
    /// The tracks (required, may be empty).
    pub tracks: Vec<Track>,
    /// Initialization data that tracks name with `initRef` (written after `tracks`, as MSF
    /// §5.1.7 asks).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_data_list: Vec<InitData>,
}

/// One track of a catalog (MSF §5.2, and CMSF's `initData`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Track {
    /// The track's namespace, if it is not the catalog's, as the catalog writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The Track Name (required, unique per namespace).
    pub name: String,
    /// How objects are packaged: [`PACKAGING_LOC`], [`PACKAGING_CMAF`] or another value
    /// (required).
    pub packaging: String,
    /// New objects will be added to the track.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_live: Option<bool>,
    /// The role: "video", "audio", or another MSF role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A human-readable label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Tracks with the same render group are rendered together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub render_group: Option<u64>,
    /// Tracks with the same alternate group are renditions of the same content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alt_group: Option<u64>,
    /// The `id` of an [`InitData`] entry of the catalog's `initDataList`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_ref: Option<String>,
    /// The initialization data inline, base64 (CMSF §3.1: the CMAF header).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_data: Option<String>,
    /// The WebCodecs codec string, e.g. `avc1.64001f`, `mp4a.40.2`, `opus`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codec: Option<String>,
    /// The MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Frames per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framerate: Option<f64>,
    /// Time units per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timescale: Option<u64>,
    /// Maximum bitrate, bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u64>,
    /// Average bitrate, bits per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_bitrate: Option<u64>,
    /// Encoded width in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Encoded height in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Display width in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_width: Option<u32>,
    /// Display height in pixels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_height: Option<u32>,
    /// Audio samples per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samplerate: Option<u32>,
    /// Audio channel configuration, e.g. "2".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel_config: Option<String>,
    /// The language tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    /// Target latency in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_latency: Option<u64>,
    /// Names of tracks this one depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends: Option<Vec<String>>,
    /// Temporal layer ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temporal_id: Option<u64>,
    /// Spatial layer ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spatial_id: Option<u64>,
    /// Maximum GOP duration, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_gop_duration: Option<u64>,
    /// Maximum group duration, milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_group_duration: Option<u64>,
    /// Track duration in milliseconds (not live tracks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track_duration: Option<u64>,
}

/// One entry of `initDataList` (MSF §5.1.7).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct InitData {
    /// Unique within the catalog; what a track's `initRef` names.
    pub id: String,
    /// "inline" (base64 data), "track-property" or "object-property".
    #[serde(rename = "type")]
    pub kind: String,
    /// The base64 payload for "inline"; a property type in hex otherwise.
    pub data: String,
}

impl InitData {
    /// An inline entry holding `data` (written base64).
    pub fn inline(id: impl Into<String>, data: &[u8]) -> Self {
        InitData {
            id: id.into(),
            kind: "inline".into(),
            data: base64::engine::general_purpose::STANDARD.encode(data),
        }
    }
}

/// A delta update (MSF §5.1.6, §5.3): `generatedAt` and `deltaUpdate` only.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Delta {
    /// When the delta was generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_at: Option<u64>,
    /// The operations, applied in order.
    pub delta_update: Vec<DeltaOp>,
}

/// One delta operation: `op` and the track objects it applies to (kept as JSON objects: an
/// `update` or `clone` carries only some fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct DeltaOp {
    /// "add", "remove", "clone" or "update".
    pub op: String,
    /// The track objects.
    pub tracks: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// A string, or a number read as its decimal string.
fn string_or_number<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum V {
        S(String),
        N(u64),
    }
    match V::deserialize(d) {
        Ok(V::S(s)) => Ok(s),
        Ok(V::N(n)) => Ok(n.to_string()),
        Err(_) => Err(serde::de::Error::custom(
            "version: expected a string such as \"draft-01\"",
        )),
    }
}

fn err(msg: impl Into<String>) -> MediaError {
    MediaError::Catalog(msg.into())
}

/// True for "draft-NN" (any number), and for a bare number ("1"), which one of the editor's
/// copy's own examples ("A catalog referencing other catalogs") writes.
fn known_version(v: &str) -> bool {
    let digits = |n: &str| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit());
    v.strip_prefix("draft-").is_some_and(digits) || digits(v)
}

impl Catalog {
    /// An empty catalog of [`MSF_VERSION`] generated now.
    pub fn new() -> Self {
        Catalog {
            version: MSF_VERSION.into(),
            generated_at: Some(now_ms()),
            ..Default::default()
        }
    }

    /// Parses an independent catalog and checks it (see [`Catalog::validate`]). A delta update
    /// is refused here: apply it to a catalog with [`Catalog::apply`].
    pub fn from_json(payload: &[u8]) -> Result<Self, MediaError> {
        let value: serde_json::Value =
            serde_json::from_slice(payload).map_err(|e| err(format!("not JSON: {e}")))?;
        let object = value.as_object().ok_or_else(|| err("not a JSON object"))?;
        if object.contains_key("deltaUpdate") {
            return Err(err(
                "a delta update where an independent catalog is required (the first object of a group)",
            ));
        }
        let catalog: Catalog =
            serde_json::from_value(value).map_err(|e| err(format!("malformed catalog: {e}")))?;
        catalog.validate()?;
        Ok(catalog)
    }

    /// Checks what the serde types cannot: the version is "draft-NN" (MSF §5.1.1: "A
    /// subscriber MUST NOT attempt to parse a catalog version which it does not
    /// understand"), track names are unique per namespace (MSF §5.2.3), and every `initRef`
    /// names an `initDataList` entry (MSF §5.2.13).
    pub fn validate(&self) -> Result<(), MediaError> {
        // draft-ietf-moq-msf §5.1.1: a version not understood MUST NOT be parsed.
        if !known_version(&self.version) {
            return Err(err(format!(
                "unknown MSF version {:?} (expected \"draft-NN\")",
                self.version
            )));
        }
        let mut names = HashSet::new();
        for t in &self.tracks {
            if t.name.is_empty() {
                return Err(err("a track with an empty name"));
            }
            // draft-ietf-moq-msf §5.2.3: track names MUST be unique per namespace.
            if !names.insert((t.namespace.clone(), t.name.clone())) {
                return Err(err(format!("duplicate track name {:?}", t.name)));
            }
            if let Some(r) = &t.init_ref
                && !self.init_data_list.iter().any(|i| &i.id == r)
            {
                return Err(err(format!(
                    "track {:?}: initRef {r:?} names no initDataList entry",
                    t.name
                )));
            }
        }
        let mut ids = HashSet::new();
        for i in &self.init_data_list {
            if !ids.insert(&i.id) {
                return Err(err(format!("duplicate initDataList id {:?}", i.id)));
            }
        }
        Ok(())
    }

    /// The catalog as JSON (version, generatedAt, tracks, then initDataList).
    pub fn to_json(&self) -> Vec<u8> {
        // Serializing plain data to a Vec cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The track named `name` (in the catalog's own namespace or any).
    pub fn track(&self, name: &str) -> Option<&Track> {
        self.tracks.iter().find(|t| t.name == name)
    }

    /// The first track whose role is `role` ("video", "audio").
    pub fn first_with_role(&self, role: &str) -> Option<&Track> {
        self.tracks.iter().find(|t| t.role.as_deref() == Some(role))
    }

    /// The decoded initialization data of `track`: its `initRef` entry (inline only) or its
    /// CMSF `initData`; `None` if it has neither.
    pub fn init_data(&self, track: &Track) -> Result<Option<Bytes>, MediaError> {
        let b64 = if let Some(r) = &track.init_ref {
            let entry = self
                .init_data_list
                .iter()
                .find(|i| &i.id == r)
                .ok_or_else(|| err(format!("initRef {r:?} names no initDataList entry")))?;
            if entry.kind != "inline" {
                return Err(MediaError::Unsupported(format!(
                    "initDataList entry {r:?} of type {:?} (only \"inline\")",
                    entry.kind
                )));
            }
            &entry.data
        } else if let Some(d) = &track.init_data {
            d
        } else {
            return Ok(None);
        };
        base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map(|v| Some(Bytes::from(v)))
            .map_err(|e| {
                err(format!(
                    "track {:?}: init data is not base64: {e}",
                    track.name
                ))
            })
    }

    /// Parses `payload` as a catalog object of a group: object 0 must be an independent
    /// catalog (returned as is), later objects are delta updates applied to `current`
    /// (MSF §5: "The first Object (with Object ID 0) in any Group in a catalog track MUST
    /// hold an independent copy of the catalog").
    pub fn from_object(
        current: Option<&Catalog>,
        object_id: u64,
        payload: &[u8],
    ) -> Result<Catalog, MediaError> {
        match (object_id, current) {
            (0, _) => Catalog::from_json(payload),
            (_, Some(c)) => {
                let mut next = c.clone();
                next.apply(payload)?;
                Ok(next)
            }
            (_, None) => Err(err(
                "a delta update without the independent catalog before it",
            )),
        }
    }

    /// Parses a delta update and applies its operations in order (MSF §5.3). On error the
    /// catalog is unchanged.
    pub fn apply(&mut self, payload: &[u8]) -> Result<(), MediaError> {
        let value: serde_json::Value = serde_json::from_slice(payload)
            .map_err(|e| err(format!("delta update is not JSON: {e}")))?;
        let delta: Delta = serde_json::from_value(value)
            .map_err(|e| err(format!("malformed delta update: {e}")))?;
        self.apply_delta(&delta)
    }

    /// Applies a parsed delta update (all or nothing).
    pub fn apply_delta(&mut self, delta: &Delta) -> Result<(), MediaError> {
        // draft-ietf-moq-msf §5.3: a delta update MUST include at least one operation.
        if delta.delta_update.is_empty() {
            return Err(err("a delta update with no operation"));
        }
        let mut next = self.clone();
        for op in &delta.delta_update {
            next.apply_op(op)?;
        }
        next.generated_at = delta.generated_at.or(next.generated_at);
        next.validate()?;
        *self = next;
        Ok(())
    }

    fn find_index(&self, name: &str, namespace: Option<&str>) -> Option<usize> {
        self.tracks.iter().position(|t| {
            t.name == name
                && match (namespace, t.namespace.as_deref()) {
                    (Some(a), Some(b)) => a == b,
                    _ => true,
                }
        })
    }

    fn apply_op(&mut self, op: &DeltaOp) -> Result<(), MediaError> {
        use serde_json::Value;
        let str_field = |m: &serde_json::Map<String, Value>, k: &str| {
            m.get(k).and_then(Value::as_str).map(str::to_owned)
        };
        if !matches!(op.op.as_str(), "add" | "remove" | "clone" | "update") {
            return Err(err(format!("delta: unknown operation {:?}", op.op)));
        }
        for fields in &op.tracks {
            match op.op.as_str() {
                "add" => {
                    let track: Track = serde_json::from_value(Value::Object(fields.clone()))
                        .map_err(|e| err(format!("delta add: malformed track: {e}")))?;
                    if self
                        .find_index(&track.name, track.namespace.as_deref())
                        .is_some()
                    {
                        return Err(err(format!(
                            "delta add: track {:?} already exists",
                            track.name
                        )));
                    }
                    self.tracks.push(track);
                }
                "remove" => {
                    let name = str_field(fields, "name")
                        .ok_or_else(|| err("delta remove: a track without a name"))?;
                    let ns = str_field(fields, "namespace");
                    let i = self
                        .find_index(&name, ns.as_deref())
                        .ok_or_else(|| err(format!("delta remove: no track {name:?}")))?;
                    self.tracks.remove(i);
                }
                "clone" | "update" => {
                    // The update example of the editor's copy names its target with "name"
                    // only; the text asks for "parentName": accept both.
                    let parent = str_field(fields, "parentName")
                        .or_else(|| (op.op == "update").then(|| str_field(fields, "name"))?)
                        .ok_or_else(|| err(format!("delta {}: no parentName", op.op)))?;
                    let ns = str_field(fields, "parentNamespace");
                    let i = self
                        .find_index(&parent, ns.as_deref())
                        .ok_or_else(|| err(format!("delta {}: no track {parent:?}", op.op)))?;
                    let base = self.tracks.get(i).cloned().unwrap_or_default();
                    let mut merged = match serde_json::to_value(&base) {
                        Ok(Value::Object(m)) => m,
                        _ => serde_json::Map::new(),
                    };
                    for (k, v) in fields {
                        if k != "parentName" && k != "parentNamespace" {
                            merged.insert(k.clone(), v.clone());
                        }
                    }
                    let track: Track = serde_json::from_value(Value::Object(merged))
                        .map_err(|e| err(format!("delta {}: malformed track: {e}", op.op)))?;
                    if op.op == "clone" {
                        // draft-ietf-moq-msf §5.1.6: the clone's Track Name MUST be new.
                        if self
                            .find_index(&track.name, track.namespace.as_deref())
                            .is_some()
                        {
                            return Err(err(format!(
                                "delta clone: track {:?} already exists",
                                track.name
                            )));
                        }
                        self.tracks.push(track);
                    } else if let Some(slot) = self.tracks.get_mut(i) {
                        *slot = track;
                    }
                }
                other => return Err(err(format!("delta: unknown operation {other:?}"))),
            }
        }
        Ok(())
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
