"""Published speculative-decoding measurements on Apple silicon, as data, and what they say.

``evidence.json`` (shipped beside this module) holds one row per published figure:
the seed document's own figures (role ``seed``) and those found in public issues,
pull requests and READMEs (role ``published``), each with its source link, chip,
runtime, method, rates and speedup, and whether it supports or contradicts a seed
claim. The research behind it is ``shared/research/published-measurements.md``.

* :func:`load_evidence` reads and validates the file.
* :func:`beside_result` gives the note lines printed next to a measured speedup:
  what was published for the same chip and runtime, and whether the measurement
  disagrees with it. A note only: evidence never fails a test.
* :func:`claims_table` says, per seed claim and chip generation, which rows
  support or contradict it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from functools import cache
from importlib import resources
from typing import Any

from pytest_specdec.backends import registered_backends
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.seed.document import CLAIMS

SCHEMA_VERSION = 2  # 2 added ``sampling`` (version 1 files read as greedy or unstated: ``None``)
RESOURCE = "evidence.json"
ROLES = ("seed", "published")
STANCES = ("supports", "contradicts")
SUSPECT = "(suspect: at/above the roofline)"

# Rows the research names as measurement hazards (published-measurements.md, "Measurement
# hazards"): mlx-serve#317 was withdrawn by its author, llama.cpp#23011 is a collapse bug.
# They stay in the file for the record but are never used as evidence.
HAZARDS = frozenset({"H1", "H2"})

_MACHINE_CLASS = re.compile(r"Apple-M(\d+)(?:-(Pro|Max|Ultra))?(?:-(\d+)GB)?", re.IGNORECASE)
_APPLE_CHIP = re.compile(r"M(\d+)(?: (Pro|Max|Ultra))?")


@dataclass(frozen=True)
class EvidenceRow:
    """One published (or seed-stated) figure; ``None`` where the source does not say."""

    id: str
    role: str
    source: str
    chip: str | None
    memory_gb: int | None
    backend: str | None
    backend_detail: str | None
    release: str | None
    model: str | None
    model_class: str | None
    params_b: float | None
    active_params_b: float | None
    method: str | None
    draft: str | None
    gamma: int | None
    plain_tps: float | None
    sd_tps: float | None
    speedup: float | None
    roofline_suspect: bool
    claim: str | None
    stance: str | None
    notes: str
    sampling: str | None = None  # "T=1" where the source says it sampled; None: greedy or not stated

    @property
    def usable(self) -> bool:
        """A published speedup that may be compared with a measurement (not a hazard)."""
        return self.role == "published" and self.speedup is not None and self.id not in HAZARDS

    @property
    def family(self) -> str:
        """The runtime family: ``mlx-lm``, ``lm-studio``, ``llama.cpp``, ``ollama``, ``mtplx``, ``other``."""
        return self.backend or "other"

    @property
    def link(self) -> str:
        """The source: a URL, or the seed document's path for seed rows."""
        return self.source


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_positive(value: object) -> bool:
    return _is_number(value) and float(value) > 0  # type: ignore[arg-type]


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _is_text(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


SEED_PATH_PREFIX = "pytest_specdec/seed/"  # the write-up, shipped with the package (seed/write-up.md)


def _is_source(value: object) -> bool:
    """A web link someone can open, or the seed document's own path in the package (the seed rows)."""
    if not _is_text(value):
        return False
    from urllib.parse import urlparse

    text = str(value)
    parsed = urlparse(text)
    return (parsed.scheme in ("https", "http") and bool(parsed.netloc) and " " not in text) or (
        text.startswith(SEED_PATH_PREFIX) and text.endswith(".md")
    )


_FLOAT_FIELDS = ("params_b", "active_params_b", "plain_tps", "sd_tps", "speedup")
_TEXT_FIELDS = ("chip", "backend", "backend_detail", "release", "model", "model_class", "method", "draft")
_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "id": (_is_text, "a non-empty string"),
    "role": (lambda v: v in ROLES, f"one of {', '.join(ROLES)}"),
    "source": (_is_source, "an https:// link, or the seed document's path for seed rows"),
    "memory_gb": (
        _optional(lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0),
        "a whole number of GB or null",
    ),
    "gamma": (_optional(lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0), "a whole number or null"),
    "roofline_suspect": (lambda v: isinstance(v, bool), "true or false"),
    "claim": (_optional(lambda v: v in CLAIMS), f"a seed claim id ({', '.join(CLAIMS)}) or null"),
    "stance": (_optional(lambda v: v in STANCES), f"one of {', '.join(STANCES)} or null"),
    "notes": (lambda v: isinstance(v, str), "a string"),
}
_CHECKS["sampling"] = (_optional(lambda v: isinstance(v, str) and v.startswith("T=")), "T=<temperature> or null")
_CHECKS.update({name: (_optional(_is_positive), "a positive number or null") for name in _FLOAT_FIELDS})
_CHECKS.update({name: (_optional(_is_text), "a non-empty string or null") for name in _TEXT_FIELDS})

