#!/usr/bin/env node
// Runs ONE browser interop cell: a third-party JavaScript MOQT client inside headless Chromium
// or Firefox against a MOQT relay, and prints ONE final line of JSON on stdout:
//
//   {"client":"moq-net","cell":"pubsub","draft":19,"browser":"chromium","result":"pass","detail":"..."}
//
// Exit status 0 whenever the cell ran (pass or fail); 1 on a harness error (bad arguments,
// nothing installed, the browser did not start), which still prints the JSON line with
// result "fail" and a detail starting "harness error:".
//
// Usage:
//   node web/driver.mjs --client moq-net|moqt|moq-watch --cell setup|pubsub|js-pub|js-sub|dev-url|watch \
//     --draft N --url https://localhost:PORT/ --fingerprint HEX [--http http://127.0.0.1:HTTPPORT] \
//     [--namespace a/b] [--track t] [--count K] [--interval-ms MS] [--timeout-ms 15000] [--verbose]
//     [--no-map-localhost] [--transport wt|ws] [--ws ws://127.0.0.1:HTTPPORT/]
//     [--browser chromium|firefox]
//
//   setup    WebTransport session + SETUP at draft N
//   pubsub   a JS publisher and a JS subscriber (two sessions in one page): the subscriber
//            discovers the namespace with SUBSCRIBE_NAMESPACE on its parent prefix, subscribes,
//            and must read 5 groups (9 objects) in order without duplicates
//   js-pub   JS publisher only: announces --namespace (default browser/js-pub), waits for a
//            SUBSCRIBE to --track (default t), then writes --count (10) objects "0".."K-1", one
//            per group, every --interval-ms (200); pass = all written before --timeout-ms
//   js-sub   JS subscriber only: subscribes to --namespace (default browser/js-sub) --track
//            (default clock), retrying until the track exists; pass = --count (3) objects in
//            increasing locations, no duplicates
//   dev-url  (moq-net only) connect with @moq/net's development URL http://host:port/: it
//            fetches http://host:port/certificate.sha256 and opens https://host:port/ with that
//            hash pinned; host:port from --http if given, else from --url
//   ws-auto  (moq-net only, WebTransport removed) @moq/net's own connect over a WebSocket to --ws,
//            offering every protocol it knows; pass = SETUP done over the WebSocket, and the
//            detail names the draft the relay chose
//   watch    (moq-watch only) @moq/watch plays the broadcast --namespace (default live/demo.msf,
//            published by someone else, e.g. `moq publish live/demo.msf --packaging cmaf`):
//            pass = --count (60) video frames decoded, then frames keep coming for
//            --interval-ms (3000) with no gap over 1 s, and the canvas is not blank
//
// --transport ws (moq-net, moq-watch): the browser runs without WebTransport (the page's WebTransport and
// WebTransportError are removed before any script runs), and @moq/net reaches the relay over a
// WebSocket to --ws (the relay's HTTP listener) with QMux: the cells pin draft N by offering
// the one subprotocol qmux-01.moqt-N; ws-auto lets @moq/net's own connect (WebTransport
// missing, so WebSocket at once) offer its whole list, and reports the draft the relay chose.
//
// --browser (default chromium): Debian's Chromium driven by playwright-core, or Debian's
// firefox-esr driven by puppeteer-core over WebDriver BiDi (web/browser.mjs launches both).
// The browser resolves localhost to 127.0.0.1 unless --no-map-localhost: it tries ::1 first
// and QUIC does not fall back to IPv4 for a relay bound to 127.0.0.1.
// --verbose echoes the page's console on stderr.
//
// Needs scripts/install-browser.sh (the browsers, the npm packages and the bundles in
// ${MOQ_BROWSER:-~/.cache/moq-browser}). Env: MOQ_BROWSER, MOQ_CHROMIUM (default
// /usr/bin/chromium), MOQ_FIREFOX (default /usr/bin/firefox-esr).
import { existsSync, readFileSync } from "node:fs";
import { createServer } from "node:http";
import { homedir } from "node:os";
import { join, normalize } from "node:path";
import { withoutWebTransport } from "../moq-relay/web/test/no-webtransport.mjs";
import { BROWSERS, display, executable, launchBrowser } from "./browser.mjs";

const CLIENTS = {
  "moq-net": ["setup", "pubsub", "js-pub", "js-sub", "dev-url", "ws-auto"],
  moqt: ["setup", "pubsub", "js-pub", "js-sub"],
  "moq-watch": ["watch"],
};
const MOQ_BROWSER = process.env.MOQ_BROWSER || join(homedir(), ".cache", "moq-browser");
const DIST = join(MOQ_BROWSER, "dist");

