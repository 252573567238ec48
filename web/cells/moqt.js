// Cells for OpenMOQ's @moqt/transport (sans-I/O core) + @moqt/webtransport (its WebTransport
// binding, `MoqtConnection`), bundled by scripts/install-browser.sh into $MOQ_BROWSER/dist/moqt.js.
//
// 0.5.7 speaks drafts 14, 16 and 18 (its WIRED_DRAFTS). The cell pins the draft twice: the
// WebTransport protocol it offers (`moqt-16`, `moqt-18`; none for draft 14, whose version is
// negotiated in CLIENT_SETUP) and `new MoqtConnection(draft)`, which picks the codec and the
// stream topology (one bidi control stream for 14/16, the uni SETUP pair plus a bidi stream per
// request for 18).
import { varint } from "@moqt/transport";
import { MoqtConnection } from "@moqt/webtransport";
import {
  checkStream,
  compareReceived,
  fail,
  fields,
  hexToBytes,
  install,
  left,
  listing,
  pubsubPlan,
  sleep,
  uniqueNamespace,
  within,
} from "./common.js";

const DRAFTS = [14, 16, 18];
const enc = new TextEncoder();
const dec = new TextDecoder();

const tuple = (parts) => parts.map((p) => enc.encode(p));
const untuple = (t) => t.map((p) => dec.decode(p));
const sameTuple = (a, b) => a.length === b.length && a.every((x, i) => dec.decode(x) === b[i]);

/** Connects at `args.draft`: WebTransport with a pinned certificate, then SETUP. */
async function connect(args, label) {
  const draft = args.draft;
  if (!DRAFTS.includes(draft)) fail(`@moqt/webtransport 0.5.7 does not speak draft ${draft} (it speaks ${DRAFTS.join(", ")})`);
  const protocols = draft === 14 ? [] : [`moqt-${draft}`];
  const wt = new WebTransport(args.url, {
    serverCertificateHashes: [{ algorithm: "sha-256", value: hexToBytes(args.fingerprint) }],
    protocols,
    allowPooling: false,
  });
  wt.closed.catch(() => {});
  await within(args.timeoutMs, `${label}: WebTransport to ${args.url}`, wt.ready);
  if (draft !== 14 && wt.protocol !== `moqt-${draft}`) {
    wt.close();
    fail(`${label}: server selected WebTransport protocol ${JSON.stringify(wt.protocol)}, offered ${JSON.stringify(protocols)}`);
  }
  const conn = new MoqtConnection(draft);
  const state = { conn, wt, label, draft, errors: [], closed: undefined, messages: [] };
  conn.onMessage = (msg) => state.messages.push(msg);
  conn.onError = (e) => state.errors.push(`${label}: ${e?.message ?? e}`);
  conn.onClose = (code, reason) => {
    state.closed = `${label}: session closed (code ${code}, reason ${JSON.stringify(reason ?? "")})`;
  };
  await within(args.timeoutMs, `${label}: SETUP at draft ${draft}`,
    conn.connect(wt, { maxRequestId: varint(100n), implementation: "moqt-rs browser interop (@moqt 0.5.7)" }));
  return state;
}

/** What went wrong on a connection so far, for `detail`. */
function trouble(...states) {
  return states.flatMap((s) => [...s.errors, ...(s.closed ? [s.closed] : [])]).join("; ");
}

function close(state) {
  try {
    void state.conn.close(varint(0n), "done").catch(() => {});
  } catch {
    // already closed
  }
  try {
    state.wt.close();
  } catch {
    // already closed
  }
}

/** Resolves with the response (OK or error) to request `requestId` seen by `onMessage`. */
async function responseTo(state, requestId) {
  for (;;) {
    const msg = state.messages.find((m) => m.requestId === requestId && /_OK$|_ERROR$/.test(m.type));
    if (msg) return msg;
    if (state.closed) fail(state.closed);
    await sleep(5);
  }
}

/** PUBLISH_NAMESPACE and wait for the relay's answer. */
async function announce(state, nsParts, deadline) {
  const requestId = await state.conn.publishNamespace(tuple(nsParts));
  const answer = responseTo(state, requestId);
  const msg = await within(left(deadline), `${state.label}: answer to PUBLISH_NAMESPACE ${nsParts.join("/")}`, answer);
  if (/ERROR/.test(msg.type)) fail(`${state.label}: PUBLISH_NAMESPACE refused: ${msg.type} ${msg.errorCode ?? ""} ${msg.reasonPhrase ?? msg.reason ?? ""}`);
  return requestId;
}

