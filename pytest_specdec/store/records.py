"""Results as plain data: what a comparison measured, in the form baselines, JSON
reports and the ``specdec`` CLI share.

A :class:`ComparisonRecord` is built from a judged outcome (:func:`pytest_specdec.claims.record_outcome`)
and is all a renderer or a baseline needs; it round-trips through JSON, validated by
pydantic on the way in (:mod:`pytest_specdec.store.files`) so a hand-edited file fails
with the field that is wrong. States are enums whose values are the stored strings.

**Results JSON** (``--specdec-json``, ``schema_version`` 3)::

    {"schema_version": 3, "specdec_version": "0.1.0", "machine_class": "...",
     "started": ISO-8601, "finished": ISO-8601,
     "machine_info": {...pytest-benchmark's machine info...},
     "commit_info": {...pytest-benchmark's commit info...},
     "comparisons": [ComparisonRecord, ...],
     "summary": [run-level lines: sweeps, specdec.note; optional],
     "command": ["pytest", "benchmarks/", "--backend=mlx", ...; optional]}

Each comparison holds the arms, its :class:`~pytest_specdec.axes.Conditions` (every axis it
ran under, as an object: ``{"num_draft": 3, "sampling": {"temperature": 0.7, "top_p": 1.0}}``),
the speedup and acceptance intervals, tok/s per arm, its :class:`Judgement` (the conclusion, its role, the verdict per bound and why it
failed), the raw per-pair samples and, when a baseline was consulted, a
:class:`CheckRecord` saying what changed.

Schema versions: 1 kept the judgement flat on the comparison (``verdict`` with
``reference: …`` forms, ``gating``, ``bounds``, ``failure``, ``warning`` and
``scope.role``); 2 kept γ as ``num_draft`` and the other conditions as strings in ``scope``
(``sampling``, ``speedup_of``, ``context``, ``prompt_tokens``). :func:`migrate_comparison`
reads both as 3, with the same baseline keys. Files are written as 3.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pytest_specdec.axes import DEFAULT_CONDITIONS, Conditions
from pytest_specdec.axes.num_draft import NUM_DRAFT
from pytest_specdec.backends.base import NotRun
from pytest_specdec.machine_load import MachineLoad
from pytest_specdec.stats import Interval, Verdict
from pytest_specdec.store.design import Design

SCHEMA_VERSION = 3
READABLE_SCHEMAS = (1, 2, 3)  # 1 and 2 are migrated on read
# What schema 2 kept in ``scope`` that is now a condition (or, for prompt_tokens, each sample's own count).
MOVED_FROM_SCOPE = ("sampling", "speedup_of", "context", "prompt_tokens")
HISTORY_SCHEMA_VERSION = 1  # history lines (JSON Lines) keep their own, unchanged shape

# The measurement protocol: what makes two results comparable apart from the backend's
# release. A result measured under another protocol is re-baselined, never a flip.
#   1  both llama-cpp arms on one Llama(logits_all=True); instruction prompts for every
#      model; 95 % intervals with Bonferroni-split looks (results written before the
#      field existed carry no "protocol" and are read as 1)
#   2  each arm as its users run it (llama-cpp's plain arm on its own Llama); continuation
#      prompts for base models; group-sequential design at 98 % (HSD spending, blocks)
#   3  the speedup is total plain ÷ SD decode time (stalls left out), pairs in coin-flipped
#      balanced order, a t interval on half the residual df (it was a stratified Huber
#      location of per-pair log ratios, with the arm order alternating)
#   4  llama-cpp's second-model draft reads the prompt before the first token, as llama.cpp's
#      server does: its prefill is time to first token, no longer decode time
#   5  in-process backends send a measured generation's first token, then the rest in one burst:
#      no per-token Python in the decode window (both arms' tok/s up to about 1 % higher)
MEASUREMENT_PROTOCOL = 5


class Conclusion(StrEnum):
    """What a comparison concluded.

    ``failed``: the lossless check failed, so no bound was judged. ``not measurable``: the
    arms cannot differ (SD not engaged, or both speculate). ``measured``: no bound was stated.
    """

    HOLDS = "holds"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"
    FAILED = "failed"
    NOT_MEASURABLE = "not measurable"
    MEASURED = "measured"

    @classmethod
    def of(cls, verdict: Verdict) -> Conclusion:
        """The conclusion of a three-valued verdict."""
        return cls(verdict.value)

    @property
    def verdict(self) -> Verdict | None:
        """The three-valued verdict behind it (``None`` for failed, not measurable and measured)."""
        return Verdict(self.value) if self.value in Verdict._value2member_map_ else None

    @property
    def says_nothing_about_speed(self) -> bool:
        """A lossless failure, or arms that cannot differ: never a baseline, never compared."""
        return self in (Conclusion.FAILED, Conclusion.NOT_MEASURABLE)


class Role(StrEnum):
    """Whether a comparison's verdict gates the run."""

    GATING = "gating"
    OTHER_PROFILE = "other-profile"  # the claim was made for another model profile: shown, never gating
    REFERENCE_ROW = "reference-row"  # SD against the backend's own plain mode, beside the verdict row


