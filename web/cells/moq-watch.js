// The cell for @moq/watch (moq-dev's media player), bundled by scripts/install-browser.sh into
// $MOQ_BROWSER/dist/moq-watch.js: a media implementation we did not write plays a broadcast
// that our CLI publishes through our relay.
//
// @moq/watch 0.4.6 runs over its own @moq/net 0.2.8 (a dependency range below the 0.3.4 the
// moq-net cells use), which speaks moq-transport drafts 14-19; the draft is pinned the same
// way (the WebTransport protocol it offers). The broadcast name is a path whose "/"-separated
// parts are the Track Namespace's fields; a name ending in ".msf" makes the player read an MSF
// catalog from the track `catalog` (otherwise hang's `catalog.json`). For packaging "cmaf" it
// needs the track's CMAF header (MSF `initRef` -> `initDataList`, or CMSF's `initData`).
//
// The pipeline is the one its <moq-watch> element wires up (Broadcast -> Video.Source ->
// Video.Decoder -> Video.Renderer on a canvas, with a Sync), built here by hand so the
// connection can pin the relay's certificate hash and the draft.
//
// cell "watch": args.namespace = the broadcast name (default live/demo.msf), args.count = the
// decoded video frames to see (default 60), args.intervalMs = how long frames must keep coming
// after that (default 3000 ms; at least one new frame every second of it). The detail reports
// the decoded frame count, the frames handed to WebCodecs, the rendition, the video size and
// whether the canvas has non-blank pixels. Over a WebSocket (args.transport "ws") the player's
// @moq/net gets a QMux session offering qmux-01.moqt-N alone (common.js webSocketSession).
import Qmux from "@moq/qmux";
import { Broadcast, Net, Signals, Sync, Video } from "@moq/watch";
import { fail, hexToBytes, install, sleep, webSocketSession, within } from "./common.js";

const DRAFTS = [14, 15, 16, 17, 18, 19];

function protocolsFor(draft) {
  if (!DRAFTS.includes(draft)) fail(`@moq/watch 0.4.6 (@moq/net 0.2.8) does not speak draft ${draft} (it speaks ${DRAFTS.join(", ")})`);
  return draft === 14 ? [] : [`moqt-${draft}`];
}

/** The share of sampled canvas pixels that are not black / transparent. */
function litShare(canvas) {
  if (!canvas.width || !canvas.height) return 0;
  const probe = document.createElement("canvas");
  probe.width = 64;
  probe.height = 36;
  const ctx = probe.getContext("2d");
  ctx.drawImage(canvas, 0, 0, probe.width, probe.height);
  const data = ctx.getImageData(0, 0, probe.width, probe.height).data;
  let lit = 0;
  for (let i = 0; i < data.length; i += 4) if (data[i] + data[i + 1] + data[i + 2] > 30) lit++;
  return lit / (data.length / 4);
}

async function watch(args) {
  const name = args.namespace || "live/demo.msf";
  const want = args.count ?? 60;
  const keepMs = args.intervalMs ?? 3000;
  const deadline = performance.now() + args.timeoutMs - 500;

  const options = args.transport === "ws" ? { transport: await webSocketSession(Qmux, args) } : {
    webtransport: {
      protocols: protocolsFor(args.draft),
      serverCertificateHashes: [{ algorithm: "sha-256", value: hexToBytes(args.fingerprint) }],
    },
    websocket: { enabled: false },
  };
  const connection = await within(args.timeoutMs, `connect + SETUP at draft ${args.draft}${args.transport === "ws" ? ` over WebSocket ${args.ws}` : ""}`,
    Net.Connection.connect(new URL(args.url), options));
  const negotiated = connection.version;
  if (negotiated !== `moq-transport-${args.draft}`) fail(`negotiated ${negotiated}, wanted moq-transport-${args.draft}`);

  const canvas = document.createElement("canvas");
  document.body.append(canvas);
  const established = new Signals.Signal(connection);
  const broadcast = new Broadcast({
    connection: established,
    enabled: true,
    name: Net.Path.from(name),
    // As <moq-watch> does by default: wait for the broadcast's announcement (SUBSCRIBE_NAMESPACE
    // on the empty prefix), then subscribe to its catalog.
    reload: true,
  });
  const source = new Video.Source({ broadcast, supported: Video.Decoder.supported });
  const sync = new Sync({ latency: "real-time", connection: established, video: source.out.jitter });
  const decoder = new Video.Decoder(source, sync, { enabled: true });
  const renderer = new Video.Renderer(decoder, { canvas, visible: "always" });

  // A decoded frame is one the decoder output and the Sync released: its timestamp changes.
  let decoded = 0;
  let lastFrameAt = 0;
  const stop = decoder.out.timestamp.subscribe((t) => {
    if (t === undefined) return;
    decoded++;
    lastFrameAt = performance.now();
  });
  const state = () => {
    const stats = decoder.out.stats.peek();
    const config = source.out.config.peek();
    const display = decoder.out.display.peek();
    return `catalog ${broadcast.out.status.peek()}, rendition ${source.out.track.peek() ?? "none"}`
      + ` (${config ? `${config.codec}, ${config.container?.kind}` : "no config"}${source.out.error.peek() ? `, error ${source.out.error.peek()}` : ""})`
      + `, ${stats?.frameCount ?? 0} frames to WebCodecs (${stats?.bytesReceived ?? 0} bytes), ${decoded} decoded`
      + `${display ? `, ${display.width}x${display.height}` : ""}`;
  };
  try {
    while (decoded < want) {
      if (performance.now() > deadline) fail(`timed out waiting for ${want} decoded frames: ${state()}`);
      await sleep(50);
    }
    const first = decoded;
    const keepStart = performance.now();
    while (performance.now() - keepStart < keepMs) {
      await sleep(100);
      if (performance.now() - lastFrameAt > 1000) fail(`decoded frames stopped for over 1 s after ${decoded}: ${state()}`);
      if (performance.now() > deadline) fail(`timed out while watching frames keep coming: ${state()}`);
    }
    const rate = ((decoded - first) * 1000) / (performance.now() - keepStart);
    const lit = litShare(canvas);
    if (lit < 0.2) fail(`the canvas is blank (${(lit * 100).toFixed(0)}% lit): ${state()}`);
    return `${negotiated}, ${name}: ${state()}; ${rate.toFixed(1)} frames/s over the last ${keepMs} ms; canvas ${canvas.width}x${canvas.height}, ${(lit * 100).toFixed(0)}% lit`;
  } finally {
    stop();
    renderer.close();
    decoder.close();
    sync.close();
    source.close();
    broadcast.close();
    connection.close();
  }
}

install("moq-watch", { watch });
