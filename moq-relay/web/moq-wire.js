// moq-wire.js: moq.js's wire layer, the part that is tables and bytes: the drafts' integer
// codecs (draft-19 §1.4.1 vi64, draft-14's QUIC varints), the per-draft table VERSIONS (message
// type codes, error registries, data stream and datagram types, Key-Value-Pair shapes), the
// control-message framing, the byte reader of a stream, and the async queue the Session's
// iterators hand out. moq.js's Session holds the state machine and imports these; nothing here
// knows a Session. A plain ES module, no build step.

import { StreamError } from "./qmux.js";

/** The WebTransport protocol / QMux application protocol of draft-19 (§3.1.4). */
export const VERSION = "moqt-19";

export const IMPLEMENTATION = "moq-js/0.1 (moq-relay/web)";
export const PROTOCOL_VIOLATION = 0x3; // session close codes (draft-19 §3.5, draft-14 §3.4)
export const INVALID_REQUEST_ID = 0x4;
export const DUPLICATE_TRACK_ALIAS = 0x5;
export const TOO_MANY_REQUESTS = 0x7; // draft-14 §3.4
export const VERSION_NEGOTIATION_FAILED = 0x15;
export const CANCELLED = 0x1; // RESET_STREAM / STOP_SENDING code (§3.3.4)
const REQUEST_ERRORS = {
  0x0: "INTERNAL_ERROR", 0x1: "UNAUTHORIZED", 0x2: "TIMEOUT", 0x3: "NOT_SUPPORTED",
  0x4: "MALFORMED_AUTH_TOKEN", 0x5: "EXPIRED_AUTH_TOKEN", 0x6: "GOING_AWAY", 0x9: "EXCESSIVE_LOAD",
  0x10: "DOES_NOT_EXIST", 0x11: "INVALID_RANGE", 0x12: "MALFORMED_TRACK", 0x20: "UNINTERESTED",
  0x30: "PREFIX_OVERLAP", 0x31: "NAMESPACE_TOO_LARGE", 0x33: "UNSUPPORTED_EXTENSION",
  0x34: "REDIRECT", 0x35: "CONFLICTING_FILTERS", 0x36: "INVALID_FILTER",
};
// draft-14 has one error registry per message (§13.1.2, §13.1.5, §13.1.7).
const D14_COMMON = { 0x0: "INTERNAL_ERROR", 0x1: "UNAUTHORIZED", 0x2: "TIMEOUT", 0x3: "NOT_SUPPORTED", 0x10: "MALFORMED_AUTH_TOKEN", 0x12: "EXPIRED_AUTH_TOKEN" };
const D14_SUBSCRIBE_ERRORS = { ...D14_COMMON, 0x4: "TRACK_DOES_NOT_EXIST", 0x5: "INVALID_RANGE" };
const D14_FETCH_ERRORS = { ...D14_SUBSCRIBE_ERRORS, 0x6: "NO_OBJECTS", 0x7: "INVALID_JOINING_REQUEST_ID", 0x8: "UNKNOWN_STATUS_IN_RANGE", 0x9: "MALFORMED_TRACK" };
const D14_NAMESPACE_ERRORS = { ...D14_COMMON, 0x4: "NAMESPACE_PREFIX_UNKNOWN", 0x5: "NAMESPACE_PREFIX_OVERLAP" };

/** A failed request (its error message: code, reason, [retryInterval]) or the end of the session. */
export class MoqError extends Error {
  constructor(code, reason, extra = {}) {
    const codeName = extra.session ? undefined : extra.codeName ?? (extra.names ?? REQUEST_ERRORS)[code];
    const what = extra.session ? "session closed" : codeName ?? "error";
    super(`${what}${code === null ? "" : ` (${code})`}${reason ? `: ${reason}` : ""}`);
    delete extra.names;
    Object.assign(this, { code, reason, codeName, ...extra });
  }
}
/** Bytes from the server that break the draft: the session is closed with PROTOCOL_VIOLATION. */
export class ProtocolError extends Error {
  constructor(message, code = PROTOCOL_VIOLATION) { super(message); this.code = code; }
}

// ---- integers --------------------------------------------------------------------------------

