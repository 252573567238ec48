// moq.js: a minimal Media over QUIC Transport subscriber over the browser's WebTransport API,
// or over a WebSocket (QMux, qmux.js) where WebTransport is missing or blocked. It speaks
// draft-ietf-moq-transport-19, and draft-14 where the WebTransport session negotiated no
// protocol (Firefox ESR, 140 and 153 alike, has no `protocols` option, so no
// WT-Available-Protocols: a server then negotiates the version in CLIENT_SETUP / SERVER_SETUP,
// draft-14 §3.2, §9.3). A plain ES module: its wire layer is moq-wire.js (tables, codecs, framing), the handles it
// returns are in moq-handles.js (Subscription, Fetch, Joined, `property`), no build step.
//
// A version is a table (VERSIONS: integer codec, message type codes, per-request error
// messages, valid data stream and datagram types) plus a few named branches in the Session:
// `v.control` ("streams": draft-19's request streams; "single": draft-14's one control stream
// that carries every request's messages by Request ID), `v.inline` (draft-14's SUBSCRIBE /
// SUBSCRIBE_OK / FETCH / FETCH_OK fields that draft-19 carries as parameters or Track
// Properties), `v.kvpParams` (draft-14 parameters are Key-Value-Pairs; draft-19 each type has
// its shape), `v.deltaTypes` (draft-19 Key-Value-Pair types are deltas).
//
// draft-19 (sections): §1.4.1 vi64 integers; §1.4.3 Key-Value-Pairs (Setup Options and
// Properties; unknown types skipped by parity); §2.4.1 Track Namespace; §3.1.4 WebTransport,
// version by WT-Available-Protocols ("moqt-19"); §3.3 SETUP on a pair of unidirectional control
// streams; §3.3.2-3.3.3 request streams (FIN; cancel = RESET_STREAM + STOP_SENDING); §10 control
// framing (Type vi64, Length 16, Body); §10.2 Message Parameters (count-prefixed, each type has
// its own value shape, so an unknown one cannot be skipped: it closes the session); §10.3 SETUP;
// §10.4 GOAWAY (recorded only); §10.5 REQUEST_OK; §10.6 REQUEST_ERROR; §10.7 SUBSCRIBE; §10.8
// SUBSCRIBE_OK; §10.11 PUBLISH_DONE; §10.16-10.18 NAMESPACE, NAMESPACE_DONE,
// SUBSCRIBE_NAMESPACE; §10.12-10.13 FETCH (standalone, relative and absolute joining) and
// FETCH_OK; §11.2 objects (status, properties; Immutable Properties §12.7 searched by
// `property`); §11.3.1 OBJECT_DATAGRAM; §11.4.2 SUBGROUP_HEADER; §11.4.4 FETCH_HEADER and fetch
// objects; §11.5 padding. `join` = SUBSCRIBE (Largest Object) + relative Joining FETCH (§5.1.5).
// Not here: publishing, TRACK_STATUS, SUBSCRIBE_TRACKS, REQUEST_UPDATE, authorization tokens;
// requests the server opens are refused (NOT_SUPPORTED).
//
// draft-14 (sections): QUIC variable-length integers (RFC 9000 §16); §1.4.2 Key-Value-Pairs
// (absolute types); §3.3 one client-opened bidirectional control stream; §9 control framing;
// §9.1 Request IDs; §9.2 parameters (unknown ones ignored); §9.3 CLIENT_SETUP / SERVER_SETUP
// (version 0xff00000E, MAX_REQUEST_ID); §9.4 GOAWAY; §9.5-9.6 MAX_REQUEST_ID and
// REQUESTS_BLOCKED; §9.7-9.9 SUBSCRIBE, SUBSCRIBE_OK, SUBSCRIBE_ERROR; §9.11 UNSUBSCRIBE; §9.12
// PUBLISH_DONE; §9.13/§9.15 PUBLISH refused with PUBLISH_ERROR (UNINTERESTED); §9.16-9.19 FETCH,
// FETCH_OK, FETCH_ERROR, FETCH_CANCEL; §9.23-9.26 PUBLISH_NAMESPACE (answered
// PUBLISH_NAMESPACE_OK inside a SUBSCRIBE_NAMESPACE's prefix) and PUBLISH_NAMESPACE_DONE, which
// the Session turns into the same "added" / "removed" events as draft-19's NAMESPACE /
// NAMESPACE_DONE; §9.28-9.31 SUBSCRIBE_NAMESPACE (a prefix of 1 to 32 fields), its OK / ERROR,
// UNSUBSCRIBE_NAMESPACE; §10.3.1 OBJECT_DATAGRAM; §10.4.2 SUBGROUP_HEADER; §10.4.4 FETCH_HEADER
// and fetch objects (every field explicit, Object Status); §11.2 Immutable Extensions.
//
// A Session runs over a WebTransport or anything with its interface (qmux.js's QmuxSession);
// connect.js picks one and exchanges SETUP. `session.version` is the draft in use (19 or 14).
//
//   const s = await connect("https://localhost:4443/", { fingerprint: "ab12..." }); // connect.js
//   for await (const e of await s.subscribeNamespace(["live"])) console.log(e.type, e.namespace);
//   for await (const o of await s.subscribe(["clock"], "seconds")) console.log(o.group, o.id);
//   for await (const o of await s.join(["live", "demo"], "catalog")) console.log(o.group, o.id);


import {
  IMPLEMENTATION, PROTOCOL_VIOLATION, INVALID_REQUEST_ID, DUPLICATE_TRACK_ALIAS, TOO_MANY_REQUESTS,
  VERSION_NEGOTIATION_FAILED,
  CANCELLED, MoqError, ProtocolError, VERSIONS, SERVER_REQUEST_WINDOW, utf8,
  Out, frame, streamError, add, Buf, FETCH_HEADER,
  FIRST_MESSAGES, StreamReader, RouteReader, Queue, VERSION,
} from "./moq-wire.js";

