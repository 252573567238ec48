// moq.js: a minimal Media over QUIC Transport subscriber, draft-ietf-moq-transport-19 only,
// over the browser's WebTransport API, or over a WebSocket (QMux, qmux.js) where WebTransport is
// missing or blocked. A plain ES module: no dependencies beyond qmux.js, no build step.
//
// Implements (draft-19 sections): §1.4.1 vi64 integers; §1.4.3 Key-Value-Pairs (Setup Options
// and Properties; unknown types skipped by parity); §2.4.1 Track Namespace; §3.1.4 WebTransport,
// version by WT-Available-Protocols ("moqt-19"); §3.3 SETUP on a pair of unidirectional control
// streams; §3.3.2-3.3.3 request streams (FIN; cancel = RESET_STREAM + STOP_SENDING); §10 control
// framing (Type vi64, Length 16, Body); §10.2 Message Parameters (count-prefixed, each type has
// its own value shape, so an unknown one cannot be skipped: it closes the session); §10.3 SETUP;
// §10.4 GOAWAY (recorded only); §10.5 REQUEST_OK; §10.6 REQUEST_ERROR; §10.7 SUBSCRIBE; §10.8
// SUBSCRIBE_OK; §10.11 PUBLISH_DONE; §10.16-10.18 NAMESPACE, NAMESPACE_DONE,
// SUBSCRIBE_NAMESPACE; §10.12-10.13 FETCH (standalone, relative and absolute joining) and
// FETCH_OK; §11.2 objects (status, properties; Immutable Properties §12.7 searched by
// `property`); §11.3.1 OBJECT_DATAGRAM; §11.4.2 SUBGROUP_HEADER; §11.4.4 FETCH_HEADER and fetch
// objects; §11.5 padding. `join` = SUBSCRIBE (Largest Object) + relative Joining FETCH (§5.1.5).
// Not here: publishing, TRACK_STATUS, SUBSCRIBE_TRACKS, REQUEST_UPDATE, authorization tokens;
// requests the server opens are refused (NOT_SUPPORTED).
//
// `connect` tries WebTransport first and, after a head start (`webSocketDelayMs`, 300 ms), a
// WebSocket too (subprotocol `qmux-01.moqt-19`); the first to finish SETUP is the session
// (`session.transport` says which), the other is closed.
//
//   const s = await connect("https://localhost:4443/", { fingerprint: "ab12..." });
//   for await (const e of await s.subscribeNamespace([])) console.log(e.type, e.namespace);
//   for await (const o of await s.subscribe(["clock"], "seconds")) console.log(o.group, o.id);
//   for await (const o of await s.join(["live", "demo"], "catalog")) console.log(o.group, o.id);

import { connectWebSocket, StreamError } from "./qmux.js";

export const VERSION = "moqt-19";
const IMPLEMENTATION = "moq-js/0.1 (moq-relay/web)";
const PROTOCOL_VIOLATION = 0x3; // session close codes (§3.5)
const DUPLICATE_TRACK_ALIAS = 0x5;
const CANCELLED = 0x1; // RESET_STREAM / STOP_SENDING code (§3.3.4)
const REQUEST_ERRORS = {
  0x0: "INTERNAL_ERROR", 0x1: "UNAUTHORIZED", 0x2: "TIMEOUT", 0x3: "NOT_SUPPORTED",
  0x4: "MALFORMED_AUTH_TOKEN", 0x5: "EXPIRED_AUTH_TOKEN", 0x6: "GOING_AWAY", 0x9: "EXCESSIVE_LOAD",
  0x10: "DOES_NOT_EXIST", 0x11: "INVALID_RANGE", 0x12: "MALFORMED_TRACK", 0x20: "UNINTERESTED",
  0x30: "PREFIX_OVERLAP", 0x31: "NAMESPACE_TOO_LARGE", 0x33: "UNSUPPORTED_EXTENSION",
  0x34: "REDIRECT", 0x35: "CONFLICTING_FILTERS", 0x36: "INVALID_FILTER",
};
const MSG = {
  SETUP: 0x2f00, GOAWAY: 0x10, SUBSCRIBE: 0x3, SUBSCRIBE_OK: 0x4, PUBLISH_DONE: 0xb, REQUEST_OK: 0x7,
  REQUEST_ERROR: 0x5, NAMESPACE: 0x8, NAMESPACE_DONE: 0xe, SUBSCRIBE_NAMESPACE: 0x50, FETCH: 0x16,
  FETCH_OK: 0x18,
};
const FETCH_HEADER = 0x05; // unidirectional stream type (§11.4.4)
const INVALID_RANGE = 0x11;
const FIRST_MESSAGES = new Set([0x3, 0x1d, 0x16, 0xd, 0x6, 0x50, 0x51]); // may open a request (§3.3)
// The value shape of each draft-19 Message Parameter (§10.2.x).
const PARAM_SHAPES = {
  0x02: "vi", 0x03: "len", 0x04: "vi", 0x06: "vi", 0x08: "vi", 0x09: "loc", 0x0a: "vi", 0x10: "u8",
  0x20: "u8", 0x21: "len", 0x22: "u8", 0x25: "len", 0x26: "len", 0x27: "len", 0x28: "len",
  0x29: "len", 0x32: "vi", 0x34: "ns",
};