/** draft-19 §1.4.1 vi64: leading 1-bits of the first byte give the length (1-9 bytes). */
const VI64 = {
  len: (b) => { let n = 1; while (n < 9 && b & (0x80 >> (n - 1))) n++; return n; },
  value(b) {
    if (b.length >= 8) return norm(b.subarray(1).reduce((v, x) => (v << 8n) | BigInt(x), 0n)); // > 2^53
    let v = b[0] & (0xff >> b.length);
    for (let i = 1; i < b.length; i++) v = v * 256 + b[i];
    return norm(v);
  },
  put(out, n) {
    let v = BigInt(n);
    let len = 1;
    while (len < 9 && v >= 1n << BigInt(7 * len)) len++;
    const bytes = new Array(len).fill(0);
    for (let i = len - 1; i >= (len === 9 ? 1 : 0); i--, v >>= 8n) bytes[i] = Number(v & 0xffn);
    bytes[0] |= len === 9 ? 0xff : (0xff00 >> (len - 1)) & 0xff;
    out.push(...bytes);
  },
};
/** RFC 9000 §16 (draft-14 "(i)"): the top two bits give the length (1, 2, 4 or 8 bytes), < 2^62. */
const QUIC_INT = {
  len: (b) => 1 << (b >> 6),
  value(b) {
    if (b.length === 8) return norm(b.subarray(1).reduce((v, x) => (v << 8n) | BigInt(x), BigInt(b[0] & 0x3f)));
    let v = b[0] & 0x3f;
    for (let i = 1; i < b.length; i++) v = v * 256 + b[i];
    return v;
  },
  put(out, n) {
    let v = BigInt(n);
    if (v >= 1n << 62n) throw new RangeError(`${n} is too large for a QUIC varint`);
    const len = v < 64n ? 1 : v < 16384n ? 2 : v < 1n << 30n ? 4 : 8;
    const bytes = new Array(len);
    for (let i = len - 1; i >= 0; i--, v >>= 8n) bytes[i] = Number(v & 0xffn);
    bytes[0] |= { 1: 0, 2: 0x40, 4: 0x80, 8: 0xc0 }[len];
    out.push(...bytes);
  },
};

// ---- versions --------------------------------------------------------------------------------

/** What differs between the drafts this subscriber speaks. */
export const VERSIONS = {
  19: {
    draft: 19, protocol: VERSION, int: VI64, control: "streams", inline: false, kvpParams: false, deltaTypes: true,
    minFields: 0, // §2.4.1: 0..32 fields
    msg: {
      SETUP: 0x2f00, GOAWAY: 0x10, SUBSCRIBE: 0x3, SUBSCRIBE_OK: 0x4, PUBLISH_DONE: 0xb, REQUEST_OK: 0x7,
      REQUEST_ERROR: 0x5, NAMESPACE: 0x8, NAMESPACE_DONE: 0xe, SUBSCRIBE_NAMESPACE: 0x50, FETCH: 0x16,
      FETCH_OK: 0x18, SUBSCRIBE_NAMESPACE_OK: 0x7,
    },
    // The answer to a failed request and the names of its codes: REQUEST_ERROR for all (§10.6).
    errors: () => ({ type: 0x5, retry: true, names: REQUEST_ERRORS }),
    // §11.4.2: 0b0XX1XXXX, Subgroup ID mode 0b11 reserved; §11.5 padding stream.
    subgroupType: (t) => t < 0x80 && (t & 0x10) !== 0 && (t & 0x06) !== 0x06,
    padding: 0x132b3e28,
    // §11.3.1: 0b00X0XXXX, STATUS with END_OF_GROUP is a violation.
    datagramType: (t) => !(t & ~0x2f) && (t & 0x22) !== 0x22,
    statuses: [0, 3, 4], // §11.2.1.1
    statusProperties: [], // §11.2.1.1: only Normal objects carry properties
    goawayTimeout: true,
  },
  14: {
    draft: 14, protocol: "moq-00", int: QUIC_INT, control: "single", inline: true, kvpParams: true, deltaTypes: false,
    minFields: 1, // draft-14 §2.4.1, §9.28: 1..32 fields
    setupNumber: 0xff00000e, // §9.3.1: 0xff000000 + draft
    msg: {
      CLIENT_SETUP: 0x20, SERVER_SETUP: 0x21, GOAWAY: 0x10, MAX_REQUEST_ID: 0x15, REQUESTS_BLOCKED: 0x1a,
      SUBSCRIBE: 0x3, SUBSCRIBE_OK: 0x4, SUBSCRIBE_ERROR: 0x5, SUBSCRIBE_UPDATE: 0x2, UNSUBSCRIBE: 0xa,
      PUBLISH_DONE: 0xb, PUBLISH: 0x1d, PUBLISH_OK: 0x1e, PUBLISH_ERROR: 0x1f, FETCH: 0x16, FETCH_OK: 0x18,
      FETCH_ERROR: 0x19, FETCH_CANCEL: 0x17, TRACK_STATUS: 0xd, TRACK_STATUS_OK: 0xe, TRACK_STATUS_ERROR: 0xf,
      PUBLISH_NAMESPACE: 0x6, PUBLISH_NAMESPACE_OK: 0x7, PUBLISH_NAMESPACE_ERROR: 0x8,
      PUBLISH_NAMESPACE_DONE: 0x9, PUBLISH_NAMESPACE_CANCEL: 0xc, SUBSCRIBE_NAMESPACE: 0x11,
      SUBSCRIBE_NAMESPACE_OK: 0x12, SUBSCRIBE_NAMESPACE_ERROR: 0x13, UNSUBSCRIBE_NAMESPACE: 0x14,
    },
    errors: (request) => ({
      [0x3]: { type: 0x5, names: D14_SUBSCRIBE_ERRORS }, [0x16]: { type: 0x19, names: D14_FETCH_ERRORS },
      [0x11]: { type: 0x13, names: D14_NAMESPACE_ERRORS },
    })[request],
    // Each request's cancel message (§9.11, §9.19, §9.31) and the messages that end its route:
    // true where the publisher is then done with the request, false where (FETCH_OK) only the
    // control messages end and a FETCH_CANCEL still stops the data stream.
    cancels: { [0x3]: 0xa, [0x16]: 0x17, [0x11]: 0x14 },
    ends: { [0x5]: true, [0x13]: true, [0x19]: true, [0xb]: true, [0x18]: false },
    // Requests a server may open (§9.1), each refused with its error message: PUBLISH with
    // UNINTERESTED (§9.13), the others NOT_SUPPORTED; PUBLISH_NAMESPACE is answered by the
    // Session (§6.2).
    refusals: { [0x1d]: [0x1f, 0x4], [0x3]: [0x5, 0x3], [0x16]: [0x19, 0x3], [0xd]: [0xf, 0x3], [0x11]: [0x13, 0x3] },
    // §10.4.2: 0x10-0x15, 0x18-0x1D.
    subgroupType: (t) => t >= 0x10 && t <= 0x1d && (t & 0x06) !== 0x06,
    padding: null,
    // §10.3.1: 0x00-0x07 (payload), 0x20-0x21 (status); priority always present.
    datagramType: (t) => t <= 0x07 || t === 0x20 || t === 0x21,
    statuses: [0, 1, 3, 4], // §10.2.1.1
    statusProperties: [3, 4], // §10.2.1.2: all but Object Does Not Exist may carry extensions
    goawayTimeout: false,
  },
};
/** How many of the server's requests we allow ahead (draft-14 §9.5 MAX_REQUEST_ID). */
export const SERVER_REQUEST_WINDOW = 64;