_FIELDS = tuple(f.name for f in fields(EvidenceRow))


def _row(index: int, raw: object, origin: str, version: int = SCHEMA_VERSION) -> EvidenceRow:
    if not isinstance(raw, dict):
        raise SpecdecUsageError(f"{origin}: row {index} is not an object; reinstall pytest-specdec")
    if version == 1:  # the migration: version 1 had no sampling field
        raw = {**raw, "sampling": None}
    name = raw.get("id", f"#{index}")
    missing = sorted(set(_FIELDS) - raw.keys())
    extra = sorted(raw.keys() - set(_FIELDS))
    if missing or extra:
        problem = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(extra)}"
        raise SpecdecUsageError(f"{origin}: row {name}: {problem}; the schema is version {SCHEMA_VERSION}")
    for key, (check, wanted) in _CHECKS.items():
        if not check(raw[key]):
            raise SpecdecUsageError(f"{origin}: row {name}: {key} should be {wanted}, not {raw[key]!r}")
    values: dict[str, Any] = {
        key: float(raw[key]) if key in _FLOAT_FIELDS and raw[key] is not None else raw[key] for key in _FIELDS
    }
    return EvidenceRow(**values)


def parse_evidence(text: str, origin: str = RESOURCE) -> tuple[EvidenceRow, ...]:
    """Rows from the text of an evidence file; a malformed file raises :class:`SpecdecUsageError` (one line)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise SpecdecUsageError(
            f"{origin}: not JSON ({error.msg}, line {error.lineno}); reinstall pytest-specdec"
        ) from None
    if not isinstance(document, dict) or document.get("schema_version") not in (1, SCHEMA_VERSION):
        found = document.get("schema_version") if isinstance(document, dict) else None
        raise SpecdecUsageError(
            f"{origin}: schema_version {found!r}, expected {SCHEMA_VERSION}; reinstall pytest-specdec"
        )
    raw_rows = document.get("rows")
    if not isinstance(raw_rows, list) or not raw_rows:
        raise SpecdecUsageError(f"{origin}: 'rows' should be a non-empty list; reinstall pytest-specdec")
    version = int(document["schema_version"])
    rows = tuple(_row(index, raw, origin, version) for index, raw in enumerate(raw_rows))
    seen: set[str] = set()
    for row in rows:
        if row.id in seen:
            raise SpecdecUsageError(f"{origin}: row id {row.id!r} appears twice; ids must be unique")
        seen.add(row.id)
    return rows


@cache
def load_evidence() -> tuple[EvidenceRow, ...]:
    """The shipped ``evidence.json``, validated (a malformed file raises :class:`SpecdecUsageError`)."""
    text = resources.files(__package__ or "pytest_specdec.seed").joinpath(RESOURCE).read_text(encoding="utf-8")
    return parse_evidence(text, f"pytest_specdec/seed/{RESOURCE}")


def backend_family(backend: str) -> str:
    """The published rows' family for a plugin backend (its spec's ``evidence_family``: ``mlx`` → ``mlx-lm``).

    A name no registered backend has, or one whose spec names no family, passes through.
    """
    spec = registered_backends().get(backend)
    return spec.evidence_family if spec is not None and spec.evidence_family else backend


def chip_of(machine_class: str) -> tuple[str, int | None] | None:
    """``Apple-M1-Max-64GB`` → ``("M1 Max", 64)``; ``Apple-M4`` → ``("M4", None)``; ``None`` off Apple silicon."""
    match = _MACHINE_CLASS.fullmatch(machine_class.strip())
    if match is None:
        return None
    generation, tier, memory = match.groups()
    chip = f"M{int(generation)}" + (f" {tier.capitalize()}" if tier else "")
    return chip, int(memory) if memory else None


def chip_generation(chip: str | None) -> str:
    """``M3`` for ``M3 Ultra``; ``chip not stated`` for ``None``; ``non-Apple`` for anything else."""
    if chip is None:
        return "chip not stated"
    match = _APPLE_CHIP.fullmatch(chip)
    return f"M{int(match.group(1))}" if match else "non-Apple"


def plottable(rows: Iterable[EvidenceRow]) -> tuple[EvidenceRow, ...]:
    """Usable published speedups with a stated chip: what the evidence plot draws."""
    return tuple(row for row in rows if row.usable and row.chip is not None)


def rows_for(machine_class: str, rows: Iterable[EvidenceRow]) -> tuple[EvidenceRow, ...]:
    """Rows on this machine's chip; a row that states its memory must match the machine's too."""
    found = chip_of(machine_class)
    if found is None:
        return ()
    chip, memory = found
    return tuple(
        row for row in rows if row.chip == chip and (row.memory_gb is None or memory is None or row.memory_gb == memory)
    )


def _times(value: float) -> str:
    return f"{value:.2f}x"


def _span(values: Sequence[float]) -> str:
    low, high = min(values), max(values)
    return _times(low) if math.isclose(low, high) else f"{low:.2f}–{high:.2f}x"


def _links(rows: Sequence[EvidenceRow], most: int = 3) -> str:
    links = list(dict.fromkeys(row.link for row in rows))
    shown = ", ".join(links[:most])
    return shown + (f", +{len(links) - most} more" if len(links) > most else "")


def _describe(rows: Sequence[EvidenceRow]) -> str:
    speedups = [row.speedup for row in rows if row.speedup is not None]
    family, method = rows[0].family, rows[0].method or "method not stated"
    count = "1 figure" if len(rows) == 1 else f"{len(rows)} figures"
    suspect = f" {SUSPECT}" if rows[0].roofline_suspect else ""
    return f"{_span(speedups)}, {family} {method}, {count}{suspect} ({_links(rows)})"


def _groups(rows: Iterable[EvidenceRow]) -> list[list[EvidenceRow]]:
    grouped: dict[tuple[str, str, bool], list[EvidenceRow]] = {}
    for row in rows:
        grouped.setdefault((row.family, row.method or "", row.roofline_suspect), []).append(row)
    return [grouped[key] for key in sorted(grouped)]


def beside_result(
    machine_class: str,
    backend: str,
    speedup_estimate: float,
    speedup_low: float,
    speedup_high: float,
    *,
    rows: Sequence[EvidenceRow] | None = None,
    sampling: str = "greedy",
) -> list[str]:
    """Note lines to print beside a measured speedup: what was published for this chip and runtime.

    A sampled result (``sampling`` ``T=0.7``…) is set beside the published figures that say they
    sampled, each with its temperature; a greedy one beside the others.

    One ``published on this chip: …`` line per method of the backend's family (roofline
    suspects on their own line, marked), or one summary line of the other runtimes when
    the family has none here; then a ``contradicts published …`` line when the measured
    interval lies wholly on the other side of 1.0 than published figures for the same
    chip and family. Empty off Apple silicon or when nothing was published. A note
    only: it never fails a test, and it does not raise on odd numbers (NaN, reversed bounds).
    """
    evidence = load_evidence() if rows is None else rows
    usable = [row for row in rows_for(machine_class, evidence) if row.usable]
    here = [row for row in usable if row.sampling is None]
    if sampling != "greedy":
        sampled = [row for row in usable if row.sampling is not None]
        if sampled:  # this runtime's family first; another runtime's figure is said to be one
            family = backend_family(backend)
            lines = []
            for said, told in (("", [r for r in sampled if r.family == family]),
                               (", other runtimes", [r for r in sampled if r.family != family])):  # fmt: skip
                if told:
                    shown = ", ".join(f"{row.speedup:.2f}x at {row.sampling} ({row.id}, {row.family})" for row in told)
                    lines.append(f"published on this chip, sampled{said}: {shown} — beside this {sampling} result")
            return lines
        return (
            [
                f"published on this chip: {len(usable)} figures, none saying it sampled — not set beside this {sampling} result"
            ]
            if usable
            else []
        )
    family = backend_family(backend)
    same = [row for row in here if row.family == family]
    if not same:
        others = [row for row in here if row.speedup is not None]
        if not others:
            return []
        families = ", ".join(sorted({row.family for row in others}))
        speedups = [row.speedup for row in others if row.speedup is not None]
        return [f"published on this chip, other runtimes ({families}): {_span(speedups)} across {len(others)} figures"]
    lines = [f"published on this chip: {_describe(group)}" for group in _groups(same)]
    low, high = (
        sorted((speedup_low, speedup_high))
        if not (math.isnan(speedup_low) or math.isnan(speedup_high))
        else (math.nan, math.nan)
    )
    if high < 1.0:
        opposite = [row for row in same if row.speedup is not None and row.speedup > 1.0]
        side = "a slowdown"
    elif low > 1.0:
        opposite = [row for row in same if row.speedup is not None and row.speedup < 1.0]
        side = "a speedup"
    else:
        opposite = []
        side = ""
    if opposite:
        # Nearest to 1.0 first: the figures a reader most needs to see.
        ranked = sorted(opposite, key=lambda r: abs(math.log(r.speedup or 1.0)))
        figures = ", ".join(
            f"{_times(row.speedup or math.nan)} ({row.id}{', suspect' if row.roofline_suspect else ''})"
            for row in ranked[:4]
        ) + (f", +{len(ranked) - 4} more" if len(ranked) > 4 else "")
        measured = f"{_times(speedup_estimate)} [{low:.2f}, {high:.2f}]"
        lines.append(
            f"contradicts published {family} figures on this chip: measured {measured} is {side}, "
            f"published {figures} ({_links(opposite)})"
        )
    return lines


def _count(number: int, verb: str) -> str:
    # "1 supports", "2 support"; "1 contradicts", "2 contradict".
    return f"{number} {verb if number == 1 else verb.removesuffix('s')}"


def claims_table(rows: Sequence[EvidenceRow] | None = None) -> list[tuple[str, str, str, str]]:
    """Per seed claim (a–g) and chip generation: ``(claim, generation, counts, ids)``.

    ``("a", "M1", "2 support, 1 contradicts", "support: X4, R1; contradicts: X3")``.
    Only published rows count; hazards are left out; rows that take no side count as
    "neither". A claim with no published rows gets one row saying so.
    """
    evidence = load_evidence() if rows is None else rows
    table: list[tuple[str, str, str, str]] = []
    for claim in (key for key in CLAIMS if len(key) == 1):
        filed = [row for row in evidence if row.claim == claim and row.role == "published" and row.id not in HAZARDS]
        if not filed:
            table.append((claim, "-", "no published figures", ""))
            continue
        for generation in sorted({chip_generation(row.chip) for row in filed}, key=_generation_order):
            chosen = [row for row in filed if chip_generation(row.chip) == generation]
            counts, ids = [], []
            for stance, verb in (("supports", "supports"), ("contradicts", "contradicts"), (None, "neither")):
                matching = [row.id for row in chosen if row.stance == stance]
                if matching:
                    counts.append(_count(len(matching), verb) if stance else f"{len(matching)} neither")
                    label = verb if len(matching) == 1 or stance is None else verb.removesuffix("s")
                    ids.append(f"{label}: {', '.join(matching)}")
            table.append((claim, generation, ", ".join(counts), "; ".join(ids)))
    return table


def _generation_order(generation: str) -> tuple[int, str]:
    match = re.fullmatch(r"M(\d+)", generation)
    return (int(match.group(1)), "") if match else (1_000, generation)
