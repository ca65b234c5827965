"""Accepted results, kept per machine class, and what a new result says against them.

Layout under the baselines directory (``baselines/`` at the rootdir by default)::

    <machine class>/<backend>.json             accepted baselines (commit these)
    candidates/<machine class>/<backend>.json  results without a baseline, for review (ignored by git)
    history/<machine class>.jsonl              every result of every run, append-only (ignored by git)
    history/.specdec.lock                      the lock, made only by a session that writes

``candidates/`` and ``history/`` each get a ``.gitignore`` when the plugin first writes there (a local run
dirties no tracked file); nothing is written beside the accepted files but what is accepted.

A baseline file is ``{"schema_version": 3, "machine_class", "backend", "entries"}``
with one :class:`BaselineEntry` per key (node id, prompt category, γ, model pair and
model digest). Files are JSON with sorted keys, indent 2 and a trailing newline,
written atomically (temporary file + rename) under a lock, once per session, and
only when their content changes: an untouched baseline stays byte-identical.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_specdec.axes.metric import DECODE, METRIC
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.stats import Interval, Verdict, verdict_on
from pytest_specdec.store.baseline_files import read_joined, remove_split, rendered, unchanged, write_split
from pytest_specdec.store.files import (
    check_schema,
    finite_json,
    to_jsonable,
    validate,
    write_atomically,
)
from pytest_specdec.store.night_statistics import RunSpread, drift, run_spread, widened
from pytest_specdec.store.nights import Night, Nights
from pytest_specdec.store.records import (
    MEASUREMENT_PROTOCOL,
    SCHEMA_VERSION,
    BoundRecord,
    Change,
    CheckRecord,
    ComparisonRecord,
    Provenance,
)

LOCK_TIMEOUT_S = 60.0
MODEL_FILES = (".gguf", ".safetensors", ".bin", ".npz")  # a name ending so is a file, not a hub id


@dataclass(frozen=True)
class BaselineEntry:
    """One accepted result and where it came from."""

    result: ComparisonRecord
    provenance: Provenance
    accepted_at: str
    machine_info: Mapping[str, Any] = field(default_factory=dict)
    commit_info: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None  # for published figures: the document and section


@dataclass(frozen=True)
class BaselineFile:
    """The accepted baselines of one backend on one machine class."""

    machine_class: str
    backend: str
    entries: Mapping[str, BaselineEntry]
    schema_version: int = SCHEMA_VERSION


def baseline_key(record: ComparisonRecord, digest: str | None = None) -> str:
    """``nodeid [category, γ=3, T=0.7, target + draft @digest]``: what makes results comparable.

    Every axis its conditions set is in the key (γ always): a comparison under defaults keeps
    the key it had before any later axis existed. The models are named by their file or hub name
    (:func:`model_name`) and told apart by their digest: the same weights at another path are the same key.
    """
    return f"{record.nodeid} [{_scope_text(record)}, {_models(record)} @{digest or record.model_digest}]"


def _models(record: ComparisonRecord) -> str:
    """``target + draft`` as a key names them (:func:`model_name`)."""
    return model_name(record.target) + (f" + {model_name(record.draft)}" if record.draft else "")


def model_name(model: str) -> str:
    """A model as a key names it: a path by its last part, a hub id (``org/name``) or anything else as written.

    >>> model_name("/tmp/gemma/gemma-3-270m-q4_k_m.gguf"), model_name("models/t.gguf"), model_name("embedded:target")
    ('gemma-3-270m-q4_k_m.gguf', 't.gguf', 'embedded:target')
    >>> model_name("mlx-community/Qwen2.5-7B-Instruct-4bit")
    'mlx-community/Qwen2.5-7B-Instruct-4bit'
    """
    text = model.rstrip("/")
    last = text.rsplit("/", 1)[-1]
    is_path = text.startswith(("/", "~", ".")) or text.count("/") > 1 or last.endswith(MODEL_FILES)
    return last if "/" in text and is_path else model


def current_key(key: str) -> str:
    """A key as this release writes it: one written with the models' paths names them as :func:`baseline_key` does
    (files and history lines written before are read with the keys their results have now).

    >>> current_key("t.py::t [code, γ=3, /tmp/a/t.gguf + ~/m/d.gguf @1a+2b]")
    't.py::t [code, γ=3, t.gguf + d.gguf @1a+2b]'
    >>> current_key("t.py::t [code, γ=0, t.gguf @1a]")
    't.py::t [code, γ=upstream, t.gguf @1a]'
    """
    key = key.replace(", γ=0,", ", γ=upstream,")  # the engine chose the draft length: γ=0 until 0.5
    head, at, digest = key.rpartition(" @")
    scope, comma, models = head.rpartition(", ")
    if not at or not comma or not digest.endswith("]"):
        return key
    return f"{scope}, {' + '.join(model_name(m) for m in models.split(' + '))} @{digest}"


def _scope_text(record: ComparisonRecord) -> str:
    """``code, γ=3, T=0.7``: the category and every condition's label."""
    return ", ".join((record.category, *record.conditions.key_labels))


