// Cells for @moq/net (moq-dev's browser client), bundled by scripts/install-browser.sh into
// $MOQ_BROWSER/dist/moq-net.js.
//
// @moq/net 0.3.4 speaks moq-transport drafts 14-20 besides moq-lite. The draft is chosen by the
// WebTransport protocols it offers (WT-Available-Protocols): it offers moq-lite-05/04/03, moql,
// moqt-20 .. moqt-15 unless `webtransport.protocols` overrides the list, which is how a cell
// pins one draft. Draft 14 has no protocol name: with no protocol negotiated it sends
// CLIENT_SETUP (type 0x20) listing moq-lite-02, moq-lite-01 and draft-14 (0xff00000e).
// Drafts 15/16 exchange CLIENT_SETUP/SERVER_SETUP on a bidi stream; 17+ SETUP on uni streams.
//
// Over a WebSocket (args.transport "ws"; the driver has removed WebTransport from the page) a
// cell hands @moq/net a QMux session of its own dependency @moq/qmux, offering the single
// subprotocol qmux-01.moqt-N, so the draft is pinned as over WebTransport. (@moq/net's own
// WebSocket offer, used by ws-auto, lists moqt-20 and moqt-18 over qmux-01 and moqt-17..15 over
// any QMux draft, plus moq-lite: the relay picks among those.)
import * as Moq from "@moq/net";
import Qmux from "@moq/qmux";
import {
  CellFail,
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
  webSocketSession,
  within,
} from "./common.js";

const DRAFTS = [14, 15, 16, 17, 18, 19, 20];

function protocolsFor(draft) {
  if (!DRAFTS.includes(draft)) fail(`@moq/net 0.3.4 does not speak draft ${draft} (it speaks ${DRAFTS.join(", ")})`);
  return draft === 14 ? [] : [`moqt-${draft}`];
}

/**
 * Connects at `args.draft`: over WebTransport pinning the relay's certificate hash, WebSocket
 * fallback off; or (args.transport "ws") over a WebSocket to `args.ws` offering only
 * qmux-01.moqt-N.
 */
async function connect(args, label) {
  const url = new URL(args.url);
  const options = args.transport === "ws" ? { transport: await webSocketSession(Qmux, args) } : {
    webtransport: {
      protocols: protocolsFor(args.draft),
      serverCertificateHashes: [{ algorithm: "sha-256", value: hexToBytes(args.fingerprint) }],
    },
    websocket: { enabled: false },
  };
  const connection = await within(args.timeoutMs, `${label}: connect + SETUP at draft ${args.draft} over ${args.transport === "ws" ? `WebSocket ${args.ws}` : "WebTransport"}`,
    Moq.Connection.connect(url, options));
  const want = `moq-transport-${args.draft}`;
  if (connection.version !== want) {
    connection.close();
    fail(`${label}: negotiated ${connection.version}, wanted ${want}`);
  }
  return connection;
}

/** Waits until a peer subscribes to `track` (the relay forwarding a SUBSCRIBE). */
async function waitUsed(track, deadline, what) {
  while (!track.used.peek()) {
    if (performance.now() > deadline) fail(`no SUBSCRIBE reached the publisher (${what})`);
    await sleep(10);
  }
}

/** Polls `done` until true, failing at `deadline`. */
async function waitUntil(done, deadline, what, received) {
  while (!done()) {
    if (performance.now() > deadline) fail(`timed out waiting for ${what}; received ${listing(received)}`);
    await sleep(5);
  }
}

/** Reads objects of `subscriber` until `count` arrived; returns [{ group, object, text }]. */
async function readObjects(subscriber, count, deadline, received) {
  const decoder = new TextDecoder();
  while (received.length < count) {
    const group = await within(left(deadline), `waiting for a group (have ${received.length} of ${count} objects)`,
      subscriber.recvGroup());
    if (!group) break;
    for (;;) {
      const frame = await within(left(deadline), `reading group ${group.sequence}`, group.readFrameSequence());
      if (!frame) break;
      received.push({ group: group.sequence, object: frame.sequence, text: decoder.decode(frame.payload) });
      if (received.length >= count) break;
    }
  }
  return received;
}

