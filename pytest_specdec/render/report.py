"""Pure renderers: records in, text out. No pytest, no I/O.

The same records drive the terminal summary, the Markdown for
``$GITHUB_STEP_SUMMARY`` and ``pytest-specdec report``, so a saved run renders exactly as
it did live.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

from tabulate import tabulate

from pytest_specdec.axes.num_draft import draft_label
from pytest_specdec.embedded import models
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.measure import Progress
from pytest_specdec.measure.looks import pairs_to_decide, undecided_because
from pytest_specdec.stats import Interval
from pytest_specdec.store.records import Change, ComparisonRecord, Conclusion, RunRecord

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
CHANGE_ORDER = {
    Change.FLIP: 0,
    Change.DRIFT: 1,
    Change.NEW: 2,
    Change.REBASELINE: 3,
    Change.UNDECIDED: 4,
    Change.RECONFIRMED: 5,
    Change.UNCHANGED: 6,
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
    SD is decidedly faster than plain. "More pairs would decide" only when the run could have taken them.
    """
    conclusion, s = record.judgement.conclusion, record.speedup
    if conclusion is Conclusion.FAILED:
        return "SD changed the output"
    if conclusion is Conclusion.NOT_MEASURABLE:
        said = record.judgement.failure or ""
        if "the machine swapped" in said:
            return "the machine swapped: not a measurement"
        return "both arms speculate" if "both arms speculate" in said else "SD never engaged"
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
    for r in records:
        row = [
            r.backend,
            short_model(r.target),
            short_model(r.draft),
            category_cell(r),
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
        wrappable = [name for name in WRAPPABLE if name in chosen and sized[name] > NARROWEST]
        if not wrappable:
            break
        widest = max(wrappable, key=lambda name: sized[name])
        widths[widest] = max(NARROWEST, sized[widest] - (_widest(text) - width))
        text = _table(headers, rows, chosen, widths)
    if dropped:
        import textwrap

        note = (
            f"(left out to fit {width} columns: {', '.join(dropped)} — a wider terminal, or --specdec-columns, "
            "shows them)"
        )
        text += "\n" + "\n".join(textwrap.wrap(note, max(20, width)))
    return text


def wrapped(lines: Sequence[str], width: int) -> list[str]:
    """Each line wrapped to ``width``, its continuation indented: what a terminal of that width shows."""
    return [part for line in lines for part in textwrap.wrap(line, width, subsequent_indent="  ") or [""]]


def as_text(note: str) -> str:
    """A note as plain text: control bytes (a synthetic model's output samples) shown escaped, never sent raw."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in note)


def row_name(record: ComparisonRecord) -> str:
    """``code, γ=3``: a row's category and conditions with its γ (a γ sweep's rows differ only there)."""
    return f"{category_cell(record)}, γ={draft_label(record.num_draft)}"


def row_label(record: ComparisonRecord) -> str:
    """``[code, γ=3] test_mlx_draft[code]``: which table row a group of notes is about, said once."""
    return f"[{row_name(record)}] {record.nodeid.rsplit('::', 1)[-1]}"


def row_notes(record: ComparisonRecord, new: int) -> list[str]:
    """One row's notes, what needs reading first: why it did not decide, its change, then the rest (a failure is
    pytest's own failure line and the table's verdict: not said a third time)."""
    notes = [record.judgement.warning] if record.judgement.warning else []
    check = record.check
    if check is not None and (
        check.change in (Change.RECONFIRMED, Change.UNDECIDED, Change.REBASELINE)
        or (check.change is Change.NEW and new <= 3)
    ):
        notes.append(check.message)
    theory = theory_note(record)
    return notes + list(record.notes) + ([theory] if theory else [])


def terminal_notes(records: Sequence[ComparisonRecord], width: int = 120, *, every: bool = True) -> list[str]:
    """Lines under the table: the run's own (profile, confidence, synthetic models), then each row's notes under
    its label, wrapped to ``width`` (``every``: all of them; else the first few per row, and how to see the rest)."""
    if not records:
        return []
    first = records[0]
    run = [
        f"profile: {', '.join(sorted({r.profile for r in records}))}; device: {first.device}; release: {first.release}",
        f"intervals: {first.speedup.confidence:.0%} repeated confidence over each comparison's looks "
        "(group-sequential; the error is split across a test's bounds)",
    ]
    reading = reading_line(records)
    run += [reading] if reading else []
    if any(models.is_embedded(r.target) for r in records):
        run.append("synthetic models: the embedded pairs are deterministic stand-ins, not real LLMs")
    lines = wrapped(run, width)
    new = sum(1 for r in records if r.check is not None and r.check.change is Change.NEW)
    hidden = 0
    for record in records:
        notes = row_notes(record, new)
        if not notes:
            continue
        shown = notes if every else notes[:FEW_NOTES]
        hidden += len(notes) - len(shown)
        lines += textwrap.wrap(row_label(record) + ":", width, subsequent_indent="  ")
        for note in shown:
            lines += textwrap.wrap(as_text(note), width, initial_indent="  - ", subsequent_indent="    ")
    if hidden:
        lines.append(f"({hidden} more note(s) left out: -v or --specdec-notes=all shows them)")
    return lines


FEW_NOTES = 4


def claim_answers(records: Sequence[ComparisonRecord], width: int = 120) -> list[str]:
    """One line per claim (or test without one), the last before pytest's summary: each row's verdict, said once,
    e.g. ``claim d (SD ≤ 1.3x): refuted (FLIPPED) on code; holds on prose``."""
    grouped: dict[str, list[ComparisonRecord]] = {}
    for record in records:
        subject = f"claim {record.claim_id}" if record.claim_id else record.nodeid.rsplit("::", 1)[-1].split("[")[0]
        grouped.setdefault(subject, []).append(record)
    lines = []
    for subject, rows in grouped.items():
        verdicts: dict[str, list[str]] = {}
        by_gamma = len({row.num_draft for row in rows}) > 1  # a γ sweep's rows differ only there
        for row in rows:
            verdicts.setdefault(verdict_cell(row), []).append(row_name(row) if by_gamma else category_cell(row))
        said = "; ".join(f"{verdict} on {', '.join(categories)}" for verdict, categories in verdicts.items())
        claim = claim_cell(rows[0])
        head = f"{subject} ({claim})" if claim != "-" else subject
        lines += textwrap.wrap(f"{head}: {said}", width, subsequent_indent="  ")
    return lines


def busy_lines(records: Sequence[ComparisonRecord]) -> list[str]:
    """Above the verdict table: the comparisons measured while the machine was busy, and why (none: nothing).

    >>> busy_lines([])
    []
    """
    busy = [(r, r.load.busy) for r in records if r.load is not None and r.load.busy]
    if not busy:
        return []
    head = (
        f"the machine was busy while {len(busy)} of {len(records)} comparison(s) measured: their timings are "
        "shared with other work, not this machine's alone — measure again with the machine otherwise idle"
    )
    return [head, *[f"  {row_label(r)}: {why}" for r, why in busy]]


def progress_line(update: Progress, elapsed_s: float | None = None) -> str:
    """``specdec code: pair 7 of at most 72, speedup 1.52x [1.31, 1.76], 41 s, at most ~6 min left``."""
    if update.stage == "distribution check":  # generations of one length each: the rate so far tells the rest
        timing = ""
        if elapsed_s is not None:
            left = elapsed_s / update.done * (update.planned_max - update.done)
            timing = f", {duration(elapsed_s)}" + (f", ~{duration(left)} left" if left >= 1 else "")
        return f"specdec {update.category}: {update.stage} {update.done}/{update.planned_max}{timing}"
    if update.stage != "pair":  # "specdec code: engagement probe 3/8": no speedup, no time left to guess
        return f"specdec {update.category}: {update.stage} {update.done}/{update.planned_max}"
    interval = update.interval
    # An interval is shown once it says something: finite, and no wider than a factor of 3
    # (the first pairs give [0.00, 11587.29], which reads as a result and is none).
    meaningful = interval is not None and interval.low > 0.0 and interval.high < 3.0 * interval.low
    shown = f", speedup {interval_cell(interval)}" if meaningful else ""
    timing = ""
    if elapsed_s is not None:  # the distribution check after the pairs counts from the first pair on
        left = elapsed_s / update.done * (update.planned_max - update.done) + update.after_s
        check = f" ({duration(update.after_s)} of it the distribution check)" if update.after_s >= 1 else ""
        timing = f", {duration(elapsed_s)}" + (f", at most ~{duration(left)} left{check}" if left >= 1 else "")
    return f"specdec {update.category}: pair {update.done}/{update.planned_max}{shown}{timing}"


def duration(seconds: float) -> str:
    """``41 s``, ``6 min``: a time for a person to read."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _markdown_notes(records: Sequence[ComparisonRecord], summary: Sequence[str]) -> list[str]:
    """Each row's notes (end to end, the lossless check, published figures beside it, the theory, a warning) and
    the run's summary lines (sweeps, the tests' own notes); failures and flips have sections of their own."""
    noted = [(r, note) for r in records for note in (*r.notes, *filter(None, [theory_note(r), r.judgement.warning]))]
    if not (noted or summary):
        return []
    lines = ["", "## Notes", ""]
    lines += [f"- `{r.nodeid}` [{r.category}]: {_markdown_cell(note)}" for r, note in noted]
    return lines + [f"- {_markdown_cell(line)}" for line in summary]