const out = { client: null, cell: null, draft: null, browser: "chromium", transport: "wt", result: "fail", detail: "" };
let verbose = false;

function finish(result, detail, code) {
  out.result = result;
  out.detail = detail;
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(code);
}

function harness(message) {
  finish("fail", `harness error: ${message}`, 1);
}

/** A harness error raised once the browser may be running: cleaned up, then reported. */
class HarnessError extends Error {}

function log(...args) {
  if (verbose) console.error("[driver]", ...args);
}

function parseArgs(argv) {
  const opts = { timeoutMs: 15000, mapLocalhost: true, browser: "chromium", transport: "wt" };
  const take = (i, name) => {
    const v = argv[i + 1];
    if (v === undefined || v.startsWith("--")) harness(`${name} needs a value`);
    return v;
  };
  const int = (v, name) => {
    if (!/^\d+$/.test(v)) harness(`${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
    return Number(v);
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const [flag, inline] = a.includes("=") ? [a.slice(0, a.indexOf("=")), a.slice(a.indexOf("=") + 1)] : [a, undefined];
    const value = () => (inline !== undefined ? inline : (i++, take(i - 1, flag)));
    switch (flag) {
      case "--client": opts.client = value(); break;
      case "--cell": opts.cell = value(); break;
      case "--draft": opts.draft = int(value(), flag); break;
      case "--url": opts.url = value(); break;
      case "--fingerprint": opts.fingerprint = value(); break;
      case "--http": opts.http = value(); break;
      case "--namespace": opts.namespace = value(); break;
      case "--track": opts.track = value(); break;
      case "--count": opts.count = int(value(), flag); break;
      case "--interval-ms": opts.intervalMs = int(value(), flag); break;
      case "--timeout-ms": opts.timeoutMs = int(value(), flag); break;
      case "--verbose": verbose = true; break;
      case "--no-map-localhost": opts.mapLocalhost = false; break;
      case "--browser": opts.browser = value(); break;
      case "--transport": opts.transport = value(); break;
      case "--ws": opts.ws = value(); break;
      case "-h":
      case "--help": {
        const src = readFileSync(new URL(import.meta.url), "utf8").split("\n");
        const start = src.findIndex((l) => l.startsWith("// Runs ONE"));
        const end = src.findIndex((l) => l.startsWith("import "));
        console.log(src.slice(start, end).map((l) => l.replace(/^\/\/ ?/, "")).join("\n"));
        process.exit(0);
      }
      default: harness(`unknown argument ${JSON.stringify(a)} (try --help)`);
    }
  }
  out.client = opts.client ?? null;
  out.cell = opts.cell ?? null;
  out.draft = opts.draft ?? null;
  out.browser = opts.browser;
  if (!BROWSERS.includes(opts.browser)) harness(`--browser must be one of ${BROWSERS.join(", ")}`);
  if (!CLIENTS[opts.client]) harness(`--client must be one of ${Object.keys(CLIENTS).join(", ")}`);
  if (!CLIENTS[opts.client].includes(opts.cell)) harness(`--cell for ${opts.client} must be one of ${CLIENTS[opts.client].join(", ")}`);
  if (opts.draft === undefined) harness("--draft is required");
  out.transport = opts.cell === "ws-auto" ? "ws" : opts.transport;
  if (!["wt", "ws"].includes(opts.transport)) harness(`--transport must be wt or ws, got ${opts.transport}`);
  if ((opts.transport === "ws" || opts.cell === "ws-auto") && (opts.client === "moqt" || !/^wss?:\/\//.test(opts.ws ?? ""))) {
    harness("--transport ws and ws-auto need --client moq-net or moq-watch and --ws ws://host:port/");
  }
  if (!opts.url) harness("--url is required (https://localhost:PORT/)");
  if (!/^https:\/\//.test(opts.url)) harness(`--url must be https:// (WebTransport), got ${opts.url}`);
  if (opts.cell !== "dev-url" && !opts.fingerprint) harness("--fingerprint is required (hex SHA-256 of the relay's certificate)");
  if (opts.timeoutMs < 1000) harness("--timeout-ms must be at least 1000");
  return opts;
}

/** Serves a blank page loading the client's bundle, and $MOQ_BROWSER/dist, on localhost. */
function serve(client) {
  const html = `<!doctype html><meta charset="utf-8"><title>moq interop: ${client}</title>
<script type="module" src="/dist/${client}.js"></script>\n`;
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://localhost").pathname);
    if (path === "/favicon.ico") {
      res.writeHead(204);
      res.end();
      return;
    }
    if (path === "/" || path === "/index.html") {
      res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" });
      res.end(html);
      return;
    }
    if (path.startsWith("/dist/")) {
      const file = normalize(join(DIST, path.slice("/dist/".length)));
      if (file.startsWith(DIST) && existsSync(file)) {
        const type = file.endsWith(".map") ? "application/json" : "text/javascript; charset=utf-8";
        res.writeHead(200, { "content-type": type, "cache-control": "no-store" });
        res.end(readFileSync(file));
        return;
      }
    }
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found\n");
  });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(server));
  });
}

