"""Plugin behaviour through pytester, on the simulated backend that the package ships."""

from __future__ import annotations

import pytest

SIM = ("--backend=simulated", "-p", "no:cacheprovider")


def claim_test(*markers: str, category: str = "code") -> str:
    """A test module with one test carrying ``markers`` that compares on ``category``."""
    decorators = "".join(f"@pytest.mark.{marker}\n" for marker in markers)
    return f"import pytest\n\n{decorators}def test_claim(specdec):\n    specdec.compare(category={category!r})\n"


def run(pytester: pytest.Pytester, bounds: str, *options: str) -> pytest.RunResult:
    pytester.makepyfile(claim_test(f"speedup({bounds})"))
    return pytester.runpytest(*SIM, *options)


def test_holding_claim_passes_and_reports_a_verdict_row(pytester: pytest.Pytester) -> None:
    result = run(pytester, "min=1.1", "--specdec-backend-option", "speedup=1.3")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*specdec verdicts*", "simulated*code*1.[23]?x [[]*]*holds*"])


def test_refuted_max_fails_with_one_line_naming_the_release(pytester: pytest.Pytester) -> None:
    result = run(
        pytester, "max=1.1", "--specdec-backend-option", "speedup=1.5", "--specdec-backend-option", "release=2.0"
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*speedup 1.[45]?x [[]*] on these 4 code prompts > claimed max 1.1x — SD now pays off (simulated 2.0)*"]
    )
    result.stdout.no_fnmatch_line("*Traceback*")


def test_refuted_min_says_sd_does_not_pay_off(pytester: pytest.Pytester) -> None:
    result = run(pytester, "min=1.0", "--specdec-backend-option", "speedup=0.8")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*< claimed min 1x — SD does not pay off*"])


def test_inconclusive_warns_and_strict_fails(pytester: pytest.Pytester) -> None:
    noisy = (
        "--specdec-backend-option",
        "speedup=1.3",
        "--specdec-backend-option",
        "noise=0.5",
        "--specdec-max-trials=6",
    )
    result = run(pytester, "max=1.3", *noisy)
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*SpecdecInconclusiveWarning*inconclusive after 6 pairs*"])
    strict = pytester.runpytest(*SIM, *noisy, "--specdec-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*inconclusive after 6 pairs*(--specdec-strict)*"])


def test_claim_for_another_profile_is_reference_only(pytester: pytest.Pytester) -> None:
    claim = 'claim(id="d", source="seed: mlx", quote="at best 1.3x", applies_to="seed")'
    pytester.makepyfile(claim_test(claim, "speedup(max=1.1)", category="copy"))
    result = pytester.runpytest(*SIM, "--specdec-backend-option", "speedup=1.5")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*reference: refuted*"])


def test_sd_that_changes_tokens_fails_the_lossless_check(pytester: pytest.Pytester) -> None:
    result = run(pytester, "min=0.5", "--specdec-backend-option", "lossless=false")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*SD changed the output: prompt code-1 differs from plain decoding at token 16*"])


@pytest.mark.parametrize(("margin", "passes"), [(0.01, True), (0.5, False)])
def test_divergence_on_a_near_tie_is_noted_not_failed(pytester: pytest.Pytester, margin: float, passes: bool) -> None:
    lossy = ("--specdec-backend-option", "lossless=false", "--specdec-backend-option", f"tie_margin={margin}")
    result = run(pytester, "min=0.5", *lossy)
    if passes:
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(
            ["*prompt code-1: the arms diverged at token 16 on a near-tie (plain logit margin 0.010 ≤ 0.25)*"]
        )
    else:
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(["*SD changed the output: prompt code-1 differs from plain decoding at token 16*"])


def test_sd_that_never_drafts_fails_the_engaged_check(pytester: pytest.Pytester) -> None:
    result = run(pytester, "min=0.5", "--specdec-backend-option", "engaged=false")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*not measurable: SD not engaged (the sd arm drafted 0 tokens)*", "*not measurable*"])
    assert not (pytester.path / "baselines" / "candidates").exists(), "arms that cannot differ are never a candidate"


def test_acceptance_marker_is_judged(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(claim_test("acceptance(min=0.9)", category="prose"))
    result = pytester.runpytest(*SIM, "--specdec-backend-option", "acceptance=0.5")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*acceptance 0.?? [[]*] < claimed min 0.9 (simulated 1.0)"])


def test_header_shows_backend_versions_pair_and_machine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*SIM)
    result.stdout.fnmatch_lines(
        [
            "specdec: backend=simulated (numpy *), profile=embedded",
            "specdec: target=simulated-target, draft=simulated-draft, γ=3 (or the engine's own default), max_tokens=32, machine=*",
        ]
    )


