"""The terminal report fits the terminal and ends with the answer, run in a real pseudo-terminal at 80, 100 and 120
columns (pytest sizes its output from the terminal, as a user's shell gives it, with no COLUMNS set)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from pty_run import run_in_a_pty

CLAIMS = """import pytest


@pytest.mark.claim(id="d", source="the write-up", quote="a draft model gives at most 1.3x")
@pytest.mark.speedup(max=1.3)
@pytest.mark.parametrize("category", ["code", "copy", "prose"])
def test_mlx_draft_model_gives_at_most_1_3x(specdec, category):
    specdec.compare(category=category)


@pytest.mark.speedup(min=1.0)
def test_sd_pays_off_on_unpredictable_text(specdec):
    specdec.compare(category="unpredictable")
"""
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def run_in_a_terminal(folder: Path, columns: int, *args: str) -> list[str]:
    """pytest in a pseudo-terminal ``columns`` wide; its output lines, colour codes removed."""
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES")}
    command = [sys.executable, "-m", "pytest", "test_claims.py", "--backend=simulated", "-p", "no:cacheprovider",
               "--specdec-backend-option", "speedup=1.5", *args]  # fmt: skip
    text = ANSI.sub("", run_in_a_pty(command, folder, env, columns))
    return [line.rstrip("\r") for line in text.split("\n")]


@pytest.mark.parametrize("columns", [80, 100, 120])
def test_every_line_fits_and_the_answer_comes_last(tmp_path: Path, columns: int) -> None:
    (tmp_path / "test_claims.py").write_text(CLAIMS, encoding="utf-8")
    lines = run_in_a_terminal(tmp_path, columns, "--specdec-notes=all")  # every note: each must fit too
    # A live progress line is rewritten in place (\r): each of its states is one line on the screen. Not ours to
    # wrap: pytest-benchmark's header, pytest's plugin list, and pytest's short summary lines (-r), which pytest
    # trims by a width it counts over their colour codes.
    theirs = ("benchmark: ", "plugins: ", "FAILED ", "ERROR ", "PASSED ")
    shown = [part for line in lines if not line.startswith(theirs) for part in line.split("\r")]
    too_wide = [line for line in shown if len(line) > columns]
    assert too_wide == [], f"{len(too_wide)} line(s) wider than {columns} columns: {too_wide}"
    # pytest prints its short test summary (-r, on by default for failures) after every plugin's summary.
    final = min(i for i, line in enumerate(lines) if re.search(r"=+ (short test summary info|.* in [\d.]+s) =+", line))
    verdicts = max(i for i, line in enumerate(lines) if "specdec verdicts" in line)
    notes = max(i for i, line in enumerate(lines) if "specdec notes" in line)
    assert notes < verdicts < final, "the notes come before the table"
    table = lines[verdicts + 1 : final]
    assert {"category", "speedup", "verdict"} <= set(table[0].split()), table[:3]
    assert table[-2].startswith("claim d (SD ≤ 1.3x): refuted on code, copy, prose"), table[-3:]
    assert table[-1].startswith("test_sd_pays_off_on_unpredictable_text (SD ≥ 1x): "), "one answer per claim, last"
    grouped = [line for line in lines[notes:verdicts] if line.startswith("[code, ")]
    assert grouped == ["[code, γ=3] test_mlx_draft_model_gives_at_most_1_3x[code]:"], "a row's notes under its label"
    said = "\n".join(lines[notes:verdicts])
    assert "test_claims.py::test_mlx_draft_model_gives_at_most_1_3x[code] [code]:" not in said, "the id said once"


def test_a_few_notes_per_row_and_at_most_15_lines_by_default_and_all_on_request(sample_run: object) -> None:
    from dataclasses import replace

    from pytest_specdec.render.report import terminal_notes

    record = replace(sample_run.comparisons[0], notes=tuple(f"note {i}" for i in range(7)))  # type: ignore[attr-defined]
    few = terminal_notes([record], 80, every=False)
    assert sum(line.startswith("  - ") for line in few) == 4
    assert few[-1] == "(4 more note(s) left out: -v or --specdec-notes=all shows them)"
    many = [replace(record, nodeid=f"test_x.py::test_{i}") for i in range(5)]
    capped = terminal_notes(many, 80, every=False)
    assert len(capped) <= 15
    assert capped[-1].startswith("(")
    assert "left out: -v or --specdec-notes=all" in capped[-1]
    assert len(terminal_notes(many, 80, every=False, room=8)) <= 8, "what the busy and written lines leave"
    labels = [line for line in capped if line.startswith("[")]
    assert len(labels) >= 3, "each row's first note before any row's second"
    long = replace(record, notes=("word " * 300,))
    cut = terminal_notes([long, *many[:2]], 80, every=False, room=12)
    assert all("word word" not in line for line in cut), "a note too long for the room is left out whole, not cut"
    assert cut[-1].startswith("(")
    assert int(cut[-1][1:].split()[0]) >= 1
    every = terminal_notes([record], 80)
    assert sum(line.startswith("  - ") for line in every) == 8, "the check's line and all seven"
    assert not any("left out" in line for line in every)


def test_output_samples_are_shown_as_text() -> None:
    from pytest_specdec.render.report import as_text

    assert as_text("sample 'ab\x07\x1b[2Jc'") == "sample 'ab\\x07\\x1b[2Jc'"
