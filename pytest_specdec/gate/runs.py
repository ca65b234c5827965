"""Running one leg: ``benchmarks/`` (or the leg's targets) for one backend, and the re-run.

A leg that cannot run (runtime not installed, server down, model absent, its managed
server failing to start) is *not measurable*: a required leg fails the gate with that
reason, an optional one is a warning in the step summary — never a silent pass.

What the leg did is kept as typed facts (``status.json``: a :class:`Leg`, each
:class:`LegFact` a :class:`~pytest_specdec.gate.findings.State` and its line), read from what
the plugin said of each test (the results file's ``unmeasured``), never from the words of a
test's failure message.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.backends import backend_spec, missing_runtime
from pytest_specdec.backends.server_process import LOG_FOLDER_VARIABLE, Terminated
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError
from pytest_specdec.gate.ab_call import Call
from pytest_specdec.gate.ab_run import AB_SHARE, ab_flips, ab_pairs, old_release, unjudged_flips
from pytest_specdec.gate.accepting import CANDIDATES
from pytest_specdec.gate.budget import (
    collect,
    plan,
    read_last_measured,
    read_timings,
    record_timings,
    timings_path,
)
from pytest_specdec.gate.findings import RE_RUN, LegCause, State, trailing
from pytest_specdec.gate.legs import RUNNER_VARIABLE, GateConfig, LegConfig, check_profile, leg_server
from pytest_specdec.gate.more_pairs import measure_undecided_again
from pytest_specdec.gate.runner_state import keep_history, nights, state_root
from pytest_specdec.hardware import machine_class
from pytest_specdec.store.baseline_files import copy_split
from pytest_specdec.store.baselines import BaselineStore, baseline_key
from pytest_specdec.store.files import dumps, load_run, read_json, validate, write_atomically
from pytest_specdec.store.records import Change, ComparisonRecord, RunRecord, Unmeasured

pytest_exit_interrupted = 2  # pytest.ExitCode.INTERRUPTED (this module never imports pytest)
REPORT_FILES = {
    "report_md": "report.md",
    "json": "results.json",
    "plot": "forest.png",
    "benchmark_json": "benchmark.json",
}


# The leg-level states a leg's steps can say of it (each is a State of the night: its word, its issue).
UNMEASURED_STATE = {Unmeasured.CRASHED: State.CRASHED, Unmeasured.REFUSED: State.NOT_MEASURED,
                    Unmeasured.MODEL_UNAVAILABLE: State.NOT_MEASURED,
                    Unmeasured.PLAIN_SPECULATES: State.PLAIN_SPECULATES}  # fmt: skip
UNMEASURED_CAUSE = {Unmeasured.CRASHED: LegCause.TEST_CRASHED, Unmeasured.REFUSED: LegCause.CLAIM_REFUSED,
                    Unmeasured.MODEL_UNAVAILABLE: LegCause.MODEL_UNAVAILABLE,
                    Unmeasured.PLAIN_SPECULATES: LegCause.PLAIN_SPECULATES}  # fmt: skip


@dataclass(frozen=True)
class LegFact:
    """One thing a leg did that its night tells: a leg-level state and its one line."""

    state: State
    line: str
    cause: str = ""  # its LegCause: the kind, so that two kinds of refusal are two alerts


@dataclass(frozen=True)
class Leg:
    """One backend's outcome in the gate, as its measure step (or a failed upgrade) wrote it: ``status.json``."""

    backend: str
    measurable: bool
    reason: str
    pytest_exit: int | None = None
    required: bool = False
    facts: tuple[LegFact, ...] = ()

    @property
    def fails_gate(self) -> bool:
        """A required leg that could not be measured fails the gate."""
        return self.required and not self.measurable

    @property
    def broken(self) -> str:
        """The facts that fail a measured leg (crashed, not measured, cut short), one line; ``""`` when none."""
        return "; ".join(f.line for f in self.facts if f.state is not State.UNMEASURABLE)


def write_leg(leg: Leg, out: Path) -> None:
    """``status.json``: the leg as its step knew it."""
    write_atomically(out / "status.json", dumps(leg))