// ---- encoding --------------------------------------------------------------------------------

export const utf8 = new TextDecoder();
const enc = new TextEncoder();

/** Builds a message body or a stream header in version `v`'s integers. */
export class Out {
  constructor(v) { this.v = v; this.b = []; }
  int(n) { this.v.int.put(this.b, n); return this; }
  u8(x) { this.b.push(x & 0xff); return this; }
  bytes(bytes) { this.int(bytes.length); this.b.push(...bytes); return this; }
  text(s) { return this.bytes(enc.encode(s)); }
  namespace(fields) { this.int(fields.length); for (const f of fields) this.text(f); return this; }
}
/** One control message (draft-19 §10, draft-14 §9): Type, Length (16), Body. */
export function frame(v, type, body) {
  const out = [];
  v.int.put(out, type);
  out.push(body.length >> 8, body.length & 0xff, ...body);
  return new Uint8Array(out);
}
/** A stream cancel reason carrying `code` (the spec's constructor, else Chromium's dictionary). */
export function streamError(code) {
  if (typeof WebTransportError === "undefined") return new StreamError(code, "cancel"); // qmux.js reads its code
  try { return new WebTransportError("cancel", { streamErrorCode: code }); }
  catch { return new WebTransportError({ message: "cancel", streamErrorCode: code }); }
}

// ---- decoding --------------------------------------------------------------------------------

/** A Number while exact, else a BigInt. */
const norm = (v) => (typeof v === "bigint" && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v);
/** a + b + c exactly; past 2^64-1 is a protocol violation (§1.4.3, §11.4.2). */
export function add(a, b, c = 0) {
  const r = BigInt(a) + BigInt(b) + BigInt(c);
  if (r >= 1n << 64n) throw new ProtocolError("integer overflows 2^64-1");
  return norm(r);
}