def test_junit_xml_carries_speedup_and_verdict(pytester: pytest.Pytester) -> None:
    run(pytester, "min=1.1", "--specdec-backend-option", "speedup=1.4", "--junitxml=out.xml")
    xml = (pytester.path / "out.xml").read_text()
    assert 'name="specdec_verdict" value="holds"' in xml
    import re

    shown = re.search(r'name="specdec_speedup" value="([0-9.]+)', xml)
    assert shown is not None
    assert float(shown.group(1)) == pytest.approx(1.4, rel=0.05)


def test_progress_is_written_while_trials_run(pytester: pytest.Pytester) -> None:
    result = run(pytester, "min=1.1", "--specdec-backend-option", "speedup=1.3")
    result.stdout.fnmatch_lines(["*specdec code: pair 1/72*"])


def test_ini_and_pyproject_settings_apply(pytester: pytest.Pytester) -> None:
    pytester.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        specdec_max_trials = "7"
        [tool.specdec]
        backend = "simulated"
        min_trials = 7
        [tool.specdec.simulated]
        num_draft = 5
        options = { speedup = "1.2", noise = "0.5" }
        """
    )
    pytester.makepyfile(claim_test("speedup(max=1.2)"))
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*γ=5*", "*inconclusive after 7 pairs*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--backend=nope",), "ERROR: unknown backend 'nope' — choose one of: *"),
        (("--specdec-confidence=1.5",), "ERROR: --specdec-confidence 1.5 is outside (0, 1)*"),
        (("--specdec-confidence=high",), "ERROR: --specdec-confidence: 'high' is not a valid float*"),
        (("--specdec-min-trials=10", "--specdec-max-trials=4"), "ERROR: --specdec-max-trials 4 is below*"),
        (("--specdec-backend-option=sped=1",), "ERROR: backend 'simulated' has no option 'sped'*"),
        (("--specdec-backend-option=speedup=fast",), "ERROR: backend option speedup='fast'*must be a number*"),
        (("--specdec-backend-option=speedup=nan",), "ERROR: backend option speedup='nan'*must be a finite number*"),
    ],
)
def test_bad_options_are_one_line_usage_errors(pytester: pytest.Pytester, args: tuple[str, ...], message: str) -> None:
    pytester.makepyfile(claim_test("speedup(min=1.0)"))
    result = pytester.runpytest("--backend=simulated", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ("speedup(min=1.5, max=1.2)", "*speedup(min=1.5, max=1.2): max is below min"),
        ("speedup(max='fast')", "*speedup(max='fast'): max must be a number*"),
        ("speedup(maximum=1.2)", "*speedup has no argument 'maximum'*"),
        ("speedup(1.2)", "*speedup takes keyword arguments only*"),
        ("acceptance(min=2)", "*acceptance(min=2): min must be a number in (0, 1)"),
        ("claim(id='a', source='seed')", "*claim needs quote= as a non-empty string"),
        ("speedup(min=1, of='e2e')", "*speedup(of='e2e'): of is 'decode' or 'end-to-end'"),
        ("sampling(temperature=9)", "*sampling(temperature=9): temperature=9 is outside 0-5*"),
        ("sampling(temperature='hot')", "*sampling(temperature='hot'): temperature must be a number"),
        ("sampling(top_p=0)", "*sampling(top_p=0): top_p=0 must be in (0, 1]*"),
        ("sampling(seed=1)", "*sampling has no argument 'seed'*"),
    ],
)
def test_bad_markers_are_one_line_usage_errors(pytester: pytest.Pytester, marker: str, message: str) -> None:
    pytester.makepyfile(f"import pytest\n\n@pytest.mark.{marker}\ndef test_x(specdec):\n    pass\n")
    result = pytester.runpytest(*SIM)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: test_*.py::test_x: @pytest.mark." + message])


def test_markers_are_registered_for_strict_markers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(claim_test("speedup(min=0.5)"))
    result = pytester.runpytest(*SIM, "--strict-markers", "--collect-only")
    assert result.ret == pytest.ExitCode.OK


UNIT = "def test_unit():\n    assert 1 + 1 == 2\n"


def test_under_xdist_each_measuring_test_fails_in_one_line_and_every_other_test_runs(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_claim=claim_test("speedup(min=1.0)"), test_unit=UNIT)
    result = pytester.runpytest_subprocess("--backend=simulated", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)  # refused at set-up, in one line, before anything is measured
    result.stdout.fnmatch_lines(["ERROR test_claim.py::test_claim - Failed: pytest-specdec measurements cannot run *"])
    alone = pytester.runpytest_subprocess("-n", "2", "test_unit.py", "-p", "no:cacheprovider")
    alone.assert_outcomes(passed=1)


def test_a_configuration_problem_fails_only_the_tests_that_ask_for_the_plugin(pytester: pytest.Pytester) -> None:
    """A ``[tool.specdec]`` profile with no models for the default backend: a session without a specdec test,
    ``--collect-only`` included, runs as if the plugin were not installed; one that has one says it in one line."""
    pytester.makepyprojecttoml('[tool.specdec]\nprofile = "mine"\n')
    pytester.makepyfile(test_unit=UNIT)
    for args in ((), ("--collect-only",)):
        result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["specdec: not configured, so specdec tests fail: *mine*"])
    pytester.makepyfile(test_claim=claim_test("speedup(min=1.0)"))
    asked = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert asked.ret == pytest.ExitCode.USAGE_ERROR
    asked.stderr.fnmatch_lines(["ERROR: *profile 'mine'*"])
    assert len([line for line in asked.stderr.lines if line.strip()]) == 1


def test_missing_runtime_names_the_extra(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlx_lm" else real(name, *a))
    pytester.makepyfile(claim_test("speedup(min=1.0)"))
    result = pytester.runpytest("--backend=mlx")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: backend 'mlx' needs the Python package 'mlx_lm'*pip install 'pytest-specdec[[]mlx]'"]
    )


def in_a_terminal(pytester: pytest.Pytester, columns: int | None = None) -> str:
    """What a pty of ``columns`` shows while a simulated claim runs with pytest's default capture."""
    import os
    import sys

    from pty_run import run_in_a_pty

    pytester.makepyfile(claim_test("speedup(min=1.1)"))
    environment = {**os.environ, **({"COLUMNS": str(columns)} if columns else {})}
    command = [sys.executable, "-m", "pytest", *SIM, "--specdec-backend-option", "speedup=1.3"]
    return run_in_a_pty(command, pytester.path, environment, columns)


