// browser.mjs: one headless browser for the browser harness (web/driver.mjs) and the relay page's
// checks (moq-relay/web/test/*-check.mjs), behind one small interface, so each cell and each
// page check runs the same way in either browser:
//
//   chromium  Debian's /usr/bin/chromium (MOQ_CHROMIUM), driven by playwright-core over CDP
//   firefox   Debian's /usr/bin/firefox-esr (MOQ_FIREFOX), driven by puppeteer-core over
//             WebDriver BiDi (Playwright drives only its own patched Firefox builds)
//
//   import { launchBrowser } from "./browser.mjs";
//   const browser = await launchBrowser("firefox", { viewport: { width: 1200, height: 800 } });
//   const page = await browser.newPage();
//   page.onConsole((type, text) => ...);   // type: "log" | "warning" | "error" | ...
//   page.onPageError((message) => ...);
//   await page.addInitScript(() => ...); // runs in every document before its own scripts
//   await page.goto(url);
//   const v = await page.evaluate((a) => ..., arg);
//   await page.waitForFunction(() => ..., 10000);
//   await page.screenshot("out.png");
//   await browser.close();               // also removes the fresh profile
//
// Each launch gets a fresh profile in $TMPDIR. Both browsers resolve localhost to 127.0.0.1
// unless mapLocalhost is false: they try ::1 first and QUIC has no fallback to IPv4 for a relay
// bound to 127.0.0.1. With autoplay, media may play without a user gesture.
//
// The npm packages are loaded from ${MOQ_BROWSER:-~/.cache/moq-browser}/node_modules
// (scripts/install-browser.sh), or from the directory in $PLAYWRIGHT_CORE / $PUPPETEER_CORE.
//
// Firefox and our self-signed certificates: Firefox ESR 140 accepts serverCertificateHashes
// only for a certificate valid at most 14 days, ECDSA, as Chromium does; the profile also
// sets nothing that trusts a certificate. What each cell found is in docs/interop.md.
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";

/** The browsers this module launches. */
export const BROWSERS = ["chromium", "firefox"];

const MOQ_BROWSER = process.env.MOQ_BROWSER || join(homedir(), ".cache", "moq-browser");

/** Where each browser's executable is (env overrides). */
export function executable(name) {
  if (name === "chromium") return process.env.MOQ_CHROMIUM || process.env.CHROMIUM || "/usr/bin/chromium";
  if (name === "firefox") return process.env.MOQ_FIREFOX || "/usr/bin/firefox-esr";
  throw new Error(`unknown browser ${JSON.stringify(name)} (one of ${BROWSERS.join(", ")})`);
}

/** The browser's name as shown in results: "Chromium" or "Firefox". */
export function display(name) {
  return name === "firefox" ? "Firefox" : "Chromium";
}

/** Loads an npm package from $ENV_DIR or $MOQ_BROWSER's node_modules. */
function load(pkg, envDir) {
  const dir = process.env[envDir];
  const require = createRequire(join(MOQ_BROWSER, "package.json"));
  try {
    return require(dir || pkg);
  } catch (e) {
    throw new Error(`${pkg} not installed in ${dir || MOQ_BROWSER}: run scripts/install-browser.sh (${e.message.split("\n")[0]})`);
  }
}

/**
 * Launches `name` ("chromium" | "firefox") headless with a fresh profile.
 * opts: { viewport: {width, height}, mapLocalhost (default true), autoplay (default false),
 * timeoutMs (launch, 30000) }.
 */
