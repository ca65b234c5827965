"""The published-evidence file, the notes printed beside a result, the claims table and the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.evidence_plot import OwnPoint, PublishedPoint, chip_sort_key, evidence_plot
from pytest_specdec.seed.document import CLAIMS
from pytest_specdec.seed.evidence import (
    HAZARDS,
    SUSPECT,
    EvidenceRow,
    beside_result,
    chip_of,
    claims_table,
    load_evidence,
    parse_evidence,
    plottable,
    rows_for,
)


def test_the_shipped_file_loads_with_a_source_for_every_row() -> None:
    rows = load_evidence()
    assert len(rows) >= 90
    assert all(row.source.strip() for row in rows)
    assert all(row.source.startswith("https://") for row in rows if row.role == "published")
    assert len({row.id for row in rows}) == len(rows)
    assert {row.id for row in rows} >= HAZARDS


def test_every_row_filed_under_a_seed_claim_by_the_seed_has_role_seed() -> None:
    rows = load_evidence()
    seed_rows = [row for row in rows if row.id.startswith("seed-")]
    assert {row.claim for row in seed_rows} == {"a", "b", "c", "d", "e", "f", "g"}
    assert all(row.role == "seed" for row in seed_rows)
    assert all(row.claim in CLAIMS for row in rows if row.claim is not None)


def test_a_malformed_file_is_one_line_naming_the_row() -> None:
    good: dict[str, object] = dict.fromkeys(EvidenceRow.__dataclass_fields__)
    good |= {"id": "Z1", "role": "published", "source": "https://x", "roofline_suspect": False, "notes": ""}
    assert parse_evidence(json.dumps({"schema_version": 2, "rows": [good | {"sampling": "T=1"}]}))[0].sampling == "T=1"
    version_one = {key: value for key, value in good.items() if key != "sampling"}
    (migrated,) = parse_evidence(json.dumps({"schema_version": 1, "rows": [version_one]}))
    assert (migrated.id, migrated.sampling) == ("Z1", None)  # version 1 had no sampling: greedy or not stated
    for document, fragment in [
        ("{", "not JSON"),
        (json.dumps({"schema_version": 3, "rows": [good]}), "schema_version 3"),
        (json.dumps({"schema_version": 2, "rows": [good | {"sampling": "hot"}]}), "row Z1: sampling"),
        (json.dumps({"schema_version": 2, "rows": [version_one]}), "row Z1: missing sampling"),
        (json.dumps({"schema_version": 2, "rows": [good | {"speedup": "fast"}]}), "row Z1: speedup"),
        (json.dumps({"schema_version": 2, "rows": [good | {"stance": "maybe"}]}), "row Z1: stance"),
        (json.dumps({"schema_version": 2, "rows": [{"id": "Z2"}]}), "row Z2: missing"),
        (json.dumps({"schema_version": 2, "rows": [good, good]}), "appears twice"),
        (json.dumps({"schema_version": 2, "rows": [good | {"source": "see the forum"}]}), "row Z1: source"),
        (json.dumps({"schema_version": 2, "rows": [good | {"source": "javascript:alert(1)"}]}), "row Z1: source"),
        (json.dumps({"schema_version": 2, "rows": [good | {"source": "https://"}]}), "row Z1: source"),
    ]:
        with pytest.raises(SpecdecUsageError, match=fragment) as raised:
            parse_evidence(document)
        assert "\n" not in str(raised.value)


def test_chip_of_reads_the_machine_class() -> None:
    assert chip_of("Apple-M4-Max-128GB") == ("M4 Max", 128)
    assert chip_of("Apple-M1-Max-64GB") == ("M1 Max", 64)
    assert chip_of("Apple-M4-16GB") == ("M4", 16)
    assert chip_of("Apple-M3-Ultra") == ("M3 Ultra", None)
    assert chip_of("NVIDIA-H200") is None
    assert chip_of("Linux-x86_64-cpu") is None


def test_rows_for_matches_memory_only_where_the_row_states_it() -> None:
    rows = load_evidence()
    on_32 = {row.id for row in rows_for("Apple-M1-Max-32GB", rows)}
    on_64 = {row.id for row in rows_for("Apple-M1-Max-64GB", rows)}
    assert "L1-think" in on_32 - on_64  # stated 32 GB
    assert "X3" in on_64 - on_32  # stated 64 GB
    assert "X5-d1" in on_32 & on_64  # memory not stated: chip alone
    assert rows_for("NVIDIA-H200", rows) == ()


def test_beside_result_gives_the_published_range_and_flags_a_clear_loss() -> None:
    agrees = beside_result("Apple-M4-Max-128GB", "mlx", 1.7, 1.6, 1.8)
    assert agrees == [
        "published on this chip: 1.56–1.93x, mlx-lm draft-model, 2 figures "
        f"{SUSPECT} (https://github.com/ml-explore/mlx-examples/issues/1281)"
    ]
    loses = beside_result("Apple-M4-Max-128GB", "mlx", 0.8, 0.7, 0.9)
    assert loses[0] == agrees[0]
    assert loses[1].startswith("contradicts published mlx-lm figures on this chip: measured 0.80x [0.70, 0.90]")
    assert "1.56x (M3-4bit, suspect)" in loses[1]
    assert "https://github.com/ml-explore/mlx-examples/issues/1281" in loses[1]


def test_beside_result_flags_a_win_against_published_losses_and_not_an_overlap() -> None:
    wins = beside_result("Apple-M1-Max-64GB", "llama-server", 1.4, 1.35, 1.45)
    contradictions = [line for line in wins if line.startswith("contradicts")]
    assert len(contradictions) == 1
    assert "is a speedup" in contradictions[0]
    assert "0.91x (L3)" in contradictions[0]
    assert "L2-n2" not in contradictions[0]  # published wins agree with a measured win
    straddles = beside_result("Apple-M1-Max-64GB", "llama-cpp", 1.0, 0.9, 1.1)
    assert straddles
    assert not any(line.startswith("contradicts") for line in straddles)
    loses = beside_result("Apple-M1-Max-64GB", "llama-cpp", 0.8, 0.75, 0.85)
    assert any(line.startswith("contradicts published llama.cpp") and "L2-n2" in line for line in loses)


@pytest.mark.parametrize(
    ("machine", "backend", "numbers"),
    [
        ("Apple-M4-Max-128GB", "mlx", (math.nan, math.nan, math.nan)),
        ("Apple-M4-Max-128GB", "mlx", (0.8, 0.9, 0.7)),
        ("Apple-M4-Max-128GB", "mlx", (math.inf, 0.0, math.inf)),
        ("Apple-M1-Max-64GB", "simulated", (1.0, 0.9, 1.1)),
        ("Apple-M9-Ultra-1024GB", "mlx", (1.0, 0.9, 1.1)),
        ("NVIDIA-H200", "llama-server", (1.0, 0.9, 1.1)),
        ("", "", (0.0, 0.0, 0.0)),
    ],
)
def test_beside_result_never_raises(machine: str, backend: str, numbers: tuple[float, float, float]) -> None:
    lines = beside_result(machine, backend, *numbers)
    assert all(isinstance(line, str) and "\n" not in line for line in lines)


def test_beside_result_leaves_hazards_out() -> None:
    lines = beside_result("Apple-M1-Pro-32GB", "llama-server", 0.9, 0.8, 1.0)
    assert not any("H2" in line or "0.07x" in line for line in lines)


def test_claims_table_counts_rows_per_claim_and_generation() -> None:
    table = claims_table()
    claim_a = {generation: (counts, ids) for claim, generation, counts, ids in table if claim == "a"}
    assert "M1" in claim_a
    counts, ids = claim_a["M1"]
    assert "support" in counts
    assert "contradict" in counts
    assert "X3" in ids
    assert "X4" in ids
    assert {row[0] for row in table} == {"a", "b", "c", "d", "e", "f", "g"}
    assert ("b", "-", "no published figures", "") in table
    assert not any("H1" in row[3] or "seed-" in row[3] for row in table)


def test_chips_sort_by_generation_then_tier() -> None:
    chips = ["RTX 4090", "M3 Ultra", "M1 Max", "M3", "M1 Pro", "M10", "M3 Pro"]
    assert sorted(chips, key=chip_sort_key) == ["M1 Pro", "M1 Max", "M3", "M3 Pro", "M3 Ultra", "M10", "RTX 4090"]


def test_evidence_plot_embeds_the_points_it_drew(tmp_path: Path) -> None:
    from PIL import Image

    rows = plottable(load_evidence())
    points = [PublishedPoint(r.chip or "", r.family, r.speedup or 0.0, r.roofline_suspect, r.id) for r in rows]
    own = [
        OwnPoint("M4 Max", "mlx-lm", 0.8, 0.7, 0.9, "tests/test_sd.py::test_mlx"),
        OwnPoint("M4 Max", "llama.cpp", 1.1, None, None, "tests/test_sd.py::test_gguf"),
    ]
    path = evidence_plot(points, own, tmp_path / "evidence.png", "published")
    with Image.open(path) as image:
        assert image.format == "PNG"
        drawn = json.loads(image.text["specdec"])
    published = [d for d in drawn if d["kind"] == "published"]
    assert len(published) == len(points) >= 70
    assert {(d["label"], d["speedup"], d["suspect"]) for d in published} == {
        (p.label, p.speedup, p.suspect) for p in points
    }
    assert [d["label"] for d in drawn if d["kind"] == "own"] == [o.label for o in own]
    assert not any(d["label"] in HAZARDS for d in drawn)


def test_evidence_plot_draws_an_empty_chart_without_failing(tmp_path: Path) -> None:
    from PIL import Image

    path = evidence_plot([], [], tmp_path / "empty.png", "nothing")
    with Image.open(path) as image:
        assert json.loads(image.text["specdec"]) == []


def test_a_sampled_result_is_set_beside_sampled_figures_only_and_a_greedy_one_beside_no_sampled_figure() -> None:
    (line,) = beside_result("Apple-M4-Max-128GB", "mlx", 0.8, 0.7, 0.9, sampling="T=0.7")
    assert line.startswith("published on this chip: ")
    assert line.endswith("figures, none saying it sampled — not set beside this T=0.7 result")
    assert beside_result("NVIDIA-H200", "mlx", 0.8, 0.7, 0.9, sampling="T=0.7") == []
    (sampled,) = beside_result("Apple-M5-Max-48GB", "mlx", 1.2, 1.1, 1.3, sampling="T=0.7")
    assert sampled == (
        "published on this chip, sampled, other runtimes: 1.52x at T=1 (R10-temp1, other) — beside this T=0.7 result"
    ), "mlx-vlm's DFlash is not mlx-lm's family: said so"
    (same,) = beside_result("Apple-M5-Max-48GB", "other", 1.2, 1.1, 1.3, sampling="T=0.7")
    assert same.startswith("published on this chip, sampled: 1.52x at T=1 (R10-temp1, other)")
    greedy = " ".join(beside_result("Apple-M5-Max-48GB", "mlx", 1.2, 1.1, 1.3))
    assert "1.52" not in greedy  # the T=1 figure is not set beside a greedy result


def test_the_2026_scan_puts_m6_m5_max_and_content_class_rows_in_the_evidence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The figures of research/sd-on-macs-2026-12.md: an M6 with a clear SD win, MLX moving DFlash2 on an M5 Max,
    and one M2 Ultra split by content class; `pytest-specdec evidence` lists the M6 ones on an M6."""
    from pytest_specdec.cli import main

    rows = {row.id: row for row in load_evidence()}
    m6 = [row for row in rows.values() if row.chip == "M6"]
    assert {row.speedup for row in m6} == {1.79, 1.53, 1.40, 1.5}
    assert all(row.source.startswith("https://") for row in m6)
    assert rows["M26-m5max-dflash2-mlx0.32.2"].speedup == 1.71
    assert [rows[f"M26-m2ultra-mtp-{c}"].speedup for c in ("code", "prose", "creative")] == [1.35, 1.08, 0.91]
    assert main(["evidence", "--machine", "Apple-M6-24GB"]) == 0
    shown = capsys.readouterr().out
    assert "published on Apple-M6-24GB: 3 row(s)" in shown
    assert "M26-m6-mtp-40k: mlx-vlm mtp Qwen3.8-27B 4-bit: 1.40x" in shown