import { Fetch, Joined, Subscription, property } from "./moq-handles.js";

export { MoqError, VERSION, Fetch, Joined, Subscription, property };

// ---- the session ------------------------------------------------------------------------------

export class Session {
  /** `wt`: a WebTransport, or a QmuxSession (qmux.js); `transport` names which ("webtransport", "websocket"). */
  constructor(wt, transport = "webtransport") {
    Object.assign(this, { wt, transport, protocol: "", version: null, v: VERSIONS[19], error: null, nextRequestId: 0 }); // client IDs even (§10.1)
    this.serverSetup = null; // { implementation, options: [{type, value}] }
    this.goaway = null; // { uri, timeout } once the server sent GOAWAY; see also `ongoaway`
    this.aliases = new Map(); // Track Alias -> Set of subscriptions
    this.aliasWaiters = new Map(); // Track Alias -> [resolve]: data that came before SUBSCRIBE_OK
    this.refused = new Set(); // Track Aliases of PUBLISHes we refused (draft-14): their data is abandoned
    this.fetches = new Map(); // Request ID -> Fetch, until its data stream ends
    this.live = new Set(); // queues to fail when the session ends
    // draft-14's one control stream: its writer, the requests it carries (Request ID -> route),
    // the namespace subscriptions PUBLISH_NAMESPACE is matched with, Request ID credit (§9.5).
    // `announced`: the namespaces the server announced and we accepted, until PUBLISH_NAMESPACE_DONE
    // (a session's state in draft-14, §6.2, not a SUBSCRIBE_NAMESPACE's).
    Object.assign(this, { control: null, routes: new Map(), prefixes: new Map(), announced: new Map(), peerMaxRequestId: 0, creditWaiters: [], blockedAt: null,
      nextServerRequestId: 1, grantedServerRequestId: 1 + 2 * SERVER_REQUEST_WINDOW });
    this.setupReceived = new Promise((resolve, reject) => (this.setupDone = { resolve, reject }));
    this.setupReceived.catch(() => {});
    /** Resolves when the session has ended; `error` then says why. */
    this.closed = wt.closed.then(
      (info) => this.fail(info?.closeCode ?? 0, info?.reason ?? "", true),
      (e) => this.fail(0, String(e?.reason || e?.message || e), true), // (qmux.js: reason alone)
    );
  }

  /** A message body builder in this session's version. */
  out() { return new Out(this.v); }

  async start() {
    await this.wt.ready;
    this.protocol = this.wt.protocol ?? "";
    if (this.protocol && this.protocol !== VERSION) throw new Error(`server chose ${this.protocol}`);
    // A WebTransport session that negotiated no protocol (Firefox ESR: no `protocols` option, so
    // no WT-Available-Protocols) leaves the version to CLIENT_SETUP: draft-14 (§3.2, §9.3).
    this.v = !this.protocol && this.transport === "webtransport" ? VERSIONS[14] : VERSIONS[19];
    this.version = this.v.draft;
    this.acceptUni(); this.acceptBidi(); this.acceptDatagrams();
    if (this.v.control === "single") await this.startSingle();
    else {
      const options = this.out().int(0x07).text(IMPLEMENTATION).b; // MOQT_IMPLEMENTATION (0x07: odd, so Length + bytes)
      const control = (await this.wt.createUnidirectionalStream()).getWriter();
      await control.write(frame(this.v, this.v.msg.SETUP, options)); // never closed: that would be a violation
    }
    await this.setupReceived;
    this.protocol ||= this.v.protocol;
  }

  // draft-14 §3.3: the client opens one bidirectional control stream and sends CLIENT_SETUP
  // (§9.3): the versions it offers (0xff00000E) and MAX_REQUEST_ID (setup parameter 0x02, so
  // the server may open requests: PUBLISH_NAMESPACE for our SUBSCRIBE_NAMESPACE). No
  // MOQT_IMPLEMENTATION: draft-14 gives it 0x05, AUTHORITY's number, which MUST NOT be sent
  // over WebTransport (§9.3.2.1).
  async startSingle() {
    const stream = await this.wt.createBidirectionalStream();
    this.control = stream.writable.getWriter();
    const body = this.out().int(1).int(this.v.setupNumber).int(1).int(0x02).int(this.grantedServerRequestId).b;
    await this.control.write(frame(this.v, this.v.msg.CLIENT_SETUP, body));
    this.guard(() => this.onSingleControl(new StreamReader(stream.readable, this.v))).catch(() => {});
  }

  /** Sends one message on draft-14's control stream (never closed: §3.3). */
  send(type, body) {
    if (!this.error) this.control.write(frame(this.v, type, body)).catch((e) => this.fail(0, `control stream: ${e?.message ?? e}`));
  }

  /** Closes the session with `code` (0 = NO_ERROR). */
  close(code = 0, reason = "") { this.fail(code, reason); }

  /** Ends the session once: closes the transport (unless the peer did) and fails every waiter. */
  fail(code, reason, remote = false) {
    if (this.error) return;
    this.error = new MoqError(code, reason, { session: true, remote });
    if (!remote) try { this.wt.close({ closeCode: code, reason: reason.slice(0, 1000) }); } catch {}
    this.setupDone.reject(this.error);
    for (const q of this.live) q.fail(this.error);
    for (const waiters of this.aliasWaiters.values()) waiters.forEach((w) => w());
    for (const route of this.routes.values()) route.rd.queue.fail(this.error);
    this.creditWaiters.splice(0).forEach((w) => w());
  }

