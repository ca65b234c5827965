"""The measuring job's account of one leg's night: ``night.json``, from the files the steps left.

Reads ``status.json`` (measure: a typed :class:`~pytest_specdec.gate.runs.Leg`), ``results.json`` (pytest),
``confirm/confirmed.json`` (the re-run), ``release-changes.json`` (the upgrade),
``budget.txt`` (the budget), the accepted baselines and the runner's history, and writes
one :class:`~pytest_specdec.gate.findings.LegNight` (and the leg's nights with the gate's word on each, for the
scoreboard). Its findings are decided in
:mod:`pytest_specdec.gate.findings`; here they are only gathered.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.findings import (
    NIGHT_FILE,
    NIGHT_SCHEMA_VERSION,
    Finding,
    FlipCall,
    LegCause,
    LegNight,
    State,
    Thresholds,
    agreeing_subjects,
    awaiting_acceptance,
    comparison_findings,
    history_table,
    shown_only_subjects,
    ungated_finding,
)
from pytest_specdec.gate.legs import GateConfig, effective_profile
from pytest_specdec.gate.runner_state import keep_told, leg_history, nights, told_nights
from pytest_specdec.gate.runs import Leg, read_leg
from pytest_specdec.store.baselines import BaselineStore, baseline_key
from pytest_specdec.store.files import finite_json, load_run, read_json, validate, write_atomically
from pytest_specdec.store.night_statistics import erosions
from pytest_specdec.store.records import Role, RunRecord

NIGHTS_FILE = "nights.jsonl"  # the leg's nights on its runner, each with the gate's word: for the scoreboard


def _json(path: Path, default: Any) -> Any:
    return read_json(path) if path.is_file() else default


def _measurable_baselines(run: RunRecord, baselines: Path) -> dict[str, str]:
    """Per result whose accepted baseline was measurable (SD engaged), the release that baseline was measured on."""
    store = BaselineStore(baselines, run.machine_class)
    found: dict[str, str] = {}
    for record in run.comparisons:
        entry = store.lookup(record)
        if entry is not None and not entry.result.judgement.conclusion.says_nothing_about_speed:
            found[baseline_key(record)] = entry.result.release
    return found


# What a machine's fingerprint records (pytest-benchmark's machine info): the OS and its kernel, the chip.
FINGERPRINT_FIELDS = (("system", "OS"), ("release", "OS release"), ("machine", "architecture"),
                      ("processor", "processor"), ("python_version", "Python"))  # fmt: skip


def what_moved(run: RunRecord, baselines: Path) -> dict[str, str]:
    """Per result, what its machine's fingerprint says changed since its baseline was accepted (one line)."""
    store = BaselineStore(baselines, run.machine_class)
    found: dict[str, str] = {}
    for record in run.comparisons:
        entry = store.lookup(record)
        if entry is None:
            continue
        before, now = dict(entry.machine_info), dict(run.machine_info)
        changes = [f"{label} {before.get(k)} → {now.get(k)}" for k, label in FINGERPRINT_FIELDS
                   if k in before and k in now and before.get(k) != now.get(k)]  # fmt: skip
        chip = [(before.get("cpu") or {}).get("brand_raw"), (now.get("cpu") or {}).get("brand_raw")]
        if chip[0] and chip[1] and chip[0] != chip[1]:
            changes.append(f"chip {chip[0]} → {chip[1]}")
        if entry.result.device != record.device:
            changes.append(f"device {entry.result.device} → {record.device}")
        found[baseline_key(record)] = (
            "what the fingerprints say moved since the baseline was accepted: " + "; ".join(changes)
            if changes
            else "the fingerprints (OS, its release, chip, device, Python) record no change: thermal state or "
            "background load, which they do not record, may have moved"
        )
    return found


def _flip_calls(listed: object, run: RunRecord) -> dict[str, FlipCall]:
    """The confirm step's call per flipped result (by its key; an entry naming only a test and category
    speaks for each of that test's results in it)."""
    calls: dict[str, FlipCall] = {}
    for item in listed if isinstance(listed, list) else []:
        if not (isinstance(item, dict) and "nodeid" in item and "category" in item):
            continue
        call = FlipCall(bool(item.get("confirmed", True)), str(item.get("call", "")), str(item.get("line", "")))
        if "key" in item:
            calls[str(item["key"])] = call
            continue
        for record in run.flips:
            if (record.nodeid, record.category) == (str(item["nodeid"]), str(item["category"])):
                calls[baseline_key(record)] = call
    return calls


