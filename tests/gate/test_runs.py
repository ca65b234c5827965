"""Running a leg: what counts as measured, broken, unmeasurable, and what a re-run confirms."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_specdec.gate.findings import LegCause, State
from pytest_specdec.gate.legs import GateConfig, LegConfig
from pytest_specdec.gate.runs import LegFact, confirm, leg_facts, measure
from pytest_specdec.render.exports import results_document
from pytest_specdec.store.files import dumps, load_run
from pytest_specdec.store.records import RunRecord, Unmeasured

SIM = ("--backend=simulated", "-p", "no:cacheprovider")


def test_the_plugin_says_which_tests_kept_nothing_and_why_and_a_refuted_claim_is_none_of_them(
    pytester: pytest.Pytester,
) -> None:
    """What the gate reads as crashed or not measured is written by the plugin as it happens, typed."""
    pytester.makepyfile(
        "import pytest\n\n"
        "@pytest.fixture\ndef broken():\n    raise RuntimeError('fixture broke')\n\n"
        "@pytest.mark.speedup(max=1.1)\ndef test_refuted(specdec):\n    specdec.compare('code')\n\n"
        "def test_refused(specdec):\n    specdec.compare('code', top_p=0.9)\n\n"
        "def test_setup(specdec, broken):\n    specdec.compare('code')\n"
    )
    result = pytester.runpytest(*SIM, "--specdec-json=run.json", "--specdec-backend-option", "speedup=1.5")
    result.assert_outcomes(failed=2, errors=1)
    run = load_run(pytester.path / "run.json")
    said = {(t.nodeid.rsplit("::", 1)[-1], t.kind) for t in run.unmeasured}
    assert said == {("test_refused", Unmeasured.REFUSED), ("test_setup", Unmeasured.CRASHED)}
    (refused,) = [t for t in run.unmeasured if t.kind is Unmeasured.REFUSED]
    assert refused.line.startswith("compare(): top_p=0.9 cuts nothing at temperature 0")
    facts = leg_facts(run, cut_short=False)
    assert [f.state for f in facts] == [State.CRASHED, State.NOT_MEASURED]
    assert facts[0].line == "1 test(s) could not measure (first: test_setup: errored: RuntimeError: fixture broke)"
    assert facts[1].line.startswith("1 test(s) measured nothing (first: test_refused: compare(): top_p=0.9")


def test_a_run_with_nothing_wrong_has_no_leg_fact_and_one_cut_short_has_its_own(sample_run: RunRecord) -> None:
    assert leg_facts(sample_run, cut_short=False) == ()
    (fact,) = leg_facts(sample_run, cut_short=True)
    assert fact == LegFact(
        State.CUT_SHORT, "the run was cut short (interrupted): not every claim measured", LegCause.INTERRUPTED
    )


def test_an_optional_leg_on_a_refused_profile_is_unmeasurable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNNER_ENVIRONMENT", "self-hosted")
    leg = measure(GateConfig(), "mlx", tmp_path, sys.executable, [])
    assert not leg.measurable
    assert not leg.fails_gate, "an optional leg warns"
    assert "synthetic 'embedded' pair on a self-hosted runner" in leg.reason
    required = measure(GateConfig(legs={"mlx": LegConfig("mlx", required=True)}), "mlx", tmp_path, sys.executable, [])
    assert required.fails_gate


def test_a_re_run_that_measures_nothing_leaves_the_flip_standing(tmp_path: Path, sample_run: RunRecord) -> None:
    results = tmp_path / "results.json"
    results.write_text(dumps(results_document(sample_run)))
    (flip,) = sample_run.flips
    confirmed = confirm(GateConfig(), results, tmp_path / "confirm", sys.executable, [])
    assert [(r.nodeid, r.category) for r in confirmed] == [(flip.nodeid, flip.category)]


def test_a_node_id_from_results_that_the_leg_does_not_collect_is_never_passed_to_pytest(
    tmp_path: Path, sample_run: RunRecord, capsys: pytest.CaptureFixture[str]
) -> None:
    """results.json comes from the measuring job: an id that is an option (or names nothing) is refused."""
    from dataclasses import replace

    flip = sample_run.flips[0]
    evil = replace(sample_run, comparisons=(replace(flip, nodeid="--basetemp=/etc"),))
    results = tmp_path / "results.json"
    results.write_text(dumps(results_document(evil)))
    confirmed = confirm(GateConfig(), results, tmp_path / "confirm", sys.executable, [])
    assert "refused to run '--basetemp=/etc' again: not a test this leg collects" in capsys.readouterr().out
    assert [r.nodeid for r in confirmed] == ["--basetemp=/etc"], "never re-measured, so the flip stands"
    assert not (tmp_path / "confirm" / "results.json").exists(), "pytest was not run with it"


@pytest.mark.parametrize(
    "case",
    [
        "flipped again",  # the machine moved: told, not red
        "not re-measured",  # nothing re-measured it: it stands, whatever the releases
        "acceptance flipped again",  # acceptance does not move with the machine's speed: it stands
    ],
)
def test_a_flip_that_repeats_on_the_very_releases_of_its_baseline_is_the_machine_that_moved(
    tmp_path: Path, sample_run: RunRecord, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Nothing was upgraded since the baseline was accepted: a flip that repeats cannot be blamed on a release."""
    from dataclasses import replace

    from pytest_specdec.gate import runs
    from pytest_specdec.stats import Verdict
    from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key
    from pytest_specdec.store.records import BoundRecord, Provenance

    monkeypatch.chdir(tmp_path)
    (flip,) = sample_run.flips
    accepted = flip
    stands = case != "flipped again"
    if case.startswith("acceptance"):
        bounds = flip.judgement.bounds
        accepted = replace(flip, judgement=replace(flip.judgement, bounds=(
            *bounds, BoundRecord("acceptance", "min", 0.6, Verdict.HOLDS))))  # fmt: skip
        flip = replace(flip, judgement=replace(flip.judgement, bounds=(
            *bounds, BoundRecord("acceptance", "min", 0.6, Verdict.REFUTED))))  # fmt: skip
    store = BaselineStore(tmp_path / "baselines", sample_run.machine_class)
    store.write("mlx", {baseline_key(accepted): BaselineEntry(accepted, Provenance.MEASURED, "2026-11-01")})
    run = replace(sample_run, comparisons=(*sample_run.comparisons[:-1], flip))
    again = case.endswith("flipped again")
    monkeypatch.setattr(runs, "_rerun", lambda _leg, first, *_: (list(first), []) if again else ([], list(first)))
    results = tmp_path / "results.json"
    results.write_text(dumps(results_document(run)))
    confirmed = confirm(GateConfig(), results, tmp_path / "confirm", sys.executable, [])
    assert bool(confirmed) is stands
    (listed,) = json.loads((tmp_path / "confirm" / "confirmed.json").read_text())
    assert listed["call"] == ("re-run" if stands else "the machine moved, not the release")
    if not stands:
        assert "on the very releases its baseline was accepted on (mlx-lm 0.33.0)" in listed["line"]
    elif not again:
        assert listed["line"] == "the re-run did not measure it"