async function setup(args) {
  const connection = await connect(args, "session");
  const detail = `${connection.version} over ${args.transport === "ws" ? `WebSocket ${args.ws} (qmux-01.moqt-${args.draft})` : connection.url}`;
  connection.close();
  return detail;
}

async function pubsub(args) {
  const deadline = performance.now() + args.timeoutMs - 500;
  const ns = args.namespace ?? uniqueNamespace("pubsub");
  const parts = fields(ns);
  if (parts.length < 2) fail("pubsub needs a namespace of at least two fields (prefix + name)");
  const prefix = Moq.Path.from(...parts.slice(0, -1));
  const path = Moq.Path.from(...parts);
  const trackName = args.track ?? "t";
  const plan = pubsubPlan();

  const pub = await connect(args, "publisher");
  const sub = await connect(args, "subscriber");
  try {
    // Subscriber first: SUBSCRIBE_NAMESPACE for the prefix, so the namespace is discovered
    // through the relay rather than assumed.
    const announced = sub.announced(prefix);

    const broadcast = new Moq.Broadcast.Producer();
    const track = broadcast.createTrack(trackName);
    pub.publish(path, broadcast);

    let found;
    while (!found) {
      const entry = await within(left(deadline), `NAMESPACE/PUBLISH_NAMESPACE for ${path} under prefix ${prefix}`,
        announced.next());
      if (!entry) fail(`discovery of prefix ${prefix} ended before ${path} was announced`);
      const full = Moq.Path.join(prefix, entry.path);
      if (entry.active && full === path) found = full;
    }
    // The discovery subscription stays open until the data checked out: closing it sends
    // UNSUBSCRIBE_NAMESPACE (drafts 14/15) or ends its stream (16+); checked at the end.
    let subClosed = false;
    void sub.closed.then(() => (subClosed = true), () => (subClosed = true));

    const subscriber = sub.consume(path).track(trackName).subscribe({ priority: 0 });
    await waitUsed(track, deadline, `track ${trackName} of ${path}`);

    // Publish the plan one group at a time, each once the previous one arrived: @moq/net
    // subscribes with Group Order Descending (0x2), so groups in flight together may
    // legitimately be delivered newest first; lockstep makes "in order" a real check.
    const received = [];
    const reading = readObjects(subscriber, plan.length, deadline, received);
    reading.catch(() => {});
    let written = 0;
    let group;
    for (const { group: g, text } of plan) {
      if (!group || group.sequence !== g) {
        group?.close();
        const want = written;
        await waitUntil(() => received.length >= want, deadline, `group ${g - 1} to arrive before writing group ${g}`, received);
        group = track.appendGroup();
        if (group.sequence !== g) fail(`appendGroup gave group ${group.sequence}, expected ${g}`);
      }
      group.writeString(text);
      written++;
    }
    group?.close();
    await reading;
    const diff = compareReceived(received, plan.map((p) => p.text));
    if (diff) fail(diff);
    if (subClosed) fail(`all ${received.length} objects in order, but the subscriber session closed before teardown`);
    // Teardown: end the namespace subscription, and the session must survive it.
    announced.close();
    await sleep(300);
    if (subClosed) {
      fail(`all ${received.length} objects in order; then ending SUBSCRIBE_NAMESPACE (announced.close()) got the subscriber session closed`);
    }
    subscriber.close();
    track.close();
    broadcast.close();
    return `discovered ${path} under ${prefix}; ${received.length} objects in order at ${pub.version}: ${listing(received)}; SUBSCRIBE_NAMESPACE ended cleanly`;
  } finally {
    pub.close();
    sub.close();
  }
}

