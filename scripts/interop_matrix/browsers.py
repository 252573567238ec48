"""Browser clients (@moq/net and others in Chromium and Firefox) and the relay's page, run by web/driver.mjs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

from .config import (
    BROWSER,
    BROWSERS,
    BROWSER_CLIENTS,
    BROWSER_WS_CLIENTS,
    DRIVER,
    OURS_PUB,
    OURS_SUB,
    OUT,
    PAGE_CHECK,
    in_browser,
)
from .common import Outcome, cert_fingerprint, free_port, log, reason, run


class Browsers:
    """The browser rows of a Matrix, one cell at a time through web/driver.mjs."""

    def browser(self) -> None:
        """The browser rows, in each browser of BROWSERS."""
        for browser in BROWSERS:
            self.js_browser = browser
            self.browser_rows(browser)
        self.js_browser = "chromium"

    def browser_rows(self, browser: str) -> None:
        """JS clients in one headless browser against our relay (WebTransport), the Rust examples
        as their peers, and the relay's own web page."""
        if not self.wanted("browser", "page", browser, *(in_browser(c, browser) for c in BROWSER_CLIENTS)):
            return
        self.browser_ws(browser)
        for client, (drafts, cells) in BROWSER_CLIENTS.items():
            name = in_browser(client, browser)
            for draft in drafts:
                for cell in cells:
                    if not self.wanted(name, cell, f"d{draft}", "browser"):
                        continue
                    log(f"-- browser: {client} {cell}, draft-{draft} ({browser})")
                    result, detail = {"js-pub": self.js_pub, "js-sub": self.js_sub}.get(cell, self.js_cell)(
                        client, cell, draft
                    )
                    self.record(Outcome(name, "ours", draft, "wt", cell, result, detail))
        if self.wanted(in_browser("page", browser), "browser"):
            log(f"-- browser: the relay's web page ({browser})")
            # The draft is the one the page says it speaks: 19, or 14 over a WebTransport that
            # negotiated no protocol (Firefox ESR has no `protocols` option).
            result, detail, draft = self.page()
            self.record(Outcome(in_browser("page", browser), "ours", draft, "wt", "discovery", result, detail))
            log(f"-- browser: the relay's web page in a {browser} without WebTransport (WebSocket)")
            result, detail, draft = self.page(websocket=True)
            self.record(Outcome(in_browser("page", browser), "ours", draft, "ws", "discovery", result, detail))
            log(f"-- browser: the relay's web page when neither transport connects ({browser})")
            result, detail = self.page_unreachable()
            self.record(Outcome(in_browser("page", browser), "ours", 19, "none", "error", result, detail))

    def browser_ws(self, browser: str) -> None:
        """The browser cells over a WebSocket to the relay's HTTP listener (a browser without
        WebTransport), our Rust examples as their peers over raw QUIC."""
        ws = ["--transport", "ws", "--ws", f"ws://127.0.0.1:{self.ports['ours']}/"]
        for client, (drafts, cells) in BROWSER_WS_CLIENTS.items():
            name = in_browser(client, browser)
            for draft in drafts:
                for cell in cells:
                    if not self.wanted(name, cell, f"d{draft}", "browser", "ws"):
                        continue
                    log(f"-- browser: {client} {cell}, draft-{draft}, WebSocket ({browser})")
                    run_cell = {"js-pub": self.js_pub, "js-sub": self.js_sub}.get(cell, self.js_cell)
                    result, detail = run_cell(client, cell, draft, ws)
                    self.record(Outcome(name, "ours", draft, "ws", cell, result, detail))
            if self.wanted(name, "ws-auto", "browser", "ws"):
                log(f"-- browser: {client} ws-auto (its own WebSocket connect, {browser})")
                result, detail = self.js_cell(client, "ws-auto", 0, ws)
                self.record(Outcome(name, "ours", 0, "ws", "ws-auto", result, detail))

    def driver(self, client: str, cell: str, draft: int, extra: list[str], wait: float = 15) -> subprocess.Popen:
        """web/driver.mjs running one cell; its stdout ends with one JSON line."""
        argv = [
            "node", DRIVER, "--client", client, "--cell", cell, "--draft", str(draft),
            "--url", self.url("ours", "wt") + "/", "--fingerprint", cert_fingerprint(),
            "--timeout-ms", str(int(wait * 1000)), "--browser", self.js_browser, *extra,
        ]
        # A session of its own, so a driver that hangs is killed with its browser (killpg).
        return subprocess.Popen(
            [str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "MOQ_BROWSER": str(BROWSER)}, start_new_session=True,
        )

    def driver_result(self, p: subprocess.Popen, name: str, wait: float = 15) -> tuple[str, str]:
        try:
            out, err = p.communicate(timeout=wait + 30)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        (OUT / "logs" / f"{self.js_browser}-{name}.log").write_text(out + "\n# stderr\n" + err)
        try:
            line = json.loads(out.strip().splitlines()[-1])
            return line["result"], line.get("detail", "")[:300]
        except (IndexError, ValueError, KeyError):
            return "fail", f"driver printed no result (exit {p.returncode}): {err.strip()[-200:]}"

    def js_cell(self, client: str, cell: str, draft: int, transport: list[str] = []) -> tuple[str, str]:
        extra = ["--http", f"http://127.0.0.1:{self.ports['ours']}/"] if cell == "dev-url" else []
        name = f"{client}-{cell}-d{draft}{'-ws' if transport else ''}"
        return self.driver_result(self.driver(client, cell, draft, extra + transport), name)

    def js_pub(self, client: str, cell: str, draft: int, transport: list[str] = []) -> tuple[str, str]:
        """A JS publisher, our Rust subscriber (examples/subscriber, raw QUIC) reading it."""
        ns, count = f"browser/jspub-{client}-{draft}-{self.js_browser}-{'ws-' if transport else ''}{os.getpid()}", 5
        js = self.driver(client, cell, draft, ["--namespace", ns, "--track", "t", "--count", str(count),
                                               "--interval-ms", "100", *transport], wait=20)
        # RENDEZVOUS_TIMEOUT exists from draft-17; before it, retry while the namespace is not
        # routed yet (the browser is still starting).
        rendezvous = ["--rendezvous", "10"] if draft >= 18 else []
        deadline = time.monotonic() + 15
        while True:
            rc, out, err = run(
                [OURS_SUB, "--url", self.url("ours", "quic"), "--insecure", "--draft", str(draft),
                 "--namespace", ns, "--track", "t", "--count", str(count), *rendezvous],
                timeout=20,
            )
            # A driver that has already ended (its cell failed) will not publish: no more tries.
            if rc == 0 or "refused" not in err or time.monotonic() > deadline or js.poll() is not None:
                break
            time.sleep(0.3)
        got = re.findall(r"^group \d+ object \d+: (.*)$", out, re.M)
        result, detail = self.driver_result(js, f"{client}-{cell}-d{draft}{'-ws' if transport else ''}", wait=20)
        if got != [str(i) for i in range(count)]:
            return "fail", f"Rust subscriber got {got} (exit {rc}): {reason(out, err, rc)}; browser: {result} {detail}"
        return result, detail

    def js_sub(self, client: str, cell: str, draft: int, transport: list[str] = []) -> tuple[str, str]:
        """Our Rust publisher (examples/publisher, raw QUIC), a JS subscriber reading it."""
        ns = f"browser/jssub-{client}-{draft}-{self.js_browser}-{'ws-' if transport else ''}{os.getpid()}"
        publisher = self.procs.start(
            f"{self.js_browser}-pub-{client}-d{draft}{'-ws' if transport else ''}",
            [OURS_PUB, "--url", self.url("ours", "quic"), "--insecure", "--draft", str(draft), "--namespace", ns,
             "--track", "clock", "--interval-ms", "100", "--group-size", "2", "--count", "1000"],
        )
        try:
            return self.driver_result(
                self.driver(client, cell, draft, ["--namespace", ns, "--track", "clock", "--count", "4", *transport]),
                f"{client}-{cell}-d{draft}{'-ws' if transport else ''}",
            )
        finally:
            self.procs.stop(publisher)

    def page(self, websocket: bool = False) -> tuple[str, str, int]:
        """The relay's page (served by its HTTP side) in the browser: a namespace our Rust publisher
        announces appears, its track's objects show, and it disappears when the publisher quits.
        Without `websocket` the page must say it uses WebTransport; with it, the browser has no
        WebTransport and the page must say it uses WebSocket. Also returns the draft the page
        says it speaks (19 when it does not say)."""
        tag = "-ws" if websocket else ""
        ns = f"page/room{tag}-{self.js_browser}-{os.getpid()}"
        port = self.ports["ours"]
        ready = OUT / f"page{tag}.ready"
        ready.unlink(missing_ok=True)  # an earlier run's would stop the publisher at once
        publisher = self.procs.start(
            f"{self.js_browser}-page-pub",
            [OURS_PUB, "--url", self.url("ours", "quic"), "--insecure", "--namespace", ns, "--track", "chat",
             "--interval-ms", "200", "--count", "1000"],
        )
        check = subprocess.Popen(
            ["node", str(PAGE_CHECK), "--page", f"http://127.0.0.1:{port}/?prefix=page&track=chat&subscribe={ns}",
             "--expect-namespace", ns, "--expect-objects", "3", "--expect-gone", "--ready-file", str(ready),
             "--screenshot", str(OUT / f"page{tag}-{self.js_browser}.png"), "--timeout-ms", "20000",
             "--browser", self.js_browser,
             *(["--no-webtransport", "--expect-transport", "websocket"] if websocket else ["--expect-transport", "webtransport"])],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "MOQ_BROWSER": str(BROWSER)},
        )
        deadline = time.monotonic() + 25
        while not ready.exists() and check.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # the page-check's hand-off is a file
        # Interrupted, the publisher withdraws its namespace (PUBLISH_NAMESPACE_DONE) and leaves.
        publisher.send_signal(signal.SIGINT)
        try:
            out, err = check.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            check.kill()
            out, err = check.communicate()
        self.procs.stop(publisher)
        (OUT / "logs" / f"{self.js_browser}-page{tag}.log").write_text(out + "\n# stderr\n" + err)
        try:
            seen = json.loads(out.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return "fail", f"page-check printed nothing (exit {check.returncode}): {err.strip()[-200:]}", 19
        draft = seen.get("version") or 19
        detail = f"over {seen.get('transport')} (draft-{draft}): namespaces {seen.get('namespaces')}, {seen.get('objects')} objects, gone {seen.get('gone')}"
        return ("pass", detail, draft) if seen.get("ok") else ("fail", f"{detail}; {seen.get('error')}", draft)

    def page_unreachable(self) -> tuple[str, str]:
        """The page told to connect where nothing listens, over both transports: its status must
        name each one's failure."""
        port = self.ports["ours"]
        dead = free_port()
        check = subprocess.run(
            ["node", str(PAGE_CHECK), "--page",
             f"http://127.0.0.1:{port}/?url=https://127.0.0.1:{dead}/&fingerprint={cert_fingerprint()}&ws=ws://127.0.0.1:{dead}/",
             "--expect-error", "^error: could not connect: WebTransport .*; WebSocket \\(ws://127.0.0.1:[0-9]+/\\): ",
             "--screenshot", str(OUT / f"page-error-{self.js_browser}.png"), "--timeout-ms", "20000",
             "--browser", self.js_browser],
            capture_output=True, text=True, timeout=60,
            env={**os.environ, "MOQ_BROWSER": str(BROWSER)},
        )
        (OUT / "logs" / f"{self.js_browser}-page-error.log").write_text(check.stdout + "\n# stderr\n" + check.stderr)
        try:
            seen = json.loads(check.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            return "fail", f"page-check printed nothing (exit {check.returncode}): {check.stderr.strip()[-200:]}"
        return ("pass" if seen.get("ok") else "fail"), f"status {seen.get('status')!r}; {seen.get('error') or ''}"[:300]
