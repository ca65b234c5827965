"""Running one leg: ``benchmarks/`` (or the leg's targets) for one backend, and the re-run.

A leg that cannot run (runtime not installed, server down, model absent, its managed
server failing to start) is *not measurable*: a required leg fails the gate with that
reason, an optional one is a warning in the step summary — never a silent pass.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.backends import backend_spec, missing_runtime
from pytest_specdec.backends.server_process import LOG_FOLDER_VARIABLE
from pytest_specdec.errors import NO_RESULT_KEPT, BackendUnavailable, SpecdecUsageError
from pytest_specdec.gate.accepting import CANDIDATES
from pytest_specdec.gate.blame import ab_flips, old_release, unjudged_flips
from pytest_specdec.gate.budget import (
    collect,
    plan,
    read_last_measured,
    read_timings,
    record_timings,
    timings_path,
)
from pytest_specdec.gate.change import Call
from pytest_specdec.gate.legs import GateConfig, LegConfig, check_profile, leg_server
from pytest_specdec.gate.state import keep_history
from pytest_specdec.hardware import machine_class
from pytest_specdec.store.baselines import BaselineStore, baseline_key
from pytest_specdec.store.files import load_run, read_json, write_atomically
from pytest_specdec.store.records import ComparisonRecord

pytest_exit_interrupted = 2  # pytest.ExitCode.INTERRUPTED (this module never imports pytest)
REPORT_FILES = {
    "report_md": "report.md",
    "json": "results.json",
    "plot": "forest.png",
    "benchmark_json": "benchmark.json",
}


@dataclass(frozen=True)
class Leg:
    """One backend's outcome in the gate."""

    backend: str
    measurable: bool
    reason: str
    pytest_exit: int | None = None
    required: bool = False
    broken: str = ""  # comparisons crashed or the run was cut short: fails the gate
    crashed: str = ""  # tests whose backend failed mid-measurement, one line
    cut_short: bool = False  # the run was interrupted (Ctrl-C, the job's time-out) before its end
    refused: str = ""  # claims that measured nothing: refused by the backend or by their own arguments, one line

    @property
    def fails_gate(self) -> bool:
        """A required leg that could not be measured fails the gate."""
        return self.required and not self.measurable


def pytest_command(python: str, backend: str, out: Path, extra: Sequence[str], targets: Sequence[str]) -> list[str]:
    """``python -m pytest_specdec.cli pytest …`` with every report file under ``out``."""
    reports = [f"--specdec-{key.replace('_', '-')}={out / name}" for key, name in REPORT_FILES.items()]
    return [
        python, "-m", "pytest_specdec.cli", "pytest", *targets, f"--backend={backend}", "-p", "no:cacheprovider",
        *reports, f"--junitxml={out / 'junit.xml'}", *extra,
    ]  # fmt: skip


def leg_arguments(config: GateConfig, leg: LegConfig, extra: Sequence[str]) -> list[str]:
    """The leg's profile and pytest arguments, then the job's own (``SPECDEC_GATE_PYTEST_ARGS``)."""
    check_profile(config, leg, shlex.join(extra))
    profile = [f"--specdec-profile={leg.profile}"] if leg.profile else []
    return [*profile, *shlex.split(leg.pytest_args), *extra]