def _leg_findings(status: Leg | None) -> list[Finding]:
    """The leg's own facts, each in its state's word; a leg no step reported on was not measured."""
    if status is None:
        return [Finding(State.UNMEASURABLE, "leg", "the measure step did not run", cause=LegCause.NO_MEASURE_STEP)]
    found = [Finding(fact.state, "leg", fact.line, cause=fact.cause) for fact in status.facts]
    if not status.measurable and not found:
        found.append(Finding(State.UNMEASURABLE, "leg", status.reason, cause=LegCause.NO_MEASURE_STEP))
    return found


def leg_night(config: GateConfig, backend: str, out: Path, baselines: Path, machine_class: str) -> LegNight:
    """Gather one leg's night from its folder ``out``; writes nothing."""
    status = read_leg(out)
    thresholds = Thresholds(config.ungated_nights, config.undecided_nights)
    results = out / "results.json"
    run = load_run(results) if status is not None and status.measurable and results.is_file() else None
    findings = _leg_findings(status)
    awaiting = 0
    if run is not None:
        flips = _flip_calls(_json(out / "confirm" / "confirmed.json", []), run)
        history = leg_history(backend, baselines, run.machine_class)
        counted = nights(backend, run.machine_class)
        findings += comparison_findings(
            run, flips, _measurable_baselines(run, baselines), counted, thresholds, moved=what_moved(run, baselines)
        )
        awaiting = awaiting_acceptance(run)
        waiting = ungated_finding(awaiting, counted, thresholds)
        findings += [waiting] if waiting else []
        shown_only = {baseline_key(r) for r in run.comparisons if r.judgement.role is Role.OTHER_PROFILE}
        for trend in erosions(history) if config.alert_on_erosion else ():
            if trend.key in shown_only:
                continue  # a claim made for another profile: its bounds are not this leg's to approach
            lines = tuple(n for n in history if n.key == trend.key)
            subject = f"claim {trend.claim_id}" if trend.claim_id else trend.nodeid.split("::")[-1]
            findings.append(
                Finding(State.ERODING, subject, trend.text, trend.nodeid, trend.category, history_table(lines[-12:]))
            )
    changes = _json(out / "release-changes.json", [])
    budget = out / "budget.txt"
    return LegNight(
        backend=backend,
        machine_class=run.machine_class if run is not None else machine_class,
        required=config.leg(backend).required,
        measured=run is not None,
        reason=status.reason if status is not None else "the measure step did not run",
        findings=tuple(findings),
        awaiting=awaiting,
        release_changes=tuple(str(line) for line in changes) if isinstance(changes, list) else (),
        budget=budget.read_text(encoding="utf-8").strip() if budget.is_file() else "",
        agreeing=agreeing_subjects(run) if run is not None else {},
        shown_only=shown_only_subjects(run) if run is not None else {},
        profile=_profile(config, backend, run),
    )


def _profile(config: GateConfig, backend: str, run: RunRecord | None) -> str:
    """The profile the leg measured: its results' own, else the one its configuration gives."""
    measured = sorted({r.profile for r in run.comparisons}) if run is not None else []
    return ", ".join(measured) if measured else effective_profile(config, config.leg(backend))


def write_night(night: LegNight, out: Path) -> Path:
    """``night.json`` in the leg's artifact."""
    path = out / NIGHT_FILE
    write_atomically(path, json.dumps(asdict(night), indent=2, sort_keys=True) + "\n")
    return path


def write_nights(night: LegNight, out: Path) -> Path:
    """Keep the gate's word on tonight's results in the runner's state, and put the leg's nights on this runner,
    each with that word, in the artifact (``nights.jsonl``): the scoreboard marks a "flip not confirmed" night
    as such, not as a flip (``pytest-specdec site --history``)."""
    results = out / "results.json"
    if night.measured and results.is_file():
        finished = load_run(results).finished
        kept = {n.key for n in nights(night.backend, night.machine_class) if n.time == finished}
        # Only a night the history kept (a night with the job's own options keeps none) has a word to carry.
        words = {f.key: f.state.value for f in night.findings if f.key in kept}
        keep_told(night.machine_class, night.backend, finished, words)
    told = told_nights(night.backend, night.machine_class)
    path = out / NIGHTS_FILE
    write_atomically(path, "".join(json.dumps(finite_json(n.as_line()), sort_keys=True) + "\n" for n in told))
    return path


def read_night(path: Path) -> LegNight:
    """A leg's ``night.json`` from an artifact, validated: anything else is refused with one line."""
    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema_version") != NIGHT_SCHEMA_VERSION:
        raise SpecdecUsageError(
            f"{path} is not a night file of schema {NIGHT_SCHEMA_VERSION} — the measuring job's artifact was "
            "altered or comes from another version of pytest-specdec; nothing in it was used"
        )
    return validate(LegNight, data, str(path))