/**
 * Serves SUBSCRIBEs for `nsParts` + `trackName` on a publisher connection; resolves the first
 * accepted one as { requestId, alias }.
 */
function serveSubscribe(state, nsParts, trackName) {
  let alias = 1n;
  return new Promise((resolve) => {
    state.conn.onSubscribe = (requestId, ns, name) => {
      const ours = sameTuple(ns, nsParts) && dec.decode(name) === trackName;
      if (!ours) {
        void state.conn.rejectSubscribe(requestId, 0x4n, "no such track").catch(() => {});
        return;
      }
      const a = alias++;
      state.conn.acceptSubscribe(requestId, a).then(
        () => resolve({ requestId, alias: a }),
        (e) => state.errors.push(`${state.label}: acceptSubscribe: ${e?.message ?? e}`),
      );
    };
  });
}

/** Writes one group (`texts` as objects 0..n-1) on its own subgroup stream. */
async function writeGroup(state, alias, group, texts) {
  const opts = state.draft === 18 ? { firstObject: true } : {};
  const sid = await state.conn.openSubgroup(alias, BigInt(group), 0n, opts);
  for (let o = 0; o < texts.length; o++) await state.conn.sendObject(sid, BigInt(o), enc.encode(texts[o]));
  await state.conn.closeSubgroup(sid);
}

/** SUBSCRIBE with an object sink; objects land in `received` as { group, object, text }. */
async function subscribe(state, nsParts, trackName, received, deadline) {
  const sub = await within(left(deadline), `${state.label}: SUBSCRIBE_OK for ${nsParts.join("/")} track ${trackName}`,
    state.conn.subscribeTrack(tuple(nsParts), enc.encode(trackName), {
      onObject: (obj) => {
        if (obj.kind === "gap") return;
        received.push({ group: Number(obj.groupId), object: Number(obj.objectId), text: dec.decode(obj.payload) });
      },
    }));
  return sub;
}

async function waitFor(what, deadline, done, state) {
  while (!done()) {
    if (performance.now() > deadline) fail(`timed out: ${what}${state && trouble(state) ? `; ${trouble(state)}` : ""}`);
    await sleep(10);
  }
}

async function setup(args) {
  const state = await connect(args, "session");
  const detail = `draft ${state.conn.draftVersion} (WebTransport protocol ${JSON.stringify(state.wt.protocol ?? "")}), session ${state.conn.session.state}`;
  close(state);
  return detail;
}

