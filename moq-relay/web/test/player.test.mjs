// player.test.mjs: offline tests of player.js's MSF catalog handling (no browser):
//   node --test moq-relay/web/test/player.test.mjs
// An independent catalog, the four delta operations applied in order (MSF "Delta updates"),
// and clear errors for a catalog that is not JSON, has no tracks, or a delta that names a
// track that is not there.

import { test } from "node:test";
import assert from "node:assert/strict";
import { parseCatalog } from "../player.js";

const bytes = (v) => new TextEncoder().encode(typeof v === "string" ? v : JSON.stringify(v));
const base = {
  version: "draft-01", generatedAt: 1, unknownField: { kept: true },
  tracks: [
    { name: "video", packaging: "loc", role: "video", codec: "avc1.64001f", width: 1280, height: 720, initRef: "v" },
    { name: "audio", packaging: "loc", role: "audio", codec: "mp4a.40.2", samplerate: 48000, channelConfig: "2" },
  ],
  initDataList: [{ id: "v", type: "inline", data: "AQID" }],
};

test("an independent catalog parses, unknown fields kept", () => {
  const c = parseCatalog(bytes(base));
  assert.deepEqual(c.tracks.map((t) => t.name), ["video", "audio"]);
  assert.deepEqual(c.unknownField, { kept: true });
});

test("a delta update: update, add, clone, remove, in order", () => {
  const c = parseCatalog(bytes(base));
  const d = parseCatalog(bytes({
    generatedAt: 2,
    deltaUpdate: [
      { op: "update", tracks: [{ name: "video", bitrate: 4000000 }] },
      { op: "add", tracks: [{ name: "slides", packaging: "loc", role: "video", codec: "av01.0.08M.10" }] },
      { op: "clone", tracks: [{ parentName: "video", name: "video-360", width: 640, height: 360 }] },
      { op: "remove", tracks: [{ name: "audio" }] },
    ],
  }), c);
  assert.deepEqual(d.tracks.map((t) => t.name), ["video", "slides", "video-360"]);
  assert.equal(d.tracks[0].bitrate, 4000000);
  assert.deepEqual([d.tracks[2].codec, d.tracks[2].width, d.tracks[2].parentName], ["avc1.64001f", 640, undefined]);
  assert.equal(d.generatedAt, 2);
  assert.equal(c.tracks.length, 2, "the catalog before the delta is unchanged");
});

test("malformed catalogs get a clear error", () => {
  const cases = [
    [bytes("{not json"), null, /catalog is not JSON/],
    [new Uint8Array([0x7b, 0xff, 0x7d]), null, /catalog is not JSON/], // not UTF-8
    [bytes([1, 2]), null, /not a JSON object/],
    [bytes({ version: "draft-01" }), null, /no tracks array/],
    [bytes({ tracks: [{ codec: "opus" }] }), null, /track without a name/],
    [bytes({ generatedAt: 2, deltaUpdate: [{ op: "remove", tracks: [{ name: "x" }] }] }), null, /delta update without a catalog/],
    [bytes({ generatedAt: 2, deltaUpdate: [{ op: "remove", tracks: [{ name: "x" }] }] }), base, /removes track x, which does not exist/],
    [bytes({ generatedAt: 2, deltaUpdate: [{ op: "add", tracks: [{ name: "video" }] }] }), base, /adds track video, which exists/],
    [bytes({ generatedAt: 2, deltaUpdate: [{ op: "clone", tracks: [{ parentName: "nope", name: "y" }] }] }), base, /clones track nope/],
    [bytes({ generatedAt: 2, deltaUpdate: [{ op: "rename", tracks: [] }] }), base, /operation rename is unknown/],
    [bytes({ generatedAt: 2, deltaUpdate: [] }), base, /non-empty array/],
  ];
  for (const [payload, prior, error] of cases) assert.throws(() => parseCatalog(payload, prior), error);
});
