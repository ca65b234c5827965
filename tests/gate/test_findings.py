"""A leg's night and the night's colour: findings in their own words, the verdict job, issues found again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.alert_job import tell
from pytest_specdec.gate.alerts import LABEL, AlertKey, key_in, known_issues
from pytest_specdec.gate.findings import (
    Finding,
    LegCause,
    LegNight,
    State,
    Thresholds,
    comparison_findings,
    night_colour,
    shown_only_subjects,
    silent_legs,
    trailing,
    ungated_finding,
)
from pytest_specdec.gate.leg_account import read_night
from pytest_specdec.gate.runner_state import keep_history
from pytest_specdec.render.exports import results_document
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key
from pytest_specdec.store.files import dumps
from pytest_specdec.store.nights import Night
from pytest_specdec.store.records import Provenance, Role, RunRecord

from .conftest import write_pyproject

GH = Path(__file__).resolve().parents[2] / "pytest_specdec" / "gate" / "standins" / "gh"


def specdec(repo: Path, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "SPECDEC_GH_LOG": str(log or repo / "gh.jsonl"),
                   "SPECDEC_GH_STATE": str(repo / "gh-state.json")}  # fmt: skip
    command = [sys.executable, "-m", "pytest_specdec.cli", "gate", *args]
    return subprocess.run(command, cwd=repo, env=environment, capture_output=True, text=True, check=False)


def gh_calls(repo: Path) -> list[list[str]]:
    log = repo / "gh.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@pytest.fixture
def measured(tmp_path: Path, sample_run: RunRecord) -> Path:
    """A measured mlx leg (one re-confirmed and one flipped comparison) whose flip the re-run did not confirm."""
    out = tmp_path / "artifacts" / "specdec-mlx"
    (out / "confirm").mkdir(parents=True)
    (out / "status.json").write_text(json.dumps({"backend": "mlx", "measurable": True, "reason": "measured"}))
    (out / "results.json").write_text(dumps(results_document(sample_run)))
    (out / "confirm" / "confirmed.json").write_text(json.dumps([{
        "nodeid": "benchmarks/test_claim_d.py::test_mlx_draft[code]", "category": "code", "confirmed": False,
        "call": "re-run", "line": "did not repeat on a re-run"}]))  # fmt: skip
    (out / "release-changes.json").write_text('["mlx-lm 0.32.2 → 0.33.0"]')
    write_pyproject(tmp_path, "[tool.specdec.gate.legs.mlx]\nrequired = true\n")
    return out


def night_and_verdict(repo: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], ...]:
    night = specdec(repo, "night", "--backend", "mlx", "--out", str(out))
    verdict = specdec(repo, "verdict", "--artifacts", str(out.parent), "--gh", str(GH))
    return night, verdict


def test_an_unconfirmed_flip_is_green_and_tells_github_nothing(tmp_path: Path, measured: Path) -> None:
    night, verdict = night_and_verdict(tmp_path, measured)
    assert night.returncode == 0, night.stdout + night.stderr
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert "the night is green" in verdict.stdout
    assert [c[:2] for c in gh_calls(tmp_path)] == [["issue", "list"]], "only the gate's issues looked up"


def test_a_confirmed_flip_is_red_with_one_issue_found_again_the_next_night(tmp_path: Path, measured: Path) -> None:
    (measured / "confirm" / "confirmed.json").write_text(
        json.dumps([{"nodeid": "benchmarks/test_claim_d.py::test_mlx_draft[code]", "category": "code"}])
    )
    night, verdict = night_and_verdict(tmp_path, measured)
    assert night.returncode == 1, "the measuring job of a red required leg fails too"
    assert verdict.returncode == 1
    assert "::error title=specdec gate::mlx: conclusion changed — claim d" in verdict.stdout
    calls = [c for c in gh_calls(tmp_path) if c[0] == "issue"]
    assert [c[:2] for c in calls] == [["issue", "list"], ["issue", "create"]]
    title = calls[1][calls[1].index("--title") + 1]
    assert title.startswith("specdec: conclusion changed — claim d on Apple-M1-Max-64GB (mlx, seed): "), title
    assert "- mlx-lm 0.32.2 → 0.33.0" in calls[1][calls[1].index("--body") + 1]
    night_and_verdict(tmp_path, measured)
    assert [c[:2] for c in gh_calls(tmp_path) if c[0] == "issue"][2:] == [["issue", "list"], ["issue", "comment"]]


def test_a_flip_the_confirm_step_left_no_call_on_stands(tmp_path: Path, measured: Path) -> None:
    """A confirm step that crashed (or never ran) wrote no confirmed.json: nothing cleared the flip."""
    (measured / "confirm" / "confirmed.json").unlink()
    night, verdict = night_and_verdict(tmp_path, measured)
    assert night.returncode == 1, night.stdout + night.stderr
    assert verdict.returncode == 1
    assert "the confirm step left no call on this flip (it did not finish: see the leg's log) — the flip stands" in (
        night.stdout
    )
    assert "::error title=specdec gate::mlx: conclusion changed — claim d" in verdict.stdout


@pytest.mark.parametrize(
    ("tamper", "said"),
    [
        ({"required": False}, "mlx: conclusion changed — claim d"),  # the configuration says required
        ({"backend": "ollama"}, "mlx: runner did not report — leg: the leg reported nothing"),  # another leg's word
    ],
)
def test_what_a_night_file_says_of_itself_is_checked_against_the_configuration(
    tmp_path: Path, measured: Path, tamper: dict[str, object], said: str
) -> None:
    """night.json is written by the job that ran tonight's upgraded packages: it cannot make its leg optional."""
    (measured / "confirm" / "confirmed.json").write_text(
        json.dumps([{"nodeid": "benchmarks/test_claim_d.py::test_mlx_draft[code]", "category": "code"}])
    )
    specdec(tmp_path, "night", "--backend", "mlx", "--out", str(measured))
    path = measured / "night.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **tamper}))
    verdict = specdec(tmp_path, "verdict", "--artifacts", str(measured.parent), "--gh", str(GH))
    assert verdict.returncode == 1, verdict.stdout
    assert f"::error title=specdec gate::{said}" in verdict.stdout
    assert ("refused:" in verdict.stdout) is ("backend" in tamper), "a file in another leg's folder is refused"