async function pubsub(args) {
  const deadline = performance.now() + args.timeoutMs - 500;
  const ns = args.namespace ?? uniqueNamespace("pubsub");
  const parts = fields(ns);
  if (parts.length < 2) fail("pubsub needs a namespace of at least two fields (prefix + name)");
  const prefix = parts.slice(0, -1);
  const trackName = args.track ?? "t";
  const plan = pubsubPlan();

  const pub = await connect(args, "publisher");
  const sub = await connect(args, "subscriber");
  try {
    // Subscriber: SUBSCRIBE_NAMESPACE for the prefix (NAMESPACE messages only, option 1).
    const discovered = [];
    sub.conn.onNamespaceMessage = (_rid, msg) => {
      if (msg.type === "NAMESPACE") discovered.push([...prefix, ...untuple(msg.trackNamespaceSuffix)].join("/"));
      else if (msg.type === "PUBLISH_NAMESPACE") discovered.push(untuple(msg.trackNamespace).join("/"));
    };
    const nsRequest = await sub.conn.subscribeNamespace(tuple(prefix), varint(1n));

    // Publisher: announce, then serve the subscription.
    const served = serveSubscribe(pub, parts, trackName);
    await announce(pub, parts, deadline);
    await waitFor(`discovery of ${ns} under prefix ${prefix.join("/")} (saw ${JSON.stringify(discovered)})`, deadline,
      () => discovered.includes(ns), sub);

    const received = [];
    const subscription = await subscribe(sub, parts, trackName, received, deadline);
    const { requestId, alias } = await within(left(deadline), "the relay's SUBSCRIBE reaching the publisher", served);

    const groups = [];
    for (const p of plan) (groups[p.group] ??= []).push(p.text);
    // One group at a time, each once the previous one arrived, so "in order" checks the
    // delivery of each group, not the scheduling of concurrent group streams.
    let written = 0;
    for (let g = 0; g < groups.length; g++) {
      const want = written;
      await waitFor(`group ${g - 1} to arrive before writing group ${g} (have ${listing(received)})`, deadline,
        () => received.length >= want, sub);
      await writeGroup(pub, alias, g, groups[g]);
      written += groups[g].length;
    }
    await waitFor(`${plan.length} objects (have ${received.length}: ${listing(received)})`, deadline,
      () => received.length >= plan.length, sub);
    await sleep(100); // a duplicate would show up now
    await pub.conn.publishDone(requestId, varint(2n), "track ended").catch(() => {});
    await subscription.unsubscribe().catch(() => {});
    const diff = compareReceived(received, plan.map((p) => p.text));
    if (diff) fail(diff);
    // Teardown: end the namespace subscription (UNSUBSCRIBE_NAMESPACE in 14, the stream in
    // 16/18); the sessions must survive it.
    await sub.conn.cancelNamespace(nsRequest);
    await sleep(300);
    const t = trouble(pub, sub);
    if (t) fail(`all ${received.length} objects in order, but: ${t}`);
    return `discovered ${ns} under ${prefix.join("/")}; ${received.length} objects in order at draft ${args.draft}: ${listing(received)}; SUBSCRIBE_NAMESPACE ended cleanly`;
  } finally {
    close(pub);
    close(sub);
  }
}

async function jsPub(args) {
  const deadline = performance.now() + args.timeoutMs - 500;
  const parts = fields(args.namespace ?? "browser/js-pub");
  const trackName = args.track ?? "t";
  const count = args.count ?? 10;
  const interval = args.intervalMs ?? 200;
  const pub = await connect(args, "publisher");
  try {
    const served = serveSubscribe(pub, parts, trackName);
    await announce(pub, parts, deadline);
    const { requestId, alias } = await within(left(deadline),
      `nobody subscribed to ${parts.join("/")} track ${trackName}`, served);
    for (let i = 0; i < count; i++) {
      if (performance.now() > deadline) fail(`timed out after writing ${i} of ${count} objects`);
      await writeGroup(pub, alias, i, [String(i)]);
      await sleep(interval);
    }
    await sleep(Math.min(1000, left(deadline)));
    await pub.conn.publishDone(requestId, varint(2n), "track ended").catch(() => {});
    await sleep(Math.min(300, left(deadline)));
    const t = trouble(pub);
    if (t) fail(`published ${count} objects, but: ${t}`);
    return `published ${count} objects ("0".."${count - 1}", one per group) on ${parts.join("/")} track ${trackName} at draft ${args.draft}`;
  } finally {
    close(pub);
  }
}

async function jsSub(args) {
  const deadline = performance.now() + args.timeoutMs - 500;
  const parts = fields(args.namespace ?? "browser/js-sub");
  const trackName = args.track ?? "clock";
  const count = args.count ?? 3;
  const sub = await connect(args, "subscriber");
  const errors = [];
  try {
    const received = [];
    // The publisher may not be there yet: retry SUBSCRIBE until it is answered with OK.
    for (;;) {
      try {
        await subscribe(sub, parts, trackName, received, Math.min(deadline, performance.now() + 3000));
        break;
      } catch (e) {
        errors.push(e?.message ?? String(e));
        if (performance.now() > deadline || sub.closed) {
          fail(`no subscription: ${errors.slice(-3).join(" | ")}${trouble(sub) ? `; ${trouble(sub)}` : ""}`);
        }
        await sleep(250);
      }
    }
    await waitFor(`${count} objects (have ${received.length}: ${listing(received)})`, deadline,
      () => received.length >= count, sub);
    const got = received.slice(0, count);
    const problem = checkStream(got, count);
    if (problem) fail(`${problem}; ${listing(received)}`);
    return `received ${got.length} objects of ${parts.join("/")} track ${trackName} at draft ${args.draft}: ${listing(got)}`;
  } finally {
    close(sub);
  }
}

install("moqt", { setup, pubsub, "js-pub": jsPub, "js-sub": jsSub });
