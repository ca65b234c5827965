"""One session's dealings with the baseline store.

Every result is checked against its accepted baseline as soon as it is measured (so
a flip fails its own test), and the session's writes wait for :meth:`finish`: once,
at the end, all accepted entries, candidates and history lines go out together. An
interrupted session writes nothing.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.baselines import (
    BaselineEntry,
    BaselineStore,
    baseline_key,
    compare_with_baseline,
    drift_message,
    flipped_bounds,
    within_run_only,
)
from pytest_specdec.store.files import now_iso, remove_stale_temporaries
from pytest_specdec.store.night_statistics import run_spread
from pytest_specdec.store.nights import Night, Nights, read_nights
from pytest_specdec.store.records import Change, ComparisonRecord, Conclusion, Provenance, Role


@dataclass(frozen=True)
class Decision:
    """What a checked result does to its test: fail with a line, warn, or pass."""

    failure: str | None = None
    warning: str | None = None


@dataclass(frozen=True)
class LedgerPolicy:
    """How results are judged against baselines and what gets written."""

    update: bool = False  # --specdec-update-baselines
    accept_inconclusive: bool = False  # --specdec-accept-inconclusive: else an inconclusive result stays a candidate
    fail_on_drift: bool = False
    min_effect: float = 0.05
    drift_alpha: float = 0.01  # drift raised on a quiet night at most this often (the run's false-discovery rate)
    acceptance_drop: float = 0.10  # how far below the accepted acceptance interval reads "acceptance fell"
    write: bool = True  # False: compare only (e.g. --specdec-baselines-readonly)


@dataclass(frozen=True)
class FinishReport:
    """What :meth:`BaselineLedger.finish` did, line by line."""

    lines: tuple[str, ...] = ()
    error: str | None = None
    drifted: tuple[ComparisonRecord, ...] = ()  # comparisons whose drift survived the run's FDR control
    failed: tuple[str, ...] = ()  # drift lines that fail the session (--specdec-fail-on-drift)


@dataclass
class BaselineLedger:
    """Checks results against the store and writes them out at the end."""

    store: BaselineStore
    policy: LedgerPolicy = LedgerPolicy()
    machine_info: Mapping[str, Any] = field(default_factory=dict)
    commit_info: Mapping[str, Any] = field(default_factory=dict)
    records: list[ComparisonRecord] = field(default_factory=list)
    history_sources: tuple[Path, ...] = ()  # more history for the run-to-run spread (the gate's runner's own)
    _nights: dict[str, list[Night]] = field(default_factory=dict, init=False, repr=False)
    unread: list[str] = field(default_factory=list, init=False)  # a history source not (wholly) read, and the cost

    def __post_init__(self) -> None:
        """Read the history once, before anything is measured (a broken file counts no nights; the append at
        the run's end names what is wrong with the repository's, :attr:`unread` with a source given)."""
        seen: set[tuple[str, str, str, str]] = set()
        cost = "its nights are not counted in this machine's night-to-night spread"
        for path in (self.store.history_path(), *self.history_sources):
            given = path in self.history_sources
            torn: list[str] = []
            try:
                nights = read_nights(path, torn) if path.is_file() or given else ()
            except SpecdecUsageError as error:
                nights = ()
                if given:
                    self.unread.append(f"run history: {error} — {cost}")
            if given:
                self.unread += [f"run history: {line} — {cost} for that line" for line in torn]
            for night in nights:
                if night.mark not in seen:
                    seen.add(night.mark)
                    self._nights.setdefault(f"{night.backend}\0{night.key}", []).append(night)

    def nights(self, record: ComparisonRecord) -> Nights:
        """``record``'s key's nights on this machine (its run-to-run spread, drift across nights)."""
        return tuple(self._nights.get(f"{record.backend}\0{baseline_key(record)}", []))

    def check(self, record: ComparisonRecord) -> ComparisonRecord:
        """``record`` with its baseline check attached, remembered for :meth:`finish`.

        A record that can never be a baseline (a lossless failure, arms that cannot
        differ) is kept for the history but compared with nothing.
        """
        if record.judgement.conclusion.says_nothing_about_speed:
            self.records.append(record)
            return record
        entry = self.store.lookup(record)
        nearest = self.store.nearest(record) if entry is None else None
        check = compare_with_baseline(record, entry, self.store.machine_class, nights=self.nights(record),
                                      nearest=nearest, acceptance_drop=self.policy.acceptance_drop)  # fmt: skip
        checked = replace(record, check=check)
        self.records.append(checked)
        return checked

    def decide(self, record: ComparisonRecord) -> Decision:
        """Pass, warn or fail: the one place that decides, from the judgement and the baseline check.

        A flip fails first — unless it holds only within tonight's run, not beyond the machine's run-to-run
        spread: then it warns (drift is decided at the end of the run); then the judgement's own
        failure (lossless, not engaged, a refuted gating bound, strict inconclusive). A
        reference row (beside the verdict) never fails on its baseline, and an accepting run
        (``--specdec-update-baselines``) never fails on one.
        """
        check, judgement = record.check, record.judgement
        flipped = (
            check is not None
            and check.change is Change.FLIP
            and not self.policy.update
            and judgement.role is not Role.REFERENCE_ROW
        )
        if flipped and check is not None and self._within_run_only(record):
            return Decision(judgement.failure, check.message)  # not beyond the run-to-run spread: it warns
        if check is not None and check.change is Change.ACCEPTANCE_FELL and not self.policy.update:
            return Decision(judgement.failure, check.message)  # the verdict stands: it warns (the gate goes red)
        return Decision(check.message if flipped and check else judgement.failure, judgement.warning)

    def _within_run_only(self, record: ComparisonRecord) -> bool:
        entry = self.store.lookup(record)
        if entry is None:
            return False
        return within_run_only(record, flipped_bounds(record, entry.result), run_spread(self.nights(record)))

    def control_drift(self) -> list[ComparisonRecord]:
        """Mark as drifted the comparisons whose drift survives Benjamini–Hochberg over the whole run and moved at
        least ``min_effect``.

        Each comparison's drift test runs at measure time; deciding it only here keeps the
        run's false-drift rate at ``drift_alpha`` however many comparisons it makes. Every tested comparison
        counts in the correction; the least move is asked of the discoveries after it (asked before, it would
        leave out the tests least likely to be discoveries and so loosen the correction for the rest).
        """
        tested = [
            (index, record)
            for index, record in enumerate(self.records)
            if record.check is not None
            and record.check.change in (Change.UNCHANGED, Change.RECONFIRMED)
            and record.check.drift_p_value is not None
            and math.isfinite(record.check.drift_p_value)
            and record.check.drift_ratio is not None
        ]
        from scipy.stats import false_discovery_control

        adjusted = false_discovery_control([r.check.drift_p_value for _, r in tested]) if tested else []  # type: ignore[union-attr]
        found = [float(p) <= self.policy.drift_alpha for p in adjusted]  # Benjamini–Hochberg's step-up
        drifted = []
        for (index, record), discovered in zip(tested, found, strict=True):
            check = record.check
            assert check is not None
            assert check.drift_ratio is not None
            assert check.drift_p_value is not None
            if not discovered or abs(math.log(check.drift_ratio)) < math.log1p(self.policy.min_effect):
                continue
            message = drift_message(record, check.drift_ratio, check.drift_p_value)
            self.records[index] = replace(record, check=replace(check, change=Change.DRIFT, message=message))
            drifted.append(self.records[index])
        return drifted

    def finish(
        self, *, interrupted: bool, collected: Collection[str] | None, scopes: Sequence[str] = ("",)
    ) -> FinishReport:
        """Write accepted entries, candidates and history; report stale baselines.

        ``collected`` is every node id of a run that collected whole folders
        (``None`` when a subset ran, so staleness cannot be judged); ``scopes`` are
        those folders relative to the rootdir (``""`` for the rootdir itself).
        """
        if not self.records and collected is None:
            return FinishReport()
        if interrupted:
            return self._keep_interrupted()
        drifted = self.control_drift()
        drift_lines = tuple(f"{r.nodeid} [{r.category}]: {r.check.message}" for r in drifted if r.check)
        failed = drift_lines if drifted and self.policy.fail_on_drift and not self.policy.update else ()
        if not self.policy.write:
            return FinishReport(drift_lines + self._stale(collected, scopes), drifted=tuple(drifted), failed=failed)
        try:
            lines = drift_lines + tuple(self._write())
        except SpecdecUsageError as error:
            return FinishReport(error=str(error))
        except OSError as error:
            return FinishReport(
                error=f"cannot write under {self.store.root}: {error.strerror or error} — make it writable "
                "or point --specdec-baselines at another folder; existing baselines were left as they were"
            )
        return FinishReport(tuple(lines) + self._stale(collected, scopes), drifted=tuple(drifted), failed=failed)

    def _keep_interrupted(self) -> FinishReport:
        """A run cut short keeps each finished comparison as a history line marked interrupted, and nothing else."""
        if not self.records:
            return FinishReport(("interrupted before any comparison finished: nothing to keep",))
        when = now_iso()
        lines = [Night.of_record(r, self.store.machine_class, False, when, interrupted=True) for r in self.records]
        try:
            path = self.store.append_history(lines)
        except OSError as error:
            return FinishReport(error=f"interrupted, and the {len(lines)} finished comparison(s) could not be kept in "
                                      f"{self.store.history_path()}: {error.strerror or error}")  # fmt: skip
        return FinishReport((
            f"interrupted: kept the {len(lines)} finished comparison(s) as history lines in {path}, marked "
            "interrupted (never accepted, never proposed for acceptance); no baseline or candidate was written",
        ))  # fmt: skip

    def _write(self) -> list[str]:
        when = now_iso()
        with self.store.locked():
            leftovers = remove_stale_temporaries(self.store.root)
        accepted: dict[str, dict[str, BaselineEntry]] = {}
        candidates: dict[str, dict[str, BaselineEntry]] = {}
        held: list[str] = []
        for record in self.records:
            if record.judgement.conclusion.says_nothing_about_speed:
                continue
            entry = BaselineEntry(
                result=replace(record, check=None),
                provenance=Provenance.MEASURED,
                accepted_at=when,
                machine_info=self.machine_info,
                commit_info=self.commit_info,
            )
            is_new = record.check is not None and record.check.change in (Change.NEW, Change.REBASELINE)
            inconclusive = record.judgement.conclusion is Conclusion.INCONCLUSIVE
            if self.policy.update and inconclusive and not self.policy.accept_inconclusive:
                candidates.setdefault(record.backend, {})[baseline_key(record)] = entry
                s = record.speedup
                held.append(f"{record.nodeid} [{record.category}]: not accepted — inconclusive ({s.estimate:.2f}x "
                            f"[{s.low:.2f}, {s.high:.2f}]) can never flip, so later runs would read 'unchanged' against "
                            "it; kept as a candidate (measure more pairs, or accept it with "
                            "--specdec-accept-inconclusive)")  # fmt: skip
            elif self.policy.update:
                accepted.setdefault(record.backend, {})[baseline_key(record)] = entry
            elif is_new:
                candidates.setdefault(record.backend, {})[baseline_key(record)] = entry
        lines: list[str] = list(held)

        # History first: a run killed between the two writes leaves history lines, never an accepted
        # baseline without its history. A baseline write that fails (a full disk, Ctrl-C) takes the
        # history append back and, for an error, appends the lines again saying what was really accepted:
        # history never says "accepted" for an accept that did not happen.
        def lines_for(accepting: Mapping[str, Collection[str]]) -> list[Night]:
            return [
                Night.of_record(r, self.store.machine_class, baseline_key(r) in accepting.get(r.backend, ()), when)
                for r in self.records
            ]

        if self.records:
            lines.append(
                f"history: {len(self.records)} line(s) appended to {self.store.append_history(lines_for(accepted))}"
            )
        written: set[str] = set()
        try:
            for backend, entries in sorted(accepted.items()):
                path = self.store.write(backend, entries)
                written.add(backend)
                self.store.discard_candidates(backend, list(entries))
                state = f"wrote {path}" if path else "unchanged on disk"
                lines.append(f"accepted {len(entries)} baseline(s) for {self.store.machine_class}/{backend}: {state}")
                lines += newer_kept(self.store.kept_newer)
        except BaseException as error:
            # Take the optimistic lines back and say what was really accepted (a backend written before the
            # failure keeps its "accepted" line; under Ctrl-C too).
            if self.records and self.store.take_back_last_append():
                with contextlib.suppress(OSError):
                    self.store.append_history(lines_for({b: accepted[b] for b in written}))
            if not isinstance(error, OSError):
                raise
            raise SpecdecUsageError(
                f"could not write the accepted baselines ({error.filename or self.store.root}: "
                f"{error.strerror or error}) — nothing more was accepted, and the history lines say so"
            ) from None
        for backend, entries in sorted(candidates.items()):
            path = self.store.write(backend, entries, candidates=True)
            shown = path or self.store.path(backend, candidates=True)
            lines.append(
                f"{len(entries)} result(s) kept as candidates in {shown}, not accepted (see above)"
                if self.policy.update
                else f"{len(entries)} result(s) without a baseline written as candidates to {shown} — "
                "accept with --specdec-update-baselines"
            )
        if leftovers:
            lines.append(
                f"removed {len(leftovers)} temporary file(s) left by an interrupted write under {self.store.root}"
            )
        return lines

    def _stale(self, collected: Collection[str] | None, scopes: Sequence[str]) -> tuple[str, ...]:
        if collected is None:
            return ()

        def in_scope(nodeid: str) -> bool:
            return any(not scope or nodeid.startswith(scope.rstrip("/") + "/") for scope in scopes)

        backends = {r.backend for r in self.records}
        stale = []
        for backend in sorted(backends):
            for key, entry in self.store.load(backend).entries.items():
                nodeid = entry.result.nodeid
                if entry.provenance is Provenance.MEASURED and in_scope(nodeid) and nodeid not in collected:
                    stale.append(
                        f"stale baseline: {key} in {self.store.path(backend)} — its test no longer exists; "
                        "remove the entry"
                    )
        return tuple(stale)


def default_root(rootdir: Path, configured: str | None) -> Path:
    """``--specdec-baselines DIR`` relative to the rootdir, default ``baselines/``."""
    path = Path(configured) if configured else Path("baselines")
    return path if path.is_absolute() else rootdir / path


def newer_kept(keys: Sequence[str]) -> list[str]:
    """The line for baselines a write kept because they were measured under a newer protocol."""
    if not keys:
        return []
    return [f"kept {len(keys)} baseline(s) measured under a newer measurement protocol (first: {keys[0]}) — an "
            "older pytest-specdec never replaces them; upgrade it to accept these results"]  # fmt: skip


def check_store_folder(root: Path, flag: str = "--specdec-baselines") -> None:
    """The baselines folder (made at the end if absent) must be a folder, under folders: said before any pair."""
    blocking = next((p for p in (root, *root.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise SpecdecUsageError(
            f"{flag} {root}: {blocking} is a file, not a folder — the results could never be stored there; point "
            f"{flag} at a folder (or move the file)"
        )
