// moq-d14.test.mjs: offline tests of moq.js's draft-14 wire handling (the version a WebTransport
// session that negotiated no protocol speaks, as in Firefox ESR), with a fake WebTransport whose
// `protocol` is empty (no browser, no relay, no dependencies):
//   node --test moq-relay/web/test/moq-d14.test.mjs
// Covers QUIC varints (RFC 9000 §16), CLIENT_SETUP / SERVER_SETUP on the one bidirectional
// control stream (draft-14 §3.3, §9.3: version 0xff00000E, MAX_REQUEST_ID, a version not
// offered), SUBSCRIBE / SUBSCRIBE_OK / SUBSCRIBE_ERROR / UNSUBSCRIBE / PUBLISH_DONE (§9.7-9.12)
// routed by Request ID, SUBSCRIBE_NAMESPACE with PUBLISH_NAMESPACE / PUBLISH_NAMESPACE_DONE
// answered and turned into events (§9.23-9.31), PUBLISH refused (§9.13, §9.15), MAX_REQUEST_ID
// and REQUESTS_BLOCKED (§9.5-9.6), FETCH / FETCH_OK / FETCH_CANCEL with draft-14 fetch objects
// (§9.16-9.19, §10.4.4), `join`, SUBGROUP_HEADER and OBJECT_DATAGRAM types (§10.3.1, §10.4.2),
// absolute Key-Value-Pair types and GOAWAY without a timeout.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Session, property } from "../moq.js";
import { pipe, text } from "./pipes.mjs";

/** A draft-14 control message whose type fits one byte: Type, Length (16), Body. */
const msg = (type, body) => [type, body.length >> 8, body.length & 0xff, ...body];
const tick = () => new Promise((r) => setTimeout(r, 20));

/**
 * A fake WebTransport that negotiated no protocol. `control.sent` collects what the client writes
 * on its control stream (the first bidirectional stream it opens), `control.reply` feeds it.
 */
function fakeSession() {
  const uni = pipe(), bidi = pipe(), dgrams = pipe();
  let closed;
  const wt = {
    protocol: undefined, ready: Promise.resolve(), closedWith: null, streams: [],
    closed: new Promise((r) => (closed = r)),
    close(info) { this.closedWith = info; closed(info); },
    incomingUnidirectionalStreams: uni.readable, incomingBidirectionalStreams: bidi.readable,
    datagrams: { readable: dgrams.readable },
    async createUnidirectionalStream() { throw new Error("draft-14 opens no unidirectional stream"); },
    async createBidirectionalStream() {
      const sent = [];
      const reply = pipe();
      const s = { sent, reply, writable: new WritableStream({ write: (c) => sent.push(...c) }), readable: reply.readable };
      this.streams.push(s);
      return s;
    },
  };
  const addUni = (bytes, fin = true) => {
    const p = pipe();
    const s = { cancelled: null };
    const readable = new ReadableStream({
      start: (c) => { c.enqueue(new Uint8Array(bytes)); if (fin) c.close(); },
      cancel: (reason) => { s.cancelled = reason; },
    });
    p.readable = readable;
    uni.push(readable);
    return s;
  };
  return { wt, dgrams, addUni, bidi };
}

/** SERVER_SETUP selecting draft-14 with MAX_REQUEST_ID `max` and MOQT_IMPLEMENTATION "r". */
const serverSetup = (max = 60) => msg(0x21, [0xc0, 0, 0, 0, 0xff, 0, 0, 0x0e, 2, 0x02, max, 0x05, 1, 0x72]);

/** A session whose draft-14 SETUP exchange is done; `c` is its control stream. */
async function ready(setup = serverSetup()) {
  const f = fakeSession();
  const s = new Session(f.wt);
  const started = s.start();
  await tick();
  const c = f.wt.streams[0];
  c.reply.push(setup);
  await started;
  c.sent.length = 0; // CLIENT_SETUP is checked on its own
  return { s, f, c };
}

test("CLIENT_SETUP offers 0xff00000E and MAX_REQUEST_ID; SERVER_SETUP picks draft-14", async () => {
  const f = fakeSession();
  const s = new Session(f.wt);
  const started = s.start();
  await tick();
  const c = f.wt.streams[0];
  // CLIENT_SETUP 0x20: 1 version, 0xff00000E (8-byte QUIC varint), 1 parameter: MAX_REQUEST_ID
  // (0x02, even: an integer) = 1 + 2 * 64 = 129 (2-byte varint 0x4081).
  assert.deepEqual(c.sent, [0x20, 0, 13, 1, 0xc0, 0, 0, 0, 0xff, 0, 0, 0x0e, 1, 0x02, 0x40, 0x81]);
  c.reply.push(serverSetup(20));
  await started;
  assert.equal(s.version, 14);
  assert.equal(s.protocol, "moq-00");
  assert.equal(s.serverSetup.implementation, "r");
  assert.equal(s.peerMaxRequestId, 20);
});

