// player.js: plays one broadcast (a Track Namespace) in the page: its MSF catalog (track
// "catalog", draft-ietf-moq-msf editor's copy 2026-08-04), a video and an audio track packaged
// with LOC (draft-ietf-moq-loc editor's copy 2026-07-20), decoded with WebCodecs, video drawn
// on a canvas and audio played through Web Audio. No dependencies, no build step.
//
// Joining: every track is read with moq.js's `join`: SUBSCRIBE with the Largest Object filter
// plus a Relative Joining FETCH with Joining Start 0 (draft-19 §5.1.5; the same in draft-14,
// §9.16.2, which moq.js speaks over Firefox ESR's WebTransport). For the catalog that is
// what MSF asks ("SUBSCRIBE with a Joining FETCH (offset = 0)"): the latest independent
// catalog, then its deltas and later catalogs. For video and audio it is the current group from
// its first object (a keyframe, which carries VIDEO_CONFIG / AUDIO_CONFIG) and then the live
// objects, so a viewer that comes late starts at once with the latest group: the frames of the
// group before the live edge are decoded as fast as they come and shown, then playback is live.
//
// Latency: LOC TIMESTAMP (property 0x10) without TIMESCALE is the presentation time in
// wall-clock microseconds since the Unix epoch; the player measures now - TIMESTAMP when a
// frame comes out of the decoder (video), or an audio chunk (audio). With TIMESCALE (0x08) the
// timestamp is media time and no latency is shown.
//
// The decoder description (avcC, hvcC, av1C; AudioSpecificConfig; OpusHead) comes from the
// catalog's initRef (an initDataList entry, base64) or CMSF's initData, and from VIDEO_CONFIG
// (0x0D) / AUDIO_CONFIG (0x0F) on a group's first object, which replaces it when it differs.

import { property } from "./moq.js";

const LOC = { TIMESCALE: 0x08, VIDEO_FRAME_MARKING: 0x09, VIDEO_CONFIG: 0x0d, AUDIO_CONFIG: 0x0f, TIMESTAMP: 0x10 };
const PRIORITY = { catalog: 0, audio: 1, video: 2 }; // SUBSCRIBER_PRIORITY: lower goes first
const MAX_VIDEO_QUEUE = 30; // frames waiting in the video decoder before the player skips ahead
const MAX_AUDIO_AHEAD = 0.5; // seconds of audio scheduled ahead at most; later chunks are dropped
const VIDEO_CODECS = /^(avc[13]|hev1|hvc1|av01|vp09|vp8)/;
const AUDIO_CODECS = /^(mp4a|opus|flac|ulaw|alaw|pcm|vorbis|mp3)/;
const json = new TextDecoder("utf-8", { fatal: true });

/** Base64 to bytes; throws on bad input. */
function unbase64(s) {
  const bin = atob(s);
  return Uint8Array.from(bin, (c) => c.charCodeAt(0));
}
const sameBytes = (a, b) => a && b && a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Parses one catalog object: an independent catalog (object 0 of a group) or a delta update
 * (objects 1.. of it), applied to `base`. Returns the catalog; throws an Error saying what is
 * wrong with a malformed one.
 */
export function parseCatalog(payload, base = null) {
  let doc;
  try { doc = JSON.parse(json.decode(payload)); }
  catch (e) { throw new Error(`catalog is not JSON: ${e.message}`); }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new Error("catalog is not a JSON object");
  if (doc.deltaUpdate !== undefined) {
    if (!base) throw new Error("catalog delta update without a catalog before it");
    return applyDelta(base, doc);
  }
  if (!Array.isArray(doc.tracks)) throw new Error("catalog has no tracks array");
  for (const t of doc.tracks) {
    if (typeof t !== "object" || t === null || typeof t.name !== "string" || !t.name) throw new Error("catalog track without a name");
  }
  if (doc.initDataList !== undefined && !Array.isArray(doc.initDataList)) throw new Error("catalog initDataList is not an array");
  return doc;
}

