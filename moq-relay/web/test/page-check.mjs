// page-check.mjs: drives the relay's web page (../index.html) in headless Chromium with
// playwright-core and checks what it shows. Prints one JSON line; exits 0 on success, 1 on
// failure.
//
//   node page-check.mjs --page 'http://localhost:8080/?url=https://localhost:4443/&fingerprint=HEX' \
//     [--expect-namespace a/b] [--expect-objects N] [--expect-gone] [--ready-file FILE] \
//     [--screenshot out.png] [--timeout-ms 30000] [--chromium /usr/bin/chromium]
//     [--no-webtransport] [--expect-transport webtransport|websocket] [--expect-error REGEX]
//
// Steps, each within the timeout: #status starts "connected moqt-19"; then the namespace li
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
// playwright-core is not a dependency of the repository: it is loaded from the directory in
// $PLAYWRIGHT_CORE (e.g. /tmp/pw/node_modules/playwright-core) or else resolved through
// NODE_PATH. Chromium runs with a fresh profile; QUIC stays enabled.

import { createRequire } from "node:module";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { withoutWebTransport } from "./no-webtransport.mjs";

const args = { timeoutMs: 30000, chromium: process.env.CHROMIUM ?? "/usr/bin/chromium" };
for (let i = 2; i < process.argv.length; i++) {
  const flag = process.argv[i].replace(/^--/, "").replace(/-(.)/g, (_, c) => c.toUpperCase());
  args[flag] = flag === "expectGone" || flag === "noWebtransport" ? true : process.argv[++i];
}
const seen = { ok: false, status: "", transport: null, namespaces: [], objects: 0, last: [], gone: null, error: null };
const report = (ok) => {
  seen.ok = ok;
  console.log(JSON.stringify(seen));
  return ok ? 0 : 1;
};
if (!args.page) process.exit(report(false, (seen.error = "--page URL is required")));

const require = createRequire(import.meta.url);
const { chromium } = require(process.env.PLAYWRIGHT_CORE || "playwright-core");

const profile = mkdtempSync(join(tmpdir(), "page-check-"));
let context;
let code = 1;
try {
  context = await chromium.launchPersistentContext(profile, {
    executablePath: args.chromium,
    headless: false, // --headless=new is passed below, as given
    args: ["--no-sandbox", "--headless=new", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync"],
    viewport: { width: 1200, height: 800 },
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const logs = [];
  page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
  page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
  if (args.noWebtransport) await withoutWebTransport(page);
  const deadline = Date.now() + Number(args.timeoutMs);
  // Samples the page until `done(state)` holds; fails on an error status or the deadline.
  const until = async (what, done) => {
    for (;;) {
      const state = await page.evaluate(() => ({
        status: document.querySelector("#status")?.textContent ?? "",
        transport: document.querySelector("#transport")?.dataset.transport ?? null,
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
    await page.goto(args.page);
    if (args.expectError) {
      await until(`an error status matching /${args.expectError}/`, (s) => s.status.startsWith("error:") || s.status.startsWith("connected"));
      if (!new RegExp(args.expectError).test(seen.status)) throw new Error(`status "${seen.status}" does not match /${args.expectError}/`);
      if (args.screenshot) await page.screenshot({ path: args.screenshot, fullPage: true });
    } else {
      await until("connection", (s) => s.status.startsWith("connected moqt-19"));
      if (args.expectTransport && seen.transport !== args.expectTransport) throw new Error(`the page shows transport ${seen.transport}, expected ${args.expectTransport}`);
      if (args.expectNamespace) await until(`namespace ${args.expectNamespace}`, (s) => s.namespaces.includes(args.expectNamespace));
      if (args.expectObjects) await until(`${args.expectObjects} objects`, (s) => s.objects >= Number(args.expectObjects));
      if (args.screenshot) await page.screenshot({ path: args.screenshot, fullPage: true });
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
  await context?.close().catch(() => {});
  rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
