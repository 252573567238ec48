// player-check.mjs: plays a broadcast in the relay's page (../index.html, ?play=NS) in headless
// Chromium or Firefox (web/browser.mjs), with several viewers at once and one that joins late, and
// checks what the player reports (window.player). Prints one JSON line; exits 0 on success,
// 1 on failure.
//
//   node player-check.mjs --page 'http://localhost:8080/?play=live/demo' [--viewers 2]
//     [--late-after-ms 3000] [--watch-ms 4000] [--max-latency-ms 2000]
//     [--screenshot docs/media/player.png] [--timeout-ms 30000] [--browser chromium|firefox]
//   node player-check.mjs --page 'http://localhost:8080/?play=live/hevc' --expect-unsupported hev1
//   node player-check.mjs --page 'http://localhost:8080/?play=live/bad' --expect-error 'not JSON'
//   ... [--no-webtransport] [--expect-transport websocket|webtransport] [--expect-version N]
//
// --no-webtransport: each page has no WebTransport (removed before its scripts run), so it
// plays over its WebSocket fallback (QMux); --expect-transport: every page must say it uses
// that transport (window.moqTransport) before it is checked; --expect-version: and that draft
// (window.moqVersion: 19, or 14 over Firefox ESR's WebTransport, which negotiates no protocol).
//
// Playing (default): `--viewers` pages open at once; each must decode a first video frame
// within the timeout. After `--late-after-ms` one more page opens (the late viewer). Then
// every page is sampled once a second for `--watch-ms`: its decoded video frames must grow at
// every sample, audio samples must be decoded (> 0), the latency (now - LOC TIMESTAMP of the
// latest decoded frame; the median of the samples) must be measured and below
// `--max-latency-ms`, and the canvas must
// not be blank (its pixels are read: more than one colour). The late viewer must start at the
// latest group: its first decoded group is at least the group the first viewer was decoding
// when it opened, and above 0. The screenshot is of the first viewer.
//
// --expect-unsupported CODEC: the page must say that the codec (a prefix, e.g. hev1) cannot
// be decoded (window.player.unsupported and the text on the page), and decode no video.
// --expect-error TEXT: the page must show an error containing TEXT (window.player.error and
// the text on the page), e.g. for a catalog that is not JSON or names a track that is missing.
//
// The browser (web/browser.mjs, as page-check.mjs) runs headless with a fresh profile, autoplay
// allowed and localhost mapped to 127.0.0.1 (QUIC has no fallback from ::1).

import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { launchBrowser } from "../../../web/browser.mjs";
import { withoutWebTransport } from "./no-webtransport.mjs";

const args = { viewers: 2, lateAfterMs: 3000, watchMs: 4000, maxLatencyMs: 2000, timeoutMs: 30000, browser: "chromium" };
for (let i = 2; i < process.argv.length; i++) {
  const flag = process.argv[i].replace(/^--/, "").replace(/-(.)/g, (_, c) => c.toUpperCase());
  args[flag] = flag === "noWebtransport" ? true : process.argv[++i];
}
const result = { ok: false, transport: null, version: null, viewers: [], late: null, unsupported: null, error: null };
const finish = (ok) => {
  result.ok = ok;
  console.log(JSON.stringify(result));
  return ok ? 0 : 1;
};
if (!args.page) process.exit(finish(false, (result.error = "--page URL is required")));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** What a page reports: its status line, window.player and whether its canvas has a picture. */
async function sample(page) {
  return page.evaluate(() => {
    const p = window.player ?? null;
    const canvas = document.querySelector("#video");
    let colours = 0;
    try {
      const { data } = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height);
      const seen = new Set();
      for (let i = 0; i < data.length && seen.size < 16; i += 4 * 97) seen.add((data[i] << 16) | (data[i + 1] << 8) | data[i + 2]);
      colours = seen.size;
    } catch { /* no canvas yet */ }
    return {
      status: document.querySelector("#status")?.textContent ?? "",
      message: document.querySelector("#player-message")?.textContent ?? "",
      colours,
      player: p && {
        state: p.state, error: p.error, unsupported: p.unsupported, messages: p.messages.slice(-5),
        video: p.video, audio: p.audio, videoFrames: p.videoFrames, audioSamples: p.audioSamples,
        latencyMs: p.latencyMs, videoLatencyMs: p.videoLatencyMs, audioLatencyMs: p.audioLatencyMs,
        videoArrivalLatencyMs: p.videoArrivalLatencyMs, decodeErrors: p.decodeErrors,
        videoFirstGroup: p.videoFirstGroup, videoGroup: p.videoGroup, audioScheduled: p.audioScheduled,
      },
    };
  });
}