/** MSF delta update: add, remove, clone and update operations on the tracks, in order. */
export function applyDelta(base, delta) {
  if (!Array.isArray(delta.deltaUpdate) || !delta.deltaUpdate.length) throw new Error("catalog deltaUpdate is not a non-empty array");
  const doc = structuredClone(base);
  const key = (t) => `${t.namespace ?? ""}\n${t.name}`;
  for (const op of delta.deltaUpdate) {
    if (!["add", "remove", "update", "clone"].includes(op?.op)) throw new Error(`catalog delta operation ${op?.op} is unknown`);
    if (!Array.isArray(op.tracks)) throw new Error(`catalog delta operation ${op.op} has no tracks`);
    for (const t of op.tracks) {
      if (typeof t?.name !== "string" || !t.name) throw new Error(`catalog delta ${op.op} of a track without a name`);
      const i = doc.tracks.findIndex((d) => key(d) === key(t));
      if (op.op === "add") {
        if (i >= 0) throw new Error(`catalog delta adds track ${t.name}, which exists`);
        doc.tracks.push(t);
      } else if (op.op === "remove") {
        if (i < 0) throw new Error(`catalog delta removes track ${t.name}, which does not exist`);
        doc.tracks.splice(i, 1);
      } else if (op.op === "update") {
        if (i < 0) throw new Error(`catalog delta updates track ${t.name}, which does not exist`);
        doc.tracks[i] = { ...doc.tracks[i], ...t };
      } else {
        const parent = doc.tracks.find((d) => d.name === t.parentName && (d.namespace ?? "") === (t.parentNamespace ?? d.namespace ?? ""));
        if (!parent) throw new Error(`catalog delta clones track ${t.parentName}, which does not exist`);
        const { parentName, parentNamespace, ...rest } = t;
        doc.tracks.push({ ...parent, ...rest });
      }
    }
  }
  doc.generatedAt = delta.generatedAt ?? doc.generatedAt;
  return doc;
}

/** The role of a catalog track: its `role`, else guessed from its codec. */
function role(t) {
  if (t.role === "video" || t.role === "audio") return t.role;
  if (typeof t.codec === "string" && VIDEO_CODECS.test(t.codec)) return "video";
  if (typeof t.codec === "string" && AUDIO_CODECS.test(t.codec)) return "audio";
  return t.role ?? "other";
}

/** A track's decoder description from the catalog (initRef into initDataList, or initData). */
function initData(catalog, t) {
  const entry = t.initRef !== undefined && catalog.initDataList?.find((e) => e?.id === t.initRef);
  const data = entry ? entry.data : t.initData;
  if (typeof data !== "string") return null;
  try { return unbase64(data); } catch { throw new Error(`track ${t.name}: init data is not base64`); }
}

/**
 * One broadcast being played. `stats` (the object shown on the page and exposed as
 * window.player) is updated as media is decoded.
 */
export class Player {
  constructor(session, namespace, { canvas, stats, onChange = () => {} }) {
    Object.assign(this, { session, namespace, canvas, stats, onChange, stopped: false, subs: new Set() });
    this.ctx2d = canvas.getContext("2d");
    this.selected = null; // JSON of the chosen tracks, to notice a catalog that changes them
    this.media = null; // { video, audio } decoders of the current selection
  }

  note(message) {
    this.stats.messages.push(message);
    this.onChange();
  }
  fail(message) {
    this.stats.error = message;
    this.onChange();
  }

