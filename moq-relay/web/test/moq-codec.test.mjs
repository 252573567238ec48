// moq-codec.test.mjs: offline tests of moq.js's draft-19 wire handling, with a fake
// WebTransport (no browser, no relay, no dependencies):
//   node --test moq-relay/web/test/moq-codec.test.mjs
// Covers vi64 (§1.4.1: non-minimal and 8/9-byte forms), SETUP with unknown options (§10.3),
// SUBSCRIBE / SUBSCRIBE_OK / PUBLISH_DONE (§10.7, §10.8, §10.11), SUBGROUP_HEADER objects with
// properties and status (§11.4.2), OBJECT_DATAGRAM (§11.3.1), SUBSCRIBE_NAMESPACE (§10.18),
// REQUEST_ERROR (§10.6) and the PROTOCOL_VIOLATION closes.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Session } from "../moq.js";

globalThis.WebTransportError ??= class extends Error {
  constructor(message, options = {}) { super(message); Object.assign(this, options); }
};

/** A ReadableStream we push into: byte arrays, or (for the stream of streams) anything. */
function pipe() {
  let c;
  const readable = new ReadableStream({ start: (ctl) => (c = ctl) });
  return { readable, push: (x) => c.enqueue(Array.isArray(x) ? new Uint8Array(x) : x), end: () => c.close() };
}
const text = (s) => [...new TextEncoder().encode(s)];
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