/** The browser the cell runs in (web/browser.mjs); a launch failure is a harness error. */
async function openBrowser(opts) {
  try {
    return await launchBrowser(opts.browser, { mapLocalhost: opts.mapLocalhost });
  } catch (e) {
    throw new HarnessError(e.message);
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const started = Date.now();
  if (!existsSync(join(DIST, `${opts.client}.js`))) harness(`${join(DIST, `${opts.client}.js`)} is missing: run scripts/install-browser.sh`);
  const exe = executable(opts.browser);
  if (!existsSync(exe)) harness(`${exe} is missing: run scripts/install-browser.sh`);

  const server = await serve(opts.client);
  const origin = `http://localhost:${server.address().port}`;
  const consoleLines = [];
  let browser;
  const cleanup = async () => {
    await browser?.close().catch(() => {});
    server.close();
  };
  try {
    browser = await openBrowser(opts);
    log(`${browser.name} ${browser.version} up in ${Date.now() - started} ms, page ${origin}`);

    const page = await browser.newPage();
    if (opts.transport === "ws" || opts.cell === "ws-auto") await withoutWebTransport(page);
    page.onConsole((type, text) => {
      const line = `${type}: ${text}`;
      if (verbose) console.error("[page]", line);
      if (type === "error" || type === "warning") consoleLines.push(line);
    });
    page.onPageError((message) => consoleLines.push(`pageerror: ${message}`));

    await page.goto(`${origin}/`, 10000);
    try {
      await page.waitForFunction(() => typeof globalThis.moqCell === "function", 10000);
    } catch {
      throw new HarnessError(`the ${opts.client} bundle did not load: ${consoleLines.join(" | ") || "no console output"}`);
    }

    const args = {
      cell: opts.cell,
      draft: opts.draft,
      url: opts.url,
      fingerprint: opts.fingerprint,
      http: opts.http,
      transport: opts.transport,
      ws: opts.ws,
      namespace: opts.namespace,
      track: opts.track,
      count: opts.count,
      intervalMs: opts.intervalMs,
      timeoutMs: opts.timeoutMs,
    };
    const cellStarted = Date.now();
    const guard = new Promise((resolve) =>
      setTimeout(() => resolve({ result: "fail", detail: `no result within ${opts.timeoutMs + 5000} ms (page hung)` }), opts.timeoutMs + 5000),
    );
    const result = await Promise.race([page.evaluate((a) => globalThis.moqCell(a), args), guard]);
    log(`cell ${opts.cell} ${result.result} in ${Date.now() - cellStarted} ms (total ${Date.now() - started} ms)`);
    let detail = result.detail ?? "";
    if (result.result !== "pass" && consoleLines.length > 0) {
      const tail = consoleLines.slice(-8).map((l) => (l.length > 300 ? `${l.slice(0, 300)}...` : l));
      detail += ` [console: ${tail.join(" | ")}]`;
    }
    await cleanup();
    finish(result.result === "pass" ? "pass" : "fail", detail, 0);
  } catch (e) {
    await cleanup();
    const message = e?.message?.split("\n")[0] ?? String(e);
    // The renderer dying under the cell is the browser's failure, not the harness's.
    if (!(e instanceof HarnessError) && /Target crashed|Page crashed/.test(message)) {
      const tail = consoleLines.slice(-8).map((l) => (l.length > 300 ? `${l.slice(0, 300)}...` : l));
      finish("fail", `${display(opts.browser)} renderer crashed during the cell (${message})${tail.length ? ` [console: ${tail.join(" | ")}]` : ""}`, 0);
    }
    harness(message);
  }
  // finish() exits; reaching here means a bug.
}

main();
