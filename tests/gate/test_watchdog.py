"""The watchdog: a night that did not happen is noticed, the workflow re-enabled, one issue opened."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pytest_specdec.gate.watchdog import check_nights, last_night, quiet_key

GH = Path(__file__).resolve().parents[2] / "pytest_specdec" / "gate" / "standins" / "gh"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


MEASURED = [{"name": "measure (mlx)", "conclusion": "failure", "steps": [
    {"name": "Upload the leg's results, night and logs", "conclusion": "success"}]}]  # fmt: skip
NO_RUNNER = [{"name": "measure (mlx)", "conclusion": "cancelled", "steps": []},
             {"name": "verdict (the night's colour, issues, accept pull request)", "conclusion": "failure",
              "steps": [{"name": "Decide the night, tell GitHub (fails on a red night)", "conclusion": "failure"}]}]  # fmt: skip


def run(
    event: str, updated: str, conclusion: str = "success", status: str = "completed", jobs: object = MEASURED
) -> dict[str, object]:
    number = int(updated[:19].replace("-", "").replace("T", "").replace(":", "")) % 10**9
    began = (datetime.fromisoformat(updated.replace("Z", "+00:00")) - timedelta(minutes=40)).isoformat()
    return {"event": event, "createdAt": began, "updatedAt": updated, "conclusion": conclusion, "status": status,
            "databaseId": number, "jobs": jobs}  # fmt: skip


def test_only_finished_nights_count() -> None:
    runs = [
        run("schedule", "2026-11-28T03:40:00Z"),
        run("push", "2026-12-01T09:00:00Z"),  # not a night
        run("schedule", "2026-12-01T03:40:00Z", "cancelled"),  # a cancelled night did not happen
        run("workflow_dispatch", "2026-11-30T03:40:00Z", status="in_progress"),
        run("workflow_dispatch", "2026-12-01T05:00:00Z"),  # a manual run of one leg is not the night
    ]
    assert last_night(runs) == datetime(2026, 11, 28, 3, 40, tzinfo=UTC)
    assert last_night([]) is None


@pytest.fixture
def gh_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "gh-state.json"
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "gh.jsonl"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(state))
    return state


def test_a_quiet_gate_is_red_with_one_issue_and_the_workflow_re_enabled(tmp_path: Path, gh_state: Path) -> None:
    # sixty manual runs of single legs since the last scheduled night: more than one page of 50
    manual = [run("workflow_dispatch", f"2026-11-{29 + i // 30}T{i % 24:02}:{i % 60:02}:00Z") for i in range(60)]
    gh_state.write_text(json.dumps({"runs": [*manual, run("schedule", "2026-11-28T03:40:00Z")]}))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW)
    assert quiet
    assert lines[0] == (
        "no night of specdec-gate.yml has measured for 48 hours (the last finished 2026-11-28T03:40:00+00:00)"
    )
    calls = [json.loads(line) for line in (tmp_path / "gh.jsonl").read_text().splitlines()]
    assert ["workflow", "enable", "specdec-gate.yml"] in calls
    assert lines[-1] == f"opened: {quiet_key('specdec-gate.yml').title}"
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW)
    assert lines[-1].startswith("commented on #1:"), "one issue, found again"
    state = json.loads(gh_state.read_text())
    state["runs"].append(run("schedule", "2026-12-01T03:40:00Z"))
    gh_state.write_text(json.dumps(state))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW)
    assert not quiet
    assert lines[-1] == f"closed #1 (cleared): {quiet_key('specdec-gate.yml').title}", "a night measured again"
    assert json.loads(gh_state.read_text())["issues"][0]["state"] == "closed"


def test_a_recent_night_is_green(gh_state: Path) -> None:
    gh_state.write_text(json.dumps({"runs": [run("schedule", "2026-12-01T03:40:00Z", "failure")]}))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW)
    assert not quiet, "a red night still happened"
    assert "within 48 hours" in lines[0]


def test_a_completed_failed_night_whose_measuring_jobs_never_ran_is_no_night(gh_state: Path) -> None:
    """An offline runner: GitHub cancels the queued measuring job, the hosted verdict job fails: completed, failed."""
    gh_state.write_text(json.dumps({"runs": [
        run("schedule", "2026-12-01T03:40:00Z", "failure", jobs=NO_RUNNER),
        run("schedule", "2026-11-27T03:40:00Z", "failure"),
    ]}))  # fmt: skip
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW)
    assert quiet
    assert lines[0] == (
        "no night of specdec-gate.yml has measured for 48 hours (the last finished 2026-11-27T03:40:00+00:00; "
        "1 later scheduled run(s) completed without measuring)"
    )


def fleet_jobs(*labels: str) -> list[dict[str, object]]:
    """The jobs of a fleet's night as GitHub names a called workflow's: ``night (L) / measure (leg on L)``."""
    handed_on = [{"name": "Upload the leg's results, night and logs", "conclusion": "success"}]
    return [{"name": f"night ({label}) / measure (mlx on {label})", "conclusion": "success", "steps": handed_on}
            for label in labels]  # fmt: skip


def test_each_runner_of_a_fleet_has_its_nights_counted_and_its_own_issue(tmp_path: Path, gh_state: Path) -> None:
    """The M4 runner measured tonight (in a run still in progress: M1's job is queued); the M1 runner last measured
    four days ago: only M1's issue opens, named by its label, and the workflow is re-enabled once."""
    gh_state.write_text(json.dumps({"runs": [
        # still in progress: M1's measure job waits in its queue, M4's night in the same run has measured
        run("schedule", "2026-12-01T03:40:00Z", status="in_progress", jobs=fleet_jobs("m4-48")),
        run("schedule", "2026-11-27T03:40:00Z", jobs=fleet_jobs("m1-64", "m4-48")),
    ]}))  # fmt: skip
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m1-64", "m4-48"))
    assert quiet
    assert (
        "no night of specdec-gate.yml on runner m1-64 has measured for 48 hours (the last finished "
        "2026-11-27T03:40:00+00:00; 1 later scheduled run(s) completed without measuring)"
    ) in lines
    assert any(line.startswith("last night of specdec-gate.yml on runner m4-48 that measured") for line in lines)
    assert f"opened: {quiet_key('specdec-gate.yml', 'm1-64').title}" in lines
    assert not [line for line in lines if line.startswith("opened") and "m4-48" in line]
    assert "runner m1-64" in quiet_key("specdec-gate.yml", "m1-64").title
    calls = [json.loads(line) for line in (tmp_path / "gh.jsonl").read_text().splitlines()]
    assert calls.count(["workflow", "enable", "specdec-gate.yml"]) == 1
    assert len([c for c in calls if c[:2] == ["run", "view"]]) == 2, "each night's jobs asked for once"
    # M1 measures again: its issue closes, M4's nights were never its concern.
    state = json.loads(gh_state.read_text())
    state["runs"].append(run("schedule", "2026-12-01T04:40:00Z", jobs=fleet_jobs("m1-64")))
    gh_state.write_text(json.dumps(state))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m1-64", "m4-48"))
    assert not quiet
    assert f"closed #1 (cleared): {quiet_key('specdec-gate.yml', 'm1-64').title}" in lines


def test_a_runner_just_added_is_not_yet_quiet_until_a_night_that_planned_it_is_overdue(gh_state: Path) -> None:
    """The guide's "adding a second Mac": the M5 label is new in the configuration. No night has planned its jobs
    yet, then tonight's did (its runner still being set up): neither is an alarm; three days after the first night
    that planned it, with nothing measured, it is quiet like any runner."""
    cancelled = [{"name": "night (m5-32) / measure (mlx on m5-32)", "conclusion": "cancelled", "steps": []}]
    runs = [run("schedule", "2026-11-30T03:40:00Z", jobs=fleet_jobs("m4-48"))]
    gh_state.write_text(json.dumps({"runs": runs}))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m4-48", "m5-32"))
    assert not quiet
    assert (
        "runner m5-32 has measured no night of specdec-gate.yml yet: no night has planned its jobs yet (added "
        "since the last that planned the others) — not yet due"
    ) in lines
    tonight = run("schedule", "2026-12-01T03:40:00Z", jobs=[*fleet_jobs("m4-48"), *cancelled])
    gh_state.write_text(json.dumps({"runs": [*runs, tonight]}))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m4-48", "m5-32"))
    assert not quiet
    assert any("its first planned night began 2026-12-01T03:00:00+00:00, within 48 hours" in line for line in lines)
    first = run("schedule", "2026-11-28T03:40:00Z", jobs=[*fleet_jobs("m4-48"), *cancelled])
    gh_state.write_text(json.dumps({"runs": [*runs, tonight, first]}))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m4-48", "m5-32"))
    assert quiet
    assert f"opened: {quiet_key('specdec-gate.yml', 'm5-32').title}" in lines
    assert not [line for line in lines if line.startswith("opened") and "m4-48" in line]


def test_moving_to_a_fleet_closes_the_one_runners_quiet_issue(gh_state: Path) -> None:
    """Its issue ("every machine class") was keyed before the fleet: no runner's check would ever clear it."""
    gh_state.write_text(json.dumps({"runs": [run("schedule", "2026-11-25T03:40:00Z")]}))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW)
    assert quiet
    assert lines[-1] == f"opened: {quiet_key('specdec-gate.yml').title}"
    state = json.loads(gh_state.read_text())
    state["runs"].append(run("schedule", "2026-12-01T03:40:00Z", jobs=fleet_jobs("m4-48")))
    gh_state.write_text(json.dumps(state))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m4-48",))
    assert not quiet
    assert lines[-1] == f"closed #1 (cleared): {quiet_key('specdec-gate.yml').title}"
    assert json.loads(gh_state.read_text())["issues"][0]["state"] == "closed"


