// pipes.mjs: what the offline moq.js tests share: a WebTransportError where node has none, a
// ReadableStream the test pushes into, and UTF-8 bytes as an array.

globalThis.WebTransportError ??= class extends Error {
  constructor(message, options = {}) { super(message); Object.assign(this, options); }
};

/** A ReadableStream we push into: byte arrays, or (for the stream of streams) anything. */
export function pipe() {
  let c;
  const readable = new ReadableStream({ start: (ctl) => (c = ctl) });
  return { readable, push: (x) => c.enqueue(Array.isArray(x) ? new Uint8Array(x) : x), end: () => c.close() };
}

/** `s` as UTF-8 bytes in an array. */
export const text = (s) => [...new TextEncoder().encode(s)];