export async function launchBrowser(name, opts = {}) {
  const exe = executable(name);
  const profile = mkdtempSync(join(tmpdir(), `moq-${name}-profile-`));
  try {
    const inner = name === "firefox" ? await launchFirefox(exe, profile, opts) : await launchChromium(exe, profile, opts);
    let closed = false;
    return {
      name,
      ...inner,
      async close() {
        if (closed) return;
        closed = true;
        await inner.close().catch(() => {});
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (e) {
    rmSync(profile, { recursive: true, force: true });
    throw new Error(`${display(name)} did not start: ${e.message.split("\n")[0]}`);
  }
}

// ---- Chromium (playwright-core, CDP) ---------------------------------------------------------

async function launchChromium(exe, profile, opts) {
  const { chromium } = load("playwright-core", "PLAYWRIGHT_CORE");
  // launchPersistentContext so the fresh --user-data-dir is ours (launch() refuses one).
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: exe,
    headless: true,
    ignoreDefaultArgs: ["--headless"],
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      ...(opts.autoplay ? ["--autoplay-policy=no-user-gesture-required"] : []),
      // ERR_QUIC_PROTOCOL_ERROR.QUIC_PACKET_WRITE_ERROR on ::1 for a relay on 127.0.0.1.
      ...(opts.mapLocalhost === false ? [] : ["--host-resolver-rules=MAP localhost 127.0.0.1"]),
    ],
    ...(opts.viewport ? { viewport: opts.viewport } : {}),
    timeout: opts.timeoutMs ?? 30000,
  });
  const wrap = (page) => ({
    raw: page,
    onConsole: (f) => page.on("console", (m) => f(m.type(), m.text())),
    onPageError: (f) => page.on("pageerror", (e) => f(e.message)),
    addInitScript: (fn) => page.addInitScript(fn),
    goto: (url, timeoutMs = 10000) => page.goto(url, { waitUntil: "load", timeout: timeoutMs }),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    waitForFunction: (fn, timeoutMs) => page.waitForFunction(fn, null, { timeout: timeoutMs }),
    screenshot: (path, fullPage = false) => page.screenshot({ path, fullPage }),
  });
  return {
    version: context.browser()?.version() ?? "",
    // The persistent context opens with one blank page: the first newPage() takes it.
    newPage: async () => {
      const blank = context.pages().find((p) => !p.__moqTaken && p.url() === "about:blank");
      const page = blank ?? (await context.newPage());
      page.__moqTaken = true;
      return wrap(page);
    },
    close: () => context.close(),
  };
}

// ---- Firefox (puppeteer-core, WebDriver BiDi) -----------------------------------------------

/** Prefs of the fresh Firefox profile (on top of puppeteer's automation defaults). */
function firefoxPrefs(opts) {
  return {
    // Autoplay without a gesture (media.autoplay.default 0 = allow).
    ...(opts.autoplay ? { "media.autoplay.default": 0, "media.autoplay.blocking_policy": 0 } : {}),
    // localhost is 127.0.0.1 only (Firefox tries ::1 first; QUIC does not fall back).
    ...(opts.mapLocalhost === false ? {} : { "network.dns.disableIPv6": true }),
    // No network calls of its own (updates, telemetry, safe browsing, remote settings).
    "app.update.auto": false,
    "browser.safebrowsing.downloads.remote.enabled": false,
    "datareporting.policy.dataSubmissionEnabled": false,
    "toolkit.telemetry.enabled": false,
    "media.gmp-manager.updateEnabled": false,
  };
}

async function launchFirefox(exe, profile, opts) {
  const puppeteer = load("puppeteer-core", "PUPPETEER_CORE");
  const browser = await puppeteer.launch({
    browser: "firefox",
    executablePath: exe,
    headless: true,
    userDataDir: profile,
    extraPrefsFirefox: firefoxPrefs(opts),
    defaultViewport: opts.viewport ?? { width: 1280, height: 720 },
    timeout: opts.timeoutMs ?? 30000,
    protocolTimeout: 120000,
    // Firefox's own stdout/stderr would interleave with the caller's one-line result.
    dumpio: false,
  });
  const wrap = (page) => ({
    raw: page,
    // puppeteer names console.warn "warn"; Playwright (and the callers) "warning".
    onConsole: (f) => page.on("console", (m) => f(m.type() === "warn" ? "warning" : m.type(), m.text())),
    onPageError: (f) => page.on("pageerror", (e) => f(e?.message ?? String(e))),
    // A BiDi preload script: runs in every document before the page's own scripts.
    addInitScript: (fn) => page.evaluateOnNewDocument(fn),
    goto: (url, timeoutMs = 10000) => page.goto(url, { waitUntil: "load", timeout: timeoutMs }),
    evaluate: (fn, arg) => page.evaluate(fn, arg),
    waitForFunction: (fn, timeoutMs) => page.waitForFunction(fn, { timeout: timeoutMs, polling: 100 }),
    screenshot: (path, fullPage = false) => page.screenshot({ path, fullPage }),
  });
  const taken = new Set();
  return {
    version: await browser.version().catch(() => ""),
    // Firefox opens with one blank tab: the first newPage() takes it.
    newPage: async () => {
      const blank = (await browser.pages()).find((p) => !taken.has(p) && p.url() === "about:blank");
      const page = blank ?? (await browser.newPage());
      taken.add(page);
      return wrap(page);
    },
    close: () => browser.close(),
  };
}
