"""A run on a chip with published figures shows them beside its own result, and its verdict stays its own."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdec.cli import main
from pytest_specdec.store.records import ComparisonRecord

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


def test_the_evidence_plot_draws_the_selected_machines_results_in_black(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_record: Callable[..., ComparisonRecord]
) -> None:
    """--machine selects whose results are drawn beside the published ones, in black as the title says."""
    import json as json_module

    from PIL import Image

    from pytest_specdec.store.baselines import BaselineStore
    from pytest_specdec.store.nights import Night

    for machine, speedup in (("Apple-M4-Max-128GB", 1.4), ("Apple-M1-Max-64GB", 0.9)):
        line = Night.of_record(make_record("code", speedup, "holds", None), machine, False, "2026-12-01")
        BaselineStore(tmp_path, machine).append_history([line])
    drawn = {}
    for machine in ("Apple-M4-Max-128GB", "Apple-M1-Max-64GB", "Apple-M2-Pro-32GB"):
        png = tmp_path / f"{machine}.png"
        assert main(["evidence", "--dir", str(tmp_path), "--machine", machine, "--plot", str(png)]) == 0
        said = capsys.readouterr().out
        chunk = json_module.loads(Image.open(png).text["specdec"])
        drawn[machine] = [point["estimate"] for point in chunk if point["kind"] == "own"]
        assert f"({len(drawn[machine])} result(s) of {machine}'s drawn in black)" in said
    assert drawn == {"Apple-M4-Max-128GB": [1.4], "Apple-M1-Max-64GB": [0.9], "Apple-M2-Pro-32GB": []}


def test_the_seed_rows_cite_the_write_up_shipped_in_the_package() -> None:
    from importlib import resources

    from pytest_specdec.seed.evidence import load_evidence

    seed = [row for row in load_evidence() if not str(row.link).startswith("http")]
    assert seed, "the write-up's own rows"
    for row in seed:
        relative = str(row.link).removeprefix("pytest_specdec/")
        assert resources.files("pytest_specdec").joinpath(relative).is_file(), row.link
