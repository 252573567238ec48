// Shared by the per-library cell bundles (web/cells/moq-net.js, web/cells/moqt.js). Runs in
// the page: the driver calls `window.moqCell(args)` and gets back
// `{ result: "pass" | "fail", detail: string, ... }`.
//
// args: { cell, draft, url, fingerprint, http, namespace, track, count, timeoutMs, intervalMs }

/** The cells every library runs; a library may add its own (moq-net: dev-url). */
export const CELLS = ["setup", "pubsub", "js-pub", "js-sub"];

/** A failure the cell reports as `fail` with this message (not a harness error). */
export class CellFail extends Error {}

export function fail(message) {
  throw new CellFail(message);
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Hex (optionally with ':' separators) to bytes. */
export function hexToBytes(hex) {
  const clean = String(hex).trim().replace(/^0x/, "").replaceAll(":", "");
  if (clean.length !== 64 || /[^0-9a-fA-F]/.test(clean)) {
    fail(`fingerprint must be 32 bytes of hex, got ${JSON.stringify(hex)}`);
  }
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(clean.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/**
 * A QMux session (`Qmux`: @moq/qmux's Session, which the caller bundles) to `args.ws` offering
 * the one subprotocol qmux-01.moqt-N (N = args.draft), open (its `ready` resolved: @moq/net
 * does not wait for it when handed a session), for @moq/net's `transport` option; the driver
 * must have removed WebTransport from the page (--transport ws).
 */
export async function webSocketSession(Qmux, args) {
  if (typeof globalThis.WebTransport !== "undefined") fail("WebTransport is still in the page: the driver did not remove it");
  if (args.draft < 15) fail(`draft ${args.draft} has no WebSocket subprotocol (moqt-N names start at 15)`);
  const alpn = `moqt-${args.draft}`;
  const session = new Qmux(args.ws, { protocols: [alpn], versions: { [alpn]: "qmux-01" }, requireProtocol: true });
  await within(args.timeoutMs, `the WebSocket to ${args.ws} (qmux-01.${alpn})`, session.ready);
  return session;
}

/** Rejects with a CellFail after `ms`, naming `what`. */
export function within(ms, what, promise) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CellFail(`timed out after ${ms} ms: ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Milliseconds left until `deadline` (performance.now() based), at least 1. */
export function left(deadline) {
  return Math.max(1, Math.round(deadline - performance.now()));
}

/** Namespace "a/b/c" to its fields. */
export function fields(namespace) {
  return String(namespace)
    .split("/")
    .filter((f) => f.length > 0);
}

/** A unique namespace for a cell run that did not name one. */
export function uniqueNamespace(cell) {
  const rand = Math.random().toString(36).slice(2, 8);
  return `browser-interop/${cell}-${Date.now().toString(36)}${rand}`;
}

/**
 * The objects pubsub writes: 5 groups holding 1, 2, 3, 1, 2 objects.
 * Returns [{ group, object, text }].
 */
export function pubsubPlan() {
  const plan = [];
  const sizes = [1, 2, 3, 1, 2];
  sizes.forEach((n, group) => {
    for (let object = 0; object < n; object++) plan.push({ group, object, text: `g${group}o${object}` });
  });
  return plan;
}

/**
 * Compares what a subscriber received ([{ group, object, text }]) with what was expected (the
 * texts, in order). Returns undefined when equal, else a description of the difference.
 */
export function compareReceived(received, expected) {
  const texts = received.map((r) => r.text);
  const seen = new Set();
  const dups = texts.filter((t) => (seen.has(t) ? true : (seen.add(t), false)));
  if (dups.length > 0) return `duplicates: ${JSON.stringify(dups)}; received ${JSON.stringify(texts)}`;
  const missing = expected.filter((t) => !seen.has(t));
  const extra = texts.filter((t) => !expected.includes(t));
  if (missing.length > 0 || extra.length > 0) {
    return `missing ${JSON.stringify(missing)}, unexpected ${JSON.stringify(extra)}; received ${JSON.stringify(texts)}`;
  }
  for (let i = 0; i < texts.length; i++) {
    if (texts[i] !== expected[i]) return `out of order: received ${JSON.stringify(texts)}, expected ${JSON.stringify(expected)}`;
  }
  // Locations must increase too (group, then object).
  for (let i = 1; i < received.length; i++) {
    const a = received[i - 1];
    const b = received[i];
    if (b.group < a.group || (b.group === a.group && b.object <= a.object)) {
      return `locations not increasing at ${i}: ${a.group}/${a.object} then ${b.group}/${b.object}`;
    }
  }
  return undefined;
}

/** Checks that js-sub's received objects are `count` distinct, increasing locations. */
export function checkStream(received, count) {
  if (received.length < count) return `received ${received.length} of ${count} objects`;
  const keys = new Set();
  for (let i = 0; i < received.length; i++) {
    const r = received[i];
    const key = `${r.group}/${r.object}`;
    if (keys.has(key)) return `duplicate object ${key}`;
    keys.add(key);
    if (i > 0) {
      const p = received[i - 1];
      if (r.group < p.group || (r.group === p.group && r.object <= p.object)) {
        return `out of order at ${i}: ${p.group}/${p.object} then ${r.group}/${r.object}`;
      }
    }
  }
  return undefined;
}

/** A compact listing of received objects for `detail`. */
export function listing(received, max = 12) {
  const items = received.slice(0, max).map((r) => `${r.group}/${r.object}=${JSON.stringify(r.text)}`);
  if (received.length > max) items.push(`... (${received.length} in all)`);
  return items.join(" ");
}

/**
 * Runs `cells[args.cell](args)` and turns its outcome into the result object: a returned
 * string is a pass with that detail, a CellFail (or any error) a fail.
 */
export async function runCell(cells, args) {
  const cell = cells[args.cell];
  if (!cell) return { result: "fail", detail: `cell ${args.cell} is not implemented for this client` };
  const started = performance.now();
  try {
    const detail = await within(args.timeoutMs, `cell ${args.cell}`, cell(args));
    return { result: "pass", detail: String(detail ?? ""), ms: Math.round(performance.now() - started) };
  } catch (e) {
    const describe = (x) => (x instanceof CellFail ? x.message : `${x?.name ?? "Error"}: ${x?.message ?? String(x)}`);
    // Promise.any (e.g. @moq/net racing WebTransport and WebSocket) hides the causes.
    const message = e instanceof AggregateError
      ? `${describe(e)} (${(e.errors ?? []).map(describe).join("; ")})`
      : describe(e);
    return { result: "fail", detail: message, ms: Math.round(performance.now() - started) };
  }
}

/** Installs `window.moqCell` for the driver. */
export function install(client, cells) {
  globalThis.moqCell = (args) => runCell(cells, args);
  globalThis.moqClient = client;
  globalThis.moqCells = Object.keys(cells);
}
