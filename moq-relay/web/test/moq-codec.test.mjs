// moq-codec.test.mjs: offline tests of moq.js's draft-19 wire handling, with a fake
// WebTransport (no browser, no relay, no dependencies):
//   node --test moq-relay/web/test/moq-codec.test.mjs
// Covers vi64 (§1.4.1: non-minimal and 8/9-byte forms), SETUP with unknown options (§10.3),
// SUBSCRIBE / SUBSCRIBE_OK / PUBLISH_DONE (§10.7, §10.8, §10.11), SUBGROUP_HEADER objects with
// properties and status (§11.4.2), OBJECT_DATAGRAM (§11.3.1), SUBSCRIBE_NAMESPACE (§10.18),
// REQUEST_ERROR (§10.6) and the PROTOCOL_VIOLATION closes; FETCH / FETCH_OK (§10.12-10.13)
// with fetch streams (§11.4.4: flags, deltas, End of Range), `join` (SUBSCRIBE + Relative
// Joining FETCH, §5.1.5) and `property` (Immutable Properties, §12.7).

import { test } from "node:test";
import assert from "node:assert/strict";
import { Session, property } from "../moq.js";
import { pipe, text } from "./pipes.mjs";

const msg = (type, body) => [...type, body.length >> 8, body.length & 0xff, ...body];
const tick = () => new Promise((r) => setTimeout(r, 20));

/** A fake WebTransport session; `wt.requests` collects the bidi streams the client opens. */
function fakeSession() {
  const uni = pipe(), bidi = pipe(), dgrams = pipe();
  let closed;
  const wt = {
    protocol: "moqt-19", ready: Promise.resolve(), closedWith: null, requests: [],
    closed: new Promise((r) => (closed = r)),
    close(info) { this.closedWith = info; closed(info); },
    incomingUnidirectionalStreams: uni.readable, incomingBidirectionalStreams: bidi.readable,
    datagrams: { readable: dgrams.readable },
    async createUnidirectionalStream() { return new WritableStream(); },
    async createBidirectionalStream() {
      const sent = [];
      const reply = pipe();
      const req = { sent, reply, writable: new WritableStream({ write: (c) => sent.push(...c) }), readable: reply.readable };
      this.requests.push(req);
      return req;
    },
  };
  const addUni = (bytes, fin = true) => { const p = pipe(); p.push(bytes); if (fin) p.end(); uni.push(p.readable); };
  return { wt, dgrams, addUni };
}

/** A session whose SETUP exchange is done (server SETUP bytes `setup`), and its fake transport. */
async function ready(setup = [0xaf, 0x00, 0, 0]) {
  const f = fakeSession();
  const s = new Session(f.wt);
  const started = s.start();
  f.addUni(setup, false); // the control stream stays open (closing it is a violation)
  await started;
  return { s, f };
}

