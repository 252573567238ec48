// qmux.js: QMux (draft-ietf-quic-qmux-01) over a WebSocket, presenting the part of the browser's
// WebTransport interface that moq.js uses. A plain ES module: no dependencies, no build step.
//
// QMux carries QUIC version 1 frames (STREAM, RESET_STREAM, STOP_SENDING, MAX_DATA, ...) over
// one ordered byte stream; over a WebSocket each binary message is one QMux Record's Frames (the
// message boundary stands in for the record's Size field), and the subprotocol names both the
// QMux draft and the application: `qmux-01.moqt-19`. What is here (qmux-01 sections):
// §3.2 records (bounded by max_record_size, §5.2); §4 the permitted frames, the prohibited ones
// closing with FRAME_ENCODING_ERROR; §4.1 in-order STREAM data; §4.2 QX_TRANSPORT_PARAMETERS,
// sent at once and required first; §4.3 QX_PING answered; §5.1 permitted and forbidden
// transport parameters; §6 reading the socket never waits for the application (stream data is
// bounded by flow control instead); §7 CONNECTION_CLOSE / APPLICATION_CLOSE; §9.1 datagrams.
// RFC 9000's flow control (§4: MAX_DATA, MAX_STREAM_DATA, MAX_STREAMS) bounds what the peer may
// send and what we send; receive windows are handed back as the application reads.
//
//   const wt = connectWebSocket("wss://relay.example/", ["moqt-19"]);
//   await wt.ready;                          // the peer's transport parameters have arrived
//   const { readable, writable } = await wt.createBidirectionalStream();
//
// A WebSocket has no write-side flow signal but `bufferedAmount`, so writers wait (polling every
// 5 ms) while more than SEND_BUFFER bytes sit unsent in the socket.

const TP_FRAME = 0x3f5153300d0a0d0an; // QX_TRANSPORT_PARAMETERS (§4.2)
const PING_REQUEST = 0x348c67529ef8c7bdn; // QX_PING (§4.3)
const PING_RESPONSE = 0x348c67529ef8c7ben;
const TP_MAX_RECORD_SIZE = 0x0571c59429cd0845n; // §5.2
const DEFAULT_RECORD_SIZE = 16382; // §5.2: the initial max_record_size
/** Transport error codes (RFC 9000 §20.1). */
export const ERRORS = {
  NO_ERROR: 0x0, INTERNAL_ERROR: 0x1, FLOW_CONTROL_ERROR: 0x3, STREAM_LIMIT_ERROR: 0x4,
  STREAM_STATE_ERROR: 0x5, FINAL_SIZE_ERROR: 0x6, FRAME_ENCODING_ERROR: 0x7,
  TRANSPORT_PARAMETER_ERROR: 0x8, PROTOCOL_VIOLATION: 0xa,
};
// Frames QMux forbids (§4): PING, ACK (2), CRYPTO, NEW_TOKEN, NEW/RETIRE_CONNECTION_ID,
// PATH_CHALLENGE/RESPONSE, HANDSHAKE_DONE.
const PROHIBITED = new Set([0x01, 0x02, 0x03, 0x06, 0x07, 0x18, 0x19, 0x1a, 0x1b, 0x1e]);
// Transport parameters QMux forbids (§5.1): every RFC 9000 one but the seven it lists.
const FORBIDDEN_PARAMS = new Set([0x00, 0x02, 0x03, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10]);
/** What we grant: per stream, per connection, streams each way, datagram frame size. */
export const LIMITS = { stream: 1 << 20, connection: 16 << 20, bidi: 100, uni: 256, datagram: DEFAULT_RECORD_SIZE };
const SEND_BUFFER = 1 << 20;
const DATAGRAM_QUEUE = 64; // received datagrams the application has not read yet; more are dropped (§6)

