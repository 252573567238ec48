// qmux-interop.test.mjs: qmux.js against an implementation we did not write, moq-dev's
// @moq/qmux (the QMux that @moq/net uses; installed with the browser harness by
// scripts/install-browser.sh in ${MOQ_BROWSER:-~/.cache/moq-browser}), over the in-memory socket
// pair: ours as the client, theirs as the server (Session.accept). Skipped when it is missing.
//   node --test moq-relay/web/test/qmux-interop.test.mjs

import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { QmuxSession, StreamError } from "../qmux.js";
import { socketPair } from "./fake-socket.mjs";

const dir = join(process.env.MOQ_BROWSER || join(homedir(), ".cache", "moq-browser"), "node_modules", "@moq", "qmux");
const skip = existsSync(join(dir, "index.js")) ? false : `@moq/qmux is not installed in ${dir} (scripts/install-browser.sh)`;
// @moq/qmux uses Promise.withResolvers (Node 22); Node 20 lacks it.
Promise.withResolvers ??= () => {
  let resolve, reject;
  const promise = new Promise((a, b) => ((resolve = a), (reject = b)));
  return { promise, resolve, reject };
};

async function pair() {
  const { default: Theirs } = await import(join(dir, "index.js"));
  const [a, b] = socketPair("qmux-01.moqt-19");
  const theirs = Theirs.accept(b, { protocol: "qmux-01.moqt-19" });
  const ours = new QmuxSession(a, { protocols: ["moqt-19"] });
  await Promise.all([ours.ready, theirs.ready]);
  return { ours, theirs };
}
const count = async (readable) => { let n = 0; for await (const c of readable) n += c.length; return n; };

test("ours <-> @moq/qmux: 3 MiB on a bidi stream past both windows, an answer, 3 x 1 MiB back on uni streams", { skip, timeout: 20000 }, async () => {
  const { ours, theirs } = await pair();
  assert.equal(ours.protocol, "moqt-19");
  const data = Uint8Array.from({ length: 3 << 20 }, (_, i) => (i * 7) & 0xff);
  const { readable, writable } = await ours.createBidirectionalStream();
  const w = writable.getWriter();
  const sending = w.write(data).then(() => w.close());
  const { value: inc } = await theirs.incomingBidirectionalStreams.getReader().read();
  let n = 0;
  for await (const c of inc.readable) {
    assert.deepEqual(c, data.subarray(n, n + c.length));
    n += c.length;
  }
  await sending;
  assert.equal(n, data.length);
  const tw = inc.writable.getWriter();
  await tw.write(new Uint8Array(100).fill(7));
  await tw.close();
  assert.equal(await count(readable), 100);
  for (let k = 0; k < 3; k++) {
    const u = (await theirs.createUnidirectionalStream()).getWriter();
    await u.write(new Uint8Array(1 << 20).fill(k));
    await u.close();
  }
  const incoming = ours.incomingUnidirectionalStreams.getReader();
  for (let k = 0; k < 3; k++) assert.equal(await count((await incoming.read()).value), 1 << 20);
  ours.close();
});

test("ours <-> @moq/qmux: reset codes, a datagram, APPLICATION_CLOSE's code and reason", { skip, timeout: 20000 }, async () => {
  const { ours, theirs } = await pair();
  const r = (await ours.createUnidirectionalStream()).getWriter();
  await r.write(new Uint8Array([1]));
  await r.abort(new StreamError(42));
  const tr = (await theirs.incomingUnidirectionalStreams.getReader().read()).value.getReader();
  await assert.rejects(async () => { for (;;) if ((await tr.read()).done) break; }, (e) => e.streamErrorCode === 42);
  const u = (await theirs.createUnidirectionalStream()).getWriter();
  await u.write(new Uint8Array([1]));
  await u.abort(new StreamError(43));
  const ur = (await ours.incomingUnidirectionalStreams.getReader().read()).value.getReader();
  await assert.rejects(async () => { for (;;) if ((await ur.read()).done) break; }, (e) => e.streamErrorCode === 43);
  await ours.datagrams.writable.getWriter().write(new Uint8Array([9, 9]));
  assert.deepEqual([...(await theirs.datagrams.readable.getReader().read()).value], [9, 9]);
  ours.close({ closeCode: 7, reason: "bye" });
  assert.deepEqual(await theirs.closed, { closeCode: 7, reason: "bye" });
});