  /** Reads the catalog and plays what it offers; returns when the catalog track ends. */
  async run() {
    const s = this.stats;
    s.state = "reading the catalog";
    this.onChange();
    let sub;
    try { sub = await this.session.join(this.namespace, "catalog", { priority: PRIORITY.catalog }); }
    catch (e) { return this.fail(`catalog: ${e.message}`); }
    this.subs.add(sub);
    let catalog = null;
    let group = null;
    try {
      for await (const o of sub) {
        if (this.stopped) return;
        if (o.status !== 0) continue;
        if (o.id === 0) group = o.group;
        else if (o.group !== group) continue; // a delta whose independent catalog we lack (MSF: ignored)
        try { catalog = parseCatalog(o.payload, o.id === 0 ? null : catalog); }
        catch (e) { this.fail(e.message); continue; }
        s.catalog = catalog;
        s.catalogs++;
        await this.select(catalog);
      }
      if (!this.stopped) s.state = "the catalog track ended";
    } catch (e) {
      if (!this.stopped) this.fail(`catalog: ${e.message}`);
    }
    this.onChange();
  }

  /** Chooses a video and an audio track the browser can decode, and plays them. */
  async select(catalog) {
    const s = this.stats;
    const pick = async (kind) => {
      const all = catalog.tracks.filter((t) => role(t) === kind);
      const loc = all.filter((t) => t.packaging === "loc");
      for (const t of all.filter((t) => t.packaging !== "loc")) this.note(`${kind} track ${t.name}: packaging "${t.packaging}" is not played here (LOC only)`);
      for (const t of loc) {
        let ok = false;
        let config;
        try {
          config = this.config(kind, catalog, t); // throws on init data that is not base64
          const Decoder = kind === "video" ? globalThis.VideoDecoder : globalThis.AudioDecoder;
          if (!Decoder) throw new Error(`this browser has no ${kind === "video" ? "VideoDecoder" : "AudioDecoder"} (WebCodecs needs a secure context)`);
          ok = (await Decoder.isConfigSupported(config)).supported;
        } catch (e) { this.note(`${kind} track ${t.name}: ${e.message}`); continue; }
        if (ok) return { track: t, config };
        const message = `${kind} codec "${t.codec}" (track ${t.name}) cannot be decoded by this browser`;
        if (!s.unsupported.includes(message)) { s.unsupported.push(message); this.note(message); }
      }
      return null;
    };
    const video = await pick("video");
    const audio = await pick("audio");
    const key = JSON.stringify([video?.track, audio?.track]);
    if (key === this.selected) return; // a new catalog that changes nothing we play
    this.selected = key;
    this.stopMedia();
    if (!video && !audio) {
      s.state = "nothing to play";
      return this.fail(`nothing playable in this broadcast${s.unsupported.length ? `: ${s.unsupported.join("; ")}` : ""}`);
    }
    s.error = null;
    s.video = video && { name: video.track.name, codec: video.track.codec };
    s.audio = audio && { name: audio.track.name, codec: audio.track.codec };
    s.state = "playing";
    this.onChange();
    const media = (this.media = { stopped: false });
    if (video) this.playVideo(media, video.track, video.config);
    if (audio) this.playAudio(media, audio.track, audio.config);
  }

  /** The WebCodecs decoder configuration of a catalog track (description from its init data). */
  config(kind, catalog, t) {
    const description = initData(catalog, t) ?? undefined;
    if (kind === "video") {
      return { codec: t.codec, codedWidth: t.width, codedHeight: t.height, description, optimizeForLatency: true };
    }
    return { codec: t.codec, sampleRate: Number(t.samplerate) || 48000, numberOfChannels: Number(t.channelConfig) || 2, description };
  }

  trackNamespace(t) {
    return typeof t.namespace === "string" ? t.namespace.split("/").filter((f) => f) : this.namespace;
  }

  /** Subscribes to a media track (join: its latest group, then live) and hands over its objects. */
  async read(media, t, kind, each) {
    let sub;
    try { sub = await this.session.join(this.trackNamespace(t), t.name, { priority: PRIORITY[kind] }); }
    catch (e) { return media.stopped || this.fail(`${kind} track ${t.name}: ${e.message}`); }
    if (media.stopped) return sub.cancel();
    this.subs.add(sub);
    media[kind + "Sub"] = sub;
    try {
      for await (const o of sub) {
        if (media.stopped) break;
        if (o.status === 0) each(o);
      }
      if (!media.stopped) this.note(`${kind} track ${t.name} ended`);
    } catch (e) {
      if (!media.stopped) this.fail(`${kind} track ${t.name}: ${e.message}`);
    } finally {
      this.subs.delete(sub);
    }
  }

