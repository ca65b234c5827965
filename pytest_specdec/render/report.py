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
from pytest_specdec.measure import Progress
from pytest_specdec.render.verdict_table import (
    BASELINE_HEADERS,
    CHANGE_ORDER,
    HEADERS,
    category_cell,
    claim_cell,
    has_baselines,
    interval_cell,
    reading_line,
    theory_note,
    verdict_cell,
    verdict_rows,
)
from pytest_specdec.store.records import Change, ComparisonRecord, RunRecord


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
        check.change in (Change.RECONFIRMED, Change.UNDECIDED, Change.REBASELINE, Change.ACCEPTANCE_FELL)
        or (check.change is Change.NEW and new <= 3)
    ):
        notes.append(check.message)
    theory = theory_note(record)
    return notes + list(record.notes) + ([theory] if theory else [])


def terminal_notes(
    records: Sequence[ComparisonRecord], width: int = 120, *, every: bool = True, room: int = 15
) -> list[str]:
    """Lines above the table: the run's own (profile, confidence, synthetic models), then each row's notes under
    its label, wrapped to ``width`` (``every``: all of them; else the first few per row within ``room`` lines,
    and how to see the rest)."""
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
    rows = [(row_label(record), row_notes(record, new)) for record in records]
    blocks = {  # each note as the lines it takes, by (row, note)
        (row, index): textwrap.wrap(as_text(note), width, initial_indent="  - ", subsequent_indent="    ")
        for row, (_, notes) in enumerate(rows)
        for index, note in enumerate(notes)
    }
    chosen = set(blocks) if every else _fitting(rows, blocks, room - len(lines) - 1, width)
    for row, (label, notes) in enumerate(rows):
        shown = [index for index in range(len(notes)) if (row, index) in chosen]
        if shown:
            lines += textwrap.wrap(label + ":", width, subsequent_indent="  ")
            lines += [line for index in shown for line in blocks[row, index]]
    hidden = len(blocks) - len(chosen)
    if hidden:
        lines.append(f"({hidden} more note(s) left out: -v or --specdec-notes=all shows them)")
    return lines


def _fitting(
    rows: Sequence[tuple[str, Sequence[str]]], blocks: Mapping[tuple[int, int], list[str]], room: int, width: int
) -> set[tuple[int, int]]:
    """The whole notes that fit ``room`` lines, labels counted: each row's first note first (what it needs read
    first: why it did not decide, its change), then the next ones up to :data:`FEW_NOTES` a row, rows in order."""
    chosen: set[tuple[int, int]] = set()
    used = 0
    wanted = [(row, 0) for row, (_, notes) in enumerate(rows) if notes]
    wanted += [(row, i) for row, (_, notes) in enumerate(rows) for i in range(1, min(len(notes), FEW_NOTES))]
    for row, index in wanted:
        label = 0 if any(r == row for r, _ in chosen) else len(textwrap.wrap(rows[row][0] + ":", width))
        cost = label + len(blocks[row, index])
        if used + cost <= room:
            chosen.add((row, index))
            used += cost
    return chosen


MOST_NOTE_LINES = 15  # lines of notes above the table at default verbosity, everything said there counted


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
    if any(models.is_embedded(r.target) for r in records):  # the last line, the one a newcomer reads: what next
        lines += textwrap.wrap(
            "self-test: the tool works here (SD on synthetic pairs, not an answer for a model); for your model, "
            "run the same command with --specdec-model YOUR_MODEL (and --specdec-draft for a draft)",
            width, subsequent_indent="  ",
        )  # fmt: skip
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
