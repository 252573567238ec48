//! The MSF catalog against the examples of the MSF and CMSF texts, delta updates, and the
//! errors a malformed catalog gets.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use moq_media::MediaError;
use moq_media::catalog::Catalog;

fn example(name: &str) -> Vec<u8> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/msf");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(name)
        {
            return std::fs::read(path).unwrap();
        }
    }
    panic!("no example {name}");
}

fn catalog_error(r: Result<Catalog, MediaError>) -> String {
    match r {
        Err(MediaError::Catalog(msg)) => msg,
        other => panic!("expected a catalog error, got {other:?}"),
    }
}

#[test]
fn every_independent_msf_example_parses() {
    for n in 0..=16 {
        let name = format!("{n:02}-");
        if n == 3 || n == 4 {
            continue; // delta updates
        }
        let c = Catalog::from_json(&example(&name)).unwrap_or_else(|e| panic!("example {n}: {e}"));
        assert!(!c.version.is_empty());
    }
}

#[test]
fn single_quality_example_fields() {
    let c = Catalog::from_json(&example("00-")).unwrap();
    assert_eq!(c.version, "draft-01");
    assert_eq!(c.generated_at, Some(1746104606044));
    assert_eq!(c.tracks.len(), 2);
    let v = c.first_with_role("video").unwrap();
    assert_eq!(v.name, "1080p-video");
    assert_eq!(v.codec.as_deref(), Some("av01.0.08M.10.0.110.09"));
    assert_eq!(
        (v.width, v.height, v.framerate),
        (Some(1920), Some(1080), Some(30.0))
    );
    assert_eq!(v.bitrate, Some(1500000));
    assert_eq!(v.render_group, Some(1));
    assert_eq!(v.target_latency, Some(2000));
    let a = c.first_with_role("audio").unwrap();
    assert_eq!(a.samplerate, Some(48000));
    assert_eq!(a.channel_config.as_deref(), Some("2"));
}

#[test]
fn simulcast_example_alt_groups() {
    let c = Catalog::from_json(&example("01-")).unwrap();
    let alts: Vec<_> = c.tracks.iter().filter(|t| t.alt_group == Some(1)).collect();
    assert_eq!(alts.len(), 3);
}

#[test]
fn cmsf_example_init_data() {
    let c = Catalog::from_json(&example("cmsf-")).unwrap();
    let t = &c.tracks[0];
    assert_eq!(t.packaging, "cmaf");
    assert!(t.init_data.is_some());
    // The text abbreviates its base64 with "...": a clear error, not a panic.
    let err = c.init_data(t).unwrap_err();
    assert!(err.to_string().contains("base64"), "{err}");
}

#[test]
fn delta_add_update_clone_then_remove() {
    let mut c = Catalog::from_json(
        br#"{"version":"draft-01","tracks":[
            {"name":"video-1080","namespace":"example.com/custom","packaging":"loc","isLive":true,
             "role":"video","codec":"av01.0.08M.10.0.110.09","width":1920,"height":1080,"bitrate":5000000},
            {"name":"video","packaging":"loc","isLive":true,"role":"video","codec":"avc1.64001f"}]}"#,
    )
    .unwrap();
    c.apply(&example("03-")).unwrap();
    assert_eq!(c.generated_at, Some(1746104606044));
    assert_eq!(c.track("video-1080").unwrap().bitrate, Some(4000000));
    assert_eq!(c.track("slides").unwrap().framerate, Some(15.0));
    let clone = c.track("video-720").unwrap();
    assert_eq!(
        (clone.width, clone.height, clone.bitrate),
        (Some(1280), Some(720), Some(600000))
    );
    // Inherited from the parent.
    assert_eq!(clone.codec.as_deref(), Some("av01.0.08M.10.0.110.09"));
    assert_eq!(clone.namespace.as_deref(), Some("example.com/custom"));

    c.apply(&example("04-")).unwrap();
    assert!(c.track("video").is_none());
    assert!(c.track("slides").is_none());
    assert_eq!(c.tracks.len(), 2);
}