@pytest.mark.parametrize("alert", [True, False], ids=["alert-on-erosion = true", "alert-on-erosion = false"])
def test_erosion_opens_an_issue_with_its_history_but_the_night_stays_green(
    tmp_path: Path, measured: Path, runner_state: Path, sample_run: RunRecord, alert: bool
) -> None:
    if not alert:  # the setting the guide describes: no "eroding" issue
        write_pyproject(tmp_path, "[tool.specdec.gate]\nalert-on-erosion = false\n\n[tool.specdec.gate.legs.mlx]\n"
                        "required = true\n")  # fmt: skip
    lines = [
        Night.of_line({"time": f"2026-11-0{day}", "machine_class": sample_run.machine_class, "backend": "mlx",
         "release": f"mlx-lm 0.3{day}", "key": "k [copy]",
         "nodeid": "b.py::test_d", "category": "copy", "claim_id": "d", "bounds": {"speedup max=1": "holds"},
         "speedup": {"estimate": value, "low": value * 0.97, "high": value * 1.03}, "verdict": "holds"})
        for day, value in enumerate((0.80, 0.90, 0.98), start=1)
    ]  # fmt: skip
    BaselineStore(runner_state, sample_run.machine_class).append_history(lines)
    _, verdict = night_and_verdict(tmp_path, measured)
    assert verdict.returncode == 0, verdict.stdout
    created = [c for c in gh_calls(tmp_path) if c[:2] == ["issue", "create"]]
    if not alert:
        assert created == []
        return
    (create,) = created
    assert create[create.index("--title") + 1].startswith("specdec: eroding — claim d on Apple-M1-Max-64GB (mlx, seed)")
    assert "| 2026-11-03 | mlx-lm 0.33 | 0.98x [0.95, 1.01] | holds | - |" in create[create.index("--body") + 1]


@pytest.mark.parametrize(
    "tamper",
    [
        lambda data: {**data, "schema_version": 99},
        lambda data: {**data, "findings": [{"state": "rm -rf /", "subject": "x", "message": "y"}]},
        lambda data: [data],
    ],
)
def test_a_tampered_night_file_is_refused_with_one_line_and_its_leg_counts_as_silent(
    tmp_path: Path, measured: Path, tamper: object
) -> None:
    specdec(tmp_path, "night", "--backend", "mlx", "--out", str(measured))
    path = measured / "night.json"
    path.write_text(json.dumps(tamper(json.loads(path.read_text()))))  # type: ignore[operator]
    with pytest.raises(SpecdecUsageError) as refused:
        read_night(path)
    assert "\n" not in str(refused.value)
    verdict = specdec(tmp_path, "verdict", "--artifacts", str(measured.parent), "--gh", str(GH))
    assert verdict.returncode == 1, "a required leg whose report cannot be trusted did not report"
    assert "refused:" in verdict.stdout
    assert "mlx: runner did not report — leg: the leg reported nothing" in verdict.stdout


def test_a_night_that_measured_nothing_is_red_and_an_optional_leg_only_warns() -> None:
    silent = LegNight("ollama", "M", required=False, measured=False, reason="no server",
                      findings=(Finding(State.UNMEASURABLE, "leg", "no server"),))  # fmt: skip
    colour = night_colour([silent], {"ollama": False})
    assert colour.red
    assert colour.lines == ("no leg was measured tonight: a night that measures nothing is never green",)
    assert colour.warnings == ("ollama: leg not measurable — leg: no server",)
    measured = replace(silent, backend="mlx", measured=True, findings=())
    assert not night_colour([silent, measured], {"ollama": False, "mlx": True}).red
    assert night_colour([silent], {"ollama": False, "mlx": True}).red, "a required leg that did not report"


