"""A night: one result of one run as the history keeps it, a typed value read once.

``history/<machine class>.jsonl`` under the baselines directory (and the gate runner's own copy) holds
one JSON line per result, append-only: what a plot of speedup against release needs (key, release,
speedup, verdict, bounds), not the samples. :meth:`Night.of_record` makes one from a judged result,
:meth:`Night.as_line` is what :meth:`~pytest_specdec.store.baselines.BaselineStore.append_history`
writes, and :func:`read_nights` reads a file back as :data:`Nights` — a torn last line skipped, any
other bad line named, lines written by earlier releases migrated in memory (a line without
``protocol`` is protocol 1, without ``log_se`` has no kept within-run error, without ``conditions``
ran under the defaults). Every reader of history takes :data:`Nights`; none reads a line's keys.

A line (``schema_version`` 1)::

    {"schema_version": 1, "time": ISO-8601, "machine_class": "...", "backend": "mlx",
     "release": "mlx-lm 0.32.2", "versions": {"mlx": "0.32.2", ...}, "key": "<baseline key>",
     "nodeid": "...", "claim_id": "d", "profile": "seed", "category": "code",
     "conditions": {"num_draft": 3}, "speedup": {"estimate", "low", "high", "confidence", "n"},
     "log_se": 0.02, "baseline_tps": 40.1, "treatment_tps": 52.3, "acceptance": 0.71,
     "verdict": "holds", "bounds": {"speedup max=1.3": "holds"}, "change": "unchanged",
     "accepted": false, "protocol": 5, "interrupted": true (only when cut short)}
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_specdec.axes import DEFAULT_CONDITIONS, Conditions, registered_axes
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.stats import Interval
from pytest_specdec.store.records import HISTORY_SCHEMA_VERSION

if TYPE_CHECKING:
    from pytest_specdec.store.records import ComparisonRecord

TEXT_FIELDS = ("time", "machine_class", "backend", "release", "key", "nodeid", "category", "verdict")
SPEEDUP_FIELDS = ("estimate", "low", "high")
NON_FINITE_TEXT = ("inf", "-inf", "nan")


@dataclass(frozen=True)
class Night:
    """One result of one night, as its history line keeps it.

    >>> night = Night.of_line({"time": "2026-12-01T02:00:00", "backend": "mlx", "key": "k", "release": "mlx-lm 0.1",
    ...                        "speedup": {"estimate": 1.2, "low": 1.1, "high": 1.3}})
    >>> night.speedup.confidence, night.protocol, night.moment.isoformat()
    (0.95, 1, '2026-12-01T02:00:00+00:00')
    """

    time: str
    backend: str
    release: str
    key: str
    speedup: Interval
    machine_class: str = ""
    nodeid: str = ""
    category: str = ""
    verdict: str = ""
    versions: Mapping[str, str] = field(default_factory=dict)
    claim_id: str | None = None
    profile: str = ""
    conditions: Conditions = DEFAULT_CONDITIONS
    log_se: float | None = None  # the within-run standard error of its mean log speedup (None: not kept)
    baseline_tps: float | None = None
    treatment_tps: float | None = None
    acceptance: float | None = None
    bounds: Mapping[str, str] = field(default_factory=dict)  # ``{"speedup max=1.3": "holds"}``
    change: str | None = None  # the baseline check's :class:`~pytest_specdec.store.records.Change` value
    accepted: bool = False
    interrupted: bool = False  # kept from a run cut short: never accepted, never a night of a trend
    protocol: int | None = 1  # the measurement protocol (None: the line names an unreadable one)
    gate: str | None = None  # the gate's word on it (the runner's state; a history line never has one)

    @classmethod
    def of_record(
        cls, record: ComparisonRecord, machine_class: str, accepted: bool, when: str, *, interrupted: bool = False
    ) -> Night:
        """The night of a judged result (``interrupted``: kept from a run cut short, never accepted)."""
        from pytest_specdec.store.baselines import baseline_key
        from pytest_specdec.store.night_statistics import log_se

        return cls(
            time=when,
            backend=record.backend,
            release=record.release,
            key=baseline_key(record),
            speedup=record.speedup,
            machine_class=machine_class,
            nodeid=record.nodeid,
            category=record.category,
            verdict=record.judgement.shown,
            versions=dict(record.versions),
            claim_id=record.claim_id,
            profile=record.profile,
            conditions=record.conditions,
            log_se=log_se(record.log_ratios),  # the within-run error the run-to-run spread is read against
            baseline_tps=record.baseline_tps,
            treatment_tps=record.treatment_tps,
            acceptance=None if record.acceptance is None else record.acceptance.estimate,
            bounds={label: verdict.value for label, verdict in record.judgement.bound_verdicts.items()},
            change=record.check.change.value if record.check else None,
            accepted=accepted,
            interrupted=interrupted,
            protocol=record.protocol,
        )

    @classmethod
    def of_line(cls, line: Mapping[str, object]) -> Night:
        """A parsed line back, migrated: a field a line of an earlier release lacks takes the value it then meant.

        :func:`read_nights` has checked the fields every reader uses; a line built by hand may leave them out.
        A key written with the models' paths is read as this release writes it.
        """
        from pytest_specdec.store.baselines import current_key

        s = line.get("speedup")
        speedup = s if isinstance(s, Mapping) else {}
        protocol = line.get("protocol", 1)
        return cls(
            time=_text(line, "time"),
            backend=_text(line, "backend"),
            release=_text(line, "release"),
            key=current_key(_text(line, "key")),
            speedup=Interval(
                _number(speedup.get("estimate"), math.nan),
                _number(speedup.get("low"), math.nan),
                _number(speedup.get("high"), math.nan),
                _number(speedup.get("confidence"), 0.95) or 0.95,
                _count(speedup.get("n")),
            ),
            machine_class=_text(line, "machine_class"),
            nodeid=_text(line, "nodeid"),
            category=_text(line, "category"),
            verdict=_text(line, "verdict"),
            versions=_texts(line.get("versions")),
            claim_id=line["claim_id"] if isinstance(line.get("claim_id"), str) else None,  # type: ignore[arg-type]
            profile=_text(line, "profile"),
            conditions=_conditions(line.get("conditions")),
            log_se=_optional(line.get("log_se")),
            baseline_tps=_optional(line.get("baseline_tps")),
            treatment_tps=_optional(line.get("treatment_tps")),
            acceptance=_optional(line.get("acceptance")),
            bounds=_texts(line.get("bounds")),
            change=str(line["change"]) if line.get("change") else None,
            accepted=bool(line.get("accepted", False)),
            interrupted=bool(line.get("interrupted", False)),
            protocol=protocol if isinstance(protocol, int) and not isinstance(protocol, bool) else None,
            gate=str(line["gate"]) if isinstance(line.get("gate"), str) else None,
        )

    def as_line(self) -> dict[str, object]:
        """The JSON line the history keeps (``gate`` only where the gate said a word: the runner keeps it apart, and
        a leg's ``nights.jsonl`` artifact carries it to the scoreboard)."""
        s = self.speedup
        return (
            ({"interrupted": True} if self.interrupted else {})
            | ({"gate": self.gate} if self.gate else {})
            | {
                "schema_version": HISTORY_SCHEMA_VERSION,
                "time": self.time,
                "machine_class": self.machine_class,
                "backend": self.backend,
                "release": self.release,
                "versions": dict(self.versions),
                "key": self.key,
                "nodeid": self.nodeid,
                "claim_id": self.claim_id,
                "profile": self.profile,
                "category": self.category,
                "conditions": self.conditions.dump(),
                "speedup": {"estimate": s.estimate, "low": s.low, "high": s.high, "confidence": s.confidence, "n": s.n},
                "log_se": self.log_se,
                "baseline_tps": self.baseline_tps,
                "treatment_tps": self.treatment_tps,
                "acceptance": self.acceptance,
                "verdict": self.verdict,
                "bounds": dict(self.bounds),
                "change": self.change,
                "accepted": self.accepted,
                "protocol": self.protocol,
            }
        )

    @cached_property
    def moment(self) -> datetime | None:
        """Its time in UTC (:func:`utc_moment`)."""
        return utc_moment(self.time)

    @property
    def mark(self) -> tuple[str, str, str, str]:
        """What makes two nights one result: one result reaches both the repository's and the runner's history
        under different time stamps (the ledger's and the gate's), with the same backend, key, release and
        speedup.

        >>> night = Night("t1", "mlx", "mlx-lm 0.1", "k", Interval(1.2, 1.1, 1.3, 0.95, 8))
        >>> from dataclasses import replace
        >>> night.mark == replace(night, time="t2").mark
        True
        """
        s = self.speedup
        speedup = json.dumps([s.estimate, s.low, s.high, s.confidence, s.n])
        return self.backend, self.key, self.release, speedup


Nights = tuple[Night, ...]


def utc_moment(text: str) -> datetime | None:
    """A time stamp as a moment in UTC (a time without a zone is UTC), or None when it is not one."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _text(line: Mapping[str, object], name: str) -> str:
    value = line.get(name, "")
    return value if isinstance(value, str) else str(value or "")


def _number(value: object, default: float) -> float:
    if isinstance(value, str) and value in NON_FINITE_TEXT:  # an unbounded side is stored as text
        return float(value)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else default


def _count(value: object) -> int:
    number = _number(value, 0.0)
    return int(number) if math.isfinite(number) else 0


def _conditions(value: object) -> Conditions:
    """A line's conditions: the axes this release knows (a newer release's axis is left out, not the line)."""
    if not isinstance(value, Mapping):
        return DEFAULT_CONDITIONS
    known = {axis.name for axis in registered_axes()}
    try:
        return Conditions.load({name: setting for name, setting in value.items() if name in known})
    except SpecdecUsageError:  # a value this release reads otherwise: the line still counts, under the defaults
        return DEFAULT_CONDITIONS


def _optional(value: object) -> float | None:
    number = _number(value, math.nan)
    return None if math.isnan(number) else number


def _texts(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def _problem(parsed: object) -> str:
    """What makes a parsed line no history line (the fields every reader uses), or ``""``."""
    if not isinstance(parsed, dict):
        return "not a JSON object"
    for name in TEXT_FIELDS:
        if not isinstance(parsed.get(name), str):
            return f"{name!r} is missing or not text"
    speedup = parsed.get("speedup")
    if not isinstance(speedup, dict) or not all(
        (isinstance(speedup.get(name), int | float) and not isinstance(speedup.get(name), bool))
        or speedup.get(name) in NON_FINITE_TEXT
        for name in SPEEDUP_FIELDS
    ):
        return "'speedup' lacks estimate, low and high numbers"
    if not isinstance(parsed.get("bounds", {}), dict):
        return "'bounds' is not an object"
    return ""


def read_nights(path: Path, torn: list[str] | None = None) -> Nights:
    """A history file's nights; a malformed line is a one-line error naming its number.

    A last line without its newline is what an interrupted append leaves: it is
    skipped, and reported in ``torn`` when given, instead of making the file unreadable.
    """
    nights: list[Night] = []
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecdecUsageError(f"{path}: no such history file — run the benchmarks first") from None
    except (OSError, UnicodeDecodeError) as error:
        raise SpecdecUsageError(f"{path} cannot be read ({error}) — check the file") from None
    rows = text.splitlines()
    for number, line in enumerate(rows, start=1):
        if not line.strip():
            continue
        try:
            parsed = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as error:
            if number == len(rows) and not text.endswith("\n"):
                if torn is not None:
                    torn.append(f"{path}:{number}: a torn last line (an interrupted append) was skipped")
                continue
            why = error.msg if isinstance(error, json.JSONDecodeError) else "nested too deeply"
            raise SpecdecUsageError(f"{path}:{number} is not valid JSON ({why})") from None
        problem = _problem(parsed)
        if problem:
            raise SpecdecUsageError(
                f"{path}:{number} is not a pytest-specdec history line ({problem}) — restore the file from version "
                "control, or remove that line"
            )
        nights.append(Night.of_line(parsed))
    return tuple(nights)