test("SETUP, SUBSCRIBE, subgroup objects, datagram, PUBLISH_DONE", async () => {
  // SETUP (type 0x2F00 non-minimal as C0 2F 00); options: GREASE 0x9D (odd: length 2), then
  // delta 0x6A -> 0x107 (odd, unknown: skipped), both ignored; no MOQT_IMPLEMENTATION.
  const { s, f } = await ready([0xc0, 0x2f, 0x00, 0, 9, 0x80, 0x9d, 0x02, 0xaa, 0xbb, 0x80, 0x6a, 1, 0x41]);
  assert.equal(s.serverSetup.options.length, 2);
  assert.equal(s.protocol, "moqt-19");

  const pending = s.subscribe(["a", "b"], "t", { filter: "largest", priority: 7 });
  await tick();
  const req = f.wt.requests[0];
  // SUBSCRIBE: type 3, length, request 0, namespace (2: "a", "b"), name "t", 2 params:
  // SUBSCRIBER_PRIORITY 0x20 = 7, LOCATION_FILTER (delta 1) length 1, Largest Object (2).
  assert.deepEqual(req.sent, [0x03, 0, 14, 0, 2, 1, 0x61, 1, 0x62, 1, 0x74, 2, 0x20, 7, 0x01, 1, 2]);
  // SUBSCRIBE_OK: alias 9; params: EXPIRES (0x08) = 0 and LARGEST_OBJECT (delta 1) {0xbbbd, 0x8025 = 37};
  // Track Properties: DEFAULT_PUBLISHER_PRIORITY (0x0E) = 3.
  req.reply.push(msg([0x04], [9, 2, 0x08, 0x00, 0x01, 0xbb, 0xbd, 0x80, 0x25, 0x0e, 3]));
  const sub = await pending;
  assert.deepEqual(sub.largest, { group: 15293, object: 37 });
  assert.equal(sub.priority, 3);

  // Subgroup stream type 0x15: properties, explicit subgroup ID, priority byte, not first object.
  // Group 0xfefa318fa8e3ca11 (8-byte form, beyond 2^53: a BigInt).
  f.addUni([
    0x15, 9, 0xfe, 0xfa, 0x31, 0x8f, 0xa8, 0xe3, 0xca, 0x11, 4, 200,
    5, 5, 0x02, 0x07, 0x03, 1, 0x7a, 2, ...text("hi"), // id 5, props {2: 7, 5: "z"}, "hi"
    0, 0, 0, 0x03, // id 6 (delta 0: +1), no props, length 0, status 3 (end of group), then FIN
  ]);
  // OBJECT_DATAGRAM type 0x0C: object ID 0 and default priority; group 0xff + 8 bytes (9-byte form).
  f.dgrams.push([0x0c, 9, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x2a, ...text("dg")]);
  await tick();
  req.reply.push(msg([0x0b], [0x02, 1, 0])); // PUBLISH_DONE: TRACK_ENDED, 1 stream, no reason
  req.reply.end();
  const objects = [];
  for await (const o of sub) objects.push(o);
  assert.equal(objects.length, 3);
  const d = objects.find((o) => o.datagram);
  const [a, b] = objects.filter((o) => !o.datagram);
  assert.equal(a.group, 0xfa318fa8e3ca11n);
  assert.deepEqual([a.subgroup, a.id, a.priority, new TextDecoder().decode(a.payload)], [4, 5, 200, "hi"]);
  assert.deepEqual(a.properties.map((p) => p.type), [2, 5]);
  assert.deepEqual([b.id, b.status, b.payload.length], [6, 3, 0]);
  assert.deepEqual([d.group, d.id, d.priority, d.datagram], [42, 0, 3, true]);
  assert.deepEqual(sub.done, { code: 2, streamCount: 1, reason: "" });
  assert.equal(f.wt.closedWith, null);
});

test("SUBSCRIBE_NAMESPACE events, then FIN ends them all", async () => {
  const { s, f } = await ready();
  const pending = s.subscribeNamespace(["x"]);
  await tick();
  const req = f.wt.requests[0];
  assert.deepEqual(req.sent, [0x50, 0, 5, 0, 1, 1, 0x78, 0]);
  req.reply.push(msg([0x07], [0])); // REQUEST_OK, no parameters
  const events = await pending;
  req.reply.push(msg([0x08], [1, 1, 0x61])); // NAMESPACE a
  req.reply.push(msg([0x08], [1, 1, 0x62])); // NAMESPACE b
  req.reply.push(msg([0x0e], [1, 1, 0x61])); // NAMESPACE_DONE a
  req.reply.end();
  const seen = [];
  for await (const e of events) seen.push(`${e.type} ${e.namespace.join("/")}`);
  assert.deepEqual(seen, ["added x/a", "added x/b", "removed x/a", "removed x/b"]);
});

test("REQUEST_ERROR rejects with its code and reason", async () => {
  const { s, f } = await ready();
  const pending = s.subscribe(["n"], "t");
  await tick();
  f.wt.requests[0].reply.push(msg([0x05], [0x10, 0, 4, ...text("gone")]));
  await assert.rejects(pending, (e) => e.code === 0x10 && e.reason === "gone" && e.retryInterval === 0);
  assert.equal(f.wt.closedWith, null);
});

