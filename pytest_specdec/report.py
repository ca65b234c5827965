"""Pure renderers: outcomes in, text out. No pytest, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from tabulate import tabulate

from pytest_specdec import models
from pytest_specdec.claims import Outcome
from pytest_specdec.measure import Progress

HEADERS = (
    "backend",
    "target",
    "draft",
    "category",
    "plain tok/s",
    "SD tok/s",
    "speedup [CI]",
    "acceptance",
    "trials",
    "verdict",
)


def short_model(reference: str | None) -> str:
    """A model reference short enough for a table cell."""
    if reference is None:
        return "-"
    if models.is_embedded(reference):
        return reference + " (synthetic)"
    return reference.rstrip("/").rsplit("/", 1)[-1]


def speedup_cell(outcome: Outcome) -> str:
    """``1.52x [1.31, 1.76]``."""
    s = outcome.comparison.speedup
    return f"{s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}]"


def acceptance_cell(outcome: Outcome) -> str:
    """``0.74 [0.70, 0.78]`` or ``-`` when the backend cannot count drafts."""
    a = outcome.comparison.acceptance
    return "-" if a is None else f"{a.estimate:.2f} [{a.low:.2f}, {a.high:.2f}]"


def verdict_rows(outcomes: Sequence[Outcome]) -> list[list[str]]:
    """One row per comparison, in the order they ran."""
    rows = []
    for outcome in outcomes:
        c = outcome.comparison
        rows.append(
            [
                outcome.backend,
                short_model(outcome.pair.target),
                short_model(outcome.pair.draft),
                c.plan.category,
                f"{c.arm_tps('baseline'):.1f}",
                f"{c.arm_tps('treatment'):.1f}",
                speedup_cell(outcome),
                acceptance_cell(outcome),
                str(len(c.pairs)),
                outcome.verdict_text,
            ]
        )
    return rows


def terminal_table(outcomes: Sequence[Outcome]) -> str:
    """The verdict table for the terminal summary."""
    return tabulate(verdict_rows(outcomes), headers=HEADERS, tablefmt="simple", disable_numparse=True)


def terminal_notes(outcomes: Sequence[Outcome]) -> list[str]:
    """Lines under the table: profile, confidence, synthetic models, warnings."""
    if not outcomes:
        return []
    first = outcomes[0]
    confidence = first.comparison.speedup.confidence
    lines = [
        f"profile: {first.profile}; device: {first.fingerprint.device}; release: {first.fingerprint.release}",
        f"intervals: {confidence:.0%} simultaneous over each run's planned looks (Bonferroni alpha spending)",
    ]
    if any(models.is_embedded(o.pair.target) for o in outcomes):
        lines.append("synthetic models: the embedded pairs are deterministic stand-ins, not real LLMs")
    lines += [f"{o.nodeid}: {o.failure or o.warning}" for o in outcomes if o.failure or o.warning]
    return lines


def progress_line(update: Progress) -> str:
    """``specdec code: pair 7/30, speedup 1.52x [1.31, 1.76]``."""
    shown = ""
    if update.interval is not None:
        i = update.interval
        shown = f", speedup {i.estimate:.2f}x [{i.low:.2f}, {i.high:.2f}]"
    return f"specdec {update.category}: pair {update.done}/{update.planned_max}{shown}"
