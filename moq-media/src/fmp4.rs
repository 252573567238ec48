//! Reading fragmented MP4 with `mp4-atom`: top-level boxes from a byte stream (one box in
//! memory at a time), the tracks of a `moov` with their WebCodecs codec strings and decoder
//! descriptions, and the samples of a `moof`+`mdat` pair.

use bytes::Bytes;
use mp4_atom::{Atom, Codec, Decode, Encode, Moof, Moov, Trak, Trex};
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::MediaError;

/// One top-level box, whole (header included).
#[derive(Debug, Clone)]
pub(crate) struct RawBox {
    /// The box type.
    pub(crate) kind: [u8; 4],
    /// Its offset in the input.
    pub(crate) pos: u64,
    /// The header length (8 or 16).
    pub(crate) header_len: usize,
    /// The whole box.
    pub(crate) bytes: Bytes,
}

impl RawBox {
    /// The body, without the header.
    pub(crate) fn body(&self) -> &[u8] {
        self.bytes.get(self.header_len..).unwrap_or_default()
    }
}

/// Reads top-level boxes from a byte stream, one at a time.
pub(crate) struct BoxReader<R> {
    input: R,
    pos: u64,
    max: u64,
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
async fn read_full<R: AsyncRead + Unpin>(r: &mut R, buf: &mut [u8]) -> Result<usize, MediaError> {
    let mut n = 0;
    while n < buf.len() {
        let Some(rest) = buf.get_mut(n..) else { break };
        let got = r.read(rest).await?;
        if got == 0 {
            break;
        }
        n += got;
    }
    Ok(n)
}

impl<R: AsyncRead + Unpin> BoxReader<R> {
    pub(crate) fn new(input: R, max: u64) -> Self {
        BoxReader { input, pos: 0, max }
    }

    /// Bytes read so far.
    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    /// The next box; `None` at the end of the input between boxes.
    pub(crate) async fn next(&mut self) -> Result<Option<RawBox>, MediaError> {
        let pos = self.pos;
        let mut head = [0u8; 16];
        let n = read_full(&mut self.input, head.get_mut(..8).unwrap_or_default()).await?;
        if n == 0 {
            return Ok(None);
        }
        if n < 8 {
            return Err(MediaError::Truncated(format!(
                "the input ended in a box header at byte {pos}"
            )));
        }
        let size32 = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let kind = [head[4], head[5], head[6], head[7]];
        let name = String::from_utf8_lossy(&kind).into_owned();
        let (size, header_len) = match size32 {
            0 => {
                return Err(MediaError::Mp4(format!(
                    "box {name:?} at byte {pos} extends to the end of the input (size 0): not a fragmented stream"
                )));
            }
            1 => {
                let n = read_full(&mut self.input, head.get_mut(8..16).unwrap_or_default()).await?;
                if n < 8 {
                    return Err(MediaError::Truncated(format!(
                        "the input ended in the header of box {name:?} at byte {pos}"
                    )));
                }
                let mut l = [0u8; 8];
                l.copy_from_slice(head.get(8..16).unwrap_or(&[0; 8]));
                (u64::from_be_bytes(l), 16usize)
            }
            s => (u64::from(s), 8usize),
        };
        if size < header_len as u64 {
            return Err(MediaError::Mp4(format!(
                "box {name:?} at byte {pos} has size {size}, smaller than its header"
            )));
        }
        if size > self.max {
            return Err(MediaError::Mp4(format!(
                "box {name:?} at byte {pos} has size {size}, above the limit of {} bytes",
                self.max
            )));
        }
        let mut bytes = vec![0u8; size as usize];
        if let (Some(dst), Some(src)) = (bytes.get_mut(..header_len), head.get(..header_len)) {
            dst.copy_from_slice(src);
        }
        let body = bytes.get_mut(header_len..).unwrap_or_default();
        let got = read_full(&mut self.input, body).await?;
        if got < body.len() {
            return Err(MediaError::Truncated(format!(
                "box {name:?} at byte {pos} announces {size} bytes, the input ended after {}",
                header_len + got
            )));
        }
        self.pos += size;
        Ok(Some(RawBox {
            kind,
            pos,
            header_len,
            bytes: bytes.into(),
        }))
    }
}

/// Video or audio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Video,
    Audio,
}

impl Kind {
    pub(crate) fn role(self) -> &'static str {
        match self {
            Kind::Video => "video",
            Kind::Audio => "audio",
        }
    }
}

