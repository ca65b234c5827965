"""``specdec gate alert``: issues through gh for confirmed flips and, on request, erosion."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_specdec.render.exports import results_document
from pytest_specdec.store.baselines import BaselineStore
from pytest_specdec.store.files import dumps
from pytest_specdec.store.records import RunRecord

from .conftest import write_pyproject

GH = Path(__file__).resolve().parents[1] / "act" / "gh"


def alert(repo: Path, out: Path, backend: str, log: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "SPECDEC_GH_LOG": str(log), "SPECDEC_GH_STATE": str(repo / "gh-state.json")}
    command = [sys.executable, "-m", "pytest_specdec.cli", "gate", "alert", "--backend", backend, "--out", str(out),
               "--gh", str(GH)]  # fmt: skip
    return subprocess.run(command, cwd=repo, env=environment, capture_output=True, text=True, check=False)


@pytest.fixture
def measured(tmp_path: Path, sample_run: RunRecord) -> Path:
    """A measured leg whose flip was not confirmed by the re-run."""
    out = tmp_path / "out"
    (out / "confirm").mkdir(parents=True)
    (out / "status.json").write_text(json.dumps({"measurable": True, "reason": "measured"}))
    (out / "results.json").write_text(dumps(results_document(sample_run)))
    (out / "confirm" / "confirmed.json").write_text("[]\n")
    return out


def test_an_unconfirmed_flip_opens_nothing(tmp_path: Path, measured: Path) -> None:
    write_pyproject(tmp_path, "[project]\nname = 'x'\n")
    done = alert(tmp_path, measured, "mlx", tmp_path / "gh.jsonl")
    assert done.returncode == 0, done.stderr
    assert "1 flip(s) did not repeat on the re-run — no issue opened" in done.stdout
    assert not (tmp_path / "gh.jsonl").exists()


def test_erosion_opens_an_issue_when_asked_and_does_not_fail(
    tmp_path: Path, measured: Path, runner_state: Path, sample_run: RunRecord
) -> None:
    write_pyproject(tmp_path, "[tool.specdec.gate]\nalert-on-erosion = true\n")
    lines = [
        {"time": f"2026-11-0{day}", "backend": "mlx", "release": f"mlx-lm 0.3{day}", "key": "k [copy]",
         "nodeid": "b.py::test_d", "category": "copy", "claim_id": "d", "bounds": {"speedup max=1": "holds"},
         "speedup": {"estimate": value, "low": value * 0.97, "high": value * 1.03}}
        for day, value in enumerate((0.80, 0.90, 0.98), start=1)
    ]  # fmt: skip
    BaselineStore(runner_state, sample_run.machine_class).append_history(lines)
    done = alert(tmp_path, measured, "mlx", tmp_path / "gh.jsonl")
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in (tmp_path / "gh.jsonl").read_text().splitlines()]
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "create"]]
    title = calls[1][calls[1].index("--title") + 1]
    assert title == f"specdec: eroding — claim d [copy] on {sample_run.machine_class} (mlx)"
