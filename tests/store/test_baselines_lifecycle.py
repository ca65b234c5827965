"""The accept workflow end to end, in the style of pytest-regressions' lifecycle tests.

Each test drives real pytest runs (pytester) on the simulated backend, whose
release and true speedup are options, so a "new backend release" that changes the
conclusion can be injected.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.hardware import machine_class
from pytest_specdec.store.records import MEASUREMENT_PROTOCOL

SIM = ("--backend=simulated", "-p", "no:cacheprovider")
MACHINE = "Test-Machine-A"


def option(key: str, value: object) -> tuple[str, str]:
    return ("--specdec-backend-option", f"{key}={value}")


def claim_file(pytester: pytest.Pytester, bounds: str = "max=1.3", name: str = "test_claim") -> None:
    pytester.makepyfile(
        **{
            name: "import pytest\n\n"
            f"@pytest.mark.speedup({bounds})\n"
            "def test_sd(specdec):\n"
            "    specdec.compare(category='code')\n"
        }
    )


def run(pytester: pytest.Pytester, *args: str, speedup: float = 1.0, release: str = "1.0") -> pytest.RunResult:
    return pytester.runpytest(*SIM, *option("speedup", speedup), *option("release", release), *args)


def baseline_path(pytester: pytest.Pytester, machine: str = MACHINE) -> Path:
    return pytester.path / "baselines" / machine / "simulated.json"


@pytest.fixture(autouse=True)
def _machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", MACHINE)


def test_first_run_writes_a_candidate_then_accept_then_reconfirm(pytester: pytest.Pytester) -> None:
    claim_file(pytester)
    first = run(pytester)
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(
        [
            f"*not yet gated: no accepted baseline for test_claim.py::test_sd [[]code, γ=3] on {MACHINE}"
            " — accept with --specdec-update-baselines*",
            f"*1 result(s) without a baseline written as candidates to */candidates/{MACHINE}/simulated.json*",
        ]
    )
    assert not baseline_path(pytester).exists()
    candidate = pytester.path / "baselines" / "candidates" / MACHINE / "simulated.json"
    assert json.loads(candidate.read_text())["entries"]

    accept = run(pytester, "--specdec-update-baselines")
    accept.assert_outcomes(passed=1)
    accept.stdout.fnmatch_lines([f"*accepted 1 baseline(s) for {MACHINE}/simulated: wrote *"])
    stored = json.loads(baseline_path(pytester).read_text())
    ((key, entry),) = stored["entries"].items()
    assert stored["schema_version"] == 3
    assert entry["provenance"] == "measured"
    assert entry["result"]["release"] == "simulated 1.0"
    frame = 8  # {, backend, details, "entries": {, }, machine_class, schema_version, }
    assert len(baseline_path(pytester).read_text().splitlines()) - frame <= 40, "what a reviewer reads of one result"
    assert stored["details"] == "simulated.samples.jsonl"
    (details,) = [json.loads(line) for line in baseline_path(pytester).with_name(stored["details"]).open()]
    assert details["key"] == key
    assert len(details["result"]["samples"]) == entry["result"]["trials"] >= 6
    assert details["commit_info"]["id"]
    assert details["machine_info"]["python_version"]
    assert not candidate.exists(), "accepted candidates are removed"
    assert not candidate.with_name("simulated.samples.jsonl").exists(), "and their details"

    same = run(pytester)
    same.assert_outcomes(passed=1)
    same.stdout.fnmatch_lines(["*holds*unchanged*"])
    newer = run(pytester, release="1.1")
    newer.assert_outcomes(passed=1)
    newer.stdout.fnmatch_lines(["*re-confirmed on simulated 1.1 (baseline simulated 1.0: *x [[]*])*"])
    history = (pytester.path / "baselines" / "history" / f"{MACHINE}.jsonl").read_text().splitlines()
    assert [json.loads(line)["accepted"] for line in history] == [False, True, False, False]


def test_flip_with_a_new_release_fails_naming_both_releases(pytester: pytest.Pytester) -> None:
    claim_file(pytester)
    run(pytester, "--specdec-update-baselines", speedup=1.0).assert_outcomes(passed=1)
    before = baseline_path(pytester).read_bytes()
    flipped = run(pytester, speedup=1.6, release="2.0")
    flipped.assert_outcomes(failed=1)
    flipped.stdout.fnmatch_lines(
        [
            f"*CONCLUSION CHANGED on {MACHINE}: simulated 1.0 → 2.0: speedup ?.??x [[]*] → 1.[56]?x [[]*]; "
            "claim max=1.3 now refuted*accept it with --specdec-update-baselines*",
            "*refuted (FLIPPED)*flip*",
        ]
    )
    assert baseline_path(pytester).read_bytes() == before, "a flip never rewrites the baseline"
    accepted = run(pytester, "--specdec-update-baselines", speedup=1.6, release="2.0")
    accepted.assert_outcomes(failed=1)  # the claim itself is refuted, which still fails
    accepted.stdout.no_fnmatch_line("*CONCLUSION CHANGED*")
    assert (
        json.loads(baseline_path(pytester).read_text())["entries"].popitem()[1]["result"]["judgement"]["conclusion"]
        == "refuted"
    )


def test_a_baseline_written_before_the_protocol_field_is_re_baselined(pytester: pytest.Pytester) -> None:
    """Migration: a stored result without ``protocol`` was measured under protocol 1."""
    claim_file(pytester)
    run(pytester, "--specdec-update-baselines", speedup=1.0).assert_outcomes(passed=1)
    stored = json.loads(baseline_path(pytester).read_text())
    for entry in stored["entries"].values():
        del entry["result"]["protocol"]  # as every file written before the field existed
    baseline_path(pytester).write_text(json.dumps(stored, sort_keys=True, indent=2) + "\n")
    before = baseline_path(pytester).read_bytes()
    newer = run(pytester, speedup=1.6, release="2.0")
    newer.assert_outcomes(failed=1)  # the claim is refuted; the baseline comparison adds nothing
    newer.stdout.no_fnmatch_line("*CONCLUSION CHANGED*")
    newer.stdout.fnmatch_lines(
        [
            f"*re-baseline: the baseline * was measured under measurement protocol 1, this result under {MEASUREMENT_PROTOCOL}*"
        ]
    )
    assert baseline_path(pytester).read_bytes() == before, "a re-baseline candidate never rewrites the baseline"
    assert (pytester.path / "baselines" / "candidates" / MACHINE / "simulated.json").is_file()


def test_drift_is_reported_and_fails_only_when_asked(pytester: pytest.Pytester) -> None:
    claim_file(pytester, "min=1.1")
    run(pytester, "--specdec-update-baselines", speedup=1.3).assert_outcomes(passed=1)
    drifted = run(pytester, speedup=1.5)
    drifted.assert_outcomes(passed=1)
    assert drifted.ret == 0
    drifted.stdout.fnmatch_lines(
        ["*speedup drifted +1?.?% against the baseline*false-discovery rate controlled*the conclusion is unchanged*"]
    )
    strict = run(pytester, "--specdec-fail-on-drift", speedup=1.5)
    strict.assert_outcomes(passed=1)
    assert strict.ret == pytest.ExitCode.TESTS_FAILED, "drift fails the session, not one test"
    strict.stdout.fnmatch_lines(["ERROR: *speedup drifted*(--specdec-fail-on-drift)*"])


def test_baseline_of_another_machine_class_is_never_used(pytester: pytest.Pytester) -> None:
    claim_file(pytester)
    run(pytester, "--specdec-update-baselines").assert_outcomes(passed=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECDEC_MACHINE_CLASS", "Test-Machine-B")
        elsewhere = run(pytester, speedup=1.6, release="2.0")
    elsewhere.assert_outcomes(failed=1)
    elsewhere.stdout.no_fnmatch_line("*CONCLUSION CHANGED*")
    elsewhere.stdout.fnmatch_lines(["*not yet gated: no accepted baseline for * on Test-Machine-B*"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "is not valid JSON"),
        ('{"schema_version": 99, "entries": {}}', "schema_version 99 is not one this pytest-specdec"),
        (
            '{"schema_version": 1, "machine_class": "Test-Machine-A", "backend": "simulated", "entries": {"k": {}}}',
            "field 'entries.k.result': field required",
        ),
    ],
    ids=["corrupt", "unknown-schema", "missing-field"],
)
def test_bad_baseline_files_are_refused_untouched(pytester: pytest.Pytester, content: str, message: str) -> None:
    claim_file(pytester)
    path = baseline_path(pytester)
    path.parent.mkdir(parents=True)
    path.write_text(content)
    result = run(pytester, "--specdec-update-baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {path}*{message}*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert path.read_text() == content
    assert not list((pytester.path / "baselines" / "history").glob("*.jsonl")), "no history line kept"


def test_a_baselines_path_under_a_file_is_one_line_before_any_pair(pytester: pytest.Pytester) -> None:
    """Found at start, not after minutes of measuring: no pair runs, the file is untouched."""
    claim_file(pytester)
    (pytester.path / "blocked").write_text("a file where the baselines folder should be")
    result = run(pytester, "--specdec-baselines=blocked/baselines")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--specdec-baselines */blocked/baselines: */blocked is a file, not a folder — *"])
    assert "Traceback" not in result.stderr.str()
    assert "passed" not in result.stdout.str(), "no test ran"
    assert (pytester.path / "blocked").read_text().startswith("a file")


def test_interrupted_run_keeps_its_finished_comparisons_and_accepts_nothing(pytester: pytest.Pytester) -> None:
    claim_file(pytester)
    run(pytester, "--specdec-update-baselines").assert_outcomes(passed=1)
    before = baseline_path(pytester).read_bytes()
    history = pytester.path / "baselines" / "history" / f"{MACHINE}.jsonl"
    lines_before = history.read_text()
    pytester.makepyfile(
        test_zz_interrupt="def test_stop():\n    raise KeyboardInterrupt\n",
    )
    result = pytester.runpytest_subprocess(
        *SIM, *option("speedup", 1.6), *option("release", "2.0"), "--specdec-update-baselines"
    )
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*interrupted: kept the 1 finished comparison(s) as history lines in *, marked "
                                 "interrupted (never accepted*no baseline or candidate was written"])  # fmt: skip
    assert baseline_path(pytester).read_bytes() == before, "nothing accepted"
    added = history.read_text().removeprefix(lines_before).splitlines()
    assert [json.loads(line)["interrupted"] for line in added] == [True]


def test_sigterm_mid_comparison_keeps_its_pairs_as_an_interrupted_history_line(pytester: pytest.Pytester) -> None:
    """A CI job's limit (SIGTERM) during the pairs: the comparison keeps what it measured, with its interval, as
    an interrupted history line; the accepted file is untouched and nothing becomes a candidate."""
    claim_file(pytester)
    run(pytester, "--specdec-update-baselines").assert_outcomes(passed=1)
    before = baseline_path(pytester).read_bytes()
    history = pytester.path / "baselines" / "history" / f"{MACHINE}.jsonl"
    lines_before = history.read_text()
    command = [sys.executable, "-m", "pytest", "test_claim.py", *SIM, *option("speedup", 1.0), *option("release", "1.0"),
               "--specdec-min-trials=20000", "--specdec-max-trials=20000", "--specdec-precision=0.0001"]  # fmt: skip
    with subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        shown = []
        for line in child.stdout:  # the live line (every 1000th pair off a terminal) says the pairs are under way
            shown.append(line)
            if "specdec code: pair 1000/20000" in line:
                child.send_signal(signal.SIGTERM)
                break
        rest = child.communicate(timeout=120)[0]
    assert child.returncode == pytest.ExitCode.INTERRUPTED, "".join(shown) + rest
    assert "Traceback" not in rest
    assert "interrupted: kept the 1 finished comparison(s) as history lines" in rest
    assert baseline_path(pytester).read_bytes() == before, "nothing accepted"
    assert not (pytester.path / "baselines" / "candidates").exists() or not any(
        (pytester.path / "baselines" / "candidates").glob("*.json")
    )
    (added,) = [json.loads(line) for line in history.read_text().removeprefix(lines_before).splitlines()]
    assert added["interrupted"] is True
    assert 1000 <= added["speedup"]["n"] < 20000, "the pairs measured before the signal, not a whole comparison"
    assert added["speedup"]["low"] < 1.0 < added["speedup"]["high"]


def test_a_time_budget_is_shared_by_the_tests_and_stops_each_at_a_look(pytester: pytest.Pytester) -> None:
    measure = "def test_sd(specdec):\n    specdec.compare(category='code')\n"  # no bound: only precision stops it
    pytester.makepyfile(test_one=measure, test_two=measure)
    result = run(pytester, "--specdec-time-budget=2s", "--specdec-min-trials=16", "--specdec-max-trials=1024",
                 "--specdec-precision=0.0001", "--specdec-json=run.json")  # fmt: skip
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["specdec: time budget 2 s for 2 test(s), shared in turns*"])
    records = json.loads((pytester.path / "run.json").read_text())["comparisons"]
    for record in records:
        (said,) = [n for n in record["notes"] if "time budget" in n]
        assert said.startswith("stopped at look ")
        assert said.endswith("(--specdec-time-budget)")
        assert 16 <= record["speedup"]["n"] < 1024


def test_stale_baselines_are_reported_when_the_whole_suite_ran(pytester: pytest.Pytester) -> None:
    claim_file(pytester, name="test_one")
    claim_file(pytester, name="test_two")
    run(pytester, "--specdec-update-baselines").assert_outcomes(passed=2)
    (pytester.path / "test_two.py").unlink()
    subset = run(pytester, "test_one.py")
    subset.stdout.no_fnmatch_line("*stale baseline*")
    whole = run(pytester)
    whole.assert_outcomes(passed=1)
    whole.stdout.fnmatch_lines(["*stale baseline: test_two.py::test_sd [[]code*its test no longer exists*"])
    deselected = run(pytester, "-k", "nothing_matches_this or test_sd")
    deselected.stdout.fnmatch_lines(["*stale baseline*"])  # nothing was deselected


def test_current_machine_class_is_detected_without_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECDEC_MACHINE_CLASS")
    detected = machine_class()
    assert detected
    assert detected != MACHINE
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", "Apple M1 Max 64GB")
    assert machine_class() == "Apple-M1-Max-64GB"


def test_an_inconclusive_result_is_never_accepted_unless_asked(pytester: pytest.Pytester) -> None:
    """An inconclusive baseline can never flip, so every later run would read "unchanged" against it: an accepting
    run keeps it a candidate and says why; ``--specdec-accept-inconclusive`` accepts it on purpose."""
    claim_file(pytester)
    noisy = (*option("noise", 0.6), "--specdec-max-trials=4")
    held = run(pytester, "--specdec-update-baselines", *noisy, speedup=1.3)
    held.assert_outcomes(passed=1, warnings=1)
    held.stdout.fnmatch_lines(["*not accepted — inconclusive (*) can never flip*--specdec-accept-inconclusive*"])
    assert not baseline_path(pytester).exists()
    candidate = pytester.path / "baselines" / "candidates" / MACHINE / "simulated.json"
    assert json.loads(candidate.read_text())["entries"]
    history = (pytester.path / "baselines" / "history" / f"{MACHINE}.jsonl").read_text().splitlines()
    assert [json.loads(line)["accepted"] for line in history] == [False], "history never says it was accepted"
    asked = run(pytester, "--specdec-update-baselines", "--specdec-accept-inconclusive", *noisy, speedup=1.3)
    asked.stdout.fnmatch_lines([f"*accepted 1 baseline(s) for {MACHINE}/simulated: wrote *"])
    (entry,) = json.loads(baseline_path(pytester).read_text())["entries"].values()
    assert entry["result"]["judgement"]["conclusion"] == "inconclusive"


def test_arm_options_are_compared_only_where_the_baseline_kept_them(make_record: Any) -> None:
    from dataclasses import replace

    from pytest_specdec.store.baselines import BaselineEntry, compare_with_baseline
    from pytest_specdec.store.records import Change, Provenance

    old = make_record("code", 1.5, "holds", None)
    entry = BaselineEntry(
        replace(old, scope={**old.scope, "arm_options": "ngram=2"}), Provenance.MEASURED, "2026-12-01"
    )
    for scope, change in (({"arm_options": "ngram=3"}, Change.REBASELINE), ({"arm_options": "ngram=2"}, None),
                          ({}, None)):  # fmt: skip
        check = compare_with_baseline(replace(old, scope={**old.scope, **scope}), entry, MACHINE)
        assert (check.change is Change.REBASELINE) == (change is Change.REBASELINE), scope
    unkept = BaselineEntry(old, Provenance.MEASURED, "2026-12-01")  # measured before options were kept
    assert compare_with_baseline(replace(old, scope={"arm_options": "ngram=3"}), unkept, MACHINE).change is not (
        Change.REBASELINE
    )
