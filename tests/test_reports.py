"""Report renderers and exports: golden Markdown and JSON, the PNG, pytest-benchmark's format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_specdec.exports import benchmark_document, results_document
from pytest_specdec.plots import forest_plot, history_plot
from pytest_specdec.records import (
    BoundRecord,
    CheckRecord,
    ComparisonRecord,
    RunRecord,
    SampleRecord,
    dumps,
    load_run,
)
from pytest_specdec.report import markdown_report
from pytest_specdec.stats import Interval

GOLDEN = Path(__file__).parent / "golden"


def comparison(category: str, speedup: float, verdict: str, check: CheckRecord | None) -> ComparisonRecord:
    samples = tuple(SampleRecord(f"{category}-{i}", "plain", 40.0 + i, (40.0 + i) * speedup) for i in range(4))
    return ComparisonRecord(
        nodeid=f"benchmarks/test_claim_d.py::test_mlx_draft[{category}]",
        backend="mlx",
        release="mlx-lm 0.33.0",
        versions={"mlx": "0.32.4", "mlx-lm": "0.33.0"},
        device="gpu: applegpu_g13s",
        target="mlx-community/Qwen2.5-7B-Instruct-4bit",
        draft="mlx-community/Qwen2.5-0.5B-Instruct-4bit",
        model_digest="abc123",
        profile="seed",
        category=category,
        num_draft=3,
        baseline_arm="plain",
        treatment_arm="sd",
        baseline_tps=41.5,
        treatment_tps=41.5 * speedup,
        speedup=Interval(speedup, speedup * 0.95, speedup * 1.05, 0.95, 4),
        acceptance=Interval(0.7, 0.65, 0.75, 0.95, 4),
        trials=4,
        verdict=verdict,
        gating=True,
        bounds=(BoundRecord("speedup", "max", 1.3, verdict),),
        claim_id="d",
        claim_quote="0.9x-1.3x at best",
        samples=samples,
        failure=check.message if check and check.change == "flip" else None,
        check=check,
    )


def sample_run() -> RunRecord:
    flip = CheckRecord(
        "flip",
        "CONCLUSION CHANGED on Apple-M1-Max-64GB: mlx-lm 0.32.2 → 0.33.0: speedup 0.94x [0.90, 0.98] → "
        "1.41x [1.34, 1.48]; claim max=1.3 now refuted",
        Interval(0.94, 0.90, 0.98, 0.95, 12),
        "mlx-lm 0.32.2",
        "measured",
    )
    same = CheckRecord(
        "re-confirmed", "re-confirmed on mlx-lm 0.33.0", Interval(1.0, 0.97, 1.03, 0.95, 9), "mlx-lm 0.32.2", "measured"
    )
    return RunRecord(
        machine_class="Apple-M1-Max-64GB",
        started="2026-11-30T01:00:00+00:00",
        finished="2026-11-30T01:05:00+00:00",
        comparisons=(comparison("prose", 1.0, "holds", same), comparison("code", 1.41, "refuted", flip)),
        machine_info={"python_version": "3.12.7", "system": "Darwin", "machine": "arm64"},
        commit_info={"id": "0123abcd", "dirty": False, "branch": "main"},
        specdec_version="0.1.0",
    )


def test_markdown_report_matches_golden_file() -> None:
    text = markdown_report(sample_run())
    assert text == (GOLDEN / "report.md").read_text(encoding="utf-8")
    assert text.index("Conclusion changed") < text.index("| backend"), "flips come first"


def test_results_json_matches_golden_file_and_round_trips(tmp_path: Path) -> None:
    text = dumps(results_document(sample_run()))
    assert text == (GOLDEN / "results.json").read_text(encoding="utf-8")
    path = tmp_path / "results.json"
    path.write_text(text)
    assert load_run(path) == sample_run()


def test_forest_plot_is_a_png_drawn_from_the_given_rows(tmp_path: Path) -> None:
    from PIL import Image

    run = sample_run()
    path = forest_plot(list(run.comparisons), tmp_path / "forest.png", "test")
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.size == (1000, int((1.2 + 0.45 * 2) * 100))
        drawn = json.loads(image.text["specdec"])
    assert sorted((row["estimate"], row["verdict"]) for row in drawn) == [(1.0, "holds"), (1.41, "refuted")]
    assert {row["low"] for row in drawn} == {c.speedup.low for c in run.comparisons}


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
    with Image.open(history_plot(lines, tmp_path / "history.png", "t")) as image:
        drawn = json.loads(image.text["specdec"])
    assert drawn == [{"key": "k [code]", "releases": ["mlx-lm 0.32", "mlx-lm 0.33"], "estimates": [0.9, 1.4]}]


def test_benchmark_json_is_read_by_pytest_benchmark_compare(tmp_path: Path) -> None:
    document = benchmark_document(sample_run(), "5.3.1")
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
