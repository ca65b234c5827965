"""Shared fixtures: a per-session model cache, and stored records for the store, render and CLI tests."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

# pytester's in-process runs drop modules first imported inside them; native
# extensions such as numpy cannot be imported twice, so load them up front.
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

import pytest_specdec.backends.simulated.adapter  # noqa: F401
from pytest_specdec.axes import Conditions
from pytest_specdec.stats import Interval, Verdict
from pytest_specdec.store.records import (
    BoundRecord,
    Change,
    CheckRecord,
    ComparisonRecord,
    Conclusion,
    Judgement,
    Provenance,
    RunRecord,
    SampleRecord,
)

# The lab (studies/, not installed) is imported by its tests through a folder that holds a link to it and
# nothing else: the repository root on sys.path would let pytest's assertion rewriter take pytest_specdec
# from there, and pytester's in-process runs would then warn that it cannot rewrite it again.
LAB = Path(tempfile.mkdtemp(prefix="specdec-lab-"))
(LAB / "studies").symlink_to(Path(__file__).resolve().parents[1] / "studies", target_is_directory=True)
sys.path.append(str(LAB))


@pytest.fixture(scope="session", autouse=True)
def _wide_terminal() -> Iterator[None]:
    """In-process runs print the whole verdict table and each note on one line (fitting a narrow terminal is tested
    on its own, in a pseudo-terminal: tests/test_terminal_width.py)."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"
    yield
    if previous is None:
        os.environ.pop("COLUMNS", None)
    else:
        os.environ["COLUMNS"] = previous


def _folder_in(variable: str, path: Path) -> Iterator[Path]:
    """``variable`` points at ``path`` for the session, then is put back as it was."""
    previous = os.environ.get(variable)
    os.environ[variable] = str(path)
    yield path
    if previous is None:
        os.environ.pop(variable, None)
    else:
        os.environ[variable] = previous


@pytest.fixture(scope="session", autouse=True)
def _model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep synthetic models out of the user's cache (shared by in-process pytester runs)."""
    yield from _folder_in("SPECDEC_CACHE_DIR", tmp_path_factory.mktemp("specdec-models"))


@pytest.fixture(scope="session", autouse=True)
def _timings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep tests' timings out of the user's cache: each run's expected duration starts unknown here."""
    yield from _folder_in("SPECDEC_TIMINGS_DIR", tmp_path_factory.mktemp("specdec-timings"))


RecordFactory = Callable[[str, float, str, CheckRecord | None], ComparisonRecord]


def _record(category: str, speedup: float, verdict: str, check: CheckRecord | None) -> ComparisonRecord:
    """A stored comparison of the seed's mlx pair on ``category`` with four pairs of samples."""
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
        baseline_arm="plain",
        treatment_arm="sd",
        baseline_tps=41.5,
        treatment_tps=41.5 * speedup,
        speedup=Interval(speedup, speedup * 0.95, speedup * 1.05, 0.95, 4),
        acceptance=Interval(0.7, 0.65, 0.75, 0.95, 4),
        trials=4,
        judgement=Judgement(Conclusion(verdict), bounds=(BoundRecord("speedup", "max", 1.3, Verdict(verdict)),)),
        claim_id="d",
        claim_quote="0.9x-1.3x at best",
        samples=samples,
        check=check,
        conditions=Conditions({"num_draft": 3}),
    )


@pytest.fixture
def make_record() -> RecordFactory:
    """Build a stored comparison: ``make_record(category, speedup, verdict, check)``."""
    return _record


@pytest.fixture
def sample_run() -> RunRecord:
    """A two-comparison run on an M1 Max: one re-confirmed, one flipped (the golden reports' input)."""
    flip = CheckRecord(
        Change.FLIP,
        "CONCLUSION CHANGED on Apple-M1-Max-64GB: mlx-lm 0.32.2 → 0.33.0: speedup 0.94x [0.90, 0.98] → "
        "1.41x [1.34, 1.48]; claim max=1.3 now refuted",
        Interval(0.94, 0.90, 0.98, 0.95, 12),
        "mlx-lm 0.32.2",
        Provenance.MEASURED,
    )
    same = CheckRecord(
        Change.RECONFIRMED,
        "re-confirmed on mlx-lm 0.33.0",
        Interval(1.0, 0.97, 1.03, 0.95, 9),
        "mlx-lm 0.32.2",
        Provenance.MEASURED,
    )
    return RunRecord(
        machine_class="Apple-M1-Max-64GB",
        started="2026-11-30T01:00:00+00:00",
        finished="2026-11-30T01:05:00+00:00",
        comparisons=(_record("prose", 1.0, "holds", same), _record("code", 1.41, "refuted", flip)),
        machine_info={"python_version": "3.12.7", "system": "Darwin", "machine": "arm64"},
        commit_info={"id": "0123abcd", "dirty": False, "branch": "main"},
        specdec_version="0.1.0",
    )
