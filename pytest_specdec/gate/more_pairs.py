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
from datetime import datetime
from pathlib import Path
from typing import Protocol

from pytest_specdec.gate.ab_run import AB_SHARE, CARRY_DOUBLINGS, doubled_cap
from pytest_specdec.gate.findings import trailing
from pytest_specdec.gate.legs import RUNNER_VARIABLE, GateConfig
from pytest_specdec.gate.runner_state import nights
from pytest_specdec.render.report import markdown_report
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


def more_pairs(
    first: int, nights_before: int, pair_s: float, allowance_s: float | None, block: int = 1
) -> tuple[int, str]:
    """The cap of a second reading tonight (0: none fits) of a result whose design capped it at ``first`` pairs,
    undecided on ``nights_before`` earlier nights in a row, one pair of its test taking ``pair_s``; whole blocks of
    ``block`` pairs (the plugin rounds a cap down to them); the line that says so.

    >>> more_pairs(72, 0, 0.0, None, 4)
    (144, 'measured again with up to 144 pairs')
    >>> more_pairs(72, 5, 0.0, None)[0]  # two earlier undecided nights count, no more
    576
    >>> more_pairs(72, 0, 10.0, 740.0, 4)  # 74 pairs fit: not one whole block more than 72
    (0, "not measured again: not one block of pairs more than its 72 fits the leg's share of window-minutes")
    """
    doublings = 1 + min(max(nights_before, 0), CARRY_DOUBLINGS)
    pairs, fits = doubled_cap(first, doublings, pair_s, allowance_s)
    pairs -= pairs % max(1, block)
    if pairs <= first:
        return 0, (
            f"not measured again: not one block of pairs more than its {first} fits the leg's share of window-minutes"
        )
    said = "" if fits else f" (the {first * 2**doublings} its undecided night {nights_before + 1} may take do not fit)"
    return pairs, f"measured again with up to {pairs} pairs{said}"


class Rerun(Protocol):
    """Runs the leg's pytest again on ``nodeids``, ``more`` arguments last, its files under ``out``."""

    def __call__(self, nodeids: Sequence[str], out: Path, *, more: Sequence[str] = ()) -> None: ...


def _left_s(config: GateConfig, run: RunRecord) -> float | None:
    """What the leg's share of ``window-minutes`` leaves after the first reading (``None``: no window)."""
    if not config.window_minutes:
        return None
    legs = len(config.runner_legs(os.environ.get(RUNNER_VARIABLE, ""))) or 1
    try:
        took = (datetime.fromisoformat(run.finished) - datetime.fromisoformat(run.started)).total_seconds()
    except ValueError:
        took = 0.0
    return max(0.0, config.window_minutes * 60.0 / legs * AB_SHARE - max(0.0, took))


def measure_undecided_again(config: GateConfig, run: RunRecord, out: Path, rerun: Rerun) -> RunRecord:
    """``run`` with each test that has an undecided result measured again with more pairs, where they fit.

    Every comparison of a test measured again takes its second reading (the test ran again: its candidates and
    history are that run's), where the second reading's cap really grew (a test's own ``max_trials`` can hold it
    where it was). ``rerun`` runs the leg's pytest on those tests (:class:`Rerun`); the merged run is written back
    to ``out/results.json`` and ``out/report.md``.
    """
    found = undecided(run)
    if not found:
        return run
    tests = sorted({r.nodeid for r in found})
    left = _left_s(config, run)
    allowance = left / len(tests) if left is not None else None
    kept = nights(found[0].backend, run.machine_class)
    caps: dict[str, int] = {}
    for record in found:
        before = trailing(tuple(n for n in kept if n.key == baseline_key(record)), {Change.UNDECIDED.value})
        test_s = sum(pair_seconds(r) for r in run.comparisons if r.nodeid == record.nodeid)
        first = record.design.max_trials or record.trials
        pairs, line = more_pairs(first, before, test_s, allowance, record.design.prompt_count or 1)
        sys.stdout.write(f"specdec gate: {record.nodeid} [{record.category}]: undecided; {line}\n")
        if pairs:  # a test's comparisons share its run: the smallest cap any of them may take
            caps[record.nodeid] = min(caps.get(record.nodeid, pairs), pairs)
    by_cap: dict[int, list[str]] = {}
    for nodeid, pairs in caps.items():
        by_cap.setdefault(pairs, []).append(nodeid)
    again: dict[tuple[str, str], ComparisonRecord] = {}
    for pairs, nodeids in sorted(by_cap.items()):  # one pytest run per cap
        folder = out / MORE_PAIRS / str(pairs)
        rerun(sorted(nodeids), folder, more=[f"--specdec-max-trials={pairs}"])
        reread = load_run(folder / "results.json") if (folder / "results.json").is_file() else None
        for record in reread.comparisons if reread else ():
            again[(baseline_key(record), record.baseline_arm)] = record
    replaced: list[ComparisonRecord] = []
    for record in run.comparisons:
        second = again.get((baseline_key(record), record.baseline_arm))
        grew = second is not None and (second.design.max_trials or 0) > (record.design.max_trials or record.trials)
        if second is not None and not grew and record in found:
            sys.stdout.write(f"specdec gate: {record.nodeid} [{record.category}]: its test caps its own pairs "
                             f"(max_trials={second.design.max_trials}): the first reading stands\n")  # fmt: skip
        if second is not None and grew:
            if second.check is not None:
                sys.stdout.write(f"specdec gate: {second.nodeid} [{second.category}] at {second.trials} pairs: "
                                 f"{second.check.message}\n")  # fmt: skip
            replaced.append(second)
        else:
            replaced.append(record)
    merged = dataclasses.replace(run, comparisons=tuple(replaced))
    write_atomically(out / "results.json", dumps(merged))
    write_atomically(out / "report.md", markdown_report(merged))
    return merged
