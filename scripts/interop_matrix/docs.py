"""docs/interop.md, written from a run's outcomes and the expectations table."""

from __future__ import annotations

import datetime
import re

from .config import (
    AIOMOQT_CLIENT_DRAFTS,
    IETF_TEST_CLIENT_DRAFTS,
    IETF_TEST_CLIENT_RELAYS,
    PEER_NAMES,
    RELAY_DRAFTS,
)
from .common import Outcome, Table
from .matrix import Matrix


# For docs/interop.md: where a peer departs from the draft text (or from the other peer), as
# seen on the wire or in the peer's source. Keep each entry to what was observed or read.
DISAGREEMENTS = [
    "**PUBLISH refused (moq-dev).** moq-dev's relay answers every PUBLISH with REQUEST_ERROR "
    "NOT_SUPPORTED \"PUBLISH is not supported\" (moq-net 0.3.18 `src/ietf/subscriber.rs:1212-1238`) "
    "and SUBSCRIBE_TRACKS likewise (`src/ietf/publisher.rs:1671-1686`), where draft-21 §7.5 describes "
    "how a relay handles both. Seen: `publish-track-only`, `publish-track-subscribe`.",
    "**FETCH scope (moq-dev).** moq-dev serves only a FETCH whose range lies within one group and has "
    "an explicit end: a range over several groups is NOT_SUPPORTED \"FETCH spanning several groups not "
    "supported\" (`src/ietf/publisher.rs:1405-1421`), and so are a FETCH with range filters, with "
    "FILL_TIMEOUT, or relative to the Largest Object (l.1268-1327). The text allows any range. Seen: "
    "`join` at every draft.",
    "**Fill streams (moq-dev, draft-20+).** As a subscriber moq-dev cannot use a fill fetch stream "
    "that carries an End of Range marker: it stops the stream (\"a fill with an End of Range cannot be "
    "stitched\", `src/ietf/subscriber.rs:3385-3388`) and then drops the mid-group subgroup stream as "
    "\"a group with no head\" (l.2550-2560) until the next group starts, although draft-21 §11.4 "
    "allows End of Unknown Range in any fetch stream. It also stitches only a one-group fill (l.3458), "
    "and as a publisher resets a fill spanning several groups right after the FETCH_HEADER "
    "(`src/ietf/publisher.rs:6910-6915`, 976-1036). Seen while building this matrix: before our relay "
    "fetched a fill's missing objects upstream (commit 941e0b7, draft-21 §7.5) it answered with an End "
    "of Unknown Range, and moq-dev, subscribing through the `ours~moq-dev/d20` cluster link to a track "
    "with 100-object groups, got nothing until the next group.",
    "**PUBLISH_STATE_NOTIFY (moq-dev, draft-20+).** Not implemented: after SUBSCRIBE_OK moq-dev's "
    "subscriber accepts only PUBLISH_DONE on the request stream and fails the subscription on anything "
    "else (`src/ietf/subscriber.rs:1966-1976`); draft-21 §9.10 makes the message optional for the "
    "sender, not for the receiver. aiomoqt parses it and never sends it.",
    "**SUBSCRIBE defaults (moq-dev).** An absent GROUP_ORDER is taken as Descending "
    "(`src/ietf/subscribe.rs:122`) rather than the publisher's preference, an invalid one is mapped to "
    "Descending instead of a PROTOCOL_VIOLATION (`src/ietf/group.rs:144-155`), and an unfiltered "
    "SUBSCRIBE is served from the start of the latest group, not the whole track "
    "(`src/ietf/publisher.rs:6812-6826`).",
    "**Repeated AUTHORIZATION_TOKEN setup option (moq-dev).** Rejected as a duplicate "
    "(`src/ietf/parameters.rs:137-140`); draft-21 §9.1.4 allows one or more.",
    "**REQUEST_OK (moq-dev).** Its decoder accepts only EXPIRES and reads no Track Properties "
    "(`src/ietf/request.rs:106-117`), so a REQUEST_UPDATE_OK with LARGEST_OBJECT (draft-21 §9.3) "
    "would not decode; moq-dev never sends REQUEST_UPDATE, so this does not show here.",
    "**Stream Count \"unknown\" (aiomoqt).** Draft-21 §9.9 gives 2^64-1 for an unknown PUBLISH_DONE "
    "Stream Count; aiomoqt's interop client takes 2^62-1 as the sentinel "
    "(`aiomoqt/tools/moq_interop_client.py:973`), so `data-subgroup-basic` waits for 2^64-1 streams "
    "and fails if a relay sends the text's value. Our relay sends exact counts.",
    "**TRACK_NAMESPACE_PREFIX 0x34 (aiomoqt).** Length-prefixed at draft-20 and a bare Track Namespace "
    "at draft-22 (`aiomoqt/messages/params.py:68-73`); draft-21 §9.20.21 says only \"uses the Track "
    "Namespace encoding\" (no Length). moq-dev does not implement the parameter "
    "(`src/ietf/request_stream.rs:98-112`).",
    "**FILL_PARAMETERS value.** Draft-21 §9.20.16 says the inner parameters are encoded \"as if they "
    "were Parameters for a separate message\", which leaves the count open; both peers send "
    "Length + Number of Parameters + parameters. aiomoqt also accepts the value without a count or "
    "without a Length (`aiomoqt/messages/base.py:887-925`), moq-dev only Length + count "
    "(`src/ietf/filter.rs:713-770`).",
    "**Namespace withdrawal (aiomoqt).** aiomoqt withdraws a PUBLISH_NAMESPACE with RESET_STREAM "
    "(CANCELLED) on its side of the request stream only, without STOP_SENDING "
    "(`aiomoqt/protocol.py:5313-5347`); the text describes cancelling a request as both. Our relay "
    "takes the reset as the withdrawal (`publish-namespace-done`, `subscribe-namespace-lifecycle`).",
    "**WebTransport protocol choice (both).** Over WebTransport both peers' servers pick the client's "
    "first offered `moqt-NN` they support (aiopquic `h3wt_callback.h:240-275`, moq-tokio "
    "`src/noq.rs:861-878`), over raw QUIC the server's first (ALPN); the text leaves the choice to the "
    "server. Every cell here offers one draft only, so this does not show in the tables.",
    "**Draft-22.** There is no draft-22 text to compare with; both peers change only LOCATION_FILTER "
    "(an explicit Location Filter Type instead of a Length) at draft-22, and aiomoqt additionally "
    "TRACK_NAMESPACE_PREFIX (above). Our draft-22 follows the peers.",
]