/** A failed request (REQUEST_ERROR: code, reason, retryInterval) or the end of the session. */
export class MoqError extends Error {
  constructor(code, reason, extra = {}) {
    const what = extra.session ? "session closed" : REQUEST_ERRORS[code] ?? "error";
    super(`${what} (${code})${reason ? `: ${reason}` : ""}`);
    Object.assign(this, { code, reason, ...extra });
  }
}
/** Bytes from the server that break the draft: the session is closed with PROTOCOL_VIOLATION. */
class ProtocolError extends Error {}

// ---- encoding --------------------------------------------------------------------------------

const utf8 = new TextDecoder();
const enc = new TextEncoder();

/** Appends the vi64 (§1.4.1) of `n` (Number or BigInt below 2^64): leading 1-bits give the length. */
function putVi(out, n) {
  let v = BigInt(n);
  let len = 1;
  while (len < 9 && v >= 1n << BigInt(7 * len)) len++;
  const bytes = new Array(len).fill(0);
  for (let i = len - 1; i >= (len === 9 ? 1 : 0); i--, v >>= 8n) bytes[i] = Number(v & 0xffn);
  bytes[0] |= len === 9 ? 0xff : (0xff00 >> (len - 1)) & 0xff;
  out.push(...bytes);
}
const putBytes = (out, bytes) => { putVi(out, bytes.length); out.push(...bytes); };
function putNamespace(out, fields) {
  putVi(out, fields.length);
  for (const f of fields) putBytes(out, enc.encode(f));
}
/** One control message (§10): Type (vi64), Length (16), Body. */
function frame(type, body) {
  const out = [];
  putVi(out, type);
  out.push(body.length >> 8, body.length & 0xff, ...body);
  return new Uint8Array(out);
}
/** A stream cancel reason carrying `code` (the spec's constructor, else Chromium's dictionary). */
function streamError(code) {
  if (typeof WebTransportError === "undefined") return new StreamError(code, "cancel"); // qmux.js reads its code
  try { return new WebTransportError("cancel", { streamErrorCode: code }); }
  catch { return new WebTransportError({ message: "cancel", streamErrorCode: code }); }
}

// ---- decoding --------------------------------------------------------------------------------

const viLen = (b) => { let n = 1; while (n < 9 && b & (0x80 >> (n - 1))) n++; return n; };
/** A Number while exact, else a BigInt. */
const norm = (v) => (typeof v === "bigint" && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v);
/** a + b + c exactly; past 2^64-1 is a protocol violation (§1.4.3, §11.4.2). */
function add(a, b, c = 0) {
  const r = BigInt(a) + BigInt(b) + BigInt(c);
  if (r >= 1n << 64n) throw new ProtocolError("integer overflows 2^64-1");
  return norm(r);
}

/** A cursor over bytes that are all present: a message body, a datagram, a properties block. */
class Buf {
  constructor(bytes) { this.b = bytes; this.p = 0; }
  left() { return this.b.length - this.p; }
  bytes(n) {
    if (typeof n !== "number" || n > this.left()) throw new ProtocolError("fields overrun their length");
    return this.b.subarray(this.p, (this.p += n));
  }
  u8() { return this.bytes(1)[0]; }
  vi() {
    const b = this.bytes(viLen(this.b[this.p] ?? 0));
    if (b.length >= 8) return norm(b.subarray(1).reduce((v, x) => (v << 8n) | BigInt(x), 0n)); // > 2^53
    let v = b[0] & (0xff >> b.length);
    for (let i = 1; i < b.length; i++) v = v * 256 + b[i];
    return norm(v);
  }
  lenBytes(max = 65535) {
    const n = this.vi();
    if (n > max) throw new ProtocolError(`length ${n} over ${max}`);
    return this.bytes(n);
  }
  text(max) { return utf8.decode(this.lenBytes(max)); }
  /** Track Namespace (§2.4.1): 0..32 non-empty fields, 4096 bytes at most; fields as text. */
  namespace() {
    const n = this.vi();
    if (n > 32) throw new ProtocolError(`namespace of ${n} fields`);
    const fields = [];
    for (let i = 0, total = 0; i < n; i++) {
      const f = this.lenBytes(4096);
      if (!f.length || (total += f.length) > 4096) throw new ProtocolError("bad namespace field");
      fields.push(utf8.decode(f));
    }
    return fields;
  }
  /** Key-Value-Pairs (§1.4.3) to the end: delta types; odd = Length + bytes, even = one vi64. */
  kvps() {
    const out = [];
    for (let type = 0; this.left(); ) {
      type = add(type, this.vi());
      out.push({ type, value: BigInt(type) & 1n ? this.lenBytes() : this.vi() });
    }
    return out;
  }
  /** Message Parameters (§10.2): count, then Type Delta + the value shape its type defines. */
  params() {
    const out = {};
    for (let n = this.vi(), type = 0; n > 0; n--) {
      type = add(type, this.vi());
      const shape = PARAM_SHAPES[type];
      if (!shape) throw new ProtocolError(`unknown message parameter 0x${type.toString(16)}`);
      out[type] = shape === "u8" ? this.u8() : shape === "vi" ? this.vi() : shape === "ns" ? this.namespace()
        : shape === "loc" ? { group: this.vi(), object: this.vi() } : this.lenBytes();
    }
    return out;
  }
  end(what) { if (this.left()) throw new ProtocolError(`${what}: ${this.left()} bytes after the last field`); }
}