/** A reset stream (RESET_STREAM / STOP_SENDING), shaped like the browser's WebTransportError. */
export class StreamError extends Error {
  constructor(code, message = `stream reset with code ${code}`) {
    super(message);
    Object.assign(this, { name: "WebTransportError", source: "stream", streamErrorCode: code });
  }
}
/** The end of the session: `code` is the QUIC transport or application code. */
export class SessionError extends Error {
  constructor(code, reason, remote) {
    super(`${remote ? "peer closed" : "closed"} the QMux session (${code})${reason ? `: ${reason}` : ""}`);
    Object.assign(this, { name: "WebTransportError", source: "session", code, reason, remote });
  }
}
/** A broken rule of QMux or QUIC: the session is closed with `code`. */
class Violation extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

// ---- wire --------------------------------------------------------------------------------------

/** Appends the QUIC varint (RFC 9000 §16) of `v` (a Number or BigInt below 2^62): 2 bits of length. */
export function putVarint(out, v) {
  const n = BigInt(v);
  const len = n < 64n ? 1 : n < 16384n ? 2 : n < 1n << 30n ? 4 : 8;
  for (let i = len - 1; i >= 0; i--) out.push(Number((n >> BigInt(8 * i)) & 0xffn));
  out[out.length - len] |= { 1: 0, 2: 0x40, 4: 0x80, 8: 0xc0 }[len];
  return out;
}

/** A cursor over one record's Frames; running past the end is FRAME_ENCODING_ERROR (§3.2). */
class Reader {
  constructor(bytes) { this.b = bytes; this.p = 0; }
  left() { return this.b.length - this.p; }
  bytes(n) {
    if (typeof n !== "number" || n > this.left()) throw new Violation(ERRORS.FRAME_ENCODING_ERROR, "a frame runs past its record");
    return this.b.subarray(this.p, (this.p += n));
  }
  /** A varint: a Number, or a BigInt when it is above 2^53 - 1. */
  vi() {
    const first = this.b[this.p];
    const b = this.bytes(first === undefined ? 1 : 1 << (first >> 6));
    let v = BigInt(b[0] & 0x3f);
    for (let i = 1; i < b.length; i++) v = (v << 8n) | BigInt(b[i]);
    return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
  }
  /** A varint that must be a Number (offsets, lengths, counts, stream IDs): else `code`. */
  num(code = ERRORS.FRAME_ENCODING_ERROR) {
    const v = this.vi();
    if (typeof v !== "number") throw new Violation(code, `value ${v} out of range`);
    return v;
  }
}

/** One frame: each field a varint, or (a Uint8Array) its bytes as they are. */
function frame(...fields) {
  const head = [];
  const tail = fields.at(-1) instanceof Uint8Array ? fields.pop() : new Uint8Array(0);
  for (const f of fields) putVarint(head, f);
  const out = new Uint8Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}

function encodeParams(p) {
  const out = [];
  const put = (id, v) => { const val = putVarint([], v); putVarint(out, id); putVarint(out, val.length); out.push(...val); };
  put(0x04, p.connection); put(0x05, p.stream); put(0x06, p.stream); put(0x07, p.stream);
  put(0x08, p.bidi); put(0x09, p.uni); put(0x20, p.datagram); put(TP_MAX_RECORD_SIZE, DEFAULT_RECORD_SIZE);
  return out;
}

