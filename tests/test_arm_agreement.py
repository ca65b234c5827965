"""studies/arm_agreement.py: its arguments checked before any model loads, its saved rounds re-read, its
rounds' order (shared with scripts/cuda's profiles)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from studies.arm_agreement import interleaved, latin_order, median_interval, ratio_rows

ROOT = Path(__file__).resolve().parent.parent
SAVED = ROOT / "docs" / "h200" / "agree-mlx-embedded-bursts-1-rounds.json"


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "studies.arm_agreement", *arguments]
    return subprocess.run(command, check=False, capture_output=True, text=True, cwd=ROOT)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [  # mlx_run.sh once asked for 256 rounds and got 240 without a word: the limit capped the run
        (("--rounds", "256", "--max-rounds", "240"), "--rounds 256 is more than --max-rounds 240: raise --max-rounds"),
        (("--max-rounds", "0"), "--max-rounds 0 measures nothing: give 1 or more"),
    ],
)
def test_round_counts_that_cannot_be_run_are_refused_in_one_line_before_measuring(
    arguments: tuple[str, ...], message: str
) -> None:
    result = run(*arguments)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1].endswith(message)
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_a_saved_run_is_summarised_as_it_was_measured() -> None:
    # The H200 printed "| speedup | 0.993 [0.978, 1.003] |" for this run (docs/measurements.md, mlx run 1).
    saved = json.loads(SAVED.read_text())
    result = run("--summarize", str(SAVED), "--rounds", "300")  # a re-reading measures nothing: counts unchecked
    assert result.returncode == 0, result.stderr
    assert f"{len(saved)} rounds" in result.stdout.splitlines()[0]
    row = next(line for line in result.stdout.splitlines() if line.startswith("| speedup |"))
    assert row.startswith("| speedup | 0.993 [0.978, 1.003] |")
    assert median_interval(ratio_rows(saved)["speedup"])[0] == pytest.approx(0.9929, abs=5e-5)


def test_each_harness_takes_every_place_equally_often() -> None:
    names = ["plugin plain", "bare plain", "control plain", "plugin sd", "bare sd"]
    orders = [latin_order(index, names) for index in range(2 * len(names))]  # a square and its reverse
    assert all(sorted(order) == sorted(names) for order in orders)
    for name in names:  # twice in each place over a square and its reverse
        assert Counter(order.index(name) for order in orders) == dict.fromkeys(range(len(names)), 2)


def test_interleaved_warms_every_harness_on_every_text_then_runs_the_rounds_in_order() -> None:
    calls: list[tuple[str, str]] = []

    def harness(name: str) -> Callable[[str], str]:
        return lambda text: calls.append((name, text)) or f"{name}:{text}"

    results = interleaved({"a": harness("a"), "b": harness("b")}, ["x", "y"], 3)
    assert calls[:4] == [("a", "x"), ("b", "x"), ("a", "y"), ("b", "y")]
    assert calls[4:] == [("a", "x"), ("b", "x"), ("b", "y"), ("a", "y"), ("b", "x"), ("a", "x")]
    assert results == {"a": ["a:x", "a:y", "a:x"], "b": ["b:x", "b:y", "b:x"]}