def _check(
    change: Change,
    message: str,
    entry: BaselineEntry | None = None,
    drift_ratio: float | None = None,
    drift_p_value: float | None = None,
) -> CheckRecord:
    """The check as stored with the result, naming the baseline it was measured against."""
    baseline = entry.result if entry else None
    return CheckRecord(
        change=change,
        message=message,
        baseline_speedup=baseline.speedup if baseline else None,
        baseline_release=baseline.release if baseline else None,
        provenance=entry.provenance if entry else None,
        drift_ratio=drift_ratio,
        drift_p_value=drift_p_value,
    )


def _differences(old: ComparisonRecord, new: ComparisonRecord) -> list[str]:
    """What separates two results of one test: each condition, the models and their digest, ``old → new``."""
    said = []
    before, after = dict(old.conditions.items()), dict(new.conditions.items())
    for axis in sorted(before.keys() | after.keys(), key=lambda a: a.order):
        if before.get(axis, axis.default) != after.get(axis, axis.default):
            said.append(f"{axis.label(before.get(axis, axis.default))} → {axis.label(after.get(axis, axis.default))}")
    # the models as keys name them: a file moved to another folder is no difference
    for what, was, now in (
        ("models", _models(old), _models(new)),
        ("model digest", old.model_digest, new.model_digest),
    ):
        if was != now:
            said.append(f"{what} {was} → {now}")
    return said


def _interval_text(record: ComparisonRecord) -> str:
    s = record.speedup
    return f"{s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}]"


def release_change(old: str, new: str) -> str:
    """``mlx-lm 0.32.2 → 0.33.0`` (the shared name is said once); no arrow where no release changed.

    >>> release_change("simulated 1.0", "simulated 1.0")
    'simulated 1.0 (no release changed)'
    """
    if old == new:
        return f"{new} (no release changed)"
    old_name, _, _ = old.rpartition(" ")
    new_name, _, new_version = new.rpartition(" ")
    return f"{old} → {new_version}" if old_name and old_name == new_name else f"{old} → {new}"