  /** Runs `f`; a ProtocolError closes the session with its code (PROTOCOL_VIOLATION, ...); errors are rethrown. */
  async guard(f) {
    try { return await f(); } catch (e) {
      if (e instanceof ProtocolError) this.fail(e.code, e.message);
      throw e?.name === "WebTransportError" ? (this.error ?? new MoqError(e.streamErrorCode ?? 0, "stream reset")) : e;
    }
  }

  /** Reads every item of a ReadableStream of streams or datagrams with `f`, until the session ends. */
  async each(readable, f) {
    const reader = readable.getReader();
    for (;;) {
      const { value, done } = await reader.read().catch(() => ({ done: true }));
      if (done) return;
      this.guard(() => f(value)).catch(() => {});
    }
  }

  acceptUni() { return this.each(this.wt.incomingUnidirectionalStreams, (s) => this.onUni(new StreamReader(s, this.v))); }
  acceptDatagrams() { return this.each(this.wt.datagrams.readable, (d) => this.onDatagram(new Buf(d, this.v))); }

  // Requests the server opens (PUBLISH, ...): refused with REQUEST_ERROR NOT_SUPPORTED + FIN
  // (draft-19 §3.3.3). draft-14 §3.3: a second bidirectional stream MAY close the session.
  acceptBidi() {
    return this.each(this.wt.incomingBidirectionalStreams, async (stream) => {
      if (this.v.control === "single") throw new ProtocolError("a second bidirectional stream");
      const { type } = await new StreamReader(stream.readable, this.v).message();
      if (!FIRST_MESSAGES.has(type)) throw new ProtocolError(`request stream starting with 0x${type.toString(16)}`);
      const body = this.out().int(0x3).int(0x0).text("this client accepts no requests").b; // NOT_SUPPORTED, Retry Interval 0 (don't retry)
      const w = stream.writable.getWriter();
      await w.write(frame(this.v, this.v.msg.REQUEST_ERROR, body));
      await w.close();
    });
  }

  /** A unidirectional stream (§3.4): control, subgroup, fetch or padding by its first integer. */
  async onUni(rd) {
    const type = await rd.vi();
    if (type === this.v.msg.SETUP) return this.onControl(rd);
    if (type === this.v.padding) return rd.cancel(CANCELLED); // PADDING (draft-19 §11.5)
    if (type === FETCH_HEADER) return this.onFetchStream(rd);
    if (typeof type === "number" && this.v.subgroupType(type)) return this.onSubgroup(rd, type);
    // draft-19 §3.4, draft-14 §10: an unknown stream type MUST close the session.
    throw new ProtocolError(`unknown unidirectional stream type 0x${type.toString(16)}`);
  }

  // The server's control stream (§3.3, §10.3): SETUP, then only GOAWAY; it must never end.
  async onControl(rd) {
    if (this.serverSetup) throw new ProtocolError("a second control stream");
    const options = new Buf(await rd.bytes(await rd.u16()), this.v).kvps(); // unknown options ignored
    const impl = options.find((o) => o.type === 0x07);
    this.serverSetup = { implementation: impl ? utf8.decode(impl.value) : "", options };
    this.setupDone.resolve();
    for (;;) {
      if (await rd.done()) throw new ProtocolError("the server closed its control stream");
      const { type, body } = await rd.message();
      if (type !== this.v.msg.GOAWAY) throw new ProtocolError(`unexpected message 0x${type.toString(16)} on the control stream`);
      this.onGoaway(body);
    }
  }

  /** GOAWAY (draft-19 §10.4: New Session URI, Timeout; draft-14 §9.4: the URI alone). */
  onGoaway(body) {
    // draft-19 §10.4, draft-14 §9.4: a second GOAWAY MUST be a PROTOCOL_VIOLATION.
    if (this.goaway) throw new ProtocolError("a second GOAWAY");
    this.goaway = { uri: body.text(8192), timeout: this.v.goawayTimeout ? body.vi() : 0 };
    body.end("GOAWAY");
    this.ongoaway?.(this.goaway);
  }

  // draft-14's control stream (§3.3, §9): SERVER_SETUP first, then every request's messages,
  // addressed by Request ID; it must never end (§3.3).
  async onSingleControl(rd) {
    const m = this.v.msg;
    const first = await rd.message();
    if (first.type !== m.SERVER_SETUP) throw new ProtocolError(`control stream starts with 0x${first.type.toString(16)}`);
    const version = first.body.vi();
    // draft-14 §9.3.1: a version we did not offer MUST close with VERSION_NEGOTIATION_FAILED.
    if (version !== this.v.setupNumber) throw new ProtocolError(`SERVER_SETUP selected version 0x${version.toString(16)}`, VERSION_NEGOTIATION_FAILED);
    const options = [];
    for (let n = first.body.vi(); n > 0; n--) options.push(first.body.kvp(0)); // unknown ones ignored (§9.3)
    first.body.end("SERVER_SETUP");
    const impl = options.find((o) => o.type === 0x05 && o.value instanceof Uint8Array);
    this.serverSetup = { implementation: impl ? utf8.decode(impl.value) : "", options };
    this.peerMaxRequestId = options.find((o) => o.type === 0x02)?.value ?? 0; // §9.3.2.3: default 0
    this.setupDone.resolve();
    for (;;) {
      if (await rd.done()) throw new ProtocolError("the server closed the control stream"); // §3.3
      const { type, body } = await rd.message();
      this.onSingleMessage(type, body);
    }
  }

