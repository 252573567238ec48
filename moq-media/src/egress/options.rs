//! Which tracks egress writes and from where, and what it wrote.

use crate::MediaError;
use crate::catalog::{Catalog, Track};
use crate::ingest::TrackStats;

/// Where to start reading the media tracks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Start {
    /// The start of each track's current group (a keyframe): what a live viewer wants.
    #[default]
    CurrentGroup,
    /// The oldest group the publisher or relay still holds (a recording from the start).
    Oldest,
}

/// Which tracks [`subscribe_fmp4`](crate::subscribe_fmp4) writes, and from where: `Default`
/// plus chained setters.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct EgressOptions {
    /// Names of the tracks to write; empty (the default): the first video and the first
    /// audio track of the catalog.
    pub tracks: Vec<String>,
    /// Leave video out.
    pub no_video: bool,
    /// Leave audio out.
    pub no_audio: bool,
    /// Where each track starts.
    pub start: Start,
}

impl EgressOptions {
    /// Writes these tracks (by catalog name) instead of the first video and audio ones.
    pub fn tracks(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.tracks = names.into_iter().map(Into::into).collect();
        self
    }

    /// Leaves video out.
    pub fn no_video(mut self) -> Self {
        self.no_video = true;
        self
    }

    /// Leaves audio out.
    pub fn no_audio(mut self) -> Self {
        self.no_audio = true;
        self
    }

    /// Sets where the tracks start.
    pub fn start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }

    /// The catalog's tracks these options select, in catalog order: the named ones, or
    /// the first video and the first audio track. [`MediaError::NoTrack`] if a named track
    /// is not in the catalog or nothing is selected.
    pub fn select<'a>(&self, catalog: &'a Catalog) -> Result<Vec<&'a Track>, MediaError> {
        let names = || {
            catalog
                .tracks
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = Vec::new();
        if self.tracks.is_empty() {
            if !self.no_video
                && let Some(t) = catalog.first_with_role("video")
            {
                out.push(t);
            }
            if !self.no_audio
                && let Some(t) = catalog.first_with_role("audio")
            {
                out.push(t);
            }
            if out.is_empty() {
                return Err(MediaError::NoTrack(format!(
                    "no video or audio track in the catalog (tracks: {})",
                    names()
                )));
            }
        } else {
            for name in &self.tracks {
                let t = catalog.track(name).ok_or_else(|| {
                    MediaError::NoTrack(format!(
                        "{name:?} is not in the catalog (tracks: {})",
                        names()
                    ))
                })?;
                out.push(t);
            }
        }
        Ok(out)
    }
}

/// What [`subscribe_fmp4`](crate::subscribe_fmp4) wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EgressStats {
    /// Bytes written to the output.
    pub output_bytes: u64,
    /// One entry per written track.
    pub tracks: Vec<TrackStats>,
}