  /** Configures a decoder; a configuration WebCodecs refuses is noted (the decoder is closed). */
  configure(decoder, config) {
    try { decoder.configure(config); }
    catch (e) { this.note(`cannot configure the ${config.codec} decoder: ${e.message}`); }
  }

  /** The latency of a LOC timestamp (µs since the epoch), or null for media time. */
  latency(o) {
    const ts = property(o.properties, LOC.TIMESTAMP);
    if (ts === undefined) return { ts: null, ms: null };
    const scale = property(o.properties, LOC.TIMESCALE);
    if (scale !== undefined) return { ts: Number(ts) * 1e6 / Number(scale), ms: null };
    return { ts: Number(ts), ms: null, wall: true };
  }

  playVideo(media, t, config) {
    const s = this.stats;
    let current = config.description ? config : null; // the configuration in use
    let waitKey = true;
    // A decoder that fails (corrupt data) is closed by WebCodecs: a new one starts at the next
    // keyframe.
    const create = () => new VideoDecoder({
      output: (frame) => {
        try {
          if (media.stopped) return;
          if (this.canvas.width !== frame.displayWidth) this.canvas.width = frame.displayWidth;
          if (this.canvas.height !== frame.displayHeight) this.canvas.height = frame.displayHeight;
          this.ctx2d.drawImage(frame, 0, 0);
          s.videoFrames++;
          if (media.wallClock) this.measure("video", Date.now() - frame.timestamp / 1000);
        } finally { frame.close(); }
      },
      error: (e) => { if (!media.stopped) { s.decodeErrors++; this.note(`video decoder: ${e.message}`); } },
    });
    let decoder = (media.video = create());
    if (current) this.configure(decoder, current);
    let lastGroup = null;
    this.read(media, t, "video", (o) => {
      const described = property(o.properties, LOC.VIDEO_CONFIG);
      if (decoder.state === "closed" && !media.stopped) {
        decoder = media.video = create();
        if (current) this.configure(decoder, current);
        waitKey = true;
      }
      if (described && !sameBytes(described, current?.description)) {
        current = { ...config, description: described.slice() };
        this.configure(decoder, current);
        waitKey = true;
      }
      const marking = property(o.properties, LOC.VIDEO_FRAME_MARKING);
      const key = o.id === 0 || (marking instanceof Uint8Array && marking.length > 0 && (marking[0] & 0x20) !== 0);
      // A gap (a group we did not get from its start) waits for the next keyframe.
      if (lastGroup !== null && o.group !== lastGroup && !key) waitKey = true;
      lastGroup = o.group;
      if (waitKey && !key) { s.videoSkipped++; return; }
      if (!current) { s.videoSkipped++; return; } // no description yet
      // Behind by more than MAX_VIDEO_QUEUE frames (a slow or busy machine): what is queued is
      // decoded, the rest of this group is dropped, and playback goes on from the next keyframe.
      if (!key && decoder.decodeQueueSize > MAX_VIDEO_QUEUE) { waitKey = true; s.videoSkipped++; return; }
      waitKey = false;
      s.videoFirstGroup ??= o.group;
      s.videoGroup = o.group;
      const { ts, wall } = this.latency(o);
      media.wallClock = !!wall;
      if (wall) s.videoArrivalLatencyMs = Math.round(Date.now() - ts / 1000); // before decoding
      try {
        decoder.decode(new EncodedVideoChunk({ type: key ? "key" : "delta", timestamp: ts ?? 0, data: o.payload }));
        s.videoObjects++;
      } catch (e) { waitKey = true; this.note(`video: ${e.message}`); }
    });
  }

