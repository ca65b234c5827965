"""What a submission keeps of a person and their network, and what validate rejects, flags or cannot check."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from pytest_specdec.community.checks import check_submission
from pytest_specdec.community.submit import Private, free_text, leaks, submissions_of
from pytest_specdec.stats import Verdict
from pytest_specdec.store.files import dumps
from pytest_specdec.store.records import RunRecord
from pytest_specdec.store.submissions import Submission, parse_submission

WHEN = "2026-12-04T00:00:00+00:00"


def one(run: RunRecord, private: Private) -> Submission:
    (made,), _ = submissions_of(run, private, WHEN)
    return made


@pytest.mark.parametrize(("user", "host"), [("max", "Mac"), ("sam", "mlx-box"), ("ted", "m1"), ("a", "sd")])
def test_a_common_name_never_rewrites_an_identifier_and_never_blocks_a_submission(
    run_record: RunRecord, user: str, host: str
) -> None:
    """Names inside the project's own words (Max in the chip, mlx, sd, accepted) are not the person's: the machine
    class, backend and arms stay as they are, the free text is searched and found clean."""
    run = replace(run_record, machine_class="Apple-M1-Max-64GB", machine_info={"node": host})
    made = one(run, Private(f"/Users/{user}", user, (host,)))
    assert made.machine.machine_class == "Apple-M1-Max-64GB"
    assert (made.comparison.backend, made.comparison.baseline_arm) == (run.comparisons[0].backend, "plain")
    assert made.comparison.treatment_arm == run.comparisons[0].treatment_arm
    assert leaks(free_text(made), Private(f"/Users/{user}", user, (host,)), anywhere=[dumps(made)]) == []
    parse_submission(json.loads(dumps(made)), "the file")  # still a valid file


def test_server_addresses_and_their_passwords_stay_home(run_record: RunRecord) -> None:
    c = run_record.comparisons[0]
    noted = replace(c, notes=(*c.notes, "plain_url=http://ada:secret@studio.lan:1234/v1 beside http://localhost:8080"))
    run = replace(
        run_record, comparisons=(noted,), command=("pytest", "--specdec-backend-option", "host=http://10.0.0.7")
    )
    made = one(run, Private("/home/ada", "ada", ()))
    text = dumps(made)
    for private in ("secret", "studio.lan", "10.0.0.7"):
        assert private not in text
    assert "http://<server>:1234/v1" in text
    assert "http://localhost:8080" in text, "this machine's own address says nothing of anyone"


def test_a_comparison_measured_on_another_machines_server_is_not_submitted(run_record: RunRecord) -> None:
    remote = replace(run_record.comparisons[0], device="server: http://192.168.1.20:11434")
    made, skipped = submissions_of(replace(run_record, comparisons=(remote,)), Private("/h", "", ()), WHEN)
    assert made == []
    assert "measured on a server at 192.168.1.20, not on this machine" in skipped[0]


def test_a_verdict_the_pairs_do_not_give_is_rejected(run_record: RunRecord) -> None:
    made = one(run_record, Private("/nowhere", "", ()))
    assert check_submission(made, "f").accepted
    judged = made.comparison.judgement
    flipped = Verdict.REFUTED if judged.bounds[0].verdict is Verdict.HOLDS else Verdict.HOLDS
    bounds = (replace(judged.bounds[0], verdict=flipped), *judged.bounds[1:])
    edited = replace(made, comparison=replace(made.comparison, judgement=replace(judged, bounds=bounds)))
    (reason, *_) = check_submission(edited, "f").reasons
    assert f"says {judged.bounds[0].label} {flipped.value}, where its pairs give" in reason
    faster = replace(made, comparison=replace(made.comparison, treatment_tps=(made.comparison.treatment_tps or 0) * 2))
    assert "SD arm's" in check_submission(faster, "f").reasons[0]


def test_a_backend_that_counts_no_drafts_is_unchecked_not_rejected(run_record: RunRecord) -> None:
    made = one(run_record, Private("/nowhere", "", ()))
    samples = tuple(replace(s, drafted=None, accepted=None) for s in made.comparison.samples)
    uncounted = replace(made, comparison=replace(made.comparison, samples=samples, acceptance=None))
    result = check_submission(uncounted, "f")
    assert result.accepted, result.reasons
    assert any("counted no drafts" in line for line in result.unchecked)


def test_a_plain_rate_above_the_roofline_is_flagged_not_rejected(run_record: RunRecord) -> None:
    """A mixture of experts reads fewer bytes a token than its file: the file cannot tell, so it is only flagged."""
    made = one(run_record, Private("/nowhere", "", ()))
    big = {**made.comparison.scope, "target_bytes": str(60 * 10**9)}  # 60 GB at 400 GB/s: at most 6.7 tok/s
    on_m1 = replace(
        made, machine=replace(made.machine, chip="Apple M1 Max"), comparison=replace(made.comparison, scope=big)
    )
    result = check_submission(on_m1, "f")
    assert result.accepted
    assert "above the 6.7 tok/s roofline of Apple M1 Max" in result.flags[0]
