"""A busy machine is said: the load probe reads other processes' CPU, and the reports put it above the table."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from pytest_specdec.cli.doctor import load_line
from pytest_specdec.machine_load import LoadProbe, MachineLoad, own_cpu_s
from pytest_specdec.render.report import busy_lines, markdown_report
from pytest_specdec.store.files import dumps, validate
from pytest_specdec.store.records import ComparisonRecord, RunRecord

SPIN = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end:\n    pass\n"


@pytest.fixture
def stranger() -> Iterator[int]:
    """A busy loop that is not this process's descendant (started by a child that exits at once), as another
    user's job would be; its pid is printed by the child that starts it."""
    starter = (
        "import subprocess, sys\n"
        f"p = subprocess.Popen([sys.executable, '-c', {SPIN!r}], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(p.pid, flush=True)\n"
    )
    pid = int(subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, check=True).stdout)
    try:
        yield pid
    finally:
        subprocess.run(["kill", str(pid)], check=False)


def test_another_process_on_the_machine_is_counted_and_this_runs_own_work_is_not(stranger: int) -> None:
    probe, before = LoadProbe(), own_cpu_s()
    mine = subprocess.Popen([sys.executable, "-c", SPIN.replace("120", "1.5")])  # a server of ours: not "others"
    while mine.poll() is None:
        during = own_cpu_s()  # the child's CPU is read while it lives (a server lives as long as the run)
    load = probe.finish()
    assert during.get(mine.pid, 0.0) > 0.3, "this run's own child is this run's work"
    assert stranger not in during
    assert stranger not in before
    assert load.seconds >= 1.5
    assert load.others_cores is not None
    assert load.others_cores > 0.5, load  # the stranger's loop: about a core of its own (more, on a loaded machine)
    assert "other processes took" in load.busy
    assert load.cores >= 1
    said = load_line(0.5)  # what doctor says before a run, on Linux too
    assert said.startswith("note: load: busy (")
    assert said.endswith("— intervals will be wide; measure when the machine is otherwise idle")


@pytest.mark.parametrize(
    ("load", "busy"),
    [
        (MachineLoad(2, 1.0, 1.5, 0.1, 30.0), ""),
        (MachineLoad(2, 1.0, 2.5, 0.1, 30.0), "load average 2.5 on 2 cores (0.0 of it this run)"),
        (MachineLoad(2, 1.0, 2.5, 0.1, 30.0, own_cores=1.0), ""),
        (MachineLoad(2, None, None, 0.3, 30.0), "other processes took 0.30 cores"),
        (MachineLoad(16, None, None, None, 30.0), ""),
    ],
)
def test_busy_means_a_load_above_the_cores_or_a_quarter_core_of_others(load: MachineLoad, busy: str) -> None:
    assert load.busy == busy


def test_a_busy_comparison_is_said_above_the_table_in_both_reports_and_kept_in_the_record(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    quiet = replace(make_record("code", 1.2, "holds", None), load=MachineLoad(8, 0.5, 0.7, 0.05, 40.0))
    busy = replace(make_record("prose", 1.1, "holds", None), load=MachineLoad(2, 8.2, 13.9, 1.4, 40.0))
    lines = busy_lines([quiet, busy])
    assert lines[0].startswith("the machine was busy while 1 of 2 comparison(s) measured")
    assert lines[1:] == [
        "  [prose, γ=3] test_mlx_draft[prose]: load average 13.9 on 2 cores (0.0 of it this run); other processes took 1.40 cores"
    ]
    assert busy_lines([quiet]) == []
    markdown = markdown_report(RunRecord("M", "2026-12-06T00:00:00+00:00", "2026-12-06T00:01:00+00:00", (quiet, busy)))
    assert markdown.index("## ⚠ The machine was busy") < markdown.index("| ")
    kept = validate(ComparisonRecord, json.loads(dumps(busy)), "test")
    assert kept.load == busy.load


@pytest.mark.parametrize(("reading", "warned"), [(100000.0, True), (0.0, False)])
def test_the_header_warns_of_a_busy_machine_before_the_first_pair(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, reading: float, warned: bool
) -> None:
    """The OS's load average is the one thing set here (a load of 100 000 is busy on any machine)."""
    monkeypatch.setattr("pytest_specdec.plugin.load_average", lambda: reading)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest("--backend=simulated", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    said = "specdec: warning: the machine is busy (load average 100000.0 on * cores): intervals will be wide*"
    if warned:
        result.stdout.fnmatch_lines([said])
    else:
        result.stdout.no_fnmatch_line(said)