async function jsPub(args) {
  const deadline = performance.now() + args.timeoutMs - 500;
  const ns = args.namespace ?? "browser/js-pub";
  const path = Moq.Path.from(...fields(ns));
  const trackName = args.track ?? "t";
  const count = args.count ?? 10;
  const interval = args.intervalMs ?? 200;
  const pub = await connect(args, "publisher");
  try {
    const broadcast = new Moq.Broadcast.Producer();
    const track = broadcast.createTrack(trackName);
    pub.publish(path, broadcast);
    await waitUsed(track, deadline, `nobody subscribed to ${path} track ${trackName}`);
    // One object per group, payloads "0", "1", ...: what a Rust subscriber prints.
    for (let i = 0; i < count; i++) {
      if (performance.now() > deadline) fail(`timed out after writing ${i} of ${count} objects`);
      const group = track.appendGroup();
      group.writeString(String(i));
      group.close();
      await sleep(interval);
    }
    // Linger so the last objects drain through the relay before the session closes.
    await sleep(Math.min(1000, left(deadline)));
    track.close();
    broadcast.close();
    await sleep(Math.min(300, left(deadline)));
    return `published ${count} objects ("0".."${count - 1}", one per group) on ${path} track ${trackName} at ${pub.version}`;
  } finally {
    pub.close();
  }
}

async function jsSub(args) {
  const deadline = performance.now() + args.timeoutMs - 500;
  const ns = args.namespace ?? "browser/js-sub";
  const path = Moq.Path.from(...fields(ns));
  const trackName = args.track ?? "clock";
  const count = args.count ?? 3;
  const sub = await connect(args, "subscriber");
  const errors = [];
  try {
    const received = [];
    // The publisher may not be there yet: retry the subscription until the deadline.
    while (received.length < count) {
      if (performance.now() > deadline) break;
      const subscriber = sub.consume(path).track(trackName).subscribe({ priority: 0 });
      try {
        await readObjects(subscriber, count, Math.min(deadline, performance.now() + 3000), received);
      } catch (e) {
        errors.push(e?.message ?? String(e));
        if (received.length > 0 && !(e instanceof CellFail)) break;
      } finally {
        subscriber.close();
      }
      if (received.length < count) await sleep(250);
    }
    const problem = checkStream(received, count);
    if (problem) {
      const got = received.length ? `; got ${listing(received)}` : "";
      const errs = errors.length ? `; ${errors.length} subscribe attempts failed, last: ${errors.slice(-2).join(" | ")}` : "";
      fail(`${problem}${got}${errs}`);
    }
    return `received ${received.length} objects of ${path} track ${trackName} at ${sub.version}: ${listing(received)}`;
  } finally {
    sub.close();
  }
}

/**
 * The development URL form: `http://host:port/path`. @moq/net fetches
 * `http://host:port/certificate.sha256` (same host and port as the URL, path replaced, query
 * dropped), pins the hex it returns, and opens WebTransport to `https://host:port/path`: the
 * same port number for the HTTP fetch (TCP) and for QUIC (UDP).
 */
async function devUrl(args) {
  const target = new URL(args.http ?? args.url);
  target.protocol = "http:";
  const connection = await within(args.timeoutMs, `connect via ${target}`,
    Moq.Connection.connect(target, {
      webtransport: { protocols: protocolsFor(args.draft) },
      websocket: { enabled: false },
    }));
  const detail = `${connection.version} via ${target} (fetched ${new URL("/certificate.sha256", target)}, WebTransport to ${connection.url.href.replace(/^http:/, "https:")})`;
  connection.close();
  return detail;
}

/**
 * @moq/net's own connect with WebTransport missing from the page: it goes to the WebSocket at
 * once (no head start), offering its whole subprotocol list; the relay picks.
 */
async function wsAuto(args) {
  if (typeof globalThis.WebTransport !== "undefined") fail("WebTransport is still in the page: the driver did not remove it");
  const connection = await within(args.timeoutMs, `connect over WebSocket ${args.ws} (WebTransport missing)`,
    Moq.Connection.connect(new URL(args.url), { websocket: { url: new URL(args.ws) } }));
  const detail = `${connection.version} over WebSocket ${args.ws}, chosen by the relay from @moq/net's offer`;
  connection.close();
  return detail;
}

install("moq-net", { setup, pubsub, "js-pub": jsPub, "js-sub": jsSub, "dev-url": devUrl, "ws-auto": wsAuto });