def test_not_yet_gated_is_said_and_goes_red_after_the_configured_nights() -> None:
    nights = tuple(Night.of_line({"time": f"2026-11-0{d}", "change": "new"}) for d in (1, 2))
    waiting = ungated_finding(2, nights, Thresholds(ungated_nights=3))
    assert waiting is not None
    assert waiting.state is State.NOT_YET_GATED
    assert "not yet gated: 2 result(s) await acceptance (night 2 of 3" in waiting.message
    third = Night.of_line({"time": "2026-11-03", "change": "new"})
    red = ungated_finding(2, (*nights, third), Thresholds(ungated_nights=3))
    assert red is not None
    assert red.state is State.UNGATED
    assert trailing((*nights, replace(third, change="unchanged")), {"new"}) == 0


def test_an_issue_is_found_again_by_its_key_not_by_its_title(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The marker line in the body is the issue's identity: an issue with the same title but another key (or none)
    is not it, a title edited by hand still is, and a marker that does not parse is no key."""
    key = AlertKey("M", "mlx", "claim r", "conclusion changed", "mlx-lm 0.32.2 → 0.33.0")
    other = AlertKey("M", "mlx", "claim r", "conclusion changed", "mlx-lm 0.33.0 → 0.34.0")
    state = tmp_path / "gh-state.json"
    issues = [
        {"number": 1, "title": key.title, "state": "open", "labels": [LABEL], "body": "no marker"},
        {"number": 2, "title": key.title, "state": "open", "labels": [LABEL], "body": f"x\n{other.marker}\n"},
        {"number": 3, "title": "renamed by hand", "state": "open", "labels": [LABEL], "body": f"x\n{key.marker}"},
        {"number": 4, "title": "a user's", "state": "open", "labels": [], "body": key.marker},  # not the gate's label
        {"number": 5, "title": "torn", "state": "open", "labels": [LABEL], "body": "<!-- specdec-alert: {torn -->"},
    ]
    state.write_text(json.dumps({"issues": issues}))
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "gh.jsonl"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(state))
    known = known_issues(str(GH))
    assert {k: i.number for k, i in known.items()} == {key: 3, other: 2}
    assert key_in(key.marker) == key


def keyed_night(tmp_path: Path, findings: tuple[Finding, ...], agreeing: dict[str, str] | None = None) -> list[str]:
    """One required mlx leg's night told to the gh stand-in; what the verdict did (claim d agrees on 0.33.0 unless
    ``agreeing`` says otherwise)."""
    agreed = {"claim d": "mlx-lm 0.33.0"} if agreeing is None else agreeing
    leg = LegNight("mlx", "M", True, True, "measured", findings, agreeing=agreed)
    return tell([leg], str(GH), "https://example/run/1")


def test_every_change_its_own_issue_closed_when_cleared_and_reopened_when_it_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two causes are two issues; a night where the claim was measured and agrees closes its issue with a comment;
    a night that did not measure the claim (or did not report) closes nothing; the same change again reopens it."""
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "gh.jsonl"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(tmp_path / "gh-state.json"))
    flip = Finding(State.FLIP, "claim d", "refuted", "t.py::test_d[code]", "code", cause="mlx-lm 0.32.2 → 0.33.0")
    absent = Finding(State.UNMEASURABLE, "leg", "model absent", cause=LegCause.UNAVAILABLE)
    broken = Finding(State.UNMEASURABLE, "leg", "upgrade exited 1", cause=LegCause.SERVER_UPGRADE)
    assert keyed_night(tmp_path, (flip,)) == [f"opened: {alert_key_of(flip).title}"]
    unmeasured = LegNight("mlx", "M", True, False, "not measurable", (absent,))
    assert tell([unmeasured], str(GH), "u") == [f"opened: {alert_key_of(absent).title}"], "the flip is not cleared"
    unmeasured = replace(unmeasured, findings=(broken,))
    assert tell([unmeasured], str(GH), "u") == [f"opened: {alert_key_of(broken).title}"], "another kind, another"
    assert keyed_night(tmp_path, (), agreeing={}) == [
        "closed #2 (cleared): " + alert_key_of(absent).title,
        "closed #3 (cleared): " + alert_key_of(broken).title,
    ], "claim d was not measured (or was inconclusive): its flip stays open"
    not_confirmed = replace(flip, state=State.NOT_CONFIRMED)
    assert keyed_night(tmp_path, (not_confirmed,), agreeing={}) == [], "a flip not confirmed does not clear a flip"
    assert keyed_night(tmp_path, (), agreeing={"claim d": "mlx-lm 0.32.2"}) == [], "an older release clears nothing"
    later = replace(flip, cause="mlx-lm 0.32.2 → 0.33.1")
    assert keyed_night(tmp_path, (later,)) == [f"commented on #1: {alert_key_of(flip).title}"], "the same flip goes on"
    assert keyed_night(tmp_path, ()) == ["closed #1 (cleared): " + alert_key_of(flip).title]
    silent = Finding(State.NOT_REPORTED, "leg", "nothing came back", cause=LegCause.NO_NIGHT_FILE)
    nobody = LegNight("mlx", "its self-hosted runner", True, False, "the leg reported nothing", (silent,))
    (opened,) = tell([nobody], str(GH), "u")
    assert keyed_night(tmp_path, ()) == [opened.replace("opened:", "closed #4 (cleared):")], "a leg that reports again"
    assert keyed_night(tmp_path, (flip,)) == ["reopened #1 (it returned): " + alert_key_of(flip).title]
    assert keyed_night(tmp_path, (flip,)) == ["commented on #1: " + alert_key_of(flip).title]
    issues = json.loads((tmp_path / "gh-state.json").read_text())["issues"]
    assert [(i["number"], i["state"]) for i in issues] == [(1, "open"), (2, "closed"), (3, "closed"), (4, "closed")]
    assert [c.split(" ", 1)[0] for c in issues[0]["comments"]] == ["**conclusion", "Cleared:", "It", "**conclusion"]
    assert issues[0]["comments"][1].startswith("Cleared: claim d was measured tonight on M (mlx-lm 0.33.0) and agrees")