/** Reads a WebTransport receive stream, waiting for as many bytes as asked. */
class StreamReader {
  constructor(readable) { this.r = readable.getReader(); this.buf = new Uint8Array(0); this.p = 0; }
  /** Waits until `n` bytes are buffered; false if the stream ends (FIN) first. */
  async fill(n) {
    while (this.buf.length - this.p < n) {
      const { value, done } = await this.r.read();
      if (done) return false;
      const next = new Uint8Array(this.buf.length - this.p + value.length);
      next.set(this.buf.subarray(this.p));
      next.set(value, this.buf.length - this.p);
      [this.buf, this.p] = [next, 0];
    }
    return true;
  }
  /** True at a clean end: FIN with nothing left. */
  async done() { return !(await this.fill(1)); }
  async bytes(n) {
    if (!(await this.fill(n))) throw new ProtocolError("stream ended inside a message or object");
    return this.buf.slice(this.p, (this.p += n));
  }
  async vi() { return (await this.fill(1)) ? new Buf(await this.bytes(viLen(this.buf[this.p]))).vi() : this.bytes(1); }
  async u8() { return (await this.bytes(1))[0]; }
  async u16() { const b = await this.bytes(2); return (b[0] << 8) | b[1]; }
  /** One control message (§10): its type and a Buf over exactly its body. */
  async message() {
    const type = await this.vi();
    return { type, body: new Buf(await this.bytes(await this.u16())) };
  }
  cancel(code) { this.r.cancel(streamError(code)).catch(() => {}); }
}

/** An async iterable fed by push / end / fail; `onReturn` runs when the consumer stops early. */
class Queue {
  constructor(onReturn) { Object.assign(this, { items: [], waiters: [], result: null, onReturn }); }
  push(v) { if (!this.result) this.waiters.length ? this.waiters.shift()[0]({ value: v }) : this.items.push(v); }
  end() { this.settle({ done: true }); }
  fail(err) { this.settle({ err }); }
  settle(r) {
    if (this.result) return;
    this.result = r;
    for (const [resolve, reject] of this.waiters.splice(0)) r.err ? reject(r.err) : resolve(r);
  }
  async next() {
    if (this.items.length) return { value: this.items.shift() };
    if (this.result?.err) throw this.result.err;
    return this.result ?? new Promise((...w) => this.waiters.push(w));
  }
  async return() {
    this.items = [];
    if (!this.result) this.onReturn?.();
    this.end();
    return { done: true };
  }
  [Symbol.asyncIterator]() { return this; }
}

// ---- the session ------------------------------------------------------------------------------

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

export class Session {
  /** `wt`: a WebTransport, or a QmuxSession (qmux.js); `transport` names which ("webtransport", "websocket"). */
  constructor(wt, transport = "webtransport") {
    Object.assign(this, { wt, transport, protocol: "", error: null, nextRequestId: 0 }); // client IDs even (§10.1)
    this.serverSetup = null; // { implementation, options: [{type, value}] }
    this.goaway = null; // { uri, timeout } once the server sent GOAWAY; see also `ongoaway`
    this.aliases = new Map(); // Track Alias -> Set of subscriptions
    this.aliasWaiters = new Map(); // Track Alias -> [resolve]: data that came before SUBSCRIBE_OK
    this.fetches = new Map(); // Request ID -> Fetch, until its data stream ends
    this.live = new Set(); // queues to fail when the session ends
    this.setupReceived = new Promise((resolve, reject) => (this.setupDone = { resolve, reject }));
    this.setupReceived.catch(() => {});
    /** Resolves when the session has ended; `error` then says why. */
    this.closed = wt.closed.then(
      (info) => this.fail(info?.closeCode ?? 0, info?.reason ?? "", true),
      (e) => this.fail(0, String(e?.reason || e?.message || e), true), // (qmux.js: reason alone)
    );
  }

  async start() {
    await this.wt.ready;
    this.protocol = this.wt.protocol ?? "";
    if (this.protocol && this.protocol !== VERSION) throw new Error(`server chose ${this.protocol}`);
    const options = []; // Setup Options: MOQT_IMPLEMENTATION (0x07: odd, so Length + bytes)
    putVi(options, 0x07);
    putBytes(options, enc.encode(IMPLEMENTATION));
    const control = (await this.wt.createUnidirectionalStream()).getWriter();
    await control.write(frame(MSG.SETUP, options)); // never closed: that would be a violation
    this.acceptUni(); this.acceptBidi(); this.acceptDatagrams();
    await this.setupReceived;
    this.protocol ||= VERSION;
  }