/** Waits until `done(sample)` holds for `page`; throws on an error status or at the deadline. */
async function until(page, what, done, deadline) {
  for (;;) {
    const s = await sample(page);
    if (s.status.startsWith("error:")) throw new Error(`${what}: page: ${s.status}`);
    if (done(s)) return s;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last: ${JSON.stringify(s)}`);
    await sleep(200);
  }
}

let browser;
let code = 1;
const logs = [];
try {
  browser = await launchBrowser(args.browser, { viewport: { width: 1280, height: 900 }, autoplay: true });
  const open = async (name) => {
    const page = await browser.newPage();
    page.onConsole((type, text) => type === "error" && logs.push(`${name} ${type}: ${text}`));
    page.onPageError((message) => logs.push(`${name} pageerror: ${message}`));
    if (args.noWebtransport) await withoutWebTransport(page);
    await page.goto(args.page, 30000);
    if (args.expectTransport || args.expectVersion) {
      await page.waitForFunction(() => window.moqTransport, Number(args.timeoutMs));
      [result.transport, result.version] = await page.evaluate(() => [window.moqTransport, window.moqVersion]);
      if (args.expectTransport && result.transport !== args.expectTransport) throw new Error(`${name} plays over ${result.transport}, expected ${args.expectTransport}`);
      if (args.expectVersion && result.version !== Number(args.expectVersion)) throw new Error(`${name} speaks draft-${result.version}, expected draft-${args.expectVersion}`);
    }
    return page;
  };
  const deadline = Date.now() + Number(args.timeoutMs);
  try {
    if (args.expectError) {
      const page = await open("viewer");
      const s = await until(page, `the page to show an error with "${args.expectError}"`, (s) =>
        s.player?.error?.includes(args.expectError) && s.message.includes(args.expectError), deadline);
      result.error_shown = s.message;
      code = finish(true);
    } else if (args.expectUnsupported) {
      const page = await open("viewer");
      const s = await until(page, `the page to say ${args.expectUnsupported} cannot be decoded`, (s) =>
        s.player?.unsupported.some((u) => u.includes(`"${args.expectUnsupported}`)) && /cannot be decoded/.test(s.message), deadline);
      await sleep(1000); // nothing is decoded meanwhile
      const after = await sample(page);
      result.unsupported = { message: s.message, unsupported: s.player.unsupported, videoFrames: after.player.videoFrames, error: after.player.error };
      if (after.player.videoFrames !== 0) throw new Error(`${after.player.videoFrames} video frames decoded from an undecodable track`);
      if (args.screenshot) { mkdirSync(dirname(args.screenshot), { recursive: true }); await page.screenshot(args.screenshot); }
      code = finish(true);
    } else {
      const pages = [];
      for (let i = 0; i < Number(args.viewers); i++) pages.push(await open(`viewer${i + 1}`));
      for (const [i, page] of pages.entries()) await until(page, `viewer ${i + 1}'s first video frame`, (s) => s.player?.videoFrames > 0, deadline);
      await sleep(Number(args.lateAfterMs));
      const before = await sample(pages[0]);
      const late = await open("late");
      const lateStarted = Date.now();
      await until(late, "the late viewer's first video frame", (s) => s.player?.videoFrames > 0, Date.now() + Number(args.timeoutMs));
      result.late = { firstFrameMs: Date.now() - lateStarted, liveGroupWhenOpened: before.player.videoGroup };
      pages.push(late);
      // Sample every page once a second.
      const series = pages.map(() => []);
      for (let t = 0; t <= Number(args.watchMs); t += 1000) {
        for (const [i, page] of pages.entries()) series[i].push(await sample(page));
        await sleep(1000);
      }
      const problems = [];
      for (const [i, samples] of series.entries()) {
        const name = i === pages.length - 1 ? "late viewer" : `viewer ${i + 1}`;
        const last = samples.at(-1);
        const p = last.player;
        const frames = samples.map((s) => s.player.videoFrames);
        const figures = { name, frames, audioSamples: p.audioSamples, audioScheduled: p.audioScheduled, latencyMs: p.latencyMs, videoLatencyMs: p.videoLatencyMs,
          audioLatencyMs: p.audioLatencyMs, videoArrivalLatencyMs: p.videoArrivalLatencyMs, colours: last.colours, video: p.video, audio: p.audio, firstGroup: p.videoFirstGroup, error: p.error };
        if (p.error) problems.push(`${name}: error ${p.error}`);
        if (!frames.every((f, j) => j === 0 || f > frames[j - 1])) problems.push(`${name}: video frames did not keep increasing: ${frames}`);
        if (!(p.audioSamples > 0)) problems.push(`${name}: no audio samples decoded`);
        // The median of the samples: one slow moment on a busy machine is not the latency.
        const latencies = samples.map((s) => s.player.latencyMs).filter((l) => typeof l === "number").sort((a, b) => a - b);
        const median = latencies[Math.floor(latencies.length / 2)];
        figures.latencies = latencies;
        figures.medianLatencyMs = median;
        if (i === pages.length - 1) Object.assign(result.late, figures); else result.viewers.push(figures);
        if (median === undefined) problems.push(`${name}: no latency measured`);
        else if (median < -50 || median > Number(args.maxLatencyMs)) problems.push(`${name}: latency ${median} ms (median of ${latencies}) out of range`);
        if (last.colours < 2) problems.push(`${name}: the canvas is blank`);
      }
      const lp = series.at(-1).at(-1).player;
      if (!(lp.videoFirstGroup > 0 && lp.videoFirstGroup >= before.player.videoGroup)) {
        problems.push(`late viewer started at group ${lp.videoFirstGroup}, the live group was ${before.player.videoGroup}`);
      }
      if (args.screenshot) { mkdirSync(dirname(args.screenshot), { recursive: true }); await pages[0].screenshot(args.screenshot); }
      if (problems.length) throw new Error(problems.join("; "));
      code = finish(true);
    }
  } catch (e) {
    result.error = `${e.message}${logs.length ? ` | console: ${logs.slice(-5).join(" | ")}` : ""}`;
    code = finish(false);
  }
} catch (e) {
  result.error = `browser: ${e.message}`;
  code = finish(false);
} finally {
  await browser?.close();
}
process.exit(code);
