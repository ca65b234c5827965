"""A night's budget: the expected duration from measured timings, and claims dropped to fit — named."""

from __future__ import annotations

from pathlib import Path

from pytest_specdec.gate.budget import junit_key, plan, read_last_measured, read_timings, record_timings

IDS = [f"benchmarks/test_claim_{c}.py::test_x[code]" for c in "abcd"]


def test_the_expected_duration_comes_from_the_timings_of_earlier_nights() -> None:
    timings = {junit_key(n): 60.0 * (i + 1) for i, n in enumerate(IDS[:3])}
    budget = plan(IDS, timings, None)
    assert budget.expected_s == 60 + 120 + 180 + 120, "an untimed test counts as the mean of the timed ones"
    assert budget.dropped == ()
    assert budget.text == "4 test(s), expected 8.0 min"


def test_the_longest_claims_are_dropped_until_the_rest_fits_and_each_is_named() -> None:
    timings = {junit_key(n): s for n, s in zip(IDS, (60.0, 600.0, 120.0, 300.0), strict=True)}
    budget = plan(IDS, timings, 400.0)
    assert budget.dropped == (IDS[1], IDS[3])
    assert budget.kept_s == 180.0
    assert "dropped 2 claim(s) to fit (expected now 3.0 min): " + ", ".join(budget.dropped) in budget.text
    assert plan(IDS[:1], {junit_key(IDS[0]): 900.0}, 60.0).dropped == (), "one claim always runs"


def test_a_first_night_has_no_estimate_and_says_so() -> None:
    budget = plan(IDS, {}, 600.0)
    assert budget.expected_s is None
    assert budget.text == "4 test(s), expected unknown (no night timed yet) of 10.0 min allowed"


def test_timings_are_kept_from_junit_and_merged_over_nights(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite><testcase classname="benchmarks.test_claim_a" name="test_x[code]" time="12.5"/>'
        '<testcase classname="benchmarks.test_claim_b" name="test_x[code]" time="1"><skipped/></testcase>'
        "</testsuite></testsuites>"
    )
    kept = tmp_path / "timings.json"
    kept.write_text('{"older::test": 3.0}')
    record_timings(junit, kept)
    assert read_timings(kept) == {"older::test": 3.0, junit_key(IDS[0]): 12.5}, "a skipped test is not timed"


def test_dropped_claims_take_turns_night_after_night(tmp_path: Path) -> None:
    """The claims measured most recently are dropped first: over the nights every claim is measured."""
    timings = {junit_key(n): s for n, s in zip(IDS, (60.0, 600.0, 120.0, 300.0), strict=True)}
    kept = tmp_path / "timings.json"
    measured: dict[str, int] = dict.fromkeys(IDS, 0)
    for night in range(1, 5):
        budget = plan(IDS, timings, 700.0, read_last_measured(kept))
        ran = [n for n in IDS if n not in budget.dropped]
        for nodeid in ran:
            measured[nodeid] += 1
        cases = "".join(
            f'<testcase classname="{junit_key(n).split("::")[0]}" name="test_x[code]" time="{timings[junit_key(n)]}"/>'
            for n in ran
        )
        (tmp_path / "junit.xml").write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
        record_timings(tmp_path / "junit.xml", kept, now=f"2026-11-0{night}T03:00:00+00:00")
    assert min(measured.values()) >= 2, measured
    assert budget.dropped, "the window is too small for all four every night"


def test_a_claim_that_crashed_or_measured_nothing_is_not_counted_as_measured(tmp_path: Path) -> None:
    kept = tmp_path / "timings.json"
    (tmp_path / "junit.xml").write_text(
        "<testsuites><testsuite>"
        '<testcase classname="benchmarks.test_claim_a" name="test_x[code]" time="12"/>'
        '<testcase classname="benchmarks.test_claim_b" name="test_x[code]" time="3"><error message="boom"/></testcase>'
        '<testcase classname="benchmarks.test_claim_c" name="test_x[code]" time="2"><failure message="Failed: the '
        'plain arm speculated — no result was kept"/></testcase>'
        '<testcase classname="benchmarks.test_claim_d" name="test_x[code]" time="9"><failure message="1.4x is '
        'outside the claimed max=1.3"/></testcase>'
        "</testsuite></testsuites>"
    )
    record_timings(tmp_path / "junit.xml", kept, now="2026-11-02T03:00:00+00:00")
    assert sorted(read_last_measured(kept)) == [junit_key(IDS[0]), junit_key(IDS[3])], "a refuted claim was measured"