test("protocol violations close the session with PROTOCOL_VIOLATION", async () => {
  for (const reply of [
    msg([0x04], [1, 1, 0x0c, 0]), // SUBSCRIBE_OK with an unknown parameter 0x0C
    msg([0x0e], [1, 1, 0x61]), // NAMESPACE_DONE as the first response
  ]) {
    const { s, f } = await ready();
    const pending = s.subscribe(["n"], "t");
    await tick();
    f.wt.requests[0].reply.push(reply);
    await assert.rejects(pending);
    assert.equal(f.wt.closedWith?.closeCode, 3);
  }
});

test("an unknown unidirectional stream type closes the session", async () => {
  const { f } = await ready();
  f.addUni([0x42, 0]);
  await tick();
  assert.equal(f.wt.closedWith?.closeCode, 3);
});

/** Answers the SUBSCRIBE on request `i` with SUBSCRIBE_OK: alias 9, LARGEST_OBJECT {group, object}. */
const subscribeOk = (f, i, group, object) =>
  f.wt.requests[i].reply.push(msg([0x04], [9, 1, 0x09, group, object]));
/** FETCH_OK: End Of Track 0, End Location {group, object}, no parameters, no track properties. */
const fetchOk = (group, object) => msg([0x18], [0, group, object, 0]);

test("standalone FETCH: request bytes, FETCH_OK, a fetch stream with deltas and End of Range", async () => {
  const { s, f } = await ready();
  const pending = s.fetch(["a"], "t", { start: { group: 1, object: 0 }, end: { group: 3, object: 0 } });
  await tick();
  const req = f.wt.requests[0];
  // FETCH 0x16: request 0, Standalone (1), namespace ("a"), name "t", start {1,0}, end {3,0}, no params.
  assert.deepEqual(req.sent, [0x16, 0, 12, 0, 1, 1, 1, 0x61, 1, 0x74, 1, 0, 3, 0, 0]);
  // The data stream may come before FETCH_OK.
  f.addUni([
    0x05, 0, // FETCH_HEADER, request 0
    0x3c, 1, 0, 5, 0x03, 0x10, 0x80, 0x0a, 1, 0x41, // flags G|O|P|props, subgroup 0: {1,0} prio 5, props {0x10: 10}, "A"
    0x00, 1, 0x42, // no fields: {1,1}, subgroup 0, prio 5, "B"
    0x80, 0x8c, 0, 5, // End of Non-Existent Range (2-byte vi64): group 1 + 0 + 1 = 2, object 5 (absolute in a new group)
    0x0f, 0, 7, 0, 1, 0x43, // G|O, subgroup field 7: group 2+0+1 = 3, object 0, "C"
    0x05, 2, 1, 0x44, // O delta 2, subgroup = prior (7): {3, 2}, "D"
  ]);
  req.reply.push(fetchOk(3, 3));
  req.reply.end();
  const fetch = await pending;
  assert.deepEqual(fetch.ok.end, { group: 3, object: 3 });
  assert.equal(fetch.ok.endOfTrack, false);
  const got = [];
  for await (const o of fetch) got.push([o.group, o.subgroup, o.id, o.priority, new TextDecoder().decode(o.payload)]);
  assert.deepEqual(got, [[1, 0, 0, 5, "A"], [1, 0, 1, 5, "B"], [3, 7, 0, 5, "C"], [3, 7, 2, 5, "D"]]);
  assert.deepEqual(fetch.ranges, [{ kind: "non-existent", group: 2, id: 5 }]);
  assert.equal(f.wt.closedWith, null);
});

