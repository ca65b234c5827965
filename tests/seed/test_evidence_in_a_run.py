"""A run on a chip with published figures shows them beside its own result, and its verdict stays its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specdec.cli import main

TEST = (
    "import pytest\n\n@pytest.mark.speedup(min=1.1)\ndef test_claim(specdec):\n    specdec.compare(category='code')\n"
)


def run(pytester: pytest.Pytester, machine: str) -> pytest.RunResult:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPECDEC_MACHINE_CLASS", machine)
        return pytester.runpytest(
            "--backend=simulated",
            "--specdec-backend-option=speedup=0.8",
            "--specdec-max-trials=16",
            "-p",
            "no:cacheprovider",
        )


def test_published_figures_sit_beside_the_result_without_changing_its_verdict(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(TEST)
    elsewhere = run(pytester, "Test-Machine-Z")
    on_m4 = run(pytester, "Apple-M4-Max-128GB")
    elsewhere.assert_outcomes(failed=1)
    on_m4.assert_outcomes(failed=1)
    assert "published on this chip" not in elsewhere.stdout.str()
    on_m4.stdout.fnmatch_lines(["*published on this chip*x*"])
    verdicts = [line for line in on_m4.stdout.lines if line.startswith("simulated ")]
    assert verdicts
    assert all(" refuted " in line for line in verdicts), "the published rows never change the verdict"


def test_specdec_evidence_prints_the_claims_and_writes_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "evidence.png"
    assert main(["evidence", "--dir", str(tmp_path), "--machine", "Apple-M4-Max-128GB", "--plot", str(png)]) == 0
    shown = capsys.readouterr().out
    assert "published on Apple-M4-Max-128GB" in shown
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