test("SERVER_SETUP selecting a version not offered: VERSION_NEGOTIATION_FAILED", async () => {
  const f = fakeSession();
  const s = new Session(f.wt);
  const started = s.start();
  await tick();
  f.wt.streams[0].reply.push(msg(0x21, [0xc0, 0, 0, 0, 0xff, 0, 0, 0x0d, 0]));
  await assert.rejects(started);
  assert.equal(f.wt.closedWith?.closeCode, 0x15);
});

test("SUBSCRIBE, SUBSCRIBE_OK, subgroup objects with extensions, datagram, PUBLISH_DONE", async () => {
  const { s, f, c } = await ready();
  const pending = s.subscribe(["a", "b"], "t", { filter: "largest", priority: 7 });
  await tick();
  // SUBSCRIBE 0x3: request 0, namespace ("a", "b"), name "t", priority 7, group order 0,
  // forward 1, filter Largest Object (2), no parameters.
  assert.deepEqual(c.sent, [0x03, 0, 13, 0, 2, 1, 0x61, 1, 0x62, 1, 0x74, 7, 0, 1, 2, 0]);
  // SUBSCRIBE_OK: request 0, alias 9, expires 0, group order 1, content exists, largest {0x1234
  // (2-byte varint), 5}, 1 parameter: an unknown one (0x0C, even), ignored (§9.2).
  c.reply.push(msg(0x04, [0, 9, 0, 1, 1, 0x52, 0x34, 5, 1, 0x0c, 3]));
  const sub = await pending;
  assert.deepEqual(sub.largest, { group: 0x1234, object: 5 });
  assert.equal(sub.priority, 128);
  // Subgroup stream 0x15: extensions, explicit subgroup ID 4, priority 200; objects: id 5 with
  // extensions {2: 7, 5: "z"} (absolute types), "hi"; id 6, no extensions, End of Group.
  f.addUni([0x15, 9, 0x40, 0x10, 4, 200, 5, 5, 0x02, 0x07, 0x05, 1, 0x7a, 2, ...text("hi"), 0, 0, 0, 0x03]);
  // OBJECT_DATAGRAM 0x04: no Object ID (0), priority 3 (always present in draft-14), payload.
  f.dgrams.push([0x04, 9, 42, 3, ...text("dg")]);
  await tick();
  c.reply.push(msg(0x0b, [0, 0x02, 1, 0])); // PUBLISH_DONE: request 0, TRACK_ENDED, 1 stream, no reason
  const objects = [];
  for await (const o of sub) objects.push(o);
  const [a, b] = objects.filter((o) => !o.datagram);
  const d = objects.find((o) => o.datagram);
  assert.deepEqual([a.group, a.subgroup, a.id, a.priority, new TextDecoder().decode(a.payload)], [16, 4, 5, 200, "hi"]);
  assert.deepEqual(a.properties.map((p) => p.type), [2, 5]);
  assert.deepEqual([b.id, b.status], [6, 3]);
  assert.deepEqual([d.group, d.id, d.priority], [42, 0, 3]);
  assert.deepEqual(sub.done, { code: 2, streamCount: 1, reason: "" });
  assert.equal(s.routes.size, 0);
  assert.equal(f.wt.closedWith, null);
});

test("SUBSCRIBE_ERROR rejects with draft-14's code names; cancel sends UNSUBSCRIBE", async () => {
  const { s, c } = await ready();
  const pending = s.subscribe(["n"], "t");
  await tick();
  // No filter: AbsoluteStart (3) {0, 0}.
  assert.deepEqual(c.sent.slice(9), [128, 0, 1, 3, 0, 0, 0]);
  c.reply.push(msg(0x05, [0, 0x04, 4, ...text("gone")])); // SUBSCRIBE_ERROR TRACK_DOES_NOT_EXIST
  await assert.rejects(pending, (e) => e.code === 4 && e.codeName === "TRACK_DOES_NOT_EXIST" && e.reason === "gone");

  c.sent.length = 0;
  const second = s.subscribe(["n"], "t");
  await tick();
  c.reply.push(msg(0x04, [2, 1, 0, 2, 0, 0])); // request 2, alias 1, descending, no content
  const sub = await second;
  assert.equal(sub.largest, null);
  c.sent.length = 0;
  sub.cancel();
  assert.deepEqual(c.sent, [0x0a, 0, 1, 2]); // UNSUBSCRIBE request 2 (§9.11)
  c.reply.push(msg(0x0b, [2, 3, 0, 0])); // a PUBLISH_DONE that crossed it: dropped
  await tick();
  assert.equal(s.error, null);
});

