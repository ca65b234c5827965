"""Machine-readable exports of a run: the results JSON and pytest-benchmark's format.

Both are pure: a :class:`~pytest_specdec.store.records.RunRecord` in, a JSON-ready dict out.
"""

from __future__ import annotations

from typing import Any

from pytest_specdec.store.files import to_jsonable
from pytest_specdec.store.records import ComparisonRecord, RunRecord


def results_document(run: RunRecord) -> dict[str, Any]:
    """The ``--specdec-json`` document (``schema_version`` 1, see :mod:`pytest_specdec.store.records`)."""
    document: dict[str, Any] = to_jsonable(run)
    return document


def _arm_benchmark(record: ComparisonRecord, arm: str, tps: list[float], when: str) -> dict[str, Any]:
    from pytest_benchmark.stats import Stats

    stats = Stats()
    for value in tps:
        stats.update(1.0 / value)  # seconds per decoded token: ``ops`` is then tok/s
    summary: dict[str, Any] = stats.as_dict()
    summary["data"] = list(stats.data)
    summary["iterations"] = 1
    label = record.baseline_arm if arm == "baseline" else record.treatment_arm
    return {
        "group": f"{record.backend} {record.category}",
        "name": f"{record.nodeid.rsplit('::', 1)[-1]}[{record.category}-{label}]",
        "fullname": f"{record.nodeid}[{record.category}-{label}]",
        "params": {"category": record.category, "arm": label, "num_draft": record.num_draft},
        "param": f"{record.category}-{label}",
        "extra_info": {
            "unit": "seconds per decoded token; ops = decode tok/s",
            "backend": record.backend,
            "release": record.release,
            "target": record.target,
            "draft": record.draft,
            "speedup": record.speedup.estimate,
            "verdict": record.judgement.shown,
            "measured": when,
        },
        "options": {"timer": "perf_counter", "disable_gc": False, "min_rounds": len(tps)},
        "stats": summary,
    }


def benchmark_document(run: RunRecord, pytest_benchmark_version: str) -> dict[str, Any]:
    """Decode tok/s per arm in pytest-benchmark's JSON layout (``pytest-benchmark compare`` reads it)."""
    benchmarks = []
    for record in run.comparisons:
        if not record.samples:
            continue
        benchmarks.append(_arm_benchmark(record, "baseline", [s.baseline_tps for s in record.samples], run.finished))
        benchmarks.append(_arm_benchmark(record, "treatment", [s.treatment_tps for s in record.samples], run.finished))
    return {
        "machine_info": dict(run.machine_info),
        "commit_info": dict(run.commit_info),
        "benchmarks": benchmarks,
        "datetime": run.finished,
        "version": pytest_benchmark_version,
    }
