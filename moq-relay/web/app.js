// app.js: the relay's web page. Connects with moq.js (MOQT draft-19 over WebTransport, or over a
// WebSocket with QMux when WebTransport is missing or does not connect in time; draft-14 over a
// WebTransport that negotiated no protocol, as Firefox ESR's, which cannot list every
// namespace: an empty prefix shows a hint instead), lists
// the namespaces under a prefix as they are announced and withdrawn (SUBSCRIBE_NAMESPACE,
// draft-19 §6.1, §10.18); a click on one plays it as a broadcast (player.js: its MSF catalog,
// LOC video and audio with WebCodecs), or, when it has no catalog, shows one track's objects
// live (SUBSCRIBE, §10.7; objects §11).
//
// Query parameters: url (WebTransport URL), fingerprint (hex SHA-256 of the certificate),
// prefix (slash-separated, empty = everything), track (default "chat"), subscribe (a namespace
// whose track to show at once), play (a broadcast to play at once). Without url/fingerprint the
// page reads /connect.json from its own origin: {"port": <QUIC UDP port>, "fingerprint":
// "<hex>"}, and connects to https://<host>:<port>/. The WebSocket fallback goes to the page's
// own origin (ws://<host>:<http port>/, the relay's HTTP listener) unless `ws` (a ws:// or
// wss:// URL) says otherwise; `transport` = auto (default) | webtransport | websocket picks,
// `ws-delay` is WebTransport's head start in ms (default 300). The header shows the transport
// in use (#transport, data-transport="webtransport" | "websocket", data-version = the draft; also
// `window.moqTransport`, `window.moqVersion`), and the status "connected <protocol> (draft-N) over ...";
// when neither connects, the status says "error: could not connect: " and why each failed.
//
// The player's figures are on the page and in `window.player` (see player.js newStats):
// videoFrames, audioSamples, latencyMs (now - LOC TIMESTAMP of the latest decoded frame),
// error, messages, unsupported (codecs the browser cannot decode), state.

import { connect } from "./connect.js";
import { Player, newStats } from "./player.js";

const $ = (id) => document.getElementById(id);
const MAX_OBJECTS = 200;
const query = new URLSearchParams(location.search);
const split = (path) => path.split("/").filter((f) => f !== "");
const text = new TextDecoder();

let session = null;
let namespaces = null; // the current SUBSCRIBE_NAMESPACE iterator
let listing = 0; // which call of listNamespaces is the current one
let subscription = null; // the current SUBSCRIBE
let watching = 0; // which call of watch is the current one
let selected = null; // the namespace it reads, as "a/b"
let player = null; // the current Player
let playing = 0; // which call of play is the current one
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function setStatus(s, kind = "") {
  $("status").textContent = s;
  $("status").className = kind;
}

/** Where the WebSocket fallback goes: `ws`, else the page's own origin. */
function webSocketUrl() {
  if (query.get("ws")) return query.get("ws");
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}/`;
}

async function config() {
  if (query.get("url") && (query.get("fingerprint") || query.get("transport") === "websocket")) return { url: query.get("url"), fingerprint: query.get("fingerprint") };
  const res = await fetch("/connect.json", { cache: "no-store" });
  if (!res.ok) throw new Error(`/connect.json: HTTP ${res.status}`);
  const c = await res.json();
  return { url: query.get("url") ?? `https://${location.hostname}:${c.port}/`, fingerprint: query.get("fingerprint") ?? c.fingerprint,
    // Chromium dials "localhost" over QUIC on ::1 only; a relay bound to 0.0.0.0 is on 127.0.0.1.
    fallback: !query.get("url") && location.hostname === "localhost" && `https://127.0.0.1:${c.port}/` };
}

// The namespace list: one li per namespace, in arrival order; removed when withdrawn.
async function listNamespaces() {
  const me = ++listing;
  namespaces?.cancel();
  namespaces = null;
  $("namespaces").replaceChildren();
  const prefix = split($("prefix").value);
  let mine;
  try {
    // The cancel of the previous prefix may reach the relay after this request: PREFIX_OVERLAP.
    for (let i = 0; !mine; i++) {
      mine = await session.subscribeNamespace(prefix).catch((e) => (!/PREFIX_OVERLAP$/.test(e.codeName) || i > 4 ? Promise.reject(e) : null));
      if (!mine) await sleep(200);
    }
    if (me !== listing) return mine.cancel(); // the prefix changed meanwhile
    namespaces = mine;
    for await (const { type, namespace } of mine) {
      const path = namespace.join("/");
      const old = [...$("namespaces").children].find((li) => li.dataset.namespace === path);
      if (type === "removed") { old?.remove(); continue; }
      if (old) continue;
      const li = document.createElement("li");
      li.dataset.namespace = path;
      li.textContent = path;
      li.tabIndex = 0;
      li.classList.toggle("selected", path === selected);
      li.onclick = li.onkeydown = (e) => (e.type === "click" || e.key === "Enter") && play(namespace, true);
      $("namespaces").append(li);
    }
    if (me === listing) $("namespaces").replaceChildren(); // the relay ended the request
  } catch (e) {
    if (me !== listing) return;
    if (e.codeName !== "EMPTY_PREFIX") return setStatus(`error: namespaces: ${e.message}`, "error");
    const li = document.createElement("li");
    li.className = "hint";
    li.textContent = `this browser's WebTransport speaks draft-${session.version}, which lists namespaces under a prefix only: enter one above`;
    $("namespaces").append(li);
  }
}