def _run(command: list[str], out: Path) -> subprocess.CompletedProcess[str]:
    logs = out / "server-logs"
    environment = {**os.environ, LOG_FOLDER_VARIABLE: str(logs)}
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=environment)
    (out / "pytest.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    return done


def _unmeasurable(out: Path, leg: LegConfig, reason: str) -> Leg:
    result = Leg(leg.backend, False, f"not measurable here: {reason}", required=leg.required)
    (out / "report.md").write_text(f"# pytest-specdec: {leg.backend}\n\n{result.reason}\n", encoding="utf-8")
    return result


def _fit_budget(config: GateConfig, backend: str, python: str, out: Path, arguments: Sequence[str]) -> list[str]:
    """Say the leg's expected duration before it starts; deselect claims beyond its share, in turns."""
    allowed = config.window_minutes * 60.0 / max(1, len(config.legs)) if config.window_minutes else None
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
        return _unmeasurable(out, leg, str(error))
    try:
        missing = missing_runtime(backend_spec(backend))
    except SpecdecUsageError as error:
        return _unmeasurable(out, leg, str(error))
    if missing is not None:
        return _unmeasurable(out, leg, f"the backend needs the Python package {missing!r}")
    arguments += _fit_budget(config, backend, python, out, arguments)
    try:
        with leg_server(leg, out / "server-logs") as pointing:
            done = _run(pytest_command(python, backend, out, [*pointing, *arguments], leg.targets), out)
    except BackendUnavailable as error:
        return _unmeasurable(out, leg, str(error))
    if not extra:  # a night with the job's own budget or options does not time the claims
        record_timings(out / "junit.xml", timings_path(machine_class(), backend))
    sys.stdout.write(done.stdout[-20_000:])
    if done.returncode == 4:  # usage error: unreachable server, missing model …
        first = next((line for line in done.stderr.splitlines() if line.startswith("ERROR")), done.stderr.strip())
        return _unmeasurable(out, leg, first.removeprefix("ERROR: ").strip() or "pytest refused the run")
    crashed, refused = crashes(out / "junit.xml"), refusals(out / "junit.xml")
    run = load_run(out / "results.json") if (out / "results.json").is_file() else None
    cut_short = done.returncode == pytest_exit_interrupted or (run is not None and run.interrupted)
    broken = (
        crashed
        or refused
        or ("the run was cut short (interrupted): not every comparison was measured" if cut_short else "")
    )
    if run is None or not run.comparisons:
        if broken:  # the backend failed, or the run was cut, before a comparison finished
            return Leg(backend, False, f"not measurable here: {broken}", done.returncode, leg.required, broken,
                       crashed, cut_short)  # fmt: skip
        if done.returncode == 5 or run is not None:
            return _unmeasurable(out, leg, "no comparison was measured (every benchmark skipped itself)")
        raise SpecdecUsageError(f"pytest exited {done.returncode} without results — see {out / 'pytest.log'}")
    candidates = BaselineStore(Path("baselines"), run.machine_class).path(backend, candidates=True)
    if candidates.is_file():  # tonight's results without an accepted baseline, for the accept pull request
        shutil.copyfile(candidates, out / CANDIDATES)
    if not extra:  # a night with the job's own budget or options is not part of the trend
        keep_history(run)
    return Leg(backend, True, "measured", done.returncode, leg.required, broken, crashed, cut_short, refused)


def _failures(junit: Path) -> list[tuple[str, str, str]]:
    """``(tag, test name, first line of its message)`` of every errored or failed testcase."""
    from xml.etree import ElementTree

    if not junit.is_file():
        return []
    try:
        root = ElementTree.parse(junit).getroot()
    except ElementTree.ParseError as error:
        return [("error", junit.name, f"{junit} cannot be read ({error})")]
    return [
        (problem.tag, case.get("name", "?"), (problem.get("message") or "").splitlines()[0] if problem.get("message")
         else "")
        for case in root.iter("testcase") for problem in case if problem.tag in ("error", "failure")
    ]  # fmt: skip


def _one_line(broken: Sequence[tuple[str, str, str]], said: str) -> str:
    if not broken:
        return ""
    _, name, message = broken[0]
    return f"{len(broken)} test(s) {said} (first: {name}: {message[:200]})"


def crashes(junit: Path) -> str:
    """Tests that errored, or whose backend failed mid-measurement (no result kept): one line, or ``""``."""
    return _one_line(
        [f for f in _failures(junit) if f[0] == "error" or "failed while measuring" in f[2]], "could not measure"
    )


def refusals(junit: Path) -> str:
    """Claims that measured nothing without a backend failing: the backend refused the comparison (a plain arm
    that speculated, a draft that does not load) or the test's own arguments were refused — one line, or ``""``.
    A refuted or lossy claim kept its result and is none of these."""
    refused = [
        f for f in _failures(junit)
        if f[0] == "failure" and "failed while measuring" not in f[2]
        and (NO_RESULT_KEPT in f[2] or f[2].startswith(("pytest.UsageError", "UsageError")))
    ]  # fmt: skip
    return _one_line(refused, "measured nothing")


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
        calls = ab_flips(first, leg, old, new_python=python, arguments=arguments, out=out, baselines=Path("baselines"),
                         machine_class=run.machine_class)  # fmt: skip
        entries = [(r, calls[baseline_key(r)].call.value, calls[baseline_key(r)].line) for r in first]
        confirmed = [r for r, call, _ in entries if call == Call.RELEASE_CHANGED.value]
    else:
        if changes:
            sys.stdout.write("specdec gate: no old release can run beside the new one for this backend — the flips "
                             "are re-run on the upgraded machine instead\n")  # fmt: skip
        again, unmeasured = _rerun(leg, first, python, arguments, out)
        # Flipped again on exactly the releases of its baseline: nothing but the machine changed. A flip
        # the re-run did not measure stands, and so does an acceptance flip (acceptance does not move
        # with the machine's speed).
        unchanged = [
            r for r in _on_accepted_releases(again, Path("baselines"), run.machine_class)
            if not unjudged_flips(r, Path("baselines"), run.machine_class)
        ]  # fmt: skip
        confirmed = [r for r in [*again, *unmeasured] if r not in unchanged]
        entries = [
            (r, Call.MACHINE_MOVED.value, f"{Call.MACHINE_MOVED.value}: it flipped again on a re-run, on the very "
             f"releases its baseline was accepted on ({r.release}) — nothing but the machine changed") if r in unchanged
            else (r, "re-run", "flipped again on a re-run" if r in again else "the re-run did not measure it"
                  if r in unmeasured else "did not repeat on a re-run")
            for r in first
        ]  # fmt: skip
    for record, _call, line in entries:
        sys.stdout.write(f"specdec gate: {record.nodeid} [{record.category}]: {line}\n")
    listed = [{"nodeid": r.nodeid, "category": r.category, "key": baseline_key(r), "call": call, "line": line,
               "confirmed": r in confirmed} for r, call, line in entries]  # fmt: skip
    write_atomically(out / "confirmed.json", json.dumps(listed, indent=2) + "\n")
    return confirmed


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


def _rerun(
    leg: LegConfig, first: Sequence[ComparisonRecord], python: str, arguments: Sequence[str], out: Path
) -> tuple[list[ComparisonRecord], list[ComparisonRecord]]:
    """Re-run each flipped comparison once (with the leg's server): the flips that flip again, and those the
    re-run did not measure (both stand)."""
    # A node id from results.json becomes a pytest argument: only ids of tests the leg collects
    # are passed (one starting with "-" would be an option).
    collected = set(collect(pytest_command(python, leg.backend, out, arguments, leg.targets)))
    nodeids = sorted({r.nodeid for r in first} & collected)
    for refused in sorted({r.nodeid for r in first} - collected):
        sys.stdout.write(f"specdec gate: refused to re-run {refused!r}: not a test this leg collects\n")
    try:
        if nodeids:
            with leg_server(leg, out / "server-logs") as pointing:
                _run(pytest_command(python, leg.backend, out, [*pointing, *arguments], nodeids), out)
    except BackendUnavailable as error:
        sys.stdout.write(f"specdec gate: the re-run could not start ({error}) — the flips stand\n")
    rerun = load_run(out / "results.json") if (out / "results.json").is_file() else None
    remeasured = {(baseline_key(r), r.baseline_arm) for r in (rerun.comparisons if rerun else ())}
    again = {(baseline_key(r), r.baseline_arm) for r in (rerun.flips if rerun else ())}
    # Only a re-run that measured the comparison and saw no flip clears it; a re-run that
    # crashed, was refused or skipped itself confirms nothing away.
    flipped_again = [r for r in first if (baseline_key(r), r.baseline_arm) in again]
    not_remeasured = [r for r in first if (baseline_key(r), r.baseline_arm) not in remeasured]
    return flipped_again, not_remeasured
