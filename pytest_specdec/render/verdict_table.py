"""The verdict table and its cells: one row per comparison, the columns a terminal of any width keeps, and the
words that say each outcome (pure: records in, text out)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tabulate import tabulate

from pytest_specdec.axes.num_draft import draft_label
from pytest_specdec.embedded import models
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.measure.looks import pairs_to_decide, undecided_because
from pytest_specdec.stats import Interval
from pytest_specdec.store.records import Change, ComparisonRecord, Conclusion

HEADERS = (
    "backend",
    "target",
    "draft",
    "category",
    "γ",
    "plain tok/s",
    "SD tok/s",
    "speedup [CI]",
    "acceptance",
    "trials",
    "claim",
    "verdict",
    "in words",
)
BASELINE_HEADERS = ("baseline", "baseline release", "change")
CHANGE_ORDER = {  # what needs reading first, first (every Change: a test keeps it whole)
    Change.FLIP: 0,
    Change.ACCEPTANCE_FELL: 1,
    Change.DRIFT: 2,
    Change.NEW: 3,
    Change.REBASELINE: 4,
    Change.UNDECIDED: 5,
    Change.RECONFIRMED: 6,
    Change.UNCHANGED: 7,
}


def short_model(reference: str | None) -> str:
    """A model reference short enough for a table cell."""
    if reference is None:
        return "-"
    if models.is_embedded(reference):
        return reference + " (synthetic)"
    return reference.rstrip("/").rsplit("/", 1)[-1]


def interval_cell(interval: Interval | None, unit: str = "x") -> str:
    """``1.52x [1.31, 1.76]``, or ``-``."""
    if interval is None:
        return "-"
    return f"{interval.estimate:.2f}{unit} [{interval.low:.2f}, {interval.high:.2f}]"


def category_cell(record: ComparisonRecord) -> str:
    """``code``; ``code (fa-off → fa-on)`` when the arms are not plain and SD; ``code, T=0.7, end-to-end, ctx=8K``
    when the comparison sampled, read end to end or ran behind a long prefix (a sweep's rows differ only there)."""
    shown = "".join(f", {c}" for c in record.conditions.labels)
    if (record.baseline_arm, record.treatment_arm) == ("plain", "sd"):
        return record.category + shown
    return f"{record.category}{shown} ({record.baseline_arm} → {record.treatment_arm})"


def verdict_cell(record: ComparisonRecord) -> str:
    """The verdict, flagged when the baseline comparison failed the test."""
    if record.check is not None and record.check.change is Change.FLIP:
        return f"{record.judgement.shown} (FLIPPED)"
    return record.judgement.shown


def claim_cell(record: ComparisonRecord) -> str:
    """The claim the verdict is on, as a person says it: ``SD ≤ 1.3x``."""
    bounds = {b.kind: b.bound for b in record.judgement.bounds if b.metric == "speedup"}
    if "min" in bounds and "max" in bounds:
        return f"{bounds['min']:g}x ≤ SD ≤ {bounds['max']:g}x"
    if "max" in bounds:
        return f"SD ≤ {bounds['max']:g}x"
    return f"SD ≥ {bounds['min']:g}x" if "min" in bounds else "-"


def more_pairs(record: ComparisonRecord) -> int | None:
    """About how many more pairs would decide the nearest speedup bound at this noise (``None``: cannot say)."""
    return pairs_to_decide(record.speedup, [b.bound for b in record.judgement.bounds if b.metric == "speedup"])


def _about(record: ComparisonRecord) -> str:
    """``, prompts like these`` when the verdict reads the general statement (the line under the table says the default)."""
    return ", prompts like these" if record.design.reading == "prompts-like-these" else ""


def reading_line(records: Sequence[ComparisonRecord]) -> str | None:
    """Which statement the verdicts make: about the prompts measured, or the prompts they stand for."""
    readings = {r.design.reading for r in records if r.scope.get("reading")}
    if not readings:
        return None
    counts = ", ".join(
        sorted({f"{r.category}: {r.design.prompt_count} prompts" for r in records if r.design.prompt_count})
    )
    if readings == {"these-prompts"}:
        return (
            f"verdicts are about these prompts, the ones measured ({counts}), not prompts like them: "
            "the line under a comparison gives that reading and how many prompts it would need"
        )
    return f"verdicts marked 'prompts like these' are about the prompts those measured stand for ({counts})"


def in_words(record: ComparisonRecord) -> str:
    """The outcome in plain words, beside the statistical word: does SD pay off here?

    It names what it compares with, so it never contradicts the verdict column (which is about the claim's
    bound): ``SD pays off here (1.88x vs 1x)`` beside ``inconclusive`` says the claim's bound is undecided while
    SD is decidedly faster than plain. "More pairs would decide" only when the run could have taken them. A row
    on the embedded synthetic pairs says first that it is a self-test of the tool, not an answer for a model.
    """
    words = _plain_words(record)
    return f"{SELF_TEST}: {words}" if models.is_embedded(record.target) else words


SELF_TEST = "self-test (synthetic pair, not your model)"


def _plain_words(record: ComparisonRecord) -> str:
    conclusion, s = record.judgement.conclusion, record.speedup
    if conclusion is Conclusion.FAILED:
        return "SD changed the output"
    if conclusion is Conclusion.NOT_MEASURABLE:
        said = record.judgement.failure or ""
        if "the machine swapped" in said:
            return "the machine swapped: not a measurement"
        if "both arms speculate" in said:
            return "both arms speculate"
        why = record.judgement.not_run
        return f"SD never engaged: the engine says {why.value}" if why else "SD never engaged"
    about = _about(record)
    if s.low > 1.0:
        return f"SD pays off here ({s.estimate:.2f}x vs 1x{about})"
    if s.high < 1.0:
        return f"SD does not pay off here ({s.estimate:.2f}x vs 1x{about})"
    if conclusion is Conclusion.INCONCLUSIVE:
        more = more_pairs(record)
        return "can't tell yet vs 1x or the claim" + (
            f": {undecided_because(s.n, more, record.design.max_trials)}" if more else ""
        )
    return f"SD breaks even here ({s.estimate:.2f}x vs 1x{about})"


def theory_note(record: ComparisonRecord) -> str | None:
    """The theory line; where the model does not meet the measurement, it says the measurement stands."""
    theory = record.theory
    if theory is None:
        return None
    if theory.agrees is False:
        return (
            f"{theory.text} — the model does not explain this measurement: the measured "
            f"{record.speedup.estimate:.2f}x stands"
        )
    return theory.text


def verdict_rows(records: Sequence[ComparisonRecord], *, with_baseline: bool = False) -> list[list[str]]:
    """One row per comparison."""
    rows = []
    names = distinct_names(records)
    for r in records:
        row = [
            r.backend,
            short_model(r.target),
            short_model(r.draft),
            names[id(r)],
            draft_label(r.num_draft),
            "-" if r.baseline_tps is None else f"{r.baseline_tps:.1f}",
            "-" if r.treatment_tps is None else f"{r.treatment_tps:.1f}",
            interval_cell(r.speedup),
            interval_cell(r.acceptance, ""),
            str(r.trials),
            claim_cell(r),
            verdict_cell(r),
            in_words(r),
        ]
        if with_baseline:
            check = r.check
            row += [
                interval_cell(check.baseline_speedup) if check else "-",
                (check.baseline_release or "-") if check else "-",
                check.change.value if check else "-",
            ]
        rows.append(row)
    return rows


def distinct_names(records: Sequence[ComparisonRecord]) -> dict[int, str]:
    """Each row's category cell; rows that would share one also say what differs (model, draft, claim or test),
    in the one column a narrow terminal keeps: ``prose · gemma-3-270m`` beside ``prose · embedded:target``."""
    cells = {id(r): category_cell(r) for r in records}
    shared: dict[str, list[ComparisonRecord]] = {}
    for record in records:
        shared.setdefault(cells[id(record)], []).append(record)
    for cell, rows in shared.items():
        if len(rows) < 2:
            continue
        for tell in (
            lambda r: _model_tell(r.target), lambda r: _model_tell(r.draft), claim_cell, lambda r: r.backend,
            lambda r: r.nodeid.rsplit("::", 1)[-1],
        ):  # fmt: skip
            told = [tell(r) for r in rows]
            if len(set(told)) > 1:
                cells |= {id(r): f"{cell} · {said}" for r, said in zip(rows, told, strict=True)}
                break
    return cells


def _model_tell(reference: str | None) -> str:
    """A model as a category cell tells it apart: ``synthetic draft-aligned``, ``Qwen2.5-7B-Instruc…``."""
    if reference is not None and models.is_embedded(reference):
        return "synthetic " + reference.removeprefix(models.EMBEDDED_PREFIX)
    return _shorten(short_model(reference))


def has_baselines(records: Sequence[ComparisonRecord]) -> bool:
    """Whether any record was checked against a baseline store."""
    return any(r.check is not None for r in records)


# Dropped first to last when the table is wider than the terminal; the two rates go together
# (one rate without the other reads as a speed, not a comparison).
OPTIONAL_COLUMNS: tuple[tuple[str, ...], ...] = (
    ("baseline release",),
    ("baseline",),
    ("trials",),
    ("γ",),
    ("draft",),
    ("acceptance",),
    ("plain tok/s", "SD tok/s"),
    ("backend",),  # the report's header names the backend and the models too
    ("target",),
    ("claim",),
)
MODEL_COLUMNS = ("target", "draft")
SHORT_MODEL = 18


def check_columns(columns: Sequence[str]) -> None:
    """``--specdec-columns`` names only columns the table has: one line before anything is measured."""
    known = HEADERS + BASELINE_HEADERS
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise SpecdecUsageError(f"--specdec-columns: unknown column {unknown[0]!r} — choose from: {', '.join(known)}")


def column_names(records: Sequence[ComparisonRecord]) -> tuple[str, ...]:
    """Every column the table can show for these records."""
    return HEADERS + BASELINE_HEADERS if has_baselines(records) else HEADERS


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    chosen: Sequence[str],
    widths: Mapping[str, int] | None = None,
) -> str:
    keep = [headers.index(name) for name in chosen]
    limits = [(widths or {}).get(headers[i]) for i in keep]
    return tabulate(
        [[row[i] for i in keep] for row in rows], headers=[headers[i] for i in keep], tablefmt="simple",
        disable_numparse=True, maxcolwidths=limits if any(limits) else None,
    )  # fmt: skip


