"""The community workflow as shipped: read-only, on pull_request, the base branch's code reading the pull
request's files as data; and its one step, run as the workflow runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from pytest_specdec.community.submit import Private, submissions_of
from pytest_specdec.store.files import dumps
from pytest_specdec.store.records import RunRecord

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "specdec-community.yml"


def workflow() -> dict[Any, Any]:
    loaded: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text())
    return loaded


def test_it_runs_on_pull_request_with_a_read_only_token_and_never_the_pull_requests_code() -> None:
    shipped = workflow()
    events = shipped[True]  # YAML 1.1 reads the key `on` as True
    assert set(events) == {"pull_request"}
    assert events["pull_request"]["paths"] == ["community/**"]
    assert shipped["permissions"] == {"contents": "read"}
    (job,) = shipped["jobs"].values()
    assert "permissions" not in job  # nothing wider than the workflow's read-only token
    assert not str(job["runs-on"]).startswith("self-hosted")
    checkouts = [s for s in job["steps"] if str(s.get("uses", "")).startswith("actions/checkout@")]
    assert checkouts[0]["with"]["ref"] == "${{ github.event.pull_request.base.sha }}"
    assert "path" not in checkouts[0]["with"]  # the base branch is the working tree that runs
    assert checkouts[1]["with"]["ref"] == "${{ github.event.pull_request.head.sha }}"
    assert checkouts[1]["with"]["path"] == "submitted"
    assert all(c["with"]["persist-credentials"] is False for c in checkouts)
    runs = [s["run"] for s in job["steps"] if "run" in s]
    assert runs == [".github/scripts/gate.sh alert-setup", ".github/scripts/gate.sh validate-submissions"]
    assert all("submitted" not in r for r in runs)  # nothing under the pull request's folder is executed


def run_step(tmp_path: Path, submitted: Path) -> subprocess.CompletedProcess[str]:
    """The workflow's validate step in a working tree whose .alert-venv is this interpreter's."""
    (tmp_path / ".alert-venv" / "bin").mkdir(parents=True)
    python = tmp_path / ".alert-venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    environment = dict(os.environ, SUBMITTED=str(submitted))
    return subprocess.run(["bash", str(ROOT / ".github" / "scripts" / "gate.sh"), "validate-submissions"],
                          cwd=tmp_path, env=environment, capture_output=True, text=True, check=False)  # fmt: skip


def test_the_step_passes_consistent_files_and_fails_a_tampered_one(tmp_path: Path, run_record: RunRecord) -> None:
    submitted = tmp_path / "submitted" / "community"
    (made,), _ = submissions_of(run_record, Private("/nowhere", "nobody-here", ()), "2026-12-04T00:00:00+00:00")
    path = submitted / made.relative_path.relative_to("community")
    path.parent.mkdir(parents=True)
    path.write_text(dumps(made))
    good = run_step(tmp_path / "a", submitted)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "1 consistent, 0 rejected" in good.stdout
    data = json.loads(path.read_text())
    data["comparison"]["speedup"]["high"] *= 2
    path.with_name("edited.json").write_text(json.dumps(data))
    bad = run_step(tmp_path / "b", submitted)
    assert bad.returncode == 1
    assert "edited.json: rejected: its interval" in bad.stdout


def test_no_submission_is_nothing_to_validate(tmp_path: Path) -> None:
    done = run_step(tmp_path, tmp_path / "submitted" / "community")
    assert done.returncode == 0
    assert "nothing to validate" in done.stdout


def test_a_file_the_base_branch_already_holds_is_not_checked_again(tmp_path: Path, run_record: RunRecord) -> None:
    """A file merged under an older protocol would fail today's checks: only what the pull request adds counts."""
    (made,), _ = submissions_of(run_record, Private("/nowhere", "nobody-here", ()), "2026-12-04T00:00:00+00:00")
    data = json.loads(dumps(made))
    data["comparison"]["protocol"] = 1  # an old file, as the base branch holds it
    relative = made.relative_path.relative_to("community")
    for tree in (tmp_path / "submitted" / "community", tmp_path / "a" / "community"):  # the head, the base
        (tree / relative).parent.mkdir(parents=True)
        (tree / relative).write_text(json.dumps(data))
    done = run_step(tmp_path / "a", tmp_path / "submitted" / "community")
    assert done.returncode == 0, done.stdout
    assert "no new or changed submission" in done.stdout
