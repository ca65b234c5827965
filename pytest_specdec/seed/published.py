"""The document's own figures as ``published`` baselines for ``Apple-M1-Max-64GB``.

So the first run on such a Mac compares against what the document claimed: a verdict
that flips against a published figure fails with "CONCLUSION CHANGED … against the
published figure". The document gives bounds and a few plain-decode rates, not
intervals; a figure it states as a range becomes that interval, a bound becomes a
point at the bound.
"""

from __future__ import annotations

import math

from pytest_specdec.seed.document import CLAIMS, DOCUMENT, SEED_MACHINE
from pytest_specdec.stats import Interval, Verdict
from pytest_specdec.store.baselines import PUBLISHED_DIGEST, BaselineEntry, BaselineFile, baseline_key
from pytest_specdec.store.records import BoundRecord, ComparisonRecord, Conclusion, Provenance

PUBLISHED_AT = "2026-01-01T00:00:00+00:00"  # when the write-up circulated; the figures are older


def _record(
    nodeid: str,
    backend: str,
    category: str,
    claim_id: str,
    *,
    speedup: Interval,
    plain_tps: float | None,
    bound: float,
    target: str,
    draft: str | None,
) -> ComparisonRecord:
    return ComparisonRecord(
        nodeid=nodeid,
        backend=backend,
        release="as published",
        versions={},
        device="Apple M1 Max (64 GB)",
        target=target,
        draft=draft,
        model_digest=PUBLISHED_DIGEST,
        profile="seed",
        category=category,
        num_draft=3,
        baseline_arm="plain",
        treatment_arm="sd",
        baseline_tps=plain_tps,
        treatment_tps=None if plain_tps is None else plain_tps * speedup.estimate,
        speedup=speedup,
        acceptance=None,
        trials=0,
        verdict=Conclusion.HOLDS,
        gating=True,
        bounds=(BoundRecord("speedup", "max", bound, Verdict.HOLDS),),
        claim_id=claim_id,
        claim_quote=CLAIMS[claim_id].quote,
    )


def _entry(record: ComparisonRecord, claim_id: str) -> tuple[str, BaselineEntry]:
    source = f"{DOCUMENT}, section '{CLAIMS[claim_id].section}'"
    return baseline_key(record), BaselineEntry(record, Provenance.PUBLISHED, PUBLISHED_AT, source=source)


def published_files() -> list[BaselineFile]:
    """One baseline file per backend the document's claims a, c and d speak about."""
    at_most_one = Interval(1.0, 1.0, 1.0, 0.95, 0)
    d_range = Interval(math.sqrt(0.9 * 1.3), 0.9, 1.3, 0.95, 0)
    ollama = dict(
        _entry(
            _record(
                f"benchmarks/test_claim_a_ollama_auto_mtp.py::test_ollama_auto_mtp_is_net_zero_or_negative[{tag}]",
                "ollama",
                "code",
                "a",
                speedup=at_most_one,
                plain_tps=tps,
                bound=1.0,
                target=tag,
                draft="draft_num_predict",
            ),
            "a",
        )
        for tag, tps in (("qwen3-coder:30b", 55.7), ("gemma4:26b-nvfp4", 52.8), ("deepseek-r1:14b", 62.0))
    )
    llama_server = dict(
        _entry(
            _record(
                f"benchmarks/test_claim_c_llama_cpp.py::test_llama_cpp_sd_overhead_exceeds_benefit[{category}]",
                "llama-server",
                category,
                "c",
                speedup=at_most_one,
                plain_tps=None,
                bound=1.0,
                target="as published",
                draft="draft-mtp",
            ),
            "c",
        )
        for category in ("code", "copy", "prose", "unpredictable")
    )
    mlx = dict(
        _entry(
            _record(
                f"benchmarks/test_claim_d_mlx_draft.py::test_mlx_draft_model_gives_at_most_1_3x[{category}]",
                "mlx",
                category,
                "d",
                speedup=d_range,
                plain_tps=None,
                bound=1.3,
                target="mlx-community/Qwen2.5-7B-Instruct-4bit",
                draft="mlx-community/Qwen2.5-0.5B-Instruct-4bit",
            ),
            "d",
        )
        for category in ("code", "copy", "unpredictable")
    )
    return [
        BaselineFile(SEED_MACHINE, backend, dict(sorted(entries.items())))
        for backend, entries in (("ollama", ollama), ("llama-server", llama_server), ("mlx", mlx))
    ]
