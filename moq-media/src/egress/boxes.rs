//! The ISO-BMFF boxes egress writes for LOC tracks: a `trak` built from the catalog, and a
//! `moof`+`mdat` fragment.

use bytes::Bytes;
use mp4_atom::{Encode, FixedPoint};

use crate::MediaError;
use crate::catalog::Track;
use crate::fmp4::atom_from_body;

/// A `moof` (one `traf`) and its `mdat`.
pub(super) fn fragment(
    track_id: u32,
    sequence: u32,
    dts: u64,
    entries: Vec<mp4_atom::TrunEntry>,
    data: &[u8],
) -> Result<Bytes, MediaError> {
    let mut moof = mp4_atom::Moof {
        mfhd: mp4_atom::Mfhd {
            sequence_number: sequence,
        },
        traf: vec![mp4_atom::Traf {
            tfhd: mp4_atom::Tfhd {
                track_id,
                default_base_is_moof: true,
                ..Default::default()
            },
            tfdt: Some(mp4_atom::Tfdt {
                base_media_decode_time: dts,
            }),
            trun: vec![mp4_atom::Trun {
                data_offset: Some(0),
                samples: entries.into(),
            }],
            ..Default::default()
        }],
    };
    let mut out = Vec::new();
    moof.encode(&mut out)?;
    let offset = i32::try_from(out.len() + 8).unwrap_or(i32::MAX);
    for traf in &mut moof.traf {
        for trun in &mut traf.trun {
            trun.data_offset = Some(offset);
        }
    }
    out.clear();
    moof.encode(&mut out)?;
    let size = u32::try_from(data.len() + 8)
        .map_err(|_| MediaError::Object("a group too large for one mdat".into()))?;
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(b"mdat");
    out.extend_from_slice(data);
    Ok(out.into())
}

