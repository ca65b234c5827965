"""What the scoreboard shows, gathered from a store: frozen rows, nights and published figures, no HTML.

Sources: ``baselines/<machine class>/<backend>.json`` (the accepted results), ``baselines/history/
<machine class>.jsonl`` (the nights kept in the repository), results files written by ``--specdec-json``
(tonight's readings, newer than any accepted one), history files of a runner's nights (the gate's
``nights.jsonl``: each line may carry the gate's word on that night, ``gate``, such as "flip not confirmed"),
the seed's ``evidence.json`` (published figures, per chip) and submitted results (``community/<machine
class>/*.json``, written by ``pytest-specdec submit``: rows of their own beside the owned runners', "submitted, not
reproduced", the newest of each key and class shown with every submission of its release pooled into one
answer). A file that cannot be read — missing, torn, of a future protocol — is skipped and named; the rest is built.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.render.verdict_table import in_words, short_model
from pytest_specdec.store.baselines import baseline_key, list_baseline_files, load_any
from pytest_specdec.store.files import load_run
from pytest_specdec.store.night_statistics import Pooled, pool_intervals
from pytest_specdec.store.nights import Night, Nights, read_nights
from pytest_specdec.store.records import Change, ComparisonRecord
from pytest_specdec.store.submissions import Submission, list_submissions, read_submission

SUBMITTED = "submitted"  # a row's source when it comes from community/: checked, not reproduced
CONFIRMED_FLIP = "conclusion changed"  # the gate's word for a flip its confirm step showed the release made
UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def flip_word(told: object) -> str:
    """What a flip is called on the site: the gate's own word where it said one that is not a confirmed flip
    ("flip not confirmed", "re-baseline needed" …), else "flipped" (a flip the release made, or no gate read).

    >>> flip_word("flip not confirmed"), flip_word("conclusion changed"), flip_word(None)
    ('flip not confirmed', 'flipped', 'flipped')
    """
    return str(told) if told and told != CONFIRMED_FLIP else "flipped"


def slug(*parts: str) -> str:
    """A file name for a page: readable, and unique by a short digest of what it names.

    >>> slug("Apple-M1-Max-64GB", "mlx", "bench/test_d.py::test[code]")
    'Apple-M1-Max-64GB-mlx-bench-test_d.py-test-code-211d897e'
    """
    readable = UNSAFE.sub("-", "-".join(parts)).strip("-")[:80]
    return f"{readable}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Row:
    """One comparison key's latest reading on one machine class: a cell of the matrix."""

    machine_class: str
    record: ComparisonRecord
    when: str  # ISO time of the reading
    source: str  # "accepted" (a baseline), "tonight" (a results file) or "submitted" (pytest-specdec submit's file)
    accepted: ComparisonRecord | None  # the accepted result of this key, when there is one
    told: str = ""  # the gate's word on this reading's night ("flip not confirmed" …), when a gate said one
    pooled: Pooled | None = None  # a submitted row: every submission of its key, class and release as one answer

    @property
    def key(self) -> str:
        """The comparison key (``baselines/``' own)."""
        return baseline_key(self.record)

    @property
    def claim(self) -> str:
        """The claim's id, else the test's name."""
        return self.record.claim_id or self.record.nodeid.split("::")[-1].split("[")[0]

    @property
    def words(self) -> str:
        """The answer against 1x, as the terminal's ``in words`` column says it."""
        return in_words(self.record)

    @property
    def model(self) -> str:
        """``gemma-3-270m-q4_k_m.gguf (profile gemma)``, ``embedded:target (synthetic) (profile embedded)``: a real
        model and a synthetic one never look the same on the matrix."""
        return f"{short_model(self.record.target)} (profile {self.record.profile})"

    @property
    def flipped(self) -> str:
        """``"refuted (was holds)"`` when tonight's verdict differs from the accepted one, else ``""``."""
        check = self.record.check
        if check is not None and check.change is Change.FLIP:
            was = self.accepted.judgement.conclusion.value if self.accepted else "the accepted verdict"
            return f"{self.record.judgement.conclusion.value} (was {was})"
        return ""

    @property
    def flip_word(self) -> str:
        """What tonight's flip is called (:func:`flip_word`)."""
        return flip_word(self.told)

    @property
    def submitted(self) -> bool:
        """A result someone submitted (``pytest-specdec submit``): checked for consistency, not reproduced here."""
        return self.source == SUBMITTED

    @property
    def _own(self) -> tuple[str, ...]:
        return (SUBMITTED,) if self.submitted else ()  # a submitted row's pages never replace an owned row's

    @property
    def page(self) -> str:
        """The comparison page's file name."""
        return slug(self.machine_class, self.record.backend, self.key, *self._own) + ".html"

    @property
    def claim_page(self) -> str:
        """The file name of the page of this claim's nights on this machine class (one per comparison key: a
        claim measured under two conditions has two)."""
        parts = (self.machine_class, self.record.backend, self.claim, self.record.category, self.key, *self._own)
        return slug(*parts) + ".html"


@dataclass(frozen=True)
class Published:
    """A published figure from the seed's evidence, beside the measured rows."""

    chip: str
    backend: str
    model: str
    speedup: float
    paired: bool
    source: str
    claim: str


@dataclass(frozen=True)
class Scoreboard:
    """Everything the site shows."""

    rows: tuple[Row, ...]
    nights: Mapping[tuple[str, str, str], Nights]  # (machine, backend, key) → its nights, oldest first
    published: tuple[Published, ...]
    skipped: tuple[str, ...]  # "path: why" for each file left out


