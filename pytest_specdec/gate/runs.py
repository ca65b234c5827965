"""Running one leg: ``benchmarks/`` (or the leg's targets) for one backend, and the re-run.

A leg that cannot run (runtime not installed, server down, model absent, its managed
server failing to start) is *not measurable*: a required leg fails the gate with that
reason, an optional one is a warning in the step summary — never a silent pass.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.backends import backend_spec, missing_runtime
from pytest_specdec.backends.server_process import LOG_FOLDER_VARIABLE
from pytest_specdec.errors import BackendUnavailable, SpecdecUsageError
from pytest_specdec.gate.legs import GateConfig, LegConfig, check_profile, leg_server
from pytest_specdec.gate.summary import keep_history
from pytest_specdec.store.files import load_run, write_atomically
from pytest_specdec.store.records import ComparisonRecord

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
    check_profile(config, leg)
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


def measure(config: GateConfig, backend: str, out: Path, python: str, extra: Sequence[str]) -> Leg:
    """Run the leg's benchmarks for ``backend``; classify what happened."""
    out.mkdir(parents=True, exist_ok=True)
    leg = config.leg(backend)
    arguments = leg_arguments(config, leg, extra)  # a refused profile is a usage error, not "unmeasurable"
    try:
        missing = missing_runtime(backend_spec(backend))
    except SpecdecUsageError as error:
        return _unmeasurable(out, leg, str(error))
    if missing is not None:
        return _unmeasurable(out, leg, f"the backend needs the Python package {missing!r}")
    try:
        with leg_server(leg, out / "server-logs") as pointing:
            done = _run(pytest_command(python, backend, out, [*pointing, *arguments], leg.targets), out)
    except BackendUnavailable as error:
        return _unmeasurable(out, leg, str(error))
    sys.stdout.write(done.stdout[-20_000:])
    if done.returncode == 4:  # usage error: unreachable server, missing model …
        first = next((line for line in done.stderr.splitlines() if line.startswith("ERROR")), done.stderr.strip())
        return _unmeasurable(out, leg, first.removeprefix("ERROR: ").strip() or "pytest refused the run")
    if not (out / "results.json").is_file():
        if done.returncode == 5:
            return _unmeasurable(out, leg, "no comparison ran (every test was skipped or deselected)")
        raise SpecdecUsageError(f"pytest exited {done.returncode} without results — see {out / 'pytest.log'}")
    run = load_run(out / "results.json")
    if not run.comparisons:
        return _unmeasurable(out, leg, "no comparison was measured (every benchmark skipped itself)")
    keep_history(out / "results.json", run.machine_class)
    return Leg(backend, True, "measured", done.returncode, leg.required)


def confirm(config: GateConfig, results: Path, out: Path, python: str, extra: Sequence[str]) -> list[ComparisonRecord]:
    """Re-run each flipped comparison once (with the leg's server); the flips that flip again are confirmed."""
    run = load_run(results)
    first = run.flips
    out.mkdir(parents=True, exist_ok=True)
    if not first:
        write_atomically(out / "confirmed.json", "[]\n")
        return []
    leg = config.leg(first[0].backend)
    nodeids = sorted({r.nodeid for r in first})
    arguments = leg_arguments(config, leg, extra)
    with leg_server(leg, out / "server-logs") as pointing:
        _run(pytest_command(python, leg.backend, out, [*pointing, *arguments], nodeids), out)
    again = (
        {(r.nodeid, r.category) for r in load_run(out / "results.json").flips}
        if (out / "results.json").is_file()
        else set()
    )
    confirmed = [r for r in first if (r.nodeid, r.category) in again]
    write_atomically(
        out / "confirmed.json",
        json.dumps([{"nodeid": r.nodeid, "category": r.category} for r in confirmed], indent=2) + "\n",
    )
    return confirmed