class Change(StrEnum):
    """What a result says against its accepted baseline."""

    NEW = "new"
    FLIP = "flip"
    DRIFT = "drift"
    RECONFIRMED = "re-confirmed"  # the same decisive verdict on a new release
    UNDECIDED = "undecided"  # inconclusive now against a decisive baseline: shown, never alerting
    REBASELINE = "re-baseline"  # the baseline was measured under another protocol: a candidate, never a flip
    ACCEPTANCE_FELL = "acceptance fell"  # the verdict stands, but drafts are accepted far less than accepted
    UNCHANGED = "unchanged"


class Provenance(StrEnum):
    """Where an accepted baseline came from."""

    MEASURED = "measured"
    PUBLISHED = "published"


@dataclass(frozen=True)
class SampleRecord:
    """One paired trial: both arms' decode tok/s on one prompt, each arm's time to first token and, where kept,
    the counts a reader needs to recompute the comparison from its pairs alone (``pytest-specdec validate``)."""

    prompt_id: str
    first: str
    baseline_tps: float
    treatment_tps: float
    baseline_first_token_s: float | None = None  # None: written before it was kept
    treatment_first_token_s: float | None = None
    prompt_tokens: int | None = None  # the prompt's tokens as the backend counted them (None: not kept)
    decode_tokens: int | None = None  # the plain arm's decode tokens: both arms' seconds are for these
    drafted: int | None = None  # the SD arm's drafted tokens, as the backend counted them (None: not kept)
    accepted: int | None = None  # of which the target accepted
    treatment_decode_tokens: int | None = None  # the SD arm's own decode tokens (sampled arms may stop apart)

    def seconds_of(self, end_to_end: bool) -> tuple[float, float] | None:
        """Each arm's seconds for the plain arm's tokens (decode, or with each arm's first token added), as
        :meth:`pytest_specdec.measure.Pair.seconds_of` reads them; ``None`` where the counts were not kept.

        >>> SampleRecord("p", "sd", 100.0, 200.0, 0.5, 0.25, decode_tokens=50).seconds_of(end_to_end=True)
        (1.0, 0.5)
        """
        if self.decode_tokens is None:
            return None
        plain, sd = self.decode_tokens / self.baseline_tps, self.decode_tokens / self.treatment_tps
        if not end_to_end:
            return plain, sd
        if self.baseline_first_token_s is None or self.treatment_first_token_s is None:
            return None
        return plain + self.baseline_first_token_s, sd + self.treatment_first_token_s

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
    verdict: Verdict

    @property
    def label(self) -> str:
        """``speedup max=1.3``."""
        return f"{self.metric} {self.kind}={self.bound:g}"


@dataclass(frozen=True)
class Judgement:
    """A comparison judged against its test's markers: the one value every reader takes a verdict from.

    Built once by :func:`pytest_specdec.claims.judge_outcome`; the ledger alone turns it
    (with the baseline check) into pass or fail.
    """

    conclusion: Conclusion
    role: Role = Role.GATING
    bounds: tuple[BoundRecord, ...] = ()
    failure: str | None = None  # why the comparison itself fails: lossless, not engaged, refuted, strict
    warning: str | None = None  # inconclusive within the budget
    not_run: NotRun | None = None  # not engaged: the class of the engine's own reason, where it gave one

    @property
    def gating(self) -> bool:
        """Whether the verdict decides pass or fail."""
        return self.role is Role.GATING

    @property
    def shown(self) -> str:
        """The verdict column: ``holds``, or ``reference: holds`` where it does not gate."""
        if self.conclusion.verdict is not None and not self.gating:
            return f"reference: {self.conclusion.value}"
        return self.conclusion.value

    @property
    def bound_verdicts(self) -> dict[str, Verdict]:
        """``{"speedup max=1.3": "holds"}``."""
        return {b.label: b.verdict for b in self.bounds}