def md(text: str) -> str:
    """Program output made safe for a Markdown table cell."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


# docs/interop.md: the media checks scripts/test.sh runs as Rust tests (tests/tests/moq_pub.rs),
# not as matrix cells; written by hand when they change.
MEDIA_CHECKS = """## Media across implementations

Not part of the matrix above: `scripts/test.sh` runs them as Rust tests after the matrix
(`cargo test --workspace --test moq_pub -- --ignored`), with the peers of
`scripts/install-peers.sh` and Debian's ffmpeg 5.1 (`scripts/install-media.sh`).

| publisher | relay | subscriber | transport | result | notes |
|---|---|---|---|---|---|
| Cloudflare moq-pub 0.10.0 (d18) | ours | ours, `moq_media::warp` (d18) | quic | pass | 3 s of testsrc + sine from ffmpeg (H.264 with B-frames, AAC), fragmented as moq-pub's README says; ffprobe on our fMP4: h264 75/75 packets and frames, aac 142/142 packets (127/127 decoded frames) |
| Cloudflare moq-pub 0.10.0 (d18) | ours | ours, `moq_media::warp` (d22) | quic | pass | the relay bridges draft-18 and draft-22 |
| Cloudflare moq-pub 0.10.0 (d18) | ours | ours, `moq_media::warp` (d18) | wt | pass | |
| Cloudflare moq-pub 0.10.0 (d18) | ours | ours, `moq_media::warp` (d14) | wt | pass | the relay bridges draft-18 and draft-14 |
| Cloudflare moq-pub 0.10.0 (d18) | ours | ours, `moq_media::warp` (d22) | quic | pass | the clip fragmented as moq-media's ingest documents (`cmaf+separate_moof+delay_moov+skip_trailer`: a fragment per GOP and track, 6 objects): h264 75/75, aac 142/142 packets and frames |