def test_when_last_nights_environment_could_not_be_rebuilt_the_flip_is_re_run_and_says_why(
    tmp_path: Path, sample_run: RunRecord, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_specdec.gate import runs

    monkeypatch.chdir(tmp_path)
    why = "last night's environment cannot be rebuilt from baselines/M/gate-lock.txt (pip install … failed)"
    (tmp_path / "old-env.txt").write_text(why + "\n")
    monkeypatch.setattr(runs, "_rerun", lambda _leg, first, *_: (list(first), []))
    results = tmp_path / "results.json"
    results.write_text(dumps(results_document(sample_run)))
    confirmed = confirm(GateConfig(), results, tmp_path / "confirm", sys.executable, [])
    assert [r.category for r in confirmed] == ["code"], "flipped again on the upgraded machine: it stands"
    (listed,) = json.loads((tmp_path / "confirm" / "confirmed.json").read_text())
    assert listed["line"] == f"flipped again on a re-run ({why})"
    assert f"specdec gate: {why} — the flips are re-run on the upgraded machine instead" in capsys.readouterr().out


LEG_PYTEST = """
import pathlib, signal, sys, time
folder = pathlib.Path(sys.argv[1])
def stop(*_):
    (folder / "stopped").write_text("its teardown ran")  # where a pytest stops its servers
    sys.exit(2)
signal.signal(signal.SIGTERM, stop)
(folder / "started").write_text("measuring")
while True:
    signal.pause()
"""
GATE_STEP = """
import pathlib, sys
from pytest_specdec.backends.server_process import interrupt_on_sigterm
from pytest_specdec.gate.runs import _run
interrupt_on_sigterm()
folder = pathlib.Path(sys.argv[1])
try:
    _run([sys.executable, "-c", sys.argv[2], str(folder)], folder)
except KeyboardInterrupt:
    sys.exit(130)
"""


def test_a_gate_step_told_to_stop_lets_its_legs_pytest_stop_its_servers(tmp_path: Path) -> None:
    """SIGTERM to the gate step alone (a CI cancel, `kill`) is forwarded to the leg's pytest, which then stops as it
    would stop itself — never killed at once, which would leave its servers to the next night's reaper."""
    import os
    import signal
    import subprocess
    import time

    step = subprocess.Popen([sys.executable, "-c", GATE_STEP, str(tmp_path), LEG_PYTEST])
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists() and step.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # polling for the child's file, a condition
    assert (tmp_path / "started").exists()
    os.kill(step.pid, signal.SIGTERM)
    assert step.wait(timeout=60) == 130
    assert (tmp_path / "stopped").read_text() == "its teardown ran", "the leg's pytest got SIGTERM, not SIGKILL"