def alert_key_of(finding: Finding, machine: str = "M") -> AlertKey:
    return AlertKey(machine, "mlx", finding.subject, finding.state.value, finding.cause)


def test_a_night_on_another_profile_neither_clears_nor_continues_that_profiles_alert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile is part of the key: a manual night on the embedded pair that agrees closes nothing of the seed
    profile's flip; a seed night that agrees does; a key written before profiles were keyed is cleared by either."""
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "gh.jsonl"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(tmp_path / "gh-state.json"))
    flip = Finding(State.FLIP, "claim d", "refuted", "t.py::test_d[code]", "code", cause="mlx-lm 0.32.2 → 0.33.0")
    seed = LegNight("mlx", "M", True, True, "measured", (flip,), profile="seed")
    (opened,) = tell([seed], str(GH), "u")
    assert opened.endswith("claim d on M (mlx, seed): mlx-lm 0.32.2 → 0.33.0"), opened
    agreeing = {"claim d": "mlx-lm 0.33.0"}
    embedded = LegNight("mlx", "M", True, True, "measured", (), agreeing=agreeing, profile="embedded")
    assert tell([embedded], str(GH), "u") == [], "another profile's agreement says nothing of the seed models"
    assert tell([replace(embedded, findings=(flip,))], str(GH), "u") == [
        "opened: specdec: conclusion changed — claim d on M (mlx, embedded): mlx-lm 0.32.2 → 0.33.0"
    ], "the same flip on another profile is its own change"
    (closed,) = tell([replace(seed, findings=(), agreeing=agreeing)], str(GH), "u")
    assert closed.startswith("closed #1 (cleared)"), closed
    older = AlertKey("M", "mlx", "claim e", "conclusion changed", "mlx-lm 0.32.2 → 0.33.0")  # no profile in it
    assert older.same_profile("seed")
    assert older.same_profile("embedded")
    assert not AlertKey("M", "mlx", "claim e", "eroding", "", "seed").same_profile("embedded")


def test_the_issues_opened_before_keys_are_adopted_once_and_then_go_on_and_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pytest-specdec gate adopt-issues`` finds the gate's open issues from before marker lines by their titles' exact
    shape (a state word of the gate's, or the watchdog's), labels them and adds a marker; a user's issue and a
    closed one are left alone. The adopted flip then takes tonight's flip of any cause and closes when cleared."""
    issues = [
        {"number": 1, "title": "specdec: conclusion changed — claim d on M (mlx)", "state": "open", "body": "old"},
        {"number": 2, "title": "specdec: no gate night for 48 hours (specdec-gate.yml)", "state": "open", "body": ""},
        {"number": 3, "title": "specdec: make it faster — please on M (mlx)", "state": "open", "body": "a user's"},
        {"number": 4, "title": "specdec: eroding — claim d on M (mlx)", "state": "closed", "body": "done"},
    ]
    (tmp_path / "gh-state.json").write_text(json.dumps({"issues": issues}))
    done = specdec(tmp_path, "adopt-issues", "--gh", str(GH))
    assert done.returncode == 0, done.stderr
    assert "specdec gate: 2 issue(s) from before alerts were keyed adopted" in done.stdout
    after = json.loads((tmp_path / "gh-state.json").read_text())["issues"]
    assert [i.get("labels", []) for i in after] == [[LABEL], [LABEL], [], []]
    assert after[0]["body"].startswith("old\n\n<!-- specdec-alert: ")
    assert key_in(after[1]["body"]) == AlertKey(
        "every machine class", "every leg", "the nightly gate", "no night measured", "specdec-gate.yml"
    ), "the watchdog's key, as the watchdog keys it now"
    assert specdec(tmp_path, "adopt-issues", "--gh", str(GH)).stdout.endswith("0 issue(s) from before alerts were "
                                                                              "keyed adopted\n"), "once"  # fmt: skip
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(tmp_path / "gh-state.json"))
    flip = Finding(State.FLIP, "claim d", "refuted", "t.py::test_d[code]", "code", cause="mlx-lm 0.32.2 → 0.33.0")
    (said,) = tell([LegNight("mlx", "M", True, True, "measured", (flip,), profile="seed")], str(GH), "u")
    assert said.startswith("commented on #1: "), said
    agreed = LegNight("mlx", "M", True, True, "measured", (), agreeing={"claim d": "mlx-lm 0.33.0"}, profile="seed")
    (closed,) = tell([agreed], str(GH), "u")
    assert closed.startswith("closed #1 (cleared)"), closed


