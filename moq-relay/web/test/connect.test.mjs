// connect.test.mjs: offline tests of moq.js's `connect`: WebTransport first, the WebSocket
// (QMux) after a head start, the first session to finish SETUP wins, and an error naming both
// transports when neither connects. The fake WebTransport and WebSocket are QmuxSessions over
// in-memory sockets, with a server that answers SETUP (draft-19 §3.3, §10.3).
//   node --test moq-relay/web/test/connect.test.mjs

import { test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "../moq.js";
import { QmuxSession } from "../qmux.js";
import { socketPair } from "./fake-socket.mjs";

const TIMEOUT = { timeout: 10000 };
const SERVER_SETUP = new Uint8Array([0xaf, 0x00, 0x00, 0x00]); // SETUP (vi64 0x2F00), no options

/** A MOQT server over QMux: reads the client's control stream, answers with its SETUP. */
function serve(socket, log) {
  const server = new QmuxSession(socket, { role: "server" });
  (async () => {
    const { value: control } = await server.incomingUnidirectionalStreams.getReader().read();
    const { value } = await control.getReader().read();
    log.push(["client setup", value[0], value[1]]);
    const w = (await server.createUnidirectionalStream()).getWriter();
    await w.write(SERVER_SETUP); // the control stream stays open
  })().catch(() => {});
  return server;
}

/** Installs fakes: `wt` "works" | "hangs" | "fails" | "absent"; `ws` "works" | "fails". */
function install({ wt, ws }) {
  const log = [];
  const opened = { wt: [], ws: [] };
  globalThis.WebTransport = wt === "absent" ? undefined : class {
    constructor(url) {
      opened.wt.push(url);
      if (wt === "fails") return { ready: Promise.reject(new Error("QUIC handshake failed")), closed: new Promise(() => {}), close() {} };
      const [a, b] = socketPair("qmux-01.moqt-19");
      if (wt === "works") serve(b, log);
      const s = new QmuxSession(a, { protocols: ["moqt-19"] });
      opened.wtSessions = [...(opened.wtSessions ?? []), s];
      return s;
    }
  };
  globalThis.WebSocket = class {
    constructor(url, protocols) {
      opened.ws.push({ url, protocols });
      const [a, b] = socketPair(ws === "works" ? protocols[0] : "");
      serve(b, log);
      return a;
    }
  };
  return { log, opened };
}

test("without WebTransport in the browser, the WebSocket goes at once (qmux-01.moqt-19)", TIMEOUT, async () => {
  const { opened, log } = install({ wt: "absent", ws: "works" });
  const t0 = Date.now();
  const s = await connect("https://relay.test:4443/", { webSocketDelayMs: 5000 });
  assert.ok(Date.now() - t0 < 2000);
  assert.equal(s.transport, "websocket");
  assert.equal(s.protocol, "moqt-19");
  assert.deepEqual(opened.ws, [{ url: "wss://relay.test:4443/", protocols: ["qmux-01.moqt-19"] }]);
  assert.deepEqual(log[0], ["client setup", 0xaf, 0x00]);
  s.close();
});

test("WebTransport that connects within its head start wins; no WebSocket is opened", TIMEOUT, async () => {
  const { opened } = install({ wt: "works", ws: "works" });
  const s = await connect("https://relay.test:4443/", { webSocketDelayMs: 2000 });
  assert.equal(s.transport, "webtransport");
  assert.equal(opened.ws.length, 0);
  s.close();
});

test("WebTransport that hangs: the WebSocket goes after the head start and wins; WebTransport is closed", TIMEOUT, async () => {
  const { opened } = install({ wt: "hangs", ws: "works" });
  const s = await connect("https://relay.test:4443/", { webSocketDelayMs: 50, webSocketUrl: "ws://relay.test:8080/" });
  assert.equal(s.transport, "websocket");
  assert.equal(s.url, "ws://relay.test:8080/");
  const lost = await opened.wtSessions[0].closed; // the losing WebTransport session is closed
  assert.match(lost.reason, /another transport connected first/);
  s.close();
});

test("WebTransport that fails: the WebSocket goes before the head start ends", TIMEOUT, async () => {
  install({ wt: "fails", ws: "works" });
  const t0 = Date.now();
  const s = await connect(["https://localhost:4443/", "https://127.0.0.1:4443/"], { webSocketDelayMs: 5000 });
  assert.ok(Date.now() - t0 < 2000);
  assert.equal(s.transport, "websocket");
  s.close();
});

test("both fail: one error names each transport's failure", TIMEOUT, async () => {
  install({ wt: "fails", ws: "fails" });
  await assert.rejects(connect("https://relay.test:4443/", { webSocketDelayMs: 10 }), (e) =>
    /could not connect: WebTransport \(https:\/\/relay.test:4443\/\): .*QUIC handshake failed.*; WebSocket \(wss:\/\/relay.test:4443\/\): .*subprotocol/.test(e.message));
});

test("no WebTransport in the browser and the WebSocket fails: the error says both", TIMEOUT, async () => {
  install({ wt: "absent", ws: "fails" });
  await assert.rejects(connect("https://relay.test:4443/"), (e) =>
    /^could not connect: WebTransport: this browser has none; WebSocket \(wss:\/\/relay.test:4443\/\): /.test(e.message));
});

test("transport: \"webtransport\" never opens a WebSocket; \"websocket\" never opens WebTransport", TIMEOUT, async () => {
  let { opened } = install({ wt: "fails", ws: "works" });
  await assert.rejects(connect("https://relay.test:4443/", { transport: "webtransport" }), /WebTransport/);
  assert.equal(opened.ws.length, 0);
  ({ opened } = install({ wt: "works", ws: "works" }));
  const s = await connect("https://relay.test:4443/", { transport: "websocket" });
  assert.equal(s.transport, "websocket");
  assert.equal(opened.wt.length, 0);
  s.close();
});