  /** One message on draft-14's control stream after SERVER_SETUP. */
  onSingleMessage(type, body) {
    const m = this.v.msg;
    if (type === m.GOAWAY) return this.onGoaway(body);
    if (type === m.MAX_REQUEST_ID) {
      const max = body.vi();
      body.end("MAX_REQUEST_ID");
      // draft-14 §9.5: an equal or smaller Maximum Request ID is a PROTOCOL_VIOLATION.
      if (max <= this.peerMaxRequestId) throw new ProtocolError(`MAX_REQUEST_ID ${max} after ${this.peerMaxRequestId}`);
      this.peerMaxRequestId = max;
      return this.creditWaiters.splice(0).forEach((w) => w());
    }
    if (type === m.REQUESTS_BLOCKED) return; // we grant as the server's requests come (serverRequest)
    if (type === m.PUBLISH_NAMESPACE) return this.onPublishNamespace(body);
    if (type === m.PUBLISH_NAMESPACE_DONE) {
      const namespace = body.namespace();
      body.end("PUBLISH_NAMESPACE_DONE");
      this.announced.delete(JSON.stringify(namespace));
      return this.namespaceEvent(namespace, "removed");
    }
    const refusal = this.v.refusals[type];
    if (refusal) {
      const id = this.serverRequest(body);
      if (type === m.PUBLISH) this.refusePublish(body);
      const [errorType, code] = refusal;
      return this.send(errorType, this.out().int(id).int(code).text("this client accepts no requests").b);
    }
    if (!Object.values(m).includes(type)) throw new ProtocolError(`unknown message type 0x${type.toString(16)}`); // §9
    // The rest are addressed to one of our requests by Request ID (§9.1).
    const id = body.vi();
    const route = this.routes.get(id);
    if (!route) {
      // A request that is over (ours: the answer crossed our cancel; the server's: we refused it).
      if (id < (id % 2 ? this.nextServerRequestId : this.nextRequestId)) return;
      throw new ProtocolError(`message 0x${type.toString(16)} for unknown Request ID ${id}`, INVALID_REQUEST_ID);
    }
    route.rd.queue.push({ type, body });
    if (type in this.v.ends) {
      route.peerDone = this.v.ends[type];
      this.routes.delete(id);
      route.rd.queue.end();
    }
  }

  /**
   * A request the server opened (draft-14 §9.1): its Request ID must be the next odd one and
   * below the MAX_REQUEST_ID we granted (§9.5: else TOO_MANY_REQUESTS); we grant more as they
   * come, SERVER_REQUEST_WINDOW ahead.
   */
  serverRequest(body) {
    const id = body.vi();
    if (id % 2 !== 1 || id < this.nextServerRequestId) throw new ProtocolError(`server Request ID ${id}, expected ${this.nextServerRequestId} or more`, INVALID_REQUEST_ID);
    if (id >= this.grantedServerRequestId) throw new ProtocolError(`server Request ID ${id} at or above MAX_REQUEST_ID ${this.grantedServerRequestId}`, TOO_MANY_REQUESTS);
    this.nextServerRequestId = id + 2;
    if (this.grantedServerRequestId - id <= SERVER_REQUEST_WINDOW) {
      this.grantedServerRequestId = id + 2 + 2 * SERVER_REQUEST_WINDOW;
      this.send(this.v.msg.MAX_REQUEST_ID, this.out().int(this.grantedServerRequestId).b);
    }
    return id;
  }

  // draft-14 §9.13: a PUBLISH we do not want gets PUBLISH_ERROR UNINTERESTED (sent by the
  // caller) and its data streams STOP_SENDING: its Track Alias is remembered as refused.
  refusePublish(body) {
    body.namespace();
    body.text(4096);
    this.refused.add(body.vi());
  }

  // draft-14 §6.2, §9.23: the server announces a namespace; inside an active SUBSCRIBE_NAMESPACE
  // prefix it is the draft-19 NAMESPACE event of that request, answered PUBLISH_NAMESPACE_OK.
  // Anything else is not ours to take: PUBLISH_NAMESPACE_ERROR UNINTERESTED (0x4). Either way
  // exactly one answer (§6.2).
  onPublishNamespace(body) {
    const id = this.serverRequest(body);
    const namespace = body.namespace();
    body.params();
    body.end("PUBLISH_NAMESPACE");
    if (this.namespaceEvent(namespace, "added")) {
      this.announced.set(JSON.stringify(namespace), namespace);
      this.send(this.v.msg.PUBLISH_NAMESPACE_OK, this.out().int(id).b);
    }
    else this.send(this.v.msg.PUBLISH_NAMESPACE_ERROR, this.out().int(id).int(0x4).text("no SUBSCRIBE_NAMESPACE covers it").b);
  }

  /** Hands a draft-14 namespace event to the SUBSCRIBE_NAMESPACE whose prefix holds it; false if none. */
  namespaceEvent(namespace, kind) {
    for (const [id, prefix] of this.prefixes) {
      if (prefix.length > namespace.length || prefix.some((f, i) => f !== namespace[i])) continue;
      this.routes.get(id)?.rd.queue.push({ type: kind, suffix: namespace.slice(prefix.length) });
      return true;
    }
    return false;
  }

