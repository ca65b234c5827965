"""Property: whatever runs, accepts, kills and full disks come, the store always reads.

Random sequences of runs (accepting or not, with bounded and unbounded intervals), runs
that fail at a random write (a full disk, or Ctrl-C), and runs killed mid-append (half a
history line left behind) never leave a file that does not read, never an accepted
baseline without its history line, and never a non-finite number in any file.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test  # noqa: E402

from pytest_specdec.stats import Interval  # noqa: E402
from pytest_specdec.store.baselines import (  # noqa: E402
    BaselineStore,
    baseline_key,
    list_baseline_files,
    read_baseline_file,
)
from pytest_specdec.store.ledger import BaselineLedger, LedgerPolicy  # noqa: E402
from pytest_specdec.store.nights import Night, read_nights  # noqa: E402

SPEEDUPS = st.one_of(st.floats(0.2, 4.0), st.just(math.inf))
CATEGORIES = st.sampled_from(["code", "prose", "copy"])


class StoreLife(RuleBasedStateMachine):
    make_record: Any = None  # the make_record fixture, set by the test

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="specdec-store-"))

    def teardown(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _finish(self, category: str, speedup: float, update: bool) -> None:
        record = self.make_record(category, 1.0 if math.isinf(speedup) else speedup, "inconclusive", None)
        if math.isinf(speedup):  # too few pairs for a bound: an unbounded side
            record = replace(record, speedup=Interval(1.0, 0.0, math.inf, 0.98, 2))
        book = BaselineLedger(BaselineStore(self.root, "M"), LedgerPolicy(update=update))
        book.check(record)
        book.finish(interrupted=False, collected=None)

    @rule(category=CATEGORIES, speedup=SPEEDUPS, update=st.booleans())
    def a_run(self, category: str, speedup: float, update: bool) -> None:
        self._finish(category, speedup, update)

    @rule(category=CATEGORIES, speedup=SPEEDUPS, at=st.integers(0, 6), ctrl_c=st.booleans())
    def a_run_that_fails_at_a_write(self, category: str, speedup: float, at: int, ctrl_c: bool) -> None:
        calls = {"n": 0}
        real_write, real_replace = os.write, os.replace

        def fault() -> None:
            calls["n"] += 1
            if calls["n"] > at:
                raise KeyboardInterrupt if ctrl_c else OSError(errno.ENOSPC, "No space left on device")

        def write(descriptor: int, data: Any) -> int:
            fault()
            return real_write(descriptor, data)

        def replacing(source: Any, target: Any) -> None:
            fault()
            real_replace(source, target)

        with mock.patch("os.write", write), mock.patch("os.replace", replacing), contextlib.suppress(KeyboardInterrupt):
            self._finish(category, speedup, update=True)

    @rule(cut=st.integers(1, 200))
    def a_run_killed_mid_append(self, cut: int) -> None:
        path = BaselineStore(self.root, "M").history_path()
        line = Night.of_record(self.make_record("code", 1.5, "holds", None), "M", True, "2026-12-01").as_line()
        import json

        text = json.dumps(line)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as history:
            history.write(text[: min(cut, len(text) - 1)])  # SIGKILL: no newline, no rollback

    @invariant()
    def every_file_reads_and_every_baseline_has_its_history(self) -> None:
        store = BaselineStore(self.root, "M")
        history = read_nights(store.history_path()) if store.history_path().is_file() else ()
        keys = {night.key for night in history}
        for path in list_baseline_files(self.root):
            accepted = read_baseline_file(path, "M", path.stem)
            for key, entry in accepted.entries.items():
                assert key in keys, f"{key} was accepted without its history line"
                assert baseline_key(entry.result) == key
        for path in self.root.rglob("*"):
            if path.is_file() and path.suffix in (".json", ".jsonl"):
                text = path.read_text(encoding="utf-8")
                assert "Infinity" not in text
                assert "NaN" not in text
        if store.history_path().is_file():  # a torn tail is only ever the last line, and never glued onto
            rows = store.history_path().read_text(encoding="utf-8").split("\n")
            assert all(row.startswith("{") and row.endswith("}") for row in rows[:-1])


def test_the_store_survives_any_sequence_of_runs_faults_and_kills(make_record: Any) -> None:
    class Life(StoreLife):
        pass

    Life.make_record = staticmethod(make_record)
    run_state_machine_as_test(Life, settings=settings(max_examples=40, stateful_step_count=12, deadline=None))


def test_a_baseline_file_that_is_a_link_stays_a_link_and_its_target_is_written(tmp_path: Path) -> None:
    """A user who keeps baselines elsewhere and links them in finds the link, and the new content behind it."""
    from pytest_specdec.store.files import write_atomically

    kept = tmp_path / "elsewhere" / "mlx.json"
    kept.parent.mkdir()
    kept.write_text("old\n")
    link = tmp_path / "baselines" / "mlx.json"
    link.parent.mkdir()
    link.symlink_to(kept)
    write_atomically(link, "new\n")
    assert link.is_symlink(), "never replaced by a plain copy"
    assert kept.read_text() == "new\n"
    assert not list(link.parent.glob(".specdec-*")), "no temporary file left beside the link"
