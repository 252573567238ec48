// fake-socket.mjs: an in-memory WebSocket for the offline tests of qmux.js and moq.js.

/** One end of an in-memory WebSocket: `sent` records every message; messages arrive in order. */
export class FakeSocket extends EventTarget {
  constructor(protocol) {
    super();
    Object.assign(this, { protocol, readyState: 1, bufferedAmount: 0, sent: [], peer: null, closeCode: null });
  }
  /** Events reach `on<type>` handlers too, as on a WebSocket. */
  dispatchEvent(ev) {
    this[`on${ev.type}`]?.(ev);
    return super.dispatchEvent(ev);
  }
  send(bytes) {
    if (this.readyState !== 1) throw new Error("socket closed");
    const copy = new Uint8Array(bytes).buffer;
    this.sent.push(new Uint8Array(copy));
    const peer = this.peer;
    if (peer) setTimeout(() => peer.readyState === 1 && peer.dispatchEvent(Object.assign(new Event("message"), { data: copy })));
  }
  close(code = 1000) {
    if (this.readyState !== 1) return;
    if (code !== 1000 && (code < 3000 || code > 4999)) throw new Error(`close code ${code} is not allowed`); // as browsers
    this.readyState = 3;
    this.closeCode = code;
    const ev = () => Object.assign(new Event("close"), { code, reason: "" });
    setTimeout(() => {
      this.dispatchEvent(ev());
      if (this.peer?.readyState === 1) { this.peer.readyState = 3; this.peer.dispatchEvent(ev()); }
    });
  }
  /** Delivers `bytes` as if the peer had sent them (for hand-written records). */
  inject(bytes) { this.dispatchEvent(Object.assign(new Event("message"), { data: new Uint8Array(bytes).buffer })); }
}

/** Two connected FakeSockets that both negotiated `protocol`. */
export function socketPair(protocol = "qmux-01.moqt-19") {
  const a = new FakeSocket(protocol), b = new FakeSocket(protocol);
  a.peer = b;
  b.peer = a;
  return [a, b];
}
