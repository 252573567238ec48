// qmux.test.mjs: offline tests of qmux.js (QMux draft-ietf-quic-qmux-01 over a WebSocket) with a
// fake socket pair: no browser, no relay, no dependencies.
//   node --test moq-relay/web/test/qmux.test.mjs
// Two QmuxSessions (client and server roles) talk through the pair for streams, flow control,
// resets, limits, datagrams and closes; hand-written records check the wire: the first frame
// (QX_TRANSPORT_PARAMETERS, §4.2), record size (§5.2) and each violation's CONNECTION_CLOSE code.

import { test } from "node:test";
import assert from "node:assert/strict";
import { QmuxSession, StreamError, ERRORS, LIMITS, putVarint } from "../qmux.js";
import { FakeSocket, socketPair } from "./fake-socket.mjs";

const TIMEOUT = { timeout: 10000 };
const tick = () => new Promise((r) => setTimeout(r, 0));

function pair(serverLimits) {
  const [a, b] = socketPair();
  const client = new QmuxSession(a, { protocols: ["moqt-19"] });
  const server = new QmuxSession(b, { role: "server", ...(serverLimits && { limits: serverLimits }) });
  return { client, server, a, b };
}

async function readAll(readable) {
  const parts = [];
  for await (const c of readable) parts.push(c);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  parts.reduce((at, p) => (out.set(p, at), at + p.length), 0);
  return out;
}
const bytes = (n, seed = 1) => Uint8Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff);
const vi = (v) => putVarint([], v);
const TP = [0xff, 0x51, 0x53, 0x30, 0x0d, 0x0a, 0x0d, 0x0a]; // QX_TRANSPORT_PARAMETERS on the wire
const emptyParams = [...TP, 0];

/** The CONNECTION_CLOSE (0x1c) code in the last message `socket` sent, or null. */
function closeCode(socket) {
  const m = socket.sent.at(-1);
  if (!m || m[0] !== 0x1c) return null;
  const len = 1 << (m[1] >> 6);
  return m.subarray(1, 1 + len).reduce((v, b, i) => (i ? v * 256 + b : b & 0x3f), 0);
}

test("varints encode as RFC 9000 §A.1's examples", () => {
  assert.deepEqual(vi(151288809941952652n), [0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]);
  assert.deepEqual(vi(494878333), [0x9d, 0x7f, 0x3e, 0x7d]);
  assert.deepEqual(vi(15293), [0x7b, 0xbd]);
  assert.deepEqual(vi(37), [0x25]);
});

test("the first record is QX_TRANSPORT_PARAMETERS with our limits (§4.2)", TIMEOUT, async () => {
  const { a, client, server } = pair();
  await Promise.all([client.ready, server.ready]);
  assert.deepEqual([...a.sent[0].subarray(0, 8)], TP);
  assert.equal(client.protocol, "moqt-19");
  assert.equal(client.peer.bidi, 100);
  assert.equal(client.peer.recordSize, 16382);
  client.close();
});

test("bidirectional and unidirectional streams carry bytes both ways, FIN ends them", TIMEOUT, async () => {
  const { client, server } = pair();
  const { readable, writable } = await client.createBidirectionalStream();
  const w = writable.getWriter();
  await w.write(bytes(5000));
  await w.close();
  const { value: incoming } = await server.incomingBidirectionalStreams.getReader().read();
  assert.deepEqual(await readAll(incoming.readable), bytes(5000));
  const sw = incoming.writable.getWriter();
  await sw.write(new Uint8Array([1, 2, 3]));
  await sw.close();
  assert.deepEqual(await readAll(readable), new Uint8Array([1, 2, 3]));

  const uni = (await server.createUnidirectionalStream()).getWriter();
  await uni.write(bytes(100, 7));
  await uni.close();
  const { value: uniIn } = await client.incomingUnidirectionalStreams.getReader().read();
  assert.deepEqual(await readAll(uniIn), bytes(100, 7));
  assert.equal(client.streams.size + server.streams.size, 0, "finished streams are forgotten");
  client.close();
});

test("flow control: 6 MiB through 1 MiB stream windows and a 2 MiB connection window; records fit", TIMEOUT, async () => {
  const limits = { stream: 1 << 20, connection: 2 << 20, bidi: 4, uni: 4, datagram: 1200 };
  const { client, server, a, b } = pair(limits);
  const uni = (await client.createUnidirectionalStream()).getWriter();
  const data = bytes(6 << 20, 3);
  const sending = uni.write(data).then(() => uni.close());
  const { value } = await server.incomingUnidirectionalStreams.getReader().read();
  assert.deepEqual(await readAll(value), data);
  await sending;
  assert.ok(a.sent.every((m) => m.length <= 16382), "no record over max_record_size");
  assert.ok(b.sent.some((m) => m[0] === 0x10), "MAX_DATA sent");
  assert.ok(b.sent.some((m) => m[0] === 0x11), "MAX_STREAM_DATA sent");
  assert.ok(server.recv.total <= server.recv.max);
  client.close();
});

