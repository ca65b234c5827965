"""The step summary: a leg's state, the night's release changes, erosion and its plot."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from pytest_specdec.gate.runs import Leg
from pytest_specdec.gate.step_summary import leg_summary
from pytest_specdec.store.baselines import BaselineStore
from pytest_specdec.store.nights import Night


def history(estimates: list[float]) -> list[Night]:
    return [
        Night.of_line({"time": f"2026-11-{day:02d}", "machine_class": "M", "backend": "mlx", "release": f"mlx-lm 0.3{day}",
         "key": "k [copy]", "nodeid": "b.py::test_d", "category": "copy", "claim_id": "d", "verdict": "holds",
         "bounds": {"speedup max=1": "holds"},
         "speedup": {"estimate": value, "low": value * 0.97, "high": value * 1.03}})
        for day, value in enumerate(estimates, start=1)
    ]  # fmt: skip


def test_required_and_optional_legs_that_cannot_be_measured_say_so(tmp_path: Path) -> None:
    down = Leg("ollama", False, "not measurable here: server down")
    assert "**FAILED — required leg not measurable**: not measurable here: server down" in leg_summary(
        "ollama", tmp_path, tmp_path, "M", replace(down, required=True)
    )
    assert "**warning — optional leg not measurable**" in leg_summary("ollama", tmp_path, tmp_path, "M", down)


def test_release_changes_and_erosion_across_the_repository_and_the_runner(tmp_path: Path, runner_state: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "release-changes.json").write_text(json.dumps(["mlx-lm 0.32 → 0.33"]))
    lines = history([0.80, 0.90, 0.98])
    BaselineStore(tmp_path / "baselines", "M").append_history(lines[:1])  # accepted, committed
    BaselineStore(runner_state, "M").append_history(lines)  # the nights, kept by the runner (one repeated)
    text = leg_summary("mlx", out, tmp_path / "baselines", "M", Leg("mlx", True, "measured", pytest_exit=0))
    assert "- mlx-lm 0.32 → 0.33" in text
    assert "- claim d [copy]: 0.80x → 0.90x → 0.98x against speedup max=1" in text
    assert (out / "history.png").is_file()
