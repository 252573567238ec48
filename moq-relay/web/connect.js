// connect.js: opens the relay page's MOQT session (moq.js) over WebTransport or, where that is
// missing or slow, over a WebSocket with QMux (qmux.js): WebTransport first and, after a head
// start (`webSocketDelayMs`, 300 ms), a WebSocket too (subprotocol `qmux-01.moqt-19`); the first
// to finish SETUP is the session (`session.transport` says which, `session.url` where), the
// others are closed. WebTransport offers `protocols: ["moqt-19"]`; a browser without that option
// (Firefox ESR) negotiates none, and moq.js then speaks draft-14 on the session, whose version
// CLIENT_SETUP negotiates (`session.version`).

import { Session, VERSION } from "./moq.js";
import { connectWebSocket } from "./qmux.js";

/**
 * Connects to a MOQT server and exchanges SETUP, over WebTransport or over a WebSocket.
 * `url`: the WebTransport URL (https://), or a list of them tried at once (the first to connect
 * wins). `fingerprint` (hex SHA-256 of the certificate) pins a self-signed certificate for
 * WebTransport. `transport`: "auto" (default), "webtransport" or "websocket". In "auto",
 * WebTransport starts at once and the WebSocket (`webSocketUrl`, default the first URL with
 * wss:// for https://) after `webSocketDelayMs`, or as soon as every WebTransport attempt has
 * failed, or at once where the browser has no WebTransport. Resolves to the first Session
 * whose server SETUP arrives within `timeoutMs`; the others are closed. Rejects with an Error
 * naming each transport's failure when none connects.
 */
export async function connect(url, { fingerprint, timeoutMs = 10000, transport = "auto", webSocketUrl, webSocketDelayMs = 300 } = {}) {
  const urls = Array.isArray(url) ? url : [url];
  const tries = []; // { kind, url, session, error }
  const wt = transport !== "websocket" && typeof WebTransport !== "undefined";
  const ws = transport !== "webtransport";
  if (!wt && !ws) throw new Error("no transport: this browser has no WebTransport and the WebSocket fallback is off");
  return new Promise((resolve, reject) => {
    let won = null;
    let wsTimer = null;
    const failed = () => {
      if (won || tries.some((t) => !t.error) || (ws && !tries.some((t) => t.kind === "WebSocket"))) return;
      const missing = transport !== "websocket" && !wt ? ["WebTransport: this browser has none"] : [];
      reject(new Error(`could not connect: ${[...missing, ...tries.map((t) => `${t.kind} (${t.url}): ${t.error}`)].join("; ")}`));
    };
    const attempt = (kind, target, open) => {
      const t = { kind, url: target, session: null, error: null };
      tries.push(t);
      establish(() => (t.session = open()), timeoutMs).then((session) => {
        session.url = target;
        if (won) return session.close(0, "another transport connected first");
        won = t;
        clearTimeout(wsTimer);
        for (const other of tries) if (other !== t) other.session?.close(0, "another transport connected first"); // pending ones too
        resolve(session);
      }, (e) => {
        t.error = String(e?.reason || e?.message || e);
        // Every WebTransport attempt failed before the head start ended: the WebSocket goes now.
        if (kind === "WebTransport" && ws && !tries.some((x) => x.kind === "WebSocket") && tries.every((x) => x.error)) startWs();
        failed();
      });
    };
    const startWs = () => {
      clearTimeout(wsTimer);
      const target = webSocketUrl ?? urls[0].replace(/^http/, "ws");
      attempt("WebSocket", target, () => new Session(connectWebSocket(target, [VERSION]), "websocket"));
    };
    if (wt) for (const u of urls) attempt("WebTransport", u, () => new Session(new WebTransport(u, webTransportOptions(fingerprint)), "webtransport"));
    if (ws) wsTimer = wt ? setTimeout(() => won || startWs(), webSocketDelayMs) : startWs();
  });
}

function webTransportOptions(fingerprint) {
  const options = { protocols: [VERSION] };
  if (fingerprint) {
    const value = new Uint8Array(fingerprint.replace(/[^0-9a-f]/gi, "").match(/../g).map((h) => parseInt(h, 16)));
    options.serverCertificateHashes = [{ algorithm: "sha-256", value }];
  }
  return options;
}

/** Opens a Session with `open` and waits for the server's SETUP, `timeoutMs` at most. */
async function establish(open, timeoutMs) {
  const session = open();
  const timer = setTimeout(() => session.fail(0x11, "no SETUP from the server in time"), timeoutMs);
  try { await session.start(); return session; }
  catch (e) { session.fail(0, String(e?.message ?? e)); throw session.error; }
  finally { clearTimeout(timer); }
}
