// page-check.mjs: drives the relay's web page (../index.html) in headless Chromium or Firefox
// (web/browser.mjs: playwright-core or puppeteer-core) and checks what it shows. Prints one JSON line; exits 0 on success, 1 on
// failure.
//
//   node page-check.mjs --page 'http://localhost:8080/?url=https://localhost:4443/&fingerprint=HEX' \
//     [--expect-namespace a/b] [--expect-objects N] [--expect-gone] [--ready-file FILE] \
//     [--screenshot out.png] [--timeout-ms 30000] [--browser chromium|firefox]
//     [--no-webtransport] [--expect-transport webtransport|websocket] [--expect-version N]
//     [--expect-error REGEX]
//
// Steps, each within the timeout: #status starts "connected " (then the protocol and the draft:
// moqt-19, or moq-00 = draft-14 over a WebTransport that negotiated no protocol, as Firefox
// ESR's; --expect-version checks the draft, #transport's data-version); then the namespace li
// (data-namespace="a/b") is listed; then at least N objects are in #objects. Then the
// screenshot is taken and, if given, FILE is created: the "ready" signal. With --expect-gone
// the script then waits for the namespace's li to disappear: the caller waits for FILE, stops
// its publisher, and waits for this script's exit. (Without --ready-file, stop the publisher
// whenever you like; only the timeout bounds the wait.) An "error: ..." status fails at once.
// --no-webtransport removes WebTransport from the page before its scripts run (a browser
// without it), so the page must fall back to its WebSocket; --expect-transport checks the
// transport the page shows (#transport's data-transport). --expect-error inverts the check:
// the status must become "error: ..." matching REGEX (both transports failed), nothing else.
//
// The npm packages are not dependencies of the repository: web/browser.mjs loads them from
// $MOQ_BROWSER (scripts/install-browser.sh) or the directory in $PLAYWRIGHT_CORE /
// $PUPPETEER_CORE. The browser runs with a fresh profile; QUIC stays enabled.

import { writeFileSync } from "node:fs";
import { launchBrowser } from "../../../web/browser.mjs";
import { withoutWebTransport } from "./no-webtransport.mjs";

const args = { timeoutMs: 30000, browser: "chromium" };
for (let i = 2; i < process.argv.length; i++) {
  const flag = process.argv[i].replace(/^--/, "").replace(/-(.)/g, (_, c) => c.toUpperCase());
  args[flag] = flag === "expectGone" || flag === "noWebtransport" ? true : process.argv[++i];
}
const seen = { ok: false, status: "", transport: null, version: null, namespaces: [], objects: 0, last: [], gone: null, error: null };
const report = (ok) => {
  seen.ok = ok;
  console.log(JSON.stringify(seen));
  return ok ? 0 : 1;
};
if (!args.page) process.exit(report(false, (seen.error = "--page URL is required")));

let browser;
let code = 1;
try {
  browser = await launchBrowser(args.browser, { viewport: { width: 1200, height: 800 } });
  const page = await browser.newPage();
  const logs = [];
  page.onConsole((type, text) => logs.push(`${type}: ${text}`));
  page.onPageError((message) => logs.push(`pageerror: ${message}`));
  if (args.noWebtransport) await withoutWebTransport(page);
  const deadline = Date.now() + Number(args.timeoutMs);
  // Samples the page until `done(state)` holds; fails on an error status or the deadline.
  const until = async (what, done) => {
    for (;;) {
      const state = await page.evaluate(() => ({
        status: document.querySelector("#status")?.textContent ?? "",
        transport: document.querySelector("#transport")?.dataset.transport ?? null,
        version: Number(document.querySelector("#transport")?.dataset.version) || null,
        namespaces: [...document.querySelectorAll("#namespaces li")].map((li) => li.dataset.namespace),
        objects: document.querySelectorAll("#objects li").length,
        last: [...document.querySelectorAll("#objects li")].slice(-3).map((li) => `${li.dataset.group}/${li.dataset.object} ${li.textContent}`),
      }));
      Object.assign(seen, state);
      if (state.status.startsWith("error:") && !args.expectError) throw new Error(`page: ${state.status}`);
      if (done(state)) return;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  };
  try {
    await page.goto(args.page, 30000);
    if (args.expectError) {
      await until(`an error status matching /${args.expectError}/`, (s) => s.status.startsWith("error:") || s.status.startsWith("connected"));
      if (!new RegExp(args.expectError).test(seen.status)) throw new Error(`status "${seen.status}" does not match /${args.expectError}/`);
      if (args.screenshot) await page.screenshot(args.screenshot, true);
    } else {
      await until("connection", (s) => s.status.startsWith("connected "));
      if (args.expectTransport && seen.transport !== args.expectTransport) throw new Error(`the page shows transport ${seen.transport}, expected ${args.expectTransport}`);
      if (args.expectVersion && seen.version !== Number(args.expectVersion)) throw new Error(`the page shows draft-${seen.version}, expected draft-${args.expectVersion}`);
      if (args.expectNamespace) await until(`namespace ${args.expectNamespace}`, (s) => s.namespaces.includes(args.expectNamespace));
      if (args.expectObjects) await until(`${args.expectObjects} objects`, (s) => s.objects >= Number(args.expectObjects));
      if (args.screenshot) await page.screenshot(args.screenshot, true);
      if (args.readyFile) writeFileSync(args.readyFile, "ready\n");
      if (args.expectGone) {
        seen.gone = false;
        await until(`${args.expectNamespace} to disappear`, (s) => !s.namespaces.includes(args.expectNamespace));
        seen.gone = true;
      }
    }
    code = report(true);
  } catch (e) {
    seen.error = `${e.message}${logs.length ? ` | console: ${logs.slice(-5).join(" | ")}` : ""}`;
    code = report(false);
  }
} catch (e) {
  seen.error = `browser: ${e.message}`;
  code = report(false);
} finally {
  await browser?.close();
}
process.exit(code);