def libraries_changed(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """``; libraries: mlx 0.32.0 → 0.32.2 (mlx-vlm unchanged)``: which recorded library moved since the baseline
    (a library under the engine can move the answer with the engine unchanged); ``""`` where none did.

    >>> libraries_changed({"mlx": "0.32.0", "mlx-vlm": "0.7.3"}, {"mlx": "0.32.2", "mlx-vlm": "0.7.3"})
    '; libraries: mlx 0.32.0 → 0.32.2 (mlx-vlm unchanged)'
    """
    moved = [f"{name} {old[name]} → {new[name]}" for name in sorted(old.keys() & new.keys()) if old[name] != new[name]]
    if not moved:
        return ""
    kept = sorted(name for name in old.keys() & new.keys() if old[name] == new[name])
    return f"; libraries: {', '.join(moved)}" + (f" ({', '.join(kept)} unchanged)" if kept else "")


def compare_with_baseline(
    new: ComparisonRecord,
    entry: BaselineEntry | None,
    machine_class: str,
    *,
    nights: Nights = (),
    nearest: tuple[str, str] | None = None,
    acceptance_drop: float | None = None,
) -> CheckRecord:
    """Flip, drift, re-confirmed or unchanged; ``new`` when there is no baseline (naming the ``nearest``
    accepted key of the same test and what differs, where one is: :meth:`BaselineStore.nearest`).

    The baseline ran on another night: a flip that does not stand beyond the machine's run-to-run spread
    (tonight's speedup interval widened by it, from the key's ``nights``) says so and only warns
    (:meth:`BaselineLedger.decide`; the gate still measures it again), and drift is read across nights
    (:func:`~pytest_specdec.store.night_statistics.drift`). While the spread is not yet known, both read
    tonight's run alone: the flip its interval, drift its pairs against the baseline's.
    """
    if entry is None or entry.provenance is Provenance.PUBLISHED:
        # A published figure is evidence, shown beside a result, never a baseline to flip against.
        replaces = (
            f"; it differs from the accepted {nearest[0]} only in {nearest[1]} — if it replaces that one, accept it "
            "and remove the old entry"
            if nearest
            else ""
        )
        return _check(
            Change.NEW,
            f"not yet gated: no accepted baseline for {new.nodeid} [{_scope_text(new)}] on "
            f"{machine_class} — accept with --specdec-update-baselines{replaces}",
        )
    old = entry.result
    if entry.provenance is Provenance.MEASURED and old.protocol != new.protocol:
        return _check(
            Change.REBASELINE,
            f"re-baseline: the baseline ({_interval_text(old)}, {old.release}) was measured under measurement "
            f"protocol {old.protocol}, this result under {new.protocol} — a change of pytest-specdec, not of "
            f"the backend, so neither a flip nor a re-confirmation; written as a candidate, accept it with "
            "--specdec-update-baselines",
            entry,
        )
    changed = option_changes(old.design.arm_options, new.design.arm_options)
    if changed:
        return _check(
            Change.REBASELINE,
            f"option changed: {changed} — the baseline ({_interval_text(old)}, {old.release}) ran its arms with "
            "other options, so this is neither a flip nor a re-confirmation; written as a candidate, accept it "
            "with --specdec-update-baselines",
            entry,
        )
    before = old.judgement.bound_verdicts
    flipped = flipped_bounds(new, old)
    spread = run_spread(nights)
    if flipped:
        what = "; ".join(f"claim {b.kind}={b.bound:g} now {b.verdict}" for b in flipped)
        wide = widened(new.speedup, spread)
        only_tonight = (
            f" — within tonight's run only: not beyond this machine's {spread.text} "
            f"({wide.estimate:.2f}x [{wide.low:.2f}, {wide.high:.2f}]), so it warns; the gate measures it again"
            if within_run_only(new, flipped, spread)
            else ""
        )
        return _check(
            Change.FLIP,
            f"CONCLUSION CHANGED on {machine_class}: {release_change(old.release, new.release)}: "
            f"speedup {_interval_text(old)} → {_interval_text(new)}; {what} "
            f"(against the baseline accepted {entry.accepted_at[:10]}; if this is the new normal, "
            f"accept it with --specdec-update-baselines){only_tonight}{libraries_changed(old.versions, new.versions)}",
            entry,
        )
    ratio = p_value = None
    decode = new.conditions.get(METRIC) == DECODE  # samples keep decode rates: no end-to-end drift test
    if new.log_ratios and old.log_ratios and decode:
        # Drift is decided for the whole run at its end, with the false-discovery rate controlled
        # across its comparisons (BaselineLedger.finish); here only its test is computed.
        ratio, p_value = drift(
            nights, new.speedup, new.release, old.release, entry.accepted_at,
            tonight_pairs=new.log_ratios, accepted_pairs=old.log_ratios,
        ) or (None, None)  # fmt: skip
    fell = acceptance_fell(
        old.acceptance, new.acceptance, ACCEPTANCE_DROP if acceptance_drop is None else acceptance_drop
    )
    if fell:
        return _check(
            Change.ACCEPTANCE_FELL,
            f"ACCEPTANCE FELL on {machine_class}: {release_change(old.release, new.release)}: acceptance {fell}, "
            f"while the speedup {_interval_text(old)} → {_interval_text(new)} has not crossed a bound yet "
            f"(against the baseline accepted {entry.accepted_at[:10]}; if this is the new normal, accept it with "
            f"--specdec-update-baselines){libraries_changed(old.versions, new.versions)}",
            entry,
            ratio,
            p_value,
        )
    decisive = {Verdict.HOLDS, Verdict.REFUTED}
    if set(before.values()) & decisive and not {b.verdict for b in new.judgement.bounds} & decisive:
        return _check(
            Change.UNDECIDED,
            f"undecided: inconclusive now ({_interval_text(new)}) against the {old.judgement.shown} baseline "
            f"({_interval_text(old)}, {old.release}) — not a flip and not a re-confirmation",
            entry,
            ratio,
            p_value,
        )
    if old.release != new.release:
        return _check(
            Change.RECONFIRMED,
            f"re-confirmed on {new.release} (baseline {old.release}: {_interval_text(old)})",
            entry,
            ratio,
            p_value,
        )
    return _check(Change.UNCHANGED, f"agrees with the baseline ({_interval_text(old)})", entry, ratio, p_value)


ACCEPTANCE_DROP = 0.10  # how far tonight's acceptance interval must lie below the accepted one: 10 points


def acceptance_fell(old: Interval | None, new: Interval | None, drop: float = ACCEPTANCE_DROP) -> str:
    """``0.72 [0.69, 0.75] → 0.35 [0.31, 0.39]`` where tonight's acceptance interval lies wholly below the accepted
    one by more than ``drop`` (both at the comparison's confidence, as a flip's are); ``""`` otherwise — the early
    sign of a release that drafts worse while the speed has not moved far enough to flip (jundot/omlx#3742).

    >>> from pytest_specdec.stats import Interval
    >>> acceptance_fell(Interval(0.72, 0.69, 0.75, 0.98, 16), Interval(0.35, 0.31, 0.39, 0.98, 16))
    '0.72 [0.69, 0.75] → 0.35 [0.31, 0.39]'
    >>> acceptance_fell(Interval(0.72, 0.69, 0.75, 0.98, 16), Interval(0.64, 0.60, 0.68, 0.98, 16))
    ''
    """
    if old is None or new is None or not new.high < old.low - drop:
        return ""
    return f"{old.estimate:.2f} [{old.low:.2f}, {old.high:.2f}] → {new.estimate:.2f} [{new.low:.2f}, {new.high:.2f}]"


def option_changes(old: str | None, new: str | None) -> str:
    """``ngram 2 → 3; flash_attn (unset) → true``: what changed between two results' arm options ("" where
    nothing did, or where the baseline was measured before they were kept).

    >>> option_changes("ngram=2;spec=ngram", "ngram=3;spec=ngram"), option_changes(None, "ngram=3")
    ('ngram 2 → 3', '')
    """
    if old is None or new is None or old == new:
        return ""

    def parsed(text: str) -> dict[str, str]:
        return dict(item.partition("=")[::2] for item in text.replace("|", ";").split(";") if item)

    before, after = parsed(old), parsed(new)
    return (
        "; ".join(
            f"{key} {before.get(key, '(unset)')} → {after.get(key, '(unset)')}"
            for key in sorted(before.keys() | after.keys())
            if before.get(key) != after.get(key)
        )
        or f"{old} → {new}"
    )


def flipped_bounds(new: ComparisonRecord, old: ComparisonRecord) -> list[BoundRecord]:
    """The bounds whose verdict went from holds to refuted or back (inconclusive is never a flip)."""
    before = old.judgement.bound_verdicts
    return [b for b in new.judgement.bounds if {before.get(b.label), b.verdict} == {Verdict.HOLDS, Verdict.REFUTED}]


def within_run_only(new: ComparisonRecord, flipped: Sequence[BoundRecord], spread: RunSpread) -> bool:
    """Whether every flipped bound flips only within tonight's run: on the speedup, not beyond the run-to-run
    spread (the baseline was read on another night). False while the spread is not known."""
    wide = widened(new.speedup, spread)
    return bool(flipped) and all(
        b.metric == "speedup" and verdict_on(wide, b.kind, b.bound) is not b.verdict for b in flipped
    )


def drift_message(record: ComparisonRecord, ratio: float, p_value: float) -> str:
    """The line a drifted comparison reports."""
    check = record.check
    baseline = check.baseline_speedup if check else None
    shown = f"{baseline.estimate:.2f}x [{baseline.low:.2f}, {baseline.high:.2f}]" if baseline else "-"
    return (
        f"speedup drifted {ratio - 1:+.1%} against the baseline ({shown}, {check.baseline_release if check else '-'}) "
        f"→ {_interval_text(record)}, p={p_value:.3g} (false-discovery rate controlled over the run); "
        "the conclusion is unchanged"
    )


@dataclass
class BaselineStore:
    """Reads and writes the baselines directory for one machine class."""

    root: Path
    machine_class: str
    lock_timeout_s: float = LOCK_TIMEOUT_S
    _loaded: dict[str, BaselineFile] = field(default_factory=dict)
    kept_newer: list[str] = field(default_factory=list)  # the last write's keys kept for a newer protocol
    _last_append: tuple[int, int] | None = None  # (start, end) of the last append_history, for taking it back

    def path(self, backend: str, *, candidates: bool = False) -> Path:
        """Where one backend's (candidate) baselines live."""
        base = self.root / "candidates" if candidates else self.root
        return base / self.machine_class / f"{backend}.json"

    def candidates_path(self, backend: str) -> Path:
        """Where one backend's candidates are written: made with its ``.gitignore`` (:func:`local_folder`)."""
        local_folder(self.root / "candidates")
        return self.path(backend, candidates=True)

    def history_path(self) -> Path:
        """The append-only history of this machine class."""
        return self.root / "history" / f"{self.machine_class}.jsonl"

    def load(self, backend: str) -> BaselineFile:
        """The accepted baselines for ``backend`` (empty when there are none)."""
        if backend not in self._loaded:
            self._loaded[backend] = read_baseline_file(self.path(backend), self.machine_class, backend)
        return self._loaded[backend]

    def lookup(self, record: ComparisonRecord) -> BaselineEntry | None:
        """The accepted entry for ``record``'s key (``None``: not yet gated)."""
        return self.load(record.backend).entries.get(baseline_key(record))

    def nearest(self, record: ComparisonRecord) -> tuple[str, str] | None:
        """The accepted key of the same test and category that differs least from ``record``'s (a changed prompt
        set, γ, option, model), and the differences: ``prompts=a#1f… → prompts=a#9c…``; ``None`` if none is near."""
        found = []
        for key, entry in self.load(record.backend).entries.items():
            old = entry.result
            same_test = (old.nodeid, old.category) == (record.nodeid, record.category)
            if entry.provenance is Provenance.PUBLISHED or not same_test:
                continue
            differences = _differences(old, record)
            if differences and len(differences) <= 2 and key != baseline_key(record):
                found.append((len(differences), key, "; ".join(differences)))
        return min(found)[1:] if found else None

    def write(self, backend: str, entries: Mapping[str, BaselineEntry], *, candidates: bool = False) -> Path | None:
        """Merge ``entries`` into a file under the lock; ``None`` when nothing changed."""
        path = self.candidates_path(backend) if candidates else self.path(backend)
        with self.locked():
            current = read_baseline_file(path, self.machine_class, backend)
            # A baseline measured under a newer protocol is never replaced by an older one's.
            self.kept_newer = sorted(
                key for key, entry in entries.items()
                if key in current.entries and current.entries[key].result.protocol > entry.result.protocol
            )  # fmt: skip
            merged = {**current.entries, **{k: v for k, v in entries.items() if k not in self.kept_newer}}
            updated = BaselineFile(self.machine_class, backend, dict(sorted(merged.items())))
            texts = rendered(path, to_jsonable(updated))
            if unchanged(path, texts):
                return None
            write_split(path, texts)
        if not candidates:
            self._loaded[backend] = updated
        return path

    def discard_candidates(self, backend: str, keys: Sequence[str]) -> None:
        """Drop candidates that were accepted in this session."""
        path = self.path(backend, candidates=True)
        if not path.is_file():
            return
        with self.locked():
            current = read_baseline_file(path, self.machine_class, backend)
            kept = {k: v for k, v in current.entries.items() if k not in keys}
            if len(kept) == len(current.entries):
                return
            if kept:
                write_split(path, rendered(path, to_jsonable(BaselineFile(self.machine_class, backend, kept))))
            else:
                remove_split(path)

    def append_history(self, nights: Sequence[Night]) -> Path:
        """Append nights to the history as whole JSON lines (never rewrites earlier lines)."""
        path = self.history_path()
        data = "".join(
            json.dumps(finite_json(night.as_line()), sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
            for night in nights
        ).encode()
        with self.locked():
            path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: a buffered file flushes before it truncates, and on a full disk that flush
            # fails again and leaves the half line behind.
            descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(descriptor).st_size
                if size and os.pread(descriptor, 1, size - 1) != b"\n":
                    # A run killed mid-append left half a line: never a line, so it goes before this one
                    # is appended (else the two would be glued into one unreadable line).
                    tail = os.pread(descriptor, min(size, 1 << 20), max(0, size - (1 << 20)))
                    size -= len(tail) - (tail.rfind(b"\n") + 1)
                    os.ftruncate(descriptor, size)
                try:
                    written = 0
                    while written < len(data):
                        written += os.write(descriptor, data[written:])
                    os.fsync(descriptor)
                except BaseException:
                    # A short write (a full disk) must not leave half a line for later appends to glue onto.
                    os.ftruncate(descriptor, size)
                    raise
                self._last_append = (size, size + written)
            finally:
                os.close(descriptor)
        return path

    def take_back_last_append(self) -> bool:
        """Remove the lines :meth:`append_history` appended last — only while they are still the file's end (another
        session's later lines are never cut); whether they were removed."""
        appended = self._last_append
        path = self.history_path()
        with self.locked():
            if appended is None or not path.is_file() or path.stat().st_size != appended[1]:
                return False
            os.truncate(path, appended[0])
            self._last_append = None
            return True

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """An exclusive lock on the baselines directory, shared with other sessions: taken only to write, in the
        ignored ``history/`` folder (never a file beside the accepted ones)."""
        from filelock import FileLock, Timeout

        try:
            folder = local_folder(self.root / "history")
            lock = FileLock(str(folder / ".specdec.lock"), timeout=self.lock_timeout_s)
            with lock:
                yield
        except Timeout:
            raise SpecdecUsageError(
                f"{self.root} is locked by another pytest-specdec session for over {self.lock_timeout_s:g} s — "
                "wait for it to finish, then run again"
            ) from None


LOCAL_ONLY = """\
# Written by pytest-specdec: this machine's own results, not for review. Commit the accepted
# files one folder up (baselines/<machine class>/<backend>.json); remove this file to commit these too.
*
"""


def local_folder(folder: Path) -> Path:
    """``folder``, made with a ``.gitignore`` that keeps its files out of commits (an existing one is kept as is)."""
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        write_atomically(ignore, LOCAL_ONLY)
    return folder


def read_baseline_file(path: Path, machine_class: str, backend: str) -> BaselineFile:
    """A validated baseline file; an empty one when it does not exist."""
    if not path.exists():
        return BaselineFile(machine_class, backend, {})
    data = check_schema(read_joined(path), path)
    loaded = validate(BaselineFile, data, str(path))
    if loaded.machine_class != machine_class or loaded.backend != backend:
        raise SpecdecUsageError(
            f"{path} holds baselines of {loaded.machine_class}/{loaded.backend}, not {machine_class}/{backend} — "
            "move it back to its own folder"
        )
    check_protocols(loaded, path)
    renamed = {current_key(key): entry for key, entry in loaded.entries.items()}
    return loaded if renamed.keys() == loaded.entries.keys() else replace(loaded, entries=renamed)


def check_protocols(loaded: BaselineFile, path: Path) -> None:
    """Refuse a baseline whose measurement protocol is below 1 or newer than this release's (one line)."""
    for key, entry in loaded.entries.items():
        protocol = entry.result.protocol
        if protocol < 1:
            raise SpecdecUsageError(
                f"{path}: {key} says measurement protocol {protocol}, which no release wrote — restore the file from "
                "version control"
            )
        if protocol > MEASUREMENT_PROTOCOL:
            raise SpecdecUsageError(
                f"{path}: {key} was measured under protocol {protocol}, newer than this pytest-specdec's "
                f"({MEASUREMENT_PROTOCOL}) — upgrade pytest-specdec to compare against it"
            )


def list_baseline_files(root: Path) -> list[Path]:
    """Every accepted baseline file under ``root`` (candidates and history excluded)."""
    if not root.is_dir():
        return []
    return sorted(p for p in root.glob("*/*.json") if p.parent.name not in {"candidates", "history"} and p.is_file())


SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")  # a machine class or backend: one path component


def check_plain_name(what: str, name: str, where: str) -> str:
    """``name`` when it is one plain path component (it names a folder or file), else one line naming the file.

    >>> check_plain_name("machine_class", "../../outside", "run.json")
    Traceback (most recent call last):
    ...
    pytest_specdec.errors.SpecdecUsageError: run.json: machine_class '../../outside' is not a plain name (letters, digits, . _ + -) — the file was altered; restore it from version control
    """
    if not SAFE_NAME.match(name):
        raise SpecdecUsageError(
            f"{where}: {what} {name!r} is not a plain name (letters, digits, . _ + -) — the file was altered; "
            "restore it from version control"
        )
    return name


def load_any(path: Path) -> BaselineFile:
    """A baseline file found on disk, whatever its machine class.

    Its machine class and backend name the folder and file that hold it, so each must be
    one plain path component: a file that says otherwise is refused, never followed.
    """
    data = check_schema(read_joined(path), path)
    loaded = validate(BaselineFile, data, str(path))
    for what, name in (("machine_class", loaded.machine_class), ("backend", loaded.backend)):
        check_plain_name(what, name, str(path))
    return loaded