/// A `trak` for a LOC track, from the catalog's codec string and the decoder description.
pub(super) fn loc_trak(
    t: &Track,
    id: u32,
    description: Option<&[u8]>,
) -> Result<mp4_atom::Trak, MediaError> {
    use mp4_atom::Codec;
    let codec = t.codec.as_deref().unwrap_or("");
    let prefix = codec.split('.').next().unwrap_or("");
    let need = || {
        description.ok_or_else(|| {
            MediaError::Catalog(format!(
                "track {:?} ({codec}): no decoder description (initRef) in the catalog",
                t.name
            ))
        })
    };
    let visual = mp4_atom::Visual {
        data_reference_index: 1,
        width: t.width.and_then(|w| u16::try_from(w).ok()).unwrap_or(0),
        height: t.height.and_then(|h| u16::try_from(h).ok()).unwrap_or(0),
        ..Default::default()
    };
    let samplerate = t.samplerate.unwrap_or(48_000);
    let channels: u16 = t
        .channel_config
        .as_deref()
        .and_then(|c| c.parse().ok())
        .unwrap_or(2);
    let audio = mp4_atom::Audio {
        data_reference_index: 1,
        channel_count: channels,
        sample_size: 16,
        sample_rate: FixedPoint::new(u16::try_from(samplerate).unwrap_or(0), 0),
    };
    let (entry, video, timescale) = match prefix {
        "avc1" | "avc3" => {
            let avcc = atom_from_body::<mp4_atom::Avcc>(need()?)?;
            (
                Codec::Avc1(mp4_atom::Avc1 {
                    visual,
                    avcc,
                    ..Default::default()
                }),
                true,
                90_000,
            )
        }
        "hvc1" | "hev1" => {
            let hvcc = atom_from_body::<mp4_atom::Hvcc>(need()?)?;
            let entry = if prefix == "hvc1" {
                Codec::Hvc1(mp4_atom::Hvc1 {
                    visual,
                    hvcc,
                    ..Default::default()
                })
            } else {
                Codec::Hev1(mp4_atom::Hev1 {
                    visual,
                    hvcc,
                    ..Default::default()
                })
            };
            (entry, true, 90_000)
        }
        "av01" => {
            let av1c = atom_from_body::<mp4_atom::Av1c>(need()?)?;
            (
                Codec::Av01(mp4_atom::Av01 {
                    visual,
                    av1c,
                    ..Default::default()
                }),
                true,
                90_000,
            )
        }
        "mp4a" => {
            let asc = need()?;
            let (a, b) = (
                asc.first().copied().unwrap_or(0),
                asc.get(1).copied().unwrap_or(0),
            );
            let dec_specific = mp4_atom::esds::DecoderSpecific {
                profile: a >> 3,
                freq_index: ((a & 7) << 1) | (b >> 7),
                chan_conf: (b >> 3) & 0xf,
                raw: asc.to_vec(),
            };
            let esds = mp4_atom::Esds {
                es_desc: mp4_atom::esds::EsDescriptor {
                    es_id: 1,
                    dec_config: mp4_atom::esds::DecoderConfig {
                        object_type_indication: 0x40,
                        stream_type: 5,
                        max_bitrate: t.bitrate.and_then(|b| u32::try_from(b).ok()).unwrap_or(0),
                        avg_bitrate: t.bitrate.and_then(|b| u32::try_from(b).ok()).unwrap_or(0),
                        dec_specific: Some(dec_specific),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            };
            (
                Codec::Mp4a(mp4_atom::Mp4a {
                    audio,
                    esds,
                    btrt: None,
                    taic: None,
                }),
                false,
                samplerate,
            )
        }
        "opus" => {
            // The OpusHead (RFC 7845 §5.1), if the catalog carries one: pre-skip at 10..12.
            let pre_skip = description
                .and_then(|d| Some(u16::from_le_bytes([*d.get(10)?, *d.get(11)?])))
                .unwrap_or(0);
            (
                Codec::Opus(mp4_atom::Opus {
                    audio: mp4_atom::Audio {
                        sample_rate: FixedPoint::new(48_000, 0),
                        ..audio
                    },
                    dops: mp4_atom::Dops {
                        output_channel_count: u8::try_from(channels).unwrap_or(2),
                        pre_skip,
                        input_sample_rate: samplerate,
                        output_gain: 0,
                        channel_mapping: None,
                    },
                    btrt: None,
                }),
                false,
                48_000,
            )
        }
        _ => {
            return Err(MediaError::Unsupported(format!(
                "track {:?}: codec {codec:?} (supported: avc1, avc3, hvc1, hev1, av01, mp4a, opus)",
                t.name
            )));
        }
    };
    let timescale = t
        .timescale
        .and_then(|s| u32::try_from(s).ok())
        .filter(|s| *s > 0)
        .unwrap_or(timescale);
    let (handler, vmhd, smhd) = if video {
        (b"vide", Some(mp4_atom::Vmhd::default()), None)
    } else {
        (b"soun", None, Some(mp4_atom::Smhd::default()))
    };
    Ok(mp4_atom::Trak {
        tkhd: mp4_atom::Tkhd {
            track_id: id,
            enabled: true,
            in_movie: true,
            volume: FixedPoint::new(u8::from(!video), 0),
            width: FixedPoint::new(u16::try_from(t.width.unwrap_or(0)).unwrap_or(0), 0),
            height: FixedPoint::new(u16::try_from(t.height.unwrap_or(0)).unwrap_or(0), 0),
            ..Default::default()
        },
        mdia: mp4_atom::Mdia {
            mdhd: mp4_atom::Mdhd {
                timescale,
                language: "und".into(),
                ..Default::default()
            },
            hdlr: mp4_atom::Hdlr {
                handler: handler.into(),
                name: if video {
                    "VideoHandler"
                } else {
                    "SoundHandler"
                }
                .into(),
            },
            minf: mp4_atom::Minf {
                vmhd,
                smhd,
                dinf: mp4_atom::Dinf {
                    dref: mp4_atom::Dref {
                        entries: vec![mp4_atom::DrefEntry::Url(mp4_atom::Url {
                            location: String::new(),
                        })],
                    },
                },
                stbl: mp4_atom::Stbl {
                    stsd: mp4_atom::Stsd {
                        codecs: vec![entry],
                    },
                    ..Default::default()
                },
                ..Default::default()
            },
        },
        ..Default::default()
    })
}
