"""The history: every result of every run, one JSON line each, append-only.

``history/<machine class>.jsonl`` under the baselines directory. A line holds what a plot
of speedup against release needs (key, release, speedup, verdict, bounds), not the samples;
:meth:`~pytest_specdec.store.baselines.BaselineStore.append_history` appends whole lines and
:func:`read_history` reads them back, a torn last line skipped and any other bad line named.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.baselines import baseline_key
from pytest_specdec.store.records import HISTORY_SCHEMA_VERSION, ComparisonRecord
from pytest_specdec.store.spread import log_se


def history_line(
    record: ComparisonRecord, machine_class: str, accepted: bool, when: str, *, interrupted: bool = False
) -> dict[str, object]:
    """One history line: enough to plot speedup against release without the samples (``interrupted``: kept
    from a run cut short, never accepted)."""
    s = record.speedup
    return ({"interrupted": True} if interrupted else {}) | {
        "schema_version": HISTORY_SCHEMA_VERSION,
        "time": when,
        "machine_class": machine_class,
        "backend": record.backend,
        "release": record.release,
        "versions": dict(record.versions),
        "key": baseline_key(record),
        "nodeid": record.nodeid,
        "claim_id": record.claim_id,
        "profile": record.profile,
        "category": record.category,
        "conditions": record.conditions.dump(),
        "speedup": {"estimate": s.estimate, "low": s.low, "high": s.high, "confidence": s.confidence, "n": s.n},
        "log_se": log_se(record.log_ratios),  # the within-run error the run-to-run spread is read against
        "baseline_tps": record.baseline_tps,
        "treatment_tps": record.treatment_tps,
        "acceptance": None if record.acceptance is None else record.acceptance.estimate,
        "verdict": record.judgement.shown,
        "bounds": record.judgement.bound_verdicts,
        "change": record.check.change if record.check else None,
        "accepted": accepted,
        "protocol": record.protocol,
    }


def history_mark(line: dict[str, Any]) -> tuple[str, str, str, str]:
    """What makes two history lines one result: one result reaches both the repository's and the runner's
    history under different time stamps (the ledger's and the gate's), with the same backend, key, release and
    speedup.

    >>> line = {"backend": "mlx", "key": "k", "release": "mlx-lm 0.1", "speedup": {"estimate": 1.2}, "time": "t1"}
    >>> history_mark(line) == history_mark(line | {"time": "t2"})
    True
    """
    speedup = json.dumps(line.get("speedup"), sort_keys=True)
    return str(line.get("backend", "")), str(line.get("key", "")), str(line.get("release", "")), speedup


HISTORY_TEXT_FIELDS = ("time", "machine_class", "backend", "release", "key", "nodeid", "category", "verdict")
SPEEDUP_FIELDS = ("estimate", "low", "high")
NON_FINITE_TEXT = ("inf", "-inf", "nan")


def history_line_problem(parsed: object) -> str:
    """What makes a parsed line no history line (the fields every reader uses), or ``""``."""
    if not isinstance(parsed, dict):
        return "not a JSON object"
    for name in HISTORY_TEXT_FIELDS:
        if not isinstance(parsed.get(name), str):
            return f"{name!r} is missing or not text"
    speedup = parsed.get("speedup")
    if isinstance(speedup, dict):  # an unbounded side is stored as text ("inf"): back to the float
        for name in SPEEDUP_FIELDS:
            if speedup.get(name) in NON_FINITE_TEXT:
                speedup[name] = float(speedup[name])
    if not isinstance(speedup, dict) or not all(
        isinstance(speedup.get(name), int | float) and not isinstance(speedup.get(name), bool)
        for name in SPEEDUP_FIELDS
    ):
        return "'speedup' lacks estimate, low and high numbers"
    if not isinstance(parsed.get("bounds", {}), dict):
        return "'bounds' is not an object"
    return ""


def read_history(path: Path, torn: list[str] | None = None) -> list[dict[str, Any]]:
    """History lines; a malformed line is a one-line error naming its number.

    A last line without its newline is what an interrupted append leaves: it is
    skipped, and reported in ``torn`` when given, instead of making the file unreadable.
    """
    lines: list[dict[str, Any]] = []
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
        except json.JSONDecodeError as error:
            if number == len(rows) and not text.endswith("\n"):
                if torn is not None:
                    torn.append(f"{path}:{number}: a torn last line (an interrupted append) was skipped")
                continue
            raise SpecdecUsageError(f"{path}:{number} is not valid JSON ({error.msg})") from None
        problem = history_line_problem(parsed)
        if problem:
            raise SpecdecUsageError(
                f"{path}:{number} is not a pytest-specdec history line ({problem}) — restore the file from version "
                "control, or remove that line"
            )
        lines.append(parsed)
    return lines
