"""The matrix's building blocks: outcomes and the expectations table, child processes, TAP parsing, the test certificate."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .config import CHILD_ENV, OUT


def reason(out: str, err: str, rc: int) -> str:
    """The most telling line of a failed run: anyhow's cause, else the last line printed."""
    lines = [line.strip() for line in (err + "\n" + out).splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if line == "Caused by:" and i + 1 < len(lines):
            return lines[i + 1][:200]
    for line in lines:
        # anyhow's "Error:", or clap's "error:" for a command line it refuses.
        if line.startswith(("Error:", "error:")):
            return line[:200]
    return (lines[-1] if lines else f"exit {rc}")[:200]


def log(msg: str) -> None:
    print(msg, flush=True)


def free_port() -> int:
    """A UDP port free on every interface (aiomoqt's relay binds 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


@dataclass
class Outcome:
    """One row of the matrix: who, what, and how it went."""

    client: str
    relay: str
    draft: int
    transport: str
    case: str
    result: str  # pass | fail | skip
    detail: str = ""


@dataclass
class Expectation:
    expect: str
    note: str


@dataclass
class Table:
    rows: dict[tuple[str, str, str, str, str], Expectation] = field(default_factory=dict)

    @staticmethod
    def load(path: Path) -> "Table":
        t = Table()
        for n, line in enumerate(path.read_text().splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split(None, 6)
            if len(parts) < 6:
                raise SystemExit(f"{path}:{n}: want client relay draft transport case expect [note]")
            client, relay, draft, transport, case, expect = parts[:6]
            if expect not in ("pass", "fail", "skip"):
                raise SystemExit(f"{path}:{n}: expect must be pass, fail or skip")
            note = parts[6] if len(parts) > 6 else ""
            t.rows[(client, relay, draft, transport, case)] = Expectation(expect, note)
        return t

    def lookup(self, o: Outcome) -> Expectation | None:
        """The most specific row: exact values first, then '*' (case, transport, draft, relay)."""
        for relay in (o.relay, "*"):
            for draft in (str(o.draft), "*"):
                for transport in (o.transport, "*"):
                    for case in (o.case, "*"):
                        e = self.rows.get((o.client, relay, draft, transport, case))
                        if e is not None:
                            return e
        return None


class Procs:
    """Child processes, killed (whole process group) at exit."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen] = []

    def start(self, name: str, argv: list[str], env: dict | None = None) -> subprocess.Popen:
        logf = open(OUT / "logs" / f"{name}.log", "w")
        p = subprocess.Popen(
            [str(a) for a in argv],
            stdout=logf,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **CHILD_ENV, **(env or {})},
            start_new_session=True,
        )
        self.procs.append(p)
        return p

    def stop(self, p: subprocess.Popen) -> None:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.wait()

    def stop_all(self) -> None:
        for p in self.procs:
            self.stop(p)


def run(argv: list, timeout: float, env: dict | None = None) -> tuple[int, str, str]:
    """Runs to completion (or kills it at the timeout: rc -9)."""
    p = subprocess.Popen(
        [str(a) for a in argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env={**os.environ, **CHILD_ENV, **(env or {})},
        start_new_session=True,
        text=True,
    )
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return -9, out, err


TAP_LINE = re.compile(r"^(not ok|ok) \d+ - (\S+)(.*)$")


def parse_tap(out: str) -> dict[str, tuple[str, str]]:
    """case -> (pass|fail|skip, detail) from TAP 14 output."""
    results: dict[str, tuple[str, str]] = {}
    current = None
    for line in out.splitlines():
        m = TAP_LINE.match(line)
        if m:
            status, case, rest = m.groups()
            if "# SKIP" in rest:
                results[case] = ("skip", rest.split("# SKIP", 1)[1].strip())
            else:
                results[case] = ("pass" if status == "ok" else "fail", "")
            current = case if status == "not ok" else None
            continue
        if current is not None:
            s = line.strip()
            for key in ("message:", "received:", "expected:"):
                if s.startswith(key) and current in results and not results[current][1]:
                    results[current] = ("fail", s)
    return results


def cert_fingerprint() -> str:
    """The SHA-256 of the test certificate (OUT/cert.pem), hex: what peers pin."""
    der = subprocess.run(
        ["openssl", "x509", "-in", OUT / "cert.pem", "-outform", "der"], check=True, capture_output=True
    ).stdout
    return hashlib.sha256(der).hexdigest()


def clock_drafts(o: Outcome) -> tuple[int, int]:
    """A clock row's publisher and subscriber drafts (its case is "clock-dP>dS")."""
    m = re.match(r"clock-d(\d+)>d(\d+)", o.case)
    return (int(m.group(1)), int(m.group(2))) if m else (o.draft, o.draft)