test("join: SUBSCRIBE (Largest Object) + Relative Joining FETCH, fetched objects first", async () => {
  const { s, f } = await ready();
  const pending = s.join(["a"], "v");
  await tick();
  // SUBSCRIBE with LOCATION_FILTER (0x21) Largest Object.
  assert.deepEqual(f.wt.requests[0].sent, [0x03, 0, 10, 0, 1, 1, 0x61, 1, 0x76, 1, 0x21, 1, 2]);
  subscribeOk(f, 0, 4, 1);
  await tick();
  // FETCH: request 2, Relative Joining (2), Joining Request ID 0, Joining Start 0, no params.
  assert.deepEqual(f.wt.requests[1].sent, [0x16, 0, 5, 2, 2, 0, 0, 0]);
  // The live object {4,2} arrives first, then the fetched {4,0} and {4,1}.
  f.addUni([0x10, 9, 4, 128, 2, 1, 0x63]); // subgroup 0 of group 4: object 2, "c"
  f.addUni([0x05, 2, 0x1c, 4, 0, 9, 1, 0x61, 0x00, 1, 0x62]); // {4,0} prio 9 "a", {4,1} "b"
  f.wt.requests[1].reply.push(fetchOk(4, 2));
  const joined = await pending;
  assert.deepEqual(joined.largest, { group: 4, object: 1 });
  const ids = [];
  for await (const o of joined) {
    ids.push(`${o.group}.${o.id}${o.fetched ? "f" : ""}`);
    if (ids.length === 3) break;
  }
  assert.deepEqual(ids, ["4.0f", "4.1f", "4.2"]);
  assert.equal(f.wt.closedWith, null);
});

test("join: INVALID_RANGE to the Joining FETCH leaves the subscription alone", async () => {
  const { s, f } = await ready();
  const pending = s.join(["a"], "v");
  await tick();
  subscribeOk(f, 0, 0, 0);
  await tick();
  f.wt.requests[1].reply.push(msg([0x05], [0x11, 0, 0])); // REQUEST_ERROR INVALID_RANGE
  const joined = await pending;
  assert.equal(joined.fetch, null);
  f.addUni([0x10, 9, 1, 128, 0, 1, 0x7a]);
  const { value } = await joined.next();
  assert.deepEqual([value.group, value.id], [1, 0]);
});

test("fetch stream violations close the session with PROTOCOL_VIOLATION", async () => {
  for (const objects of [
    [0x00, 1, 0x41], // the first object refers to a prior group
    [0x0d, 0, 0, 5, 0, 1, 0x41], // G|O, subgroup mode 1 (prior subgroup) on the first object
    [0x80, 0x90], // flags 0x90 (>= 128, not an End of Range)
  ]) {
    const { s, f } = await ready();
    const pending = s.fetch(["a"], "t", { start: { group: 0, object: 0 }, end: { group: 1, object: 0 } });
    await tick();
    f.addUni([0x05, 0, ...objects]);
    f.wt.requests[0].reply.push(fetchOk(1, 0));
    const fetch = await pending;
    await assert.rejects(async () => { for await (const _ of fetch); });
    assert.equal(f.wt.closedWith?.closeCode, 3, `objects ${objects}`);
  }
});

test("FETCH answered with REQUEST_ERROR rejects; its late data stream is abandoned", async () => {
  const { s, f } = await ready();
  const pending = s.fetch(["a"], "t", { start: { group: 0, object: 0 }, end: { group: 1, object: 0 } });
  await tick();
  f.wt.requests[0].reply.push(msg([0x05], [0x11, 0, 0]));
  await assert.rejects(pending, (e) => e.code === 0x11);
  assert.equal(s.fetches.size, 0);
  f.addUni([0x05, 0, 0x1c, 0, 0, 1, 0, 1, 0x41]);
  await tick();
  assert.equal(f.wt.closedWith, null);
});

test("property: the mutable list first, then inside Immutable Properties (0xB)", () => {
  // Immutable Properties holding VIDEO_CONFIG (0x0D, 2 bytes), then TIMESTAMP (delta 3: 0x10)
  // = 1000 (2-byte vi64 0x83E8).
  const inner = [0x0d, 2, 0xaa, 0xbb, 0x03, 0x83, 0xe8];
  const props = [{ type: 0x09, value: new Uint8Array([0x80]) }, { type: 0x0b, value: new Uint8Array(inner) }];
  assert.deepEqual([...property(props, 0x09)], [0x80]);
  assert.deepEqual([...property(props, 0x0d)], [0xaa, 0xbb]);
  assert.equal(property(props, 0x10), 1000);
  assert.equal(property(props, 0x0f), undefined);
  assert.equal(property([{ type: 0x0b, value: new Uint8Array([0x0d, 9]) }], 0x0d), undefined); // malformed
});
