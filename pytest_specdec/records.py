"""Results as plain data: what a comparison measured, in the form baselines, JSON
reports and the ``specdec`` CLI share.

A :class:`ComparisonRecord` is built from a judged :class:`~pytest_specdec.claims.Outcome`
and is all a renderer or a baseline needs; it round-trips through JSON, validated by
pydantic on the way in so a hand-edited file fails with the field that is wrong.

**Results JSON** (``--specdec-json``, ``schema_version`` 1)::

    {"schema_version": 1, "specdec_version": "0.1.0", "machine_class": "...",
     "started": ISO-8601, "finished": ISO-8601,
     "machine_info": {...pytest-benchmark's machine info...},
     "commit_info": {...pytest-benchmark's commit info...},
     "comparisons": [ComparisonRecord, ...]}

Each comparison holds the arms, the speedup and acceptance intervals, tok/s per
arm, the verdict per bound, the raw per-pair samples and, when a baseline was
consulted, a :class:`CheckRecord` saying what changed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from pytest_specdec.claims import Outcome
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.stats import Interval

SCHEMA_VERSION = 1
T = TypeVar("T")


@dataclass(frozen=True)
class SampleRecord:
    """One paired trial: both arms' decode tok/s on one prompt."""

    prompt_id: str
    first: str
    baseline_tps: float
    treatment_tps: float

    @property
    def log_ratio(self) -> float:
        """``log(treatment ÷ baseline)``, the quantity the statistics work on."""
        return math.log(self.treatment_tps / self.baseline_tps)


@dataclass(frozen=True)
class BoundRecord:
    """The verdict on one stated bound."""

    metric: str
    kind: str
    bound: float
    verdict: str

    @property
    def label(self) -> str:
        """``speedup max=1.3``."""
        return f"{self.metric} {self.kind}={self.bound:g}"


@dataclass(frozen=True)
class CheckRecord:
    """How a result compares with its accepted baseline."""

    change: str  # new, flip, drift, re-confirmed, unchanged, accepted
    message: str
    baseline_speedup: Interval | None = None
    baseline_release: str | None = None
    provenance: str | None = None
    drift_ratio: float | None = None
    drift_p_value: float | None = None


@dataclass(frozen=True)
class TheoryRecord:
    """α, c, r_v and the speedup they predict (see :mod:`pytest_specdec.theory`)."""

    alpha: float
    gamma: int
    c: float | None
    r_v: float | None
    predicted: float | None
    break_even_alpha: float | None
    agrees: bool | None
    cause: str
    method: str
    text: str


@dataclass(frozen=True)
class ComparisonRecord:
    """Everything one paired comparison measured and concluded."""

    nodeid: str
    backend: str
    release: str
    versions: Mapping[str, str]
    device: str
    target: str
    draft: str | None
    model_digest: str
    profile: str
    category: str
    num_draft: int
    baseline_arm: str
    treatment_arm: str
    baseline_tps: float | None  # None: a published figure without rates
    treatment_tps: float | None
    speedup: Interval
    acceptance: Interval | None
    trials: int
    verdict: str
    gating: bool
    bounds: tuple[BoundRecord, ...] = ()
    claim_id: str | None = None
    claim_quote: str | None = None
    samples: tuple[SampleRecord, ...] = ()
    failure: str | None = None
    warning: str | None = None
    notes: tuple[str, ...] = ()
    check: CheckRecord | None = None
    theory: TheoryRecord | None = None
    scope: Mapping[str, str] = field(default_factory=dict)  # profile, arms and other context of the verdict

    @property
    def log_ratios(self) -> list[float]:
        """Per-pair log speedups (empty for published figures)."""
        return [s.log_ratio for s in self.samples]

    @property
    def bound_verdicts(self) -> dict[str, str]:
        """``{"speedup max=1.3": "holds"}``."""
        return {b.label: b.verdict for b in self.bounds}