  /** Closes the session with `code` (0 = NO_ERROR). */
  close(code = 0, reason = "") { this.fail(code, reason); }

  /** Ends the session once: closes the transport (unless the peer did) and fails every waiter. */
  fail(code, reason, remote = false) {
    if (this.error) return;
    this.error = new MoqError(code, reason, { session: true, remote });
    if (!remote) try { this.wt.close({ closeCode: code, reason: reason.slice(0, 1000) }); } catch {}
    this.setupDone.reject(this.error);
    for (const q of this.live) q.fail(this.error);
    for (const waiters of this.aliasWaiters.values()) waiters.forEach((w) => w());
  }

  /** Runs `f`; a ProtocolError closes the session with PROTOCOL_VIOLATION; errors are rethrown. */
  async guard(f) {
    try { return await f(); } catch (e) {
      if (e instanceof ProtocolError) this.fail(PROTOCOL_VIOLATION, e.message);
      throw e?.name === "WebTransportError" ? (this.error ?? new MoqError(e.streamErrorCode ?? 0, "stream reset")) : e;
    }
  }

  /** Reads every item of a ReadableStream of streams or datagrams with `f`, until the session ends. */
  async each(readable, f) {
    const reader = readable.getReader();
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }));
      if (done) return;
      this.guard(() => f(value)).catch(() => {});
    }
  }

  acceptUni() { return this.each(this.wt.incomingUnidirectionalStreams, (s) => this.onUni(new StreamReader(s))); }
  acceptDatagrams() { return this.each(this.wt.datagrams.readable, (d) => this.onDatagram(new Buf(d))); }

  // Requests the server opens (PUBLISH, ...): refused with REQUEST_ERROR NOT_SUPPORTED + FIN (§3.3.3).
  acceptBidi() {
    return this.each(this.wt.incomingBidirectionalStreams, async (stream) => {
      const { type } = await new StreamReader(stream.readable).message();
      if (!FIRST_MESSAGES.has(type)) throw new ProtocolError(`request stream starting with 0x${type.toString(16)}`);
      const body = [0x3, 0x0]; // Error Code NOT_SUPPORTED, Retry Interval 0 (don't retry)
      putBytes(body, enc.encode("this client accepts no requests"));
      const w = stream.writable.getWriter();
      await w.write(frame(MSG.REQUEST_ERROR, body));
      await w.close();
    });
  }

  /** A unidirectional stream (§3.4): control, subgroup, fetch or padding by its first vi64. */
  async onUni(rd) {
    const type = await rd.vi();
    if (type === MSG.SETUP) return this.onControl(rd);
    if (type === 0x132b3e28) return rd.cancel(CANCELLED); // PADDING
    if (type === FETCH_HEADER) return this.onFetchStream(rd);
    if (type < 0x80 && type & 0x10 && (type & 0x06) !== 0x06) return this.onSubgroup(rd, type);
    throw new ProtocolError(`unknown unidirectional stream type 0x${type.toString(16)}`);
  }

  // The server's control stream (§3.3, §10.3): SETUP, then only GOAWAY; it must never end.
  async onControl(rd) {
    if (this.serverSetup) throw new ProtocolError("a second control stream");
    const options = new Buf(await rd.bytes(await rd.u16())).kvps(); // unknown options ignored
    const impl = options.find((o) => o.type === 0x07);
    this.serverSetup = { implementation: impl ? utf8.decode(impl.value) : "", options };
    this.setupDone.resolve();
    for (;;) {
      if (await rd.done()) throw new ProtocolError("the server closed its control stream");
      const { type, body } = await rd.message();
      if (type !== MSG.GOAWAY || this.goaway) throw new ProtocolError(`unexpected message 0x${type.toString(16)} on the control stream`);
      this.goaway = { uri: body.text(8192), timeout: body.vi() };
      body.end("GOAWAY");
      this.ongoaway?.(this.goaway);
    }
  }

  // A subgroup stream (§11.4.2). Type bits: 0x01 properties on every object, 0x06 subgroup ID
  // mode (0: zero, 1: first object's ID, 2: field), 0x08 end of group, 0x20 default priority
  // (no field), 0x40 first object. Objects: ID delta, [properties], length, [status], payload.
  async onSubgroup(rd, type) {
    const alias = await rd.vi();
    const group = await rd.vi();
    const mode = (type >> 1) & 3;
    let subgroup = mode === 2 ? await rd.vi() : mode === 0 ? 0 : null;
    const priority = type & 0x20 ? null : await rd.u8();
    const subs = await this.track(alias);
    if (!subs) return rd.cancel(CANCELLED); // unknown alias (§11.4.2: MAY abandon the stream)
    subs.forEach((s) => s.streamOpened());
    try {
      for (let id = null; !(await rd.done()); ) {
        id = id === null ? await rd.vi() : add(id, await rd.vi(), 1);
        subgroup ??= id;
        const properties = type & 0x01 ? new Buf(await rd.bytes(await rd.vi())).kvps() : [];
        const length = await rd.vi();
        const status = length === 0 ? await rd.vi() : 0;
        const payload = await rd.bytes(length);
        const o = { group, subgroup, id, priority, status, properties, payload, firstObject: !!(type & 0x40), endOfGroup: !!(type & 0x08) };
        if (!this.deliver(subs, o)) return rd.cancel(CANCELLED);
      }
    } finally {
      subs.forEach((s) => s.streamClosed());
    }
  }

  // OBJECT_DATAGRAM (§11.3.1). Type bits: 0x01 properties, 0x02 end of group, 0x04 object ID
  // 0 (no field), 0x08 default priority (no field), 0x20 status instead of payload.
  onDatagram(b) {
    const type = b.vi();
    if (type === 0x132b3e29) return; // PADDING datagram (§11.5)
    if (typeof type !== "number" || type & ~0x2f || (type & 0x22) === 0x22) throw new ProtocolError(`invalid datagram type 0x${type.toString(16)}`);
    const alias = b.vi();
    const group = b.vi();
    const id = type & 0x04 ? 0 : b.vi();
    const priority = type & 0x08 ? null : b.u8();
    const properties = type & 0x01 ? new Buf(b.lenBytes()).kvps() : [];
    if (type & 0x01 && !properties.length) throw new ProtocolError("datagram with empty properties");
    const status = type & 0x20 ? b.vi() : 0;
    const payload = type & 0x20 ? new Uint8Array(0) : b.bytes(b.left()).slice();
    const subs = this.aliases.get(alias); // unknown alias: dropped (§11.3)
    if (subs) this.deliver(subs, { group, subgroup: null, id, priority, status, properties, payload, datagram: true, endOfGroup: !!(type & 0x02) });
  }

  /** Hands an object to the subscriptions on its alias; false if none wants it any more. */
  deliver(subs, o) {
    if (![0, 3, 4].includes(o.status)) throw new ProtocolError(`object status ${o.status}`);
    if (o.status && (o.properties.length || o.payload.length)) throw new ProtocolError("status object with properties or payload");
    const live = [...subs].filter((s) => !s.cancelled);
    for (const s of live) s.queue.push({ ...o, priority: o.priority ?? s.priority });
    return live.length > 0;
  }

  /** The subscriptions using `alias`, waiting up to 2 s for a SUBSCRIBE_OK still in flight. */
  async track(alias) {
    if (!this.aliases.has(alias) && !this.error) {
      await new Promise((resolve) => {
        this.aliasWaiters.set(alias, [...(this.aliasWaiters.get(alias) ?? []), resolve]);
        setTimeout(resolve, 2000);
      });
    }
    return this.aliases.get(alias);
  }

  /** Opens a request stream and sends message `type` with body `body(requestId)`. */
  async request(type, body) {
    if (this.error) throw this.error;
    const id = this.nextRequestId;
    this.nextRequestId += 2;
    const stream = await this.wt.createBidirectionalStream();
    const writer = stream.writable.getWriter();
    await writer.write(frame(type, body(id)));
    const rd = new StreamReader(stream.readable);
    const cancel = () => { writer.abort(streamError(CANCELLED)).catch(() => {}); rd.cancel(CANCELLED); }; // §3.3.3
    const finish = () => writer.close().catch(() => {}); // our FIN once the server has FINed (§3.3.2)
    return { id, rd, cancel, finish };
  }

  /** Reads the first response of a request: `okType` (read by `parseOk`) or REQUEST_ERROR. */
  async response(req, okType, parseOk) {
    try { // the server FINs after REQUEST_ERROR; we cancel either way
      if (await req.rd.done()) throw new MoqError(0, "request stream ended without a response");
      const { type, body } = await req.rd.message();
      if (type === MSG.REQUEST_ERROR) {
        const [code, retryInterval, reason] = [body.vi(), body.vi(), body.text(1024)];
        throw new MoqError(code, reason, { retryInterval }); // (a REDIRECT's details are not read)
      }
      if (type !== okType) throw new ProtocolError(`first response 0x${type.toString(16)}`);
      parseOk(body);
      body.end("response");
    } catch (e) { req.cancel(); throw e; }
  }

  /** Runs the rest of a request in the background: its end or failure ends or fails `q`. */
  pump(req, q, f) {
    this.live.add(q);
    this.guard(f).then(req.finish, (e) => { q.fail(e); req.cancel(); }).finally(() => this.live.delete(q));
  }

  /**
   * SUBSCRIBE_NAMESPACE (§10.18) for `prefix` (fields; [] = everything). Namespaces only: draft-19
   * has no Subscribe Options; tracks would come from SUBSCRIBE_TRACKS (0x51), which we don't send.
   * Resolves after REQUEST_OK to an async iterable of {type: "added"|"removed", namespace, suffix};
   * rejects with a MoqError on REQUEST_ERROR. `cancel()` (or leaving a for-await loop) cancels.
   */
  async subscribeNamespace(prefix = []) {
    const req = await this.request(MSG.SUBSCRIBE_NAMESPACE, (id) => {
      const out = [];
      putVi(out, id);
      putNamespace(out, prefix);
      putVi(out, 0); // Number of Parameters
      return out;
    });
    const q = new Queue(() => req.cancel());
    q.cancel = () => q.return();
    await this.guard(() => this.response(req, MSG.REQUEST_OK, (body) => {
      body.params();
      if (body.left()) throw new ProtocolError("SUBSCRIBE_NAMESPACE_OK with track properties");
    }));
    this.pump(req, q, async () => {
      const active = new Map();
      const event = (type, suffix) => q.push({ type, namespace: [...prefix, ...suffix], suffix });
      while (!(await req.rd.done())) {
        const { type, body } = await req.rd.message();
        if (type !== MSG.NAMESPACE && type !== MSG.NAMESPACE_DONE) throw new ProtocolError(`message 0x${type.toString(16)} after SUBSCRIBE_NAMESPACE`);
        const suffix = body.namespace();
        body.end("NAMESPACE");
        const key = JSON.stringify(suffix);
        if (type === MSG.NAMESPACE_DONE && !active.delete(key)) throw new ProtocolError("NAMESPACE_DONE before NAMESPACE");
        if (type === MSG.NAMESPACE) active.set(key, suffix);
        event(type === MSG.NAMESPACE ? "added" : "removed", suffix);
      }
      active.forEach((suffix) => event("removed", suffix)); // FIN: every namespace is done (§10.18)
      q.end();
    });
    return q;
  }

  /**
   * SUBSCRIBE (§10.7) to `track` in `namespace` (fields). Resolves after SUBSCRIBE_OK to a
   * Subscription, an async iterable of objects {group, subgroup, id, priority, status,
   * properties, payload} (status 0 normal, 3 end of group, 4 end of track) that ends after
   * PUBLISH_DONE (then see `.done`) and throws when the request or the session fails. Rejects
   * with a MoqError on REQUEST_ERROR. Options: `filter` "largest" | "next-group" (LOCATION_FILTER;
   * default: none, unfiltered), `priority` (SUBSCRIBER_PRIORITY 0-255).
   */
  async subscribe(namespace, track, { filter, priority } = {}) {
    const req = await this.request(MSG.SUBSCRIBE, (id) => {
      const out = [];
      putVi(out, id);
      putNamespace(out, namespace);
      putBytes(out, enc.encode(track));
      putVi(out, (priority !== undefined) + !!filter);
      if (priority !== undefined) out.push(0x20, priority & 0xff); // SUBSCRIBER_PRIORITY
      if (filter) out.push(priority !== undefined ? 0x01 : 0x21, 1, filter === "next-group" ? 0x1 : 0x2);
      return out;
    });
    const sub = new Subscription(this, req, JSON.stringify([namespace, track]));
    sub.requestId = req.id;
    await this.guard(async () => {
      await this.response(req, MSG.SUBSCRIBE_OK, (body) => {
        sub.alias = body.vi();
        sub.params = body.params();
        sub.largest = sub.params[0x09] ?? null;
        sub.properties = body.kvps(); // Track Properties
        sub.priority = sub.properties.find((p) => p.type === 0x0e)?.value ?? 128; // DEFAULT_PUBLISHER_PRIORITY
      });
      const same = this.aliases.get(sub.alias) ?? new Set(); // (§11.1: one alias, one track)
      if ([...same].some((other) => other.key !== sub.key)) {
        this.fail(DUPLICATE_TRACK_ALIAS, `alias ${sub.alias} names two tracks`);
        throw this.error;
      }
      this.aliases.set(sub.alias, same.add(sub));
      (this.aliasWaiters.get(sub.alias) ?? []).forEach((w) => w());
      this.aliasWaiters.delete(sub.alias);
    });
    this.pump(req, sub.queue, async () => {
      if (await req.rd.done()) throw new MoqError(0, "the subscription ended without PUBLISH_DONE");
      const { type, body } = await req.rd.message();
      if (type === MSG.GOAWAY) throw new MoqError(0x6, "GOAWAY for this subscription");
      if (type !== MSG.PUBLISH_DONE) throw new ProtocolError(`message 0x${type.toString(16)} after SUBSCRIBE_OK`);
      sub.done = { code: body.vi(), streamCount: body.vi(), reason: body.text(1024) };
      body.end("PUBLISH_DONE");
      if (!(await req.rd.done())) throw new ProtocolError("a message after PUBLISH_DONE");
      sub.finishing();
    });
    return sub;
  }

  /**
   * Standalone FETCH (§10.12.1) of `track` in `namespace` from `start` to `end` ({group, object};
   * `end` is the last object plus 1, object 0 = the whole group). Resolves after FETCH_OK to a
   * Fetch, an async iterable of the objects {group, subgroup, id, priority, properties,
   * payload} in ascending order, which ends when the data stream ends (FIN); `.ok` is
   * {endOfTrack, end, properties}. Rejects with a MoqError on REQUEST_ERROR.
   */
  async fetch(namespace, track, { start, end }) {
    return this.startFetch(0x1, (out) => {
      putNamespace(out, namespace);
      putBytes(out, enc.encode(track));
      putVi(out, start.group); putVi(out, start.object);
      putVi(out, end.group); putVi(out, end.object);
    });
  }

  /**
   * Joining FETCH (§10.12.2) of the objects before `subscription` (a Subscription from this
   * session, with objects flowing): Relative (type 0x2, from group Joining Location.Group -
   * `start`) or Absolute (type 0x3, from group `start`), up to its Joining Location (§10.12.2.1).
   */
  async joiningFetch(subscription, { start = 0, absolute = false } = {}) {
    return this.startFetch(absolute ? 0x3 : 0x2, (out) => { putVi(out, subscription.requestId); putVi(out, start); });
  }

  async startFetch(fetchType, body) {
    const f = new Fetch(this);
    const req = await this.request(MSG.FETCH, (id) => {
      this.fetches.set(id, f); // before the FETCH leaves: its data stream may come at once
      const out = [];
      putVi(out, id);
      putVi(out, fetchType);
      body(out);
      putVi(out, 0); // Number of Parameters (GROUP_ORDER omitted: Ascending, §10.2.7)
      return out;
    }).catch((e) => { f.close(); throw e; });
    Object.assign(f, { req, requestId: req.id });
    try {
      await this.guard(() => this.response(req, MSG.FETCH_OK, (b) => {
        const endOfTrack = b.u8();
        if (endOfTrack > 1) throw new ProtocolError(`FETCH_OK End Of Track ${endOfTrack}`);
        const end = { group: b.vi(), object: b.vi() };
        const params = b.params();
        f.ok = { endOfTrack: endOfTrack === 1, end, params, properties: b.kvps() };
      }));
    } catch (e) { f.close(); throw e; }
    this.pump(req, f.queue, async () => {
      if (!(await req.rd.done())) throw new ProtocolError("a message after FETCH_OK");
    });
    return f;
  }

  // A fetch data stream (§11.4.4): FETCH_HEADER's Request ID, then objects whose Serialization
  // Flags say which fields are present: 0x03 subgroup mode (0: zero, 1: prior, 2: prior + 1,
  // 3: field), 0x04 Object ID Delta, 0x08 Group ID Delta, 0x10 priority, 0x20 properties,
  // 0x40 datagram (no subgroup); 0x8C / 0x10C End of Non-Existent / Unknown Range.
  async onFetchStream(rd) {
    const requestId = await rd.vi();
    const f = this.fetches.get(requestId);
    if (!f || f.stream) return rd.cancel(CANCELLED); // unknown or finished request: abandoned
    f.stream = rd;
    const prior = { group: null, object: null, subgroup: null, priority: null };
    const need = (v, what) => {
      // draft-19 §11.4.4.1: a reference to a prior object that does not exist MUST close the
      // session with PROTOCOL_VIOLATION.
      if (v === null) throw new ProtocolError(`fetch object refers to a prior ${what}`);
      return v;
    };
    try {
      while (!(await rd.done())) {
        const flags = await rd.vi();
        const range = flags === 0x8c || flags === 0x10c;
        // draft-19 §11.4.4: any other value of 128 or more is a PROTOCOL_VIOLATION.
        if (!range && !(typeof flags === "number" && flags < 0x80)) throw new ProtocolError(`fetch serialization flags 0x${flags.toString(16)}`);
        const bits = range ? 0x0c : flags;
        const first = prior.group === null;
        let group;
        if (bits & 0x08) { const d = await rd.vi(); group = first ? d : add(prior.group, d, 1); } // ascending order
        else group = need(prior.group, "group");
        let subgroup = null;
        if (!range && !(bits & 0x40)) {
          const mode = bits & 0x03;
          subgroup = mode === 0 ? 0 : mode === 3 ? await rd.vi() : add(need(prior.subgroup, "subgroup"), mode - 1);
        }
        let id;
        if (bits & 0x04) { const d = await rd.vi(); id = first || bits & 0x08 ? d : add(prior.object, d); }
        else id = add(need(prior.object, "object"), 1);
        [prior.group, prior.object] = [group, id];
        if (range) { f.ranges.push({ kind: flags === 0x8c ? "non-existent" : "unknown", group, id }); continue; }
        const priority = bits & 0x10 ? await rd.u8() : need(prior.priority, "priority");
        const properties = bits & 0x20 ? new Buf(await rd.bytes(await rd.vi())).kvps() : [];
        const length = await rd.vi();
        if (typeof length !== "number" || length > 1 << 28) throw new ProtocolError(`object of ${length} bytes`);
        const payload = await rd.bytes(length);
        [prior.subgroup, prior.priority] = [subgroup, priority];
        if (f.cancelled) return rd.cancel(CANCELLED);
        f.queue.push({ group, subgroup, id, priority, status: 0, properties, payload, fetched: true });
      }
      f.queue.end();
    } catch (e) {
      f.queue.fail(e instanceof ProtocolError || !(e?.name === "WebTransportError") ? e : new MoqError(e.streamErrorCode ?? 0, "fetch stream reset"));
      throw e;
    } finally {
      this.fetches.delete(requestId);
    }
  }

  /**
   * Joins `track` at its latest group (draft-19 §5.1.5, "Joining an Ongoing Track"): SUBSCRIBE
   * with the Largest Object filter, then a Relative Joining FETCH with Joining Start 0, which
   * returns the current group from object 0 up to the Joining Location. Resolves to a Joined:
   * an async iterable of the fetched objects first, then the subscription's. A track with no
   * objects yet (no LARGEST_OBJECT; or INVALID_RANGE to the FETCH) is the subscription alone.
   */
  async join(namespace, track, { priority } = {}) {
    const sub = await this.subscribe(namespace, track, { filter: "largest", priority });
    let fetch = null;
    if (sub.largest) {
      try { fetch = await this.joiningFetch(sub, { start: 0 }); }
      catch (e) {
        if (e?.session || e?.code !== INVALID_RANGE) { sub.cancel(); throw e; }
      }
    }
    return new Joined(sub, fetch);
  }
}

