"""Running a leg: what counts as measured, broken, unmeasurable, and what a re-run confirms."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from pytest_specdec.gate.legs import GateConfig, LegConfig
from pytest_specdec.gate.runs import confirm, crashes, measure, refusals
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
    ],
)
def test_crashes_are_told_apart_from_refuted_claims(tmp_path: Path, extra: str, expected: str) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT.format(extra=extra))
    found = crashes(junit)
    assert (expected in found) if expected else found == ""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("", ""),
        (  # refused by the backend (a draft that no longer loads, a plain arm that speculates): nothing measured
            '<testcase classname="b" name="test_refused"><failure message="Failed: the plain arm speculated (12 '
            'draft tokens) — no result was kept"/></testcase>',
            "1 test(s) measured nothing (first: test_refused: Failed: the plain arm speculated",
        ),
        (  # its own arguments refused (a release of the plugin that checks more): no longer gated, so said
            '<testcase classname="b" name="test_args"><failure message="pytest.UsageError: compare(): top_p=0.9 '
            'cuts nothing at temperature 0"/></testcase>',
            "1 test(s) measured nothing (first: test_args: pytest.UsageError: compare(): top_p=0.9",
        ),
        (  # a backend that failed is the other finding, not this one
            '<testcase classname="b" name="test_crash"><failure message="backend &apos;mlx&apos; failed while '
            'measuring: RuntimeError: Metal — no result was kept"/></testcase>',
            "",
        ),
    ],
)
def test_claims_that_measured_nothing_are_told_apart_from_refuted_ones_and_from_crashes(
    tmp_path: Path, extra: str, expected: str
) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT.format(extra=extra))
    found = refusals(junit)
    assert (expected in found) if expected else found == ""
    assert crashes(junit) == "" or "failed while measuring" in extra


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