  // A subgroup stream (draft-19 §11.4.2, draft-14 §10.4.2). Type bits: 0x01 properties on every
  // object, 0x06 subgroup ID mode (0: zero, 1: first object's ID, 2: field), 0x08 end of group,
  // 0x20 default priority (no field; draft-19 only), 0x40 first object (draft-19 only).
  // Objects: ID delta, [properties], length, [status], payload.
  async onSubgroup(rd, type) {
    const alias = await rd.vi();
    const group = await rd.vi();
    const mode = (type >> 1) & 3;
    let subgroup = mode === 2 ? await rd.vi() : mode === 0 ? 0 : null;
    const priority = type & 0x20 ? null : await rd.u8();
    if (this.refused.has(alias)) return rd.cancel(CANCELLED); // draft-14 §9.13: STOP_SENDING
    const subs = await this.track(alias);
    if (!subs) return rd.cancel(CANCELLED); // unknown alias (§11.4.2: MAY abandon the stream)
    subs.forEach((s) => s.streamOpened());
    try {
      for (let id = null; !(await rd.done()); ) {
        id = id === null ? await rd.vi() : add(id, await rd.vi(), 1);
        subgroup ??= id;
        const properties = type & 0x01 ? new Buf(await rd.bytes(await rd.vi()), this.v).kvps() : [];
        const length = await rd.vi();
        const status = length === 0 ? await rd.vi() : 0;
        const payload = await rd.bytes(length);
        const o = { group, subgroup, id, priority, status, properties, payload, firstObject: !!(type & 0x40), endOfGroup: !!(type & 0x08) };
        if (!this.deliver(subs, o)) return rd.cancel(CANCELLED);
      }
    } finally {
      subs.forEach((s) => s.streamClosed());
    }
  }

  // OBJECT_DATAGRAM (draft-19 §11.3.1, draft-14 §10.3.1). Type bits: 0x01 properties, 0x02 end
  // of group, 0x04 object ID 0 (no field), 0x08 default priority (no field; draft-19 only),
  // 0x20 status instead of payload.
  onDatagram(b) {
    const type = b.vi();
    if (type === 0x132b3e29 && this.v.padding) return; // PADDING datagram (draft-19 §11.5)
    // draft-19 §11.3, draft-14 §10: an unknown datagram type MUST close the session.
    if (typeof type !== "number" || !this.v.datagramType(type)) throw new ProtocolError(`invalid datagram type 0x${type.toString(16)}`);
    const alias = b.vi();
    const group = b.vi();
    const id = type & 0x04 ? 0 : b.vi();
    const priority = type & 0x08 ? null : b.u8();
    const properties = type & 0x01 ? new Buf(b.lenBytes(), this.v).kvps() : [];
    // draft-19 §11.3.1, draft-14 §10.3.1: Extensions Present with Length 0 MUST be a PROTOCOL_VIOLATION.
    if (type & 0x01 && !properties.length) throw new ProtocolError("datagram with empty properties");
    const status = type & 0x20 ? b.vi() : 0;
    const payload = type & 0x20 ? new Uint8Array(0) : b.bytes(b.left()).slice();
    const subs = this.aliases.get(alias); // unknown alias: dropped (§11.3)
    if (subs) this.deliver(subs, { group, subgroup: null, id, priority, status, properties, payload, datagram: true, endOfGroup: !!(type & 0x02) });
  }

  /** Hands an object to the subscriptions on its alias; false if none wants it any more. */
  deliver(subs, o) {
    this.checkStatus(o);
    const live = [...subs].filter((s) => !s.cancelled);
    for (const s of live) s.queue.push({ ...o, priority: o.priority ?? s.priority });
    return live.length > 0;
  }

  // draft-19 §11.2.1.1: an unknown status, or a status object with properties or payload, is a
  // violation; draft-14 §10.2.1.1-2: status objects have no payload, Object Does Not Exist no
  // extensions (MUST close with PROTOCOL_VIOLATION).
  checkStatus(o) {
    if (!this.v.statuses.includes(o.status)) throw new ProtocolError(`object status ${o.status}`);
    if (o.status && (o.payload.length || (o.properties.length && !this.v.statusProperties.includes(o.status)))) {
      throw new ProtocolError("status object with properties or payload");
    }
  }

  /** The subscriptions using `alias`, waiting up to 2 s for a SUBSCRIBE_OK still in flight. */
  async track(alias) {
    if (!this.aliases.has(alias) && !this.error) {
      await new Promise((resolve) => {
        this.aliasWaiters.set(alias, [...(this.aliasWaiters.get(alias) ?? []), resolve]);
        setTimeout(resolve, 2000);
      });
    }
    return this.aliases.get(alias);
  }

  /**
   * Starts a request: message `type` with body `body(requestId)`; `cancelBody` is draft-14's
   * cancel message body (default: the Request ID). Draft-19 opens a request stream (§3.3);
   * draft-14 sends it on the control stream and reads its answers by Request ID (§9.1).
   */
  async request(type, body, cancelBody = null) {
    if (this.error) throw this.error;
    if (this.v.control === "single") return this.routeRequest(type, body, cancelBody);
    const id = this.nextRequestId;
    this.nextRequestId += 2;
    const stream = await this.wt.createBidirectionalStream();
    const writer = stream.writable.getWriter();
    await writer.write(frame(this.v, type, body(id)));
    const rd = new StreamReader(stream.readable, this.v);
    const cancel = () => { writer.abort(streamError(CANCELLED)).catch(() => {}); rd.cancel(CANCELLED); }; // §3.3.3
    const finish = () => writer.close().catch(() => {}); // our FIN once the server has FINed (§3.3.2)
    return { id, type, rd, cancel, finish };
  }

  async routeRequest(type, body, cancelBody) {
    // draft-14 §9.5: a Request ID at or above the server's MAX_REQUEST_ID is not allowed: wait
    // for more, saying REQUESTS_BLOCKED once per limit (§9.6).
    while (this.nextRequestId >= this.peerMaxRequestId && !this.error) {
      if (this.blockedAt !== this.peerMaxRequestId) {
        this.blockedAt = this.peerMaxRequestId;
        this.send(this.v.msg.REQUESTS_BLOCKED, this.out().int(this.peerMaxRequestId).b);
      }
      await new Promise((resolve) => this.creditWaiters.push(resolve));
    }
    if (this.error) throw this.error;
    const id = this.nextRequestId;
    this.nextRequestId += 2;
    const route = { rd: new RouteReader(), peerDone: false, over: false };
    this.routes.set(id, route);
    this.send(type, body(id));
    const forget = () => { this.routes.delete(id); this.prefixes.delete(id); route.rd.cancel(); };
    const cancel = () => {
      forget();
      if (route.peerDone || route.over || this.error) return;
      route.over = true;
      this.send(this.v.cancels[type], cancelBody ?? this.out().int(id).b);
    };
    return { id, type, rd: route.rd, cancel, finish: forget };
  }

