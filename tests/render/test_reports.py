"""Report renderers and exports: golden Markdown and JSON, the PNG, pytest-benchmark's format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.axes.sampling import Sampling
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.exports import benchmark_document, results_document
from pytest_specdec.render.plots import forest_plot, history_plot
from pytest_specdec.render.report import markdown_report
from pytest_specdec.store.files import dumps, load_run
from pytest_specdec.store.nights import Night, Nights
from pytest_specdec.store.records import ComparisonRecord, RunRecord

GOLDEN = Path(__file__).parent / "golden"


def kept(lines: list[dict[str, Any]]) -> Nights:
    """History lines as the nights a reader gets."""
    return tuple(Night.of_line(line) for line in lines)


def test_markdown_report_matches_golden_file(sample_run: RunRecord) -> None:
    text = markdown_report(sample_run)
    assert text == (GOLDEN / "report.md").read_text(encoding="utf-8")
    assert text.index("Conclusion changed") < text.index("| backend"), "flips come first"


def test_results_json_matches_golden_file_and_round_trips(tmp_path: Path, sample_run: RunRecord) -> None:
    text = dumps(results_document(sample_run))
    assert text == (GOLDEN / "results-schema-3.json").read_text(encoding="utf-8")
    path = tmp_path / "results.json"
    path.write_text(text)
    assert load_run(path) == sample_run


def test_a_schema_2_results_file_written_before_conditions_were_one_object_reads_as_the_same_run(
    sample_run: RunRecord,
) -> None:
    """``results.json`` was written by the release before this one (γ a field, conditions in ``scope``): never rewritten."""
    assert json.loads((GOLDEN / "results.json").read_text(encoding="utf-8"))["schema_version"] == 2
    assert load_run(GOLDEN / "results.json") == sample_run


def test_a_schema_1_results_file_reads_as_the_same_run(sample_run: RunRecord) -> None:
    """The migration path: the file written before the judgement was one value loads whole."""
    old = load_run(GOLDEN / "results-schema-1.json")
    assert old.schema_version == 3
    flipped = old.comparisons[1]
    assert flipped.judgement.failure is not None
    assert flipped.judgement.failure.startswith("CONCLUSION CHANGED")  # schema 1 kept the flip's line there
    without = replace(flipped, judgement=replace(flipped.judgement, failure=None))
    assert replace(old, comparisons=(old.comparisons[0], without)) == sample_run


def test_forest_plot_is_a_png_drawn_from_the_given_rows(tmp_path: Path, sample_run: RunRecord) -> None:
    from PIL import Image

    run = sample_run
    path = forest_plot(list(run.comparisons), tmp_path / "forest.png", "test")
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == (1100, int((1.4 + 0.55 * 2) * 100))
        drawn = json.loads(image.text["specdec"])
    assert sorted((row["estimate"], row["verdict"]) for row in drawn) == [(1.0, "holds"), (1.41, "refuted")]
    # the accepted baseline is drawn beside each result that was checked against one
    assert sorted(row["baseline"][0] for row in drawn) == [0.94, 1.0]
    assert {row["low"] for row in drawn} == {c.speedup.low for c in run.comparisons}
    assert sorted(str(row["change"]) for row in drawn) == ["flip", "re-confirmed"], "the flipped row is marked"


def test_a_sweeps_rows_in_a_forest_plot_are_told_apart_by_their_conditions(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    from PIL import Image

    from pytest_specdec.render.plots import row_label

    greedy = make_record("code", 1.2, "holds", None)
    sampled = replace(greedy, conditions=greedy.conditions.with_(sampling=Sampling(0.7)))
    long = replace(greedy, conditions=greedy.conditions.with_(context=8192, metric="end-to-end"))
    labels = [row_label(r) for r in (greedy, sampled, long)]
    assert labels[1].endswith("· code · γ=3 · T=0.7")
    assert labels[2].endswith("· code · γ=3 · end-to-end · ctx=8K")
    with Image.open(forest_plot([greedy, sampled, long], tmp_path / "f.png", "sweep")) as image:
        drawn = json.loads(image.text["specdec"])
    assert len({row["label"] for row in drawn}) == 3


def test_history_plot_orders_releases_by_time(tmp_path: Path) -> None:
    from PIL import Image

    def line(time: str, release: str, estimate: float) -> dict[str, object]:
        return {
            "time": time,
            "release": release,
            "key": "k [code]",
            "speedup": {"estimate": estimate, "low": estimate - 0.1, "high": estimate + 0.1},
        }

    lines = [line("2026-02", "mlx-lm 0.33", 1.4), line("2026-01", "mlx-lm 0.32", 0.9)]
    with Image.open(history_plot(kept(lines), tmp_path / "history.png", "t")) as image:
        drawn = json.loads(image.text["specdec"])
    assert drawn == [
        {"key": "k [code]", "releases": ["mlx-lm 0.32", "mlx-lm 0.33"], "estimates": [0.9, 1.4], "flips": 0,
         "eroding": None, "bounds": []}
    ]  # fmt: skip


def test_history_plot_draws_the_bound_a_conclusion_erodes_toward(tmp_path: Path) -> None:
    from PIL import Image

    lines = [
        {"time": f"2026-0{i}", "release": f"mlx-lm 0.3{i}", "key": "k [copy]", "bounds": {"speedup max=1": "holds"},
         "speedup": {"estimate": value, "low": value - 0.02, "high": value + 0.02}}
        for i, value in enumerate((0.80, 0.90, 0.98), start=1)
    ]  # fmt: skip
    with Image.open(history_plot(kept(lines), tmp_path / "history.png", "t")) as image:
        drawn = json.loads(image.text["specdec"])
    assert drawn[0]["eroding"] == "speedup max=1"
    assert drawn[0]["bounds"] == [1.0], "the claimed bound is drawn, so the picture stands alone"


def test_benchmark_json_is_read_by_pytest_benchmark_compare(tmp_path: Path, sample_run: RunRecord) -> None:
    document = benchmark_document(sample_run, "5.3.1")
    plain = document["benchmarks"][0]
    assert plain["stats"]["rounds"] == 4
    assert plain["stats"]["ops"] == pytest.approx(4 / sum(1 / (40.0 + i) for i in range(4)))
    path = tmp_path / "0001_specdec.json"
    path.write_text(json.dumps(document))
    compare = Path(sys.executable).with_name("pytest-benchmark")
    done = subprocess.run(
        [str(compare), "compare", str(path), "--columns=mean,ops,rounds"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "COLUMNS": "240"},
    )
    assert done.returncode == 0, done.stderr
    assert "test_mlx_draft[code]" in done.stdout
    assert "[code-sd]" in done.stdout


def test_the_terminal_table_fits_its_width_and_keeps_the_verdict(sample_run: RunRecord) -> None:
    from pytest_specdec.render.verdict_table import terminal_table

    records = list(sample_run.comparisons)
    full = terminal_table(records, width=10_000)
    fitted = terminal_table(records, width=120)
    assert max(map(len, full.splitlines())) > 120
    assert max(map(len, fitted.splitlines())) <= 120
    assert "verdict" in fitted.splitlines()[0]
    assert "refuted (FLIPPED)" in fitted
    assert "speedup [CI]" in fitted.splitlines()[0]
    assert "(left out to fit 120 columns: baseline release" in fitted
    assert "(left out" not in full
    for width in (80, 100, 120):
        header = terminal_table(records, width=width).splitlines()[0]
        assert ("plain tok/s" in header) == ("SD tok/s" in header), f"never one rate without the other ({width})"
    chosen = terminal_table(records, columns=["category", "verdict"])
    assert chosen.splitlines()[0].split() == ["category", "verdict"]
    with pytest.raises(SpecdecUsageError, match="unknown column 'speed'"):
        terminal_table(records, columns=["speed"])


def test_each_verdict_is_said_in_plain_words_beside_its_claim(sample_run: RunRecord) -> None:
    from dataclasses import replace

    from pytest_specdec.render.verdict_table import claim_cell, in_words
    from pytest_specdec.stats import Interval
    from pytest_specdec.store.records import Conclusion

    pays, even = sample_run.comparisons[1], sample_run.comparisons[0]
    assert claim_cell(pays) == "SD ≤ 1.3x"
    assert in_words(pays) == "SD pays off here (1.41x vs 1x)", "says what it compares with: not the claim's bound"
    assert in_words(even) == "SD breaks even here (1.00x vs 1x)"
    loses = replace(even, speedup=Interval(0.82, 0.78, 0.86, 0.98, 16))
    assert in_words(loses) == "SD does not pay off here (0.82x vs 1x)"
    open_ = replace(
        even,
        speedup=Interval(1.16, 0.9, 1.5, 0.98, 16),
        judgement=replace(even.judgement, conclusion=Conclusion.INCONCLUSIVE),
    )
    # 16 pairs x (half-width 0.255 / distance to max=1.3 0.114)² ≈ 80.4 in all
    assert in_words(open_) == "can't tell yet vs 1x or the claim: about 65 more pairs would decide it"
    capped = replace(open_, scope={**open_.scope, "max_trials": "72"})
    assert in_words(capped) == (
        "can't tell yet vs 1x or the claim: about 65 more pairs would decide it, beyond the 72 "
        "--specdec-max-trials allowed: raise it"
    ), "names the limit that stopped it (the user's own --specdec-max-trials)"
    tight = replace(open_, scope={**open_.scope, "max_trials": "16"})
    assert in_words(tight).endswith("beyond the 16 --specdec-max-trials allowed: raise it, or measure more prompts")
    assert "about 65 more" in in_words(replace(open_, scope={**open_.scope, "max_trials": "96"})), "16 + 65 ≤ 96"
    lossy = replace(even, judgement=replace(even.judgement, conclusion=Conclusion.FAILED))
    assert in_words(lossy) == "SD changed the output"
    idle = replace(
        even,
        judgement=replace(
            even.judgement, conclusion=Conclusion.NOT_MEASURABLE, failure="not measurable: SD not engaged"
        ),
    )
    assert in_words(idle) == "SD never engaged"


def test_a_theory_line_that_disagrees_with_the_measurement_says_the_measurement_stands(sample_run: RunRecord) -> None:
    from dataclasses import replace

    from pytest_specdec.render.report import terminal_notes
    from pytest_specdec.render.verdict_table import theory_note
    from pytest_specdec.store.records import TheoryRecord

    measured = sample_run.comparisons[1]
    wrong = TheoryRecord(0.1, 3, 0.4, 1.9, 0.6, None, False, "SD loses", "timed", "α=0.10 …: predicted 0.60x; "
                         "break-even α none (SD cannot win) — SD loses")  # fmt: skip
    note = theory_note(replace(measured, theory=wrong))
    assert note is not None
    assert note.endswith("— the model does not explain this measurement: the measured 1.41x stands")
    assert theory_note(replace(measured, theory=replace(wrong, agrees=True))) == wrong.text
    assert any(line.endswith("the measured 1.41x stands") for line in terminal_notes([replace(measured, theory=wrong)]))


def test_the_live_line_shows_an_interval_only_once_it_says_something() -> None:
    from pytest_specdec.measure import Progress
    from pytest_specdec.render.report import progress_line
    from pytest_specdec.stats import Interval

    early = progress_line(Progress("code", 2, 72, Interval(1.2, 0.0, 11587.29, 0.98, 2)), 3.0)
    assert early == "specdec code: pair 2/72, 3 s, at most ~2 min left"
    later = progress_line(Progress("code", 16, 72, Interval(1.52, 1.31, 1.76, 0.98, 16)), 40.0)
    assert later == "specdec code: pair 16/72, speedup 1.52x [1.31, 1.76], 40 s, at most ~2 min left"
    check = progress_line(Progress("code", 256, 1024, None, stage="distribution check"), 600.0)
    assert check == "specdec code: distribution check 256/1024, 10 min, ~30 min left", "a long check says how long"


def test_markdown_report_carries_the_notes_the_terminal_prints_under_its_table(sample_run: RunRecord) -> None:
    """End to end, the lossless check and the sweeps' lines reach the step summary and ``pytest-specdec report``."""
    first, flipped = sample_run.comparisons
    code = replace(flipped, notes=("end-to-end speedup 1.02x [0.95, 1.10] | prefill-bound",))
    prose = replace(first, judgement=replace(first.judgement, warning="only 3 prompts measured"))
    sweep = "t.py::test_sweep context sweep [copy]: ctx=0 decode 1.40x — verdict holds up to ctx=0, refuted from ctx=8K"
    run = replace(sample_run, comparisons=(prose, code), summary=(sweep,))
    text = markdown_report(run)
    notes = text[text.index("## Notes") : text.index("## Machine and versions")]
    assert "- `benchmarks/test_claim_d.py::test_mlx_draft[code]` [code]: end-to-end speedup 1.02x" in notes
    assert "\\| prefill-bound" in notes, "a cell's pipe is escaped"
    assert f"- {sweep}" in notes
    assert "[prose]: only 3 prompts measured" in notes
    assert "## Notes" not in markdown_report(sample_run), "no notes, no section"


