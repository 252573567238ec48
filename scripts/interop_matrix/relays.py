"""Starting every relay of the matrix (ours, aiomoqt's, moq-dev's, Cloudflare's, the clusters) and reaching them."""

from __future__ import annotations

import subprocess
import time

from .config import (
    AIOMOQT_RELAY,
    IETF14_RELAY,
    IETF16_RELAY,
    IETF_RELAY,
    MOQDEV_RELAY,
    OURS_CLIENT,
    OURS_RELAY,
    OUT,
    PEER_NAMES,
    RELAY_DRAFTS,
    RELAY_DRAFTS_EXTRA,
    TRANSPORTS,
    WS_SCHEME,
)
from .common import cert_fingerprint, free_port, run


class Relays:
    """The relays of a Matrix: started on free loopback ports, and their URLs."""

    def start_relays(self) -> None:
        cert, key = OUT / "cert.pem", OUT / "key.pem"
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                "ec_paramgen_curve:prime256v1", "-nodes", "-days", "7", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-addext", "basicConstraints=critical,CA:FALSE",
                "-addext", "extendedKeyUsage=serverAuth",
                "-keyout", str(key), "-out", str(cert),
            ],
            check=True,
            capture_output=True,
        )
        for name in PEER_NAMES:
            self.ports[name] = free_port()
        p = self.ports
        self.procs.start(
            "relay-ours",
            # The HTTP side on the QUIC port number (TCP): @moq/net's development URL
            # http://host:port/ fetches /certificate.sha256 there; the page is served there too.
            [OURS_RELAY, "--bind", f"127.0.0.1:{p['ours']}", "--tls-cert", cert, "--tls-key", key, "--auth-disabled",
             "--http", f"127.0.0.1:{p['ours']}"],
            {"RUST_LOG": "info"},
        )
        self.procs.start(
            "relay-aiomoqt",
            [AIOMOQT_RELAY, "--port", p["aiomoqt"], "--cert", cert, "--key", key, "--dual"],
        )
        self.procs.start(
            "relay-moq-dev",
            [
                MOQDEV_RELAY, "--listen", f"127.0.0.1:{p['moq-dev']}", "--listen-tls-cert", cert,
                "--listen-tls-key", key, "--auth-public", "**", "--log-level", "info",
                # Its WebSocket (QMux) listener, on the QUIC port's number over TCP.
                "--web-http-listen", f"127.0.0.1:{p['moq-dev']}",
            ],
            {"RUST_LOG": "info"},
        )
        self.procs.start(
            "relay-cloudflare",
            [
                IETF_RELAY, "--bind", f"127.0.0.1:{p['cloudflare']}", "--tls-cert", cert,
                "--tls-key", key, "--coordinator-file", OUT / "coordinator.json",
            ],
        )
        for name, relay in (("cloudflare-14", IETF14_RELAY), ("cloudflare-16", IETF16_RELAY)):
            self.procs.start(
                f"relay-{name}",
                [
                    relay, "--bind", f"127.0.0.1:{p[name]}", "--tls-cert", cert, "--tls-key", key,
                    "--coordinator-file", OUT / f"coordinator-{name}.json",
                ],
                {"RUST_LOG": "info"},
            )
        for name in PEER_NAMES:
            self.wait_ready(name)

    def url(self, relay: str, transport: str) -> str:
        scheme = WS_SCHEME if transport == "ws" else TRANSPORTS[transport]
        return f"{scheme}://127.0.0.1:{self.ports[relay]}"

    def wait_ready(self, relay: str) -> None:
        """Retries a SETUP until the relay answers (UDP has no connect to wait on)."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            rc, _, _ = run(
                [OURS_CLIENT, "-r", self.url(relay, "quic"), "--tls-disable-verify", "-t", "setup-only"],
                timeout=10,
                env={"MOQT_DRAFT": str({**RELAY_DRAFTS, **RELAY_DRAFTS_EXTRA}[relay][0])},
            )
            if rc == 0:
                return
            time.sleep(0.3)
        raise SystemExit(f"relay {relay} did not answer SETUP within 30 s (see {OUT}/logs)")

    def start_cluster(self, draft: int) -> subprocess.Popen:
        """A moq-dev relay that dials ours as a cluster peer at this draft."""
        name = f"moq-dev-cluster-{draft}"
        self.ports[name] = free_port()
        p = self.procs.start(
            f"relay-{name}",
            [
                MOQDEV_RELAY, "--listen", f"127.0.0.1:{self.ports[name]}",
                "--listen-tls-cert", OUT / "cert.pem", "--listen-tls-key", OUT / "key.pem",
                "--auth-public", "**", "--log-level", "info",
                "--cluster-connect", self.url("ours", "quic"), "--connect-version", f"moq-transport-{draft}",
                "--connect-tls-insecure",
            ],
            {"RUST_LOG": "info"},
        )
        self.wait_ready(name)
        return p

    def start_upstream_of(self, upstream: str) -> str:
        """A second relay of ours that dials `upstream` as its upstream (once); its name."""
        name = f"ours-upstream-{upstream}"
        if name in self.ports:
            return name
        self.ports[name] = free_port()
        self.procs.start(
            f"relay-{name}",
            [
                OURS_RELAY, "--bind", f"127.0.0.1:{self.ports[name]}", "--tls-cert", OUT / "cert.pem",
                "--tls-key", OUT / "key.pem", "--auth-disabled", "--cluster-node", name,
                "--cluster-upstream", self.url(upstream, "quic"),
                "--cluster-fingerprint", cert_fingerprint(),
            ],
            {"RUST_LOG": "info"},
        )
        self.wait_ready(name)
        return name