/** One FETCH: iterate it for objects; `cancel()` cancels the request and its data stream. */
export class Fetch {
  constructor(session) {
    Object.assign(this, { session, req: null, requestId: null, ok: null, stream: null, ranges: [], cancelled: false });
    this.queue = new Queue(() => this.cancel());
  }
  /** Forgets the request (no data stream is wanted any more). */
  close() { if (this.requestId !== null) this.session.fetches.delete(this.requestId); else for (const [k, v] of this.session.fetches) if (v === this) this.session.fetches.delete(k); }
  cancel() {
    if (this.cancelled) return;
    this.cancelled = true;
    this.req?.cancel();
    this.stream?.cancel(CANCELLED);
    this.close();
    this.queue.end();
  }
  next() { return this.queue.next(); }
  return() { return this.queue.return(); }
  [Symbol.asyncIterator]() { return this; }
}

/**
 * A subscription joined at its latest group: the Joining FETCH's objects, then the
 * subscription's. `fetchError` is set if the FETCH failed part way (the subscription goes on).
 */
export class Joined {
  constructor(subscription, fetch) {
    Object.assign(this, { subscription, fetch, fetchError: null, largest: subscription.largest });
  }
  get done() { return this.subscription.done; }
  async next() {
    if (this.fetch) {
      try {
        const r = await this.fetch.next();
        if (!r.done) return r;
      } catch (e) { this.fetchError = e; }
      this.fetch = null;
    }
    return this.subscription.next();
  }
  cancel() { this.fetch?.cancel(); this.subscription.cancel(); }
  async return() { this.cancel(); return { done: true }; }
  [Symbol.asyncIterator]() { return this; }
}