/// One media track of a `moov`.
#[derive(Clone, Debug)]
pub(crate) struct Mp4Track {
    pub(crate) id: u32,
    pub(crate) kind: Kind,
    pub(crate) timescale: u32,
    pub(crate) codec: String,
    pub(crate) width: Option<u32>,
    pub(crate) height: Option<u32>,
    pub(crate) samplerate: Option<u32>,
    pub(crate) channels: Option<u32>,
    pub(crate) bitrate: Option<u64>,
    /// The decoder description (avcC / hvcC / av1C body, AudioSpecificConfig).
    pub(crate) description: Option<Bytes>,
    /// The `trex` defaults.
    pub(crate) trex: Trex,
    /// The edit list's media start (subtracted from presentation times), media units.
    pub(crate) edit_shift: i64,
    /// The `trak` as read.
    pub(crate) trak: Trak,
}

/// Runs an `mp4-atom` decode, turning a panic inside it into an error: it parses untrusted
/// input, and some of its decoders have panicked on malformed boxes before (its issue #179,
/// fixed in 0.17). A panic still reaches the panic hook (printed) unless the application
/// builds with `panic = "abort"`.
pub(crate) fn guarded<T>(
    what: &str,
    f: impl FnOnce() -> Result<T, MediaError>,
) -> Result<T, MediaError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|_| Err(MediaError::Mp4(format!("the MP4 parser failed on {what}"))))
}

/// An atom's body: the encoding without its 8-byte header.
pub(crate) fn atom_body<A: Encode>(atom: &A) -> Result<Bytes, MediaError> {
    let mut v = Vec::new();
    atom.encode(&mut v)?;
    Ok(Bytes::from(v).slice(8..))
}

/// Decodes an atom from its body.
pub(crate) fn atom_from_body<A: Atom>(body: &[u8]) -> Result<A, MediaError> {
    guarded("a box", || {
        let mut b = body;
        Ok(A::decode_body(&mut b)?)
    })
}

/// The HEVC codec string (ISO/IEC 14496-15 Annex E) from an hvcC.
fn hevc_codec(prefix: &str, h: &mp4_atom::Hvcc) -> String {
    let space = ["", "A", "B", "C"]
        .get(usize::from(h.general_profile_space & 3))
        .copied()
        .unwrap_or("");
    let compat = u32::from_be_bytes(h.general_profile_compatibility_flags).reverse_bits();
    let tier = if h.general_tier_flag { 'H' } else { 'L' };
    let mut constraints: Vec<u8> = h.general_constraint_indicator_flags.to_vec();
    while constraints.last() == Some(&0) {
        constraints.pop();
    }
    let mut s = format!(
        "{prefix}.{space}{}.{compat:X}.{tier}{}",
        h.general_profile_idc, h.general_level_idc
    );
    for c in constraints {
        s.push_str(&format!(".{c:X}"));
    }
    s
}