def markdown_report(run: RunRecord, *, source: str = "") -> str:
    """The run for ``$GITHUB_STEP_SUMMARY``: flips first, then the verdict table, then the machine (``source``:
    the file it was read from, in the heading)."""
    records = sorted(
        run.comparisons, key=lambda r: (CHANGE_ORDER[r.check.change] if r.check else len(CHANGE_ORDER), r.nodeid)
    )
    flips = run.flips
    lines = [f"# pytest-specdec verdicts{f' — {source}' if source else ''}", ""]
    if flips:
        lines += [f"## ❌ Conclusion changed ({len(flips)})", ""]
        lines += [f"- `{r.nodeid}` [{r.category}]: {_markdown_cell(r.check.message)}" for r in flips if r.check]
        lines.append("")
    failures = [r for r in records if r.judgement.failure and r not in flips]
    if failures:
        lines += [f"## Failed ({len(failures)})", ""]
        lines += [f"- `{r.nodeid}` [{r.category}]: {_markdown_cell(r.judgement.failure or '')}" for r in failures]
        lines.append("")
    busy = busy_lines(records)
    if busy:
        lines += [
            "## ⚠ The machine was busy",
            "",
            busy[0],
            "",
            *[f"- {_markdown_cell(b.strip())}" for b in busy[1:]],
            "",
        ]
    with_baseline = has_baselines(records)
    headers = (*HEADERS, *BASELINE_HEADERS) if with_baseline else HEADERS
    rows = [[_markdown_cell(cell) for cell in row] for row in verdict_rows(records, with_baseline=with_baseline)]
    lines += [tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True), ""]
    lines += [f"Profile: {', '.join(sorted({r.profile for r in records})) or '-'}. "]
    if any(models.is_embedded(r.target) for r in records):
        lines[-1] += "Synthetic models: the embedded pairs are deterministic stand-ins, not real LLMs. "
    if records:
        lines[-1] += (
            f"Intervals are {records[0].speedup.confidence:.0%} repeated confidence intervals over each comparison's "
            "looks (group-sequential)."
        )
    lines += _markdown_notes(records, run.summary)
    lines += ["", "## Machine and versions", ""]
    versions = sorted({f"{k} {v}" for r in records for k, v in r.versions.items()})
    info = run.machine_info
    commit = run.commit_info
    lines += [
        f"- machine class: `{run.machine_class}`",
        f"- device: {', '.join(sorted({r.device for r in records})) or '-'}",
        f"- python: {info.get('python_version', '-')} on {info.get('system', '-')} {info.get('machine', '-')}",
        f"- versions: {', '.join(versions) or '-'}",
        f"- commit: `{commit.get('id', '-')}`{' (dirty)' if commit.get('dirty') else ''} on {commit.get('branch', '-')}",
        f"- pytest-specdec {run.specdec_version}, run {run.started} → {run.finished}",
        "",
    ]
    return "\n".join(lines)