  playAudio(media, t, config) {
    const s = this.stats;
    let current = config.description || !/^mp4a/.test(config.codec) ? config : null;
    let audio;
    try { audio = this.audioContext ??= new AudioContext({ latencyHint: "interactive" }); }
    catch (e) { this.note(`Web Audio: ${e.message}`); }
    audio?.resume().catch(() => {});
    let playhead = 0;
    const create = () => new AudioDecoder({
      output: (data) => {
        try {
          if (media.stopped) return;
          s.audioSamples += data.numberOfFrames;
          if (media.audioWallClock) this.measure("audio", Date.now() - data.timestamp / 1000);
          if (!audio) return;
          if (audio.state !== "running") audio.resume().catch(() => {});
          const buffer = audio.createBuffer(data.numberOfChannels, data.numberOfFrames, data.sampleRate);
          for (let ch = 0; ch < data.numberOfChannels; ch++) {
            const plane = new Float32Array(data.numberOfFrames);
            data.copyTo(plane, { planeIndex: ch, format: "f32-planar" });
            buffer.copyToChannel(plane, ch);
          }
          const now = audio.currentTime;
          if (playhead < now) playhead = now + 0.05; // an underrun: start again a little ahead
          if (playhead - now > MAX_AUDIO_AHEAD) { s.audioDropped += data.numberOfFrames; return; }
          const node = audio.createBufferSource();
          node.buffer = buffer;
          node.connect(audio.destination);
          node.start(playhead);
          playhead += buffer.duration;
          s.audioScheduled += data.numberOfFrames;
        } finally { data.close(); }
      },
      error: (e) => { if (!media.stopped) { s.decodeErrors++; this.note(`audio decoder: ${e.message}`); } },
    });
    let decoder = (media.audio = create());
    if (current) this.configure(decoder, current);
    this.read(media, t, "audio", (o) => {
      const described = property(o.properties, LOC.AUDIO_CONFIG);
      if (decoder.state === "closed" && !media.stopped) { // it failed: a new one
        decoder = media.audio = create();
        if (current) this.configure(decoder, current);
      }
      if (described && !sameBytes(described, current?.description)) {
        current = { ...config, description: described.slice() };
        this.configure(decoder, current);
      }
      if (!current) { s.audioSkipped++; return; }
      const { ts, wall } = this.latency(o);
      media.audioWallClock = !!wall;
      try {
        decoder.decode(new EncodedAudioChunk({ type: "key", timestamp: ts ?? 0, data: o.payload }));
        s.audioObjects++;
      } catch (e) { this.note(`audio: ${e.message}`); }
    });
  }

  /** Records one latency sample (ms): the latest, and the page's `latencyMs` (video first). */
  measure(kind, ms) {
    const s = this.stats;
    s[`${kind}LatencyMs`] = Math.round(ms);
    if (kind === "video" || !this.media?.video) s.latencyMs = Math.round(ms);
    s.latencySamples++;
  }

  stopMedia() {
    const media = this.media;
    if (!media) return;
    media.stopped = true;
    for (const d of [media.video, media.audio]) if (d && d.state !== "closed") d.close();
    media.videoSub?.cancel();
    media.audioSub?.cancel();
    this.media = null;
  }

  stop() {
    this.stopped = true;
    this.stopMedia();
    for (const sub of this.subs) sub.cancel();
    this.subs.clear();
    this.audioContext?.close().catch(() => {});
  }
}

/** Fresh page statistics (window.player). */
export function newStats(namespace) {
  return {
    namespace: namespace.join("/"), state: "starting", error: null, messages: [], unsupported: [],
    catalog: null, catalogs: 0, video: null, audio: null,
    videoFrames: 0, videoObjects: 0, videoSkipped: 0, videoFirstGroup: null, videoGroup: null,
    audioSamples: 0, audioObjects: 0, audioSkipped: 0, audioScheduled: 0, audioDropped: 0,
    latencyMs: null, videoLatencyMs: null, audioLatencyMs: null, videoArrivalLatencyMs: null, latencySamples: 0,
    decodeErrors: 0,
  };
}