@pytest.mark.parametrize(
    ("call", "told"),
    [
        ("the release changed the conclusion", ("conclusion changed", True, True)),
        ("the machine moved, not the release", ("re-baseline needed", True, True)),
        ("flip not confirmed", ("flip not confirmed", False, False)),
        ("metric changed, not speed", ("metric changed, not speed", True, False)),
    ],
)
def test_the_confirm_steps_call_decides_what_a_flip_is(
    tmp_path: Path, measured: Path, sample_run: RunRecord, call: str, told: tuple[str, bool, bool]
) -> None:
    """A flip blamed on the release is red; a machine shown to have moved needs a re-baseline (red, with what the
    fingerprints say moved); a flip neither was shown to make is said in its own word, never as agreement."""
    (measured / "confirm" / "confirmed.json").write_text(
        json.dumps(
            [
                {
                    "nodeid": "benchmarks/test_claim_d.py::test_mlx_draft[code]",
                    "category": "code",
                    "call": call,
                    "line": f"{call} — old release 0.94x, new release 1.41x",
                    "confirmed": call.startswith("the release"),
                }
            ]
        )
    )
    (flip,) = sample_run.flips  # accepted on an Intel Mac: the fingerprint says the architecture moved
    entry = BaselineEntry(
        flip, Provenance.MEASURED, "2026-11-01", machine_info={"system": "Darwin", "machine": "x86_64"}
    )
    BaselineStore(tmp_path / "baselines", sample_run.machine_class).write("mlx", {baseline_key(flip): entry})
    word, issue, red = told
    night, verdict = night_and_verdict(tmp_path, measured)
    assert f"mlx: {word} — claim d: " in night.stdout
    assert (verdict.returncode == 1) is red
    assert "every result agrees" not in verdict.stdout
    if word == "re-baseline needed":
        assert "what the fingerprints say moved since the baseline was accepted: architecture x86_64 → arm64" in (
            night.stdout
        )
    created = [c for c in gh_calls(tmp_path) if c[:2] == ["issue", "create"]]
    assert bool(created) is issue
    if issue:
        assert "old release 0.94x, new release 1.41x" in created[0][created[0].index("--body") + 1]


def test_a_tampered_results_file_is_refused_with_one_line_and_nothing_is_sent(tmp_path: Path, measured: Path) -> None:
    """The webhook reads each leg's results.json from the artifact: one that does not validate is refused."""
    specdec(tmp_path, "night", "--backend", "mlx", "--out", str(measured))
    results = measured / "results.json"
    data = json.loads(results.read_text())
    data["comparisons"][0]["speedup"] = "fast"
    results.write_text(json.dumps(data))
    environment = {**os.environ, "SPECDEC_GH_LOG": str(tmp_path / "gh.jsonl"),
                   "SPECDEC_GH_STATE": str(tmp_path / "gh-state.json"),
                   "SPECDEC_WEBHOOK_URL": "http://127.0.0.1:9/hook"}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pytest_specdec.cli", "gate", "verdict", "--artifacts", str(measured.parent),
         "--gh", str(GH)],
        cwd=tmp_path, env=environment, capture_output=True, text=True, check=False,
    )  # fmt: skip
    refused = [line for line in done.stdout.splitlines() if line.startswith("specdec gate: refused:")]
    assert len(refused) == 1
    assert "results.json: field 'comparisons.0.speedup'" in refused[0]
    assert "webhook" not in done.stdout, "nothing from a refused file is sent"


def test_each_row_of_a_sweep_keeps_its_own_call_on_its_flip(sample_run: RunRecord) -> None:
    """Two flipped rows of one test and category (γ 3 and 5): one confirmed, one not — one red finding, not zero."""
    from pytest_specdec.gate.findings import FlipCall, comparison_findings
    from pytest_specdec.store.baselines import baseline_key

    (flip,) = sample_run.flips
    other = replace(flip, conditions=flip.conditions.with_(num_draft=5))
    run = replace(sample_run, comparisons=(flip, other))
    calls = {baseline_key(flip): FlipCall(True, "the release changed the conclusion", "old 0.8x, new 1.4x"),
             baseline_key(other): FlipCall(False, "re-run", "did not repeat on a re-run")}  # fmt: skip
    found = comparison_findings(run, calls, {}, [], Thresholds())
    assert [(f.state, f.message.endswith("old 0.8x, new 1.4x")) for f in found] == [(State.FLIP, True)]
    found = comparison_findings(run, dict(reversed(list(calls.items()))), {}, [], Thresholds())
    assert len(found) == 1, "whichever order the calls come in"


