"""The CI gate's logic, for ``.github/workflows/specdec-gate.yml`` (``specdec gate …``).

* ``measure`` — run ``benchmarks/`` for one backend, writing Markdown, JSON, PNG,
  pytest-benchmark JSON and JUnit XML; a backend that cannot run here (runtime not
  installed, server not reachable, models absent) is reported "not measurable here"
  and does not fail the gate.
* ``confirm`` — re-run only the comparisons whose conclusion flipped, once.
* ``alert`` — one GitHub issue per (machine class, backend, claim) for confirmed
  flips, through ``gh``: a comment on the open issue with the same title, or a new
  one; exits 1 so the job fails. Inconclusive or drifted results open nothing.
* ``notify`` — POST the verdicts to a webhook, when one is configured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.backends import backend_spec, missing_runtime
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.files import load_run, write_atomically
from pytest_specdec.store.records import ComparisonRecord, RunRecord

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


def pytest_command(python: str, backend: str, out: Path, extra: Sequence[str], targets: Sequence[str]) -> list[str]:
    """``python -m pytest_specdec.cli pytest …`` with every report file under ``out``."""
    reports = [f"--specdec-{key.replace('_', '-')}={out / name}" for key, name in REPORT_FILES.items()]
    return [
        python, "-m", "pytest_specdec.cli", "pytest", *targets, f"--backend={backend}", "-p", "no:cacheprovider",
        *reports, f"--junitxml={out / 'junit.xml'}", *extra,
    ]  # fmt: skip


def _unmeasurable(out: Path, backend: str, reason: str) -> Leg:
    leg = Leg(backend, False, f"not measurable here: {reason}")
    (out / "report.md").write_text(f"# pytest-specdec: {backend}\n\n{leg.reason}\n", encoding="utf-8")
    return leg


def measure(backend: str, out: Path, python: str, extra: Sequence[str]) -> Leg:
    """Run the benchmarks for ``backend``; classify what happened."""
    out.mkdir(parents=True, exist_ok=True)
    try:
        missing = missing_runtime(backend_spec(backend))
    except SpecdecUsageError as error:
        return _unmeasurable(out, backend, str(error))
    if missing is not None:
        return _unmeasurable(out, backend, f"the backend needs the Python package {missing!r}")
    done = subprocess.run(
        pytest_command(python, backend, out, extra, ["benchmarks/"]), capture_output=True, text=True, check=False
    )
    (out / "pytest.log").write_text(done.stdout + done.stderr, encoding="utf-8")
    sys.stdout.write(done.stdout[-20_000:])
    if done.returncode == 4:  # usage error: unreachable server, missing model …
        first = next((line for line in done.stderr.splitlines() if line.startswith("ERROR")), done.stderr.strip())
        return _unmeasurable(out, backend, first.removeprefix("ERROR: ").strip() or "pytest refused the run")
    if not (out / "results.json").is_file():
        if done.returncode == 5:
            return _unmeasurable(out, backend, "no comparison ran (every test was skipped or deselected)")
        raise SpecdecUsageError(f"pytest exited {done.returncode} without results — see {out / 'pytest.log'}")
    return Leg(backend, True, "measured", done.returncode)


def confirm(results: Path, out: Path, python: str, extra: Sequence[str]) -> list[ComparisonRecord]:
    """Re-run each flipped comparison once; the flips that flip again are confirmed."""
    run = load_run(results)
    first = run.flips
    out.mkdir(parents=True, exist_ok=True)
    if not first:
        write_atomically(out / "confirmed.json", "[]\n")
        return []
    backend = first[0].backend
    nodeids = sorted({r.nodeid for r in first})
    done = subprocess.run(
        pytest_command(python, backend, out, extra, nodeids), capture_output=True, text=True, check=False
    )
    (out / "pytest.log").write_text(done.stdout + done.stderr, encoding="utf-8")
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


def issue_title(machine_class: str, backend: str, record: ComparisonRecord) -> str:
    """One title per (machine class, backend, claim)."""
    claim = f"claim {record.claim_id}" if record.claim_id else record.nodeid.split("::")[-1]
    return f"specdec: conclusion changed — {claim} on {machine_class} ({backend})"


def _gh(gh: str, *args: str) -> str:
    done = subprocess.run([gh, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SpecdecUsageError(f"'gh {' '.join(args[:2])}' failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def alert(run: RunRecord, confirmed: Sequence[ComparisonRecord], gh: str, run_url: str) -> list[str]:
    """Create or comment on one issue per (machine class, backend, claim); returns what was done."""
    groups: dict[str, list[ComparisonRecord]] = {}
    for record in confirmed:
        groups.setdefault(issue_title(run.machine_class, record.backend, record), []).append(record)
    actions = []
    for title, records in groups.items():
        lines = [f"- `{r.nodeid}` [{r.category}]: {r.check.message if r.check else r.verdict.value}" for r in records]
        body = "\n".join([f"Confirmed by a re-run. Run: {run_url}", "", *lines, ""])
        listed = json.loads(_gh(gh, "issue", "list", "--state", "open", "--search", f"{title} in:title",
                                "--json", "number,title", "--limit", "100") or "[]")  # fmt: skip
        match = next((issue for issue in listed if issue.get("title") == title), None)
        if match is not None:
            _gh(gh, "issue", "comment", str(match["number"]), "--body", body)
            actions.append(f"commented on #{match['number']}: {title}")
        else:
            _gh(gh, "issue", "create", "--title", title, "--body", body)
            actions.append(f"opened: {title}")
    return actions


def verdicts_payload(run: RunRecord) -> dict[str, object]:
    """The verdict JSON a webhook receives."""
    return {
        "machine_class": run.machine_class,
        "finished": run.finished,
        "comparisons": [
            {
                "nodeid": r.nodeid,
                "backend": r.backend,
                "release": r.release,
                "category": r.category,
                "speedup": r.speedup.estimate,
                "interval": [r.speedup.low, r.speedup.high],
                "verdict": r.verdict,
                "change": r.check.change if r.check else None,
            }
            for r in run.comparisons
        ],
    }


def notify(run: RunRecord, url: str) -> str:
    """POST the verdicts; a webhook that fails is reported, never fatal."""
    import httpx

    try:
        response = httpx.post(url, json=verdicts_payload(run), timeout=30)
    except httpx.HTTPError as error:
        return f"webhook not reached ({error}) — the gate's result stands"
    return f"webhook answered HTTP {response.status_code}"


def run_url() -> str:
    """This GitHub Actions run's page, from the runner's environment."""
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    return f"{server}/{os.environ.get('GITHUB_REPOSITORY', '?')}/actions/runs/{os.environ.get('GITHUB_RUN_ID', '?')}"