test("SUBSCRIBE_NAMESPACE: PUBLISH_NAMESPACE answered and listed, _DONE removes, UNSUBSCRIBE_NAMESPACE", async () => {
  const { s, c } = await ready();
  await assert.rejects(s.subscribeNamespace([]), (e) => e.codeName === "EMPTY_PREFIX"); // §9.28: 1..32 fields
  const pending = s.subscribeNamespace(["x"]);
  await tick();
  assert.deepEqual(c.sent, [0x11, 0, 5, 0, 1, 1, 0x78, 0]);
  c.reply.push(msg(0x12, [0])); // SUBSCRIBE_NAMESPACE_OK
  const events = await pending;
  c.sent.length = 0;
  c.reply.push(msg(0x06, [1, 2, 1, 0x78, 1, 0x61, 0])); // PUBLISH_NAMESPACE request 1: x/a
  c.reply.push(msg(0x06, [3, 1, 1, 0x79, 0])); // request 3: y, outside the prefix
  c.reply.push(msg(0x06, [5, 2, 1, 0x78, 1, 0x62, 0])); // request 5: x/b
  c.reply.push(msg(0x09, [2, 1, 0x78, 1, 0x61])); // PUBLISH_NAMESPACE_DONE x/a
  const seen = [];
  for (let i = 0; i < 3; i++) {
    const { value } = await events.next();
    seen.push(`${value.type} ${value.namespace.join("/")} (${value.suffix.join("/")})`);
  }
  assert.deepEqual(seen, ["added x/a (a)", "added x/b (b)", "removed x/a (a)"]);
  // PUBLISH_NAMESPACE_OK 1, PUBLISH_NAMESPACE_ERROR 3 UNINTERESTED, PUBLISH_NAMESPACE_OK 5.
  const reason = text("no SUBSCRIBE_NAMESPACE covers it");
  assert.deepEqual(c.sent, [0x07, 0, 1, 1, 0x08, 0, 3 + reason.length, 3, 4, reason.length, ...reason, 0x07, 0, 1, 5]);
  c.sent.length = 0;
  events.cancel();
  assert.deepEqual(c.sent, [0x14, 0, 3, 1, 1, 0x78]); // UNSUBSCRIBE_NAMESPACE names the prefix (§9.31)
  assert.equal(s.routes.size, 0);

  // A new prefix gets the namespaces announced before (the server does not send them again).
  const again = s.subscribeNamespace(["x"]);
  await tick();
  c.reply.push(msg(0x12, [2]));
  const { value } = await (await again).next();
  assert.deepEqual(value.namespace, ["x", "b"]);
  assert.equal(s.error, null);
});

test("SUBSCRIBE_NAMESPACE_ERROR NAMESPACE_PREFIX_OVERLAP rejects", async () => {
  const { s, c } = await ready();
  const pending = s.subscribeNamespace(["x"]);
  await tick();
  c.reply.push(msg(0x13, [0, 0x05, 0]));
  await assert.rejects(pending, (e) => e.codeName === "NAMESPACE_PREFIX_OVERLAP");
});

test("PUBLISH is refused (PUBLISH_ERROR UNINTERESTED) and its data streams abandoned; MAX_REQUEST_ID grows", async () => {
  const { s, f, c } = await ready();
  // PUBLISH request 1: namespace x, track "t", alias 7, group order 1, no content, forward 1, no params.
  c.reply.push(msg(0x1d, [1, 1, 1, 0x78, 1, 0x74, 7, 1, 0, 1, 0]));
  await tick();
  const reason = text("this client accepts no requests");
  assert.deepEqual(c.sent, [0x1f, 0, 3 + reason.length, 1, 4, reason.length, ...reason]);
  const stream = f.addUni([0x10, 7, 0, 128, 0, 1, 0x41], false);
  await tick();
  assert.ok(stream.cancelled, "the refused PUBLISH's stream gets STOP_SENDING");
  // Server requests 3..65: at 65 the grant moves up (65 + 2 + 128 = 195, varint 0x40c3).
  c.sent.length = 0;
  for (let id = 3; id <= 65; id += 2) c.reply.push(msg(0x0d, [id >= 64 ? 0x40 : id, ...(id >= 64 ? [id] : []), 1, 1, 0x78, 1, 0x74, 128, 0, 1, 2, 0]));
  await tick();
  const grant = [0x15, 0, 2, 0x40, 0xc3];
  assert.ok(c.sent.some((_, i) => grant.every((x, j) => c.sent[i + j] === x)), "MAX_REQUEST_ID 195 sent");
  // A Request ID that goes back: INVALID_REQUEST_ID.
  c.reply.push(msg(0x0d, [3, 1, 1, 0x78, 1, 0x74, 128, 0, 1, 2, 0]));
  await tick();
  assert.equal(f.wt.closedWith?.closeCode, 0x4);
  assert.equal(s.error.code, 0x4);
});

