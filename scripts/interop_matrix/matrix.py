"""The matrix: every cell's outcome, filtered by --only, and its summary against the expectations table."""

from __future__ import annotations

from .common import Expectation, Outcome, Procs, Table, clock_drafts
from .relays import Relays
from .clients import Clients
from .clocks import Clocks
from .browsers import Browsers


class Matrix(Relays, Clients, Clocks, Browsers):
    """Every cell of the interop matrix: the relays it started, the outcomes so far."""

    def __init__(self, only: str | None) -> None:
        self.only = only
        self.procs = Procs()
        self.outcomes: list[Outcome] = []
        self.ports: dict[str, int] = {}
        self.versions: dict[str, str] = {}
        # The browser the browser cells run in now (browser() sets it for each of BROWSERS).
        self.js_browser = "chromium"
        # The client invocation behind each client outcome (by id), to run it again.
        self.cells: dict[int, tuple] = {}
        # Outcomes that differed from their row once and matched it when run again.
        self.flaky: list[Outcome] = []

    def wanted(self, *names: object) -> bool:
        return self.only is None or any(self.only in str(n) for n in names)

    def summary_rows(self) -> list[tuple[tuple[str, int], list[Outcome]]]:
        """Outcomes by (client -> relay, draft); the clock pairs by their newest draft."""
        groups: dict[tuple[str, int], list[Outcome]] = {}
        for o in self.outcomes:
            if ">" in o.client:
                link = o.relay.rpartition("/d")[2] if "/d" in o.relay else ""
                key = ("clock pairs (below)", max(*clock_drafts(o), int(link or 0)))
            else:
                key = (f"{o.client} -> {o.relay}", o.draft)
            groups.setdefault(key, []).append(o)
        return list(groups.items())

    def compare(self, table: Table) -> list[tuple[Outcome, Expectation | None]]:
        bad = []
        for o in self.outcomes:
            e = table.lookup(o)
            if e is None or e.expect != o.result:
                bad.append((o, e))
        return bad

    def summary(self, table: Table) -> str:
        lines = []
        width = max((len(o.case) for o in self.outcomes), default=10)
        for o in self.outcomes:
            e = table.lookup(o)
            expect = e.expect if e else "?"
            mark = "ok  " if expect == o.result else "DIFF"
            note = f"  ({o.detail})" if o.result != "pass" and o.detail else ""
            lines.append(
                f"{mark} {o.client:>22} -> {o.relay:<10} d{o.draft} {o.transport:<4} {o.case:<{width}} "
                f"{o.result} (expected {expect}){note}"
            )
        return "\n".join(lines)
