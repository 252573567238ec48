"""Paths, peers and their drafts, transports and browsers: what the matrix runs, read from the environment."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent.parent


PEERS = Path(os.environ.get("MOQ_PEERS", Path.home() / ".cache" / "moq-peers"))


OUT = ROOT / "target" / "interop"


EXPECTED = ROOT / "tests" / "interop-expected.txt"


DOC = ROOT / "docs" / "interop.md"


TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug"


OURS_RELAY = TARGET / "moq-relay"


OURS_CLIENT = TARGET / "moq-interop-client"


OURS_PUB = TARGET / "examples" / "publisher"


OURS_SUB = TARGET / "examples" / "subscriber"


AIOMOQT_RELAY = PEERS / "venv" / "bin" / "moq-interop-relay"


AIOMOQT_CLIENT = PEERS / "venv" / "bin" / "moq-interop-client"


MOQDEV_RELAY = PEERS / "cargo" / "bin" / "moq-relay"


MOQDEV_CLOCK = PEERS / "cargo" / "bin" / "moq-clock"


IETF_RELAY = PEERS / "cargo" / "bin" / "moq-relay-ietf"


IETF_CLOCK = PEERS / "cargo" / "bin" / "moq-clock-ietf"


# Cloudflare's interop test client (moq-test-client 0.2.0, installed with the pair above).
IETF_TEST_CLIENT = PEERS / "cargo" / "bin" / "moq-test-client"


# Cloudflare's deployed stacks at draft-14 and draft-16 (scripts/install-peers.sh, own roots).
IETF14_RELAY = PEERS / "cargo-ietf14" / "bin" / "moq-relay-ietf"


IETF14_CLOCK = PEERS / "cargo-ietf14" / "bin" / "moq-clock-ietf"


IETF16_RELAY = PEERS / "cargo-ietf16" / "bin" / "moq-relay-ietf"


IETF16_CLOCK = PEERS / "cargo-ietf16" / "bin" / "moq-clock-ietf"


# The Cloudflare clock of each draft, by the name used in the clock rows.
IETF_CLOCKS = {"moq-clock-ietf": IETF_CLOCK, "moq-clock-ietf14": IETF14_CLOCK, "moq-clock-ietf16": IETF16_CLOCK}


# Display names (also the names used in the expectations table).
PEER_NAMES = {
    "ours": "ours (this workspace)",
    "aiomoqt": "aiomoqt 0.13.3",
    "moq-dev": "moq-dev moq-relay 0.17.10",
    "cloudflare": "Cloudflare moq-relay-ietf 0.8.0",
    "cloudflare-14": "Cloudflare moq-relay-ietf 0.7.9",
    "cloudflare-16": "Cloudflare moq-relay-ietf 0.7.31",
}


# Which drafts each relay speaks (of the ones we speak: 14 to 22). aiomoqt speaks
# 14, 16, 18, 20 and 22; moq-dev's relay 14 to 22; Cloudflare's 0.8.0 18 only, 0.7.31 16 only,
# 0.7.9 14 only.
RELAY_DRAFTS = {
    "ours": [14, 15, 16, 17, 18, 19, 20, 21, 22],
    "aiomoqt": [14, 16, 18, 20, 22],
    "moq-dev": [14, 15, 16, 17, 18, 19, 20, 21, 22],
    "cloudflare": [18],
    "cloudflare-14": [14],
    "cloudflare-16": [16],
}


# The drafts aiomoqt's interop client runs against our relay (the ones both speak).
AIOMOQT_CLIENT_DRAFTS = [14, 16, 18, 20, 22]


# Cloudflare's moq-test-client speaks draft-18 only (ALPN moqt-18, WT protocol moqt-18): it runs
# its 18 cases at draft-18, over both transports, against our relay and against Cloudflare's own
# relay as the reference.
IETF_TEST_CLIENT_DRAFTS = [18]


IETF_TEST_CLIENT_RELAYS = ["ours", "cloudflare"]


# The moq-dev relays that dial ours as a cluster peer, one per draft of the link.
CLUSTER_DRAFTS = [19, 20]


RELAY_DRAFTS_EXTRA = {f"moq-dev-cluster-{d}": [d] for d in CLUSTER_DRAFTS}


# Our relay that takes moq-dev's namespaces as its upstream (--cluster-upstream).
RELAY_DRAFTS_EXTRA["ours-upstream-moq-dev"] = [19]


TRANSPORTS = {"quic": "moqt", "wt": "https"}


# QMux over WebSocket (issue 37): the URL scheme of transport "ws", and the relays that take it
# on a TCP listener of the QUIC port's number (ours: --http; moq-dev's: --web-http-listen).
# Only our interop client runs over it.
WS_SCHEME = "ws"


WS_RELAYS = ["ours", "moq-dev"]


# Cells of our client over WebSocket that a peer's race fails in some runs and passes in others:
# not judged, reported as skip (the row in tests/interop-expected.txt names the cause). FETCH
# against moq-dev's relay: its fetch task ends every FETCH over QMux with an error (qmux 0.5.3's
# SendStream::closed never resolves Ok, so `writer.close().await?` on the data stream fails once
# its FIN is out), drops the request stream, and moq-net resets a dropped stream with CANCELLED;
# qmux's RESET_STREAM discards the stream's queued data, so FETCH_OK is lost when the data
# stream's FIN went out before it (7 of 20 at draft-19 by hand, 2026-12-07).
WS_RACY = {"moq-dev": ("fetch",)}


# Browser clients (scripts/install-browser.sh: Debian's Chromium and firefox-esr, the pinned npm
# packages and their bundles in $MOQ_BROWSER), run one cell at a time by web/driver.mjs in
# headless Chromium and in headless Firefox against our relay over WebTransport. The drafts each
# speaks that our relay speaks too.
BROWSER = Path(os.environ.get("MOQ_BROWSER", Path.home() / ".cache" / "moq-browser"))


DRIVER = ROOT / "web" / "driver.mjs"


PAGE_CHECK = ROOT / "moq-relay" / "web" / "test" / "page-check.mjs"


BROWSER_CLIENTS = {
    # @moq/net 0.3.4 (moq-dev): moqt-14..20.
    "moq-net": ([14, 15, 16, 17, 18, 19, 20], ["setup", "pubsub", "js-pub", "js-sub", "dev-url"]),
    # @moqt/transport + @moqt/webtransport 0.5.7 (OpenMOQ): 14, 16 and 18.
    "moqt": ([14, 16, 18], ["setup", "pubsub", "js-pub", "js-sub"]),
}


# The same cells over a WebSocket (QMux, subprotocol qmux-01.moqt-N) to the relay's HTTP
# listener, in a Chromium without WebTransport (web/driver.mjs --transport ws): @moq/net 0.3.4
# through its @moq/qmux, at the drafts with a moqt-N name; ws-auto is @moq/net's own connect.
BROWSER_WS_CLIENTS = {
    "moq-net": ([15, 16, 17, 18, 19, 20], ["setup", "pubsub", "js-pub", "js-sub"]),
}


# The browsers every browser client cell and the page run in (web/browser.mjs): Chromium's rows
# carry the client's own name, the others' "<client>@<browser>" (tests/interop-expected.txt).
BROWSERS = ["chromium", "firefox"]


def firefox_major() -> int:
    """The major version of the Firefox the cells run in (0 when it cannot be read)."""
    binary = os.environ.get("MOQ_FIREFOX", "/usr/bin/firefox-esr")
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
        return int(re.search(r"(\d+)\.", out).group(1))
    except (OSError, subprocess.SubprocessError, AttributeError, ValueError):
        return 0


FIREFOX_MAJOR = firefox_major()


def in_browser(client: str, browser: str) -> str:
    """The name of a browser client's rows: `moq-net` in Chromium, `moq-net@firefox` in Firefox.
    @moq/net 0.3.4 uses WebTransport only from Firefox 153, so in an older Firefox its rows are
    `moq-net@firefox140` (Debian's firefox-esr was ESR 140 until it became ESR 153)."""
    if browser == "chromium":
        return client
    if client == "moq-net" and browser == "firefox" and 0 < FIREFOX_MAJOR < 153:
        return "moq-net@firefox140"
    return f"{client}@{browser}"


# Children: no backtraces in their output, and our binaries' logs at warn unless asked.
CHILD_ENV = {"RUST_BACKTRACE": "0", "RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn")}