/// The tracks of a `moov` (video and audio; others are skipped), in `moov` order.
pub(crate) fn read_moov(body: &[u8]) -> Result<(Moov, Vec<Mp4Track>), MediaError> {
    let moov: Moov = atom_from_body(body)?;
    let mut out = Vec::new();
    for trak in &moov.trak {
        let id = trak.tkhd.track_id;
        let trex = moov
            .mvex
            .as_ref()
            .and_then(|m| m.trex.iter().find(|t| t.track_id == id))
            .cloned()
            .unwrap_or(Trex {
                track_id: id,
                default_sample_description_index: 1,
                ..Default::default()
            });
        let timescale = trak.mdia.mdhd.timescale;
        if timescale == 0 {
            return Err(MediaError::Mp4(format!("track {id}: timescale 0")));
        }
        let edit_shift = trak
            .edts
            .as_ref()
            .and_then(|e| e.elst.as_ref())
            .and_then(|e| e.entries.iter().find_map(|x| x.media_time))
            .map_or(0, |t| i64::try_from(t).unwrap_or(0));
        let Some(codec) = trak.mdia.minf.stbl.stsd.codecs.first() else {
            return Err(MediaError::Mp4(format!("track {id}: no sample entry")));
        };
        let mut t = Mp4Track {
            id,
            kind: Kind::Video,
            timescale,
            codec: String::new(),
            width: None,
            height: None,
            samplerate: None,
            channels: None,
            bitrate: None,
            description: None,
            trex,
            edit_shift,
            trak: trak.clone(),
        };
        match codec {
            Codec::Avc1(c) => {
                t.codec = avc_codec("avc1", &c.avcc);
                t.description = Some(atom_body(&c.avcc)?);
                t.width = Some(c.visual.width.into());
                t.height = Some(c.visual.height.into());
                t.bitrate = c.btrt.as_ref().map(|b| u64::from(b.max_bitrate));
            }
            Codec::Avc3(c) => {
                t.codec = avc_codec("avc3", &c.avcc);
                t.description = Some(atom_body(&c.avcc)?);
                t.width = Some(c.visual.width.into());
                t.height = Some(c.visual.height.into());
            }
            Codec::Hvc1(c) => {
                t.codec = hevc_codec("hvc1", &c.hvcc);
                t.description = Some(atom_body(&c.hvcc)?);
                t.width = Some(c.visual.width.into());
                t.height = Some(c.visual.height.into());
            }
            Codec::Hev1(c) => {
                t.codec = hevc_codec("hev1", &c.hvcc);
                t.description = Some(atom_body(&c.hvcc)?);
                t.width = Some(c.visual.width.into());
                t.height = Some(c.visual.height.into());
            }
            Codec::Av01(c) => {
                let a = &c.av1c;
                let depth = if a.twelve_bit {
                    12
                } else if a.high_bitdepth {
                    10
                } else {
                    8
                };
                t.codec = format!(
                    "av01.{}.{:02}{}.{depth:02}",
                    a.seq_profile,
                    a.seq_level_idx_0,
                    if a.seq_tier_0 { 'H' } else { 'M' }
                );
                t.description = Some(atom_body(a)?);
                t.width = Some(c.visual.width.into());
                t.height = Some(c.visual.height.into());
            }
            Codec::Mp4a(c) => {
                t.kind = Kind::Audio;
                let dc = &c.esds.es_desc.dec_config;
                if dc.object_type_indication != 0x40 {
                    return Err(MediaError::Unsupported(format!(
                        "track {id}: mp4a with object type 0x{:02x} (only AAC, 0x40)",
                        dc.object_type_indication
                    )));
                }
                let ds = dc.dec_specific.as_ref().ok_or_else(|| {
                    MediaError::Mp4(format!("track {id}: AAC without an AudioSpecificConfig"))
                })?;
                t.codec = format!("mp4a.40.{}", ds.profile);
                let mut asc = Vec::new();
                ds.encode(&mut asc)?;
                t.description = Some(asc.into());
                // The AudioSpecificConfig over the sample entry, which ISO BMFF writers fill
                // with 2 channels and the rate mod 2^16.
                const RATES: [u32; 13] = [
                    96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025,
                    8000, 7350,
                ];
                t.samplerate = RATES
                    .get(usize::from(ds.freq_index))
                    .copied()
                    .or(Some(u32::from(c.audio.sample_rate.integer())));
                t.channels = match ds.chan_conf {
                    0 => Some(u32::from(c.audio.channel_count)),
                    7 => Some(8),
                    n => Some(u32::from(n)),
                };
                t.bitrate = Some(u64::from(dc.max_bitrate.max(dc.avg_bitrate))).filter(|b| *b > 0);
            }
            Codec::Opus(c) => {
                t.kind = Kind::Audio;
                t.codec = "opus".into();
                t.samplerate = Some(48_000);
                t.channels = Some(u32::from(c.dops.output_channel_count));
            }
            other => {
                let kind = match trak.mdia.hdlr.handler.as_ref() {
                    b"vide" | b"soun" => format!("{other:?}"),
                    // Not a media track (text, metadata): skipped.
                    _ => continue,
                };
                let short: String = kind.chars().take(40).collect();
                return Err(MediaError::Unsupported(format!(
                    "track {id}: sample entry {short}... (supported: avc1, avc3, hvc1, hev1, av01, mp4a, Opus)"
                )));
            }
        }
        out.push(t);
    }
    Ok((moov, out))
}

fn avc_codec(prefix: &str, a: &mp4_atom::Avcc) -> String {
    format!(
        "{prefix}.{:02x}{:02x}{:02x}",
        a.avc_profile_indication, a.profile_compatibility, a.avc_level_indication
    )
}

/// One sample of a fragment.
#[derive(Clone, Debug)]
pub(crate) struct Sample {
    /// Decode time, media units.
    pub(crate) dts: u64,
    /// Duration, media units.
    pub(crate) duration: u32,
    /// Composition offset, media units.
    pub(crate) cts: i64,
    /// A sync sample.
    pub(crate) keyframe: bool,
    pub(crate) data: Bytes,
}

/// The samples of one track of a fragment.
#[derive(Clone, Debug)]
pub(crate) struct TrackRun {
    pub(crate) track_id: u32,
    pub(crate) samples: Vec<Sample>,
}

/// `sample_is_non_sync_sample` of the sample flags.
const NON_SYNC: u32 = 0x0001_0000;