def _widest(text: str) -> int:
    return max(map(len, text.splitlines()))


# Columns whose cells wrap onto more lines when the table is still too wide with only the essential columns left.
WRAPPABLE = ("in words", "category", "verdict", "claim", "change", "baseline", "target", "draft")
NARROWEST = 8


def _floor(name: str, rows: Sequence[Sequence[str]], headers: Sequence[str]) -> int:
    """How narrow a column may wrap: its longest word (the words column: ``NARROWEST``), never below ``NARROWEST``."""
    if name == "in words":
        return NARROWEST
    index = headers.index(name)
    return max(NARROWEST, *(len(word) for row in rows for word in row[index].split()))


def _shorten(cell: str) -> str:
    return cell if len(cell) <= SHORT_MODEL else cell[: SHORT_MODEL - 1] + "…"


def terminal_table(records: Sequence[ComparisonRecord], width: int = 120, columns: Sequence[str] | None = None) -> str:
    """The verdict table for the terminal: the chosen ``columns``, or as many as fit ``width``.

    Model names are shortened first, then optional columns dropped in :data:`OPTIONAL_COLUMNS` order.
    """
    headers = list(column_names(records))
    rows = verdict_rows(records, with_baseline=len(headers) > len(HEADERS))
    if columns:
        check_columns(columns)
        return _table(headers, rows, [c for c in columns if c in headers])  # baseline columns only with baselines
    chosen = list(headers)
    text = _table(headers, rows, chosen)
    if max(map(len, text.splitlines())) > width:
        models = [headers.index(name) for name in MODEL_COLUMNS]
        rows = [[_shorten(cell) if i in models else cell for i, cell in enumerate(row)] for row in rows]
        text = _table(headers, rows, chosen)
    dropped: list[str] = []
    for group in OPTIONAL_COLUMNS:
        if max(map(len, text.splitlines())) <= width:
            break
        present = [name for name in group if name in chosen]
        for name in present:
            chosen.remove(name)
        dropped += present
        text = _table(headers, rows, chosen)
    widths: dict[str, int] = {}
    while _widest(text) > width:  # the essential columns alone are too wide: their longest cells wrap
        sized = {name: max(len(line) for row in rows for line in [row[headers.index(name)], name]) for name in chosen}
        sized |= widths
        floors = {name: _floor(name, rows, headers) for name in chosen}
        wrappable = [name for name in WRAPPABLE if name in chosen and sized[name] > floors[name]]
        if not wrappable:
            break
        # The answer in words narrows last: the other cells wrap down to their longest word first.
        others = [name for name in wrappable if name != "in words"]
        widest = max(others or wrappable, key=lambda name: sized[name])
        widths[widest] = max(floors[widest], sized[widest] - (_widest(text) - width))
        text = _table(headers, rows, chosen, widths)
    if dropped:
        import textwrap

        note = (
            f"(left out to fit {width} columns: {', '.join(dropped)} — a wider terminal, or --specdec-columns, "
            "shows them)"
        )
        text += "\n" + "\n".join(textwrap.wrap(note, max(20, width)))
    return text