  /** Reads the first response of a request: `okType` (read by `parseOk`) or its error message. */
  async response(req, okType, parseOk) {
    try { // draft-19: the server FINs after REQUEST_ERROR; we cancel either way
      if (await req.rd.done()) throw new MoqError(0, "request stream ended without a response");
      const { type, body } = await req.rd.message();
      const error = this.v.errors(req.type);
      if (type === error.type) {
        const code = body.vi();
        const retryInterval = error.retry ? body.vi() : undefined;
        const reason = body.text(1024);
        throw new MoqError(code, reason, { retryInterval, names: error.names }); // (a REDIRECT's details are not read)
      }
      if (type !== okType) throw new ProtocolError(`first response 0x${type.toString(16)}`);
      parseOk(body);
      body.end("response");
    } catch (e) { req.cancel(); throw e; }
  }

  /** Runs the rest of a request in the background: its end or failure ends or fails `q`. */
  pump(req, q, f) {
    this.live.add(q);
    this.guard(f).then(req.finish, (e) => { q.fail(e); req.cancel(); }).finally(() => this.live.delete(q));
  }

  /**
   * SUBSCRIBE_NAMESPACE (draft-19 §10.18, draft-14 §9.28) for `prefix` (fields; [] =
   * everything, draft-19 only). Namespaces only: draft-19 has no Subscribe Options; tracks
   * would come from SUBSCRIBE_TRACKS (0x51), which we don't send (draft-14's PUBLISHes are
   * refused). Resolves after REQUEST_OK (SUBSCRIBE_NAMESPACE_OK) to an async iterable of
   * {type: "added"|"removed", namespace, suffix}; rejects with a MoqError on an error answer,
   * or, in draft-14, for an empty prefix (codeName "EMPTY_PREFIX"). `cancel()` (or leaving a
   * for-await loop) cancels.
   */
  async subscribeNamespace(prefix = []) {
    // draft-14 §9.28: a prefix of 0 fields MUST close the session: we do not send one.
    if (prefix.length < this.v.minFields) {
      throw new MoqError(null, `draft-${this.v.draft} cannot subscribe to every namespace: give a prefix`, { codeName: "EMPTY_PREFIX" });
    }
    const req = await this.request(this.v.msg.SUBSCRIBE_NAMESPACE, (id) => {
      if (this.v.control === "single") this.prefixes.set(id, prefix);
      return this.out().int(id).namespace(prefix).int(0).b; // Number of Parameters
    }, this.out().namespace(prefix).b); // UNSUBSCRIBE_NAMESPACE names the prefix (draft-14 §9.31)
    const q = new Queue(() => req.cancel());
    q.cancel = () => q.return();
    await this.guard(() => this.response(req, this.v.msg.SUBSCRIBE_NAMESPACE_OK, (body) => {
      if (this.v.inline) return; // draft-14 §9.29: the Request ID alone
      body.params();
      if (body.left()) throw new ProtocolError("SUBSCRIBE_NAMESPACE_OK with track properties");
    }));
    // draft-14 §9.28: the server sends only the PUBLISH_NAMESPACEs it has not sent this session
    // yet; those it sent before (to an earlier prefix) are this request's too.
    for (const namespace of this.announced.values()) this.namespaceEvent(namespace, "added");
    this.pump(req, q, async () => {
      const active = new Map();
      const event = (type, suffix) => q.push({ type, namespace: [...prefix, ...suffix], suffix });
      const m = this.v.msg;
      while (!(await req.rd.done())) {
        const { type, body, suffix: given } = await req.rd.message();
        // draft-14's PUBLISH_NAMESPACE / _DONE come as events (namespaceEvent); draft-19's as messages.
        const kind = given ? type : type === m.NAMESPACE ? "added" : type === m.NAMESPACE_DONE ? "removed" : null;
        if (!kind) throw new ProtocolError(`message 0x${type.toString(16)} after SUBSCRIBE_NAMESPACE`);
        const suffix = given ?? body.namespace();
        body?.end("NAMESPACE");
        const key = JSON.stringify(suffix);
        // draft-19 §10.18: NAMESPACE_DONE before its NAMESPACE is a PROTOCOL_VIOLATION.
        if (kind === "removed" && !active.delete(key)) {
          if (given) continue; // draft-14: withdrawn before this request saw it (announced to an earlier one)
          throw new ProtocolError("NAMESPACE_DONE before NAMESPACE");
        }
        if (kind === "added") active.set(key, suffix);
        event(kind, suffix);
      }
      active.forEach((suffix) => event("removed", suffix)); // FIN: every namespace is done (§10.18)
      q.end();
    });
    return q;
  }

