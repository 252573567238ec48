//! The error type of this crate.

/// What went wrong while ingesting, packaging, publishing or writing media.
///
/// Every failure on input that comes from outside (an fMP4 byte stream, a catalog object, a
/// LOC object) is one of these, never a panic.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum MediaError {
    /// The transport refused or lost something (a track could not be created, a subscription
    /// was rejected, the session ended).
    #[error("transport: {0}")]
    Transport(#[from] moq_client::Error),
    /// A catalog object is not a catalog this crate can use: not JSON, a missing required
    /// field, an unknown version, duplicate track names, a dangling `initRef`, a delta that
    /// names a track that does not exist.
    #[error("catalog: {0}")]
    Catalog(String),
    /// The fMP4 input is malformed: a box that does not parse, a fragment for a track the
    /// `moov` does not declare, sample sizes beyond the `mdat`.
    #[error("fMP4 input: {0}")]
    Mp4(String),
    /// The fMP4 input ended in the middle of a box (`needed` more bytes were announced by the
    /// box header than arrived), or before the `moov`.
    #[error("fMP4 input truncated: {0}")]
    Truncated(String),
    /// The input uses a codec or sample entry this crate does not package.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// A media object (LOC or CMAF) received from a track is malformed.
    #[error("media object: {0}")]
    Object(String),
    /// No track of the catalog matches the selection (or the catalog has no media track).
    #[error("no such track: {0}")]
    NoTrack(String),
    /// Reading the input or writing the output failed.
    #[error("I/O: {0}")]
    Io(String),
}

impl From<std::io::Error> for MediaError {
    fn from(e: std::io::Error) -> Self {
        MediaError::Io(e.to_string())
    }
}

impl From<mp4_atom::Error> for MediaError {
    fn from(e: mp4_atom::Error) -> Self {
        MediaError::Mp4(e.to_string())
    }
}

impl From<moq_client::NameError> for MediaError {
    fn from(e: moq_client::NameError) -> Self {
        MediaError::Transport(e.into())
    }
}