#[test]
fn delta_errors_leave_the_catalog_unchanged() {
    let mut c = Catalog::from_json(
        br#"{"version":"draft-01","tracks":[{"name":"a","packaging":"loc","isLive":true}]}"#,
    )
    .unwrap();
    let before = c.clone();
    for (delta, want) in [
        (
            &br#"{"deltaUpdate":[{"op":"remove","tracks":[{"name":"nope"}]}]}"#[..],
            "no track",
        ),
        (
            br#"{"deltaUpdate":[{"op":"add","tracks":[{"name":"a","packaging":"loc"}]}]}"#,
            "already exists",
        ),
        (
            br#"{"deltaUpdate":[{"op":"clone","tracks":[{"parentName":"a","name":"a"}]}]}"#,
            "already exists",
        ),
        (
            br#"{"deltaUpdate":[{"op":"frobnicate","tracks":[]}]}"#,
            "unknown operation",
        ),
        (br#"{"deltaUpdate":[]}"#, "no operation"),
        (b"{", "not JSON"),
    ] {
        let err = c
            .apply(delta)
            .err()
            .unwrap_or_else(|| panic!("{} applied", String::from_utf8_lossy(delta)))
            .to_string();
        assert!(err.contains(want), "{err} should say {want}");
        assert_eq!(c, before);
    }
}

#[test]
fn malformed_catalogs_get_clear_errors() {
    for (json, want) in [
        (&b"not json at all"[..], "not JSON"),
        (b"[1,2]", "not a JSON object"),
        (br#"{"tracks":[]}"#, "missing field `version`"),
        (br#"{"version":"draft-01"}"#, "missing field `tracks`"),
        (br#"{"version":true,"tracks":[]}"#, "version: expected a string"),
        (br#"{"version":"v7","tracks":[]}"#, "unknown MSF version"),
        (br#"{"version":"draft-01","tracks":[{"packaging":"loc"}]}"#, "missing field `name`"),
        (br#"{"version":"draft-01","tracks":[{"name":"a"}]}"#, "missing field `packaging`"),
        (
            br#"{"version":"draft-01","tracks":[{"name":"a","packaging":"loc"},{"name":"a","packaging":"loc"}]}"#,
            "duplicate track name",
        ),
        (
            br#"{"version":"draft-01","tracks":[{"name":"a","packaging":"loc","initRef":"x"}],"initDataList":[]}"#,
            "names no initDataList entry",
        ),
        (br#"{"generatedAt":1,"deltaUpdate":[]}"#, "delta update where an independent"),
    ] {
        let msg = catalog_error(Catalog::from_json(json));
        assert!(msg.contains(want), "{msg:?} should say {want:?}");
    }
}

#[test]
fn unknown_fields_are_ignored_and_not_written() {
    let c = Catalog::from_json(
        br#"{"version":"draft-02","future":{"x":1},"tracks":[{"name":"v","packaging":"loc","isLive":true,"shiny":true}]}"#,
    )
    .unwrap();
    let json = String::from_utf8(c.to_json()).unwrap();
    assert!(
        !json.contains("shiny") && !json.contains("future"),
        "{json}"
    );
    assert_eq!(Catalog::from_json(json.as_bytes()).unwrap(), c);
}

#[test]
fn serialize_puts_init_data_list_after_tracks_and_round_trips() {
    let mut c = Catalog::new();
    let mut t = moq_media::catalog::Track::default();
    t.name = "video".into();
    t.packaging = "loc".into();
    t.init_ref = Some("video".into());
    c.tracks.push(t);
    c.init_data_list.push(moq_media::catalog::InitData::inline(
        "video",
        b"\x01\x64\x00\x1f",
    ));
    let json = String::from_utf8(c.to_json()).unwrap();
    assert!(
        json.find("\"tracks\"").unwrap() < json.find("\"initDataList\"").unwrap(),
        "{json}"
    );
    let back = Catalog::from_json(json.as_bytes()).unwrap();
    assert_eq!(back, c);
    assert_eq!(
        &back.init_data(&back.tracks[0]).unwrap().unwrap()[..],
        b"\x01\x64\x00\x1f"
    );
}

#[test]
fn objects_of_a_group_independent_then_deltas() {
    let first =
        br#"{"version":"draft-01","tracks":[{"name":"a","packaging":"loc","isLive":true}]}"#;
    let delta = br#"{"deltaUpdate":[{"op":"add","tracks":[{"name":"b","packaging":"loc"}]}]}"#;
    let c = Catalog::from_object(None, 0, first).unwrap();
    let c = Catalog::from_object(Some(&c), 1, delta).unwrap();
    assert_eq!(c.tracks.len(), 2);
    assert!(Catalog::from_object(None, 1, delta).is_err());
    // Object 0 must be independent.
    assert!(Catalog::from_object(Some(&c), 0, delta).is_err());
}