def test_a_runner_is_never_new_again_once_due_nor_while_no_night_plans_anyone(gh_state: Path) -> None:
    """Two ways an established runner could pass for a new one: its planned night cancelled after its issue
    opened, and fifty nights whose plan failed before any job (its measured nights gone from the list)."""
    cancelled = [{"name": "night (m5-32) / measure (mlx on m5-32)", "conclusion": "cancelled", "steps": []}]
    first = run("schedule", "2026-11-28T03:40:00Z", jobs=[*fleet_jobs("m4-48"), *cancelled])
    gh_state.write_text(
        json.dumps({"runs": [first, run("schedule", "2026-12-01T03:40:00Z", jobs=fleet_jobs("m4-48"))]})
    )
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m4-48", "m5-32"))
    assert quiet
    state = json.loads(gh_state.read_text())
    state["runs"][0]["conclusion"] = "cancelled"  # the run that planned m5's jobs ends cancelled
    gh_state.write_text(json.dumps(state))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m4-48", "m5-32"))
    assert quiet, "its issue is open: it was due, and stays so"
    assert not [line for line in lines if line.startswith("closed")]
    broken = [
        run("schedule", f"2026-11-{d}T{h:02d}:40:00Z", "failure", jobs=[]) for d in (28, 29, 30) for h in range(24)
    ]
    old = run("schedule", "2026-10-01T03:40:00Z", jobs=fleet_jobs("m4-48"))  # beyond the 50 newest listed
    gh_state.write_text(json.dumps({"runs": [*broken, old]}))
    quiet, lines = check_nights(str(GH), "specdec-gate.yml", 48, NOW, runners=("m4-48",))
    assert quiet, "no night planned anyone's jobs for two days: a broken plan, not a new runner"