def test_a_flip_not_confirmed_night_after_night_opens_an_issue_as_undecided_without_turning_red(
    tmp_path: Path, measured: Path, runner_state: Path, sample_run: RunRecord
) -> None:
    """Carried from night to night by the runner's history: the third night in a row that the flip is not
    confirmed (the configured undecided-nights), an issue with its history; never the word "agrees"."""
    (flip,) = sample_run.flips
    (measured / "confirm" / "confirmed.json").write_text(json.dumps([{
        "nodeid": flip.nodeid, "category": flip.category, "key": baseline_key(flip), "call": "flip not confirmed",
        "line": "flip not confirmed: it did not repeat on a re-run", "confirmed": False}]))  # fmt: skip
    lines = [
        Night.of_line({"time": f"2026-11-0{day}", "machine_class": sample_run.machine_class, "backend": "mlx",
         "release": "mlx-lm 0.33.0", "key": baseline_key(flip), "nodeid": flip.nodeid, "category": flip.category,
         "claim_id": "d", "bounds": {}, "speedup": {"estimate": 1.4, "low": 1.3, "high": 1.5}, "verdict": "refuted",
         "change": "flip"})
        for day in (1, 2, 3)
    ]  # fmt: skip
    BaselineStore(runner_state, sample_run.machine_class).append_history(lines[:2])
    night, verdict = night_and_verdict(tmp_path, measured)
    assert "mlx: flip not confirmed — claim d: flip not confirmed: it did not repeat on a re-run" in night.stdout
    assert [c for c in gh_calls(tmp_path) if c[:2] == ["issue", "create"]] == [], "two nights: said, no issue yet"
    BaselineStore(runner_state, sample_run.machine_class).append_history(lines[2:])
    night, verdict = night_and_verdict(tmp_path, measured)
    assert verdict.returncode == 0, "undecided is never red by itself"
    assert "undecided for nights — claim d: flip not confirmed on 3 nights in a row" in night.stdout
    (create,) = [c for c in gh_calls(tmp_path) if c[:2] == ["issue", "create"]]
    assert "| 2026-11-03 | mlx-lm 0.33.0 | 1.40x [1.30, 1.50] | refuted | flip |" in create[create.index("--body") + 1]


def test_a_fleets_runner_judges_only_its_own_issues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runner m4's verdict: its silent leg's issue is named by its label; another chip's open flip, and another
    runner's silent leg, are left for their own runner's verdict, even where m4's night would clear them."""
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "gh.jsonl"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(tmp_path / "gh-state.json"))
    flip = Finding(State.FLIP, "claim d", "refuted", "t.py::test_d[code]", "code", cause="mlx-lm 0.32.2 → 0.33.0")
    assert tell([LegNight("mlx", "M1", True, True, "measured", (flip,))], str(GH), "u", "m1") == [
        f"opened: {alert_key_of(flip, 'M1').title}"
    ]
    (m3_silent,) = silent_legs([], {"mlx": True}, "m3")
    assert m3_silent.machine_class == "runner m3"
    reported = LegNight("ollama", "M3", True, True, "measured", ())
    (named,) = silent_legs([reported], {"mlx": True, "ollama": True}, "m3")
    assert named.machine_class == "runner m3", "a fleet's silent leg is its runner's, whatever its others said"
    assert "runs-on: self-hosted, macOS, ARM64, m3" in m3_silent.findings[0].message
    (opened,) = tell([m3_silent], str(GH), "u", "m3")
    assert "on runner m3 (mlx)" in opened
    agrees = LegNight("mlx", "M4", True, True, "measured", (), agreeing={"claim d": "mlx-lm 0.33.0"})
    assert tell([agrees], str(GH), "u", "m4") == [], "M1's flip and m3's silence are not m4's to clear"
    m1_agrees = replace(agrees, machine_class="M1")
    assert tell([m1_agrees], str(GH), "u", "m1") == ["closed #1 (cleared): " + alert_key_of(flip, "M1").title], (
        "m1's own night clears m1's flip, and still not m3's silence"
    )