test("a reader that does not read holds the sender at the stream window", TIMEOUT, async () => {
  const { client, server } = pair({ stream: 64 << 10, connection: 1 << 20, bidi: 4, uni: 4, datagram: 1200 });
  const w = (await client.createUnidirectionalStream()).getWriter();
  let done = false;
  w.write(bytes(200 << 10)).then(() => (done = true));
  const { value } = await server.incomingUnidirectionalStreams.getReader().read();
  for (let i = 0; i < 20; i++) await tick();
  assert.equal(done, false);
  assert.equal(client.streams.get(2).sendOffset, 64 << 10, "exactly the window was sent");
  const r = value.getReader();
  let got = 0;
  while (got < 200 << 10) got += (await r.read()).value.length;
  assert.equal(got, 200 << 10);
  client.close();
});

test("RESET_STREAM and STOP_SENDING carry their codes (RFC 9000 §3.5)", TIMEOUT, async () => {
  const { client, server } = pair();
  const one = (await client.createUnidirectionalStream()).getWriter();
  await one.write(new Uint8Array([1]));
  await one.abort(new StreamError(7));
  const incoming = server.incomingUnidirectionalStreams.getReader();
  const r = (await incoming.read()).value.getReader();
  await assert.rejects(async () => { for (;;) if ((await r.read()).done) break; }, (e) => e.streamErrorCode === 7 && e.name === "WebTransportError");

  const two = await client.createBidirectionalStream();
  const w = two.writable.getWriter();
  await w.write(new Uint8Array([1]));
  const { value: s } = await server.incomingBidirectionalStreams.getReader().read();
  await s.readable.cancel(new StreamError(9));
  await assert.rejects(async () => { for (;;) await w.write(new Uint8Array(1000)); }, (e) => e.streamErrorCode === 9);
  client.close();
});

test("a peer's streams over MAX_STREAMS wait, and go on when one ends (RFC 9000 §4.6)", TIMEOUT, async () => {
  const { client, server } = pair({ stream: 1 << 16, connection: 1 << 20, bidi: 2, uni: 2, datagram: 1200 });
  const first = (await client.createUnidirectionalStream()).getWriter();
  await client.createUnidirectionalStream();
  let third = null;
  const opening = client.createUnidirectionalStream().then((s) => (third = s));
  for (let i = 0; i < 10; i++) await tick();
  assert.equal(third, null, "the third waits for credit");
  await first.close();
  const reader = server.incomingUnidirectionalStreams.getReader();
  await readAll((await reader.read()).value); // the first ends: MAX_STREAMS goes up
  await opening;
  assert.ok(third);
  client.close();
});

test("datagrams both ways; one over the peer's limit is dropped", TIMEOUT, async () => {
  const { client, server } = pair();
  await Promise.all([client.ready, server.ready]);
  const cw = client.datagrams.writable.getWriter();
  await cw.write(new Uint8Array(20000)); // over max_record_size: dropped
  await cw.write(new Uint8Array([4, 5, 6]));
  const { value } = await server.datagrams.readable.getReader().read();
  assert.deepEqual(value, new Uint8Array([4, 5, 6]));
  client.close();
});

test("close: APPLICATION_CLOSE's code and reason reach the peer's `closed`; streams fail", TIMEOUT, async () => {
  const { client, server } = pair();
  const { readable } = await client.createBidirectionalStream();
  server.close({ closeCode: 5, reason: "bye" });
  assert.deepEqual(await client.closed, { closeCode: 5, reason: "bye" });
  await assert.rejects(readable.getReader().read());
  await assert.rejects(client.createBidirectionalStream());
});

test("the socket dropping without a close frame rejects `closed`", TIMEOUT, async () => {
  const { client, b } = pair();
  await client.ready;
  b.close();
  await assert.rejects(client.closed, (e) => e.source === "session");
});

test("a subprotocol other than qmux-01.<ours> fails the session", TIMEOUT, async () => {
  const s = new QmuxSession(new FakeSocket("moqt-19"), { protocols: ["moqt-19"] });
  await assert.rejects(s.ready, /subprotocol/);
});

