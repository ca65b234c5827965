"""A night's budget: the expected duration of a leg, said before it starts, and claims dropped to fit — aloud.

The expected duration is measured, not assumed: each test's wall time on the previous
nights (from pytest's JUnit XML, kept in the runner's state folder per machine class and
backend). A test with no timing yet counts as the mean of those with one; with none at
all the first night runs whole and says its duration is not known yet. A leg's share of
``window-minutes`` is the window divided among the configured legs; when the expected
duration exceeds it, claims are dropped until the rest fits, and every dropped test is
named. They take turns: those measured most recently are dropped first (the longest first
among equals), and a claim never measured is dropped last, so a claim dropped tonight is
among the first to run tomorrow and no claim goes ungated night after night.
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from xml.etree import ElementTree

from pytest_specdec.errors import NO_RESULT_KEPT
from pytest_specdec.gate.runner_state import dump_state_json, read_state_json, state_root
from pytest_specdec.store.timings import costs


def timings_path(machine_class: str, backend: str) -> Path:
    """Where a leg's per-test wall times are kept between nights."""
    return state_root() / "timings" / f"{machine_class}--{backend}.json"


def junit_key(nodeid: str) -> str:
    """``benchmarks/test_a.py::test_x[code]`` as JUnit names it: ``benchmarks.test_a::test_x[code]``."""
    path, _, name = nodeid.partition("::")
    return path.removesuffix(".py").replace("/", ".") + "::" + name


def read_timings(path: Path) -> dict[str, float]:
    """Seconds per JUnit test name; empty when none were kept (a file that is not ours is set aside)."""
    data = read_state_json(path)
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float)) and v >= 0}


def last_measured_path(timings: Path) -> Path:
    """Beside a leg's timings: when each test last ran (ISO time stamps)."""
    return timings.with_name(timings.stem + "--last.json")


def read_last_measured(timings: Path) -> dict[str, str]:
    """When each test of the leg last ran; empty when none was kept."""
    data = read_state_json(last_measured_path(timings))
    return {str(k): v for k, v in data.items() if isinstance(v, str)}


def record_timings(junit: Path, path: Path, now: str | None = None) -> None:
    """Keep tonight's wall time of every test that ran (merged over the nights before), and when it ran."""
    if not junit.is_file():
        return
    try:
        root = ElementTree.parse(junit).getroot()
    except ElementTree.ParseError:
        return
    found = {
        f"{case.get('classname', '')}::{case.get('name', '')}": float(case.get("time", "0") or 0)
        for case in root.iter("testcase")
        if not any(child.tag == "skipped" for child in case)
    }
    # Measured tonight: ran, and did not error or fail with nothing kept (it goes first again tomorrow).
    measured = [
        f"{case.get('classname', '')}::{case.get('name', '')}"
        for case in root.iter("testcase")
        if not any(child.tag in ("skipped", "error") or NO_RESULT_KEPT in (child.get("message") or "")
                   for child in case)
    ]  # fmt: skip
    if found:
        dump_state_json(path, dict(read_timings(path) | found))
    if measured:
        stamp = now or datetime.now(UTC).isoformat(timespec="seconds")
        dump_state_json(last_measured_path(path), read_last_measured(path) | dict.fromkeys(measured, stamp))


@dataclass(frozen=True)
class Budget:
    """What the leg is expected to take, what it may take, and what was dropped to fit."""

    tests: int
    expected_s: float | None  # None: no timing known yet
    allowed_s: float | None  # None: no window configured
    dropped: tuple[str, ...] = ()
    kept_s: float | None = None

    @property
    def text(self) -> str:
        """One line for the log, the step summary and ``night.json``."""
        expected = "unknown (no night timed yet)" if self.expected_s is None else f"{self.expected_s / 60:.1f} min"
        line = f"{self.tests} test(s), expected {expected}"
        if self.allowed_s is not None:
            line += f" of {self.allowed_s / 60:.1f} min allowed"
        if self.dropped:
            line += (
                f"; dropped {len(self.dropped)} claim(s) to fit (expected now {(self.kept_s or 0) / 60:.1f} min): "
                + ", ".join(self.dropped)
            )
        return line


def plan(
    nodeids: Sequence[str],
    timings: Mapping[str, float],
    allowed_s: float | None,
    last_measured: Mapping[str, str] | None = None,
) -> Budget:
    """The expected duration, and tests dropped until the rest fits ``allowed_s`` (the most recently measured
    first, the longest first among equals; never measured last)."""
    by_key = costs([junit_key(n) for n in nodeids], timings)
    if by_key is None:
        return Budget(len(nodeids), None, allowed_s)
    cost = {n: by_key[junit_key(n)] for n in nodeids}
    expected = sum(cost.values())
    if allowed_s is None or expected <= allowed_s:
        return Budget(len(nodeids), expected, allowed_s)
    kept, dropped = dict(cost), []
    last = last_measured or {}
    by_turn = sorted(cost, key=lambda n: (-cost[n], n))
    by_turn.sort(key=lambda n: last.get(junit_key(n), ""), reverse=True)  # stable: the longest first among equals
    for nodeid in by_turn:
        if sum(kept.values()) <= allowed_s or len(kept) == 1:
            break
        dropped.append(nodeid)
        del kept[nodeid]
    return Budget(len(nodeids), expected, allowed_s, tuple(dropped), sum(kept.values()))


def collect(command: Sequence[str]) -> list[str]:
    """The node ids a pytest command would run (``--collect-only -q``)."""
    done = subprocess.run([*command, "--collect-only", "-q"], capture_output=True, text=True, check=False)
    return [line.strip() for line in done.stdout.splitlines() if "::" in line and not line.startswith(" ")]