/** The peer's transport parameters (RFC 9000 §18); forbidden ones and a small record size close (§5.1, §5.2). */
function decodeParams(bytes) {
  const r = new Reader(bytes);
  const p = { connection: 0, bidiLocal: 0, bidiRemote: 0, uni: 0, bidi: 0, uniStreams: 0, datagram: 0, recordSize: DEFAULT_RECORD_SIZE };
  const seen = new Set();
  const fail = (m) => { throw new Violation(ERRORS.TRANSPORT_PARAMETER_ERROR, m); };
  while (r.left()) {
    const id = r.vi();
    const value = new Reader(r.bytes(r.num()));
    if (seen.has(id)) fail(`transport parameter 0x${id.toString(16)} twice`);
    seen.add(id);
    // qmux-01 §5.1: a prohibited transport parameter MUST close with TRANSPORT_PARAMETER_ERROR.
    if (FORBIDDEN_PARAMS.has(id)) fail(`transport parameter 0x${id.toString(16)} is not allowed in QMux`);
    const key = { 4: "connection", 5: "bidiLocal", 6: "bidiRemote", 7: "uni", 8: "bidi", 9: "uniStreams", 0x20: "datagram" }[id];
    if (!key && id !== TP_MAX_RECORD_SIZE) continue; // unknown: ignored (§5.1)
    const v = value.vi();
    if (value.left()) fail("a transport parameter longer than its value");
    const n = typeof v === "bigint" ? Number.MAX_SAFE_INTEGER : v;
    // qmux-01 §5.2: a max_record_size below the initial value MUST close with TRANSPORT_PARAMETER_ERROR.
    if (id === TP_MAX_RECORD_SIZE) { if (n < DEFAULT_RECORD_SIZE) fail(`max_record_size ${n} below ${DEFAULT_RECORD_SIZE}`); p.recordSize = n; }
    else p[key] = n;
  }
  return p;
}

// ---- the session -------------------------------------------------------------------------------

/**
 * Opens a WebSocket to `url` (https -> wss, http -> ws) offering `qmux-01.<p>` for each
 * application protocol `p`, and runs a client QMux session over it.
 */
export function connectWebSocket(url, protocols, { WebSocketImpl = globalThis.WebSocket } = {}) {
  const u = new URL(url);
  u.protocol = u.protocol === "https:" || u.protocol === "wss:" ? "wss:" : "ws:";
  if (!WebSocketImpl) throw new Error("this runtime has no WebSocket");
  return new QmuxSession(new WebSocketImpl(u.href, protocols.map((p) => `qmux-01.${p}`)), { protocols });
}

/**
 * One QMux session over `socket` (a WebSocket, or anything with its send/close/events).
 * `role` "client" opens even stream IDs, "server" odd ones (RFC 9000 §2.1). `protocols`: the
 * application protocols we offered; the one the peer chose (without `qmux-01.`) is `protocol`.
 */
export class QmuxSession {
  constructor(socket, { role = "client", protocols = null, limits = LIMITS } = {}) {
    Object.assign(this, { socket, role, protocols, limits, protocol: "", error: null, peer: null });
    this.server = role === "server" ? 1 : 0;
    this.streams = new Map(); // stream ID -> state, while either half is open
    this.next = { bidi: 0, uni: 0 }; // our next stream index each way
    this.peerNext = { bidi: 0, uni: 0 }; // the peer's next stream index each way
    this.grant = { bidi: limits.bidi, uni: limits.uni, bidiDone: 0, uniDone: 0 }; // MAX_STREAMS we gave
    this.sent = 0; // stream bytes we sent (connection flow control)
    this.recv = { total: 0, consumed: 0, max: limits.connection }; // stream bytes the peer sent
    this.waiters = []; // resolved on anything that can unblock a sender
    this.ready = new Promise((ok, no) => (this.readyDone = { ok, no }));
    this.closed = new Promise((ok, no) => (this.closedDone = { ok, no }));
    this.ready.catch(() => {});
    this.closed.catch(() => {});
    const incoming = () => { let c; return [new ReadableStream({ start: (ctl) => (c = ctl) }), () => c]; };
    let bidi, uni, dg;
    [this.incomingBidirectionalStreams, bidi] = incoming();
    [this.incomingUnidirectionalStreams, uni] = incoming();
    this.incoming = { bidi, uni };
    const dgrams = new ReadableStream({ start: (c) => (dg = c) }, { highWaterMark: DATAGRAM_QUEUE });
    this.datagrams = {
      readable: dgrams, maxDatagramSize: 0,
      writable: new WritableStream({ write: (d) => this.sendDatagram(d) }),
    };
    this.dgram = () => dg;
    socket.binaryType = "arraybuffer";
    const on = (type, f) => socket.addEventListener(type, f);
    on("message", (e) => this.onMessage(e.data));
    on("close", (e) => this.end(new SessionError(e.code ?? 1006, e.reason || "the WebSocket closed", true)));
    on("error", () => this.end(new SessionError(1006, this.opened ? "the WebSocket failed"
      : `the WebSocket did not open (nothing there, or the server refused ${this.protocols ? this.protocols.map((p) => `qmux-01.${p}`).join(", ") : "the upgrade"})`, true)));
    if (socket.readyState === 1) this.onOpen(); else on("open", () => this.onOpen());
  }

