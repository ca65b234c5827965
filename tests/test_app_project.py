"""A throw-away app project of a user's own, with pytest-specdec installed from the wheel, run as they run it.

Its own ``pyproject.toml`` (a profile for llama-server only, on Gemma 3 270M), its own prompt file, two claims,
a prompt builder of its own and a unit test, in a git repository. Every command is what the user types; the
only thing this machine forces is where the wheel comes from (:mod:`wheel_env`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tomllib
from pathlib import Path

import pytest
from app_repository import app_pyproject
from wheel_env import run_line, wheel_venv

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]

MACHINE = "App-Machine"
PYPROJECT = app_pyproject('prompts = "sd-prompts.toml"', "max_tokens = 48")
PROMPTS = """\
[sets.app-code]
content = "code"
# text to copy: what upstream n-gram lookup drafts from (a 12-token lookup, nothing before 62 tokens of history)
prompts = [
    "Original:\\ndef handler(request):\\n    user = load_user(request)\\n    if user is None:\\n        return error(404)\\n    orders = load_orders(user)\\n    return render(user, orders)\\n\\nThe same function, copied exactly:\\n",
    "Original:\\ndef total(rows):\\n    result = 0\\n    for row in rows:\\n        result = result + row.price * row.count\\n    return result\\n\\nThe same function, copied exactly:\\n",
]
"""
CLAIMS = """\
import pytest

from myapp_prompts import support_prompts


@pytest.mark.speedup(min=1.5)
def test_prompt_lookup_pays_off_on_my_code(specdec):
    specdec.compare("app-code")


@pytest.mark.speedup(max=1.3)
def test_sd_stays_under_the_write_ups_1_3x_on_my_support_prompts(specdec):
    specdec.compare(prompts=support_prompts())
"""
BUILDER = """\
def support_prompts():
    line = "Dear customer, your parcel {} is late; we are sorry and send it today.\\n"
    return ["".join(line.format(n) for n in range(1, 9)) + "Dear customer, your parcel 9"]


def broken_prompts():
    table = {"code": ["x"]}
    return table["support"]
"""
BROKEN = """\
from myapp_prompts import broken_prompts


def test_uses_a_broken_builder(specdec):
    specdec.compare(prompts=broken_prompts())
"""
UNIT = "def test_addition():\n    assert 1 + 1 == 2\n"
FAST = "--specdec-min-trials=4 --specdec-max-trials=4"  # an interval of four pairs: wide


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return wheel_venv(tmp_path_factory.mktemp("app-wheel"))


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The app's repository: its files committed, nothing else."""
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    root = tmp_path / "myapp"
    (root / "tests").mkdir(parents=True)
    files = {".gitignore": "__pycache__/\n", "pyproject.toml": PYPROJECT, "sd-prompts.toml": PROMPTS,
             "tests/test_unit.py": UNIT, "tests/test_sd_claims.py": CLAIMS, "tests/myapp_prompts.py": BUILDER}  # fmt: skip
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    for line in ("git init -q", "git add -A", "git -c user.name=u -c user.email=u@x commit -qm app"):
        subprocess.run(line.split(), cwd=root, check=True)
    return root


def _runs(venv: Path, app: Path, line: str) -> subprocess.CompletedProcess[str]:
    done = run_line(line, venv, app)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done


def _accepted(app: Path) -> dict[str, object]:
    path = app / "baselines" / MACHINE / "llama-server.json"
    return json.loads(path.read_text(encoding="utf-8"))["entries"] if path.is_file() else {}


def test_the_apps_unit_tests_run_with_and_without_xdist(venv: Path, app: Path) -> None:
    for line in ("pytest tests/test_unit.py -p no:cacheprovider", "pytest tests/test_unit.py -n 2 -p no:cacheprovider"):
        done = _runs(venv, app, line)
        assert done.returncode == 0, line + "\n" + done.stdout[-3000:]
        assert "1 passed" in done.stdout
    status = subprocess.run(["git", "status", "--porcelain"], cwd=app, capture_output=True, text=True, check=True)
    assert status.stdout == "", "a session with no specdec test writes nothing"


