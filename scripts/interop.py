#!/usr/bin/env python3
"""The interop matrix: our relay and client against aiomoqt, moq-dev and Cloudflare.

Run by scripts/interop.sh (which installs the peers and builds our binaries first). Starts every
relay on a free loopback port, runs each client against each relay it can speak to, plus the
clock publish/subscribe pairs across implementations, and compares every outcome with
tests/interop-expected.txt. Exit 1 if any outcome differs from the table (a failure where a pass
was expected is a regression; a pass where a failure was expected means the table is stale). A
client case that differs is first run once more (its whole client invocation, relays still up):
if it then matches its row it is listed as FLAKY at the end and does not fail the run.

    scripts/interop.py [--only SUBSTRING] [--docs]
    scripts/interop.py --docs-from target/interop/results.tsv

--docs rewrites docs/interop.md from this run; --docs-from from an earlier run's results, running
nothing. Logs: target/interop/.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from interop_matrix.config import (
    AIOMOQT_CLIENT,
    AIOMOQT_RELAY,
    DOC,
    EXPECTED,
    IETF14_CLOCK,
    IETF14_RELAY,
    IETF16_CLOCK,
    IETF16_RELAY,
    IETF_CLOCK,
    IETF_RELAY,
    IETF_TEST_CLIENT,
    MOQDEV_CLOCK,
    MOQDEV_RELAY,
    OURS_CLIENT,
    OURS_PUB,
    OURS_RELAY,
    OURS_SUB,
    OUT,
    ROOT,
)
from interop_matrix.common import Outcome, Table, log
from interop_matrix.matrix import Matrix
from interop_matrix.docs import docs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", help="run only the rows whose client, relay, transport or case contains this")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/interop.md from this run")
    ap.add_argument("--docs-from", type=Path, metavar="RESULTS_TSV",
                    help="rewrite docs/interop.md from an earlier run's results.tsv, running nothing")
    args = ap.parse_args()
    if args.docs_from:
        m = Matrix(None)
        for line in args.docs_from.read_text().splitlines():
            client, relay, draft, transport, case, result, detail = line.split("\t", 6)
            m.record(Outcome(client, relay, int(draft), transport, case, result, detail))
        DOC.write_text(docs(m, Table.load(EXPECTED)))
        log(f"wrote {DOC.relative_to(ROOT)} from {args.docs_from}")
        return 0

    missing = [p for p in (OURS_RELAY, OURS_CLIENT, OURS_PUB, OURS_SUB, AIOMOQT_RELAY, AIOMOQT_CLIENT,
                           MOQDEV_RELAY, MOQDEV_CLOCK, IETF_RELAY, IETF_CLOCK, IETF_TEST_CLIENT, IETF14_RELAY, IETF14_CLOCK,
                           IETF16_RELAY, IETF16_CLOCK) if not p.exists()]
    if missing:
        log("missing binaries (run scripts/interop.sh, which installs and builds them):")
        for p in missing:
            log(f"  {p}")
        return 1
    if not shutil.which("openssl"):
        log("openssl is needed to make the test certificate")
        return 1
    if OUT.exists():
        shutil.rmtree(OUT)
    (OUT / "logs").mkdir(parents=True)
    table = Table.load(EXPECTED)
    m = Matrix(args.only)
    started = time.monotonic()
    try:
        m.start_relays()
        log("relays: " + ", ".join(f"{k} 127.0.0.1:{v}" for k, v in m.ports.items()))
        m.our_client()
        m.aiomoqt_client()
        m.ietf_test_client()
        m.clocks()
        m.mixed()
        m.browser()
        # A client case that differs from its row is run once more (the whole invocation it
        # came from) while the relays are up: one that then matches is reported FLAKY below,
        # not failed; one that differs twice fails the run.
        bad = m.rerun(m.compare(table), lambda o: (e := table.lookup(o)) is not None and e.expect == o.result)
    finally:
        m.procs.stop_all()
    log("")
    log(m.summary(table))
    (OUT / "results.tsv").write_text(
        "".join(f"{o.client}\t{o.relay}\t{o.draft}\t{o.transport}\t{o.case}\t{o.result}\t{o.detail}\n"
                for o in m.outcomes)
    )
    if args.docs:
        DOC.write_text(docs(m, table))
        log(f"wrote {DOC.relative_to(ROOT)}")
    log("")
    for (label, draft), rows in m.summary_rows():
        n_pass = sum(1 for o in rows if o.result == "pass")
        n_fail = sum(1 for o in rows if o.result == "fail")
        n_diff = sum(1 for o in rows if (e := table.lookup(o)) is None or e.expect != o.result)
        log(f"  {label:<28} d{draft}: {n_pass} pass, {n_fail} fail, {len(rows) - n_pass - n_fail} skip, "
            f"{n_diff} differ")
    passed = sum(1 for o in m.outcomes if o.result == "pass")
    log(f"\ninterop: {len(m.outcomes)} outcomes, {passed} pass, {len(bad)} differ from "
        f"{EXPECTED.relative_to(ROOT)}, {time.monotonic() - started:.0f} s; logs in {OUT.relative_to(ROOT)}")
    for o in m.flaky:
        log(f"  FLAKY {o.client} -> {o.relay} d{o.draft} {o.transport} {o.case}: {o.result} on a rerun ({o.detail})")
    for o, e in bad:
        log(f"  DIFF {o.client} -> {o.relay} d{o.draft} {o.transport} {o.case}: got {o.result}"
            f"{' (' + o.detail + ')' if o.detail else ''}, expected {e.expect if e else 'no row in the table'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