/**
 * The value of Property `type` in an object's `properties` ({type, value} pairs), searching
 * the mutable list and then Immutable Properties (0xB), as draft-19 §12.7 requires; or
 * undefined. Even types are numbers (vi64), odd types bytes.
 */
export function property(properties, type) {
  const found = properties.find((p) => p.type === type);
  if (found) return found.value;
  for (const p of properties) {
    if (p.type !== 0xb) continue;
    try {
      const inner = new Buf(p.value).kvps().find((q) => q.type === type);
      if (inner) return inner.value;
    } catch { /* a malformed Immutable Properties value holds nothing we can read */ }
  }
  return undefined;
}

/** One subscription: iterate it for objects; `cancel()` unsubscribes (RESET_STREAM + STOP_SENDING). */
export class Subscription {
  constructor(session, req, key) {
    Object.assign(this, { session, req, key, alias: null, done: null, streams: 0, open: 0, cancelled: false });
    this.queue = new Queue(() => this.cancel());
  }
  streamOpened() { this.streams++; this.open++; }
  streamClosed() { this.open--; this.maybeFinish(); }
  maybeFinish() { if (this.done && !this.open && this.streams >= this.done.streamCount) this.finish(); }
  // After PUBLISH_DONE, wait for the data streams it counts, 1 s at most (§10.11), then end.
  finishing() { this.maybeFinish(); setTimeout(() => this.finish(), 1000); }
  finish() {
    const set = this.session.aliases.get(this.alias);
    set?.delete(this);
    if (set?.size === 0) this.session.aliases.delete(this.alias);
    this.queue.end();
  }
  cancel() {
    if (this.cancelled) return;
    this.cancelled = true;
    this.req.cancel();
    this.finish();
  }
  next() { return this.queue.next(); }
  return() { return this.queue.return(); }
  [Symbol.asyncIterator]() { return this; }
}