  onOpen() {
    this.opened = true;
    const chosen = this.socket.protocol ?? "";
    if (this.protocols) {
      if (!chosen.startsWith("qmux-01.") || !this.protocols.includes(chosen.slice(8))) {
        return this.fail(ERRORS.PROTOCOL_VIOLATION, `the server chose subprotocol "${chosen}", not qmux-01.{${this.protocols}}`);
      }
    }
    this.protocol = chosen.replace(/^qmux-01\./, "");
    // qmux-01 §4.2: QX_TRANSPORT_PARAMETERS MUST be sent as soon as the transport can send.
    const params = encodeParams(this.limits);
    this.send(frame(TP_FRAME, params.length, new Uint8Array(params)));
  }

  /** Sends one record (one WebSocket message) of `bytes` frames. */
  send(bytes) {
    if (this.error) return;
    try { this.socket.send(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)); } catch (e) { this.end(new SessionError(1006, String(e?.message ?? e), false)); }
  }
  notify() { for (const w of this.waiters.splice(0)) w(); }
  changed() { return new Promise((r) => this.waiters.push(r)); }
  /** Waits while the socket holds more than SEND_BUFFER unsent bytes (no event says when it drains). */
  async drained() {
    while (!this.error && (this.socket.bufferedAmount ?? 0) > SEND_BUFFER) await new Promise((r) => setTimeout(r, 5));
  }

  onMessage(data) {
    if (this.error) return;
    try {
      // qmux-01 is binary only: a text message cannot be a record.
      if (typeof data === "string") throw new Violation(ERRORS.PROTOCOL_VIOLATION, "a text WebSocket message");
      const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
      // qmux-01 §5.2: a record over our max_record_size MUST close with FRAME_ENCODING_ERROR.
      if (bytes.length > DEFAULT_RECORD_SIZE) throw new Violation(ERRORS.FRAME_ENCODING_ERROR, `a record of ${bytes.length} bytes`);
      const r = new Reader(bytes);
      while (r.left() && !this.error) this.onFrame(r);
    } catch (e) {
      if (e instanceof Violation) this.fail(e.code, e.message);
      else this.fail(ERRORS.INTERNAL_ERROR, String(e?.message ?? e));
    }
  }

  onFrame(r) {
    const type = r.vi();
    if (type === 0x00) return; // PADDING
    const first = !this.peer;
    // qmux-01 §4.2: the first frame MUST be QX_TRANSPORT_PARAMETERS, and only the first.
    if (first !== (type === TP_FRAME)) throw new Violation(ERRORS.TRANSPORT_PARAMETER_ERROR, first ? `frame 0x${type.toString(16)} before QX_TRANSPORT_PARAMETERS` : "a second QX_TRANSPORT_PARAMETERS");
    if (type === TP_FRAME) return this.onParams(decodeParams(r.bytes(r.num())));
    if (type === PING_REQUEST) return this.send(frame(PING_RESPONSE, r.vi())); // §4.3: echo
    if (type === PING_RESPONSE) return void r.vi();
    // qmux-01 §4: a prohibited frame MUST close with FRAME_ENCODING_ERROR (as MUST an unknown one, RFC 9000 §12.4).
    if (typeof type !== "number" || PROHIBITED.has(type)) throw new Violation(ERRORS.FRAME_ENCODING_ERROR, `frame type 0x${type.toString(16)} is not allowed in QMux`);
    if (type >= 0x08 && type <= 0x0f) return this.onStream(type, r);
    switch (type) {
      case 0x04: return this.onReset(r.num(), r.vi(), r.num(ERRORS.FINAL_SIZE_ERROR));
      case 0x05: return this.onStopSending(r.num(), r.vi());
      case 0x10: this.peer.connection = Math.max(this.peer.connection, r.num(ERRORS.FLOW_CONTROL_ERROR)); return this.notify();
      case 0x11: return this.onMaxStreamData(r.num(), r.num(ERRORS.FLOW_CONTROL_ERROR));
      case 0x12: case 0x13: {
        const max = r.vi();
        if (typeof max !== "number" || max > 2 ** 60) throw new Violation(ERRORS.FRAME_ENCODING_ERROR, "MAX_STREAMS over 2^60"); // RFC 9000 §19.11
        const k = type === 0x12 ? "bidi" : "uniStreams";
        this.peer[k] = Math.max(this.peer[k], max);
        return this.notify();
      }
      case 0x14: case 0x16: case 0x17: return void r.vi(); // *_BLOCKED: informational
      case 0x15: r.vi(); return void r.vi();
      case 0x1c: case 0x1d: {
        const code = r.vi();
        if (type === 0x1c) r.vi(); // the frame type that caused it
        const reason = new TextDecoder().decode(r.bytes(r.num()));
        return this.end(new SessionError(code, reason, true), type === 0x1d ? { closeCode: Number(code), reason } : null);
      }
      case 0x30: case 0x31: return this.onDatagram(r.bytes(type === 0x31 ? r.num() : r.left()), type);
      default: throw new Violation(ERRORS.FRAME_ENCODING_ERROR, `unknown frame type 0x${type.toString(16)}`);
    }
  }

  onParams(p) {
    this.peer = p;
    this.datagrams.maxDatagramSize = Math.max(0, Math.min(p.datagram, p.recordSize) - 3);
    this.notify();
    this.readyDone.ok();
  }

  // ---- streams ---------------------------------------------------------------------------------

  /** Stream ID parts (RFC 9000 §2.1): bit 0 initiator (1 = server), bit 1 unidirectional. */
  kind(id) { return { local: (id & 1) === this.server, uni: (id & 2) !== 0, index: Math.floor(id / 4) }; }

  /** A new stream's state; `readable` / `writable` only for the halves it has. */
  newStream(id) {
    const { local, uni } = this.kind(id);
    const st = {
      id, local, uni, sendOffset: 0, sendMax: 0, sendDone: uni && !local, // a peer's uni stream: nothing to send
      recvOffset: 0, recvMax: this.limits.stream, consumed: 0, finalSize: null, recvDone: uni && local,
      queue: [], wake: null, failed: false, stopped: false,
    };
    if (!st.sendDone) {
      if (this.peer) st.sendMax = uni ? this.peer.uni : local ? this.peer.bidiRemote : this.peer.bidiLocal;
      st.writable = new WritableStream({
        start: (c) => (st.wctl = c),
        write: (chunk) => this.write(st, chunk),
        close: () => this.finish(st),
        abort: (reason) => this.reset(st, reason?.streamErrorCode ?? 0),
      });
    }
    if (!st.recvDone) {
      // The stream's own queue holds what arrived; a chunk is handed over when the reader asks
      // (highWaterMark 0), so what was handed over is what was consumed, and its window returns.
      st.readable = new ReadableStream({
        start: (c) => (st.rctl = c),
        pull: () => this.pull(st),
        cancel: (reason) => this.stopSending(st, reason?.streamErrorCode ?? 0),
      }, { highWaterMark: 0 });
    }
    this.streams.set(id, st);
    return st;
  }

  /** Opens our next stream of `dir` once the peer's MAX_STREAMS allows it. */
  async open(dir) {
    for (;;) {
      if (this.error) throw this.error;
      const limit = this.peer ? (dir === "bidi" ? this.peer.bidi : this.peer.uniStreams) : 0;
      if (this.next[dir] < limit) break;
      if (this.peer && this.blocked?.[dir] !== limit) this.send(frame(dir === "bidi" ? 0x16 : 0x17, limit)); // STREAMS_BLOCKED
      (this.blocked ??= {})[dir] = limit;
      await this.changed();
    }
    const id = this.next[dir]++ * 4 + (dir === "uni" ? 2 : 0) + this.server;
    return this.newStream(id);
  }
  async createBidirectionalStream() { const st = await this.open("bidi"); return { readable: st.readable, writable: st.writable }; }
  async createUnidirectionalStream() { return (await this.open("uni")).writable; }

  /** The state of stream `id` for a frame that arrived on it; null if it is already closed. */
  stream(id, { receiving }) {
    const st = this.streams.get(id);
    const { local, uni, index } = this.kind(id);
    const dir = uni ? "uni" : "bidi";
    if (receiving && local && uni) throw new Violation(ERRORS.STREAM_STATE_ERROR, `stream ${id} is send-only`);
    if (!receiving && !local && uni) throw new Violation(ERRORS.STREAM_STATE_ERROR, `stream ${id} is receive-only`);
    if (st) return st;
    if (local) {
      if (index >= this.next[dir]) throw new Violation(ERRORS.STREAM_STATE_ERROR, `stream ${id} is not open`);
      return null;
    }
    if (index < this.peerNext[dir]) return null; // closed already
    // RFC 9000 §4.6: a stream beyond the limit we gave MUST close with STREAM_LIMIT_ERROR.
    if (index >= this.grant[dir]) throw new Violation(ERRORS.STREAM_LIMIT_ERROR, `stream ${id} over MAX_STREAMS ${this.grant[dir]}`);
    let opened; // RFC 9000 §3.2: opening a stream opens every lower one of its type
    while (this.peerNext[dir] <= index) {
      opened = this.newStream(this.peerNext[dir]++ * 4 + (uni ? 2 : 0) + (1 - this.server));
      this.incoming[dir]().enqueue(uni ? opened.readable : { readable: opened.readable, writable: opened.writable });
    }
    return opened;
  }

  onStream(type, r) {
    const id = r.num();
    const offset = type & 0x04 ? r.num(ERRORS.FLOW_CONTROL_ERROR) : 0;
    const data = r.bytes(type & 0x02 ? r.num() : r.left());
    const fin = (type & 0x01) !== 0;
    const st = this.stream(id, { receiving: true });
    const end = offset + data.length;
    if (st && st.finalSize !== null) {
      // RFC 9000 §4.5: data past the final size, or another final size, is FINAL_SIZE_ERROR.
      if (end > st.finalSize || (fin && end !== st.finalSize)) throw new Violation(ERRORS.FINAL_SIZE_ERROR, `stream ${id} past its final size`);
      return;
    }
    if (st) {
      // qmux-01 §4.1: data not following the stream's previous data MUST close with PROTOCOL_VIOLATION.
      if (offset !== st.recvOffset) throw new Violation(ERRORS.PROTOCOL_VIOLATION, `stream ${id} data at ${offset}, expected ${st.recvOffset}`);
      // RFC 9000 §4.1: data past the window we gave MUST close with FLOW_CONTROL_ERROR.
      if (end > st.recvMax) throw new Violation(ERRORS.FLOW_CONTROL_ERROR, `stream ${id} over its window ${st.recvMax}`);
    }
    this.recv.total += data.length; // QMux never sends bytes twice: all of it is new
    if (this.recv.total > this.recv.max) throw new Violation(ERRORS.FLOW_CONTROL_ERROR, `connection over its window ${this.recv.max}`);
    if (st) st.recvOffset = end;
    if (!st || st.stopped) return this.consume(data.length); // nobody reads it: its window returns at once
    if (data.length) st.queue.push(data.slice());
    if (fin) {
      st.finalSize = end;
      this.recvDone(st);
    }
    this.wake(st);
  }
  wake(st) { const w = st.wake; st.wake = null; w?.(); }

  /** The reader wants a chunk: the next one once there is one; the end after the last. */
  async pull(st) {
    while (!st.queue.length && st.finalSize === null && !st.failed) await new Promise((r) => (st.wake = r));
    if (st.failed) return;
    const chunk = st.queue.shift();
    if (chunk) {
      st.rctl.enqueue(chunk);
      this.credit(st, chunk.length);
    }
    if (!st.queue.length && st.finalSize !== null) st.rctl.close();
  }

  /** `n` more bytes of `st` were read: its window and the connection's are handed back. */
  credit(st, n) {
    st.consumed += n;
    this.consume(n);
    if (st.finalSize === null && st.recvMax - st.consumed < this.limits.stream / 2) {
      st.recvMax = st.consumed + this.limits.stream;
      this.send(frame(0x11, st.id, st.recvMax)); // MAX_STREAM_DATA
    }
  }
  consume(n) {
    this.recv.consumed += n;
    if (this.recv.max - this.recv.consumed < this.limits.connection / 2) {
      this.recv.max = this.recv.consumed + this.limits.connection;
      this.send(frame(0x10, this.recv.max)); // MAX_DATA
    }
  }

  async write(st, chunk) {
    let data = chunk instanceof Uint8Array ? chunk : new Uint8Array(chunk);
    while (data.length) {
      if (st.sendError || this.error) throw st.sendError ?? this.error;
      await this.drained();
      const room = Math.min(st.sendMax - st.sendOffset, (this.peer?.connection ?? 0) - this.sent);
      if (room <= 0) {
        const at = st.sendMax <= st.sendOffset ? `s${st.sendMax}` : `c${this.peer?.connection}`;
        if (this.peer && st.blocked !== at) this.send(st.sendMax <= st.sendOffset ? frame(0x15, st.id, st.sendMax) : frame(0x14, this.peer.connection)); // *_BLOCKED
        st.blocked = at;
        await this.changed();
        continue;
      }
      // qmux-01 §5.2: a record MUST NOT exceed the peer's max_record_size; 1 + 8 + 8 + 4 bytes of header.
      const n = Math.min(data.length, room, this.peer.recordSize - 21);
      this.send(frame(0x0e, st.id, st.sendOffset, n, data.subarray(0, n))); // STREAM with OFF and LEN
      st.sendOffset += n;
      this.sent += n;
      data = data.subarray(n);
    }
  }
  finish(st) {
    if (this.error) throw this.error;
    if (st.sendError) throw st.sendError;
    this.send(frame(0x0f, st.id, st.sendOffset, 0)); // STREAM with OFF, LEN and FIN
    this.sendDone(st);
  }
  reset(st, code) {
    if (st.sendDone) return;
    this.send(frame(0x04, st.id, code, st.sendOffset)); // RESET_STREAM
    st.sendError = new StreamError(code);
    this.sendDone(st);
  }
  /** The reader cancelled: what sat unread is released, and the peer is asked to stop. */
  stopSending(st, code) {
    st.failed = true;
    this.consume(st.recvOffset - st.consumed);
    st.consumed = st.recvOffset;
    st.queue = [];
    if (st.recvDone) return;
    st.stopped = true;
    this.send(frame(0x05, st.id, code)); // STOP_SENDING
    this.recvDone(st);
  }

  onReset(id, code, finalSize) {
    const st = this.stream(id, { receiving: true });
    if (!st) return;
    // RFC 9000 §4.5: a final size below what arrived, or unlike an earlier one, is FINAL_SIZE_ERROR.
    if (finalSize < st.recvOffset || (st.finalSize !== null && st.finalSize !== finalSize)) throw new Violation(ERRORS.FINAL_SIZE_ERROR, `stream ${id} reset at ${finalSize}`);
    if (st.recvDone) return;
    this.recv.total += finalSize - st.recvOffset;
    if (this.recv.total > this.recv.max) throw new Violation(ERRORS.FLOW_CONTROL_ERROR, "a reset over the connection window");
    this.consume(finalSize - st.consumed); // the unread rest is dropped, and its window returns
    Object.assign(st, { finalSize, recvOffset: finalSize, consumed: finalSize, queue: [], failed: true });
    st.rctl.error(new StreamError(Number(code)));
    this.wake(st);
    this.recvDone(st);
  }
  onStopSending(id, code) {
    const st = this.stream(id, { receiving: false });
    if (!st || st.sendDone) return;
    const err = new StreamError(Number(code), `the peer stopped reading (code ${code})`);
    st.wctl.error(err);
    this.reset(st, Number(code)); // RFC 9000 §3.5: answer with RESET_STREAM
    st.sendError = err;
    this.notify();
  }
  onMaxStreamData(id, max) {
    const st = this.stream(id, { receiving: false });
    if (st && max > st.sendMax) { st.sendMax = max; this.notify(); }
  }
  sendDone(st) { st.sendDone = true; this.retire(st); }
  recvDone(st) { st.recvDone = true; this.retire(st); }
  /** Forgets a stream whose halves are both done; a peer's stream frees room for another. */
  retire(st) {
    if (!st.sendDone || !st.recvDone || !this.streams.delete(st.id) || st.local) return;
    const dir = st.uni ? "uni" : "bidi";
    const done = ++this.grant[`${dir}Done`];
    const window = st.uni ? this.limits.uni : this.limits.bidi;
    if (this.grant[dir] - done <= window / 2) {
      this.grant[dir] = done + window;
      this.send(frame(st.uni ? 0x13 : 0x12, this.grant[dir])); // MAX_STREAMS
    }
  }

  // ---- datagrams and the end -------------------------------------------------------------------

  onDatagram(data, type) {
    // RFC 9221 §3: a DATAGRAM larger than we allow is a PROTOCOL_VIOLATION.
    const size = data.length + 1 + (type === 0x31 ? putVarint([], data.length).length : 0);
    if (size > this.limits.datagram) throw new Violation(ERRORS.PROTOCOL_VIOLATION, `a DATAGRAM frame of ${size} bytes`);
    const c = this.dgram();
    if (c.desiredSize > 0) c.enqueue(data.slice()); // unread datagrams past the queue are dropped (§6)
  }
  sendDatagram(d) {
    const data = d instanceof Uint8Array ? d : new Uint8Array(d);
    if (this.error) throw this.error;
    if (data.length > this.datagrams.maxDatagramSize) return; // too big or not allowed: dropped, as QUIC would
    this.send(frame(0x31, data.length, data));
  }

  /** Closes with APPLICATION_CLOSE (`closeCode`, `reason`); `closed` resolves with them. */
  close({ closeCode = 0, reason = "" } = {}) {
    if (this.error) return;
    const text = new TextEncoder().encode(reason).subarray(0, 1024);
    this.send(frame(0x1d, closeCode, text.length, text));
    this.end(new SessionError(closeCode, reason, false), { closeCode, reason });
  }

  /** A violation by the peer: CONNECTION_CLOSE with `code` (qmux-01 §7), then the socket closes. */
  fail(code, reason) {
    if (this.error) return;
    const text = new TextEncoder().encode(reason).subarray(0, 1024);
    this.send(frame(0x1c, code, 0, text.length, text));
    this.end(new SessionError(code, reason, false));
  }

  /** Ends the session once (§7: no draining): every stream and waiter fails with `error`. */
  end(error, graceful = null) {
    if (this.error) return;
    this.error = error;
    try { this.socket.close(1000); } catch {}
    for (const st of this.streams.values()) {
      st.failed = true;
      this.wake(st);
      if (!st.recvDone) try { st.rctl.error(error); } catch {}
      if (!st.sendDone) try { st.wctl.error(error); } catch {}
    }
    this.streams.clear();
    for (const c of [this.incoming.bidi(), this.incoming.uni(), this.dgram()]) try { c.error(error); } catch {}
    this.notify();
    this.readyDone.no(error);
    if (graceful) this.closedDone.ok(graceful); else this.closedDone.no(error);
  }
}