def test_a_fleets_runner_clears_the_issues_of_the_one_runner_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keyed "its self-hosted runner" before the gate ran a fleet, a silent leg's issue would match no runner's
    label: the first fleet runner whose leg reports clears it."""
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "gh.jsonl"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(tmp_path / "gh-state.json"))
    (before,) = silent_legs([], {"mlx": True})
    assert before.machine_class == "its self-hosted runner"
    (opened,) = tell([before], str(GH), "u")
    assert opened.startswith("opened:")
    agrees = LegNight("mlx", "M4", True, True, "measured", (), agreeing={"claim d": "mlx-lm 0.33.0"})
    (closed,) = tell([agrees], str(GH), "u", "m4")
    assert closed.startswith("closed #1 (cleared):")
    assert "its self-hosted runner" in closed


def test_a_leg_that_reported_nothing_is_red_with_its_own_issue(tmp_path: Path, measured: Path) -> None:
    """A runner lost, or a job cancelled in the queue: no night file for the required leg, and an issue says so."""
    write_pyproject(tmp_path, "[tool.specdec.gate.legs.mlx]\nrequired = true\n\n[tool.specdec.gate.legs.ollama]\n"
                    "required = true\n")  # fmt: skip
    specdec(tmp_path, "night", "--backend", "mlx", "--out", str(measured))
    verdict = specdec(tmp_path, "verdict", "--artifacts", str(measured.parent), "--gh", str(GH))
    assert verdict.returncode == 1
    assert "::error title=specdec gate::ollama: runner did not report — leg: the leg reported nothing" in verdict.stdout
    created = [c for c in gh_calls(tmp_path) if c[:2] == ["issue", "create"]]
    assert [c[c.index("--title") + 1] for c in created] == [
        "specdec: runner did not report — leg on Apple-M1-Max-64GB (ollama): no night file came back"
    ]
    assert "runs-on: self-hosted, macOS, ARM64" in created[0][created[0].index("--body") + 1]


@pytest.mark.parametrize(
    ("left", "word", "cause"),
    [
        ("tampered.txt", "lock does not match: possible tampering", "a locked hash did not match"),
        ("setup-failed.txt", "set-up failed", "the lock could not be installed"),
    ],
)
def test_a_leg_whose_set_up_failed_closed_is_red_in_its_own_word_not_as_a_lost_runner(
    tmp_path: Path, measured: Path, left: str, word: str, cause: str
) -> None:
    """gate.sh setup stops the leg before any night when the lock's hashes do not match (or the lock cannot be
    installed for another reason than a withdrawn release) and leaves its one line in the artifact: the verdict
    names that, with its own issue, never "runner did not report"."""
    write_pyproject(tmp_path, "[tool.specdec.gate.legs.mlx]\nrequired = true\n\n[tool.specdec.gate.legs.ollama]\n"
                    "required = true\n")  # fmt: skip
    specdec(tmp_path, "night", "--backend", "mlx", "--out", str(measured))
    ollama = measured.parent / "specdec-ollama"
    ollama.mkdir()
    (ollama / left).write_text("baselines/M/gate-lock.txt: what pip said\x1b[2J\n" + "x" * 5000, encoding="utf-8")
    verdict = specdec(tmp_path, "verdict", "--artifacts", str(measured.parent), "--gh", str(GH))
    assert verdict.returncode == 1
    assert f"::error title=specdec gate::ollama: {word} — leg: baselines/M/gate-lock.txt: what pip said" in (
        verdict.stdout
    )
    assert "runner did not report" not in verdict.stdout
    assert "\x1b" not in verdict.stdout, "a runner's file is printed printable only"
    created = [c for c in gh_calls(tmp_path) if c[:2] == ["issue", "create"]]
    assert [c[c.index("--title") + 1] for c in created] == [
        f"specdec: {word} — leg on Apple-M1-Max-64GB (ollama): {cause}"
    ]


def test_the_gates_word_on_a_night_reaches_the_scoreboard(
    tmp_path: Path, measured: Path, sample_run: RunRecord
) -> None:
    """The night step keeps its word on tonight's flip in the runner's state and puts the leg's nights, each with
    that word, in the artifact (``nights.jsonl``); the site built from it calls the flip "flip not confirmed"."""
    (flip,) = sample_run.flips
    (measured / "confirm" / "confirmed.json").write_text(json.dumps([{
        "nodeid": flip.nodeid, "category": flip.category, "key": baseline_key(flip), "call": "flip not confirmed",
        "line": "flip not confirmed: it did not repeat on a re-run", "confirmed": False}]))  # fmt: skip
    keep_history(sample_run)  # what the measure step kept tonight
    night = specdec(tmp_path, "night", "--backend", "mlx", "--out", str(measured))
    assert night.returncode == 0, night.stdout + night.stderr
    lines = [json.loads(line) for line in (measured / "nights.jsonl").read_text().splitlines()]
    assert len(lines) == len(sample_run.comparisons), "tonight's nights on this runner, one line a result"
    assert {line["key"]: line.get("gate") for line in lines} == {
        baseline_key(r): "flip not confirmed" if r is flip else None for r in sample_run.comparisons
    }, "the word on the flip only: the re-confirmed result had no finding"
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "pytest_specdec.cli", "site", str(site), "--baselines", str(tmp_path / "baselines"),
         "--results", str(measured / "results.json"), "--history", str(measured / "nights.jsonl")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    index = (site / "index.html").read_text(encoding="utf-8")
    assert f"flip not confirmed: {flip.judgement.conclusion.value} (was" in index
    assert "flipped:" not in index, "a flip the gate did not confirm is not called flipped"


def test_a_night_the_history_did_not_keep_leaves_no_word(
    tmp_path: Path, measured: Path, runner_state: Path, sample_run: RunRecord
) -> None:
    """A night run with the job's own options keeps no history line: its word would belong to no night."""
    (flip,) = sample_run.flips
    (measured / "confirm" / "confirmed.json").write_text(json.dumps([{
        "nodeid": flip.nodeid, "category": flip.category, "key": baseline_key(flip), "call": "flip not confirmed",
        "line": "flip not confirmed: it did not repeat on a re-run", "confirmed": False}]))  # fmt: skip
    night = specdec(tmp_path, "night", "--backend", "mlx", "--out", str(measured))
    assert night.returncode == 0, night.stdout + night.stderr
    assert "flip not confirmed" in night.stdout, "the night said its word"
    assert (measured / "nights.jsonl").read_text() == ""
    assert not (runner_state / "told").exists(), "and kept it for no night"