moq-pub publishes the old WARP layout, not MSF: a JSON catalog `.catalog` (moq-catalog 0.2:
`streamingFormat` 1, `commonTrackFields`, per track `initTrack` and `selectionParams`), one
init track `0.mp4` (ftyp + moov with every track) and a CMAF track `<track id>.m4s` per input
track, one moof + mdat per object, a new group at each video keyframe for every track.
`moq_media::warp` reads that layout; moq-pub does not handle the end of its input, so the test
ends the subscription when every sample of the clip has arrived.

### moq-dev's player: `@moq/watch` plays what we publish

`scripts/watch-check.sh` (run by `scripts/media-check.sh`): moq-dev's player `@moq/watch` 0.4.6
(npm, pinned in `web/package.json`; it brings its own `@moq/net` 0.2.8, drafts 14-19) in
headless Chromium (`web/driver.mjs --client moq-watch --cell watch`, `web/cells/moq-watch.js`:
the pipeline of its `<moq-watch>` element, Broadcast, Video.Source, Video.Decoder (WebCodecs),
Video.Renderer on a canvas, built by hand to pin the relay's certificate hash and the draft)
plays `live/demo-N.msf`, published by our CLI (`ffmpeg -re ... -movflags
cmaf+separate_moof+delay_moov+skip_trailer+frag_every_frame - | moq publish live/demo-N.msf
--packaging cmaf`: 640x360 H.264 testsrc at 30 fps + AAC) through our relay binary. Pass = 60
video frames decoded, then frames keep coming for 3 s with no gap over 1 s, and the canvas is
not blank. The player waits for the announcement (SUBSCRIBE_NAMESPACE) and starts before the
publisher (see the late viewer below). Checked 2026-12-06:

| publisher | relay | subscriber | transport | result | notes |
|---|---|---|---|---|---|
| ours, `moq publish --packaging cmaf` (d22) | ours | `@moq/watch` 0.4.6 (d14) | wt | pass | MSF catalog read (`avc1.64001e`, container cmaf, init from our `initRef`), 151 frames decoded, 30 frames/s over the last 3 s, 640x360, canvas 88% lit |
| ours, `moq publish --packaging cmaf` (d22) | ours | `@moq/watch` 0.4.6 (d16) | wt | pass | the same figures |
| ours, `moq publish --packaging cmaf` (d22) | ours | `@moq/watch` 0.4.6 (d19) | wt | expected fail | its SUBSCRIBE: our relay closes the session, PROTOCOL_VIOLATION "unknown message parameter 0x1b21" (theirs, below); d17 and d18 the same when run by hand |
| ours, `moq publish --packaging cmaf` (d22) | ours | `@moq/watch` 0.4.6 (d16), joining late | wt | expected fail | no catalog ever arrives ("catalog loading"): it subscribes without a Joining FETCH (theirs, below) |

How it reads our broadcast: the name's `/`-separated parts are the Track Namespace fields; a
name ending in `.msf` makes it read an MSF catalog from the track `catalog` (otherwise hang's
`catalog.json`); `@moq/msf` 0.2.1 resolves MSF's `initRef` -> `initDataList` into the track's
init data, so our catalog needs no CMSF `initData` field for it (CMSF's editor's copy
2025-12-01 §3.1 puts the CMAF header in a per-track `initData`; MSF's editor's copy 2026-08-04
§5.1.7 moved init data to `initDataList`, which is what we write). For `cmaf` it decodes the
init segment and the moof + mdat of each object. Its `loc` container (`@moq/loc`) expects the
LOC properties as a block at the head of the object payload, where ours are MOQT Object
Properties, so our LOC tracks would be misread: the check uses CMAF. Only video is checked.

The expected failures, both on their side (the check asserts each one fails the way written
here, so it notices when one goes away):

- **Draft 17-19: SUBSCRIBER_PRIORITY as a varint.** `@moq/net` 0.2.8 writes every even-typed
  Message Parameter as a varint; draft-19 §10.2.7 makes SUBSCRIBER_PRIORITY (0x20) a uint8
  (§10.2: "The encoding is specified by each parameter definition"). Its catalog subscription
  has wire priority 155, which the leading-ones varint of draft 17+ writes as two bytes
  `0x80 0x9b`; read as a uint8 (0x80), the next parameter's type delta becomes the varint
  `0x9b 0x01` = 0x1b01, type 0x20 + 0x1b01 = 0x1b21, an unknown Message Parameter, which
  draft-19 §10.2 says MUST close the session with PROTOCOL_VIOLATION. `@moq/net` 0.3.4 (the
  `moq-net` rows above) writes it as a uint8; `@moq/watch` 0.4.6 asks for `@moq/net` ^0.2.8,
  so it does not get the fix. Run by hand with `@moq/net` forced to 0.3.4 (an npm `overrides`
  entry, not pinned): draft 16 still plays, and at drafts 17-20 the session stays up and the
  catalog is read, but the video SUBSCRIBE_OK fails to decode ("read size 1796526002805 exceeds
  max size"): 0.3.4 reads the LARGEST_OBJECT parameter (0x9) as a length-prefixed value, where
  draft-19 §10.2.16 and draft-21 make it a Location, two varints with no length (draft-19 §10.2);
  our CLI's video group IDs are wall-clock milliseconds, so the group ID is taken for a length.
- **A viewer that joins late gets no catalog.** MSF §5: "Subscribers accessing the catalog MUST
  use SUBSCRIBE with a Joining FETCH (offset = 0)". `@moq/watch` sends only a SUBSCRIBE with
  the Largest Object filter, whose start is the object after the largest one (draft-16 and
  draft-19 §5.1.2), so the catalog already published (object 0 of group 0, republished only
  when it changes, which MSF §5 allows) never reaches it. Our `moq subscribe` joins the same
  broadcast late (the check runs it first) with a Joining FETCH and gets it.
- **Not in Firefox.** `@moq/watch`'s `@moq/net` 0.2.8 never uses WebTransport in any Firefox
  (`connection/browser.js` `isWebTransportUserAgentSupported`, citing Firefox's limit of two
  concurrent remote-initiated streams, bugzilla 2046262), and the cell turns its WebSocket
  fallback off, so in Firefox ESR 140 (below 153) it fails with "no transport available; WebTransport not
  supported and WebSocket is disabled". Firefox itself has what the player needs: WebCodecs
  decodes H.264, AAC and Opus there (`VideoDecoder.isConfigSupported` /
  `AudioDecoder.isConfigSupported` true through its bundled FFmpeg; HEVC false, as in Chromium).

Not run: moq-dev's publisher. `moq-cli` 0.14.10 (crates.io) depends on moq-relay, moq-hls,
moq-rtc, moq-rtmp, moq-srt and hang (837 crates in its lockfile), too large a build for the
test command's peer install. Its muxer moq-mux 0.10.19 reads catalogs as `@moq/watch` does.

Cloudflare's subscriber `moq-sub` 0.5.0 (crates.io, installed with moq-pub, `$MOQ_SUB`) is not
in the test command; run by hand (moq-pub through our relay into moq-sub, both draft-18,
2026-12-06) it fails for two reasons. With `--join-groups N` or `fetch absolute|relative` it
sends UNSUBSCRIBE (0x0A) on its SUBSCRIBE's request stream to cancel a warm-up subscription
(moq-sub 0.5.0 `src/fetch.rs:117`, moq-transport 0.17.0 `Subscribe::unsubscribe`); the message
was removed at draft-17 (cancellation is a stream reset / STOP_SENDING), so our relay closes the
session with PROTOCOL_VIOLATION "unknown control message type 0xa": the peer is at fault.
Without them it sends a bare SUBSCRIBE, which gets only the objects published after it arrives
(draft-19 §5.1.2), so it gets the media only when it subscribes before moq-pub reads it: a clip
piped at once is over by then, and the test has no signal for when its subscriptions are in
place. Also, in those runs moq-pub 0.10.0 stopped answering soon after it answered a SUBSCRIBE
(no further log line, its QUIC connection timed out after 10 s), through our relay and through
Cloudflare's moq-relay-ietf 0.8.0 alike (moq-pub | moq-relay-ietf | moq-sub, checked by hand):
a fault of the peer. The `moq_pub` test (a Joining FETCH with every subscription) passed 10 of
10 runs.

"""


def docs(m: Matrix, table: Table) -> str:
    """docs/interop.md: one table per client/relay pairing, from this run."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        "# Interop results",
        "",
        f"Generated by `scripts/interop.sh --docs` on {now}; do not edit by hand. The expected",
        "outcome of every cell is in `tests/interop-expected.txt`, and `scripts/test.sh` (the",
        "README's test command) fails when a run differs from it. Peers are pinned in",
        "`scripts/install-peers.sh`; how to drive them is in `docs/interop-peers.md`.",
        "",
        "Peers: " + "; ".join(f"**{k}** = {v}" for k, v in PEER_NAMES.items() if k != "ours")
        + "; moq-dev moq-clock 0.10.21; Cloudflare moq-clock-ietf 0.6.25 and moq-test-client 0.2.0.",
        "",
        "Browsers: `moq-net` = moq-dev's `@moq/net` 0.3.4 and `moqt` = OpenMOQ's `@moqt/transport` +",
        "`@moqt/webtransport` 0.5.7, each inside headless Chromium 156 (Debian's, driven by",
        "playwright-core) and, as `moq-net@firefox` / `moqt@firefox`, inside headless Firefox ESR (153 here; 140 before)",
        "(Debian's firefox-esr, driven by puppeteer-core over WebDriver BiDi), one cell per run of",
        "`web/driver.mjs`; `js-pub` has our Rust example subscriber as its peer, `js-sub` our Rust",
        "example publisher; `page` (`page@firefox`) is the relay's own web page (`moq-relay/web`),",
        "checked from what it shows.",
        "",
        "Firefox ESR pins our self-signed certificate with `serverCertificateHashes` as Chromium",
        "does (no profile trust or policy; like Chromium it refuses a certificate valid for more than",
        "14 days: a 30-day one gives \"WebTransport connection rejected\"), but its WebTransport has no",
        "`protocols` option: it sends no WT-Available-Protocols header and has no",
        "`WebTransport.protocol`, so no MOQT version is negotiated and our relay speaks draft-14 on the",
        "session (the version in CLIENT_SETUP), as for any client that offers none: from draft-15 the",
        "version is chosen only by ALPN or WT-Available-Protocols (draft-19 §3.1). The Firefox rows",
        "past draft-14 fail for that reason.",
        "",
        "Transports: `quic` = raw QUIC (`moqt://`, ALPN `moqt-NN`), `wt` = WebTransport over HTTP/3",
        "(`https://`, ALPN `h3`, draft in `WT-Available-Protocols`), `ws` = QMux (draft-ietf-quic-qmux-01)",
        "over a WebSocket to the relay's HTTP listener (subprotocol `qmux-01.moqt-NN`): from our interop",
        "client (`ws://` on the QUIC port's number, against ours and moq-dev's relay), and from a browser",
        "whose pages have no `WebTransport` (`web/driver.mjs --transport ws`, `page-check.mjs",
        "--no-webtransport`); `@moq/net` then uses its `@moq/qmux`, the page its own `qmux.js`.",
        "`ws-auto` is `@moq/net`'s own connect (its whole WebSocket offer; d0: the relay picks the draft);",
        "`page` `none` `error`: the page pointed where neither transport connects must say so, naming both.",
        "",
        "Drafts: every cell pins one draft, so one ALPN / WT protocol is offered (our interop client",
        "`MOQT_DRAFT=NN`, aiomoqt's `--draft NN`, our example publisher/subscriber `--draft NN`,",
        "moq-dev's cluster dialer `--connect-version moq-transport-NN`). Relays are run at the drafts",
        "both sides speak: " + "; ".join(f"{k} " + ", ".join(f"d{d}" for d in v) for k, v in RELAY_DRAFTS.items())
        + "; aiomoqt's client against ours at " + ", ".join(f"d{d}" for d in AIOMOQT_CLIENT_DRAFTS)
        + "; Cloudflare's moq-test-client (its 18 cases, TAP) against "
        + " and ".join(IETF_TEST_CLIENT_RELAYS) + " at " + ", ".join(f"d{d}" for d in IETF_TEST_CLIENT_DRAFTS)
        + " (the only draft it speaks).",
        "",
        "## Summary",
        "",
        "One row per client, relay and draft (clock pairs: by the newest draft on the path, the",
        "cluster link's included). Expected",
        "failures are the peers' limitations, each explained below its table; \"differ\" counts",
        "outcomes that disagree with `tests/interop-expected.txt` in this run.",
        "",
        "| client -> relay | draft | transports | pass | expected failures (peer limits) | differ |",
        "|---|---|---|---|---|---|",
    ]
    for (label, draft), rows in m.summary_rows():
        transports = ", ".join(sorted({o.transport for o in rows}))
        passed = sum(1 for o in rows if o.result == "pass")
        expected_fail = sum(1 for o in rows if o.result != "pass" and (e := table.lookup(o)) and e.expect == o.result)
        differ = sum(1 for o in rows if (e := table.lookup(o)) is None or e.expect != o.result)
        out.append(f"| {label} | d{draft} | {transports} | {passed}/{len(rows)} | {expected_fail} | {differ} |")
    out += [
        "",
        "## Interop-runner test cases",
        "",
    ]
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for o in m.outcomes:
        if ">" in o.client:
            continue
        groups.setdefault((o.client, o.relay), []).append(o)
    for (client, relay), rows in groups.items():
        columns = sorted({(o.draft, o.transport) for o in rows})
        cases: list[str] = []
        for o in rows:
            if o.case not in cases:
                cases.append(o.case)
        out.append(f"### {client} client -> {PEER_NAMES.get(relay, relay)} relay")
        out.append("")
        out.append("| case | " + " | ".join(f"d{d} {t}" for d, t in columns) + " |")
        out.append("|---|" + "---|" * len(columns))
        notes: dict[str, str] = {}
        unexpected: list[str] = []
        for case in cases:
            cells = []
            for d, t in columns:
                hit = [o for o in rows if o.case == case and o.draft == d and o.transport == t]
                if not hit:
                    cells.append("")
                    continue
                o = hit[0]
                e = table.lookup(o)
                cell = {"pass": "pass", "fail": "**fail**", "skip": "skip"}[o.result]
                if e is None or e.expect != o.result:
                    cell += " (unexpected)"
                    unexpected.append(f"`{case}` d{d} {t}: {o.result}" + (f" ({md(o.detail)})" if o.detail else ""))
                if e and e.note and o.result != "pass":
                    notes[case] = e.note
                cells.append(cell)
            out.append(f"| `{case}` | " + " | ".join(cells) + " |")
        if notes:
            out.append("")
            for case, note in notes.items():
                out.append(f"- `{case}`: {note}")
        if unexpected:
            out.append("")
            out += [f"- unexpected: {u}" for u in unexpected]
        out.append("")
    out += [
        "## Clocks across implementations",
        "",
        "A publisher, a relay and a subscriber; each row has at least one end from this",
        "workspace. Pass = the subscriber printed at least 3 (ours) or 2 (moq-clock-ietf) objects.",
        "Relay `A~B/dN`: the publisher uses relay A and the subscriber relay B, where a second moq-dev",
        "relay dials ours as a cluster peer at draft N (moq-dev's relay is the only third-party",
        "client that speaks draft-19; no third-party clock speaks draft-20, so a draft-20 row has",
        "our publisher or subscriber at draft-20, or the draft-20 cluster link, with a third-party",
        "relay, link or other end). The summary counts a clock row under the newest draft on its",
        "path, the cluster link's included.",
        "",
        "| publisher | relay | subscriber | transport | result | note |",
        "|---|---|---|---|---|---|",
    ]
    for o in m.outcomes:
        if ">" not in o.client:
            continue
        pub, sub = o.client.split(">")
        m_ = re.match(r"clock-d(\d+)>d(\d+)", o.case)
        pd, sd = (m_.group(1), m_.group(2)) if m_ else ("?", "?")
        e = table.lookup(o)
        note = e.note if e and o.result != "pass" else ""
        result = o.result if o.result == "pass" else f"**{o.result}**"
        if e is None or e.expect != o.result:
            result += " (unexpected)"
            note = md(o.detail)
        out.append(f"| {pub} (d{pd}) | {o.relay} | {sub} (d{sd}) | {o.transport} | {result} | {note} |")
    out += ["", MEDIA_CHECKS.rstrip("\n")]
    out += [
        "",
        "## Where the peers and the draft text disagree",
        "",
        "Learned while building this matrix (draft-20/-21 text = draft-ietf-moq-transport-21, whose",
        "wire format is draft-20's; there is no draft-22 text, so -22 is what both peers implement).",
        "These are not failures of any cell above unless a note there says so.",
        "",
    ]
    out += [f"- {d}" for d in DISAGREEMENTS]
    out.append("")
    return "\n".join(out)
