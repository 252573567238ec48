"""The interop test clients (ours, aiomoqt's, Cloudflare's) against every relay, and their outcomes."""

from __future__ import annotations

import os

from .config import (
    AIOMOQT_CLIENT,
    AIOMOQT_CLIENT_DRAFTS,
    IETF_TEST_CLIENT,
    IETF_TEST_CLIENT_DRAFTS,
    IETF_TEST_CLIENT_RELAYS,
    OURS_CLIENT,
    OUT,
    RELAY_DRAFTS,
    TRANSPORTS,
    WS_RACY,
    WS_RELAYS,
)
from .common import Outcome, log, parse_tap, run


class Clients:
    """The interop test clients of a Matrix, one cell per case they report."""

    def record(self, o: Outcome) -> None:
        self.outcomes.append(o)

    def our_client(self) -> None:
        for relay, drafts in RELAY_DRAFTS.items():
            for draft in drafts:
                transports = [*TRANSPORTS, *(["ws"] if relay in WS_RELAYS else [])]
                for transport in transports:
                    if not self.wanted("ours", relay, transport, f"d{draft}"):
                        continue
                    log(f"-- our interop client -> {relay} relay, draft-{draft}, {transport}")
                    self.client_cell(
                        ("ours", relay, draft, transport),
                        [OURS_CLIENT, "-r", self.url(relay, transport), "--tls-disable-verify"],
                        f"client-ours-{relay}-{draft}-{transport}",
                        env={"MOQT_DRAFT": str(draft)},
                    )

    def aiomoqt_client(self) -> None:
        # Against our relay: the 12 default cases, fetch and join, at every draft both speak.
        relay = "ours"
        for draft in AIOMOQT_CLIENT_DRAFTS:
            for transport in TRANSPORTS:
                if not self.wanted("aiomoqt", transport, f"d{draft}"):
                    continue
                for case in (None, "fetch", "join"):
                    log(f"-- aiomoqt interop client -> {relay} relay, draft-{draft}, {transport}, "
                        f"{case or 'default cases'}")
                    # One draft number pins it: a single ALPN / WT protocol is offered.
                    argv = [AIOMOQT_CLIENT, "-r", self.url(relay, transport), "--tls-disable-verify",
                            "--draft", str(draft)]
                    if case:
                        argv += ["-t", case]
                    self.client_cell(
                        ("aiomoqt", relay, draft, transport, case),
                        argv,
                        f"client-aiomoqt-{relay}-{draft}-{transport}-{case or 'default'}",
                    )

    def ietf_test_client(self) -> None:
        # Cloudflare's moq-test-client: every case at every draft it speaks (18), both
        # transports, against our relay and Cloudflare's (its reference).
        for relay in IETF_TEST_CLIENT_RELAYS:
            for draft in IETF_TEST_CLIENT_DRAFTS:
                for transport in TRANSPORTS:
                    if not self.wanted("moq-test-client", relay, transport, f"d{draft}"):
                        continue
                    log(f"-- moq-test-client -> {relay} relay, draft-{draft}, {transport}")
                    # Each case has its own 10 s limit inside the client (TEST_TIMEOUT).
                    self.client_cell(
                        ("moq-test-client", relay, draft, transport),
                        [IETF_TEST_CLIENT, "--relay", self.url(relay, transport), "--tls-disable-verify"],
                        f"client-moq-test-client-{relay}-{draft}-{transport}",
                        env={"RUST_LOG": os.environ.get("INTEROP_RUST_LOG", "warn")},
                    )

    def client_cell(self, key: tuple, argv: list, log_name: str, env: dict | None = None) -> None:
        """Runs one client invocation, `argv` (key: client, relay, draft, transport, ...),
        its TAP output kept in logs/`log_name`.tap, and records its outcomes; keeps the run so
        that a case differing from its row can be run again (`rerun`, logs/`log_name`-rerun.tap)."""
        client, relay, draft, transport = key[:4]

        def cell(tag: str = "") -> list[Outcome]:
            rc, out, err = run(argv, timeout=300, env=env)
            (OUT / "logs" / f"{log_name}{tag}.tap").write_text(out + "\n# stderr\n" + err)
            return self.collect(client, relay, draft, transport, rc, out, err)

        for o in cell():
            self.record(o)
            self.cells[id(o)] = (key, cell)

    def rerun(self, bad: list[tuple[Outcome, object]], matches) -> list[tuple[Outcome, object]]:
        """Runs each client invocation behind an outcome in `bad` once more (the relays still
        up). An outcome whose case now gives what its row expects (`matches(outcome)`) is
        replaced by the new one, its detail saying it differed on the first run: it is listed
        as FLAKY at the end, and the test command passes. What differs twice stays in `bad`.
        Outcomes of the clock, mixed and browser cells are not run again."""
        still = []
        redone: dict[tuple, list[Outcome]] = {}
        for o, e in bad:
            entry = self.cells.get(id(o))
            if entry is None:
                still.append((o, e))
                continue
            key, cell = entry
            if key not in redone:
                log(f"-- rerun (differed: {o.client} -> {o.relay} d{o.draft} {o.transport} {o.case}): {key}")
                redone[key] = cell(tag="-rerun")
            again = next((n for n in redone[key] if n.case == o.case), None)
            if again is not None and matches(again):
                first = f"{o.result} on the first run" + (f" ({o.detail})" if o.detail else "")
                n = Outcome(again.client, again.relay, again.draft, again.transport, again.case,
                            again.result, f"flaky: {first}")
                self.outcomes[self.outcomes.index(o)] = n
                self.flaky.append(n)
            else:
                still.append((o, e))
        return still

    def collect(self, client: str, relay: str, draft: int, transport: str, rc: int, out: str, err: str) -> list[Outcome]:
        """The outcomes of one client invocation, from its TAP output."""
        results = parse_tap(out)
        if rc == 127 and not results:
            return [Outcome(client, relay, draft, transport, "*", "skip", "unsupported (exit 127)")]
        if not results:
            tail = (err.strip().splitlines() or ["no output"])[-1]
            return [Outcome(client, relay, draft, transport, "*", "fail", f"exit {rc}: {tail}")]
        outcomes = []
        for case, (result, detail) in results.items():
            if relay in ("cloudflare-14", "cloudflare-16") and case == "data-subgroup-basic":
                # Cloudflare's 0.7.x relays cancel the subgroups they are forwarding when the
                # publisher's PUBLISH_DONE arrives: pass or fail by timing, not reported.
                result, detail = "skip", f"racy at this peer (got {result}): {detail}"
            elif client == "ours" and relay == "moq-dev" and draft in (14, 15) and case != "setup-only":
                # moq-dev's relay sends a 0-field SUBSCRIBE_NAMESPACE prefix at some point after
                # SETUP, which closes the session (a violation before draft-16): a case that is
                # done before it arrives passes, the others fail.
                result, detail = "skip", f"racy at this peer (got {result}): {detail}"
            elif client == "ours" and transport == "ws" and case in WS_RACY.get(relay, ()):
                result, detail = "skip", f"racy over WebSocket (got {result}): {detail}"
            outcomes.append(Outcome(client, relay, draft, transport, case, result, detail))
        return outcomes