def read_leg(out: Path) -> Leg | None:
    """The leg's ``status.json`` (``None``: no step wrote one), validated: a wrong file is one line."""
    path = out / "status.json"
    return validate(Leg, read_json(path), str(path)) if path.is_file() else None


def unmeasurable_leg(leg: LegConfig, line: str, cause: LegCause) -> Leg:
    """A leg that could not be measured at all, the line that says why, and its kind."""
    return Leg(leg.backend, False, line, required=leg.required, facts=(LegFact(State.UNMEASURABLE, line, cause),))


def pytest_command(python: str, backend: str, out: Path, extra: Sequence[str], targets: Sequence[str]) -> list[str]:
    """``python -m pytest_specdec.cli pytest …`` with every report file under ``out``, and every note in the log (a
    terminal keeps 15 lines of them; a night's log is read afterwards, whole)."""
    reports = [f"--specdec-{key.replace('_', '-')}={out / name}" for key, name in REPORT_FILES.items()]
    return [
        python, "-m", "pytest_specdec.cli", "pytest", *targets, f"--backend={backend}", "-p", "no:cacheprovider",
        *reports, f"--junitxml={out / 'junit.xml'}", "--specdec-notes=all", *extra,
    ]  # fmt: skip


def leg_arguments(config: GateConfig, leg: LegConfig, extra: Sequence[str]) -> list[str]:
    """The leg's profile and pytest arguments, then the job's own (``SPECDEC_GATE_PYTEST_ARGS``), then the runner's
    history where it has one (its nights give the run-to-run spread, :mod:`pytest_specdec.store.night_statistics`)."""
    check_profile(config, leg, shlex.join(extra))
    profile = [f"--specdec-profile={leg.profile}"] if leg.profile else []
    runner = state_root() / "history" / f"{machine_class()}.jsonl"  # the runner's nights: the run-to-run spread
    history = [f"--specdec-run-history={runner}"] if runner.is_file() else []
    drop = [] if config.acceptance_drop is None else [f"--specdec-acceptance-drop={config.acceptance_drop:g}"]
    return [*profile, *drop, *shlex.split(leg.pytest_args), *extra, *history]


CHILD_STOP_S = 120.0  # an interrupted leg's pytest: time to stop its servers before it is killed


