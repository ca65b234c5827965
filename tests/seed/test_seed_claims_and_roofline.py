"""Roofline plausibility, memory fit, the seed claims, published baselines and the benchmarks as a whole."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from pytest_specdec.cli import main
from pytest_specdec.hardware import parse_pmset, peak_bandwidth_gbs
from pytest_specdec.roofline import GB, ModelFootprint, check_plausibility, memory_fit, roofline_tps
from pytest_specdec.seed.document import (
    CLAIMS,
    DEEPSEEK_R1_14B,
    MTPLX_DRAFT_BF16,
    MTPLX_TARGET_BF16,
    SEED_BANDWIDTH_GBS,
    SEED_USABLE_BYTES,
)

REPO = Path(__file__).resolve().parents[2]


def test_roofline_flags_the_documents_deepseek_figure() -> None:
    check = check_plausibility("deepseek-r1:14b", 62.0, DEEPSEEK_R1_14B, SEED_BANDWIDTH_GBS, context=2048)
    assert check.ceiling == pytest.approx(400e9 / (9.0e9 + 2048 * 196_608))
    assert not check.plausible
    assert "IMPLAUSIBLE" in check.describe()


def test_roofline_accepts_a_known_measurement() -> None:
    llama_8b_q4 = ModelFootprint("Llama 3.1 8B Q4_K_M", 4.92 * GB)
    check = check_plausibility("M1 Max tg128", 46.2, llama_8b_q4, peak_bandwidth_gbs("Apple M1 Max") or 0)
    assert check.plausible
    assert 0.5 < check.fraction < 0.9


def test_mixture_of_experts_reads_only_active_weights() -> None:
    moe = ModelFootprint("30B-A3B", 18e9, 2e9)
    assert roofline_tps(400, moe.bytes_per_token()) == pytest.approx(200.0)
    assert moe.resident_bytes() == 18e9


def test_claim_b_arithmetic_does_not_fit_but_a_small_pair_does() -> None:
    fit = memory_fit(MTPLX_TARGET_BF16, MTPLX_DRAFT_BF16, 0, SEED_USABLE_BYTES)
    assert fit.needed_bytes == pytest.approx(74e9)
    assert not fit.fits
    assert fit.describe().startswith("does not fit: 60.0 GB target")
    assert memory_fit(ModelFootprint("7B", 4.7e9), ModelFootprint("0.5B", 0.4e9), 0, SEED_USABLE_BYTES).fits


@pytest.mark.parametrize(
    ("chip", "cores", "expected"),
    [
        ("Apple M1 Max", None, 400.0),
        ("Apple M3 Max", 30, 300.0),
        ("Apple M4 Pro", None, 273.0),
        ("Apple M5", None, 153.0),
        ("Apple M5 Max", 40, 614.0),
        ("Apple M5 Max", 32, 460.0),
        ("Apple M5 Ultra", None, 1228.0),
        ("Apple M6", None, 170.0),
        ("NVIDIA H200", None, 4800.0),
        ("NVIDIA H100 80GB HBM3", None, 3350.0),
    ],
)
def test_bandwidth_table(chip: str, cores: int | None, expected: float) -> None:
    assert peak_bandwidth_gbs(chip, cores) == expected
    assert peak_bandwidth_gbs("Intel Xeon Gold") is None


def test_a_chip_the_table_lacks_is_unknown_never_its_nearest_name() -> None:
    """Apple M5 Ultra once read as M5 (153 GB/s), and an M6 Pro would read as M6: a generation and tier match
    whole, or not at all; every row names its source."""
    from pytest_specdec.hardware import chip_spec, chip_table

    assert peak_bandwidth_gbs("Apple M6 Pro") is None
    assert peak_bandwidth_gbs("Apple M10") is None, "M10 is not M1"
    assert peak_bandwidth_gbs("Apple M1") == 68.25
    spec = chip_spec("Apple M5 Ultra")
    assert spec is not None
    assert "2 x 614" in spec.source
    assert all(row.source.strip() for row in chip_table())
    assert len({(row.name, row.gpu_cores) for row in chip_table()}) == len(chip_table()), "one row per chip and bin"


AC = "Now drawing from 'AC Power'\n -InternalBattery-0 (id=1)\t100%; charged; 0:00 remaining present: true"
BATTERY = "Now drawing from 'Battery Power'\n -InternalBattery-0 (id=1)\t80%; discharging"
SETTINGS = "System-wide power settings:\nCurrently in use:\n lowpowermode         {}\n sleep                0"
COOL = "Note: No thermal warning level has been recorded\nNote: No performance warning level has been recorded"
HOT = "CPU_Scheduler_Limit \t= 100\nCPU_Available_CPUs \t= 10\nCPU_Speed_Limit \t= 73"


@pytest.mark.parametrize(
    ("battery", "low_power", "thermal", "fit", "reason"),
    [
        (AC, "0", COOL, True, "fit"),
        (BATTERY, "0", COOL, False, "on battery power"),
        (AC, "1", COOL, False, "Low Power Mode is on"),
        (AC, "0", HOT, False, "under thermal pressure (CPU speed limit 73 %)"),
    ],
)
def test_environment_fitness_from_pmset(battery: str, low_power: str, thermal: str, fit: bool, reason: str) -> None:
    judged = parse_pmset(battery, SETTINGS.format(low_power), thermal)
    assert judged.fit is fit
    assert judged.reason.startswith(reason)


def test_every_claim_has_a_quote_from_the_document() -> None:
    document = REPO.parent / "shared" / "seed" / "speculative-decoding-apple-silicon.md"
    if not document.is_file():
        pytest.skip("the seed document is not next to this checkout")
    text = document.read_text(encoding="utf-8")
    for claim in CLAIMS.values():
        assert claim.quote in text, claim.id


def test_claims_command_lists_every_claim_with_its_latest_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = tmp_path / "history"
    history.mkdir()
    line = {
        "time": "2026-11-30T00:00:00+00:00",
        "claim_id": "d",
        "verdict": "reference: refuted",
        "profile": "embedded",
        "machine_class": "Linux-x86_64-cpu",
        "speedup": {"estimate": 2.18, "low": 1.85, "high": 2.56},
        "release": "mlx-lm 0.32.2",
        "backend": "mlx",
        "key": "benchmarks/test_claim_d_mlx_draft.py::test_mlx_draft_model_gives_at_most_1_3x[code] [code, γ=3, t + d @x]",
        "nodeid": "benchmarks/test_claim_d_mlx_draft.py::test_mlx_draft_model_gives_at_most_1_3x[code]",
        "category": "code",
    }
    (history / "Linux-x86_64-cpu.jsonl").write_text(json.dumps(line) + "\n")
    assert main(["claims", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for claim_id in ("a", "b", "c", "d", "e", "f", "g", "premise"):
        assert f"\n{claim_id} " in out
    assert "reference: refuted (embedded, Linux-x86_64-cpu" in out


def test_benchmarks_give_every_claim_a_verdict_or_a_reason(tmp_path: Path) -> None:
    """The whole benchmarks/ folder on the embedded profile: nothing passes silently."""
    pytest.importorskip("llama_cpp")
    junit = tmp_path / "junit.xml"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(REPO / "benchmarks"),
            "--backend=llama-cpp",
            "-p",
            "no:cacheprovider",
            "--specdec-min-trials=3",
            "--specdec-max-trials=3",
            "--specdec-max-tokens=12",
            f"--specdec-baselines={tmp_path / 'baselines'}",
            f"--junitxml={junit}",
            "-q",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-2000:]
    cases = ET.parse(junit).getroot().iter("testcase")
    seen_files = set()
    for case in cases:
        seen_files.add(case.get("classname", "").rsplit(".", 1)[-1])
        skipped = case.find("skipped")
        properties = {p.get("name") for p in case.iter("property")}
        if skipped is not None:
            said = skipped.get("message") or ""
            assert "does not apply" in said or "could not run here" in said, case.get("name")
        elif case.find("failure") is None:
            measured = "specdec_verdict" in properties
            assert measured or case.get("name", "").startswith(
                ("test_published", "test_document", "test_apple", "test_verifying")
            ), case.get("name")
    for claim in ("a_ollama", "b_mtplx", "c_llama", "d_mlx", "e_flash", "f_smaller", "g_bandwidth"):
        assert any(claim in name for name in seen_files), claim


def test_claims_that_do_not_apply_are_said_once_per_run_and_apart_from_could_not_run(tmp_path: Path) -> None:
    """Three words that never mix: does not apply (one line), could not run, and (in the table) SD never engaged."""
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "benchmarks/", "--backend=simulated", "-rs", "-p", "no:cacheprovider",
         f"--specdec-baselines={tmp_path}"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    apply = [line for line in skipped if "does not apply to --backend=simulated" in line]
    assert len(apply) == 1, skipped
    assert re.match(r"SKIPPED \[(1[0-9]|[2-9][0-9])\]", apply[0]), "every claim for other backends, in one line"
    assert all("does not apply" in line or "could not run here:" in line for line in skipped)