  /**
   * SUBSCRIBE (draft-19 §10.7, draft-14 §9.7) to `track` in `namespace` (fields). Resolves
   * after SUBSCRIBE_OK to a Subscription, an async iterable of objects {group, subgroup, id,
   * priority, status, properties, payload} (status 0 normal, 3 end of group, 4 end of track;
   * draft-14 also 1, does not exist) that ends after PUBLISH_DONE (then see `.done`) and throws
   * when the request or the session fails. Rejects with a MoqError on REQUEST_ERROR
   * (SUBSCRIBE_ERROR). Options: `filter` "largest" | "next-group" (default: none, unfiltered),
   * `priority` (SUBSCRIBER_PRIORITY 0-255).
   */
  async subscribe(namespace, track, { filter, priority } = {}) {
    const req = await this.request(this.v.msg.SUBSCRIBE, (id) => {
      const out = this.out().int(id).namespace(namespace).text(track);
      if (this.v.inline) {
        // draft-14 §9.7: Subscriber Priority, Group Order (0: the publisher's), Forward 1, Filter
        // Type (unfiltered = AbsoluteStart {0, 0}), no parameters.
        out.u8(priority ?? 128).u8(0).u8(1);
        if (filter) out.int(filter === "next-group" ? 0x1 : 0x2);
        else out.int(0x3).int(0).int(0);
        return out.int(0).b;
      }
      out.int((priority !== undefined) + !!filter);
      if (priority !== undefined) out.u8(0x20).u8(priority); // SUBSCRIBER_PRIORITY
      if (filter) out.u8(priority !== undefined ? 0x01 : 0x21).u8(1).u8(filter === "next-group" ? 0x1 : 0x2);
      return out.b;
    });
    const sub = new Subscription(this, req, JSON.stringify([namespace, track]));
    Object.assign(sub, { requestId: req.id, subscriberPriority: priority });
    await this.guard(async () => {
      await this.response(req, this.v.msg.SUBSCRIBE_OK, (body) => {
        sub.alias = body.vi();
        if (this.v.inline) {
          // draft-14 §9.8: Expires, Group Order (1 or 2), Content Exists, [Largest Location], Parameters.
          body.vi();
          const order = body.u8();
          if (order < 1 || order > 2) throw new ProtocolError(`SUBSCRIBE_OK Group Order ${order}`);
          sub.largest = body.flag("SUBSCRIBE_OK Content Exists") ? { group: body.vi(), object: body.vi() } : null;
          sub.params = body.params();
          sub.properties = [];
        } else {
          sub.params = body.params();
          sub.largest = sub.params[0x09] ?? null;
          sub.properties = body.kvps(); // Track Properties
        }
        sub.priority = sub.properties.find((p) => p.type === 0x0e)?.value ?? 128; // DEFAULT_PUBLISHER_PRIORITY
      });
      const same = this.aliases.get(sub.alias) ?? new Set(); // (§11.1: one alias, one track)
      if ([...same].some((other) => other.key !== sub.key)) {
        this.fail(DUPLICATE_TRACK_ALIAS, `alias ${sub.alias} names two tracks`);
        throw this.error;
      }
      this.refused.delete(sub.alias);
      this.aliases.set(sub.alias, same.add(sub));
      (this.aliasWaiters.get(sub.alias) ?? []).forEach((w) => w());
      this.aliasWaiters.delete(sub.alias);
    });
    this.pump(req, sub.queue, async () => {
      if (await req.rd.done()) throw new MoqError(0, "the subscription ended without PUBLISH_DONE");
      const { type, body } = await req.rd.message();
      if (type === this.v.msg.GOAWAY) throw new MoqError(0x6, "GOAWAY for this subscription");
      if (type !== this.v.msg.PUBLISH_DONE) throw new ProtocolError(`message 0x${type.toString(16)} after SUBSCRIBE_OK`);
      sub.done = { code: body.vi(), streamCount: body.vi(), reason: body.text(1024) };
      body.end("PUBLISH_DONE");
      if (!(await req.rd.done())) throw new ProtocolError("a message after PUBLISH_DONE");
      sub.finishing();
    });
    return sub;
  }

  /**
   * Standalone FETCH (draft-19 §10.12.1, draft-14 §9.16.1) of `track` in `namespace` from
   * `start` to `end` ({group, object}; `end` is the last object plus 1, object 0 = the whole
   * group). Resolves after FETCH_OK to a Fetch, an async iterable of the objects {group,
   * subgroup, id, priority, properties, payload} in ascending order, which ends when the data
   * stream ends (FIN); `.ok` is {endOfTrack, end, properties}. Rejects with a MoqError on
   * REQUEST_ERROR (FETCH_ERROR).
   */
  async fetch(namespace, track, { start, end }) {
    return this.startFetch(0x1, (out) => out.namespace(namespace).text(track).int(start.group).int(start.object).int(end.group).int(end.object));
  }

  /**
   * Joining FETCH (§10.12.2) of the objects before `subscription` (a Subscription from this
   * session, with objects flowing): Relative (type 0x2, from group Joining Location.Group -
   * `start`) or Absolute (type 0x3, from group `start`), up to its Joining Location (§10.12.2.1).
   */
  async joiningFetch(subscription, { start = 0, absolute = false } = {}) {
    return this.startFetch(absolute ? 0x3 : 0x2, (out) => out.int(subscription.requestId).int(start), subscription.subscriberPriority);
  }

  async startFetch(fetchType, body, priority) {
    const f = new Fetch(this);
    const req = await this.request(this.v.msg.FETCH, (id) => {
      this.fetches.set(id, f); // before the FETCH leaves: its data stream may come at once
      const out = this.out().int(id);
      if (this.v.inline) out.u8(priority ?? 128).u8(0x1); // draft-14 §9.16.3: Subscriber Priority, Group Order Ascending
      body(out.int(fetchType));
      return out.int(0).b; // Number of Parameters (draft-19: GROUP_ORDER omitted: Ascending, §10.2.7)
    }).catch((e) => { f.close(); throw e; });
    Object.assign(f, { req, requestId: req.id });
    try {
      await this.guard(() => this.response(req, this.v.msg.FETCH_OK, (b) => {
        // draft-14 §9.17: Group Order first (1 or 2; anything else is a protocol error).
        if (this.v.inline && ![1, 2].includes(b.u8())) throw new ProtocolError("FETCH_OK Group Order");
        const endOfTrack = b.u8();
        if (endOfTrack > 1) throw new ProtocolError(`FETCH_OK End Of Track ${endOfTrack}`);
        const end = { group: b.vi(), object: b.vi() };
        const params = b.params();
        f.ok = { endOfTrack: endOfTrack === 1, end, params, properties: this.v.inline ? [] : b.kvps() };
      }));
    } catch (e) { f.close(); throw e; }
    this.pump(req, f.queue, async () => {
      if (!(await req.rd.done())) throw new ProtocolError("a message after FETCH_OK");
    });
    return f;
  }