@dataclass(frozen=True)
class CheckRecord:
    """How a result compares with its accepted baseline."""

    change: Change
    message: str
    baseline_speedup: Interval | None = None
    baseline_release: str | None = None
    provenance: Provenance | None = None
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
    baseline_arm: str
    treatment_arm: str
    baseline_tps: float | None  # None: a published figure without rates
    treatment_tps: float | None
    speedup: Interval
    acceptance: Interval | None
    trials: int
    judgement: Judgement
    claim_id: str | None = None
    claim_quote: str | None = None
    samples: tuple[SampleRecord, ...] = ()
    notes: tuple[str, ...] = ()
    check: CheckRecord | None = None
    theory: TheoryRecord | None = None
    scope: Mapping[str, str] = field(default_factory=dict)  # profile, arms, prompts: what the verdict is about
    conditions: Conditions = DEFAULT_CONDITIONS  # every axis it ran under (γ always): part of its baseline key
    # The speedup the verdict does not read (end to end where it reads decode, or the reverse); None before
    # it was kept, or where fewer than two pairs ran.
    other_speedup: Interval | None = None
    protocol: int = 1  # MEASUREMENT_PROTOCOL it was measured under (absent in files written before it: 1)
    load: MachineLoad | None = None  # how busy the machine was while it measured (None: not read, or before it was)

    @property
    def log_ratios(self) -> list[float]:
        """Per-pair log speedups (empty for published figures)."""
        return [s.log_ratio for s in self.samples]

    @property
    def design(self) -> Design:
        """Its design and what it observed, read from ``scope`` (:mod:`pytest_specdec.store.design`)."""
        return Design.of(self.scope)

    @property
    def num_draft(self) -> int:
        """γ, as its conditions keep it (``0``: the engine picked the draft length, or no arm drafted)."""
        return self.conditions.get(NUM_DRAFT) or 0


class Unmeasured(StrEnum):
    """Why a test kept no result, said by the plugin as it happened (the gate reads this, never a message's words)."""

    CRASHED = "crashed"  # the backend failed while measuring, or the test errored before or after it
    REFUSED = "refused"  # refused before measuring: its own arguments, or the backend
    MODEL_UNAVAILABLE = "model not available"  # its model (or draft) is absent or cannot be loaded
    PLAIN_SPECULATES = "plain arm speculates"  # the plain arm drafted although started not to: nothing to compare


@dataclass(frozen=True)
class UnmeasuredTest:
    """A test that measured nothing, and the one line it failed with."""

    nodeid: str
    kind: Unmeasured
    line: str


MEMORY_KEY = "specdec_memory_bytes"  # machine_info's memory: pytest-benchmark's info has none


@dataclass(frozen=True)
class RunRecord:
    """A whole run, as written by ``--specdec-json``.

    ``machine_info`` is pytest-benchmark's, plus the machine's memory in bytes under :data:`MEMORY_KEY`.
    """

    machine_class: str
    started: str
    finished: str
    comparisons: tuple[ComparisonRecord, ...]
    machine_info: Mapping[str, Any] = field(default_factory=dict)
    commit_info: Mapping[str, Any] = field(default_factory=dict)
    specdec_version: str = ""
    schema_version: int = SCHEMA_VERSION
    interrupted: bool = False  # Ctrl-C or a failure cut the run short: fewer comparisons than planned
    summary: tuple[str, ...] = ()  # run-level lines printed under the table (sweeps, specdec.note)
    unmeasured: tuple[UnmeasuredTest, ...] = ()  # tests that kept no result, and why (optional: absent is none)
    command: tuple[str, ...] = ()  # the run's command line as typed (``pytest`` and its arguments; absent: not kept)

    @property
    def flips(self) -> list[ComparisonRecord]:
        """Comparisons whose conclusion changed against the baseline (reference rows never count)."""
        return [
            c
            for c in self.comparisons
            if c.check is not None and c.check.change is Change.FLIP and c.judgement.role is not Role.REFERENCE_ROW
        ]


def migrate_comparison(data: Mapping[str, Any]) -> dict[str, Any]:
    """A schema-1 or schema-2 comparison as schema 3; a schema-3 one as it is."""
    moved = _judgement_of_schema_1(dict(data))
    if "conditions" not in moved:  # schema 2: γ and the other conditions as fields and scope strings
        moved["conditions"] = Conditions.legacy(moved).dump()
        moved.pop("num_draft", None)
        moved["scope"] = {k: v for k, v in dict(moved.get("scope") or {}).items() if k not in MOVED_FROM_SCOPE}
    return moved


def _judgement_of_schema_1(moved: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 comparison's flat judgement as the object schema 2 keeps."""
    if "judgement" in moved or "verdict" not in moved:
        return moved
    shown = str(moved.pop("verdict"))
    gating = bool(moved.pop("gating", True))
    scope = dict(moved.get("scope") or {})
    if scope.pop("role", None) == "reference":
        role = Role.REFERENCE_ROW
    else:
        role = Role.GATING if gating and not shown.startswith("reference: ") else Role.OTHER_PROFILE
    moved["scope"] = scope
    moved["judgement"] = {
        "conclusion": shown.removeprefix("reference: "),
        "role": role.value,
        "bounds": moved.pop("bounds", []),
        "failure": moved.pop("failure", None),
        "warning": moved.pop("warning", None),
    }
    return moved