// The object list of one track: newest last, the last MAX_OBJECTS kept.
async function watch(namespace) {
  const me = ++watching;
  subscription?.cancel();
  subscription = null;
  const track = $("track").value;
  const name = `${namespace.join("/")} : ${track}`;
  $("objects").replaceChildren();
  $("current").textContent = `subscribing to ${name}`;
  selected = namespace.join("/");
  for (const li of $("namespaces").children) li.classList.toggle("selected", li.dataset.namespace === selected);
  let mine;
  try {
    mine = await session.subscribe(namespace, track);
    if (me !== watching) return mine.cancel();
    subscription = mine;
    $("current").textContent = name;
    for await (const o of mine) {
      const li = document.createElement("li");
      li.dataset.group = String(o.group);
      li.dataset.object = String(o.id);
      const label = document.createElement("span");
      label.className = "loc";
      label.textContent = `${o.group}.${o.id}`;
      const body = document.createElement("span");
      body.textContent = o.status === 0 ? text.decode(o.payload) : o.status === 3 ? "(end of group)" : "(end of track)";
      if (o.status !== 0) li.className = "marker";
      li.append(label, body);
      $("objects").append(li);
      while ($("objects").children.length > MAX_OBJECTS) $("objects").firstElementChild.remove();
      li.scrollIntoView({ block: "nearest" });
    }
    if (me === watching) $("current").textContent = `${name}: ended${mine.done ? ` (status ${mine.done.code}${mine.done.reason ? `, ${mine.done.reason}` : ""})` : ""}`;
  } catch (e) {
    if (me === watching) $("current").textContent = `${name}: ${e.message}`;
  }
}

// Shows the player's figures (and keeps window.player current).
function showStats() {
  const s = window.player;
  if (!s) return;
  const f = (v, unit = "") => (v === null || v === undefined ? "-" : `${v}${unit}`);
  const rows = [
    ["broadcast", s.namespace], ["state", s.state],
    ["video", s.video ? `${s.video.name} (${s.video.codec})` : "-"], ["audio", s.audio ? `${s.audio.name} (${s.audio.codec})` : "-"],
    ["video frames", s.videoFrames], ["audio samples", s.audioSamples],
    ["latency", f(s.latencyMs, " ms")], ["video / audio latency", `${f(s.videoLatencyMs, " ms")} / ${f(s.audioLatencyMs, " ms")}`],
    ["video latency on arrival", f(s.videoArrivalLatencyMs, " ms")],
  ];
  $("stats").replaceChildren(...rows.flatMap(([k, v]) => {
    const dt = document.createElement("dt");
    dt.textContent = k;
    const dd = document.createElement("dd");
    dd.textContent = String(v);
    dd.dataset.stat = k;
    return [dt, dd];
  }));
  const notes = [...(s.error ? [`error: ${s.error}`] : []), ...s.messages.slice(-5)];
  $("player-message").textContent = notes.join("\n");
  $("player-message").className = s.error ? "error" : "";
}

// Plays `namespace` as a broadcast. With `fallback`, a namespace without a catalog has its
// track (the Track field) shown instead.
async function play(namespace, fallback = false) {
  const me = ++playing;
  player?.stop();
  selected = namespace.join("/");
  for (const li of $("namespaces").children) li.classList.toggle("selected", li.dataset.namespace === selected);
  const stats = (window.player = newStats(namespace));
  player = new Player(session, namespace, { canvas: $("video"), stats, onChange: showStats });
  $("playback").hidden = false;
  await player.run();
  if (me !== playing) return;
  if (fallback && stats.catalogs === 0 && stats.error?.startsWith("catalog:")) {
    stats.messages.push(`no catalog (${stats.error.replace(/^catalog: /, "")}): not a broadcast, its track is shown instead`);
    stats.error = null;
    stats.state = "no catalog";
    $("playback").hidden = true;
    watch(namespace);
  }
}

async function main() {
  $("prefix").value = query.get("prefix") ?? "";
  $("track").value = query.get("track") ?? "chat";
  setStatus("connecting");
  try {
    const { url, fingerprint, fallback } = await config();
    const transport = query.get("transport") ?? "auto";
    const ws = webSocketUrl();
    setStatus(`connecting to ${transport === "websocket" ? ws : url}${transport === "auto" ? ` (WebSocket ${ws} after ${query.get("ws-delay") ?? 300} ms)` : ""}`);
    // WebTransport to `url` and (for localhost) 127.0.0.1 at once; the WebSocket after a head start.
    session = await connect(fallback ? [url, fallback] : url, {
      fingerprint, transport, webSocketUrl: ws, webSocketDelayMs: Number(query.get("ws-delay") ?? 300),
    });
    const over = `${session.transport === "websocket" ? "WebSocket" : "WebTransport"} ${session.url}`;
    window.moqVersion = session.version;
    // Not `window.transport`: that name is the #transport element (named access) until set.
    window.moqTransport = session.transport;
    $("transport").textContent = `${session.transport === "websocket" ? "WebSocket (QMux)" : "WebTransport"} · draft-${session.version}`;
    $("transport").dataset.transport = session.transport;
    $("transport").dataset.version = String(session.version);
    const connected = `connected ${session.protocol} (draft-${session.version}) over ${over}`;
    setStatus(connected, "ok");
    session.ongoaway = () => setStatus(`${connected}; the server is going away (GOAWAY)`, "ok");
    session.closed.then(() => setStatus(`error: ${session.error.message}`, "error"));
  } catch (e) {
    setStatus(`error: ${e.message}`, "error");
    return;
  }
  $("prefix").onchange = () => listNamespaces();
  listNamespaces();
  if (query.get("subscribe") !== null) watch(split(query.get("subscribe")));
  if (query.get("play") !== null) play(split(query.get("play")));
  setInterval(showStats, 250);
}

main();
