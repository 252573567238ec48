//! CMAF packaging (CMSF, editor's copy of 2025-12-01): one object per CMAF fragment or chunk
//! (`moof`+`mdat`) of one track, groups starting at a stream access point, and the track's
//! CMAF header (`ftyp`+`moov` with that one track) in the catalog.
//!
//! [`init_segment`] builds a track's header; [`merge_inits`] joins several tracks' headers
//! into one `moov` (for writing one fMP4 file), and [`renumber_fragment`] moves a fragment
//! to the track ID the merged header gave its track.

use bytes::Bytes;
use mp4_atom::{Decode, Encode, Ftyp, Moof, Moov, Mvex, Mvhd, Trak, Trex};

use crate::MediaError;

/// The `ftyp` this crate writes: `iso6` with the CMAF brand `cmfc`.
pub fn default_ftyp() -> Ftyp {
    Ftyp {
        major_brand: b"iso6".into(),
        minor_version: 0,
        compatible_brands: vec![b"iso6".into(), b"cmfc".into(), b"mp41".into()],
    }
}

/// A CMAF header for one track: `ftyp`, then a `moov` holding `mvhd`, the `trak` and an
/// `mvex` with the track's `trex`.
pub fn init_segment(
    ftyp: &Ftyp,
    mvhd: &Mvhd,
    trak: &Trak,
    trex: &Trex,
) -> Result<Bytes, MediaError> {
    let moov = Moov {
        mvhd: Mvhd {
            next_track_id: trak.tkhd.track_id.saturating_add(1),
            ..mvhd.clone()
        },
        mvex: Some(Mvex {
            mehd: None,
            trex: vec![trex.clone()],
        }),
        trak: vec![trak.clone()],
        ..Default::default()
    };
    let mut out = Vec::new();
    ftyp.encode(&mut out)?;
    moov.encode(&mut out)?;
    Ok(out.into())
}

/// Reads a CMAF header: its `ftyp` (if any) and `moov`.
pub fn read_init(bytes: &[u8]) -> Result<(Option<Ftyp>, Moov), MediaError> {
    crate::fmp4::guarded("a CMAF header", || read_init_unguarded(bytes))
}

fn read_init_unguarded(bytes: &[u8]) -> Result<(Option<Ftyp>, Moov), MediaError> {
    let mut buf = bytes;
    let mut ftyp = None;
    while !buf.is_empty() {
        match mp4_atom::Any::decode(&mut buf)? {
            mp4_atom::Any::Ftyp(f) => ftyp = Some(f),
            mp4_atom::Any::Moov(m) => return Ok((ftyp, m)),
            _ => {}
        }
    }
    Err(MediaError::Object("a CMAF header without a moov".into()))
}

/// Merges one-track CMAF headers into one init segment whose tracks are numbered 1, 2, ...
/// in the order given. Returns the segment and, per header, its track's original ID.
pub fn merge_inits(inits: &[Bytes]) -> Result<(Bytes, Vec<u32>), MediaError> {
    let mut ftyp = None;
    let mut mvhd = None;
    let mut traks = Vec::new();
    let mut trexs = Vec::new();
    let mut ids = Vec::new();
    for (i, init) in inits.iter().enumerate() {
        let (f, moov) = read_init(init)?;
        ftyp = ftyp.or(f);
        let mut trak = moov
            .trak
            .first()
            .cloned()
            .ok_or_else(|| MediaError::Object("a CMAF header without a track".into()))?;
        let old = trak.tkhd.track_id;
        let new = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let mut trex = moov
            .mvex
            .as_ref()
            .and_then(|m| m.trex.iter().find(|t| t.track_id == old).cloned())
            .unwrap_or(Trex {
                default_sample_description_index: 1,
                ..Default::default()
            });
        trak.tkhd.track_id = new;
        trex.track_id = new;
        mvhd = mvhd.or(Some(moov.mvhd));
        traks.push(trak);
        trexs.push(trex);
        ids.push(old);
    }
    let mvhd = Mvhd {
        next_track_id: u32::try_from(traks.len() + 1).unwrap_or(u32::MAX),
        ..mvhd.unwrap_or_default()
    };
    let moov = Moov {
        mvhd,
        mvex: Some(Mvex {
            mehd: None,
            trex: trexs,
        }),
        trak: traks,
        ..Default::default()
    };
    let mut out = Vec::new();
    ftyp.unwrap_or_else(default_ftyp).encode(&mut out)?;
    moov.encode(&mut out)?;
    Ok((out.into(), ids))
}

/// Rewrites a fragment (`moof` then `mdat`, one track) for track ID `track_id` and sequence
/// number `sequence`, keeping its data offsets pointing at the same bytes. Returns it and its
/// number of samples.
pub fn renumber_fragment(
    fragment: &[u8],
    track_id: u32,
    sequence: u32,
) -> Result<(Bytes, u64), MediaError> {
    let mut buf = fragment;
    let mut moof = crate::fmp4::guarded("a CMAF object", || {
        Moof::decode(&mut buf)
            .map_err(|e| MediaError::Object(format!("CMAF object: no moof first: {e}")))
    })?;
    let old_len = fragment.len() - buf.len();
    if moof.traf.len() != 1 {
        return Err(MediaError::Object(format!(
            "CMAF object with {} tracks in its moof (CMSF: one track)",
            moof.traf.len()
        )));
    }
    moof.mfhd.sequence_number = sequence;
    for traf in &mut moof.traf {
        traf.tfhd.track_id = track_id;
    }
    let mut out = Vec::with_capacity(fragment.len() + 16);
    moof.encode(&mut out)?;
    let delta = i64::try_from(out.len()).unwrap_or(0) - i64::try_from(old_len).unwrap_or(0);
    if delta != 0 {
        for traf in &mut moof.traf {
            for trun in &mut traf.trun {
                if let Some(o) = trun.data_offset {
                    trun.data_offset = i32::try_from(i64::from(o) + delta).ok();
                }
            }
        }
        out.clear();
        moof.encode(&mut out)?;
    }
    out.extend_from_slice(buf);
    let samples = moof
        .traf
        .iter()
        .flat_map(|t| t.trun.iter())
        .map(|r| r.samples.len() as u64)
        .sum();
    Ok((out.into(), samples))
}
