"""Running a leg: what counts as measured, broken, unmeasurable, and what a re-run confirms."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_specdec.gate.legs import GateConfig, LegConfig
from pytest_specdec.gate.runs import confirm, crashes, measure
from pytest_specdec.render.exports import results_document
from pytest_specdec.store.files import dumps
from pytest_specdec.store.records import RunRecord

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="b" name="test_ok"/>
<testcase classname="b" name="test_refuted"><failure message="1.41x [1.3, 1.5] is outside the claimed max=1.3"/></testcase>
{extra}
</testsuite></testsuites>"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("", ""),
        (
            '<testcase classname="b" name="test_crash"><failure message="backend &apos;mlx&apos; failed while '
            'measuring: RuntimeError: Metal — no result was kept"/></testcase>',
            "1 test(s) could not measure (first: test_crash: backend 'mlx' failed while measuring",
        ),
        ('<testcase classname="b" name="test_setup"><error message="fixture broke"/></testcase>', "first: test_setup"),
        (  # refused by the backend (a draft that no longer loads, a plain arm that speculates): nothing measured
            '<testcase classname="b" name="test_refused"><failure message="the plain arm speculated (12 draft '
            'tokens) — no result was kept"/></testcase>',
            "1 test(s) could not measure (first: test_refused: the plain arm speculated",
        ),
    ],
)
def test_crashes_are_told_apart_from_refuted_claims(tmp_path: Path, extra: str, expected: str) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT.format(extra=extra))
    found = crashes(junit)
    assert (expected in found) if expected else found == ""


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
    assert "refused to re-run '--basetemp=/etc': not a test this leg collects" in capsys.readouterr().out
    assert [r.nodeid for r in confirmed] == ["--basetemp=/etc"], "never re-measured, so the flip stands"
    assert not (tmp_path / "confirm" / "results.json").exists(), "pytest was not run with it"


def test_a_flip_on_the_very_releases_of_its_baseline_is_the_machine_that_moved(
    tmp_path: Path, sample_run: RunRecord, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing was upgraded since the baseline was accepted: a flip that stands cannot be blamed on a release."""
    from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key
    from pytest_specdec.store.records import Provenance

    monkeypatch.chdir(tmp_path)
    (flip,) = sample_run.flips
    store = BaselineStore(tmp_path / "baselines", sample_run.machine_class)
    store.write("mlx", {baseline_key(flip): BaselineEntry(flip, Provenance.MEASURED, "2026-11-01")})
    results = tmp_path / "results.json"
    results.write_text(dumps(results_document(sample_run)))
    confirmed = confirm(GateConfig(), results, tmp_path / "confirm", sys.executable, [])
    assert confirmed == [], "not a release's doing"
    (listed,) = json.loads((tmp_path / "confirm" / "confirmed.json").read_text())
    assert listed["call"] == "the machine moved, not the release"
    assert "on the very releases its baseline was accepted on (mlx-lm 0.33.0)" in listed["line"]
