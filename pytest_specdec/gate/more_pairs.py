"""A night's undecided results, measured again that night with more pairs before they are called undecided.

A result that is inconclusive tonight against a decisive accepted verdict (:attr:`Change.UNDECIDED
<pytest_specdec.store.records.Change.UNDECIDED>`) is usually a small move near its bound that the night's
pairs cannot separate. Waiting for nights of it opens "undecided for nights" issues on quiet claims and
leaves small real flips unseen. So the leg measures such a result again at once with a doubled cap — the
doubling rule the unconfirmed flip's old-versus-new run uses (:func:`~pytest_specdec.gate.ab_run.doubled_cap`):
twice its design's cap on its first undecided night, twice again for each earlier undecided night in a row
(up to :data:`~pytest_specdec.gate.ab_run.CARRY_DOUBLINGS` more) — when the leg's share of the window
allows; the second reading replaces the first in the night's results. ``studies/night_rule.py`` measured
the whole night's rule (first reading, more pairs, old-versus-new run) against the gate's alert targets.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from pytest_specdec.gate.ab_run import AB_SHARE, CARRY_DOUBLINGS, doubled_cap
from pytest_specdec.gate.findings import trailing
from pytest_specdec.gate.legs import RUNNER_VARIABLE, GateConfig
from pytest_specdec.gate.runner_state import nights
from pytest_specdec.store.baselines import baseline_key
from pytest_specdec.store.files import dumps, load_run, write_atomically
from pytest_specdec.store.records import Change, ComparisonRecord, Role, RunRecord

MORE_PAIRS = "more-pairs"  # the folder, under the leg's, of the second reading's files


def undecided(run: RunRecord) -> list[ComparisonRecord]:
    """Tonight's gating results that are inconclusive against a decisive accepted verdict."""
    return [
        c
        for c in run.comparisons
        if c.check is not None and c.check.change is Change.UNDECIDED and c.judgement.role is Role.GATING
    ]


def pair_seconds(record: ComparisonRecord) -> float:
    """One pair's generation time, read from the result's own rates (0: not known)."""
    rates = [r for r in (record.baseline_tps, record.treatment_tps) if r]
    return sum(record.design.max_tokens / rate for rate in rates) if len(rates) == 2 else 0.0


def more_pairs(first: int, nights_before: int, pair_s: float, allowance_s: float | None) -> tuple[int, str]:
    """The cap of a second reading tonight (0: none fits) of a result whose design capped it at ``first`` pairs,
    undecided on ``nights_before`` earlier nights in a row, one pair taking ``pair_s``; the line that says so.

    >>> more_pairs(72, 0, 0.0, None)
    (144, 'measured again with up to 144 pairs')
    >>> more_pairs(72, 5, 0.0, None)[0]  # two earlier undecided nights count, no more
    576
    >>> more_pairs(72, 0, 10.0, 600.0)
    (0, "not measured again: more than its 72 pairs do not fit the leg's share of window-minutes")
    """
    doublings = 1 + min(max(nights_before, 0), CARRY_DOUBLINGS)
    pairs, fits = doubled_cap(first, doublings, pair_s, allowance_s)
    if pairs <= first:
        return 0, f"not measured again: more than its {first} pairs do not fit the leg's share of window-minutes"
    said = "" if fits else f" (the {first * 2**doublings} its undecided night {nights_before + 1} may take do not fit)"
    return pairs, f"measured again with up to {pairs} pairs{said}"


class Rerun(Protocol):
    """Runs the leg's pytest again on ``nodeids``, ``more`` arguments last, its files under ``out``."""

    def __call__(self, nodeids: Sequence[str], out: Path, *, more: Sequence[str] = ()) -> None: ...


def measure_undecided_again(config: GateConfig, run: RunRecord, out: Path, rerun: Rerun) -> RunRecord:
    """``run`` with each undecided result replaced by its second reading, where one fits and was measured.

    ``rerun`` runs the leg's pytest on those tests (:class:`Rerun`); the merged run is written back to
    ``out/results.json``.
    """
    found = undecided(run)
    if not found:
        return run
    legs = len(config.runner_legs(os.environ.get(RUNNER_VARIABLE, ""))) or 1
    share = config.window_minutes * 60.0 / legs if config.window_minutes else None
    allowance = share * AB_SHARE / len(found) if share is not None else None
    kept = nights(found[0].backend, run.machine_class)
    caps: dict[str, int] = {}
    for record in found:
        key = baseline_key(record)
        before = trailing(tuple(n for n in kept if n.key == key), {Change.UNDECIDED.value})
        pairs, line = more_pairs(record.design.max_trials or record.trials, before, pair_seconds(record), allowance)
        sys.stdout.write(f"specdec gate: {record.nodeid} [{record.category}]: undecided; {line}\n")
        if pairs:  # a test's comparisons share its run: the largest cap any of them may take
            caps[record.nodeid] = max(caps.get(record.nodeid, 0), pairs)
    by_cap: dict[int, list[str]] = {}
    for nodeid, pairs in caps.items():
        by_cap.setdefault(pairs, []).append(nodeid)
    again: dict[tuple[str, str], ComparisonRecord] = {}
    for pairs, nodeids in sorted(by_cap.items()):  # one pytest run per cap
        folder = out / MORE_PAIRS / str(pairs)
        rerun(sorted(nodeids), folder, more=[f"--specdec-max-trials={pairs}"])
        second = load_run(folder / "results.json") if (folder / "results.json").is_file() else None
        for record in second.comparisons if second else ():
            again[(baseline_key(record), record.baseline_arm)] = record
    wanted = {(baseline_key(r), r.baseline_arm) for r in found}
    replaced = tuple(again.get((baseline_key(c), c.baseline_arm), c) if (baseline_key(c), c.baseline_arm) in wanted
                     else c for c in run.comparisons)  # fmt: skip
    for record in replaced:
        if record not in run.comparisons and record.check is not None:
            sys.stdout.write(f"specdec gate: {record.nodeid} [{record.category}] at {record.trials} pairs: "
                             f"{record.check.message}\n")  # fmt: skip
    merged = dataclasses.replace(run, comparisons=replaced)
    write_atomically(out / "results.json", dumps(merged))
    return merged