@dataclass(frozen=True)
class RunRecord:
    """A whole run, as written by ``--specdec-json``."""

    machine_class: str
    started: str
    finished: str
    comparisons: tuple[ComparisonRecord, ...]
    machine_info: Mapping[str, Any] = field(default_factory=dict)
    commit_info: Mapping[str, Any] = field(default_factory=dict)
    specdec_version: str = ""
    schema_version: int = SCHEMA_VERSION

    @property
    def flips(self) -> list[ComparisonRecord]:
        """Comparisons whose conclusion changed against the baseline."""
        return [c for c in self.comparisons if c.check is not None and c.check.change == "flip"]


def specdec_version() -> str:
    """The installed pytest-specdec version."""
    try:
        return metadata.version("pytest-specdec")
    except metadata.PackageNotFoundError:
        return "unknown"


def record_outcome(outcome: Outcome, model_digest: str, notes: Sequence[str] = ()) -> ComparisonRecord:
    """Flatten a judged outcome into a record."""
    c = outcome.comparison
    claim = outcome.expect.claim
    return ComparisonRecord(
        nodeid=outcome.nodeid,
        backend=outcome.backend,
        release=outcome.fingerprint.release,
        versions=dict(outcome.fingerprint.versions),
        device=outcome.fingerprint.device,
        target=outcome.pair.target,
        draft=outcome.pair.draft,
        model_digest=model_digest,
        profile=outcome.profile,
        category=c.plan.category,
        num_draft=c.plan.treatment.num_draft,
        baseline_arm=c.plan.baseline.label,
        treatment_arm=c.plan.treatment.label,
        baseline_tps=c.arm_tps("baseline"),
        treatment_tps=c.arm_tps("treatment"),
        speedup=c.speedup,
        acceptance=c.acceptance,
        trials=len(c.pairs),
        verdict=outcome.verdict_text,
        gating=outcome.gating,
        bounds=tuple(BoundRecord(b.metric, b.kind, b.bound, b.verdict.value) for b in outcome.bound_verdicts),
        claim_id=claim.id if claim else None,
        claim_quote=claim.quote if claim else None,
        samples=tuple(
            SampleRecord(p.prompt_id, p.first, p.baseline.decode_tps, p.treatment.decode_tps) for p in c.pairs
        ),
        failure=outcome.failure,
        warning=outcome.warning,
        notes=tuple(notes),
    )


def to_jsonable(value: object) -> Any:
    """A dataclass tree as JSON-ready dicts and lists."""
    return asdict(value) if hasattr(value, "__dataclass_fields__") else value  # type: ignore[call-overload]


def dumps(document: object) -> str:
    """The house JSON style: sorted keys, indent 2, trailing newline."""
    return json.dumps(to_jsonable(document), sort_keys=True, indent=2, ensure_ascii=False, allow_nan=True) + "\n"


def validate(kind: type[T], data: object, where: str) -> T:
    """Build ``kind`` from parsed JSON, or a one-line error naming the field."""
    from pydantic import TypeAdapter, ValidationError

    try:
        return TypeAdapter(kind).validate_python(data)
    except ValidationError as error:
        first = error.errors()[0]
        location = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise SpecdecUsageError(
            f"{where}: field {location!r}: {first['msg'].lower()} — restore the file from version control or regenerate it"
        ) from None


def read_json(path: Path) -> object:
    """Parsed JSON, or a one-line error naming the file."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SpecdecUsageError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SpecdecUsageError(
            f"{path} is not valid JSON ({error}) — restore it from version control or delete it"
        ) from None


def check_schema(data: object, path: Path) -> Mapping[str, object]:
    """The top-level object, refusing unknown schema versions."""
    if not isinstance(data, dict):
        raise SpecdecUsageError(f"{path}: expected a JSON object at the top level — restore it from version control")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise SpecdecUsageError(
            f"{path}: schema_version {version!r} is not one this pytest-specdec ({specdec_version()}) reads "
            f"(it reads {SCHEMA_VERSION}) — upgrade pytest-specdec or restore the file"
        )
    return data


def load_run(path: Path) -> RunRecord:
    """A results JSON file written by ``--specdec-json``."""
    return validate(RunRecord, check_schema(read_json(path), path), str(path))