test("our requests wait for MAX_REQUEST_ID, saying REQUESTS_BLOCKED once", async () => {
  const { s, c } = await ready(serverSetup(2)); // Request ID 0 only
  const first = s.subscribe(["n"], "a");
  await tick();
  c.reply.push(msg(0x04, [0, 1, 0, 1, 0, 0]));
  await first;
  c.sent.length = 0;
  const second = s.subscribe(["n"], "b");
  await tick();
  assert.deepEqual(c.sent, [0x1a, 0, 1, 2]); // REQUESTS_BLOCKED at 2
  c.reply.push(msg(0x15, [4])); // MAX_REQUEST_ID 4
  await tick();
  assert.equal(c.sent[4], 0x03); // the SUBSCRIBE went
  assert.equal(c.sent[7], 2); // with Request ID 2
  c.reply.push(msg(0x04, [2, 2, 0, 1, 0, 0]));
  await second;
  c.reply.push(msg(0x15, [4])); // not an increase: PROTOCOL_VIOLATION (§9.5)
  await tick();
  assert.equal(s.error?.code, 3);
});

test("join: SUBSCRIBE + Relative Joining FETCH, draft-14 fetch objects, FETCH_CANCEL after FETCH_OK", async () => {
  const { s, f, c } = await ready();
  const pending = s.join(["a"], "v", { priority: 1 });
  await tick();
  c.reply.push(msg(0x04, [0, 9, 0, 1, 1, 4, 1, 0])); // largest {4, 1}
  await tick();
  // FETCH 0x16: request 2, priority 1, group order ascending, Relative Joining (2), joining
  // request 0, joining start 0, no parameters.
  assert.deepEqual(c.sent.slice(-10), [0x16, 0, 7, 2, 1, 1, 2, 0, 0, 0]);
  // Fetch stream: {4, 0} subgroup 0, priority 9, one extension {0x0B: nested {0x10: 1000}}, "a";
  // {4, 1} "b"; then {4, 2} status End of Group (zero length).
  f.addUni([
    0x05, 2,
    4, 0, 0, 9, 5, 0x0b, 3, 0x10, 0x43, 0xe8, 1, 0x61, // (nested: 0x10 = 1000, absolute types)
    4, 0, 1, 9, 0, 1, 0x62,
    4, 0, 2, 9, 0, 0, 3,
  ]);
  c.reply.push(msg(0x18, [2, 1, 0, 4, 2, 0])); // FETCH_OK: ascending, not end of track, end {4, 2}
  const joined = await pending;
  const got = [];
  for await (const o of joined) {
    got.push(`${o.group}.${o.id}:${o.status}${o.fetched ? "f" : ""}`);
    if (got.length === 1) assert.equal(property(o.properties, 0x10), 1000);
    if (got.length === 3) break;
  }
  assert.deepEqual(got, ["4.0:0f", "4.1:0f", "4.2:3f"]);
  c.sent.length = 0;
  const second = s.join(["a"], "w");
  await tick();
  c.reply.push(msg(0x04, [4, 8, 0, 1, 1, 0, 0, 0]));
  await tick();
  c.reply.push(msg(0x19, [6, 0x06, 0])); // FETCH_ERROR NO_OBJECTS: the subscription alone
  const alone = await second;
  assert.equal(alone.fetch, null);
  assert.equal(s.error, null);
});

test("draft-14 data: padding, draft-19-only stream and datagram types close the session", async () => {
  for (const [kind, bytes] of [["uni", [0x30, 1, 0]], ["uni", [0x80, 0x13, 0x2b, 0x3e, 0x28]], ["dgram", [0x08, 1, 0, 0x41]]]) {
    const { f } = await ready();
    if (kind === "uni") f.addUni(bytes);
    else f.dgrams.push(bytes);
    await tick();
    assert.equal(f.wt.closedWith?.closeCode, 3, `${kind} ${bytes}`);
  }
});

test("GOAWAY carries a URI only; a second one is a violation", async () => {
  const { s, c } = await ready();
  c.reply.push(msg(0x10, [1, 0x75]));
  await tick();
  assert.deepEqual(s.goaway, { uri: "u", timeout: 0 });
  c.reply.push(msg(0x10, [0]));
  await tick();
  assert.equal(s.error?.code, 3);
});