def test_live_progress_reaches_a_terminal_without_dash_s(pytester: pytest.Pytester) -> None:
    """In a pty with pytest's default capture, the per-pair line still shows while the test runs."""
    shown = in_a_terminal(pytester)
    assert "specdec code: pair 1/72" in shown
    assert "left" in shown, "the line estimates the time left"


@pytest.mark.parametrize("columns", [80, 120])
def test_a_terminal_of_80_or_120_columns_reads_as_described(pytester: pytest.Pytester, columns: int) -> None:
    """The live line stays one row and is erased; pytest's [100%] lands on the test's row; the table fits."""
    import re

    shown = in_a_terminal(pytester, columns)
    live = re.findall(r"\r(    specdec code: pair [^\r\n\x1b]*)\x1b\[K", shown)
    assert len(live) >= 2, "the live line is rewritten after every pair"
    assert all(len(line) < columns for line in live), "one row each, never wrapped"
    # Erased, and the cursor back at the end of "test_x.py " before pytest writes the result and [100%].
    back = re.search(r"\r\x1b\[K\x1b\[1A\r\x1b\[(\d+)C(.*?)\r\n", shown)
    assert back is not None
    file_row = len(next(p.name for p in pytester.path.glob("test_*.py"))) + 1
    assert int(back.group(1)) == file_row, "the cursor goes back to the end of the test file's row"
    result = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", back.group(2))
    assert result.startswith(".")
    assert result.endswith("[100%]")
    assert file_row + len(result) <= columns, "[100%] fits on the test's row"
    table = shown.split("specdec verdicts", 1)[1].split("\r\n")[1:5]
    header = table[0]
    assert all(len(line) <= columns for line in table[:3])
    assert "in words" in header
    assert ("plain tok/s" in header) == ("SD tok/s" in header), "never one rate without the other"
    assert f"(left out to fit {columns} columns: " in shown
    assert "--specdec-columns, shows them)" in shown.replace("\r\n", " ")
    if columns >= 120:
        assert "claim" in header


def test_the_json_report_makes_its_folder_as_junitxml_does(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(claim_test("speedup(max=100.0)"))  # holds whatever the simulated noise
    result = pytester.runpytest(*SIM, "--specdec-json=reports/tonight/run.json", "--junitxml=reports/junit/j.xml")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert (pytester.path / "reports" / "tonight" / "run.json").is_file()
    assert (pytester.path / "reports" / "junit" / "j.xml").is_file()


def test_help_says_each_default_once(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    assert "(default: None)" not in result.stdout.str()
    assert not [line for line in result.stdout.lines if line.count("(default") > 1]