def test_a_runs_summary_lines_survive_the_results_file(tmp_path: Path, sample_run: RunRecord) -> None:
    run = replace(sample_run, summary=("a γ sweep's line",))
    path = tmp_path / "results.json"
    path.write_text(dumps(results_document(run)))
    assert load_run(path).summary == ("a γ sweep's line",)


def test_every_output_path_and_its_library_are_checked_before_the_first_pair(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util

    from pytest_specdec.render.outputs import check_output_folders

    (tmp_path / "a-file").write_text("x")
    (tmp_path / "a-folder").mkdir()
    cases = {
        "json": ("a-file/results.json", "a-file is a file, not a folder — choose another path"),
        "plot": ("a-folder", "--specdec-plot a-folder is a folder — name a file in it"),
    }
    for key, (value, said) in cases.items():
        with pytest.raises(SpecdecUsageError, match=said):
            check_output_folders({key: value}, tmp_path)
    check_output_folders({"report_md": "absent/report.md"}, tmp_path)  # made when written, as --junitxml's
    assert not (tmp_path / "absent").exists(), "nothing is made before the run writes it"
    check_output_folders({"plot": "forest.png"}, tmp_path)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(
        SpecdecUsageError, match=r"--specdec-plot needs matplotlib, .* pip install 'pytest-specdec\[plot\]'"
    ):
        check_output_folders({"plot": "forest.png"}, tmp_path)


def test_a_synthetic_row_reads_as_a_self_test_and_rows_sharing_a_category_say_what_differs(
    sample_run: RunRecord,
) -> None:
    from dataclasses import replace

    from pytest_specdec.render.report import claim_answers
    from pytest_specdec.render.verdict_table import distinct_names, in_words, terminal_table

    real = sample_run.comparisons[1]
    synthetic = replace(real, target="embedded:target", draft="embedded:draft-aligned")
    assert in_words(synthetic) == "self-test (synthetic pair, not your model): " + in_words(real)
    assert not in_words(real).startswith("self-test")
    names = distinct_names([real, synthetic])
    assert names[id(real)] == f"{real.category} · Qwen2.5-7B-Instru…", "shortened as the model columns are"
    assert names[id(synthetic)] == f"{real.category} · synthetic target"
    other_claim = replace(real, nodeid=real.nodeid + "x")
    assert distinct_names([real, other_claim])[id(other_claim)].endswith(other_claim.nodeid.rsplit("::", 1)[-1])
    assert distinct_names([real])[id(real)] == real.category, "a category said once needs nothing more"
    answers = claim_answers([real, synthetic], 80)
    assert "the tool works here" in " ".join(answers[-3:]), "the last lines tell a newcomer what next"
    assert "--specdec-model YOUR_MODEL" in " ".join(answers[-3:])
    assert not any("the tool works here" in line for line in claim_answers([real], 80))
    table = terminal_table([real, synthetic], 80)
    assert max(map(len, table.splitlines())) <= 80
    words = table.splitlines()[0].index("in words")
    widths = [len(line) - words for line in table.splitlines()[2:6] if len(line) > words]
    assert max(widths) >= 20, "the answer in words keeps room while the other cells wrap"