def _run(command: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    """The leg's pytest; interrupted, it is stopped as it would stop itself (never killed at once, which would
    leave its servers running): SIGTERM is forwarded (it reached this process alone), Ctrl-C reached it too."""
    logs = out / "server-logs"
    environment = {**os.environ, LOG_FOLDER_VARIABLE: str(logs)}
    pipe = subprocess.PIPE
    with subprocess.Popen(command, stdout=pipe, stderr=pipe, text=True, env=environment) as child:
        try:
            stdout, stderr = child.communicate()
        except KeyboardInterrupt as interrupt:
            if isinstance(interrupt, Terminated):
                child.send_signal(signal.SIGTERM)
            try:
                child.communicate(timeout=CHILD_STOP_S)
            except subprocess.TimeoutExpired:
                child.kill()
            raise
    (out / "pytest.log").write_text(stdout + stderr, encoding="utf-8")
    return subprocess.CompletedProcess(command, child.returncode, stdout, stderr)


def _unmeasurable(out: Path, leg: LegConfig, reason: str, cause: LegCause) -> Leg:
    result = unmeasurable_leg(leg, f"not measurable here: {reason}", cause)
    (out / "report.md").write_text(f"# pytest-specdec: {leg.backend}\n\n{result.reason}\n", encoding="utf-8")
    return result


def _fit_budget(config: GateConfig, backend: str, python: str, out: Path, arguments: Sequence[str]) -> list[str]:
    """Say the leg's expected duration before it starts; deselect claims beyond its share, in turns."""
    share = len(config.runner_legs(os.environ.get(RUNNER_VARIABLE, "")))  # the legs of this runner's night
    allowed = config.window_minutes * 60.0 / max(1, share) if config.window_minutes else None
    nodeids = collect(pytest_command(python, backend, out, arguments, config.leg(backend).targets))
    timings = timings_path(machine_class(), backend)
    budget = plan(nodeids, read_timings(timings), allowed, read_last_measured(timings))
    write_atomically(out / "budget.txt", budget.text + "\n")
    sys.stdout.write(f"specdec gate: {backend}: budget: {budget.text}\n")
    return [item for nodeid in budget.dropped for item in ("--deselect", nodeid)]


def measure(config: GateConfig, backend: str, out: Path, python: str, extra: Sequence[str]) -> Leg:
    """Run the leg's benchmarks for ``backend``; classify what happened."""
    out.mkdir(parents=True, exist_ok=True)
    leg = config.leg(backend)
    try:
        arguments = leg_arguments(config, leg, extra)
    except SpecdecUsageError as error:  # e.g. the synthetic pair refused on a self-hosted runner
        return _unmeasurable(out, leg, str(error), LegCause.CONFIGURATION)
    try:
        missing = missing_runtime(backend_spec(backend))
    except SpecdecUsageError as error:
        return _unmeasurable(out, leg, str(error), LegCause.CONFIGURATION)
    if missing is not None:
        return _unmeasurable(out, leg, f"the backend needs the Python package {missing!r}", LegCause.RUNTIME_MISSING)
    arguments += _fit_budget(config, backend, python, out, arguments)
    try:
        with leg_server(leg, out / "server-logs") as pointing:
            done = _run(pytest_command(python, backend, out, [*pointing, *arguments], leg.targets), out)
    except BackendUnavailable as error:
        return _unmeasurable(out, leg, str(error), LegCause.UNAVAILABLE)
    if not extra:  # a night with the job's own budget or options does not time the claims
        record_timings(out / "junit.xml", timings_path(machine_class(), backend))
    sys.stdout.write(done.stdout[-20_000:])
    run = load_run(out / "results.json") if (out / "results.json").is_file() else None
    if done.returncode == 4:  # usage error: an option, an unreachable server, a missing model …
        first = next((line for line in done.stderr.splitlines() if line.startswith("ERROR")), done.stderr.strip())
        said = first.removeprefix("ERROR: ").strip() or "pytest refused the run"
        absent = run is not None and any(t.kind is Unmeasured.MODEL_UNAVAILABLE for t in run.unmeasured)
        return _unmeasurable(out, leg, said, LegCause.MODEL_UNAVAILABLE if absent else LegCause.PYTEST_REFUSED)
    cut_short = done.returncode == pytest_exit_interrupted or (run is not None and run.interrupted)
    facts = leg_facts(run, cut_short=cut_short)
    if run is None or not run.comparisons:
        if facts:  # the backend failed, a claim was refused, or the run was cut, before a comparison finished
            said = "; ".join(f.line for f in facts)
            return Leg(backend, False, f"not measurable here: {said}", done.returncode, leg.required, facts)
        if done.returncode == 5 or run is not None:
            said = "no comparison was measured (every benchmark skipped itself)"
            return _unmeasurable(out, leg, said, LegCause.NOTHING_MEASURED)
        raise SpecdecUsageError(f"pytest exited {done.returncode} without results — see {out / 'pytest.log'}")
    if "--specdec-update-baselines" not in arguments:  # undecided against a decisive baseline: more pairs tonight
        run = measure_undecided_again(config, run, out, functools.partial(_run_tests, leg, python, arguments))
    candidates = BaselineStore(Path("baselines"), run.machine_class).path(backend, candidates=True)
    if candidates.is_file():  # tonight's results without an accepted baseline, for the accept pull request
        copy_split(candidates, out / CANDIDATES)
    if not extra:  # a night with the job's own budget or options is not part of the trend
        keep_history(run)
    return Leg(backend, True, "measured", done.returncode, leg.required, facts)


def leg_facts(run: RunRecord | None, *, cut_short: bool) -> tuple[LegFact, ...]:
    """What the plugin said of the tests that kept nothing, one fact a kind, and whether the run was cut short."""
    facts = []
    for kind, state in UNMEASURED_STATE.items():
        tests = [t for t in (run.unmeasured if run is not None else ()) if t.kind is kind]
        if tests:
            said = {Unmeasured.CRASHED: "could not measure", Unmeasured.REFUSED: "measured nothing",
                    Unmeasured.MODEL_UNAVAILABLE: "could not load their model"}.get(
                kind, "compared nothing: the plain arm drafted"
            )  # fmt: skip
            first = tests[0]
            facts.append(LegFact(state, f"{len(tests)} test(s) {said} (first: {first.nodeid.rsplit('::', 1)[-1]}: "
                                        f"{first.line[:200]})", UNMEASURED_CAUSE[kind]))  # fmt: skip
    if cut_short:
        line = "the run was cut short (interrupted): not every claim measured"
        facts.append(LegFact(State.CUT_SHORT, line, LegCause.INTERRUPTED))
    return tuple(facts)


def confirm(config: GateConfig, results: Path, out: Path, python: str, extra: Sequence[str]) -> list[ComparisonRecord]:
    """The flips that the release made: a same-night old-versus-new run where one can be had, else a re-run.

    ``confirmed.json`` lists every flip with the call on it (``confirmed`` true only for
    a flip the release made); the night step reads it.
    """
    run = load_run(results)
    first = run.flips
    out.mkdir(parents=True, exist_ok=True)
    if not first:
        write_atomically(out / "confirmed.json", "[]\n")
        return []
    leg = config.leg(first[0].backend)
    arguments = leg_arguments(config, leg, extra)
    changes, before = (
        read_json(path) if path.is_file() else empty
        for path, empty in (
            (results.parent / "release-changes.json", []),
            (results.parent / "versions-before.json", {}),
        )
    )
    old = old_release(leg.backend, before) if changes and isinstance(before, dict) else None
    if old is not None:
        sys.stdout.write(f"specdec gate: {old.release} (last night's) runs beside tonight's, paired and interleaved\n")
        pairs = flip_pairs(config, first, run.machine_class)
        calls = ab_flips(first, leg, old, new_python=python, arguments=arguments, out=out, baselines=Path("baselines"),
                         machine_class=run.machine_class, pairs=pairs)  # fmt: skip
        entries = [(r, calls[baseline_key(r)].call.value, calls[baseline_key(r)].line) for r in first]
        confirmed = [r for r, call, _ in entries if call == Call.RELEASE_CHANGED.value]
    else:
        unlockable = results.parent / "old-env.txt"  # set-up could not rebuild last night's environment
        why = unlockable.read_text(encoding="utf-8").strip() if unlockable.is_file() else ""
        if changes or why:
            sys.stdout.write(f"specdec gate: {why or 'no old release can run beside the new one for this backend'} "
                             "— the flips are re-run on the upgraded machine instead\n")  # fmt: skip
        again, unmeasured = _rerun(leg, first, python, arguments, out)
        # Flipped again on exactly the releases of its baseline: nothing but the machine changed. A flip
        # the re-run did not measure stands, and so does an acceptance flip (acceptance does not move
        # with the machine's speed).
        unchanged = [
            r for r in _on_accepted_releases(again, Path("baselines"), run.machine_class)
            if not unjudged_flips(r, Path("baselines"), run.machine_class)
        ]  # fmt: skip
        confirmed = [r for r in [*again, *unmeasured] if r not in unchanged]
        # A flip the re-run did not repeat is not confirmed: neither the release nor the machine shown to move.
        entries = [
            (r, Call.MACHINE_MOVED.value, f"{Call.MACHINE_MOVED.value}: it flipped again on a re-run, on the very "
             f"releases its baseline was accepted on ({r.release}) — nothing but the machine changed") if r in unchanged
            else (r, RE_RUN, "flipped again on a re-run" if r in again else "the re-run did not measure it")
            if r in confirmed
            else (r, Call.NOT_CONFIRMED.value, f"{Call.NOT_CONFIRMED.value}: it did not repeat on a re-run")
            for r in first
        ]  # fmt: skip
        if why:  # the summary and the issue say why no old-versus-new run was had
            entries = [(r, call, f"{line} ({why})") for r, call, line in entries]
    for record, _call, line in entries:
        sys.stdout.write(f"specdec gate: {record.nodeid} [{record.category}]: {line}\n")
    listed = [{"nodeid": r.nodeid, "category": r.category, "key": baseline_key(r), "call": call, "line": line,
               "confirmed": r in confirmed} for r, call, line in entries]  # fmt: skip
    write_atomically(out / "confirmed.json", json.dumps(listed, indent=2) + "\n")
    return confirmed


def flip_pairs(config: GateConfig, flips: Sequence[ComparisonRecord], machine_class: str) -> dict[str, tuple[int, str]]:
    """Per flipped result, tonight's old-versus-new pairs: more for a flip seen on earlier nights in a row.

    The nights come from the runner's history (tonight's line included, so it is left out); the
    allowance is :data:`~pytest_specdec.gate.ab_run.AB_SHARE` of the leg's share of ``window-minutes``,
    shared by tonight's flips; a quadruple's seconds are read from each result's own rates.
    """
    kept = nights(flips[0].backend, machine_class) if flips else ()
    share = config.window_minutes * 60.0 / max(1, len(config.legs)) if config.window_minutes else None
    allowance = share * AB_SHARE / max(1, len(flips)) if share is not None else None
    found: dict[str, tuple[int, str]] = {}
    for record in flips:
        key = baseline_key(record)
        before = max(0, trailing(tuple(n for n in kept if n.key == key), {Change.FLIP.value}) - 1)
        tokens = record.design.max_tokens
        rates = [r for r in (record.baseline_tps, record.treatment_tps) if r]
        quadruple = sum(2.0 * tokens / rate for rate in rates) if len(rates) == 2 else 0.0
        found[key] = ab_pairs(before, quadruple, allowance)
    return found


def _on_accepted_releases(
    flips: Sequence[ComparisonRecord], baselines: Path, machine_class: str
) -> list[ComparisonRecord]:
    """Flips measured on exactly the releases their accepted baseline was measured on: no release can be blamed."""
    store = BaselineStore(baselines, machine_class)
    found = []
    for record in flips:
        entry = store.lookup(record)
        if entry is not None and entry.result.release == record.release and entry.result.versions == record.versions:
            found.append(record)
    return found


def _run_tests(
    leg: LegConfig,
    python: str,
    arguments: Sequence[str],
    nodeids: Sequence[str],
    out: Path,
    *,
    more: Sequence[str] = (),
) -> None:
    """Run ``nodeids`` again with the leg's server, ``more`` arguments last; a server that cannot start is said,
    and nothing is measured."""
    out.mkdir(parents=True, exist_ok=True)
    # A node id from results.json becomes a pytest argument: only ids of tests the leg collects
    # are passed (one starting with "-" would be an option).
    collected = set(collect(pytest_command(python, leg.backend, out, arguments, leg.targets)))
    for refused in sorted(set(nodeids) - collected):
        sys.stdout.write(f"specdec gate: refused to run {refused!r} again: not a test this leg collects\n")
    nodeids = sorted(set(nodeids) & collected)
    if not nodeids:
        return
    try:
        with leg_server(leg, out / "server-logs") as pointing:
            _run(pytest_command(python, leg.backend, out, [*pointing, *arguments, *more], nodeids), out)
    except BackendUnavailable as error:
        sys.stdout.write(f"specdec gate: could not start again ({error}) — the first reading stands\n")


def _rerun(
    leg: LegConfig, first: Sequence[ComparisonRecord], python: str, arguments: Sequence[str], out: Path
) -> tuple[list[ComparisonRecord], list[ComparisonRecord]]:
    """Re-run each flipped comparison once (with the leg's server): the flips that flip again, and those the
    re-run did not measure (both stand)."""
    _run_tests(leg, python, arguments, sorted({r.nodeid for r in first}), out)
    rerun = load_run(out / "results.json") if (out / "results.json").is_file() else None
    remeasured = {(baseline_key(r), r.baseline_arm) for r in (rerun.comparisons if rerun else ())}
    again = {(baseline_key(r), r.baseline_arm) for r in (rerun.flips if rerun else ())}
    # Only a re-run that measured the comparison and saw no flip clears it; a re-run that
    # crashed, was refused or skipped itself confirms nothing away.
    flipped_again = [r for r in first if (baseline_key(r), r.baseline_arm) in again]
    not_remeasured = [r for r in first if (baseline_key(r), r.baseline_arm) not in remeasured]
    return flipped_again, not_remeasured
