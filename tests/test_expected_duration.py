"""Every run says its expected duration before its first pair: measured on this machine's earlier runs, or
said unknown — never guessed; the timings are kept per machine class, backend and profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_specdec.store.timings import Expected, expect, keep_timings, read_timings, timings_file

CLAIM = """import pytest

@pytest.mark.speedup(max=1.3)
def test_sd(specdec):
    specdec.compare(category='code')

@pytest.mark.parametrize("category", ["prose", "copy"])
def test_more(specdec, category):
    if category == "copy":
        pytest.skip("not on this backend")
    specdec.compare(category=category)

def test_plain():
    pass
"""


@pytest.fixture
def timings(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the claims above, whose timings are kept in a folder of the test's own."""
    monkeypatch.setenv("SPECDEC_TIMINGS_DIR", str(tmp_path / "timings"))
    monkeypatch.setenv("SPECDEC_MACHINE_CLASS", "Timed-Machine")
    pytester.makepyfile(test_claim=CLAIM)
    return tmp_path / "timings"


def test_the_first_run_says_unknown_and_the_next_its_measured_duration(
    pytester: pytest.Pytester, timings: Path
) -> None:
    first = pytester.runpytest("--backend=simulated", "-p", "no:cacheprovider")
    first.assert_outcomes(passed=3, skipped=1)
    first.stdout.fnmatch_lines(["specdec: simulated: 3 test(s), expected duration not known yet on this machine*"])
    (kept,) = timings.iterdir()
    timed = json.loads(kept.read_text())
    assert sorted(timed) == ["test_claim.py::test_more[copy]", "test_claim.py::test_more[prose]",
                             "test_claim.py::test_sd"], "every measuring test, the one that skipped itself too"  # fmt: skip
    assert timed["test_claim.py::test_more[copy]"] < timed["test_claim.py::test_sd"], "a skip takes about no time"
    second = pytester.runpytest("--backend=simulated", "-p", "no:cacheprovider")
    seconds = sum(timed.values())
    shown = f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
    second.stdout.fnmatch_lines([f"specdec: simulated: 3 test(s), expected ~{shown} (3 timed on this machine before)"])
    pytester.makepyfile(test_other="def test_new(specdec):\n    specdec.compare(category='code')\n")
    third = pytester.runpytest("--backend=simulated", "-p", "no:cacheprovider", "test_other.py", "test_claim.py")
    third.stdout.fnmatch_lines(["specdec: simulated: 4 test(s), expected ~* (3 timed on this machine before, 1 at their "
                                "mean)"])  # fmt: skip
    lines = second.stdout.lines
    said = next(i for i, line in enumerate(lines) if "expected ~" in line)
    assert said < next(i for i, line in enumerate(lines) if "test_claim.py" in line), "before the first test runs"


def test_timings_are_a_cache_a_broken_file_costs_only_the_estimate(tmp_path: Path) -> None:
    path = timings_file("M", "mlx", "embedded")
    assert path.name == "M--mlx--embedded.json"
    broken = tmp_path / "t.json"
    broken.write_text("{not json")
    assert read_timings(broken) == {}
    keep_timings(broken, {"a": 2.0})
    keep_timings(broken, {"b": 4.0})
    assert read_timings(broken) == {"a": 2.0, "b": 4.0}
    assert expect(["a", "b", "c"], read_timings(broken)) == Expected(3, 2, 9.0)
    assert expect(["c"], read_timings(broken)).seconds is None
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    keep_timings(blocked / "t.json", {"a": 1.0})  # cannot be written: never an error
    assert blocked.read_text() == "not a folder"


def test_a_skip_never_replaces_a_measured_time_and_an_interrupted_test_is_not_kept(
    pytester: pytest.Pytester, timings: Path
) -> None:
    pytester.runpytest_subprocess("--backend=simulated", "-p", "no:cacheprovider")
    (kept,) = timings.iterdir()
    before = json.loads(kept.read_text())
    pytester.makepyfile(
        test_claim="import pytest\n\n@pytest.mark.parametrize('category', ['prose', 'copy'])\n"
        "def test_more(specdec, category):\n    pytest.skip('server down tonight')\n\n"
        "def test_sd(specdec):\n    raise KeyboardInterrupt\n"
    )
    pytester.runpytest_subprocess("--backend=simulated", "-p", "no:cacheprovider")
    after = json.loads(kept.read_text())
    prose = "test_claim.py::test_more[prose]"
    assert after[prose] == before[prose], "tonight's skip keeps the time measured before"
    assert after["test_claim.py::test_sd"] == before["test_claim.py::test_sd"], "a test cut short is no timing"