// Each bad record, sent to a fresh client after (or instead of) valid transport parameters, and
// the CONNECTION_CLOSE code the draft names.
const violations = [
  ["a frame before QX_TRANSPORT_PARAMETERS (§4.2)", [[0x10, 0x40, 0x64]], ERRORS.TRANSPORT_PARAMETER_ERROR],
  ["a second QX_TRANSPORT_PARAMETERS (§4.2)", [emptyParams, emptyParams], ERRORS.TRANSPORT_PARAMETER_ERROR],
  ["a forbidden transport parameter (§5.1)", [[...TP, 3, 0x0e, 1, 2]], ERRORS.TRANSPORT_PARAMETER_ERROR],
  ["max_record_size below 16382 (§5.2)", [[...TP, 11, ...vi(0x0571c59429cd0845n), 2, ...vi(1000)]], ERRORS.TRANSPORT_PARAMETER_ERROR],
  ["a prohibited frame, PING (§4)", [emptyParams, [0x01]], ERRORS.FRAME_ENCODING_ERROR],
  ["a prohibited frame, ACK (§4)", [emptyParams, [0x02, 0, 0, 0, 0]], ERRORS.FRAME_ENCODING_ERROR],
  ["an unknown frame type (RFC 9000 §12.4)", [emptyParams, [0x21]], ERRORS.FRAME_ENCODING_ERROR],
  ["a frame truncated by its record's end (§3.2)", [emptyParams, [0x0e, 3, 0, 5, 1]], ERRORS.FRAME_ENCODING_ERROR],
  ["a record over max_record_size (§5.2)", [emptyParams, [0x0b, 3, ...vi(16382), ...new Array(16382).fill(0)]], ERRORS.FRAME_ENCODING_ERROR],
  ["stream data out of order (§4.1)", [emptyParams, [0x0e, 3, 0, 1, 9], [0x0e, 3, 5, 1, 9]], ERRORS.PROTOCOL_VIOLATION],
  ["stream data over the window (RFC 9000 §4.1)", [emptyParams, [0x0e, 3, 0, 20, ...new Array(20).fill(1)]], ERRORS.FLOW_CONTROL_ERROR, { stream: 16 }],
  ["a stream over MAX_STREAMS (RFC 9000 §4.6)", [emptyParams, [0x0b, ...vi(4 * 256 + 3), 1, 0]], ERRORS.STREAM_LIMIT_ERROR],
  ["data on our own unidirectional stream (RFC 9000 §19.8)", [emptyParams, [0x0b, 2, 1, 0]], ERRORS.STREAM_STATE_ERROR],
  ["a reset below the data that arrived (RFC 9000 §4.5)", [emptyParams, [0x0e, 3, 0, 2, 1, 2], [0x04, 3, 0, 1]], ERRORS.FINAL_SIZE_ERROR],
  ["a datagram over max_datagram_frame_size (RFC 9221 §3)", [emptyParams, [0x30, ...new Array(200).fill(0)]], ERRORS.PROTOCOL_VIOLATION, { datagram: 100 }],
];
for (const [what, records, code, limits] of violations) {
  test(`closes with 0x${code.toString(16)}: ${what}`, TIMEOUT, async () => {
    const socket = new FakeSocket("qmux-01.moqt-19");
    const s = new QmuxSession(socket, { protocols: ["moqt-19"], limits: { ...LIMITS, ...limits } });
    for (const r of records) socket.inject(r);
    await assert.rejects(s.closed, (e) => e.code === code);
    assert.equal(closeCode(socket), code, `CONNECTION_CLOSE 0x${code.toString(16)} sent`);
    assert.equal(socket.readyState, 3, "the socket is closed");
  });
}

test("a text message closes with PROTOCOL_VIOLATION", TIMEOUT, async () => {
  const socket = new FakeSocket("qmux-01.moqt-19");
  const s = new QmuxSession(socket, { protocols: ["moqt-19"] });
  socket.dispatchEvent(Object.assign(new Event("message"), { data: "hello" }));
  await assert.rejects(s.closed, (e) => e.code === ERRORS.PROTOCOL_VIOLATION);
});

test("QX_PING is answered with its sequence number (§4.3)", TIMEOUT, async () => {
  const socket = new FakeSocket("qmux-01.moqt-19");
  const s = new QmuxSession(socket, { protocols: ["moqt-19"] });
  socket.inject([...emptyParams, ...vi(0x348c67529ef8c7bdn), 42]);
  await s.ready;
  assert.deepEqual([...socket.sent.at(-1)], [...vi(0x348c67529ef8c7ben), 42]);
  s.close();
});