  // A fetch data stream (draft-19 §11.4.4): FETCH_HEADER's Request ID, then objects whose
  // Serialization Flags say which fields are present: 0x03 subgroup mode (0: zero, 1: prior,
  // 2: prior + 1, 3: field), 0x04 Object ID Delta, 0x08 Group ID Delta, 0x10 priority, 0x20
  // properties, 0x40 datagram (no subgroup); 0x8C / 0x10C End of Non-Existent / Unknown Range.
  // draft-14 §10.4.4: every field explicit, and an Object Status after a zero length.
  async onFetchStream(rd) {
    const requestId = await rd.vi();
    const f = this.fetches.get(requestId);
    if (!f || f.stream) return rd.cancel(CANCELLED); // unknown or finished request: abandoned
    f.stream = rd;
    const prior = { group: null, object: null, subgroup: null, priority: null };
    const need = (v, what) => {
      // draft-19 §11.4.4.1: a reference to a prior object that does not exist MUST close the
      // session with PROTOCOL_VIOLATION.
      if (v === null) throw new ProtocolError(`fetch object refers to a prior ${what}`);
      return v;
    };
    try {
      while (!(await rd.done())) {
        if (this.v.inline) {
          const [group, subgroup, id, priority] = [await rd.vi(), await rd.vi(), await rd.vi(), await rd.u8()];
          const properties = new Buf(await rd.bytes(await rd.vi()), this.v).kvps();
          const length = await rd.vi();
          if (typeof length !== "number" || length > 1 << 28) throw new ProtocolError(`object of ${length} bytes`);
          const status = length === 0 ? await rd.vi() : 0;
          const o = { group, subgroup, id, priority, status, properties, payload: await rd.bytes(length), fetched: true };
          this.checkStatus(o);
          if (f.cancelled) return rd.cancel(CANCELLED);
          f.queue.push(o);
          continue;
        }
        const flags = await rd.vi();
        const range = flags === 0x8c || flags === 0x10c;
        // draft-19 §11.4.4: any other value of 128 or more is a PROTOCOL_VIOLATION.
        if (!range && !(typeof flags === "number" && flags < 0x80)) throw new ProtocolError(`fetch serialization flags 0x${flags.toString(16)}`);
        const bits = range ? 0x0c : flags;
        const first = prior.group === null;
        let group;
        if (bits & 0x08) { const d = await rd.vi(); group = first ? d : add(prior.group, d, 1); } // ascending order
        else group = need(prior.group, "group");
        let subgroup = null;
        if (!range && !(bits & 0x40)) {
          const mode = bits & 0x03;
          subgroup = mode === 0 ? 0 : mode === 3 ? await rd.vi() : add(need(prior.subgroup, "subgroup"), mode - 1);
        }
        let id;
        if (bits & 0x04) { const d = await rd.vi(); id = first || bits & 0x08 ? d : add(prior.object, d); }
        else id = add(need(prior.object, "object"), 1);
        [prior.group, prior.object] = [group, id];
        if (range) { f.ranges.push({ kind: flags === 0x8c ? "non-existent" : "unknown", group, id }); continue; }
        const priority = bits & 0x10 ? await rd.u8() : need(prior.priority, "priority");
        const properties = bits & 0x20 ? new Buf(await rd.bytes(await rd.vi()), this.v).kvps() : [];
        const length = await rd.vi();
        if (typeof length !== "number" || length > 1 << 28) throw new ProtocolError(`object of ${length} bytes`);
        const payload = await rd.bytes(length);
        [prior.subgroup, prior.priority] = [subgroup, priority];
        if (f.cancelled) return rd.cancel(CANCELLED);
        f.queue.push({ group, subgroup, id, priority, status: 0, properties, payload, fetched: true });
      }
      f.queue.end();
    } catch (e) {
      f.queue.fail(e instanceof ProtocolError || !(e?.name === "WebTransportError") ? e : new MoqError(e.streamErrorCode ?? 0, "fetch stream reset"));
      throw e;
    } finally {
      this.fetches.delete(requestId);
    }
  }

  /**
   * Joins `track` at its latest group (draft-19 §5.1.5, "Joining an Ongoing Track"; draft-14
   * §9.16.2): SUBSCRIBE with the Largest Object filter, then a Relative Joining FETCH with
   * Joining Start 0, which returns the current group from object 0 up to the Joining Location.
   * Resolves to a Joined: an async iterable of the fetched objects first, then the
   * subscription's. A track with no objects yet (no LARGEST_OBJECT; or INVALID_RANGE /
   * NO_OBJECTS to the FETCH) is the subscription alone.
   */
  async join(namespace, track, { priority } = {}) {
    const sub = await this.subscribe(namespace, track, { filter: "largest", priority });
    let fetch = null;
    if (sub.largest) {
      try { fetch = await this.joiningFetch(sub, { start: 0 }); }
      catch (e) {
        if (e?.session || !["INVALID_RANGE", "NO_OBJECTS"].includes(e?.codeName)) { sub.cancel(); throw e; }
      }
    }
    return new Joined(sub, fetch);
  }
}
