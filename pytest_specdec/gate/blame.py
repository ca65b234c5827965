"""The confirm step's same-night A/B: each flipped comparison measured on the old and the new release together.

When tonight's upgrade changed the leg's packages and the backend's release lives in
its Python environment (``BackendSpec.in_process``), set-up built the old environment
from the hashed lock beside the upgraded one (``.gate-venv-old``). Each flipped
comparison is then measured again on both releases at once, paired and interleaved,
each release in a worker process of its own (:class:`~pytest_specdec.backends.release_pair.ReleasePair`),
and :func:`~pytest_specdec.gate.change.blame` decides: the release changed the
conclusion (confirmed), the machine moved, or a counter changed its meaning. Where no
old environment can exist (a server installed outside the venv), the flip is re-run on
the upgraded machine instead, and the night says so.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from pytest_specdec.backends import registered_backends
from pytest_specdec.backends.base import Arm, ModelPair
from pytest_specdec.backends.release_pair import ReleasePair
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import BackendRuntimeError, SpecdecUsageError
from pytest_specdec.gate.change import Blame, Call, blame
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.release_ab import run_release_ab
from pytest_specdec.stats import Verdict
from pytest_specdec.store.baselines import BaselineStore
from pytest_specdec.store.records import ComparisonRecord

OLD_VENV = Path(".gate-venv-old")
AB_PAIRS = 96  # quadruples per flipped comparison (benchmarks/release_change.py measured the rule at this budget)


def old_python() -> Path | None:
    """The old release's interpreter, when set-up built one tonight."""
    python = OLD_VENV / "bin" / "python"
    return python if python.is_file() else None


def can_ab(backend: str) -> bool:
    """Whether two releases of ``backend`` can run side by side (its release lives in the venv)."""
    spec = registered_backends().get(backend)
    return spec is not None and spec.in_process


def backend_options(arguments: Sequence[str]) -> dict[str, str]:
    """``--specdec-backend-option K=V`` pairs of the leg's pytest arguments."""
    words = shlex.split(" ".join(arguments))
    found: dict[str, str] = {}
    for index, word in enumerate(words):
        value = word.split("=", 1)[1] if word.startswith("--specdec-backend-option=") else None
        if word == "--specdec-backend-option" and index + 1 < len(words):
            value = words[index + 1]
        if value and "=" in value:
            key, _, setting = value.partition("=")
            found[key.strip()] = setting.strip()
    return found


def _plan(record: ComparisonRecord) -> ComparisonPlan:
    kind = record.scope.get("prompts", "instruction")
    return ComparisonPlan(
        record.category, prompts_for(record.category, kind), Arm("plain"),
        Arm("sd", speculative=True, num_draft=record.num_draft),
        max_tokens=int(record.scope.get("max_tokens", "32")), min_trials=AB_PAIRS, max_trials=AB_PAIRS,
        confidence=record.speedup.confidence,
    )  # fmt: skip


def _baseline_verdict(record: ComparisonRecord, label: str, baselines: Path, machine_class: str) -> Verdict | None:
    entry = BaselineStore(baselines, machine_class).lookup(record)
    return entry.result.judgement.bound_verdicts.get(label) if entry is not None else None


def ab_flips(
    flips: Sequence[ComparisonRecord], new_python: str, arguments: Sequence[str], baselines: Path, machine_class: str
) -> dict[tuple[str, str], Blame]:
    """Each flipped comparison on both releases tonight; the blame per (node id, category)."""
    old = old_python()
    assert old is not None
    calls: dict[tuple[str, str], Blame] = {}
    options = backend_options(arguments)
    for record in flips:
        pair = ModelPair(record.target, record.draft)
        try:
            releases = ReleasePair(str(old), new_python, record.backend, pair, options)
        except (SpecdecUsageError, BackendRuntimeError) as error:
            stands = f"the old-versus-new run could not start ({error}) — the flip stands"
            calls[(record.nodeid, record.category)] = Blame(Call.RELEASE_CHANGED, stands)
            continue
        try:
            ab = run_release_ab(releases, _plan(record))
        except BackendRuntimeError as error:
            stands = f"the old-versus-new run failed ({error}) — the flip stands"
            calls[(record.nodeid, record.category)] = Blame(Call.RELEASE_CHANGED, stands)
            continue
        finally:
            releases.close()
        chosen = Blame(Call.NO_FLIP, "no speedup bound of this comparison has an accepted verdict")
        for bound in (b for b in record.judgement.bounds if b.metric == "speedup"):
            before = _baseline_verdict(record, bound.label, baselines, machine_class)
            if before is not None:
                chosen = blame(ab, bound.kind, bound.bound, before)
                if chosen.call is not Call.NO_FLIP:
                    break
        calls[(record.nodeid, record.category)] = chosen
    return calls
