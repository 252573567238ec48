// moq-handles.js: what a moq.js Session hands out: a Subscription and a Fetch (async iterables of
// objects, cancelled by `cancel()`), a Joined subscription (a Joining FETCH's objects, then the
// subscription's), and `property`, an object's Property by type. The Session fills them; they
// hold no wire state of their own beyond their queue.

import { CANCELLED, Buf, Queue } from "./moq-wire.js";

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
      const inner = new Buf(p.value, p.v).kvps().find((q) => q.type === type);
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
