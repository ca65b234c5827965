"""How long each test took on this machine, kept between runs, so that a run's expected duration is measured.

A run says how long it expects to take before its first pair: each test's wall time on
this machine's earlier runs, per machine class, backend and model profile (a test not
timed yet counts as the mean of those that were). A machine with no earlier run has no
expected duration, and the line says so instead of guessing; each comparison still says its
own time left as it goes. The gate's budget plans a night's legs with the same arithmetic
(:func:`expect`), over the nights' JUnit timings.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.store.files import write_atomically

TIMINGS_VARIABLE = "SPECDEC_TIMINGS_DIR"


def timings_root() -> Path:
    """``$SPECDEC_TIMINGS_DIR``, else ``$XDG_CACHE_HOME/pytest-specdec/timings`` (``~/.cache`` by default)."""
    explicit = os.environ.get(TIMINGS_VARIABLE, "")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME", "") or str(Path.home() / ".cache")
    return Path(cache) / "pytest-specdec" / "timings"


def timings_file(machine_class: str, backend: str, profile: str) -> Path:
    """One file per machine class, backend and model profile."""
    return timings_root() / f"{machine_class}--{backend}--{profile}.json"


def read_timings(path: Path) -> dict[str, float]:
    """Seconds per test; empty when none were kept or the file is not ours (a cache: never an error)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        str(k): float(v) for k, v in data.items() if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0
    }


def keep_timings(path: Path, found: Mapping[str, float]) -> None:
    """Merge this run's times into the file (a cache that cannot be written is left as it was)."""
    if not found:
        return
    # A read-only or full cache costs the next run its expected duration, nothing else.
    with contextlib.suppress(OSError):
        write_atomically(path, json.dumps(read_timings(path) | dict(found), indent=2, sort_keys=True) + "\n")


@dataclass(frozen=True)
class Expected:
    """A run's expected duration, from earlier timings of its tests.

    >>> Expected(tests=3, timed=2, seconds=150.0).text
    '3 test(s), expected ~2.5 min (2 timed on this machine before, 1 at their mean)'
    """

    tests: int
    timed: int
    seconds: float | None  # None: none of the tests was timed here before

    @property
    def text(self) -> str:
        """One line, said before the first pair."""
        if self.seconds is None:
            return (
                f"{self.tests} test(s), expected duration not known yet on this machine (this run times each test for "
                "the next; every comparison says its own time left as it goes)"
            )
        shown = f"{self.seconds / 60:.1f} min" if self.seconds >= 60 else f"{self.seconds:.0f} s"
        rest = f", {self.tests - self.timed} at their mean" if self.timed < self.tests else ""
        return f"{self.tests} test(s), expected ~{shown} ({self.timed} timed on this machine before{rest})"


def costs(keys: Sequence[str], timings: Mapping[str, float]) -> dict[str, float] | None:
    """Each key's expected seconds: its earlier time, else the mean of the timed ones (``None``: none timed)."""
    known = [timings[key] for key in keys if key in timings]
    if not known:
        return None
    mean = sum(known) / len(known)
    return {key: timings.get(key, mean) for key in keys}


def expect(keys: Sequence[str], timings: Mapping[str, float]) -> Expected:
    """The expected duration of ``keys``."""
    found = costs(keys, timings)
    timed = sum(1 for key in keys if key in timings)
    return Expected(len(keys), timed, None if found is None else sum(found.values()))