def test_the_apps_claims_measure_its_prompts_and_its_baselines_follow_its_edits(venv: Path, app: Path) -> None:
    claims = f"pytest tests/test_sd_claims.py -p no:cacheprovider {FAST}"
    first = _runs(venv, app, f"{claims} --specdec-update-baselines --specdec-json=out/first.json")
    assert first.returncode == 0, first.stdout[-4000:]
    records = json.loads((app / "out" / "first.json").read_text())["comparisons"]
    assert [r["scope"]["prompt_set"] for r in records] == ["app-code", "inline"]
    # Four pairs decide some nights and not others (CI once measured the support set at 1.02x [1.01, 1.02]):
    # whatever they decided, only the decided results are accepted without --specdec-accept-inconclusive.
    undecided = [r for r in records if r["judgement"]["conclusion"] == "inconclusive"]
    assert len(_accepted(app)) == len(records) - len(undecided), "inconclusive is not accepted on its own"
    accept = _runs(venv, app, f"{claims} --specdec-update-baselines --specdec-accept-inconclusive")
    assert accept.returncode == 0, accept.stdout[-4000:]
    keys = list(_accepted(app))
    assert len(keys) == 2
    (code,) = [r for r in records if r["scope"]["prompt_set"] == "app-code"]
    assert any(f"prompts=app-code#{code['scope']['prompt_digest'][:12]}" in key for key in keys), keys
    # git: after two runs only the accepted file is there to commit (candidates and history ignore themselves)
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=app, capture_output=True,
                            text=True, check=True).stdout.split("\n")  # fmt: skip
    assert sorted(line for line in status if line and "out/" not in line) == [
        f"?? baselines/{MACHINE}/llama-server.json",
        f"?? baselines/{MACHINE}/llama-server.samples.jsonl",
    ]
    # An edited prompt file is a new key that names the accepted one it replaces.
    (app / "sd-prompts.toml").write_text(PROMPTS.replace("error(404)", "error(410)"), encoding="utf-8")
    edited = _runs(venv, app, f"{claims} -k my_code")
    assert edited.returncode == 0, edited.stdout[-4000:]
    assert "it differs from the accepted " in edited.stdout
    assert "prompts=app-code#" in edited.stdout
    # An option that changes the SD arm, against the default it was accepted with.
    (app / "sd-prompts.toml").write_text(PROMPTS, encoding="utf-8")
    option = _runs(venv, app, f"{claims} -k my_code --specdec-backend-option spec_type=ngram-map-k")
    assert option.returncode == 0, option.stdout[-4000:]
    assert "option changed: spec_type (unset) → ngram-map-k" in option.stdout.replace("\n", " ")


def test_a_broken_prompt_builder_fails_with_its_own_traceback(venv: Path, app: Path) -> None:
    (app / "tests" / "test_broken.py").write_text(BROKEN, encoding="utf-8")
    done = run_line("pytest tests/test_broken.py -p no:cacheprovider", venv, app)
    assert done.returncode == 1, done.stdout[-3000:]
    assert "myapp_prompts.py:8: KeyError" in done.stdout
    assert "backend 'llama-server' failed" not in done.stdout


def test_sigterm_mid_comparison_keeps_an_interrupted_history_line(venv: Path, app: Path) -> None:
    env = {**os.environ, "PATH": f"{venv}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYTHONPATH", None)
    command = ["pytest", "tests/test_sd_claims.py", "-k", "my_code", "-p", "no:cacheprovider",
               "--specdec-min-trials=40", "--specdec-max-trials=40"]  # fmt: skip
    with subprocess.Popen(command, cwd=app, env=env, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        for line in child.stdout:  # off a terminal the live line is printed at pairs 1, 5, 10 …
            if "specdec code: pair 5/40" in line:
                child.send_signal(signal.SIGTERM)
                break
        rest = child.communicate(timeout=300)[0]
    assert child.returncode == 2, rest[-3000:]
    history = app / "baselines" / "history" / f"{MACHINE}.jsonl"
    (line,) = [json.loads(text) for text in history.read_text(encoding="utf-8").splitlines()]
    assert line["interrupted"] is True
    assert 5 <= line["speedup"]["n"] < 40
    assert _accepted(app) == {}


def test_gate_init_writes_the_apps_gate_and_its_leg_runs_the_apps_claims_only(venv: Path, app: Path) -> None:
    init = _runs(venv, app, "pytest-specdec gate init --write")
    assert init.returncode == 0, init.stdout[-3000:]
    gate = tomllib.loads((app / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["specdec"]["gate"]
    assert gate["legs"]["llama-server"] == {"required": True, "profile": "mine", "targets": ["tests/test_sd_claims.py"]}
    leg = _runs(venv, app, f"pytest-specdec gate measure --backend llama-server --out out/leg --pytest-args '{FAST}'")
    assert "specdec gate: llama-server: measured" in leg.stdout, leg.stdout[-3000:]
    results = json.loads((app / "out" / "leg" / "results.json").read_text(encoding="utf-8"))
    assert sorted(r["nodeid"].split("::")[-1] for r in results["comparisons"]) == [
        "test_prompt_lookup_pays_off_on_my_code",
        "test_sd_stays_under_the_write_ups_1_3x_on_my_support_prompts",
    ]
    assert "test_addition" not in (app / "out" / "leg" / "pytest.log").read_text(encoding="utf-8")