def _accepted(baselines: Path, skipped: list[str]) -> list[tuple[str, str, ComparisonRecord]]:
    found: list[tuple[str, str, ComparisonRecord]] = []
    for path in list_baseline_files(baselines):
        try:
            loaded = load_any(path)
        except (SpecdecUsageError, OSError, ValueError) as error:
            skipped.append(f"{path}: {error}")
            continue
        found += [(loaded.machine_class, e.accepted_at, e.result) for e in loaded.entries.values()]
    return found


def _tonight(results: Iterable[Path], skipped: list[str]) -> list[tuple[str, str, ComparisonRecord]]:
    found: list[tuple[str, str, ComparisonRecord]] = []
    for path in results:
        try:
            run = load_run(path)
        except (SpecdecUsageError, OSError, ValueError) as error:
            skipped.append(f"{path}: {error}")
            continue
        found += [(run.machine_class, run.finished, c) for c in run.comparisons]
    return found


Admit = Callable[[Submission], str | None]  # why a submission is not shown (``pytest-specdec validate``'s first reason)


def _submitted(folder: Path | None, skipped: list[str], admit: Admit | None) -> list[tuple[str, str, ComparisonRecord]]:
    found: list[tuple[str, str, ComparisonRecord]] = []
    for path in list_submissions(folder) if folder is not None else []:
        try:
            submission = read_submission(path)
        except (SpecdecUsageError, OSError, ValueError) as error:
            skipped.append(f"{path}: {error}")
            continue
        why = admit(submission) if admit is not None else None
        if why is not None:
            skipped.append(f"{path}: rejected by pytest-specdec validate: {why}")
            continue
        found.append((submission.machine.machine_class, submission.submitted, submission.comparison))
    return found


def _nights(baselines: Path, histories: Sequence[Path], skipped: list[str]) -> dict[tuple[str, str, str], Nights]:
    """Every night per (machine class, backend, key), oldest first: the repository's history (its machine class
    from the file's name) and the runners' (from each line). One result kept in both is one night, with the
    gate's word where either line has it."""
    nights: dict[tuple[str, str, str], dict[tuple[str, str, str, str], Night]] = {}
    folder = baselines / "history"
    kept = sorted(folder.glob("*.jsonl")) if folder.is_dir() else []
    for path, named in [*((p, True) for p in kept), *((p, False) for p in histories)]:
        torn: list[str] = []
        try:
            read = read_nights(path, torn)
        except SpecdecUsageError as error:
            skipped.append(f"{path}: {error}")
            continue
        skipped += [f"{path}: {line}" for line in torn]
        for night in read:
            if night.interrupted:  # kept from a run cut short: never a night of the trend
                continue
            machine = path.stem if named else night.machine_class or path.stem
            seen = nights.setdefault((machine, night.backend, night.key), {})
            if night.mark not in seen or (night.gate and not seen[night.mark].gate):
                seen[night.mark] = night
    return {k: tuple(sorted(v.values(), key=lambda n: n.time)) for k, v in nights.items()}


def _told(nights: Nights, when: str) -> str:
    """The gate's word on the night of a reading taken at ``when``, else ``""``."""
    return next((n.gate for n in nights if n.time == when and n.gate), "")


def _published(evidence: Sequence[Mapping[str, Any]]) -> tuple[Published, ...]:
    return tuple(
        Published(
            chip=f"{row.get('chip')} {row.get('memory_gb')} GB" if row.get("memory_gb") else str(row.get("chip")),
            backend=str(row.get("backend_detail") or row.get("backend")),
            model=str(row.get("model")),
            speedup=float(row["speedup"]),
            paired=row.get("role") == "measured",
            source=str(row.get("source") or ""),
            claim=str(row.get("claim") or ""),
        )
        for row in evidence
        if isinstance(row.get("speedup"), int | float)
    )


def gather(
    baselines: Path,
    results: Sequence[Path],
    evidence: Sequence[Mapping[str, Any]],
    histories: Sequence[Path] = (),
    *,
    community: Path | None = None,
    admit: Admit | None = None,
) -> Scoreboard:
    """The scoreboard of a store: each key's newest reading (owned, and submitted beside it), its nights, the
    published figures, what was skipped."""
    skipped: list[str] = []
    kept = _accepted(baselines, skipped)
    accepted = {(m, r.backend, baseline_key(r)): r for m, _, r in kept}
    nights = _nights(baselines, histories, skipped)
    latest: dict[tuple[str, str, str, bool], Row] = {}
    sources = (
        ("accepted", kept),
        ("tonight", _tonight(results, skipped)),
        (SUBMITTED, _submitted(community, skipped, admit)),
    )
    shared: dict[tuple[str, str, str], list[ComparisonRecord]] = {}
    for source, readings in sources:
        for machine, when, record in readings:
            at = (machine, record.backend, baseline_key(record))
            told = _told(nights.get(at, ()), when) if source != SUBMITTED else ""
            mine = (*at, source == SUBMITTED)
            if source == SUBMITTED:
                shared.setdefault(at, []).append(record)
            if mine not in latest or when >= latest[mine].when:
                latest[mine] = Row(machine, record, when, source, accepted.get(at), told)
    for at, records in shared.items():  # the newest submission's release: results of one release only are pooled
        row = latest[(*at, True)]
        same = [r.speedup for r in records if r.release == row.record.release]
        latest[(*at, True)] = replace(row, pooled=pool_intervals(same, row.record.speedup.confidence))
    rows = sorted(
        latest.values(), key=lambda r: (r.machine_class, r.record.backend, r.claim, r.record.category, r.submitted)
    )
    return Scoreboard(tuple(rows), nights, _published(evidence), tuple(skipped))