def test_a_row_for_another_profiles_claim_never_gates_and_closes_the_issue_it_opened_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sample_run: RunRecord
) -> None:
    """Documented as shown, never gating: a flipped row measured for another profile's claim gives no finding,
    and an issue such a row opened before (the rule did not hold then) is closed the next night, saying why."""
    monkeypatch.setenv("SPECDEC_GH_LOG", str(tmp_path / "gh.jsonl"))
    monkeypatch.setenv("SPECDEC_GH_STATE", str(tmp_path / "gh-state.json"))
    other = replace(sample_run, comparisons=tuple(
        replace(r, judgement=replace(r.judgement, role=Role.OTHER_PROFILE)) for r in sample_run.comparisons
    ))  # fmt: skip
    assert any(r.check is not None and r.check.change.value == "flip" for r in other.comparisons)
    assert comparison_findings(other, {}, {}, (), Thresholds()) == []
    assert comparison_findings(sample_run, {}, {}, (), Thresholds()), "the same rows gating: a finding"
    shown = shown_only_subjects(other)
    assert shown == {"claim d": other.comparisons[0].profile}
    flip = Finding(State.FLIP, "claim d", "refuted", "t.py::test_d[code]", "code", cause="mlx-lm 0.32.2 → 0.33.0")
    assert keyed_night(tmp_path, (flip,)) == [f"opened: {alert_key_of(flip).title}"]
    leg = LegNight("mlx", "M", True, True, "measured", (), shown_only=shown)
    (closed,) = tell([leg], str(GH), "https://example/run/2")
    assert closed == "closed #1 (cleared): " + alert_key_of(flip).title
    issue = json.loads((tmp_path / "gh-state.json").read_text())["issues"][0]
    assert "for another profile's claim" in issue["comments"][-1]


def test_sd_no_longer_engaged_names_the_release_its_baseline_was_accepted_on(sample_run: RunRecord) -> None:
    from pytest_specdec.gate.findings import comparison_findings
    from pytest_specdec.store.baselines import baseline_key
    from pytest_specdec.store.records import Conclusion

    record = sample_run.comparisons[0]
    idle = replace(record, release="mlx-lm 0.33.0", judgement=replace(
        record.judgement, conclusion=Conclusion.NOT_MEASURABLE, failure="not measurable: SD not engaged"))  # fmt: skip
    run = replace(sample_run, comparisons=(idle,))
    (found,) = comparison_findings(run, {}, {baseline_key(idle): "mlx-lm 0.32.2"}, [], Thresholds())
    assert found.state is State.NOT_ENGAGED
    assert found.message.endswith("measured with SD engaged (mlx-lm 0.32.2; tonight: mlx-lm 0.33.0)")
    assert comparison_findings(run, {}, {}, [], Thresholds()) == [], "no measurable baseline: nothing no longer"


def test_a_flip_only_a_re_run_confirmed_is_not_blamed_on_the_release_and_a_later_ab_clears_it(
    sample_run: RunRecord,
) -> None:
    """Without last night's release beside tonight's, a flip that repeats on a re-run reads "conclusion changed
    (release not separated from the machine)", its own issue; a later night whose old-versus-new run calls it
    (release or machine) clears that issue."""
    from pytest_specdec.gate.alert_job import alert_key, cleared
    from pytest_specdec.gate.findings import RE_RUN, FlipCall, comparison_findings
    from pytest_specdec.store.baselines import baseline_key

    (flip,) = sample_run.flips
    run = replace(sample_run, comparisons=(flip,))
    (alone,) = comparison_findings(run, {baseline_key(flip): FlipCall(True, RE_RUN, "flipped again")}, {}, [],
                                   Thresholds())  # fmt: skip
    assert alone.state is State.FLIP_NOT_SEPARATED
    assert alone.state.turns_red
    assert alone.state.opens_issue
    night = LegNight("mlx", "M1", True, True, "measured", (alone,))
    key = alert_key(night, alone)
    assert key.state == "conclusion changed (release not separated from the machine)"
    called = Finding(State.FLIP, alone.subject, "the release changed the conclusion", cause="mlx-lm 0.32.2 → 0.33.0")
    later = LegNight("mlx", "M1", True, True, "measured", (called,))
    said = cleared(key, [later])
    assert said is not None
    assert "separated the release from the machine" in said
    assert cleared(key, [night]) is None, "the same finding tonight clears nothing"


def test_how_far_acceptance_must_fall_is_the_users_to_set() -> None:
    """``--specdec-acceptance-drop`` (the gate's ``acceptance-drop``): 0.72 → 0.50 is 'acceptance fell' at the
    default 10 points, not at 30; 1.5 is refused in one line before anything is measured."""
    from pytest_specdec.config import Settings, validate
    from pytest_specdec.errors import SpecdecUsageError
    from pytest_specdec.stats import Interval
    from pytest_specdec.store.baselines import acceptance_fell

    accepted, tonight = Interval(0.72, 0.69, 0.75, 0.98, 16), Interval(0.50, 0.46, 0.54, 0.98, 16)
    assert acceptance_fell(accepted, tonight).startswith("0.72 [0.69, 0.75] → 0.50")
    assert acceptance_fell(accepted, tonight, 0.30) == ""
    with pytest.raises(SpecdecUsageError, match=r"--specdec-acceptance-drop 1\.5 is outside"):
        validate(Settings(acceptance_drop=1.5))