/** A cursor over bytes that are all present (a message body, a datagram, a properties block), in version `v`. */
export class Buf {
  constructor(bytes, v = VERSIONS[19]) { this.b = bytes; this.p = 0; this.v = v; }
  left() { return this.b.length - this.p; }
  bytes(n) {
    if (typeof n !== "number" || n > this.left()) throw new ProtocolError("fields overrun their length");
    return this.b.subarray(this.p, (this.p += n));
  }
  u8() { return this.bytes(1)[0]; }
  /** A draft-14 one-byte flag: other than 0 or 1 is a PROTOCOL_VIOLATION (§9.8 Content Exists). */
  flag(what) {
    const x = this.u8();
    if (x > 1) throw new ProtocolError(`${what} ${x}`);
    return x === 1;
  }
  vi() { return this.v.int.value(this.bytes(this.v.int.len(this.b[this.p] ?? 0))); }
  lenBytes(max = 65535) {
    const n = this.vi();
    if (n > max) throw new ProtocolError(`length ${n} over ${max}`);
    return this.bytes(n);
  }
  text(max) { return utf8.decode(this.lenBytes(max)); }
  /** Track Namespace (§2.4.1): 0..32 non-empty fields (draft-14: 1..32), 4096 bytes at most; fields as text. */
  namespace() {
    const n = this.vi();
    if (n > 32 || n < this.v.minFields) throw new ProtocolError(`namespace of ${n} fields`);
    const fields = [];
    for (let i = 0, total = 0; i < n; i++) {
      const f = this.lenBytes(4096);
      if (!f.length || (total += f.length) > 4096) throw new ProtocolError("bad namespace field");
      fields.push(utf8.decode(f));
    }
    return fields;
  }
  /** One Key-Value-Pair after the previous `type` (draft-19 §1.4.3 delta, draft-14 §1.4.2 absolute). */
  kvp(previous) {
    const type = this.v.deltaTypes ? add(previous, this.vi()) : this.vi();
    const value = BigInt(type) & 1n ? this.lenBytes() : this.vi(); // odd = Length + bytes, even = one integer
    return type === 0xb ? { type, value, v: this.v } : { type, value }; // Immutable Properties nest KVPs of this version
  }
  /** Key-Value-Pairs to the end. */
  kvps() {
    const out = [];
    while (this.left()) out.push(this.kvp(out.at(-1)?.type ?? 0));
    return out;
  }
  /**
   * Message Parameters: draft-19 §10.2, count then Type Delta + the value shape its type
   * defines (an unknown one closes the session); draft-14 §9.2, count then Key-Value-Pairs
   * (unknown ones ignored).
   */
  params() {
    const out = {};
    for (let n = this.vi(), type = 0; n > 0; n--) {
      if (this.v.kvpParams) {
        const p = this.kvp(0);
        out[p.type] = p.value;
        continue;
      }
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
// The value shape of each draft-19 Message Parameter (§10.2.x).
const PARAM_SHAPES = {
  0x02: "vi", 0x03: "len", 0x04: "vi", 0x06: "vi", 0x08: "vi", 0x09: "loc", 0x0a: "vi", 0x10: "u8",
  0x20: "u8", 0x21: "len", 0x22: "u8", 0x25: "len", 0x26: "len", 0x27: "len", 0x28: "len",
  0x29: "len", 0x32: "vi", 0x34: "ns",
};
export const FETCH_HEADER = 0x05; // unidirectional stream type (draft-19 §11.4.4, draft-14 §10.4.4)
export const FIRST_MESSAGES = new Set([0x3, 0x1d, 0x16, 0xd, 0x6, 0x50, 0x51]); // may open a draft-19 request (§3.3)

/** Reads a WebTransport receive stream in version `v`, waiting for as many bytes as asked. */
export class StreamReader {
  constructor(readable, v) { this.r = readable.getReader(); this.buf = new Uint8Array(0); this.p = 0; this.v = v; }
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
  async vi() { return (await this.fill(1)) ? this.v.int.value(await this.bytes(this.v.int.len(this.buf[this.p]))) : this.bytes(1); }
  async u8() { return (await this.bytes(1))[0]; }
  async u16() { const b = await this.bytes(2); return (b[0] << 8) | b[1]; }
  /** One control message (§10): its type and a Buf over exactly its body. */
  async message() {
    const type = await this.vi();
    return { type, body: new Buf(await this.bytes(await this.u16()), this.v) };
  }
  cancel(code) { this.r.cancel(streamError(code)).catch(() => {}); }
}

/**
 * A draft-14 request's messages, read from the one control stream by its Request ID (§9.1):
 * what a draft-19 request stream's StreamReader gives (`done`, `message`), the stream's end
 * being the message that ends the request (`v.ends`).
 */
export class RouteReader {
  constructor() { this.queue = new Queue(); this.peeked = null; }
  async done() {
    this.peeked ??= this.queue.next();
    return (await this.peeked).done === true;
  }
  async message() {
    const r = await (this.peeked ?? this.queue.next());
    this.peeked = null;
    if (r.done) throw new ProtocolError("request ended inside a message");
    return r.value;
  }
  cancel() { this.queue.end(); }
}

/** An async iterable fed by push / end / fail; `onReturn` runs when the consumer stops early. */
export class Queue {
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