/// Reads the samples of a `moof` (starting at input offset `moof_pos`) from `data`, which
/// holds the `moof` followed by its `mdat`. `next_dts` gives each track's decode time where
/// a `traf` has no `tfdt`.
pub(crate) fn read_fragment(
    moof: &Moof,
    moof_pos: u64,
    data: &Bytes,
    tracks: &[Mp4Track],
    next_dts: &mut dyn FnMut(u32) -> u64,
) -> Result<Vec<TrackRun>, MediaError> {
    let mut out = Vec::new();
    for traf in &moof.traf {
        let id = traf.tfhd.track_id;
        let Some(track) = tracks.iter().find(|t| t.id == id) else {
            // A track that is not a media track (skipped in the moov).
            continue;
        };
        let base = match traf.tfhd.base_data_offset {
            Some(abs) => abs.checked_sub(moof_pos).ok_or_else(|| {
                MediaError::Mp4(format!("track {id}: base data offset before the moof"))
            })?,
            None => 0,
        };
        let mut dts = traf
            .tfdt
            .as_ref()
            .map_or_else(|| next_dts(id), |t| t.base_media_decode_time);
        let mut samples = Vec::new();
        let mut offset = base;
        for trun in &traf.trun {
            if let Some(o) = trun.data_offset {
                offset = base.checked_add_signed(i64::from(o)).ok_or_else(|| {
                    MediaError::Mp4(format!("track {id}: data offset before the moof"))
                })?;
            }
            // A run of more samples than the fragment has bytes is malformed (and would take
            // memory for nothing: a sample count is 32 bits).
            if trun.samples.len() > data.len() {
                return Err(MediaError::Mp4(format!(
                    "track {id}: a trun of {} samples in a fragment of {} bytes",
                    trun.samples.len(),
                    data.len()
                )));
            }
            for e in trun.samples.iter() {
                let size = e
                    .size
                    .or(traf.tfhd.default_sample_size)
                    .unwrap_or(track.trex.default_sample_size);
                let duration = e
                    .duration
                    .or(traf.tfhd.default_sample_duration)
                    .unwrap_or(track.trex.default_sample_duration);
                let flags = e
                    .flags
                    .or(traf.tfhd.default_sample_flags)
                    .unwrap_or(track.trex.default_sample_flags);
                let start = usize::try_from(offset).unwrap_or(usize::MAX);
                let end = start.saturating_add(size as usize);
                if end > data.len() {
                    return Err(MediaError::Mp4(format!(
                        "track {id}: a sample of {size} bytes at offset {offset} is beyond the mdat ({} bytes with the moof)",
                        data.len()
                    )));
                }
                samples.push(Sample {
                    dts,
                    duration,
                    cts: e.cts.unwrap_or(0),
                    keyframe: track.kind == Kind::Audio || flags & NON_SYNC == 0,
                    data: data.slice(start..end),
                });
                dts = dts.saturating_add(u64::from(duration));
                offset = end as u64;
            }
        }
        out.push(TrackRun {
            track_id: id,
            samples,
        });
    }
    Ok(out)
}

/// Decodes a whole `moof` box.
pub(crate) fn decode_moof(bytes: &[u8]) -> Result<Moof, MediaError> {
    guarded("a moof", || {
        let mut b = bytes;
        Ok(Moof::decode(&mut b)?)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hevc_codec_string() {
        // ISO/IEC 14496-15 Annex E's example: Main profile, level 3.1, constraint 0xB0.
        let h = mp4_atom::Hvcc {
            general_profile_idc: 1,
            general_profile_compatibility_flags: [0x60, 0, 0, 0],
            general_constraint_indicator_flags: [0xb0, 0, 0, 0, 0, 0],
            general_level_idc: 93,
            ..Default::default()
        };
        assert_eq!(hevc_codec("hvc1", &h), "hvc1.1.6.L93.B0");
        let h = mp4_atom::Hvcc {
            general_profile_space: 1,
            general_tier_flag: true,
            general_profile_idc: 2,
            general_profile_compatibility_flags: [0x20, 0, 0, 0],
            general_level_idc: 120,
            ..Default::default()
        };
        assert_eq!(hevc_codec("hev1", &h), "hev1.A2.4.H120");
    }

    #[test]
    fn avc_codec_string() {
        let a = mp4_atom::Avcc {
            avc_profile_indication: 0x64,
            profile_compatibility: 0,
            avc_level_indication: 0x1f,
            ..Default::default()
        };
        assert_eq!(avc_codec("avc1", &a), "avc1.64001f");
    }
}
